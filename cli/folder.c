/*
 * folder.c -- `swi segment --input-dir IN --output-dir OUT`: every case of a folder, the
 * model loaded once.
 *
 * Cases: each volume file of IN (nnU-Net's CASE_0000.nii.gz, CASE_0001.nii.gz, ... being
 * the channels of CASE) and each subdirectory (a DICOM series), sorted by name; --part I/N
 * keeps every N-th from I. A reader thread opens, reads and preprocesses the next case
 * while the current one runs (one case ahead, so at most two are in memory). Each case
 * runs as a job (swi_pipeline.h) on the shared model; a failure is reported with the case's
 * name and the run goes on. The reader opens and reads each case's volumes in a child
 * process (swi itself, run as `swi --read-volumes-child FILE...`), so that a library that
 * aborts or hangs on one file fails that case only; the voxels come back through a pipe. Outputs that exist are skipped unless --force; an output
 * directory inside IN is left out of the cases, and IN itself is refused as one.
 */
#include "cli.h"

#include "card.h"
#include "job.h"
#include "preprocess.h"
#include "report.h"
#include "signals.h"
#include "swi_pipeline.h"
#include "util.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;

#define WHO "swi segment"

typedef enum case_state { CASE_TODO, CASE_SKIPPED, CASE_READY, CASE_BAD, CASE_DONE, CASE_FAILED } case_state;

typedef struct fcase {
    char name[256];
    char *files[SEG_MAX_INPUTS]; /* channels, in order */
    int n_files;
    char problem[SWI_ERRLEN]; /* a naming problem found while listing, or "" */
    char out[PATH_MAX];
    case_state state;
    /* filled by the reader */
    swi_volume *vols; /* n_files, malloc'd */
    float *input;
    char err[SWI_ERRLEN];
    int64_t size[3];
    double seconds;
    char page[PATH_MAX];  /* --report-dir: its page */
    seg_case_summary sum; /* --report-dir: for the index */
} fcase;

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

typedef struct folder {
    const seg_opts *o;
    const pl_opts *po; /* the options with the model's card (opts_job's) */
    swi_job *opts_job;
    fcase *cases;
    int n_cases;
    int *todo; /* indices of the cases to read, in order */
    int n_todo;
    /* reader thread state */
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int taken; /* cases of todo the main thread has started */
    int stop;
} folder;

static void free_case_data(fcase *c) {
    free(c->vols);
    c->vols = NULL;
    free(c->input);
    c->input = NULL;
}

