/*
 * swi-golden -- run libswi on golden case folders (tests/data/golden/README.md) and compare
 * with the reference outputs.
 *
 *     swi-golden [--reduce argmax] [--threads N] CASE_DIR...
 *
 * Prints `PASS name max_err=...` or `FAIL name why` per case and a last line
 * `N passed, M failed`; exits 0 only when every case passes.
 */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "case_file.h"
#include "predictors.h"
#include "swi.h"

#define ABS_TOL 1e-4
#define REL_TOL 1e-4
#define TIE_GAP 1e-4

typedef struct options {
    int argmax;
    int threads;
} options;

typedef struct case_result {
    char why[1024];
    double max_err;
    int64_t skipped; /* argmax: near-ties not checked */
} case_result;

static void fail(case_result *res, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(res->why, sizeof(res->why), fmt, ap);
    va_end(ap);
}

/* Case name: the folder's last path component. */
static void case_name(const char *dir, char *name, size_t len) {
    size_t n = strlen(dir);
    while (n > 1 && dir[n - 1] == '/') n--;
    size_t start = n;
    while (start > 0 && dir[start - 1] != '/') start--;
    size_t m = n - start;
    if (m == 0) {
        snprintf(name, len, "%s", dir);
        return;
    }
    if (m >= len) m = len - 1;
    memcpy(name, dir + start, m);
    name[m] = '\0';
}

static int join(char *out, size_t len, const char *dir, const char *file) {
    int n = snprintf(out, len, "%s/%s", dir, file);
    return n < 0 || (size_t)n >= len ? -1 : 0;
}

/* Write "[i0, i1, ...]" for flat index `flat` of `shape`. */
static void format_index(char *buf, size_t len, int64_t flat, const int64_t *shape, int n) {
    int64_t idx[2 + SWI_MAX_DIMS];
    for (int i = n - 1; i >= 0; i--) {
        idx[i] = flat % shape[i];
        flat /= shape[i];
    }
    size_t used = 0;
    for (int i = 0; i < n && used < len; i++) {
        int w = snprintf(buf + used, len - used, "%s%lld", i == 0 ? "[" : ", ", (long long)idx[i]);
        if (w < 0) return;
        used += (size_t)w;
    }
    if (used < len) snprintf(buf + used, len - used, "]");
}

/* Compare blended scores; 0 when all within tolerance. */
static int compare_scores(const float *got, const float *exp, const int64_t *shape, int n_shape, int head,
                          case_result *res) {
    int64_t count = golden_count(shape, n_shape);
    int64_t bad = 0, first_bad = -1;
    for (int64_t i = 0; i < count; i++) {
        double e = exp[i], g = got[i];
        double err = fabs(g - e);
        if (!(err <= ABS_TOL + REL_TOL * fabs(e))) {
            if (bad++ == 0) first_bad = i;
        }
        if (err > res->max_err || isnan(err)) res->max_err = isnan(err) ? INFINITY : err;
    }
    if (bad == 0) return 0;
    char at[128];
    format_index(at, sizeof(at), first_bad, shape, n_shape);
    fail(res, "head %d: %lld of %lld values off, first at %s got %.7g expected %.7g (max_err=%.3g)", head,
         (long long)bad, (long long)count, at, (double)got[first_bad], (double)exp[first_bad], res->max_err);
    return -1;
}

/* Compare a label map with the argmax of the expected scores, skipping near-ties. */
static int compare_labels(const void *labels, int wide, const float *exp, const int64_t *shape, int n_shape,
                          int head, case_result *res) {
    const int64_t batch = shape[0], C = shape[1];
    const int64_t vox = golden_count(shape + 2, n_shape - 2);
    int64_t bad = 0, first_bad = -1, first_got = 0, first_exp = 0;
    for (int64_t b = 0; b < batch; b++) {
        for (int64_t v = 0; v < vox; v++) {
            const float *e = exp + b * C * vox + v;
            int64_t best = 0;
            for (int64_t c = 1; c < C; c++)
                if (e[c * vox] > e[best * vox]) best = c;
            double second = -INFINITY;
            for (int64_t c = 0; c < C; c++)
                if (c != best && e[c * vox] > second) second = e[c * vox];
            if (C > 1 && (double)e[best * vox] - second < TIE_GAP) {
                res->skipped++;
                continue;
            }
            int64_t flat = b * vox + v;
            int64_t g = wide ? ((const uint16_t *)labels)[flat] : ((const uint8_t *)labels)[flat];
            if (g != best && bad++ == 0) {
                first_bad = flat;
                first_got = g;
                first_exp = best;
            }
        }
    }
    if (bad == 0) return 0;
    int64_t lshape[1 + SWI_MAX_DIMS];
    lshape[0] = batch;
    for (int i = 2; i < n_shape; i++) lshape[i - 1] = shape[i];
    char at[128];
    format_index(at, sizeof(at), first_bad, lshape, n_shape - 1);
    fail(res, "head %d argmax: %lld of %lld labels wrong, first at %s got %lld expected %lld", head,
         (long long)bad, (long long)(batch * vox), at, (long long)first_got, (long long)first_exp);
    res->max_err = 1.0;
    return -1;
}

