/*
 * bench_io.c -- `swi bench` on real volumes and into stores: --input, --output-file,
 * --shard (see bench_io.h).
 */
#include "bench_io.h"

#include "safety.h"
#include "shard.h"
#include "stores.h"
#include "util.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

void bench_io_init(bench_io *b) {
    memset(b, 0, sizeof *b);
    b->parts = 1;
}

int bench_io_open_input(bench_io *b, int64_t shape[3], char *err, size_t n) {
    char e[SWI_ERRLEN];
    if (!b->in) b->in = calloc(1, sizeof *b->in);
    if (!b->in) {
        snprintf(err, n, "out of memory");
        return -1;
    }
    b->in->channels = 1;
    if (cli_is_store(b->input)) {
        if (cli_input_open_store(b->in, 0, b->input, NULL, NULL, e)) {
            snprintf(err, n, "%s", e);
            return -1;
        }
    } else {
        swi_volume v;
        if (swi_volume_open(b->input, &v, e, sizeof e) != SWI_OK) {
            snprintf(err, n, "%s", e);
            return -1;
        }
        size_t bytes = (size_t)swi_volume_voxels(&v) * sizeof(float);
        b->volume = malloc(bytes);
        if (!b->volume) {
            char s[32];
            snprintf(err, n, "%s: out of memory reading the volume (%s)", b->input, cli_bytes(bytes, s));
            return -1;
        }
        if (swi_volume_read(&v, b->volume, NULL, e, sizeof e) != SWI_OK) {
            snprintf(err, n, "%s", e);
            return -1;
        }
        memcpy(b->in->size, v.size, sizeof b->in->size);
        b->in->mem[0] = b->volume;
    }
    memcpy(shape, b->in->size, 3 * sizeof *shape);
    cli_input_reader(b->in);
    return 0;
}

void bench_io_tensor(bench_io *b, swi_tensor *in) {
    if (b->volume) {
        in->data = b->volume;
    } else {
        in->data = NULL;
        in->reader = &b->in->reader;
    }
}

static void output_spec(const swi_tensor *in, int scores, int64_t classes, swi_store_spec *spec) {
    swi_store_spec_init(spec);
    memcpy(spec->size, in->size, sizeof spec->size);
    spec->planes = scores ? classes : 1;
    spec->dtype = scores ? SWI_DTYPE_FLOAT32 : classes > 256 ? SWI_DTYPE_UINT16 : SWI_DTYPE_UINT8;
    spec->labels = !scores;
    spec->classes = classes;
}

int bench_io_begin_output(bench_io *b, swi_params *p, const swi_tensor *in, const swi_output *out, int scores,
                          int64_t classes, char *err, size_t n) {
    if (in->dims != 3) {
        snprintf(err, n, "--output-file needs a 3-D volume");
        return 2;
    }
    swi_store_spec spec;
    output_spec(in, scores, classes, &spec);
    /* slabs along the engine's outermost axis complete one after another */
    char e[SWI_ERRLEN];
    if (cli_outer_axis(p, in, out, 1, &spec.slab_axis, e)) {
        snprintf(err, n, "%s", e);
        return 1;
    }
    /* parts of one store must come from one job: the same input, predictor and options */
    char job[3072], extra[64];
    snprintf(extra, sizeof extra, "bench %s, %lld classes", scores ? "scores" : "labels", (long long)classes);
    const char *inputs[1] = {b->input ? b->input : "(generated)"};
    cli_job_fingerprint(inputs, 1, in->size, NULL, 0, p, extra, job, sizeof job);
    spec.job = job;
    int flags = (b->force ? SWI_STORE_FORCE : 0) | (b->sharded ? SWI_STORE_SHARED : 0);
    if (b->init) {
        if (swi_store_create_metadata(b->output, &spec, flags, err, n) != SWI_OK) return 1;
        return 0;
    }
    if (b->mpi) {
        /* rank 0 writes the metadata; the others join once it is there */
        int ok = 1;
        if (b->part == 0) ok = swi_store_create_metadata(b->output, &spec, flags, err, n) == SWI_OK;
        if (!b->all_ok(ok)) {
            if (ok) snprintf(err, n, "%s: not created: another rank failed first", b->output);
            return 1;
        }
    }
    int64_t chunk[3];
    swi_store_default_chunk(&spec, chunk);
    for (int d = 0; d < 3; d++) {
        b->box_lo[d] = 0;
        b->box_hi[d] = in->size[d];
    }
    if (b->sharded) cli_shard_box(in->size, chunk, b->part, b->grid, b->box_lo, b->box_hi);
    b->empty = 0;
    for (int d = 0; d < 3; d++) b->empty |= b->box_lo[d] >= b->box_hi[d];
    if (b->sharded && !b->empty)
        for (int d = 0; d < 3; d++) {
            p->part_lo[d] = b->box_lo[d];
            p->part_hi[d] = b->box_hi[d];
        }
    if (swi_store_create(b->output, &spec, flags, b->part, b->parts, b->box_lo, b->box_hi, &b->writer, err,
                         n) != SWI_OK) {
        if (b->sharded && !b->mpi && strlen(err) + 24 < n) {
            char m[2048];
            snprintf(m, sizeof m, "%s", err);
            snprintf(err, n, "--shard %d/%d: %s", b->part, b->parts, m);
        }
        return 1;
    }
    return 0;
}

