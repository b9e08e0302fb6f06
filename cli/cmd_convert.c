/*
 * cmd_convert.c -- `swi convert nnunet ...`: runs the Python package's converter
 * (`python3 -m swi convert nnunet ...`), the one step that needs PyTorch.
 */
#include "cli.h"
#include "signals.h"
#include "swi_io.h"
#include "termtext.h"

#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

/* Set by cli/CMakeLists.txt: the Python the package is built (and installed) for, the
 * installed package's folder relative to the installed swi's, and the build tree's. */
#ifndef SWI_CONVERT_PYTHON
#define SWI_CONVERT_PYTHON "python3"
#endif
#ifndef SWI_CONVERT_PKG_REL
#define SWI_CONVERT_PKG_REL "../lib/swi/python"
#endif
#ifndef SWI_CONVERT_PKG_BUILD
#define SWI_CONVERT_PKG_BUILD ""
#endif

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
    "  SWI_PYTHON   the Python interpreter to run, with the swi package importable; by\n"
    "               default the Python swi was built for, with the package installed\n"
    "               beside swi (lib/swi/python) or built in its build tree put first on\n"
    "               PYTHONPATH, else python3 on PATH\n"
    "\n"
    "Exit status: the converter's (0 done, 1 refused or failed, one line on stderr);\n"
    "1 if the interpreter or the package cannot be run; 2 usage error.\n";

/* A stop signal becomes SystemExit(128 + signal): the converter's cleanup (it removes its
 * work in progress on any exception) runs and Python exits quietly. Then imports the
 * package first, so that a missing package is one clear line, and hands the arguments to
 * its command (python3 -c sets sys.argv[0] to "-c"). */
static const char BOOT[] =
    "import signal, sys\n"
    "def _stop(s, f):\n"
    "    raise SystemExit(128 + s)\n"
    "for _s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):\n"
    "    signal.signal(_s, _stop)\n"
    "try:\n"
    "    import swi.__main__ as m\n"
    "except ImportError as e:\n"
    "    sys.exit('swi convert: the swi Python package is not importable by ' + sys.executable + ' (' + str(e)"
    " + '); get it with make python (.venv) or pip install of the wheel (make wheel), and point SWI_PYTHON "
    "at that Python')\n"
    "sys.exit(m.main(sys.argv[1:], prog='swi'))\n";

/* Does dir hold the swi package (dir/swi/__init__.py)? */
static int has_package(const char *dir) {
    char p[PATH_MAX];
    struct stat st;
    int len = snprintf(p, sizeof p, "%s/swi/__init__.py", dir);
    return len > 0 && (size_t)len < sizeof p && stat(p, &st) == 0 && S_ISREG(st.st_mode);
}

/* The swi package's folder for this swi into dir[n]: the installed one beside it, else the
 * build tree's. 0, or -1 when neither has it. */
static int package_dir(char *dir, size_t n) {
    char exe[PATH_MAX];
    ssize_t len = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (len > 0) {
        exe[len] = '\0';
        char *slash = strrchr(exe, '/');
        if (slash) *slash = '\0';
        int w = snprintf(dir, n, "%s/%s", exe, SWI_CONVERT_PKG_REL);
        if (w > 0 && (size_t)w < n && has_package(dir)) return 0;
    }
    if (SWI_CONVERT_PKG_BUILD[0] && has_package(SWI_CONVERT_PKG_BUILD) &&
        snprintf(dir, n, "%s", SWI_CONVERT_PKG_BUILD) < (int)n)
        return 0;
    return -1;
}

/* The interpreter to run: SWI_PYTHON; else, when this swi has the package, the Python it
 * was built for with the package first on PYTHONPATH; else python3 on PATH. NULL when
 * PYTHONPATH cannot be set (out of memory). */
static const char *choose_python(void) {
    const char *py = getenv("SWI_PYTHON");
    if (py && *py) return py;
    char dir[PATH_MAX];
    if (package_dir(dir, sizeof dir) != 0) return "python3";
    const char *old = getenv("PYTHONPATH");
    size_t n = strlen(dir) + (old && *old ? strlen(old) + 1 : 0) + 1;
    char *path = malloc(n);
    if (!path) return NULL;
    snprintf(path, n, "%s%s%s", dir, old && *old ? ":" : "", old && *old ? old : "");
    int rc = setenv("PYTHONPATH", path, 1);
    free(path);
    if (rc != 0) return NULL;
    return access(SWI_CONVERT_PYTHON, X_OK) == 0 ? SWI_CONVERT_PYTHON : "python3";
}

/* Start args[0] in its own process group (a terminal's signals reach swi, which passes them
 * on: the child is ended with swi, never left behind), no signal blocked or ignored. */
static int spawn(pid_t *pid, char **args) {
    posix_spawnattr_t at;
    int rc = swi_child_spawnattr_init(&at, 1);
    if (rc != 0) return rc;
    rc = posix_spawnp(pid, args[0], NULL, &at, args, environ);
    posix_spawnattr_destroy(&at);
    return rc;
}

int swi_cmd_convert(int argc, char **argv) {
    if (argc < 2 || strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0) {
        fputs(CONVERT_HELP, argc < 2 ? stderr : stdout);
        return argc < 2 ? 2 : 0;
    }
    if (strcmp(argv[1], "nnunet") != 0) {
        fprintf(stderr, "swi convert: unknown source '%s' (known: nnunet; see 'swi convert --help')\n",
                TERM_TEXT(argv[1]));
        return 2;
    }
    if (cli_signals_start() != 0) { /* a signal is passed on to the converter */
        fprintf(stderr, "swi convert: cannot set up signal handling\n");
        return 1;
    }
    const char *py = choose_python();
    if (!py) {
        fprintf(stderr, "swi convert: out of memory\n");
        return 1;
    }
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
    int rc = spawn(&pid, args);
    free(args);
    if (rc != 0) {
        fprintf(stderr, "swi convert: cannot run %s (%s); set SWI_PYTHON to a Python with the swi package\n",
                TERM_TEXT(py), strerror(rc));
        return 1;
    }
    if (swi_child_track(pid, 1) != 0) { /* cannot happen: the only child */
        kill(-pid, SIGKILL);
        swi_child_reap(pid, &rc);
        fprintf(stderr, "swi convert: cannot keep track of %s\n", TERM_TEXT(py));
        return 1;
    }
    int st = 0;
    if (swi_child_reap(pid, &st) != pid) {
        fprintf(stderr, "swi convert: waiting for %s: %s\n", TERM_TEXT(py), strerror(errno));
        return 1;
    }
    if (cli_interrupted()) {
        if (WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL)
            fprintf(stderr,
                    "swi convert: interrupted; the converter did not stop by itself and was killed\n");
        else
            fprintf(stderr, "swi convert: interrupted; the converter stopped\n");
        return cli_interrupt_status();
    }
    if (WIFSIGNALED(st)) return 128 + WTERMSIG(st);
    return WIFEXITED(st) ? WEXITSTATUS(st) : 1;
}
