/*
 * main.c -- the swi command: dispatch to the subcommands.
 */
#include "cli.h"
#include "mpi_job.h"

#include "swi_io.h"
#include "swi_ort.h"
#include "swi_store.h"
#include "termtext.h"

#include <stdio.h>
#include <string.h>

static const char MAIN_HELP[] =
    "usage: swi <command> [options]      (swi <command> --help for each)\n"
    "\n"
    "Sliding-window inference for 3-D segmentation networks, natively: MONAI's\n"
    "sliding_window_inference, streamed, on NIfTI, NRRD, MetaImage and DICOM volumes\n"
    "and ONNX models.\n"
    "\n"
    "Commands:\n"
    "  segment   segment a volume (or a folder of them) with an ONNX model -> label map\n"
    "  plan      show the window grid, network calls and peak memory of a segment run\n"
    "  bench     time the engine on a synthetic predictor, no model needed\n"
    "  demo      segment a generated phantom with the bundled model and score it (Dice)\n"
    "  export    export sliding-window inference as an ONNX graph\n"
    "  info      show a model's inputs, outputs and model card\n"
    "  optimize  save an ONNX model with the faster equivalent layers segment runs\n"
    "  convert   convert a trained nnU-Net v2 model folder (runs python3 -m swi convert)\n"
    "  card      check model cards (swi card --check FILE) as segment reads them\n"
    "\n"
    "Examples:\n"
    "  swi demo                                     # try it: writes out/demo_*.nii.gz, .png\n"
    "  swi segment --model unet.onnx --input ct.nii.gz --output labels.nii.gz\n"
    "  swi segment --model unet.onnx --input ct.nii.gz --output labels.nii.gz \\\n"
    "      --roi 96 --overlap 0.5 --mode gaussian --sw-batch 4 --preview labels.png\n"
    "  swi plan --model unet.onnx --input ct.nii.gz --roi 96 --max-memory 2G\n"
    "  swi bench --shape 384,384,256 --classes 100 --roi 128 --output argmax\n"
    "\n"
    "Options:\n"
    "  -h, --help      this help\n"
    "  -V, --version   versions of swi and of the libraries it was built with\n"
    "\n"
    "Exit status: 0 done, 1 error (one line on stderr), 2 usage error, 128+N signal N.\n";

#ifndef SWI_HAVE_EXPORT
int swi_cmd_export(int argc, char **argv) {
    (void)argv;
    if (argc > 1 && (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0)) {
        printf("usage: swi export ...\n\nThis swi was built without the export component "
               "(export/ and its dependencies were not found at build time).\n");
        return 0;
    }
    fprintf(stderr, "swi export: this swi was built without the export component "
                    "(export/ was not found or its dependencies are missing); rebuild with it\n");
    return 1;
}
#endif

int main(int argc, char **argv) {
    char *help_argv[3] = {NULL, "--help", NULL}; /* "swi help CMD" = "swi CMD --help" */
    if (argc < 2) {
        fputs(MAIN_HELP, stderr);
        return 2;
    }
    const char *cmd = argv[1];
    if (strcmp(cmd, "-h") == 0 || strcmp(cmd, "--help") == 0 || strcmp(cmd, "help") == 0) {
        if (argc > 2 && strcmp(cmd, "help") == 0) {
            help_argv[0] = argv[2];
            argv = help_argv;
            argc = 2;
            cmd = argv[0];
            goto dispatch;
        }
        fputs(MAIN_HELP, stdout);
        return 0;
    }
    if (strcmp(cmd, "-V") == 0 || strcmp(cmd, "--version") == 0) {
        printf("swi %s (libswi %s)\n", SWI_VERSION_STRING, swi_version());
        printf("  ONNX Runtime: %s\n", CLI_HAVE_ORT ? swi_ort_version() : "not built in");
        printf("  NIfTI (niftilib): %s\n", swi_io_available(SWI_IO_NIFTI) ? "yes" : "not built in");
        printf("  PNG (libpng): %s\n", swi_io_available(SWI_IO_PNG) ? "yes" : "not built in");
        printf("  NRRD, MetaImage, DICOM (ITK): %s\n",
               swi_io_available(SWI_IO_DICOM) ? "yes" : "not built in");
        printf("  DICOM SEG output (DCMTK): %s\n",
               swi_io_available(SWI_IO_DICOM_SEG) ? "yes" : "not built in");
        printf("  Zarr, OME-Zarr (jansson, blosc, zstd, zlib): %s\n",
               swi_store_available(SWI_STORE_ZARR) ? "yes" : "not built in");
        printf("  HDF5 (libhdf5): %s\n", swi_store_available(SWI_STORE_HDF5) ? "yes" : "not built in");
        printf("  MPI: %s\n",
               cli_mpi_built() ? "yes (mpirun -n N swi segment|bench ... runs N shards)" : "not built in");
#ifdef SWI_HAVE_EXPORT
        printf("  export: yes\n");
#else
        printf("  export: not built in\n");
#endif
        return 0;
    }
    if (strcmp(cmd, "--read-volumes-child") == 0) { /* folder mode's reader (cli/folder.c) */
        const swi_status st = swi_folder_serve_reader(1, argc - 2, (const char *const *)(argv + 2));
        return st == SWI_OK ? 0 : st == SWI_ERR_INVALID_ARG ? 2 : 1;
    }
    /* Subcommands see argv[0] = their name. */
    argc -= 1;
    argv += 1;
dispatch:
    /* under mpirun the ranks learn how the others ended before they exit (cli/mpi_job.c) */
    if (strcmp(cmd, "segment") == 0) return cli_mpi_finish(swi_cmd_segment(argc, argv));
    if (strcmp(cmd, "plan") == 0) return swi_cmd_plan(argc, argv);
    if (strcmp(cmd, "bench") == 0) return cli_mpi_finish(swi_cmd_bench(argc, argv));
    if (strcmp(cmd, "demo") == 0) return swi_cmd_demo(argc, argv);
    if (strcmp(cmd, "export") == 0) return swi_cmd_export(argc, argv);
    if (strcmp(cmd, "info") == 0) return swi_cmd_info(argc, argv);
    if (strcmp(cmd, "optimize") == 0) return swi_cmd_optimize(argc, argv);
    if (strcmp(cmd, "convert") == 0) return swi_cmd_convert(argc, argv);
    if (strcmp(cmd, "card") == 0) return swi_cmd_card(argc, argv);
    fprintf(stderr, "swi: unknown command '%s' (see 'swi --help')\n", TERM_TEXT(cmd));
    return 2;
}