static void free_folder(folder *f) {
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
static int list_cases(folder *f, const char *in, const char *out_real, const char *rep_real, char *err) {
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

/* One answer of the reader child: a volume opened (v) or read (then its floats follow). */
typedef struct child_record {
    int32_t status;
    char err[SWI_ERRLEN];
    swi_volume v;
} child_record;

static int write_all(int fd, const void *p, size_t len) {
    while (len > 0) {
        ssize_t w = write(fd, p, len > ((size_t)1 << 30) ? (size_t)1 << 30 : len);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) return -1;
        p = (const char *)p + w;
        len -= (size_t)w;
    }
    return 0;
}

int seg_read_volumes_child(int n, char **files) {
    /* every volume opened first (the parent checks they share a grid), then each read */
    if (n < 1 || n > SEG_MAX_INPUTS) return 2;
    child_record *r = calloc((size_t)n, sizeof *r);
    if (!r) return 2;
    int rc = 0, opened = 0;
    for (int k = 0; k < n && rc == 0; k++) {
        r[k].status = (int32_t)swi_volume_open(files[k], &r[k].v, r[k].err, sizeof r[k].err);
        if (write_all(1, &r[k], sizeof r[k]) != 0) rc = 1;
        if (r[k].status != SWI_OK) break;
        opened++;
    }
    for (int k = 0; k < n && rc == 0 && opened == n; k++) {
        const int64_t N = swi_volume_voxels(&r[k].v);
        float *x = malloc((size_t)N * sizeof *x);
        child_record a = {0};
        if (!x) {
            char b[32];
            a.status = SWI_ERR_NOMEM;
            cli_err(a.err, "%s: out of memory reading the volume (%s)", files[k],
                    cli_bytes((size_t)N * sizeof *x, b));
        } else {
            a.status = (int32_t)swi_volume_read(&r[k].v, x, NULL, a.err, sizeof a.err);
        }
        if (write_all(1, &a, sizeof a) != 0 ||
            (a.status == SWI_OK && write_all(1, x, (size_t)N * sizeof *x) != 0))
            rc = 1;
        free(x);
        if (a.status != SWI_OK) break;
    }
    free(r);
    return rc;
}

/* Read len bytes from the child's pipe, watching for an interrupt; 0, 1 at its end, -1 when
 * interrupted. */
static int read_child(int fd, void *p, size_t len) {
    while (len > 0) {
        struct pollfd pf = {fd, POLLIN, 0};
        int pr = poll(&pf, 1, 200);
        if (cli_interrupted()) return -1;
        if (pr < 0 && errno != EINTR) return 1;
        if (pr <= 0) continue;
        ssize_t r = read(fd, p, len > ((size_t)1 << 30) ? (size_t)1 << 30 : len);
        if (r < 0 && (errno == EINTR || errno == EAGAIN)) continue;
        if (r <= 0) return 1;
        p = (char *)p + r;
        len -= (size_t)r;
    }
    return 0;
}

/* The last line the child printed (its stderr went to f), for a message. */
static void child_said(FILE *f, char *line, size_t n) {
    line[0] = '\0';
    if (!f || fseek(f, 0, SEEK_END) != 0) return;
    long end = ftell(f), from = end > 2048 ? end - 2048 : 0;
    char buf[2049];
    if (end <= 0 || fseek(f, from, SEEK_SET) != 0) return;
    size_t got = fread(buf, 1, (size_t)(end - from), f);
    buf[got] = '\0';
    while (got > 0 && (buf[got - 1] == '\n' || buf[got - 1] == ' ')) buf[--got] = '\0';
    const char *nl = strrchr(buf, '\n');
    snprintf(line, n, "%.300s", nl ? nl + 1 : buf);
}

/* Open and read the case's volumes in a child (see the top). CASE_READY, CASE_BAD, or
 * CASE_TODO when no child could be started (then the case is read here). */
static case_state read_case_apart(fcase *c) {
    int fds[2];
    FILE *chatter = tmpfile();
    if (!chatter || pipe2(fds, O_CLOEXEC) != 0) {
        if (chatter) fclose(chatter);
        return CASE_TODO;
    }
    char *argv[SEG_MAX_INPUTS + 3];
    argv[0] = "swi";
    argv[1] = "--read-volumes-child";
    for (int k = 0; k < c->n_files; k++) argv[2 + k] = c->files[k];
    argv[2 + c->n_files] = NULL;
    posix_spawn_file_actions_t fa;
    posix_spawnattr_t at;
    sigset_t none, dflt;
    sigemptyset(&none);
    sigemptyset(&dflt);
    sigaddset(&dflt, SIGINT);
    sigaddset(&dflt, SIGTERM);
    sigaddset(&dflt, SIGHUP);
    sigaddset(&dflt, SIGPIPE);
    pid_t pid = -1;
    int ok = posix_spawn_file_actions_init(&fa) == 0;
    if (ok && posix_spawnattr_init(&at) == 0) {
        if (posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0) == 0 &&
            posix_spawn_file_actions_adddup2(&fa, fds[1], 1) == 0 &&
            posix_spawn_file_actions_adddup2(&fa, fileno(chatter), 2) == 0 &&
            posix_spawnattr_setsigmask(&at, &none) == 0 && posix_spawnattr_setsigdefault(&at, &dflt) == 0 &&
            posix_spawnattr_setflags(&at, POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF) == 0 &&
            posix_spawn(&pid, "/proc/self/exe", &fa, &at, argv, environ) != 0)
            pid = -1;
        posix_spawnattr_destroy(&at);
    }
    if (ok) posix_spawn_file_actions_destroy(&fa);
    close(fds[1]);
    if (pid < 0) {
        close(fds[0]);
        fclose(chatter);
        return CASE_TODO;
    }
    case_state st = CASE_READY;
    int at_file = 0, rr = 0;
    child_record r;
    c->vols = calloc((size_t)c->n_files, sizeof *c->vols);
    if (!c->vols) {
        cli_err(c->err, "out of memory");
        st = CASE_BAD;
    }
    for (int k = 0; k < c->n_files && st == CASE_READY; k++) {
        at_file = k;
        if ((rr = read_child(fds[0], &r, sizeof r)) != 0) break;
        if (r.status != SWI_OK) {
            snprintf(c->err, sizeof c->err, "%s", r.err);
            st = CASE_BAD;
            break;
        }
        c->vols[k] = r.v;
        const int64_t *a = c->vols[0].size, *b = c->vols[k].size;
        if (a[0] != b[0] || a[1] != b[1] || a[2] != b[2]) {
            cli_err(c->err,
                    "%s: size %lldx%lldx%lld differs from %s's %lldx%lldx%lld; "
                    "channels must share one grid",
                    c->files[k], (long long)b[0], (long long)b[1], (long long)b[2], c->files[0],
                    (long long)a[0], (long long)a[1], (long long)a[2]);
            st = CASE_BAD;
        }
    }
    const int64_t N = c->vols && rr == 0 && st == CASE_READY ? swi_volume_voxels(&c->vols[0]) : 0;
    if (rr == 0 && st == CASE_READY) {
        memcpy(c->size, c->vols[0].size, sizeof c->size);
        if (!(c->input = malloc((size_t)(N * c->n_files) * sizeof(float)))) {
            char b[32];
            cli_err(c->err, "%s: out of memory reading the volume (%s)", c->files[0],
                    cli_bytes((size_t)(N * c->n_files) * sizeof(float), b));
            st = CASE_BAD;
        }
    }
    for (int k = 0; k < c->n_files && rr == 0 && st == CASE_READY; k++) {
        at_file = k;
        if ((rr = read_child(fds[0], &r, sizeof r)) != 0) break;
        if (r.status != SWI_OK) {
            snprintf(c->err, sizeof c->err, "%s", r.err);
            st = CASE_BAD;
            break;
        }
        if ((rr = read_child(fds[0], c->input + k * N, (size_t)N * sizeof(float))) != 0) break;
    }
    close(fds[0]);
    if (rr != 0 || st != CASE_READY) kill(pid, SIGKILL); /* not needed further, or interrupted */
    int ws = 0;
    pid_t w;
    while ((w = waitpid(pid, &ws, 0)) < 0 && errno == EINTR) {}
    if (rr != 0 && st == CASE_READY) {
        st = CASE_BAD;
        char said[320];
        child_said(chatter, said, sizeof said);
        if (rr < 0)
            cli_err(c->err, "interrupted");
        else if (w == pid && WIFSIGNALED(ws))
            cli_err(c->err, "%s: reading it killed the reader (%s)%s%s", c->files[at_file],
                    strsignal(WTERMSIG(ws)), said[0] ? ": " : "", said);
        else
            cli_err(c->err, "%s: the reader stopped without an answer%s%s", c->files[at_file],
                    said[0] ? ": " : "", said);
    }
    fclose(chatter);
    return st;
}

