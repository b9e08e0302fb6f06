/* dicom_series.c -- a directory holding one DICOM series as a volume: the files' headers
 * (screened by DCMTK in dicom_screen.cxx, then read through GDCM in itk_io.cxx), the series
 * assembled and checked (dicom_assemble.c), the slices read one by one into the volume's
 * [i][j][k] layout. GDCM and its codecs may still abort on a file, and print to stderr:
 * they run in a child process, its stderr kept in a file, its death reported as a message
 * naming the file it was reading. They may also never return: the
 * child reports each file it has read, and one that makes no progress for
 * SWI_DICOM_STALL_SECONDS (60 s unless set), or a cancel, ends it (SIGKILL); it also dies
 * with the thread that made it, so no reader outlives a process that was stopped. */
#include "io_internal.h"
#include "swi_io.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#ifdef __linux__
#include <sys/prctl.h>
#endif
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static int has_dicm(const char *path) {
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
    if (fd < 0) return 0;
    unsigned char b[132];
    ssize_t got = pread(fd, b, sizeof b, 0);
    close(fd);
    return got == (ssize_t)sizeof b && memcmp(b + 128, "DICM", 4) == 0;
}

int io__is_dicom_file(const char *path) {
    struct stat sb;
    return stat(path, &sb) == 0 && S_ISREG(sb.st_mode) && has_dicm(path);
}

