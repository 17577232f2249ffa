/* pool.h - a fixed pool of worker threads for data-parallel loops.
 *
 * Created once (at load), used on the hot path without allocation:
 * hearth_pool_run() hands out task indices 0..n_tasks-1 to the workers and
 * the calling thread, and returns when every task has finished. Workers spin
 * briefly between runs (decode issues hundreds of runs per token) and then
 * sleep. One thread at a time may call hearth_pool_run on a given pool. */
#ifndef HEARTH_CORE_POOL_H
#define HEARTH_CORE_POOL_H

#include "core/status.h"

typedef struct hearth_pool hearth_pool;

/* fn(ctx, task, n_tasks) runs once per task, on any thread. */
typedef void (*hearth_pool_fn)(void *ctx, int task, int n_tasks);

/* n_threads counts the caller: n_threads=1 starts no workers. 0 = one per core. */
hearth_status hearth_pool_new(hearth_pool **out, int n_threads, hearth_err *err);
void hearth_pool_free(hearth_pool *p);
int hearth_pool_size(const hearth_pool *p);

/* Run fn over n_tasks tasks. A NULL pool runs them on the caller. */
void hearth_pool_run(hearth_pool *p, hearth_pool_fn fn, void *ctx, int n_tasks);

/* Number of online CPUs. */
int hearth_cpu_count(void);

#endif
