/* kv.c - paged KV block pool with refcounts and per-slot block tables.
 *
 * Invariants: a block is on the free list iff its refcount is 0; a slot's
 * table row lists exactly n_slot_blocks[slot] held blocks, the rest -1
 * (unused entries point at block 0 in the backend copy, never read). */
#include "engine/kv.h"

#include <stdlib.h>
#include <string.h>

struct hearth_kv {
    const hearth_ops *ops;
    void *ops_ctx;
    int n_layers, kv_dim, block_size, n_blocks, n_slots, max_blocks_per_seq;
    float **k, **v;          /* host array of backend pointers, [n_layers] */
    int32_t *table;          /* host, [n_slots][max_blocks_per_seq] */
    int32_t *table_dev;      /* backend copy (== table on host backends) */
    int table_dirty;
    int *slot_blocks;        /* [n_slots] blocks held */
    int *refcount;           /* [n_blocks] */
    int *free_list, n_free;  /* stack of free block ids */
    hearth_kv_view view;
};

hearth_status hearth_kv_new(hearth_kv **out, const hearth_ops *ops, void *ops_ctx, int n_layers, int kv_dim,
                            int block_size, int n_blocks, int n_slots, int max_ctx, hearth_err *err) {
    *out = NULL;
    hearth_kv *kv = calloc(1, sizeof *kv);
    if (!kv) return hearth_err_set(err, HEARTH_ENOMEM, "kv cache: out of memory");
    kv->ops = ops;
    kv->ops_ctx = ops_ctx;
    kv->n_layers = n_layers;
    kv->kv_dim = kv_dim;
    kv->block_size = block_size;
    kv->n_blocks = n_blocks;
    kv->n_slots = n_slots;
    kv->max_blocks_per_seq = (max_ctx + block_size - 1) / block_size;
    size_t layer_bytes = sizeof(float) * (size_t)n_blocks * block_size * kv_dim;
    size_t table_n = (size_t)n_slots * kv->max_blocks_per_seq;
    kv->k = calloc((size_t)n_layers, sizeof *kv->k);
    kv->v = calloc((size_t)n_layers, sizeof *kv->v);
    kv->table = malloc(sizeof(int32_t) * table_n);
    kv->slot_blocks = calloc((size_t)n_slots, sizeof(int));
    kv->refcount = calloc((size_t)n_blocks, sizeof(int));
    kv->free_list = malloc(sizeof(int) * (size_t)n_blocks);
    if (!kv->k || !kv->v || !kv->table || !kv->slot_blocks || !kv->refcount || !kv->free_list) {
        hearth_kv_free(kv);
        return hearth_err_set(err, HEARTH_ENOMEM, "kv cache: out of memory for block tables");
    }
    for (int l = 0; l < n_layers; l++) {
        kv->k[l] = ops->alloc(ops_ctx, layer_bytes);
        kv->v[l] = ops->alloc(ops_ctx, layer_bytes);
        if (!kv->k[l] || !kv->v[l]) {
            hearth_kv_free(kv);
            return hearth_err_set(err, HEARTH_ENOMEM,
                                  "kv cache: cannot allocate %.1f MiB on %s for %d blocks of %d positions",
                                  2.0 * n_layers * layer_bytes / 1048576.0, ops->name, n_blocks, block_size);
        }
    }
    if (ops->host_memory) {
        kv->table_dev = kv->table;
    } else {
        kv->table_dev = ops->alloc(ops_ctx, sizeof(int32_t) * table_n);
        if (!kv->table_dev) {
            hearth_kv_free(kv);
            return hearth_err_set(err, HEARTH_ENOMEM, "kv cache: cannot allocate the block table");
        }
    }
    for (size_t i = 0; i < table_n; i++) kv->table[i] = 0;
    for (int b = 0; b < n_blocks; b++) kv->free_list[b] = n_blocks - 1 - b;
    kv->n_free = n_blocks;
    kv->table_dirty = 1;
    kv->view = (hearth_kv_view){kv->k, kv->v, kv->table_dev, block_size, kv->max_blocks_per_seq, kv_dim, n_blocks};
    *out = kv;
    return HEARTH_OK;
}

void hearth_kv_free(hearth_kv *kv) {
    if (!kv) return;
    for (int l = 0; l < kv->n_layers; l++) {
        if (kv->k && kv->k[l]) kv->ops->free(kv->ops_ctx, kv->k[l]);
        if (kv->v && kv->v[l]) kv->ops->free(kv->ops_ctx, kv->v[l]);
    }
    if (kv->table_dev && kv->table_dev != kv->table) kv->ops->free(kv->ops_ctx, kv->table_dev);
    free(kv->k);
    free(kv->v);
    free(kv->table);
    free(kv->slot_blocks);
    free(kv->refcount);
    free(kv->free_list);
    free(kv);
}

hearth_status hearth_kv_reserve(hearth_kv *kv, int slot, int n_pos) {
    HEARTH_ASSERT(slot >= 0 && slot < kv->n_slots);
    int need = (n_pos + kv->block_size - 1) / kv->block_size;
    if (need > kv->max_blocks_per_seq) return HEARTH_ERANGE;
    int have = kv->slot_blocks[slot];
    if (need <= have) return HEARTH_OK;
    if (need - have > kv->n_free) return HEARTH_EBUSY;
    int32_t *row = kv->table + (size_t)slot * kv->max_blocks_per_seq;
    for (int i = have; i < need; i++) {
        int b = kv->free_list[--kv->n_free];
        kv->refcount[b] = 1;
        row[i] = b;
    }
    kv->slot_blocks[slot] = need;
    kv->table_dirty = 1;
    return HEARTH_OK;
}

void hearth_kv_release_slot(hearth_kv *kv, int slot) {
    int32_t *row = kv->table + (size_t)slot * kv->max_blocks_per_seq;
    for (int i = 0; i < kv->slot_blocks[slot]; i++) {
        int b = row[i];
        HEARTH_ASSERT(kv->refcount[b] > 0);
        if (--kv->refcount[b] == 0) kv->free_list[kv->n_free++] = b;
        row[i] = 0;
    }
    kv->slot_blocks[slot] = 0;
    kv->table_dirty = 1;
}

int hearth_kv_n_free_blocks(const hearth_kv *kv) { return kv->n_free; }
int hearth_kv_n_blocks(const hearth_kv *kv) { return kv->n_blocks; }
int hearth_kv_block_size(const hearth_kv *kv) { return kv->block_size; }
int hearth_kv_max_ctx(const hearth_kv *kv) { return kv->max_blocks_per_seq * kv->block_size; }

const hearth_kv_view *hearth_kv_view_get(hearth_kv *kv) {
    if (kv->table_dirty && kv->table_dev != kv->table)
        kv->ops->upload(kv->ops_ctx, kv->table_dev, kv->table,
                        sizeof(int32_t) * (size_t)kv->n_slots * kv->max_blocks_per_seq);
    kv->table_dirty = 0;
    return &kv->view;
}
