/*
 * folder_nnunet.c -- folder mode with an nnU-Net model: its naming of a case's channels
 * (CASE_0000<file_ending>, CASE_0001<file_ending>, ... as nnUNetv2_predict reads them) and
 * its outputs OUT/CASE<file_ending>.
 */
#include "folder.h"

#include <stdio.h>
#include <string.h>

int folder_nnunet_cases(folder *f, int channels, const char *ending, char *err) {
    for (int k = 0; k < f->n_cases; k++) {
        fcase *c = &f->cases[k];
        if (c->problem[0]) continue;
        for (int s = 0; s < c->n_files && !c->problem[0]; s++) {
            char want[300];
            snprintf(want, sizeof want, "/%s_%04d%s", c->name, s, ending);
            const size_t lw = strlen(want), lf = strlen(c->files[s]);
            if (lf < lw || strcmp(c->files[s] + lf - lw, want) != 0)
                cli_err(c->problem, "%s: not nnU-Net's naming of the model's channels (%s_%04d%s, ...)",
                        c->files[s], c->name, s, ending);
        }
        if (c->problem[0]) continue;
        if (c->n_files < channels)
            cli_err(c->problem, "channel %d (%s_%04d%s) is missing: the model takes %d channel%s", c->n_files,
                    c->name, c->n_files, ending, channels, channels == 1 ? "" : "s");
        else if (c->n_files > channels)
            cli_err(c->problem, "%d channels (%s_%04d%s ...), but the model takes %d", c->n_files, c->name,
                    c->n_files - 1, ending, channels);
    }
    (void)err;
    return 0;
}

int folder_nnunet_output(const folder *f, const fcase *c, const char *ending, char *out, size_t n) {
    return snprintf(out, n, "%s/%s%s", f->o->output_dir, c->name, ending) >= (int)n;
}
