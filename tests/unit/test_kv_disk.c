/* test_kv_disk.c - the prefix cache's disk tier: blocks flushed by one cache
 * are found by another (a restart) with their bytes; reused blocks evicted
 * from the pool spill to disk and come back (others are not written); torn, corrupt and foreign files are
 * misses, never served; the byte budget drops the least recently used. */
#include "testhelp.h"

#include "core/checksum.h"
#include "engine/kv.h"
#include "engine/kv_disk.h"
#include "ops/cpu/ops_cpu.h"

#include <dirent.h>
#include <sys/stat.h>
#include <stdint.h>
#include <stdlib.h>
#include <unistd.h>

enum { LAYERS = 2, KV_DIM = 128, HEAD = 64, BS = 4 };

static const char *scratch(const char *name) {
    static char path[4096];
    snprintf(path, sizeof path, "%s/%s", test_tmpdir(), name);
    return path;
}

static hearth_kv *new_kv(hearth_cpu_ctx *cpu, int n_layers, int n_blocks, hearth_kv_disk *d) {
    hearth_kv *kv = NULL;
    hearth_err err = {0};
    if (hearth_kv_new(&kv, &hearth_cpu_ops, cpu, n_layers, KV_DIM, HEAD, HEARTH_DT_F16, BS, n_blocks, 2, 64, &err))
        return NULL;
    uint8_t ns[32] = {7, 1, 2};
    hearth_kv_set_namespace(kv, ns);
    if (d && hearth_kv_attach_disk(kv, d, 1024.0, &err)) {
        hearth_kv_free(kv);
        return NULL;
    }
    return kv;
}

/* The byte of layer l, K (0) or V (1), the sequence's position p, element j. */
static uint16_t pattern(int l, int which, int p, int j, int salt) {
    return (uint16_t)((l * 7919 + which * 104729 + p * 131 + j * 3 + salt * 17) & 0x7bff);
}

/* Positions [0, n) of slot's blocks written with the pattern (write 1), or checked against it: the
 * first position that differs (n: none). A position's elements are found by the view's rule (the
 * head-block layout or rows). */
static int pattern_pass(hearth_kv *kv, int slot, int n, int salt, int write) {
    const hearth_kv_view *v = hearth_kv_view_get(kv);
    for (int p = 0; p < n; p++) {
        int b = v->block_table[slot * v->max_blocks_per_seq + p / BS], i = p % BS;
        for (int l = 0; l < LAYERS; l++)
            for (int j = 0; j < KV_DIM; j++) {
                size_t off = v->head_dim ? ((size_t)(b * (KV_DIM / HEAD) + j / HEAD) * BS + i) * HEAD + j % HEAD
                                         : ((size_t)b * BS + i) * KV_DIM + j;
                uint16_t *k = (uint16_t *)v->k[l] + off, *vv = (uint16_t *)v->v[l] + off;
                if (write) {
                    *k = pattern(l, 0, p, j, salt);
                    *vv = pattern(l, 1, p, j, salt);
                } else if (*k != pattern(l, 0, p, j, salt) || *vv != pattern(l, 1, p, j, salt)) {
                    return p;
                }
            }
    }
    return n;
}
static void fill(hearth_kv *kv, int slot, int n, int salt) { pattern_pass(kv, slot, n, salt, 1); }
static int matching(hearth_kv *kv, int slot, int n, int salt) { return pattern_pass(kv, slot, n, salt, 0); }

/* A prompt computed in slot (its positions written with the pattern), its full blocks registered, the slot
 * released: what a finished request leaves in the prefix cache. The reserve's status. */
static hearth_status cache_prompt(hearth_kv *kv, int slot, const int32_t *ids, int n, int salt) {
    hearth_status st = hearth_kv_reserve(kv, slot, n);
    if (st != HEARTH_OK) return st;
    fill(kv, slot, n, salt);
    hearth_kv_prefix_commit(kv, slot, NULL, ids, n);
    hearth_kv_release_slot(kv, slot);
    return HEARTH_OK;
}

