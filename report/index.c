/* index.c -- a folder's index page: one sortable row per case, linking to its page. */
#include "report_internal.h"

#include <errno.h>
#include <string.h>
#include <unistd.h>

static void put_until(FILE *f, const char **from, const char *marker) {
    const char *m = strstr(*from, marker);
    if (!m) {
        fputs(*from, f);
        *from = "";
        return;
    }
    fwrite(*from, 1, (size_t)(m - *from), f);
    *from = m + strlen(marker);
}

swi_status swi_report_index_write_fd(int fd, const char *name, const char *title,
                                     const swi_report_case *cases, int n_cases,
                                     const char *const *class_names, int n_classes, char *err, size_t n) {
    if (!name) name = "index.html";
    if (fd < 0 || n_cases < 0 || n_classes < 0 || (n_cases && !cases) || (n_classes && !class_names)) {
        if (fd >= 0) close(fd);
        rep__err(err, n, "%s: bad arguments to swi_report_index_write_fd", name);
        return SWI_ERR_INVALID_ARG;
    }
    FILE *f = fdopen(fd, "w");
    if (!f) {
        rep__err(err, n, "%s: %s", name, strerror(errno));
        close(fd);
        return SWI_ERR_IO;
    }
    int failed = 0;
    for (int c = 0; c < n_cases; c++) failed += cases[c].failed != 0;
    const char *t = rep__index_html;
    put_until(f, &t, "<!--SWI_HEADER-->");
    fputs("<header><h1>", f);
    rep__html(f, title ? title : "segmentations");
    fprintf(f, "</h1><div class=\"sub\">%d cases, %d failed; click a column to sort</div></header>\n",
            n_cases, failed);
    put_until(f, &t, "<!--SWI_ROWS-->");
    fputs("<thead><tr><th>preview</th><th>case</th><th>status</th><th data-type=\"num\">seconds</th>", f);
    for (int k = 0; k < n_classes; k++) {
        fputs("<th data-type=\"num\">", f);
        rep__html(f, class_names[k]);
        fputs(" (mL)</th>", f);
    }
    fputs("<th>error</th></tr></thead>\n<tbody>\n", f);
    for (int c = 0; c < n_cases; c++) {
        const swi_report_case *r = &cases[c];
        fprintf(f, "<tr class=\"%s\"><td>", r->failed ? "failed" : "ok");
        if (r->png && r->png_size) {
            fputs("<img class=\"thumb\" alt=\"\" src=\"data:image/png;base64,", f);
            rep__base64(f, r->png, r->png_size, 0);
            fputs("\">", f);
        }
        fputs("</td><td class=\"case\">", f);
        if (r->href) {
            fputs("<a href=\"", f);
            rep__html(f, r->href);
            fputs("\">", f);
            rep__html(f, r->name);
            fputs("</a>", f);
        } else {
            rep__html(f, r->name);
        }
        fputs("</td><td class=\"status\">", f);
        rep__html(f, r->status ? r->status : r->failed ? "failed" : "ok");
        fprintf(f, "</td><td class=\"num seconds\" data-sort=\"%.6g\">%.2f</td>", r->seconds, r->seconds);
        for (int k = 0; k < n_classes; k++) {
            if (r->ml && !r->failed)
                fprintf(f, "<td class=\"num ml\" data-sort=\"%.17g\">%.3f</td>", r->ml[k], r->ml[k]);
            else
                fputs("<td class=\"num ml\" data-sort=\"\"></td>", f);
        }
        fputs("<td class=\"error\">", f);
        if (r->failed) rep__html(f, r->error ? r->error : "failed");
        fputs("</td></tr>\n", f);
    }
    fputs("</tbody>\n", f);
    fputs(t, f);
    return rep__finish(f, name, err, n) ? SWI_ERR_IO : SWI_OK;
}
