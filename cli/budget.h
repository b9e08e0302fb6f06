/*
 * budget.h -- --max-memory when memory is also held beside the engine: the results on the
 * input grid and the resampling band of --spacing, an ensemble's window buffer. The budget
 * covers the whole process's plan, so the engine is planned under what those leave.
 */
#ifndef SWI_CLI_BUDGET_H
#define SWI_CLI_BUDGET_H

#include "swi.h"

#include <stddef.h>

/* Bytes held beside the engine under `plan` (they may depend on its order and batch). */
typedef size_t (*cli_beside_fn)(void *user, const swi_plan *plan);

/* swi_plan_run with p->max_memory as the budget of engine and beside together: on success
 * p->max_memory holds the engine's share (pass p on to swi_run unchanged) and *beside
 * the bytes beside it. A budget that cannot hold both is SWI_ERR_BUDGET with err saying
 * what would fit; other failures are the engine's (its message in swi_last_error). With
 * no budget, or beside_fn NULL, this is swi_plan_run. */
swi_status cli_plan_fit(swi_ctx *ctx, swi_params *p, const swi_tensor *in, const swi_output *outs, int n_outs,
                        swi_plan *plan, cli_beside_fn beside_fn, void *user, size_t *beside, char *err,
                        size_t errlen);

#endif
