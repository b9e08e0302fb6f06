/* zarr_write.c -- Zarr v2 arrays and OME-Zarr 0.4 images written one file per chunk
 * (temporary name, then rename), by one writer or by several parts of one job: what an
 * existing output is, its replacement beside it (--force), each part's done marker and the
 * last part's swap into place. */
#include "zarr_internal.h"

#ifdef SWI_HAVE_ZARR

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* mkdir -p; 0 or -1 with errno. */
static int mkdirs(const char *path) {
    char buf[4096];
    size_t n = strlen(path);
    if (n >= sizeof buf) {
        errno = ENAMETOOLONG;
        return -1;
    }
    memcpy(buf, path, n + 1);
    for (size_t i = 1; i <= n; i++)
        if (buf[i] == '/' || buf[i] == '\0') {
            char c = buf[i];
            buf[i] = '\0';
            if (mkdir(buf, 0777) != 0 && errno != EEXIST) return -1;
            buf[i] = c;
        }
    return 0;
}

/* ---- the writer ---- */

#define JOB_FILE ".swi-job"
#define NEXT_SUFFIX ".swi-next"

typedef struct zarr_writer {
    char store[4096]; /* the directory written, holding the marker: the array, or the OME group */
    char dir[4096];   /* the array */
    char final[4096]; /* the store's name: where `store` is moved at the last commit when swap */
    int swap;         /* 1: store is a hidden replacement of final, swapped in at the last commit
                         (this writer alone; removed on abort); 2: the same, shared by parts */
    swi_store_spec spec;
    int64_t chunk[3];
    int part, parts;
    int committed;
} zarr_writer;

static int same_array(const zarr_array *a, const swi_store_spec *spec, const int64_t chunk[3]) {
    int o = spec->planes > 1 ? 1 : (int)strlen(spec->lead_axes);
    if (a->ndim != 3 + o) return 0;
    for (int k = 0; k < o; k++)
        if (a->shape[k] != (spec->planes > 1 ? spec->planes : 1) || a->chunks[k] != 1) return 0;
    for (int k = 0; k < 3; k++)
        if (a->shape[o + k] != spec->size[k] || a->chunks[o + k] != chunk[k]) return 0;
    return (size_t)a->t.size == store__dtype_size(spec->dtype);
}

static void part_file(const zarr_writer *z, int part, char *out, size_t n) {
    char leaf[96];
    snprintf(leaf, sizeof leaf, ".swi-part-%d-of-%d", part, z->parts);
    io__join(out, n, z->store, leaf);
}

/* ---- what an existing output is ---- */

typedef enum target { T_ABSENT, T_EMPTY, T_OURS, T_OTHER } target;

static int is_swi_name(const char *s) { return !strncmp(s, ".swi-", 5) || !strncmp(s, ".tmp-", 5); }

static int is_key_name(const char *s, int dots) {
    if (!(*s >= '0' && *s <= '9')) return 0;
    for (; *s; s++)
        if (!((*s >= '0' && *s <= '9') || (dots && *s == '.'))) return 0;
    return 1;
}

/* Does dir hold only what a Zarr v2 array holds (.zarray, .zattrs, chunk files, nested
 * chunk folders, swi's own markers)? If not, why names the first stranger. */
static int array_entries(const char *dir, int depth, char *why, size_t wn) {
    DIR *d = opendir(dir);
    if (!d) {
        snprintf(why, wn, "%s cannot be listed: %s", dir, strerror(errno));
        return 0;
    }
    int ok = 1, meta = depth > 0;
    struct dirent *e;
    while (ok && (e = readdir(d))) {
        const char *s = e->d_name;
        if (!strcmp(s, ".") || !strcmp(s, "..")) continue;
        char p[4400];
        struct stat st;
        if (io__join(p, sizeof p, dir, s) || lstat(p, &st) != 0) {
            if (errno == ENOENT && is_swi_name(s)) continue; /* another writer's temporary, renamed */
            snprintf(why, wn, "%s/%s cannot be examined", dir, s);
            ok = 0;
        } else if (depth == 0 && (!strcmp(s, ".zarray") || !strcmp(s, ZARR_MARKER)) && S_ISREG(st.st_mode)) {
            meta = 1;
        } else if (((depth == 0 && !strcmp(s, ".zattrs")) || is_swi_name(s) || is_key_name(s, 1)) &&
                   S_ISREG(st.st_mode)) {
            /* its own */
        } else if (is_key_name(s, 0) && S_ISDIR(st.st_mode) && depth < STORE_MAX_NDIM) {
            ok = array_entries(p, depth + 1, why, wn);
        } else {
            snprintf(why, wn, "%s, which is not part of a Zarr v2 array", p);
            ok = 0;
        }
    }
    closedir(d);
    if (ok && !meta) {
        snprintf(why, wn, "no .zarray");
        ok = 0;
    }
    return ok;
}

