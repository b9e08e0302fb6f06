/*
 * fuzz_cli_options.c -- the option parser of `swi segment` / `swi plan` (seg_parse in
 * cli/segment_options.c) and the number, list and size parsers under it (common/util.c).
 *
 * Input layout: byte 0 selects what is parsed; the rest is split at NUL bytes into
 * arguments (at most 64). Mode 0/1: seg_parse for segment/plan, with argv[0] supplied.
 * When it accepts, every field must be within the documented ranges. Mode 2: each argument
 * goes through cli_parse_size, cli_parse_i64(_list), cli_parse_double(_list), cli_bytes
 * and cli_ends_with, whose results must be consistent with what they accepted. Mode 3: a
 * model card (pipeline/card.c): the rest is the card's JSON text (byte 1 even) or an ONNX
 * model whose metadata_props may hold one (byte 1 odd, written to a temporary file and read
 * by card_load); an accepted card must hold values in the documented ranges, print, write
 * its label files and apply onto parsed options that then pass the checks of mode 0.
 * seg_parse prints usage errors; run the target with -close_fd_mask=3.
 */
#include "cli.h"
#include "util.h"

#include "fuzz_common.h"

#include "card.h"
#include "internal.h"

#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define CHECK(cond, ...) FUZZ_CHECK("fuzz_cli_options", cond, __VA_ARGS__)

#define MAX_ARGS 64

/* An accepted command line: the spec's set fields within the parser's ranges, unset ones
 * left for the card. */
static void check_opts(const seg_cmd *c, int plan) {
    const swi_job_spec *o = &c->spec;
    CHECK(o->n_models >= 1 && o->n_models <= SWI_JOB_MAX_MODELS, "n_models %d", o->n_models);
    if (c->input_dir) {
        CHECK(!plan && c->output_dir && o->n_inputs == 0 && !o->output && !o->scores && !o->preview,
              "folder mode");
        CHECK(c->part_count >= 1 && c->part_index >= 0 && c->part_index < c->part_count, "part");
    } else {
        CHECK(o->n_inputs >= 1 && o->n_inputs <= SWI_JOB_MAX_INPUTS, "n_inputs %d", o->n_inputs);
        for (int i = 0; i < o->n_inputs; i++) CHECK(o->inputs[i] != NULL, "input %d", i);
        CHECK(plan || o->output != NULL, "no output");
    }
    for (int a = 0; a < 3; a++) {
        CHECK(o->overlap[a] == -1 || (o->overlap[a] >= 0 && o->overlap[a] < 1), "overlap %g", o->overlap[a]);
        CHECK(o->sigma_scale[a] == -1 || (o->sigma_scale[a] > 0 && isfinite(o->sigma_scale[a])), "sigma %g",
              o->sigma_scale[a]);
        CHECK(o->roi[a] >= -1, "roi %lld", (long long)o->roi[a]);
    }
    CHECK(o->sw_batch >= 1 && o->sw_batch <= 65536, "sw_batch %d", o->sw_batch);
    CHECK(o->threads >= 0 && o->threads <= 1024, "threads %d", o->threads);
    CHECK(o->head >= 0, "head %d", o->head);
    CHECK(isnan(o->cval) || isfinite(o->cval), "cval");
    CHECK(o->mode == -1 || o->mode == SWI_BLEND_CONSTANT || o->mode == SWI_BLEND_GAUSSIAN, "mode");
    CHECK(o->padding >= -1 && o->padding <= SWI_PAD_CIRCULAR, "padding");
    if (o->clip_given) CHECK(o->clip[0] <= o->clip[1], "clip");
    if (o->scale_given) CHECK(o->scale[0] != o->scale[1], "scale");
    CHECK(!o->softmax || o->scores, "softmax without scores");
    const char *outs[3] = {o->output, o->scores, o->preview};
    for (int a = 0; a < 3; a++)
        for (int b = a + 1; b < 3; b++)
            CHECK(!outs[a] || !outs[b] || strcmp(outs[a], outs[b]) != 0, "same output twice");
}

