/* docs-test prelude: a fragment of docs/library.md about swi_pipeline.h, compiled as the
 * body of a function that is handed a filled spec. */
#include <stdio.h>
#include <swi_pipeline.h>

int docs_fragment(const swi_job_spec *spec_in);
int docs_fragment(const swi_job_spec *spec_in) {
    swi_job_spec spec = *spec_in;
    swi_job_hooks hooks = {0};
    swi_job_plan plan;
    swi_job_result result;
    char err[512];
    /* BODY */
    return 0;
}
