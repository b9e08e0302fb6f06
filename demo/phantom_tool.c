/*
 * swi-phantom -- write a synthetic phantom (demo/phantom.h) as raw files.
 *
 *   swi-phantom --seed S --size N[,N,N] --image out.f32 --labels out.u8
 *
 * The image is float32 and the labels uint8, both C order (last axis fastest),
 * native byte order, no header. Exit status: 0 success, 1 I/O or memory
 * error, 2 usage error.
 */
#include "phantom.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *usage_text =
    "usage: swi-phantom --seed S --size N[,N,N] --image OUT.f32 --labels OUT.u8\n"
    "\n"
    "Write a deterministic synthetic 3D phantom: a float32 image and its uint8\n"
    "label map (0 background, 1 blobs, 2 tubes, 3 shells and bright spheres),\n"
    "raw, C order (last axis fastest), native byte order.\n"
    "\n"
    "  --seed S          unsigned 64-bit seed; the same seed gives the same bytes\n"
    "  --size N[,N,N]    volume size, each axis >= 16 (one value: a cube)\n"
    "  --image FILE      float32 output\n"
    "  --labels FILE     uint8 output\n"
    "\n"
    "example: swi-phantom --seed 7 --size 80,96,96 --image p.f32 --labels p.u8\n";

static int usage_error(const char *msg, const char *arg) {
    if (arg)
        fprintf(stderr, "swi-phantom: %s: '%s'\n", msg, arg);
    else
        fprintf(stderr, "swi-phantom: %s\n", msg);
    fprintf(stderr, "try 'swi-phantom --help'\n");
    return 2;
}

static int parse_u64(const char *s, uint64_t *out) {
    if (!s || !*s || *s == '-' || *s == '+') return -1;
    char *end;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 0);
    if (errno || *end) return -1;
    *out = (uint64_t)v;
    return 0;
}

static int parse_size(const char *s, int64_t size[3]) {
    int64_t v[3];
    int n = 0;
    const char *p = s;
    for (;;) {
        if (n == 3 || *p < '0' || *p > '9') return -1;
        char *end;
        errno = 0;
        long long x = strtoll(p, &end, 10);
        if (errno || x < 16 || x > 65536) return -1;
        v[n++] = (int64_t)x;
        if (*end == '\0') break;
        if (*end != ',') return -1;
        p = end + 1;
    }
    if (n == 2) return -1;
    for (int a = 0; a < 3; a++) size[a] = n == 1 ? v[0] : v[a];
    return 0;
}

static int write_file(const char *path, const void *data, size_t bytes) {
    FILE *f = fopen(path, "wb");
    if (!f) {
        fprintf(stderr, "swi-phantom: %s: %s\n", path, strerror(errno));
        return -1;
    }
    size_t w = fwrite(data, 1, bytes, f);
    int err = w != bytes || ferror(f);
    if (fclose(f) != 0) err = 1;
    if (err) {
        fprintf(stderr, "swi-phantom: %s: write failed\n", path);
        remove(path);
        return -1;
    }
    return 0;
}

int main(int argc, char **argv) {
    uint64_t seed = 0;
    int64_t size[3] = {0, 0, 0};
    const char *image_path = NULL, *labels_path = NULL;
    int have_seed = 0, have_size = 0;

    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            fputs(usage_text, stdout);
            return 0;
        }
        if (strcmp(a, "--seed") && strcmp(a, "--size") && strcmp(a, "--image") && strcmp(a, "--labels"))
            return usage_error("unknown argument", a);
        if (i + 1 >= argc) return usage_error("missing value after", a);
        const char *v = argv[++i];
        if (!strcmp(a, "--seed")) {
            if (parse_u64(v, &seed)) return usage_error("--seed needs an unsigned 64-bit integer, got", v);
            have_seed = 1;
        } else if (!strcmp(a, "--size")) {
            if (parse_size(v, size))
                return usage_error("--size needs N or N,N,N with 16 <= N <= 65536, got", v);
            have_size = 1;
        } else if (!strcmp(a, "--image")) {
            if (!*v) return usage_error("--image needs a file name", NULL);
            image_path = v;
        } else {
            if (!*v) return usage_error("--labels needs a file name", NULL);
            labels_path = v;
        }
    }
    if (!have_seed) return usage_error("--seed is required", NULL);
    if (!have_size) return usage_error("--size is required", NULL);
    if (!image_path) return usage_error("--image is required", NULL);
    if (!labels_path) return usage_error("--labels is required", NULL);

    size_t total = 1;
    for (int a = 0; a < 3; a++) {
        if ((size_t)size[a] > SIZE_MAX / sizeof(float) / total) {
            fprintf(stderr, "swi-phantom: size %" PRId64 ",%" PRId64 ",%" PRId64 " too large\n", size[0],
                    size[1], size[2]);
            return 1;
        }
        total *= (size_t)size[a];
    }
    float *image = malloc(total * sizeof(float));
    uint8_t *labels = malloc(total);
    if (!image || !labels) {
        fprintf(stderr, "swi-phantom: out of memory for %zu voxels\n", total);
        free(image);
        free(labels);
        return 1;
    }
    int rc = 0;
    if (swi_phantom_generate(seed, size, image, labels) != 0) {
        fprintf(stderr, "swi-phantom: cannot generate a phantom of that size\n");
        rc = 1;
    } else if (write_file(image_path, image, total * sizeof(float))) {
        rc = 1;
    } else if (write_file(labels_path, labels, total)) {
        remove(image_path); /* no half-written pair */
        rc = 1;
    }
    free(image);
    free(labels);
    return rc;
}
