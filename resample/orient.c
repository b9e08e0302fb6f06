/* orient.c -- axis codes and orientation by permutation and flips (swi_resample.h). */
#include "swi_resample.h"

#include "resample_internal.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

/* world axis and direction of each code letter (nibabel's labels L/R, P/A, I/S) */
static int code_of(char c, int *world, int *sign) {
    switch (c) {
    case 'R':
    case 'r':
        *world = 0;
        *sign = 1;
        return 0;
    case 'L':
    case 'l':
        *world = 0;
        *sign = -1;
        return 0;
    case 'A':
    case 'a':
        *world = 1;
        *sign = 1;
        return 0;
    case 'P':
    case 'p':
        *world = 1;
        *sign = -1;
        return 0;
    case 'S':
    case 's':
        *world = 2;
        *sign = 1;
        return 0;
    case 'I':
    case 'i':
        *world = 2;
        *sign = -1;
        return 0;
    default: return -1;
    }
}

swi_status swi_resample_axcodes_parse(const char *codes, int world[3], int sign[3], char *err,
                                      size_t errlen) {
    if (!codes || strlen(codes) != 3) {
        rs__err(err, errlen,
                "axis codes '%s': give three letters, one of L/R, P/A and I/S each "
                "(e.g. RAS, LPS)",
                codes ? codes : "");
        return SWI_ERR_INVALID_ARG;
    }
    int seen[3] = {0, 0, 0};
    for (int j = 0; j < 3; j++) {
        if (code_of(codes[j], &world[j], &sign[j]) != 0) {
            rs__err(err, errlen, "axis codes '%s': unknown code '%c' (use L/R, P/A, I/S)", codes, codes[j]);
            return SWI_ERR_INVALID_ARG;
        }
        if (seen[world[j]]++) {
            rs__err(err, errlen,
                    "axis codes '%s': two codes for one axis (use one of L/R, P/A "
                    "and I/S each)",
                    codes);
            return SWI_ERR_INVALID_ARG;
        }
    }
    return SWI_OK;
}

/* nibabel's io_orientation: world axis and sign of each voxel axis. The nearest orthogonal
 * matrix (U V^T of the SVD) is the polar factor, found by Newton's iteration
 * X <- (X + X^-T) / 2, which converges for every non-singular start. */
static int io_orientation(const double affine[4][4], int world[3], int sign[3]) {
    double x[3][3];
    for (int c = 0; c < 3; c++) {
        double z = 0;
        for (int r = 0; r < 3; r++) z += affine[r][c] * affine[r][c];
        z = sqrt(z);
        if (z == 0) z = 1;
        for (int r = 0; r < 3; r++) x[r][c] = affine[r][c] / z;
    }
    for (int it = 0; it < 100; it++) {
        double inv[3][3];
        if (rs__inv3(x, inv) != 0) return -1;
        double change = 0;
        for (int r = 0; r < 3; r++)
            for (int c = 0; c < 3; c++) {
                double v = 0.5 * (x[r][c] + inv[c][r]);
                change = fmax(change, fabs(v - x[r][c]));
                x[r][c] = v;
            }
        if (change < 1e-15) break;
    }
    for (int in = 0; in < 3; in++) {
        int best = -1;
        double big = 0;
        for (int r = 0; r < 3; r++)
            if (fabs(x[r][in]) > big) {
                big = fabs(x[r][in]);
                best = r;
            }
        if (best < 0 || big <= 1e-8) return -1;
        world[in] = best;
        sign[in] = x[best][in] < 0 ? -1 : 1;
        for (int c = 0; c < 3; c++) x[best][c] = 0; /* that world axis is taken */
    }
    return 0;
}

swi_status swi_resample_axcodes_of(const double affine[4][4], char codes[4], char *err, size_t errlen) {
    static const char LABELS[3][2] = {{'L', 'R'}, {'P', 'A'}, {'I', 'S'}};
    int world[3], sign[3];
    if (io_orientation(affine, world, sign) != 0) {
        rs__err(err, errlen, "the affine's direction part is singular: no orientation");
        return SWI_ERR_INVALID_ARG;
    }
    for (int j = 0; j < 3; j++) codes[j] = LABELS[world[j]][sign[j] > 0];
    codes[3] = '\0';
    return SWI_OK;
}

swi_status swi_resample_orientation_make(const double affine[4][4], const int64_t size[3], const char *codes,
                                         swi_resample_orientation *o, char *err, size_t errlen) {
    memset(o, 0, sizeof *o);
    int tw[3], ts[3], sw[3], ss[3];
    swi_status st = swi_resample_axcodes_parse(codes, tw, ts, err, errlen);
    if (st != SWI_OK) return st;
    if (io_orientation(affine, sw, ss) != 0) {
        rs__err(err, errlen, "the affine's direction part is singular: cannot orient to %s", codes);
        return SWI_ERR_INVALID_ARG;
    }
    /* nibabel's ornt_transform: input axis i goes where the target has its world axis. */
    for (int i = 0; i < 3; i++)
        for (int j = 0; j < 3; j++)
            if (tw[j] == sw[i]) {
                o->src_axis[j] = i;
                o->flip[j] = ss[i] != ts[j];
            }
    for (int a = 0; a < 3; a++) o->in_size[a] = size[a];
    /* affine @ inv_ornt_aff: column j is input column i, negated where flipped, and the
     * origin moves to the flipped axis's far end. */
    memset(o->affine, 0, sizeof o->affine);
    for (int r = 0; r < 4; r++) o->affine[r][3] = affine[r][3];
    for (int j = 0; j < 3; j++) {
        int i = o->src_axis[j];
        o->size[j] = size[i];
        for (int r = 0; r < 4; r++) o->affine[r][j] = o->flip[j] ? -affine[r][i] : affine[r][i];
        if (o->flip[j])
            for (int r = 0; r < 4; r++) o->affine[r][3] += affine[r][i] * (double)(size[i] - 1);
    }
    o->affine[3][3] = affine[3][3];
    return SWI_OK;
}