/* Does group hold only what an OME-Zarr 0.4 image (or labels image) that swi could have
 * written holds: .zgroup, .zattrs naming multiscales, the levels they name (each a Zarr
 * array), swi's markers? Anything else (labels of its own, another file, OME 0.5) is kept. */
static int ome_entries(const char *group, char *why, size_t wn) {
    char path[4200];
    json_t *attrs = NULL, *dss = NULL;
    struct stat st;
    if (io__join(path, sizeof path, group, ".zattrs") == 0 && lstat(path, &st) == 0) {
        attrs = zarr__load_json(path, NULL, 0, "the OME-Zarr attributes");
        json_t *ms = json_object_get(attrs, "multiscales");
        if (!json_is_array(ms)) {
            snprintf(why, wn, "%s names no multiscales", path);
            json_decref(attrs);
            return 0;
        }
        dss = json_array(); /* every level of every multiscale */
        for (size_t i = 0; i < json_array_size(ms); i++) {
            json_t *l = json_object_get(json_array_get(ms, i), "datasets");
            for (size_t k = 0; k < json_array_size(l); k++)
                json_array_append(dss, json_object_get(json_array_get(l, k), "path"));
        }
    } else if (io__join(path, sizeof path, group, ZARR_MARKER) || lstat(path, &st) != 0) {
        snprintf(why, wn, "no .zattrs");
        return 0;
    }
    DIR *d = opendir(group);
    int ok = d != NULL;
    if (!d) snprintf(why, wn, "%s cannot be listed: %s", group, strerror(errno));
    struct dirent *e;
    while (ok && (e = readdir(d))) {
        const char *s = e->d_name;
        if (!strcmp(s, ".") || !strcmp(s, "..")) continue;
        char p[4400];
        if (io__join(p, sizeof p, group, s) || lstat(p, &st) != 0) {
            if (errno == ENOENT && is_swi_name(s)) continue; /* another writer's temporary, renamed */
            snprintf(why, wn, "%s/%s cannot be examined", group, s);
            ok = 0;
            continue;
        }
        int level = 0;
        for (size_t i = 0; i < json_array_size(dss); i++)
            level |= json_is_string(json_array_get(dss, i)) &&
                     !strcmp(json_string_value(json_array_get(dss, i)), s);
        if (!attrs && !strcmp(s, "0")) level = 1; /* a store swi left incomplete before its metadata */
        if (S_ISREG(st.st_mode) && (!strcmp(s, ".zgroup") || !strcmp(s, ".zattrs") || is_swi_name(s)))
            continue;
        if (level && S_ISDIR(st.st_mode)) {
            ok = array_entries(p, 0, why, wn);
            continue;
        }
        snprintf(why, wn, "%s, which is not part of an OME-Zarr image swi writes", p);
        ok = 0;
    }
    if (d) closedir(d);
    json_decref(dss);
    json_decref(attrs);
    return ok;
}

/* What the output path is now. A symbolic link is another's, whatever it points to. */
static target classify(const char *path, int ome, char *why, size_t wn) {
    struct stat st;
    if (lstat(path, &st) != 0) return T_ABSENT;
    if (!S_ISDIR(st.st_mode)) {
        snprintf(why, wn, "it is %s", swi_io_file_kind(st.st_mode));
        return T_OTHER;
    }
    DIR *d = opendir(path);
    if (!d) {
        snprintf(why, wn, "it cannot be listed: %s", strerror(errno));
        return T_OTHER;
    }
    int empty = 1;
    struct dirent *e;
    while (empty && (e = readdir(d))) empty = !strcmp(e->d_name, ".") || !strcmp(e->d_name, "..");
    closedir(d);
    if (empty) return T_EMPTY;
    return (ome ? ome_entries(path, why, wn) : array_entries(path, 0, why, wn)) ? T_OURS : T_OTHER;
}

