/*
 * budget.c -- an engine plan that leaves room for what is held beside it (budget.h).
 */
#include "budget.h"

#include "util.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

swi_status cli_plan_fit(swi_ctx *ctx, swi_params *p, const swi_tensor *in, const swi_output *outs, int n_outs,
                        swi_plan *plan, cli_beside_fn beside_fn, void *user, size_t *beside, char *err,
                        size_t errlen) {
    *beside = 0;
    if (errlen) err[0] = '\0';
    const size_t budget = p->max_memory;
    if (budget == 0 || !beside_fn) {
        swi_status st = swi_plan_run(ctx, p, in, outs, n_outs, plan);
        if (st == SWI_OK && beside_fn) *beside = beside_fn(user, plan);
        return st;
    }
    /* What is beside may follow the engine's choice (the band lies along its outermost
     * axis), so fit, measure, and fit again under what is left: a few rounds settle it. */
    size_t engine = budget;
    for (int round = 0; round < 4; round++) {
        p->max_memory = engine;
        swi_status st = swi_plan_run(ctx, p, in, outs, n_outs, plan);
        if (st == SWI_ERR_BUDGET) {
            /* say the least the whole needs: the engine's smallest plan and what is beside it */
            p->max_memory = 0;
            swi_plan least;
            if (swi_plan_run(ctx, p, in, outs, n_outs, &least) == SWI_OK) {
                char a[32], b[32], c[32], d[32];
                size_t with = beside_fn(user, &least);
                snprintf(err, errlen,
                         "%s is below the smallest plan, at least %s: the engine's %s (sw-batch 1, "
                         "no pipelining) and %s beside it (results on the input grid, resampling band, "
                         "ensemble buffer)",
                         cli_bytes(budget, a), cli_bytes(least.bytes_min + with, b),
                         cli_bytes(least.bytes_min, c), cli_bytes(with, d));
            }
            p->max_memory = budget;
            return SWI_ERR_BUDGET;
        }
        if (st != SWI_OK) {
            p->max_memory = budget;
            return st;
        }
        *beside = beside_fn(user, plan);
        if (*beside < budget && plan->bytes_peak <= budget - *beside) return SWI_OK;
        if (*beside >= budget) break;
        engine = budget - *beside;
    }
    char a[32], b[32], c[32];
    snprintf(err, errlen,
             "the engine's plan %s and %s beside it (results on the input grid, resampling band, "
             "ensemble buffer) exceed %s",
             cli_bytes(plan->bytes_peak, a), cli_bytes(*beside, b), cli_bytes(budget, c));
    p->max_memory = budget;
    return SWI_ERR_BUDGET;
}

/* The first number in a file (a cgroup limit or usage); 0 when it says "max" or cannot
 * be read. */
static int read_number(const char *path, unsigned long long *v) {
    FILE *f = fopen(path, "r");
    if (!f) return 0;
    int ok = fscanf(f, "%llu", v) == 1;
    fclose(f);
    return ok;
}

/* The value of `key` in a "key value" file (memory.stat, /proc/meminfo), or 0. */
static unsigned long long read_key(const char *path, const char *key) {
    FILE *f = fopen(path, "r");
    if (!f) return 0;
    char line[256];
    unsigned long long v = 0;
    const size_t k = strlen(key);
    while (fgets(line, sizeof line, f))
        if (strncmp(line, key, k) == 0 && (line[k] == ' ' || line[k] == ':')) {
            const char *at = line + k + 1;
            while (*at == ' ' || *at == '\t') at++;
            v = strtoull(at, NULL, 10);
            break;
        }
    fclose(f);
    return v;
}

/* What cgroup directory `dir` and those above it up to `root` leave: limit - (usage -
 * inactive file cache), the smallest over the levels. */
