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
    if (n < 1 || n > SWI_JOB_MAX_INPUTS) return 2;
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

/* The child's answers as a case's source (seg_case_read): rr is read_child's stop (1 at the
 * pipe's end, -1 interrupted), at_file the channel it stopped at. */
typedef struct child_source {
    int fd, rr, at_file;
} child_source;

/* The next answer for channel k: 0 with r, 1 (its error into err) or 2 (stopped). */
static int child_answer(child_source *cs, int k, child_record *r, char *err) {
    cs->at_file = k;
    if ((cs->rr = read_child(cs->fd, r, sizeof *r)) != 0) return 2;
    if (r->status == SWI_OK) return 0;
    snprintf(err, SWI_ERRLEN, "%s", r->err);
    return 1;
}

static int child_open(void *user, int k, const char *file, swi_volume *v, char *err) {
    (void)file;
    child_record r;
    int rc = child_answer(user, k, &r, err);
    if (rc == 0) *v = r.v;
    return rc;
}

static int child_read(void *user, int k, const char *file, swi_volume *v, float *x, int64_t n, char *err) {
    (void)file, (void)v;
    child_source *cs = user;
    child_record r;
    int rc = child_answer(cs, k, &r, err);
    if (rc == 0 && (cs->rr = read_child(cs->fd, x, (size_t)n * sizeof *x)) != 0) rc = 2;
    return rc;
}

/* Open, read and preprocess the case's volumes in a child (see the top). CASE_READY,
 * CASE_BAD, or CASE_TODO when no child could be started (then the case is read here). */
static case_state read_case_apart(const swi_job *job, fcase *c) {
    int fds[2];
    FILE *chatter = tmpfile();
    if (!chatter || pipe2(fds, O_CLOEXEC) != 0) {
        if (chatter) fclose(chatter);
        return CASE_TODO;
    }
    char *argv[SWI_JOB_MAX_INPUTS + 3];
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
    child_source cs = {fds[0], 0, 0};
    const seg_case_source src = {child_open, child_read, &cs};
    const int got = seg_case_read(job, c, &src, NULL);
    close(fds[0]);
    if (got != 0) kill(pid, SIGKILL); /* not needed further, or interrupted */
    int ws = 0;
    pid_t w;
    while ((w = waitpid(pid, &ws, 0)) < 0 && errno == EINTR) {}
    const int rr = cs.rr, at_file = cs.at_file;
    if (got == 2) {
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
    return got == 0 ? CASE_READY : CASE_BAD;
}

/* Open, read and preprocess one case (reader thread); the state it ends in. */
static case_state read_case(const swi_job *job, fcase *c) {
    if (c->problem[0]) {
        snprintf(c->err, sizeof c->err, "%s", c->problem);
        return CASE_BAD;
    }
    case_state apart = read_case_apart(job, c);
    if (apart != CASE_TODO) return apart;
    /* no child could be started: read here */
    const swi_io_cancel cancel = {cli_interrupted_cb, NULL};
    return seg_case_read(job, c, NULL, &cancel) == 0 ? CASE_READY : CASE_BAD;
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
