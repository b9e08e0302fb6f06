/*
 * swi_store.h -- chunked volume stores: Zarr v2 arrays, OME-Zarr 0.4 images and HDF5
 * datasets, read region by region and written chunk by chunk (part of swi_io).
 *
 * A store is named like a file; the name says the kind (swi_store_kind_of):
 *     x.zarr            a Zarr v2 array (a directory with .zarray); read also as Zarr v3
 *                       (zarr.json; not sharded); a group whose attributes hold OME-Zarr
 *                       multiscales is read as an OME-Zarr image, whatever its name
 *     x.ome.zarr        an OME-Zarr 0.4 image group (0.5 read too: Zarr v3): level 0 of its
 *                       first multiscale is read, with its scale and translation
 *                       (swi_store_geometry); written, a one-level 0.4 multiscale group
 *     x.ome.zarr/labels/NAME   written: an OME-Zarr labels group inside the image (also
 *                       x.zarr/labels/NAME), carrying the transformations of the image's
 *                       level of its shape; the image's own files are never changed,
 *                       labels/.zattrs gains NAME and keeps the rest
 *     x.h5:/path        the dataset /path of an HDF5 file (also .hdf5)
 *
 * Bounds. Files are opened without blocking and only when regular (a FIFO as a chunk or
 * metadata is refused at once); metadata files above 64 MiB, chunks above 1 GiB or far
 * larger than their array, and chunk files larger than their codec can make for one chunk
 * are refused before anything is allocated or read; every decoder writes into the chunk's
 * own size and refuses a stream that would inflate beyond it.
 *
 * Reading: any integer or float element type (Zarr: |u1 <i2 >f8 ... in C or F order, no filters;
 * compressors blosc, zstd, zlib, gzip or none; v3: the codecs transpose (C or F), bytes and
 * one of gzip, zstd, blosc, keys "c/0/0/0" or "0.0.0"), converted to float32 as a C cast would.
 * The volume is 3-D, or has leading axes of size 1 (an OME-Zarr t, c). swi_store_reader()
 * makes a store the swi_reader of an swi_tensor, so the engine reads only the windows it
 * needs; a small cache of decoded chunks serves the overlap of neighbouring windows.
 *
 *     // example:begin
 *     char err[512];
 *     swi_store *s;
 *     if (swi_store_open("ct.zarr", &s, err, sizeof err) != SWI_OK) {
 *         fprintf(stderr, "%s\n", err);
 *         return 1;
 *     }
 *     swi_reader rd = swi_store_reader(s);
 *     swi_tensor in = { .batch = 1, .channels = 1, .dims = 3, .reader = &rd };
 *     swi_store_size(s, in.size);
 *     int failed = swi_run(ctx, &params, &in, &net, outputs, n_outputs) != SWI_OK;
 *     if (failed) fprintf(stderr, "%s\n", swi_last_error(ctx));
 *     swi_store_close(s); // after the run: rd reads from s
 *     return failed;
 *     // example:end
 *
 * Writing: swi_store_create, then swi_store_on_region as the on_region callback of an
 * swi_output (user = the writer), then swi_store_commit. Regions are gathered into slabs: layers
 * of whole chunks along spec.slab_axis, across the part's box on the other axes, every
 * plane; a slab is compressed and written as soon as every voxel of
 * it has arrived, so memory stays bounded when the engine's outermost loop axis is the slab
 * axis (give it swi_plan.order[0]). Each
 * chunk file is written to a temporary name and renamed, so it appears whole or not at all.
 *
 * Replacing. An existing Zarr output is replaced only when it is a store of the kind swi
 * writes (a Zarr v2 array, or an OME-Zarr 0.4 image or labels group, holding nothing
 * else) and only with SWI_STORE_FORCE; anything else (a folder of other files, a link)
 * is refused with or without it and left as it was. A forced rewrite is written beside the
 * old store under a hidden name (.NAME.swi-new-XXXXXX, made exclusively; shared parts:
 * .NAME.swi-next, made or joined by each) and exchanged with it at the last commit
 * (renameat2 RENAME_EXCHANGE, else old aside, new in); until then, and after any failure
 * or abort, the old store is exactly as it was.
 *
 * Completion. A Zarr store being written holds the file .swi-incomplete; it is removed only
 * when every part has committed (each part leaves .swi-part-I-of-N when it commits, the last
 * one removes the marker), so a failed or unfinished run never looks finished;
 * swi_store_open refuses a store that still has it. A new Zarr store is made whole under a
 * hidden name beside its own (.NAME.swi-new-PID-N: marker, spec.job as .swi-job, metadata)
 * and renamed to its name in one step, which fails once another run's store is there: of
 * several runs creating one store at once exactly one does, and the others are refused
 * ("another run created it meanwhile"), unless they are parts of one job
 * (SWI_STORE_SHARED): those join the store, check that its metadata agree, and a part whose
 * job differs from the recorded one is refused.
 *
 * HDF5. An HDF5 output is one dataset of a file; the file's other datasets, groups and
 * attributes are never changed. A single writer never writes the existing file: it copies it
 * (a reflink or copy_file_range where the file system has them; a new file is created
 * instead) into a private temporary directory beside it, .NAME.swi-XXXXXX (mkdtemp: made
 * exclusively, unpredictable, mode 0700; nothing is created through a link), writes the
 * dataset into the copy and, at commit, renames the copy over the file if the file is still
 * the one copied (else the commit fails: another program wrote it meanwhile). An existing
 * dataset is refused without SWI_STORE_FORCE; with it, only a dataset of the kind swi writes
 * (chunked, shuffle + deflate, uint8/uint16/float32, 3 or 4 dimensions, no attributes but
 * swi_*) is replaced, never a group, a user's dataset, a file that is not HDF5, or a dataset
 * this process has open as an input. A failed, aborted or interrupted writer leaves the file
 * exactly as it was. Writers of one file open at once in a process (labels and scores)
 * share the copy: it is put in place when the last one commits (an earlier one's commit
 * returns SWI_OK and the file appears with the last), not at all if one fails or is aborted.
 * The cost: a read and a write of the whole file (none with reflinks), and its size in free
 * space until commit. Several HDF5 parts (SWI_STORE_SHARED) write one file in turn, in
 * place: each batch of finished slabs is written under an exclusive flock(2) of the file
 * (the lock HDF5's own readers take shared), opened, written and closed; the first part
 * links the file into place whole, the others check the dataset's shape, type and chunk;
 * the dataset carries the attribute swi_incomplete, and swi_parts_done (a byte per part),
 * until the last part commits and removes both. A failed part leaves the dataset marked
 * incomplete and the file's other objects as they were. Parts refuse a file this process
 * reads as an input (their lock would wait forever on the reader's).
 * HDF5_USE_FILE_LOCKING must be unset or FALSE.
 * Reading HDF5, every chunk is inflated within the size it must have (a chunk inflating
 * beyond it, of over 1 GiB, or with dimensions over the dataset's is refused, naming the
 * chunk); only the filters deflate and shuffle are read; a dataset whose data lie in other
 * files (external, virtual) or behind a soft or external link is refused; a .h5 that
 * is not a regular file (a FIFO) is refused without being opened.
 *
 * Errors: an swi_status and one line naming the store and the field in err (NULL: none),
 * as swi_io.h's: a file or directory of the store that cannot be opened, read, written,
 * renamed, removed or locked (a missing store or metadata file, a full disk) is SWI_ERR_IO;
 * metadata, chunks or an HDF5 file that are readable but corrupt, hostile or unsupported,
 * and a store that is incomplete or not one swi may replace, SWI_ERR_INVALID_ARG; memory
 * SWI_ERR_NOMEM. A writer's failure is kept and returned by swi_store_commit.
 */
