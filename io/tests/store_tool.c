/* store_tool -- swi_store driven from the tests (io/tests/stores.py):
 *   store_tool read STORE OUT.f32           every voxel, read in odd boxes, as raw float32
 *   store_tool write STORE DTYPE PLANES CODEC D,H,W C0,C1,C2 [FAIL_AFTER]
 *       writes value(p, i, j, k) = (p * 7 + i * 5 + j * 3 + k) % M (M 251, 65521 or 1e6)
 *       through swi_store_on_region in unaligned boxes from two threads, in slabs along the
 *       axis STORE_TOOL_SLAB_AXIS (environment; default 0), over an existing store with
 *       STORE_TOOL_FORCE=1 (SWI_STORE_FORCE); with FAIL_AFTER
 *       it stops after that many regions and aborts, as a failed run would. Environment:
 *       STORE_TOOL_FLAGS ("force", "shared", "force,shared"), STORE_TOOL_JOB (the job
 *       fingerprint), STORE_TOOL_PAUSE=N (each thread sleeps 60 s at its first box from the N-th on,
 *       after the boxes before it: to be killed there).
 *   store_tool geom STORE                    "scale S0 S1 S2 translation T0 T1 T2 has H"
 * Exit 0 on success, 1 with the message on stderr. */
#include "swi_store.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int parse3(const char *s, int64_t v[3]) {
    long long a, b, c;
    if (sscanf(s, "%lld,%lld,%lld", &a, &b, &c) != 3) return -1;
    v[0] = a, v[1] = b, v[2] = c;
    return 0;
}

static int do_read(const char *name, const char *out) {
    char err[1024];
    swi_store *s;
    if (swi_store_open(name, &s, err, sizeof err)) {
        fprintf(stderr, "%s\n", err);
        return 1;
    }
    int64_t sz[3];
    swi_store_size(s, sz);
    size_t n = (size_t)(sz[0] * sz[1] * sz[2]);
    float *all = malloc(n * sizeof *all), *box = malloc(7 * 5 * 3 * sizeof *box);
    int rc = 0;
    if (!all || !box) {
        fprintf(stderr, "out of memory\n");
        rc = 1;
    }
    /* boxes of 7 x 5 x 3, so they straddle chunk edges */
    for (int64_t i = 0; !rc && i < sz[0]; i += 7)
        for (int64_t j = 0; !rc && j < sz[1]; j += 5)
            for (int64_t k = 0; !rc && k < sz[2]; k += 3) {
                int64_t lo[3] = {i, j, k}, hi[3] = {i + 7, j + 5, k + 3};
                for (int a = 0; a < 3; a++)
                    if (hi[a] > sz[a]) hi[a] = sz[a];
                if (swi_store_read_box(s, lo, hi, box, err, sizeof err)) {
                    fprintf(stderr, "%s\n", err);
                    rc = 1;
                    break;
                }
                int64_t bh = hi[1] - lo[1], bw = hi[2] - lo[2];
                for (int64_t a = lo[0]; a < hi[0]; a++)
                    for (int64_t b = lo[1]; b < hi[1]; b++)
                        memcpy(all + (a * sz[1] + b) * sz[2] + lo[2],
                               box + ((a - lo[0]) * bh + (b - lo[1])) * bw, (size_t)bw * sizeof *box);
            }
    if (!rc) {
        FILE *f = fopen(out, "wb");
        if (!f || fwrite(all, sizeof *all, n, f) != n || fclose(f) != 0) {
            fprintf(stderr, "%s: cannot write\n", out);
            rc = 1;
        }
    }
    printf("size %lld %lld %lld\n", (long long)sz[0], (long long)sz[1], (long long)sz[2]);
    free(all);
    free(box);
    swi_store_close(s);
    return rc;
}

typedef struct job {
    swi_store_writer *w;
    swi_store_spec spec;
    int parity, fail_after, failed, pause;
    int *count;
    pthread_mutex_t *mu;
} job;

static void *writer(void *arg) {
    job *jb = arg;
    const int64_t *sz = jb->spec.size;
    const int64_t step[3] = {5, 6, 7};
    size_t es = jb->spec.dtype == SWI_DTYPE_FLOAT32 ? 4 : jb->spec.dtype == SWI_DTYPE_UINT16 ? 2 : 1;
    double m = es == 1 ? 251 : es == 2 ? 65521 : 1e6;
    void *buf = malloc((size_t)(jb->spec.planes * step[0] * step[1] * step[2]) * es);
    if (!buf) return NULL;
    int idx = 0, paused = 0;
    for (int64_t i = 0; i < sz[0]; i += step[0])
        for (int64_t j = 0; j < sz[1]; j += step[1])
            for (int64_t k = 0; k < sz[2]; k += step[2], idx++) {
                if (idx % 2 != jb->parity) continue;
                pthread_mutex_lock(jb->mu);
                int c = ++*jb->count;
                pthread_mutex_unlock(jb->mu);
                if (jb->fail_after > 0 && c > jb->fail_after) {
                    free(buf);
                    return NULL;
                }
                if (jb->pause > 0 && idx >= jb->pause && !paused) {
                    paused = 1; /* every box before the N-th is written first, then both wait */
                    sleep(60);
                }
                swi_region r;
                memset(&r, 0, sizeof r);
                r.dims = 3;
                r.channels = jb->spec.planes;
                r.dtype = jb->spec.dtype;
                int64_t lo[3] = {i, j, k};
                for (int a = 0; a < 3; a++) {
                    r.lo[a] = lo[a];
                    r.hi[a] = lo[a] + step[a] < sz[a] ? lo[a] + step[a] : sz[a];
                }
                size_t e = 0;
                for (int64_t p = 0; p < r.channels; p++)
                    for (int64_t a = r.lo[0]; a < r.hi[0]; a++)
                        for (int64_t b = r.lo[1]; b < r.hi[1]; b++)
                            for (int64_t d = r.lo[2]; d < r.hi[2]; d++, e++) {
                                double v = (double)((p * 7 + a * 5 + b * 3 + d) % (int64_t)m);
                                if (es == 1)
                                    ((uint8_t *)buf)[e] = (uint8_t)v;
                                else if (es == 2)
                                    ((uint16_t *)buf)[e] = (uint16_t)v;
                                else
                                    ((float *)buf)[e] = (float)v + 0.5f;
                            }
                r.data = buf;
                if (swi_store_on_region(jb->w, &r)) {
                    jb->failed = 1;
                    free(buf);
                    return NULL;
                }
            }
    free(buf);
    return NULL;
}

