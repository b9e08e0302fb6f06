/*
 * bench_options.h -- the command line of `swi bench` (bench_options.c): its help, the
 * parser and the checks of what goes together, before anything is read or allocated.
 */
#ifndef SWI_CLI_BENCH_OPTIONS_H
#define SWI_CLI_BENCH_OPTIONS_H

#include "bench_io.h"
#include "bench_net.h"
#include "bench_tta.h"
#include "window_opts.h"

#include <stddef.h>
#include <stdint.h>

typedef struct bench_opts {
    int64_t shape[3]; /* --shape (or the --input's size, once it is open) */
    int dims;
    int64_t classes;
    cli_window win; /* --roi, --overlap, --mode, --sw-batch */
    int64_t threads;
    size_t max_memory;
    int64_t order[3]; /* --order, n_order axes of it */
    int n_order;
    int pipeline; /* -1 auto, 0 off, 1 on */
    int scores;   /* --output scores (else argmax) */
    int floor_on; /* no --no-floor */
    bench_net_kind kind;
    double in_spacing[3], spacing[3]; /* --input-spacing, --spacing */
    int n_in_spacing, n_spacing;      /* given (1) or not (0) */
    swi_grid grid;                    /* --grid: window starts; nnU-Net's also brings its
                                         Gaussian and its resampling (--spacing) */
    double tile_step;                 /* --tile-step-size, 0.5 under --grid nnunet without
                                         --overlap; 0: the overlap's */
    unsigned mirror_axes;             /* --mirror-axes: bit a for window axis a */
    int64_t folds;                    /* --folds (1) */
    int mirror_combinator;            /* --mirror-by combinator (else the engine mirrors) */
    swi_accumulate accumulate;        /* --accumulate */
    const char *labels_raw;           /* --labels-raw FILE */
    int region_given;                 /* --region: a box of --shape's voxels */
    int64_t region_lo[3], region_hi[3];
} bench_opts;

/** Parse and check `swi bench`'s arguments into o and bio (which it initialises; the
 *  store and shard flags are bench_io's). Returns 0 to run; -1 after printing --help;
 *  else the exit status after printing the error: 2 for a usage error, 1 for another
 *  (an output inside the input, mpirun without MPI). */
int bench_parse(int argc, char **argv, bench_opts *o, bench_io *bio);

#endif
