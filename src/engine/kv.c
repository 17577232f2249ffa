/* kv.c - paged KV block pool, per-slot block tables, content-addressed
 * prefix cache with LRU eviction.
 *
 * Block states: free (refcount 0, on the free list, no key), held (refcount
 * > 0, by one or more slots; keyed if registered), cached (refcount 0,
 * keyed, on the LRU list). Registered blocks are full and never written
 * again: a slot writes only positions past its shared prefix. A slot's
 * table row lists exactly slot_blocks[slot] held blocks; the rest is 0. */
#include "engine/kv.h"

#include "core/clock.h"
#include "core/log.h"
#include "core/sha256.h"
#include "engine/kv_disk.h"

#include <stdlib.h>
#include <string.h>

typedef struct {
    uint8_t key[32];
    int keyed;
    int hnext;       /* hash chain */
    int lprev, lnext; /* LRU list (cached blocks only) */
    int reused;       /* times a lookup found it since it was registered (or 1: read back from disk) */
} block_meta;

struct hearth_kv {
    const hearth_ops *ops;
    void *ops_ctx;
    int n_layers, kv_dim, block_size, n_blocks, n_slots, max_blocks_per_seq;
    void **k, **v;           /* host array of backend pointers, [n_layers] */
    hearth_dtype type;       /* F32, F16 or E4M3 */
    int32_t *table;          /* host, [n_slots][max_blocks_per_seq] */
    int32_t *table_dev;      /* backend copy (== table on host backends) */
    int table_dirty;
    int *slot_blocks;        /* [n_slots] blocks held */
    int *slot_keyed;         /* [n_slots] leading blocks whose key is known (registered or found) */
    int *refcount;           /* [n_blocks] */
    int *free_list, n_free;  /* stack of free block ids */
    block_meta *meta;        /* [n_blocks] */
    int32_t *ids;            /* [n_blocks][block_size] token ids of keyed blocks */
    int *buckets;            /* [n_buckets] hash chain heads, -1 = empty */
    int n_buckets;
    int lru_head, lru_tail, n_cached;
    uint8_t ns[32];
    hearth_kv_view view;
    hearth_kv_disk *disk;     /* the disk tier, or NULL (borrowed) */
    uint32_t *disk_meta;      /* [KV_DISK_DESC + block_size]: a block's layout and ids, as stored */
    uint32_t *disk_meta_in;   /* the same, as read */
    uint8_t *disk_data;       /* [n_layers][2][block bytes]: a block's K and V rows */
    double disk_rate;         /* bytes a second that evictions may write (a token bucket of one second) */
    double disk_allowance, disk_t; /* bytes the bucket holds, as of time disk_t */
};

#define KV_DISK_DESC 6 /* format, block_size, n_layers, kv_dim, head layout, element type */

