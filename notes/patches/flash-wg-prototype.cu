/* flash-wg-prototype.cu (notes/patches: a record, not built by the Makefile; it
 * was bench/cuda/bench_flash_wg.cu while it was measured, session 23) - a Hopper (sm_90a) prototype of causal prefill attention
 * in the style of flash-attention 3 (warpgroup MMA, a producer warp feeding
 * K/V tiles by the bulk tensor copy engine), measured beside the project's
 * current kernel (attention_flash.cu, flash-attention 2 style, mma.sync) and
 * checked against a plain f32 reference. head_dim 128, f16 paged KV cache.
 *
 * The function (attention_flash.cu's contract): q (f32 [T][n_heads * 128])
 * times qscale = log2(e) / sqrt(128), rounded to f16; row t attends to
 * positions 0 .. pos[t] of the sequence (K and V f16 rows in two pools of
 * [n_blocks][16][kv_dim], position p in block table[p / 16], row p % 16);
 * query head h reads kv head h / (n_heads / n_kv); softmax in exp2 with f32
 * accumulation; P rounded to f16 for P V (row sums of the f32 values); f32
 * output.
 *
 * The new kernel (fa_wg_kernel): a block is 3 warpgroups (384 threads, one
 * block an SM) working through "items": 64 rows of the sequence for 2 query
 * heads of one kv head, or with PACK 32 rows for 4 query heads of one kv head
 * (each consumer warpgroup's 64 tile rows are then 32 rows of each of 2
 * heads). Items are numbered heaviest (latest rows) first; with a persistent
 * grid (one block an SM) block b takes items b, 2G - 1 - b, 2G + b, ... (a
 * snake), else one item a block.
 *   warpgroup 0, producer (setmaxnreg 24): one warp walks each item's K/V
 *     tiles of 128 positions from the last (the diagonal) to the first; for
 *     each, 16 lanes each issue one 2D bulk tensor copy of K and one of V (a
 *     cache block's 16 rows x 64 dims, 2 KB, 128-byte swizzle, the block
 *     found through the table) into an ST-deep ring of stages, completing on
 *     the stage's K and V mbarriers; it waits on the stage's "empty" mbarrier
 *     (the 256 consumer threads) before reuse. The ring runs on across a
 *     block's items.
 *   warpgroups 1, 2, consumers (setmaxnreg 240): Q is scaled, rounded to f16
 *     and stored swizzled (the canonical 128-byte swizzled K-major layout)
 *     once an item. Per tile: S = Q K^T by 8 wgmma m64n128k16 (A and B from
 *     shared memory, both K-major), masks only on tiles that cross a row's
 *     last position, online softmax in registers (the S accumulator layout is
 *     the mma.sync C layout, so P packs straight into the A register
 *     fragments), O += P V by 8 wgmma m64n128k16 with A (P) from registers and
 *     V as an MN-major ("transposed") B operand from the same swizzled
 *     [position][64 dims] halves. Options (template flags): PIPE, the next
 *     tile's S = Q K^T issued before this tile's P V so that the softmax of
 *     one overlaps the other (flash-attention 3's intra-warpgroup pipeline);
 *     PP, ping-pong of the two consumer warpgroups' wgmma issue (named
 *     barriers); SKIP, no O rescale when no row of a warp has a new maximum.
 * notes/flash-wg.md has the versions and their times.
 *
 * Also here: unit checks of the pieces (the tensor copy and its swizzle; the
 * two wgmma forms and their descriptors), a reference kernel, and main():
 *
 *   bench_flash_wg [--reps 30]
 *
 * Build (wgmma and setmaxnreg need sm_90a):
 *   nvcc -O3 -std=c++17 -Iinclude -Isrc -DHEARTH_CUDA=1 \
 *        -gencode arch=compute_90a,code=sm_90a -o bench_flash_wg bench/cuda/bench_flash_wg.cu
 * The Makefile's rule builds it for plain sm_90, where the new kernels compile
 * to nothing and main() says so. A measurement, never a test. */
#include "ops/cuda/attention_flash.cu" /* the current kernel, cu_attention_flash(), timed beside the new one */

#include <cuda.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <vector>

#define CK(x)                                                                                                     \
    do {                                                                                                          \
        cudaError_t e_ = (x);                                                                                     \
        if (e_ != cudaSuccess) {                                                                                  \
            fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_));                 \
            exit(1);                                                                                              \
        }                                                                                                         \
    } while (0)

