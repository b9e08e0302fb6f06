/*
 * cmd_info.c -- `swi info --model M.onnx`: the network's inputs and outputs and its model
 * card, without running anything.
 */
#include "cli.h"
#include "swi_ort.h"
#include "swi_pipeline.h"
#include "termtext.h"
#include "util.h"

#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char INFO_HELP[] =
    "usage: swi info --model M.onnx [--no-card]\n"
    "\n"
    "Show an ONNX model's inputs and outputs as swi sees them, and its model card (M.json\n"
    "beside it, or the one swi export --card embedded), which swi segment and swi plan\n"
    "apply unless flags override it.\n"
    "\n"
    "Examples:\n"
    "  swi info --model models/demo.onnx\n"
    "  swi info --model fold0.onnx --no-card     # the network alone\n"
    "\n"
    "Exit status: 0 done, 1 error (one line on stderr), 2 usage error.\n";

static void print_tensor(const char *what, int i, const swi_ort_tensor_info *t) {
    char shp[160];
    cli_shape_str(t->shape, t->rank, shp, sizeof shp);
    printf("%-8s #%d '%s' %s %s\n", what, i, t->name, t->is_tensor ? shp : "(not a tensor)",
           t->is_tensor ? t->type_name : "");
}

int swi_cmd_info(int argc, char **argv) {
    const char *who = "swi info", *model = NULL;
    int no_card = 0;
    static const struct option opts[] = {{"model", required_argument, NULL, 'm'},
                                         {"no-card", no_argument, NULL, 'n'},
                                         {"help", no_argument, NULL, 'h'},
                                         {NULL, 0, NULL, 0}};
    opterr = 0;
    optind = 0;
    int c;
    while ((c = getopt_long(argc, argv, ":h", opts, NULL)) != -1) {
        switch (c) {
        case 'm': model = optarg; break;
        case 'n': no_card = 1; break;
        case 'h': fputs(INFO_HELP, stdout); return 0;
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
    if (optind < argc || !model) {
        fprintf(stderr, "%s: %s (see '%s --help')\n", who,
                model ? "unexpected argument" : "--model is required", who);
        return 2;
    }
    char err[SWI_ERRLEN];
    char *card = NULL;
    if (!no_card && swi_job_card_text(model, &card, err, sizeof err) != SWI_OK) {
        fprintf(stderr, "%s: %s\n", who, TERM_TEXT(err));
        return 1;
    }
    if (!CLI_HAVE_ORT) {
        fprintf(stderr, "%s: swi was built without ONNX Runtime\n", who);
        free(card);
        return 1;
    }
    swi_ort_options oo;
    swi_ort_options_init(&oo);
    oo.threads = 1;
    swi_ort_model *m = NULL;
    if (swi_ort_open(model, &oo, &m, err, sizeof err)) {
        fprintf(stderr, "%s: %s\n", who, TERM_TEXT(err));
        free(card);
        return 1;
    }
    char desc[1024];
    swi_ort_describe(m, desc, sizeof desc);
    printf("model    %s\n         %s\n", model, desc);
    swi_ort_tensor_info t;
    int rc = 0;
    if (swi_ort_input_info(m, &t, err, sizeof err) == SWI_OK)
        print_tensor("input", 0, &t);
    else
        rc = 1;
    for (int i = 0; i < swi_ort_output_count(m) && rc == 0; i++) {
        if (swi_ort_output_info(m, i, &t, err, sizeof err) != SWI_OK)
            rc = 1;
        else
            print_tensor("output", i, &t);
    }
    if (rc == 0) { /* which backends can run it (swi segment --backend) */
        char why[SWI_ERRLEN];
        int covers = swi_pipeline_dnnl_covers(model, why, sizeof why);
        if (covers == 1)
            printf(
                "backend  ONNX Runtime, or oneDNN (every operator supported: swi segment --backend dnnl)\n");
        else
            printf("backend  ONNX Runtime only (oneDNN: %s)\n", why);
    }
    if (rc)
        fprintf(stderr, "%s: %s\n", who, TERM_TEXT(err));
    else if (card)
        fputs(card, stdout);
    else
        printf("card     none%s\n", no_card ? " (--no-card)" : "");
    swi_ort_close(m);
    free(card);
    return rc;
}
