/* target.c -- see target.h. */
#include "target.h"

#include <string.h>

void pl_target_of(const char *name, pl_target *t) {
    memset(t, 0, sizeof *t);
    t->name = name;
    if (!name) return;
    t->store = swi_store_kind_of(name);
    if (t->store == SWI_STORE_NONE) t->format = swi_volume_format_of(name);
}

size_t pl_target_suffix_len(const pl_target *t) {
    return PL_TARGET_FILE(t) ? strlen(swi_volume_format_suffix(t->format)) : 0;
}
