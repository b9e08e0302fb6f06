/*
 * cmd_demo.c -- `swi demo`: segment a phantom the bundled model has never seen.
 *
 * The phantom comes from demo/phantom.c (the generator the training script
 * tools/train_demo.py used, with seeds 0..63); the demo's seed 1000000 is outside
 * the training seeds. The phantom is written as a NIfTI file and segmented through
 * the same path as `swi segment` (file in, file out), then scored against its truth.
 */
#include "cli.h"

#include "signals.h"
#include "swi_io.h"
#include "util.h"

#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "termtext.h"

#ifdef SWI_HAVE_PHANTOM
#include "phantom.h"
#endif

/* The bundled network: an installed tree's (cli/CMakeLists.txt: share/swi/models relative
 * to bin/), else the source tree's. */
#ifndef SWI_DEMO_MODEL
#define SWI_DEMO_MODEL "models/demo.onnx"
#endif
#ifndef SWI_DEMO_MODEL_REL
#define SWI_DEMO_MODEL_REL "../share/swi/models/demo.onnx"
#endif

/* The installed copy beside this program into buf, or the build-time path. */
static const char *demo_model(char *buf, size_t n) {
    char exe[PATH_MAX];
    ssize_t len = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (len > 0) {
        exe[len] = '\0';
        char *slash = strrchr(exe, '/');
        if (slash) *slash = '\0';
        struct stat st;
        int w = snprintf(buf, n, "%s/%s", exe, SWI_DEMO_MODEL_REL);
        if (w > 0 && (size_t)w < n && stat(buf, &st) == 0 && S_ISREG(st.st_mode)) return buf;
    }
    return SWI_DEMO_MODEL;
}

static const char DEMO_HELP[] =
    "usage: swi demo [--output-dir DIR] [--model M.onnx] [--seed N] [--size I,J,K]\n"
    "                [--threads N] [-q]\n"
    "\n"
    "Generate a synthetic phantom the bundled network never saw in training, segment it\n"
    "with models/demo.onnx exactly as `swi segment` would (roi 32, overlap 0.25, gaussian\n"
    "blending, 4 windows per call), print the Dice of every class against the phantom's\n"
    "truth, and write:\n"
    "  DIR/demo_image.nii.gz    the phantom\n"
    "  DIR/demo_truth.nii.gz    its true labels\n"
    "  DIR/demo_labels.nii.gz   swi's labels\n"
    "  DIR/demo_preview.png     three mid-slices with swi's labels overlaid\n"
    "\n"
    "Examples:\n"
    "  swi demo                              # writes into ./out\n"
    "  swi demo --output-dir /tmp/demo --seed 1000001\n"
    "  swi demo --size 128,128,96 --threads 2\n"
    "\n"
    "Options:\n"
    "  --output-dir DIR   where to write (default out; created if missing)\n"
    "  --model FILE       the network (default: the bundled models/demo.onnx)\n"
    "  --seed N           phantom seed (default 1000000; training used 0..63)\n"
    "  --size I,J,K       phantom size, each >= 16 (default 80,96,96)\n"
    "  --threads N        threads (default: all cores)\n"
    "  -q, --quiet        no progress bar\n";

#ifndef SWI_HAVE_PHANTOM
int swi_cmd_demo(int argc, char **argv) {
    if (argc > 1 && (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0)) {
        fputs(DEMO_HELP, stdout);
        return 0;
    }
    fprintf(stderr, "swi demo: this swi was built without the phantom generator "
                    "(demo/phantom.c); rebuild with it\n");
    return 1;
}
#else

/* Write a generated volume ([ni][nj][nk], C order) as a job writes its outputs. */
static int write_volume(const char *path, const swi_volume *like, const void *data, swi_dtype type,
                        swi_io_kind kind, int64_t classes, char *err) {
    const swi_io_cancel cancel = {cli_interrupted_cb, NULL};
    return swi_job_write_volume(path, 1, like, data, type, kind, 1, classes, &cancel, err, SWI_ERRLEN) !=
           SWI_OK;
}