static int do_write(int argc, char **argv) {
    swi_store_spec spec;
    swi_store_spec_init(&spec);
    const char *name = argv[2], *dt = argv[3], *codec = argv[5];
    spec.dtype = !strcmp(dt, "uint8")    ? SWI_DTYPE_UINT8
                 : !strcmp(dt, "uint16") ? SWI_DTYPE_UINT16
                                         : SWI_DTYPE_FLOAT32;
    spec.planes = atoll(argv[4]);
    spec.codec = !strcmp(codec, "zstd")   ? SWI_STORE_ZSTD
                 : !strcmp(codec, "zlib") ? SWI_STORE_ZLIB
                 : !strcmp(codec, "raw")  ? SWI_STORE_RAW
                                          : SWI_STORE_BLOSC;
    spec.labels = spec.planes == 1 && spec.dtype != SWI_DTYPE_FLOAT32;
    spec.classes = 4;
    if (parse3(argv[6], spec.size) || parse3(argv[7], spec.chunk)) {
        fprintf(stderr, "bad size or chunk\n");
        return 2;
    }
    int fail_after = argc > 8 ? atoi(argv[8]) : 0;
    const char *axis = getenv("STORE_TOOL_SLAB_AXIS");
    spec.slab_axis = axis ? atoi(axis) : 0;
    char err[1024];
    swi_store_writer *w;
    const char *fl = getenv("STORE_TOOL_FLAGS"), *pause = getenv("STORE_TOOL_PAUSE");
    int flags = (fl && strstr(fl, "force") ? SWI_STORE_FORCE : 0) |
                (fl && strstr(fl, "shared") ? SWI_STORE_SHARED : 0);
    spec.job = getenv("STORE_TOOL_JOB");
    const char *force = getenv("STORE_TOOL_FORCE");
    if (force && *force == '1') flags |= SWI_STORE_FORCE;
    if (swi_store_create(name, &spec, flags, 0, 1, NULL, NULL, &w, err, sizeof err)) {
        fprintf(stderr, "%s\n", err);
        return 1;
    }
    pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
    int count = 0;
    job jobs[2];
    pthread_t th[2];
    for (int t = 0; t < 2; t++) {
        jobs[t] = (job){w, spec, t, fail_after, 0, pause ? atoi(pause) : 0, &count, &mu};
        if (pthread_create(&th[t], NULL, writer, &jobs[t])) {
            writer(&jobs[t]);
            th[t] = 0;
        }
    }
    for (int t = 0; t < 2; t++)
        if (th[t]) pthread_join(th[t], NULL);
    if (fail_after > 0 || jobs[0].failed || jobs[1].failed) {
        fprintf(stderr, "stopped: %s\n", swi_store_writer_error(w));
        swi_store_abort(w);
        return 1;
    }
    if (swi_store_commit(w, err, sizeof err)) {
        fprintf(stderr, "%s\n", err);
        return 1;
    }
    return 0;
}

static int do_geom(const char *name) {
    char err[1024];
    swi_store *s;
    if (swi_store_open(name, &s, err, sizeof err)) {
        fprintf(stderr, "%s\n", err);
        return 1;
    }
    double sc[3], tr[3];
    int has = swi_store_geometry(s, sc, tr);
    printf("scale %.17g %.17g %.17g translation %.17g %.17g %.17g has %d\n", sc[0], sc[1], sc[2], tr[0],
           tr[1], tr[2], has);
    swi_store_close(s);
    return 0;
}

int main(int argc, char **argv) {
    if (argc == 4 && !strcmp(argv[1], "read")) return do_read(argv[2], argv[3]);
    if (argc == 3 && !strcmp(argv[1], "geom")) return do_geom(argv[2]);
    if ((argc == 8 || argc == 9) && !strcmp(argv[1], "write")) return do_write(argc, argv);
    fprintf(stderr,
            "usage: store_tool read STORE OUT | write STORE DTYPE PLANES CODEC D,H,W C0,C1,C2 [FAIL]\n");
    return 2;
}
