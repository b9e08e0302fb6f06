/* samefile.c -- see samefile.h. */
#include "samefile.h"

#include "util.h"

#include <libgen.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* What an output path will write to. */
typedef struct out_id {
    int known;  /* 0: cannot tell (its folder is missing or unreadable) */
    int exists; /* 1: (dev, ino) of the file; 0: (dev, ino) of its folder + name */
    dev_t dev;
    ino_t ino;
    char name[4096];
} out_id;

/* The folder part of path, in buf (dirname works on a copy). */
static const char *folder_of(const char *path, char *buf, size_t n) {
    snprintf(buf, n, "%s", path);
    return dirname(buf);
}

static void id_of_output(const char *path, out_id *id) {
    memset(id, 0, sizeof *id);
    struct stat st;
    /* stat follows links: an output naming an input through a link is that input. A
     * dangling link is replaced as a name (rename), so it is identified by itself. */
    if (stat(path, &st) == 0 || lstat(path, &st) == 0) {
        id->known = id->exists = 1;
        id->dev = st.st_dev;
        id->ino = st.st_ino;
        return;
    }
    char dbuf[4096], nbuf[4096];
    if (strlen(path) >= sizeof dbuf) return;
    if (stat(folder_of(path, dbuf, sizeof dbuf), &st) != 0) return;
    snprintf(nbuf, sizeof nbuf, "%s", path);
    id->known = 1;
    id->dev = st.st_dev;
    id->ino = st.st_ino;
    snprintf(id->name, sizeof id->name, "%s", basename(nbuf));
}

/* Is the folder `dir` (device, inode) the folder that holds path, or one above it? */
static int below(const char *path, dev_t dev, ino_t ino) {
    char dbuf[4096], real[PATH_MAX];
    if (strlen(path) >= sizeof dbuf || !realpath(folder_of(path, dbuf, sizeof dbuf), real)) return 0;
    /* realpath resolved every link: walk up the real folders to the root */
    for (;;) {
        struct stat st;
        if (stat(real, &st) == 0 && st.st_dev == dev && st.st_ino == ino) return 1;
        char *slash = strrchr(real, '/');
        if (!slash || slash == real) {
            if (strcmp(real, "/") == 0) return 0;
            strcpy(real, "/");
            continue;
        }
        *slash = '\0';
    }
}

cli_relation cli_path_relation(const char *out, const char *in) {
    struct stat si;
    if (!out || !in || stat(in, &si) != 0) return CLI_APART;
    out_id o;
    id_of_output(out, &o);
    if (o.known && o.exists && o.dev == si.st_dev && o.ino == si.st_ino) return CLI_SAME;
    if (S_ISDIR(si.st_mode) && below(out, si.st_dev, si.st_ino)) return CLI_INSIDE;
    return CLI_APART;
}

int cli_outputs_same(const char *a, const char *b) {
    if (!a || !b) return 0;
    out_id x, y;
    id_of_output(a, &x);
    id_of_output(b, &y);
    if (!x.known || !y.known || x.exists != y.exists) return 0;
    return x.dev == y.dev && x.ino == y.ino && (x.exists || strcmp(x.name, y.name) == 0);
}

int cli_check_outputs_apart(const cli_named_path *inputs, int n_inputs, const cli_named_path *outputs,
                            int n_outputs, char *err) {
    for (int k = 0; k < n_outputs; k++) {
        const cli_named_path *o = &outputs[k];
        if (!o->path) continue;
        for (int i = 0; i < n_inputs; i++) {
            const cli_named_path *in = &inputs[i];
            if (!in->path) continue;
            cli_relation r = cli_path_relation(o->path, in->path);
            if (r == CLI_SAME) {
                cli_err(err,
                        "%s %s is the same file as %s %s; swi never writes over its "
                        "inputs, --force or not (choose another output name)",
                        o->option, o->path, in->option, in->path);
                return -1;
            }
            if (r == CLI_INSIDE) {
                cli_err(err,
                        "%s %s lies inside %s %s; swi never writes into its inputs "
                        "(choose an output outside it)",
                        o->option, o->path, in->option, in->path);
                return -1;
            }
        }
        for (int j = 0; j < k; j++)
            if (outputs[j].path && cli_outputs_same(outputs[j].path, o->path)) {
                cli_err(err,
                        "%s %s and %s %s are the same file; give each output its own "
                        "name",
                        outputs[j].option, outputs[j].path, o->option, o->path);
                return -1;
            }
    }
    return 0;
}
