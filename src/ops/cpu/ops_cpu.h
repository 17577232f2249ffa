/* ops_cpu.h - the CPU backend of the op set (ops/ops.h). */
#ifndef HEARTH_OPS_CPU_H
#define HEARTH_OPS_CPU_H

#include "core/pool.h"
#include "ops/ops.h"

typedef struct hearth_cpu_ctx hearth_cpu_ctx;

/* A CPU backend context: a thread pool (n_threads as hearth_pool_new: 0 = one
 * per core) and scratch sized for batches of up to max_tokens rows of up to
 * max_cols inputs, and attention over up to max_ctx positions. The ctx is the
 * `ctx` argument of every op in hearth_cpu_ops. One thread at a time. */
hearth_status hearth_cpu_ctx_new(hearth_cpu_ctx **out, int n_threads, int max_tokens, int max_cols,
                                 int max_ctx, hearth_err *err);
void hearth_cpu_ctx_free(hearth_cpu_ctx *c);
hearth_pool *hearth_cpu_ctx_pool(hearth_cpu_ctx *c);
/* For tests: hold the attention's partials (rows over several segments of
 * positions) to at most n floats, so that a batch is cut into more passes;
 * n is kept no larger than ctx_new made it. */
void hearth_cpu_ctx_cap_att_part(hearth_cpu_ctx *c, size_t n);
/* A training op (train.c) that could not get its scratch notes it (the op then does nothing);
 * hearth_cpu_ctx_train_failed reports the first, as hearth_train_ops.failed. */
void hearth_cpu_ctx_train_oom(hearth_cpu_ctx *c, size_t bytes);
hearth_status hearth_cpu_ctx_train_failed(hearth_cpu_ctx *c, hearth_err *err);

extern const hearth_ops hearth_cpu_ops;

#endif
