/* swi_report.h's example assumes the volume the labels were made for (v), the labels
 * (uint8) and the image. */
#include <fcntl.h>
#include <stdio.h>
#include <string.h>

#include "swi_io.h"
#include "swi_report.h"

int header_example(swi_volume v, const unsigned char *labels, const float *image);

int header_example(swi_volume v, const unsigned char *labels, const float *image) {
#include SWI_HEADER_EXAMPLE
}
