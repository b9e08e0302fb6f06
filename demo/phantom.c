/*
 * phantom.c -- synthetic 3D phantoms for the bundled demo network.
 *
 * A phantom is a "body": an ellipsoid of soft tissue in air, with a few faint
 * unlabelled organs inside it, and three kinds of labelled structures:
 *
 *   class 1  lumpy blobs: unions of 2-4 rotated ellipsoids, mid intensity
 *   class 2  tubes: curved (quadratic Bezier) cylinders of varying radius,
 *            brighter than the blobs
 *   class 3  bright hollow ellipsoidal shells and small bright spheres
 *
 * Positions, sizes, orientations and intensities are drawn per seed; then a
 * smooth multiplicative intensity bias and (near-)gaussian noise are applied.
 * The intensity ranges of the classes touch once the bias is applied, so a
 * network has to use shape as well as brightness.
 *
 * Portability: the generator uses its own PRNG (splitmix64 seeding
 * xoshiro256**) and only +, -, *, / and sqrt on doubles, all of which IEEE 754
 * rounds exactly, so a seed gives the same bytes on every platform that
 * evaluates double expressions in double precision without contraction into
 * fused multiply-adds (x86-64, AArch64, ...). No libm transcendental is used: noise
 * is the Irwin-Hall sum of 12 uniforms, orientations come from rejection
 * sampling, the bias field is a low-order polynomial.
 *
 * Structure sizes are in voxels and do not scale with the volume; the number
 * of structures scales with the body's volume, so a bigger phantom holds more
 * structures of the same kind. Sizes >= 16 per axis are accepted; every class
 * is present in the result (the generator retries internally if, rarely, one
 * would be hidden).
 */
#include "phantom.h"

#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* a*b+c must not become a fused multiply-add, whose single rounding would
 * change results between platforms. GCC contracts only in GNU modes and
 * ignores (with a warning) the standard pragma; demo/CMakeLists.txt passes
 * -ffp-contract=off to both compilers in any case. */
#if defined(__clang__) || !defined(__GNUC__)
#pragma STDC FP_CONTRACT OFF
#endif

/* ---- PRNG ------------------------------------------------------------- */

typedef struct {
    uint64_t s[4];
} rng_t;

static uint64_t splitmix64(uint64_t *x) {
    uint64_t z = (*x += UINT64_C(0x9E3779B97F4A7C15));
    z = (z ^ (z >> 30)) * UINT64_C(0xBF58476D1CE4E5B9);
    z = (z ^ (z >> 27)) * UINT64_C(0x94D049BB133111EB);
    return z ^ (z >> 31);
}

static void rng_seed(rng_t *r, uint64_t seed) {
    uint64_t x = seed;
    for (int i = 0; i < 4; i++) r->s[i] = splitmix64(&x);
}

static uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

static uint64_t rng_next(rng_t *r) {
    uint64_t *s = r->s;
    const uint64_t result = rotl(s[1] * 5, 7) * 9;
    const uint64_t t = s[1] << 17;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = rotl(s[3], 45);
    return result;
}

/* uniform in [0, 1) */
static double rng_unif(rng_t *r) { return (double)(rng_next(r) >> 11) * (1.0 / 9007199254740992.0); }

static double rng_range(rng_t *r, double lo, double hi) { return lo + (hi - lo) * rng_unif(r); }

/* integer in [lo, hi] */
static int rng_int(rng_t *r, int lo, int hi) {
    return lo + (int)((rng_next(r) >> 33) % (uint64_t)(hi - lo + 1));
}

/* Approximately standard normal: Irwin-Hall sum of 12 uniforms (16-bit each,
 * four per 64-bit draw) minus 6. Exact mean 0, variance 1 up to 2^-16. */
static double rng_gauss(rng_t *r) {
    double sum = 0.0;
    for (int d = 0; d < 3; d++) {
        uint64_t x = rng_next(r);
        for (int k = 0; k < 4; k++) {
            sum += ((double)(x & 0xFFFF) + 0.5) * (1.0 / 65536.0);
            x >>= 16;
        }
    }
    return sum - 6.0;
}

