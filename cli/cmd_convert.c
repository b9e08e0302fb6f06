/*
 * cmd_convert.c -- `swi convert nnunet ...`: runs the Python package's converter
 * (`python3 -m swi convert nnunet ...`), the one step that needs PyTorch.
 */
#include "cli.h"

#include <errno.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

extern char **environ;

static const char CONVERT_HELP[] =
    "usage: swi convert nnunet MODEL_DIR --output OUT_DIR [--folds 0,1,...|all]\n"
    "                          [--checkpoint checkpoint_final.pth] [--force] [-q]\n"
    "\n"
    "Convert a trained nnU-Net v2 model folder (plans.json, dataset.json, fold_N/) into a\n"
    "swi model directory: fold_N.onnx per fold and nnunet.json, nnU-Net's inference\n"
    "settings (docs/semantics-nnunet.md). Runs `python3 -m swi convert nnunet ARGS`: the\n"
    "swi Python package with PyTorch and onnx must be importable (the converted model\n"
    "needs neither).\n"
    "\n"
    "Examples:\n"
    "  swi convert nnunet nnUNet_results/Dataset003_Liver/nnUNetTrainer__nnUNetPlans__3d_fullres \\\n"
    "      --output liver-swi\n"
    "  swi convert nnunet MODEL_DIR --output OUT_DIR --folds 0,1 --checkpoint checkpoint_best.pth\n"
    "  swi convert nnunet --help            # the converter's own options\n"
    "\n"
    "Environment:\n"
    "  SWI_PYTHON   the Python interpreter to run (default: python3 on PATH)\n"
    "\n"
    "Exit status: the converter's (0 done, 1 refused or failed, one line on stderr);\n"
    "1 if the interpreter or the package cannot be run; 2 usage error.\n";

/* Imports the package first, so that a missing package is one clear line, then hands
 * the arguments to its command (python3 -c sets sys.argv[0] to "-c"). */
static const char BOOT[] =
    "import sys\n"
    "try:\n"
    "    import swi.__main__ as m\n"
    "except ImportError as e:\n"
    "    sys.exit('swi convert: the swi Python package is not importable by ' + sys.executable + ' (' + str(e)"
    " + '); install it, or set PYTHONPATH, or SWI_PYTHON to a Python that has it')\n"
    "sys.exit(m.main(sys.argv[1:], prog='swi'))\n";

int swi_cmd_convert(int argc, char **argv) {
    if (argc < 2 || strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0) {
        fputs(CONVERT_HELP, argc < 2 ? stderr : stdout);
        return argc < 2 ? 2 : 0;
    }
    if (strcmp(argv[1], "nnunet") != 0) {
        fprintf(stderr, "swi convert: unknown source '%s' (known: nnunet; see 'swi convert --help')\n",
                argv[1]);
        return 2;
    }
    const char *py = getenv("SWI_PYTHON");
    if (!py || !*py) py = "python3";
    /* python -c BOOT convert nnunet ARGS... NULL */
    size_t n = (size_t)argc + 4;
    char **args = calloc(n, sizeof *args);
    if (!args) {
        fprintf(stderr, "swi convert: out of memory\n");
        return 1;
    }
    args[0] = (char *)py;
    args[1] = "-c";
    args[2] = (char *)BOOT;
    args[3] = "convert";
    for (int i = 1; i < argc; i++) args[3 + i] = argv[i];
    pid_t pid;
    int rc = posix_spawnp(&pid, py, NULL, NULL, args, environ);
    free(args);
    if (rc != 0) {
        fprintf(stderr, "swi convert: cannot run %s (%s); set SWI_PYTHON to a Python with the swi package\n",
                py, strerror(rc));
        return 1;
    }
    int st = 0;
    while (waitpid(pid, &st, 0) < 0) {
        if (errno != EINTR) {
            fprintf(stderr, "swi convert: waiting for %s: %s\n", py, strerror(errno));
            return 1;
        }
    }
    if (WIFSIGNALED(st)) return 128 + WTERMSIG(st);
    return WIFEXITED(st) ? WEXITSTATUS(st) : 1;
}
