/*
 * folder_reader.c -- folder mode's reading (folder_cases.h): a thread that reads the next case
 * while the current one runs, each case's volumes opened and read in the caller's reader
 * program when the spec names one (a child process answering through
 * swi_folder_serve_reader), so that a file library that aborts or hangs on one file fails
 * that case only; without one, or when it cannot be started, in the thread itself.
 */
#include "folder_cases.h"
#include "swi_io.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

extern char **environ;

/* One answer of the reader: a volume opened (v) or read (then its floats follow). */
typedef struct child_record {
    int32_t status;
    char err[SWI_ERRLEN];
    swi_volume v;
} child_record;

/* The reader's first words: records of this layout follow (a reader of another build, or a
 * program that is none, answers something else). */
#define READER_MAGIC (0x5357495244525631ull ^ (uint64_t)sizeof(child_record))

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

swi_status swi_folder_serve_reader(int fd, int n, const char *const *files) {
    /* every volume opened first (the parent checks they share a grid), then each read */
    if (n < 1 || n > SWI_JOB_MAX_INPUTS || !files) return SWI_ERR_INVALID_ARG;
    child_record *r = calloc((size_t)n, sizeof *r);
    if (!r) return SWI_ERR_NOMEM;
    const uint64_t magic = READER_MAGIC;
    swi_status rc = write_all(fd, &magic, sizeof magic) ? SWI_ERR_IO : SWI_OK;
    int opened = 0;
    for (int k = 0; k < n && rc == SWI_OK; k++) {
        r[k].status = (int32_t)swi_volume_open(files[k], &r[k].v, r[k].err, sizeof r[k].err);
        if (write_all(fd, &r[k], sizeof r[k]) != 0) rc = SWI_ERR_IO;
        if (r[k].status != SWI_OK) break;
        opened++;
    }
    for (int k = 0; k < n && rc == SWI_OK && opened == n; k++) {
        const int64_t N = swi_volume_voxels(&r[k].v);
        float *x = malloc((size_t)N * sizeof *x);
        child_record a;
        memset(&a, 0, sizeof a);
        if (!x) {
            char b[32];
            a.status = SWI_ERR_NOMEM;
            cli_err(a.err, "%s: out of memory reading the volume (%s)", files[k],
                    cli_bytes((size_t)N * sizeof *x, b));
        } else {
            a.status = (int32_t)swi_volume_read(&r[k].v, x, NULL, a.err, sizeof a.err);
        }
        if (write_all(fd, &a, sizeof a) != 0 ||
            (a.status == SWI_OK && write_all(fd, x, (size_t)N * sizeof *x) != 0))
            rc = SWI_ERR_IO;
        free(x);
        if (a.status != SWI_OK) break;
    }
    free(r);
    return rc;
}

/* Read len bytes from the reader's pipe, watching for cancellation; 0, 1 at its end, -1
 * when cancelled. */