namespace fwg {

constexpr int HD = 128;             /* head dim */
constexpr int BM = 64;              /* rows per consumer warpgroup (and per block) */
constexpr int BN = 128;             /* positions per K/V tile */
constexpr int NCW = 2;              /* consumer warpgroups = query heads per block */
constexpr int NTH = 128 * (NCW + 1);
constexpr int QB = BM * HD * 2;     /* bytes of one head's staged Q: two 64-dim halves of BM x 128 bytes */
[[maybe_unused]] constexpr int QSUB = BM * 128;      /* bytes of one 64-dim half of Q */
constexpr int SUB = BN * 128;       /* bytes of one 64-dim half of a K or V tile */
constexpr int KVB = 2 * SUB;        /* bytes of one K or V tile */
constexpr int CB = 16;              /* cache block size (positions) */
[[maybe_unused]] constexpr int BOX = CB * 128;       /* bytes of one tensor copy: 16 rows x 64 dims */

template <int ST> struct lay {
    static constexpr int K = NCW * QB, V = K + ST * KVB, BAR = V + ST * KVB;
    static constexpr int BYTES = BAR + 3 * ST * 8 + 1024; /* + slack to align the base to 1024 */
};

/* byte offset of (row r, dim d < 64) in a 128-byte-swizzled [rows][64] f16 tile (1024-byte aligned) */
__host__ __device__ __forceinline__ int sw128(int r, int d) {
    return r * 128 + ((((d >> 3) ^ r) & 7) << 4) + (d & 7) * 2;
}

#if !defined(__CUDA_ARCH__) || defined(__CUDA_ARCH_FEAT_SM90_ALL)
__device__ __forceinline__ uint32_t smem_u32(const void *p) { return (uint32_t)__cvta_generic_to_shared(p); }
__device__ __forceinline__ void mbar_init(uint32_t bar, uint32_t count) {
    asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(bar), "r"(count) : "memory");
}
__device__ __forceinline__ void mbar_expect_tx(uint32_t bar, uint32_t bytes) {
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(bar), "r"(bytes) : "memory");
}
__device__ __forceinline__ void mbar_arrive(uint32_t bar) {
    asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" ::"r"(bar) : "memory");
}
__device__ __forceinline__ void mbar_wait(uint32_t bar, uint32_t parity) {
    uint32_t done;
    do {
        asm volatile("{\n.reg .pred p;\nmbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\nselp.u32 %0, 1, 0, p;\n}\n"
                     : "=r"(done)
                     : "r"(bar), "r"(parity)
                     : "memory");
    } while (!done);
}
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
__device__ __forceinline__ uint32_t pack_f16x2(float a, float b) {
    __half2 h = __floats2half2_rn(a, b);
    return *(uint32_t *)&h;
}
__device__ __forceinline__ float ex2(float x) {
    float y;
    asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
    return y;
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

/* S = Q K^T for one 64-row warpgroup: 8 k-steps over the head dim; Q at qa
 * ([64][64] swizzled halves, two), K at ka ([BN][64] swizzled halves, two).
 * Issued and committed as one group; the caller waits. */
__device__ __forceinline__ void wg_qk(float *s, uint32_t qa, uint32_t ka) {
    fence_f(s, 64);
    wgmma_fence();
#pragma unroll
    for (int kk = 0; kk < HD / 16; kk++) {
        const uint32_t qo = (kk >> 2) * QSUB + (kk & 3) * 32, ko = (kk >> 2) * SUB + (kk & 3) * 32;
        wgmma_ss(s, gdesc(qa + qo, 1, 64), gdesc(ka + ko, 1, 64), kk > 0);
    }
    wgmma_commit();
}

/* O += P V: 8 k-steps over the tile's positions; P in registers (p[4 kp ..]:
 * the A fragment of positions 16 kp .. 16 kp + 15), V at va ([BN][64]
 * swizzled halves, two: the MN-major B operand; LBO = the distance between
 * the two 64-dim halves, SBO = 8 rows). One commit group. */
__device__ __forceinline__ void wg_pv(float *o, uint32_t *p, uint32_t va) {
    wgmma_fence(); /* the caller fences o and p (before any wgmma of this stage is issued) */
#pragma unroll
    for (int kp = 0; kp < BN / 16; kp++) wgmma_rs_t(o, p + 4 * kp, gdesc(va + kp * 16 * 128, SUB >> 4, 64), 1);
    wgmma_commit();
}

/* positions past a row's last one are -inf (kc: the position of this
 * thread's first column, kb + 2 (lane & 3)) */
__device__ __forceinline__ void wg_mask(float *s, int kc, int hiA, int hiB) {
#pragma unroll
    for (int j = 0; j < BN / 8; j++)
#pragma unroll
        for (int e = 0; e < 2; e++) {
            const int p = kc + 8 * j + e;
            if (p > hiA) s[4 * j + e] = -INFINITY;
            if (p > hiB) s[4 * j + 2 + e] = -INFINITY;
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
    cA = ex2(mA - uA);
    cB = ex2(mB - uB);
    mA = xA;
    mB = xB;
    float sA = 0.0f, sB = 0.0f;
#pragma unroll
    for (int j = 0; j < BN / 8; j++) {
        const float p0 = ex2(s[4 * j] - uA), p1 = ex2(s[4 * j + 1] - uA);
        const float p2 = ex2(s[4 * j + 2] - uB), p3 = ex2(s[4 * j + 3] - uB);
        sA += p0 + p1;
        sB += p2 + p3;
        p[(j >> 1) * 4 + (j & 1) * 2 + 0] = pack_f16x2(p0, p1);
        p[(j >> 1) * 4 + (j & 1) * 2 + 1] = pack_f16x2(p2, p3);
    }
    lA = lA * cA + sA;
    lB = lB * cB + sB;
}

__device__ __forceinline__ void wg_rescale(float *o, float cA, float cB) {
#pragma unroll
    for (int j = 0; j < HD / 8; j++) {
        o[4 * j] *= cA;
        o[4 * j + 1] *= cA;
        o[4 * j + 2] *= cB;
        o[4 * j + 3] *= cB;
    }
}
#endif /* sm_90a device code */

/* One work item: a 64-row tile of the sequence for NCW query heads of one kv
 * head. Items are numbered heaviest (latest rows) first; item idx is row
 * tile ntiles - 1 - idx / HP, heads (idx % HP) NCW .. + NCW - 1 (HP =
 * n_heads / NCW). Block b takes round k's item k G + b (odd rounds reversed:
 * a snake, which balances the decreasing costs); G = the grid (G = the item
 * count: one item a block). Every warp computes the item itself (a warp's
 * loads of the rows' positions and shuffles: the rows' first and last
 * positions it needs). */
struct witem {
    int r0, nrows, h0, kvh, hmin, hmax, nkv;
};
/* PACK (packed GQA): an item is 32 rows of 2 NCW heads of one kv head, a
 * warpgroup's 64 tile rows being 32 rows of each of 2 heads; the block's
 * K/V tiles then serve 4 query heads, not 2 (half the L2 traffic). */
template <bool PACK> struct pk {
    static constexpr int RH = PACK ? 32 : BM; /* rows of the sequence an item */
    static constexpr int HPW = BM / RH;       /* heads a warpgroup */
    static constexpr int HI = NCW * HPW;      /* heads an item */
};
template <bool PACK>
__device__ __forceinline__ bool witem_get(int k, int G, int n_items, int T, int n_heads, int n_kv,
                                          const int32_t *__restrict__ pos, witem &w) {
    using P = pk<PACK>;
    const int b = (int)blockIdx.x, idx = k * G + ((k & 1) ? G - 1 - b : b);
    if (idx >= n_items) return false;
    const int HP = n_heads / P::HI, ntiles = (T + P::RH - 1) / P::RH;
    w.r0 = (ntiles - 1 - idx / HP) * P::RH;
    w.nrows = min(P::RH, T - w.r0);
    w.h0 = (idx % HP) * P::HI;
    w.kvh = w.h0 / (n_heads / n_kv);
    const int lane = threadIdx.x & 31;
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
    w.nkv = hi / BN + 1;
    return true;
}

/* The kernel. ST: stages of the K/V ring (which runs on across a block's
 * items, so the producer loads the next item's tiles while this one's are
 * consumed). PIPE: intra-warpgroup overlap (the next S = Q K^T issued before
 * this P V). PP: ping-pong between the two consumer warpgroups (named
 * barriers 3 and 4: a warpgroup issues its wgmma only after the other has
 * issued its own, so one's softmax runs under the other's matrix products).
 * SKIP: O is not
 * rescaled when no row of the warp has a new maximum (a factor of exactly 1).
 * NOSM: a timing probe with no softmax (wrong results). */
template <int ST, bool PIPE, bool PP, bool PACK, bool SKIP = false, bool NOSM = false>
__global__ void __launch_bounds__(NTH, 1)
    fa_wg_kernel(const __grid_constant__ CUtensorMap tmK, const __grid_constant__ CUtensorMap tmV,
                 float *__restrict__ out, const float *__restrict__ q, const int32_t *__restrict__ table,
                 const int32_t *__restrict__ pos, int T, int n_heads, int n_kv, float qscale, int n_items) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
    using L = lay<ST>;
    extern __shared__ uint8_t smraw[];
    const uint32_t raw = smem_u32(smraw), sbase = (raw + 1023) & ~1023u;
    uint8_t *const sm = smraw + (sbase - raw);
    const int tid = threadIdx.x, wg = tid >> 7, lt = tid & 127, G = (int)gridDim.x;
    const uint32_t barK = sbase + L::BAR, barV = barK + ST * 8, barE = barV + ST * 8;
    if (tid == 0) {
        for (int i = 0; i < ST; i++) {
            mbar_init(barK + 8 * i, 1);
            mbar_init(barV + 8 * i, 1);
            mbar_init(barE + 8 * i, NCW * 128);
        }
        asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
    }
    __syncthreads();

    if (wg == 0) {
        /* producer: one warp */
        asm volatile("setmaxnreg.dec.sync.aligned.u32 24;\n" ::: "memory");
        if (lt >= 32) return;
        const int lane = lt, b = lane >> 1, hf = lane & 1;
        const uint32_t off = hf * SUB + b * BOX;
        uint32_t gt = 0; /* tiles through the ring so far */
        witem w;
        for (int k = 0; witem_get<PACK>(k, G, n_items, T, n_heads, n_kv, pos, w); k++) {
            const int hblk = w.hmax / CB, c0 = w.kvh * HD + hf * 64;
            for (int it = 0; it < w.nkv; it++, gt++) {
                const int n = w.nkv - 1 - it, st = (int)(gt % ST);
                const uint32_t ph = (gt / ST) & 1;
                int blk = 0;
                if (lane < 2 * (BN / CB)) blk = __ldg(table + min(n * (BN / CB) + b, hblk));
                mbar_wait(barE + 8 * st, ph ^ 1);
                if (lane == 0) {
                    mbar_expect_tx(barK + 8 * st, KVB);
                    mbar_expect_tx(barV + 8 * st, KVB);
                }
                __syncwarp();
                if (lane < 2 * (BN / CB)) {
                    tma_load2(sbase + L::K + st * KVB + off, &tmK, barK + 8 * st, c0, blk * CB);
                    tma_load2(sbase + L::V + st * KVB + off, &tmV, barV + 8 * st, c0, blk * CB);
                }
            }
        }
        return;
    }

    asm volatile("setmaxnreg.inc.sync.aligned.u32 240;\n" ::: "memory");
    const int cw = wg - 1, w4 = lt >> 5, lane = lt & 31, g = lane >> 2, c2 = 2 * (lane & 3);
    using P = pk<PACK>;
    /* this thread's tile rows A = rA and B = rA + 8: row iA / iB of the item's
     * rows, of head (item's first) + cw HPW + hq */
    const int rA = 16 * w4 + g, iA = rA % P::RH, iB = iA + 8, hq = rA / P::RH;
    uint8_t *const Qs = sm + cw * QB;
    const uint32_t qa = sbase + cw * QB;
    /* ping-pong: wait for this warpgroup's turn to issue / hand the turn over */
    auto turn_wait = [&]() {
        if constexpr (PP) asm volatile("bar.sync %0, 256;" ::"r"(3 + cw) : "memory");
    };
    auto turn_give = [&]() {
        if constexpr (PP) asm volatile("bar.arrive %0, 256;" ::"r"(4 - cw) : "memory");
    };
    if constexpr (PP)
        if (cw == 1) turn_give(); /* warpgroup 0 goes first */
    uint32_t gt = 0;
    float o[64], s[64];
#pragma unroll
    for (int i = 0; i < 64; i++) s[i] = 0.0f;
    witem w;
    for (int k = 0; witem_get<PACK>(k, G, n_items, T, n_heads, n_kv, pos, w); k++) {
        const int hw = w.h0 + cw * P::HPW, nkv = w.nkv, hmin = w.hmin; /* the warpgroup's first head */
        /* Q of head h: scaled, f16, swizzled; all of a thread's loads in flight at once */
        {
            constexpr int NQ = BM * (HD / 4) / 128;
            float4 v[NQ];
#pragma unroll
            for (int i = 0; i < NQ; i++) {
                const int f = lt + 128 * i, r = f / (HD / 4), d = (f % (HD / 4)) * 4, ri = r % P::RH;
                v[i] = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
                if (ri < w.nrows)
                    v[i] = __ldg((const float4 *)(q + ((size_t)(w.r0 + ri) * n_heads + hw + r / P::RH) * HD + d));
            }
            if (k > 0) asm volatile("bar.sync %0, 128;" ::"r"(1 + cw) : "memory"); /* the last item's Q is read */
#pragma unroll
            for (int i = 0; i < NQ; i++) {
                const int f = lt + 128 * i, r = f / (HD / 4), d = (f % (HD / 4)) * 4;
                uint2 hv;
                hv.x = pack_f16x2(v[i].x * qscale, v[i].y * qscale);
                hv.y = pack_f16x2(v[i].z * qscale, v[i].w * qscale);
                *(uint2 *)(Qs + (d >> 6) * QSUB + sw128(r, d & 63)) = hv;
            }
            fence_proxy_async();
            asm volatile("bar.sync %0, 128;" ::"r"(1 + cw) : "memory");
        }
        const int hiA = iA < w.nrows ? pos[w.r0 + iA] : -1, hiB = iB < w.nrows ? pos[w.r0 + iB] : -1;
#pragma unroll
        for (int i = 0; i < 64; i++) o[i] = 0.0f;
        float mA = -INFINITY, mB = -INFINITY, lA = 0.0f, lB = 0.0f;
        if constexpr (!PIPE) {
            for (int it = 0; it < nkv; it++, gt++) {
                const int kb = (nkv - 1 - it) * BN, st = (int)(gt % ST);
                const uint32_t ph = (gt / ST) & 1;
                mbar_wait(barK + 8 * st, ph);
                turn_wait();
                wg_qk(s, qa, sbase + L::K + st * KVB);
                turn_give();
                wgmma_wait<0>();
                fence_f(s, 64);
                if (kb + BN - 1 > hmin) wg_mask(s, kb + c2, hiA, hiB);
                uint32_t p[32];
                float cA, cB;
                wg_softmax(s, p, mA, mB, lA, lB, cA, cB);
                if (!SKIP || __any_sync(0xffffffffu, cA != 1.0f || cB != 1.0f)) wg_rescale(o, cA, cB);
                mbar_wait(barV + 8 * st, ph);
                fence_f(o, 64);
                fence_u(p, 32);
                turn_wait();
                wg_pv(o, p, sbase + L::V + st * KVB);
                turn_give();
                wgmma_wait<0>();
                fence_f(o, 64);
                fence_u(p, 32);
                mbar_arrive(barE + 8 * st);
            }
        } else {
            uint32_t pa[32], pb[32];
            {
                const int kb = (nkv - 1) * BN, st = (int)(gt % ST);
                mbar_wait(barK + 8 * st, (gt / ST) & 1);
                turn_wait();
                wg_qk(s, qa, sbase + L::K + st * KVB);
                turn_give();
                wgmma_wait<0>();
                fence_f(s, 64);
                if (kb + BN - 1 > hmin) wg_mask(s, kb + c2, hiA, hiB);
                float cA, cB;
                wg_softmax(s, pa, mA, mB, lA, lB, cA, cB);
            }
            /* tile it (ring slot gt + it): its S = Q K^T is issued, then the P V
             * of tile it - 1 (P in pc); the softmax of tile it (into pn) runs
             * while that P V is in flight */
            auto step = [&](int it, uint32_t *pc, uint32_t *pn) {
                const uint32_t gi = gt + it;
                const int kb = (nkv - 1 - it) * BN, st = (int)(gi % ST), sp = (int)((gi - 1) % ST);
                const uint32_t ph = (gi / ST) & 1, pph = ((gi - 1) / ST) & 1;
                fence_f(o, 64);
                fence_u(pc, 32);
                mbar_wait(barK + 8 * st, ph);
                turn_wait();
                wg_qk(s, qa, sbase + L::K + st * KVB);
                mbar_wait(barV + 8 * sp, pph);
                wg_pv(o, pc, sbase + L::V + sp * KVB);
                turn_give();
                wgmma_wait<1>(); /* S of this tile */
                fence_f(s, 64);
                if (kb + BN - 1 > hmin) wg_mask(s, kb + c2, hiA, hiB);
                float cA, cB;
                if constexpr (NOSM) {
#pragma unroll
                    for (int j = 0; j < BN / 8; j++) {
                        pn[(j >> 1) * 4 + (j & 1) * 2 + 0] = pack_f16x2(s[4 * j], s[4 * j + 1]);
                        pn[(j >> 1) * 4 + (j & 1) * 2 + 1] = pack_f16x2(s[4 * j + 2], s[4 * j + 3]);
                    }
                    cA = cB = 1.0f;
                    lA += s[0];
                } else {
                    wg_softmax(s, pn, mA, mB, lA, lB, cA, cB);
                }
                wgmma_wait<0>(); /* P V of the tile before */
                fence_f(o, 64);
                fence_u(pc, 32);
                mbar_arrive(barE + 8 * sp);
                if (!SKIP || __any_sync(0xffffffffu, cA != 1.0f || cB != 1.0f)) wg_rescale(o, cA, cB);
            };
            auto last = [&](uint32_t *pc) {
                const uint32_t gi = gt + nkv - 1;
                const int sp = (int)(gi % ST);
                fence_f(o, 64);
                fence_u(pc, 32);
                mbar_wait(barV + 8 * sp, (gi / ST) & 1);
                turn_wait();
                wg_pv(o, pc, sbase + L::V + sp * KVB);
                turn_give();
                wgmma_wait<0>();
                fence_f(o, 64);
                fence_u(pc, 32);
                mbar_arrive(barE + 8 * sp);
            };
            int it = 1;
            for (; it + 1 < nkv; it += 2) {
                step(it, pa, pb);
                step(it + 1, pb, pa);
            }
            if (it < nkv) {
                step(it, pa, pb);
                last(pb);
            } else {
                last(pa);
            }
            gt += nkv;
        }
        /* row sums over the quad, normalise, store */
#pragma unroll
        for (int o2 = 1; o2 <= 2; o2 <<= 1) {
            lA += __shfl_xor_sync(0xffffffffu, lA, o2);
            lB += __shfl_xor_sync(0xffffffffu, lB, o2);
        }
        const float nA = lA > 0.0f ? 1.0f / lA : 0.0f, nB = lB > 0.0f ? 1.0f / lB : 0.0f;
        float *const oa = out + ((size_t)(w.r0 + iA) * n_heads + hw + hq) * HD + c2;
        float *const ob = out + ((size_t)(w.r0 + iB) * n_heads + hw + hq) * HD + c2;
#pragma unroll
        for (int j = 0; j < HD / 8; j++) {
            if (iA < w.nrows) *(float2 *)(oa + 8 * j) = make_float2(o[4 * j] * nA, o[4 * j + 1] * nA);
            if (iB < w.nrows) *(float2 *)(ob + 8 * j) = make_float2(o[4 * j + 2] * nB, o[4 * j + 3] * nB);
        }
    }
    if constexpr (PP)
        if (cw == 0) turn_wait(); /* take warpgroup 1's last hand-over: no arrival left pending */
#endif
}

/* ---- unit checks of the pieces ------------------------------------------ */

/* One warpgroup: Q [64][128], K and V [128][128] (row-major f16) stored
 * swizzled by plain stores; S = Q K^T (f32 [64][128]) and O = f16(S) V. */
__global__ void __launch_bounds__(128) unit_mma(float *S, float *O, const __half *Qh, const __half *Kh,
                                                const __half *Vh) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
    extern __shared__ uint8_t smraw[];
    const uint32_t raw = smem_u32(smraw), sbase = (raw + 1023) & ~1023u;
    uint8_t *const sm = smraw + (sbase - raw);
    const int tid = threadIdx.x;
    for (int i = tid; i < BM * HD; i += 128) {
        const int r = i / HD, d = i % HD;
        *(__half *)(sm + (d >> 6) * QSUB + sw128(r, d & 63)) = Qh[i];
    }
    for (int i = tid; i < BN * HD; i += 128) {
        const int r = i / HD, d = i % HD;
        *(__half *)(sm + QB + (d >> 6) * SUB + sw128(r, d & 63)) = Kh[i];
        *(__half *)(sm + QB + KVB + (d >> 6) * SUB + sw128(r, d & 63)) = Vh[i];
    }
    fence_proxy_async();
    __syncthreads();
    const int w = tid >> 5, lane = tid & 31, g = lane >> 2, c2 = 2 * (lane & 3), rA = 16 * w + g, rB = rA + 8;
    float s[64], o[64];
#pragma unroll
    for (int i = 0; i < 64; i++) s[i] = o[i] = 0.0f;
    wg_qk(s, sbase, sbase + QB);
    wgmma_wait<0>();
    fence_f(s, 64);
    uint32_t p[32];
#pragma unroll
    for (int j = 0; j < BN / 8; j++) {
        S[rA * BN + 8 * j + c2] = s[4 * j];
        S[rA * BN + 8 * j + c2 + 1] = s[4 * j + 1];
        S[rB * BN + 8 * j + c2] = s[4 * j + 2];
        S[rB * BN + 8 * j + c2 + 1] = s[4 * j + 3];
        p[(j >> 1) * 4 + (j & 1) * 2 + 0] = pack_f16x2(s[4 * j], s[4 * j + 1]);
        p[(j >> 1) * 4 + (j & 1) * 2 + 1] = pack_f16x2(s[4 * j + 2], s[4 * j + 3]);
    }
    fence_f(o, 64);
    fence_u(p, 32);
    wg_pv(o, p, sbase + QB + KVB);
    wgmma_wait<0>();
    fence_f(o, 64);
#pragma unroll
    for (int j = 0; j < HD / 8; j++) {
        O[rA * HD + 8 * j + c2] = o[4 * j];
        O[rA * HD + 8 * j + c2 + 1] = o[4 * j + 1];
        O[rB * HD + 8 * j + c2] = o[4 * j + 2];
        O[rB * HD + 8 * j + c2 + 1] = o[4 * j + 3];
    }
#endif
}

