/*
 * bench_floor.h -- the traffic floor `swi bench` compares its run with: the machine's
 * fused-accumulate bandwidth (acc += pred * w over arrays far larger than the caches, on
 * the run's threads) and the bytes the run must move at least:
 *   predictor writes (4 B per window voxel and class)
 * + one fused accumulate per window voxel and class (12 B: read acc, read pred, write acc)
 * + one reduction read of the blended scores (4 B per voxel and class).
 */
#ifndef SWI_CLI_BENCH_FLOOR_H
#define SWI_CLI_BENCH_FLOOR_H

#include "swi.h"

#include <stddef.h>
#include <stdint.h>

/** Let a large malloc'd buffer fault in huge pages (a no-op where madvise lacks them). */
void bench_hint_huge(void *p, size_t bytes);

/** Measure the bandwidth on plan->threads threads and print the line
 *  "floor: fused accumulate ... -> floor S s"; returns S, the seconds the traffic of the
 *  plan's windows and of `voxels` voxels takes at that bandwidth (0 when it could not be
 *  measured). */
double bench_traffic_floor(const swi_plan *plan, int dims, int64_t classes, int64_t voxels);

#endif
