/*
 * own_outputs.c -- a program's own outputs checked and written as a job's are (swi_pipeline.h:
 * swi_job_outputs_apart, swi_job_check_output, swi_job_write_volume), over the job's own
 * rules: samefile.c (one file under two names) and safety.c (temporaries, commits).
 */
#include "safety.h"
#include "samefile.h"
#include "swi_pipeline.h"
#include "util.h"

#include <stdio.h>
#include <stdlib.h>

static swi_status done(int failed, const char *msg, char *err, size_t errlen) {
    if (err && errlen) snprintf(err, errlen, "%s", failed ? msg : "");
    return failed ? SWI_ERR_IO : SWI_OK;
}

swi_status swi_job_outputs_apart(const swi_job_path *inputs, int n_inputs, const swi_job_path *outputs,
                                 int n_outputs, char *err, size_t errlen) {
    char msg[SWI_ERRLEN];
    return done(cli_check_outputs_apart(inputs, n_inputs, outputs, n_outputs, msg) != 0, msg, err, errlen);
}

swi_status swi_job_check_output(const char *path, int force, char *err, size_t errlen) {
    char msg[SWI_ERRLEN];
    return done(cli_out_check(path, force, msg) != 0, msg, err, errlen);
}

swi_status swi_job_write_volume(const char *path, int force, const swi_volume *like, const void *data,
                                swi_dtype dtype, swi_io_kind kind, int64_t planes, int64_t classes,
                                const swi_io_cancel *cancel, char *err, size_t errlen) {
    char msg[SWI_ERRLEN];
    cli_out o;
    if (cli_out_begin(&o, path, force, msg)) return done(1, msg, err, errlen);
    swi_status st = swi_volume_write_fd(cli_out_take_fd(&o), path, like, data, dtype, kind, planes, classes,
                                        cancel, msg, sizeof msg);
    if (st == SWI_OK && cli_out_commit(&o, force, msg)) st = SWI_ERR_IO;
    if (st != SWI_OK) cli_out_abort(&o);
    if (err && errlen) snprintf(err, errlen, "%s", st == SWI_OK ? "" : msg);
    return st;
}

struct swi_job_output {
    cli_out o;
    int force;
};

swi_status swi_job_output_begin(const char *path, int force, swi_job_output **out, int *fd, char *err,
                                size_t errlen) {
    char msg[SWI_ERRLEN];
    if (!path || !out || !fd) return done(1, "swi_job_output_begin: an argument is NULL", err, errlen);
    *out = NULL;
    *fd = -1;
    swi_job_output *o = calloc(1, sizeof *o);
    if (!o) return done(1, "out of memory", err, errlen);
    if (cli_out_begin(&o->o, path, force, msg)) {
        free(o);
        return done(1, msg, err, errlen);
    }
    o->force = force;
    *fd = cli_out_take_fd(&o->o);
    *out = o;
    return done(0, "", err, errlen);
}

swi_status swi_job_output_commit(swi_job_output *o, char *err, size_t errlen) {
    char msg[SWI_ERRLEN];
    if (!o) return done(1, "swi_job_output_commit: o is NULL", err, errlen);
    int bad = cli_out_commit(&o->o, o->force, msg);
    if (bad) cli_out_abort(&o->o);
    free(o);
    return done(bad, msg, err, errlen);
}

void swi_job_output_abort(swi_job_output *o) {
    if (!o) return;
    cli_out_abort(&o->o);
    free(o);
}
