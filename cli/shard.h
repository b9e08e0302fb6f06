/*
 * shard.h -- --shard I/N: part I of N of a run, cut along the first axis at output chunk
 * rows (shard.c).
 */
#ifndef SWI_CLI_SHARD_H
#define SWI_CLI_SHARD_H

#include <stdint.h>

/* --shard: "I/N" (0 <= I < N) or "init". 0, or -1 with err (SWI_ERRLEN bytes). */
int cli_shard_parse(const char *s, int *part, int *parts, int *init, char *err);

/* Rows [lo, hi) of part I of N along an axis of `size` rows cut at multiples of `chunk`:
 * whole chunk rows, as evenly as they go (lo == hi for a part with none). */
void cli_shard_rows(int64_t size, int64_t chunk, int part, int parts, int64_t *lo, int64_t *hi);

#endif
