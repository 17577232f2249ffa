/* attention_flash_wg.cu - causal prefill attention over an f16 or e4m3
 * paged KV cache on Hopper's own path (sm_90a): warpgroup MMA (wgmma) fed by
 * the bulk tensor copy engine (TMA), flash-attention 3 style, head_dim 128
 * (f16 and e4m3 caches) or 64 (f16: the template's D, one 64-dim half where
 * 128 has two, four stages; v50). The default prefill kernel where it fits
 * (cu_attention_flash_wg_fits); the flash-attention 2 kernel of
 * attention_flash.cu takes every other case (other head dims, e4m3 at
 * head_dim 64, devices without sm_90a) and is
 * kept for A/B runs (HEARTH_ATTN_WG=0). A sliding window (the WIN
 * instances: without one the window code is compiled out, since its
 * registers cost the other kernels 2-4%) skips the tiles before the item's
 * first visible position (witem.n0) and masks the rest below each row's
 * window.
 *
 * Work comes in items: a 64-row tile of one sequence (the tiles the other
 * prefill kernels take: tile_uniform with bm 64; rows of mixed tiles are the
 * decode kernel's) for 2 query heads of one kv head, or, when a kv head has
 * a multiple of 4 query heads (PACK), 32 rows for 4 heads, so that each
 * K/V tile serves 4 heads; when it has an odd number (SPLIT: MHA, or 7 as
 * Qwen2.5-7B's 28 / 4), 64 rows of one head, whose tiles the two
 * consumer warpgroups take in turn, merging their (m, l, O) at the item's
 * end through shared memory (the Q regions and 768 bytes after the
 * barriers): 1.2-1.4x the FA2 kernel over f16 caches (session 25),
 * 1.01-1.16x over e4m3 ones, where each tile is widened for one head only
 * (v53; notes/cuda-kernels.md).
 * Items are numbered heaviest (latest rows) first;
 * a persistent grid of one block an SM takes them in snake order (block b:
 * items b, 2G - 1 - b, 2G + b, ...), which balances the decreasing costs.
 *
 * A block is 3 warpgroups:
 *   warpgroup 0, the producer (setmaxnreg 24): one warp walks each item's
 *     tiles of 128 positions from the diagonal down to position 0; per tile
 *     16 lanes each issue one 2D tensor copy of K and one of V, a cache
 *     block's 16 rows x 64 dims (2 KB, 128-byte swizzle; the block table
 *     gives the block), into a 3-deep ring of stages that runs on across the
 *     block's items, completing on the stage's K and V mbarriers; a stage is
 *     reused after its "empty" mbarrier (all consumer threads) completes.
 *     e4m3 caches (E8): lanes 0-7 copy each cache block's 16 rows x 128
 *     codes as stored (2 KB) into a 2-deep ring of raw tiles, and warps 1-3
 *     (setmaxnreg 48) widen each raw K tile exactly to f16 into the
 *     swizzled layout of the f16 ring (2 stages here, for room), zeros for
 *     positions past the item's last, then fence the async proxy and arrive
 *     on the stage's K mbarrier; the consumers widen V the same way while
 *     their S = Q K^T runs (their issue slots are idle in the wgmma wait),
 *     each of their 8 warps 4 row groups, and arrive on the V mbarrier
 *     (setmaxnreg 224 here: a block's warps can only take registers its
 *     producer gave back, 120 x 128 >= 56 x 256; 48 / 232 would hang).
 *     With the converters widening both, the widening cost ~25% (bench_attn,
 *     2048 rows: 112 us, 85 us with it skipped; the f16 kernel 94 us); with
 *     V widened by the consumers 104.6 us (v51, notes/cuda-kernels.md).
 *   warpgroups 1 and 2, the consumers (setmaxnreg 240): 64 tile rows each
 *     (one head, or 32 rows of each of two heads with PACK). Q is scaled,
 *     rounded to f16 and stored in the canonical 128-byte-swizzled K-major
 *     layout once an item. Per tile: S = Q K^T by 8 wgmma m64n128k16 (both
 *     operands in shared memory), positions past a row's own masked on tiles
 *     that cross one, the online softmax in registers (the accumulator layout
 *     is mma.sync's C layout, so P packs into A register fragments), then
 *     O += P V by 8 wgmma with P from registers and V as the MN-major
 *     ("transposed") B operand of the same swizzled tiles. O is rescaled only
 *     when a row's maximum moved (a factor of exactly 1 otherwise).
 * The diagonal tile's copies read whole cache blocks: positions past the
 * item's last one are whatever the cache holds there (NaN in the tests), so
 * their V rows are zeroed in shared memory before P V (their P is 0, and
 * 0 x NaN would not be); their scores are masked.
 *
 * Numerics: attention_flash.cu's contract (q scaled by scale * log2 e and
 * rounded to f16, K/V as stored, f32 accumulation, P rounded to f16 for
 * P V while the row sums add the f32 values, f32 output; the sums run in
 * another order). Measured in notes/flash-wg.md and notes/cuda-kernels.md
 * (session 23). */
#include "ops/cuda/attention.cuh"

#include <cuda.h>

#include <mutex>
#include <stdlib.h>

