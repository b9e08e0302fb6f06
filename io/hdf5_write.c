/* hdf5_write.c -- HDF5 datasets written chunked, shuffled and deflated: by one writer (or
 * the writers of one file in a process) into a copy of the file, or a new file, renamed over
 * it at commit (see "one writer"), or by several parts in turn in place under the file's
 * lock (hdf5_lock.c). */
#include "hdf5_internal.h"

#ifdef SWI_HAVE_HDF5

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <unistd.h>
#ifdef __linux__
#include <linux/fs.h> /* FICLONE */
#endif

/* Copy size bytes of in to out: a reflink where the file system shares blocks, else
 * copy_file_range (in the kernel, server-side on NFS 4.2), else read and write. */
static int copy_fd(int in, int out, off_t size) {
#ifdef FICLONE
    if (ioctl(out, FICLONE, in) == 0) return 0;
#endif
    off_t done = 0;
    int kernel = 1;
    static unsigned char buf[1 << 16]; /* under h5_lock */
    while (done < size) {
        ssize_t k;
        size_t want = (size_t)(size - done);
        if (kernel) {
            off_t a = done, b = done;
            k = copy_file_range(in, &a, out, &b, want, 0);
            if (k < 0 && (errno == EXDEV || errno == ENOSYS || errno == EINVAL || errno == EOPNOTSUPP ||
                          errno == EPERM || errno == ETXTBSY)) {
                kernel = 0;
                continue;
            }
        } else {
            k = pread(in, buf, want < sizeof buf ? want : sizeof buf, done);
            for (ssize_t w = 0; k > 0 && w < k;) {
                ssize_t r = pwrite(out, buf + w, (size_t)(k - w), done + w);
                if (r < 0 && errno == EINTR) continue;
                if (r <= 0) {
                    if (r == 0) errno = EIO;
                    return -1;
                }
                w += r;
            }
        }
        if (k < 0 && errno == EINTR) continue;
        if (k < 0) return -1;
        if (k == 0) {
            errno = EIO; /* the file shrank while it was copied */
            return -1;
        }
        done += k;
    }
    return 0;
}

/* The lock HDF5's readers take (shared): no HDF5 writer is midway while it is held. Waits up
 * to a second for one to finish; -1 if it does not. */
