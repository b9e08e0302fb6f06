/*
 * fuzz_onnx_export.c -- the ONNX graph reader of `swi export` (onnx/onnx_io.c
 * onnx_load, export/export_inspect.c export_inspect_network and what follows), through
 * its one entry point, swi_cmd_export.
 *
 * Each input is a model file. The options come from the input's length (so mutating the
 * bytes never disturbs them): --dynamic, --dynamic --argmax, a static --size with a
 * gaussian window, or a small static --size with reflect padding and --argmax. The command
 * must exit 0 (the pipeline was written), 1 (refused, with a message) or 2 (options do
 * not fit the network) -- never crash, leak or run away -- and a model it accepts must
 * be readable again by the same reader (export --dynamic of the written pipeline is not
 * required to succeed, only to behave).
 * The command prints; run the target with -close_fd_mask=3.
 */
#include "swi_export.h"

#include "fuzz_common.h"

#include <dirent.h>
#include <sys/stat.h>

#define CHECK(cond, ...) FUZZ_CHECK("fuzz_onnx_export", cond, __VA_ARGS__)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size > (1 << 18)) return 0;
    char model[600], out[600], out2[600];
    fuzz_write_file("net.onnx", data, size, model, sizeof model);
    snprintf(out, sizeof out, "%s/pipe.onnx", fuzz_dir());
    snprintf(out2, sizeof out2, "%s/pipe2.onnx", fuzz_dir());
    unlink(out);
    char *argv[16] = {"swi-export", "--model", model, "--output", out, "--quiet"};
    int argc = 6;
    switch (size % 4) {
    case 0: argv[argc++] = "--dynamic"; break;
    case 1:
        argv[argc++] = "--dynamic";
        argv[argc++] = "--argmax";
        break;
    case 2:
        argv[argc++] = "--size";
        argv[argc++] = "7";
        argv[argc++] = "--mode";
        argv[argc++] = "gaussian";
        argv[argc++] = "--overlap";
        argv[argc++] = "0.5";
        break;
    default:
        argv[argc++] = "--size";
        argv[argc++] = "3";
        argv[argc++] = "--padding-mode";
        argv[argc++] = "reflect";
        argv[argc++] = "--argmax";
        break;
    }
    argv[argc] = NULL;
    int rc = swi_cmd_export(argc, argv);
    CHECK(rc == 0 || rc == 1 || rc == 2, "exit status %d", rc);
    struct stat sb;
    if (rc == 0) {
        CHECK(stat(out, &sb) == 0 && sb.st_size > 0, "exit 0 without an output file");
        /* What was written is a model of its own: the reader must take it back. */
        char *argv2[] = {"swi-export", "--model", out,         "--output", out2,
                         "--quiet",    "--force", "--dynamic", NULL};
        if (sb.st_size < (1 << 20)) {
            int rc2 = swi_cmd_export(8, argv2);
            CHECK(rc2 == 0 || rc2 == 1 || rc2 == 2, "re-export exit status %d", rc2);
            unlink(out2);
        }
        unlink(out);
    } else {
        CHECK(access(out, F_OK) != 0, "exit %d left an output file", rc);
        /* nor a temporary one */
        DIR *dir = opendir(fuzz_dir());
        CHECK(dir != NULL, "opendir");
        struct dirent *e;
        while ((e = readdir(dir)) != NULL)
            CHECK(e->d_name[0] == '.' && (e->d_name[1] == '\0' || strcmp(e->d_name, "..") == 0)
                      ? 1
                      : strcmp(e->d_name, "net.onnx") == 0,
                  "exit %d left '%s' behind", rc, e->d_name);
        closedir(dir);
    }
    return 0;
}
