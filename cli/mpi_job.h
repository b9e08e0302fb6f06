/*
 * mpi_job.h -- swi under mpirun (cli/mpi_job.c): the ranks of one job run the shards of one run,
 * rank I of N as --shard I/N, rank 0 writing the stores' metadata. Without MPI built in
 * (SWI_HAVE_MPI) these are stand-ins that report a single process.
 */
#ifndef SWI_CLI_MPI_H
#define SWI_CLI_MPI_H

#include <stddef.h>

/* Whether MPI is built in. */
int cli_mpi_built(void);

/* When started by an MPI launcher, initialise MPI and give this rank and the job's size
 * (returns 1); else 0 with rank 0 and size 1. Call once, before any thread starts. */
int cli_mpi_start(int *rank, int *size);

/* Whether cli_mpi_start initialised MPI. */
int cli_mpi_active(void);

/* The job's agreement before writing: every rank's ok (non-zero) combined, 1 only when all
 * are ok. A subcommand makes it at most once, before it writes anything shared (rank 0
 * creating the stores); cli_mpi_finish makes it for a rank that stopped earlier. Without
 * MPI: ok. */
int cli_mpi_all_ok(int ok);

/* End of a subcommand with exit status rc: the ranks wait for one another and learn how the
 * others ended. A failed rank's stores stay marked incomplete (the others still finish their
 * own parts, which a rerun of the failed shards alone completes); rank 0 says how many failed. Returns rc, or for a rank
 * that succeeded the worst status of the job, so every rank's exit status tells. */
int cli_mpi_finish(int rc);

/* Collective (every rank calls it, in the same order): rank 0 receives every rank's text
 * (len bytes each) concatenated in rank order into *all (malloc'd, NUL-ended; the others
 * get NULL) and the sums of every rank's n counts in v (all ranks). Without MPI active:
 * a copy of mine. Returns 0, or -1 (out of memory, an MPI failure: *all NULL). */
int cli_mpi_gather(const char *mine, size_t len, char **all, int *v, int n);

/* The number of ranks an MPI launcher gave this process (OMPI_COMM_WORLD_SIZE, PMI_SIZE,
 * PMIX... in the environment), and this one's rank; 0 (and rank 0) when not started by one. */
int cli_launcher_ranks(int *rank);

/* Without MPI built in, refuse to run as one of N > 1 ranks (each would run the whole
 * job). Returns 0, or 1 after printing why. */
int cli_refuse_mpi_without_support(const char *who);

#endif
