/* report.c -- the review page: statistics, previews, the volumes as base64 NIfTI, the page. */
#include "report_internal.h"

#include <dlfcn.h>
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include <zlib.h>

#include "swi_io.h"

void rep__err(char *err, size_t n, const char *fmt, ...) {
    if (!err || !n) return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, n, fmt, ap);
    va_end(ap);
}

static int64_t label_at(const void *labels, int bytes, int64_t v) {
    return bytes == 1 ? ((const uint8_t *)labels)[v] : ((const uint16_t *)labels)[v];
}

/* Sizes that make a volume, and a product that fits. */
static int check_page(const swi_report_page *p, const char *name, char *err, size_t n) {
    if (!p || !p->labels) {
        rep__err(err, n, "%s: no labels to show", name);
        return 1;
    }
    if (p->label_bytes != 1 && p->label_bytes != 2) {
        rep__err(err, n, "%s: labels must have 1 or 2 bytes per voxel, not %d", name, p->label_bytes);
        return 1;
    }
    for (int a = 0; a < 3; a++)
        if (p->size[a] < 1 || p->size[a] > ((int64_t)1 << 20)) {
            rep__err(err, n, "%s: size %lld along axis %d is not a volume's", name, (long long)p->size[a], a);
            return 1;
        }
    if (p->size[0] * p->size[1] > ((int64_t)1 << 40) / p->size[2]) {
        rep__err(err, n, "%s: %lldx%lldx%lld voxels are too many", name, (long long)p->size[0],
                 (long long)p->size[1], (long long)p->size[2]);
        return 1;
    }
    for (int r = 0; r < 4; r++)
        for (int c = 0; c < 4; c++)
            if (!isfinite(p->affine[r][c])) {
                rep__err(err, n, "%s: affine[%d][%d] is not a finite number", name, r, c);
                return 1;
            }
    if (p->classes < 0 || p->classes > 65536 || p->n_summary < 0 || p->n_ids < 0) {
        rep__err(err, n, "%s: classes must be 0..65536, n_summary and n_ids >= 0", name);
        return 1;
    }
    return 0;
}

double rep__voxel_ml(const double A[4][4]) {
    double d = A[0][0] * (A[1][1] * A[2][2] - A[1][2] * A[2][1]) -
               A[0][1] * (A[1][0] * A[2][2] - A[1][2] * A[2][0]) +
               A[0][2] * (A[1][0] * A[2][1] - A[1][1] * A[2][0]);
    return fabs(d) / 1000.0;
}

