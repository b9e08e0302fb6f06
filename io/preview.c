/* preview.c -- PNG previews: three orthogonal mid-slices, labels overlaid (libpng). */
#include "io_internal.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

void swi_io_label_color(int64_t l, unsigned char rgb[3]) {
    static const unsigned char pal[12][3] = {
        {230, 25, 75},  {60, 180, 75},  {255, 225, 25}, {0, 130, 200},   {245, 130, 48}, {145, 30, 180},
        {70, 240, 240}, {240, 50, 230}, {210, 245, 60}, {250, 190, 212}, {0, 128, 128},  {170, 110, 40},
    };
    if (l >= 1 && l <= 12) {
        memcpy(rgb, pal[l - 1], 3);
        return;
    }
    /* Beyond the palette: hues spread by the golden angle, full saturation. */
    double h = fmod((double)l * 137.50776405, 360.0) / 60.0;
    double x = 1.0 - fabs(fmod(h, 2.0) - 1.0);
    double r = 0, g = 0, b = 0;
    switch ((int)h) {
    case 0: r = 1, g = x; break;
    case 1: r = x, g = 1; break;
    case 2: g = 1, b = x; break;
    case 3: g = x, b = 1; break;
    case 4: r = x, b = 1; break;
    default: r = 1, b = x; break;
    }
    rgb[0] = (unsigned char)(40 + 215 * r);
    rgb[1] = (unsigned char)(40 + 215 * g);
    rgb[2] = (unsigned char)(40 + 215 * b);
}

#ifndef SWI_HAVE_PNG

int io__png_available(void) { return 0; }

swi_status swi_io_preview_write_fd(int fd, const char *name, const int64_t size[3], const float *image,
                                   const void *labels, int label_bytes, char *err, size_t n) {
    (void)size, (void)image, (void)labels, (void)label_bytes;
    if (fd >= 0) close(fd);
    io__err(err, n, "%s: swi_io was built without PNG support (install libpng-dev and rebuild)",
            name ? name : "preview");
    return SWI_ERR_INVALID_ARG;
}

#else

#include <png.h>

int io__png_available(void) { return 1; }

static int cmp_float(const void *a, const void *b) {
    float x = *(const float *)a, y = *(const float *)b;
    return (x > y) - (x < y);
}

/* 0.5th and 99.5th percentiles of the finite values, from a sample of at most ~1M voxels.
 * Returns -1 when out of memory (a preview windowed otherwise would differ silently). */
static int window_of(const float *img, int64_t n, float *lo, float *hi) {
    int64_t step = n > (1 << 20) ? n / (1 << 20) : 1;
    int64_t cap = n / step + 1, m = 0;
    float *s = io__malloc((size_t)cap * sizeof *s);
    *lo = 0, *hi = 1;
    if (!s) return -1;
    for (int64_t i = 0; i < n && m < cap; i += step)
        if (isfinite(img[i])) s[m++] = img[i];
    if (m > 0) {
        qsort(s, (size_t)m, sizeof *s, cmp_float);
        *lo = s[(int64_t)(0.005 * (double)(m - 1))];
        *hi = s[(int64_t)(0.995 * (double)(m - 1))];
        if (!(*hi > *lo)) {
            *lo = s[0];
            *hi = s[m - 1];
        }
    }
    free(s);
    return 0;
}

typedef struct panel {
    int64_t w, h;       /* in voxels */
    int ax_col, ax_row; /* which axis runs along columns / rows */
    int64_t fixed[3];   /* the slice position on the remaining axis (others ignored) */
} panel;

struct png_ctx {
    char *err;
    size_t errlen;
    const char *name;
    int fd;
};

static void on_png_error(png_structp png, png_const_charp msg) {
    struct png_ctx *c = png_get_error_ptr(png);
    io__err(c->err, c->errlen, "%s: cannot write the PNG: %s", c->name, msg);
    png_longjmp(png, 1);
}

static void on_png_warning(png_structp png, png_const_charp msg) { (void)png, (void)msg; }

/* libpng's output goes straight to the descriptor with write(2), every call checked (not
 * through stdio, whose failures come late and without errno, and which fault injection
 * cannot reach). A failure is reported here and ends the write at once. */
static void on_png_write(png_structp png, png_bytep data, size_t len) {
    struct png_ctx *c = png_get_io_ptr(png);
    while (len > 0) {
        ssize_t w = write(c->fd, data, len);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) {
            io__err(c->err, c->errlen, "%s: write failed: %s", c->name,
                    w < 0 ? strerror(errno) : "nothing written");
            png_longjmp(png, 2);
        }
        data += w;
        len -= (size_t)w;
    }
}

static void on_png_flush(png_structp png) { (void)png; }

/* Write W x H RGB pixels as a PNG to fd (closed in every case). */
static swi_status png_write_rgb(int fd, const char *name, const unsigned char *rgb, int64_t W, int64_t H,
                                char *err, size_t n) {
    struct png_ctx ctx = {err, n, name, fd};
    png_structp png = png_create_write_struct(PNG_LIBPNG_VER_STRING, &ctx, on_png_error, on_png_warning);
    png_infop info = png ? png_create_info_struct(png) : NULL;
    if (!png || !info) {
        png_destroy_write_struct(&png, NULL);
        close(fd);
        io__err(err, n, "%s: out of memory", name);
        return SWI_ERR_NOMEM;
    }
    /* the message is in err already (on_png_error, on_png_write) */
    switch (setjmp(png_jmpbuf(png))) {
    case 0: break;
    case 2: /* on_png_write: the descriptor refused the bytes */
        png_destroy_write_struct(&png, &info);
        close(fd);
        return SWI_ERR_IO;
    default:
        png_destroy_write_struct(&png, &info);
        close(fd);
        return SWI_ERR_INVALID_ARG;
    }
    png_set_write_fn(png, &ctx, on_png_write, on_png_flush);
    png_set_IHDR(png, info, (png_uint_32)W, (png_uint_32)H, 8, PNG_COLOR_TYPE_RGB, PNG_INTERLACE_NONE,
                 PNG_COMPRESSION_TYPE_DEFAULT, PNG_FILTER_TYPE_DEFAULT);
    png_write_info(png, info);
    for (int64_t y = 0; y < H; y++) png_write_row(png, rgb + 3 * y * W);
    png_write_end(png, info);
    png_destroy_write_struct(&png, &info);
    if (close(fd) != 0) {
        io__err(err, n, "%s: write failed: %s", name, strerror(errno));
        return SWI_ERR_IO;
    }
    return SWI_OK;
}

