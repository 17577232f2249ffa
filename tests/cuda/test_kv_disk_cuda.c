/* test_kv_disk_cuda.c - the prefix cache's disk tier over the CUDA backend's
 * KV pool (ops->download on a spill or a flush, ops->upload on a fetch):
 * blocks written by one cache come back byte for byte into another's device
 * memory, also when a fetch has to evict (and spill) a device block first. */
#include "../unit/testhelp.h"

#include "engine/kv.h"
#include "engine/kv_disk.h"
#include "ops/cuda/ops_cuda.h"

#include <stdint.h>
#include <stdlib.h>

enum { DL = 3, DDIM = 256, DHEAD = 128, DBS = 16 };

static uint16_t dpat(int l, int which, int p, int j, int salt) {
    return (uint16_t)((l * 7919 + which * 104729 + p * 131 + j * 3 + salt * 17) & 0x7bff);
}

/* Positions [0, n) of slot written with the pattern (write 1) through uploads, or read back and compared: the
 * first position that differs (n: none). The CUDA pool keeps rows (view head_dim 0). */
static int dpass(hearth_cuda_ctx *c, hearth_kv *kv, int slot, int n, int salt, int write) {
    const hearth_kv_view *v = hearth_kv_view_get(kv);
    static int32_t table[64];
    hearth_cuda_ops.download(c, table, v->block_table + slot * v->max_blocks_per_seq,
                             sizeof(int32_t) * (size_t)v->max_blocks_per_seq);
    uint16_t row[DDIM], got[DDIM];
    for (int p = 0; p < n; p++) {
        size_t off = ((size_t)table[p / DBS] * DBS + p % DBS) * DDIM * sizeof(uint16_t);
        for (int l = 0; l < DL; l++)
            for (int which = 0; which < 2; which++) {
                char *base = (char *)(which ? v->v[l] : v->k[l]) + off;
                for (int j = 0; j < DDIM; j++) row[j] = dpat(l, which, p, j, salt);
                if (write) {
                    hearth_cuda_ops.upload(c, base, row, sizeof row);
                } else {
                    hearth_cuda_ops.download(c, got, base, sizeof got);
                    if (memcmp(got, row, sizeof row)) return p;
                }
            }
    }
    if (write) hearth_cuda_ctx_sync(c);
    return n;
}

static hearth_kv *dkv(hearth_cuda_ctx *c, int n_blocks, hearth_kv_disk *d) {
    hearth_kv *kv = NULL;
    hearth_err err = {0};
    if (hearth_kv_new(&kv, &hearth_cuda_ops, c, DL, DDIM, DHEAD, HEARTH_DT_F16, DBS, n_blocks, 2, 256, &err)) {
        printf("  kv: %s\n", err.msg);
        return NULL;
    }
    uint8_t ns[32] = {3, 1, 4};
    hearth_kv_set_namespace(kv, ns);
    if (hearth_kv_attach_disk(kv, d, 4096.0, &err)) {
        hearth_kv_free(kv);
        return NULL;
    }
    return kv;
}

TEST(cuda_kv_disk_round_trip) {
    hearth_err err = {0};
    hearth_cuda_ctx *c;
    if (hearth_cuda_ctx_new(&c, 0, 64, 1024, 256, &err) != HEARTH_OK) {
        test_fail(__FILE__, __LINE__, "cuda context: %s", err.msg);
        return;
    }
    char dir[4096];
    snprintf(dir, sizeof dir, "%s/cuda-kvd", test_tmpdir());
    hearth_kv_disk *d;
    CHECK_EQ(hearth_kv_disk_open(&d, dir, 1u << 30, &err), HEARTH_OK);
    hearth_kv *kv = dkv(c, 4, d);
    CHECK(kv);
    int32_t a[37], b[64];
    for (int i = 0; i < 37; i++) a[i] = 10 + i;
    for (int i = 0; i < 64; i++) b[i] = 500 + i;
    CHECK_EQ(hearth_kv_reserve(kv, 0, 37), HEARTH_OK); /* two full blocks and a part */
    CHECK_EQ(dpass(c, kv, 0, 37, 1, 1), 37);
    hearth_kv_prefix_commit(kv, 0, NULL, a, 37);
    hearth_kv_release_slot(kv, 0);
    CHECK_EQ(hearth_kv_prefix_acquire(kv, 0, NULL, a, 37), 32); /* reused: written when evicted */
    hearth_kv_release_slot(kv, 0);
    CHECK_EQ(hearth_kv_reserve(kv, 1, 64), HEARTH_OK); /* the whole pool: both spill through downloads */
    CHECK_EQ(dpass(c, kv, 1, 64, 2, 1), 64);
    hearth_kv_prefix_commit(kv, 1, NULL, b, 64);
    hearth_kv_release_slot(kv, 1);
    hearth_kv_disk_stats st;
    hearth_kv_disk_stats_get(d, &st);
    CHECK_EQ(st.writes, 2);
    CHECK_EQ(hearth_kv_prefix_acquire(kv, 1, NULL, b, 64), 48); /* b's first three reused */
    hearth_kv_release_slot(kv, 1);
    /* back through uploads, each fetch evicting one of b's blocks first: the second one reused, so it spills
     * through the buffers the fetch reads into */
    CHECK_EQ(hearth_kv_prefix_acquire(kv, 0, NULL, a, 37), 32);
    CHECK_EQ(dpass(c, kv, 0, 32, 1, 0), 32);
    hearth_kv_disk_stats_get(d, &st);
    CHECK_EQ(st.writes, 3);
    hearth_kv_release_slot(kv, 0);
    /* a flush, and another cache (a restart) on the same directory */
    int written = 0;
    CHECK_EQ(hearth_kv_flush(kv, &written, &err), HEARTH_OK);
    CHECK_EQ(written, 2); /* b's first two blocks (its third is on disk, its last was never reused) */
    hearth_kv_free(kv);
    kv = dkv(c, 8, d);
    CHECK(kv);
    CHECK_EQ(hearth_kv_prefix_acquire(kv, 0, NULL, a, 37), 32);
    CHECK_EQ(dpass(c, kv, 0, 32, 1, 0), 32);
    CHECK_EQ(hearth_kv_prefix_acquire(kv, 1, NULL, b, 64), 48);
    CHECK_EQ(dpass(c, kv, 1, 48, 2, 0), 48);
    hearth_kv_release_slot(kv, 0);
    hearth_kv_release_slot(kv, 1);
    CHECK_MSG(hearth_cuda_ctx_error(c, &err) == HEARTH_OK, "cuda: %s", err.msg);
    hearth_kv_free(kv);
    hearth_kv_disk_close(d);
    hearth_cuda_ctx_free(c);
}
