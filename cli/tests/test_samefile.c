/*
 * test_samefile.c -- cli_path_relation and cli_outputs_same (cli/samefile.c) on a scratch
 * tree: every way of naming one file, and outputs inside an input folder (a DICOM series
 * or a chunked store as the future readers take them), links resolved.
 */
#include "samefile.h"
#include "util.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static int failures;

#define EXPECT(cond)                                                         \
    do {                                                                     \
        if (!(cond)) {                                                       \
            fprintf(stderr, "%s:%d: FAIL: %s\n", __FILE__, __LINE__, #cond); \
            failures++;                                                      \
        }                                                                    \
    } while (0)

static void touch(const char *p) {
    FILE *f = fopen(p, "w");
    if (!f || fputs("x", f) < 0 || fclose(f) != 0) {
        perror(p);
        exit(1);
    }
}

int main(void) {
    char root[] = "/tmp/swi-samefile-XXXXXX";
    if (!mkdtemp(root) || chdir(root) != 0) {
        perror("scratch folder");
        return 1;
    }
    if (mkdir("series", 0755) || mkdir("series/sub", 0755) || mkdir("other", 0755) ||
        symlink("series", "alias") || symlink("../series/sub", "other/deep")) {
        perror("tree");
        return 1;
    }
    touch("series/sub/img0001.dcm");
    touch("a.nii");
    if (link("a.nii", "hard.nii") || symlink("a.nii", "soft.nii") || symlink("missing.nii", "dangling.nii")) {
        perror("links");
        return 1;
    }

    /* one file, many names */
    EXPECT(cli_path_relation("a.nii", "a.nii") == CLI_SAME);
    EXPECT(cli_path_relation("./a.nii", "a.nii") == CLI_SAME);
    EXPECT(cli_path_relation("series/../a.nii", "a.nii") == CLI_SAME);
    EXPECT(cli_path_relation("hard.nii", "a.nii") == CLI_SAME);
    EXPECT(cli_path_relation("soft.nii", "a.nii") == CLI_SAME);
    EXPECT(cli_path_relation("a.nii", "soft.nii") == CLI_SAME);
    char abs[4200];
    snprintf(abs, sizeof abs, "%s/a.nii", root);
    EXPECT(cli_path_relation(abs, "a.nii") == CLI_SAME);
    /* apart */
    EXPECT(cli_path_relation("b.nii", "a.nii") == CLI_APART);
    EXPECT(cli_path_relation("dangling.nii", "a.nii") == CLI_APART);
    EXPECT(cli_path_relation("a.nii", "missing-input.nii") == CLI_APART);
    EXPECT(cli_path_relation("nofolder/x.nii", "a.nii") == CLI_APART);
    EXPECT(cli_path_relation("other/x.nii", "series") == CLI_APART);
    EXPECT(cli_path_relation("a.nii", "series") == CLI_APART);

    /* inside an input folder, at any depth, through links, existing or not */
    EXPECT(cli_path_relation("series/x.nii", "series") == CLI_INSIDE);
    EXPECT(cli_path_relation("series/sub/img0001.dcm", "series") == CLI_INSIDE);
    EXPECT(cli_path_relation("series/sub/new.nii", "series") == CLI_INSIDE);
    EXPECT(cli_path_relation("alias/sub/new.nii", "series") == CLI_INSIDE);
    EXPECT(cli_path_relation("other/deep/new.nii", "series") == CLI_INSIDE);
    EXPECT(cli_path_relation("series/sub/new.nii", "alias") == CLI_INSIDE);
    EXPECT(cli_path_relation("series/sub/new.nii", "series/sub") == CLI_INSIDE);
    EXPECT(cli_path_relation("series", "series") == CLI_SAME);
    EXPECT(cli_path_relation("x.nii", ".") == CLI_INSIDE);
    EXPECT(cli_path_relation("series/x.nii", "/") == CLI_INSIDE);

    /* two outputs */
    EXPECT(cli_outputs_same("new.nii", "./new.nii"));
    EXPECT(cli_outputs_same("new.nii", "series/../new.nii"));
    EXPECT(cli_outputs_same("alias/new.nii", "series/new.nii"));
    EXPECT(cli_outputs_same("a.nii", "hard.nii"));
    EXPECT(cli_outputs_same("a.nii", "soft.nii"));
    EXPECT(!cli_outputs_same("new.nii", "new2.nii"));
    EXPECT(!cli_outputs_same("dangling.nii", "missing.nii"));

    /* the check as the commands call it: both names in the message */
    char err[SWI_ERRLEN];
    const cli_named_path ins[2] = {{"--model", "m.onnx"}, {"--input", "series"}};
    const cli_named_path outs[2] = {{"--output", "alias/sub/l.nii"}, {"--scores", "s.nii"}};
    EXPECT(cli_check_outputs_apart(ins, 2, outs, 2, err) == -1);
    EXPECT(strstr(err, "--output alias/sub/l.nii lies inside --input series"));
    const cli_named_path ins2[1] = {{"--input", "a.nii"}};
    const cli_named_path outs2[3] = {{"--output", "l.nii"}, {"--scores", NULL}, {"--preview", "./l.nii"}};
    EXPECT(cli_check_outputs_apart(ins2, 1, outs2, 3, err) == -1);
    EXPECT(strstr(err, "--output l.nii and --preview ./l.nii are the same file"));
    const cli_named_path outs3[2] = {{"--output", "l.nii"}, {"--scores", "s.nii"}};
    EXPECT(cli_check_outputs_apart(ins2, 1, outs3, 2, err) == 0);

    char cmd[4300];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", root);
    if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", root);
    if (failures) return 1;
    printf("test_samefile: all passed\n");
    return 0;
}
