/*
 * budget.c -- an engine plan that leaves room for what is held beside it (budget.h).
 */
#include "budget.h"

#include "util.h"

#include <stdio.h>

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
