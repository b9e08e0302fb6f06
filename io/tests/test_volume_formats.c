/*
 * test_volume_formats.c -- swi_volume_format_of, the one reading of a name's suffix: every
 * suffix in either case, names it must not take for a format (".gz" alone, dots in
 * directories, a suffix not at the end), the suffix, family and writability of each
 * format; and the writers handed a format: they write that format whatever the name's
 * suffix, byte for byte what the name-classifying writers write for a name of that format,
 * and refuse a format they do not write with the message a name without one gets.
 */
#define _POSIX_C_SOURCE 200809L
#include "swi_io.h"

#include "check.h"

#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static const struct {
    const char *name;
    swi_volume_format want;
} NAMES[] = {
    /* every suffix */
    {"seg.nii", SWI_VOLUME_NIFTI},
    {"seg.nii.gz", SWI_VOLUME_NIFTI_GZ},
    {"seg.nrrd", SWI_VOLUME_NRRD},
    {"seg.nhdr", SWI_VOLUME_NHDR},
    {"seg.mha", SWI_VOLUME_MHA},
    {"seg.mhd", SWI_VOLUME_MHD},
    {"seg.dcm", SWI_VOLUME_DICOM_SEG},
    {"seg.png", SWI_VOLUME_PNG},
    /* compared case-insensitively */
    {"SEG.NII.GZ", SWI_VOLUME_NIFTI_GZ},
    {"seg.Nii.Gz", SWI_VOLUME_NIFTI_GZ},
    {"seg.nii.GZ", SWI_VOLUME_NIFTI_GZ},
    {"Seg.NII", SWI_VOLUME_NIFTI},
    {"seg.NRRD", SWI_VOLUME_NRRD},
    {"seg.NHDR", SWI_VOLUME_NHDR},
    {"seg.Mha", SWI_VOLUME_MHA},
    {"seg.MHD", SWI_VOLUME_MHD},
    {"seg.DCM", SWI_VOLUME_DICOM_SEG},
    {"seg.PNG", SWI_VOLUME_PNG},
    /* .nii.gz is one suffix; .gz alone, or after anything but .nii, is none */
    {"seg.gz", SWI_VOLUME_UNKNOWN},
    {"seg.tar.gz", SWI_VOLUME_UNKNOWN},
    {"seg.nrrd.gz", SWI_VOLUME_UNKNOWN},
    {"seg.niigz", SWI_VOLUME_UNKNOWN},
    {"seg.nii.gz.bak", SWI_VOLUME_UNKNOWN},
    {"seg.nii~", SWI_VOLUME_UNKNOWN},
    {"seg.nii ", SWI_VOLUME_UNKNOWN},
    {"seg_nii", SWI_VOLUME_UNKNOWN},
    {"seg.ni", SWI_VOLUME_UNKNOWN},
    /* only the end of the name counts: dots in directories do not */
    {"/data/v1.nii/seg.mha", SWI_VOLUME_MHA},
    {"study.nii.gz/seg", SWI_VOLUME_UNKNOWN},
    {"a.nrrd/b.nii.gz", SWI_VOLUME_NIFTI_GZ},
    {"out.mha/", SWI_VOLUME_UNKNOWN},
    {"./seg.nii", SWI_VOLUME_NIFTI},
    {"../x.y.z/seg.v2.nrrd", SWI_VOLUME_NRRD},
    /* a bare suffix is still that suffix */
    {".nii", SWI_VOLUME_NIFTI},
    {".nii.gz", SWI_VOLUME_NIFTI_GZ},
    /* stores and other names: no file format (a store named like a file is the caller's
     * to tell first, with swi_store_kind_of) */
    {"seg.zarr", SWI_VOLUME_UNKNOWN},
    {"seg.ome.zarr/labels/a", SWI_VOLUME_UNKNOWN},
    {"seg.h5:/labels", SWI_VOLUME_UNKNOWN},
    {"x.h5:/seg.nii", SWI_VOLUME_NIFTI},
    {"seg.html", SWI_VOLUME_UNKNOWN},
    {"seg.onnx", SWI_VOLUME_UNKNOWN},
    {"seg", SWI_VOLUME_UNKNOWN},
    {"", SWI_VOLUME_UNKNOWN},
};

