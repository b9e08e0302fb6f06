/*
 * alloc.h -- the swi command's own allocations, open to fault injection.
 *
 * In a build with SWI_FAULT_INJECTION they draw on the library's allocation counter
 * (SWI_FAULT_ALLOC=N fails the N-th allocation of the process, library or command), so
 * one walk over N reaches every allocation of a `swi segment` run. Otherwise they are
 * malloc and calloc.
 */
#ifndef SWI_CLI_ALLOC_H
#define SWI_CLI_ALLOC_H

#include <stddef.h>

void *cli_malloc(size_t bytes);
void *cli_calloc(size_t n, size_t size);

#endif