swi_status swi_report_stats(const swi_report_page *p, int64_t classes, swi_report_class_stats *st, char *err,
                            size_t n) {
    if (check_page(p, "swi_report_stats", err, n)) return SWI_ERR_INVALID_ARG;
    if (classes < 1 || !st) {
        rep__err(err, n, "swi_report_stats: classes must be >= 1 and stats given");
        return SWI_ERR_INVALID_ARG;
    }
    double(*sum)[3] = calloc((size_t)classes, sizeof *sum);
    double *best = malloc((size_t)classes * sizeof *best);
    if (!sum || !best) {
        free(sum);
        free(best);
        rep__err(err, n, "swi_report_stats: out of memory");
        return SWI_ERR_NOMEM;
    }
    for (int64_t c = 0; c < classes; c++) {
        st[c].voxels = 0;
        st[c].ml = 0;
        best[c] = INFINITY;
        for (int a = 0; a < 3; a++) {
            st[c].lo[a] = st[c].hi[a] = st[c].at[a] = -1;
            st[c].mm_lo[a] = INFINITY;
            st[c].mm_hi[a] = -INFINITY;
        }
    }
    const double(*A)[4] = p->affine;
    const int64_t ni = p->size[0], nj = p->size[1], nk = p->size[2];
    int64_t v = 0;
    for (int64_t i = 0; i < ni; i++)
        for (int64_t j = 0; j < nj; j++)
            for (int64_t k = 0; k < nk; k++, v++) {
                int64_t l = label_at(p->labels, p->label_bytes, v);
                if (l >= classes) continue;
                swi_report_class_stats *s = &st[l];
                const int64_t x[3] = {i, j, k};
                sum[l][0] += (double)i, sum[l][1] += (double)j, sum[l][2] += (double)k;
                /* the box in mm from the voxel centres themselves: tight under any affine */
                for (int r = 0; r < 3; r++) {
                    const double mm =
                        A[r][0] * (double)i + A[r][1] * (double)j + A[r][2] * (double)k + A[r][3];
                    if (mm < s->mm_lo[r]) s->mm_lo[r] = mm;
                    if (mm > s->mm_hi[r]) s->mm_hi[r] = mm;
                }
                if (s->voxels++ == 0) {
                    memcpy(s->lo, x, sizeof x);
                    memcpy(s->hi, x, sizeof x);
                    continue;
                }
                for (int a = 0; a < 3; a++) {
                    if (x[a] < s->lo[a]) s->lo[a] = x[a];
                    if (x[a] > s->hi[a]) s->hi[a] = x[a];
                }
            }
    /* a voxel of each class to show it by: the one nearest its centroid (a centroid or a
     * box's centre may lie outside a curved structure) */
    for (int64_t c = 0; c < classes; c++)
        if (st[c].voxels)
            for (int a = 0; a < 3; a++) sum[c][a] /= (double)st[c].voxels;
    v = 0;
    for (int64_t i = 0; i < ni; i++)
        for (int64_t j = 0; j < nj; j++)
            for (int64_t k = 0; k < nk; k++, v++) {
                int64_t l = label_at(p->labels, p->label_bytes, v);
                if (l >= classes) continue;
                const double di = (double)i - sum[l][0], dj = (double)j - sum[l][1],
                             dk = (double)k - sum[l][2];
                const double d = di * di + dj * dj + dk * dk;
                if (d < best[l]) {
                    best[l] = d;
                    st[l].at[0] = i, st[l].at[1] = j, st[l].at[2] = k;
                }
            }
    free(sum);
    free(best);
    const double ml = rep__voxel_ml(p->affine);
    for (int64_t c = 0; c < classes; c++) {
        st[c].ml = (double)st[c].voxels * ml;
        if (!st[c].voxels)
            for (int a = 0; a < 3; a++) st[c].mm_lo[a] = st[c].mm_hi[a] = 0;
    }
    return SWI_OK;
}

/* ---- base64 and JSON onto a stream ------------------------------------------------ */

