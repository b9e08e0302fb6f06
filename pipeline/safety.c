/* safety.c -- see safety.h. */
#include "safety.h"

#include "swi_pipeline.h"

#include "util.h"

#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <libgen.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define MAX_OUTS 16
#define MAX_TMP_DIRS 8

static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;
static cli_out *g_outs[MAX_OUTS];
static char g_dirs[MAX_TMP_DIRS][4096]; /* "" when free */

static int rm_entry(const char *p, const struct stat *sb, int flag, struct FTW *f) {
    (void)sb, (void)f;
    if (flag == FTW_DP)
        rmdir(p);
    else
        unlink(p);
    return 0;
}

/* A writer's folder, while its threads may still write in it: moved out of their way
 * first (what they create by name then fails), then removed; links are not followed. */
static void remove_dir(const char *path) {
    char gone[4200];
    const char *at = path;
    if ((size_t)snprintf(gone, sizeof gone, "%s.gone", path) < sizeof gone && rename(path, gone) == 0)
        at = gone;
    nftw(at, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
    if (at != path) nftw(path, rm_entry, 16, FTW_DEPTH | FTW_PHYS); /* made again meanwhile */
}

int cli_tmp_dir_add(const char *path) {
    if (!path || !*path || strlen(path) >= sizeof g_dirs[0]) return 0;
    pthread_mutex_lock(&g_lock);
    int rc = -1;
    for (int i = 0; i < MAX_TMP_DIRS && rc; i++)
        if (!g_dirs[i][0]) {
            strcpy(g_dirs[i], path);
            rc = 0;
        }
    pthread_mutex_unlock(&g_lock);
    return rc;
}

void cli_tmp_dirs_clear(void) {
    pthread_mutex_lock(&g_lock);
    for (int i = 0; i < MAX_TMP_DIRS; i++) g_dirs[i][0] = '\0';
    pthread_mutex_unlock(&g_lock);
}

void swi_job_remove_temporaries(void) {
    pthread_mutex_lock(&g_lock); /* a commit in progress finishes first */
    for (int i = 0; i < MAX_OUTS; i++)
        if (g_outs[i] && g_outs[i]->active) {
            unlink(g_outs[i]->tmp);
            g_outs[i]->active = 0;
        }
    for (int i = 0; i < MAX_TMP_DIRS; i++)
        if (g_dirs[i][0]) {
            remove_dir(g_dirs[i]);
            g_dirs[i][0] = '\0';
        }
    pthread_mutex_unlock(&g_lock);
}

int cli_out_check(const char *final, int force, char *err) {
    struct stat st;
    if (!final || !*final) {
        cli_err(err, "empty output path");
        return -1;
    }
    if (strlen(final) >= 4000) {
        cli_err(err, "%.200s...: output path too long", final);
        return -1;
    }
    if (stat(final, &st) == 0) {
        if (S_ISDIR(st.st_mode)) {
            cli_err(err, "%s: is a directory", final);
            return -1;
        }
        if (!S_ISREG(st.st_mode)) {
            cli_err(err, "%s: exists and is not a regular file; swi writes only regular files", final);
            return -1;
        }
        if (!force) {
            cli_err(err, "%s: already exists (use --force to overwrite)", final);
            return -1;
        }
    }
    return 0;
}

static void unregister(cli_out *o) {
    for (int i = 0; i < MAX_OUTS; i++)
        if (g_outs[i] == o) g_outs[i] = NULL;
}

int cli_out_begin(cli_out *o, const char *final, int force, char *err) {
    memset(o, 0, sizeof *o);
    o->fd = -1;
    if (cli_out_check(final, force, err) != 0) return -1;
    strcpy(o->final, final);
    char dirbuf[4096], basebuf[4096];
    strcpy(dirbuf, final);
    strcpy(basebuf, final);
    const char *dir = dirname(dirbuf);
    const char *base = basename(basebuf);
    int n = snprintf(o->tmp, sizeof o->tmp, "%s/.%s.swi-XXXXXX", dir, base);
    if (n < 0 || (size_t)n >= sizeof o->tmp) {
        cli_err(err, "%s: output path too long", final);
        return -1;
    }
    pthread_mutex_lock(&g_lock);
    int slot = -1;
    for (int i = 0; i < MAX_OUTS; i++)
        if (!g_outs[i]) {
            slot = i;
            break;
        }
    if (slot < 0) {
        pthread_mutex_unlock(&g_lock);
        cli_err(err, "%s: too many outputs", final);
        return -1;
    }
    int fd = mkostemp(o->tmp, O_CLOEXEC);
    if (fd < 0) {
        int e = errno;
        pthread_mutex_unlock(&g_lock);
        cli_err(err, "%s: cannot create the output in %s: %s", final, dir, strerror(e));
        return -1;
    }
    o->fd = fd;
    o->active = 1;
    g_outs[slot] = o;
    pthread_mutex_unlock(&g_lock);
    /* mkstemp makes 0600; give the file the permissions a plain creat() would. */
    mode_t mask = umask(022);
    umask(mask);
    if (fchmod(fd, 0666 & ~mask) != 0) {
        /* not fatal */
    }
    return 0;
}

int cli_out_take_fd(cli_out *o) {
    int fd = o->fd;
    o->fd = -1;
    return fd;
}

/* Phase 1 of a commit: close, check for a cancellation, fsync. */
static int out_sync(cli_out *o, int (*cancelled)(void *), void *user, char *err) {
    if (!o->active) {
        cli_err(err, "%s: nothing to commit", o->final);
        return -1;
    }
    if (o->fd >= 0) {
        close(o->fd);
        o->fd = -1;
    }
    if (cancelled && cancelled(user)) {
        cli_err(err, "interrupted");
        return -1;
    }
    int fd = open(o->tmp, O_RDONLY | O_CLOEXEC);
    if (fd < 0 || fsync(fd) != 0) {
        int e = errno;
        if (fd >= 0) close(fd);
        cli_err(err, "%s: cannot complete the output: %s", o->final, strerror(e));
        return -1;
    }
    close(fd);
    return 0;
}

/* Phase 2: move into place. With force, an existing final is first hard-linked to
 * `backup` (set to "" when there was nothing to keep) so that it can be restored. */
static int out_move(cli_out *o, int force, char *backup, size_t bsize, char *err) {
    backup[0] = '\0';
    pthread_mutex_lock(&g_lock);
    int rc;
    if (force) {
        struct stat st;
        if (lstat(o->final, &st) == 0 && S_ISREG(st.st_mode) &&
            (size_t)snprintf(backup, bsize, "%s.old", o->tmp) < bsize && link(o->final, backup) != 0)
            backup[0] = '\0';
        rc = rename(o->tmp, o->final);
        if (rc != 0 && backup[0]) {
            unlink(backup);
            backup[0] = '\0';
        }
    } else {
        /* link() fails if final appeared meanwhile: never clobber without --force. */
        rc = link(o->tmp, o->final);
        if (rc != 0 && (errno == EPERM || errno == ENOTSUP || errno == EOPNOTSUPP || errno == EMLINK)) {
            struct stat st;
            if (stat(o->final, &st) == 0)
                errno = EEXIST;
            else
                rc = rename(o->tmp, o->final); /* filesystem without hard links */
        } else if (rc == 0) {
            unlink(o->tmp);
        }
    }
    int e = errno;
    if (rc == 0) {
        o->active = 0;
        unregister(o);
    }
    pthread_mutex_unlock(&g_lock);
    if (rc != 0) {
        if (e == EEXIST)
            cli_err(err,
                    "%s: appeared while swi was running (another run?); not overwritten "
                    "(use --force)",
                    o->final);
        else
            cli_err(err, "%s: cannot move the output into place: %s", o->final, strerror(e));
        return -1;
    }
    return 0;
}

static void sync_dir_of(const char *path) {
    char dirbuf[4096];
    snprintf(dirbuf, sizeof dirbuf, "%s", path);
    int dfd = open(dirname(dirbuf), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd >= 0) {
        fsync(dfd);
        close(dfd);
    }
}

int cli_out_commit_all_cancellable(cli_out *const *outs, int n, int force, int (*cancelled)(void *user),
                                   void *user, char *err) {
    for (int i = 0; i < n; i++)
        if (outs[i] && out_sync(outs[i], cancelled, user, err)) return -1;
    char backup[16][4200];
    int moved = 0;
    for (int i = 0; i < n && i < 16; i++, moved++) {
        if (!outs[i]) {
            backup[i][0] = '\0';
            continue;
        }
        const int replace = force || (outs[i]->replaceable && outs[i]->replaceable(outs[i]->final));
        if (out_move(outs[i], replace, backup[i], sizeof backup[i], err) == 0) continue;
        /* Take back what was already moved: restore replaced files, remove new ones. */
        for (int j = 0; j < moved; j++) {
            if (!outs[j]) continue;
            if (backup[j][0])
                rename(backup[j], outs[j]->final);
            else
                unlink(outs[j]->final);
        }
        return -1;
    }
    for (int i = 0; i < moved; i++) {
        if (!outs[i]) continue;
        if (backup[i][0]) unlink(backup[i]);
        sync_dir_of(outs[i]->final);
    }
    return 0;
}

int cli_out_commit_all(cli_out *const *outs, int n, int force, char *err) {
    return cli_out_commit_all_cancellable(outs, n, force, NULL, NULL, err);
}

int cli_out_commit(cli_out *o, int force, char *err) {
    cli_out *one[1] = {o};
    return cli_out_commit_all(one, 1, force, err);
}

void cli_out_abort(cli_out *o) {
    pthread_mutex_lock(&g_lock);
    if (o->fd >= 0) {
        close(o->fd);
        o->fd = -1;
    }
    if (o->active) {
        unlink(o->tmp);
        o->active = 0;
    }
    unregister(o);
    pthread_mutex_unlock(&g_lock);
}

void cli_out_abort_all(void) {
    pthread_mutex_lock(&g_lock);
    for (int i = 0; i < MAX_OUTS; i++) {
        cli_out *o = g_outs[i];
        if (!o) continue;
        if (o->fd >= 0) {
            close(o->fd);
            o->fd = -1;
        }
        if (o->active) {
            unlink(o->tmp);
            o->active = 0;
        }
        g_outs[i] = NULL;
    }
    pthread_mutex_unlock(&g_lock);
}