static int rm_entry(const char *p, const struct stat *st, int flag, struct FTW *ftw) {
    (void)st, (void)flag, (void)ftw;
    return remove(p) != 0 && errno != ENOENT ? -1 : 0;
}

/* Remove a tree swi made, never following a link out of it. */
static int rm_tree(const char *path) { return nftw(path, rm_entry, 16, FTW_DEPTH | FTW_PHYS); }

/* The sibling `.LEAF<tag>` of path (a hidden name in path's folder). */
static int sibling(const char *path, const char *tag, char *out, size_t n) {
    const char *slash = strrchr(path, '/');
    int dl = slash ? (int)(slash - path) + 1 : 0;
    int k = snprintf(out, n, "%.*s.%s%s", dl, path, slash ? slash + 1 : path, tag);
    return k < 0 || (size_t)k >= n ? -1 : 0;
}

/* A new folder `.LEAF.swi-new-PID-N` beside path, made exclusively (mkdir: the umask
 * applies, as to the store's name). 0, or -1 with errno. */
static int fresh_folder(const char *path, char *out, size_t n) {
    static _Atomic unsigned counter;
    for (int tries = 0; tries < 64; tries++) {
        char tag[64];
        snprintf(tag, sizeof tag, ".swi-new-%ld-%u", (long)getpid(), counter++);
        if (sibling(path, tag, out, n)) {
            errno = ENAMETOOLONG;
            return -1;
        }
        if (mkdir(out, 0777) == 0) return 0;
        if (errno != EEXIST) return -1;
    }
    return -1;
}

/* Put the finished replacement `next` in the place of `final` and remove the old store:
 * exchanged in one step (renameat2 RENAME_EXCHANGE) where the file system can, else the old
 * moved aside, the new moved in (the old moved back if that fails). 0, or -1 with err. */
static int swap_in(const char *next, const char *final, char *err, size_t n) {
#ifdef RENAME_EXCHANGE
    if (renameat2(AT_FDCWD, next, AT_FDCWD, final, RENAME_EXCHANGE) == 0) {
        rm_tree(next); /* now the old store */
        return 0;
    }
    if (errno != EINVAL && errno != ENOSYS && errno != ENOTSUP && errno != ENOENT) {
        io__err(err, n, "%s: cannot move the new store into place: %s", final, strerror(errno));
        return -1;
    }
#endif
    char old[4200];
    if (sibling(final, ".swi-old-XXXXXX", old, sizeof old) || !mkdtemp(old)) {
        io__err(err, n, "%s: cannot move the old store aside: %s", final, strerror(errno));
        return -1;
    }
    int had = rename(final, old) == 0; /* onto the empty folder just made */
    if (!had && errno != ENOENT) {
        io__err(err, n, "%s: cannot move the old store aside: %s", final, strerror(errno));
        rmdir(old);
        return -1;
    }
    if (rename(next, final) != 0) {
        int e = errno;
        if (had)
            rename(old, final);
        else
            rmdir(old);
        io__err(err, n, "%s: cannot move the new store into place: %s", final, strerror(e));
        return -1;
    }
    rm_tree(old);
    return 0;
}

/* The job fingerprint of a shared store: written by whoever creates it, compared by every
 * part that joins. SWI_OK, or a status with err. */
static swi_status check_job(const zarr_writer *z, const char *name, char *err, size_t n) {
    const char *job = z->spec.job;
    if (!job || !*job) return SWI_OK;
    char path[4200];
    if (io__join(path, sizeof path, z->store, JOB_FILE)) {
        io__err(err, n, "%s: name too long", name);
        return SWI_ERR_INVALID_ARG;
    }
    if (io__put_file(path, job, strlen(job), 1) == 0) return SWI_OK;
    if (errno != EEXIST) {
        io__err(err, n, "%s: cannot write: %s", path, strerror(errno));
        return SWI_ERR_IO;
    }
    size_t len = 0;
    unsigned char *b = io__read_file(path, (size_t)1 << 16, &len, err, n, "the job fingerprint");
    if (!b) return io__errno_status(errno);
    int same = len == strlen(job) && memcmp(b, job, len) == 0;
    if (!same)
        io__err(err, n, "%s was started by another job (%.*s); this part's job: %s", name,
                (int)(len > 400 ? 400 : len), (const char *)b, job);
    free(b);
    return same ? SWI_OK : SWI_ERR_INVALID_ARG;
}