namespace {

constexpr int HD = 128;             /* head dim of e4m3 caches (f16: 128 or 64, the template's D) */
constexpr int BM = 64;              /* rows per consumer warpgroup */
constexpr int BN = 128;             /* positions per K/V tile */
constexpr int NCW = 2;              /* consumer warpgroups */
constexpr int NTH = 128 * (NCW + 1);
constexpr int QSUB = BM * 128;      /* bytes of one 64-dim half of Q */
constexpr int SUB = BN * 128;       /* bytes of one 64-dim half of a K or V tile */
/* head dim D: its 64-dim halves, the bytes of a warpgroup's staged Q and of a K or V tile */
template <int D> struct dim_of {
    static_assert(D == 64 || D == 128, "head dims 64 and 128");
    static constexpr int NH = D / 64, QB = NH * QSUB, KVB = NH * SUB;
};
constexpr int CB = 16;              /* cache block size (positions) the copies are shaped for */
constexpr int BOX = CB * 128;       /* bytes of one tensor copy: 16 rows x 64 f16 dims, or 16 rows x 128 e4m3 */
constexpr int RAWT = BN * HD;       /* bytes of one raw e4m3 K or V tile */
constexpr int NCV = 96;             /* e4m3: the producer warpgroup's converting threads (warps 1-3) */
/* Shared memory: the consumers' Q, the f16 K / V ring (ST stages), for e4m3
 * a ring of raw tiles (RS stages) after it, then the mbarriers. e4m3 keeps
 * two f16 stages so that two raw ones fit (225 of the 227 KiB a block may
 * have); head_dim 64 takes four (its tiles are half the bytes). */
template <bool E8, int D> struct lay {
    static_assert(!E8 || D == HD, "e4m3 caches at head_dim 128");
    static constexpr int ST = E8 ? 2 : D == 64 ? 4 : 3, RS = E8 ? 2 : 0;
    static constexpr int KVB = dim_of<D>::KVB;
    static constexpr int L_K = NCW * dim_of<D>::QB, L_V = L_K + ST * KVB, L_RAW = L_V + ST * KVB;
    static constexpr int L_BAR = L_RAW + RS * 2 * RAWT;
    /* SPLIT items: each consumer warpgroup's row maxima, the second's row sums (64 floats each) */
    static constexpr int L_ML = (L_BAR + (3 * ST + 3 * RS) * 8 + 15) & ~15;
    static constexpr int SMEM = L_ML + 3 * BM * 4 + 1024; /* + slack to align the base to 1024 */
    static_assert(SMEM <= 227 * 1024, "a block's shared memory");
};

/* byte offset of (row r, dim d < 64) in a 128-byte-swizzled [rows][64] f16 tile (1024-byte aligned) */
__host__ __device__ __forceinline__ int sw128(int r, int d) {
    return r * 128 + ((((d >> 3) ^ r) & 7) << 4) + (d & 7) * 2;
}

#if !defined(__CUDA_ARCH__) || defined(__CUDA_ARCH_FEAT_SM90_ALL)
/* 2D tensor copy (c0: element column, c1: row) into shared memory, completing on bar */
__device__ __forceinline__ void tma_load2(uint32_t dst, const CUtensorMap *map, uint32_t bar, int c0, int c1) {
    asm volatile("cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3}], [%4];"
                 ::"r"(dst), "l"((uint64_t)map), "r"(c0), "r"(c1), "r"(bar)
                 : "memory");
}
__device__ __forceinline__ void fence_proxy_async() { asm volatile("fence.proxy.async.shared::cta;" ::: "memory"); }
__device__ __forceinline__ void wgmma_fence() { asm volatile("wgmma.fence.sync.aligned;" ::: "memory"); }
__device__ __forceinline__ void wgmma_commit() { asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory"); }
template <int N> __device__ __forceinline__ void wgmma_wait() {
    asm volatile("wgmma.wait_group.sync.aligned %0;" ::"n"(N) : "memory");
}
/* keep the compiler from moving uses of these registers across the async wgmma window */
__device__ __forceinline__ void fence_f(float *r, int n) {
#pragma unroll
    for (int i = 0; i < n; i++) asm volatile("" : "+f"(r[i])::"memory");
}
__device__ __forceinline__ void fence_u(uint32_t *r, int n) {
#pragma unroll
    for (int i = 0; i < n; i++) asm volatile("" : "+r"(r[i])::"memory");
}
/* shared-memory matrix descriptor, 128-byte swizzle; lbo / sbo in 16-byte units */
__device__ __forceinline__ uint64_t gdesc(uint32_t addr, uint32_t lbo, uint32_t sbo) {
    return (uint64_t)((addr >> 4) & 0x3FFF) | ((uint64_t)lbo << 16) | ((uint64_t)sbo << 32) | (1ull << 62);
}
/* d[64] (+)= A (descriptor: 64 x 16, K-major) B (descriptor: 16 x 128, K-major); scale_d 0: d ignored */
__device__ __forceinline__ void wgmma_ss(float *d, uint64_t da, uint64_t db, int scale_d) {
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %66, 0;\n"
                 "wgmma.mma_async.sync.aligned.m64n128k16.f32.f16.f16 "
                 "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63}, %64, %65, p, 1, 1, 0, 0;\n}\n"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63])
                 : "l"(da), "l"(db), "r"(scale_d));
}
/* d[64] (+)= A (registers a[4]: the m16n8k16 A fragment of the warp's 16 rows) B (descriptor: 16 x 128, MN-major) */
__device__ __forceinline__ void wgmma_rs_t(float *d, const uint32_t *a, uint64_t db, int scale_d) {
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %69, 0;\n"
                 "wgmma.mma_async.sync.aligned.m64n128k16.f32.f16.f16 "
                 "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63}, {%64, %65, %66, %67}, %68, p, 1, 1, 1;\n}\n"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(db), "r"(scale_d));
}

/* the same for head_dim 64: d[32] (+)= A (registers) B (descriptor: 16 x 64, MN-major) */
__device__ __forceinline__ void wgmma_rs_t64(float *d, const uint32_t *a, uint64_t db, int scale_d) {
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %37, 0;\n"
                 "wgmma.mma_async.sync.aligned.m64n64k16.f32.f16.f16 "
                 "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31}, {%32, %33, %34, %35}, %36, p, 1, 1, 1;\n}\n"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(db), "r"(scale_d));
}

/* S = Q K^T for one 64-row warpgroup: D / 16 k-steps over the head dim; Q
 * at qa ([64][64] swizzled halves, D / 64), K at ka ([BN][64] swizzled
 * halves, D / 64). Issued and committed as one group; the caller waits. */
template <int D> __device__ __forceinline__ void wg_qk(float *s, uint32_t qa, uint32_t ka) {
    fence_f(s, 64);
    wgmma_fence();
#pragma unroll
    for (int kk = 0; kk < D / 16; kk++) {
        const uint32_t qo = (kk >> 2) * QSUB + (kk & 3) * 32, ko = (kk >> 2) * SUB + (kk & 3) * 32;
        wgmma_ss(s, gdesc(qa + qo, 1, 64), gdesc(ka + ko, 1, 64), kk > 0);
    }
    wgmma_commit();
}

/* O += P V: 8 k-steps over the tile's positions; P in registers (p[4 kp ..]:
 * the A fragment of positions 16 kp .. 16 kp + 15), V at va ([BN][64]
 * swizzled halves, D / 64: the MN-major B operand; LBO = the distance
 * between the two 64-dim halves, SBO = 8 rows). One commit group. */
