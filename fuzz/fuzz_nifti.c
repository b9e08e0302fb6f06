/*
 * fuzz_nifti.c -- the NIfTI path of swi_io (io/nifti_read.c, io/nifti_write.c): header
 * validation, voxel reading through niftilib, and the writer, as one round trip.
 *
 * Each input is a file: gzip data (it starts with 1f 8b) is stored as in.nii.gz, anything
 * else as in.nii. swi_volume_open must refuse it with a message or describe a volume that
 * is consistent with itself; a small accepted volume is then read (swi_volume_read must
 * succeed or fail with a message), written back as float32 and as uint8 labels, plain or
 * gzipped (swi_volume_write_fd), and the written file must open and read back to exactly the
 * values written. Non-finite voxels never leave the reader: swi_volume_read_counted stores
 * them as 0 and counts them.
 */
#include "swi_io.h"

#include "fuzz_common.h"

#include <math.h>
#include <zlib.h>

#define CHECK(cond, ...) FUZZ_CHECK("fuzz_nifti", cond, __VA_ARGS__)
#define SWI_ERRLEN 768

/* Largest volume the target reads (the CLI itself reads up to 2^40 voxels). */
#define MAX_READ_VOXELS (1 << 18)

static int same_float(float a, float b) {
    if (isnan(a) || isnan(b)) return isnan(a) && isnan(b);
    return memcmp(&a, &b, sizeof a) == 0;
}

/* A valid 3x1x1 float32 NIfTI-1 volume of 12345s at fuzz_dir()/name, gzipped if gz. */
static void plant_decoy(const char *name, int gz) {
    unsigned char file[352 + 12];
    memset(file, 0, sizeof file);
    int32_t i32 = 348;
    memcpy(file, &i32, 4);
    int16_t dim[8] = {3, 3, 1, 1, 1, 1, 1, 1}, dt[2] = {16, 32};
    memcpy(file + 40, dim, sizeof dim);
    memcpy(file + 70, dt, sizeof dt);
    float f = 352, one = 1, v = 12345;
    memcpy(file + 108, &f, 4);
    memcpy(file + 112, &one, 4);
    memcpy(file + 344, "n+1", 4);
    for (int i = 0; i < 3; i++) memcpy(file + 352 + 4 * i, &v, 4);
    char path[600];
    snprintf(path, sizeof path, "%s/%s", fuzz_dir(), name);
    if (gz) {
        gzFile g = gzopen(path, "wb");
        CHECK(g != NULL && gzwrite(g, file, sizeof file) == (int)sizeof file && gzclose(g) == Z_OK,
              "writing the decoy %s", path);
    } else {
        fuzz_write_file(name, file, sizeof file, path, sizeof path);
    }
}

