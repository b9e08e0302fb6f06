/*
 * cmd_segment.c -- `swi segment`: the options checked, then one job (segment_job.c), or
 * folder mode (folder.c); under mpirun the ranks are the shards or divide the cases.
 */
#include "cli.h"

#include "mpi_job.h"
#include "shard.h"
#include "util.h"

#include <stdio.h>

int swi_cmd_segment(int argc, char **argv) {
    seg_opts o;
    int rc = seg_parse(argc, argv, &o, 0);
    if (rc) return rc < 0 ? 0 : rc;
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
        return cli_mpi_finish(seg_folder_run(&o));
    }
    if (seg_store_check(&o, "swi segment")) return 2;
    if (!cli_mpi_built() && cli_refuse_mpi_without_support("swi segment")) return 1;
    int rank = 0, size = 1;
    if (cli_mpi_start(&rank, &size)) {
        const char *why = o.shard_given ? "under mpirun the ranks are the shards: leave --shard out"
                          : !seg_store_outputs(&o)
                              ? "under mpirun each rank writes its part of shared stores: "
                                "give --output x.zarr"
                              : NULL;
        if (why) {
            fprintf(stderr, "swi segment: %s\n", why);
            return 2;
        }
        o.shard_given = 1;
        o.shard_part = rank;
        o.shard_parts = size;
        if (seg_store_check(&o, "swi segment")) return 2;
        char msg[SWI_ERRLEN];
        if (o.shard_grid_given && cli_shard_grid_check(o.shard_grid, size, 1, msg)) {
            fprintf(stderr, "swi segment: %s\n", msg);
            return 2;
        }
    } else if (o.shard_grid_given && !o.shard_given) {
        fprintf(stderr, "swi segment: --shard-grid needs --shard I/N (box I of the grid's N) or mpirun\n");
        return 2;
    }
    return seg_run(&o, "swi segment", NULL);
}