static int cmp_name(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

typedef struct series {
    io_slice *s;
    int64_t count;
} series;

static void series_free(series *se) {
    for (int64_t x = 0; x < se->count; x++) free(se->s[x].file);
    free(se->s);
    se->s = NULL;
    se->count = 0;
}

/* What the child reports, in memory shared with it. */
typedef struct child_report {
    swi_status st;
    int done;   /* set by the child when it returns normally */
    int64_t at; /* index of the file being read */
    char err[1024];
} child_report;

static void *shared_alloc(size_t bytes) {
    void *p = mmap(NULL, bytes ? bytes : 1, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    return p == MAP_FAILED ? NULL : p;
}

/* The last nonempty line the child printed, for a message (empty when none). */
static void last_line(FILE *f, char *line, size_t n) {
    line[0] = '\0';
    if (!f || fflush(f) != 0 || fseek(f, 0, SEEK_END) != 0) return;
    long end = ftell(f), from = end > 4096 ? end - 4096 : 0;
    char buf[4097];
    if (end <= 0 || fseek(f, from, SEEK_SET) != 0) return;
    size_t got = fread(buf, 1, (size_t)(end - from), f);
    buf[got] = '\0';
    while (got > 0 && (buf[got - 1] == '\n' || buf[got - 1] == '\r' || buf[got - 1] == ' '))
        buf[--got] = '\0';
    char *nl = strrchr(buf, '\n');
    snprintf(line, n, "%.300s", nl ? nl + 1 : buf);
}

/* The parent's side of a running child: its socket, and what ends a wait besides an answer
 * (a cancel; no progress for stall_s seconds, blamed on files[rep->at]). */
typedef struct child_wait {
    int sock;
    const swi_io_cancel *cancel;
    double stall_s;
    const child_report *rep;
    const io_slice *files;
    int64_t count;
    const char *dir;
} child_wait;

typedef swi_status (*child_fn)(void *ctx, int sock, child_report *rep);
typedef swi_status (*parent_fn)(void *ctx, const child_wait *w, char *err, size_t n);

static double now_s(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

/* How long the reader may go without finishing a file: SWI_DICOM_STALL_SECONDS, else 60 s. */
static double stall_seconds(void) {
    const char *e = getenv("SWI_DICOM_STALL_SECONDS");
    char *end = NULL;
    double s = e ? strtod(e, &end) : 0;
    return e && end != e && *end == '\0' && s > 0 && s < 1e7 ? s : 60;
}

/* Until the child says something (or hangs up: SWI_OK, the read sees it), watching for a
 * cancel and for a child that makes no progress. */
static swi_status child_wait_input(const child_wait *w, char *err, size_t n) {
    const double start = now_s();
    struct pollfd pf = {w->sock, POLLIN, 0};
    for (;;) {
        int pr = poll(&pf, 1, 200);
        if (pr > 0) return SWI_OK;
        if (pr < 0 && errno != EINTR) return SWI_OK; /* the read fails, the child's report tells */
        if (io__cancelled(w->cancel)) {
            io__err(err, n, "interrupted");
            return SWI_ERR_CANCELLED;
        }
        if (now_s() - start >= w->stall_s) {
            int64_t at = *(const volatile int64_t *)&w->rep->at; /* the child's, as it is now */
            io__err(err, n, "%s: the DICOM reader made no progress for %g s; refused",
                    at >= 0 && at < w->count ? w->files[at].file : w->dir, w->stall_s);
            return SWI_ERR_INVALID_ARG;
        }
    }
}

static int recv_all(int sock, void *p, size_t len);

/* The header phase's parent: the child sends the index of each file it has read. */
static swi_status take_progress(void *ctx, const child_wait *w, char *err, size_t n) {
    (void)ctx;
    for (;;) {
        swi_status st = child_wait_input(w, err, n);
        if (st != SWI_OK) return st;
        int64_t done;
        if (recv_all(w->sock, &done, sizeof done) != 0) return SWI_OK; /* the child's report tells */
    }
}

/* Run child(ctx) in a child process (stderr into a file) and parent(ctx, w) here meanwhile,
 * the two joined by a socket (w->sock); files[rep->at] names the file a failure, a death or
 * a stall is about. */
static swi_status in_child(child_fn child, parent_fn parent, void *ctx, child_report *rep, io_slice *files,
                           int64_t count, const char *dir, const swi_io_cancel *cancel, char *err, size_t n) {
    int sv[2];
    FILE *chatter = tmpfile();
    if (!chatter || socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0) {
        int e = errno;
        if (chatter) fclose(chatter);
        io__err(err, n, "%s: cannot start the DICOM reader: %s", dir, strerror(e));
        return SWI_ERR_INVALID_ARG;
    }
    rep->st = SWI_ERR_INVALID_ARG;
    rep->done = 0;
    rep->at = -1;
    rep->err[0] = '\0';
    const double stall = stall_seconds();
    io__dicom_screen_warm();
    const pid_t self = getpid();
    io__itk_hold(1); /* no other thread inside ITK while the child is made */
    pid_t pid = fork();
    io__itk_hold(0);
    if (pid == 0) {
#ifdef __linux__
        /* killed when the forking thread ends: it waits for this child, so only when the
         * process is ended (the command's forced stop, a kill); no reader outlives it */
        if (prctl(PR_SET_PDEATHSIG, SIGKILL) != 0 || getppid() != self) _exit(0);
#else
        (void)self;
#endif
        /* a library's death is the parent's to report: no crash handler of this process's
         * (a sanitizer's, a fuzzer's, an application's) runs in the child */
        static const int fatal[] = {SIGABRT, SIGSEGV, SIGFPE, SIGBUS, SIGILL, SIGTRAP};
        for (size_t i = 0; i < sizeof fatal / sizeof *fatal; i++) signal(fatal[i], SIG_DFL);
        close(sv[0]);
        if (dup2(fileno(chatter), 2) >= 0) {
            rep->st = child(ctx, sv[1], rep);
            rep->done = 1;
        }
        _exit(0);
    }
    int e = errno;
    close(sv[1]);
    if (pid > 0) (void)swi_child_track(pid, 0); /* a forced stop of the program ends it and waits */
    if (pid < 0) {
        close(sv[0]);
        fclose(chatter);
        io__err(err, n, "%s: cannot start the DICOM reader: %s", dir, strerror(e));
        return SWI_ERR_INVALID_ARG;
    }
    const child_wait cw = {sv[0], cancel, stall, rep, files, count, dir};
    swi_status pst = parent(ctx, &cw, err, n);
    close(sv[0]);                          /* a child waiting on the socket sees its end and stops */
    if (pst != SWI_OK) kill(pid, SIGKILL); /* one still decoding (or stuck) is ended first */
    int ws = 0;
    const pid_t w = swi_child_reap(pid, &ws);
    char said[320];
    last_line(chatter, said, sizeof said);
    fclose(chatter);
    const char *file = rep->at >= 0 && rep->at < count ? files[rep->at].file : dir;
    if (w != pid || !WIFEXITED(ws) || WEXITSTATUS(ws) != 0 || !rep->done) {
        if (pst != SWI_OK) return pst; /* stopped here first (interrupted, stuck): the child was ended */
        if (w == pid && WIFSIGNALED(ws))
            io__err(err, n, "%s: a DICOM library (DCMTK or GDCM) died reading this file (%s)%s%s", file,
                    strsignal(WTERMSIG(ws)), said[0] ? ": " : "", said);
        else
            io__err(err, n, "%s: the DICOM reader stopped without an answer", file);
        return SWI_ERR_INVALID_ARG;
    }
    if (pst != SWI_OK) return pst;
    if (rep->st != SWI_OK) { /* with what the library printed last, if it did */
        io__err(err, n, "%s%s%s%s", rep->err, said[0] ? " (the library said: " : "", said,
                said[0] ? ")" : "");
        return rep->st;
    }
    return SWI_OK;
}

typedef struct header_job {
    io_slice *s; /* shared with the child */
    int64_t count;
} header_job;

/* In the child: what the libraries print (to fd 2, the chatter file) is kept for the file
 * now read only. */
static void chatter_restart(void) {
    if (ftruncate(2, 0) == 0) lseek(2, 0, SEEK_SET);
}

static int send_all(int sock, const void *p, size_t len);

static swi_status read_headers(void *ctx, int sock, child_report *rep) {
    header_job *j = ctx;
    for (int64_t x = 0; x < j->count; x++) {
        rep->at = x;
        chatter_restart();
        io_slice gdcm = j->s[x];
        swi_status st = io__dicom_screen(j->s[x].file, &j->s[x], rep->err, sizeof rep->err);
        /* GDCM must read it too (the pixels are its); the geometry is DCMTK's */
        if (st == SWI_OK) st = io__itk_dicom_slice(j->s[x].file, &gdcm, rep->err, sizeof rep->err);
        if (st == SWI_OK && (gdcm.cols != j->s[x].cols || gdcm.rows != j->s[x].rows)) {
            snprintf(rep->err, sizeof rep->err,
                     "%s: GDCM reads %lldx%lld pixels where Columns x Rows say %lldx%lld", j->s[x].file,
                     (long long)gdcm.cols, (long long)gdcm.rows, (long long)j->s[x].cols,
                     (long long)j->s[x].rows);
            st = SWI_ERR_INVALID_ARG;
        }
        if (st != SWI_OK) return st;
        if (send_all(sock, &x, sizeof x) != 0) { /* the parent stopped waiting */
            snprintf(rep->err, sizeof rep->err, "interrupted");
            return SWI_ERR_CANCELLED;
        }
    }
    return SWI_OK;
}

/* Scan dir's DICOM files (sorted by name only so messages are stable) and assemble them. */
static swi_status load_series(const char *dir, series *se, swi_volume *v, const swi_io_cancel *cancel,
                              char *err, size_t n) {
    memset(se, 0, sizeof *se);
    DIR *d = opendir(dir);
    if (!d) {
        io__err(err, n, "%s: cannot open: %s", dir, strerror(errno));
        return SWI_ERR_IO;
    }
    char **names = NULL;
    size_t nn = 0, cap = 0;
    swi_status st = SWI_OK;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        if (e->d_name[0] == '.' || strcmp(e->d_name, "DICOMDIR") == 0) continue;
        if (nn == cap) {
            size_t nc = cap ? cap * 2 : 64;
            char **t = realloc(names, nc * sizeof *t);
            if (!t) {
                st = SWI_ERR_NOMEM;
                break;
            }
            names = t;
            cap = nc;
        }
        size_t len = strlen(dir) + strlen(e->d_name) + 2;
        if (!(names[nn] = malloc(len))) {
            st = SWI_ERR_NOMEM;
            break;
        }
        snprintf(names[nn++], len, "%s/%s", dir, e->d_name);
    }
    closedir(d);
    if (st == SWI_OK && nn > 1) qsort(names, nn, sizeof *names, cmp_name);
    if (st == SWI_OK && nn > 0 && !(se->s = calloc(nn, sizeof *se->s))) st = SWI_ERR_NOMEM;
    if (st == SWI_ERR_NOMEM) io__err(err, n, "%s: out of memory listing the directory", dir);
    size_t x = 0;
    for (; x < nn && st == SWI_OK; x++) {
        struct stat sb;
        if (stat(names[x], &sb) != 0 || !S_ISREG(sb.st_mode) || !has_dicm(names[x])) continue;
        io_slice *t = &se->s[se->count];
        t->file = names[x];
        names[x] = NULL;
        se->count++;
    }
    for (x = 0; x < nn; x++) free(names[x]);
    free(names);
    if (st == SWI_OK && se->count > 0) {
        size_t bytes = sizeof(child_report) + (size_t)se->count * sizeof(io_slice);
        child_report *rep = shared_alloc(bytes);
        if (!rep) {
            io__err(err, n, "%s: out of memory", dir);
            st = SWI_ERR_NOMEM;
        } else {
            header_job j = {(io_slice *)(rep + 1), se->count};
            memcpy(j.s, se->s, (size_t)se->count * sizeof *j.s);
            st = in_child(read_headers, take_progress, &j, rep, se->s, se->count, dir, cancel, err, n);
            if (st == SWI_OK) memcpy(se->s, j.s, (size_t)se->count * sizeof *j.s); /* same file pointers */
            munmap(rep, bytes);
        }
    }
    if (st == SWI_OK) st = io__dicom_assemble(se->s, se->count, dir, v, err, n);
    if (st != SWI_OK) series_free(se);
    return st;
}

swi_status io__dicom_open(const char *dir, swi_volume *v, const swi_io_cancel *cancel, char *err, size_t n) {
    memset(v, 0, sizeof *v);
    if (strlen(dir) >= sizeof v->path) {
        io__err(err, n, "%.200s...: path too long", dir);
        return SWI_ERR_INVALID_ARG;
    }
    if (!io__itk_available()) {
        io__err(err, n,
                "%s: is a directory, and reading it as a DICOM series needs ITK: "
                "swi_io was built without it (install libinsighttoolkit5-dev and rebuild)",
                dir);
        return SWI_ERR_INVALID_ARG;
    }
    series se;
    swi_status st = load_series(dir, &se, v, cancel, err, n);
    if (st != SWI_OK) return st;
    strcpy(v->path, dir);
    series_free(&se);
    return SWI_OK;
}

swi_status io__dicom_slices(const swi_volume *v, io_slice **out, int64_t *count, const swi_io_cancel *cancel,
                            char *err, size_t n) {
    series se;
    swi_volume now;
    *out = NULL;
    *count = 0;
    swi_status st = load_series(v->path, &se, &now, cancel, err, n);
    if (st != SWI_OK) return st;
    if (memcmp(now.size, v->size, sizeof now.size) != 0 ||
        memcmp(now.affine, v->affine, sizeof now.affine) != 0) {
        series_free(&se);
        io__err(err, n, "%s: the series changed since it was opened", v->path);
        return SWI_ERR_INVALID_ARG;
    }
    *out = se.s;
    *count = se.count;
    return SWI_OK;
}

void io__dicom_slices_free(io_slice *s, int64_t count) {
    series se = {s, count};
    series_free(&se);
}

/* The slices decoded one by one in the child into a shared slot, each taken from it here:
 * the child sends the slice's index, waits for a byte back, decodes the next. */
typedef struct pixel_job {
    series *se;
    const swi_volume *v;
    float *slot; /* shared */
    float *dst;
    const swi_io_cancel *cancel;
} pixel_job;

static int send_all(int sock, const void *p, size_t len) {
    while (len > 0) {
        ssize_t w = send(sock, p, len, MSG_NOSIGNAL);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) return -1;
        p = (const char *)p + w;
        len -= (size_t)w;
    }
    return 0;
}

static int recv_all(int sock, void *p, size_t len) {
    while (len > 0) {
        ssize_t r = recv(sock, p, len, 0);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) return -1;
        p = (char *)p + r;
        len -= (size_t)r;
    }
    return 0;
}

