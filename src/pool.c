/* pool.c -- a small worker pool: a job is a list of phases, the items of one phase run
 * in parallel, and a phase starts only when the previous one is finished. Submitting
 * returns at once, so the caller (the predictor) overlaps with the workers. */
#include "internal.h"

#include <pthread.h>
#include <unistd.h>

#define MAX_PHASES 4

struct swi_pool {
    pthread_mutex_t mu;
    pthread_cond_t work; /* workers wait here for items */
    pthread_cond_t done; /* the submitter waits here for the job's end */
    pthread_t *threads;
    int n_threads;
    int stop;
    swi_phase phases[MAX_PHASES];
    int n_phases, phase; /* current phase; phase == n_phases: idle */
    int64_t next, finished;
};

static void advance(swi_pool *pool) {
    /* called with mu held when the current phase is complete */
    do {
        pool->phase++;
        pool->next = pool->finished = 0;
    } while (pool->phase < pool->n_phases && pool->phases[pool->phase].n == 0);
    if (pool->phase >= pool->n_phases)
        pthread_cond_broadcast(&pool->done);
    else
        pthread_cond_broadcast(&pool->work);
}

static void *worker_main(void *arg) {
    swi_pool *pool = arg;
    int id;
    pthread_mutex_lock(&pool->mu);
    for (id = 0; id < pool->n_threads && !pthread_equal(pool->threads[id], pthread_self()); id++) {}
    for (;;) {
        while (!pool->stop && (pool->phase >= pool->n_phases || pool->next >= pool->phases[pool->phase].n))
            pthread_cond_wait(&pool->work, &pool->mu);
        if (pool->stop) break;
        swi_phase ph = pool->phases[pool->phase];
        int64_t item = pool->next++;
        pthread_mutex_unlock(&pool->mu);
        ph.fn(ph.arg, item, id);
        pthread_mutex_lock(&pool->mu);
        if (++pool->finished == ph.n) advance(pool);
    }
    pthread_mutex_unlock(&pool->mu);
    return NULL;
}

int swi__cpu_count(void) {
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n < 1 ? 1 : (n > 1024 ? 1024 : (int)n);
}

swi_status swi__pool_create(swi_pool **out, int threads) {
    *out = NULL;
    swi_pool *pool = swi__calloc(1, sizeof *pool);
    if (!pool) return SWI_ERR_NOMEM;
    pool->threads = swi__calloc((size_t)threads, sizeof(pthread_t));
    if (!pool->threads) {
        swi__free(pool);
        return SWI_ERR_NOMEM;
    }
    pthread_mutex_init(&pool->mu, NULL);
    pthread_cond_init(&pool->work, NULL);
    pthread_cond_init(&pool->done, NULL);
    pool->n_phases = pool->phase = 0;
    /* hold the lock while starting so workers see their final ids */
    pthread_mutex_lock(&pool->mu);
    for (int i = 0; i < threads; i++) {
        if (pthread_create(&pool->threads[i], NULL, worker_main, pool) != 0) {
            pool->n_threads = i;
            pool->stop = 1;
            pthread_cond_broadcast(&pool->work);
            pthread_mutex_unlock(&pool->mu);
            swi__pool_destroy(pool);
            return SWI_ERR_THREAD;
        }
        pool->n_threads = i + 1;
    }
    pthread_mutex_unlock(&pool->mu);
    *out = pool;
    return SWI_OK;
}

void swi__pool_submit(swi_pool *pool, const swi_phase *phases, int n_phases) {
    pthread_mutex_lock(&pool->mu);
    for (int i = 0; i < n_phases; i++) pool->phases[i] = phases[i];
    pool->n_phases = n_phases;
    pool->phase = -1;
    advance(pool);
    pthread_mutex_unlock(&pool->mu);
}

void swi__pool_wait(swi_pool *pool) {
    pthread_mutex_lock(&pool->mu);
    while (pool->phase < pool->n_phases) pthread_cond_wait(&pool->done, &pool->mu);
    pthread_mutex_unlock(&pool->mu);
}

void swi__pool_destroy(swi_pool *pool) {
    if (!pool) return;
    pthread_mutex_lock(&pool->mu);
    pool->stop = 1;
    pthread_cond_broadcast(&pool->work);
    pthread_mutex_unlock(&pool->mu);
    for (int i = 0; i < pool->n_threads; i++) pthread_join(pool->threads[i], NULL);
    pthread_mutex_destroy(&pool->mu);
    pthread_cond_destroy(&pool->work);
    pthread_cond_destroy(&pool->done);
    swi__free(pool->threads);
    swi__free(pool);
}
