/* Tests of the phantom generator's C API (demo/phantom.h). */
#include "phantom.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int failures = 0;

#define CHECK(cond, ...)                                                             \
    do {                                                                             \
        if (!(cond)) {                                                               \
            fprintf(stderr, "%s:%d: CHECK(%s) failed: ", __FILE__, __LINE__, #cond); \
            fprintf(stderr, __VA_ARGS__);                                            \
            fputc('\n', stderr);                                                     \
            failures++;                                                              \
        }                                                                            \
    } while (0)

/* FNV-1a of the float bit patterns, little-endian whatever the host order */
static uint64_t fnv1a_f32(uint64_t h, const float *x, size_t n) {
    for (size_t i = 0; i < n; i++) {
        uint32_t b;
        memcpy(&b, &x[i], sizeof b);
        for (int k = 0; k < 4; k++) {
            h ^= (b >> (8 * k)) & 0xFFu;
            h *= UINT64_C(0x100000001b3);
        }
    }
    return h;
}

static uint64_t fnv1a(uint64_t h, const void *data, size_t n) {
    const unsigned char *p = data;
    for (size_t i = 0; i < n; i++) {
        h ^= p[i];
        h *= UINT64_C(0x100000001b3);
    }
    return h;
}

typedef struct {
    size_t n;
    float *img;
    uint8_t *lab;
} vol_t;

static int gen(vol_t *v, uint64_t seed, int64_t a, int64_t b, int64_t c) {
    int64_t size[3] = {a, b, c};
    v->n = (size_t)(a * b * c);
    v->img = malloc(v->n * sizeof(float));
    v->lab = malloc(v->n);
    if (!v->img || !v->lab) {
        fprintf(stderr, "out of memory\n");
        exit(1);
    }
    return swi_phantom_generate(seed, size, v->img, v->lab);
}

static void vfree(vol_t *v) {
    free(v->img);
    free(v->lab);
}

int main(void) {
    /* invalid arguments */
    {
        float img[16 * 16 * 16];
        uint8_t lab[16 * 16 * 16];
        int64_t ok[3] = {16, 16, 16};
        CHECK(swi_phantom_generate(1, NULL, img, lab) == -1, "NULL size");
        CHECK(swi_phantom_generate(1, ok, NULL, lab) == -1, "NULL image");
        CHECK(swi_phantom_generate(1, ok, img, NULL) == -1, "NULL labels");
        int64_t bad[][3] = {
            {15, 16, 16}, {16, 0, 16}, {16, 16, -16}, {16, 16, INT64_MAX}, {INT64_MIN, 16, 16}};
        for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
            CHECK(swi_phantom_generate(1, bad[i], img, lab) == -1, "bad size #%zu", i);
        CHECK(swi_phantom_generate(1, ok, img, lab) == 0, "16^3");
    }

    /* determinism and seed sensitivity */
    {
        vol_t a, b, c;
        CHECK(gen(&a, 42, 48, 40, 56) == 0, "gen");
        CHECK(gen(&b, 42, 48, 40, 56) == 0, "gen");
        CHECK(gen(&c, 43, 48, 40, 56) == 0, "gen");
        CHECK(memcmp(a.img, b.img, a.n * sizeof(float)) == 0, "same seed, different image");
        CHECK(memcmp(a.lab, b.lab, a.n) == 0, "same seed, different labels");
        CHECK(memcmp(a.img, c.img, a.n * sizeof(float)) != 0, "different seeds, same image");
        CHECK(memcmp(a.lab, c.lab, a.n) != 0, "different seeds, same labels");
        vfree(&a);
        vfree(&b);
        vfree(&c);
    }

    /* Pinned output: the demo network was trained on these phantoms, so any
   * change to the generator (or a platform computing it differently) must be
   * noticed. Update the constants only together with models/demo.onnx. */
    {
        static const struct {
            uint64_t seed;
            int64_t size[3];
            uint64_t labels_hash, image_hash;
        } pinned[] = {
            {1, {32, 24, 40}, UINT64_C(0x01fb653b13b489a5), UINT64_C(0xfe12096a1d80b5fd)},
            {1000000, {80, 96, 96}, UINT64_C(0xc97b734b14158521), UINT64_C(0xe23ef7ba98d12681)},
        };
        for (size_t p = 0; p < sizeof pinned / sizeof pinned[0]; p++) {
            vol_t a;
            CHECK(gen(&a, pinned[p].seed, pinned[p].size[0], pinned[p].size[1], pinned[p].size[2]) == 0,
                  "gen");
            uint64_t hl = fnv1a(UINT64_C(0xcbf29ce484222325), a.lab, a.n);
            uint64_t hi = fnv1a_f32(UINT64_C(0xcbf29ce484222325), a.img, a.n);
            CHECK(hl == pinned[p].labels_hash, "pinned case %zu: labels hash %016llx", p,
                  (unsigned long long)hl);
            CHECK(hi == pinned[p].image_hash, "pinned case %zu: image hash %016llx", p,
                  (unsigned long long)hi);
            vfree(&a);
        }
    }

    /* content: every class present, labels in range, image finite, classes
   * ordered by mean intensity, sizes from the minimum up */
    static const int64_t sizes[][3] = {{16, 16, 16}, {16, 40, 24}, {32, 32, 32}, {64, 48, 40}, {80, 96, 96}};
    for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++) {
        int seeds = sizes[s][0] * sizes[s][1] * sizes[s][2] > 200000 ? 3 : 40;
        for (int seed = 0; seed < seeds; seed++) {
            vol_t v;
            CHECK(gen(&v, (uint64_t)seed * 7919u + s, sizes[s][0], sizes[s][1], sizes[s][2]) == 0, "gen");
            size_t count[SWI_PHANTOM_CLASSES] = {0};
            double sum[SWI_PHANTOM_CLASSES] = {0};
            int bad_label = 0, bad_value = 0;
            for (size_t i = 0; i < v.n; i++) {
                if (v.lab[i] >= SWI_PHANTOM_CLASSES) {
                    bad_label = 1;
                    continue;
                }
                if (!isfinite(v.img[i]) || fabsf(v.img[i]) > 3.0f) bad_value = 1;
                count[v.lab[i]]++;
                sum[v.lab[i]] += v.img[i];
            }
            CHECK(!bad_label, "label out of range (size #%zu seed %d)", s, seed);
            CHECK(!bad_value, "image value out of range (size #%zu seed %d)", s, seed);
            for (int c = 0; c < SWI_PHANTOM_CLASSES; c++)
                CHECK(count[c] > 0, "class %d missing (size #%zu seed %d)", c, s, seed);
            if (count[1] && count[2] && count[3]) {
                double m1 = sum[1] / (double)count[1], m2 = sum[2] / (double)count[2],
                       m3 = sum[3] / (double)count[3];
                CHECK(m1 < m2 && m2 < m3, "class means not ordered: %.3f %.3f %.3f", m1, m2, m3);
            }
            if (s == sizeof sizes / sizeof sizes[0] - 1)
                printf("80x96x96 seed %d: voxels per class %zu %zu %zu %zu\n", seed, count[0], count[1],
                       count[2], count[3]);
            vfree(&v);
        }
    }

    if (failures) {
        fprintf(stderr, "%d failure(s)\n", failures);
        return 1;
    }
    printf("phantom API tests passed\n");
    return 0;
}