int swi_resample_orientation_is_identity(const swi_resample_orientation *o) {
    for (int j = 0; j < 3; j++)
        if (o->src_axis[j] != j || o->flip[j]) return 0;
    return 1;
}

void swi_resample_orient_point(const swi_resample_orientation *o, const int64_t x[3], int64_t y[3]) {
    for (int j = 0; j < 3; j++) {
        int i = o->src_axis[j];
        y[j] = o->flip[j] ? o->in_size[i] - 1 - x[i] : x[i];
    }
}

/* Offset into the input grid of oriented voxel y: base + sum y_j * step_j. */
static void input_steps(const swi_resample_orientation *o, int64_t *base, int64_t step[3]) {
    const int64_t *n = o->in_size;
    const int64_t in_stride[3] = {n[1] * n[2], n[2], 1};
    *base = 0;
    for (int j = 0; j < 3; j++) {
        int i = o->src_axis[j];
        step[j] = o->flip[j] ? -in_stride[i] : in_stride[i];
        if (o->flip[j]) *base += in_stride[i] * (n[i] - 1);
    }
}

/* dst/src at element offsets, one element of `e` bytes */
static inline void put(void *dst, int64_t di, const void *src, int64_t si, size_t e) {
    switch (e) {
    case 1: ((uint8_t *)dst)[di] = ((const uint8_t *)src)[si]; break;
    case 2: ((uint16_t *)dst)[di] = ((const uint16_t *)src)[si]; break;
    case 4: ((uint32_t *)dst)[di] = ((const uint32_t *)src)[si]; break;
    default: memcpy((char *)dst + (size_t)di * e, (const char *)src + (size_t)si * e, e); break;
    }
}

/* Walk the box [lo, hi) of the oriented grid: box element b <-> input element in. */
static void walk_box(const swi_resample_orientation *o, const void *a, void *b, size_t e, int64_t planes,
                     const int64_t lo[3], const int64_t hi[3], int to_input) {
    int64_t base, step[3];
    input_steps(o, &base, step);
    const int64_t vin = o->in_size[0] * o->in_size[1] * o->in_size[2];
    const int64_t bn[3] = {hi[0] - lo[0], hi[1] - lo[1], hi[2] - lo[2]};
    const int64_t vbox = bn[0] * bn[1] * bn[2];
    for (int64_t p = 0; p < planes; p++) {
        int64_t bi = p * vbox;
        for (int64_t y0 = lo[0]; y0 < hi[0]; y0++)
            for (int64_t y1 = lo[1]; y1 < hi[1]; y1++) {
                int64_t in = p * vin + base + y0 * step[0] + y1 * step[1] + lo[2] * step[2];
                for (int64_t y2 = lo[2]; y2 < hi[2]; y2++, bi++, in += step[2]) {
                    if (to_input)
                        put(b, in, a, bi, e);
                    else
                        put(b, bi, a, in, e);
                }
            }
    }
}

void swi_resample_orient_read_box(const swi_resample_orientation *o, const float *src, int64_t planes,
                                  const int64_t lo[3], const int64_t hi[3], float *dst) {
    walk_box(o, src, dst, sizeof(float), planes, lo, hi, 0);
}

void swi_resample_orient_write_box(const swi_resample_orientation *o, const void *src, size_t elem_bytes,
                                   int64_t planes, const int64_t lo[3], const int64_t hi[3], void *dst) {
    walk_box(o, src, dst, elem_bytes, planes, lo, hi, 1);
}

void swi_resample_orient_copy(const swi_resample_orientation *o, const void *src, void *dst,
                              size_t elem_bytes, int64_t planes, int inverse) {
    const int64_t lo[3] = {0, 0, 0};
    walk_box(o, src, dst, elem_bytes, planes, lo, o->size, inverse);
}

void swi_resample_orient_to_input(const swi_resample_orientation *o, const double map[3][4],
                                  double out[3][4]) {
    /* x_i = y_j, or n_i - 1 - y_j where flipped (i = src_axis[j]) */
    for (int j = 0; j < 3; j++) {
        int i = o->src_axis[j];
        for (int c = 0; c < 4; c++) out[i][c] = o->flip[j] ? -map[j][c] : map[j][c];
        if (o->flip[j]) out[i][3] += (double)(o->in_size[i] - 1);
    }
}

void swi_resample_orient_from_input(const swi_resample_orientation *o, const double map[3][4],
                                    double out[3][4]) {
    /* map @ y with y_j = x_i or n_i - 1 - x_i: column j of map lands in column i */
    for (int r = 0; r < 3; r++) {
        out[r][3] = map[r][3];
        for (int j = 0; j < 3; j++) {
            int i = o->src_axis[j];
            out[r][i] = o->flip[j] ? -map[r][j] : map[r][j];
            if (o->flip[j]) out[r][3] += map[r][j] * (double)(o->in_size[i] - 1);
        }
    }
}