static void cgroup_room(const char *root, const char *rel, const char *limit_file, const char *usage_file,
                        const char *inactive_key, size_t *room) {
    char dir[4096];
    if (snprintf(dir, sizeof dir, "%s%s", root, rel) >= (int)sizeof dir) return;
    for (;;) {
        char lim_path[4200], use_path[4200], stat_path[4200];
        snprintf(lim_path, sizeof lim_path, "%s/%s", dir, limit_file);
        snprintf(use_path, sizeof use_path, "%s/%s", dir, usage_file);
        snprintf(stat_path, sizeof stat_path, "%s/memory.stat", dir);
        unsigned long long lim, use;
        /* v1 writes "no limit" as a number near 2^63 */
        if (read_number(lim_path, &lim) && lim < (1ull << 60) && read_number(use_path, &use)) {
            unsigned long long cache = read_key(stat_path, inactive_key);
            unsigned long long held = use > cache ? use - cache : 0;
            size_t left = lim > held ? (size_t)(lim - held) : 0;
            if (left < *room) *room = left;
        }
        char *slash = strrchr(dir, '/');
        if (!slash || (size_t)(slash - dir) < strlen(root)) break;
        *slash = '\0';
    }
}

size_t cli_available_memory(char *from, size_t fromlen) {
    const char *env = getenv("SWI_AVAILABLE_MEMORY");
    size_t v;
    if (env && *env && cli_parse_size(env, &v) == 0) {
        snprintf(from, fromlen, "SWI_AVAILABLE_MEMORY");
        return v;
    }
    size_t room = SIZE_MAX;
    snprintf(from, fromlen, "unknown");
    unsigned long long kb = read_key("/proc/meminfo", "MemAvailable");
    if (kb > 0 && kb < (unsigned long long)(SIZE_MAX / 1024)) {
        room = (size_t)kb * 1024;
        snprintf(from, fromlen, "MemAvailable");
    }
    FILE *f = fopen("/proc/self/cgroup", "r");
    if (!f) return room;
    char line[4096];
    const size_t before = room;
    while (fgets(line, sizeof line, f)) {
        line[strcspn(line, "\n")] = '\0';
        char *c1 = strchr(line, ':'), *c2 = c1 ? strchr(c1 + 1, ':') : NULL;
        if (!c2) continue;
        *c2 = '\0';
        const char *controllers = c1 + 1, *rel = c2 + 1;
        if (strcmp(rel, "/") == 0) rel = "";
        if (line[0] == '0' && c1 == line + 1 && !*controllers) /* v2: "0::/path" */
            cgroup_room("/sys/fs/cgroup", rel, "memory.max", "memory.current", "inactive_file", &room);
        else if (strstr(controllers, "memory")) /* v1: "N:memory:/path" */
            cgroup_room("/sys/fs/cgroup/memory", rel, "memory.limit_in_bytes", "memory.usage_in_bytes",
                        "total_inactive_file", &room);
    }
    fclose(f);
    if (room < before) snprintf(from, fromlen, "the memory cgroup's limit");
    return room;
}

swi_status cli_plan_available(swi_ctx *ctx, swi_params *p, const swi_tensor *in, const swi_output *outs,
                              int n_outs, swi_plan *plan, cli_beside_fn beside_fn, void *user, size_t *beside,
                              size_t reading, char *err, size_t errlen) {
    swi_status st = cli_plan_fit(ctx, p, in, outs, n_outs, plan, beside_fn, user, beside, err, errlen);
    if (st != SWI_OK || p->max_memory != 0) return st;
    char from[64];
    const size_t avail = cli_available_memory(from, sizeof from);
    size_t need = plan->bytes_peak + *beside;
    if (need < plan->bytes_peak) need = SIZE_MAX;
    if (avail == SIZE_MAX || (need <= avail && reading <= avail)) return SWI_OK;
    if (reading <= avail) { /* a smaller batch, without pipelining, may fit */
        swi_plan fit;
        size_t fit_beside = 0;
        p->max_memory = avail;
        st = cli_plan_fit(ctx, p, in, outs, n_outs, &fit, beside_fn, user, &fit_beside, err, errlen);
        if (st == SWI_OK) {
            *plan = fit;
            *beside = fit_beside;
            return SWI_OK;
        }
        p->max_memory = 0;
        if (st != SWI_ERR_BUDGET) return st;
    }
    /* the smallest budget that works: the engine's smallest plan and what is beside it, or
     * what reading the input holds */
    size_t least = plan->bytes_min + *beside;
    if (least < plan->bytes_min) least = SIZE_MAX;
    if (reading > least) least = reading;
    char a[32], b[32];
    snprintf(err, errlen,
             "the run needs at least %s and %s is available (%s); give --max-memory to run anyway, or "
             "a smaller --roi or --sw-batch",
             cli_bytes(least, a), cli_bytes(avail, b), from);
    return SWI_ERR_BUDGET;
}