/* Every .kvb file under dir, through f. */
static int each_file(const char *dir, void (*f)(const char *path)) {
    int n = 0;
    char sub[4200], path[4500];
    for (int s = 0; s < 256; s++) {
        snprintf(sub, sizeof sub, "%s/%02x", dir, s);
        DIR *d = opendir(sub);
        struct dirent *e;
        while (d && (e = readdir(d))) {
            if (!strstr(e->d_name, ".kvb")) continue;
            snprintf(path, sizeof path, "%s/%s", sub, e->d_name);
            if (f) f(path);
            n++;
        }
        if (d) closedir(d);
    }
    return n;
}

TEST(kv_disk_flushed_blocks_survive_a_restart) {
    hearth_cpu_ctx *cpu;
    CHECK_EQ(hearth_cpu_ctx_new(&cpu, 1, 16, 64, 64, NULL), HEARTH_OK);
    const char *dir = scratch("kvd-restart");
    hearth_kv_disk *d;
    hearth_err err = {0};
    CHECK_EQ(hearth_kv_disk_open(&d, dir, 1u << 30, &err), HEARTH_OK);
    hearth_kv *kv = new_kv(cpu, LAYERS, 8, d);
    CHECK(kv);
    int32_t ids[13];
    for (int i = 0; i < 13; i++) ids[i] = 1000 + i * 7;
    CHECK_EQ(hearth_kv_reserve(kv, 0, 13), HEARTH_OK);
    fill(kv, 0, 13, 1);
    hearth_kv_prefix_commit(kv, 0, NULL, ids, 13);
    int written = -1;
    CHECK_EQ(hearth_kv_flush(kv, &written, &err), HEARTH_OK);
    CHECK_EQ(written, 3); /* the three full blocks, held by the slot */
    CHECK_EQ(hearth_kv_flush(kv, &written, &err), HEARTH_OK);
    CHECK_EQ(written, 0); /* already there */
    hearth_kv_release_slot(kv, 0);
    hearth_kv_free(kv);
    hearth_kv_disk_close(d);
    CHECK_EQ(each_file(dir, NULL), 3);

    /* a new process: the directory indexed again, an empty pool */
    CHECK_EQ(hearth_kv_disk_open(&d, dir, 1u << 30, &err), HEARTH_OK);
    hearth_kv_disk_stats st;
    hearth_kv_disk_stats_get(d, &st);
    CHECK_EQ(st.files, 3);
    kv = new_kv(cpu, LAYERS, 8, d);
    CHECK(kv);
    CHECK_EQ(hearth_kv_n_cached_blocks(kv), 0);
    CHECK_EQ(hearth_kv_prefix_acquire(kv, 0, NULL, ids, 13), 12);
    CHECK_EQ(matching(kv, 0, 12, 1), 12);
    hearth_kv_disk_stats_get(d, &st);
    CHECK_EQ(st.hits, 3);
    hearth_kv_release_slot(kv, 0);
    /* a longer prompt that shares the first 9 tokens: 2 blocks */
    int32_t other[13];
    memcpy(other, ids, sizeof other);
    other[9] = 5;
    CHECK_EQ(hearth_kv_prefix_acquire(kv, 1, NULL, other, 13), 8);
    hearth_kv_release_slot(kv, 1);
    /* another root (an adapter) or a cache of another shape finds nothing */
    uint8_t root[32] = {9};
    CHECK_EQ(hearth_kv_prefix_acquire(kv, 1, root, ids, 13), 0);
    hearth_kv_free(kv);
    kv = new_kv(cpu, LAYERS + 1, 8, d);
    CHECK(kv);
    CHECK_EQ(hearth_kv_prefix_acquire(kv, 0, NULL, ids, 13), 0);
    hearth_kv_free(kv);
    hearth_kv_disk_close(d);
    hearth_cpu_ctx_free(cpu);
}

static void flip_last_byte(const char *path) {
    FILE *f = fopen(path, "r+b");
    if (!f) return;
    fseek(f, -1, SEEK_END);
    int c = fgetc(f);
    fseek(f, -1, SEEK_END);
    fputc(c ^ 0x5a, f);
    fclose(f);
}

