/*
 * test_samefile.c -- cli_path_relation and cli_outputs_same (pipeline/samefile.c) on a scratch
 * tree: every way of naming one file, outputs inside an input folder (a DICOM series or a
 * chunked store), existing or not, links resolved; outputs that contain an input (a store
 * written over the folder holding it); HDF5 datasets of one file; an OME-Zarr labels group
 * inside its own input image.
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

    /* inside an input store, below folders that do not exist yet */
    if (mkdir("in.zarr", 0755) || mkdir("img.ome.zarr", 0755) || mkdir("img.ome.zarr/0", 0755) ||
        symlink("in.zarr", "link.zarr")) {
        perror("stores");
        return 1;
    }
    touch("img.ome.zarr/0/.zarray");
    EXPECT(cli_path_relation("in.zarr/new/seg.zarr", "in.zarr") == CLI_INSIDE);
    EXPECT(cli_path_relation("link.zarr/new/deeper/seg.zarr", "in.zarr") == CLI_INSIDE);
    EXPECT(cli_path_relation("in.zarr/new/../seg.zarr", "link.zarr") == CLI_INSIDE);
    EXPECT(cli_path_relation("in.zarr/../seg.zarr", "in.zarr") == CLI_APART);
    EXPECT(cli_path_relation("other/new/seg.zarr", "in.zarr") == CLI_APART);
    EXPECT(cli_path_relation("in.zarr.zarr", "in.zarr") == CLI_APART);
    /* an output around an input: the image holding the level read, the folder of a file */
    EXPECT(cli_path_relation("img.ome.zarr", "img.ome.zarr/0") == CLI_CONTAINS);
    EXPECT(cli_path_relation("./img.ome.zarr/", "img.ome.zarr/0/") == CLI_CONTAINS);
    EXPECT(cli_path_relation("series", "series/sub/img0001.dcm") == CLI_CONTAINS);
    EXPECT(cli_path_relation("alias", "other/deep/img0001.dcm") == CLI_CONTAINS);
    EXPECT(cli_path_relation("img.ome.zarr/0", "img.ome.zarr/0") == CLI_SAME);
    /* the labels of the input image go inside it; nothing else does */
    EXPECT(cli_path_relation("img.ome.zarr/labels/seg", "img.ome.zarr") == CLI_APART);
    EXPECT(cli_path_relation("img.ome.zarr/labels/seg", "./img.ome.zarr/") == CLI_APART);
    EXPECT(cli_path_relation("img.ome.zarr/labels/seg", "img.ome.zarr/0") == CLI_APART);
    EXPECT(cli_path_relation("img.ome.zarr/new.ome.zarr", "img.ome.zarr") == CLI_INSIDE);
    EXPECT(cli_path_relation("img.ome.zarr/0/labels/seg", "img.ome.zarr/0") == CLI_INSIDE);
    EXPECT(cli_path_relation("img.ome.zarr/labels/seg", "img.ome.zarr/labels/seg/0") == CLI_APART);
    if (mkdir("img.ome.zarr/labels", 0755) || mkdir("img.ome.zarr/labels/seg", 0755) ||
        mkdir("img.ome.zarr/labels/seg/0", 0755)) {
        perror("labels");
        return 1;
    }
    EXPECT(cli_path_relation("img.ome.zarr/labels/seg", "img.ome.zarr/labels/seg/0") == CLI_CONTAINS);
    /* Zarr v3: a level array is told by its zarr.json */
    if (mkdir("v3.ome.zarr", 0755) || mkdir("v3.ome.zarr/0", 0755)) {
        perror("v3");
        return 1;
    }
    FILE *j = fopen("v3.ome.zarr/0/zarr.json", "w");
    if (!j || fputs("{\"zarr_format\": 3, \"node_type\": \"array\"}", j) < 0 || fclose(j) != 0) {
        perror("zarr.json");
        return 1;
    }
    EXPECT(cli_path_relation("v3.ome.zarr/0/labels/seg", "v3.ome.zarr/0") == CLI_INSIDE);
    EXPECT(cli_path_relation("v3.ome.zarr/labels/seg", "v3.ome.zarr") == CLI_APART);
    EXPECT(cli_path_relation("img.ome.zarr/labels/seg", "img.ome.zarr/labels/seg") == CLI_SAME);

    /* HDF5: the file, then the dataset inside it */
    touch("d.h5");
    if (symlink("d.h5", "e.h5")) {
        perror("h5 link");
        return 1;
    }
    EXPECT(cli_path_relation("d.h5:/labels", "d.h5:/image") == CLI_APART);
    EXPECT(cli_path_relation("d.h5:/image", "d.h5:/image") == CLI_SAME);
    EXPECT(cli_path_relation("e.h5:image", "./d.h5:/image/") == CLI_SAME);
    EXPECT(cli_path_relation("d.h5://grp//image", "e.h5:/grp/image") == CLI_SAME);
    EXPECT(cli_path_relation("d.h5:/grp/image/x", "d.h5:/grp/image") == CLI_INSIDE);
    EXPECT(cli_path_relation("d.h5:/grp", "d.h5:/grp/image") == CLI_CONTAINS);
    EXPECT(cli_path_relation("d.h5:/grpx", "d.h5:/grp") == CLI_APART);
    EXPECT(cli_path_relation("f.h5:/image", "d.h5:/image") == CLI_APART);
    EXPECT(cli_path_relation("in.zarr/x.h5:/labels", "in.zarr") == CLI_INSIDE);
    EXPECT(cli_path_relation("series.zarr", "series.zarr/d.h5:/image") == CLI_APART); /* no such input */
    EXPECT(cli_path_relation("in.zarr", "in.zarr/d.h5:/image") == CLI_APART);         /* no such input */
    touch("in.zarr/d.h5");
    EXPECT(cli_path_relation("in.zarr", "in.zarr/d.h5:/image") == CLI_CONTAINS);
    if (symlink("a.nii", "a.h5")) {
        perror("h5 link");
        return 1;
    }
    /* an HDF5 output into a file that is a NIfTI input; a NIfTI output over an HDF5 input */
    EXPECT(cli_path_relation("a.h5:/labels", "a.nii") == CLI_SAME);
    EXPECT(cli_path_relation("soft.nii", "a.h5:/image") == CLI_SAME);

    /* two outputs */
    EXPECT(cli_outputs_relation("out.zarr/s.zarr", "out.zarr") == CLI_INSIDE);
    EXPECT(cli_outputs_relation("out.zarr", "./out.zarr/x/s.zarr") == CLI_CONTAINS);
    EXPECT(cli_outputs_relation("o.h5:/labels", "o.h5:/scores") == CLI_APART);
    EXPECT(cli_outputs_relation("o.h5:/labels", "o.h5:labels") == CLI_SAME);
    EXPECT(cli_outputs_relation("o.h5:/labels/s", "o.h5:/labels") == CLI_INSIDE);
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
    const cli_named_path ins3[2] = {{"--model", "m.onnx"}, {"--input", "img.ome.zarr/0"}};
    const cli_named_path outs4[1] = {{"--output", "img.ome.zarr"}};
    EXPECT(cli_check_outputs_apart(ins3, 2, outs4, 1, err) == -1);
    EXPECT(strstr(err, "--output img.ome.zarr contains --input img.ome.zarr/0"));
    const cli_named_path outs5[2] = {{"--output", "o.zarr"}, {"--scores", "o.zarr/s.zarr"}};
    EXPECT(cli_check_outputs_apart(ins3, 2, outs5, 2, err) == -1);
    EXPECT(strstr(err, "--scores o.zarr/s.zarr lies inside --output o.zarr"));
    const cli_named_path ins4[1] = {{"--input", "d.h5:/image"}};
    const cli_named_path outs6[1] = {{"--output", "e.h5:/image"}};
    EXPECT(cli_check_outputs_apart(ins4, 1, outs6, 1, err) == -1);
    EXPECT(strstr(err, "--output e.h5:/image is the same dataset as --input d.h5:/image"));
    const cli_named_path outs7[2] = {{"--output", "d.h5:/labels"}, {"--scores", "d.h5:/scores"}};
    EXPECT(cli_check_outputs_apart(ins4, 1, outs7, 2, err) == 0);

    char cmd[4300];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", root);
    if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", root);
    if (failures) return 1;
    printf("test_samefile: all passed\n");
    return 0;
}