/* ---- geometry helpers --------------------------------------------------- */

typedef struct {
    double x[3];
} vec3;

static double dot3(vec3 a, vec3 b) { return a.x[0] * b.x[0] + a.x[1] * b.x[1] + a.x[2] * b.x[2]; }

/* uniformly distributed unit vector (rejection sampling in the unit ball) */
static vec3 rng_unit(rng_t *r) {
    for (;;) {
        vec3 v;
        for (int i = 0; i < 3; i++) v.x[i] = rng_range(r, -1.0, 1.0);
        double n2 = dot3(v, v);
        if (n2 > 1e-4 && n2 <= 1.0) {
            double n = sqrt(n2);
            for (int i = 0; i < 3; i++) v.x[i] /= n;
            return v;
        }
    }
}

/* uniformly distributed rotation (unit quaternion by rejection sampling);
 * rows of m are the local axes expressed in volume coordinates */
static void rng_rotation(rng_t *r, double m[3][3]) {
    double q[4], n2;
    do {
        n2 = 0.0;
        for (int i = 0; i < 4; i++) {
            q[i] = rng_range(r, -1.0, 1.0);
            n2 += q[i] * q[i];
        }
    } while (n2 <= 1e-4 || n2 > 1.0);
    double n = sqrt(n2);
    double w = q[0] / n, x = q[1] / n, y = q[2] / n, z = q[3] / n;
    m[0][0] = 1 - 2 * (y * y + z * z);
    m[0][1] = 2 * (x * y - z * w);
    m[0][2] = 2 * (x * z + y * w);
    m[1][0] = 2 * (x * y + z * w);
    m[1][1] = 1 - 2 * (x * x + z * z);
    m[1][2] = 2 * (y * z - x * w);
    m[2][0] = 2 * (x * z - y * w);
    m[2][1] = 2 * (y * z + x * w);
    m[2][2] = 1 - 2 * (x * x + y * y);
}

/* ---- the volume being painted ------------------------------------------ */

typedef struct {
    int64_t n[3];
    float *base; /* noise-free intensity, before the bias */
    uint8_t *labels;
    uint8_t *inbody; /* 1 inside the body ellipsoid */
    vec3 body_c;     /* body centre and semi-axes (axis aligned) */
    vec3 body_r;
} canvas_t;

static size_t vidx(const canvas_t *cv, int64_t i, int64_t j, int64_t k) {
    return ((size_t)i * (size_t)cv->n[1] + (size_t)j) * (size_t)cv->n[2] + (size_t)k;
}

/* bounding box [lo, hi] (inclusive, clipped) of a sphere of radius rad */
static int bbox(const canvas_t *cv, vec3 c, double rad, int64_t lo[3], int64_t hi[3]) {
    for (int a = 0; a < 3; a++) {
        double l = floor(c.x[a] - rad), h = ceil(c.x[a] + rad);
        if (l < 0) l = 0;
        if (h > (double)(cv->n[a] - 1)) h = (double)(cv->n[a] - 1);
        if (l > h) return 0;
        lo[a] = (int64_t)l;
        hi[a] = (int64_t)h;
    }
    return 1;
}

/* a random point inside the body, at normalised radius <= frac */
static vec3 body_point(rng_t *r, const canvas_t *cv, double frac) {
    for (;;) {
        vec3 u, p;
        for (int a = 0; a < 3; a++) u.x[a] = rng_range(r, -1.0, 1.0);
        if (dot3(u, u) > 1.0) continue;
        for (int a = 0; a < 3; a++) p.x[a] = cv->body_c.x[a] + frac * u.x[a] * cv->body_r.x[a];
        return p;
    }
}

/* Paint voxel (i,j,k) with intensity and class, only inside the body. */
static void paint(canvas_t *cv, size_t v, float val, uint8_t cls) {
    if (!cv->inbody[v]) return;
    cv->base[v] = val;
    cv->labels[v] = cls;
}

