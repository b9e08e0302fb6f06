/*
 * job.h -- a job's parts for the pipeline's own files (describe.c): its settled options,
 * its state and the engine's parameters (not installed).
 */
#ifndef SWI_PIPELINE_JOB_H
#define SWI_PIPELINE_JOB_H

#include "segment.h"

const pl_opts *job_opts(const swi_job *job);
/* The job's nnU-Net steps (an nnU-Net model directory), or NULL. */
const struct nn_job *job_nnunet(const swi_job *job);
const seg_state *job_state(const swi_job *job);
const swi_params *job_params(const swi_job *job);
/* The state to fill before the run (folder mode: the volumes read ahead, the model shared). */
seg_state *job_state_mut(swi_job *job);

#endif
