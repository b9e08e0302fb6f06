/*
 * fuzz_dicom_headers.c -- whole DICOM files read as a slice is (io__dicom_probe): the header
 * screened by DCMTK here (io/dicom_screen.cxx), then GDCM's header and pixel reading in a
 * child process (io/itk_io.cxx through io/dicom_series.c). Nothing may crash or hang this
 * process: a GDCM abort in the child must come back as a message. Every outcome is a
 * message naming the file, or a slice of sane size and finite geometry whose pixels are
 * read (or refused with a message).
 */
#include "io_internal.h"

#include "fuzz_common.h"

#include <math.h>

#define CHECK(cond, ...) FUZZ_CHECK("fuzz_dicom_headers", cond, __VA_ARGS__)

#define MAX_PIXELS (1 << 16)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    char path[600], err[1024];
    fuzz_write_file("in.dcm", data, size, path, sizeof path);
    static float pixels[MAX_PIXELS];
    static int warm;
    if (!warm++) { /* ITK's and GDCM's one-time set-up here, not again in every child */
        io_slice w = {0};
        char path0[600];
        fuzz_write_file("warm.dcm", (const uint8_t *)"", 0, path0, sizeof path0);
        io__itk_dicom_slice(path0, &w, err, sizeof err);
    }
    io_slice s;
    err[0] = '\0';
    if (io__dicom_probe(path, &s, pixels, MAX_PIXELS, err, sizeof err) != SWI_OK) {
        CHECK(err[0] != '\0' && strstr(err, path) != NULL, "refused without naming the file: %s", err);
        return 0;
    }
    CHECK(s.cols >= 1 && s.rows >= 1 && s.cols <= 65535 && s.rows <= 65535, "size %lldx%lld",
          (long long)s.cols, (long long)s.rows);
    CHECK(s.frames >= 1, "frames %lld", (long long)s.frames);
    if (s.frames == 1)
        for (int a = 0; a < 3; a++)
            CHECK(isfinite(s.origin[a]) && isfinite(s.row_dir[a]) && isfinite(s.col_dir[a]),
                  "geometry not finite");
    return 0;
}

/* ITK and GDCM keep memory on failed reads (their own, not ours); everything else is
 * reported. */
const char *__lsan_default_suppressions(void);
const char *__lsan_default_suppressions(void) { return "leak:libITK\nleak:libgdcm\nleak:libdcmdata\n"; }
