/*
 * test_io_errors.c -- which status a file failure gets: a file the system cannot open,
 * read or write (missing, a directory, unreadable, under a non-directory, a write to
 * /dev/full) is SWI_ERR_IO; a readable file whose content is corrupt is
 * SWI_ERR_INVALID_ARG. NIfTI, NRRD, Zarr and HDF5 where built in.
 */
#define _POSIX_C_SOURCE 200809L
#include "swi_io.h"
#include "swi_store.h"

#include "check.h"

#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static char dir[256];

static const char *at(const char *leaf) {
    static char p[8][512];
    static int k;
    k = (k + 1) % 8;
    snprintf(p[k], sizeof p[k], "%s/%s", dir, leaf);
    return p[k];
}

static void put(const char *path, const void *data, size_t len) {
    FILE *f = fopen(path, "wb");
    CHECK(f && fwrite(data, 1, len, f) == len && fclose(f) == 0, "cannot make %s", path);
}

static void volume_io(const char *what, const char *path, swi_status want) {
    swi_volume v;
    char err[1024] = "";
    swi_status st = swi_volume_open(path, &v, err, sizeof err);
    CHECK(st == want && (want == SWI_OK || err[0]), "%s (%s): %s, expected %s (%s)", what, path,
          swi_status_name(st), swi_status_name(want), err);
}

static void store_io(const char *what, const char *name, swi_status want) {
    swi_store *s = NULL;
    char err[1024] = "";
    swi_status st = swi_store_open(name, &s, err, sizeof err);
    CHECK(st == want && err[0], "%s (%s): %s, expected %s (%s)", what, name, swi_status_name(st),
          swi_status_name(want), err);
    swi_store_close(s);
}

/* The file cannot be read by this user: only meaningful when not root (root reads it). */
static int unreadable(const char *path) {
    if (geteuid() == 0) return 0;
    return chmod(path, 0) == 0;
}

static void nifti(void) {
    if (!swi_io_available(SWI_IO_NIFTI)) return;
    volume_io("a missing .nii", at("absent.nii"), SWI_ERR_IO);
    /* a directory is read as a DICOM series: one holding none is refused for what it holds,
     * one that cannot be listed cannot be read */
    CHECK(mkdir(at("folder.nii"), 0777) == 0, "mkdir");
    volume_io("a directory without a series", at("folder.nii"), SWI_ERR_INVALID_ARG);
    if (unreadable(at("folder.nii")))
        volume_io("a directory that cannot be listed", at("folder.nii"), SWI_ERR_IO);
    put(at("plain"), "x", 1);
    volume_io("a .nii under a regular file", at("plain/x.nii"), SWI_ERR_IO);
    unsigned char junk[400];
    memset(junk, 0x5a, sizeof junk);
    put(at("corrupt.nii"), junk, sizeof junk);
    volume_io("a corrupt header", at("corrupt.nii"), SWI_ERR_INVALID_ARG);
    put(at("short.nii"), junk, 10);
    volume_io("a file shorter than a header", at("short.nii"), SWI_ERR_INVALID_ARG);

    /* a real volume, written, read back, then made unreadable */
    swi_volume like;
    char err[1024] = "";
    const int64_t size[3] = {4, 3, 2};
    const double spacing[3] = {1, 1, 1};
    CHECK(swi_volume_make(&like, size, spacing, err, sizeof err) == SWI_OK, "make: %s", err);
    unsigned char labels[24] = {0};
    int fd = open(at("ok.nii"), O_WRONLY | O_CREAT | O_TRUNC, 0666);
    CHECK(swi_volume_write_fd(fd, "ok.nii", &like, labels, SWI_DTYPE_UINT8, SWI_IO_LABELS, 1, 2, NULL, err,
                              sizeof err) == SWI_OK,
          "write ok.nii: %s", err);
    volume_io("a good .nii", at("ok.nii"), SWI_OK);
    if (unreadable(at("ok.nii"))) volume_io("an unreadable .nii", at("ok.nii"), SWI_ERR_IO);

    /* a write the device refuses: SWI_ERR_IO, plain and compressed */
    const char *names[] = {"full.nii", "full.nii.gz"};
    for (int k = 0; k < 2; k++) {
        fd = open("/dev/full", O_WRONLY);
        if (fd < 0) break;
        err[0] = '\0';
        swi_status st = swi_volume_write_fd(fd, names[k], &like, labels, SWI_DTYPE_UINT8, SWI_IO_LABELS, 1, 2,
                                            NULL, err, sizeof err);
        CHECK(st == SWI_ERR_IO && strstr(err, "write failed"), "%s to /dev/full: %s (%s)", names[k],
              swi_status_name(st), err);
    }
    if (swi_io_available(SWI_IO_PNG) && (fd = open("/dev/full", O_WRONLY)) >= 0) {
        float img[24] = {0};
        err[0] = '\0';
        swi_status st = swi_io_preview_write_fd(fd, "full.png", size, img, labels, 1, err, sizeof err);
        CHECK(st == SWI_ERR_IO && err[0], "preview to /dev/full: %s (%s)", swi_status_name(st), err);
    }
}

