/*
 * fuzz_nifti.c -- the NIfTI path of the swi command (cli/nifti_io.c): header validation,
 * voxel reading through niftilib, and the writer, as one round trip.
 *
 * Each input is a file: gzip data (it starts with 1f 8b) is stored as in.nii.gz, anything
 * else as in.nii. nifti_vol_open must refuse it with a message or describe a volume that
 * is consistent with itself; a small accepted volume is then read (nifti_vol_load must
 * succeed or fail with a message), written back as float32 and as uint8 labels, plain or
 * gzipped (nifti_write_fd), and the written file must open and read back to exactly the
 * values written (non-finite values read back as 0: niftilib zeroes them on reading).
 */
#include "nifti_io.h"
#include "util.h"

#include "fuzz_common.h"

#include <math.h>
#include <zlib.h>

#define CHECK(cond, ...) FUZZ_CHECK("fuzz_nifti", cond, __VA_ARGS__)

/* Largest volume the target reads (the CLI itself reads up to 2^40 voxels). */
#define MAX_READ_VOXELS (1 << 18)

static int same_float(float a, float b)
{
    if (isnan(a) || isnan(b))
        return isnan(a) && isnan(b);
    return memcmp(&a, &b, sizeof a) == 0;
}

/* A valid 3x1x1 float32 NIfTI-1 volume of 12345s at fuzz_dir()/name, gzipped if gz. */
static void plant_decoy(const char *name, int gz)
{
    unsigned char file[352 + 12];
    memset(file, 0, sizeof file);
    int32_t i32 = 348;
    memcpy(file, &i32, 4);
    int16_t dim[8] = { 3, 3, 1, 1, 1, 1, 1, 1 }, dt[2] = { 16, 32 };
    memcpy(file + 40, dim, sizeof dim);
    memcpy(file + 70, dt, sizeof dt);
    float f = 352, one = 1, v = 12345;
    memcpy(file + 108, &f, 4);
    memcpy(file + 112, &one, 4);
    memcpy(file + 344, "n+1", 4);
    for (int i = 0; i < 3; i++)
        memcpy(file + 352 + 4 * i, &v, 4);
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

static void round_trip(const nifti_vol *v, const float *vox, int64_t n, int gz, int labels)
{
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
    int rc = nifti_write_fd(fd, gz, path, v, data, labels ? NIFTI_OUT_UINT8 : NIFTI_OUT_FLOAT32,
                            labels ? NIFTI_OUT_LABELS : NIFTI_OUT_IMAGE, 1, labels ? 7 : 1, err);
    CHECK(rc == 0, "writing a volume that was read: %s", err);
    nifti_vol w;
    rc = nifti_vol_open(path, &w, err);
    CHECK(rc == 0, "reopening what was written: %s", err);
    CHECK(w.size[0] == v->size[0] && w.size[1] == v->size[1] && w.size[2] == v->size[2],
          "size changed: %lldx%lldx%lld", (long long)w.size[0], (long long)w.size[1],
          (long long)w.size[2]);
    CHECK(w.version == v->version, "version %d -> %d", v->version, w.version);
    float *back = malloc((size_t)n * sizeof(float));
    rc = nifti_vol_load(&w, back, err);
    CHECK(rc == 0, "reading back what was written: %s", err);
    for (int64_t i = 0; i < n; i++) {
        /* niftilib's reader turns non-finite floats into 0 (nifti_read_buffer), so an Inf
         * made by converting a huge float64 reads back as 0 */
        float want = labels ? (float)lab[i] : isfinite(vox[i]) ? vox[i] : 0.0f;
        CHECK(same_float(back[i], want), "voxel %lld: wrote %g, read %g", (long long)i, want, back[i]);
    }
    free(back);
    free(lab);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size > (1 << 20))
        return 0;
    int gz = size >= 2 && data[0] == 0x1f && data[1] == 0x8b;
    char path[600], err[SWI_ERRLEN];
    fuzz_write_file(gz ? "in.nii.gz" : "in.nii", data, size, path, sizeof path);
    nifti_vol v;
    err[0] = '\0';
    if (nifti_vol_open(path, &v, err) != 0) {
        CHECK(err[0] != '\0', "refused without a message");
        return 0;
    }
    CHECK(v.version == 1 || v.version == 2, "version %d", v.version);
    CHECK(v.size[0] >= 1 && v.size[1] >= 1 && v.size[2] >= 1, "size");
    CHECK(v.nbyper == 1 || v.nbyper == 2 || v.nbyper == 4 || v.nbyper == 8 || v.nbyper == 16, "nbyper");
    CHECK(v.offset >= (v.version == 1 ? 348 : 540), "offset %lld", (long long)v.offset);
    CHECK(isfinite(v.slope) && v.slope != 0 && isfinite(v.inter), "scaling");
    int64_t n = v.size[0] * v.size[1] * v.size[2];
    if (!gz)
        CHECK(v.offset + n * v.nbyper <= (int64_t)size, "accepted a truncated file");
    if (n > MAX_READ_VOXELS)
        return 0;
    float *vox = malloc((size_t)n * sizeof(float));
    err[0] = '\0';
    if (nifti_vol_load(&v, vox, err) != 0) {
        CHECK(err[0] != '\0', "load failed without a message");
        free(vox);
        return 0;
    }
    /* The input's length picks the writer's variant (plain or gzip, float32 or labels), so
     * every variant is exercised without doubling the cost of each input. */
    unsigned sel = (unsigned)(size % 4);
    round_trip(&v, vox, n, (sel & 1) != 0, (sel & 2) != 0);
    free(vox);
    return 0;
}
