/*
 * folder_cases.c -- folder mode's cases: the input folder listed (nnU-Net's channel files,
 * DICOM series folders), the summary table and --report-dir's index.
 */
#include "folder.h"

#include "util.h"

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

static const char *const VOLUME_EXT[] = {".nii.gz", ".nii", ".nrrd", ".nhdr", ".mha", ".mhd"};

/* The extension of a volume file name, or NULL. */
static const char *volume_ext(const char *name) {
    for (size_t i = 0; i < sizeof VOLUME_EXT / sizeof *VOLUME_EXT; i++)
        if (cli_ends_with(name, VOLUME_EXT[i]) && strlen(name) > strlen(VOLUME_EXT[i])) return VOLUME_EXT[i];
    return NULL;
}

/* nnU-Net's channel suffix: "_0003" at the end of the stem gives 3; else -1. */
static int channel_of(const char *stem, size_t len) {
    if (len < 6 || stem[len - 5] != '_') return -1;
    int c = 0;
    for (size_t i = len - 4; i < len; i++) {
        if (stem[i] < '0' || stem[i] > '9') return -1;
        c = c * 10 + (stem[i] - '0');
    }
    return c;
}

typedef struct entry {
    char *name;
    int is_dir;
} entry;

static int cmp_entry(const void *a, const void *b) {
    return strcmp(((const entry *)a)->name, ((const entry *)b)->name);
}

void free_case_data(fcase *c) {
    free(c->vols);
    c->vols = NULL;
    free(c->input);
    c->input = NULL;
}

void free_folder(folder *f) {
    for (int i = 0; i < f->n_cases; i++) {
        for (int k = 0; k < f->cases[i].n_files; k++) free(f->cases[i].files[k]);
        free_case_data(&f->cases[i]);
        seg_case_summary_free(&f->cases[i].sum);
    }
    free(f->cases);
    free(f->todo);
    swi_job_free(f->opts_job);
}

/* Find or add the case `name` (cases are added in sorted order, so it is the last one). */
static fcase *case_named(folder *f, const char *name, size_t len, int *cap) {
    if (f->n_cases > 0) {
        fcase *last = &f->cases[f->n_cases - 1];
        if (strlen(last->name) == len && strncmp(last->name, name, len) == 0) return last;
    }
    if (f->n_cases == *cap) {
        int nc = *cap ? *cap * 2 : 64;
        fcase *t = realloc(f->cases, (size_t)nc * sizeof *t);
        if (!t) return NULL;
        f->cases = t;
        *cap = nc;
    }
    fcase *c = &f->cases[f->n_cases++];
    memset(c, 0, sizeof *c);
    snprintf(c->name, sizeof c->name, "%.*s", (int)(len < 255 ? len : 255), name);
    return c;
}

/* List IN into cases. Returns 0, or 1 with err set. */
int list_cases(folder *f, const char *in, const char *out_real, const char *rep_real, char *err) {
    DIR *d = opendir(in);
    if (!d) {
        cli_err(err, "%s: cannot open the input directory: %s", in, strerror(errno));
        return 1;
    }
    entry *ents = NULL;
    size_t n = 0, cap = 0;
    struct dirent *e;
    int rc = 0;
    while ((e = readdir(d)) != NULL) {
        if (e->d_name[0] == '.') continue;
        char path[PATH_MAX];
        if (snprintf(path, sizeof path, "%s/%s", in, e->d_name) >= (int)sizeof path) continue;
        struct stat st;
        if (stat(path, &st) != 0) continue;
        int is_dir = S_ISDIR(st.st_mode);
        if (!is_dir && !(S_ISREG(st.st_mode) && volume_ext(e->d_name)))
            continue; /* data files of .mhd/.nhdr headers, notes, ... */
        if (is_dir) {
            /* the output directory (or one holding it) inside IN is not a case */
            char real[PATH_MAX];
            if (realpath(path, real)) {
                size_t rl = strlen(real);
                if (strncmp(out_real, real, rl) == 0 && (out_real[rl] == '\0' || out_real[rl] == '/'))
                    continue;
                if (rep_real[0] && strncmp(rep_real, real, rl) == 0 &&
                    (rep_real[rl] == '\0' || rep_real[rl] == '/'))
                    continue;
            }
        }
        if (n == cap) {
            size_t nc = cap ? cap * 2 : 64;
            entry *t = realloc(ents, nc * sizeof *t);
            if (!t) {
                rc = 1;
                break;
            }
            ents = t;
            cap = nc;
        }
        if (!(ents[n].name = strdup(e->d_name))) {
            rc = 1;
            break;
        }
        ents[n++].is_dir = is_dir;
    }
    closedir(d);
    if (rc) {
        cli_err(err, "%s: out of memory listing the directory", in);
        goto done;
    }
    if (n > 1) qsort(ents, n, sizeof *ents, cmp_entry);
    /* Stems sort together with their channel suffixes ("a_0000.nii.gz" < "a_0001.nrrd"), but
     * "a.nii.gz" and "a_0000.nii.gz" do not sort next to each other: group by case name. */
    int ccap = 0;
    for (size_t i = 0; i < n; i++) {
        const char *name = ents[i].name;
        size_t len = strlen(name);
        const char *ext = ents[i].is_dir ? "" : volume_ext(name);
        size_t stem = len - strlen(ext);
        int ch = ents[i].is_dir ? -1 : channel_of(name, stem);
        size_t clen = ch >= 0 ? stem - 5 : stem;
        fcase *c = NULL;
        for (int k = 0; k < f->n_cases; k++)
            if (strlen(f->cases[k].name) == clen && strncmp(f->cases[k].name, name, clen) == 0)
                c = &f->cases[k];
        if (!c && !(c = case_named(f, name, clen, &ccap))) {
            cli_err(err, "%s: out of memory listing the directory", in);
            rc = 1;
            goto done;
        }
        int slot = ch >= 0 ? ch : 0;
        if (slot >= SEG_MAX_INPUTS) {
            cli_err(c->problem, "%s: channel %d (at most %d channels)", name, ch, SEG_MAX_INPUTS);
            continue;
        }
        if (c->files[slot] || (ch < 0 && c->n_files > 0)) {
            if (!c->problem[0])
                cli_err(c->problem, "two inputs for channel %d: %s and %s", slot,
                        c->files[slot] ? c->files[slot] + strlen(in) + 1 : "another", name);
            continue;
        }
        char path[PATH_MAX];
        snprintf(path, sizeof path, "%s/%s", in, name);
        if (!(c->files[slot] = strdup(path))) {
            cli_err(err, "%s: out of memory listing the directory", in);
            rc = 1;
            goto done;
        }
        if (slot + 1 > c->n_files) c->n_files = slot + 1;
    }
    /* channels must be 0..C-1 */
    for (int k = 0; k < f->n_cases; k++) {
        fcase *c = &f->cases[k];
        for (int s = 0; s < c->n_files && !c->problem[0]; s++)
            if (!c->files[s]) cli_err(c->problem, "channel %d (%s_%04d.*) is missing", s, c->name, s);
    }
    /* cases found in an unsorted order (a.nii.gz after a_0000.nii.gz's group): sort them */
    for (int a = 1; a < f->n_cases; a++)
        for (int b = a; b > 0 && strcmp(f->cases[b - 1].name, f->cases[b].name) > 0; b--) {
            fcase t = f->cases[b];
            f->cases[b] = f->cases[b - 1];
            f->cases[b - 1] = t;
        }
done:
    for (size_t i = 0; i < n; i++) free(ents[i].name);
    free(ents);
    return rc;
}