typedef struct {
    vec3 c;
    double m[3][3];
    double r[3];
} ellipsoid_t;

static double ellipsoid_d2(const ellipsoid_t *e, vec3 p) {
    vec3 d;
    for (int a = 0; a < 3; a++) d.x[a] = p.x[a] - e->c.x[a];
    double s = 0.0;
    for (int a = 0; a < 3; a++) {
        double q = (e->m[a][0] * d.x[0] + e->m[a][1] * d.x[1] + e->m[a][2] * d.x[2]) / e->r[a];
        s += q * q;
    }
    return s;
}

static double max3(double a, double b, double c) {
    double m = a > b ? a : b;
    return m > c ? m : c;
}

/* clamp structure radii so that structures fit small phantoms */
static double rclamp(const canvas_t *cv, double rad) {
    double lim = 0.35 * fmin(cv->body_r.x[0], fmin(cv->body_r.x[1], cv->body_r.x[2]));
    if (lim < 1.5) lim = 1.5;
    return rad < lim ? rad : lim;
}

/* ---- structures ---------------------------------------------------------- */

/* faint unlabelled organ: a large ellipsoid slightly brighter or darker than
 * the tissue around it */
static void draw_organ(canvas_t *cv, rng_t *r, double tissue) {
    ellipsoid_t e;
    e.c = body_point(r, cv, 0.6);
    rng_rotation(r, e.m);
    for (int a = 0; a < 3; a++)
        e.r[a] = rng_range(r, 0.2, 0.45) * max3(cv->body_r.x[0], cv->body_r.x[1], cv->body_r.x[2]);
    float val = (float)(tissue + rng_range(r, -0.08, 0.1));
    int64_t lo[3], hi[3];
    if (!bbox(cv, e.c, max3(e.r[0], e.r[1], e.r[2]), lo, hi)) return;
    for (int64_t i = lo[0]; i <= hi[0]; i++)
        for (int64_t j = lo[1]; j <= hi[1]; j++)
            for (int64_t k = lo[2]; k <= hi[2]; k++) {
                vec3 p = {{(double)i, (double)j, (double)k}};
                if (ellipsoid_d2(&e, p) <= 1.0) paint(cv, vidx(cv, i, j, k), val, 0);
            }
}

/* class 1: a lumpy blob, union of 2..4 ellipsoids around a centre */
static void draw_blob(canvas_t *cv, rng_t *r) {
    ellipsoid_t parts[4];
    int np = rng_int(r, 2, 4);
    vec3 c = body_point(r, cv, 0.75);
    double size = rclamp(cv, rng_range(r, 5.0, 11.0));
    double ext = 0.0;
    for (int p = 0; p < np; p++) {
        ellipsoid_t *e = &parts[p];
        vec3 off = rng_unit(r);
        double dist = p == 0 ? 0.0 : rng_range(r, 0.3, 0.8) * size;
        for (int a = 0; a < 3; a++) e->c.x[a] = c.x[a] + dist * off.x[a];
        rng_rotation(r, e->m);
        for (int a = 0; a < 3; a++) e->r[a] = size * rng_range(r, 0.55, 1.0);
        double reach = dist + max3(e->r[0], e->r[1], e->r[2]);
        if (reach > ext) ext = reach;
    }
    float val = (float)rng_range(r, 0.55, 0.70);
    int64_t lo[3], hi[3];
    if (!bbox(cv, c, ext, lo, hi)) return;
    for (int64_t i = lo[0]; i <= hi[0]; i++)
        for (int64_t j = lo[1]; j <= hi[1]; j++)
            for (int64_t k = lo[2]; k <= hi[2]; k++) {
                vec3 p = {{(double)i, (double)j, (double)k}};
                for (int q = 0; q < np; q++)
                    if (ellipsoid_d2(&parts[q], p) <= 1.0) {
                        paint(cv, vidx(cv, i, j, k), val, 1);
                        break;
                    }
            }
}

#define TUBE_SEGS 24

/* class 2: a curved tube along a quadratic Bezier curve, radius varying
 * linearly from one end to the other */