static void classifier(void) {
    for (size_t i = 0; i < sizeof NAMES / sizeof *NAMES; i++) {
        swi_volume_format f = swi_volume_format_of(NAMES[i].name);
        CHECK(f == NAMES[i].want, "'%s': %d, expected %d", NAMES[i].name, (int)f, (int)NAMES[i].want);
        CHECK(swi_io_format_of(NAMES[i].name) == swi_volume_format_family(f), "'%s': swi_io_format_of",
              NAMES[i].name);
    }
    CHECK(swi_volume_format_of(NULL) == SWI_VOLUME_UNKNOWN, "NULL");
    CHECK(swi_io_format_of(NULL) == SWI_IO_UNKNOWN, "NULL's family");

    /* each format's suffix names it, and nothing else does */
    const struct {
        swi_volume_format f;
        const char *suffix;
        swi_io_format family;
        int writable;
    } F[] = {
        {SWI_VOLUME_UNKNOWN, "", SWI_IO_UNKNOWN, 0},
        {SWI_VOLUME_NIFTI, ".nii", SWI_IO_NIFTI, 1},
        {SWI_VOLUME_NIFTI_GZ, ".nii.gz", SWI_IO_NIFTI, 1},
        {SWI_VOLUME_NRRD, ".nrrd", SWI_IO_NRRD, 1},
        {SWI_VOLUME_NHDR, ".nhdr", SWI_IO_NRRD, 0},
        {SWI_VOLUME_MHA, ".mha", SWI_IO_METAIMAGE, 1},
        {SWI_VOLUME_MHD, ".mhd", SWI_IO_METAIMAGE, 0},
        {SWI_VOLUME_DICOM_SEG, ".dcm", SWI_IO_DICOM_SEG, 1},
        {SWI_VOLUME_PNG, ".png", SWI_IO_PNG, 0},
    };
    for (size_t i = 0; i < sizeof F / sizeof *F; i++) {
        const char *s = swi_volume_format_suffix(F[i].f);
        CHECK(strcmp(s, F[i].suffix) == 0, "format %d's suffix '%s', expected '%s'", (int)F[i].f, s,
              F[i].suffix);
        CHECK(swi_volume_format_family(F[i].f) == F[i].family, "format %d's family", (int)F[i].f);
        CHECK(swi_volume_format_writable(F[i].f) == F[i].writable, "format %d writable", (int)F[i].f);
        char name[64];
        snprintf(name, sizeof name, "case_0%s", s);
        CHECK(swi_volume_format_of(name) == F[i].f, "'%s' back to format %d", name, (int)F[i].f);
    }
    const swi_volume_format outside = (swi_volume_format)99;
    CHECK(strcmp(swi_volume_format_suffix(outside), "") == 0, "a value outside the enum has no suffix");
    CHECK(swi_volume_format_family(outside) == SWI_IO_UNKNOWN, "a value outside the enum has no family");
    CHECK(!swi_volume_format_writable(outside), "a value outside the enum is not written");
}

static char dir[256];

static const char *at(const char *leaf) {
    static char p[8][512];
    static int k;
    k = (k + 1) % 8;
    snprintf(p[k], sizeof p[k], "%s/%s", dir, leaf);
    return p[k];
}

/* The whole file at path into buf (cap bytes); its length, or -1. */
static long slurp(const char *path, unsigned char *buf, size_t cap) {
    FILE *f = fopen(path, "rb");
    if (!f) return -1;
    size_t len = fread(buf, 1, cap, f);
    int more = fgetc(f) != EOF;
    fclose(f);
    return more ? -1 : (long)len;
}

static int create(const char *path) { return open(path, O_WRONLY | O_CREAT | O_TRUNC, 0666); }

enum { NI = 5, NJ = 4, NK = 3, VOX = NI * NJ * NK };

/* f written under a misleading name equals the file a name of f's suffix gives, starts as
 * f's files do, and reads back. */
static void writes_format(const swi_volume *like, const float *data, swi_volume_format f,
                          const char *misleading, const char *magic, size_t magic_len) {
    const char *suffix = swi_volume_format_suffix(f);
    char leaf[64], err[1024] = "";
    snprintf(leaf, sizeof leaf, "by_name%s", suffix);
    const char *by_name = at(leaf);
    snprintf(leaf, sizeof leaf, "by_format%s", suffix);
    const char *by_format = at(leaf);
    CHECK(swi_volume_write_fd(create(by_name), by_name, like, data, SWI_DTYPE_FLOAT32, SWI_IO_IMAGE, 1, 1,
                              NULL, err, sizeof err) == SWI_OK,
          "%s by name: %s", suffix, err);
    CHECK(swi_volume_write_as_fd(create(by_format), f, misleading, like, data, SWI_DTYPE_FLOAT32,
                                 SWI_IO_IMAGE, 1, 1, NULL, err, sizeof err) == SWI_OK,
          "%s as '%s': %s", suffix, misleading, err);
    static unsigned char a[1 << 16], b[1 << 16];
    long la = slurp(by_name, a, sizeof a), lb = slurp(by_format, b, sizeof b);
    CHECK(la > 0 && la == lb && memcmp(a, b, (size_t)la) == 0, "%s: %ld and %ld bytes, not the same", suffix,
          la, lb);
    CHECK(lb >= (long)magic_len && memcmp(b, magic, magic_len) == 0,
          "%s written as '%s' does not start as %s", suffix, misleading, suffix);
    swi_volume v;
    float back[VOX];
    CHECK(swi_volume_open(by_format, &v, err, sizeof err) == SWI_OK &&
              swi_volume_read(&v, back, NULL, err, sizeof err) == SWI_OK &&
              memcmp(back, data, sizeof back) == 0,
          "%s read back: %s", suffix, err);
}