template <int D> __device__ __forceinline__ void wg_pv(float *o, uint32_t *p, uint32_t va) {
    wgmma_fence(); /* the caller fences o and p (before any wgmma of this stage is issued) */
#pragma unroll
    for (int kp = 0; kp < BN / 16; kp++) {
        if constexpr (D == 128) wgmma_rs_t(o, p + 4 * kp, gdesc(va + kp * 16 * 128, SUB >> 4, 64), 1);
        else wgmma_rs_t64(o, p + 4 * kp, gdesc(va + kp * 16 * 128, SUB >> 4, 64), 1);
    }
    wgmma_commit();
}

/* positions past a row's last one (B: bound = that position), or with a
 * window before its first visible one (LO), are -inf (kc: the position of
 * this thread's first column, kb + 2 (lane & 3); A / B: the thread's two
 * rows) */
template <bool LO> __device__ __forceinline__ void wg_mask(float *s, int kc, int boundA, int boundB) {
#pragma unroll
    for (int j = 0; j < BN / 8; j++)
#pragma unroll
        for (int e = 0; e < 2; e++) {
            const int p = kc + 8 * j + e;
            if (LO ? p < boundA : p > boundA) s[4 * j + e] = -INFINITY;
            if (LO ? p < boundB : p > boundB) s[4 * j + 2 + e] = -INFINITY;
        }
}

/* online softmax of the thread's two rows (A: row g, B: row g + 8 of the
 * warp's 16) over one tile: P as f16 A fragments, m and the thread's share
 * of l updated, cA / cB the factors that rescale O (rows with nothing seen
 * yet keep m = -inf and subtract 0) */
__device__ __forceinline__ void wg_softmax(const float *s, uint32_t *p, float &mA, float &mB, float &lA, float &lB,
                                           float &cA, float &cB) {
    float xA = mA, xB = mB;
#pragma unroll
    for (int j = 0; j < BN / 8; j++) {
        xA = fmaxf(xA, fmaxf(s[4 * j], s[4 * j + 1]));
        xB = fmaxf(xB, fmaxf(s[4 * j + 2], s[4 * j + 3]));
    }
#pragma unroll
    for (int o2 = 1; o2 <= 2; o2 <<= 1) {
        xA = fmaxf(xA, __shfl_xor_sync(0xffffffffu, xA, o2));
        xB = fmaxf(xB, __shfl_xor_sync(0xffffffffu, xB, o2));
    }
    const float uA = xA == -INFINITY ? 0.0f : xA, uB = xB == -INFINITY ? 0.0f : xB;
    cA = f_ex2(mA - uA);
    cB = f_ex2(mB - uB);
    mA = xA;
    mB = xB;
    float sA = 0.0f, sB = 0.0f;
#pragma unroll
    for (int j = 0; j < BN / 8; j++) {
        const float p0 = f_ex2(s[4 * j] - uA), p1 = f_ex2(s[4 * j + 1] - uA);
        const float p2 = f_ex2(s[4 * j + 2] - uB), p3 = f_ex2(s[4 * j + 3] - uB);
        sA += p0 + p1;
        sB += p2 + p3;
        p[(j >> 1) * 4 + (j & 1) * 2 + 0] = pack_h2(p0, p1);
        p[(j >> 1) * 4 + (j & 1) * 2 + 1] = pack_h2(p2, p3);
    }
    lA = lA * cA + sA;
    lB = lB * cB + sB;
}

template <int D> __device__ __forceinline__ void wg_rescale(float *o, float cA, float cB) {
#pragma unroll
    for (int j = 0; j < D / 8; j++) {
        o[4 * j] *= cA;
        o[4 * j + 1] *= cA;
        o[4 * j + 2] *= cB;
        o[4 * j + 3] *= cB;
    }
}
#endif /* sm_90a device code */

/* One item (see the file's head). */
struct witem {
    int r0, nrows, h0, kvh, hmin, hmax, n0, nkv; /* tiles n0 .. n0 + nkv - 1 (a window skips those before n0) */
    bool skip;             /* its 64-row tile spans several sequences: the decode kernel's rows */
    const int32_t *trow;   /* the sequence's block table row */
};
template <bool PACK, bool SPLIT> struct pk {
    static_assert(!(PACK && SPLIT), "one item form");
    static constexpr int RH = PACK ? 32 : BM;          /* rows of the sequence an item */
    static constexpr int HPW = BM / RH;                /* heads a warpgroup */
    static constexpr int HI = SPLIT ? 1 : NCW * HPW;   /* heads an item */
};
/* The number of block b's item in its round k (odd rounds reversed). */
__device__ __forceinline__ int witem_index(int k, int G) {
    const int b = (int)blockIdx.x;
    return k * G + ((k & 1) ? G - 1 - b : b);
}
/* Item witem_index(k, G); false past the last. With ks > 1, item i is part
 * i % ks (nkv may be 0) of the tiles of what would be item i / ks
 * (contiguous runs of tiles, the last part the diagonal's). Every warp
 * computes it itself (loads of the rows' positions and sequences,
 * shuffles). */
template <bool PACK, bool SPLIT>
__device__ __forceinline__ bool witem_get(int k, int G, int n_items, int ks, int T, int n_heads, int n_kv, int window,
                                          const int32_t *__restrict__ table, int max_blocks,
                                          const int32_t *__restrict__ seq, const int32_t *__restrict__ pos,
                                          witem &w) {
    using P = pk<PACK, SPLIT>;
    const int ki = witem_index(k, G);
    if (ki >= n_items) return false;
    const int idx = ki / ks;
    const int HP = n_heads / P::HI, ntiles = (T + P::RH - 1) / P::RH;
    w.r0 = (ntiles - 1 - idx / HP) * P::RH;
    w.nrows = min(P::RH, T - w.r0);
    w.h0 = (idx % HP) * P::HI;
    w.kvh = w.h0 / (n_heads / n_kv);
    const int lane = threadIdx.x & 31, t0 = w.r0 & ~63, t1 = min(T, t0 + 64), s0 = seq[t0];
    bool same = true;
    for (int r = t0 + 1 + lane; r < t1; r += 32) same = same && seq[r] == s0;
    w.skip = !__all_sync(0xffffffffu, same);
    w.trow = table + (size_t)s0 * max_blocks;
    int lo = INT_MAX, hi = -1;
    for (int r = lane; r < w.nrows; r += 32) {
        const int p = pos[w.r0 + r];
        lo = min(lo, p);
        hi = max(hi, p);
    }
#pragma unroll
    for (int o2 = 16; o2 > 0; o2 >>= 1) {
        lo = min(lo, __shfl_xor_sync(0xffffffffu, lo, o2));
        hi = max(hi, __shfl_xor_sync(0xffffffffu, hi, o2));
    }
    w.hmin = lo;
    w.hmax = hi;
    w.n0 = window > 0 ? max(0, lo - window + 1) / BN : 0;
    w.nkv = hi / BN + 1 - w.n0;
    if (ks > 1) {
        const int per = (w.nkv + ks - 1) / ks, a = min(w.nkv, ki % ks * per);
        w.n0 += a;
        w.nkv = min(w.nkv - a, per);
    }
    return true;
}

