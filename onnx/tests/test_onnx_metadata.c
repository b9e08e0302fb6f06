/*
 * test_onnx_metadata.c -- ox_read_metadata on the bundled model (no metadata_props), on
 * copies of it that carry entries (written with onnx_save), and on files that are not
 * ONNX models.
 *
 *   test_onnx_metadata MODEL.onnx WORKDIR
 */
#include "onnx_io.h"
#include "onnx_metadata.h"

#include "check.h"

#include <errno.h>
#include <setjmp.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

static char err[512];

/* ox_read_metadata(path, key): its return, the value (or NULL) in *got. */
static int lookup(const char *path, const char *key, char **got) {
    err[0] = '\0';
    return ox_read_metadata(path, key, got, err, sizeof err);
}

/* `model` with the entries keys[i] = values[i] appended, saved as `out`. 0 on success. */
static int with_metadata(const char *model, const char *out, int n, const char *const *keys,
                         const char *const *values) {
    arena A;
    jmp_buf oom;
    arena_init(&A, &oom);
    if (setjmp(oom)) {
        fprintf(stderr, "out of memory building %s\n", out);
        arena_free(&A);
        return 1;
    }
    Onnx__ModelProto *m = onnx_load(&A, model, err, sizeof err);
    if (!m) {
        fprintf(stderr, "%s\n", err);
        arena_free(&A);
        return 1;
    }
    Onnx__StringStringEntryProto **props = arena_alloc(&A, (m->n_metadata_props + (size_t)n) * sizeof *props);
    if (m->n_metadata_props) memcpy(props, m->metadata_props, m->n_metadata_props * sizeof *props);
    for (int i = 0; i < n; i++) {
        Onnx__StringStringEntryProto *e = arena_alloc(&A, sizeof *e);
        onnx__string_string_entry_proto__init(e);
        e->key = arena_strdup(&A, keys[i]);
        e->value = arena_strdup(&A, values[i]);
        props[m->n_metadata_props + (size_t)i] = e;
    }
    m->metadata_props = props;
    m->n_metadata_props += (size_t)n;
    int rc = onnx_save(m, out, err, sizeof err, NULL);
    if (rc) fprintf(stderr, "%s\n", err);
    arena_free(&A);
    return rc != 0;
}

static int write_text(const char *path, const char *text) {
    FILE *f = fopen(path, "wb");
    if (!f) return 1;
    size_t n = strlen(text);
    int bad = fwrite(text, 1, n, f) != n;
    return fclose(f) != 0 || bad;
}

int main(int argc, char **argv) {
    if (argc != 3) {
        fprintf(stderr, "usage: test_onnx_metadata MODEL.onnx WORKDIR\n");
        return 2;
    }
    const char *model = argv[1], *work = argv[2];
    if (mkdir(work, 0755) != 0 && errno != EEXIST) {
        fprintf(stderr, "%s: %s\n", work, strerror(errno));
        return 2;
    }
    char path[4096];
    char *v = (char *)"unset";

    /* the bundled model has no metadata_props */
    CHECK(lookup(model, "swi.card", &v) == 0, "%s: %s", model, err);
    CHECK(v == NULL, "no entry, yet a value");

    /* entries found by key, the first of two equal keys, an empty value */
    static const char *const keys[] = {"producer.note", "swi.card", "swi.card", "empty"};
    static const char *const values[] = {"x", "{\"roi\": [16, 16, 16]}", "{\"second\": 1}", ""};
    snprintf(path, sizeof path, "%s/with_card.onnx", work);
    CHECK(with_metadata(model, path, 4, keys, values) == 0, "cannot write %s", path);
    CHECK(lookup(path, "swi.card", &v) == 1, "%s: %s", path, err);
    CHECK(v && strcmp(v, values[1]) == 0, "swi.card = '%s'", v ? v : "(null)");
    free(v);
    CHECK(lookup(path, "producer.note", &v) == 1 && v && strcmp(v, "x") == 0, "producer.note: %s", err);
    free(v);
    CHECK(lookup(path, "empty", &v) == 1 && v && v[0] == '\0', "empty: %s", err);
    free(v);
    CHECK(lookup(path, "swi.car", &v) == 0 && v == NULL, "a key's prefix matched");
    CHECK(lookup(path, "", &v) == 0 && v == NULL, "the empty key matched");

    /* files that are not ONNX models: -1, a message, no value */
    struct {
        const char *name, *text, *says;
    } bad[] = {
        {"empty.onnx", "", "the file is empty"},
        {"text.onnx", "{\"roi\": 96}\n", "is not an ONNX model"},
        {"missing.onnx", NULL, "cannot open"},
        {".", NULL, "not a regular file"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        snprintf(path, sizeof path, "%s/%s", work, bad[i].name);
        if (bad[i].text) CHECK(write_text(path, bad[i].text) == 0, "cannot write %s", path);
        if (!bad[i].text && strcmp(bad[i].name, ".") != 0) remove(path);
        v = (char *)"unset";
        CHECK(lookup(path, "swi.card", &v) == -1, "%s: not refused", path);
        CHECK(v == NULL, "%s: a value on failure", path);
        CHECK(strstr(err, bad[i].says) != NULL, "%s: '%s' does not say '%s'", path, err, bad[i].says);
    }
    return check_report("test_onnx_metadata");
}