static int read_child(swi_folder *f, int fd, void *p, size_t len) {
    while (len > 0) {
        struct pollfd pf = {fd, POLLIN, 0};
        int pr = poll(&pf, 1, 200);
        if (folder_cancelled(f)) return -1;
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

/* The last line the reader printed (its stderr went to fp), for a message. */
static void child_said(FILE *fp, char *line, size_t n) {
    line[0] = '\0';
    if (!fp || fseek(fp, 0, SEEK_END) != 0) return;
    long end = ftell(fp), from = end > 2048 ? end - 2048 : 0;
    char buf[2049];
    if (end <= 0 || fseek(fp, from, SEEK_SET) != 0) return;
    size_t got = fread(buf, 1, (size_t)(end - from), fp);
    buf[got] = '\0';
    while (got > 0 && (buf[got - 1] == '\n' || buf[got - 1] == ' ')) buf[--got] = '\0';
    const char *nl = strrchr(buf, '\n');
    snprintf(line, n, "%.300s", nl ? nl + 1 : buf);
}

/* The reader's answers as a case's source (seg_case_read): rr is read_child's stop (1 at the
 * pipe's end, -1 cancelled), at_file the channel it stopped at. */
typedef struct child_source {
    swi_folder *f;
    int fd, rr, at_file;
} child_source;

/* The next answer for channel k: 0 with r, 1 (its error into err) or 2 (stopped). */
static int child_answer(child_source *cs, int k, child_record *r, char *err) {
    cs->at_file = k;
    if ((cs->rr = read_child(cs->f, cs->fd, r, sizeof *r)) != 0) return 2;
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
    if (rc == 0 && (cs->rr = read_child(cs->f, cs->fd, x, (size_t)n * sizeof *x)) != 0) rc = 2;
    return rc;
}

/* Start the reader on c's files, its stdout the pipe's end wfd and its stderr chatter; the
 * child's pid, or -1. It starts with no signal blocked and the stopping ones at their
 * defaults, whatever this process does with them. */
static pid_t spawn_reader(const swi_folder_spec *sp, const fcase *c, int wfd, FILE *chatter) {
    int n_args = 0;
    while (sp->reader_argv && sp->reader_argv[n_args]) n_args++;
    char **argv = calloc((size_t)(n_args + c->n_files + 2), sizeof *argv);
    if (!argv) return -1;
    int a = 0;
    if (n_args == 0) argv[a++] = (char *)sp->reader;
    for (int i = 0; i < n_args; i++) argv[a++] = (char *)sp->reader_argv[i];
    for (int k = 0; k < c->n_files; k++) argv[a++] = c->files[k];
    argv[a] = NULL;
    posix_spawn_file_actions_t fa;
    posix_spawnattr_t at;
    pid_t pid = -1;
    int ok = posix_spawn_file_actions_init(&fa) == 0;
    if (ok && swi_child_spawnattr_init(&at, 0) == 0) {
        if (posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0) == 0 &&
            posix_spawn_file_actions_adddup2(&fa, wfd, 1) == 0 &&
            posix_spawn_file_actions_adddup2(&fa, fileno(chatter), 2) == 0 &&
            posix_spawn(&pid, sp->reader, &fa, &at, argv, environ) != 0)
            pid = -1;
        posix_spawnattr_destroy(&at);
    }
    if (ok) posix_spawn_file_actions_destroy(&fa);
    free(argv);
    /* a forced stop of the program ends it (swi_io.h); untracked, the graceful one does */
    if (pid > 0) (void)swi_child_track(pid, 0);
    return pid;
}

/* Wait for the reader to end, killing it first when `kill_it` (not needed further, or
 * cancelled); one that closed its pipe is given a second to exit by itself, so that its
 * status says what happened to it. The waited pid (-1 on failure), its status in *ws. */
static pid_t end_reader(pid_t pid, int kill_it, int *ws) {
    int ended = 0;
    for (int i = 0; i < 100 && !kill_it && !ended; i++) {
        siginfo_t si;
        memset(&si, 0, sizeof si);
        /* not reaped here: child_reap untracks it first */
        if (waitid(P_PID, (id_t)pid, &si, WEXITED | WNOHANG | WNOWAIT) != 0 && errno != EINTR) break;
        ended = si.si_pid == pid;
        const struct timespec ms10 = {0, 10 * 1000 * 1000};
        if (!ended) nanosleep(&ms10, NULL);
    }
    if (!ended) kill(pid, SIGKILL);
    return swi_child_reap(pid, ws);
}

/* Open, read and preprocess the case's volumes in the reader (see the top). CASE_READY,
 * CASE_BAD, or CASE_TODO when it could not be started (then the case is read here). */
static case_state read_case_apart(swi_folder *f, fcase *c) {
    int fds[2];
    FILE *chatter = tmpfile();
    if (!chatter || pipe2(fds, O_CLOEXEC) != 0) {
        if (chatter) fclose(chatter);
        return CASE_TODO;
    }
    const pid_t pid = spawn_reader(&f->spec, c, fds[1], chatter);
    close(fds[1]);
    if (pid < 0) {
        close(fds[0]);
        fclose(chatter);
        return CASE_TODO;
    }
    child_source cs = {f, fds[0], 0, 0};
    uint64_t magic = 0;
    int got = 2;
    if ((cs.rr = read_child(f, fds[0], &magic, sizeof magic)) == 0) {
        const seg_case_source src = {child_open, child_read, &cs};
        got = magic == READER_MAGIC ? seg_case_read(f->opts_job, c, &src, NULL) : 3;
    }
    close(fds[0]);
    int ws = 0;
    const pid_t w = end_reader(pid, got != 0 && cs.rr != 1, &ws);
    if (got != 0) c->err_status = cs.rr < 0 ? SWI_ERR_CANCELLED : SWI_ERR_IO;
    if (got == 3) {
        cli_err(c->err, "%s: the reader %s answered as no reader of this library (swi_folder_serve_reader)",
                c->files[0], f->spec.reader);
    } else if (got == 2) {
        char said[320];
        child_said(chatter, said, sizeof said);
        const char *file = c->files[cs.at_file];
        if (cs.rr < 0)
            cli_err(c->err, "interrupted");
        else if (w == pid && WIFSIGNALED(ws))
            cli_err(c->err, "%s: reading it killed the reader (%s)%s%s", file, strsignal(WTERMSIG(ws)),
                    said[0] ? ": " : "", said);
        else
            cli_err(c->err, "%s: the reader stopped without an answer%s%s", file, said[0] ? ": " : "", said);
    }
    fclose(chatter);
    return got == 0 ? CASE_READY : CASE_BAD;
}

/* Open, read and preprocess one case (reading thread); the state it ends in. */
static case_state read_case(swi_folder *f, fcase *c) {
    if (c->problem[0]) {
        snprintf(c->err, sizeof c->err, "%s", c->problem);
        c->err_status = SWI_ERR_IO;
        return CASE_BAD;
    }
    if (f->spec.reader) {
        case_state apart = read_case_apart(f, c);
        if (apart != CASE_TODO) return apart;
    }
    /* no reader, or it could not be started: read here */
    const swi_io_cancel cancel = {folder_cancelled_cb, f};
    if (seg_case_read(f->opts_job, c, NULL, &cancel) == 0) return CASE_READY;
    c->err_status = folder_cancelled(f) ? SWI_ERR_CANCELLED : SWI_ERR_IO;
    return CASE_BAD;
}

void *folder_reader(void *arg) {
    swi_folder *f = arg;
    for (int t = 0; t < f->n_todo; t++) {
        pthread_mutex_lock(&f->mu);
        /* one case ahead of the one running, no more */
        while (!f->stop && !f->cancel && t > f->taken) pthread_cond_wait(&f->cv, &f->mu);
        int stop = f->stop || f->cancel;
        pthread_mutex_unlock(&f->mu);
        if (stop || folder_cancelled(f)) break;
        fcase *c = &f->cases[f->todo[t]];
        double t0 = cli_now();
        case_state st = read_case(f, c);
        pthread_mutex_lock(&f->mu);
        c->seconds = cli_now() - t0;
        c->state = st;
        pthread_cond_broadcast(&f->cv);
        pthread_mutex_unlock(&f->mu);
    }
    pthread_mutex_lock(&f->mu);
    f->stop = 1; /* nothing more will come: a waiting run must not wait forever */
    pthread_cond_broadcast(&f->cv);
    pthread_mutex_unlock(&f->mu);
    return NULL;
}