/* e4m3: a raw tile (RAWT bytes, [BN][HD] as copied) widened exactly into an
 * f16 tile of the ring (two 128-byte-swizzled 64-dim halves, what the f16
 * copies write); positions past hmax are written as zeros (0 x NaN would
 * poison P V). A warp takes 4 rows a step, 16 codes a lane (one 16-byte
 * load, two 16-byte stores); the converting warps take the 32 row groups in
 * turn. Lanes 0-3 of a row store their even 8-dim chunk first and lanes 4-7
 * (the other 64-dim half) their odd one, so that each quarter-warp's stores
 * fall in 8 distinct 16-byte bank groups. NW warps share the tile, cw the
 * calling one (the producer's 3 converting warps widen K, the consumers' 8
 * warps V). */
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
template <int NW>
__device__ __forceinline__ void wg_widen(uint8_t *dst, const uint8_t *src, int cw, int lane, int kb, int hmax) {
    const int k16 = lane & 7, hf = k16 >> 2, c0 = (k16 & 3) * 2 + hf, c1 = c0 ^ 1;
    constexpr int NG = BN / 4;
#pragma unroll 4
    for (int i = 0; i < (NG + NW - 1) / NW; i++) {
        const int g = cw + NW * i;
        if (g < NG) {
            const int r = 4 * g + (lane >> 3), x = r & 7;
            uint4 u = *(const uint4 *)(src + r * HD + k16 * 16);
            if (kb + r > hmax) u = make_uint4(0, 0, 0, 0); /* e4m3 0 is f16 0 */
            const uint4 lo = e4m3x8_to_half8(make_uint2(u.x, u.y)), hi = e4m3x8_to_half8(make_uint2(u.z, u.w));
            uint8_t *row = dst + hf * SUB + r * 128;
            *(uint4 *)(row + ((c0 ^ x) << 4)) = hf ? hi : lo;
            *(uint4 *)(row + ((c1 ^ x) << 4)) = hf ? lo : hi;
        }
    }
}
#endif

