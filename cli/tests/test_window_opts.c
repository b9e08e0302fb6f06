/*
 * test_window_opts.c -- cli_window_option (common/window_opts.c): the defaults, good values of
 * every window flag under each command's rules, and each bad value's message.
 */
#include "window_opts.h"

#include "check.h"

#include <string.h>

_Static_assert(SWI_MAX_DIMS == 4, "the messages checked below say 'at most 4'");

static char err[512];

/* flag=value into w: the parser's return. */
static int opt(cli_window *w, const char *flag, const char *value) {
    err[0] = '\0';
    return cli_window_option(w, flag, value, err, sizeof err);
}

/* flag=value is refused with a message holding `says`, and leaves w as it was. */
static void refused(cli_window *w, const char *flag, const char *value, const char *says) {
    cli_window before = *w;
    CHECK(opt(w, flag, value) == -1, "--%s '%s' taken", flag, value);
    CHECK(strstr(err, says) != NULL, "--%s '%s': '%s' lacks '%s'", flag, value, err, says);
    CHECK(strchr(err, '\n') == NULL, "--%s '%s': the message is not one line", flag, value);
    CHECK(memcmp(&before, w, sizeof before) == 0, "--%s '%s': refused, yet w changed", flag, value);
}

static void test_defaults(void) {
    cli_window w;
    cli_window_init(&w);
    swi_params p;
    swi_params_init(&p, SWI_MAX_DIMS);
    for (int a = 0; a < SWI_MAX_DIMS; a++) {
        CHECK(w.roi[a] == p.roi[a], "roi[%d]", a);
        CHECK(w.overlap[a] == p.overlap[a], "overlap[%d] %g", a, w.overlap[a]);
        CHECK(w.sigma_scale[a] == p.sigma_scale[a], "sigma_scale[%d] %g", a, w.sigma_scale[a]);
    }
    CHECK(w.mode == p.mode && w.padding == p.padding_mode, "mode, padding");
    CHECK(w.cval == p.cval && w.sw_batch == p.sw_batch_size, "cval, sw_batch");
    CHECK(w.given == 0 && w.n_roi == 0 && w.n_overlap == 0 && w.n_sigma == 0, "nothing given");
    CHECK(w.axes == 3 && !w.roi_negative && !w.overlap_one && w.sw_batch_max == 65536 && w.cval_float,
          "swi segment's rules");
    CHECK(opt(&w, "threads", "2") == 0 && w.given == 0, "--threads is no window flag");
    CHECK(opt(&w, "padding", "reflect") == 0 && w.given == 0, "--padding is no window flag");
}

/* swi segment and swi plan: three axes, roi >= 0 */
static void test_three_axes(void) {
    cli_window w;
    cli_window_init(&w);
    CHECK(opt(&w, "roi", "96") == 1 && w.n_roi == 1, "--roi 96: %s", err);
    CHECK(w.roi[0] == 96 && w.roi[1] == 96 && w.roi[2] == 96, "one roi, every axis");
    CHECK(opt(&w, "roi", "96,0,64") == 1 && w.n_roi == 3, "--roi 96,0,64: %s", err);
    CHECK(w.roi[0] == 96 && w.roi[1] == 0 && w.roi[2] == 64, "three rois");
    CHECK(opt(&w, "overlap", "0.5") == 1 && w.overlap[2] == 0.5 && w.n_overlap == 1, "--overlap 0.5");
    CHECK(opt(&w, "overlap", "0,0.25,0.75") == 1 && w.overlap[0] == 0 && w.overlap[2] == 0.75, "three");
    CHECK(opt(&w, "sigma-scale", "0.2,0.1,1") == 1 && w.sigma_scale[1] == 0.1 && w.n_sigma == 3, "sigma");
    CHECK(opt(&w, "mode", "gaussian") == 1 && w.mode == SWI_BLEND_GAUSSIAN, "--mode gaussian");
    CHECK(opt(&w, "mode", "constant") == 1 && w.mode == SWI_BLEND_CONSTANT, "--mode constant");
    static const swi_pad pads[] = {SWI_PAD_CONSTANT, SWI_PAD_REFLECT, SWI_PAD_REPLICATE, SWI_PAD_CIRCULAR};
    static const char *const names[] = {"constant", "reflect", "replicate", "circular"};
    for (int i = 0; i < 4; i++)
        CHECK(opt(&w, "padding-mode", names[i]) == 1 && w.padding == pads[i], "--padding-mode %s", names[i]);
    CHECK(opt(&w, "cval", "-1024.5") == 1 && w.cval == -1024.5, "--cval");
    CHECK(opt(&w, "sw-batch", "65536") == 1 && w.sw_batch == 65536, "--sw-batch 65536");
    CHECK(w.given == (CLI_WINDOW_ROI | CLI_WINDOW_OVERLAP | CLI_WINDOW_SIGMA | CLI_WINDOW_MODE |
                      CLI_WINDOW_PADDING | CLI_WINDOW_CVAL | CLI_WINDOW_SW_BATCH),
          "given 0x%x", w.given);

    refused(&w, "roi", "1,2", "--roi '1,2': give one size or three (I,J,K), each >= 0");
    refused(&w, "roi", "-3", "--roi '-3': give one size or three (I,J,K), each >= 0");
    refused(&w, "roi", "abc", "--roi 'abc'");
    refused(&w, "roi", "1,2,3,4", "--roi '1,2,3,4'");
    refused(&w, "roi", "", "--roi ''");
    refused(&w, "roi", "8,,8", "--roi '8,,8'");
    refused(&w, "roi", "3000000000", "--roi '3000000000'");
    refused(&w, "overlap", "1", "--overlap '1': give one fraction or three, each in [0, 1)");
    refused(&w, "overlap", "-0.1", "--overlap '-0.1'");
    refused(&w, "overlap", "0.1,0.2", "--overlap '0.1,0.2'");
    refused(&w, "overlap", "nan", "--overlap 'nan'");
    refused(&w, "sigma-scale", "0", "--sigma-scale '0': give one value or three, each > 0");
    refused(&w, "sigma-scale", "nan", "--sigma-scale 'nan'");
    refused(&w, "sigma-scale", "inf", "--sigma-scale 'inf'");
    refused(&w, "mode", "linear", "--mode 'linear': use constant or gaussian");
    refused(&w, "mode", "Gaussian", "--mode 'Gaussian'");
    refused(&w, "padding-mode", "zeros",
            "--padding-mode 'zeros': use constant, reflect, replicate or circular");
    refused(&w, "cval", "x", "--cval 'x': give a finite number");
    refused(&w, "cval", "inf", "--cval 'inf'");
    refused(&w, "cval", "1e39", "--cval '1e39': beyond float32 (|V| <= 3.4e38)");
    refused(&w, "cval", " 1", "--cval ' 1'");
    refused(&w, "sw-batch", "0", "--sw-batch '0': give a whole number from 1 to 65536");
    refused(&w, "sw-batch", "2.5", "--sw-batch '2.5'");
    refused(&w, "sw-batch", "65537", "--sw-batch '65537'");
    refused(&w, "mode", "a\nb", "--mode 'a b'"); /* one line */
}