#ifndef SWI_STORE_H
#define SWI_STORE_H

#include <stddef.h>
#include <stdint.h>

#include "swi.h"
#include "swi_io.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum swi_store_kind {
    SWI_STORE_NONE = 0, /**< not a store name */
    SWI_STORE_ZARR = 1, /**< x.zarr */
    SWI_STORE_OME = 2,  /**< x.ome.zarr, x.ome.zarr/labels/NAME */
    SWI_STORE_HDF5 = 3  /**< x.h5:/path, x.hdf5:/path */
} swi_store_kind;

/** The kind of store a name asks for (SWI_STORE_NONE for anything else). */
swi_store_kind swi_store_kind_of(const char *name);

/** Split an HDF5 dataset name, FILE.h5:/path (also .hdf5 and .H5; the '/' may be left out),
 *  at the first ".h5:", else the first ".hdf5:", else the first ".H5:". file (fn bytes)
 *  receives FILE, extension included; dset (dn bytes; NULL: not wanted) the dataset path,
 *  always starting with '/'. SWI_ERR_INVALID_ARG when name holds none of the three, the path
 *  is empty, or a part does not fit. */
swi_status swi_store_split_h5(const char *name, char *file, size_t fn, char *dset, size_t dn, char *err,
                              size_t errlen);

