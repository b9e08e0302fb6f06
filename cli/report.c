/* report.c -- the review page of a run: the page's summary from the options and the run. */
#include "report.h"

#include "card.h"
#include "util.h"

#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#ifndef SWI_HAVE_REPORT

int seg_report_built(void) { return 0; }

int seg_report_check(const char *path, char *err) {
    cli_err(err, "%s: swi was built without the report library (report/)", path);
    return 1;
}

int seg_report_write(const seg_opts *o, const seg_state *s, int fd, const char *path, const char *title,
                     const void *labels, int label_bytes, int64_t classes, double seconds, char *err) {
    (void)o, (void)s, (void)title, (void)labels, (void)label_bytes, (void)classes, (void)seconds;
    if (fd >= 0) close(fd);
    return seg_report_check(path, err);
}

#else

#include "swi_report.h"

int seg_report_built(void) { return 1; }

int seg_report_check(const char *path, char *err) {
    char why[SWI_ERRLEN];
    if (swi_report_check(why, sizeof why) == SWI_OK) return 0;
    cli_err(err, "%s: cannot write the review page: %s", path, why);
    return 1;
}

enum { N_ITEMS = 16, ITEM_LEN = 4608 };

int seg_report_write(const seg_opts *o, const seg_state *s, int fd, const char *path, const char *title,
                     const void *labels, int label_bytes, int64_t classes, double seconds, char *err) {
    static char val[N_ITEMS][ITEM_LEN];
    swi_report_item items[N_ITEMS];
    int n = 0;
#define ITEM(k, ...) \
    (snprintf(val[n], ITEM_LEN, __VA_ARGS__), items[n].key = (k), items[n].value = val[n], n++)
    ITEM("swi", "%s", swi_version());
    if (o->n_models > 1)
        ITEM("model", "%s (an ensemble of %d)", o->model, o->n_models);
    else
        ITEM("model", "%s", o->model);
    ITEM("card", "%s", o->card ? o->card->source : "none");
    size_t used = 0;
    val[n][0] = '\0';
    for (int c = 0; c < o->n_inputs && used < ITEM_LEN; c++)
        used += (size_t)snprintf(val[n] + used, ITEM_LEN - used, "%s%s", c ? ", " : "", o->inputs[c]);
    items[n].key = o->n_inputs > 1 ? "inputs" : "input", items[n].value = val[n], n++;
    if (o->output) ITEM("output", "%s", o->output);
    ITEM("window", "roi %lldx%lldx%lld, overlap %g,%g,%g, %s blending%s, %s padding, batch %d%s",
         (long long)o->roi[0], (long long)o->roi[1], (long long)o->roi[2], o->overlap[0], o->overlap[1],
         o->overlap[2], o->mode == SWI_BLEND_GAUSSIAN ? "gaussian" : "constant", "",
         o->padding == SWI_PAD_REFLECT     ? "reflect"
         : o->padding == SWI_PAD_REPLICATE ? "replicate"
         : o->padding == SWI_PAD_CIRCULAR  ? "circular"
                                           : "constant",
         o->sw_batch, o->tta ? ", mirror TTA" : "");
    if (o->clip_given || o->scale_given || o->zscore) {
        char a[128] = "", b[160] = "";
        if (o->clip_given) snprintf(a, sizeof a, "clip %g..%g ", o->clip[0], o->clip[1]);
        if (o->scale_given)
            snprintf(b, sizeof b, "scale %g..%g -> %g..%g ", o->scale[0], o->scale[1], o->scale[2],
                     o->scale[3]);
        ITEM("preprocessing", "%s%s%s", a, b, o->zscore ? "z-score" : "");
    }
    if (o->orientation || o->spacing_given)
        ITEM("model grid", "%s%s%.4g,%.4g,%.4g mm", o->orientation ? o->orientation : "",
             o->orientation ? ", " : "", o->spacing_given ? o->spacing[0] : 0,
             o->spacing_given ? o->spacing[1] : 0, o->spacing_given ? o->spacing[2] : 0);
    swi_stats st;
    if (s->ctx && swi_run_stats(s->ctx, &st) == SWI_OK)
        ITEM("windows", "%lld: %lld run, %lld reused", (long long)st.windows_total,
             (long long)st.windows_predicted, (long long)st.windows_reused);
    ITEM("time", "%.2f s", seconds);
    char b[32];
    ITEM("peak memory", "%s (peak RSS)", cli_bytes(cli_peak_rss(), b));
    time_t now = time(NULL);
    struct tm tm;
    char when[64] = "";
    if (gmtime_r(&now, &tm)) strftime(when, sizeof when, "%Y-%m-%d %H:%M:%S UTC", &tm);
    ITEM("written", "%s", when);
#undef ITEM

    /* the heading: the title's last path component */
    char head[256];
    const char *t = title ? title : "segmentation";
    size_t tl = strlen(t);
    while (tl > 1 && t[tl - 1] == '/') tl--;
    size_t from = tl;
    while (from > 0 && t[from - 1] != '/') from--;
    snprintf(head, sizeof head, "%.*s", (int)(tl - from), t + from);
    const swi_volume *v = &s->vols[0];
    swi_report_page p;
    memset(&p, 0, sizeof p);
    p.title = head;
    memcpy(p.size, v->size, sizeof p.size);
    memcpy(p.affine, v->affine, sizeof p.affine);
    p.labels = labels;
    p.label_bytes = label_bytes;
    /* the first channel as the network saw it (after preprocessing); none from a store */
    p.image = s->reader ? NULL : s->input;
    p.classes = classes;
    if (o->card && o->card->n_classes > 0 && p.classes <= CARD_MAX_NAMES) {
        p.names = (const char *const *)o->card->classes;
        if (p.classes < o->card->n_classes) p.classes = o->card->n_classes;
    }
    p.summary = items;
    p.n_summary = n;
    char why[SWI_ERRLEN];
    if (swi_report_write_fd(fd, path, &p, why, sizeof why) != SWI_OK) {
        cli_err(err, "%s", why);
        return 1;
    }
    return 0;
}

#endif
