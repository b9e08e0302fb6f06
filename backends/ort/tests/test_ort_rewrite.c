/*
 * test_ort_rewrite.c -- the load-time rewrites of swi_ort (rewrite.c) keep the function:
 * for each tiny model of make_rewrite_models.py, the model loaded with and without
 * rewrites gives the same outputs within 1e-5 of the output's largest magnitude on a
 * random batch, exactly the expected number of layers is rewritten (the "_rwN" in the
 * name), and swi_ort_optimize saves a model that loads as it is, needs no further
 * rewrite and gives the same outputs.
 *
 *   test_ort_rewrite DIR MODEL.onnx...     (DIR: scratch for the saved models)
 */
#include "ort_test_util.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int failures;
#define CHECK(cond, ...)                                         \
    do {                                                         \
        if (!(cond)) {                                           \
            fprintf(stderr, "FAIL %s:%d: ", __FILE__, __LINE__); \
            fprintf(stderr, __VA_ARGS__);                        \
            fprintf(stderr, "\n");                               \
            failures++;                                          \
        }                                                        \
    } while (0)

typedef struct net {
    swi_ort_model *m;
    swi_head_spec head;
    int64_t channels, roi[3], in_w, out_w;
} net;

/* Open and prepare `path`; dynamic spatial sizes get a 6x8x5 window. */
static int open_net(const char *path, int rewrite, net *n) {
    char err[768];
    memset(n, 0, sizeof *n);
    const ort_test_spec spec = {.threads = 1, .no_rewrite = !rewrite, .dyn_roi = {6, 8, 5}};
    swi_ort_window w;
    if (ort_test_open(path, &spec, &n->m, &w, &n->head, err, sizeof err)) {
        fprintf(stderr, "FAIL: %s\n", err);
        return -1;
    }
    n->channels = w.channels;
    memcpy(n->roi, w.roi, sizeof n->roi);
    n->in_w = n->channels * w.roi[0] * w.roi[1] * w.roi[2];
    n->out_w = n->head.channels * n->head.spatial[0] * n->head.spatial[1] * n->head.spatial[2];
    return 0;
}

/* Outputs of a and b on the same random batch of 2 agree within 1e-5 of their scale. */
static void same_function(const char *what, const net *a, const net *b) {
    CHECK(a->in_w == b->in_w && a->out_w == b->out_w, "%s: shapes differ", what);
    if (a->in_w != b->in_w || a->out_w != b->out_w) return;
    float *x = malloc((size_t)(2 * a->in_w) * sizeof *x);
    float *ya = malloc((size_t)(2 * a->out_w) * sizeof *ya);
    float *yb = malloc((size_t)(2 * a->out_w) * sizeof *yb);
    char err[768];
    if (!x || !ya || !yb) {
        CHECK(0, "out of memory");
        goto done;
    }
    uint32_t s = 777;
    for (int64_t i = 0; i < 2 * a->in_w; i++) {
        s = s * 1664525u + 1013904223u;
        x[i] = (float)(s >> 8) / 16777216.0f * 2.0f - 1.0f;
    }
    if (swi_ort_run(a->m, x, 2, ya, err, sizeof err) || swi_ort_run(b->m, x, 2, yb, err, sizeof err)) {
        CHECK(0, "%s: %s", what, err);
        goto done;
    }
    double scale = 0, diff = 0;
    for (int64_t i = 0; i < 2 * a->out_w; i++) {
        scale = fmax(scale, fabs(ya[i]));
        diff = fmax(diff, fabs((double)ya[i] - yb[i]));
    }
    CHECK(scale > 0 && diff <= 1e-5 * scale, "%s: max difference %g at scale %g (limit 1e-5 relative)", what,
          diff, scale);
    printf("  %s: max |difference| %.3g, %.3g relative\n", what, diff, scale > 0 ? diff / scale : 0.0);
done:
    free(x);
    free(ya);
    free(yb);
}

static void check_model(const char *dir, const char *path) {
    const char *base = strrchr(path, '/') ? strrchr(path, '/') + 1 : path;
    const char *rw = strstr(base, "_rw");
    int expect = rw ? atoi(rw + 3) : -1;
    CHECK(expect >= 0, "%s: no _rwN in the name", base);
    printf("%s\n", base);
    net orig, fast, saved;
    if (open_net(path, 0, &orig) || open_net(path, 1, &fast)) {
        failures++;
        return;
    }
    CHECK(swi_ort_rewrites(orig.m) == 0, "%s: rewrites with rewrite = 0", base);
    CHECK(swi_ort_rewrites(fast.m) == expect, "%s: %d layers rewritten, expected %d", base,
          swi_ort_rewrites(fast.m), expect);
    same_function("loaded with rewrites", &orig, &fast);

    char out[4096], err[768];
    snprintf(out, sizeof out, "%s/%s", dir, base);
    int done = -1;
    CHECK(swi_ort_optimize(path, out, &done, err, sizeof err) == SWI_OK, "optimize: %s", err);
    CHECK(done == expect, "%s: swi_ort_optimize rewrote %d, expected %d", base, done, expect);
    if (open_net(out, 1, &saved) == 0) {
        CHECK(swi_ort_rewrites(saved.m) == 0, "%s: the saved model has more to rewrite", base);
        same_function("saved by swi_ort_optimize", &orig, &saved);
        swi_ort_close(saved.m);
    } else {
        failures++;
    }
    swi_ort_close(orig.m);
    swi_ort_close(fast.m);
}

int main(int argc, char **argv) {
    if (argc < 3) {
        fprintf(stderr, "usage: test_ort_rewrite DIR MODEL.onnx...\n");
        return 2;
    }
    char err[768];
    CHECK(swi_ort_optimize("no/such.onnx", "x.onnx", NULL, err, sizeof err) == SWI_ERR_INVALID_ARG &&
              strstr(err, "no/such.onnx"),
          "missing model: %s", err);
    for (int i = 2; i < argc; i++) check_model(argv[1], argv[i]);
    if (failures) {
        fprintf(stderr, "%d failure(s)\n", failures);
        return 1;
    }
    printf("ort_rewrite: %d models, every rewrite the same function\n", argc - 2);
    return 0;
}