template <int D, bool PACK, bool SPLIT, bool E8, bool WIN>
__global__ void __launch_bounds__(NTH, 1)
    attn_flash_wg_kernel(const __grid_constant__ CUtensorMap tmK, const __grid_constant__ CUtensorMap tmV,
                         float *__restrict__ out, const float *__restrict__ q, const int32_t *__restrict__ table,
                         int max_blocks, const int32_t *__restrict__ seq, const int32_t *__restrict__ pos, int T,
                         int n_heads, int n_kv, float qscale, int window, int n_items, int ks,
                         float *__restrict__ part, int prep_kind, void *__restrict__ prep) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
    using Y = lay<E8, D>;
    constexpr int ST = Y::ST, RS = Y::RS, KVB = Y::KVB, NH = dim_of<D>::NH, QB = dim_of<D>::QB;
    const int win = WIN ? window : 0; /* without one, a constant: no window code in the kernel (its registers cost 2-4%) */
    extern __shared__ uint8_t smraw[];
    const uint32_t raw = smem_u32(smraw), sbase = (raw + 1023) & ~1023u;
    uint8_t *const sm = smraw + (sbase - raw);
    const int tid = threadIdx.x, wg = tid >> 7, lt = tid & 127, G = (int)gridDim.x;
    /* the f16 ring's full (K, V) and empty barriers; e4m3: the raw ring's too */
    const uint32_t barK = sbase + Y::L_BAR, barV = barK + ST * 8, barE = barV + ST * 8;
    const uint32_t rawK = barE + ST * 8, rawV = rawK + RS * 8, rawE = rawV + RS * 8;
    constexpr int CV = SPLIT ? 128 : NCW * 128; /* e4m3: the consumer threads that widen a tile's V */
    if (tid == 0) {
        for (int i = 0; i < ST; i++) {
            mbar_init(barK + 8 * i, E8 ? NCV : 1);
            mbar_init(barV + 8 * i, E8 ? CV : 1); /* e4m3: the consumers widen V */
            mbar_init(barE + 8 * i, SPLIT ? 128 : NCW * 128); /* SPLIT: one warpgroup consumes a tile */
        }
        for (int i = 0; i < RS; i++) {
            mbar_init(rawK + 8 * i, 1);
            mbar_init(rawV + 8 * i, 1);
            mbar_init(rawE + 8 * i, NCV + CV);
        }
        asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
    }
    __syncthreads();
    pdl_wait(); /* q and the rows' K / V come from the kernels before */

    if (wg == 0) {
        /* the producer: warp 0 issues the copies; e4m3: warps 1-3 widen */
        if constexpr (E8) asm volatile("setmaxnreg.dec.sync.aligned.u32 48;\n" ::: "memory");
        else asm volatile("setmaxnreg.dec.sync.aligned.u32 24;\n" ::: "memory");
        if (!E8 && lt >= 32) return;
        const int lane = lt & 31;
        uint32_t gt = 0; /* tiles through the ring so far */
        witem w;
        for (int k = 0; witem_get<PACK, SPLIT>(k, G, n_items, ks, T, n_heads, n_kv, win, table, max_blocks, seq, pos, w); k++) {
            if (w.skip) continue;
            const int hblk = w.hmax / CB;
            for (int it = 0; it < w.nkv; it++, gt++) {
                const int n = w.n0 + w.nkv - 1 - it;
                if constexpr (!E8) {
                    /* 8 NH lanes: cache block b = lane / NH's half hf = lane % NH of K and of V */
                    const int b = lane / NH, hf = lane % NH, st = (int)(gt % ST);
                    const uint32_t ph = (gt / ST) & 1, off = hf * SUB + b * BOX;
                    int blk = 0;
                    /* blocks past the item's last position repeat its block (their rows are masked / zeroed) */
                    if (lane < NH * (BN / CB)) blk = __ldg(w.trow + min(n * (BN / CB) + b, hblk));
                    mbar_wait(barE + 8 * st, ph ^ 1);
                    if (lane == 0) {
                        mbar_expect_tx(barK + 8 * st, KVB);
                        mbar_expect_tx(barV + 8 * st, KVB);
                    }
                    __syncwarp();
                    if (lane < NH * (BN / CB)) {
                        const int c0 = w.kvh * D + hf * 64;
                        tma_load2(sbase + Y::L_K + st * KVB + off, &tmK, barK + 8 * st, c0, blk * CB);
                        tma_load2(sbase + Y::L_V + st * KVB + off, &tmV, barV + 8 * st, c0, blk * CB);
                    }
                } else if (lt < 32) {
                    /* 8 lanes: cache block lane's K and V rows, whole, into the raw ring */
                    const int rs = (int)(gt % RS);
                    const uint32_t ph = (gt / RS) & 1, dst = sbase + Y::L_RAW + rs * 2 * RAWT + lane * BOX;
                    int blk = 0;
                    if (lane < BN / CB) blk = __ldg(w.trow + min(n * (BN / CB) + lane, hblk));
                    mbar_wait(rawE + 8 * rs, ph ^ 1);
                    if (lane == 0) {
                        mbar_expect_tx(rawK + 8 * rs, RAWT);
                        mbar_expect_tx(rawV + 8 * rs, RAWT);
                    }
                    __syncwarp();
                    if (lane < BN / CB) {
                        tma_load2(dst, &tmK, rawK + 8 * rs, w.kvh * HD, blk * CB);
                        tma_load2(dst + RAWT, &tmV, rawV + 8 * rs, w.kvh * HD, blk * CB);
                    }
                } else {
                    /* warps 1-3: the raw K -> the f16 stage (the consumers widen V while their S runs) */
                    const int rs = (int)(gt % RS), st = (int)(gt % ST), cw = (lt >> 5) - 1, kb = n * BN;
                    const uint32_t rph = (gt / RS) & 1, ph = (gt / ST) & 1;
                    const uint8_t *src = sm + Y::L_RAW + rs * 2 * RAWT;
                    mbar_wait(barE + 8 * st, ph ^ 1);
                    mbar_wait(rawK + 8 * rs, rph);
                    wg_widen<NCV / 32>(sm + Y::L_K + st * KVB, src, cw, lane, kb, w.hmax);
                    fence_proxy_async();
                    mbar_arrive(barK + 8 * st);
                    mbar_arrive(rawE + 8 * rs);
                }
            }
        }
        return;
    }

    if constexpr (E8) asm volatile("setmaxnreg.inc.sync.aligned.u32 224;\n" ::: "memory");
    else asm volatile("setmaxnreg.inc.sync.aligned.u32 240;\n" ::: "memory");
    const int cw = wg - 1, w4 = lt >> 5, lane = lt & 31, g = lane >> 2, c2 = 2 * (lane & 3);
    using P = pk<PACK, SPLIT>;
    /* this thread's tile rows A = rA and B = rA + 8: item rows iA / iB of
     * head (the warpgroup's first) + hq */
    const int rA = 16 * w4 + g, iA = rA % P::RH, iB = iA + 8, hq = rA / P::RH;
    uint8_t *const Qs = sm + cw * QB;
    const uint32_t qa = sbase + cw * QB;
    uint32_t gt = 0;
    bool staged = false; /* Q of an earlier item is in Qs (its S products may still read it) */
    constexpr int NO = D / 2; /* O floats a thread */
    float o[NO], s[64];
    witem w;
    for (int k = 0; witem_get<PACK, SPLIT>(k, G, n_items, ks, T, n_heads, n_kv, win, table, max_blocks, seq, pos, w); k++) {
        if (w.skip) continue;
        const int hw = w.h0 + (SPLIT ? 0 : cw * P::HPW), nkv = w.nkv; /* the warpgroup's first head */
        /* Q: scaled, f16, swizzled; all of a thread's loads in flight at once */
        {
            constexpr int NQ = BM * (D / 4) / 128;
            float4 v[NQ];
#pragma unroll
            for (int i = 0; i < NQ; i++) {
                const int f = lt + 128 * i, r = f / (D / 4), d = (f % (D / 4)) * 4, ri = r % P::RH;
                v[i] = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
                if (ri < w.nrows)
                    v[i] = __ldg((const float4 *)(q + ((size_t)(w.r0 + ri) * n_heads + hw + r / P::RH) * D + d));
            }
            if (staged) asm volatile("bar.sync %0, 128;" ::"r"(1 + cw) : "memory");
#pragma unroll
            for (int i = 0; i < NQ; i++) {
                const int f = lt + 128 * i, r = f / (D / 4), d = (f % (D / 4)) * 4;
                uint2 hv;
                hv.x = pack_h2(v[i].x * qscale, v[i].y * qscale);
                hv.y = pack_h2(v[i].z * qscale, v[i].w * qscale);
                *(uint2 *)(Qs + (d >> 6) * QSUB + sw128(r, d & 63)) = hv;
            }
            fence_proxy_async();
            asm volatile("bar.sync %0, 128;" ::"r"(1 + cw) : "memory");
            staged = true;
        }
        const int hiA = iA < w.nrows ? pos[w.r0 + iA] : -1, hiB = iB < w.nrows ? pos[w.r0 + iB] : -1;
#pragma unroll
        for (int i = 0; i < NO; i++) o[i] = 0.0f;
        float mA = -INFINITY, mB = -INFINITY, lA = 0.0f, lB = 0.0f;
        for (int it = 0; it < nkv; it++, gt++) {
            if (SPLIT && (it & 1) != cw) continue; /* the other warpgroup's tile */
            const int kb = (w.n0 + nkv - 1 - it) * BN, st = (int)(gt % ST);
            const uint32_t ph = (gt / ST) & 1, vs = sbase + Y::L_V + st * KVB;
            mbar_wait(barK + 8 * st, ph);
            wg_qk<D>(s, qa, sbase + Y::L_K + st * KVB);
            if constexpr (E8) {
                /* the raw V -> the f16 stage while S runs: the 8 consumer warps, 4 row groups each (SPLIT:
                 * the tile's warpgroup alone, 8 each; the stage is free: its K came after the converters saw
                 * its consumers leave it) */
                const int rs = (int)(gt % RS);
                mbar_wait(rawV + 8 * rs, (gt / RS) & 1);
                wg_widen<CV / 32>(sm + Y::L_V + st * KVB, sm + Y::L_RAW + rs * 2 * RAWT + RAWT,
                                  SPLIT ? w4 : cw * 4 + w4, lane, kb, w.hmax);
                fence_proxy_async();
                mbar_arrive(barV + 8 * st);
                mbar_arrive(rawE + 8 * rs);
            }
            wgmma_wait<0>();
            fence_f(s, 64);
            if (kb + BN - 1 > w.hmin) wg_mask<false>(s, kb + c2, hiA, hiB);
            if (WIN && kb < w.hmax - win + 1) wg_mask<true>(s, kb + c2, hiA - win + 1, hiB - win + 1);
            uint32_t p[32];
            float cA, cB;
            wg_softmax(s, p, mA, mB, lA, lB, cA, cB);
            if (__any_sync(0xffffffffu, cA != 1.0f || cB != 1.0f)) wg_rescale<D>(o, cA, cB);
            mbar_wait(barV + 8 * st, ph);
            if (!E8 && it == 0 && w.hmax < kb + BN - 1) {
                /* V rows past the item's last position: zero (both warpgroups write the same zeros; e4m3:
                 * the widening wrote zeros there) */
                const int z0 = w.hmax - kb + 1, nz = (BN - z0) * (D / 8); /* 16-byte chunks */
                for (int c = lt; c < nz; c += 128) {
                    const int r = z0 + c / (D / 8), hf = (c / 8) % NH, ch = c & 7;
                    *(uint4 *)(sm + (vs - sbase) + hf * SUB + r * 128 + ch * 16) = make_uint4(0, 0, 0, 0);
                }
                fence_proxy_async();
                asm volatile("bar.sync %0, 128;" ::"r"(1 + cw) : "memory");
            }
            fence_f(o, NO);
            fence_u(p, 32);
            wg_pv<D>(o, p, vs);
            wgmma_wait<0>();
            fence_f(o, NO);
            fence_u(p, 32);
            mbar_arrive(barE + 8 * st);
        }
        /* row sums over the quad (a row's maximum is the same in its quad's lanes) */
#pragma unroll
        for (int o2 = 1; o2 <= 2; o2 <<= 1) {
            lA += __shfl_xor_sync(0xffffffffu, lA, o2);
            lB += __shfl_xor_sync(0xffffffffu, lB, o2);
        }
        if constexpr (SPLIT) {
            /* the two warpgroups' states of the same 64 rows (the same accumulator layout) merged into the
             * first: both leave their maxima and rescale to the joint one, the second leaves O (in the two
             * Q regions, [j][thread]: both warpgroups' S products are done) and its row sums */
            float *ml = (float *)(sm + Y::L_ML), *ox = (float *)sm;
            if ((lane & 3) == 0) ml[cw * BM + rA] = mA, ml[cw * BM + rA + 8] = mB;
            asm volatile("bar.sync 3, 256;" ::: "memory");
            const float xA = fmaxf(ml[rA], ml[BM + rA]), xB = fmaxf(ml[rA + 8], ml[BM + rA + 8]);
            const float fA = f_ex2(mA - (xA == -INFINITY ? 0.0f : xA)), fB = f_ex2(mB - (xB == -INFINITY ? 0.0f : xB));
            wg_rescale<D>(o, fA, fB);
            lA *= fA;
            lB *= fB;
            mA = xA; /* the merged state's maxima (a part's, for wg_merge_kernel) */
            mB = xB;
            if (cw == 1) {
#pragma unroll
                for (int j = 0; j < NO; j++) ox[j * 128 + lt] = o[j];
                if ((lane & 3) == 0) ml[2 * BM + rA] = lA, ml[2 * BM + rA + 8] = lB;
            }
            asm volatile("bar.sync 3, 256;" ::: "memory");
            if (cw == 0) {
#pragma unroll
                for (int j = 0; j < NO; j++) o[j] += ox[j * 128 + lt];
                lA += ml[2 * BM + rA];
                lB += ml[2 * BM + rA + 8];
            }
            asm volatile("bar.sync 3, 256;" ::: "memory"); /* read before the next item's Q and maxima */
            if (cw == 1) continue;
        }
        /* normalise, store (and the o projection's copy); with ks parts, this part's O unnormalised, its
         * maxima (log2 units) and sums after it, for wg_merge_kernel */
        const bool whole = ks == 1;
        const float nA = !whole ? 1.0f : lA > 0.0f ? 1.0f / lA : 0.0f, nB = !whole ? 1.0f : lB > 0.0f ? 1.0f / lB : 0.0f;
        const int ld = whole ? D : D + 2, pi = whole ? 0 : witem_index(k, G) % ks;
        float *const dst = whole ? out : part;
        const int pk_ = whole ? prep_kind : XPREP_NONE;
        const size_t ea = (((size_t)(w.r0 + iA) * n_heads + hw + hq) * ks + pi) * ld + c2;
        const size_t eb = (((size_t)(w.r0 + iB) * n_heads + hw + hq) * ks + pi) * ld + c2;
#pragma unroll
        for (int j = 0; j < D / 8; j++) {
            if (iA < w.nrows) flash_store(dst, pk_, prep, ea + 8 * j, make_float2(o[4 * j] * nA, o[4 * j + 1] * nA));
            if (iB < w.nrows) flash_store(dst, pk_, prep, eb + 8 * j, make_float2(o[4 * j + 2] * nB, o[4 * j + 3] * nB));
        }
        if (!whole && (lane & 3) == 0) {
            if (iA < w.nrows) *(float2 *)(part + ea - c2 + D) = make_float2(mA, lA);
            if (iB < w.nrows) *(float2 *)(part + eb - c2 + D) = make_float2(mB, lB);
        }
    }
    pdl_launch();