static swi_status read_pixels(void *ctx, int sock, child_report *rep) {
    pixel_job *j = ctx;
    for (int64_t k = 0; k < j->v->size[2]; k++) {
        rep->at = k;
        chatter_restart();
        const io_slice *t = &j->se->s[k];
        io_slice now = *t;
        swi_status st = io__dicom_screen(t->file, &now, rep->err, sizeof rep->err);
        if (st == SWI_OK && (now.cols != t->cols || now.rows != t->rows)) {
            snprintf(rep->err, sizeof rep->err, "%s: the file changed since the series was opened", t->file);
            st = SWI_ERR_INVALID_ARG;
        }
        if (st == SWI_OK) st = io__itk_dicom_pixels(t, j->slot, rep->err, sizeof rep->err);
        if (st != SWI_OK) return st;
        char go;
        if (send_all(sock, &k, sizeof k) != 0 || recv_all(sock, &go, 1) != 0) {
            snprintf(rep->err, sizeof rep->err, "interrupted");
            return SWI_ERR_CANCELLED;
        }
    }
    return SWI_OK;
}

static swi_status take_pixels(void *ctx, const child_wait *w, char *err, size_t n) {
    pixel_job *j = ctx;
    const int sock = w->sock;
    const int64_t ni = j->v->size[0], nj = j->v->size[1], nk = j->v->size[2];
    for (int64_t k = 0; k < nk; k++) {
        /* the next slice, watching for a cancel and a stuck child while it decodes */
        swi_status st = child_wait_input(w, err, n);
        if (st != SWI_OK) return st;
        int64_t got;
        if (recv_all(sock, &got, sizeof got) != 0 || got != k) return SWI_OK; /* the child's report tells */
        for (int64_t jj = 0; jj < nj; jj++)
            for (int64_t i = 0; i < ni; i++) j->dst[(i * nj + jj) * nk + k] = j->slot[i + ni * jj];
        if (io__cancelled(j->cancel)) {
            io__err(err, n, "interrupted");
            return SWI_ERR_CANCELLED;
        }
        if (send_all(sock, "g", 1) != 0) return SWI_OK;
    }
    return SWI_OK;
}

