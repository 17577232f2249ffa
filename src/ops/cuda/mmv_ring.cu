/* mmv_ring.cu - the one-row GEMV of bf16 / f16 weights with its weights
 * streamed through a ring of shared-memory stages by cp.async.bulk
 * (HEARTH_MMV_RING=1; a measurement path, off by default).
 *
 * bench_persist's ring-only stream read 4.5 TB/s (s29-run2), where register
 * loads reach ~90% of the copy bandwidth; this is the GEMV built that way.
 * A block takes a run of logical row pairs (mmv_set: q/k/v stacked, or the
 * gate/up rows of a SwiGLU), i.e. up to three contiguous byte segments
 * (one per matrix; gate and up: two). The block's last warp's lane 0
 * copies the segments in RING_STG-byte chunks into S stages ("full" and
 * "empty" mbarriers a stage) from before the PDL wait: weights are never
 * written. Stage st is consumed by warp st % nw of the seven others: each
 * lane dots 8 weights (16 bytes) with x (the bf16 / f16 copy, in shared
 * memory) a step; 512 bytes of a warp lie in one row (K a multiple of 256),
 * and a row's sum over one chunk goes to its own slot, so a row's total is
 * its slots added in chunk order: the same bits every run. The epilogue is
 * mmv.cu's (pair_store: rope + KV stores; swiglu_store). */
#include "ops/cuda/mmv.cuh"

#include <stdlib.h>

#define RING_NT 256
#define RING_NC (RING_NT - 32) /* consumer threads; the last warp produces */
#define RING_STG 16384
#define RING_MAX_STAGES 8
#define RING_SLOTS 4 /* chunks a row may span: K * 2 <= 2 * RING_STG */
#define RING_SMEM (112 * 1024)

__device__ __forceinline__ uint32_t ring_u32(const void *p) { return (uint32_t)__cvta_generic_to_shared(p); }
__device__ __forceinline__ void ring_mbar_init(uint32_t bar, uint32_t count) {
    asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(bar), "r"(count) : "memory");
}
__device__ __forceinline__ void ring_mbar_arrive(uint32_t bar) {
    asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" ::"r"(bar) : "memory");
}
__device__ __forceinline__ void ring_mbar_wait(uint32_t bar, uint32_t parity) {
    uint32_t done;
    do {
        asm volatile("{\n.reg .pred p;\nmbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\nselp.u32 %0, 1, 0, p;\n}\n"
                     : "=r"(done)
                     : "r"(bar), "r"(parity)
                     : "memory");
    } while (!done);
}
/* bytes (a multiple of 16) of global src into shared dst, completing on bar */
__device__ __forceinline__ void ring_bulk(uint32_t dst, const void *src, uint32_t bytes, uint32_t bar) {
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(bar), "r"(bytes) : "memory");
    asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];"
                 ::"r"(dst), "l"(src), "r"(bytes), "r"(bar)
                 : "memory");
}

/* The block's byte segments: seg[i] starts at p, holds n bytes of whole rows, its first row being the
 * block's physical row r0 (physical rows: the block's rows in segment order). */
struct ring_seg {
    const uint8_t *p;
    size_t n;
    int r0;
};