void rep__base64(FILE *f, const unsigned char *b, size_t n, int wrap) {
    static const char tab[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    char line[4 * 19 + 2];
    size_t i = 0;
    while (i < n) {
        size_t o = 0;
        /* 57 bytes make a 76-character line */
        for (int q = 0; q < 19 && i < n; q++, i += 3) {
            uint32_t w = (uint32_t)b[i] << 16;
            if (i + 1 < n) w |= (uint32_t)b[i + 1] << 8;
            if (i + 2 < n) w |= b[i + 2];
            line[o++] = tab[(w >> 18) & 63];
            line[o++] = tab[(w >> 12) & 63];
            line[o++] = i + 1 < n ? tab[(w >> 6) & 63] : '=';
            line[o++] = i + 2 < n ? tab[w & 63] : '=';
        }
        if (wrap) line[o++] = '\n';
        fwrite(line, 1, o, f);
    }
}

/* A JSON string; <, > and & as escapes, so no text can end the script element it is in. */
void rep__json_str(FILE *f, const char *s) {
    fputc('"', f);
    for (const unsigned char *c = (const unsigned char *)(s ? s : ""); *c; c++) {
        if (*c == '"' || *c == '\\')
            fprintf(f, "\\%c", *c);
        else if (*c < 0x20 || *c == '<' || *c == '>' || *c == '&' || *c == 0x7f)
            fprintf(f, "\\u%04x", *c);
        else
            fputc(*c, f);
    }
    fputc('"', f);
}

/* The same, for HTML text. */
void rep__html(FILE *f, const char *s) {
    for (const char *c = s ? s : ""; *c; c++) {
        switch (*c) {
        case '<': fputs("&lt;", f); break;
        case '>': fputs("&gt;", f); break;
        case '&': fputs("&amp;", f); break;
        case '"': fputs("&quot;", f); break;
        case '\'': fputs("&#39;", f); break;
        default: fputc(*c, f);
        }
    }
}

/* ---- the NiiVue bundle ---------------------------------------------------------------- */

/* Where an installed tree keeps the bundle, relative to the folders of its programs, of
 * its libraries and of its Python package's extension module (report/CMakeLists.txt). */
#ifndef SWI_REPORT_NIIVUE_FROM_BIN
#define SWI_REPORT_NIIVUE_FROM_BIN "../share/swi/niivue.umd.js"
#endif
#ifndef SWI_REPORT_NIIVUE_FROM_LIB
#define SWI_REPORT_NIIVUE_FROM_LIB "../share/swi/niivue.umd.js"
#endif
#ifndef SWI_REPORT_NIIVUE_FROM_PY
#define SWI_REPORT_NIIVUE_FROM_PY "../../../../share/swi/niivue.umd.js"
#endif

static char g_set_path[PATH_MAX]; /* swi_report_set_niivue_path's */
static char g_beside[PATH_MAX];   /* found beside the program or library, or "" */
static pthread_once_t g_beside_once = PTHREAD_ONCE_INIT;

int swi_report_set_niivue_path(const char *path) {
    if (path && strlen(path) >= sizeof g_set_path) return -1;
    snprintf(g_set_path, sizeof g_set_path, "%s", path ? path : "");
    return 0;
}

/* Is dir/rel a regular file? Then it is in g_beside. */
static int try_beside(const char *file, const char *rel) {
    char dir[PATH_MAX];
    snprintf(dir, sizeof dir, "%s", file);
    char *slash = strrchr(dir, '/');
    if (!slash) return 0;
    *slash = '\0';
    char p[PATH_MAX];
    struct stat st;
    int len = snprintf(p, sizeof p, "%s/%s", dir, rel);
    if (len <= 0 || (size_t)len >= sizeof p || stat(p, &st) != 0 || !S_ISREG(st.st_mode)) return 0;
    memcpy(g_beside, p, (size_t)len + 1);
    return 1;
}

/* An installed tree's bundle: beside the running program (/proc/self/exe), or beside the
 * shared library or module that holds this code. */
static void find_beside(void) {
    char exe[PATH_MAX];
    ssize_t len = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (len > 0) {
        exe[len] = '\0';
        if (try_beside(exe, SWI_REPORT_NIIVUE_FROM_BIN)) return;
    }
    Dl_info info;
    if (dladdr((void *)swi_report_niivue_path, &info) && info.dli_fname && strchr(info.dli_fname, '/') &&
        (len <= 0 || strcmp(info.dli_fname, exe) != 0))
        if (!try_beside(info.dli_fname, SWI_REPORT_NIIVUE_FROM_LIB))
            try_beside(info.dli_fname, SWI_REPORT_NIIVUE_FROM_PY);
}

const char *swi_report_niivue_path(void) {
    const char *e = getenv("SWI_NIIVUE_JS");
    if (e && *e) return e;
    if (g_set_path[0]) return g_set_path;
    pthread_once(&g_beside_once, find_beside);
    return g_beside[0] ? g_beside : SWI_REPORT_NIIVUE_DEFAULT;
}

#define INSTALL_HINT \
    "install it with scripts/install-deps.sh (npm @niivue/niivue) or name it in SWI_NIIVUE_JS"

int rep__read_file(const char *path, const char *what, char **out, size_t *len, char *err, size_t n) {
    char why[512];
    int64_t size = 0;
    int fd = swi_io_open_regular(path, &size, why, sizeof why);
    if (fd < 0) {
        rep__err(err, n, "%s: %s", what, why);
        return 1;
    }
    if (size <= 0 || size > ((int64_t)1 << 30)) {
        close(fd);
        rep__err(err, n, "%s %s: %s", what, path, size <= 0 ? "is empty" : "is larger than 1 GB");
        return 1;
    }
    char *buf = malloc((size_t)size + 1);
    if (!buf) {
        close(fd);
        rep__err(err, n, "%s %s: out of memory", what, path);
        return 1;
    }
    size_t got = 0;
    while (got < (size_t)size) {
        ssize_t r = read(fd, buf + got, (size_t)size - got);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) {
            rep__err(err, n, "%s %s: %s", what, path, r < 0 ? strerror(errno) : "shorter than its size");
            free(buf);
            close(fd);
            return 1;
        }
        got += (size_t)r;
    }
    close(fd);
    buf[got] = '\0';
    *out = buf;
    *len = got;
    return 0;
}