/* The producer's copies of one K tile (positions kb .. kb + BN - 1 of kv head
 * kvh) read back unswizzled: out [BN][128] halves. */
__global__ void __launch_bounds__(128) unit_tma(const __grid_constant__ CUtensorMap tmK, __half *outk,
                                                const int32_t *table, int kb, int kvh) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
    extern __shared__ uint8_t smraw[];
    const uint32_t raw = smem_u32(smraw), sbase = (raw + 1023) & ~1023u;
    uint8_t *const sm = smraw + (sbase - raw);
    const int tid = threadIdx.x;
    const uint32_t bar = sbase + KVB;
    if (tid == 0) {
        mbar_init(bar, 1);
        asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
    }
    __syncthreads();
    if (tid < 32) {
        if (tid == 0) mbar_expect_tx(bar, KVB);
        __syncwarp();
        if (tid < 2 * (BN / CB)) {
            const int b = tid >> 1, hf = tid & 1, blk = table[kb / CB + b];
            tma_load2(sbase + hf * SUB + b * BOX, &tmK, bar, kvh * HD + hf * 64, blk * CB);
        }
    }
    mbar_wait(bar, 0);
    for (int i = tid; i < BN * HD; i += 128) {
        const int r = i / HD, d = i % HD;
        outk[i] = *(const __half *)(sm + (d >> 6) * SUB + sw128(r, d & 63));
    }