hearth_status hearth_kv_new(hearth_kv **out, const hearth_ops *ops, void *ops_ctx, int n_layers, int kv_dim,
                            int head_dim, hearth_dtype type, int block_size, int n_blocks, int n_slots, int max_ctx,
                            hearth_err *err) {
    *out = NULL;
    if (head_dim <= 0 || kv_dim % head_dim)
        return hearth_err_set(err, HEARTH_EINVAL, "kv cache: %d elements a position are not whole heads of %d", kv_dim,
                              head_dim);
    if (type != HEARTH_DT_F32 && !(type == HEARTH_DT_F16 && ops->kv_f16) && !(type == HEARTH_DT_E4M3 && ops->kv_e4m3))
        return hearth_err_set(err, HEARTH_ENOTSUP, "kv cache: the %s backend has no %s KV cache", ops->name,
                              hearth_dtype_get(type) ? hearth_dtype_get(type)->name : "such");
    hearth_kv *kv = calloc(1, sizeof *kv);
    if (!kv) return hearth_err_set(err, HEARTH_ENOMEM, "kv cache: out of memory");
    kv->ops = ops;
    kv->ops_ctx = ops_ctx;
    kv->n_layers = n_layers;
    kv->type = type;
    kv->kv_dim = kv_dim;
    kv->block_size = block_size;
    kv->n_blocks = n_blocks;
    kv->n_slots = n_slots;
    kv->max_blocks_per_seq = (max_ctx + block_size - 1) / block_size;
    kv->n_buckets = 16;
    while (kv->n_buckets < 2 * n_blocks) kv->n_buckets *= 2;
    size_t layer_bytes = (size_t)hearth_dtype_get(type)->block_bytes * n_blocks * block_size * kv_dim;
    size_t table_n = (size_t)n_slots * kv->max_blocks_per_seq;
    kv->k = calloc((size_t)n_layers, sizeof *kv->k);
    kv->v = calloc((size_t)n_layers, sizeof *kv->v);
    kv->table = calloc(table_n, sizeof(int32_t));
    kv->slot_blocks = calloc((size_t)n_slots, sizeof(int));
    kv->slot_keyed = calloc((size_t)n_slots, sizeof(int));
    kv->refcount = calloc((size_t)n_blocks, sizeof(int));
    kv->free_list = malloc(sizeof(int) * (size_t)n_blocks);
    kv->meta = calloc((size_t)n_blocks, sizeof *kv->meta);
    kv->ids = malloc(sizeof(int32_t) * (size_t)n_blocks * block_size);
    kv->buckets = malloc(sizeof(int) * (size_t)kv->n_buckets);
    if (!kv->k || !kv->v || !kv->table || !kv->slot_blocks || !kv->slot_keyed || !kv->refcount || !kv->free_list ||
        !kv->meta || !kv->ids || !kv->buckets) {
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
    for (int b = 0; b < n_blocks; b++) kv->free_list[b] = n_blocks - 1 - b;
    kv->n_free = n_blocks;
    for (int i = 0; i < kv->n_buckets; i++) kv->buckets[i] = -1;
    kv->lru_head = kv->lru_tail = -1;
    kv->table_dirty = 1;
    kv->view = (hearth_kv_view){kv->k, kv->v, kv->table_dev, block_size, kv->max_blocks_per_seq, kv_dim, n_blocks, type,
                                0, 0, ops->kv_heads ? head_dim : 0};
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
    free(kv->slot_keyed);
    free(kv->refcount);
    free(kv->free_list);
    free(kv->meta);
    free(kv->ids);
    free(kv->buckets);
    free(kv->disk_meta);
    free(kv->disk_meta_in);
    free(kv->disk_data);
    free(kv);
}

/* ---- hash table and LRU ---- */

static unsigned bucket_of(const hearth_kv *kv, const uint8_t key[32]) {
    unsigned h;
    memcpy(&h, key, sizeof h);
    return h & (unsigned)(kv->n_buckets - 1);
}

static int table_find(const hearth_kv *kv, const uint8_t key[32], const int32_t *ids) {
    for (int b = kv->buckets[bucket_of(kv, key)]; b >= 0; b = kv->meta[b].hnext)
        if (!memcmp(kv->meta[b].key, key, 32) &&
            !memcmp(kv->ids + (size_t)b * kv->block_size, ids, sizeof(int32_t) * kv->block_size))
            return b;
    return -1;
}

static void table_insert(hearth_kv *kv, int b, const uint8_t key[32], const int32_t *ids) {
    block_meta *m = &kv->meta[b];
    memcpy(m->key, key, 32);
    memcpy(kv->ids + (size_t)b * kv->block_size, ids, sizeof(int32_t) * kv->block_size);
    m->keyed = 1;
    m->reused = 0;
    unsigned h = bucket_of(kv, key);
    m->hnext = kv->buckets[h];
    kv->buckets[h] = b;
}

static void table_remove(hearth_kv *kv, int b) {
    int *pp = &kv->buckets[bucket_of(kv, kv->meta[b].key)];
    while (*pp != b) pp = &kv->meta[*pp].hnext;
    *pp = kv->meta[b].hnext;
    kv->meta[b].keyed = 0;
}

static void lru_unlink(hearth_kv *kv, int b) {
    block_meta *m = &kv->meta[b];
    if (m->lprev >= 0) kv->meta[m->lprev].lnext = m->lnext;
    else kv->lru_head = m->lnext;
    if (m->lnext >= 0) kv->meta[m->lnext].lprev = m->lprev;
    else kv->lru_tail = m->lprev;
    kv->n_cached--;
}

static void lru_push(hearth_kv *kv, int b) {
    block_meta *m = &kv->meta[b];
    m->lnext = -1;
    m->lprev = kv->lru_tail;
    if (kv->lru_tail >= 0) kv->meta[kv->lru_tail].lnext = b;
    else kv->lru_head = b;
    kv->lru_tail = b;
    kv->n_cached++;
}

static hearth_status spill(hearth_kv *kv, int b, int durable, hearth_err *err);
static int spill_allowed(hearth_kv *kv);
static int disk_fetch(hearth_kv *kv, const uint8_t key[32], const int32_t *ids);

/* A block for new data: free list first, else evict the least recently used
 * cached block (to the disk tier first, when there is one and the block was
 * reused: a prefix that served one later request is worth its file; a block
 * no request shared would cost a write at every eviction of a busy server).
 * -1 if neither exists. */
static int take_block(hearth_kv *kv) {
    if (kv->n_free > 0) return kv->free_list[--kv->n_free];
    int b = kv->lru_head;
    if (b < 0) return -1;
    if (kv->disk && kv->meta[b].reused && !hearth_kv_disk_has(kv->disk, kv->meta[b].key)) {
        hearth_err err = {0};
        if (!spill_allowed(kv)) hearth_kv_disk_note_skip(kv->disk);
        else if (spill(kv, b, 0, &err) != HEARTH_OK) hearth_log_warn("%s", err.msg);
    }
    lru_unlink(kv, b);
    table_remove(kv, b);
    return b;
}

static void drop_ref(hearth_kv *kv, int b) {
    HEARTH_ASSERT(kv->refcount[b] > 0);
    if (--kv->refcount[b] > 0) return;
    if (kv->meta[b].keyed) lru_push(kv, b);
    else kv->free_list[kv->n_free++] = b;
}

/* ---- slots ---- */

hearth_status hearth_kv_reserve(hearth_kv *kv, int slot, int n_pos) {
    HEARTH_ASSERT(slot >= 0 && slot < kv->n_slots);
    int need = (n_pos + kv->block_size - 1) / kv->block_size;
    if (need > kv->max_blocks_per_seq) return HEARTH_ERANGE;
    int have = kv->slot_blocks[slot];
    if (need <= have) return HEARTH_OK;
    if (need - have > kv->n_free + kv->n_cached) return HEARTH_EBUSY;
    int32_t *row = kv->table + (size_t)slot * kv->max_blocks_per_seq;
    for (int i = have; i < need; i++) {
        int b = take_block(kv);
        kv->refcount[b] = 1;
        row[i] = b;
    }
    kv->slot_blocks[slot] = need;
    kv->table_dirty = 1;
    return HEARTH_OK;
}

void hearth_kv_release_slot(hearth_kv *kv, int slot) {
    int32_t *row = kv->table + (size_t)slot * kv->max_blocks_per_seq;
    /* last block first: a chain's tail joins the LRU list first and is evicted first, since a block is
     * found only through every block before it (vLLM frees in the same order) */
    for (int i = kv->slot_blocks[slot] - 1; i >= 0; i--) {
        drop_ref(kv, row[i]);
        row[i] = 0;
    }
    kv->slot_blocks[slot] = 0;
    kv->slot_keyed[slot] = 0;
    kv->table_dirty = 1;
}

/* ---- prefix cache ---- */

void hearth_kv_set_namespace(hearth_kv *kv, const uint8_t ns[32]) { memcpy(kv->ns, ns, 32); }

static void block_key(const hearth_kv *kv, const uint8_t parent[32], const int32_t *ids, uint8_t out[32]) {
    hearth_sha256 s;
    hearth_sha256_init(&s);
    hearth_sha256_update(&s, kv->ns, 32);
    hearth_sha256_update(&s, parent, 32);
    hearth_sha256_update(&s, ids, sizeof(int32_t) * (size_t)kv->block_size);
    hearth_sha256_final(&s, out);
}

int hearth_kv_prefix_acquire(hearth_kv *kv, int slot, const uint8_t root[32], const int32_t *ids, int n) {
    HEARTH_ASSERT(kv->slot_blocks[slot] == 0);
    int32_t *row = kv->table + (size_t)slot * kv->max_blocks_per_seq;
    uint8_t parent[32] = {0}, key[32];
    if (root) memcpy(parent, root, 32);
    int bs = kv->block_size, got = 0;
    /* full blocks strictly before the last token */
    for (int i = 0; (i + 1) * bs <= n - 1 && i < kv->max_blocks_per_seq; i++) {
        block_key(kv, parent, ids + (size_t)i * bs, key);
        int b = table_find(kv, key, ids + (size_t)i * bs);
        if (b >= 0 && kv->refcount[b] == 0) lru_unlink(kv, b);
        if (b < 0 && (b = disk_fetch(kv, key, ids + (size_t)i * bs)) < 0) break;
        kv->meta[b].reused++;
        kv->refcount[b]++;
        row[got++] = b;
        memcpy(parent, key, 32);
    }
    kv->slot_blocks[slot] = got;
    kv->slot_keyed[slot] = got;
    if (got) kv->table_dirty = 1;
    return got * bs;
}

void hearth_kv_prefix_commit(hearth_kv *kv, int slot, const uint8_t root[32], const int32_t *ids, int n_computed) {
    int bs = kv->block_size, full = n_computed / bs;
    if (full > kv->slot_blocks[slot]) full = kv->slot_blocks[slot];
    int32_t *row = kv->table + (size_t)slot * kv->max_blocks_per_seq;
    int i = kv->slot_keyed[slot];
    if (i >= full) return;
    uint8_t parent[32] = {0}, key[32];
    if (i > 0)
        memcpy(parent, kv->meta[row[i - 1]].key, 32);
    else if (root)
        memcpy(parent, root, 32);
    for (; i < full; i++) {
        block_key(kv, parent, ids + (size_t)i * bs, key);
        int b = row[i];
        if (!kv->meta[b].keyed && table_find(kv, key, ids + (size_t)i * bs) < 0) table_insert(kv, b, key, ids + (size_t)i * bs);
        /* An identical block computed by another sequence keeps the table
         * entry; this one stays private (keyed = 0) but remembers its key so
         * that the chain continues from it. */
        memcpy(kv->meta[b].key, key, 32);
        memcpy(parent, key, 32);
    }
    kv->slot_keyed[slot] = full;
}

int hearth_kv_n_cached_blocks(const hearth_kv *kv) { return kv->n_cached; }
int hearth_kv_n_available_blocks(const hearth_kv *kv) { return kv->n_free + kv->n_cached; }
int hearth_kv_n_free_blocks(const hearth_kv *kv) { return kv->n_free; }
int hearth_kv_n_blocks(const hearth_kv *kv) { return kv->n_blocks; }
int hearth_kv_block_size(const hearth_kv *kv) { return kv->block_size; }
int hearth_kv_max_ctx(const hearth_kv *kv) { return kv->max_blocks_per_seq * kv->block_size; }

hearth_dtype hearth_kv_type(const hearth_kv *kv) { return kv->type; }

/* A small table (up to 64 KiB) is uploaded before every forward, changed or
 * not: a backend that records a step's ops and replays them as a graph then
 * sees the same ops at every step, where an upload every block_size tokens
 * made those steps miss their graph (s6-run2 trace: ~3 ms at the first
 * crossing, ~0.2 ms at each later one, at batch 1). */
#define KV_TABLE_ALWAYS_BYTES (64u << 10)
const hearth_kv_view *hearth_kv_view_get(hearth_kv *kv) {
    const size_t bytes = sizeof(int32_t) * (size_t)kv->n_slots * kv->max_blocks_per_seq;
    if ((kv->table_dirty || bytes <= KV_TABLE_ALWAYS_BYTES) && kv->table_dev != kv->table)
        kv->ops->upload(kv->ops_ctx, kv->table_dev, kv->table, bytes);
    kv->table_dirty = 0;
    return &kv->view;
}

/* ---- the disk tier (kv_disk.h) ----
 * A block's file holds its layout and token ids (checked on load: a block of
 * another backend's layout or an id collision is a miss), then, layer by
 * layer, its K rows and its V rows as the pool holds them. */

static size_t block_bytes(const hearth_kv *kv) {
    return (size_t)hearth_dtype_get(kv->type)->block_bytes * kv->block_size * kv->kv_dim;
}

static void disk_meta_fill(const hearth_kv *kv, const int32_t *ids) {
    uint32_t *m = kv->disk_meta;
    m[0] = 1;
    m[1] = (uint32_t)kv->block_size;
    m[2] = (uint32_t)kv->n_layers;
    m[3] = (uint32_t)kv->kv_dim;
    m[4] = (uint32_t)kv->view.head_dim;
    m[5] = (uint32_t)kv->type;
    memcpy(m + KV_DISK_DESC, ids, sizeof(int32_t) * (size_t)kv->block_size);
}

/* An eviction's write fits the rate: the bucket refilled for the time since, then charged a block. */
static int spill_allowed(hearth_kv *kv) {
    const double bytes = 2.0 * block_bytes(kv) * kv->n_layers, now = hearth_time_now();
    double a = kv->disk_allowance + (now - kv->disk_t) * kv->disk_rate;
    kv->disk_allowance = a < kv->disk_rate ? a : kv->disk_rate;
    kv->disk_t = now;
    if (kv->disk_allowance < bytes) return 0;
    kv->disk_allowance -= bytes;
    return 1;
}

hearth_status hearth_kv_attach_disk(hearth_kv *kv, hearth_kv_disk *disk, double write_mib_s, hearth_err *err) {
    size_t n_meta = sizeof(uint32_t) * (size_t)(KV_DISK_DESC + kv->block_size);
    kv->disk_meta = malloc(n_meta);
    kv->disk_meta_in = malloc(n_meta);
    kv->disk_data = malloc(2 * block_bytes(kv) * (size_t)kv->n_layers);
    if (!kv->disk_meta || !kv->disk_meta_in || !kv->disk_data)
        return hearth_err_set(err, HEARTH_ENOMEM, "kv cache: out of memory for the disk tier's block buffer");
    kv->disk = disk;
    kv->disk_rate = (write_mib_s > 0 ? write_mib_s : 128.0) * 1048576.0;
    if (kv->disk_rate < 2.0 * block_bytes(kv) * kv->n_layers) /* at least a block a second */
        kv->disk_rate = 2.0 * block_bytes(kv) * kv->n_layers;
    kv->disk_allowance = kv->disk_rate;
    kv->disk_t = hearth_time_now();
    return HEARTH_OK;
}

/* Block b (keyed, full) to disk, unless a file of its key is there. */
static hearth_status spill(hearth_kv *kv, int b, int durable, hearth_err *err) {
    if (hearth_kv_disk_has(kv->disk, kv->meta[b].key)) return HEARTH_OK;
    size_t n = block_bytes(kv), off = n * (size_t)b;
    for (int l = 0; l < kv->n_layers; l++) {
        kv->ops->download(kv->ops_ctx, kv->disk_data + 2 * n * l, (const char *)kv->k[l] + off, n);
        kv->ops->download(kv->ops_ctx, kv->disk_data + 2 * n * l + n, (const char *)kv->v[l] + off, n);
    }
    disk_meta_fill(kv, kv->ids + (size_t)b * kv->block_size);
    return hearth_kv_disk_put(kv->disk, kv->meta[b].key, kv->disk_meta,
                              sizeof(uint32_t) * (KV_DISK_DESC + kv->block_size), kv->disk_data,
                              2 * n * kv->n_layers, durable, err);
}

/* The block of key (and ids) read from disk into a pool block, registered
 * with refcount 0 and off the LRU list; -1 when it is not there, not valid
 * or no block can be taken. */
static int disk_fetch(hearth_kv *kv, const uint8_t key[32], const int32_t *ids) {
    if (!kv->disk || !hearth_kv_disk_has(kv->disk, key)) return -1;
    size_t n = block_bytes(kv), n_meta = sizeof(uint32_t) * (KV_DISK_DESC + kv->block_size);
    int b = take_block(kv); /* first: an eviction spills through the same buffers */
    if (b < 0) return -1;
    disk_meta_fill(kv, ids);
    if (!hearth_kv_disk_get(kv->disk, key, kv->disk_meta_in, n_meta, kv->disk_data, 2 * n * kv->n_layers) ||
        memcmp(kv->disk_meta_in, kv->disk_meta, n_meta)) {
        kv->free_list[kv->n_free++] = b;
        return -1;
    }
    for (int l = 0; l < kv->n_layers; l++) {
        kv->ops->upload(kv->ops_ctx, (char *)kv->k[l] + n * (size_t)b, kv->disk_data + 2 * n * l, n);
        kv->ops->upload(kv->ops_ctx, (char *)kv->v[l] + n * (size_t)b, kv->disk_data + 2 * n * l + n, n);
    }
    table_insert(kv, b, key, ids);
    return b;
}

hearth_kv_disk *hearth_kv_disk_of(const hearth_kv *kv) { return kv->disk; }

/* Block b written unless it is on disk already (made durable by the sync that ends the flush); *n counts
 * writes. */
static hearth_status flush_one(hearth_kv *kv, int b, int *n, hearth_err *err) {
    if (hearth_kv_disk_has(kv->disk, kv->meta[b].key)) return HEARTH_OK;
    hearth_status st = spill(kv, b, 0, err);
    *n += st == HEARTH_OK;
    return st;
}

hearth_status hearth_kv_flush(hearth_kv *kv, int *n_written, hearth_err *err) {
    int n = 0;
    if (n_written) *n_written = 0;
    if (!kv->disk) return hearth_err_set(err, HEARTH_EINVAL, "kv cache: no disk tier to flush to");
    /* the blocks in use, then the cached ones from the most recently used, while they fit the budget (more
     * would only push out what was just written) */
    const uint64_t file = hearth_kv_disk_file_bytes(sizeof(uint32_t) * (KV_DISK_DESC + kv->block_size),
                                                    2 * block_bytes(kv) * kv->n_layers);
    const uint64_t room = hearth_kv_disk_budget(kv->disk) / file;
    hearth_status st = HEARTH_OK;
    for (int b = 0; b < kv->n_blocks && st == HEARTH_OK && (uint64_t)n < room; b++)
        if (kv->meta[b].keyed && kv->refcount[b] > 0) st = flush_one(kv, b, &n, err);
    for (int b = kv->lru_tail; b >= 0 && st == HEARTH_OK && (uint64_t)n < room; b = kv->meta[b].lprev)
        st = flush_one(kv, b, &n, err);
    if (n_written) *n_written = n;
    return st != HEARTH_OK ? st : hearth_kv_disk_sync(kv->disk, err);
}