static int run_case(const char *dir, const options *opt, case_result *res) {
    char path[4096];
    golden_case gc;
    float *input = NULL;
    float *expected[SWI_MAX_HEADS] = {0};
    void *dst[SWI_MAX_HEADS] = {0};
    swi_ctx *ctx = NULL;
    int rc = -1;

    if (join(path, sizeof(path), dir, "case.txt") != 0) {
        fail(res, "path too long");
        return -1;
    }
    if (golden_case_parse(path, &gc, res->why, sizeof(res->why)) != 0) return -1;
    const int d = gc.dims;

    int64_t in_shape[2 + SWI_MAX_DIMS] = {gc.batch, gc.in_channels};
    for (int k = 0; k < d; k++) in_shape[2 + k] = gc.image_size[k];
    if (join(path, sizeof(path), dir, "input.f32") != 0 ||
        golden_load_f32(path, golden_count(in_shape, 2 + d), &input, res->why, sizeof(res->why)) != 0)
        goto done;

    for (int h = 0; h < gc.n_heads; h++) {
        char file[32];
        if (gc.n_heads == 1) {
            /* output.f32; output0.f32 accepted as well */
            snprintf(file, sizeof(file), "output.f32");
            if (join(path, sizeof(path), dir, file) != 0) goto done;
            FILE *probe = fopen(path, "rb");
            if (probe != NULL)
                fclose(probe);
            else
                snprintf(file, sizeof(file), "output0.f32");
        } else {
            snprintf(file, sizeof(file), "output%d.f32", h);
        }
        if (join(path, sizeof(path), dir, file) != 0 ||
            golden_load_f32(path, golden_count(gc.shape[h], 2 + d), &expected[h], res->why,
                            sizeof(res->why)) != 0)
            goto done;
    }

    swi_params p;
    swi_params_init(&p, d);
    for (int k = 0; k < d; k++) {
        p.roi[k] = gc.roi[k];
        p.overlap[k] = gc.overlap[k];
        p.tile_step[k] = gc.tile_step[k];
        p.sigma_scale[k] = gc.sigma_scale[k];
    }
    p.mode = gc.mode;
    p.grid = gc.grid;
    p.padding_mode = gc.padding;
    p.cval = gc.cval;
    p.sw_batch_size = gc.sw_batch_size;
    p.threads = opt->threads;
    p.n_heads = gc.n_heads;
    int64_t win[SWI_MAX_DIMS];
    for (int k = 0; k < d; k++) win[k] = golden_case_window(&gc, k);
    for (int h = 0; h < gc.n_heads; h++) {
        p.heads[h].channels = gc.head_channels[h];
        golden_predictor_window(gc.predictor, h, d, win, p.heads[h].spatial);
    }

    swi_output outs[SWI_MAX_HEADS];
    int wide[SWI_MAX_HEADS] = {0};
    for (int h = 0; h < gc.n_heads; h++) {
        int64_t count = golden_count(gc.shape[h], 2 + d);
        size_t bytes;
        swi_output_init(&outs[h], h, opt->argmax ? SWI_REDUCE_ARGMAX : SWI_REDUCE_NONE);
        if (opt->argmax) {
            wide[h] = gc.head_channels[h] > 256;
            outs[h].dtype = wide[h] ? SWI_DTYPE_UINT16 : SWI_DTYPE_UINT8;
            bytes = (size_t)(count / gc.shape[h][1]) * (wide[h] ? 2 : 1);
        } else {
            outs[h].dtype = SWI_DTYPE_FLOAT32;
            bytes = (size_t)count * sizeof(float);
        }
        dst[h] = malloc(bytes);
        if (dst[h] == NULL) {
            fail(res, "out of memory");
            goto done;
        }
        /* A value the engine never writes would show up as a mismatch. */
        memset(dst[h], 0xff, bytes);
        outs[h].dst = dst[h];
        outs[h].dst_bytes = bytes;
    }

    ctx = swi_create();
    if (ctx == NULL) {
        fail(res, "swi_create failed");
        goto done;
    }
    swi_tensor in = {.data = input, .batch = gc.batch, .channels = gc.in_channels, .dims = d, .size = {0}};
    for (int k = 0; k < d; k++) in.size[k] = gc.image_size[k];
    golden_predictor gp = {gc.predictor, gc.out_channels};
    swi_predictor pred = {golden_predict, &gp};
    swi_status st = swi_run(ctx, &p, &in, &pred, outs, gc.n_heads);
    if (st != SWI_OK) {
        fail(res, "swi_run: %s: %s", swi_status_name(st), swi_last_error(ctx));
        goto done;
    }

    for (int h = 0; h < gc.n_heads; h++) {
        int64_t size[SWI_MAX_DIMS] = {0};
        int rd = swi_result_size(ctx, h, size);
        int same = rd == d;
        for (int k = 0; k < d && same; k++) same = size[k] == gc.shape[h][2 + k];
        if (!same) {
            fail(res, "head %d: swi_result_size gives %d dims [%lld %lld %lld], expected [%lld %lld %lld]", h,
                 rd, (long long)size[0], (long long)size[1], (long long)size[2], (long long)gc.shape[h][2],
                 (long long)(d > 1 ? gc.shape[h][3] : 0), (long long)(d > 2 ? gc.shape[h][4] : 0));
            goto done;
        }
        if (swi_result_channels(ctx, h) != gc.head_channels[h]) {
            fail(res, "head %d: swi_result_channels gives %lld, expected %lld", h,
                 (long long)swi_result_channels(ctx, h), (long long)gc.head_channels[h]);
            goto done;
        }
        int bad = opt->argmax ? compare_labels(dst[h], wide[h], expected[h], gc.shape[h], 2 + d, h, res)
                              : compare_scores(dst[h], expected[h], gc.shape[h], 2 + d, h, res);
        if (bad) goto done;
    }
    rc = 0;
done:
    swi_free(ctx);
    for (int h = 0; h < SWI_MAX_HEADS; h++) {
        free(expected[h]);
        free(dst[h]);
    }
    free(input);
    return rc;
}