static int share_lock(int fd) {
    for (int i = 0; i < 20; i++) {
        if (flock(fd, LOCK_SH | LOCK_NB) == 0) return 0;
        if (errno != EWOULDBLOCK && errno != EINTR) return errno == ENOLCK || errno == EOPNOTSUPP ? 0 : -1;
        struct timespec ts = {0, 50 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
    errno = EWOULDBLOCK;
    return -1;
}

/* Is the file as it was when copied? */
static int same_state(const struct stat *a, const struct stat *b) {
    return a->st_dev == b->st_dev && a->st_ino == b->st_ino && a->st_size == b->st_size &&
           a->st_mtim.tv_sec == b->st_mtim.tv_sec && a->st_mtim.tv_nsec == b->st_mtim.tv_nsec &&
           a->st_ctim.tv_sec == b->st_ctim.tv_sec && a->st_ctim.tv_nsec == b->st_ctim.tv_nsec;
}

/* The folder of path, opened (for its lock and its fsync), or -1. */
static int open_parent(const char *path) {
    char d[4096];
    const char *slash = strrchr(path, '/');
    if (!slash)
        snprintf(d, sizeof d, ".");
    else
        snprintf(d, sizeof d, "%.*s", slash == path ? 1 : (int)(slash - path), path);
    return open(d, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
}

/* A single writer works on a copy of the file, renamed over it only at commit: a writer that
 * does not commit leaves the file as it was. Parts write the file in place. */
int h5__replaces(const void *impl) { return !((const h5w *)impl)->shared; }

/* ---- one writer, or several of one file in one process ----
 *
 * The previous file is never written. An existing file is copied into a temporary (see
 * "temporaries", hdf5_encode.c) under the shared lock HDF5's readers take, so no HDF5 writer is midway; a
 * new one is created there. The dataset is written into the copy, replacing (--force) only
 * a dataset of the kind swi writes; every other object and attribute is copied as it was.
 * At commit the copy is fsynced and renamed over the file if the file is still the one
 * copied (same inode, size, times: else another program wrote it meanwhile and the run
 * fails), a new file linked into place if the name is still free; this check and the rename
 * are done under a flock of the folder, which serialises swi's commits there. A failed,
 * aborted or interrupted run removes the temporary: the file is as it was. Writers of one
 * file open at once in a process (labels and scores) share the copy, which is put in place
 * when the last one commits and not at all if one fails or is aborted. The cost: a read and
 * a write of the whole file (none where reflinks work), and its size in free space until
 * commit; a replaced dataset's space is reused for the new one where HDF5 can. */

typedef struct h5out {
    char final[4096];
    tmp_place tmp;
    hid_t file;
    int users, failed, existed, fd; /* fd: the previous file, -1 if none */
    struct stat was;                /* the previous file as copied */
    char (*paths)[1024];            /* the datasets being written */
    int npaths;
    struct h5out *next;
} h5out;

static h5out *outs; /* under h5_lock */

const char *h5__temporary(const void *impl) {
    const h5w *w = impl;
    return !w->shared && w->out && w->out->tmp.dir[0] ? w->out->tmp.dir : NULL;
}

static void out_free(h5out *o) {
    for (h5out **p = &outs; *p; p = &(*p)->next)
        if (*p == o) {
            *p = o->next;
            break;
        }
    if (o->file >= 0) h5__close_file(o->file);
    h5__drop_tmp(&o->tmp);
    if (o->fd >= 0) close(o->fd);
    free(o->paths);
    free(o);
}

/* Does the file start with HDF5's signature (at 0, 512, 1024, 2048, ...: after a user block)? */
static int hdf5_signature(int fd, off_t size) {
    static const unsigned char sig[8] = {0x89, 'H', 'D', 'F', '\r', '\n', 0x1a, '\n'};
    for (off_t at = 0; at + 8 <= size; at = at ? 2 * at : 512) {
        unsigned char b[8];
        if (pread(fd, b, 8, at) != 8) return 0;
        if (!memcmp(b, sig, 8)) return 1;
    }
    return 0;
}

/* The copy of final (or a new file) to write into, or NULL with *why. Caller holds
 * h5_lock. */
static h5out *out_open(const char *final, const struct stat *st, swi_status *why, char *err, size_t n) {
    *why = SWI_ERR_IO; /* the system's failures, unless one below says otherwise */
    h5out *o = calloc(1, sizeof *o);
    if (!o) {
        io__err(err, n, "%s: out of memory", final);
        *why = SWI_ERR_NOMEM;
        return NULL;
    }
    snprintf(o->final, sizeof o->final, "%s", final);
    o->file = -1;
    o->fd = -1;
    o->existed = st != NULL;
    o->next = outs;
    outs = o;
    if (h5__make_tmp(final, &o->tmp, err, n)) goto fail;
    if (!st) {
        if ((o->file = h5__create_tmp(&o->tmp)) < 0) {
            io__err(err, n, "%s: cannot create the file (in %s): %s", final, o->tmp.dir, strerror(errno));
            goto fail;
        }
        return o;
    }
    int64_t size = 0;
    if ((o->fd = swi_io_open_regular(final, &size, err, n)) < 0) goto fail;
    if (!hdf5_signature(o->fd, (off_t)size)) {
        io__err(err, n, "%s: exists and is not an HDF5 file; not replaced, --force or not", final);
        *why = SWI_ERR_INVALID_ARG;
        goto fail;
    }
    if (share_lock(o->fd) != 0) {
        io__err(err, n, "%s: another program is writing the file (HDF5's lock is held): %s", final,
                strerror(errno));
        goto fail;
    }
    int out = -1, bad = fstat(o->fd, &o->was) != 0;
    if (!bad) out = open(o->tmp.file, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    bad = bad || out < 0 || copy_fd(o->fd, out, o->was.st_size) != 0 ||
          fchmod(out, o->was.st_mode & 07777) != 0;
    int e = errno;
    if (out >= 0 && close(out) != 0 && !bad) {
        e = errno;
        bad = 1;
    }
    flock(o->fd, LOCK_UN);
    if (bad) {
        io__err(err, n, "%s: cannot copy the file to add the dataset: %s", final, strerror(e));
        goto fail;
    }
    hid_t fapl = h5__no_lock_fapl();
    o->file = fapl >= 0 ? H5Fopen(o->tmp.file, H5F_ACC_RDWR, fapl) : -1;
    if (fapl >= 0) H5Pclose(fapl);
    if (o->file < 0) {
        io__err(err, n, "%s: cannot open the file's copy to add the dataset (a corrupt file, or disk full?)",
                final);
        goto fail;
    }
    return o;
fail:
    out_free(o);
    return NULL;
}

#define WHY_LEN 160

/* An attribute swi does not write: named in op (WHY_LEN bytes), the iteration stopped. */
static herr_t foreign_attr(hid_t loc, const char *name, const H5A_info_t *info, void *op) {
    (void)loc, (void)info;
    if (strncmp(name, "swi_", 4) == 0) return 0;
    snprintf(op, WHY_LEN, "it carries the attribute %.100s", name);
    return 1;
}

/* Why the dataset d is not one swi writes (and so is never replaced), or NULL; why holds
 * WHY_LEN bytes. */
static const char *not_swi_kind(hid_t d, char *why) {
    hid_t p = H5Dget_create_plist(d), t = H5Dget_type(d), s = H5Dget_space(d);
    int nd = s >= 0 ? H5Sget_simple_extent_ndims(s) : -1;
    const char *r = NULL;
    if (p < 0 || t < 0 || s < 0)
        r = "it cannot be examined";
    else if (H5Pget_layout(p) != H5D_CHUNKED)
        r = "it is not chunked";
    else if (H5Pget_nfilters(p) != 2 ||
             H5Pget_filter2(p, 0, NULL, NULL, NULL, 0, NULL, NULL) != H5Z_FILTER_SHUFFLE ||
             H5Pget_filter2(p, 1, NULL, NULL, NULL, 0, NULL, NULL) != H5Z_FILTER_DEFLATE)
        r = "its filters are not shuffle and deflate";
    else if (H5Tequal(t, H5T_NATIVE_UINT8) <= 0 && H5Tequal(t, H5T_NATIVE_UINT16) <= 0 &&
             H5Tequal(t, H5T_NATIVE_FLOAT) <= 0)
        r = "its type is not uint8, uint16 or float32";
    else if (nd != 3 && nd != 4)
        r = "it has neither 3 nor 4 dimensions";
    else {
        hsize_t idx = 0;
        why[0] = '\0';
        if (H5Aiterate2(d, H5_INDEX_NAME, H5_ITER_NATIVE, &idx, foreign_attr, why) != 0)
            r = why[0] ? why : "its attributes cannot be listed";
    }
    if (p >= 0) H5Pclose(p);
    if (t >= 0) H5Tclose(t);
    if (s >= 0) H5Sclose(s);
    return r;
}

/* Make w's dataset in the copy: an existing one is replaced with --force if swi wrote it and
 * it is not an input of this run. Caller holds h5_lock. */
static swi_status place_dataset(h5w *w, h5out *o, char *err, size_t n) {
    int hp = h5__hard_path(o->file, w->path);
    if (hp == -2) {
        io__err(err, n, "%s: the path %s goes through a soft or external link in the file; not written",
                w->name, w->path);
        return SWI_ERR_INVALID_ARG;
    }
    if (hp < 0) {
        io__err(err, n, "%s: cannot look up %s in the file (is a part of the path a dataset?)", w->name,
                w->path);
        return SWI_ERR_INVALID_ARG;
    }
    if (hp == 1) {
        H5O_info_t info;
        if (H5Oget_info_by_name2(o->file, w->path, &info, H5O_INFO_BASIC, H5P_DEFAULT) < 0 ||
            info.type != H5O_TYPE_DATASET) {
            io__err(err, n, "%s: %s is a group or another object in the file, not a dataset; not replaced",
                    w->name, w->path);
            return SWI_ERR_INVALID_ARG;
        }
        hid_t d = H5Dopen2(o->file, w->path, H5P_DEFAULT);
        obj_key k;
        char why[WHY_LEN];
        const char *no = NULL;
        int input =
            d >= 0 && h5__key_of(d, &k) == 0 && o->existed && h5__is_read(o->was.st_dev, o->was.st_ino, &k);
        if (d >= 0 && !input && w->force) no = not_swi_kind(d, why);
        if (d >= 0) H5Dclose(d);
        if (d < 0) {
            io__err(err, n, "%s: cannot open the existing dataset", w->name);
            return SWI_ERR_INVALID_ARG;
        }
        if (input) {
            io__err(err, n, "%s: is an input of this run; swi never writes over its inputs, --force or not",
                    w->name);
            return SWI_ERR_INVALID_ARG;
        }
        if (!w->force) {
            io__err(err, n, "%s: already exists (use --force to overwrite)", w->name);
            return SWI_ERR_INVALID_ARG;
        }
        if (no) {
            io__err(err, n, "%s: exists and is not a dataset swi writes (%s); not replaced, --force or not",
                    w->name, no);
            return SWI_ERR_INVALID_ARG;
        }
    }
    /* the copy changes from here on: if this fails, it must not be put in place */
    if (hp == 1 && H5Ldelete(o->file, w->path, H5P_DEFAULT) < 0) {
        o->failed = 1;
        io__err(err, n, "%s: cannot remove the old dataset from the copy", w->name);
        return SWI_ERR_INVALID_ARG;
    }
    w->dset = h5__make_dataset(o->file, w->path, &w->spec, w->chunk);
    if (w->dset < 0) {
        o->failed = 1;
        io__err(err, n, "%s: cannot create the dataset %s in the file", w->name, w->path);
        return SWI_ERR_INVALID_ARG;
    }
    return SWI_OK;
}

static swi_status single_create(h5w *w, char *err, size_t n) {
    struct stat st;
    int exists = stat(w->final, &st) == 0;
    if (!exists && errno != ENOENT) {
        io__err(err, n, "%s: cannot examine: %s", w->final, strerror(errno));
        return SWI_ERR_IO;
    }
    if (exists && !S_ISREG(st.st_mode)) {
        io__err(err, n, "%s: exists and is %s, not a regular file; swi writes only regular files", w->final,
                swi_io_file_kind(st.st_mode));
        return SWI_ERR_INVALID_ARG;
    }
    h5__enter();
    swi_status rc = SWI_ERR_INVALID_ARG;
    h5out *o = NULL;
    for (h5out *q = outs; q && !o; q = q->next)
        if (!strcmp(q->final, w->final) ||
            (exists && q->existed && q->was.st_dev == st.st_dev && q->was.st_ino == st.st_ino))
            o = q;
    if (o) {
        for (int i = 0; i < o->npaths; i++)
            if (!strcmp(o->paths[i], w->path)) {
                io__err(err, n, "%s: is already being written by this process", w->name);
                goto out;
            }
    } else if (!(o = out_open(w->final, exists ? &st : NULL, &rc, err, n))) {
        goto out;
    }
    char(*p)[1024] = realloc(o->paths, (size_t)(o->npaths + 1) * sizeof *p);
    if (!p) {
        io__err(err, n, "%s: out of memory", w->name);
        if (!o->users) out_free(o);
        rc = SWI_ERR_NOMEM;
        goto out;
    }
    o->paths = p;
    snprintf(o->paths[o->npaths++], sizeof *p, "%s", w->path);
    o->users++;
    w->out = o;
    rc = place_dataset(w, o, err, n);
out:
    h5__leave();
    return rc;
}

/* Put the finished copy in place. Caller holds h5_lock. */
static swi_status out_finish(h5out *o, char *err, size_t n) {
    int bad = h5__close_file(o->file) != 0;
    o->file = -1;
    if (bad) {
        io__err(err, n, "%s: cannot finish writing the file (disk full?)", o->final);
        return SWI_ERR_IO;
    }
    int fd = open(o->tmp.file, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0 || fsync(fd) != 0) {
        io__err(err, n, "%s: cannot complete the output: %s", o->final, strerror(errno));
        if (fd >= 0) close(fd);
        return SWI_ERR_IO;
    }
    close(fd);
    int dfd = open_parent(o->final);
    if (dfd >= 0)
        while (flock(dfd, LOCK_EX) != 0 && errno == EINTR) {}
    struct stat now;
    swi_status st = SWI_OK;
    if (o->existed) {
        if (stat(o->final, &now) != 0 || !same_state(&now, &o->was)) {
            io__err(err, n,
                    "%s: the file changed while swi was running (another run or program wrote it); not "
                    "replaced",
                    o->final);
            st = SWI_ERR_INVALID_ARG;
        } else if (rename(o->tmp.file, o->final) != 0) {
            io__err(err, n, "%s: cannot put the file in place: %s", o->final, strerror(errno));
            st = SWI_ERR_IO;
        }
    } else if (link(o->tmp.file, o->final) != 0) {
        st = errno == EEXIST ? SWI_ERR_INVALID_ARG : SWI_ERR_IO;
        if (errno == EEXIST)
            io__err(err, n, "%s: appeared while swi was running (another run?); not overwritten", o->final);
        else
            io__err(err, n, "%s: cannot put the file in place: %s", o->final, strerror(errno));
    }
    if (dfd >= 0) {
        if (st == SWI_OK) fsync(dfd); /* the rename on disk; a failure here loses nothing */
        flock(dfd, LOCK_UN);
        close(dfd);
    }
    return st;
}

static swi_status single_commit(h5w *w, char *err, size_t n) {
    h5__enter();
    h5out *o = w->out;
    swi_status st = SWI_OK;
    if (w->dset >= 0 && H5Dclose(w->dset) < 0) {
        io__err(err, n, "%s: cannot finish the dataset (disk full?)", w->name);
        o->failed = 1;
        st = SWI_ERR_IO;
    }
    w->dset = -1;
    if (--o->users == 0) {
        if (!o->failed)
            st = out_finish(o, err, n);
        else if (st == SWI_OK) {
            io__err(err, n, "%s: not written: another dataset written into the file failed", w->name);
            st = SWI_ERR_INVALID_ARG;
        }
        out_free(o);
    }
    h5__leave();
    return st;
}

static void single_abort(h5w *w) {
    h5__enter();
    h5out *o = w->out;
    if (w->dset >= 0) H5Dclose(w->dset);
    w->dset = -1;
    if (o) {
        o->failed = 1;
        if (--o->users == 0) out_free(o);
    }
    h5__leave();
}

/* ---- the writer ---- */

swi_status h5__create(const char *name, const swi_store_spec *spec, const int64_t chunk[3], int flags,
                      int part, int parts, void **impl, char *err, size_t n) {
    h5w *w = calloc(1, sizeof *w);
    if (!w) {
        io__err(err, n, "%s: out of memory", name);
        return SWI_ERR_NOMEM;
    }
    w->dset = -1;
    if (swi_store_split_h5(name, w->final, sizeof w->final, w->path, sizeof w->path, err, n)) {
        free(w);
        return SWI_ERR_INVALID_ARG;
    }
    snprintf(w->name, sizeof w->name, "%s", name);
    w->spec = *spec;
    memcpy(w->chunk, chunk, sizeof w->chunk);
    w->force = flags & SWI_STORE_FORCE;
    if (flags & SWI_STORE_SHARED) {
        w->shared = 1;
        w->part = part;
        w->parts = part < 0 ? 1 : parts;
        w->tail = &w->head;
        if (pthread_mutex_init(&w->list_mu, NULL) != 0) {
            free(w);
            io__err(err, n, "%s: out of memory", name);
            return SWI_ERR_NOMEM;
        }
        swi_status st = h5__shared_create(w, flags, err, n);
        if (st != SWI_OK)
            h5__free_writer(w);
        else
            *impl = w;
        return st;
    }
    swi_status st = single_create(w, err, n);
    if (st != SWI_OK) {
        single_abort(w);
        free(w);
    } else {
        *impl = w;
    }
    return st;
}

swi_status h5__write_box(void *impl, const int64_t lo[3], const int64_t hi[3], const void *buf, char *err,
                         size_t n) {
    h5w *w = impl;
    if (w->shared) return h5__shared_write(w, lo, hi, buf, err, n);
    pend *p = NULL;
    swi_status st = h5__encode_slab(w, lo, hi, buf, &p, err, n);
    if (st != SWI_OK) return st;
    h5__enter();
    if (h5__write_chunks(w->dset, p) != 0) {
        io__err(err, n, "%s: cannot write the box from (%lld, %lld, %lld) (disk full?)", w->name,
                (long long)lo[0], (long long)lo[1], (long long)lo[2]);
        st = SWI_ERR_IO;
    }
    h5__leave();
    h5__free_pend(p);
    return st;
}

swi_status h5__commit(void *impl, char *err, size_t n) {
    h5w *w = impl;
    if (w->shared) {
        swi_status st = h5__shared_commit(w, err, n);
        h5__free_writer(w);
        return st;
    }
    swi_status st = single_commit(w, err, n);
    free(w);
    return st;
}

void h5__abort(void *impl) {
    h5w *w = impl;
    if (!w) return;
    if (w->shared) {
        /* the part's unwritten slabs are dropped: the file stays marked incomplete */
        h5__free_writer(w);
        return;
    }
    single_abort(w);
    free(w);
}

#else /* !SWI_HAVE_HDF5 */

static swi_status missing(char *err, size_t n) {
    io__err(err, n, "swi_io was built without HDF5 (install libhdf5-dev and rebuild)");
    return SWI_ERR_INVALID_ARG;
}
swi_status h5__create(const char *name, const swi_store_spec *spec, const int64_t chunk[3], int flags,
                      int part, int parts, void **impl, char *err, size_t n) {
    (void)name, (void)spec, (void)chunk, (void)flags, (void)part, (void)parts, (void)impl;
    return missing(err, n);
}
swi_status h5__write_box(void *impl, const int64_t lo[3], const int64_t hi[3], const void *buf, char *err,
                         size_t n) {
    (void)impl, (void)lo, (void)hi, (void)buf;
    return missing(err, n);
}
swi_status h5__commit(void *impl, char *err, size_t n) {
    (void)impl;
    return missing(err, n);
}
void h5__abort(void *impl) { (void)impl; }
int h5__replaces(const void *impl) {
    (void)impl;
    return 0;
}
const char *h5__temporary(const void *impl) {
    (void)impl;
    return NULL;
}

#endif
