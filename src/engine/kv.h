/* kv.h - the paged KV cache: a pool of fixed-size blocks in backend memory
 * and a block table per sequence slot.
 *
 * A sequence slot owns the blocks listed in its row of the block table; a
 * block is refcounted so that the prefix cache can share full blocks between
 * sequences. Only the engine thread touches a hearth_kv. */
#ifndef HEARTH_ENGINE_KV_H
#define HEARTH_ENGINE_KV_H

#include "ops/ops.h"

typedef struct hearth_kv hearth_kv;

/* Pool of n_blocks blocks of block_size positions, for n_layers x kv_dim
 * floats per position, and n_slots sequence slots of up to max_ctx positions.
 * Memory comes from ops->alloc; ENOMEM names the bytes asked for. */
hearth_status hearth_kv_new(hearth_kv **out, const hearth_ops *ops, void *ops_ctx, int n_layers, int kv_dim,
                            int block_size, int n_blocks, int n_slots, int max_ctx, hearth_err *err);
void hearth_kv_free(hearth_kv *kv);

/* Make room in slot for positions [0, n_pos): acquires the blocks it lacks.
 * HEARTH_EBUSY if the pool has too few free blocks (nothing is acquired). */
hearth_status hearth_kv_reserve(hearth_kv *kv, int slot, int n_pos);
/* Release every block of slot (refcounts drop; the slot is empty again). */
void hearth_kv_release_slot(hearth_kv *kv, int slot);

int hearth_kv_n_free_blocks(const hearth_kv *kv);
int hearth_kv_n_blocks(const hearth_kv *kv);
int hearth_kv_block_size(const hearth_kv *kv);
int hearth_kv_max_ctx(const hearth_kv *kv);

/* The view the attention ops read, with the block table synced to backend
 * memory (an upload when it changed). Valid until the next reserve/release. */
const hearth_kv_view *hearth_kv_view_get(hearth_kv *kv);

#endif