swi_status zarr__check_output(const char *name, int ome, int force, char *err, size_t n) {
    char final[4096], why[4600] = "";
    zarr__strip_slash(name, final, sizeof final);
    target t = classify(final, ome, why, sizeof why);
    if (t == T_OTHER) {
        io__err(err, n,
                "%s: exists and is not %s that swi writes (%s); swi replaces only its own kind of store, "
                "--force or not: remove it or name another output",
                name, ome ? "an OME-Zarr image" : "a Zarr array", why);
        return SWI_ERR_INVALID_ARG;
    }
    if (t == T_OURS && !force) {
        io__err(err, n, "%s: already exists (use --force to overwrite)", name);
        return SWI_ERR_INVALID_ARG;
    }
    return SWI_OK;
}

swi_status zarr__create(const char *name, int ome, const swi_store_spec *spec, const int64_t chunk[3],
                        int flags, int part, int parts, void **impl, char *err, size_t n) {
    zarr_writer *z = calloc(1, sizeof *z);
    if (!z) {
        io__err(err, n, "%s: out of memory", name);
        return SWI_ERR_NOMEM;
    }
    zarr__strip_slash(name, z->final, sizeof z->final);
    snprintf(z->store, sizeof z->store, "%s", z->final);
    z->spec = *spec;
    memcpy(z->chunk, chunk, sizeof z->chunk);
    z->part = part;
    z->parts = parts;
    swi_status bad = SWI_ERR_INVALID_ARG;
    char why[4600] = "", marker[4200];
    const char *what = ome ? "an OME-Zarr image" : "a Zarr array";
    target t = classify(z->final, ome, why, sizeof why);
    if (t == T_OTHER) {
        io__err(err, n,
                "%s: exists and is not %s that swi writes (%s); swi replaces only its own kind of store, "
                "--force or not: remove it or name another output",
                name, what, why);
        goto fail;
    }
    int incomplete = t == T_OURS && io__join(marker, sizeof marker, z->final, ZARR_MARKER) == 0 &&
                     access(marker, F_OK) == 0;
    if (t == T_OURS && !((flags & SWI_STORE_SHARED) && incomplete)) {
        if (!(flags & SWI_STORE_FORCE)) {
            io__err(err, n, "%s: already exists%s (use --force to overwrite)", name,
                    incomplete ? " and is incomplete" : "");
            goto fail;
        }
        /* --force: the new store is written beside the old one, under a hidden name, and
         * takes its place at the last commit; until then the old one stays as it was */
        struct stat st;
        if (flags & SWI_STORE_SHARED) {
            z->swap = 2; /* one name that every part finds */
            if (sibling(z->final, NEXT_SUFFIX, z->store, sizeof z->store) ||
                (mkdir(z->store, 0777) != 0 && errno != EEXIST) || lstat(z->store, &st) != 0 ||
                !S_ISDIR(st.st_mode)) {
                io__err(err, n, "%s: cannot make the replacement %s: %s", name, z->store,
                        errno ? strerror(errno) : "not a directory");
                bad = SWI_ERR_IO;
                goto fail;
            }
            target tn = classify(z->store, ome, why, sizeof why);
            if (tn == T_OTHER) {
                io__err(err, n, "%s: the replacement being written, %s, holds what swi did not write (%s)",
                        name, z->store, why);
                goto fail;
            }
        } else {
            z->swap = 1;
            if (sibling(z->final, ".swi-new-XXXXXX", z->store, sizeof z->store) || !mkdtemp(z->store)) {
                io__err(err, n, "%s: cannot make a replacement beside it: %s", name, strerror(errno));
                z->swap = 0;
                bad = SWI_ERR_IO;
                goto fail;
            }
            if (stat(z->final, &st) == 0) chmod(z->store, st.st_mode & 07777);
        }
    }
    /* A new store is made whole under a hidden name (its marker, job and metadata inside)
     * and moved to its name in one step that fails once another run's store is there: of
     * two runs creating it at once exactly one does; the other joins it only as a part of
     * the same job (SWI_STORE_SHARED, the job checked below), else it is refused. */
    int fresh = t == T_ABSENT || t == T_EMPTY;
    if (fresh) {
        char parent[4200];
        snprintf(parent, sizeof parent, "%s", z->final);
        char *slash = strrchr(parent, '/');
        if (slash && slash != parent) *slash = '\0';
        struct stat st;
        if ((slash && slash != parent && mkdirs(parent) != 0) ||
            fresh_folder(z->final, z->store, sizeof z->store)) {
            io__err(err, n, "%s: cannot make it beside its name: %s", name, strerror(errno));
            snprintf(z->store, sizeof z->store, "%s", z->final);
            bad = SWI_ERR_IO;
            goto fail;
        }
        z->swap = 1; /* removed on failure until it has taken its name */
        if (t == T_EMPTY && stat(z->final, &st) == 0) chmod(z->store, st.st_mode & 07777);
    }
join:;
    char path[4200];
    if ((ome ? io__join(z->dir, sizeof z->dir, z->store, "0")
             : io__join(z->dir, sizeof z->dir, z->store, ".")) ||
        io__join(path, sizeof path, z->dir, ".zarray") ||
        io__join(marker, sizeof marker, z->store, ZARR_MARKER)) {
        io__err(err, n, "%s: name too long", name);
        goto fail;
    }
    if (!ome) snprintf(z->dir, sizeof z->dir, "%s", z->store);
    io__join(path, sizeof path, z->dir, ".zarray");
    if (mkdirs(z->dir) != 0) {
        io__err(err, n, "%s: cannot create the directory: %s", name, strerror(errno));
        bad = SWI_ERR_IO;
        goto fail;
    }
    /* The marker first: whoever sees the metadata also sees that the store is unfinished. */
    int fd = open(marker, O_WRONLY | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0666);
    if (fd < 0) {
        io__err(err, n, "%s: cannot write %s: %s", name, ZARR_MARKER, strerror(errno));
        bad = SWI_ERR_IO;
        goto fail;
    }
    close(fd);
    if (flags & SWI_STORE_SHARED) {
        swi_status js = check_job(z, name, err, n);
        if (js != SWI_OK) {
            bad = js;
            goto fail;
        }
    }
    if (part >= 0) {
        /* a rerun of this part: its old "done" no longer holds */
        char pf[4200];
        part_file(z, part, pf, sizeof pf);
        unlink(pf);
    }
    json_t *j = zarr__zarray_json(spec, chunk);
    if (!j) {
        io__err(err, n, "%s: out of memory", name);
        bad = SWI_ERR_NOMEM;
        goto fail;
    }
    int first = 1;
    /* Parts never replace the metadata: whoever links it first wins, the others must agree. */
    if (zarr__put_json(path, j, !(flags & SWI_STORE_FORCE) || (flags & SWI_STORE_SHARED) || z->swap) != 0) {
        if (errno != EEXIST) {
            bad = io__errno_status(errno);
            io__err(err, n, "%s: cannot write: %s", path, strerror(errno));
            json_decref(j);
            goto fail;
        }
        first = 0; /* another part created it: it must describe the same array */
        zarr_array *a = calloc(1, sizeof *a);
        swi_status st = a ? SWI_OK : SWI_ERR_NOMEM;
        if (!a) io__err(err, n, "%s: out of memory", name);
        if (a) {
            a->any_leading = 1;
            st = zarr__parse_zarray(z->dir, a, err, n);
        }
        if (st == SWI_OK && !same_array(a, spec, chunk)) {
            io__err(err, n, "%s: exists with another shape, chunk or dtype than this run writes", path);
            st = SWI_ERR_INVALID_ARG;
        }
        free(a);
        if (st != SWI_OK) {
            json_decref(j);
            bad = st;
            goto fail;
        }
    }
    json_decref(j);
    if (first && !ome && spec->labels) {
        /* a plain array's classes as its attributes */
        char ap[4200];
        json_t *attrs = zarr__classes_attrs(spec);
        swi_status fault = io__join(ap, sizeof ap, z->dir, ".zattrs") ? SWI_ERR_INVALID_ARG : SWI_OK;
        if (fault == SWI_OK) fault = zarr__write_meta(ap, attrs, err, n);
        json_decref(attrs);
        if (fault != SWI_OK) {
            bad = fault;
            goto fail;
        }
    }
    if (first && ome) {
        json_t *g = json_pack("{s:i}", "zarr_format", 2);
        const char *leaf = strrchr(z->final, '/');
        char image[4096], lname[512];
        ome_geom geo;
        memset(&geo, 0, sizeof geo);
        if (spec->labels && zarr__labels_parent(z->final, image, sizeof image, lname, sizeof lname) == 0)
            zarr__image_level_geometry(image, spec->size, &geo);
        json_t *attrs = zarr__ome_json(spec, leaf ? leaf + 1 : z->final, &geo);
        char gp[4200], ap[4200];
        swi_status fault =
            io__join(gp, sizeof gp, z->store, ".zgroup") || io__join(ap, sizeof ap, z->store, ".zattrs")
                ? SWI_ERR_INVALID_ARG
                : SWI_OK;
        if (fault == SWI_OK) fault = zarr__write_meta(gp, g, err, n);
        if (fault == SWI_OK) fault = zarr__write_meta(ap, attrs, err, n);
        if (fault == SWI_OK && spec->labels) fault = zarr__register_label(z->final, err, n);
        json_decref(g);
        json_decref(attrs);
        if (fault != SWI_OK) {
            bad = fault;
            goto fail;
        }
    }
    if (fresh) {
        fresh = 0;
        /* rename() fails on a folder that is not empty: another run's store */
        if (rename(z->store, z->final) != 0) {
            int e = errno;
            rm_tree(z->store);
            z->swap = 0;
            snprintf(z->store, sizeof z->store, "%s", z->final);
            if ((e == EEXIST || e == ENOTEMPTY) && (flags & SWI_STORE_SHARED)) goto join; /* a part joins */
            if (e == EEXIST || e == ENOTEMPTY)
                io__err(err, n,
                        "%s: another run created it meanwhile; a store is written by one run (or the parts "
                        "of one job, --shard I/N): remove it or name another output",
                        name);
            else
                io__err(err, n, "%s: cannot move the new store to its name: %s", name, strerror(e));
            bad = e == EEXIST || e == ENOTEMPTY ? SWI_ERR_INVALID_ARG : SWI_ERR_IO;
            goto fail;
        }
        z->swap = 0;
        snprintf(z->store, sizeof z->store, "%s", z->final);
        if (ome)
            io__join(z->dir, sizeof z->dir, z->store, "0");
        else
            snprintf(z->dir, sizeof z->dir, "%s", z->store);
    }
    *impl = z;
    return SWI_OK;
fail:
    if (z->swap == 1) rm_tree(z->store);
    free(z);
    return bad;
}