#endif
}

/* 1 when this binary's device code was built for sm_90a */
__global__ void probe_sm90a(int *ok) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
    *ok = 1;
#else
    *ok = 0;
#endif
}

/* ---- reference: one block of 128 threads per (row, head), f32 ------------ */
/* scores by a warp per position (lane: dims 4 lane .. 4 lane + 3), exact exp2,
 * P V by a thread per dim; nothing rounded but q (the contract's f16 q) */
__device__ __forceinline__ size_t ref_row(const int32_t *table, int p) { return (size_t)table[p / CB] * CB + p % CB; }

__global__ void __launch_bounds__(128) ref_attn(float *out, const float *q, const __half *kpool, const __half *vpool,
                                                const int32_t *table, const int32_t *pos, int n_heads, int n_kv,
                                                int kv_dim, float qscale) {
    extern __shared__ float rs[]; /* q [128], red [128], scores [pos + 1] */
    float *qs = rs, *red = rs + 128, *sc = rs + 256;
    const int h = blockIdx.x, t = blockIdx.y, tid = threadIdx.x, lane = tid & 31, wp = tid >> 5;
    const int kvh = h / (n_heads / n_kv), hi = pos[t];
    qs[tid] = __half2float(__float2half_rn(q[((size_t)t * n_heads + h) * HD + tid] * qscale));
    __syncthreads();
    const float q0 = qs[4 * lane], q1 = qs[4 * lane + 1], q2 = qs[4 * lane + 2], q3 = qs[4 * lane + 3];
    float mx = -INFINITY;
    for (int p = wp; p <= hi; p += 4) {
        const uint2 u = *(const uint2 *)(kpool + ref_row(table, p) * kv_dim + kvh * HD + 4 * lane);
        const float2 a = __half22float2(*(const __half2 *)&u.x), b = __half22float2(*(const __half2 *)&u.y);
        float acc = q0 * a.x + q1 * a.y + q2 * b.x + q3 * b.y;
#pragma unroll
        for (int o2 = 16; o2 > 0; o2 >>= 1) acc += __shfl_xor_sync(0xffffffffu, acc, o2);
        if (lane == 0) sc[p] = acc;
        mx = fmaxf(mx, acc);
    }
    if (lane == 0) red[wp] = mx;
    __syncthreads();
    mx = fmaxf(fmaxf(red[0], red[1]), fmaxf(red[2], red[3]));
    __syncthreads();
    float sum = 0.0f;
    for (int p = tid; p <= hi; p += 128) {
        const float e = exp2f(sc[p] - mx);
        sc[p] = e;
        sum += e;
    }
    red[tid] = sum;
    __syncthreads();
    for (int s = 64; s > 0; s >>= 1) {
        if (tid < s) red[tid] += red[tid + s];
        __syncthreads();
    }
    sum = red[0];
    const __half *vb = vpool + kvh * HD + tid;
    float a0 = 0.0f, a1 = 0.0f, a2 = 0.0f, a3 = 0.0f;
    int p = 0;
    for (; p + 3 <= hi; p += 4) {
        a0 = fmaf(sc[p], __half2float(vb[ref_row(table, p) * kv_dim]), a0);
        a1 = fmaf(sc[p + 1], __half2float(vb[ref_row(table, p + 1) * kv_dim]), a1);
        a2 = fmaf(sc[p + 2], __half2float(vb[ref_row(table, p + 2) * kv_dim]), a2);
        a3 = fmaf(sc[p + 3], __half2float(vb[ref_row(table, p + 3) * kv_dim]), a3);
    }
    for (; p <= hi; p++) a0 = fmaf(sc[p], __half2float(vb[ref_row(table, p) * kv_dim]), a0);
    out[((size_t)t * n_heads + h) * HD + tid] = ((a0 + a1) + (a2 + a3)) / sum;
}

} // namespace fwg