static void cut_in_half(const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f) return;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fclose(f);
    if (truncate(path, n / 2)) return;
}

TEST(kv_disk_evicted_blocks_spill_and_bad_files_are_misses) {
    hearth_cpu_ctx *cpu;
    CHECK_EQ(hearth_cpu_ctx_new(&cpu, 1, 16, 64, 64, NULL), HEARTH_OK);
    const char *dir = scratch("kvd-spill");
    hearth_kv_disk *d;
    hearth_err err = {0};
    CHECK_EQ(hearth_kv_disk_open(&d, dir, 1u << 30, &err), HEARTH_OK);
    hearth_kv *kv = new_kv(cpu, LAYERS, 4, d);
    CHECK(kv);
    int32_t a[9];
    for (int i = 0; i < 9; i++) a[i] = 50 + i;
    CHECK_EQ(cache_prompt(kv, 0, a, 9, 2), HEARTH_OK);
    CHECK_EQ(hearth_kv_n_cached_blocks(kv), 2);
    CHECK_EQ(hearth_kv_prefix_acquire(kv, 0, NULL, a, 9), 8); /* reused once: worth a file when evicted */
    hearth_kv_release_slot(kv, 0);
    CHECK_EQ(each_file(dir, NULL), 0); /* nothing written while the pool has room */
    CHECK_EQ(hearth_kv_reserve(kv, 1, 16), HEARTH_OK); /* the whole pool: both cached blocks evicted */
    fill(kv, 1, 16, 3);
    CHECK_EQ(each_file(dir, NULL), 2);
    int32_t b16[17];
    for (int i = 0; i < 17; i++) b16[i] = 900 + i;
    hearth_kv_prefix_commit(kv, 1, NULL, b16, 16);
    hearth_kv_release_slot(kv, 1);
    CHECK_EQ(hearth_kv_n_cached_blocks(kv), 4); /* no free block: each block read back evicts one */
    CHECK_EQ(hearth_kv_prefix_acquire(kv, 0, NULL, a, 9), 8); /* b's blocks never reused: not written */
    CHECK_EQ(matching(kv, 0, 8, 2), 8);
    CHECK_EQ(each_file(dir, NULL), 2);
    hearth_kv_release_slot(kv, 0);
    CHECK_EQ(hearth_kv_prefix_acquire(kv, 1, NULL, b16, 17), 8); /* its tail went first: its head is there */
    CHECK_EQ(matching(kv, 1, 8, 3), 8);
    hearth_kv_release_slot(kv, 1);
    /* now a fetch evicts a reused block, which spills through the buffers the fetch reads into */
    CHECK_EQ(cache_prompt(kv, 1, b16, 16, 3), HEARTH_OK);
    CHECK_EQ(hearth_kv_prefix_acquire(kv, 1, NULL, b16, 17), 16);
    hearth_kv_release_slot(kv, 1); /* all four reused now */
    CHECK_EQ(hearth_kv_prefix_acquire(kv, 0, NULL, a, 9), 8);
    CHECK_EQ(matching(kv, 0, 8, 2), 8);
    CHECK_EQ(each_file(dir, NULL), 6); /* b's first two went to make room, its last two for a's */
    hearth_kv_release_slot(kv, 0);
    CHECK_EQ(hearth_kv_prefix_acquire(kv, 1, NULL, b16, 17), 16); /* two from memory, two back from disk */
    CHECK_EQ(matching(kv, 1, 16, 3), 16);
    hearth_kv_release_slot(kv, 1);
    CHECK_EQ(hearth_kv_prefix_acquire(kv, 0, NULL, a, 9), 8);
    CHECK_EQ(matching(kv, 0, 8, 2), 8);
    hearth_kv_release_slot(kv, 0);
    hearth_kv_free(kv);
    hearth_kv_disk_close(d);

    /* a flipped byte: the first block's file fails its checksum, is removed, and nothing is served */
    CHECK_EQ(each_file(dir, flip_last_byte), 6);
    CHECK_EQ(hearth_kv_disk_open(&d, dir, 1u << 30, &err), HEARTH_OK);
    kv = new_kv(cpu, LAYERS, 4, d);
    CHECK(kv);
    CHECK_EQ(hearth_kv_prefix_acquire(kv, 0, NULL, a, 9), 0);
    hearth_kv_disk_stats st;
    hearth_kv_disk_stats_get(d, &st);
    CHECK_EQ(st.corrupt, 1);
    CHECK_EQ(each_file(dir, NULL), 5);
    CHECK_EQ(hearth_kv_n_available_blocks(kv), 4); /* the block taken for it went back */
    hearth_kv_release_slot(kv, 0);
    /* a torn file (cut short) is a miss too */
    hearth_kv_free(kv);
    hearth_kv_disk_close(d);
    CHECK_EQ(hearth_kv_disk_open(&d, dir, 1u << 30, &err), HEARTH_OK);
    uint8_t key[32] = {0}, meta[8];
    static uint8_t data[64];
    CHECK_EQ(hearth_kv_disk_get(d, key, meta, sizeof meta, data, sizeof data), 0); /* unknown key */
    hearth_kv_disk_stats_get(d, &st);
    CHECK_EQ(st.files, 5);
    hearth_kv_disk_close(d);
    hearth_cpu_ctx_free(cpu);
}

