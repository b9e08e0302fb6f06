/*
 * case_file.c -- parser for golden case.txt files and loader for raw float32 tensors.
 *
 * The parser is deliberately defensive: the runner is also pointed at case folders it
 * has never seen, so every value is range-checked, every size product overflow-checked,
 * and anything unexpected becomes a message rather than a crash.
 */
#include "case_file.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CASE_TXT_MAX_BYTES (1 << 20)
#define MAX_TOKENS 16
#define MAX_LINE_KEYS 64

static void set_why(char *why, size_t why_len, const char *fmt, ...) {
    va_list ap;
    if (why == NULL || why_len == 0) return;
    va_start(ap, fmt);
    vsnprintf(why, why_len, fmt, ap);
    va_end(ap);
}

int64_t golden_count(const int64_t *shape, int n) {
    int64_t total = 1;
    for (int i = 0; i < n; i++) {
        if (shape[i] <= 0 || total > INT64_MAX / shape[i]) return -1;
        total *= shape[i];
    }
    return total;
}

int64_t golden_case_window(const golden_case *gc, int k) {
    return gc->roi[k] <= 0 ? gc->image_size[k] : gc->roi[k];
}

/* ---- tokens ------------------------------------------------------------- */

static int parse_i64(const char *tok, int64_t lo, int64_t hi, int64_t *out) {
    char *end;
    errno = 0;
    long long v = strtoll(tok, &end, 10);
    if (errno != 0 || end == tok || *end != '\0' || v < lo || v > hi) return -1;
    *out = (int64_t)v;
    return 0;
}

static int parse_f64(const char *tok, double *out) {
    char *end;
    errno = 0;
    double v = strtod(tok, &end);
    if (end == tok || *end != '\0' || !isfinite(v)) return -1;
    *out = v;
    return 0;
}

/* One line of case.txt: key and value tokens (pointers into the file buffer). */
typedef struct case_line {
    const char *key;
    const char *val[MAX_TOKENS];
    int n_val;
    int too_many;
    int line_no;
} case_line;

typedef struct case_lines {
    case_line line[MAX_LINE_KEYS];
    int n;
} case_lines;

/* The last line with this key, or NULL. Duplicate keys are reported by the caller. */
static const case_line *find_key(const case_lines *cl, const char *key, int *count) {
    const case_line *found = NULL;
    int c = 0;
    for (int i = 0; i < cl->n; i++) {
        if (strcmp(cl->line[i].key, key) == 0) {
            found = &cl->line[i];
            c++;
        }
    }
    if (count != NULL) *count = c;
    return found;
}

