/*
 * wrap_pipeline.c -- a diagnostic build of swi whose engine pipelining is forced by the
 * environment (swi segment has no option for it): linked with -Wl,--wrap=swi_params_init,
 * SWI_PIPELINE=1|0 overrides params.pipeline after the defaults are set (unset: automatic).
 * Build (see README.md):
 *   cc -O2 -I include -c bench/monai/wrap_pipeline.c -o /tmp/wrap_pipeline.o
 *   cmake -S . -B build-bench-pipe -DCMAKE_BUILD_TYPE=Release \
 *     "-DCMAKE_EXE_LINKER_FLAGS=/tmp/wrap_pipeline.o -Wl,--wrap=swi_params_init"
 *   cmake --build build-bench-pipe -j2 --target swi
 */
#include "swi.h"

#include <stdlib.h>

void __real_swi_params_init(swi_params *p, int dims);

void __wrap_swi_params_init(swi_params *p, int dims) {
    __real_swi_params_init(p, dims);
    const char *e = getenv("SWI_PIPELINE");
    if (e && (*e == '0' || *e == '1')) p->pipeline = *e == '1' ? SWI_PIPELINE_ON : SWI_PIPELINE_OFF;
}
