/* pool.c - spin-then-sleep worker pool.
 *
 * Invariant: a run starts (gen++) only after every worker has reported the
 * previous run done, so no worker can still be inside an old fn. */
#define _GNU_SOURCE
#include "core/pool.h"

#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <unistd.h>
#if defined(__x86_64__)
#include <immintrin.h>
#define cpu_relax() _mm_pause()
#else
#define cpu_relax() ((void)0)
#endif

/* Spin briefly (pause), then yield the core (the machine may be
 * oversubscribed: a spinning thread must not starve the one it waits for),
 * then sleep on the condition variable. */
enum { SPIN_PAUSES = 1 << 10, SPIN_YIELDS = 1 << 8 };

struct hearth_pool {
    int n_threads; /* including the caller */
    pthread_t *threads;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    atomic_uint gen;
    atomic_int next_task;
    atomic_int workers_done;
    atomic_int stop;
    hearth_pool_fn fn;
    void *ctx;
    int n_tasks;
};

int hearth_cpu_count(void) {
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n > 0 ? (int)n : 1;
}

static void drain_tasks(hearth_pool *p) {
    for (;;) {
        int t = atomic_fetch_add_explicit(&p->next_task, 1, memory_order_relaxed);
        if (t >= p->n_tasks) break;
        p->fn(p->ctx, t, p->n_tasks);
    }
}

static void *worker_main(void *arg) {
    hearth_pool *p = arg;
    unsigned seen = 0; /* gen starts at 0 before any worker exists */
    for (;;) {
        unsigned g;
        int spins = 0;
        while ((g = atomic_load_explicit(&p->gen, memory_order_acquire)) == seen) {
            if (++spins < SPIN_PAUSES) {
                cpu_relax();
                continue;
            }
            if (spins < SPIN_PAUSES + SPIN_YIELDS) {
                sched_yield();
                continue;
            }
            pthread_mutex_lock(&p->mu);
            while ((g = atomic_load(&p->gen)) == seen) pthread_cond_wait(&p->cv, &p->mu);
            pthread_mutex_unlock(&p->mu);
            break;
        }
        seen = g;
        if (atomic_load(&p->stop)) return NULL;
        drain_tasks(p);
        atomic_fetch_add_explicit(&p->workers_done, 1, memory_order_release);
    }
}

hearth_status hearth_pool_new(hearth_pool **out, int n_threads, hearth_err *err) {
    *out = NULL;
    if (n_threads <= 0) n_threads = hearth_cpu_count();
    hearth_pool *p = calloc(1, sizeof *p);
    if (!p) return hearth_err_set(err, HEARTH_ENOMEM, "thread pool: out of memory");
    p->n_threads = n_threads;
    pthread_mutex_init(&p->mu, NULL);
    pthread_cond_init(&p->cv, NULL);
    atomic_init(&p->gen, 0);
    atomic_init(&p->next_task, 0);
    atomic_init(&p->workers_done, 0);
    atomic_init(&p->stop, 0);
    if (n_threads > 1) {
        p->threads = calloc((size_t)n_threads - 1, sizeof *p->threads);
        if (!p->threads) {
            free(p);
            return hearth_err_set(err, HEARTH_ENOMEM, "thread pool: out of memory");
        }
        for (int i = 0; i < n_threads - 1; i++) {
            if (pthread_create(&p->threads[i], NULL, worker_main, p) != 0) {
                p->n_threads = i + 1;
                hearth_pool_free(p);
                return hearth_err_set(err, HEARTH_EIO, "thread pool: cannot start thread %d", i);
            }
        }
    }
    *out = p;
    return HEARTH_OK;
}

void hearth_pool_free(hearth_pool *p) {
    if (!p) return;
    atomic_store(&p->stop, 1);
    pthread_mutex_lock(&p->mu);
    atomic_fetch_add(&p->gen, 1);
    pthread_cond_broadcast(&p->cv);
    pthread_mutex_unlock(&p->mu);
    for (int i = 0; i < p->n_threads - 1; i++) pthread_join(p->threads[i], NULL);
    pthread_mutex_destroy(&p->mu);
    pthread_cond_destroy(&p->cv);
    free(p->threads);
    free(p);
}

int hearth_pool_size(const hearth_pool *p) { return p ? p->n_threads : 1; }

void hearth_pool_run(hearth_pool *p, hearth_pool_fn fn, void *ctx, int n_tasks) {
    if (n_tasks <= 0) return;
    if (!p || p->n_threads == 1 || n_tasks == 1) {
        for (int t = 0; t < n_tasks; t++) fn(ctx, t, n_tasks);
        return;
    }
    p->fn = fn;
    p->ctx = ctx;
    p->n_tasks = n_tasks;
    atomic_store_explicit(&p->next_task, 0, memory_order_relaxed);
    atomic_store_explicit(&p->workers_done, 0, memory_order_relaxed);
    pthread_mutex_lock(&p->mu);
    atomic_fetch_add_explicit(&p->gen, 1, memory_order_release);
    pthread_cond_broadcast(&p->cv);
    pthread_mutex_unlock(&p->mu);
    drain_tasks(p);
    for (int spins = 0; atomic_load_explicit(&p->workers_done, memory_order_acquire) < p->n_threads - 1; spins++) {
        if (spins < SPIN_PAUSES) cpu_relax();
        else sched_yield();
    }
}
