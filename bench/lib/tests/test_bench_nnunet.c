/*
 * test_bench_nnunet.c -- `swi bench --grid nnunet` against the same computation done here
 * directly: the atlas network's members (bench_net) mirrored and averaged by hand with the
 * core's combinators, swi_run with nnU-Net's grid and Gaussian writing every score on the
 * model grid, then nnU-Net's resampling of the whole volume (swi_resample_nnunet, order 1,
 * order_z 0 with separate z) and the argmax. The labels `swi bench --labels-raw` writes must
 * equal those, voxel for voxel, except where the two best scores lie within rounding (the
 * streamed sink and the whole-volume resampling differ by float32 rounding). And the check
 * can fail: the same computation with MONAI's grid, without mirroring or with one member
 * gives other labels (at region boundaries, where the atlas network's drift across its
 * window, blended and interpolated, moves the crossing of two classes' scores).
 *
 * usage: test_bench_nnunet SWI WORK_DIR
 */
#include "../../../tests/check.h"
#include "bench_net.h"
#include "swi.h"
#include "swi_resample.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#define K 7       /* classes */
#define ROI 24    /* window edge */
#define FOLDS 2   /* members */
#define AXES 7u   /* mirroring: every axis */
#define TIE 1e-5f /* top-2 gap below which the resampled labels may differ by rounding */

static const char *swi_path, *work;