#endif
}

/* The parts of each (row, head) merged (ks > 1): block (head, row), a
 * thread two dims; weights 2^(m_s - M) from the parts' maxima (log2 units),
 * parts that saw no position (sum 0) left out. */
template <int D>
__global__ void __launch_bounds__(D / 2)
    wg_merge_kernel(float *__restrict__ out, const float *__restrict__ part, int n_heads, int ks, int prep_kind,
                    void *__restrict__ prep) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
    pdl_wait();
    const size_t th = (size_t)blockIdx.y * n_heads + blockIdx.x;
    const float *pp = part + th * ks * (D + 2);
    float M = -INFINITY;
    for (int s = 0; s < ks; s++)
        if (pp[s * (D + 2) + D + 1] > 0.0f) M = fmaxf(M, pp[s * (D + 2) + D]);
    float L = 0.0f, ox = 0.0f, oy = 0.0f;
    for (int s = 0; s < ks; s++) {
        const float *ps = pp + s * (D + 2);
        const float l = ps[D + 1];
        if (!(l > 0.0f)) continue;
        const float wt = f_ex2(ps[D] - M);
        const float2 v = *(const float2 *)(ps + 2 * threadIdx.x);
        L = fmaf(l, wt, L);
        ox = fmaf(v.x, wt, ox);
        oy = fmaf(v.y, wt, oy);
    }
    pdl_launch();
    const float n = L > 0.0f ? 1.0f / L : 0.0f;
    flash_store(out, prep_kind, prep, th * D + 2 * threadIdx.x, make_float2(ox * n, oy * n));