/* Open, read and preprocess one case (reader thread); the state it ends in. */
static case_state read_case(const pl_opts *o, fcase *c) {
    if (c->problem[0]) {
        snprintf(c->err, sizeof c->err, "%s", c->problem);
        return CASE_BAD;
    }
    case_state apart = read_case_apart(c);
    if (apart == CASE_READY) {
        const int64_t N = c->size[0] * c->size[1] * c->size[2];
        for (int k = 0; k < c->n_files; k++) seg_preprocess(o, c->input + k * N, N);
        return CASE_READY;
    }
    if (apart != CASE_TODO) return apart;
    free_case_data(c); /* no child could be started: read here */
    c->vols = calloc((size_t)c->n_files, sizeof *c->vols);
    if (!c->vols) {
        cli_err(c->err, "out of memory");
        return CASE_BAD;
    }
    for (int k = 0; k < c->n_files; k++) {
        if (swi_volume_open(c->files[k], &c->vols[k], c->err, SWI_ERRLEN)) {
            return CASE_BAD;
        }
        const int64_t *a = c->vols[0].size, *b = c->vols[k].size;
        if (a[0] != b[0] || a[1] != b[1] || a[2] != b[2]) {
            cli_err(c->err,
                    "%s: size %lldx%lldx%lld differs from %s's %lldx%lldx%lld; "
                    "channels must share one grid",
                    c->files[k], (long long)b[0], (long long)b[1], (long long)b[2], c->files[0],
                    (long long)a[0], (long long)a[1], (long long)a[2]);
            return CASE_BAD;
        }
    }
    memcpy(c->size, c->vols[0].size, sizeof c->size);
    const int64_t N = c->size[0] * c->size[1] * c->size[2];
    c->input = malloc((size_t)(N * c->n_files) * sizeof(float));
    if (!c->input) {
        char b[32];
        cli_err(c->err, "%s: out of memory reading the volume (%s)", c->files[0],
                cli_bytes((size_t)(N * c->n_files) * sizeof(float), b));
        return CASE_BAD;
    }
    const swi_io_cancel cancel = {cli_interrupted_cb, NULL};
    for (int k = 0; k < c->n_files; k++) {
        if (swi_volume_read(&c->vols[k], c->input + k * N, &cancel, c->err, SWI_ERRLEN)) {
            return CASE_BAD;
        }
        seg_preprocess(o, c->input + k * N, N);
    }
    return CASE_READY;
}