/* swi export and swi bench: one to SWI_MAX_DIMS values, matched to the dims later; roi <= 0 is
 * the whole axis; export's cval a double; bench's batch up to 4096, its overlap one value */
static void test_any_axes(void) {
    cli_window w;
    cli_window_init(&w);
    w.axes = 0;
    w.roi_negative = 1;
    w.cval_float = 0;
    w.sw_batch_max = 4096;
    CHECK(opt(&w, "roi", "8,-1") == 1 && w.n_roi == 2 && w.roi[0] == 8 && w.roi[1] == -1, "--roi 8,-1: %s",
          err);
    CHECK(w.roi[2] == 0, "a third axis not given keeps its default");
    CHECK(opt(&w, "overlap", "0.1,0.2") == 1 && w.n_overlap == 2 && w.overlap[1] == 0.2, "two overlaps");
    CHECK(w.overlap[2] == 0.25, "a third overlap not given keeps the default");
    CHECK(opt(&w, "sigma-scale", "0.3") == 1 && w.n_sigma == 1 && w.sigma_scale[2] == 0.3, "one sigma");
    CHECK(opt(&w, "cval", "1e300") == 1 && w.cval == 1e300, "a float64 cval: %s", err);
    CHECK(opt(&w, "sw-batch", "4096") == 1 && w.sw_batch == 4096, "--sw-batch 4096");

    CHECK(opt(&w, "roi", "4,5,6,7") == 1 && w.n_roi == 4 && w.roi[3] == 7, "four rois: %s", err);
    refused(&w, "roi", "1,2,3,4,5",
            "--roi '1,2,3,4,5': give one size or one per axis (at most 4) (<= 0: the whole axis)");
    refused(&w, "roi", "x", "--roi 'x'");
    refused(&w, "overlap", "1",
            "--overlap '1': give one fraction or one per axis (at most 4), each in [0, 1)");
    refused(&w, "overlap", "0.1,1", "[0, 1)");
    refused(&w, "sigma-scale", "0",
            "--sigma-scale '0': give one value or one per axis (at most 4), each > 0");
    refused(&w, "cval", "abc", "--cval 'abc': give a finite number");
    refused(&w, "cval", "inf", "--cval 'inf'");
    refused(&w, "sw-batch", "4097", "--sw-batch '4097': give a whole number from 1 to 4096");

    /* swi bench: one overlap for every axis */
    w.overlap_one = 1;
    CHECK(opt(&w, "overlap", "0.5") == 1 && w.n_overlap == 1 && w.overlap[2] == 0.5, "one overlap");
    refused(&w, "overlap", "0.1,0.2,0.3", "--overlap '0.1,0.2,0.3': give one fraction in [0, 1)");
    refused(&w, "overlap", "1", "--overlap '1': give one fraction in [0, 1)");
}

int main(void) {
    test_defaults();
    test_three_axes();
    test_any_axes();
    return check_report("test_window_opts");
}
