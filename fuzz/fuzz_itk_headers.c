/*
 * fuzz_itk_headers.c -- NRRD and MetaImage headers through swi_io's ITK module
 * (io/itk_io.cxx, its header screens io/itk_screen.cxx and io/itk_screen_meta.cxx): the
 * first byte picks the name (in.nrrd, in.nhdr, in.mha, in.mhd), the rest is the file.
 * swi_volume_open must refuse it with a message or describe a volume consistent with
 * itself; a small accepted volume is read (success or a message), and a
 * volume read is written back as .nrrd and .mha and must read back to the same values.
 * Detached headers point at in.raw, which holds the same bytes.
 */
#include "swi_io.h"

#include "fuzz_common.h"

#include <math.h>

#define CHECK(cond, ...) FUZZ_CHECK("fuzz_itk_headers", cond, __VA_ARGS__)

#define MAX_READ_VOXELS (1 << 16)

static const char *const NAMES[] = {"in.nrrd", "in.nhdr", "in.mha", "in.mhd"};

static void round_trip(const swi_volume *v, const float *x, int64_t n, const char *name) {
    char path[600], err[768];
    snprintf(path, sizeof path, "%s/%s", fuzz_dir(), name);
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    CHECK(fd >= 0, "create %s", path);
    swi_status st =
        swi_volume_write_fd(fd, path, v, x, SWI_DTYPE_FLOAT32, SWI_IO_IMAGE, 1, 1, NULL, err, sizeof err);
    if (st != SWI_OK) {
        /* a geometry ITK cannot write (a degenerate affine) is refused with a message */
        CHECK(err[0] != '\0', "write failed without a message");
        return;
    }
    swi_volume w;
    CHECK(swi_volume_open(path, &w, err, sizeof err) == SWI_OK, "reopen %s: %s", name, err);
    CHECK(w.size[0] == v->size[0] && w.size[1] == v->size[1] && w.size[2] == v->size[2], "%s: sizes changed",
          name);
    float *y = malloc((size_t)n * sizeof *y);
    CHECK(y != NULL, "out of memory");
    CHECK(swi_volume_read(&w, y, NULL, err, sizeof err) == SWI_OK, "reread %s: %s", name, err);
    for (int64_t i = 0; i < n; i++)
        CHECK(memcmp(&x[i], &y[i], sizeof *y) == 0 || (isnan(x[i]) && isnan(y[i])), "%s: voxel %lld changed",
              name, (long long)i);
    free(y);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1) return 0;
    const char *name = NAMES[data[0] % 4];
    char path[600], raw[600], err[768];
    fuzz_write_file(name, data + 1, size - 1, path, sizeof path);
    fuzz_write_file("in.raw", data + 1, size - 1, raw, sizeof raw);
    swi_volume v;
    err[0] = '\0';
    if (swi_volume_open(path, &v, err, sizeof err) != SWI_OK) {
        CHECK(err[0] != '\0' && strstr(err, path) != NULL, "refused without naming the file: %s", err);
        return 0;
    }
    CHECK(v.size[0] >= 1 && v.size[1] >= 1 && v.size[2] >= 1, "sizes < 1");
    CHECK(v.spacing[0] > 0 && v.spacing[1] > 0 && v.spacing[2] > 0, "spacing <= 0");
    for (int r = 0; r < 4; r++)
        for (int c = 0; c < 4; c++) CHECK(isfinite(v.affine[r][c]), "affine not finite");
    int64_t n = swi_volume_voxels(&v);
    if (n > MAX_READ_VOXELS) return 0;
    float *x = malloc((size_t)n * sizeof *x);
    CHECK(x != NULL, "out of memory");
    err[0] = '\0';
    if (swi_volume_read(&v, x, NULL, err, sizeof err) == SWI_OK) {
        round_trip(&v, x, n, "out.nrrd");
        round_trip(&v, x, n, "out.mha");
    } else {
        CHECK(err[0] != '\0', "read failed without a message");
    }
    free(x);
    return 0;
}

/* ITK 5.2 loses memory when reading a corrupt file fails (MetaIO its data-file stream,
 * NrrdImageIO teem's nrrd and error text): leaks inside ITK, not ours; everything else is
 * reported. */
const char *__lsan_default_suppressions(void);
const char *__lsan_default_suppressions(void) { return "leak:libITKMetaIO\nleak:libITKNrrdIO\n"; }

/* ITK is built without frame pointers: the slow unwinder sees through it, so the
 * suppression above can match. */
const char *__asan_default_options(void);
const char *__asan_default_options(void) { return "fast_unwind_on_malloc=0"; }
