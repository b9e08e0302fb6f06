/* alloc.c -- see alloc.h. */
#include "alloc.h"

#include <stdbool.h>
#include <stdlib.h>

#ifdef SWI_FAULT_INJECTION
/* src/alloc.c: true when this allocation is the one SWI_FAULT_ALLOC names. */
bool swi__fault_point(void);
#define INJECTED() swi__fault_point()
#else
#define INJECTED() false
#endif

void *cli_malloc(size_t bytes) { return INJECTED() ? NULL : malloc(bytes ? bytes : 1); }

void *cli_calloc(size_t n, size_t size) { return INJECTED() ? NULL : calloc(n ? n : 1, size ? size : 1); }
