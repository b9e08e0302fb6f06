/*
 * hdf5_internal.h -- what the HDF5 modules share: the reader (hdf5_read.c), the dataset as
 * written and its chunks encoded (hdf5_encode.c), the locks (hdf5_lock.c: libhdf5's one lock
 * in the process, the file's lock between parts), the writer (hdf5_write.c). Not installed.
 */
#ifndef SWI_HDF5_INTERNAL_H
#define SWI_HDF5_INTERNAL_H

#include "store_internal.h"

#ifdef SWI_HAVE_HDF5

#include <hdf5.h>
#include <pthread.h>

#if !H5_VERSION_GE(1, 10, 5)
#error "swi_io needs libhdf5 1.10.5 or later (H5Dwrite_chunk, H5Dread_chunk, H5Dget_chunk_info_by_coord)"
#endif
#if H5_VERSION_GE(1, 12, 1) || (H5_VERSION_GE(1, 10, 7) && !H5_VERSION_GE(1, 12, 0))
#define HAVE_FILE_LOCKING_PROPERTY 1
#endif

/* The attributes a dataset being written by several parts carries until the last one has
 * written: the marker, and one byte per part (1: done). Removed at completion, so a
 * finished dataset looks like a single writer's. */
#define INCOMPLETE_ATTR "swi_incomplete"
#define PARTS_ATTR "swi_parts_done"
#define INCOMPLETE_TEXT "a run writing this dataset failed or is still running"

/* ---- libhdf5's lock (hdf5_lock.c) ---- */

/* Every call into libhdf5 (serial, not thread-safe) between these: h5_lock taken, its error
 * printing off; the messages of a failure dropped on the way out. */
void h5__enter(void);
void h5__leave(void);
/* A file HDF5 may still write to, flushed and closed: 0, or -1 (then left open). */
int h5__close_file(hid_t f);

/* ---- datasets and their identity (hdf5_read.c) ---- */

/* An object's identity within its file (its header's address), to tell whether a path in a
 * byte-for-byte copy of the file names the same dataset. */
typedef struct obj_key {
    unsigned char b[16];
} obj_key;

int h5__key_of(hid_t obj, obj_key *k);
/* Is every link on the way to path a hard link? 1 yes, 0 a component is missing, -2 a link
 * that is not hard, -1 error. Caller holds h5_lock. */
int h5__hard_path(hid_t f, const char *path);
/* Does this process read the file (dev, ino), and with key the dataset? Caller holds h5_lock. */
int h5__is_read(dev_t dev, ino_t ino, const obj_key *key);

/* ---- temporaries and the dataset as written (hdf5_encode.c) ---- */

/* A file written in a private folder beside its final name (see "temporaries"). */
typedef struct tmp_place {
    char dir[4200], file[4400];
} tmp_place;

/* The folder made (0, or -1 with err), removed with what it holds; HDF5's own file lock
 * off (the temporary is private; parts lock the final file themselves); the new file in
 * it, created exclusively. */
int h5__make_tmp(const char *final, tmp_place *t, char *err, size_t n);
void h5__drop_tmp(tmp_place *t);
hid_t h5__no_lock_fapl(void);
hid_t h5__create_tmp(const tmp_place *t);

/* A slab's chunks as HDF5 stores them, compressed by the thread that finished the slab
 * outside both locks (so parts compress at the same time), written with H5Dwrite_chunk. */
typedef struct enc_chunk {
    hsize_t off[4];
    uint32_t mask; /* filters skipped: bit 0 shuffle, bit 1 deflate */
    size_t size;
    unsigned char *buf;
} enc_chunk;

/* One slab's encoded chunks, waiting (a part's) for the next batch written to the file. */
typedef struct pend {
    int64_t lo[3];
    size_t count, bytes;
    enc_chunk *c;
    struct pend *next;
} pend;

struct h5out;

/* A writer of one dataset: alone (or with the other writers of its file in this process)
 * into a copy of the file, or one of several parts writing the file in place. */
typedef struct h5w {
    hid_t dset;
    char final[4096], name[4200], path[1024];
    tmp_place tmp;
    struct h5out *out; /* one writer: the copy it writes into */
    swi_store_spec spec;
    int64_t chunk[3];
    int force;
    /* one of several parts: the file is opened only while its lock is held */
    int shared, part, parts;
    pthread_mutex_t list_mu; /* the pending list */
    pend *head, **tail;
    size_t pending;
    double first_at;
} h5w;

/* The dataset's dimensions and chunk (planes first when more than one): the rank. */
int h5__dims_of(const swi_store_spec *spec, const int64_t chunk[3], hsize_t dims[4], hsize_t cdims[4]);
/* The dataset every writer makes (chunked, shuffled, deflated, fill 0), or -1. Caller
 * holds h5_lock. */
hid_t h5__make_dataset(hid_t file, const char *path, const swi_store_spec *spec, const int64_t chunk[3]);
void h5__free_pend(pend *p);
void h5__free_list(pend *p);
/* The chunks of the box [lo, hi) from buf, shuffled and deflated, into a new *out. */
swi_status h5__encode_slab(const h5w *w, const int64_t lo[3], const int64_t hi[3], const void *buf,
                           pend **out, char *err, size_t n);
/* A slab's encoded chunks written (H5Dwrite_chunk): 0 or -1. Caller holds h5_lock. */
int h5__write_chunks(hid_t d, const pend *p);

/* ---- several parts into one file (hdf5_lock.c) ---- */

/* A part's writer: the file created, or joined under its lock (its dataset marked
 * incomplete); slabs encoded and written in batches under the lock; at commit this part's
 * done flag, and the flags and marker removed by the part that finds them all set. */
swi_status h5__shared_create(h5w *w, int flags, char *err, size_t n);
swi_status h5__shared_write(h5w *w, const int64_t lo[3], const int64_t hi[3], const void *buf, char *err,
                            size_t n);
swi_status h5__shared_commit(h5w *w, char *err, size_t n);
/* w freed (a part's pending slabs dropped, unwritten). */
void h5__free_writer(h5w *w);

#endif /* SWI_HAVE_HDF5 */

#endif