/* The bundle, checked to be inlinable in a <script> element. */
static int read_bundle(char **js, size_t *len, char *err, size_t n) {
    const char *path = swi_report_niivue_path();
    char why[1024];
    if (rep__read_file(path, "NiiVue's browser build", js, len, why, sizeof why)) {
        rep__err(err, n, "%s (%s)", why, INSTALL_HINT);
        return 1;
    }
    if (strlen(*js) != *len || !strstr(*js, "niivue")) {
        rep__err(err, n, "NiiVue's browser build %s: not NiiVue's niivue.umd.js (%s)", path, INSTALL_HINT);
        free(*js);
        return 1;
    }
    /* "</script" would end the element early; "<!--" changes how the parser reads it */
    for (const char *c = *js; (c = strchr(c, '<')); c++)
        if (strncasecmp(c, "</script", 8) == 0 || strncmp(c, "<!--", 4) == 0) {
            rep__err(err, n, "NiiVue's browser build %s: holds \"%.8s\", which cannot be inlined in a page",
                     path, c);
            free(*js);
            return 1;
        }
    return 0;
}

swi_status swi_report_check(char *err, size_t n) {
    char *js = NULL;
    size_t len = 0;
    if (read_bundle(&js, &len, err, n)) return SWI_ERR_INVALID_ARG;
    free(js);
    return SWI_OK;
}

/* ---- previews --------------------------------------------------------------------- */

typedef struct preview {
    int64_t f[3], size[3]; /* block edge (voxels of the full grid) and preview sizes */
    double affine[4][4];
} preview;

static void preview_grid(const swi_report_page *p, preview *pv) {
    for (int a = 0; a < 3; a++) {
        pv->f[a] = (p->size[a] + SWI_REPORT_PREVIEW_MAX - 1) / SWI_REPORT_PREVIEW_MAX;
        pv->size[a] = (p->size[a] + pv->f[a] - 1) / pv->f[a];
    }
    /* preview voxel q is the block whose centre is full voxel q * f + (f - 1) / 2 */
    memcpy(pv->affine, p->affine, sizeof pv->affine);
    for (int r = 0; r < 3; r++) {
        double t = p->affine[r][3];
        for (int c = 0; c < 3; c++) {
            pv->affine[r][c] = p->affine[r][c] * (double)pv->f[c];
            t += p->affine[r][c] * (double)(pv->f[c] - 1) / 2.0;
        }
        pv->affine[r][3] = t;
    }
}

/* Labels at each block's centre (nearest), as their classes' indexes into the page's colour
 * table (index[label], out_bytes each): a label value of any size draws, where NiiVue's
 * colour table indexed by the values themselves must be narrower than a texture. */
static void *preview_labels(const swi_report_page *p, const preview *pv, const uint16_t *index,
                            int out_bytes) {
    const int64_t m = pv->size[0] * pv->size[1] * pv->size[2];
    unsigned char *out = malloc((size_t)m * (size_t)out_bytes);
    if (!out) return NULL;
    int64_t o = 0;
    for (int64_t i = 0; i < pv->size[0]; i++) {
        int64_t si = i * pv->f[0] + (pv->f[0] - 1) / 2;
        if (si >= p->size[0]) si = p->size[0] - 1;
        for (int64_t j = 0; j < pv->size[1]; j++) {
            int64_t sj = j * pv->f[1] + (pv->f[1] - 1) / 2;
            if (sj >= p->size[1]) sj = p->size[1] - 1;
            for (int64_t k = 0; k < pv->size[2]; k++, o++) {
                int64_t sk = k * pv->f[2] + (pv->f[2] - 1) / 2;
                if (sk >= p->size[2]) sk = p->size[2] - 1;
                int64_t v = (si * p->size[1] + sj) * p->size[2] + sk;
                const uint16_t d = index[label_at(p->labels, p->label_bytes, v)];
                if (out_bytes == 1)
                    out[o] = (unsigned char)d;
                else
                    ((uint16_t *)out)[o] = d;
            }
        }
    }
    return out;
}