static void nrrd(void) {
    if (!swi_io_available(SWI_IO_NRRD)) return;
    volume_io("a missing .nrrd", at("absent.nrrd"), SWI_ERR_IO);
    const char bad[] = "this is no NRRD header\n\n";
    put(at("corrupt.nrrd"), bad, sizeof bad - 1);
    volume_io("a corrupt .nrrd", at("corrupt.nrrd"), SWI_ERR_INVALID_ARG);
    put(at("locked.nrrd"), bad, sizeof bad - 1);
    if (unreadable(at("locked.nrrd"))) volume_io("an unreadable .nrrd", at("locked.nrrd"), SWI_ERR_IO);
}

static void zarr(void) {
    if (!swi_store_available(SWI_STORE_ZARR)) return;
    store_io("a missing .zarr", at("absent.zarr"), SWI_ERR_IO);
    CHECK(mkdir(at("empty.zarr"), 0777) == 0, "mkdir");
    store_io("a .zarr without metadata", at("empty.zarr"), SWI_ERR_IO);
    CHECK(mkdir(at("corrupt.zarr"), 0777) == 0, "mkdir");
    put(at("corrupt.zarr/.zarray"), "{not json", 9);
    store_io("corrupt metadata", at("corrupt.zarr"), SWI_ERR_INVALID_ARG);
    CHECK(mkdir(at("locked.zarr"), 0777) == 0, "mkdir");
    put(at("locked.zarr/.zarray"), "{}", 2);
    if (unreadable(at("locked.zarr/.zarray"))) store_io("unreadable metadata", at("locked.zarr"), SWI_ERR_IO);

    /* a store under a regular file cannot be created */
    swi_store_spec spec;
    swi_store_spec_init(&spec);
    spec.size[0] = spec.size[1] = spec.size[2] = 4;
    spec.dtype = SWI_DTYPE_UINT8;
    swi_store_writer *w = NULL;
    char err[1024] = "";
    swi_status st = swi_store_create(at("plain/out.zarr"), &spec, SWI_STORE_EXCLUSIVE, 0, 1, NULL, NULL, &w,
                                     err, sizeof err);
    CHECK(st == SWI_ERR_IO && err[0], "a .zarr under a regular file: %s (%s)", swi_status_name(st), err);
    swi_store_abort(w);
}

static void hdf5(void) {
    if (!swi_store_available(SWI_STORE_HDF5)) return;
    char name[600];
    snprintf(name, sizeof name, "%s:/x", at("absent.h5"));
    store_io("a missing .h5", name, SWI_ERR_IO);
    CHECK(mkdir(at("folder.h5"), 0777) == 0, "mkdir");
    snprintf(name, sizeof name, "%s:/x", at("folder.h5"));
    store_io("a directory named .h5", name, SWI_ERR_IO);
    unsigned char junk[600];
    memset(junk, 0x5a, sizeof junk);
    put(at("corrupt.h5"), junk, sizeof junk);
    snprintf(name, sizeof name, "%s:/x", at("corrupt.h5"));
    store_io("a corrupt .h5", name, SWI_ERR_INVALID_ARG);
    put(at("locked.h5"), junk, sizeof junk);
    snprintf(name, sizeof name, "%s:/x", at("locked.h5"));
    if (unreadable(at("locked.h5"))) store_io("an unreadable .h5", name, SWI_ERR_IO);
}

int main(void) {
    const char *t = getenv("TMPDIR");
    snprintf(dir, sizeof dir, "%s/swi-ioerr-XXXXXX", t && *t ? t : "/tmp");
    if (!mkdtemp(dir)) {
        perror("mkdtemp");
        return 1;
    }
    nifti();
    nrrd();
    zarr();
    hdf5();
    char cmd[700];
    snprintf(cmd, sizeof cmd, "chmod -R u+rwx '%s' && rm -rf '%s'", dir, dir);
    if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", dir);
    return check_report("io_errors");
}