static void draw_tube(canvas_t *cv, rng_t *r) {
    double bmin = fmin(cv->body_r.x[0], fmin(cv->body_r.x[1], cv->body_r.x[2]));
    vec3 p0 = body_point(r, cv, 0.7);
    vec3 dir = rng_unit(r);
    double len = rng_range(r, 25.0, 55.0);
    if (len > 1.4 * bmin) len = 1.4 * bmin;
    vec3 p2, p1, bend = rng_unit(r);
    double bend_amt = rng_range(r, 0.0, 0.35) * len;
    for (int a = 0; a < 3; a++) {
        p2.x[a] = p0.x[a] + len * dir.x[a];
        p1.x[a] = 0.5 * (p0.x[a] + p2.x[a]) + bend_amt * bend.x[a];
    }
    double r0 = rclamp(cv, rng_range(r, 2.5, 4.5)), r1 = rclamp(cv, rng_range(r, 2.5, 4.5));
    float val = (float)rng_range(r, 0.82, 0.97);

    vec3 pts[TUBE_SEGS + 1];
    double rad[TUBE_SEGS + 1];
    vec3 lo_c = p0, hi_c = p0;
    for (int s = 0; s <= TUBE_SEGS; s++) {
        double t = (double)s / TUBE_SEGS, u = 1.0 - t;
        for (int a = 0; a < 3; a++) pts[s].x[a] = u * u * p0.x[a] + 2 * u * t * p1.x[a] + t * t * p2.x[a];
        rad[s] = u * r0 + t * r1;
        for (int a = 0; a < 3; a++) {
            if (pts[s].x[a] < lo_c.x[a]) lo_c.x[a] = pts[s].x[a];
            if (pts[s].x[a] > hi_c.x[a]) hi_c.x[a] = pts[s].x[a];
        }
    }
    double rmax = r0 > r1 ? r0 : r1;
    int64_t lo[3], hi[3];
    vec3 mid;
    double half = 0.0;
    for (int a = 0; a < 3; a++) {
        mid.x[a] = 0.5 * (lo_c.x[a] + hi_c.x[a]);
        double h = 0.5 * (hi_c.x[a] - lo_c.x[a]);
        if (h > half) half = h;
    }
    if (!bbox(cv, mid, half + rmax + 1.0, lo, hi)) return;
    for (int64_t i = lo[0]; i <= hi[0]; i++)
        for (int64_t j = lo[1]; j <= hi[1]; j++)
            for (int64_t k = lo[2]; k <= hi[2]; k++) {
                vec3 p = {{(double)i, (double)j, (double)k}};
                int inside = 0;
                for (int s = 0; s < TUBE_SEGS && !inside; s++) {
                    vec3 ab, ap;
                    for (int a = 0; a < 3; a++) {
                        ab.x[a] = pts[s + 1].x[a] - pts[s].x[a];
                        ap.x[a] = p.x[a] - pts[s].x[a];
                    }
                    double l2 = dot3(ab, ab);
                    double t = l2 > 0.0 ? dot3(ap, ab) / l2 : 0.0;
                    if (t < 0.0) t = 0.0;
                    if (t > 1.0) t = 1.0;
                    double d2 = 0.0;
                    for (int a = 0; a < 3; a++) {
                        double d = ap.x[a] - t * ab.x[a];
                        d2 += d * d;
                    }
                    double rr = rad[s] + t * (rad[s + 1] - rad[s]);
                    if (d2 <= rr * rr) inside = 1;
                }
                if (inside) paint(cv, vidx(cv, i, j, k), val, 2);
            }
}

