/*
 * window_opts.h -- the sliding-window flags that swi segment, swi plan, swi bench and
 * swi export share, and their one parser:
 *
 *   --roi N | I,J,K   --overlap F | F,F,F   --mode constant|gaussian
 *   --sigma-scale F | F,F,F   --padding-mode constant|reflect|replicate|circular
 *   --cval V   --sw-batch N
 *
 * A command keeps its own getopt table and help; each of these flags it meets goes to
 * cli_window_option. The defaults are the library's (swi_params_init).
 *
 *   cli_window w;
 *   cli_window_init(&w);
 *   ... case OPT_OVERLAP: if (cli_window_option(&w, "overlap", optarg, msg, sizeof msg) < 0) usage(msg);
 */
#ifndef SWI_CLI_WINDOW_OPTS_H
#define SWI_CLI_WINDOW_OPTS_H

#include "swi.h"

#include <stddef.h>
#include <stdint.h>

#define CLI_WINDOW_ROI 1u
#define CLI_WINDOW_OVERLAP 2u
#define CLI_WINDOW_MODE 4u
#define CLI_WINDOW_SIGMA 8u
#define CLI_WINDOW_PADDING 16u
#define CLI_WINDOW_CVAL 32u
#define CLI_WINDOW_SW_BATCH 64u

typedef struct cli_window {
    /* the values: swi_params_init's until a flag sets them; a list of one value is
     * every axis's (every entry), a longer one fills its first n entries */
    int64_t roi[SWI_MAX_DIMS];
    double overlap[SWI_MAX_DIMS];
    double sigma_scale[SWI_MAX_DIMS];
    swi_blend mode;
    swi_pad padding;
    double cval;
    int sw_batch;
    int n_roi, n_overlap, n_sigma; /* values given (0: the flag was not) */
    unsigned given;                /* CLI_WINDOW_* of the flags given */

    /* what the command takes: cli_window_init sets swi segment's, a command may change
     * them before parsing */
    int axes;         /* 3: a list is one value or three; 0: one to SWI_MAX_DIMS values
                         (the command matches them to its dims later) */
    int roi_negative; /* --roi values below 0 taken (the whole axis, as 0 is); else refused */
    int overlap_one;  /* --overlap takes one value (every axis's), not a list */
    int sw_batch_max; /* --sw-batch from 1 to this */
    int cval_float;   /* --cval within float32's range (swi_params.cval is a float) */
} cli_window;

/** The library's defaults and swi segment's rules (3 axes, roi >= 0, --sw-batch up to
 *  65536, a float32 --cval); nothing given. */
void cli_window_init(cli_window *w);

/** `flag` (the long name without "--": "roi", "overlap", "mode", "sigma-scale",
 *  "padding-mode", "cval", "sw-batch") with its value into w. Returns 1 when taken, 0 when
 *  flag is none of these (w untouched), -1 when the value is bad: err (n bytes) then holds
 *  one line, "--FLAG 'VALUE': what it takes". */
int cli_window_option(cli_window *w, const char *flag, const char *value, char *err, size_t n);

#endif
