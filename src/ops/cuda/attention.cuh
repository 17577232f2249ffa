/* attention.cuh - what the two attention kernels share: which rows the
 * tensor-core prefill kernel takes (the decision is made on the device, the
 * same way by both kernels, so each row is computed exactly once). */
#ifndef HEARTH_OPS_CUDA_ATTENTION_CUH
#define HEARTH_OPS_CUDA_ATTENTION_CUH

#include "ops/cuda/cuda_internal.cuh"

#include <limits.h>

/* ---- tensor-core and async-copy pieces of the prefill kernels ----------- */

__device__ __forceinline__ uint32_t pack_h2(float a, float b) {
    __half2 h = __floats2half2_rn(a, b);
    return *(uint32_t *)&h;
}

__device__ __forceinline__ void ldsm_x4_trans(uint32_t *r, const void *p) {
    unsigned s = (unsigned)__cvta_generic_to_shared(p);
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(s));
}

/* 2^x; -inf gives +0 */
__device__ __forceinline__ float f_ex2(float x) {
    float y;
    asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
    return y;
}


/* Two output elements e, e + 1 of a row, and their bf16 / f16 copy for the
 * o projection (prep_kind; as xprep.cu rounds them) when asked. */
__device__ __forceinline__ void flash_store(float *out, int prep_kind, void *prep, size_t e, float2 v) {
    *(float2 *)(out + e) = v;
    if (prep_kind == XPREP_BF16) *(__nv_bfloat162 *)((__nv_bfloat16 *)prep + e) = __floats2bfloat162_rn(v.x, v.y);
    else if (prep_kind == XPREP_F16) *(__half2 *)((__half *)prep + e) = __floats2half2_rn(v.x, v.y);
}

/* Rows [tile*bm, min(T, tile*bm + bm)) all belong to one sequence. Every
 * thread of the block must call it (it ends in a barrier): each thread loads
 * a few seq entries at once, so a block that only decides to skip costs one
 * load latency, not bm dependent loads. */
__device__ __forceinline__ bool tile_uniform(const int32_t *seq, int T, int tile, int bm) {
    const int r0 = tile * bm, r1 = min(T, r0 + bm);
    const int tid = threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z);
    const int nt = blockDim.x * blockDim.y * blockDim.z;
    const int s0 = seq[r0];
    int same = 1;
    for (int r = r0 + 1 + tid; r < r1; r += nt) same &= seq[r] == s0;
    return __syncthreads_and(same) != 0;
}

/* 16 stored bytes (8 f16, 4 f32 or 16 e4m3 elements) as floats; the pointer
 * only picks the element type */
__device__ __forceinline__ void widen16(const uint4 &r, const __half *, float *f) {
    const __half2 *h = (const __half2 *)&r;
#pragma unroll
    for (int i = 0; i < 4; i++) {
        float2 x = __half22float2(h[i]);
        f[2 * i] = x.x;
        f[2 * i + 1] = x.y;
    }
}
__device__ __forceinline__ void widen16(const uint4 &r, const float *, float *f) {
    f[0] = __uint_as_float(r.x), f[1] = __uint_as_float(r.y), f[2] = __uint_as_float(r.z), f[3] = __uint_as_float(r.w);
}
__device__ __forceinline__ void widen16(const uint4 &r, const __nv_fp8_e4m3 *, float *f) {
    const uint32_t w[4] = {r.x, r.y, r.z, r.w};
#pragma unroll
    for (int i = 0; i < 8; i++) {
        float2 x = e4m3x2_to_float2((uint16_t)(w[i / 2] >> (16 * (i % 2))));
        f[2 * i] = x.x;
        f[2 * i + 1] = x.y;
    }
}

/* Scores of one 16-byte piece of a K row (elements d0 .. d0 + 16 / sizeof(E)
 * - 1) against the group's query heads g < Gb (of at most G), q in shared
 * memory: sc[g] += q_s[g][d0 ..] . piece. */