/* class 3: a bright hollow ellipsoidal shell (its inside stays tissue) */
static void draw_shell(canvas_t *cv, rng_t *r, double tissue) {
    ellipsoid_t outer, inner;
    outer.c = body_point(r, cv, 0.7);
    rng_rotation(r, outer.m);
    double size = rclamp(cv, rng_range(r, 6.0, 10.0));
    double thick = rng_range(r, 2.5, 3.5);
    if (thick > 0.5 * size) thick = 0.5 * size;
    inner = outer;
    for (int a = 0; a < 3; a++) {
        outer.r[a] = size * rng_range(r, 0.75, 1.0);
        inner.r[a] = outer.r[a] - thick;
    }
    float val = (float)rng_range(r, 1.1, 1.35);
    float fill = (float)(tissue + rng_range(r, -0.1, 0.05));
    int64_t lo[3], hi[3];
    if (!bbox(cv, outer.c, max3(outer.r[0], outer.r[1], outer.r[2]), lo, hi)) return;
    for (int64_t i = lo[0]; i <= hi[0]; i++)
        for (int64_t j = lo[1]; j <= hi[1]; j++)
            for (int64_t k = lo[2]; k <= hi[2]; k++) {
                vec3 p = {{(double)i, (double)j, (double)k}};
                if (ellipsoid_d2(&outer, p) > 1.0) continue;
                size_t v = vidx(cv, i, j, k);
                if (ellipsoid_d2(&inner, p) > 1.0)
                    paint(cv, v, val, 3);
                else
                    paint(cv, v, fill, 0);
            }
}

/* class 3: a small bright sphere */
static void draw_sphere(canvas_t *cv, rng_t *r) {
    vec3 c = body_point(r, cv, 0.8);
    double rad = rclamp(cv, rng_range(r, 2.5, 4.5));
    float val = (float)rng_range(r, 1.1, 1.35);
    int64_t lo[3], hi[3];
    if (!bbox(cv, c, rad, lo, hi)) return;
    for (int64_t i = lo[0]; i <= hi[0]; i++)
        for (int64_t j = lo[1]; j <= hi[1]; j++)
            for (int64_t k = lo[2]; k <= hi[2]; k++) {
                double d2 = 0.0, q;
                q = (double)i - c.x[0], d2 += q * q;
                q = (double)j - c.x[1], d2 += q * q;
                q = (double)k - c.x[2], d2 += q * q;
                if (d2 <= rad * rad) paint(cv, vidx(cv, i, j, k), val, 3);
            }
}

/* ---- the phantom -------------------------------------------------------- */

/* number of structures of one kind: lo..hi for a 96^3-sized body, scaled by
 * body volume, at least 1 */
static int count_for(rng_t *r, double vol_ratio, int lo, int hi) {
    int n = rng_int(r, lo, hi);
    double s = (double)n * vol_ratio + 0.5;
    if (s > 1000.0) s = 1000.0;
    int c = (int)s;
    return c < 1 ? 1 : c;
}