void bench_io_report_shards(const bench_io *b, swi_ctx *ctx, const swi_params *p, const swi_tensor *in,
                            const swi_output *out, const swi_plan *plan) {
    (void)ctx;
    swi_ctx *c = swi_create();
    if (!c) return;
    swi_params q = *p;
    swi_plan whole, part;
    memset(q.part_lo, 0, sizeof q.part_lo);
    memset(q.part_hi, 0, sizeof q.part_hi);
    int64_t sum = 0;
    int counted = b->parts <= 4096;
    if (swi_plan_run(c, &q, in, out, 1, &whole) == SWI_OK) {
        int64_t chunk[3];
        swi_store_writer_chunk(b->writer, chunk);
        for (int i = 0; counted && i < b->parts; i++) {
            int64_t lo[3], hi[3], empty = 0;
            cli_shard_box(in->size, chunk, i, b->grid, lo, hi);
            for (int d = 0; d < 3; d++) empty |= lo[d] >= hi[d];
            if (empty) continue;
            memcpy(q.part_lo, lo, sizeof lo);
            memcpy(q.part_hi, hi, sizeof hi);
            if (swi_plan_run(c, &q, in, out, 1, &part) != SWI_OK) {
                counted = 0;
                break;
            }
            sum += part.windows_total;
        }
        char box[128];
        cli_shard_box_str(b->box_lo, b->box_hi, box, sizeof box);
        if (b->grid_given)
            printf("shard: %d/%d of grid %dx%dx%d, box %s: %lld windows of the whole run's %lld", b->part,
                   b->parts, b->grid[0], b->grid[1], b->grid[2], box, (long long)plan->windows_total,
                   (long long)whole.windows_total);
        else
            printf("shard: %d/%d rows [%lld, %lld): %lld windows of the whole run's %lld", b->part, b->parts,
                   (long long)b->box_lo[0], (long long)b->box_hi[0], (long long)plan->windows_total,
                   (long long)whole.windows_total);
        if (counted && whole.windows_total > 0)
            printf("; the %d shards run %lld windows together: %.2f%% duplicated at the boundaries", b->parts,
                   (long long)sum, 100.0 * (double)(sum - whole.windows_total) / (double)whole.windows_total);
        printf("\n");
    }
    swi_free(c);
}

int bench_io_finish(bench_io *b, swi_status st, const swi_ctx *ctx, char *err, size_t n) {
    if (!b->writer) return 0;
    swi_store_writer *w = b->writer;
    b->writer = NULL;
    if (st != SWI_OK) {
        /* the writer's own failure says more than "a region callback returned non-zero" */
        const char *why = swi_store_writer_error(w);
        snprintf(err, n, "%s; %s %s",
                 *why  ? why
                 : ctx ? swi_last_error(ctx)
                       : "failed",
                 b->output,
                 swi_store_writer_replaces(w) ? "is left as it was before the run"
                                              : "is left marked incomplete");
        swi_store_abort(w);
        return -1;
    }
    if (swi_store_commit(w, err, n) != SWI_OK) return -1;
    return 0;
}

void bench_io_close(bench_io *b) {
    swi_store_abort(b->writer);
    b->writer = NULL;
    if (b->in) cli_input_close(b->in);
    free(b->in);
    b->in = NULL;
    free(b->volume);
    b->volume = NULL;
}

int bench_io_grid(bench_io *b, char *err, size_t n) {
    char e[SWI_ERRLEN];
    if (!b->grid_given) {
        b->grid[0] = b->parts;
        b->grid[1] = b->grid[2] = 1;
        return 0;
    }
    if (!b->sharded) {
        snprintf(err, n, "--shard-grid needs --shard I/N (box I of the grid's N) or mpirun");
        return 2;
    }
    if (b->init) return 0;
    if (cli_shard_grid_check(b->grid, b->parts, b->mpi, e)) {
        snprintf(err, n, "%s", e);
        return 2;
    }
    return 0;
}

int bench_raw_begin(bench_raw *r, const char *path, int force, char *err, size_t n) {
    char msg[SWI_ERRLEN];
    r->out = calloc(1, sizeof *r->out);
    if (!r->out) {
        snprintf(err, n, "%s: out of memory", path);
        return -1;
    }
    r->out->fd = -1;
    if (cli_out_begin(r->out, path, force, msg) == 0) return 0;
    snprintf(err, n, "%s", msg);
    free(r->out);
    r->out = NULL;
    return -1;
}

int bench_raw_finish(bench_raw *r, const void *data, size_t bytes, int force, char *err, size_t n) {
    char msg[SWI_ERRLEN];
    const unsigned char *p = data;
    const int fd = cli_out_take_fd(r->out);
    int bad = 0;
    while (bytes > 0 && !bad) {
        const ssize_t w = write(fd, p, bytes < ((size_t)1 << 30) ? bytes : ((size_t)1 << 30));
        if (w < 0 && errno == EINTR) continue;
        bad = w <= 0;
        if (!bad) p += w, bytes -= (size_t)w;
    }
    if (bad)
        snprintf(msg, sizeof msg, "%.400s: write failed: %s", r->out->final, strerror(errno ? errno : EIO));
    if (close(fd) != 0 && !bad) {
        bad = 1;
        snprintf(msg, sizeof msg, "%.400s: write failed: %s", r->out->final, strerror(errno));
    }
    if (bad || cli_out_commit(r->out, force, msg)) {
        snprintf(err, n, "%s", msg);
        bench_raw_abort(r);
        return -1;
    }
    free(r->out);
    r->out = NULL;
    return 0;
}

void bench_raw_abort(bench_raw *r) {
    if (!r->out) return;
    cli_out_abort(r->out);
    free(r->out);
    r->out = NULL;
}