/* ---- host ----------------------------------------------------------------- */
namespace {

typedef CUresult (*encode_fn)(CUtensorMap *, CUtensorMapDataType, cuuint32_t, void *, const cuuint64_t *,
                              const cuuint64_t *, const cuuint32_t *, const cuuint32_t *, CUtensorMapInterleave,
                              CUtensorMapSwizzle, CUtensorMapL2promotion, CUtensorMapFloatOOBfill);

encode_fn get_encode() {
    void *fn = nullptr;
    cudaDriverEntryPointQueryResult qr;
    CK(cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &fn, 12000, cudaEnableDefault, &qr));
    if (!fn || qr != cudaDriverEntryPointSuccess) {
        fprintf(stderr, "cuTensorMapEncodeTiled not found\n");
        exit(1);
    }
    return (encode_fn)fn;
}

/* a pool [n_blocks * 16 rows][kv_dim] f16 as 2D, boxes of 16 rows x 64 dims, 128-byte swizzle */
CUtensorMap make_map(encode_fn enc, void *pool, int n_blocks, int kv_dim) {
    CUtensorMap m;
    const cuuint64_t gdim[2] = {(cuuint64_t)kv_dim, (cuuint64_t)n_blocks * fwg::CB};
    const cuuint64_t gstr[1] = {(cuuint64_t)kv_dim * 2};
    const cuuint32_t box[2] = {64, (cuuint32_t)fwg::CB}, es[2] = {1, 1};
    const CUresult r = enc(&m, CU_TENSOR_MAP_DATA_TYPE_FLOAT16, 2, pool, gdim, gstr, box, es,
                           CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B, CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
                           CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
    if (r != CUDA_SUCCESS) {
        fprintf(stderr, "cuTensorMapEncodeTiled failed: %d\n", (int)r);
        exit(1);
    }
    return m;
}

uint64_t rng_state = 0x9E3779B97F4A7C15ull;
uint32_t rng_u32() {
    rng_state ^= rng_state >> 12;
    rng_state ^= rng_state << 25;
    rng_state ^= rng_state >> 27;
    return (uint32_t)((rng_state * 0x2545F4914F6CDD1Dull) >> 32);
}
float rng_unif() { return (float)(rng_u32() >> 8) * (1.0f / 16777216.0f); } /* [0, 1) */
float rng_norm() { return (rng_unif() + rng_unif() + rng_unif() + rng_unif() - 2.0f) * 1.7320508f; }

/* wait for the device at most `limit` seconds (a deadlocked kernel ends the program, not the lease) */
void sync_or_die(const char *what, double limit = 20.0) {
    timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (;;) {
        const cudaError_t e = cudaStreamQuery(0);
        if (e == cudaSuccess) break;
        if (e != cudaErrorNotReady) {
            fprintf(stderr, "%s: %s\n", what, cudaGetErrorString(e));
            exit(1);
        }
        clock_gettime(CLOCK_MONOTONIC, &t1);
        if ((t1.tv_sec - t0.tv_sec) + 1e-9 * (t1.tv_nsec - t0.tv_nsec) > limit) {
            printf("HANG: %s did not finish in %.0f s\n", what, limit);
            fflush(stdout);
            _exit(3);
        }
    }
    CK(cudaGetLastError());
}

double rel_err(const std::vector<float> &a, const std::vector<float> &ref, size_t *bad) {
    double num = 0.0, den = 0.0;
    size_t nb = 0;
    for (size_t i = 0; i < a.size(); i++) {
        if (!(fabsf(a[i]) < INFINITY)) nb++; /* NaN (unwritten: the poison) or inf */
        const double d = (double)a[i] - ref[i];
        num += d * d;
        den += (double)ref[i] * ref[i];
    }
    *bad = nb;
    return nb ? NAN : sqrt(num / den);
}

struct row {
    int T, pos0;
    const char *name;
    double us, tf, err;
    size_t bad;
};

} // namespace

