/*
 * mpi_job.c -- the swi command as ranks of an MPI job (see mpi_job.h).
 */
#include "mpi_job.h"

#include "util.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifdef SWI_HAVE_MPI

#include <mpi.h>
#include <stdio.h>

static int active;
/* whether this rank has made the job's one agreement before writing (cli_mpi_all_ok) */
static int agreed;

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
    agreed = 1;
    int mine = ok ? 1 : 0, all = 0;
    if (MPI_Allreduce(&mine, &all, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD) != MPI_SUCCESS) return 0;
    return all;
}

int cli_mpi_finish(int rc) {
    if (!active) return rc;
    /* Every rank makes the same collective calls whatever happened to it, so a failed rank
     * never leaves the others waiting and the job needs no MPI_Abort (whose teardown can
     * hang under some launchers). A rank that stopped before the agreement makes it now,
     * saying it failed. */
    const int shared = agreed; /* this rank came to write shared stores (folder mode never does) */
    if (!agreed) (void)cli_mpi_all_ok(0);
    int mine[2] = {rc, rc != 0}, all[2] = {rc, rc != 0};
    if (MPI_Allreduce(&mine[0], &all[0], 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD) != MPI_SUCCESS ||
        MPI_Allreduce(&mine[1], &all[1], 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD) != MPI_SUCCESS) {
        fflush(stdout);
        fflush(stderr);
        MPI_Abort(MPI_COMM_WORLD, rc ? rc : 1);
    }
    int rank = 0, size = 1;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (rc == 0 && all[1] > 0 && rank == 0)
        fprintf(stderr, "swi: %d of %d ranks failed (their messages say why)%s\n", all[1], size,
                shared ? "; what they were writing stays marked incomplete" : "");
    fflush(stdout);
    fflush(stderr);
    MPI_Finalize();
    active = 0;
    agreed = 0;
    return rc ? rc : all[0];
}

int cli_mpi_gather(const char *mine, size_t len, char **all, int *v, int n) {
    *all = NULL;
    if (!active) {
        *all = malloc(len + 1);
        if (!*all) return -1;
        memcpy(*all, mine, len);
        (*all)[len] = '\0';
        return 0;
    }
    int rank = 0, size = 1, bad = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (n > 0 && MPI_Allreduce(MPI_IN_PLACE, v, n, MPI_INT, MPI_SUM, MPI_COMM_WORLD) != MPI_SUCCESS) bad = 1;
    const int mylen = len > (size_t)(1 << 28) ? 0 : (int)len;
    /* the counts and offsets at rank 0: a few ints a rank; without them nothing can be
     * received, and the ranks could not agree that nothing is sent */
    int *lens = NULL;
    if (rank == 0 && !(lens = calloc(2 * (size_t)size, sizeof *lens))) {
        fprintf(stderr, "swi: out of memory\n");
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    int *displs = lens ? lens + size : NULL;
    if (MPI_Gather(&mylen, 1, MPI_INT, lens, 1, MPI_INT, 0, MPI_COMM_WORLD) != MPI_SUCCESS) bad = 1;
    size_t total = 0;
    char *buf = NULL;
    int ok = 0;
    if (rank == 0 && !bad) {
        for (int i = 0; i < size; i++) {
            displs[i] = (int)total;
            total += (size_t)lens[i];
        }
        ok = total <= (size_t)(1 << 30) && (buf = malloc(total + 1)) != NULL;
    }
    /* the ranks send only when rank 0 has the room */
    if (MPI_Bcast(&ok, 1, MPI_INT, 0, MPI_COMM_WORLD) != MPI_SUCCESS) ok = 0;
    char none = 0;
    if (ok && MPI_Gatherv(mylen ? mine : &none, mylen, MPI_CHAR, buf, lens, displs, MPI_CHAR, 0,
                          MPI_COMM_WORLD) != MPI_SUCCESS)
        ok = 0;
    free(lens);
    if (rank == 0 && ok) {
        buf[total] = '\0';
        *all = buf;
        return 0;
    }
    free(buf);
    return rank == 0 ? -1 : 0;
}

#else

int cli_mpi_gather(const char *mine, size_t len, char **all, int *v, int n) {
    (void)v;
    (void)n;
    *all = malloc(len + 1);
    if (!*all) return -1;
    memcpy(*all, mine, len);
    (*all)[len] = '\0';
    return 0;
}

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

int cli_launcher_ranks(int *rank) {
    static const char *sizes[] = {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_SIZE", "MPI_LOCALNRANKS"};
    static const char *ranks[] = {"OMPI_COMM_WORLD_RANK", "PMI_RANK", "PMIX_RANK", "MPI_LOCALRANKID"};
    *rank = 0;
    for (size_t k = 0; k < sizeof sizes / sizeof *sizes; k++) {
        const char *v = getenv(sizes[k]);
        int64_t n;
        if (v && cli_parse_i64(v, 1, 1 << 24, &n) == 0) {
            const char *r = getenv(ranks[k]);
            int64_t i;
            if (r && cli_parse_i64(r, 0, n - 1, &i) == 0) *rank = (int)i;
            return (int)n;
        }
    }
    return 0;
}

int cli_refuse_mpi_without_support(const char *who) {
    int rank = 0, n = cli_launcher_ranks(&rank);
    if (n <= 1) return 0;
    fprintf(
        stderr,
        "%s: started as rank %d of %d by an MPI launcher, but this swi was built without MPI "
        "(install libopenmpi-dev and rebuild; swi --version tells), so every rank would run the whole job; "
        "run one process, or one --shard I/N per process\n",
        who, rank, n);
    return 1;
}