static int is_space(char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\v' || c == '\f'; }

/* Split the buffer in place into lines and tokens. */
static int split_lines(char *buf, case_lines *cl, char *why, size_t why_len) {
    int line_no = 0;
    char *p = buf;
    cl->n = 0;
    while (*p != '\0') {
        char *eol = strchr(p, '\n');
        char *next = eol != NULL ? eol + 1 : p + strlen(p);
        if (eol != NULL) *eol = '\0';
        line_no++;
        char *tok[MAX_TOKENS + 2];
        int nt = 0, too_many = 0;
        char *q = p;
        for (;;) {
            while (*q != '\0' && is_space(*q)) q++;
            if (*q == '\0' || *q == '#') break;
            char *start = q;
            while (*q != '\0' && !is_space(*q)) q++;
            int last = (*q == '\0');
            *q = '\0';
            if (nt < MAX_TOKENS + 1)
                tok[nt++] = start;
            else
                too_many = 1;
            if (last) break;
            q++;
        }
        p = next;
        if (nt == 0) continue;
        if (cl->n == MAX_LINE_KEYS) {
            set_why(why, why_len, "case.txt: more than %d lines with keys", MAX_LINE_KEYS);
            return -1;
        }
        case_line *l = &cl->line[cl->n++];
        l->key = tok[0];
        l->n_val = nt - 1 > MAX_TOKENS ? MAX_TOKENS : nt - 1;
        l->too_many = too_many || nt - 1 > MAX_TOKENS;
        l->line_no = line_no;
        for (int i = 0; i < l->n_val; i++) l->val[i] = tok[i + 1];
    }
    return 0;
}

/* ---- typed values -------------------------------------------------------- */

typedef struct parser {
    const case_lines *cl;
    char *why;
    size_t why_len;
} parser;

/* Fetch a key that must appear at most once. *l = NULL when absent. */
static int get_line(parser *ps, const char *key, int required, const case_line **l) {
    int count;
    *l = find_key(ps->cl, key, &count);
    if (count > 1) {
        set_why(ps->why, ps->why_len, "case.txt: key '%s' appears %d times", key, count);
        return -1;
    }
    if (*l == NULL && required) {
        set_why(ps->why, ps->why_len, "case.txt: missing key '%s'", key);
        return -1;
    }
    if (*l != NULL && (*l)->too_many) {
        set_why(ps->why, ps->why_len, "case.txt line %d: too many values for '%s'", (*l)->line_no, key);
        return -1;
    }
    return 0;
}

static int get_int(parser *ps, const char *key, int required, int64_t lo, int64_t hi, int64_t *out) {
    const case_line *l;
    if (get_line(ps, key, required, &l) != 0) return -1;
    if (l == NULL) return 0;
    if (l->n_val != 1 || parse_i64(l->val[0], lo, hi, out) != 0) {
        set_why(ps->why, ps->why_len, "case.txt line %d: '%s' needs one integer in [%lld, %lld]", l->line_no,
                key, (long long)lo, (long long)hi);
        return -1;
    }
    return 0;
}

/* Per-dim integers: exactly `dims` values, or (when broadcast) one value for every dim. */
static int get_ints_per_dim(parser *ps, const char *key, int required, int dims, int broadcast, int64_t lo,
                            int64_t hi, int64_t *out) {
    const case_line *l;
    if (get_line(ps, key, required, &l) != 0) return -1;
    if (l == NULL) return 0;
    if (l->n_val != dims && !(broadcast && l->n_val == 1)) goto bad;
    for (int k = 0; k < dims; k++)
        if (parse_i64(l->val[l->n_val == 1 ? 0 : k], lo, hi, &out[k]) != 0) goto bad;
    return 0;
bad:
    set_why(ps->why, ps->why_len, "case.txt line %d: '%s' needs %d integer(s) in [%lld, %lld]", l->line_no,
            key, dims, (long long)lo, (long long)hi);
    return -1;
}

static int get_doubles_per_dim(parser *ps, const char *key, int dims, double lo, double hi, int hi_open,
                               double *out) {
    const case_line *l;
    if (get_line(ps, key, 0, &l) != 0) return -1;
    if (l == NULL) return 0;
    if (l->n_val != dims && l->n_val != 1) goto bad;
    for (int k = 0; k < dims; k++) {
        double v;
        if (parse_f64(l->val[l->n_val == 1 ? 0 : k], &v) != 0 || v < lo || v > hi || (hi_open && v == hi))
            goto bad;
        out[k] = v;
    }
    return 0;
bad:
    set_why(ps->why, ps->why_len, "case.txt line %d: '%s' needs %d number(s) in [%g, %g%c", l->line_no, key,
            dims, lo, hi, hi_open ? ')' : ']');
    return -1;
}

/* A key whose single value is one of `names`; *out = its index. */
static int get_word(parser *ps, const char *key, int required, const char *const *names, int n_names,
                    int *out) {
    const case_line *l;
    if (get_line(ps, key, required, &l) != 0) return -1;
    if (l == NULL) return 0;
    if (l->n_val == 1) {
        for (int i = 0; i < n_names; i++) {
            if (strcmp(l->val[0], names[i]) == 0) {
                *out = i;
                return 0;
            }
        }
    }
    set_why(ps->why, ps->why_len, "case.txt line %d: unknown %s '%s'", l->line_no, key,
            l->n_val >= 1 ? l->val[0] : "");
    return -1;
}

/* Output size of a head whose window output is o for window r (README step 8, as
 * MONAI computes it: buffer floor(P*z), crop by round() -- half to even -- only when
 * some dim is padded). */
static int64_t zoomed_out_size(int64_t size, int64_t r, int64_t o, int any_pad) {
    int64_t padded = size > r ? size : r;
    int64_t before = (padded - size) / 2;
    double z = (double)o / (double)r;
    int64_t buffer = (int64_t)((double)padded * z);
    if (!any_pad) return buffer;
    double zc = (double)buffer / (double)padded;
    int64_t lo = (int64_t)nearbyint((double)before * zc);
    int64_t hi = (int64_t)nearbyint((double)(before + size) * zc);
    if (hi > buffer) hi = buffer;
    if (lo < 0) lo = 0;
    return hi - lo;
}

int golden_case_parse(const char *path, golden_case *gc, char *why, size_t why_len) {
    static const char *const predictor_names[] = {"affine", "box", "coord", "down2", "pair"};
    static const char *const mode_names[] = {"constant", "gaussian", "gaussian_nnunet"};
    static const char *const grid_names[] = {"monai", "nnunet"};
    static const char *const pad_names[] = {"constant", "reflect", "replicate", "circular"};
    int rc = -1;
    char *buf = NULL;
    case_lines *cl = NULL;
    FILE *f = fopen(path, "rb");

    memset(gc, 0, sizeof(*gc));
    if (f == NULL) {
        set_why(why, why_len, "cannot open %s: %s", path, strerror(errno));
        return -1;
    }
    buf = malloc(CASE_TXT_MAX_BYTES + 1);
    cl = malloc(sizeof(*cl));
    if (buf == NULL || cl == NULL) {
        set_why(why, why_len, "out of memory");
        goto done;
    }
    size_t n = fread(buf, 1, CASE_TXT_MAX_BYTES + 1, f);
    if (ferror(f)) {
        set_why(why, why_len, "cannot read %s", path);
        goto done;
    }
    if (n > CASE_TXT_MAX_BYTES) {
        set_why(why, why_len, "%s is larger than %d bytes", path, CASE_TXT_MAX_BYTES);
        goto done;
    }
    if (memchr(buf, '\0', n) != NULL) {
        set_why(why, why_len, "%s contains NUL bytes", path);
        goto done;
    }
    buf[n] = '\0';
    if (split_lines(buf, cl, why, why_len) != 0) goto done;

    parser ps = {cl, why, why_len};
    int64_t v;
    int w;

    if (get_int(&ps, "dims", 1, 1, SWI_MAX_DIMS, &v) != 0) goto done;
    gc->dims = (int)v;
    int d = gc->dims;
    if (get_int(&ps, "batch", 1, 1, INT64_MAX, &gc->batch) != 0 ||
        get_int(&ps, "in_channels", 1, 1, INT64_MAX, &gc->in_channels) != 0 ||
        get_ints_per_dim(&ps, "image_size", 1, d, 0, 1, INT64_MAX, gc->image_size) != 0 ||
        get_ints_per_dim(&ps, "roi_size", 1, d, 1, INT64_MIN, INT64_MAX, gc->roi) != 0)
        goto done;

    v = 1;
    if (get_int(&ps, "sw_batch_size", 0, 1, 1 << 30, &v) != 0) goto done;
    gc->sw_batch_size = (int)v;

    for (int k = 0; k < d; k++) {
        gc->overlap[k] = 0.25;
        gc->sigma_scale[k] = 0.125;
    }
    if (get_doubles_per_dim(&ps, "overlap", d, 0.0, 1.0, 1, gc->overlap) != 0 ||
        get_doubles_per_dim(&ps, "sigma_scale", d, 0.0, HUGE_VAL, 0, gc->sigma_scale) != 0)
        goto done;
    for (int k = 0; k < d; k++) {
        if (!(gc->sigma_scale[k] > 0.0)) {
            set_why(why, why_len, "case.txt: sigma_scale must be > 0");
            goto done;
        }
    }

    w = 0;
    if (get_word(&ps, "mode", 0, mode_names, 3, &w) != 0) goto done;
    gc->mode = w == 1 ? SWI_BLEND_GAUSSIAN : w == 2 ? SWI_BLEND_GAUSSIAN_NNUNET : SWI_BLEND_CONSTANT;
    w = 0;
    if (get_word(&ps, "grid", 0, grid_names, 2, &w) != 0) goto done;
    gc->grid = w == 1 ? SWI_GRID_NNUNET : SWI_GRID_MONAI;
    for (int k = 0; k < d; k++) gc->tile_step[k] = 0.0;
    if (get_doubles_per_dim(&ps, "tile_step", d, 0.0, 1.0, 0, gc->tile_step) != 0) goto done;
    for (int k = 0; k < d; k++) {
        if (gc->tile_step[k] != 0.0 && gc->grid != SWI_GRID_NNUNET) {
            set_why(why, why_len, "case.txt: tile_step needs grid nnunet");
            goto done;
        }
    }
    w = 0;
    if (get_word(&ps, "padding_mode", 0, pad_names, 4, &w) != 0) goto done;
    gc->padding = w == 1   ? SWI_PAD_REFLECT
                  : w == 2 ? SWI_PAD_REPLICATE
                  : w == 3 ? SWI_PAD_CIRCULAR
                           : SWI_PAD_CONSTANT;

    const case_line *l;
    gc->cval = 0.0f;
    if (get_line(&ps, "cval", 0, &l) != 0) goto done;
    if (l != NULL) {
        double cv;
        if (l->n_val != 1 || parse_f64(l->val[0], &cv) != 0 || fabs(cv) > 3.4e38) {
            set_why(why, why_len, "case.txt line %d: 'cval' needs one finite number", l->line_no);
            goto done;
        }
        gc->cval = (float)cv;
    }

    if (get_word(&ps, "predictor", 1, predictor_names, 5, &w) != 0) goto done;
    gc->predictor = (golden_predictor_kind)w;
    /* Channels end up in int64 products and uint16 labels; keep them sane. */
    if (get_int(&ps, "out_channels", 1, 1, 1 << 20, &gc->out_channels) != 0) goto done;

    gc->n_heads = gc->predictor == GOLDEN_PAIR ? 2 : 1;
    gc->head_channels[0] = gc->out_channels;
    if (gc->n_heads == 2) gc->head_channels[1] = gc->out_channels + 1;
    v = gc->n_heads;
    if (get_int(&ps, "outputs", 0, 1, SWI_MAX_HEADS, &v) != 0) goto done;
    if (v != gc->n_heads) {
        set_why(why, why_len, "case.txt: outputs %lld, but predictor %s has %d head(s)", (long long)v,
                predictor_names[gc->predictor], gc->n_heads);
        goto done;
    }

    /* Sizes the run will touch must fit: input, padded image, every output. */
    int64_t in_shape[2 + SWI_MAX_DIMS] = {gc->batch, gc->in_channels};
    int64_t pad_shape[2 + SWI_MAX_DIMS] = {gc->batch, gc->in_channels};
    int any_pad = 0;
    for (int k = 0; k < d; k++) {
        int64_t r = golden_case_window(gc, k);
        in_shape[2 + k] = gc->image_size[k];
        pad_shape[2 + k] = r > gc->image_size[k] ? r : gc->image_size[k];
        any_pad |= r > gc->image_size[k];
    }
    if (golden_count(in_shape, 2 + d) < 0 || golden_count(pad_shape, 2 + d) < 0 ||
        golden_count(in_shape, 2 + d) > INT64_MAX / 8 || golden_count(pad_shape, 2 + d) > INT64_MAX / 8) {
        set_why(why, why_len, "case.txt: image size overflows");
        goto done;
    }

    for (int h = 0; h < gc->n_heads; h++) {
        int64_t *s = gc->shape[h];
        s[0] = gc->batch;
        s[1] = gc->head_channels[h];
        for (int k = 0; k < d; k++) {
            int64_t r = golden_case_window(gc, k);
            if (gc->predictor == GOLDEN_DOWN2) {
                if (r < 2) {
                    set_why(why, why_len, "case.txt: down2 needs a window of at least 2");
                    goto done;
                }
                s[2 + k] = zoomed_out_size(gc->image_size[k], r, r / 2, any_pad);
            } else {
                s[2 + k] = gc->image_size[k];
            }
        }
        char key[32];
        snprintf(key, sizeof(key), "output%d_shape", h);
        if (get_line(&ps, key, 0, &l) != 0) goto done;
        if (l != NULL) {
            int64_t given[2 + SWI_MAX_DIMS];
            if (l->n_val != 2 + d) goto bad_shape;
            for (int i = 0; i < 2 + d; i++)
                if (parse_i64(l->val[i], 1, INT64_MAX, &given[i]) != 0) goto bad_shape;
            if (given[0] != gc->batch || given[1] != gc->head_channels[h]) {
                set_why(why, why_len,
                        "case.txt: %s is [%lld, %lld, ...] but batch is %lld and head %d has "
                        "%lld channels",
                        key, (long long)given[0], (long long)given[1], (long long)gc->batch, h,
                        (long long)gc->head_channels[h]);
                goto done;
            }
            memcpy(s, given, sizeof(given[0]) * (size_t)(2 + d));
            continue;
        bad_shape:
            set_why(why, why_len, "case.txt line %d: '%s' needs %d positive integers", l->line_no, key,
                    2 + d);
            goto done;
        }
    }
    for (int h = 0; h < gc->n_heads; h++) {
        if (golden_count(gc->shape[h], 2 + d) < 0 || golden_count(gc->shape[h], 2 + d) > INT64_MAX / 8) {
            set_why(why, why_len, "case.txt: head %d output size overflows", h);
            goto done;
        }
    }
    rc = 0;
done:
    free(cl);
    free(buf);
    fclose(f);
    return rc;
}

int golden_load_f32(const char *path, int64_t count, float **out, char *why, size_t why_len) {
    *out = NULL;
    if (count <= 0 || (uint64_t)count > SIZE_MAX / sizeof(float)) {
        set_why(why, why_len, "%s: element count %lld does not fit in memory", path, (long long)count);
        return -1;
    }
    FILE *f = fopen(path, "rb");
    if (f == NULL) {
        set_why(why, why_len, "cannot open %s: %s", path, strerror(errno));
        return -1;
    }
    size_t want = (size_t)count * sizeof(float);
    unsigned char *bytes = malloc(want);
    if (bytes == NULL) {
        fclose(f);
        set_why(why, why_len, "%s: cannot allocate %zu bytes", path, want);
        return -1;
    }
    size_t got = fread(bytes, 1, want, f);
    int extra = got == want && fgetc(f) != EOF;
    int err = ferror(f);
    fclose(f);
    if (err || got != want || extra) {
        free(bytes);
        if (err)
            set_why(why, why_len, "cannot read %s", path);
        else
            set_why(why, why_len, "%s has %s bytes, expected %zu for %lld float32 values", path,
                    extra ? "more than the expected" : "fewer", want, (long long)count);
        return -1;
    }
    float *vals = (float *)(void *)bytes;
    /* The files are little-endian; swap on a big-endian host. */
    const uint16_t probe = 1;
    if (*(const unsigned char *)&probe == 0) {
        for (size_t i = 0; i < want; i += 4) {
            unsigned char t0 = bytes[i], t1 = bytes[i + 1];
            bytes[i] = bytes[i + 3];
            bytes[i + 1] = bytes[i + 2];
            bytes[i + 2] = t1;
            bytes[i + 3] = t0;
        }
    }
    *out = vals;
    return 0;
}