swi_status zarr__write_box(void *impl, const int64_t lo[3], const int64_t hi[3], const void *buf, char *err,
                           size_t n) {
    zarr_writer *z = impl;
    const int64_t *c = z->chunk, *size = z->spec.size;
    const size_t es = store__dtype_size(z->spec.dtype);
    const size_t cbytes = (size_t)(c[0] * c[1] * c[2]) * es;
    unsigned char *chunk = malloc(cbytes);
    if (!chunk) {
        io__err(err, n, "%s: out of memory for a chunk", z->store);
        return SWI_ERR_NOMEM;
    }
    const unsigned char *src = buf;
    swi_status st = SWI_OK;
    for (int64_t p = 0; p < z->spec.planes && st == SWI_OK; p++)
        for (int64_t ci = lo[0] / c[0]; ci * c[0] < hi[0] && st == SWI_OK; ci++)
            for (int64_t cj = lo[1] / c[1]; cj * c[1] < hi[1] && st == SWI_OK; cj++)
                for (int64_t ck = lo[2] / c[2]; ck * c[2] < hi[2] && st == SWI_OK; ck++) {
                    store__gather_chunk(chunk, src, lo, hi, c, size, p, ci, cj, ck, es);
                    unsigned char *enc = NULL;
                    size_t elen = 0;
                    char path[4400];
                    if (z->spec.planes > 1)
                        snprintf(path, sizeof path, "%s/%lld.%lld.%lld.%lld", z->dir, (long long)p,
                                 (long long)ci, (long long)cj, (long long)ck);
                    else /* each leading axis (t, c) of size 1: chunk 0 */
                        snprintf(path, sizeof path, "%s/%.*s%lld.%lld.%lld", z->dir,
                                 2 * (int)strlen(z->spec.lead_axes), "0.0.0.", (long long)ci, (long long)cj,
                                 (long long)ck);
                    if (zarr__encode(z->spec.codec, chunk, cbytes, (int)es, &enc, &elen) != 0) {
                        io__err(err, n, "%s: cannot compress a chunk (out of memory)", path);
                        st = SWI_ERR_NOMEM;
                    } else if (io__put_file(path, enc, elen, 0) != 0) {
                        st = io__errno_status(errno);
                        io__err(err, n, "%s: cannot write: %s", path, strerror(errno));
                    }
                    free(enc);
                }
    free(chunk);
    return st;
}

