/* hdf5_lock.c -- the locks HDF5 output takes: the one lock every call into libhdf5 takes
 * in this process, and the file's own lock (flock) each of several parts writing one file
 * takes for every batch it writes (see "several parts into one file"). */
#include "hdf5_internal.h"

#ifdef SWI_HAVE_HDF5

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static pthread_mutex_t h5_lock = PTHREAD_MUTEX_INITIALIZER;

/* Close a file HDF5 may still write to. After a failed H5Fclose libhdf5 keeps a file it can
 * neither close again nor survive closing at exit (1.10: a crash in its exit handler), so the
 * file is flushed first and, if that fails, left open (never closed at exit: h5__enter). 0: closed. */
int h5__close_file(hid_t f) {
    if (H5Fflush(f, H5F_SCOPE_LOCAL) < 0) return -1;
    return H5Fclose(f) < 0 ? -1 : 0;
}

/* libhdf5 prints its error stack by default; a library must not. The setting is per thread
 * in a thread-safe libhdf5: every entry takes h5_lock through here. */
void h5__enter(void) {
    static int started;
    pthread_mutex_lock(&h5_lock);
    if (!started) {
        /* no library close at exit: after a failed H5Fclose (a full disk) libhdf5's exit
         * handler dies on the half-closed file; the process's end frees everything anyway */
        H5dont_atexit();
        started = 1;
    }
    H5Eset_auto2(H5E_DEFAULT, NULL, NULL);
}

/* The messages of a failure are dropped: a worker thread's stack is otherwise never freed. */
void h5__leave(void) {
    H5Eclear2(H5E_DEFAULT);
    pthread_mutex_unlock(&h5_lock);
}

#define MAX_PARTS 60000 /* one byte each: an attribute stays within HDF5's 64 KiB default */

/* Compressed slabs a part holds before taking the file's lock to write them together, and how
 * long the first may wait: one open and close of the file per batch, not per slab. */
#define BATCH_BYTES ((size_t)64 << 20)
#define BATCH_SECONDS 1.0

/* ---- several parts into one file ----
 *
 * Serial libhdf5 cannot have two writers in one file, so each part takes an exclusive
 * flock(2) on the file itself for every batch it writes: open, write, close, unlock. That is
 * the lock HDF5's own file locking takes (readers hold it shared while the file is open), so
 * readers that lock (HDF5's default) never see a batch half-written. Our opens turn HDF5's locking off, as
 * the process already holds the lock on another descriptor and would conflict with itself. */

/* Does HDF5_USE_FILE_LOCKING turn HDF5's own locking on (it overrides the access property)? */
static const char *env_forces_locking(void) {
    const char *e = getenv("HDF5_USE_FILE_LOCKING");
    if (!e || !*e || !strcmp(e, "FALSE") || !strcmp(e, "0")) return NULL;
    return e;
}

static int env_allows(const char *name, char *err, size_t n) {
    const char *e = env_forces_locking();
#ifndef HAVE_FILE_LOCKING_PROPERTY
    /* without the access property only the environment can turn HDF5's lock off */
    if (!e && !getenv("HDF5_USE_FILE_LOCKING")) e = "unset";
#endif
    if (!e) return 0;
    io__err(err, n,
            "%s: HDF5_USE_FILE_LOCKING=%s: HDF5's own lock would conflict with the one each part takes "
            "on the file; set HDF5_USE_FILE_LOCKING=FALSE for parts writing one HDF5 file",
            name, e);
    return -1;
}

/* A read-write open of the locked file, HDF5's own lock off. Caller holds h5_lock. */
static hid_t open_locked(const char *file) {
    hid_t fapl = h5__no_lock_fapl();
    if (fapl < 0) return -1;
    hid_t f = H5Fopen(file, H5F_ACC_RDWR, fapl);
    H5Pclose(fapl);
    return f;
}

/* One locked section per process at a time, taken before the file's lock: two writers of
 * one file in a process (labels and scores) would otherwise either conflict (flock on two
 * descriptors) or, where flock is emulated by POSIX locks (NFS), share the lock and lose it
 * when the first one's HDF5 descriptor closes. */
static pthread_mutex_t batch_mu = PTHREAD_MUTEX_INITIALIZER;

/* Open the file and take its lock, waiting for other parts and for readers; -1 with errno
 * (ENOENT: no file yet). */
