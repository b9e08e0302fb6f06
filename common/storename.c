/* storename.c -- cli_is_store: a name is a store or a file (apart, so the option parser
 * and its fuzzer need no store code). */
#include "swi_store.h"
#include "util.h"

int cli_is_store(const char *name) { return swi_store_kind_of(name) != SWI_STORE_NONE; }