swi_status zarr__commit(void *impl, char *err, size_t n) {
    zarr_writer *z = impl;
    char pf[4200], marker[4200];
    part_file(z, z->part, pf, sizeof pf);
    io__join(marker, sizeof marker, z->store, ZARR_MARKER);
    int fd = open(pf, O_WRONLY | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0666);
    if (fd < 0 || close(fd) != 0) {
        io__err(err, n, "%s: cannot write: %s", pf, strerror(errno));
        zarr__abort(z);
        return SWI_ERR_IO;
    }
    /* Each part marks itself done before looking at the others, so the last one to finish
     * sees them all and marks the store complete. */
    int all = 1;
    for (int p = 0; p < z->parts && all; p++) {
        char q[4200];
        part_file(z, p, q, sizeof q);
        all = access(q, F_OK) == 0;
    }
    swi_status st = SWI_OK;
    if (all) {
        /* whoever removes the marker finishes the store (and alone swaps it in) */
        int won = unlink(marker) == 0;
        if (!won && errno != ENOENT) {
            io__err(err, n, "%s: cannot remove: %s", marker, strerror(errno));
            st = SWI_ERR_IO;
        }
        for (int p = 0; p < z->parts && st == SWI_OK; p++) {
            char q[4200];
            part_file(z, p, q, sizeof q);
            unlink(q);
        }
        char jf[4200];
        if (won && io__join(jf, sizeof jf, z->store, JOB_FILE) == 0) unlink(jf);
        if (won && z->swap && swap_in(z->store, z->final, err, n) != 0) {
            st = SWI_ERR_IO;
            if (z->swap == 1) rm_tree(z->store);
        }
    }
    free(z);
    return st;
}

