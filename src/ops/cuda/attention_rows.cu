/* attention_rows.cu - flash-decoding for batches of decode rows, tiled, on
 * CUDA cores: the path of f32 caches (f16 and e4m3 ones take the
 * tensor-core kernel of attention_rows_tc.cu, which dispatches from here).
 *
 * The per-warp kernel in attention.cu runs one online-softmax update per
 * position and query head (a shuffle reduction and two exponentials each):
 * right for one row, instruction-bound for hundreds of rows over long
 * contexts. Here a block (split, kv head x query-head group, row) walks its
 * positions in tiles of 64: (1) two threads per position compute the scores
 * of every query head of the group from coalesced 16-byte reads of its K
 * row (q in shared memory, read as broadcasts); (2) a warp per head does the
 * tile's softmax update once; (3) each thread accumulates 8 dimensions of
 * P x V for the group's heads over every (128/(hd/8))-th position of the
 * tile from 16-byte V reads, summed across threads at the end. The output
 * and the split partials have the layout of the per-warp kernel, so the same
 * combine kernel merges them. head_dim 64 or 128, kv_dim % 8 == 0. Caches
 * of f32, f16 or e4m3 elements: 8 elements a load (32, 16 or 8 bytes), e4m3
 * widened exactly by cvt.rn.f16x2.e4m3x2. */
#include "ops/cuda/attention.cuh"

#include <stdlib.h>

#define AR_THREADS 128
#define AR_TP 64   /* positions per tile: two threads per position in the score pass */
#define AR_MAXG 8  /* query heads per block (the per-warp kernel's AD_MAXG) */

/* 8 consecutive cache elements as f32 (16- or 32-byte aligned reads). */
__device__ __forceinline__ void ld8(const __half *p, float *f) {
    const uint4 r = *(const uint4 *)p; /* one 16-byte load, then widened */
    widen16(r, p, f);
}
__device__ __forceinline__ void ld8(const float *p, float *f) {
    float4 a = *(const float4 *)p, b = *(const float4 *)(p + 4);
    f[0] = a.x, f[1] = a.y, f[2] = a.z, f[3] = a.w, f[4] = b.x, f[5] = b.y, f[6] = b.z, f[7] = b.w;
}
__device__ __forceinline__ void ld8(const __nv_fp8_e4m3 *p, float *f) { e4m3_ld<8>(p, f); }

/* KC (the default): the score pass reads K coalesced, two threads per
 * position, each every other 16-byte piece of the row (32 contiguous bytes
 * a position per load), for every head of the group, one shuffle summing
 * the halves. !KC (HEARTH_ATTN_ROWS=1, v1): a thread per position reads its
 * whole row, 16 bytes at a time, for half the heads: each load of a warp
 * touches 32 rows. */