/* Run `swi bench ARGS` with stdout into WORK/out.txt; its exit status (-1: not run). */
static int run_bench(char *const *args) {
    char out[4096];
    snprintf(out, sizeof out, "%s/out.txt", work);
    pid_t pid = fork();
    if (pid < 0) return -1;
    if (pid == 0) {
        int fd = open(out, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        if (fd < 0) _exit(126);
        dup2(fd, 1);
        close(fd);
        char *argv[64];
        int n = 0;
        argv[n++] = (char *)swi_path;
        argv[n++] = "bench";
        for (int i = 0; args[i] && n < 63; i++) argv[n++] = args[i];
        argv[n] = NULL;
        execv(swi_path, argv);
        _exit(127);
    }
    int st;
    while (waitpid(pid, &st, 0) < 0)
        if (errno != EINTR) return -1;
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

/* 1 when WORK/out.txt holds `line` */
static int out_has(const char *line) {
    char path[4096], buf[8192];
    snprintf(path, sizeof path, "%s/out.txt", work);
    FILE *f = fopen(path, "r");
    if (!f) return 0;
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = '\0';
    return strstr(buf, line) != NULL;
}

/* `bytes` of WORK/name into a new buffer, or NULL when the file holds another size */
static uint8_t *read_raw(const char *name, size_t bytes) {
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", work, name);
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    uint8_t *b = malloc(bytes + 1);
    size_t got = b ? fread(b, 1, bytes + 1, f) : 0;
    fclose(f);
    if (got != bytes) {
        free(b);
        return NULL;
    }
    return b;
}

/* The direct computation: every score of the run on the model grid (model[3]) into scores
 * [K, model]. grid/mode the engine's, axes the mirroring (0: none), folds the members. */
static int direct_scores(const int64_t model[3], swi_grid grid, swi_blend mode, double overlap, unsigned axes,
                         int folds, float *scores) {
    bench_net nets[FOLDS];
    swi_predictor plain[FOLDS], mirrors[FOLDS], mean, *top;
    memset(mirrors, 0, sizeof mirrors);
    memset(&mean, 0, sizeof mean);
    const int64_t roi[3] = {ROI, ROI, ROI};
    char err[256];
    int rc = 1;
    for (int f = 0; f < folds; f++) {
        if (bench_net_init(&nets[f], BENCH_NET_ATLAS, K, f) != 0) return 1;
        plain[f] = (swi_predictor){bench_net_predict, &nets[f]};
    }
    size_t vox = (size_t)model[0] * (size_t)model[1] * (size_t)model[2];
    float *vol = malloc(vox * sizeof *vol);
    swi_ctx *ctx = swi_create();
    if (!vol || !ctx) goto done;
    bench_net_volume(&nets[0], 3, model, vol);
    top = plain;
    for (int f = 0; axes && f < folds; f++)
        if (swi_predictor_mirror(&plain[f], axes, K, 3, roi, 1, &mirrors[f], err, sizeof err) != SWI_OK)
            goto done;
    if (axes) top = mirrors;
    if (folds > 1) {
        if (swi_predictor_mean(top, folds, K, 3, roi, 1, &mean, err, sizeof err) != SWI_OK) goto done;
        top = &mean;
    }
    swi_params p;
    swi_params_init(&p, 3);
    for (int a = 0; a < 3; a++) {
        p.roi[a] = ROI;
        p.overlap[a] = overlap;
    }
    p.grid = grid;
    p.mode = mode;
    p.heads[0].channels = K;
    for (int a = 0; a < 3; a++) p.heads[0].spatial[a] = ROI;
    swi_tensor in = {
        .data = vol, .batch = 1, .channels = 1, .dims = 3, .size = {model[0], model[1], model[2]}};
    swi_output out;
    swi_output_init(&out, 0, SWI_REDUCE_NONE);
    out.dst = scores;
    out.dst_bytes = vox * K * sizeof(float);
    rc = swi_run(ctx, &p, &in, top, &out, 1) != SWI_OK;
    if (rc) fprintf(stderr, "swi_run: %s\n", swi_last_error(ctx));
done:
    swi_predictor_mean_free(&mean);
    for (int f = 0; f < folds; f++) {
        swi_predictor_mirror_free(&mirrors[f]);
        bench_net_free(&nets[f]);
    }
    swi_free(ctx);
    free(vol);
    return rc;
}

/* argmax of scores [K, n] (the first largest) into lab; gap gets the top-2 gap per voxel */
static void argmax(const float *scores, size_t n, uint8_t *lab, float *gap) {
    for (size_t v = 0; v < n; v++) {
        float best = scores[v], second = -INFINITY;
        int at = 0;
        for (int c = 1; c < K; c++) {
            const float x = scores[(size_t)c * n + v];
            if (x > best) {
                second = best;
                best = x;
                at = c;
            } else if (x > second) {
                second = x;
            }
        }
        lab[v] = (uint8_t)at;
        if (gap) gap[v] = best - second;
    }
}

/* Voxels of a and b that differ: all of them (*near: those where gap < TIE). */
static size_t differ(const uint8_t *a, const uint8_t *b, const float *gap, size_t n, size_t *near) {
    size_t d = 0;
    *near = 0;
    for (size_t v = 0; v < n; v++)
        if (a[v] != b[v]) {
            d++;
            if (gap && gap[v] < TIE) (*near)++;
        }
    return d;
}

/* The labels the direct computation gives on the input grid (in[3]) at in_spacing; sep_axis
 * the separate-z axis of the way back (-1: none). */
static int direct_labels(const int64_t model[3], const int64_t in[3], int sep_axis, swi_grid grid,
                         swi_blend mode, unsigned axes, int folds, uint8_t *lab, float *gap) {
    const size_t mv = (size_t)model[0] * (size_t)model[1] * (size_t)model[2];
    const size_t iv = (size_t)in[0] * (size_t)in[1] * (size_t)in[2];
    float *s = malloc(mv * K * sizeof *s), *r = malloc(iv * K * sizeof *r);
    char err[256];
    int rc = !s || !r || direct_scores(model, grid, mode, 0.5, axes, folds, s) ||
             swi_resample_nnunet(s, model, r, in, K, 1, 0, sep_axis, err, sizeof err) != SWI_OK;
    if (!rc) argmax(r, iv, lab, gap);
    free(s);
    free(r);
    return rc;
}

/* One resampled case: --shape in at in_sp mm to 1.5 mm; the model grid must be `model` and
 * the way back separate z along sep_axis (-1: none). */
static void resampled_case(const char *name, const int64_t in[3], const char *in_sp, const int64_t model[3],
                           int sep_axis) {
    char shape[64], raw[64], line[128];
    snprintf(shape, sizeof shape, "%lld,%lld,%lld", (long long)in[0], (long long)in[1], (long long)in[2]);
    snprintf(raw, sizeof raw, "%s/%s.raw", work, name);
    char *args[] = {"--shape",
                    shape,
                    "--input-spacing",
                    (char *)in_sp,
                    "--spacing",
                    "1.5",
                    "--grid",
                    "nnunet",
                    "--classes",
                    "7",
                    "--roi",
                    "24",
                    "--mirror-axes",
                    "0,1,2",
                    "--folds",
                    "2",
                    "--predictor",
                    "atlas",
                    "--threads",
                    "2",
                    "--no-floor",
                    "--labels-raw",
                    raw,
                    "--force",
                    NULL};
    CHECK(run_bench(args) == 0, "%s: swi bench failed", name);
    snprintf(line, sizeof line, "model grid %lldx%lldx%lld at 1.5,1.5,1.5 mm (nnU-Net's shape rule)",
             (long long)model[0], (long long)model[1], (long long)model[2]);
    CHECK(out_has(line), "%s: not the model grid %s", name, line);
    if (sep_axis >= 0) {
        snprintf(line, sizeof line, "the nearest slice along axis %d", sep_axis);
        CHECK(out_has(line), "%s: no separate z on the way back", name);
    } else {
        CHECK(out_has("order 1 on every axis"), "%s: separate z on the way back", name);
    }
    CHECK(out_has("16 network runs a window") && out_has("each run 16 times)"),
          "%s: not 2 members x 8 mirrorings of every window", name);
    snprintf(raw, sizeof raw, "%s.raw", name);
    const size_t iv = (size_t)in[0] * (size_t)in[1] * (size_t)in[2];
    uint8_t *got = read_raw(raw, iv), *want = malloc(iv), *other = malloc(iv);
    float *gap = malloc(iv * sizeof *gap);
    CHECK(got != NULL, "%s: no labels of %zu bytes", name, iv);
    if (!got || !want || !other || !gap ||
        direct_labels(model, in, sep_axis, SWI_GRID_NNUNET, SWI_BLEND_GAUSSIAN_NNUNET, AXES, FOLDS, want,
                      gap)) {
        CHECK(0, "%s: the direct computation failed", name);
        goto done;
    }
    size_t near, d = differ(got, want, gap, iv, &near);
    size_t classes = 0;
    for (int c = 0; c < K; c++) {
        size_t n = 0;
        for (size_t v = 0; v < iv; v++) n += want[v] == c;
        classes += n > 0;
    }
    CHECK(classes >= 5, "%s: only %zu classes in the labels", name, classes);
    CHECK(d == near, "%s: %zu voxels differ, %zu of them near ties", name, d, near);
    printf("%s: %zu voxels, labels equal but %zu near ties\n", name, iv, d);
    /* the check can fail: another grid and Gaussian, no mirroring, one member */
    const struct {
        const char *what;
        swi_grid grid;
        swi_blend mode;
        unsigned axes;
        int folds;
    } v[3] = {{"MONAI's grid and gaussian", SWI_GRID_MONAI, SWI_BLEND_GAUSSIAN, AXES, FOLDS},
              {"no mirroring", SWI_GRID_NNUNET, SWI_BLEND_GAUSSIAN_NNUNET, 0, FOLDS},
              {"one member", SWI_GRID_NNUNET, SWI_BLEND_GAUSSIAN_NNUNET, AXES, 1}};
    for (int i = 0; i < 3; i++) {
        if (direct_labels(model, in, sep_axis, v[i].grid, v[i].mode, v[i].axes, v[i].folds, other, NULL)) {
            CHECK(0, "%s: the direct computation failed (%s)", name, v[i].what);
            continue;
        }
        size_t n2, dd = differ(got, other, NULL, iv, &n2);
        /* at least one label beyond the near ties (deterministic: the data are fixed) */
        CHECK(dd > d, "%s: %s changes only %zu labels", name, v[i].what, dd);
        printf("%s: %s: %zu labels differ\n", name, v[i].what, dd);
    }
done:
    free(got);
    free(want);
    free(other);
    free(gap);
}

/* The model grid alone: the engine's argmax, equal bitwise to the argmax of its scores. */
static void model_grid_case(void) {
    const int64_t model[3] = {51, 47, 48};
    char raw[4096];
    snprintf(raw, sizeof raw, "%s/model.raw", work);
    char *args[] = {"--shape",    "51,47,48",      "--grid", "nnunet",  "--classes", "7",           "--roi",
                    "24",         "--mirror-axes", "0,1,2",  "--folds", "2",         "--predictor", "atlas",
                    "--no-floor", "--labels-raw",  raw,      "--force", NULL};
    CHECK(run_bench(args) == 0, "model grid: swi bench failed");
    CHECK(out_has("nnU-Net's grid, tile step 0.5  nnU-Net's gaussian"), "model grid: not nnU-Net's window");
    CHECK(out_has("plan: windows 4x3x3 = 36"), "model grid: not nnU-Net's step rule");
    const size_t mv = 51 * 47 * 48;
    uint8_t *got = read_raw("model.raw", mv), *want = malloc(mv);
    float *s = malloc(mv * K * sizeof *s);
    CHECK(got != NULL, "model grid: no labels of %zu bytes", mv);
    if (got && want && s &&
        !direct_scores(model, SWI_GRID_NNUNET, SWI_BLEND_GAUSSIAN_NNUNET, 0.5, AXES, FOLDS, s)) {
        argmax(s, mv, want, NULL);
        CHECK(memcmp(got, want, mv) == 0, "model grid: labels differ from the direct run's");
    } else {
        CHECK(0, "model grid: the direct computation failed");
    }
    free(got);
    free(want);
    free(s);
}

int main(int argc, char **argv) {
    if (argc != 3) {
        fprintf(stderr, "usage: test_bench_nnunet SWI WORK_DIR\n");
        return 2;
    }
    swi_path = argv[1];
    work = argv[2];
    mkdir(work, 0755);
    /* no separate z: 0.8 x 0.8 x 1 mm to 1.5 mm, model grid round(in / 1.5 * size) */
    const int64_t in1[3] = {96, 88, 90}, model1[3] = {51, 47, 60};
    resampled_case("iso", in1, "0.8,0.8,1", model1, -1);
    /* 3.2 mm slices: anisotropic input, so the way back takes the nearest model slice along z */
    const int64_t in2[3] = {96, 88, 22}, model2[3] = {51, 47, 47};
    resampled_case("sepz", in2, "0.8,0.8,3.2", model2, 2);
    model_grid_case();
    return check_report("test_bench_nnunet");
}
