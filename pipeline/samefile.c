/* samefile.c -- see samefile.h. */
#include "samefile.h"

#include "swi_store.h"
#include "util.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define LOC_MAX 8192

/* Where a name leads. */
typedef struct loc {
    int known;  /* 0: the name could not be placed (too long, no working directory) */
    int exists; /* stat (links followed) found it: dev, ino, is_dir are set */
    int is_dir;
    dev_t dev;
    ino_t ino;
    int h5;              /* an HDF5 dataset: file is the .h5 file, dset the path inside */
    char canon[LOC_MAX]; /* real path of the existing part + the rest as written */
    char dset[LOC_MAX];  /* "/a/b", repeated and trailing slashes dropped */
} loc;

/* Append component c (len n) to the absolute path p (size LOC_MAX). */
static int push(char *p, const char *c, size_t n) {
    size_t len = strlen(p);
    if (len + 1 + n >= LOC_MAX) return -1;
    if (len > 1 || p[0] != '/') p[len++] = '/';
    memcpy(p + len, c, n);
    p[len + n] = '\0';
    return 0;
}

static void pop(char *p) {
    char *slash = strrchr(p, '/');
    if (!slash || slash == p)
        strcpy(p, "/");
    else
        *slash = '\0';
}

/* The real path of the longest existing part of path, then the rest lexically ("."
 * dropped, ".." one up). A final component that exists only as a dangling link stays a
 * name: it is replaced as such, never followed. */
static int canonical(const char *path, char *out) {
    char abs[LOC_MAX];
    if (path[0] == '/') {
        if (strlen(path) >= sizeof abs) return -1;
        strcpy(abs, path);
    } else {
        char cwd[PATH_MAX];
        if (!getcwd(cwd, sizeof cwd) || (size_t)snprintf(abs, sizeof abs, "%s/%s", cwd, path) >= sizeof abs)
            return -1;
    }
    strcpy(out, "/");
    int existing = 1; /* out is a real path so far */
    for (const char *s = abs; *s;) {
        while (*s == '/') s++;
        const char *e = s;
        while (*e && *e != '/') e++;
        size_t n = (size_t)(e - s);
        if (n == 0) break;
        if (n == 1 && s[0] == '.') {
            /* nothing */
        } else if (n == 2 && s[0] == '.' && s[1] == '.') {
            pop(out);
        } else {
            if (push(out, s, n)) return -1;
            if (existing) {
                char real[PATH_MAX];
                if (realpath(out, real)) {
                    if (strlen(real) >= LOC_MAX) return -1;
                    strcpy(out, real);
                } else {
                    existing = 0;
                }
            }
        }
        s = e;
    }
    return 0;
}

/* "/a//b/" -> "/a/b"; "" -> "/". */
static void clean_dset(const char *d, char *out) {
    size_t k = 0;
    out[k++] = '/';
    for (const char *s = d; *s && k + 1 < LOC_MAX; s++)
        if (*s != '/' || (k > 0 && out[k - 1] != '/')) out[k++] = *s;
    while (k > 1 && out[k - 1] == '/') k--;
    out[k] = '\0';
}

static void locate(const char *name, loc *l) {
    memset(l, 0, sizeof *l);
    char file[LOC_MAX];
    const char *path = name;
    if (swi_store_kind_of(name) == SWI_STORE_HDF5) {
        char dset[LOC_MAX];
        if (swi_store_split_h5(name, file, sizeof file, dset, sizeof dset, NULL, 0) != SWI_OK) return;
        l->h5 = 1;
        clean_dset(dset, l->dset);
        path = file;
    }
    if (!*path || canonical(path, l->canon)) return;
    l->known = 1;
    struct stat st;
    if (stat(path, &st) == 0) {
        l->exists = 1;
        l->is_dir = S_ISDIR(st.st_mode);
        l->dev = st.st_dev;
        l->ino = st.st_ino;
    }
}

/* Is a below b ("/x/y" below "/x"; "/" holds everything)? */
static int below(const char *a, const char *b) {
    size_t n = strlen(b);
    if (n == 1 && b[0] == '/') return a[1] != '\0';
    return strncmp(a, b, n) == 0 && a[n] == '/';
}

/* a relative to b, both known. */
static cli_relation relate(const loc *a, const loc *b) {
    cli_relation r = CLI_APART;
    if ((a->exists && b->exists && a->dev == b->dev && a->ino == b->ino) || strcmp(a->canon, b->canon) == 0)
        r = CLI_SAME;
    else if (below(a->canon, b->canon))
        r = CLI_INSIDE;
    else if (below(b->canon, a->canon))
        r = CLI_CONTAINS;
    if (r != CLI_SAME || !a->h5 || !b->h5) return r;
    /* two datasets of one HDF5 file */
    if (strcmp(a->dset, b->dset) == 0) return CLI_SAME;
    if (below(a->dset, b->dset)) return CLI_INSIDE;
    if (below(b->dset, a->dset)) return CLI_CONTAINS;
    return CLI_APART;
}