static void *reader(void *arg) {
    folder *f = arg;
    for (int t = 0; t < f->n_todo; t++) {
        pthread_mutex_lock(&f->mu);
        /* one case ahead of the one running, no more */
        while (!f->stop && t > f->taken) pthread_cond_wait(&f->cv, &f->mu);
        int stop = f->stop;
        pthread_mutex_unlock(&f->mu);
        if (stop || cli_interrupted()) break;
        fcase *c = &f->cases[f->todo[t]];
        double t0 = cli_now();
        case_state st = read_case(f->po, c);
        pthread_mutex_lock(&f->mu);
        c->seconds = cli_now() - t0;
        c->state = st;
        pthread_cond_broadcast(&f->cv);
        pthread_mutex_unlock(&f->mu);
    }
    pthread_mutex_lock(&f->mu);
    f->stop = 1; /* nothing more will come: a waiting main thread must not wait forever */
    pthread_cond_broadcast(&f->cv);
    pthread_mutex_unlock(&f->mu);
    return NULL;
}

static void print_table(const folder *f, double seconds) {
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

/* Make dir (the folder of `flag`, holding `what`) if missing, as another part or rank may
 * at the same moment; refuse anything else than a directory; its real path into real.
 * Returns 0, or 1 with err set. */
static int make_dir(const char *dir, const char *flag, const char *what, char real[PATH_MAX], char *err) {
    struct stat st;
    if (stat(dir, &st) != 0) {
        if (mkdir(dir, 0777) != 0) {
            const int e = errno;
            if (!(e == EEXIST && stat(dir, &st) == 0 && S_ISDIR(st.st_mode))) {
                cli_err(err, "%s: cannot make the %s directory: %s", dir, what, strerror(e));
                return 1;
            }
        }
    } else if (!S_ISDIR(st.st_mode)) {
        cli_err(err, "%s: not a directory (%s)", dir, flag);
        return 1;
    }
    if (!realpath(dir, real)) {
        cli_err(err, "%s: %s", dir, strerror(errno));
        return 1;
    }
    return 0;
}

/* Make the --report-dir folder if missing; its real path into real ("" without one).
 * Returns 0, or 1 with err set. */
static int report_dir(const seg_opts *o, const char *real_in, char real[PATH_MAX], char *err) {
    real[0] = '\0';
    if (!o->report_dir) return 0;
    if (make_dir(o->report_dir, "--report-dir", "report", real, err)) return 1;
    if (strcmp(real, real_in) == 0) {
        cli_err(err, "--report-dir %s is the input directory; give another (a subdirectory is fine)",
                o->report_dir);
        return 1;
    }
    return 0;
}

/* The index of the cases this run saw (another part's are left out). */
static int write_index(const folder *f, char *err) {
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
    if (!classes && f->po->card && f->po->card->n_classes > 1) classes = f->po->card->n_classes - 1;
    char path[PATH_MAX];
    int rc = 0;
    if (o->part_count > 1)
        snprintf(path, sizeof path, "%s/index-part-%d-of-%d.html", o->report_dir, o->part_index,
                 o->part_count);
    else
        snprintf(path, sizeof path, "%s/index.html", o->report_dir);
    rc = seg_report_index(f->po, o->input_dir, path, rows, n, classes, err);
    free(rows), free(hrefs);
    return rc;
}

/* Make OUT if missing; its real path into real. Returns 0, or 1/2 with err set. */
static int output_dir(const seg_opts *o, char real_in[PATH_MAX], char real_out[PATH_MAX], char *err) {
    struct stat st;
    if (stat(o->input_dir, &st) != 0 || !S_ISDIR(st.st_mode)) {
        cli_err(err, "%s: %s", o->input_dir,
                stat(o->input_dir, &st) != 0 ? strerror(errno) : "not a directory (--input-dir)");
        return 1;
    }
    if (!realpath(o->input_dir, real_in)) {
        cli_err(err, "%s: %s", o->input_dir, strerror(errno));
        return 1;
    }
    if (make_dir(o->output_dir, "--output-dir", "output", real_out, err)) return 1;
    if (strcmp(real_in, real_out) == 0) {
        cli_err(err,
                "--output-dir %s is the input directory: its outputs would be read as "
                "inputs next time; give another (a subdirectory is fine)",
                o->output_dir);
        return 2;
    }
    return 0;
}

static int folder_fail(const char *who, const char *msg) {
    fprintf(stderr, "%s: %s\n", who, msg);
    return 1;
}

int seg_folder_run(const seg_opts *o) {
    char err[SWI_ERRLEN], real_in[PATH_MAX], real_out[PATH_MAX], real_rep[PATH_MAX];
    double t0 = cli_now();
    if (cli_signals_start() != 0) /* before the reader thread: it inherits the mask */
        return folder_fail(WHO, "cannot set up signal handling");
    /* pages that cannot be written (no NiiVue) are refused before anything is made */
    if (o->report_dir && seg_report_check(o->report_dir, err)) return folder_fail(WHO, err);
    int rc = output_dir(o, real_in, real_out, err);
    if (rc) {
        fprintf(stderr, "%s: %s%s\n", WHO, err, rc == 2 ? " (see 'swi segment --help')" : "");
        return rc;
    }
    if (report_dir(o, real_in, real_rep, err)) return folder_fail(WHO, err);
    folder f;
    memset(&f, 0, sizeof f);
    f.o = o;
    /* the options as every case runs them, with the model's card: a job on no case yet */
    swi_job_spec spec;
    seg_job_spec(o, &spec);
    spec.inputs[spec.n_inputs++] = o->input_dir;
    swi_job *opts_job = NULL;
    swi_status jst = swi_job_open(&spec, NULL, &opts_job, err, sizeof err);
    if (jst != SWI_OK) return seg_job_exit(WHO, jst, err);
    f.opts_job = opts_job;
    f.po = job_opts(opts_job);
    if (list_cases(&f, o->input_dir, real_out, real_rep, err)) {
        free_folder(&f);
        return folder_fail(WHO, err);
    }
    f.todo = malloc((size_t)(f.n_cases + 1) * sizeof *f.todo);
    if (!f.todo) {
        free_folder(&f);
        return folder_fail(WHO, "out of memory");
    }
    for (int i = 0; i < f.n_cases; i++) {
        fcase *c = &f.cases[i];
        if (i % o->part_count != o->part_index) continue;
        if (snprintf(c->out, sizeof c->out, "%s/%s.%s", o->output_dir, c->name, o->output_format) >=
            (int)sizeof c->out) {
            cli_err(c->problem, "%s: output path too long", c->name);
        }
        struct stat st;
        if (!o->force && !c->problem[0] && lstat(c->out, &st) == 0) {
            c->state = CASE_SKIPPED;
            continue;
        }
        f.todo[f.n_todo++] = i;
    }
    if (f.n_cases == 0) {
        free_folder(&f);
        cli_err(err,
                "%s: no cases (volume files .nii, .nii.gz, .nrrd, .nhdr, .mha, .mhd or "
                "DICOM series directories)",
                o->input_dir);
        return folder_fail(WHO, err);
    }
    pthread_mutex_init(&f.mu, NULL);
    pthread_cond_init(&f.cv, NULL);
    pthread_t th;
    int have_thread = f.n_todo > 0 && pthread_create(&th, NULL, reader, &f) == 0;
    if (f.n_todo > 0 && !have_thread) {
        pthread_mutex_destroy(&f.mu);
        pthread_cond_destroy(&f.cv);
        free_folder(&f);
        return folder_fail(WHO, "cannot start the reader thread");
    }

    swi_ort_model *model = NULL;
    int failed = 0, interrupted = 0;
    for (int t = 0; t < f.n_todo; t++) {
        fcase *c = &f.cases[f.todo[t]];
        pthread_mutex_lock(&f.mu);
        f.taken = t; /* the reader may now read case t (and t + 1 once we start) */
        pthread_cond_broadcast(&f.cv);
        while (c->state == CASE_TODO && !f.stop) pthread_cond_wait(&f.cv, &f.mu);
        f.taken = t + 1;
        pthread_cond_broadcast(&f.cv);
        pthread_mutex_unlock(&f.mu);
        if (cli_interrupted()) {
            interrupted = 1;
            break;
        }
        char who[320];
        snprintf(who, sizeof who, "%s: %s", WHO, c->name);
        if (c->state != CASE_READY) {
            fprintf(stderr, "%s: %s\n", who, c->state == CASE_TODO ? "not read" : c->err);
            c->state = CASE_FAILED;
            failed++;
            free_case_data(c);
            continue;
        }
        seg_opts oc = *o;
        oc.input_dir = NULL;
        oc.n_inputs = c->n_files;
        for (int k = 0; k < c->n_files; k++) oc.inputs[k] = c->files[k];
        oc.output = c->out;
        if (o->report_dir) {
            if (snprintf(c->page, sizeof c->page, "%s/%s.html", o->report_dir, c->name) >=
                (int)sizeof c->page) {
                cli_err(c->err, "%s: report path too long", c->name);
                fprintf(stderr, "%s: %s\n", who, c->err);
                c->state = CASE_FAILED;
                failed++;
                free_case_data(c);
                continue;
            }
            oc.report = c->page;
            oc.report_title = c->name;
            oc.report_dir = NULL;
        }
        char label[320];
        snprintf(label, sizeof label, "[%d/%d] %s", t + 1, f.n_todo, c->name);
        oc.progress_label = label;
        oc.no_summary = 1;
        double t1 = cli_now();
        seg_job_spec(&oc, &spec);
        seg_hooks h;
        swi_job_hooks hooks;
        seg_hooks_init(&h, &oc, who, &hooks);
        swi_job *job = NULL;
        char jerr[SWI_JOB_ERRLEN];
        jst = swi_job_open(&spec, &hooks, &job, jerr, sizeof jerr);
        seg_result keep;
        memset(&keep, 0, sizeof keep);
        int r;
        if (jst != SWI_OK) {
            r = seg_job_exit(who, jst, jerr);
            snprintf(c->err, sizeof c->err, "%s", jerr);
        } else {
            /* the case as the reader left it, on the model opened once */
            seg_state *s = job_state_mut(job);
            memcpy(s->vols, c->vols, (size_t)c->n_files * sizeof *c->vols);
            s->vols_ready = 1;
            s->input = c->input; /* the job frees it */
            c->input = NULL;
            s->model = model;
            s->model_borrowed = 1;
            r = seg_run_job(job, who, &h, o->report_dir ? &keep : NULL, jerr);
            if (r != 0) snprintf(c->err, sizeof c->err, "%s", jerr);
            /* the index's volumes and thumbnail, while the case's image is still held */
            pl_result pr = {
                keep.labels, keep.label_bytes, {keep.size[0], keep.size[1], keep.size[2]}, keep.classes};
            if (r == 0 && keep.labels && seg_case_summarize(s, &pr, &c->sum, c->err))
                fprintf(stderr, "%s: %s\n", who, c->err);
            model = s->model; /* opened by the first case that got that far */
        }
        c->seconds += cli_now() - t1;
        free(keep.labels);
        swi_job_free(job);
        free_case_data(c);
        if (cli_interrupted()) {
            interrupted = 1;
            c->state = CASE_FAILED;
            break;
        }
        c->state = r == 0 ? CASE_DONE : CASE_FAILED;
        failed += r != 0;
        if (!o->quiet)
            fprintf(stderr, "%s: [%d/%d] %s: %s, %.2f s\n", WHO, t + 1, f.n_todo, c->name,
                    r == 0 ? "done" : "failed", c->seconds);
    }
    if (have_thread) {
        pthread_mutex_lock(&f.mu);
        f.stop = 1;
        pthread_cond_broadcast(&f.cv);
        pthread_mutex_unlock(&f.mu);
        pthread_join(th, NULL);
    }
    swi_ort_close(model);
    if (!o->quiet || failed) print_table(&f, cli_now() - t0);
    if (o->report_dir && !interrupted && write_index(&f, err)) {
        fprintf(stderr, "%s: %s\n", WHO, err);
        failed++;
    }
    pthread_mutex_destroy(&f.mu);
    pthread_cond_destroy(&f.cv);
    free_folder(&f);
    if (interrupted) {
        fprintf(stderr, "%s: interrupted; the finished cases are kept, no partial output\n", WHO);
        return cli_interrupt_status();
    }
    return failed ? 1 : 0;
}