/** Is support for `kind` compiled in (Zarr and OME-Zarr: jansson + blosc + zstd + zlib;
 *  HDF5: libhdf5)? */
int swi_store_available(swi_store_kind kind);

/* ---- reading ---------------------------------------------------------------------- */

typedef struct swi_store swi_store;

/** Open a store for reading and check its metadata. *out receives it (NULL on failure). */
swi_status swi_store_open(const char *name, swi_store **out, char *err, size_t errlen);

/** Spatial size (3 axes, first slowest). */
void swi_store_size(const swi_store *s, int64_t size[3]);

/** Stored element type. */
swi_io_type swi_store_type(const swi_store *s);

/** Read the box [lo, hi) (3 axes, inside the volume) as float32 into dst, C order. */
swi_status swi_store_read_box(swi_store *s, const int64_t lo[3], const int64_t hi[3], float *dst, char *err,
                              size_t errlen);

/** OME-Zarr's scale and translation of the level read (coordinateTransformations of the
 *  dataset, then of the multiscale; the last three values, for the axes z, y, x, which are
 *  the store's axes 0, 1, 2), in millimetres (UDUNITS axis units converted; none: taken as
 *  mm). Returns 1 when the store has them; 0 with scale 1 and translation 0 otherwise. */
int swi_store_geometry(const swi_store *s, double scale[3], double translation[3]);

/** A NIfTI description of the store's grid for writing files of its results (NIfTI, NRRD,
 *  MetaImage): size, spacing = scale, affine diag(scale) with the translation as its last
 *  column -- store axis 0 (OME z) is NIfTI's i and the first world axis, unflipped; a store
 *  without geometry gets 1 mm axis-aligned voxels at the origin. */
swi_status swi_store_volume(const swi_store *s, swi_volume *v, char *err, size_t errlen);

/** The spatial chunk of the store read (its last three axes; a contiguous HDF5 dataset: the
 *  whole volume), each clipped to the size. */
void swi_store_chunk(const swi_store *s, int64_t chunk[3]);

/** An OME-Zarr image's non-spatial axes before z, y, x when each is t or c (time, channel)
 *  of size 1, as their names ("tc", "c", "t"), into lead (4 bytes); else "" (other stores,
 *  none, or axes of other kinds). */
void swi_store_lead_axes(const swi_store *s, char lead[4]);

/** The value absent chunks read as (Zarr fill_value; may be NaN or infinite; HDF5: 0). */
double swi_store_fill_value(const swi_store *s);

/** The store as an swi_reader (one channel, image 0); valid while s is open. A read that
 *  fails stops the run with SWI_ERR_READ and the store's message. */
swi_reader swi_store_reader(swi_store *s);

/** Close a store (NULL is fine). */
void swi_store_close(swi_store *s);

/* ---- writing ---------------------------------------------------------------------- */

typedef enum swi_store_codec {
    SWI_STORE_BLOSC = 0, /**< blosc with lz4 and byte shuffle (the default) */
    SWI_STORE_ZSTD = 1,
    SWI_STORE_ZLIB = 2,
    SWI_STORE_RAW = 3 /**< uncompressed */
} swi_store_codec;

typedef struct swi_store_spec {
    int64_t size[3];  /**< spatial size */
    int64_t planes;   /**< 1: a [size] array; > 1: [planes, size] (scores, classes first) */
    swi_dtype dtype;  /**< UINT8, UINT16 or FLOAT32 */
    int64_t chunk[3]; /**< spatial chunk; 0 = the default (see swi_store_default_chunk) */
    swi_store_codec codec;
    int labels;      /**< a label map: OME-Zarr writes image-label metadata */
    int64_t classes; /**< labels: the classes (written as metadata) */
    /** labels: the name of each label value 0..n_class_names-1 (borrowed: it must live until
     *  the writer commits); NULL: "background" for 0, "label_N" for N. A label store records
     *  one entry per class: OME-Zarr image-label "properties" ({label-value, name}) beside its
     *  "colors"; a Zarr array's .zattrs and an HDF5 dataset's attribute (a JSON string) under
     *  "swi_classes": [{"label-value": 0, "name": "background", "rgba": [0, 0, 0, 0]}, ...],
     *  the colours those of swi's previews and colour tables. */
    const char *const *class_names;
    int64_t n_class_names;
    /** OME-Zarr only, planes 1: the image's non-spatial axes before z, y, x, each of size 1
     *  ("tc", "c", "t": time, channel), as the image-label convention keeps them; "": none */
    char lead_axes[4];
    int slab_axis;   /**< the axis the writer's slabs are layers of chunks along: the
                                engine's outermost loop axis (swi_plan.order[0]), so slabs
                                complete in turn and memory stays bounded; default 0 */
    const char *job; /**< SWI_STORE_SHARED: an opaque fingerprint of the job (its inputs,
                          model, options; NULL: none). Recorded by the part that creates the
                          store; a part whose fingerprint differs is refused. */
} swi_store_spec;