static void check_parsers(const char *s) {
    size_t sz;
    if (cli_parse_size(s, &sz) == 0) {
        char b[32];
        const char *t = cli_bytes(sz, b);
        CHECK(t != NULL && strlen(t) < 32, "cli_bytes");
    }
    int64_t v;
    if (cli_parse_i64(s, -1000, 1000, &v) == 0) CHECK(v >= -1000 && v <= 1000, "cli_parse_i64 range");
    if (cli_parse_i64(s, INT64_MIN, INT64_MAX, &v) == 0) {
        char back[32];
        snprintf(back, sizeof back, "%lld", (long long)v);
        (void)back;
    }
    double d;
    if (cli_parse_double(s, &d) == 0) CHECK(!isnan(d), "cli_parse_double gave NaN");
    int64_t li[3] = {0};
    int n = cli_parse_i64_list(s, li, 3);
    CHECK(n == -1 || (n >= 1 && n <= 3), "cli_parse_i64_list returned %d", n);
    double ld[4];
    n = cli_parse_double_list(s, ld, 4);
    CHECK(n == -1 || (n >= 1 && n <= 4), "cli_parse_double_list returned %d", n);
    (void)cli_ends_with(s, ".nii.gz");
    char line[64];
    snprintf(line, sizeof line, "%s", s);
    cli_one_line(line);
    for (const char *p = line; *p; p++) CHECK(*p != '\n' && *p != '\r', "cli_one_line left a line break");
}

/* The parser links pipeline/card.c for --model's card; its colour-table writer, which needs
 * swi_io's palette, is never reached from option parsing. */
void swi_io_label_color(int64_t l, unsigned char rgb[3]);
void swi_io_label_color(int64_t l, unsigned char rgb[3]) {
    (void)l;
    rgb[0] = rgb[1] = rgb[2] = 0;
}

static void check_card(const seg_card *c) {
    for (int a = 0; a < 3; a++) {
        if (c->has_roi) CHECK(c->roi[a] >= 1 && c->roi[a] <= 65536, "card roi %lld", (long long)c->roi[a]);
        if (c->has_overlap) CHECK(c->overlap[a] >= 0 && c->overlap[a] < 1, "card overlap %g", c->overlap[a]);
        if (c->has_sigma)
            CHECK(c->sigma_scale[a] > 0 && isfinite(c->sigma_scale[a]), "card sigma %g", c->sigma_scale[a]);
        if (c->has_spacing)
            CHECK(c->spacing[a] > 0 && isfinite(c->spacing[a]), "card spacing %g", c->spacing[a]);
    }
    if (c->has_clip) CHECK(c->clip[0] <= c->clip[1], "card clip");
    if (c->has_scale) CHECK(c->scale[0] != c->scale[1], "card scale");
    if (c->has_cval) CHECK(isfinite(c->cval), "card cval");
    CHECK(c->n_channels >= 0 && c->n_channels <= CARD_MAX_NAMES, "card channels %d", c->n_channels);
    CHECK(c->n_classes >= 0 && c->n_classes <= CARD_MAX_NAMES, "card classes %d", c->n_classes);
    CHECK(c->n_members >= 0 && c->n_members < SWI_JOB_MAX_MODELS, "card members %d", c->n_members);
    for (int i = 0; i < c->n_channels; i++) CHECK(c->channels[i] != NULL, "channel name %d", i);
    for (int i = 0; i < c->n_classes; i++) CHECK(c->classes[i] != NULL, "class name %d", i);
    for (int i = 0; i < c->n_members; i++) CHECK(c->members[i] != NULL, "member %d", i);
    card_print(c, stdout);
    char err[SWI_ERRLEN];
    for (int itksnap = 0; itksnap < 2; itksnap++) {
        int fd = open("/dev/null", O_WRONLY);
        if (fd >= 0) CHECK(card_write_labels(c, fd, itksnap, "fuzz", err) <= 1, "card_write_labels");
    }
    /* a card fills what a job's spec left out (pipeline/job.c's defaults); the result obeys
     * the parser's ranges */
    pl_opts o;
    memset(&o, 0, sizeof o);
    for (int a = 0; a < 3; a++) {
        o.overlap[a] = 0.25;
        o.sigma_scale[a] = 0.125;
    }
    o.mode = SWI_BLEND_CONSTANT;
    o.padding = SWI_PAD_CONSTANT;
    if (card_apply(c, &o, err) == 0) {
        for (int a = 0; a < 3; a++) {
            CHECK(o.overlap[a] >= 0 && o.overlap[a] < 1, "overlap %g", o.overlap[a]);
            CHECK(o.sigma_scale[a] > 0 && isfinite(o.sigma_scale[a]), "sigma %g", o.sigma_scale[a]);
            CHECK(o.roi[a] >= 0, "roi %lld", (long long)o.roi[a]);
        }
        CHECK(isfinite(o.cval), "cval");
        CHECK(o.mode == SWI_BLEND_CONSTANT || o.mode == SWI_BLEND_GAUSSIAN, "mode");
        CHECK((unsigned)o.padding <= SWI_PAD_CIRCULAR, "padding");
        if (o.clip_given) CHECK(o.clip[0] <= o.clip[1], "clip");
        if (o.scale_given) CHECK(o.scale[0] != o.scale[1], "scale");
    }
}