static int g_bad_modes;
static void mode_is_0600(const char *path) {
    struct stat sb;
    if (stat(path, &sb) || (sb.st_mode & 0777) != 0600) g_bad_modes++;
}
static void remove_file(const char *path) { unlink(path); }

TEST(kv_disk_torn_file_is_removed) {
    const char *dir = scratch("kvd-torn");
    hearth_kv_disk *d;
    hearth_err err = {0};
    CHECK_EQ(hearth_kv_disk_open(&d, dir, 1u << 30, &err), HEARTH_OK);
    uint8_t key[32] = {0xab, 1}, meta[16], data[3000], m2[16], d2[3000];
    for (int i = 0; i < 16; i++) meta[i] = (uint8_t)i;
    for (int i = 0; i < 3000; i++) data[i] = (uint8_t)(i * 7);
    CHECK_EQ(hearth_kv_disk_put(d, key, meta, sizeof meta, data, sizeof data, 0, &err), HEARTH_OK);
    CHECK_EQ(hearth_kv_disk_get(d, key, m2, sizeof m2, d2, sizeof d2), 1);
    CHECK(!memcmp(m2, meta, sizeof meta) && !memcmp(d2, data, sizeof data));
    CHECK_EQ(hearth_kv_disk_get(d, key, m2, sizeof m2, d2, 100), 0); /* other sizes: a miss, the file stays */
    CHECK_EQ(hearth_kv_disk_has(d, key), 1);
    CHECK_EQ(each_file(dir, cut_in_half), 1);
    CHECK_EQ(hearth_kv_disk_get(d, key, m2, sizeof m2, d2, sizeof d2), 0);
    CHECK_EQ(hearth_kv_disk_has(d, key), 0);
    CHECK_EQ(each_file(dir, NULL), 0);
    /* the files hold prompts' KV: the owner's only; one removed by someone else is a plain miss */
    CHECK_EQ(hearth_kv_disk_put(d, key, meta, sizeof meta, data, sizeof data, 1, &err), HEARTH_OK);
    CHECK_EQ(each_file(dir, mode_is_0600), 1);
    CHECK_EQ(g_bad_modes, 0);
    CHECK_EQ(each_file(dir, remove_file), 1);
    hearth_kv_disk_stats st;
    hearth_kv_disk_stats_get(d, &st);
    long corrupt = st.corrupt;
    CHECK_EQ(hearth_kv_disk_get(d, key, m2, sizeof m2, d2, sizeof d2), 0);
    hearth_kv_disk_stats_get(d, &st);
    CHECK_EQ(st.corrupt, corrupt);
    CHECK_EQ(hearth_kv_disk_has(d, key), 0);
    CHECK_EQ(hearth_kv_disk_sync(d, &err), HEARTH_OK);
    hearth_kv_disk_close(d);
}