swi_status io__dicom_probe(const char *file, io_slice *s, float *dst, int64_t max_pixels, char *err,
                           size_t n) {
    memset(s, 0, sizeof *s);
    char *name = strdup(file);
    if (!name) {
        io__err(err, n, "%s: out of memory", file);
        return SWI_ERR_NOMEM;
    }
    s->file = name;
    series se = {s, 1};
    child_report *rep = shared_alloc(sizeof(child_report) + sizeof(io_slice));
    swi_status st = SWI_ERR_NOMEM;
    if (rep) {
        header_job j = {(io_slice *)(rep + 1), 1};
        *j.s = *s;
        st = in_child(read_headers, take_progress, &j, rep, s, 1, file, NULL, err, n);
        if (st == SWI_OK) *s = *j.s;
        munmap(rep, sizeof(child_report) + sizeof(io_slice));
    }
    if (st == SWI_OK && s->frames == 1 && s->cols * s->rows <= max_pixels && dst) {
        swi_volume v;
        memset(&v, 0, sizeof v);
        v.size[0] = s->cols;
        v.size[1] = s->rows;
        v.size[2] = 1;
        size_t bytes = sizeof(child_report) + (size_t)(s->cols * s->rows) * sizeof(float);
        if (!(rep = shared_alloc(bytes))) {
            st = SWI_ERR_NOMEM;
        } else {
            pixel_job pj = {&se, &v, (float *)(rep + 1), dst, NULL};
            st = in_child(read_pixels, take_pixels, &pj, rep, s, 1, file, NULL, err, n);
            munmap(rep, bytes);
        }
    }
    if (st == SWI_ERR_NOMEM) io__err(err, n, "%s: out of memory", file);
    s->file = NULL;
    free(name);
    return st;
}

