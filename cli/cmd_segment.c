/*
 * cmd_segment.c -- `swi segment`: the options checked, then one job (segment_job.c), or
 * folder mode (folder.c); under mpirun the ranks are the shards or divide the cases.
 */
#include "cli.h"

#include "mpi_job.h"

#include <stdio.h>

int swi_cmd_segment(int argc, char **argv) {
    seg_cmd o;
    int rc = seg_parse(argc, argv, &o, 0);
    if (rc) return rc < 0 ? 0 : rc;
    swi_job_spec *sp = &o.spec;
    if (o.input_dir) {
        /* under mpirun the ranks divide the cases, rank I of N as --part I/N */
        if (!cli_mpi_built() && cli_refuse_mpi_without_support("swi segment")) return 1;
        int rank = 0, size = 1;
        if (!cli_mpi_start(&rank, &size)) return seg_folder_run(&o);
        if (o.part_given) {
            fprintf(stderr, "swi segment: under mpirun the ranks are the parts: leave --part out\n");
            return cli_mpi_finish(2);
        }
        o.part_index = rank;
        o.part_count = size;
        if (rank > 0) o.quiet = o.spec.quiet = 1; /* rank 0 reports for all; errors still tell */
        return cli_mpi_finish(seg_folder_run(&o));
    }
    if (seg_store_check(sp, "swi segment")) return 2;
    if (!cli_mpi_built() && cli_refuse_mpi_without_support("swi segment")) return 1;
    int rank = 0, size = 1;
    const int sharded = sp->shard_parts > 0 || sp->shard_init;
    if (cli_mpi_start(&rank, &size)) {
        const char *why = sharded ? "under mpirun the ranks are the shards: leave --shard out"
                          : !seg_store_outputs(sp)
                              ? "under mpirun each rank writes its part of shared stores: "
                                "give --output x.zarr"
                              : NULL;
        if (why) {
            fprintf(stderr, "swi segment: %s\n", why);
            return 2;
        }
        sp->shard_part = rank;
        sp->shard_parts = size;
        sp->shard_collective = 1;              /* part 0 creates the stores, the others join them */
        if (rank > 0) o.quiet = sp->quiet = 1; /* rank 0 reports for all; errors still tell */
        if (seg_store_check(sp, "swi segment")) return 2; /* also --shard-grid against the ranks */
    } else if (sp->shard_grid[0] && !sharded) {
        fprintf(stderr, "swi segment: --shard-grid needs --shard I/N (box I of the grid's N) or mpirun\n");
        return 2;
    }
    return seg_run(sp, o.quiet, "swi segment", NULL);
}