template <int G, int HD, typename E>
__device__ __forceinline__ void q_dot16(float *sc, const uint4 &piece, const float (*q_s)[HD], int d0, int Gb) {
    constexpr int EP = 16 / (int)sizeof(E);
    float kf[EP];
    widen16(piece, (const E *)nullptr, kf);
#pragma unroll
    for (int g = 0; g < G; g++) {
        if (g < Gb) {
            float s = sc[g];
#pragma unroll
            for (int u = 0; u < EP; u++) s = fmaf(q_s[g][d0 + u], kf[u], s);
            sc[g] = s;
        }
    }
}

/* One warp's online-softmax update of one head over a tile of n <= 64
 * scores p[0..64) (natural-log units): p becomes exp(s - m_new) (0 past n);
 * lane 0 writes the head's new max *m, sum *l and the factor *c that
 * rescales its running output. */
__device__ __forceinline__ void warp_tile_softmax(float *p, int n, float *m, float *l, float *c, int lane) {
    const float s0 = lane < n ? p[lane] : -INFINITY, s1 = lane + 32 < n ? p[lane + 32] : -INFINITY;
    float mx = fmaxf(s0, s1);
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, o));
    const float m_old = *m, m_new = fmaxf(m_old, mx);
    const float e0 = lane < n ? expf(s0 - m_new) : 0.0f, e1 = lane + 32 < n ? expf(s1 - m_new) : 0.0f;
    p[lane] = e0;
    p[lane + 32] = e1;
    float sum = e0 + e1;
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) sum += __shfl_xor_sync(0xffffffffu, sum, o);
    if (lane == 0) {
        const float cf = m_old == -INFINITY ? 0.0f : expf(m_old - m_new);
        *c = cf;
        *l = *l * cf + sum;
        *m = m_new;
    }
}

/* The two rows of an m16 mma tile that a thread holds (A: tile row ra, B:
 * ra + 8) of a tile of nrows rows from r0: whether each exists, the
 * positions [lo, hi] each attends (a row past the tile's end: lo = INT_MAX,
 * hi = -1, every position masked), and over the warp the smallest and
 * largest lo and hi (a key tile is skipped when it lies outside every row,
 * masked only where it crosses a bound). */
struct mma_row_bounds {
    bool vA, vB;
    int loA, hiA, loB, hiB;
    int lo_min, lo_max, hi_min, hi_max; /* over the warp */
};
__device__ __forceinline__ mma_row_bounds mma_rows_bounds(const int32_t *pos, int r0, int nrows, int ra, int window) {
    mma_row_bounds b;
    const int rb = ra + 8;
    b.vA = ra < nrows;
    b.vB = rb < nrows;
    b.hiA = b.vA ? pos[r0 + ra] : -1;
    b.hiB = b.vB ? pos[r0 + rb] : -1;
    b.loA = b.vA ? (window > 0 ? max(0, b.hiA - window + 1) : 0) : INT_MAX;
    b.loB = b.vB ? (window > 0 ? max(0, b.hiB - window + 1) : 0) : INT_MAX;
    int lo_min = min(b.loA, b.loB), lo_max = max(b.loA, b.loB), hi_min = min(b.hiA, b.hiB), hi_max = max(b.hiA, b.hiB);
#pragma unroll
    for (int o2 = 4; o2 <= 16; o2 <<= 1) {
        lo_min = min(lo_min, __shfl_xor_sync(0xffffffffu, lo_min, o2));
        lo_max = max(lo_max, __shfl_xor_sync(0xffffffffu, lo_max, o2));
        hi_min = min(hi_min, __shfl_xor_sync(0xffffffffu, hi_min, o2));
        hi_max = max(hi_max, __shfl_xor_sync(0xffffffffu, hi_max, o2));
    }
    b.lo_min = lo_min;
    b.lo_max = lo_max;
    b.hi_min = hi_min;
    b.hi_max = hi_max;
    return b;
}

