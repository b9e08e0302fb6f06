/*
 * spec.c -- a job's spec with nothing set (apart from job.c, so that an option parser
 * builds without the rest of the pipeline: fuzz_cli_options).
 */
#include "swi_pipeline.h"

#include <math.h>
#include <string.h>

void swi_job_spec_init(swi_job_spec *spec) {
    memset(spec, 0, sizeof *spec);
    for (int a = 0; a < 3; a++) spec->overlap[a] = spec->sigma_scale[a] = -1;
    spec->mode = -1;
    spec->padding = -1;
    spec->cval = NAN;
}