template <int HD, int GB, typename E, bool KC>
__global__ void __launch_bounds__(AR_THREADS)
    attn_rows_kernel(float *__restrict__ out, const float *__restrict__ q, cu_kv kv, const int32_t *__restrict__ seq,
                     const int32_t *__restrict__ pos, int T, int n_heads, int n_kv, float scale, int window, int S,
                     int minpos, float *__restrict__ part, int skip_bm) {
    pdl_wait();
    constexpr int VG = HD / 8;          /* V pass: groups of 8 dimensions ... */
    constexpr int PG = AR_THREADS / VG; /* ... times groups of positions (j = pg, pg + PG, ...) */
    /* loads a thread has in flight in the K and V loops: 4 of 16 bytes (f16),
     * 8 of 8 bytes (e4m3): 64 bytes either way */
    constexpr int UNR = sizeof(E) == 1 ? 8 : 4;
    __shared__ __align__(16) float q_s[AR_MAXG][HD];
    __shared__ float p_s[AR_MAXG][AR_TP];
    __shared__ size_t off_s[AR_TP];
    __shared__ float m_s[AR_MAXG], l_s[AR_MAXG], c_s[AR_MAXG];
    const int split = blockIdx.x, tid = threadIdx.x;
    dec_slice d;
    if (!dec_slice_of(d, seq, pos, T, n_heads, n_kv, AR_MAXG, S, minpos, window, skip_bm)) return;
    const int t = d.t, kvh = d.kvh, h0 = d.h0, Gb = d.Gb, Se = d.Se, a = d.a, e = d.e;
    const int32_t *trow = kv.table + (size_t)seq[t] * kv.max_blocks;
    const E *kb = (const E *)kv.k + (size_t)kvh * HD, *vb = (const E *)kv.v + (size_t)kvh * HD;

    for (int x = tid; x < Gb * HD; x += AR_THREADS)
        q_s[x / HD][x % HD] = q[((size_t)t * n_heads + h0 + x / HD) * HD + x % HD] * scale;
    if (tid < AR_MAXG) m_s[tid] = -INFINITY, l_s[tid] = 0.0f;
    const int dg = tid % VG, pg = tid / VG;
    float acc[GB][8];
#pragma unroll
    for (int g = 0; g < GB; g++)
#pragma unroll
        for (int k = 0; k < 8; k++) acc[g][k] = 0.0f;

    for (int p0 = a; p0 < e; p0 += AR_TP) {
        const int n = min(AR_TP, e - p0);
        if (tid < n) {
            int p = p0 + tid;
            off_s[tid] = ((size_t)trow[p / kv.block_size] * kv.block_size + p % kv.block_size) * kv.kv_dim;
        }
        __syncthreads(); /* also: q_s and m_s/l_s written; last tile's p_s read by everyone */
        if constexpr (KC) { /* scores: position j, half h of its 16-byte pieces (h, h + 2, ...), every head */
            constexpr int EP = 16 / (int)sizeof(E), NC = HD / EP;
            const int j = tid >> 1, h = tid & 1;
            float sc[GB];
#pragma unroll
            for (int g = 0; g < GB; g++) sc[g] = 0.0f;
            if (j < n) {
                const E *kr = kb + off_s[j];
                uint4 kw[NC / 2];
#pragma unroll
                for (int i = 0; i < NC / 2; i++) kw[i] = *(const uint4 *)(kr + (h + 2 * i) * EP);
#pragma unroll
                for (int i = 0; i < NC / 2; i++) q_dot16<GB, HD, E>(sc, kw[i], q_s, (h + 2 * i) * EP, Gb);
            }
#pragma unroll
            for (int g = 0; g < GB; g++) {
                if (g < Gb) {
                    const float s = sc[g] + __shfl_xor_sync(0xffffffffu, sc[g], 1);
                    if (h == 0 && j < n) p_s[g][j] = s;
                }
            }
        } else { /* scores: position j, heads half, half + 2, ... */
            const int j = tid % AR_TP, half = tid / AR_TP;
            if (j < n) {
                float sc[GB / 2];
#pragma unroll
                for (int i = 0; i < GB / 2; i++) sc[i] = 0.0f;
                const E *kr = kb + off_s[j];
#pragma unroll UNR
                for (int d = 0; d < HD; d += 8) {
                    float kf[8];
                    ld8(kr + d, kf);
#pragma unroll
                    for (int i = 0; i < GB / 2; i++) {
                        int g = half + 2 * i;
                        if (g < Gb) {
                            float4 qa = *(const float4 *)&q_s[g][d], qb = *(const float4 *)&q_s[g][d + 4];
                            float s = sc[i];
                            s = fmaf(qa.x, kf[0], s);
                            s = fmaf(qa.y, kf[1], s);
                            s = fmaf(qa.z, kf[2], s);
                            s = fmaf(qa.w, kf[3], s);
                            s = fmaf(qb.x, kf[4], s);
                            s = fmaf(qb.y, kf[5], s);
                            s = fmaf(qb.z, kf[6], s);
                            s = fmaf(qb.w, kf[7], s);
                            sc[i] = s;
                        }
                    }
                }
#pragma unroll
                for (int i = 0; i < GB / 2; i++)
                    if (half + 2 * i < Gb) p_s[half + 2 * i][j] = sc[i];
            }
        }
        __syncthreads();
        { /* the tile's softmax update, a warp per head */
            const int lane = tid & 31, w = tid >> 5;
            for (int g = w; g < Gb; g += AR_THREADS / 32) warp_tile_softmax(p_s[g], n, &m_s[g], &l_s[g], &c_s[g], lane);
        }
        __syncthreads();
        { /* P x V: dimensions dg*8 .. dg*8+7 of every head, positions pg, pg + PG, ... (16-byte V reads) */
#pragma unroll
            for (int g = 0; g < GB; g++) {
                if (g < Gb) {
                    float c = c_s[g];
#pragma unroll
                    for (int k = 0; k < 8; k++) acc[g][k] *= c;
                }
            }
            const E *vd = vb + dg * 8;
#pragma unroll UNR
            for (int j = pg; j < n; j += PG) {
                float v[8];
                ld8(vd + off_s[j], v);
#pragma unroll
                for (int g = 0; g < GB; g++) {
                    if (g < Gb) {
                        float p = p_s[g][j];
#pragma unroll
                        for (int k = 0; k < 8; k++) acc[g][k] = fmaf(p, v[k], acc[g][k]);
                    }
                }
            }
        }
        __syncthreads();
    }
    pdl_launch();
    /* Sum the position groups: within a warp by shuffles (lanes l, l ^ VG,
     * ... share dimensions), across the warps through shared memory (q_s is
     * free now), a head at a time. */
    const int lane = tid & 31, w = tid >> 5;
    float *red = &q_s[0][0]; /* [AR_THREADS / 32][HD] */
    for (int g = 0; g < Gb; g++) {
        float x[8];
#pragma unroll
        for (int k = 0; k < 8; k++) {
            float s = 0.0f;
#pragma unroll
            for (int gg = 0; gg < GB; gg++)
                if (gg == g) s = acc[gg][k]; /* static register indexing */
#pragma unroll
            for (int o = VG; o < 32; o <<= 1) s += __shfl_xor_sync(0xffffffffu, s, o);
            x[k] = s;
        }
        if (lane < VG)
#pragma unroll
            for (int k = 0; k < 8; k++) red[w * HD + dg * 8 + k] = x[k];
        __syncthreads();
        size_t th = (size_t)t * n_heads + h0 + g;
        for (int d = tid; d < HD; d += AR_THREADS) {
            float o = 0.0f;
#pragma unroll
            for (int ww = 0; ww < AR_THREADS / 32; ww++) o += red[ww * HD + d];
            if (Se == 1) {
                out[th * HD + d] = l_s[g] > 0.0f ? o / l_s[g] : 0.0f;
            } else {
                part_store(part, th, S, split, HD, d, o, m_s[g], l_s[g]);
            }
        }
        __syncthreads();
    }
}