int zarr__replaces(const void *impl) { return ((const zarr_writer *)impl)->swap != 0; }

/* swap 2's replacement is every part's: not one part's to remove */
const char *zarr__temporary(const void *impl) {
    const zarr_writer *z = impl;
    return z->swap == 1 ? z->store : NULL;
}

void zarr__abort(void *impl) {
    zarr_writer *z = impl;
    if (z && z->swap == 1) rm_tree(z->store); /* the replacement never took the old store's place */
    free(z);
}

#else /* !SWI_HAVE_ZARR */

static swi_status missing(char *err, size_t n) {
    io__err(err, n, "swi_io was built without Zarr (install libjansson-dev libblosc-dev libzstd-dev)");
    return SWI_ERR_INVALID_ARG;
}
swi_status zarr__create(const char *name, int ome, const swi_store_spec *spec, const int64_t chunk[3],
                        int flags, int part, int parts, void **impl, char *err, size_t n) {
    (void)name, (void)ome, (void)spec, (void)chunk, (void)flags, (void)part, (void)parts, (void)impl;
    return missing(err, n);
}
swi_status zarr__check_output(const char *name, int ome, int force, char *err, size_t n) {
    (void)name, (void)ome, (void)force;
    return missing(err, n);
}
swi_status zarr__write_box(void *impl, const int64_t lo[3], const int64_t hi[3], const void *buf, char *err,
                           size_t n) {
    (void)impl, (void)lo, (void)hi, (void)buf;
    return missing(err, n);
}
swi_status zarr__commit(void *impl, char *err, size_t n) {
    (void)impl;
    return missing(err, n);
}
void zarr__abort(void *impl) { (void)impl; }
int zarr__replaces(const void *impl) {
    (void)impl;
    return 0;
}
const char *zarr__temporary(const void *impl) {
    (void)impl;
    return NULL;
}

#endif
