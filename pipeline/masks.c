/*
 * masks.c -- one binary mask a class into a folder written whole or not at all (masks.h).
 */
#include "masks.h"

#include "alloc.h"
#include "safety.h"
#include "util.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* What dir holds: 0 absent, 1 an empty folder, 2 a folder of .nii.gz files only, 3 a folder
 * with anything else, -1 not a folder (or unreadable). */
static int dir_state(const char *dir) {
    struct stat st;
    if (lstat(dir, &st) != 0) return errno == ENOENT ? 0 : -1;
    if (!S_ISDIR(st.st_mode)) return -1;
    DIR *d = opendir(dir);
    if (!d) return -1;
    int state = 1;
    struct dirent *e;
    while ((e = readdir(d))) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
        size_t n = strlen(e->d_name);
        char path[4400];
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        struct stat fs;
        const int mask =
            n > 7 && !strcmp(e->d_name + n - 7, ".nii.gz") && lstat(path, &fs) == 0 && S_ISREG(fs.st_mode);
        if (!mask) {
            state = 3;
            break;
        }
        state = 2;
    }
    closedir(d);
    return state;
}

int pl_masks_check(const char *dir, int force, char *err) {
    const int st = dir_state(dir);
    if (st < 0) {
        cli_err(err, "--masks %s: exists and is not a folder swi can read; not replaced", dir);
        return 1;
    }
    if (st == 3) {
        cli_err(err, "--masks %s: holds files other than masks (.nii.gz); not replaced, --force or not", dir);
        return 1;
    }
    if (st == 2 && !force) {
        cli_err(err, "--masks %s: already holds masks (use --force to replace the folder)", dir);
        return 1;
    }
    return 0;
}

/* Remove the folder dir and the files in it (it holds no folders). */
static void remove_flat(const char *dir) {
    DIR *d = opendir(dir);
    if (d) {
        struct dirent *e;
        while ((e = readdir(d))) {
            if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
            char path[4400];
            snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
            unlink(path);
        }
        closedir(d);
    }
    rmdir(dir);
}

int pl_masks_begin(pl_masks *m, const char *dir, int force, char *err) {
    memset(m, 0, sizeof *m);
    m->tmp[0] = '\0';
    if (pl_masks_check(dir, force, err)) return 1;
    size_t len = strlen(dir);
    while (len > 1 && dir[len - 1] == '/') len--;
    if (len >= sizeof m->dir) {
        cli_err(err, "--masks %s: the name is too long", dir);
        return 1;
    }
    memcpy(m->dir, dir, len);
    m->dir[len] = '\0';
    const char *slash = strrchr(m->dir, '/');
    const char *base = slash ? slash + 1 : m->dir;
    const int dl = slash ? (int)(slash - m->dir) + 1 : 0;
    if ((size_t)snprintf(m->tmp, sizeof m->tmp, "%.*s.%s.swi-XXXXXX", dl, m->dir, base) >= sizeof m->tmp ||
        !mkdtemp(m->tmp)) {
        cli_err(err, "--masks %s: cannot create a folder beside it: %s", dir, strerror(errno));
        m->tmp[0] = '\0';
        return 1;
    }
    cli_tmp_dir_add(m->tmp); /* a forced stop removes it too */
    return 0;
}

/* A class name as a file name: '/', '\\' and control characters become '_'; "." and ".."
 * too. */
static void file_name(const char *name, int64_t c, char *buf, size_t n) {
    if (!name || !name[0])
        snprintf(buf, n, "label_%lld", (long long)c);
    else
        snprintf(buf, n, "%s", name);
    for (char *p = buf; *p; p++)
        if (*p == '/' || *p == '\\' || (unsigned char)*p < 0x20) *p = '_';
    if (!strcmp(buf, ".") || !strcmp(buf, "..")) snprintf(buf, n, "_");
}

int pl_masks_write(pl_masks *m, const swi_volume *like, const void *labels, int label_bytes, int64_t classes,
                   const char *const *names, const swi_io_cancel *cancel, char *err) {
    const int64_t *s = like->size;
    const size_t N = (size_t)s[0] * (size_t)s[1] * (size_t)s[2];
    unsigned char *mask = cli_malloc(N ? N : 1);
    if (!mask) {
        cli_err(err, "--masks: out of memory for a mask");
        return 1;
    }
    int rc = 0;
    for (int64_t c = 1; c < classes && !rc; c++) {
        char name[256], path[4600];
        file_name(names ? names[c] : NULL, c, name, sizeof name);
        snprintf(path, sizeof path, "%s/%s.nii.gz", m->tmp, name);
        const uint8_t *l8 = labels;
        const uint16_t *l16 = labels;
        for (size_t i = 0; i < N; i++) mask[i] = (label_bytes == 1 ? l8[i] : l16[i]) == c;
        int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0666);
        if (fd < 0) {
            cli_err(err, "--masks %s/%s.nii.gz: %s", m->dir, name,
                    errno == EEXIST ? "two classes have this name" : strerror(errno));
            rc = 1;
            break;
        }
        char msg[SWI_ERRLEN];
        /* the writer closes fd */
        if (swi_volume_write_as_fd(fd, SWI_VOLUME_NIFTI_GZ, path, like, mask, SWI_DTYPE_UINT8, SWI_IO_LABELS,
                                   1, 2, cancel, msg, sizeof msg) != SWI_OK) {
            cli_err(err, "--masks: %s", msg);
            rc = 1;
        }
    }
    free(mask);
    return rc;
}

int pl_masks_commit(pl_masks *m, int force, char *err) {
    const int st = dir_state(m->dir);
    char old[4300] = "";
    if (st == 1 && rmdir(m->dir) != 0) {
        cli_err(err, "--masks %s: cannot replace the empty folder: %s", m->dir, strerror(errno));
        return 1;
    }
    if (st == 2 || st == 3 || st < 0) {
        /* a folder of masks appeared or was there: only with force, swapped out whole */
        if (!force || st != 2) {
            cli_err(err, "--masks %s: appeared while swi was running, or is no folder of masks; not replaced",
                    m->dir);
            return 1;
        }
        snprintf(old, sizeof old, "%s.old", m->tmp);
        if (rename(m->dir, old) != 0) {
            cli_err(err, "--masks %s: cannot move the old folder aside: %s", m->dir, strerror(errno));
            return 1;
        }
    }
    if (rename(m->tmp, m->dir) != 0) {
        const int e = errno;
        if (old[0]) rename(old, m->dir);
        cli_err(err, "--masks %s: cannot move the new folder into place: %s", m->dir, strerror(e));
        return 1;
    }
    m->tmp[0] = '\0';
    if (old[0]) remove_flat(old);
    return 0;
}

void pl_masks_abort(pl_masks *m) {
    if (!m || !m->tmp[0]) return;
    remove_flat(m->tmp);
    m->tmp[0] = '\0';
}