void print_table(const folder *f, double seconds) {
    int done = 0, failed = 0, skipped = 0, w = 4;
    for (int i = 0; i < f->n_cases; i++)
        if ((int)strlen(f->cases[i].name) > w) w = (int)strlen(f->cases[i].name);
    if (w > 40) w = 40;
    fprintf(stderr, "%-*s  %-14s %8s  %s\n", w, "case", "size", "time", "status");
    for (int i = 0; i < f->n_cases; i++) {
        const fcase *c = &f->cases[i];
        if (c->state == CASE_TODO) continue; /* another part's */
        char size[48] = "-", t[16] = "-";
        if (c->size[0])
            snprintf(size, sizeof size, "%lldx%lldx%lld", (long long)c->size[0], (long long)c->size[1],
                     (long long)c->size[2]);
        if (c->state == CASE_DONE || c->state == CASE_FAILED) snprintf(t, sizeof t, "%.2f s", c->seconds);
        const char *st = c->state == CASE_DONE      ? "ok"
                         : c->state == CASE_SKIPPED ? "skipped (output exists)"
                                                    : "FAILED";
        fprintf(stderr, "%-*.*s  %-14s %8s  %s\n", w, w, c->name, size, t, st);
        done += c->state == CASE_DONE;
        skipped += c->state == CASE_SKIPPED;
        failed += c->state == CASE_FAILED || c->state == CASE_BAD || c->state == CASE_READY;
    }
    fprintf(stderr, "%s: %d done, %d failed, %d skipped in %.2f s -> %s\n", WHO, done, failed, skipped,
            seconds, f->o->output_dir);
}

/* The index of the cases this run saw (another part's are left out). */
int write_index(const folder *f, char *err) {
    const seg_opts *o = f->o;
    seg_index_row *rows = calloc((size_t)f->n_cases + 1, sizeof *rows);
    char(*hrefs)[PATH_MAX] = calloc((size_t)f->n_cases + 1, sizeof *hrefs);
    if (!rows || !hrefs) {
        free(rows), free(hrefs);
        cli_err(err, "%s: out of memory writing the index", o->report_dir);
        return 1;
    }
    int n = 0, classes = 0;
    for (int i = 0; i < f->n_cases; i++) {
        const fcase *c = &f->cases[i];
        if (c->state == CASE_TODO) continue;
        seg_index_row *r = &rows[n++];
        r->name = c->name;
        r->failed = c->state != CASE_DONE && c->state != CASE_SKIPPED;
        r->status = c->state == CASE_DONE      ? "ok"
                    : c->state == CASE_SKIPPED ? "skipped (output exists)"
                                               : "failed";
        r->error = r->failed ? (c->err[0] ? c->err : "failed (see the run's messages)") : NULL;
        r->seconds = c->seconds;
        r->sum = c->sum.ml ? &c->sum : NULL;
        if (c->sum.n_ml > classes) classes = c->sum.n_ml;
        struct stat st;
        char page[PATH_MAX];
        if (!r->failed &&
            snprintf(page, sizeof page, "%s/%s.html", o->report_dir, c->name) < (int)sizeof page &&
            stat(page, &st) == 0) {
            seg_report_href(c->name, ".html", hrefs[i], sizeof hrefs[i]);
            r->href = hrefs[i];
        }
    }
    const char *const *names = NULL;
    const int n_names = swi_job_classes(f->opts_job, &names);
    if (!classes && n_names > 1) classes = n_names - 1;
    char path[PATH_MAX];
    int rc = 0;
    if (o->part_count > 1)
        snprintf(path, sizeof path, "%s/index-part-%d-of-%d.html", o->report_dir, o->part_index,
                 o->part_count);
    else
        snprintf(path, sizeof path, "%s/index.html", o->report_dir);
    rc = seg_report_index(names, n_names, o->input_dir, path, rows, n, classes, err);
    free(rows), free(hrefs);
    return rc;
}
