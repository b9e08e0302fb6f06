/* A header whose example assumes nothing: the example is the body of a function. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include SWI_HEADER

int header_example(void);

int header_example(void) {
#include SWI_HEADER_EXAMPLE
    return 0;
}