#endif
}

/* ---- host: tensor maps over the cache pools, the launch ------------------ */

typedef CUresult (*encode_fn)(CUtensorMap *, CUtensorMapDataType, cuuint32_t, void *, const cuuint64_t *,
                              const cuuint64_t *, const cuuint32_t *, const cuuint32_t *, CUtensorMapInterleave,
                              CUtensorMapSwizzle, CUtensorMapL2promotion, CUtensorMapFloatOOBfill);

/* A pool [n_blocks * 16 rows][kv_dim] as a 2D tensor: f16, copied in boxes
 * of 16 rows x 64 dims with the 128-byte swizzle; e4m3 (bytes), in boxes of
 * 16 rows x 128 dims as stored (the widening swizzles). The maps of every layer's
 * pools are made once and kept (a pool's address does not move while its
 * cache lives; a new cache at an old address with another shape gets a
 * map of its own). */
struct map_entry {
    const void *pool;
    int n_blocks, kv_dim, e8;
    CUtensorMap map;
};
constexpr int N_MAPS = 512;
map_entry g_maps[N_MAPS];
int g_n_maps, g_next_map;
std::mutex g_maps_mu;

encode_fn get_encode() {
    static encode_fn fn = NULL;
    static bool tried = false;
    if (!tried) {
        tried = true;
        void *p = NULL;
        cudaDriverEntryPointQueryResult qr;
        if (cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &p, 12000, cudaEnableDefault, &qr) ==
                cudaSuccess &&
            qr == cudaDriverEntryPointSuccess)
            fn = (encode_fn)p;
    }
    return fn;
}

bool pool_map(const void *pool, int n_blocks, int kv_dim, int e8, CUtensorMap *out) {
    std::lock_guard<std::mutex> lock(g_maps_mu);
    for (int i = 0; i < g_n_maps; i++)
        if (g_maps[i].pool == pool && g_maps[i].n_blocks == n_blocks && g_maps[i].kv_dim == kv_dim &&
            g_maps[i].e8 == e8) {
            *out = g_maps[i].map;
            return true;
        }
    encode_fn enc = get_encode();
    if (!enc) return false;
    map_entry e = {pool, n_blocks, kv_dim, e8, {}};
    const cuuint64_t gdim[2] = {(cuuint64_t)kv_dim, (cuuint64_t)n_blocks * CB};
    const cuuint64_t gstr[1] = {(cuuint64_t)kv_dim * (e8 ? 1 : 2)};
    const cuuint32_t box[2] = {e8 ? (cuuint32_t)HD : 64u, (cuuint32_t)CB}, es[2] = {1, 1};
    if (enc(&e.map, e8 ? CU_TENSOR_MAP_DATA_TYPE_UINT8 : CU_TENSOR_MAP_DATA_TYPE_FLOAT16, 2, (void *)pool, gdim, gstr,
            box, es, CU_TENSOR_MAP_INTERLEAVE_NONE, e8 ? CU_TENSOR_MAP_SWIZZLE_NONE : CU_TENSOR_MAP_SWIZZLE_128B,
            CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE) != CUDA_SUCCESS)
        return false;
    const int slot = g_n_maps < N_MAPS ? g_n_maps++ : (g_next_map++ % N_MAPS);
    g_maps[slot] = e;
    *out = e.map;
    return true;
}

/* The switch: HEARTH_ATTN_WG=0 turns the kernel off (A/B runs), read at
 * first use; cu_attention_flash_wg_set overrides it. */
int g_wg_on = -1;

int wg_switch() {
    int on = __atomic_load_n(&g_wg_on, __ATOMIC_ACQUIRE);
    if (on < 0) {
        const char *s = getenv("HEARTH_ATTN_WG");
        on = !(s && atoi(s) == 0);
        int unset = -1;
        __atomic_compare_exchange_n(&g_wg_on, &unset, on, false, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE);
        on = __atomic_load_n(&g_wg_on, __ATOMIC_ACQUIRE);
    }
    return on;
}

/* Whether this process has the kernels' sm_90a code for the current device. */
bool wg_code() {
    static unsigned long long ok_mask, known_mask;
    int dev = -1;
    if (cudaGetDevice(&dev) != cudaSuccess || dev < 0 || dev >= 64) return false;
    const unsigned long long bit = 1ull << dev;
    if (!(__atomic_load_n(&known_mask, __ATOMIC_ACQUIRE) & bit)) {
        cudaFuncAttributes fa;
        int major = 0, minor = 0;
        bool ok = cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev) == cudaSuccess &&
                  cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, dev) == cudaSuccess &&
                  major == 9 && minor == 0 && get_encode() != NULL &&
                  /* every instance is in this file's one sm_90a image: one answers for all */
                  cudaFuncGetAttributes(&fa, attn_flash_wg_kernel<128, true, false, false, false>) == cudaSuccess;
        if (!ok) (void)cudaGetLastError(); /* a missing image is an answer, not an error */
        if (ok) __atomic_fetch_or(&ok_mask, bit, __ATOMIC_RELEASE);
        __atomic_fetch_or(&known_mask, bit, __ATOMIC_RELEASE);
    }
    return (__atomic_load_n(&ok_mask, __ATOMIC_ACQUIRE) & bit) != 0;
}