int swi_cmd_demo(int argc, char **argv) {
    const char *who = "swi demo";
    const char *dir = "out";
    char installed[PATH_MAX];
    const char *model = demo_model(installed, sizeof installed);
    uint64_t seed = 1000000;
    int64_t size[3] = {80, 96, 96};
    int threads = 0, quiet = 0;
    static const struct option opts[] = {
        {"output-dir", required_argument, NULL, 'o'},
        {"model", required_argument, NULL, 'm'},
        {"seed", required_argument, NULL, 's'},
        {"size", required_argument, NULL, 'z'},
        {"threads", required_argument, NULL, 't'},
        {"quiet", no_argument, NULL, 'q'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    opterr = 0;
    optind = 0;
    int c;
    while ((c = getopt_long(argc, argv, ":qh", opts, NULL)) != -1) {
        int64_t v;
        switch (c) {
        case 'h': fputs(DEMO_HELP, stdout); return 0;
        case 'q': quiet = 1; break;
        case 'o': dir = optarg; break;
        case 'm': model = optarg; break;
        case 's':
            if (cli_parse_i64(optarg, 0, INT64_MAX, &v)) {
                fprintf(stderr, "%s: --seed '%s': give a whole number >= 0 (see '%s --help')\n", who,
                        TERM_TEXT(optarg), who);
                return 2;
            }
            seed = (uint64_t)v;
            break;
        case 'z': {
            int n = cli_parse_i64_list(optarg, size, 3);
            if (n == 1) size[1] = size[2] = size[0];
            if ((n != 1 && n != 3) || size[0] < 16 || size[1] < 16 || size[2] < 16 || size[0] > 1024 ||
                size[1] > 1024 || size[2] > 1024) {
                fprintf(stderr, "%s: --size '%s': give I,J,K, each 16..1024 (see '%s --help')\n", who,
                        TERM_TEXT(optarg), who);
                return 2;
            }
            break;
        }
        case 't':
            if (cli_parse_i64(optarg, 0, 1024, &v)) {
                fprintf(stderr, "%s: --threads '%s': give 0..1024 (see '%s --help')\n", who,
                        TERM_TEXT(optarg), who);
                return 2;
            }
            threads = (int)v;
            break;
        case ':':
            fprintf(stderr, "%s: option '%s' needs a value (see '%s --help')\n", who,
                    TERM_TEXT(argv[optind - 1]), who);
            return 2;
        default:
            fprintf(stderr, "%s: unknown option '%s' (see '%s --help')\n", who, TERM_TEXT(argv[optind - 1]),
                    who);
            return 2;
        }
    }
    if (optind < argc) {
        fprintf(stderr, "%s: unexpected argument '%s' (see '%s --help')\n", who, TERM_TEXT(argv[optind]),
                who);
        return 2;
    }
    if (cli_signals_start() != 0) {
        fprintf(stderr, "%s: cannot set up signal handling\n", who);
        return 1;
    }
    struct stat st;
    if (stat(model, &st) != 0) {
        fprintf(stderr,
                "%s: %s: the demo model is missing (%s); train it with "
                "tools/train_demo.py or pass --model\n",
                who, model, strerror(errno));
        return 1;
    }
    if (mkdir(dir, 0777) != 0 && errno != EEXIST) {
        fprintf(stderr, "%s: %s: cannot create the directory: %s\n", who, TERM_TEXT(dir), strerror(errno));
        return 1;
    }
    if (strlen(dir) > 3900) {
        fprintf(stderr, "%s: %s: path too long\n", who, TERM_TEXT(dir));
        return 1;
    }
    char img_path[4096], truth_path[4096], lab_path[4096], png_path[4096], err[SWI_ERRLEN];
    snprintf(img_path, sizeof img_path, "%s/demo_image.nii.gz", dir);
    snprintf(truth_path, sizeof truth_path, "%s/demo_truth.nii.gz", dir);
    snprintf(lab_path, sizeof lab_path, "%s/demo_labels.nii.gz", dir);
    snprintf(png_path, sizeof png_path, "%s/demo_preview.png", dir);

    const int64_t N = size[0] * size[1] * size[2];
    float *image = malloc((size_t)N * sizeof *image);
    uint8_t *truth = malloc((size_t)N);
    if (!image || !truth) {
        free(image), free(truth);
        fprintf(stderr, "%s: out of memory\n", who);
        return 1;
    }
    if (swi_phantom_generate(seed, size, image, truth) != 0) {
        free(image), free(truth);
        fprintf(stderr, "%s: the phantom generator refused size %lldx%lldx%lld\n", who, (long long)size[0],
                (long long)size[1], (long long)size[2]);
        return 1;
    }
    swi_volume like;
    const double spacing[3] = {1, 1, 1};
    if (swi_volume_make(&like, size, spacing, err, SWI_ERRLEN) ||
        write_volume(img_path, &like, image, SWI_DTYPE_FLOAT32, SWI_IO_IMAGE, 1, err) ||
        write_volume(truth_path, &like, truth, SWI_DTYPE_UINT8, SWI_IO_LABELS, SWI_PHANTOM_CLASSES, err)) {
        free(image), free(truth);
        fprintf(stderr, "%s: %s\n", who, TERM_TEXT(err));
        return cli_interrupted() ? cli_interrupt_status() : 1;
    }
    free(image);
    if (!quiet)
        printf("phantom: seed %llu, %lldx%lldx%lld voxels -> %s (truth: %s)\n", (unsigned long long)seed,
               (long long)size[0], (long long)size[1], (long long)size[2], img_path, truth_path);

    /* the window is the card's (models/demo.json: roi 32, overlap 0.25, gaussian) */
    swi_job_spec spec;
    swi_job_spec_init(&spec);
    spec.models[spec.n_models++] = model;
    spec.inputs[spec.n_inputs++] = img_path;
    spec.output = lab_path;
    spec.preview = png_path;
    spec.sw_batch = 4;
    spec.threads = threads;
    spec.force = 1;
    spec.quiet = quiet;
    swi_job_result res;
    memset(&res, 0, sizeof res);
    int rc = seg_run(&spec, quiet, who, &res);
    if (rc != 0) {
        free(truth);
        return rc;
    }
    if (!res.labels) {
        free(truth);
        fprintf(stderr, "%s: out of memory\n", who);
        return 1;
    }

    /* Dice per foreground class: 2|A n B| / (|A| + |B|). */
    int64_t classes = res.classes > SWI_PHANTOM_CLASSES ? res.classes : SWI_PHANTOM_CLASSES;
    int64_t *inter = calloc((size_t)classes, sizeof *inter);
    int64_t *na = calloc((size_t)classes, sizeof *na);
    int64_t *nb = calloc((size_t)classes, sizeof *nb);
    if (!inter || !na || !nb) {
        free(inter), free(na), free(nb), free(truth);
        swi_job_result_free(&res);
        fprintf(stderr, "%s: out of memory\n", who);
        return 1;
    }
    for (int64_t v = 0; v < N; v++) {
        int64_t p = res.label_bytes == 1 ? ((uint8_t *)res.labels)[v] : ((uint16_t *)res.labels)[v];
        int64_t t = truth[v];
        if (p < classes) na[p]++;
        nb[t]++;
        if (p == t) inter[t]++;
    }
    double sum = 0;
    int counted = 0;
    printf("Dice per class (seed %llu, never seen in training):\n", (unsigned long long)seed);
    for (int64_t k = 1; k < SWI_PHANTOM_CLASSES; k++) {
        if (na[k] + nb[k] == 0) {
            printf("  class %lld: absent from both\n", (long long)k);
            continue;
        }
        double d = 2.0 * (double)inter[k] / (double)(na[k] + nb[k]);
        printf("  class %lld: %.4f  (%lld voxels true, %lld predicted)\n", (long long)k, d, (long long)nb[k],
               (long long)na[k]);
        sum += d;
        counted++;
    }
    double mean = counted ? sum / counted : 0;
    printf("mean Dice: %.4f\n", mean);
    printf("wrote %s and %s\n", lab_path, png_path);
    free(inter), free(na), free(nb), free(truth);
    swi_job_result_free(&res);
    return 0;
}
#endif