/* A format the writers do not write, refused as a name without one is. */
static void refused(const swi_volume *like, const float *data, swi_volume_format f) {
    char err[1024] = "";
    const char *path = at("refused.out");
    swi_status st = swi_volume_write_as_fd(create(path), f, "labels.nii", like, data, SWI_DTYPE_FLOAT32,
                                           SWI_IO_IMAGE, 1, 1, NULL, err, sizeof err);
    CHECK(st == SWI_ERR_INVALID_ARG &&
              strcmp(err, "labels.nii: no volume format for this name (.nii, .nii.gz, .nrrd, .mha)") == 0,
          "format %d: %s (%s)", (int)f, swi_status_name(st), err);
    st = swi_volume_write_labels_as_fd(create(path), f, "labels.nii", like, data, SWI_DTYPE_UINT8, 2, NULL,
                                       NULL, err, sizeof err);
    CHECK(st == SWI_ERR_INVALID_ARG && strstr(err, "no volume format for this name"), "labels, format %d: %s",
          (int)f, err);
}

static void writers(void) {
    if (!swi_io_available(SWI_IO_NIFTI)) return;
    const char *t = getenv("TMPDIR");
    snprintf(dir, sizeof dir, "%s/swi-formats-XXXXXX", t && *t ? t : "/tmp");
    if (!mkdtemp(dir)) {
        perror("mkdtemp");
        CHECK(0, "no temporary directory");
        return;
    }
    swi_volume like;
    char err[1024] = "";
    const int64_t size[3] = {NI, NJ, NK};
    const double spacing[3] = {1.5, 1, 2};
    CHECK(swi_volume_make(&like, size, spacing, err, sizeof err) == SWI_OK, "make: %s", err);
    float data[VOX];
    for (int i = 0; i < VOX; i++) data[i] = (float)(i % 7) - 2.5f;

    writes_format(&like, data, SWI_VOLUME_NIFTI, "labels.nii.gz", "\x5c\x01\0\0", 4); /* sizeof_hdr 348 */
    writes_format(&like, data, SWI_VOLUME_NIFTI_GZ, "labels.nii", "\x1f\x8b", 2);
    if (swi_io_available(SWI_IO_NRRD)) {
        writes_format(&like, data, SWI_VOLUME_NRRD, "labels.mha", "NRRD", 4);
        writes_format(&like, data, SWI_VOLUME_MHA, "labels.nii.gz", "ObjectType", 10);
    }

    /* formats the writers do not write, whatever the name says */
    const swi_volume_format no[] = {SWI_VOLUME_UNKNOWN, SWI_VOLUME_NHDR, SWI_VOLUME_MHD, SWI_VOLUME_PNG,
                                    (swi_volume_format)99};
    for (size_t i = 0; i < sizeof no / sizeof *no; i++) refused(&like, data, no[i]);

    /* a DICOM SEG holds a label map: scores refused before the format's library is asked */
    swi_status st =
        swi_volume_write_as_fd(create(at("s.dcm")), SWI_VOLUME_DICOM_SEG, "scores.nii", &like, data,
                               SWI_DTYPE_FLOAT32, SWI_IO_SCORES, 1, 2, NULL, err, sizeof err);
    CHECK(st == SWI_ERR_INVALID_ARG && strstr(err, "scores.nii: a DICOM SEG (.dcm) holds a label map"),
          "scores as DICOM SEG: %s", err);
    /* the arguments, named by the call that was made */
    st = swi_volume_write_as_fd(create(at("n.nii")), SWI_VOLUME_NIFTI, NULL, &like, data, SWI_DTYPE_FLOAT32,
                                SWI_IO_IMAGE, 1, 1, NULL, err, sizeof err);
    CHECK(st == SWI_ERR_INVALID_ARG && strcmp(err, "swi_volume_write_as_fd: name is NULL") == 0, "%s", err);
    st = swi_volume_write_fd(create(at("n.nii")), NULL, &like, data, SWI_DTYPE_FLOAT32, SWI_IO_IMAGE, 1, 1,
                             NULL, err, sizeof err);
    CHECK(st == SWI_ERR_INVALID_ARG && strcmp(err, "swi_volume_write_fd: name is NULL") == 0, "%s", err);

    char cmd[700];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", dir);
}

int main(void) {
    classifier();
    writers();
    return check_report("io_volume_formats");
}