/* launches so far (the tests check that the cases this kernel fits take it), and those cut in parts */
unsigned long long g_launches, g_launches_split;
int g_split_on = -1; /* whether short chunks may cut their items' positions in parts; -1: HEARTH_ATTN_SPLIT decides */

template <int D, bool PACK, bool SPLIT, bool E8, bool WIN>
void launch_wg(const cu_launch *L, const CUtensorMap &mk, const CUtensorMap &mv, float *out, const float *q, int T,
               const cu_kv *kv, const int32_t *seq, const int32_t *pos, int n_heads, int n_kv, float qscale,
               int window, int prep_kind, void *prep, float *part, size_t part_floats) {
    using P = pk<PACK, SPLIT>;
    constexpr int SMEM = lay<E8, D>::SMEM;
    static unsigned long long done;
    cu_smem_setup(L, attn_flash_wg_kernel<D, PACK, SPLIT, E8, WIN>, SMEM, true, &done);
    int n_items = (n_heads / P::HI) * ((T + P::RH - 1) / P::RH);
    /* too few items for the SMs (a short chunk of one sequence after a long prefix: s27-run1, 16 rows after
     * 3984 cached positions took 67 us a layer in 8 blocks): cut each item's positions in ks parts */
    int split_on = __atomic_load_n(&g_split_on, __ATOMIC_ACQUIRE);
    if (split_on < 0) { /* HEARTH_ATTN_SPLIT=0: never (A/B runs); cu_attention_flash_wg_split_set overrides it */
        const char *s = getenv("HEARTH_ATTN_SPLIT");
        split_on = !(s && atoi(s) == 0);
        int unset = -1;
        __atomic_compare_exchange_n(&g_split_on, &unset, split_on, false, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE);
    }
    int ks = !split_on ? 1 : kv->splits < L->n_sm / n_items ? kv->splits : L->n_sm / n_items;
    while (ks > 1 && (size_t)T * n_heads * ks * (D + 2) > part_floats) ks--;
    if (ks < 2 || !part) ks = 1;
    n_items *= ks;
    const int grid = n_items < L->n_sm ? n_items : L->n_sm;
    cu_launch_k(L, attn_flash_wg_kernel<D, PACK, SPLIT, E8, WIN>, dim3(grid), dim3(NTH), SMEM, mk, mv, out, q, kv->table,
                kv->max_blocks, seq, pos, T, n_heads, n_kv, qscale, window, n_items, ks, part, prep_kind, prep);
    if (ks > 1) {
        cu_launch_k(L, wg_merge_kernel<D>, dim3(n_heads, T), dim3(D / 2), 0, out, (const float *)part, n_heads, ks,
                    prep_kind, prep);
        __atomic_fetch_add(&g_launches_split, 1ull, __ATOMIC_RELAXED);
    }
    __atomic_fetch_add(&g_launches, 1ull, __ATOMIC_RELAXED);
}

} // namespace

int cu_attention_flash_wg_set(int on) {
    __atomic_store_n(&g_wg_on, on ? 1 : 0, __ATOMIC_RELEASE);
    return wg_code();
}

void cu_attention_flash_wg_split_set(int on) { __atomic_store_n(&g_split_on, on ? 1 : 0, __ATOMIC_RELEASE); }

unsigned long long cu_attention_flash_wg_launches(void) { return __atomic_load_n(&g_launches, __ATOMIC_RELAXED); }
unsigned long long cu_attention_flash_wg_launches_split(void) {
    return __atomic_load_n(&g_launches_split, __ATOMIC_RELAXED);
}

int cu_attention_flash_wg_fits(const cu_launch *L, const cu_kv *kv, int head_dim, int n_heads, int n_kv_heads,
                               int window) {
    return wg_switch() && ((kv->f16 && (head_dim == 128 || head_dim == 64)) || (kv->fp8 && head_dim == HD)) &&
           kv->block_size == CB &&
           n_kv_heads > 0 && n_heads % n_kv_heads == 0 &&
           kv->kv_dim % 64 == 0 &&
           kv->n_blocks > 0 && ((uintptr_t)kv->k | (uintptr_t)kv->v) % 16 == 0 && wg_code();
}

int cu_attention_flash_wg(const cu_launch *L, float *out, const float *q, int T, const cu_kv *kv, const int32_t *seq,
                          const int32_t *pos, int n_heads, int n_kv_heads, int head_dim, float qscale, int window,
                          int prep_kind, void *prep, float *part, size_t part_floats, int *prepped) {
    CUtensorMap mk, mv;
    const int e8 = kv->fp8; /* else f16 (cu_attention_flash_wg_fits) */
    if (!pool_map(kv->k, kv->n_blocks, kv->kv_dim, e8, &mk) || !pool_map(kv->v, kv->n_blocks, kv->kv_dim, e8, &mv))
        return 0;
    if (prep_kind != XPREP_BF16 && prep_kind != XPREP_F16) prep_kind = XPREP_NONE;
    const int G = n_heads / n_kv_heads;
#define WG_ARGS L, mk, mv, out, q, T, kv, seq, pos, n_heads, n_kv_heads, qscale, window, prep_kind, prep, part, part_floats
#define WG_LAUNCH(D, PACK, SPLIT, E8) \
    (window > 0 ? launch_wg<D, PACK, SPLIT, E8, true>(WG_ARGS) : launch_wg<D, PACK, SPLIT, E8, false>(WG_ARGS))
    /* e4m3: head_dim 128; head_dim 64: f16 (cu_attention_flash_wg_fits) */
    if (head_dim == 64) {
        if (G % 4 == 0) WG_LAUNCH(64, true, false, false);
        else if (G % 2 == 0) WG_LAUNCH(64, false, false, false);
        else WG_LAUNCH(64, false, true, false);
    } else if (G % 4 == 0) {
        e8 ? WG_LAUNCH(128, true, false, true) : WG_LAUNCH(128, true, false, false);
    } else if (G % 2 == 0) {
        e8 ? WG_LAUNCH(128, false, false, true) : WG_LAUNCH(128, false, false, false);
    } else {
        e8 ? WG_LAUNCH(128, false, true, true) : WG_LAUNCH(128, false, true, false);
    }
#undef WG_LAUNCH
#undef WG_ARGS
    *prepped = prep_kind != XPREP_NONE;
    return 1;
}
