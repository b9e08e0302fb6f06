/*
 * mpi_job.h -- swi under mpirun (cli/mpi_job.c): the ranks of one job run the shards of one run,
 * rank I of N as --shard I/N, rank 0 writing the stores' metadata. Without MPI built in
 * (SWI_HAVE_MPI) these are stand-ins that report a single process.
 */
#ifndef SWI_CLI_MPI_H
#define SWI_CLI_MPI_H

/* Whether MPI is built in. */
int cli_mpi_built(void);

/* When started by an MPI launcher, initialise MPI and give this rank and the job's size
 * (returns 1); else 0 with rank 0 and size 1. Call once, before any thread starts. */
int cli_mpi_start(int *rank, int *size);

/* Whether cli_mpi_start initialised MPI. */
int cli_mpi_active(void);

/* Every rank's ok (non-zero) combined: 1 only when all are ok. Without MPI: ok. */
int cli_mpi_all_ok(int ok);

/* End of a subcommand with exit status rc: a failed rank stops the whole job (the others
 * are ended by the launcher; stores they were writing stay marked incomplete), a
 * successful one waits for the others. Returns rc. */
int cli_mpi_finish(int rc);

#endif
