/* swi-export: the `swi export` command as a standalone executable (for tests). */
#include "swi_export.h"

int main(int argc, char **argv) {
    (void)argc;
    argv[0] = "swi-export";
    return swi_cmd_export(argc, argv);
}
