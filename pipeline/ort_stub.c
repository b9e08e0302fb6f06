/*
 * ort_stub.c -- swi_ort.h for a swi built without ONNX Runtime: every call fails with a
 * message saying so, so the commands need no conditional code. Compiled only then.
 */
#include "swi_ort.h"

#include <stdio.h>
#include <string.h>

static swi_status none(char *err, size_t n, const char *what) {
    if (err && n)
        snprintf(err, n,
                 "%s%sswi was built without ONNX Runtime (run scripts/install-deps.sh "
                 "and rebuild)",
                 what ? what : "", what ? ": " : "");
    return SWI_ERR_INVALID_ARG;
}

void swi_ort_options_init(swi_ort_options *o) { memset(o, 0, sizeof *o); }
const char *swi_ort_version(void) { return "none"; }
swi_status swi_ort_providers(char *buf, size_t n, int *has_cuda, char *err, size_t errlen) {
    if (buf && n) buf[0] = '\0';
    if (has_cuda) *has_cuda = 0;
    return none(err, errlen, NULL);
}
swi_status swi_ort_open(const char *path, const swi_ort_options *opt, swi_ort_model **out, char *err,
                        size_t errlen) {
    (void)opt;
    *out = NULL;
    return none(err, errlen, path);
}
void swi_ort_close(swi_ort_model *m) { (void)m; }
int swi_ort_output_count(const swi_ort_model *m) {
    (void)m;
    return 0;
}
swi_status swi_ort_input_info(const swi_ort_model *m, swi_ort_tensor_info *info, char *err, size_t errlen) {
    (void)m, (void)info;
    return none(err, errlen, NULL);
}
swi_status swi_ort_output_info(const swi_ort_model *m, int index, swi_ort_tensor_info *info, char *err,
                               size_t errlen) {
    (void)m, (void)index, (void)info;
    return none(err, errlen, NULL);
}
swi_status swi_ort_check(const swi_ort_model *m, int output, char *err, size_t errlen) {
    (void)m, (void)output;
    return none(err, errlen, NULL);
}
void swi_ort_window_init(swi_ort_window *w, int64_t channels) {
    memset(w, 0, sizeof *w);
    w->channels = channels;
}
swi_status swi_ort_prepare(swi_ort_model *m, swi_ort_window *w, swi_head_spec *head, char *err,
                           size_t errlen) {
    (void)m, (void)w, (void)head;
    return none(err, errlen, NULL);
}
void swi_ort_describe(const swi_ort_model *m, char *buf, size_t n) {
    (void)m;
    snprintf(buf, n, "-");
}
int64_t swi_ort_calls_per_batch(const swi_ort_model *m, int64_t n) {
    (void)m;
    return n > 0;
}
swi_status swi_ort_run(swi_ort_model *m, const float *in, int64_t n, float *out, char *err, size_t errlen) {
    (void)m, (void)in, (void)n, (void)out;
    return none(err, errlen, NULL);
}
static int no_predict(void *user, swi_batch *b) {
    (void)user;
    swi_batch_set_error(b, "swi was built without ONNX Runtime");
    return 1;
}
swi_predictor swi_ort_predictor(swi_ort_model *m) {
    swi_predictor p = {no_predict, m};
    return p;
}
void swi_ort_cancel(swi_ort_model *m) { (void)m; }
int swi_ort_rewrites(const swi_ort_model *m) {
    (void)m;
    return 0;
}
swi_status swi_ort_optimize(const char *path, const char *out, int *rewritten, char *err, size_t errlen) {
    (void)out;
    if (rewritten) *rewritten = 0;
    return none(err, errlen, path);
}