/* How the page's image maps its 16-bit values back to intensities, and its automatic
 * window (the 0.5th and 99.5th percentiles, as the PNG preview's). */
typedef struct image_scale {
    double slope, inter, win[2];
} image_scale;

/* The image averaged over each block, kept in its own units so a reader can window it (CT
 * presets in HU) and read it under the cursor: 16 bits a voxel over the image's range,
 * exact for whole numbers spanning at most 65535 (CT's HU). */
static uint16_t *preview_image(const swi_report_page *p, const preview *pv, image_scale *sc) {
    const int64_t m = pv->size[0] * pv->size[1] * pv->size[2];
    float *avg = malloc((size_t)m * sizeof *avg);
    uint16_t *out = malloc((size_t)m * sizeof *out);
    if (!avg || !out) {
        free(avg);
        free(out);
        return NULL;
    }
    int64_t o = 0;
    for (int64_t i = 0; i < pv->size[0]; i++)
        for (int64_t j = 0; j < pv->size[1]; j++)
            for (int64_t k = 0; k < pv->size[2]; k++, o++) {
                double sum = 0;
                int64_t cnt = 0;
                for (int64_t a = i * pv->f[0]; a < (i + 1) * pv->f[0] && a < p->size[0]; a++)
                    for (int64_t b = j * pv->f[1]; b < (j + 1) * pv->f[1] && b < p->size[1]; b++)
                        for (int64_t c = k * pv->f[2]; c < (k + 1) * pv->f[2] && c < p->size[2]; c++) {
                            float x = p->image[(a * p->size[1] + b) * p->size[2] + c];
                            if (isfinite(x)) sum += x, cnt++;
                        }
                avg[o] = cnt ? (float)(sum / (double)cnt) : 0.0f;
            }
    float lo = avg[0], hi = avg[0];
    int whole = 1;
    for (int64_t v = 0; v < m; v++) {
        if (avg[v] < lo) lo = avg[v];
        if (avg[v] > hi) hi = avg[v];
        whole &= avg[v] == floorf(avg[v]);
    }
    const float min = lo, max = hi;
    enum { BINS = 4096 };
    int64_t *hist = calloc(BINS, sizeof *hist);
    if (hist && hi > lo) {
        const double scale = (BINS - 1) / ((double)hi - (double)lo);
        for (int64_t v = 0; v < m; v++) hist[(int)(((double)avg[v] - lo) * scale)]++;
        int64_t acc = 0, want_lo = (int64_t)(0.005 * (double)m), want_hi = (int64_t)(0.995 * (double)m);
        double wlo = lo, whi = hi;
        int have_lo = 0;
        for (int b = 0; b < BINS; b++) {
            acc += hist[b];
            if (!have_lo && acc > want_lo) wlo = lo + b / scale, have_lo = 1;
            if (acc >= want_hi) {
                whi = lo + (b + 1) / scale;
                break;
            }
        }
        if (whi > wlo) lo = (float)wlo, hi = (float)whi;
    }
    free(hist);
    sc->win[0] = lo;
    sc->win[1] = hi > lo ? hi : lo + 1;
    sc->inter = min;
    sc->slope = whole && (double)max - (double)min <= 65535.0 ? 1.0
                : max > min                                   ? ((double)max - (double)min) / 65535.0
                                                              : 1.0;
    for (int64_t v = 0; v < m; v++) {
        double t = ((double)avg[v] - sc->inter) / sc->slope;
        out[v] = (uint16_t)(t < 0 ? 0 : t > 65535 ? 65535 : t + 0.5);
    }
    free(avg);
    return out;
}

/* src as one gzip member (zlib) into a malloc'd *out: 0, or 1 when out of memory. */
static int gzip_one_member(const unsigned char *src, size_t n, unsigned char **out, size_t *out_len) {
    z_stream z;
    memset(&z, 0, sizeof z);
    /* 15 + 16: a gzip header and trailer around the deflate stream */
    if (deflateInit2(&z, 6, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) != Z_OK) return 1;
    uLong bound = deflateBound(&z, (uLong)n);
    unsigned char *dst = malloc(bound);
    if (!dst || n > (size_t)UINT32_MAX) {
        free(dst);
        deflateEnd(&z);
        return 1;
    }
    z.next_in = (Bytef *)src;
    z.avail_in = (uInt)n;
    z.next_out = dst;
    z.avail_out = (uInt)bound;
    int rc = deflate(&z, Z_FINISH);
    *out_len = z.total_out;
    deflateEnd(&z);
    if (rc != Z_STREAM_END) {
        free(dst);
        return 1;
    }
    *out = dst;
    return 0;
}

