/*
 * mpi_job.c -- the swi command as ranks of an MPI job (see mpi_job.h).
 */
#include "mpi_job.h"

#include "stores.h"

#ifdef SWI_HAVE_MPI

#include <mpi.h>
#include <stdio.h>

static int active;

int cli_mpi_built(void) { return 1; }

int cli_mpi_start(int *rank, int *size) {
    *rank = 0;
    *size = 1;
    int r = 0;
    if (cli_launcher_ranks(&r) < 1) return 0;
    if (!active) {
        int provided = 0;
        /* the engine's threads never call MPI: the main thread alone does */
        if (MPI_Init_thread(NULL, NULL, MPI_THREAD_FUNNELED, &provided) != MPI_SUCCESS) return 0;
        active = 1;
    }
    MPI_Comm_rank(MPI_COMM_WORLD, rank);
    MPI_Comm_size(MPI_COMM_WORLD, size);
    return 1;
}

int cli_mpi_active(void) { return active; }

int cli_mpi_all_ok(int ok) {
    if (!active) return ok;
    int mine = ok ? 1 : 0, all = 0;
    if (MPI_Allreduce(&mine, &all, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD) != MPI_SUCCESS) return 0;
    return all;
}

int cli_mpi_finish(int rc) {
    if (!active) return rc;
    fflush(stdout);
    fflush(stderr);
    if (rc != 0) MPI_Abort(MPI_COMM_WORLD, rc);
    MPI_Finalize();
    active = 0;
    return rc;
}

#else

int cli_mpi_built(void) { return 0; }

int cli_mpi_start(int *rank, int *size) {
    *rank = 0;
    *size = 1;
    return 0;
}

int cli_mpi_active(void) { return 0; }

int cli_mpi_all_ok(int ok) { return ok; }

int cli_mpi_finish(int rc) { return rc; }

#endif
