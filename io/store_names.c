/* store_names.c -- which store a name means (x.zarr, x.ome.zarr, x.h5:/path): a pure
 * function, apart from the store code so that parsers (and their fuzzers) link it alone. */
#include "swi_store.h"

#include <string.h>

static int ends_with(const char *s, const char *suffix) {
    size_t n = strlen(s), m = strlen(suffix);
    return n >= m && strcmp(s + n - m, suffix) == 0;
}

swi_store_kind swi_store_kind_of(const char *name) {
    if (!name) return SWI_STORE_NONE;
    if (strstr(name, ".h5:") || strstr(name, ".hdf5:") || strstr(name, ".H5:")) return SWI_STORE_HDF5;
    size_t n = strlen(name);
    while (n > 1 && name[n - 1] == '/') n--;
    char buf[4096];
    if (n >= sizeof buf) return SWI_STORE_NONE;
    memcpy(buf, name, n);
    buf[n] = '\0';
    if (ends_with(buf, ".ome.zarr") || strstr(buf, ".ome.zarr/")) return SWI_STORE_OME;
    /* the labels of an image named x.zarr (as most published OME-Zarr images are) */
    const char *l = strstr(buf, ".zarr/labels/");
    if (l && l[13] && !strchr(l + 13, '/')) return SWI_STORE_OME;
    if (ends_with(buf, ".zarr")) return SWI_STORE_ZARR;
    return SWI_STORE_NONE;
}