static int lock_file(const char *file) {
    pthread_mutex_lock(&batch_mu);
    int fd = open(file, O_RDWR | O_CLOEXEC), r = -1;
    if (fd >= 0)
        while ((r = flock(fd, LOCK_EX)) != 0 && errno == EINTR) {}
    if (r != 0) {
        int e = errno;
        if (fd >= 0) close(fd);
        pthread_mutex_unlock(&batch_mu);
        errno = e;
        return -1;
    }
    return fd;
}

static void unlock_file(int fd) {
    flock(fd, LOCK_UN);
    close(fd);
    pthread_mutex_unlock(&batch_mu);
}

static void lock_error(const h5w *w, char *err, size_t n) {
    io__err(err, n, "%s: cannot lock the file: %s%s", w->final, strerror(errno),
            errno == ENOLCK ? " (on NFS, locks need the lock manager: rpc.statd / lockd)" : "");
}

static double now_s(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static int put_string_attr(hid_t obj, const char *key, const char *value) {
    hid_t t = H5Tcopy(H5T_C_S1), s = H5Screate(H5S_SCALAR), a = -1;
    int ok = 0;
    if (t >= 0 && s >= 0 && H5Tset_size(t, strlen(value) + 1) >= 0 &&
        (a = H5Acreate2(obj, key, t, s, H5P_DEFAULT, H5P_DEFAULT)) >= 0 && H5Awrite(a, t, value) >= 0)
        ok = 1;
    if (a >= 0) ok &= H5Aclose(a) >= 0;
    if (s >= 0) H5Sclose(s);
    if (t >= 0) H5Tclose(t);
    return ok ? 0 : -1;
}

/* The done flags of `parts` parts: the attribute's if it has that length, else all 0. */
static int read_parts(hid_t d, int parts, unsigned char *done) {
    memset(done, 0, (size_t)parts);
    htri_t has = H5Aexists(d, PARTS_ATTR);
    if (has < 0) return -1;
    if (!has) return 0;
    hid_t a = H5Aopen(d, PARTS_ATTR, H5P_DEFAULT);
    hid_t s = a >= 0 ? H5Aget_space(a) : -1;
    int ok = s >= 0;
    if (ok && H5Sget_simple_extent_npoints(s) == parts) ok = H5Aread(a, H5T_NATIVE_UCHAR, done) >= 0;
    if (s >= 0) H5Sclose(s);
    if (a >= 0) H5Aclose(a);
    return ok ? 0 : -1;
}

static int write_parts(hid_t d, int parts, const unsigned char *done) {
    if (H5Aexists(d, PARTS_ATTR) > 0 && H5Adelete(d, PARTS_ATTR) < 0) return -1;
    hsize_t len = (hsize_t)parts;
    hid_t s = H5Screate_simple(1, &len, NULL), a = -1;
    int ok = s >= 0 && (a = H5Acreate2(d, PARTS_ATTR, H5T_STD_U8LE, s, H5P_DEFAULT, H5P_DEFAULT)) >= 0 &&
             H5Awrite(a, H5T_NATIVE_UCHAR, done) >= 0;
    if (a >= 0) ok &= H5Aclose(a) >= 0;
    if (s >= 0) H5Sclose(s);
    return ok ? 0 : -1;
}

/* Does the dataset hold what this run writes: shape, element type and chunk? */
static int same_dataset(hid_t d, const swi_store_spec *spec, const int64_t chunk[3]) {
    hsize_t dims[4], cdims[4], got[H5S_MAX_RANK], gotc[H5S_MAX_RANK];
    int nd = h5__dims_of(spec, chunk, dims, cdims);
    hid_t s = H5Dget_space(d), t = H5Dget_type(d), p = H5Dget_create_plist(d);
    int ok = s >= 0 && t >= 0 && p >= 0 && H5Sget_simple_extent_ndims(s) == nd &&
             H5Sget_simple_extent_dims(s, got, NULL) == nd && H5Pget_layout(p) == H5D_CHUNKED &&
             H5Pget_chunk(p, nd, gotc) == nd && H5Tget_size(t) == store__dtype_size(spec->dtype) &&
             H5Tget_class(t) == (spec->dtype == SWI_DTYPE_FLOAT32 ? H5T_FLOAT : H5T_INTEGER) &&
             (spec->dtype == SWI_DTYPE_FLOAT32 || H5Tget_sign(t) == H5T_SGN_NONE);
    for (int k = 0; ok && k < nd; k++) ok = got[k] == dims[k] && gotc[k] == cdims[k];
    if (s >= 0) H5Sclose(s);
    if (t >= 0) H5Tclose(t);
    if (p >= 0) H5Pclose(p);
    return ok;
}

/* Create the file whole in a temporary (see "temporaries", hdf5_encode.c) and link it into
 * place: link(2) fails if another part was first. 0 created, 1 another part's file is
 * there, -1 error. */
static int create_shared(h5w *w, char *err, size_t n) {
    if (h5__make_tmp(w->final, &w->tmp, err, n)) return -1;
    h5__enter();
    int bad = 1;
    hid_t f = h5__create_tmp(&w->tmp), d = -1;
    if (f < 0)
        io__err(err, n, "%s: cannot create the file (in %s): %s", w->final, w->tmp.dir, strerror(errno));
    else if ((d = h5__make_dataset(f, w->path, &w->spec, w->chunk)) < 0)
        io__err(err, n, "%s: cannot create the dataset %s", w->name, w->path);
    else if (put_string_attr(d, INCOMPLETE_ATTR, INCOMPLETE_TEXT) != 0)
        io__err(err, n, "%s: cannot write the attribute %s", w->name, INCOMPLETE_ATTR);
    else
        bad = 0;
    if (d >= 0 && H5Dclose(d) < 0) bad = 1;
    if (f >= 0 && h5__close_file(f) != 0 && !bad) {
        io__err(err, n, "%s: cannot finish the file (disk full?)", w->tmp.file);
        bad = 1;
    }
    h5__leave();
    int r = bad ? -1 : 0;
    if (!bad && link(w->tmp.file, w->final) != 0) {
        if (errno == EEXIST) {
            r = 1;
        } else {
            io__err(err, n, "%s: cannot put the file in place: %s", w->final, strerror(errno));
            r = -1;
        }
    }
    h5__drop_tmp(&w->tmp);
    return r;
}

/* Does the path exist (every group on the way too)? H5Lexists fails on a missing group. */
static htri_t path_exists(hid_t f, const char *path) {
    char buf[1024];
    snprintf(buf, sizeof buf, "%s", path);
    for (char *c = buf + 1;; c++) {
        if (*c != '/' && *c) continue;
        char keep = *c;
        *c = '\0';
        htri_t e = H5Lexists(f, buf, H5P_DEFAULT);
        *c = keep;
        if (e <= 0 || !keep) return e;
    }
}

/* The dataset and the file closed and HDF5's lock released; a failing close fails st (what
 * HDF5 still held may not be on disk). */
static swi_status close_h5(h5w *w, hid_t f, hid_t d, swi_status st, char *err, size_t n) {
    if (d >= 0) H5Dclose(d);
    if (f >= 0 && h5__close_file(f) != 0 && st == SWI_OK) {
        io__err(err, n, "%s: cannot finish writing the file (disk full?)", w->final);
        st = SWI_ERR_IO;
    }
    h5__leave();
    return st;
}
/* Join an existing file, its lock held: a dataset of this run's layout that is incomplete
 * (or --force) is marked incomplete and this part not done; a missing one is created beside
 * the file's other datasets. */
static swi_status join_locked(h5w *w, int flags, char *err, size_t n) {
    h5__enter();
    swi_status st = SWI_ERR_INVALID_ARG;
    unsigned char *done = NULL;
    hid_t f = open_locked(w->final), d = -1;
    htri_t inc = -1;
    if (f < 0) {
        io__err(err, n, "%s: exists and is not an HDF5 file this run can open", w->final);
        goto out;
    }
    htri_t there = path_exists(f, w->path);
    if (there < 0) {
        io__err(err, n, "%s: cannot look up %s in the file", w->name, w->path);
        goto out;
    }
    if (!there) {
        /* another dataset of the file (labels and scores in one file): added beside the others */
        d = h5__make_dataset(f, w->path, &w->spec, w->chunk);
        if (d < 0 || put_string_attr(d, INCOMPLETE_ATTR, INCOMPLETE_TEXT) != 0) {
            io__err(err, n, "%s: cannot create the dataset %s in the file", w->name, w->path);
            goto out;
        }
        st = SWI_OK; /* new: no part done */
        goto out;
    }
    if ((d = H5Dopen2(f, w->path, H5P_DEFAULT)) < 0) {
        io__err(err, n, "%s: %s is not a dataset", w->name, w->path);
        goto out;
    }
    inc = H5Aexists(d, INCOMPLETE_ATTR);
    if (inc == 0 && !(flags & SWI_STORE_FORCE)) {
        io__err(err, n, "%s: already exists (use --force to overwrite)", w->name);
        goto out;
    }
    if (!same_dataset(d, &w->spec, w->chunk)) {
        io__err(err, n,
                "%s: exists with another shape, chunk or dtype than this run writes (a part of another "
                "run, or another --classes/--output)",
                w->name);
        goto out;
    }
    if (inc < 0 || (inc == 0 && put_string_attr(d, INCOMPLETE_ATTR, INCOMPLETE_TEXT) != 0)) {
        io__err(err, n, "%s: cannot write the attribute %s", w->name, INCOMPLETE_ATTR);
        goto out;
    }
    if (w->part >= 0) {
        /* a rerun of this part: its old "done" no longer holds */
        done = malloc((size_t)w->parts);
        if (!done) {
            io__err(err, n, "%s: out of memory", w->name);
            st = SWI_ERR_NOMEM;
            goto out;
        }
        if (read_parts(d, w->parts, done) != 0 ||
            (done[w->part] && (done[w->part] = 0, write_parts(d, w->parts, done) != 0))) {
            io__err(err, n, "%s: cannot update the attribute %s", w->name, PARTS_ATTR);
            goto out;
        }
    }
    st = SWI_OK;
out:
    st = close_h5(w, f, d, st, err, n);
    free(done);
    return st;
}

swi_status h5__shared_create(h5w *w, int flags, char *err, size_t n) {
    if (env_allows(w->name, err, n)) return SWI_ERR_INVALID_ARG;
    if (w->parts > MAX_PARTS) {
        io__err(err, n, "%s: %d parts; one HDF5 dataset takes at most %d (use Zarr)", w->name, w->parts,
                MAX_PARTS);
        return SWI_ERR_INVALID_ARG;
    }
    /* The lock a part takes would wait forever on the one HDF5 holds for this process's own
     * reader of the file. */
    struct stat fs;
    h5__enter();
    int input = stat(w->final, &fs) == 0 && h5__is_read(fs.st_dev, fs.st_ino, NULL);
    h5__leave();
    if (input) {
        io__err(err, n,
                "%s: the file is also an input of this run; parts (--shard, mpirun) write into it in place "
                "under its lock, which the input's reader holds: write them into another file",
                w->name);
        return SWI_ERR_INVALID_ARG;
    }
    /* a file that vanishes between the attempts (removed by hand) is retried a few times */
    for (int attempt = 0; attempt < 4; attempt++) {
        int fd = lock_file(w->final);
        if (fd < 0 && errno != ENOENT) {
            lock_error(w, err, n);
            return SWI_ERR_IO;
        }
        if (fd < 0) {
            int r = create_shared(w, err, n);
            if (r < 0) return SWI_ERR_IO;
            if (r == 0) return SWI_OK; /* new: incomplete, no part done */
            continue;
        }
        swi_status st = join_locked(w, flags, err, n);
        unlock_file(fd);
        return st;
    }
    io__err(err, n, "%s: the file keeps appearing and vanishing", w->final);
    return SWI_ERR_INVALID_ARG;
}

/* The shared file's lock taken, HDF5's held, the file and the dataset opened (*d < 0 when they
 * could not be): the lock's descriptor, or -1 (said in err) when the lock could not be had. */
static int open_shared(h5w *w, hid_t *f, hid_t *d, char *err, size_t n) {
    const int fd = lock_file(w->final);
    if (fd < 0) {
        lock_error(w, err, n);
        return -1;
    }
    h5__enter();
    *f = open_locked(w->final);
    *d = *f >= 0 ? H5Dopen2(*f, w->path, H5P_DEFAULT) : -1;
    return fd;
}

/* What open_shared opened, closed and unlocked (see close_h5). */
static swi_status close_shared(h5w *w, int fd, hid_t f, hid_t d, swi_status st, char *err, size_t n) {
    st = close_h5(w, f, d, st, err, n);
    unlock_file(fd);
    return st;
}

/* Write a batch of slabs in one open of the file. */
static swi_status write_batch(h5w *w, const pend *list, char *err, size_t n) {
    hid_t f, d;
    const int fd = open_shared(w, &f, &d, err, n);
    if (fd < 0) return SWI_ERR_IO;
    swi_status st = SWI_ERR_INVALID_ARG;
    if (d < 0) {
        io__err(err, n, "%s: cannot open the dataset to write (removed or replaced while running?)", w->name);
    } else {
        st = SWI_OK;
        for (const pend *p = list; p && st == SWI_OK; p = p->next)
            if (h5__write_chunks(d, p) != 0) {
                io__err(err, n, "%s: cannot write the box from (%lld, %lld, %lld) (disk full?)", w->name,
                        (long long)p->lo[0], (long long)p->lo[1], (long long)p->lo[2]);
                st = SWI_ERR_IO;
            }
    }
    return close_shared(w, fd, f, d, st, err, n);
}

/* Write what is pending (slabs finished meanwhile wait for the next batch). */
static swi_status flush(h5w *w, char *err, size_t n) {
    pthread_mutex_lock(&w->list_mu);
    pend *list = w->head;
    w->head = NULL;
    w->tail = &w->head;
    w->pending = 0;
    pthread_mutex_unlock(&w->list_mu);
    swi_status st = list ? write_batch(w, list, err, n) : SWI_OK;
    h5__free_list(list);
    return st;
}

swi_status h5__shared_write(h5w *w, const int64_t lo[3], const int64_t hi[3], const void *buf, char *err,
                            size_t n) {
    pend *p = NULL;
    swi_status st = h5__encode_slab(w, lo, hi, buf, &p, err, n);
    if (st != SWI_OK) return st;
    const double t = now_s();
    pthread_mutex_lock(&w->list_mu);
    if (!w->head) w->first_at = t;
    *w->tail = p;
    w->tail = &p->next;
    w->pending += p->bytes;
    int due = w->pending >= BATCH_BYTES || t - w->first_at >= BATCH_SECONDS;
    pthread_mutex_unlock(&w->list_mu);
    return due ? flush(w, err, n) : SWI_OK;
}

/* The last slabs, then this part's done flag; the part that finds every flag set removes
 * the flags and the marker. */
swi_status h5__shared_commit(h5w *w, char *err, size_t n) {
    swi_status st = flush(w, err, n);
    if (st != SWI_OK) return st;
    unsigned char *done = malloc((size_t)w->parts);
    if (!done) {
        io__err(err, n, "%s: out of memory", w->name);
        return SWI_ERR_NOMEM;
    }
    hid_t f, d;
    const int fd = open_shared(w, &f, &d, err, n);
    if (fd < 0) {
        free(done);
        return SWI_ERR_IO;
    }
    st = SWI_ERR_INVALID_ARG;
    if (d < 0) {
        io__err(err, n, "%s: cannot open the dataset to commit (removed or replaced while running?)",
                w->name);
    } else if (read_parts(d, w->parts, done) != 0) {
        io__err(err, n, "%s: cannot read the attribute %s", w->name, PARTS_ATTR);
    } else {
        done[w->part] = 1;
        int all = 1;
        for (int p = 0; p < w->parts; p++) all &= done[p];
        int bad = all ? (H5Aexists(d, PARTS_ATTR) > 0 && H5Adelete(d, PARTS_ATTR) < 0) ||
                            (H5Aexists(d, INCOMPLETE_ATTR) > 0 && H5Adelete(d, INCOMPLETE_ATTR) < 0)
                      : write_parts(d, w->parts, done) != 0;
        if (bad)
            io__err(err, n, "%s: cannot update the attributes %s/%s", w->name, PARTS_ATTR, INCOMPLETE_ATTR);
        else
            st = SWI_OK;
    }
    st = close_shared(w, fd, f, d, st, err, n);
    free(done);
    return st;
}

void h5__free_writer(h5w *w) {
    if (w->shared) {
        h5__free_list(w->head);
        pthread_mutex_destroy(&w->list_mu);
    }
    free(w);
}

#endif