swi_status swi_io_preview_write_fd(int fd, const char *name, const int64_t size[3], const float *image,
                                   const void *labels, int label_bytes, char *err, size_t n) {
    if (fd < 0 || !name || !size || (labels && label_bytes != 1 && label_bytes != 2) || size[0] < 1 ||
        size[1] < 1 || size[2] < 1 || size[0] > ((int64_t)1 << 40) / size[1] ||
        size[0] * size[1] > ((int64_t)1 << 40) / size[2]) {
        if (fd >= 0) close(fd);
        io__err(err, n, "%s: swi_io_preview_write_fd: %s", name ? name : "preview",
                fd < 0                                             ? "fd < 0"
                : !size                                            ? "size is NULL"
                : (labels && label_bytes != 1 && label_bytes != 2) ? "label_bytes must be 1 or 2"
                                                                   : "size is not a volume");
        return SWI_ERR_INVALID_ARG;
    }
    const int64_t ni = size[0], nj = size[1], nk = size[2];
    panel p[3] = {
        {ni, nj, 0, 1, {0, 0, nk / 2}},
        {ni, nk, 0, 2, {0, nj / 2, 0}},
        {nj, nk, 1, 2, {ni / 2, 0, 0}},
    };
    int64_t hmax = 0, wsum = 0;
    for (int q = 0; q < 3; q++) {
        hmax = p[q].h > hmax ? p[q].h : hmax;
        wsum += p[q].w;
    }
    /* Pixels per voxel = up / down: small volumes enlarged to ~256 pixels, large ones
     * sampled down to at most 2048 pixels high and 8192 wide. */
    int64_t up = hmax >= 256 ? 1 : (256 + hmax - 1) / hmax;
    if (up > 16) up = 16;
    if (wsum * up > 8192) up = 8192 / wsum > 1 ? 8192 / wsum : 1;
    int64_t down = 1;
    if ((hmax + 2047) / 2048 > down) down = (hmax + 2047) / 2048;
    if ((wsum + 8191) / 8192 > down) down = (wsum + 8191) / 8192;
    if (down > 1) up = 1;
    int64_t pw[3], ph[3];
    for (int q = 0; q < 3; q++) {
        pw[q] = (p[q].w * up + down - 1) / down;
        ph[q] = (p[q].h * up + down - 1) / down;
    }
    const int64_t gap = 4;
    int64_t W = pw[0] + pw[1] + pw[2] + 2 * gap, H = (hmax * up + down - 1) / down;
    float lo = 0, hi = 1;
    if (image && window_of(image, ni * nj * nk, &lo, &hi) != 0) {
        close(fd);
        io__err(err, n, "%s: out of memory", name);
        return SWI_ERR_NOMEM;
    }
    float inv = hi > lo ? 255.0f / (hi - lo) : 0;

    unsigned char *rgb = io__calloc((size_t)(W * H), 3);
    if (!rgb) {
        close(fd);
        io__err(err, n, "%s: out of memory", name);
        return SWI_ERR_NOMEM;
    }
    int64_t x0 = 0;
    for (int q = 0; q < 3; q++) {
        for (int64_t y = 0; y < ph[q]; y++) { /* a shorter panel leaves the rest black */
            int64_t r = y * down / up;
            int64_t row = p[q].h - 1 - (r < p[q].h ? r : p[q].h - 1); /* bottom-up */
            for (int64_t x = 0; x < pw[q]; x++) {
                int64_t col = x * down / up;
                if (col >= p[q].w) col = p[q].w - 1;
                int64_t idx[3] = {p[q].fixed[0], p[q].fixed[1], p[q].fixed[2]};
                idx[p[q].ax_col] = col;
                idx[p[q].ax_row] = row;
                int64_t v = (idx[0] * nj + idx[1]) * nk + idx[2];
                float g = 0;
                if (image) {
                    float t = (image[v] - lo) * inv;
                    g = isfinite(t) ? (t < 0 ? 0 : t > 255 ? 255 : t) : 0;
                } else {
                    g = 40;
                }
                unsigned char *px = rgb + 3 * (y * W + x0 + x);
                px[0] = px[1] = px[2] = (unsigned char)g;
                if (labels) {
                    int64_t l =
                        label_bytes == 1 ? ((const uint8_t *)labels)[v] : ((const uint16_t *)labels)[v];
                    if (l > 0) {
                        unsigned char c[3];
                        swi_io_label_color(l, c);
                        for (int ch = 0; ch < 3; ch++)
                            px[ch] = (unsigned char)(0.45f * g + 0.55f * (float)c[ch]);
                    }
                }
            }
        }
        x0 += pw[q] + gap;
    }

    swi_status rc = png_write_rgb(fd, name, rgb, W, H, err, n);
    free(rgb);
    return rc;
}

#endif
