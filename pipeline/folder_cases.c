/*
 * folder_cases.c -- folder mode's cases (folder_cases.h): the input folder listed (nnU-Net's
 * channel files, DICOM series folders), a case's channels read, and report_dir's index.
 */
#include "folder_cases.h"

#include "internal.h"

#include "util.h"

#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* The suffix of a volume file a folder's case can be (io's classifier: the volumes swi reads,
 * not its write-only DICOM SEG and PNG), or NULL; a bare suffix is no case. */
static const char *volume_ext(const char *name) {
    const swi_volume_format f = swi_volume_format_of(name);
    if (f == SWI_VOLUME_UNKNOWN || f == SWI_VOLUME_DICOM_SEG || f == SWI_VOLUME_PNG) return NULL;
    const char *ext = swi_volume_format_suffix(f);
    return strlen(name) > strlen(ext) ? ext : NULL;
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

void seg_case_free_data(fcase *c) {
    free(c->vols);
    c->vols = NULL;
    free(c->input);
    c->input = NULL;
}

void seg_cases_free(fcase *cases, int n) {
    for (int i = 0; i < n; i++) {
        for (int k = 0; k < cases[i].n_files; k++) free(cases[i].files[k]);
        seg_case_free_data(&cases[i]);
        seg_case_summary_free(&cases[i].sum);
    }
    free(cases);
}

/* What listing fills: the cases and their count. */
typedef struct case_list {
    fcase *cases;
    int n_cases;
} case_list;

/* Find or add the case `name` (cases are added in sorted order, so it is the last one). */
static fcase *case_named(case_list *f, const char *name, size_t len, int *cap) {
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

/* List IN into f's cases. Returns 0, or 1 with err set. */
static int list_into(case_list *f, const char *in, const char *out_real, const char *rep_real, char *err) {
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
        if (snprintf(path, sizeof path, "%s%s%s", in, dir_sep(in), e->d_name) >= (int)sizeof path) continue;
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
        snprintf(path, sizeof path, "%s%s%s", in, dir_sep(in), name);
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

void seg_cases_nnunet(fcase *cases, int n_cases, int channels, const char *ending) {
    for (int k = 0; k < n_cases; k++) {
        fcase *c = &cases[k];
        if (c->problem[0]) continue;
        for (int s = 0; s < c->n_files && !c->problem[0]; s++) {
            char want[300];
            snprintf(want, sizeof want, "/%s_%04d%s", c->name, s, ending);
            const size_t lw = strlen(want), lf = strlen(c->files[s]);
            if (lf < lw || strcmp(c->files[s] + lf - lw, want) != 0)
                cli_err(c->problem, "%s: not nnU-Net's naming of the model's channels (%s_%04d%s, ...)",
                        c->files[s], c->name, s, ending);
        }
        if (c->problem[0]) continue;
        if (c->n_files < channels)
            cli_err(c->problem, "channel %d (%s_%04d%s) is missing: the model takes %d channel%s", c->n_files,
                    c->name, c->n_files, ending, channels, channels == 1 ? "" : "s");
        else if (c->n_files > channels)
            cli_err(c->problem, "%d channels (%s_%04d%s ...), but the model takes %d", c->n_files, c->name,
                    c->n_files - 1, ending, channels);
    }
}

/* The source of a case read in this process. */
static int open_here(void *user, int k, const char *file, swi_volume *v, char *err) {
    (void)user, (void)k;
    return swi_volume_open(file, v, err, SWI_ERRLEN) != SWI_OK;
}

static int read_here(void *user, int k, const char *file, swi_volume *v, float *x, int64_t n, char *err) {
    (void)k, (void)file, (void)n;
    return swi_volume_read(v, x, user, err, SWI_ERRLEN) != SWI_OK;
}

int seg_case_read(const swi_job *job, fcase *c, const seg_case_source *src, const swi_io_cancel *cancel) {
    const seg_case_source here = {open_here, read_here, (void *)cancel};
    if (!src) src = &here;
    seg_case_free_data(c);
    c->vols = calloc((size_t)c->n_files, sizeof *c->vols);
    if (!c->vols) {
        cli_err(c->err, "out of memory");
        return 1;
    }
    for (int k = 0; k < c->n_files; k++) {
        int rc = src->open(src->user, k, c->files[k], &c->vols[k], c->err);
        if (rc) return rc;
        if (k > 0 && pl_same_grid(&c->vols[0], c->files[0], &c->vols[k], c->files[k], c->err)) return 1;
    }
    memcpy(c->size, c->vols[0].size, sizeof c->size);
    const int64_t N = c->size[0] * c->size[1] * c->size[2];
    c->input = malloc((size_t)(N * c->n_files) * sizeof(float));
    if (!c->input) {
        char b[32];
        cli_err(c->err, "%s: out of memory reading the volume (%s)", c->files[0],
                cli_bytes((size_t)(N * c->n_files) * sizeof(float), b));
        return 1;
    }
    for (int k = 0; k < c->n_files; k++) {
        int rc = src->read(src->user, k, c->files[k], &c->vols[k], c->input + k * N, N, c->err);
        if (rc) return rc;
    }
    for (int k = 0; k < c->n_files; k++) swi_job_preprocess(job, c->input + k * N, N);
    return 0;
}

int seg_list_cases(fcase **cases, int *n_cases, const char *in, const char *out_real, const char *rep_real,
                   char *err) {
    case_list f = {*cases, *n_cases};
    int rc = list_into(&f, in, out_real, rep_real, err);
    *cases = f.cases;
    *n_cases = f.n_cases;
    return rc;
}

int seg_cases_index(const fcase *cases, int n_cases, const swi_job *opts_job, const seg_cases_where *o,
                    char *err) {
    seg_index_row *rows = calloc((size_t)n_cases + 1, sizeof *rows);
    char(*hrefs)[PATH_MAX] = calloc((size_t)n_cases + 1, sizeof *hrefs);
    if (!rows || !hrefs) {
        free(rows), free(hrefs);
        cli_err(err, "%s: out of memory writing the index", o->report_dir);
        return 1;
    }
    int n = 0, classes = 0;
    for (int i = 0; i < n_cases; i++) {
        const fcase *c = &cases[i];
        if (c->state == CASE_TODO || !c->mine) continue;
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
            snprintf(page, sizeof page, "%s%s%s.html", o->report_dir, dir_sep(o->report_dir), c->name) <
                (int)sizeof page &&
            stat(page, &st) == 0) {
            seg_report_href(c->name, ".html", hrefs[i], sizeof hrefs[i]);
            r->href = hrefs[i];
        }
    }
    const char *const *names = NULL;
    const int n_names = swi_job_classes(opts_job, &names);
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
