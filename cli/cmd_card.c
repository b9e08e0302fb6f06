/*
 * cmd_card.c -- `swi card --check FILE...`: check model cards with the reader swi segment
 * uses (swi_card_check), so a card that passes here is one a run accepts.
 */
#include "cli.h"
#include "swi_pipeline.h"
#include "termtext.h"
#include "util.h"

#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char CARD_HELP[] =
    "usage: swi card --check FILE... [-q]\n"
    "\n"
    "Check model cards as swi segment reads them, without running anything: a card file\n"
    "(m.json beside m.onnx), a model (m.onnx: the card beside it or in its metadata_props),\n"
    "or an nnU-Net model directory made by swi convert nnunet (or its nnunet.json).\n"
    "Each valid card is printed as swi info prints it; each invalid one is one line on\n"
    "stderr naming the file and the key. The keys: docs/card.md; a JSON Schema of them is\n"
    "installed as share/swi/card.schema.json.\n"
    "\n"
    "Options:\n"
    "  --check      check the files named (required)\n"
    "  -q, --quiet  print nothing for valid cards\n"
    "\n"
    "Examples:\n"
    "  swi card --check liver.json\n"
    "  swi card --check liver.onnx models/nnunet_liver\n"
    "\n"
    "Exit status: 0 every card valid, 1 a card refused, 2 usage error.\n";

int swi_cmd_card(int argc, char **argv) {
    const char *who = "swi card";
    int check = 0, quiet = 0;
    static const struct option opts[] = {{"check", no_argument, NULL, 'c'},
                                         {"quiet", no_argument, NULL, 'q'},
                                         {"help", no_argument, NULL, 'h'},
                                         {NULL, 0, NULL, 0}};
    opterr = 0;
    optind = 0;
    int c;
    while ((c = getopt_long(argc, argv, ":hq", opts, NULL)) != -1) {
        switch (c) {
        case 'c': check = 1; break;
        case 'q': quiet = 1; break;
        case 'h': fputs(CARD_HELP, stdout); return 0;
        default:
            fprintf(stderr, "%s: unknown option '%s' (see '%s --help')\n", who, TERM_TEXT(argv[optind - 1]),
                    who);
            return 2;
        }
    }
    if (!check || optind >= argc) {
        fprintf(stderr, "%s: %s (see '%s --help')\n", who, check ? "no file to check" : "--check is required",
                who);
        return 2;
    }
    int rc = 0;
    for (int i = optind; i < argc; i++) {
        char err[SWI_ERRLEN];
        char *text = NULL;
        if (swi_card_check(argv[i], quiet ? NULL : &text, err, sizeof err) != SWI_OK) {
            /* a card's key or a path may hold control characters */
            fprintf(stderr, "%s: %s\n", who, TERM_TEXT(err));
            rc = 1;
            continue;
        }
        if (text) fputs(text, stdout);
        free(text);
    }
    return rc;
}
