/* report.c -- the review page of a run: the page's summary from the options and the run. */
#include "report.h"

#include "alloc.h"
#include "card.h"
#include "safety.h"
#include "util.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

void seg_report_href(const char *name, const char *suffix, char *buf, size_t n) {
    static const char hex[] = "0123456789ABCDEF";
    size_t o = 0;
    for (int part = 0; part < 2; part++)
        for (const unsigned char *c = (const unsigned char *)(part ? suffix : name); *c && o + 4 < n; c++) {
            if ((*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') || (*c >= '0' && *c <= '9') ||
                *c == '-' || *c == '_' || *c == '.' || *c == '~') {
                buf[o++] = (char)*c;
            } else {
                buf[o++] = '%';
                buf[o++] = hex[*c >> 4];
                buf[o++] = hex[*c & 15];
            }
        }
    if (n) buf[o < n ? o : n - 1] = '\0';
}

#ifndef SWI_HAVE_REPORT

int seg_report_built(void) { return 0; }

int seg_report_check(const char *path, char *err) {
    cli_err(err, "%s: swi was built without the report library (report/)", path);
    return 1;
}

int seg_report_write(const pl_opts *o, const seg_state *s, int fd, const char *path, const char *title,
                     const void *labels, int label_bytes, int64_t classes, double seconds, char *err) {
    (void)o, (void)s, (void)title, (void)labels, (void)label_bytes, (void)classes, (void)seconds;
    if (fd >= 0) close(fd);
    return seg_report_check(path, err);
}

int seg_case_summarize(const double affine[4][4], const float *image, const void *labels, int label_bytes,
                       const int64_t size[3], int64_t classes, seg_case_summary *out, char *err) {
    (void)affine, (void)image, (void)labels, (void)label_bytes, (void)size, (void)classes;
    memset(out, 0, sizeof *out);
    return seg_report_check("index.html", err);
}

void seg_case_summary_free(seg_case_summary *c) { (void)c; }

int seg_report_index(const char *const *names, int n_names, const char *input_dir, const char *path,
                     const seg_index_row *rows, int n_rows, int n_classes, char *err) {
    (void)names, (void)n_names, (void)input_dir, (void)rows, (void)n_rows, (void)n_classes;
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

int seg_report_write(const pl_opts *o, const seg_state *s, int fd, const char *path, const char *title,
                     const void *labels, int label_bytes, int64_t classes, double seconds, char *err) {
    static char val[N_ITEMS][ITEM_LEN];
    swi_report_item items[N_ITEMS];
    int n = 0;
#define ITEM(k, ...) \
    (snprintf(val[n], ITEM_LEN, __VA_ARGS__), items[n].key = (k), items[n].value = val[n], n++)
    ITEM("swi", "%s", swi_version());
    if (o->n_preds > 1)
        ITEM("model", "%s (an ensemble of %d)", PL_MODEL_NAME(o), o->n_preds);
    else if (o->n_preds)
        ITEM("model", "%s", PL_MODEL_NAME(o));
    else if (o->n_models > 1)
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
    /* the first channel as read (before preprocessing); none from a store */
    p.image = s->reader ? NULL : s->raw ? s->raw : s->input;
    p.classes = classes;
    if (o->card && o->card->n_classes > 0 && p.classes <= CARD_MAX_NAMES) {
        p.names = (const char *const *)o->card->classes;
        if (p.classes < o->card->n_classes) p.classes = o->card->n_classes;
    }
    p.summary = items;
    p.n_summary = n;
    /* a DICOM series' identifiers, so the page says whose scan it is */
    swi_report_item ids[4];
    int n_ids = 0;
    if (v->format == SWI_IO_DICOM) {
        const swi_io_itk *d = &v->fmt.itk;
        const char *keys[4] = {"patient", "study", "series", "date"};
        const char *vals[4] = {d->patient_id, d->study_uid, d->series_uid, d->study_date};
        for (int k = 0; k < 4; k++)
            if (vals[k][0]) ids[n_ids].key = keys[k], ids[n_ids].value = vals[k], n_ids++;
    }
    p.ids = ids;
    p.n_ids = n_ids;
    char why[SWI_ERRLEN];
    if (swi_report_write_fd(fd, path, &p, why, sizeof why) != SWI_OK) {
        cli_err(err, "%s", why);
        return 1;
    }
    return 0;
}

int seg_case_summarize(const double affine[4][4], const float *image, const void *labels, int label_bytes,
                       const int64_t size[3], int64_t n_classes, seg_case_summary *out, char *err) {
    memset(out, 0, sizeof *out);
    swi_report_page p;
    memset(&p, 0, sizeof p);
    memcpy(p.size, size, sizeof p.size);
    memcpy(p.affine, affine, sizeof p.affine);
    p.labels = labels;
    p.label_bytes = label_bytes;
    const int64_t classes = n_classes > 1 ? n_classes : 2;
    swi_report_class_stats *st = cli_malloc((size_t)classes * sizeof *st);
    out->ml = cli_malloc((size_t)(classes - 1) * sizeof *out->ml);
    char why[SWI_ERRLEN];
    if (!st || !out->ml || swi_report_stats(&p, classes, st, why, sizeof why) != SWI_OK) {
        cli_err(err, "the case's volumes: %s", st && out->ml ? why : "out of memory");
        free(st);
        seg_case_summary_free(out);
        return 1;
    }
    for (int64_t c = 1; c < classes; c++) out->ml[c - 1] = st[c].ml;
    out->n_ml = (int)(classes - 1);
    free(st);
    /* the thumbnail: the PNG preview, through a temporary file (the writer takes a descriptor) */
    FILE *tmp = swi_io_available(SWI_IO_PNG) ? tmpfile() : NULL;
    int fd = tmp ? dup(fileno(tmp)) : -1;
    if (fd >= 0 && swi_io_preview_write_fd(fd, "thumbnail.png", size, image, labels, label_bytes, why,
                                           sizeof why) == SWI_OK) {
        long len = fseek(tmp, 0, SEEK_END) == 0 ? ftell(tmp) : -1;
        out->png = len > 0 ? cli_malloc((size_t)len) : NULL;
        if (out->png && fseek(tmp, 0, SEEK_SET) == 0 && fread(out->png, 1, (size_t)len, tmp) == (size_t)len) {
            out->png_size = (size_t)len;
        } else {
            free(out->png);
            out->png = NULL;
        }
    }
    if (tmp) fclose(tmp);
    return 0;
}

void seg_case_summary_free(seg_case_summary *c) {
    free(c->ml);
    free(c->png);
    memset(c, 0, sizeof *c);
}

int seg_report_index(const char *const *class_names, int n_names, const char *input_dir, const char *path,
                     const seg_index_row *rows, int n_rows, int n_classes, char *err) {
    swi_report_case *cases = cli_calloc((size_t)(n_rows > 0 ? n_rows : 1), sizeof *cases);
    const char **names = cli_calloc((size_t)(n_classes > 0 ? n_classes : 1), sizeof *names);
    char(*bufs)[32] = cli_calloc((size_t)(n_classes > 0 ? n_classes : 1), sizeof *bufs);
    if (!cases || !names || !bufs) {
        free(cases), free(names), free(bufs);
        cli_err(err, "%s: out of memory", path);
        return 1;
    }
    for (int k = 0; k < n_classes; k++) {
        const int l = k + 1;
        if (class_names && l < n_names && class_names[l]) {
            names[k] = class_names[l];
        } else {
            snprintf(bufs[k], sizeof bufs[k], "class %d", l);
            names[k] = bufs[k];
        }
    }
    for (int i = 0; i < n_rows; i++) {
        const seg_index_row *r = &rows[i];
        swi_report_case *c = &cases[i];
        c->name = r->name;
        c->href = r->href;
        c->failed = r->failed;
        c->status = r->status;
        c->error = r->error;
        c->seconds = r->seconds;
        if (r->sum && r->sum->n_ml >= n_classes) c->ml = r->sum->ml;
        if (r->sum) c->png = r->sum->png, c->png_size = r->sum->png_size;
    }
    char why[SWI_ERRLEN];
    cli_out out;
    int rc = 0;
    /* the index is made from the cases each run: replaced, never merged */
    if (cli_out_begin(&out, path, 1, err)) {
        rc = 1;
    } else if (swi_report_index_write_fd(cli_out_take_fd(&out), path, input_dir, cases, n_rows, names,
                                         n_classes, why, sizeof why) != SWI_OK) {
        cli_err(err, "%s", why);
        cli_out_abort(&out);
        rc = 1;
    } else if (cli_out_commit(&out, 1, err)) {
        cli_out_abort(&out);
        rc = 1;
    }
    free(cases), free(names), free(bufs);
    return rc;
}

#endif
