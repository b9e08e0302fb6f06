/*
 * fuzz_dicom_series.c -- DICOM series assembly (io/dicom_assemble.c, io__dicom_assemble):
 * the slices' headers (series UID, sizes, frames, positions, orientation, pixel spacing)
 * decoded from the input, sorted and checked. A series must be refused with a message
 * naming the directory, or give a volume whose slices are in ascending position along
 * the normal, evenly spaced, on the normal through the first, with a finite affine.
 */
#include "io_internal.h"

#include "fuzz_common.h"

#include <math.h>

#define CHECK(cond, ...) FUZZ_CHECK("fuzz_dicom_series", cond, __VA_ARGS__)

typedef struct reader {
    const uint8_t *p;
    size_t left;
} reader;

static unsigned byte(reader *r) {
    if (!r->left) return 0;
    r->left--;
    return *r->p++;
}

/* Mostly tame values (what scanners write), sometimes any double (NaN, Inf, huge). */
static double number(reader *r, double scale) {
    unsigned tag = byte(r);
    if (tag < 16 && r->left >= 8) {
        double d;
        memcpy(&d, r->p, 8);
        r->p += 8;
        r->left -= 8;
        return d;
    }
    int v = (int)(int16_t)(byte(r) | byte(r) << 8);
    return v * scale;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    reader r = {data, size};
    int64_t count = byte(&r) % 40;
    io_slice *s = calloc((size_t)(count ? count : 1), sizeof *s);
    CHECK(s != NULL, "out of memory");
    /* a base geometry, which each slice may follow or break */
    double row[3] = {1, 0, 0}, col[3] = {0, 1, 0};
    unsigned orient = byte(&r) % 4;
    if (orient == 1) /* sagittal */
        row[0] = 0, row[1] = 1, col[1] = 0, col[2] = -1;
    else if (orient == 2) { /* oblique */
        row[0] = cos(0.3), row[1] = sin(0.3), col[0] = -sin(0.3), col[1] = cos(0.3);
    } else if (orient == 3) {
        for (int a = 0; a < 3; a++) row[a] = number(&r, 1e-3), col[a] = number(&r, 1e-3);
    }
    double step = 0.5 + byte(&r) / 16.0;
    for (int64_t x = 0; x < count; x++) {
        io_slice *t = &s[x];
        unsigned flags = byte(&r);
        snprintf(t->series_uid, sizeof t->series_uid, "1.2.3.%u", (flags & 1) ? byte(&r) % 3 : 0);
        t->cols = (flags & 2) ? (int64_t)(byte(&r) % 5) : 4;
        t->rows = (flags & 2) ? (int64_t)(byte(&r) % 5) : 3;
        t->frames = (flags & 4) ? (int64_t)(byte(&r) % 3) : 1;
        t->spacing[0] = (flags & 8) ? number(&r, 1e-2) : 0.8;
        t->spacing[1] = 0.9;
        double k = (flags & 16) ? number(&r, 0.01) : (double)((x * 7) % count);
        double normal[3] = {row[1] * col[2] - row[2] * col[1], row[2] * col[0] - row[0] * col[2],
                            row[0] * col[1] - row[1] * col[0]};
        for (int a = 0; a < 3; a++) {
            t->row_dir[a] = row[a];
            t->col_dir[a] = col[a];
            t->origin[a] = 10 * a + k * step * normal[a];
        }
        if (flags & 32) t->origin[byte(&r) % 3] += number(&r, 0.01);
        if (flags & 64) t->row_dir[byte(&r) % 3] += number(&r, 1e-4);
    }
    swi_volume v;
    memset(&v, 0, sizeof v);
    char err[768] = "";
    swi_status st = io__dicom_assemble(s, count, "series_dir", &v, err, sizeof err);
    if (st != SWI_OK) {
        CHECK(strstr(err, "series_dir") != NULL, "refused without naming the directory: %s", err);
    } else {
        CHECK(count >= 2 && v.size[2] == count, "slices %lld, size[2] %lld", (long long)count,
              (long long)v.size[2]);
        CHECK(v.size[0] >= 1 && v.size[1] >= 1, "empty slices accepted");
        CHECK(v.spacing[2] > 0, "spacing along k %g", v.spacing[2]);
        for (int64_t x = 1; x < count; x++)
            CHECK(s[x].pos > s[x - 1].pos, "slices %lld, %lld out of order", (long long)x - 1, (long long)x);
        for (int a = 0; a < 4; a++)
            for (int b = 0; b < 4; b++) CHECK(isfinite(v.affine[a][b]), "affine not finite");
    }
    free(s);
    return 0;
}