/* data on the preview grid as a .nii.gz, base64 onto f. */
static int write_volume_b64(FILE *f, const char *page, const preview *pv, const void *data, swi_dtype type,
                            swi_io_kind kind, int64_t classes, const image_scale *sc, char *err, size_t n) {
    /* a volume of no file format: swi_io writes its NIfTI header from the affine */
    swi_volume like;
    memset(&like, 0, sizeof like);
    like.format = SWI_IO_UNKNOWN;
    memcpy(like.size, pv->size, sizeof like.size);
    memcpy(like.affine, pv->affine, sizeof like.affine);
    for (int c = 0; c < 3; c++)
        like.spacing[c] = sqrt(pv->affine[0][c] * pv->affine[0][c] + pv->affine[1][c] * pv->affine[1][c] +
                               pv->affine[2][c] * pv->affine[2][c]);
    like.slope = 1;
    like.frames = 1;
    FILE *tmp = tmpfile();
    if (!tmp) {
        rep__err(err, n, "%s: cannot create a temporary file: %s", page, strerror(errno));
        return 1;
    }
    int fd = dup(fileno(tmp));
    char why[512];
    if (fd < 0 || swi_volume_write_as_fd(fd, SWI_VOLUME_NIFTI, "preview.nii", &like, data, type, kind, 1,
                                         classes, NULL, why, sizeof why) != SWI_OK) {
        rep__err(err, n, "%s: the preview volume: %s", page, fd < 0 ? strerror(errno) : why);
        fclose(tmp);
        return 1;
    }
    long len = fseek(tmp, 0, SEEK_END) == 0 ? ftell(tmp) : -1;
    unsigned char *buf = len > 0 ? malloc((size_t)len) : NULL;
    if (!buf || fseek(tmp, 0, SEEK_SET) != 0 || fread(buf, 1, (size_t)len, tmp) != (size_t)len) {
        rep__err(err, n, "%s: cannot read back the preview volume", page);
        free(buf);
        fclose(tmp);
        return 1;
    }
    fclose(tmp);
    int32_t hdr_size = 0;
    if (sc && len >= 348) memcpy(&hdr_size, buf, 4);
    if (sc && hdr_size == 348) {
        /* NIfTI-1's scl_slope, scl_inter (the 16-bit values back to intensities) and
         * cal_max, cal_min (the window it opens with), in the header's own byte order */
        const float f4[4] = {(float)sc->slope, (float)sc->inter, (float)sc->win[1], (float)sc->win[0]};
        memcpy(buf + 112, &f4[0], 4);
        memcpy(buf + 116, &f4[1], 4);
        memcpy(buf + 124, &f4[2], 4);
        memcpy(buf + 128, &f4[3], 4);
    }
    /* gzip as one member: swi_io's .nii.gz is several (written on every core), and the
     * page's decompressor reads only the first */
    unsigned char *gz = NULL;
    size_t gz_len = 0;
    if (gzip_one_member(buf, (size_t)len, &gz, &gz_len)) {
        rep__err(err, n, "%s: out of memory compressing the preview volume", page);
        free(buf);
        return 1;
    }
    free(buf);
    rep__base64(f, gz, gz_len, 1);
    free(gz);
    return 0;
}

/* ---- the page ----------------------------------------------------------------------- */

static void put_ints(FILE *f, const int64_t *x, int n) {
    fputc('[', f);
    for (int a = 0; a < n; a++) fprintf(f, "%s%lld", a ? "," : "", (long long)x[a]);
    fputc(']', f);
}

static void class_name(const swi_report_page *p, int64_t l, char *buf, size_t n, const char **name) {
    *name = p->names && l < p->classes && p->names[l] ? p->names[l] : NULL;
    if (!*name) {
        snprintf(buf, n, l == 0 ? "background" : "class %lld", (long long)l);
        *name = buf;
    }
}

