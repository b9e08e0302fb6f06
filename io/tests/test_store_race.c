/*
 * test_store_race.c -- two processes creating one new Zarr store at the same moment (a
 * pipe releases both at once), many times: exactly one creates it and the store holds
 * exactly its values, complete; the other is refused, unless both are parts of one job
 * (SWI_STORE_SHARED with one fingerprint), which join. Runs of two jobs sharing parts of
 * a store are refused too.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "swi_store.h"

#define N 8
static int failures;
#define CHECK(c, ...)                              \
    do {                                           \
        if (!(c)) {                                \
            failures++;                            \
            fprintf(stderr, "FAIL: " __VA_ARGS__); \
            fprintf(stderr, "\n");                 \
        }                                          \
    } while (0)

/* Write the value v over [lo, hi) of axis 0 (part of parts), as a writer would. 0: committed. */
static int write_store(const char *name, const char *job, int flags, int part, int parts, unsigned char v) {
    swi_store_spec spec;
    swi_store_spec_init(&spec);
    spec.size[0] = spec.size[1] = spec.size[2] = N;
    spec.chunk[0] = spec.chunk[1] = spec.chunk[2] = N / 2;
    spec.dtype = SWI_DTYPE_UINT8;
    spec.job = job;
    int64_t lo[3] = {part * N / parts, 0, 0}, hi[3] = {(part + 1) * N / parts, N, N};
    swi_store_writer *w;
    char err[1024];
    if (swi_store_create(name, &spec, flags, part, parts, lo, hi, &w, err, sizeof err) != SWI_OK) return 1;
    unsigned char data[N * N * N];
    memset(data, v, sizeof data);
    swi_region r;
    memset(&r, 0, sizeof r);
    r.dims = 3;
    r.channels = 1;
    r.dtype = SWI_DTYPE_UINT8;
    r.data = data;
    memcpy(r.lo, lo, sizeof lo);
    memcpy(r.hi, hi, sizeof hi);
    if (swi_store_on_region(w, &r)) {
        swi_store_abort(w);
        return 2;
    }
    return swi_store_commit(w, err, sizeof err) == SWI_OK ? 0 : 3;
}

/* Run two children released together; their exit codes in rc. */
static void two(const char *name, const char *jobs[2], int flags, int parts, int rc[2]) {
    int gate[2];
    if (pipe(gate) != 0) exit(2);
    pid_t pid[2];
    for (int k = 0; k < 2; k++) {
        pid[k] = fork();
        if (pid[k] == 0) {
            close(gate[1]);
            char c;
            if (read(gate[0], &c, 1) != 1) _exit(9);
            _exit(write_store(name, jobs[k], flags, parts > 1 ? k : 0, parts, (unsigned char)(k + 1)));
        }
    }
    close(gate[0]);
    if (write(gate[1], "ab", 2) != 2) exit(2);
    close(gate[1]);
    for (int k = 0; k < 2; k++) {
        int st = 0;
        waitpid(pid[k], &st, 0);
        rc[k] = WIFEXITED(st) ? WEXITSTATUS(st) : 99;
    }
}

/* The store's values, all of them v (and the store complete)? */
static int holds(const char *name, float v) {
    swi_store *s;
    char err[1024];
    if (swi_store_open(name, &s, err, sizeof err) != SWI_OK) return 0;
    float got[N * N * N];
    int64_t lo[3] = {0, 0, 0}, hi[3] = {N, N, N};
    int ok = swi_store_read_box(s, lo, hi, got, err, sizeof err) == SWI_OK;
    for (int i = 0; ok && i < N * N * N; i++) ok = got[i] == v;
    swi_store_close(s);
    return ok;
}

int main(void) {
    if (!swi_store_available(SWI_STORE_ZARR)) {
        printf("skipped: built without Zarr\n");
        return 77;
    }
    char dir[] = "/tmp/swi-race-XXXXXX";
    if (!mkdtemp(dir)) return 2;
    char name[256];
    const char *two_jobs[2] = {"job A", "job B"}, *one_job[2] = {"job A", "job A"};
    int rounds = 200;
    for (int i = 0; i < rounds; i++) {
        int rc[2];
        /* runs of two jobs, and two runs of one job: one store each, never joined */
        for (int same = 0; same < 2; same++) {
            snprintf(name, sizeof name, "%s/r%d-%d.zarr", dir, i, same);
            two(name, same ? one_job : two_jobs, SWI_STORE_EXCLUSIVE, 1, rc);
            int won = (rc[0] == 0) + (rc[1] == 0);
            CHECK(won == 1, "round %d (%s): %d runs succeeded (exit %d, %d)", i,
                  same ? "one job" : "two jobs", won, rc[0], rc[1]);
            if (won == 1)
                CHECK(holds(name, rc[0] == 0 ? 1.0f : 2.0f),
                      "round %d: the store holds the winner's values alone", i);
        }
        /* two parts of one job join; parts of two jobs do not */
        snprintf(name, sizeof name, "%s/p%d.zarr", dir, i);
        two(name, one_job, SWI_STORE_SHARED, 2, rc);
        CHECK(rc[0] == 0 && rc[1] == 0, "round %d: two parts of one job join (exit %d, %d)", i, rc[0], rc[1]);
        snprintf(name, sizeof name, "%s/q%d.zarr", dir, i);
        two(name, two_jobs, SWI_STORE_SHARED, 2, rc);
        CHECK(rc[0] != 0 || rc[1] != 0, "round %d: parts of two jobs are refused", i);
        if (failures > 5) break;
    }
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd) != 0) fprintf(stderr, "cannot remove %s\n", dir);
    printf("%d rounds, %d failures\n", rounds, failures);
    return failures ? 1 : 0;
}
