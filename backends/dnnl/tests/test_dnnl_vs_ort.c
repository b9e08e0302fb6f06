/*
 * test_dnnl_vs_ort.c -- one ONNX model run by swi_dnnl and by ONNX Runtime on the same
 * random windows: every score within the tolerance (absolute, or relative to the largest
 * magnitude for bf16) and, for several classes, the same argmax labels (fp32).
 *
 *   test_dnnl_vs_ort [--bf16] [--tol T] [--windows N] [--refuse WORD] model channels d0 [d1 [d2]]
 *
 * --refuse WORD: the model must be refused by swi_dnnl_open or swi_dnnl_prepare with a
 * message containing WORD (nothing is run). Exit 0 pass, 1 fail, 77 skipped (bf16 on a CPU
 * without it).
 */
#include "swi_dnnl.h"
#include "swi_ort.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static uint64_t rng = 0x9E3779B97F4A7C15ull;
static float urand(void) {
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return (float)((rng >> 40) * (1.0 / 16777216.0)) * 2.f - 1.f;
}

int main(int argc, char **argv) {
    int bf16 = 0, windows = 2, a = 1;
    double tol = 1e-4;
    const char *refuse = NULL;
    for (; a < argc && argv[a][0] == '-' && argv[a][1] == '-'; a++) {
        if (!strcmp(argv[a], "--bf16"))
            bf16 = 1;
        else if (!strcmp(argv[a], "--tol") && a + 1 < argc)
            tol = atof(argv[++a]);
        else if (!strcmp(argv[a], "--windows") && a + 1 < argc)
            windows = atoi(argv[++a]);
        else if (!strcmp(argv[a], "--refuse") && a + 1 < argc)
            refuse = argv[++a];
        else
            return fprintf(stderr, "unknown option %s\n", argv[a]), 2;
    }
    if (argc - a < 3 || argc - a > 5) {
        fprintf(stderr,
                "usage: %s [--bf16] [--tol T] [--windows N] [--refuse WORD] model channels d0 [d1 [d2]]\n",
                argv[0]);
        return 2;
    }
    const char *path = argv[a];
    const int64_t channels = atoll(argv[a + 1]);
    const int dims = argc - a - 2;
    int64_t roi[3] = {0, 0, 0};
    for (int d = 0; d < dims; d++) roi[d] = atoll(argv[a + 2 + d]);
    char err[512] = "";
    swi_dnnl_options dopt;
    swi_dnnl_options_init(&dopt);
    dopt.threads = getenv("SWI_DNNL_TEST_THREADS") ? atoi(getenv("SWI_DNNL_TEST_THREADS")) : 2;
    dopt.precision = bf16 ? SWI_DNNL_BF16 : SWI_DNNL_FP32;
    if (bf16 && !swi_dnnl_bf16_supported()) {
        printf("SKIPPED: no bf16 on this CPU\n");
        return 77;
    }
    swi_dnnl_model *dm = NULL;
    swi_head_spec dh;
    swi_status st = swi_dnnl_open(path, &dopt, &dm, err, sizeof err);
    if (st == SWI_OK) st = swi_dnnl_prepare(dm, 0, channels, dims, roi, &dh, err, sizeof err);
    if (refuse) {
        swi_dnnl_close(dm);
        if (st == SWI_OK) {
            fprintf(stderr, "FAIL %s: accepted, expected a refusal naming '%s'\n", path, refuse);
            return 1;
        }
        if (!strstr(err, refuse)) {
            fprintf(stderr, "FAIL %s: refused with '%s', expected '%s' in it\n", path, err, refuse);
            return 1;
        }
        printf("ok %s refused: %s\n", path, err);
        return 0;
    }
    if (st != SWI_OK) {
        fprintf(stderr, "FAIL %s: dnnl: %s\n", path, err);
        swi_dnnl_close(dm);
        return 1;
    }
    swi_ort_options oopt;
    swi_ort_options_init(&oopt);
    oopt.threads = 1;
    oopt.rewrite = 0;
    swi_ort_model *om = NULL;
    swi_ort_window w;
    swi_head_spec oh;
    swi_ort_window_init(&w, channels);
    for (int d = 0; d < 3; d++) w.roi[d] = d < dims ? roi[d] : 1;
    if (dims == 3 &&
        (swi_ort_open(path, &oopt, &om, err, sizeof err) || swi_ort_prepare(om, &w, &oh, err, sizeof err))) {
        fprintf(stderr, "FAIL %s: ort: %s\n", path, err);
        return 1;
    }
    int64_t in_win = channels, out_win = dh.channels;
    for (int d = 0; d < dims; d++) {
        in_win *= roi[d];
        out_win *= dh.spatial[d];
    }
    if (om && (oh.channels != dh.channels || memcmp(oh.spatial, dh.spatial, sizeof oh.spatial))) {
        fprintf(stderr, "FAIL %s: output shapes differ (%lld vs %lld channels)\n", path,
                (long long)dh.channels, (long long)oh.channels);
        return 1;
    }
    float *in = malloc((size_t)(windows * in_win) * sizeof *in);
    float *o1 = malloc((size_t)(windows * out_win) * sizeof *o1);
    float *o2 = malloc((size_t)(windows * out_win) * sizeof *o2);
    if (!in || !o1 || !o2) return 1;
    for (int64_t i = 0; i < windows * in_win; i++) in[i] = urand();
    if (swi_dnnl_run(dm, in, windows, o1, err, sizeof err)) {
        fprintf(stderr, "FAIL %s: dnnl run: %s\n", path, err);
        return 1;
    }
    /* a second run through the same plan gives the same values (buffers reused cleanly) */
    float *o3 = malloc((size_t)(windows * out_win) * sizeof *o3);
    if (!o3 || swi_dnnl_run(dm, in, windows, o3, err, sizeof err) ||
        memcmp(o1, o3, (size_t)(windows * out_win) * sizeof *o1) != 0) {
        fprintf(stderr, "FAIL %s: a second run differs: %s\n", path, err);
        return 1;
    }
    free(o3);
    if (!om) {
        printf("ok %s (no reference for %d-D windows)\n", path, dims);
        swi_dnnl_close(dm);
        free(in);
        free(o1);
        free(o2);
        return 0;
    }
    if (swi_ort_run(om, in, windows, o2, err, sizeof err)) {
        fprintf(stderr, "FAIL %s: ort run: %s\n", path, err);
        return 1;
    }
    double maxd = 0, maxv = 0;
    for (int64_t i = 0; i < windows * out_win; i++) {
        double dd = fabs((double)o1[i] - o2[i]);
        if (!(dd <= maxd)) maxd = dd;
        if (fabs(o2[i]) > maxv) maxv = fabs(o2[i]);
    }
    double lim = bf16 ? tol * (maxv > 1 ? maxv : 1) : tol;
    int64_t label_diff = 0, vox = out_win / dh.channels;
    if (!bf16 && dh.channels > 1)
        for (int n = 0; n < windows; n++)
            for (int64_t v = 0; v < vox; v++) {
                int b1 = 0, b2 = 0;
                const float *p1 = o1 + n * out_win + v, *p2 = o2 + n * out_win + v;
                for (int c = 1; c < dh.channels; c++) {
                    if (p1[c * vox] > p1[b1 * vox]) b1 = c;
                    if (p2[c * vox] > p2[b2 * vox]) b2 = c;
                }
                /* a tie broken differently by rounding is not a disagreement */
                if (b1 != b2 && fabs(p2[b1 * vox] - p2[b2 * vox]) > 2 * tol) label_diff++;
            }
    int prims, reorders;
    size_t wb, sb, ab;
    swi_dnnl_plan_counts(dm, &prims, &reorders);
    swi_dnnl_memory(dm, &wb, &sb, &ab);
    printf(
        "%s %s: max |dnnl - ort| %.3g (limit %.3g, max |score| %.3g), labels differing %lld; %d primitives, "
        "%d reorders; weights %zu, scratch %zu, activations %zu bytes\n",
        maxd <= lim && !label_diff ? "ok" : "FAIL", path, maxd, lim, maxv, (long long)label_diff, prims,
        reorders, wb, sb, ab);
    swi_ort_close(om);
    swi_dnnl_close(dm);
    free(in);
    free(o1);
    free(o2);
    return maxd <= lim && !label_diff ? 0 : 1;
}
