/* swi_io.h's example assumes the labels the network made (uint8) and their classes. */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>

#include "swi_io.h"

int header_example(const unsigned char *labels, int64_t classes);

int header_example(const unsigned char *labels, int64_t classes) {
#include SWI_HEADER_EXAMPLE
}
