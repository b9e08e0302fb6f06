/*
 * folder_child.c -- folder mode's reader: a thread that reads the next case while the current
 * one runs, each case's volumes read in a child process (swi --read-volumes-child) so that a
 * library that aborts or hangs on one file fails that case only.
 */
#include "folder.h"

#include "signals.h"
#include "util.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;

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
static case_state read_case(const swi_job *job, fcase *c) {
    if (c->problem[0]) {
        snprintf(c->err, sizeof c->err, "%s", c->problem);
        return CASE_BAD;
    }
    case_state apart = read_case_apart(c);
    if (apart == CASE_READY) {
        const int64_t N = c->size[0] * c->size[1] * c->size[2];
        for (int k = 0; k < c->n_files; k++) swi_job_preprocess(job, c->input + k * N, N);
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
        swi_job_preprocess(job, c->input + k * N, N);
    }
    return CASE_READY;
}

void *folder_reader(void *arg) {
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
        case_state st = read_case(f->opts_job, c);
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