static void generate_once(uint64_t seed, canvas_t *cv, float *image) {
    const int64_t *n = cv->n;
    rng_t r;
    rng_seed(&r, seed);

    /* body: an axis-aligned ellipsoid filling most of the volume */
    double air = rng_range(&r, 0.0, 0.05);
    double tissue = rng_range(&r, 0.25, 0.35);
    for (int a = 0; a < 3; a++) {
        cv->body_r.x[a] = rng_range(&r, 0.40, 0.47) * (double)n[a];
        cv->body_c.x[a] = 0.5 * (double)(n[a] - 1) + rng_range(&r, -0.02, 0.02) * (double)n[a];
    }
    for (int64_t i = 0; i < n[0]; i++)
        for (int64_t j = 0; j < n[1]; j++)
            for (int64_t k = 0; k < n[2]; k++) {
                double q, d2 = 0.0;
                q = ((double)i - cv->body_c.x[0]) / cv->body_r.x[0], d2 += q * q;
                q = ((double)j - cv->body_c.x[1]) / cv->body_r.x[1], d2 += q * q;
                q = ((double)k - cv->body_c.x[2]) / cv->body_r.x[2], d2 += q * q;
                size_t v = vidx(cv, i, j, k);
                cv->inbody[v] = d2 <= 1.0;
                cv->base[v] = (float)(d2 <= 1.0 ? tissue : air);
                cv->labels[v] = 0;
            }

    double vol_ratio =
        (cv->body_r.x[0] * cv->body_r.x[1] * cv->body_r.x[2]) / (0.435 * 0.435 * 0.435 * 96.0 * 96.0 * 96.0);
    int n_organ = count_for(&r, vol_ratio, 1, 3);
    int n_blob = count_for(&r, vol_ratio, 4, 7);
    int n_tube = count_for(&r, vol_ratio, 3, 5);
    int n_shell = count_for(&r, vol_ratio, 2, 3);
    int n_sphere = count_for(&r, vol_ratio, 3, 6);

    for (int s = 0; s < n_organ; s++) draw_organ(cv, &r, tissue);
    for (int s = 0; s < n_blob; s++) draw_blob(cv, &r);
    for (int s = 0; s < n_tube; s++) draw_tube(cv, &r);
    for (int s = 0; s < n_shell; s++) draw_shell(cv, &r, tissue);
    for (int s = 0; s < n_sphere; s++) draw_sphere(cv, &r);

    /* smooth multiplicative bias: 1 + linear + quadratic terms in coordinates
   * normalised to [-1, 1], bounded to about +-15% */
    double lin[3], quad[3], cross[3];
    for (int a = 0; a < 3; a++) {
        lin[a] = rng_range(&r, -0.07, 0.07);
        quad[a] = rng_range(&r, -0.04, 0.04);
        cross[a] = rng_range(&r, -0.03, 0.03);
    }
    double sigma = rng_range(&r, 0.02, 0.05);
    size_t v = 0;
    for (int64_t i = 0; i < n[0]; i++) {
        double x = 2.0 * (double)i / (double)(n[0] - 1) - 1.0;
        for (int64_t j = 0; j < n[1]; j++) {
            double y = 2.0 * (double)j / (double)(n[1] - 1) - 1.0;
            for (int64_t k = 0; k < n[2]; k++, v++) {
                double z = 2.0 * (double)k / (double)(n[2] - 1) - 1.0;
                double b = 1.0 + lin[0] * x + lin[1] * y + lin[2] * z + quad[0] * x * x + quad[1] * y * y +
                           quad[2] * z * z + cross[0] * x * y + cross[1] * y * z + cross[2] * x * z;
                image[v] = (float)((double)cv->base[v] * b + sigma * rng_gauss(&r));
            }
        }
    }
}

int swi_phantom_generate(uint64_t seed, const int64_t size[3], float *image, uint8_t *labels) {
    if (!size || !image || !labels) return -1;
    size_t total = 1;
    for (int a = 0; a < 3; a++) {
        /* 2^20 per axis is far beyond any sensible phantom, and keeps the
     * product and the double arithmetic exact */
        if (size[a] < 16 || size[a] > (INT64_C(1) << 20)) return -1;
        if ((size_t)size[a] > SIZE_MAX / sizeof(float) / total) return -1;
        total *= (size_t)size[a];
    }
    canvas_t cv;
    memset(&cv, 0, sizeof cv);
    for (int a = 0; a < 3; a++) cv.n[a] = size[a];
    cv.labels = labels;
    /* the noise-free image is built in a scratch buffer, inbody in another */
    cv.base = malloc(total * sizeof(float));
    cv.inbody = malloc(total);
    if (!cv.base || !cv.inbody) {
        free(cv.base);
        free(cv.inbody);
        return -1;
    }
    /* Each attempt uses a different stream; the first attempt nearly always
   * shows every class. */
    for (uint64_t attempt = 0; attempt < 16; attempt++) {
        uint64_t s = seed;
        if (attempt) {
            uint64_t x = seed ^ (attempt * UINT64_C(0xD1B54A32D192ED03));
            s = splitmix64(&x);
        }
        generate_once(s, &cv, image);
        size_t seen[SWI_PHANTOM_CLASSES] = {0};
        for (size_t v = 0; v < total; v++) seen[labels[v]]++;
        int all = 1;
        for (int c = 1; c < SWI_PHANTOM_CLASSES; c++)
            if (seen[c] == 0) all = 0;
        if (all) break;
    }
    free(cv.base);
    free(cv.inbody);
    return 0;
}