static void round_trip(const swi_volume *v, const float *vox, int64_t n, int gz, int labels) {
    char path[600], err[SWI_ERRLEN];
    /* A different volume lies beside the output under the sibling name (X.nii for
     * X.nii.gz and the other way round): niftilib, asked for one by its base name, once
     * read the other's voxels (fixed in 28bbd26); the round trip must see its own. */
    snprintf(path, sizeof path, "%s/out.nii%s", fuzz_dir(), gz ? ".gz" : "");
    plant_decoy(gz ? "out.nii" : "out.nii.gz", !gz);
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    CHECK(fd >= 0, "%s", path);
    void *data = (void *)vox;
    uint8_t *lab = NULL;
    if (labels) {
        lab = malloc((size_t)n);
        for (int64_t i = 0; i < n; i++)
            lab[i] = isfinite(vox[i]) ? (uint8_t)((int64_t)fabsf(fmodf(vox[i], 7.0f)) % 7) : 0;
        data = lab;
    }
    err[0] = '\0';
    int rc =
        swi_volume_write_fd(fd, path, v, data, labels ? SWI_DTYPE_UINT8 : SWI_DTYPE_FLOAT32,
                            labels ? SWI_IO_LABELS : SWI_IO_IMAGE, 1, labels ? 7 : 1, NULL, err, SWI_ERRLEN);
    CHECK(rc == 0, "writing a volume that was read: %s", err);
    swi_volume w;
    rc = swi_volume_open(path, &w, err, SWI_ERRLEN);
    CHECK(rc == 0, "reopening what was written: %s", err);
    CHECK(w.size[0] == v->size[0] && w.size[1] == v->size[1] && w.size[2] == v->size[2],
          "size changed: %lldx%lldx%lld", (long long)w.size[0], (long long)w.size[1], (long long)w.size[2]);
    CHECK(w.fmt.nifti.version == v->fmt.nifti.version, "version %d -> %d", v->fmt.nifti.version,
          w.fmt.nifti.version);
    CHECK(memcmp(w.affine, v->affine, sizeof w.affine) == 0, "geometry changed");
    float *back = malloc((size_t)n * sizeof(float));
    rc = swi_volume_read(&w, back, NULL, err, SWI_ERRLEN);
    CHECK(rc == 0, "reading back what was written: %s", err);
    for (int64_t i = 0; i < n; i++) {
        /* the reader stores non-finite values as 0 (none should have been written) */
        float want = labels ? (float)lab[i] : isfinite(vox[i]) ? vox[i] : 0.0f;
        CHECK(same_float(back[i], want), "voxel %lld: wrote %g, read %g", (long long)i, want, back[i]);
    }
    free(back);
    free(lab);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size > (1 << 20)) return 0;
    int gz = size >= 2 && data[0] == 0x1f && data[1] == 0x8b;
    char path[600], err[SWI_ERRLEN];
    fuzz_write_file(gz ? "in.nii.gz" : "in.nii", data, size, path, sizeof path);
    swi_volume v;
    err[0] = '\0';
    if (swi_volume_open(path, &v, err, SWI_ERRLEN) != 0) {
        CHECK(err[0] != '\0', "refused without a message");
        return 0;
    }
    CHECK(v.fmt.nifti.version == 1 || v.fmt.nifti.version == 2, "version %d", v.fmt.nifti.version);
    CHECK(v.size[0] >= 1 && v.size[1] >= 1 && v.size[2] >= 1, "size");
    CHECK(v.bytes_per_voxel == 1 || v.bytes_per_voxel == 2 || v.bytes_per_voxel == 4 ||
              v.bytes_per_voxel == 8 || v.bytes_per_voxel == 16,
          "bytes_per_voxel");
    CHECK(v.affine[3][0] == 0 && v.affine[3][1] == 0 && v.affine[3][2] == 0 && v.affine[3][3] == 1,
          "affine's last row");
    CHECK(v.fmt.nifti.offset >= (v.fmt.nifti.version == 1 ? 348 : 540), "offset %lld",
          (long long)v.fmt.nifti.offset);
    CHECK(isfinite(v.slope) && v.slope != 0 && isfinite(v.inter), "scaling");
    int64_t n = v.size[0] * v.size[1] * v.size[2];
    if (!gz) CHECK(v.fmt.nifti.offset + n * v.bytes_per_voxel <= (int64_t)size, "accepted a truncated file");
    if (n > MAX_READ_VOXELS) return 0;
    float *vox = malloc((size_t)n * sizeof(float));
    err[0] = '\0';
    int64_t nonfinite = -1;
    if (swi_volume_read_counted(&v, vox, NULL, &nonfinite, err, SWI_ERRLEN) != 0) {
        CHECK(err[0] != '\0', "load failed without a message");
        CHECK(nonfinite == 0, "a failed read counted %lld non-finite voxels", (long long)nonfinite);
        free(vox);
        return 0;
    }
    int64_t zeros = 0;
    for (int64_t i = 0; i < n; i++) {
        CHECK(isfinite(vox[i]), "voxel %lld read as %g", (long long)i, vox[i]);
        zeros += vox[i] == 0;
    }
    CHECK(nonfinite >= 0 && nonfinite <= zeros, "%lld non-finite voxels counted, %lld read as 0",
          (long long)nonfinite, (long long)zeros);
    /* The input's length picks the writer's variant (plain or gzip, float32 or labels), so
     * every variant is exercised without doubling the cost of each input. */
    unsigned sel = (unsigned)(size % 4);
    round_trip(&v, vox, n, (sel & 1) != 0, (sel & 2) != 0);
    free(vox);
    return 0;
}