/* 10 files of ~1 KB under a 5 KB budget: the last written and the last read stay. */
TEST(kv_disk_budget_drops_the_least_recently_used) {
    const char *dir = scratch("kvd-budget");
    hearth_kv_disk *d;
    hearth_err err = {0};
    uint8_t meta[4] = {1, 2, 3, 4}, data[1000] = {0}, m2[4], d2[1000];
    const uint64_t size = hearth_kv_disk_file_bytes(sizeof meta, sizeof data);
    CHECK_EQ(size, 64 + sizeof meta + sizeof data); /* a 64-byte header, then the parts */
    CHECK_EQ(hearth_kv_disk_open(&d, dir, 5 * size, &err), HEARTH_OK);
    uint8_t key[10][32];
    for (int k = 0; k < 10; k++) {
        memset(key[k], 0, 32);
        key[k][0] = (uint8_t)(k * 25);
        key[k][5] = (uint8_t)k;
        if (k == 6) CHECK_EQ(hearth_kv_disk_get(d, key[1], m2, sizeof m2, d2, sizeof d2), 1); /* 1 used again */
        CHECK_EQ(hearth_kv_disk_put(d, key[k], meta, sizeof meta, data, sizeof data, k % 2, &err), HEARTH_OK);
    }
    hearth_kv_disk_stats st;
    hearth_kv_disk_stats_get(d, &st);
    CHECK_EQ(st.files, 5);
    CHECK(st.bytes <= 5 * size);
    CHECK_EQ(st.removed, 5);
    int kept[10] = {0, 1, 0, 0, 0, 0, 0, 1, 1, 1};
    kept[6] = 1;
    for (int k = 0; k < 10; k++) CHECK_MSG(hearth_kv_disk_has(d, key[k]) == kept[k], "key %d", k);
    CHECK_EQ(each_file(dir, NULL), 5);
    CHECK_EQ(hearth_kv_disk_sync(d, &err), HEARTH_OK);
    hearth_kv_disk_close(d);
    /* reopened under a smaller budget: the oldest files go first */
    CHECK_EQ(hearth_kv_disk_open(&d, dir, 2 * size, &err), HEARTH_OK);
    hearth_kv_disk_stats_get(d, &st);
    CHECK_EQ(st.files, 2);
    hearth_kv_disk_close(d);
    /* a directory that cannot be made is named */
    CHECK_EQ(hearth_kv_disk_open(&d, "/proc/nope/kv", 1000, &err), HEARTH_EIO);
    CHECK_MSG(strstr(err.msg, "/proc/nope/kv") != NULL, "%s", err.msg);
}

/* Every flipped bit of a buffer of any length up to 300 moves the checksum; the seed chains parts. */
TEST(checksum64_sees_every_bit) {
    static unsigned char buf[300];
    for (int i = 0; i < 300; i++) buf[i] = (unsigned char)(i * 37 + 11);
    for (int n = 0; n <= 300; n += n < 70 ? 1 : 23) {
        uint64_t h = hearth_checksum64(buf, (size_t)n, 0);
        CHECK(n == 0 || hearth_checksum64(buf, (size_t)n - 1, 0) != h); /* the length counts */
        for (int i = 0; i < n; i++)
            for (int bit = 0; bit < 8; bit += 3) {
                buf[i] ^= (unsigned char)(1 << bit);
                uint64_t g = hearth_checksum64(buf, (size_t)n, 0);
                buf[i] ^= (unsigned char)(1 << bit);
                CHECK_MSG(g != h, "n %d byte %d bit %d", n, i, bit);
            }
    }
    CHECK(hearth_checksum64(buf, 100, 1) != hearth_checksum64(buf, 100, 0));
    CHECK_EQ(hearth_checksum64(buf, 100, 5), hearth_checksum64(buf, 100, 5));
}

/* A flush writes the blocks in use, then the cached ones from the most recently used, while they fit the
 * budget; a released chain is kept from its head (its tail is evicted first). */
