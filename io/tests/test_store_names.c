/*
 * test_store_names.c -- swi_store_split_h5, the one split of x.h5:/path names that the
 * HDF5 store and `swi segment` share: the file and dataset parts, names that are not HDF5
 * datasets, and the buffer limits.
 */
#include "swi_store.h"

#include "check.h"

#include <string.h>

/* name splits into want_file and want_dset */
static void split_ok(const char *name, const char *want_file, const char *want_dset) {
    char file[64] = "", dset[64] = "", err[256] = "";
    CHECK(swi_store_split_h5(name, file, sizeof file, dset, sizeof dset, err, sizeof err) == SWI_OK &&
              strcmp(file, want_file) == 0 && strcmp(dset, want_dset) == 0,
          "'%s': '%s' and '%s', expected '%s' and '%s' (%s)", name, file, dset, want_file, want_dset, err);
    CHECK(swi_store_kind_of(name) == SWI_STORE_HDF5, "'%s' split but is not an HDF5 store name", name);
    /* the file alone */
    CHECK(swi_store_split_h5(name, file, sizeof file, NULL, 0, NULL, 0) == SWI_OK &&
              strcmp(file, want_file) == 0,
          "'%s' without dset", name);
}

static void split_refused(const char *name) {
    char file[64], dset[64], err[256] = "";
    CHECK(swi_store_split_h5(name, file, sizeof file, dset, sizeof dset, err, sizeof err) ==
                  SWI_ERR_INVALID_ARG &&
              strstr(err, "name an HDF5 dataset as FILE.h5:/path") && strstr(err, name),
          "'%s' refused: %s", name, err);
    CHECK(swi_store_split_h5(name, file, sizeof file, NULL, 0, NULL, 0) == SWI_ERR_INVALID_ARG,
          "'%s' refused without err", name);
}

int main(void) {
    split_ok("a.h5:/x", "a.h5", "/x");
    split_ok("a.hdf5:/g/x", "a.hdf5", "/g/x");
    split_ok("A.H5:/x", "A.H5", "/x");
    split_ok("a.h5:x", "a.h5", "/x"); /* the leading '/' supplied */
    split_ok("dir/a.h5:/g/x", "dir/a.h5", "/g/x");
    /* a drive letter's ':' is not the split (a split at the first ":/" would give "C") */
    split_ok("C:/data/a.h5:/seg", "C:/data/a.h5", "/seg");
    /* the first ".h5:" wins, and is searched before ".hdf5:" */
    split_ok("a.h5:/b.h5:/x", "a.h5", "/b.h5:/x");
    split_ok("d.hdf5:/g.h5:/x", "d.hdf5:/g.h5", "/x");

    /* kinds by name: an image's labels group, also under an image named x.zarr */
    CHECK(swi_store_kind_of("a.ome.zarr/labels/seg") == SWI_STORE_OME, "a.ome.zarr/labels/seg");
    CHECK(swi_store_kind_of("pub.zarr/labels/seg/") == SWI_STORE_OME, "pub.zarr/labels/seg/");
    CHECK(swi_store_kind_of("pub.zarr/labels/seg/0") == SWI_STORE_NONE, "pub.zarr/labels/seg/0");
    CHECK(swi_store_kind_of("pub.zarr") == SWI_STORE_ZARR, "pub.zarr");

    split_refused("a.h5");          /* no ':' */
    split_refused("volume.nii.gz"); /* no ':' */
    split_refused("C:/data/a.nii"); /* a ':', but no .h5 or .hdf5 before it */
    split_refused("x.zarr:/a");     /* a ':' after another extension */
    split_refused("a.h5x:/d");      /* .h5 not right before the ':' */
    split_refused("a.hdf:/d");
    split_refused("a.h5:"); /* an empty path */
    split_refused("");

    /* the buffers: FILE and its terminator, the path with its '/' and terminator */
    char file[8], dset[8];
    CHECK(swi_store_split_h5("abc.h5:/x", file, 7, dset, sizeof dset, NULL, 0) == SWI_OK &&
              strcmp(file, "abc.h5") == 0,
          "a file of 6 in 7 bytes");
    CHECK(swi_store_split_h5("abc.h5:/x", file, 6, dset, sizeof dset, NULL, 0) == SWI_ERR_INVALID_ARG,
          "a file of 6 in 6 bytes");
    CHECK(swi_store_split_h5("a.h5:x", file, sizeof file, dset, 3, NULL, 0) == SWI_OK &&
              strcmp(dset, "/x") == 0,
          "a path of 1, given its '/', in 3 bytes");
    CHECK(swi_store_split_h5("a.h5:/x", file, sizeof file, dset, 3, NULL, 0) == SWI_ERR_INVALID_ARG,
          "a path of 2 in 3 bytes: the limit counts a '/' that is there");
    CHECK(swi_store_split_h5("a.h5:/x", file, sizeof file, dset, 4, NULL, 0) == SWI_OK &&
              strcmp(dset, "/x") == 0,
          "a path of 2 in 4 bytes");
    CHECK(swi_store_split_h5(NULL, file, sizeof file, dset, sizeof dset, NULL, 0) == SWI_ERR_INVALID_ARG,
          "NULL refused");
    return check_report("test_store_names");
}