static void put_reals(FILE *f, const double *x, int n) {
    fputc('[', f);
    for (int a = 0; a < n; a++) fprintf(f, "%s%.17g", a ? "," : "", x[a]);
    fputc(']', f);
}

static void put_items(FILE *f, const swi_report_item *items, int n) {
    fputc('[', f);
    for (int s = 0; s < n; s++) {
        fputs(s ? ",[" : "[", f);
        rep__json_str(f, items[s].key);
        fputc(',', f);
        rep__json_str(f, items[s].value);
        fputc(']', f);
    }
    fputc(']', f);
}

static int write_meta(FILE *f, const swi_report_page *p, const preview *pv, int64_t classes,
                      const uint16_t *index, int64_t ncolors, const swi_report_class_stats *st,
                      const image_scale *sc) {
    fputs("<script id=\"swi-meta\" type=\"application/json\">{\"title\":", f);
    rep__json_str(f, p->title ? p->title : "segmentation");
    fputs(",\"size\":", f);
    put_ints(f, p->size, 3);
    fputs(",\"preview\":", f);
    put_ints(f, pv->size, 3);
    fputs(",\"factor\":", f);
    put_ints(f, pv->f, 3);
    fputs(",\"spacing\":[", f);
    for (int c = 0; c < 3; c++)
        fprintf(f, "%s%.17g", c ? "," : "",
                sqrt(p->affine[0][c] * p->affine[0][c] + p->affine[1][c] * p->affine[1][c] +
                     p->affine[2][c] * p->affine[2][c]));
    fputs("],\"affine\":[", f);
    for (int r = 0; r < 4; r++)
        for (int c = 0; c < 4; c++) fprintf(f, "%s%.17g", r + c ? "," : "", p->affine[r][c]);
    fprintf(f, "],\"voxel_ml\":%.17g,\"hasImage\":%s,\"ncolors\":%lld,\"classes\":[",
            rep__voxel_ml(p->affine), p->image ? "true" : "false", (long long)ncolors);
    int first = 1;
    for (int64_t l = 1; l < classes; l++) {
        if (!index[l]) continue;
        char buf[48];
        const char *name;
        class_name(p, l, buf, sizeof buf, &name);
        unsigned char rgb[3];
        swi_io_label_color(l, rgb);
        fprintf(f, "%s{\"label\":%lld,\"index\":%d,\"name\":", first ? "" : ",", (long long)l, index[l]);
        first = 0;
        rep__json_str(f, name);
        fprintf(f, ",\"rgb\":[%d,%d,%d],\"voxels\":%lld,\"ml\":%.17g,\"lo\":", rgb[0], rgb[1], rgb[2],
                (long long)st[l].voxels, st[l].ml);
        put_ints(f, st[l].lo, 3);
        fputs(",\"hi\":", f);
        put_ints(f, st[l].hi, 3);
        fputs(",\"at\":", f);
        put_ints(f, st[l].at, 3);
        fputs(",\"mm_lo\":", f);
        put_reals(f, st[l].mm_lo, 3);
        fputs(",\"mm_hi\":", f);
        put_reals(f, st[l].mm_hi, 3);
        fputc('}', f);
    }
    fputs("],\"summary\":", f);
    put_items(f, p->summary, p->n_summary);
    fputs(",\"ids\":", f);
    put_items(f, p->ids, p->n_ids);
    if (sc) {
        fputs(",\"autoWindow\":", f);
        put_reals(f, sc->win, 2);
    }
    fputs("}</script>\n", f);
    return 0;
}

/* Template text from `from` up to `marker` (or the end); returns past the marker or NULL. */
static const char *put_until(FILE *f, const char *from, const char *marker) {
    const char *m = strstr(from, marker);
    if (!m) {
        fputs(from, f);
        return NULL;
    }
    fwrite(from, 1, (size_t)(m - from), f);
    return m + strlen(marker);
}

