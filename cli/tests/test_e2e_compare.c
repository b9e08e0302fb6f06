/*
 * test_e2e_compare.c -- check `swi segment` outputs against the e2e reference.
 *
 *   test_e2e_compare E2E_DIR LABELS.nii.gz SCORES.nii.gz
 *
 * SCORES (float32, [ni, nj, nk, classes] in NIfTI order) must match logits.f32
 * ([classes][ni][nj][nk], C order) within 1e-4 + 1e-4 |x|; LABELS must equal the argmax
 * of logits.f32 except where its two best classes are closer than 1e-4 (the tie rule of
 * tests/data/golden/README.md), and agree with labels.nii.gz the same way; both files must
 * keep volume.nii.gz's qform, sform and pixdim exactly. Reads through niftilib directly,
 * independently of the reader under test.
 */
#include <math.h>
#include <nifti2_io.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int failures;
#define CHECK(cond, ...)                  \
    do {                                  \
        if (!(cond)) {                    \
            fprintf(stderr, "FAIL: ");    \
            fprintf(stderr, __VA_ARGS__); \
            fprintf(stderr, "\n");        \
            failures++;                   \
        }                                 \
    } while (0)

static nifti_image *load(const char *path) {
    nifti_image *im = nifti_image_read(path, 1);
    if (!im) {
        fprintf(stderr, "cannot read %s\n", path);
        exit(1);
    }
    return im;
}

static void same_geometry(const nifti_image *a, const nifti_image *b, const char *what) {
    CHECK(a->qform_code == b->qform_code && a->sform_code == b->sform_code, "%s: xform codes %d/%d vs %d/%d",
          what, a->qform_code, a->sform_code, b->qform_code, b->sform_code);
    for (int r = 0; r < 4; r++)
        for (int c = 0; c < 4; c++) {
            CHECK(a->sto_xyz.m[r][c] == b->sto_xyz.m[r][c], "%s: sform[%d][%d] %.9g vs %.9g", what, r, c,
                  a->sto_xyz.m[r][c], b->sto_xyz.m[r][c]);
            CHECK(a->qto_xyz.m[r][c] == b->qto_xyz.m[r][c], "%s: qform[%d][%d] %.9g vs %.9g", what, r, c,
                  a->qto_xyz.m[r][c], b->qto_xyz.m[r][c]);
        }
    CHECK(a->dx == b->dx && a->dy == b->dy && a->dz == b->dz, "%s: pixdim differs", what);
    CHECK(a->nx == b->nx && a->ny == b->ny && a->nz == b->nz, "%s: size differs", what);
}

static double label_at(const nifti_image *im, int64_t v) {
    switch (im->datatype) {
    case NIFTI_TYPE_UINT8: return ((const uint8_t *)im->data)[v];
    case NIFTI_TYPE_UINT16: return ((const uint16_t *)im->data)[v];
    case NIFTI_TYPE_INT16: return ((const int16_t *)im->data)[v];
    case NIFTI_TYPE_FLOAT32: return ((const float *)im->data)[v];
    default: return -1;
    }
}

int main(int argc, char **argv) {
    if (argc != 4) {
        fprintf(stderr, "usage: test_e2e_compare E2E_DIR LABELS SCORES\n");
        return 2;
    }
    nifti_set_debug_level(0);
    char path[4096];
    snprintf(path, sizeof path, "%s/volume.nii.gz", argv[1]);
    nifti_image *vol = load(path);
    snprintf(path, sizeof path, "%s/labels.nii.gz", argv[1]);
    nifti_image *reflab = load(path);
    nifti_image *lab = load(argv[2]);
    nifti_image *sc = load(argv[3]);
    const int64_t ni = vol->nx, nj = vol->ny, nk = vol->nz, N = ni * nj * nk;

    snprintf(path, sizeof path, "%s/logits.f32", argv[1]);
    FILE *f = fopen(path, "rb");
    if (!f) {
        fprintf(stderr, "cannot read %s\n", path);
        return 1;
    }
    const int64_t C = sc->nt;
    CHECK(C == 4, "scores have %lld classes, expected 4", (long long)C);
    if (C != 4) return 1;
    float *ref = malloc((size_t)(C * N) * sizeof *ref);
    if (fread(ref, sizeof *ref, (size_t)(C * N), f) != (size_t)(C * N)) {
        fprintf(stderr, "short %s\n", path);
        return 1;
    }
    fclose(f);

    same_geometry(lab, vol, "labels");
    same_geometry(sc, vol, "scores");
    CHECK(lab->ndim == 3 && lab->dim[0] == 3, "labels have %lld dims, expected 3", (long long)lab->dim[0]);
    CHECK(lab->datatype == NIFTI_TYPE_UINT8, "labels datatype %d, expected uint8", lab->datatype);
    CHECK(sc->datatype == NIFTI_TYPE_FLOAT32, "scores datatype %d", sc->datatype);
    CHECK(sc->ndim == 4 && sc->nt == C, "scores are not [ni, nj, nk, classes]");

    const float *s = sc->data;
    double maxerr = 0;
    int64_t bad = 0, badlab = 0, badref = 0, ties = 0;
    for (int64_t i = 0; i < ni; i++)
        for (int64_t j = 0; j < nj; j++)
            for (int64_t k = 0; k < nk; k++) {
                int64_t fv = i + ni * (j + nj * k); /* NIfTI order */
                int64_t cv = (i * nj + j) * nk + k; /* C order */
                float best = -INFINITY, second = -INFINITY;
                int64_t arg = 0;
                for (int64_t c = 0; c < C; c++) {
                    float e = ref[c * N + cv], g = s[fv + c * N];
                    double d = fabs((double)g - e);
                    if (d > maxerr) maxerr = d;
                    if (d > 1e-4 + 1e-4 * fabs(e)) bad++;
                    if (e > best) {
                        second = best;
                        best = e;
                        arg = c;
                    } else if (e > second) {
                        second = e;
                    }
                }
                int tie = best - second < 1e-4f;
                ties += tie;
                if (!tie && label_at(lab, fv) != (double)arg) badlab++;
                if (!tie && label_at(lab, fv) != label_at(reflab, fv)) badref++;
            }
    CHECK(bad == 0, "%lld score values out of tolerance (max error %g)", (long long)bad, maxerr);
    CHECK(badlab == 0, "%lld labels differ from argmax(logits.f32)", (long long)badlab);
    CHECK(badref == 0, "%lld labels differ from labels.nii.gz", (long long)badref);
    printf("e2e: %lld voxels x %lld classes, max |score - logits.f32| = %.3g, %lld near-ties "
           "skipped, labels %s\n",
           (long long)N, (long long)C, maxerr, (long long)ties, badlab || badref ? "DIFFER" : "match");
    nifti_image_free(vol), nifti_image_free(reflab), nifti_image_free(lab), nifti_image_free(sc);
    free(ref);
    if (failures) return 1;
    printf("test_e2e_compare: ok\n");
    return 0;
}