/* For an OME-Zarr labels name IMG/labels/NAME, IMG in img; else 0. */
static int labels_image(const char *name, char *img, size_t n) {
    if (swi_store_kind_of(name) == SWI_STORE_NONE || swi_store_kind_of(name) == SWI_STORE_HDF5) return 0;
    size_t len = strlen(name);
    while (len > 1 && name[len - 1] == '/') len--;
    size_t k = len;
    while (k > 0 && name[k - 1] != '/') k--; /* name[k..len): NAME */
    if (k == len || k < 8 || strncmp(name + k - 8, "/labels/", 8) != 0) return 0;
    size_t il = k - 8;
    if (il == 0 || il >= n) return 0;
    memcpy(img, name, il);
    img[il] = '\0';
    return 1;
}

/* Is the folder dir an image group rather than an array (whose own folder labels must not
 * enter): no Zarr v2 .zarray, no Zarr v3 zarr.json of an array? */
static int is_group(const char *dir) {
    char p[LOC_MAX];
    struct stat st;
    if (stat(dir, &st) != 0 || !S_ISDIR(st.st_mode)) return 0;
    if ((size_t)snprintf(p, sizeof p, "%s/.zarray", dir) >= sizeof p || lstat(p, &st) == 0) return 0;
    if ((size_t)snprintf(p, sizeof p, "%s/zarr.json", dir) >= sizeof p) return 0;
    int fd = swi_io_open_regular(p, NULL, NULL, 0);
    if (fd < 0) return 1;
    char head[4096];
    ssize_t got = read(fd, head, sizeof head - 1);
    close(fd);
    head[got > 0 ? got : 0] = '\0';
    const char *node = strstr(head, "\"node_type\"");
    return !(node && strstr(node, "\"array\""));
}

cli_relation cli_path_relation(const char *out, const char *in) {
    if (!out || !in) return CLI_APART;
    loc o, i;
    locate(in, &i);
    if (!i.known || !i.exists) return CLI_APART;
    locate(out, &o);
    if (!o.known) return CLI_APART;
    cli_relation r = relate(&o, &i);
    if (r == CLI_INSIDE) {
        char img[LOC_MAX];
        loc im;
        if (labels_image(out, img, sizeof img)) {
            locate(img, &im);
            /* the labels group of the input image itself */
            if (im.known && strcmp(im.canon, i.canon) == 0 && is_group(i.canon)) return CLI_APART;
        }
    }
    return r;
}

cli_relation cli_outputs_relation(const char *a, const char *b) {
    if (!a || !b) return CLI_APART;
    loc x, y;
    locate(a, &x);
    locate(b, &y);
    if (!x.known || !y.known) return CLI_APART;
    return relate(&x, &y);
}

int cli_outputs_same(const char *a, const char *b) { return cli_outputs_relation(a, b) == CLI_SAME; }

int cli_check_outputs_apart(const cli_named_path *inputs, int n_inputs, const cli_named_path *outputs,
                            int n_outputs, char *err) {
    for (int k = 0; k < n_outputs; k++) {
        const cli_named_path *o = &outputs[k];
        if (!o->path) continue;
        for (int i = 0; i < n_inputs; i++) {
            const cli_named_path *in = &inputs[i];
            if (!in->path) continue;
            switch (cli_path_relation(o->path, in->path)) {
            case CLI_SAME:
                cli_err(err,
                        "%s %s is the same %s as %s %s; swi never writes over its inputs, --force or not "
                        "(choose another output name)",
                        o->option, o->path,
                        swi_store_kind_of(o->path) == SWI_STORE_HDF5 &&
                                swi_store_kind_of(in->path) == SWI_STORE_HDF5
                            ? "dataset"
                            : "file",
                        in->option, in->path);
                return -1;
            case CLI_INSIDE:
                cli_err(err,
                        "%s %s lies inside %s %s; swi never writes into its inputs, --force or not "
                        "(choose an output outside it)",
                        o->option, o->path, in->option, in->path);
                return -1;
            case CLI_CONTAINS:
                cli_err(err,
                        "%s %s contains %s %s; swi never writes over its inputs, --force or not "
                        "(choose an output elsewhere)",
                        o->option, o->path, in->option, in->path);
                return -1;
            case CLI_APART: break;
            }
        }
        for (int j = 0; j < k; j++) {
            if (!outputs[j].path) continue;
            cli_relation r = cli_outputs_relation(o->path, outputs[j].path);
            if (r == CLI_SAME) {
                cli_err(err, "%s %s and %s %s are the same %s; give each output its own name",
                        outputs[j].option, outputs[j].path, o->option, o->path,
                        swi_store_kind_of(o->path) == SWI_STORE_HDF5 ? "dataset" : "file");
                return -1;
            }
            if (r != CLI_APART) {
                const cli_named_path *inner = r == CLI_INSIDE ? o : &outputs[j];
                const cli_named_path *outer = r == CLI_INSIDE ? &outputs[j] : o;
                cli_err(err, "%s %s lies inside %s %s; give each output its own place", inner->option,
                        inner->path, outer->option, outer->path);
                return -1;
            }
        }
    }
    return 0;
}
