/*
 * cmd_plan.c -- `swi plan`: what `swi segment` would do with the same options (the window
 * grid, the network calls, the windows reused, the predicted memory), without running the
 * network: the job's plan (swi_job_plan_run) as swi_job_describe writes it. With reuse on
 * it reads the voxels, as only they tell which windows repeat.
 */
#include "cli.h"

#include "swi_pipeline.h"

#include <stdio.h>
#include <stdlib.h>

int swi_cmd_plan(int argc, char **argv) {
    const char *who = "swi plan";
    seg_cmd o;
    int rc = seg_parse(argc, argv, &o, 1);
    if (rc) return rc < 0 ? 0 : rc;
    if (seg_store_check(&o.spec, who)) return 2;
    seg_hooks h;
    swi_job_hooks hooks = {0};
    seg_hooks_init(&h, !o.quiet, NULL, who, &hooks);
    hooks.progress = NULL;
    char err[SWI_JOB_ERRLEN];
    swi_job *job = NULL;
    swi_job_plan *plan = malloc(sizeof *plan);
    swi_status st = plan ? swi_job_open(&o.spec, &hooks, &job, err, sizeof err) : SWI_ERR_NOMEM;
    if (!plan) snprintf(err, sizeof err, "out of memory");
    if (st == SWI_OK) st = swi_job_plan_run(job, 1, plan, err, sizeof err);
    if (st == SWI_OK) {
        size_t n = swi_job_describe(job, plan, NULL, 0) + 1;
        char *text = malloc(n);
        if (text) {
            swi_job_describe(job, plan, text, n);
            fputs(text, stdout);
            free(text);
        } else {
            st = SWI_ERR_NOMEM;
            snprintf(err, sizeof err, "out of memory");
        }
    }
    swi_job_free(job);
    free(plan);
    return seg_job_exit(who, st, err);
}