static void usage(FILE *f) {
    fprintf(f, "usage: swi-golden [--reduce argmax] [--threads N] CASE_DIR...\n"
               "Runs each golden case folder (case.txt, input.f32, output*.f32) through libswi\n"
               "and compares with the expected result (|got-exp| <= 1e-4 + 1e-4*|exp|).\n"
               "  --reduce argmax  check argmax label maps instead of blended scores\n"
               "  --threads N      blending threads (default 0: one per core)\n");
}

int main(int argc, char **argv) {
    options opt = {0, 0};
    const char **cases = calloc((size_t)argc + 1, sizeof(*cases));
    int n_cases = 0, options_done = 0;
    if (cases == NULL) return 2;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (options_done || a[0] != '-' || a[1] == '\0') {
            cases[n_cases++] = a;
            continue;
        }
        if (strcmp(a, "--") == 0) {
            options_done = 1;
        } else if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
            usage(stdout);
            free(cases);
            return 0;
        } else if (strcmp(a, "--reduce") == 0 || strncmp(a, "--reduce=", 9) == 0) {
            const char *v = a[8] == '=' ? a + 9 : (i + 1 < argc ? argv[++i] : "");
            if (strcmp(v, "argmax") == 0) {
                opt.argmax = 1;
            } else if (strcmp(v, "none") == 0) {
                opt.argmax = 0;
            } else {
                fprintf(stderr, "swi-golden: unknown reduction '%s' (argmax or none)\n", v);
                free(cases);
                return 2;
            }
        } else if (strcmp(a, "--threads") == 0 || strncmp(a, "--threads=", 10) == 0) {
            const char *v = a[9] == '=' ? a + 10 : (i + 1 < argc ? argv[++i] : "");
            char *end;
            long t = strtol(v, &end, 10);
            if (*v == '\0' || *end != '\0' || t < 0 || t > 1024) {
                fprintf(stderr, "swi-golden: --threads needs an integer in [0, 1024]\n");
                free(cases);
                return 2;
            }
            opt.threads = (int)t;
        } else {
            fprintf(stderr, "swi-golden: unknown option '%s'\n", a);
            usage(stderr);
            free(cases);
            return 2;
        }
    }
    if (n_cases == 0) {
        usage(stderr);
        free(cases);
        return 2;
    }

    int passed = 0, failed = 0;
    for (int i = 0; i < n_cases; i++) {
        char name[256];
        case_result res;
        memset(&res, 0, sizeof(res));
        case_name(cases[i], name, sizeof(name));
        if (run_case(cases[i], &opt, &res) == 0) {
            passed++;
            if (opt.argmax)
                printf("PASS %s max_err=0 (argmax, %lld near-ties skipped)\n", name, (long long)res.skipped);
            else
                printf("PASS %s max_err=%.3g\n", name, res.max_err);
        } else {
            failed++;
            printf("FAIL %s %s\n", name, res.why[0] != '\0' ? res.why : "unknown failure");
        }
        fflush(stdout);
    }
    printf("%d passed, %d failed\n", passed, failed);
    free(cases);
    return failed == 0 ? 0 : 1;
}