/* Mode 3: a card as JSON text, or inside an ONNX model's metadata_props. */
static void fuzz_card(const uint8_t *data, size_t size) {
    if (size < 1) return;
    seg_card c;
    memset(&c, 0, sizeof c);
    char err[SWI_ERRLEN] = "";
    int ok = 0;
    if (!(data[0] & 1)) {
        char *text = malloc(size);
        if (!text) return;
        memcpy(text, data + 1, size - 1);
        text[size - 1] = '\0';
        int rc = card_parse(text, "fuzz.json", ".", &c, err);
        free(text);
        CHECK(rc == 0 || rc == 1, "card_parse returned %d", rc);
        CHECK(rc == 0 || err[0] != '\0', "card_parse failed without a message");
        ok = rc == 0;
        if (!ok) card_free(&c); /* what a failed parse had taken */
    } else {
        char path[] = "/tmp/fuzz_card_XXXXXX";
        int fd = mkstemp(path);
        if (fd < 0) return;
        int wrote = write(fd, data + 1, size - 1) == (ssize_t)(size - 1);
        close(fd);
        int found = 0, rc = wrote ? card_load(path, &c, &found, err) : 1;
        unlink(path);
        if (!wrote) return;
        CHECK(rc == 0 || rc == 1, "card_load returned %d", rc);
        CHECK(rc == 0 || err[0] != '\0', "card_load failed without a message");
        ok = rc == 0 && found;
    }
    if (!ok) {
        card_free(&c);
        return;
    }
    check_card(&c);
    card_free(&c);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1 || size > 4096) return 0;
    int mode = data[0] % 4;
    if (mode == 3) {
        fuzz_card(data + 1, size - 1);
        return 0;
    }
    char *buf = malloc(size); /* args, NUL-terminated */
    memcpy(buf, data + 1, size - 1);
    buf[size - 1] = '\0';
    char *argv[MAX_ARGS + 2];
    int argc = 0;
    argv[argc++] = mode == 1 ? "plan" : "segment";
    for (size_t i = 0; i < size - 1 && argc < MAX_ARGS;) {
        argv[argc++] = buf + i;
        i += strlen(buf + i) + 1;
    }
    argv[argc] = NULL;
    if (mode < 2) {
        seg_cmd o;
        int rc = seg_parse(argc, argv, &o, mode);
        /* 1: the model's card (M.json beside it) could not be read or applied -- a run-time
         * error naming the file, as the command exits with */
        CHECK(rc == 0 || rc == 1 || rc == 2 || rc == -1, "seg_parse returned %d", rc);
        if (rc == 0) check_opts(&o, mode);
    } else {
        for (int i = 1; i < argc; i++) check_parsers(argv[i]);
    }
    free(buf);
    return 0;
}