int main(int argc, char **argv) {
    using namespace fwg;
    int reps = 30;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--reps") && i + 1 < argc) reps = std::max(20, atoi(argv[++i]));
        if (!strcmp(argv[i], "--probe")) return 0; /* the binary loads on this machine */
    }
    cudaDeviceProp prop;
    CK(cudaGetDeviceProperties(&prop, 0));
    printf("device: %s, %d SMs, cc %d.%d\n", prop.name, prop.multiProcessorCount, prop.major, prop.minor);
    int *d_ok, ok = 0;
    CK(cudaMalloc(&d_ok, sizeof(int)));
    probe_sm90a<<<1, 1>>>(d_ok);
    CK(cudaMemcpy(&ok, d_ok, sizeof(int), cudaMemcpyDeviceToHost));
    if (!ok) {
        printf("built without sm_90a device code: rebuild with -gencode arch=compute_90a,code=sm_90a\n");
        return 1;
    }
    const encode_fn enc = get_encode();

    const int NH = 32, NKV = 8, KVD = NKV * HD, MAXP = 4096, NBU = MAXP / CB, NB = 2 * NBU;
    const float qscale = (float)(1.0 / sqrt((double)HD) * 1.4426950408889634);
    std::vector<__half> hk((size_t)NB * CB * KVD), hv(hk.size());
    for (size_t i = 0; i < hk.size(); i++) {
        hk[i] = __float2half(rng_norm());
        hv[i] = __float2half(rng_norm());
    }
    std::vector<int32_t> htab(NB);
    for (int i = 0; i < NB; i++) htab[i] = i;
    for (int i = NB - 1; i > 0; i--) std::swap(htab[i], htab[rng_u32() % (uint32_t)(i + 1)]);
    std::vector<float> hq((size_t)MAXP * NH * HD);
    for (auto &x : hq) x = rng_norm();

    __half *d_k, *d_v;
    float *d_q, *d_out, *d_ref;
    int32_t *d_tab, *d_pos, *d_seq;
    const size_t on = (size_t)MAXP * NH * HD;
    CK(cudaMalloc(&d_k, hk.size() * 2));
    CK(cudaMalloc(&d_v, hv.size() * 2));
    CK(cudaMalloc(&d_q, on * 4));
    CK(cudaMalloc(&d_out, on * 4));
    CK(cudaMalloc(&d_ref, on * 4));
    CK(cudaMalloc(&d_tab, NB * 4));
    CK(cudaMalloc(&d_pos, MAXP * 4));
    CK(cudaMalloc(&d_seq, MAXP * 4));
    CK(cudaMemcpy(d_k, hk.data(), hk.size() * 2, cudaMemcpyHostToDevice));
    CK(cudaMemcpy(d_v, hv.data(), hv.size() * 2, cudaMemcpyHostToDevice));
    CK(cudaMemcpy(d_q, hq.data(), on * 4, cudaMemcpyHostToDevice));
    CK(cudaMemcpy(d_tab, htab.data(), NB * 4, cudaMemcpyHostToDevice));
    CK(cudaMemset(d_seq, 0, MAXP * 4));
    const CUtensorMap mapK = make_map(enc, d_k, NB, KVD), mapV = make_map(enc, d_v, NB, KVD);

    /* unit 1: the tensor copies and the swizzle */
    {
        const int kb = 256, kvh = 3;
        __half *d_t;
        CK(cudaMalloc(&d_t, BN * HD * 2));
        CK(cudaFuncSetAttribute(unit_tma, cudaFuncAttributeMaxDynamicSharedMemorySize, KVB + 2048));
        unit_tma<<<1, 128, KVB + 2048>>>(mapK, d_t, d_tab, kb, kvh);
        sync_or_die("unit_tma", 5.0);
        std::vector<__half> ht(BN * HD);
        CK(cudaMemcpy(ht.data(), d_t, BN * HD * 2, cudaMemcpyDeviceToHost));
        int bad = 0;
        for (int r = 0; r < BN; r++)
            for (int d = 0; d < HD; d++) {
                const size_t src = ((size_t)htab[(kb + r) / CB] * CB + (kb + r) % CB) * KVD + kvh * HD + d;
                bad += memcmp(&ht[r * HD + d], &hk[src], 2) != 0;
            }
        printf("unit tma: %d of %d halves differ\n", bad, BN * HD);
        CK(cudaFree(d_t));
    }
    /* unit 2: S = Q K^T (ss) and O = f16(S) V (rs, V transposed) */
    {
        std::vector<__half> qh(BM * HD), kh(BN * HD), vh(BN * HD);
        for (auto &x : qh) x = __float2half(rng_unif() * 2 - 1);
        for (auto &x : kh) x = __float2half(rng_unif() * 2 - 1);
        for (auto &x : vh) x = __float2half(rng_unif() * 2 - 1);
        __half *dq, *dk, *dv;
        float *dS, *dO;
        CK(cudaMalloc(&dq, BM * HD * 2));
        CK(cudaMalloc(&dk, BN * HD * 2));
        CK(cudaMalloc(&dv, BN * HD * 2));
        CK(cudaMalloc(&dS, BM * BN * 4));
        CK(cudaMalloc(&dO, BM * HD * 4));
        CK(cudaMemcpy(dq, qh.data(), BM * HD * 2, cudaMemcpyHostToDevice));
        CK(cudaMemcpy(dk, kh.data(), BN * HD * 2, cudaMemcpyHostToDevice));
        CK(cudaMemcpy(dv, vh.data(), BN * HD * 2, cudaMemcpyHostToDevice));
        const int smem = QB + 2 * KVB + 1024;
        CK(cudaFuncSetAttribute(unit_mma, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
        unit_mma<<<1, 128, smem>>>(dS, dO, dq, dk, dv);
        sync_or_die("unit_mma", 5.0);
        std::vector<float> S(BM * BN), O(BM * HD);
        CK(cudaMemcpy(S.data(), dS, BM * BN * 4, cudaMemcpyDeviceToHost));
        CK(cudaMemcpy(O.data(), dO, BM * HD * 4, cudaMemcpyDeviceToHost));
        double n1 = 0, d1 = 0, n2 = 0, d2 = 0;
        for (int r = 0; r < BM; r++)
            for (int n = 0; n < BN; n++) {
                double a = 0;
                for (int d = 0; d < HD; d++) a += (double)__half2float(qh[r * HD + d]) * __half2float(kh[n * HD + d]);
                n1 += (S[r * BN + n] - a) * (S[r * BN + n] - a);
                d1 += a * a;
            }
        for (int r = 0; r < BM; r++)
            for (int d = 0; d < HD; d++) {
                double a = 0;
                for (int n = 0; n < BN; n++)
                    a += (double)__half2float(__float2half(S[r * BN + n])) * __half2float(vh[n * HD + d]);
                n2 += (O[r * HD + d] - a) * (O[r * HD + d] - a);
                d2 += a * a;
            }
        printf("unit wgmma: S = Q K^T rel err %.2e, O = P V rel err %.2e\n", sqrt(n1 / d1), sqrt(n2 / d2));
        CK(cudaFree(dq));
        CK(cudaFree(dk));
        CK(cudaFree(dv));
        CK(cudaFree(dS));
        CK(cudaFree(dO));
    }
    fflush(stdout);

    /* the variants */
    struct variant {
        const char *name;
        void (*k)(CUtensorMap, CUtensorMap, float *, const float *, const int32_t *, const int32_t *, int, int, int,
                  float, int);
        int smem;
        bool persist; /* grid: the SM count (else one item a block) */
        bool pack;    /* items of 32 rows x 4 heads (else 64 rows x 2 heads) */
        bool check;   /* false: a timing probe that computes something else */
    };
    const variant V[] = {
        {"v1 ST2", fa_wg_kernel<2, false, false, false>, lay<2>::BYTES, false, false, true},
        {"v9 pipe ST3 pers pp pk", fa_wg_kernel<3, true, true, true>, lay<3>::BYTES, true, true, true},
        {"v10 ST3 pers pack", fa_wg_kernel<3, false, false, true>, lay<3>::BYTES, true, true, true},
        {"v14 v9 + skip", fa_wg_kernel<3, true, true, true, true>, lay<3>::BYTES, true, true, true},
        {"v15 v10 + skip", fa_wg_kernel<3, false, false, true, true>, lay<3>::BYTES, true, true, true},
        {"probe v9 no softmax", fa_wg_kernel<3, true, true, true, false, true>, lay<3>::BYTES, true, true, false},
    };
    const int NV = (int)(sizeof(V) / sizeof(V[0]));
    for (int v = 0; v < NV; v++) {
        cudaFuncAttributes fa;
        CK(cudaFuncSetAttribute(V[v].k, cudaFuncAttributeMaxDynamicSharedMemorySize, V[v].smem));
        CK(cudaFuncGetAttributes(&fa, V[v].k));
        printf("%-22s regs %d, local %zu B, smem %d B\n", V[v].name, fa.numRegs, fa.localSizeBytes, V[v].smem);
    }
    cudaError_t lerr = cudaSuccess;
    cu_launch L = {0, prop.multiProcessorCount, 0, 0, &lerr};
    cu_kv kv = {};
    kv.k = d_k;
    kv.v = d_v;
    kv.table = d_tab;
    kv.block_size = CB;
    kv.max_blocks = NB;
    kv.kv_dim = KVD;
    kv.f16 = 1;

    const int cfg[3][2] = {{2048, 0}, {512, 1536}, {4096, 0}};
    std::vector<row> rows;
    cudaEvent_t e0, e1;
    CK(cudaEventCreate(&e0));
    CK(cudaEventCreate(&e1));
    for (int c = 0; c < 3; c++) {
        const int T = cfg[c][0], pos0 = cfg[c][1];
        std::vector<int32_t> hp(T);
        double flops = 0;
        for (int t = 0; t < T; t++) {
            hp[t] = pos0 + t;
            flops += 4.0 * HD * NH * (pos0 + t + 1);
        }
        CK(cudaMemcpy(d_pos, hp.data(), T * 4, cudaMemcpyHostToDevice));
        const size_t n = (size_t)T * NH * HD;
        ref_attn<<<dim3(NH, T), 128, (256 + MAXP) * 4>>>(d_ref, d_q, d_k, d_v, d_tab, d_pos, NH, NKV, KVD, qscale);
        sync_or_die("ref_attn", 60.0);
        std::vector<float> href(n), hout(n);
        CK(cudaMemcpy(href.data(), d_ref, n * 4, cudaMemcpyDeviceToHost));
        for (int v = -1; v < NV; v++) {
            auto launch = [&]() {
                if (v < 0) {
                    cu_attention_flash(&L, d_out, d_q, T, &kv, d_seq, d_pos, NH, NKV, HD, qscale, 0, XPREP_NONE,
                                       nullptr);
                } else {
                    const int RH = V[v].pack ? 32 : BM, HI = V[v].pack ? 2 * NCW : NCW;
                    const int n_items = (NH / HI) * ((T + RH - 1) / RH);
                    const int grid = V[v].persist ? std::min(n_items, prop.multiProcessorCount) : n_items;
                    V[v].k<<<grid, NTH, V[v].smem>>>(mapK, mapV, d_out, d_q, d_tab, d_pos, T, NH, NKV, qscale,
                                                     n_items);
                }
            };
            const char *name = v < 0 ? "cur (fa2 mma.sync)" : V[v].name;
            const bool check = v < 0 || V[v].check;
            CK(cudaMemset(d_out, 0xFF, n * 4)); /* NaN */
            launch();
            sync_or_die(name);
            if (lerr != cudaSuccess) {
                fprintf(stderr, "%s: %s\n", name, cudaGetErrorString(lerr));
                exit(1);
            }
            CK(cudaMemcpy(hout.data(), d_out, n * 4, cudaMemcpyDeviceToHost));
            size_t bad;
            const double err = rel_err(hout, href, &bad);
            std::vector<float> ts;
            if (!check || (bad == 0 && err < 4e-3)) {
                for (int i = 0; i < 3; i++) launch();
                sync_or_die(name);
                for (int i = 0; i < reps; i++) {
                    CK(cudaEventRecord(e0));
                    launch();
                    CK(cudaEventRecord(e1));
                    CK(cudaEventSynchronize(e1));
                    float ms;
                    CK(cudaEventElapsedTime(&ms, e0, e1));
                    ts.push_back(ms);
                }
                CK(cudaGetLastError());
                std::sort(ts.begin(), ts.end());
            }
            const double us = ts.empty() ? NAN : 1e3 * ts[ts.size() / 2];
            rows.push_back({T, pos0, name, us, flops / (us * 1e-6) / 1e12, err, bad});
            printf("T %4d pos0 %4d  %-22s rel err %.2e  bad %zu  %8.1f us  %6.1f TFLOP/s  (min %.1f max %.1f)\n", T,
                   pos0, name, err, bad, us, flops / (us * 1e-6) / 1e12, ts.empty() ? NAN : 1e3 * ts.front(),
                   ts.empty() ? NAN : 1e3 * ts.back());
            fflush(stdout);
        }
    }
    printf("\n%-6s %-5s %-22s %10s %9s %9s %s\n", "T", "pos0", "kernel", "us", "TFLOP/s", "rel err", "vs cur");
    double cur_us = NAN;
    for (const row &r : rows) {
        if (!strncmp(r.name, "cur", 3)) cur_us = r.us;
        const bool probe = !strncmp(r.name, "probe", 5);
        printf("%-6d %-5d %-22s %10.1f %9.1f %9.2e %5.2fx%s\n", r.T, r.pos0, r.name, r.us, r.tf, r.err, cur_us / r.us,
               probe ? "  (timing only)" : r.bad || !(r.err < 4e-3) ? "  FAIL" : "");
    }
    return 0;
}
