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

/* Bytes of memory the process can still take: the system's MemAvailable (/proc/meminfo),
 * lowered to what the memory cgroup (v2 memory.max, v1 memory.limit_in_bytes, of every
 * level above the process) leaves beside its usage less its inactive file cache.
 * SIZE_MAX when none of these can be read. For tests, SWI_AVAILABLE_MEMORY (a size as
 * --max-memory takes) replaces them all. `from` names the source, for messages. */
size_t cli_available_memory(char *from, size_t fromlen);

/* Without a budget (p->max_memory 0): a plan that needs more than the available memory,
 * the engine's peak and what is beside it or `reading` (held while the input is read,
 * before the engine runs) whichever is larger, is planned again with the available memory
 * as the budget (a smaller batch, no pipelining), as cli_plan_fit does: on success p and
 * *plan, *beside are those of the run that fits. When nothing fits it is SWI_ERR_BUDGET,
 * err saying the smallest budget that works and what is available, and *plan, *beside
 * those of the unbudgeted plan. With a budget given, or nothing known of the memory, this
 * is cli_plan_fit. */
swi_status cli_plan_available(swi_ctx *ctx, swi_params *p, const swi_tensor *in, const swi_output *outs,
                              int n_outs, swi_plan *plan, cli_beside_fn beside_fn, void *user, size_t *beside,
                              size_t reading, char *err, size_t errlen);

#endif
