/* onnx_metadata.c -- see onnx_metadata.h. */
#include "onnx_metadata.h"

#include "onnx_io.h"

#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct reading {
    arena A;
    jmp_buf oom; /* on the heap: what a longjmp comes back to stays defined */
} reading;

int ox_read_metadata(const char *path, const char *key, char **value, char *err, size_t errlen) {
    *value = NULL;
    reading *r = calloc(1, sizeof *r);
    if (!r) {
        snprintf(err, errlen, "out of memory reading %s", path);
        return -1;
    }
    arena_init(&r->A, &r->oom);
    int rc = -1;
    if (setjmp(r->oom)) {
        snprintf(err, errlen, "out of memory reading %s", path);
        goto out;
    }
    Onnx__ModelProto *m = onnx_load(&r->A, path, err, errlen);
    if (!m) goto out;
    rc = 0;
    for (size_t i = 0; i < m->n_metadata_props; i++) {
        const Onnx__StringStringEntryProto *e = m->metadata_props[i];
        if (!e->key || strcmp(e->key, key) != 0) continue;
        const char *v = e->value ? e->value : "";
        size_t n = strlen(v);
        *value = malloc(n + 1);
        if (!*value) {
            snprintf(err, errlen, "out of memory reading %s", path);
            rc = -1;
            break;
        }
        memcpy(*value, v, n + 1);
        rc = 1;
        break;
    }
out:
    arena_free(&r->A);
    free(r);
    return rc;
}
