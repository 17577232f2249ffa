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
 * elements of `type` (F32; F16 where ops->kv_f16; E4M3 where ops->kv_e4m3) per position, and
 * n_slots sequence slots of up to max_ctx positions. kv_dim is whole heads of
 * head_dim elements: a backend with ops->kv_heads keeps each head's positions
 * of a block together (hearth_kv_view.head_dim). Memory comes from
 * ops->alloc; ENOMEM names the bytes asked for, ENOTSUP an unsupported type,
 * EINVAL a kv_dim that is not whole heads. */
hearth_status hearth_kv_new(hearth_kv **out, const hearth_ops *ops, void *ops_ctx, int n_layers, int kv_dim,
                            int head_dim, hearth_dtype type, int block_size, int n_blocks, int n_slots, int max_ctx,
                            hearth_err *err);
hearth_dtype hearth_kv_type(const hearth_kv *kv);
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

/* ---- prefix cache (DESIGN §3: content-addressed) ----
 * A full block is keyed by SHA-256(namespace, parent key, its token ids); the
 * namespace fingerprints the weights, the adapters and the KV scheme. A
 * lookup also compares the stored ids, so a collision never serves wrong KV.
 * Unreferenced cached blocks stay resident and are evicted LRU only when the
 * free list is empty. */
void hearth_kv_set_namespace(hearth_kv *kv, const uint8_t ns[32]);
/* Acquire into an empty slot the cached blocks of the longest cached prefix
 * of ids[0, n) and return the positions they cover: a multiple of the block
 * size, always < n (the last token is always computed). root (NULL: zeros)
 * is the first block's parent key: a sequence's KV that depends on more than
 * the weights and the ids (a LoRA adapter's fingerprint) chains from its own
 * root, so that it is only ever shared with sequences of the same root. */
int hearth_kv_prefix_acquire(hearth_kv *kv, int slot, const uint8_t root[32], const int32_t *ids, int n);
/* Register the slot's blocks that are full within ids[0, n_computed), under
 * the root it acquired with. */
void hearth_kv_prefix_commit(hearth_kv *kv, int slot, const uint8_t root[32], const int32_t *ids, int n_computed);
/* Blocks held by the cache and referenced by no sequence (evictable). */
int hearth_kv_n_cached_blocks(const hearth_kv *kv);
/* Blocks not held by any sequence: free or evictable. */
int hearth_kv_n_available_blocks(const hearth_kv *kv);

/* ---- the disk tier (kv_disk.h) ----
 * With a disk attached, a cached block evicted from the pool is written to
 * it first when a later lookup had reused it, at most write_mib_s MiB a
 * second (0: 128; past it the block is dropped, counted as skipped: the
 * writes run on the engine thread, a download and a file write each), and a
 * lookup that misses in the pool reads the block from it (prefix_acquire: a
 * block found there counts as cached like one found in memory). The disk is
 * borrowed: it outlives the cache. */
typedef struct hearth_kv_disk hearth_kv_disk;
hearth_status hearth_kv_attach_disk(hearth_kv *kv, hearth_kv_disk *disk, double write_mib_s, hearth_err *err);
hearth_kv_disk *hearth_kv_disk_of(const hearth_kv *kv); /* NULL: none attached */
/* Every registered block (held, then cached from the most recently used) not
 * yet on disk written there and fsynced, the directories too, up to as many
 * as the disk's budget holds: on return HEARTH_OK, those blocks are durable. *n_written: the blocks written now. EINVAL without a
 * disk; EIO names the file that failed. */
hearth_status hearth_kv_flush(hearth_kv *kv, int *n_written, hearth_err *err);

/* The view the attention ops read, with the block table synced to backend
 * memory (an upload when it changed). Valid until the next reserve/release. */
const hearth_kv_view *hearth_kv_view_get(hearth_kv *kv);

#endif