int rep__finish(FILE *f, const char *name, char *err, size_t n) {
    int bad = ferror(f);
    int e = errno;
    if (fclose(f) != 0 && !bad) bad = 1, e = errno;
    if (bad) {
        rep__err(err, n, "%s: cannot write: %s", name, strerror(e ? e : EIO));
        return 1;
    }
    return 0;
}

swi_status swi_report_write_fd(int fd, const char *name, const swi_report_page *p, char *err, size_t n) {
    if (!name) name = "report";
    if (fd < 0) {
        rep__err(err, n, "%s: fd < 0", name);
        return SWI_ERR_INVALID_ARG;
    }
    if (check_page(p, name, err, n)) {
        close(fd);
        return SWI_ERR_INVALID_ARG;
    }
    char *js = NULL;
    size_t js_len = 0;
    if (read_bundle(&js, &js_len, err, n)) {
        close(fd);
        return SWI_ERR_INVALID_ARG;
    }
    /* classes: as given, and at least every label present */
    const int64_t N = p->size[0] * p->size[1] * p->size[2];
    int64_t top = 0;
    for (int64_t v = 0; v < N; v++) {
        int64_t l = label_at(p->labels, p->label_bytes, v);
        if (l > top) top = l;
    }
    const int64_t classes = p->classes > top ? p->classes : top + 1;
    swi_report_class_stats *st = malloc((size_t)classes * sizeof *st);
    uint16_t *index = malloc((size_t)classes * sizeof *index);
    void *plab = NULL;
    uint16_t *pimg = NULL;
    swi_status rc = SWI_OK;
    if (!st || !index) {
        rep__err(err, n, "%s: out of memory", name);
        close(fd);
        rc = SWI_ERR_NOMEM;
        goto done;
    }
    if (swi_report_stats(p, classes, st, err, n) != SWI_OK) {
        close(fd);
        rc = SWI_ERR_INVALID_ARG;
        goto done;
    }
    /* the classes the page lists (those present, and those the caller declared), each an
     * index into the overlay's colour table */
    int64_t ncolors = 1;
    index[0] = 0;
    for (int64_t l = 1; l < classes; l++) index[l] = st[l].voxels || l < p->classes ? (uint16_t)ncolors++ : 0;
    const int index_bytes = ncolors <= 256 ? 1 : 2;
    preview pv;
    preview_grid(p, &pv);
    image_scale sc = {1, 0, {0, 1}};
    plab = preview_labels(p, &pv, index, index_bytes);
    pimg = plab && p->image ? preview_image(p, &pv, &sc) : NULL;
    FILE *f = plab && (!p->image || pimg) ? fdopen(fd, "w") : NULL;
    if (!f) {
        rep__err(err, n, "%s: %s", name, plab && (!p->image || pimg) ? strerror(errno) : "out of memory");
        close(fd);
        rc = SWI_ERR_NOMEM;
        goto done;
    }
    const char *t = put_until(f, rep__page_html, "<!--SWI_DATA-->");
    write_meta(f, p, &pv, classes, index, ncolors, st, p->image ? &sc : NULL);
    if (p->image) {
        fputs("<script id=\"swi-image\" type=\"text/plain\">\n", f);
        if (write_volume_b64(f, name, &pv, pimg, SWI_DTYPE_UINT16, SWI_IO_IMAGE, 0, &sc, err, n))
            rc = SWI_ERR_IO;
        fputs("</script>\n", f);
    }
    fputs("<script id=\"swi-labels\" type=\"text/plain\">\n", f);
    if (rc == SWI_OK &&
        write_volume_b64(f, name, &pv, plab, index_bytes == 1 ? SWI_DTYPE_UINT8 : SWI_DTYPE_UINT16,
                         SWI_IO_LABELS, ncolors, NULL, err, n))
        rc = SWI_ERR_IO;
    fputs("</script>\n", f);
    if (t) t = put_until(f, t, "<!--SWI_NIIVUE-->");
    fputs("<script>\n", f);
    fwrite(js, 1, js_len, f);
    fputs("\n</script>\n", f);
    if (t) fputs(t, f);
    if (rc != SWI_OK) {
        fclose(f);
        goto done;
    }
    if (rep__finish(f, name, err, n)) rc = SWI_ERR_IO;
done:
    free(js);
    free(st);
    free(index);
    free(plab);
    free(pimg);
    return rc;
}
