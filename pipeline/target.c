/* target.c -- see target.h. */
#include "target.h"

#include "util.h"

#include <string.h>

void pl_target_of(const char *name, pl_target *t) {
    /* .nii.gz before .nii: the longer suffix wins */
    static const struct {
        const char *suffix;
        pl_format format;
    } files[] = {{".nii.gz", PL_FORMAT_NIFTI_GZ},
                 {".nii", PL_FORMAT_NIFTI},
                 {".nrrd", PL_FORMAT_NRRD},
                 {".mha", PL_FORMAT_MHA},
                 {".dcm", PL_FORMAT_DICOM}};
    memset(t, 0, sizeof *t);
    t->name = name;
    if (!name) return;
    t->store = swi_store_kind_of(name);
    if (t->store != SWI_STORE_NONE) {
        t->format = PL_FORMAT_STORE;
        return;
    }
    t->format = PL_FORMAT_UNKNOWN;
    for (size_t i = 0; i < sizeof files / sizeof *files; i++)
        if (cli_ends_with(name, files[i].suffix)) {
            t->format = files[i].format;
            t->suffix_len = strlen(files[i].suffix);
            return;
        }
}