/* One online-softmax step of the two rows of an m16 mma tile a thread holds
 * (A: row lane / 4, B: row lane / 4 + 8) over NJ n-tiles of scores s (log2
 * units, -inf where masked): P as f16 A fragments pf[NJ / 2][4] for the
 * P V product, the rows' running max m and this thread's share of their
 * sums l updated, the NDT output tiles o rescaled. Rows with nothing seen
 * yet keep m = -inf. */
template <int NJ, int NDT>
__device__ __forceinline__ void mma_rows_softmax(const float (*s)[4], uint32_t (*pf)[4], float (*o)[4], float &mA,
                                                 float &mB, float &lA, float &lB) {
    float mxA = -INFINITY, mxB = -INFINITY;
#pragma unroll
    for (int j = 0; j < NJ; j++) {
        mxA = fmaxf(mxA, fmaxf(s[j][0], s[j][1]));
        mxB = fmaxf(mxB, fmaxf(s[j][2], s[j][3]));
    }
#pragma unroll
    for (int o2 = 1; o2 <= 2; o2 <<= 1) {
        mxA = fmaxf(mxA, __shfl_xor_sync(0xffffffffu, mxA, o2));
        mxB = fmaxf(mxB, __shfl_xor_sync(0xffffffffu, mxB, o2));
    }
    const float mnA = fmaxf(mA, mxA), mnB = fmaxf(mB, mxB);
    /* a row with nothing seen yet keeps m = -inf: subtract 0, not -inf */
    const float uA = mnA == -INFINITY ? 0.0f : mnA, uB = mnB == -INFINITY ? 0.0f : mnB;
    const float cA = f_ex2(mA - uA), cB = f_ex2(mB - uB);
    mA = mnA;
    mB = mnB;
    float sA = 0.0f, sB = 0.0f;
#pragma unroll
    for (int j = 0; j < NJ; j++) {
        const float p0 = f_ex2(s[j][0] - uA), p1 = f_ex2(s[j][1] - uA);
        const float p2 = f_ex2(s[j][2] - uB), p3 = f_ex2(s[j][3] - uB);
        sA += p0 + p1;
        sB += p2 + p3;
        pf[j >> 1][(j & 1) * 2 + 0] = pack_h2(p0, p1);
        pf[j >> 1][(j & 1) * 2 + 1] = pack_h2(p2, p3);
    }
    lA = lA * cA + sA;
    lB = lB * cB + sB;
#pragma unroll
    for (int jd = 0; jd < NDT; jd++) {
        o[jd][0] *= cA;
        o[jd][1] *= cA;
        o[jd][2] *= cB;
        o[jd][3] *= cB;
    }
}

/* Element d of split `split`'s partial for (row, head) th: the split's
 * unnormalised output o, then (by d == 0) its softmax max m (natural log
 * units) and sum l; hd + 2 floats per partial, S per (row, head). The
 * combine kernel and the decode kernel's merge read this layout. */
__device__ __forceinline__ void part_store(float *part, size_t th, int S, int split, int hd, int d, float o, float m,
                                           float l) {
    float *pp = part + (th * S + split) * (size_t)(hd + 2);
    pp[d] = o;
    if (d == 0) {
        pp[hd] = m;
        pp[hd + 1] = l;
    }
}

/* Flash-decoding splits: a row of len positions is cut into at most S
 * splits of at least minpos positions each (the combine recomputes it). */
__device__ __forceinline__ int split_count(int S, int len, int minpos) {
    return max(1, min(S, (len + minpos - 1) / minpos));
}

/* What block (split, kv head x query-head group, row) of a flash-decoding
 * grid computes: query heads [h0, h0 + Gb) of kv head kvh (groups of at
 * most maxg heads), over positions [a, e) of row t, one of the row's Se
 * splits. False when the block has nothing to do: its row belongs to a
 * uniform tile that the prefill kernel takes (skip_bm > 0), or its split is
 * past Se. Every thread of the block calls it (tile_uniform's barrier). */
