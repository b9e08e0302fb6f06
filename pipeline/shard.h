/*
 * shard.h -- --shard I/N and --shard-grid AxBxC: part I of N of a run, cut along the first
 * axis (or along every axis of the grid) at output chunk boundaries (shard.c; the flags
 * themselves are parsed by util.h's cli_shard_parse and cli_shard_grid_parse).
 */
#ifndef SWI_CLI_SHARD_H
#define SWI_CLI_SHARD_H

#include <stddef.h>
#include <stdint.h>

/* Rows [lo, hi) of part I of N along an axis of `size` rows cut at multiples of `chunk`:
 * whole chunk rows, as evenly as they go (lo == hi for a part with none). */
void cli_shard_rows(int64_t size, int64_t chunk, int part, int parts, int64_t *lo, int64_t *hi);

/* --shard-grid against the run's parts: --shard I/N's N, or (mpi) mpirun's ranks. 0, or -1
 * with err. */
int cli_shard_grid_check(const int grid[3], int parts, int mpi, char *err);

/* The parts of a grid (its product). */
int cli_shard_grid_parts(const int grid[3]);

/* The box [lo, hi) of part I of a grid of parts (row-major: the last axis fastest) over a
 * volume of `size`: along each axis cli_shard_rows of the grid's count there (an axis with
 * no rows for the part gives lo == hi). */
void cli_shard_box(const int64_t size[3], const int64_t chunk[3], int part, const int grid[3], int64_t lo[3],
                   int64_t hi[3]);

/* "[a, b) x [c, d) x [e, f)" into buf. */
const char *cli_shard_box_str(const int64_t lo[3], const int64_t hi[3], char *buf, size_t n);

#endif