swi_status io__dicom_read(const swi_volume *v, float *dst, const swi_io_cancel *cancel, char *err, size_t n) {
    /* swi_volume holds no allocation, so the series is assembled again: it must come out
     * the same as when it was opened. */
    series se;
    swi_volume now;
    swi_status st = load_series(v->path, &se, &now, cancel, err, n);
    if (st != SWI_OK) return st;
    if (memcmp(now.size, v->size, sizeof now.size) != 0 ||
        memcmp(now.affine, v->affine, sizeof now.affine) != 0) {
        series_free(&se);
        io__err(err, n, "%s: the series changed since it was opened", v->path);
        return SWI_ERR_INVALID_ARG;
    }
    const int64_t ni = v->size[0], nj = v->size[1];
    size_t bytes = sizeof(child_report) + (size_t)(ni * nj) * sizeof(float);
    child_report *rep = shared_alloc(bytes);
    if (!rep) {
        series_free(&se);
        io__err(err, n, "%s: out of memory", v->path);
        return SWI_ERR_NOMEM;
    }
    pixel_job j = {&se, v, (float *)(rep + 1), dst, cancel};
    st = in_child(read_pixels, take_pixels, &j, rep, se.s, se.count, v->path, cancel, err, n);
    munmap(rep, bytes);
    series_free(&se);
    return st;
}