struct dec_slice {
    int t, kvh, h0, Gb, Se, a, e;
};
__device__ __forceinline__ bool dec_slice_of(dec_slice &d, const int32_t *seq, const int32_t *pos, int T,
                                             int n_heads, int n_kv, int maxg, int S, int minpos, int window,
                                             int skip_bm) {
    const int split = blockIdx.x;
    const int G = n_heads / n_kv, ngrp = (G + maxg - 1) / maxg, grp = blockIdx.y % ngrp;
    d.t = blockIdx.z;
    d.kvh = blockIdx.y / ngrp;
    d.h0 = d.kvh * G + grp * maxg;
    d.Gb = min(maxg, G - grp * maxg);
    if (skip_bm > 0 && tile_uniform(seq, T, d.t / skip_bm, skip_bm)) return false;
    const int p_hi = pos[d.t], p_lo = window > 0 ? max(0, p_hi - window + 1) : 0;
    const int len = p_hi - p_lo + 1;
    d.Se = split_count(S, len, minpos);
    if (split >= d.Se) return false;
    const int chunk = (len + d.Se - 1) / d.Se;
    d.a = p_lo + split * chunk;
    d.e = min(p_hi + 1, d.a + chunk);
    return true;
}

/* The positions a tile's rows [r0, r0 + nrows) attend to: [*lo, *hi], the
 * smallest window start and the largest position (every row has its own).
 * Every thread of the block calls it (barriers inside); s_lo and s_hi are
 * the kernel's shared scratch. */
__device__ __forceinline__ void tile_kv_range(const int32_t *pos, int r0, int nrows, int window, int *s_lo, int *s_hi,
                                              int *lo, int *hi) {
    const int tid = threadIdx.x;
    if (tid == 0) {
        *s_lo = INT_MAX;
        *s_hi = -1;
    }
    __syncthreads();
    if (tid < nrows) {
        const int h = pos[r0 + tid], l = window > 0 ? max(0, h - window + 1) : 0;
        atomicMin(s_lo, l);
        atomicMax(s_hi, h);
    }
    __syncthreads();
    *lo = *s_lo;
    *hi = *s_hi;
}

/* A raw e4m3 tile of BN positions (rows RLD bytes apart) widened exactly
 * into an f16 tile (rows LD halves apart): the V operand of the flash
 * prefill kernel with an e4m3 cache (attention_flash.cu; the decode rows
 * build theirs in registers, attention_rows_tc.cu). NT threads, each a 16-byte chunk of a row at a time;
 * UNROLL iterations of a thread's loop unrolled (fewer where registers are
 * short). */
template <int HD, int BN, int NT, int RLD, int LD, int UNROLL>
__device__ __forceinline__ void e4m3_tile_to_half(__half *vd, const uint8_t *raw, int tid) {
    constexpr int CPR = HD / 16, N = BN * CPR;
    static_assert(N % NT == 0, "chunks per thread");
#pragma unroll UNROLL
    for (int it = 0; it < N / NT; it++) {
        const int x = tid + it * NT, i = x / CPR, c = (x % CPR) * 16;
        const uint4 u = *(const uint4 *)(raw + i * RLD + c);
        __half *dst = vd + i * LD + c;
        *(uint4 *)dst = e4m3x8_to_half8(make_uint2(u.x, u.y));
        *(uint4 *)(dst + 8) = e4m3x8_to_half8(make_uint2(u.z, u.w));
    }
}

/* The tensor-core kernel for head_dim 64 or 128: one block per (64-row tile,
 * query head); tiles whose rows span several sequences are left untouched.
 * prep_kind XPREP_BF16 / XPREP_F16: the kernel may also write that copy of
 * out into prep (the o projection's input); returns 1 when it did. */
int cu_attention_prefill(const cu_launch *L, float *out, const float *q, int T, const cu_kv *kv, const int32_t *seq,
                         const int32_t *pos, int n_heads, int n_kv_heads, int head_dim, float scale, int window,
                         int prep_kind, void *prep, float *part, size_t part_floats);