/** Zero a spec and fill the defaults. */
void swi_store_spec_init(swi_store_spec *spec);

/** The chunk swi_store_create takes for a 0 chunk: 64 along every axis (clipped to the
 *  size), with the slab axis's lowered (halved) so a whole layer of chunks along it, every
 *  plane, stays within 256 MiB. */
void swi_store_default_chunk(const swi_store_spec *spec, int64_t chunk[3]);

typedef enum swi_store_flags {
    SWI_STORE_EXCLUSIVE = 0, /**< the store must not exist */
    SWI_STORE_FORCE = 1,     /**< an existing store of the same kind is rewritten */
    SWI_STORE_SHARED = 2     /**< one of several parts: create it, or join one of the same
                                  metadata that is still incomplete */
} swi_store_flags;

typedef struct swi_store_writer swi_store_writer;

/** Create (or join, SWI_STORE_SHARED) the store `name` for part `part` of `parts` covering
 *  the box [box_lo[d], box_hi[d]) of each axis d (both NULL: the whole volume). The box's
 *  bounds lie on chunk boundaries (or at the end of the axis), so each chunk file belongs
 *  to one part and parts never write the same file. An empty part (box_lo[d] == box_hi[d]
 *  for some d) writes only its commit. */
swi_status swi_store_create(const char *name, const swi_store_spec *spec, int flags, int part, int parts,
                            const int64_t box_lo[3], const int64_t box_hi[3], swi_store_writer **out,
                            char *err, size_t errlen);

/** The refusal swi_store_create makes of an existing output, creating nothing: SWI_OK when
 *  name is absent or an empty folder, or (force) a Zarr store of the kind swi writes;
 *  SWI_ERR_INVALID_ARG with a line naming it otherwise (a folder of other files, a link, a
 *  file). An HDF5 name is SWI_OK (its writer checks the dataset when it is made). */
swi_status swi_store_check_output(const char *name, int force, char *err, size_t errlen);

/** Create the metadata and the incomplete marker only (`swi ... --shard init`). */
swi_status swi_store_create_metadata(const char *name, const swi_store_spec *spec, int flags, char *err,
                                     size_t errlen);

/** The chunk the writer uses. */
void swi_store_writer_chunk(const swi_store_writer *w, int64_t chunk[3]);

/** swi_region_fn for swi_output.on_region with user = the writer. Thread-safe. Returns
 *  non-zero after a failure (its message: swi_store_writer_error). */
int swi_store_on_region(void *user, const swi_region *region);

/** 1 when a writer that does not commit leaves the previous output exactly as it was: a
 *  replacement of an existing Zarr store (SWI_STORE_FORCE; shared: until the last part
 *  commits), and every single HDF5 writer (it writes a copy of the file); 0 when w writes the
 *  store itself, which a writer that does not commit leaves marked incomplete. */
int swi_store_writer_replaces(const swi_store_writer *w);

/** The hidden folder beside the output that w alone writes in until it commits (the
 *  replacement of an existing Zarr store, `.NAME.swi-new-XXXXXX`; a single HDF5 writer's copy
 *  of the file, `.NAME.swi-XXXXXX`), or NULL (w writes the store itself, or shares it with
 *  other parts). Valid until w commits or is aborted, which remove it. An application that
 *  may end its process without either (a forced stop on a signal) copies the name and
 *  removes that folder itself; removing it at any time leaves every output as it was. */
const char *swi_store_writer_temporary(const swi_store_writer *w);

/** The writer's first failure ("" if none). */
const char *swi_store_writer_error(const swi_store_writer *w);

/** Check every voxel of the part arrived and was written, then mark the part done (the
 *  last part to commit marks the store complete). Frees w in every case. */
swi_status swi_store_commit(swi_store_writer *w, char *err, size_t errlen);

/** Drop a writer without committing: the store stays marked incomplete (a single HDF5
 *  writer: its temporary is removed and the file is as it was). NULL is fine. */
void swi_store_abort(swi_store_writer *w);

#ifdef __cplusplus
}
#endif
#endif /* SWI_STORE_H */