template <int WT>
__global__ void __launch_bounds__(RING_NT) mmv_ring_kernel(const mmv_set set, size_t rb, const void *xp, int K,
                                                           int S) {
    extern __shared__ __align__(128) uint8_t sm[];
    const int N = set_rows(set), P = set.swiglu ? N : (N + 1) / 2;
    const int p0 = (int)((long long)P * blockIdx.x / gridDim.x), p1 = (int)((long long)P * (blockIdx.x + 1) / gridDim.x);
    /* logical rows [la, lb) */
    const int la = set.swiglu ? p0 : 2 * p0, lb = set.swiglu ? p1 : min(2 * p1, N);
    ring_seg seg[3];
    int nseg = 0, nrows = 0;
    if (set.swiglu) {
        for (int ph = 0; ph < 2; ph++) seg[nseg++] = {set.w[ph] + (size_t)la * rb, (size_t)(lb - la) * rb, nrows},
                                         nrows += lb - la;
    } else {
        int off = 0;
        for (int m = 0; m < 3; m++) {
            const int a = max(la, off), b = min(lb, off + set.n[m]);
            if (a < b) seg[nseg++] = {set.w[m] + (size_t)(a - off) * rb, (size_t)(b - a) * rb, nrows}, nrows += b - a;
            off += set.n[m];
        }
    }
    int nch[3] = {0, 0, 0}, tot = 0;
    for (int i = 0; i < nseg; i++) nch[i] = (int)((seg[i].n + RING_STG - 1) / RING_STG), tot += nch[i];

    const size_t xbytes = ((size_t)K * 2 + 127) & ~(size_t)127;
    uint8_t *x_s = sm, *ring = sm + xbytes;
    float *part = (float *)(ring + (size_t)S * RING_STG); /* [physical row][RING_SLOTS] */
    const int maxr = 2 * ((P + gridDim.x - 1) / gridDim.x); /* physical rows a block at most */
    uint64_t *mb = (uint64_t *)(part + (size_t)maxr * RING_SLOTS);
    const uint32_t ring0 = ring_u32(ring), full0 = ring_u32(mb), empty0 = ring_u32(mb + RING_MAX_STAGES);
    if (threadIdx.x == 0) {
        for (int i = 0; i < S; i++) ring_mbar_init(full0 + 8 * i, 1), ring_mbar_init(empty0 + 8 * i, 1);
        asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
    }
    __syncthreads();
    if (threadIdx.x >= RING_NC) { /* the producer: weights only, so before the PDL wait */
        if (threadIdx.x != RING_NC) return;
        int c = 0;
        for (int i = 0; i < nseg; i++)
            for (int k = 0; k < nch[i]; k++, c++) {
                const uint32_t st = c % S, use = c / S;
                const size_t o = (size_t)k * RING_STG;
                const uint32_t n = (uint32_t)min((size_t)RING_STG, seg[i].n - o);
                if (use > 0) ring_mbar_wait(empty0 + 8 * st, (use - 1) & 1);
                ring_bulk(ring0 + st * RING_STG, seg[i].p + o, n, full0 + 8 * st);
            }
        return;
    }
    pdl_wait();
    for (int i = threadIdx.x * 16; i < K * 2; i += RING_NC * 16) *(uint4 *)(x_s + i) = *(const uint4 *)((const uint8_t *)xp + i);
    asm volatile("bar.sync 1, %0;" ::"r"(RING_NC) : "memory");
    const int lane = threadIdx.x & 31, w = threadIdx.x >> 5, nw = min(RING_NC / 32, S);
    int c = 0;
    for (int i = 0; i < nseg; i++)
        for (int k = 0; k < nch[i]; k++, c++) {
            const uint32_t st = c % S, use = c / S;
            if ((int)st % nw != w) continue;
            const size_t o0 = (size_t)k * RING_STG, n = min((size_t)RING_STG, seg[i].n - o0);
            ring_mbar_wait(full0 + 8 * st, use & 1);
            const uint8_t *buf = ring + (size_t)st * RING_STG;
            /* one division a chunk: the row and column then advance 512 bytes a step */
            int row = (int)(o0 / rb), col = (int)(o0 - (size_t)row * rb);
            const int rbi = (int)rb;
            float acc = 0.0f;
            for (int it = 0; it < (int)n; it += 512) {
                float wf[8], xf[8];
                unpack16<WT>(*(const uint4 *)(buf + it + lane * 16), wf);
                unpack16<WT>(*(const uint4 *)(x_s + col + lane * 16), xf);
#pragma unroll
                for (int e = 0; e < 8; e++) acc = fmaf(wf[e], xf[e], acc);
                col += 512;
                if (col == rbi && it + 512 < (int)n) {
                    acc = warp_sum(acc);
                    if (lane == 0) part[(seg[i].r0 + row) * RING_SLOTS + k - (int)((size_t)row * rb / RING_STG)] = acc;
                    acc = 0.0f, row++, col = 0;
                }
            }
            acc = warp_sum(acc);
            if (lane == 0) part[(seg[i].r0 + row) * RING_SLOTS + k - (int)((size_t)row * rb / RING_STG)] = acc;
            __syncwarp();
            if (lane == 0) ring_mbar_arrive(empty0 + 8 * st);
        }
    asm volatile("bar.sync 1, %0;" ::"r"(RING_NC) : "memory");
    /* physical row q's total: its slots in chunk order (q's offset in its segment decides its chunks) */
    auto total = [&](int q) {
        int i = 0;
        while (i + 1 < nseg && q >= seg[i + 1].r0) i++;
        const size_t a = (size_t)(q - seg[i].r0) * rb;
        const int first = (int)(a / RING_STG), last = (int)((a + rb - 1) / RING_STG);
        float s = 0.0f;
        for (int j = 0; j <= last - first; j++) s += part[q * RING_SLOTS + j];
        return s;
    };
    if (set.swiglu) {
        for (int q = threadIdx.x; q < lb - la; q += RING_NC) swiglu_store(set, la + q, 0, total(q), total(nrows / 2 + q));
    } else {
        for (int q = 2 * threadIdx.x; q < lb - la; q += 2 * RING_NC)
            pair_store(set, la + q, N, 0, total(q), q + 1 < lb - la ? total(q + 1) : 0.0f);
    }
    pdl_launch();
}

/* Shared memory of a block: x, S stages, the row slots, the mbarriers. */
static size_t ring_smem(int K, int maxr, int S) {
    return (((size_t)K * 2 + 127) & ~(size_t)127) + (size_t)S * RING_STG + (size_t)maxr * RING_SLOTS * 4 +
           2 * RING_MAX_STAGES * 8;
}

int cu_mmv_ring(const cu_launch *L, const mmv_set *set, const void *xp, hearth_dtype t, int K, size_t rb, int N) {
    static int on = -1;
    if (on < 0) {
        const char *s = getenv("HEARTH_MMV_RING");
        on = s && atoi(s) == 1;
    }
    if (!on || (t != HEARTH_DT_BF16 && t != HEARTH_DT_F16) || K % 256 || rb != (size_t)K * 2 ||
        (rb + RING_STG - 1) / RING_STG + 1 > RING_SLOTS)
        return 0;
    const int P = set->swiglu ? N : (N + 1) / 2;
    const int G = P < 2 * L->n_sm ? P : 2 * L->n_sm, maxr = 2 * ((P + G - 1) / G);
    int S = RING_MAX_STAGES;
    while (S >= 2 && ring_smem(K, maxr, S) > RING_SMEM) S--;
    if (S < 2 || G < 1) return 0;
    const size_t smem = ring_smem(K, maxr, S);
    if (t == HEARTH_DT_BF16) {
        static unsigned long long done;
        cu_smem_setup(L, mmv_ring_kernel<HEARTH_DT_BF16>, RING_SMEM, true, &done);
        cu_launch_k(L, mmv_ring_kernel<HEARTH_DT_BF16>, dim3(G), dim3(RING_NT), smem, *set, rb, xp, K, S);
    } else {
        static unsigned long long done;
        cu_smem_setup(L, mmv_ring_kernel<HEARTH_DT_F16>, RING_SMEM, true, &done);
        cu_launch_k(L, mmv_ring_kernel<HEARTH_DT_F16>, dim3(G), dim3(RING_NT), smem, *set, rb, xp, K, S);
    }
    return 1;
}