/* attention_flash.cu: the flash-attention 2 kernel for f16 and e4m3 caches,
 * head_dim 64 or 128 and a power-of-two block size (cu_attention_flash_fits),
 * the same tiles (64 rows of one sequence) as the kernels of
 * attention_prefill.cu; qscale = scale * log2(e). With prep_kind bf16 / f16
 * it writes that copy of out too and returns 1. */
int cu_attention_flash_fits(const cu_kv *kv, int head_dim);
int cu_attention_flash(const cu_launch *L, float *out, const float *q, int T, const cu_kv *kv, const int32_t *seq,
                       const int32_t *pos, int n_heads, int n_kv_heads, int head_dim, float qscale, int window,
                       int prep_kind, void *prep);

/* attention_flash_wg.cu: the Hopper (sm_90a, wgmma + tensor copies) kernel for
 * caches of 16-position blocks without a window: f16 at head_dim 64 or 128,
 * e4m3 at head_dim 128 with an even number of query heads per kv head, on a
 * device this process has its code for (cu_attention_flash_wg_fits;
 * HEARTH_ATTN_WG=0: never). The same tiles
 * and contract as cu_attention_flash. Returns 0 when it could not run (no
 * tensor map for the cache: the caller runs cu_attention_flash); *prepped:
 * whether it wrote the bf16 / f16 copy. With kv->splits > 1 and fewer items
 * than SMs, each item's positions are cut in parts whose (O, max, sum) go to
 * part (part_floats floats) and a second kernel merges them. */
int cu_attention_flash_wg_fits(const cu_launch *L, const cu_kv *kv, int head_dim, int n_heads, int n_kv_heads,
                               int window);
int cu_attention_flash_wg(const cu_launch *L, float *out, const float *q, int T, const cu_kv *kv, const int32_t *seq,
                          const int32_t *pos, int n_heads, int n_kv_heads, int head_dim, float qscale, int window,
                          int prep_kind, void *prep, float *part, size_t part_floats, int *prepped);

/* Flash-decoding over tiles of positions for batches of rows (attention_rows.cu):
 * the same grid, split rule (at least minpos positions a split), partial
 * layout and skip rule as the per-warp decode kernel of attention.cu. */
int cu_attention_rows_fits(int head_dim, const cu_kv *kv);
void cu_attention_rows(const cu_launch *L, dim3 grid, float *out, const float *q, const cu_kv *kv, const int32_t *seq,
                       const int32_t *pos, int T, int n_heads, int n_kv, int head_dim, float scale, int window, int S,
                       int minpos, float *part, int skip_bm);

/* attention_rows_tc.cu: the same blocks as cu_attention_rows on tensor
 * cores (f16 operands: the prefill kernels' contract), for f16 and e4m3
 * caches, head_dim 64 or 128, a power-of-two block size. */
int cu_attention_rows_tc_fits(int head_dim, const cu_kv *kv);
void cu_attention_rows_tc(const cu_launch *L, dim3 grid, float *out, const float *q, const cu_kv *kv,
                          const int32_t *seq, const int32_t *pos, int T, int n_heads, int n_kv, int head_dim,
                          float scale, int window, int S, int minpos, float *part, int skip_bm);

/* Flash-decoding for a few rows, splits merged in the same launch
 * (attention_decode.cu); the grid and partial layout of the per-warp kernel.
 * Writes the prepared copy of kind prep_kind beside out (XPREP_Q8K only when
 * a kv head's group of query heads is whole 256-blocks); returns the kind
 * written (XPREP_NONE: none). */
int cu_attention_decode_fits(int head_dim, const cu_kv *kv, int T, int n_heads, int n_kv, int S, int n_cnt);
int cu_attention_decode(const cu_launch *L, dim3 grid, float *out, const float *q, const cu_kv *kv,
                        const int32_t *seq, const int32_t *pos, int T, int n_heads, int n_kv, int head_dim,
                        float scale, int window, int S, int cluster, float *part, int *cnt, int skip_bm,
                        int prep_kind, void *prep);

#endif