TEST(kv_disk_flush_keeps_a_chain_from_its_head) {
    hearth_cpu_ctx *cpu;
    CHECK_EQ(hearth_cpu_ctx_new(&cpu, 1, 16, 64, 64, NULL), HEARTH_OK);
    const char *dir = scratch("kvd-order");
    hearth_kv_disk *d;
    hearth_err err = {0};
    const uint64_t file = hearth_kv_disk_file_bytes(4 * (6 + BS), 2 * 2 * BS * KV_DIM * LAYERS); /* layout + ids, K, V */
    CHECK_EQ(hearth_kv_disk_open(&d, dir, 2 * file, &err), HEARTH_OK);
    hearth_kv *kv = new_kv(cpu, LAYERS, 8, d);
    CHECK(kv);
    int32_t ids[13];
    for (int i = 0; i < 13; i++) ids[i] = 300 + i;
    CHECK_EQ(cache_prompt(kv, 0, ids, 13, 4), HEARTH_OK);
    int written = 0;
    CHECK_EQ(hearth_kv_flush(kv, &written, &err), HEARTH_OK);
    CHECK_EQ(written, 2); /* the budget's two files */
    hearth_kv_free(kv);
    kv = new_kv(cpu, LAYERS, 8, d);
    CHECK(kv);
    CHECK_EQ(hearth_kv_prefix_acquire(kv, 0, NULL, ids, 13), 8); /* the first two blocks of the chain */
    CHECK_EQ(matching(kv, 0, 8, 4), 8);
    hearth_kv_release_slot(kv, 0);
    /* in memory as well: under pressure the chain's last block goes first, its head stays reachable */
    CHECK_EQ(hearth_kv_reserve(kv, 1, 28), HEARTH_OK); /* 7 of 8 blocks: one of the two cached goes */
    CHECK_EQ(hearth_kv_prefix_acquire(kv, 0, NULL, ids, 13), 4);
    hearth_kv_release_slot(kv, 0);
    hearth_kv_release_slot(kv, 1);
    hearth_kv_free(kv);
    hearth_kv_disk_close(d);
    hearth_cpu_ctx_free(cpu);
}

/* Evictions write at most the rate (a bucket of one second, at least a block): past it a block is dropped and
 * counted as skipped; a flush is not limited. */
TEST(kv_disk_eviction_writes_are_rate_limited) {
    hearth_cpu_ctx *cpu;
    CHECK_EQ(hearth_cpu_ctx_new(&cpu, 1, 16, 64, 64, NULL), HEARTH_OK);
    const char *dir = scratch("kvd-rate");
    hearth_kv_disk *d;
    hearth_err err = {0};
    CHECK_EQ(hearth_kv_disk_open(&d, dir, 1u << 30, &err), HEARTH_OK);
    hearth_kv *kv = NULL;
    CHECK_EQ(hearth_kv_new(&kv, &hearth_cpu_ops, cpu, LAYERS, KV_DIM, HEAD, HEARTH_DT_F16, BS, 4, 2, 64, &err),
             HEARTH_OK);
    CHECK_EQ(hearth_kv_attach_disk(kv, d, 1e-6, &err), HEARTH_OK); /* clamped up to one block a second */
    int32_t a[9];
    for (int i = 0; i < 9; i++) a[i] = 70 + i;
    CHECK_EQ(cache_prompt(kv, 0, a, 9, 5), HEARTH_OK);
    CHECK_EQ(hearth_kv_prefix_acquire(kv, 0, NULL, a, 9), 8); /* reused: both worth a file */
    hearth_kv_release_slot(kv, 0);
    CHECK_EQ(hearth_kv_reserve(kv, 1, 16), HEARTH_OK); /* both evicted at once: one written, one dropped */
    hearth_kv_disk_stats st;
    hearth_kv_disk_stats_get(d, &st);
    CHECK_EQ(st.writes, 1);
    CHECK_EQ(st.skipped, 1);
    hearth_kv_release_slot(kv, 1);
    hearth_kv_free(kv);
    hearth_kv_disk_close(d);
    hearth_cpu_ctx_free(cpu);
}
