/*
 * bench_io.h -- what `swi bench` needs for real volumes and stores (bench_io.c): the
 * input through a reader, the result written to a store, shards, the MPI launcher check.
 */
#ifndef SWI_CLI_BENCH_IO_H
#define SWI_CLI_BENCH_IO_H

#include <stddef.h>

#include "swi.h"
#include "swi_io.h"
#include "swi_store.h"

typedef struct bench_io {
    const char *input, *output;
    int force;
    int sharded, init, part, parts;
    int grid[3];           /* the parts as a grid of boxes: --shard-grid, else {parts, 1, 1} */
    int grid_given;        /* --shard-grid */
    int mpi;               /* the shard is this rank of mpirun: part is the rank, parts the size */
    int (*all_ok)(int ok); /* with mpi: every rank's ok combined (1 when all are ok) */
    int empty;             /* this shard has no voxels */
    struct cli_input *in;  /* the input as the engine reads it (stores.h), once open */
    float *volume;         /* a NIfTI input, read whole */
    swi_store_writer *writer;
    int64_t box_lo[3], box_hi[3]; /* this shard's box (the whole volume without shards) */
} bench_io;

void bench_io_init(bench_io *b);

/* Open b->input (a store, read by window; NIfTI, read whole); its size into shape. 0 or -1. */
int bench_io_open_input(bench_io *b, int64_t shape[3], char *err, size_t n);

/* Point in at the input (data or reader). */
void bench_io_tensor(bench_io *b, swi_tensor *in);

/* Settle the grid of the shards once --shard and mpirun are known: 0, or 2 (usage) with err. */
int bench_io_grid(bench_io *b, char *err, size_t n);

/* Create the output store (or join it: --shard), settle the shard's box into p. Returns
 * 0, 1 (error) or 2 (usage error), the message in err. */
int bench_io_begin_output(bench_io *b, swi_params *p, const swi_tensor *in, const swi_output *out, int scores,
                          int64_t classes, char *err, size_t n);

/* Print the shard's box and the work the shard boundaries duplicate. */
void bench_io_report_shards(const bench_io *b, swi_ctx *ctx, const swi_params *p, const swi_tensor *in,
                            const swi_output *out, const swi_plan *plan);

/* After the run (status st): commit the output, or leave it marked incomplete. 0 or -1. */
int bench_io_finish(bench_io *b, swi_status st, const swi_ctx *ctx, char *err, size_t n);

/* Free everything (an output not committed stays marked incomplete). */
void bench_io_close(bench_io *b);

/* A file of raw bytes (`--labels-raw`) written as a job writes its outputs: a temporary beside
 * it made by bench_raw_begin (an existing path only with force, never a non-regular file, the
 * folder must exist), moved over the path by bench_raw_finish only when whole, removed by
 * bench_raw_abort (a no-op after finish, or when nothing was begun). */
typedef struct bench_raw {
    struct cli_out *out;
} bench_raw;

/* 0, or -1 with err. */
int bench_raw_begin(bench_raw *r, const char *path, int force, char *err, size_t n);
int bench_raw_finish(bench_raw *r, const void *data, size_t bytes, int force, char *err, size_t n);
void bench_raw_abort(bench_raw *r);

#endif
