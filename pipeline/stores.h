/*
 * stores.h -- chunked stores on the command line (swi segment, swi bench): inputs read
 * window by window through swi_store, outputs written chunk by chunk from the engine's
 * regions, and the split of a run into shards (--shard I/N, mpirun).
 */
#ifndef SWI_CLI_STORES_H
#define SWI_CLI_STORES_H

#include <stdint.h>

#include "shard.h"
#include "swi.h"
#include "swi_store.h"

#define CLI_MAX_CHANNELS 16

/* A run's input channels, each a store read on demand or a volume held in memory, with an
 * optional per-voxel transform applied to every box read (preprocessing). */
typedef struct cli_input {
    int channels;
    int64_t size[3];
    swi_store *stores[CLI_MAX_CHANNELS]; /* or NULL: mem[c] */
    const float *mem[CLI_MAX_CHANNELS];
    int (*transform)(void *user, float *x, int64_t n, char *msg, size_t msg_size); /* 0, or a failure */
    void *transform_user;
    swi_reader reader; /* the swi_reader of all channels */
    const char *first; /* channel 0's name, for messages */
} cli_input;

/* Open store channel c of in (its grid -- size, OME-Zarr scale and translation -- checked
 * against channel 0's). 0, or -1 with err. A
 * warning (a non-finite fill value) goes to warn, or with warn NULL to stderr as "swi: LINE". */
int cli_input_open_store(cli_input *in, int c, const char *name, void (*warn)(void *user, const char *line),
                         void *warn_user, char *err);

/* Make in->reader serve every channel (call after the channels are set). */
void cli_input_reader(cli_input *in);

/* Close the stores. */
void cli_input_close(cli_input *in);

/* The engine's outermost loop axis for the whole run of p (any part ignored): the axis
 * the output stores' slabs follow. 0, or -1 with the planner's message in err. */
int cli_outer_axis(const swi_params *p, const swi_tensor *in, const swi_output *outs, int n_outs, int *axis,
                   char *err);

/* Windows of the whole run of p (any part ignored), or -1. */
int64_t cli_whole_windows(const swi_params *p, const swi_tensor *in, const swi_output *outs, int n_outs);

/* What makes two parts of a sharded run combinable, as one line into out (n bytes): the
 * inputs (real paths) and their size, the models (real paths and sizes), the window
 * options of p, and `extra` (the caller's own options). Recorded in a shared store by the
 * part that creates it; a part whose line differs is refused. */
void cli_job_fingerprint(const char *const *inputs, int n_inputs, const int64_t size[3],
                         const char *const *models, int n_models, const swi_params *p, const char *extra,
                         char *out, size_t n);

#endif