/* HEARTH_ATTN_ROWS=1 or 2 keeps the CUDA-core kernel v1 or v2 (f32 math;
 * benchmarks); 3, the default, the tensor-core kernel where it fits. Read once. */
static int rows_version(void) {
    static int ver = -1;
    if (ver < 0) {
        const char *s = getenv("HEARTH_ATTN_ROWS");
        ver = s && (atoi(s) == 1 || atoi(s) == 2) ? atoi(s) : 3;
    }
    return ver;
}

template <int HD>
static void launch(const cu_launch *L, dim3 grid, float *out, const float *q, const cu_kv *kv, const int32_t *seq,
                   const int32_t *pos, int T, int n_heads, int n_kv, float scale, int window, int S, int minpos,
                   float *part, int skip_bm) {
    /* registers: a group of at most 4 heads (GQA 4:1, Llama 3) keeps half the accumulators */
    const int small = n_heads / n_kv <= 4;
    const int v1 = rows_version() == 1;
    auto k = v1 ? (kv->f16   ? (small ? attn_rows_kernel<HD, 4, __half, false> : attn_rows_kernel<HD, AR_MAXG, __half, false>)
                   : kv->fp8 ? (small ? attn_rows_kernel<HD, 4, __nv_fp8_e4m3, false>
                                      : attn_rows_kernel<HD, AR_MAXG, __nv_fp8_e4m3, false>)
                             : (small ? attn_rows_kernel<HD, 4, float, false> : attn_rows_kernel<HD, AR_MAXG, float, false>))
                : (kv->f16   ? (small ? attn_rows_kernel<HD, 4, __half, true> : attn_rows_kernel<HD, AR_MAXG, __half, true>)
                   : kv->fp8 ? (small ? attn_rows_kernel<HD, 4, __nv_fp8_e4m3, true>
                                      : attn_rows_kernel<HD, AR_MAXG, __nv_fp8_e4m3, true>)
                             : (small ? attn_rows_kernel<HD, 4, float, true> : attn_rows_kernel<HD, AR_MAXG, float, true>));
    cu_launch_k(L, k, grid, dim3(AR_THREADS), 0, out, q, *kv, seq, pos, T, n_heads, n_kv, scale, window, S, minpos,
                part, skip_bm);
}

int cu_attention_rows_fits(int head_dim, const cu_kv *kv) {
    return (head_dim == 64 || head_dim == 128) && kv->kv_dim % 8 == 0 &&
           ((uintptr_t)kv->k | (uintptr_t)kv->v) % 32 == 0;
}

void cu_attention_rows(const cu_launch *L, dim3 grid, float *out, const float *q, const cu_kv *kv, const int32_t *seq,
                       const int32_t *pos, int T, int n_heads, int n_kv, int head_dim, float scale, int window, int S,
                       int minpos, float *part, int skip_bm) {
    if (rows_version() == 3 && cu_attention_rows_tc_fits(head_dim, kv)) {
        cu_attention_rows_tc(L, grid, out, q, kv, seq, pos, T, n_heads, n_kv, head_dim, scale, window, S, minpos, part,
                             skip_bm);
        return;
    }
    if (head_dim == 64)
        launch<64>(L, grid, out, q, kv, seq, pos, T, n_heads, n_kv, scale, window, S, minpos, part, skip_bm);
    else
        launch<128>(L, grid, out, q, kv, seq, pos, T, n_heads, n_kv, scale, window, S, minpos, part, skip_bm);
}
