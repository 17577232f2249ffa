/* attention.cu - causal attention over the paged KV cache (f32), GQA,
 * sliding windows, each row t at its own (seq[t], pos[t]).
 *
 * Two kernels share the work:
 *  - prefill (attention_prefill.cu): tiles of 64 rows of one sequence, f16
 *    tensor cores, flash-attention style (online softmax over 64-position KV
 *    tiles). Used when T > 32 and head_dim is 64 or 128, for the tiles whose
 *    rows all belong to one sequence;
 *  - decode (here): flash-decoding. One block per (split, kv head, row) runs
 *    the query heads of its kv head (up to 8) over a slice of the row's
 *    positions, K and V read once for all of them; a second kernel combines
 *    the splits' (max, sum, unnormalised output). It takes every row the
 *    prefill kernel does not (tile_uniform() decides, on the device, for both).
 */
#include "ops/cuda/attention.cuh"

#define AD_THREADS 128
#define AD_CH 32    /* positions per sub-chunk */
#define AD_MAXG 8   /* query heads per block */
#define AD_MAXHD 256

/* Part layout: [T][n_heads][S][hd + 2]: unnormalised output, then max, sum. */
__global__ void __launch_bounds__(AD_THREADS)
    attn_decode_kernel(float *__restrict__ out, const float *__restrict__ q, cu_kv kv, const int32_t *__restrict__ seq,
                       const int32_t *__restrict__ pos, int T, int n_heads, int n_kv, int hd, float scale, int window,
                       int S, float *__restrict__ part, int skip_bm) {
    pdl_wait();
    const int split = blockIdx.x, t = blockIdx.z;
    const int G = n_heads / n_kv, ngrp = (G + AD_MAXG - 1) / AD_MAXG;
    const int kvh = blockIdx.y / ngrp, grp = blockIdx.y % ngrp;
    const int h0 = kvh * G + grp * AD_MAXG, Gb = min(AD_MAXG, G - grp * AD_MAXG);
    const int tid = threadIdx.x, lane = tid & 31, wid = tid >> 5;
    if (skip_bm > 0 && tile_uniform(seq, T, t / skip_bm, skip_bm)) return;

    __shared__ float qs[AD_MAXG][AD_MAXHD];
    __shared__ float sc[AD_MAXG][AD_CH];
    __shared__ long long offs[AD_CH];
    __shared__ float m_s[AD_MAXG], l_s[AD_MAXG], corr_s[AD_MAXG];

    const int p_hi = pos[t], p_lo = window > 0 ? max(0, p_hi - window + 1) : 0;
    const int len = p_hi - p_lo + 1, chunk = (len + S - 1) / S;
    const int a = p_lo + split * chunk, e = min(p_hi + 1, a + chunk);
    const int sq = seq[t];
    for (int i = tid; i < Gb * hd; i += AD_THREADS) {
        int g = i / hd, d = i - g * hd;
        qs[g][d] = q[((size_t)t * n_heads + h0 + g) * hd + d] * scale;
    }
    if (tid < AD_MAXG) {
        m_s[tid] = -INFINITY;
        l_s[tid] = 0.0f;
    }
    float acc[AD_MAXG][2];
#pragma unroll
    for (int g = 0; g < AD_MAXG; g++) acc[g][0] = acc[g][1] = 0.0f;
    const float *kb = kv.k + (size_t)kvh * hd, *vb = kv.v + (size_t)kvh * hd;
    __syncthreads();

    for (int c0 = a; c0 < e; c0 += AD_CH) {
        const int n = min(AD_CH, e - c0);
        if (tid < AD_CH) {
            long long o = 0;
            if (tid < n) {
                int p = c0 + tid;
                int blk = kv.table[(size_t)sq * kv.max_blocks + p / kv.block_size];
                o = ((long long)blk * kv.block_size + p % kv.block_size) * kv.kv_dim;
            }
            offs[tid] = o;
        }
        __syncthreads();
        /* scores: warp wid takes positions wid*8 .. wid*8+7, lanes split hd */
        {
            float kr[8][AD_MAXHD / 32];
#pragma unroll
            for (int jj = 0; jj < 8; jj++) {
                int j = wid * 8 + jj;
#pragma unroll
                for (int i = 0; i < AD_MAXHD / 32; i++) {
                    int d = lane + 32 * i;
                    kr[jj][i] = (j < n && d < hd) ? kb[offs[j] + d] : 0.0f;
                }
            }
#pragma unroll
            for (int jj = 0; jj < 8; jj++) {
                int j = wid * 8 + jj;
#pragma unroll
                for (int g = 0; g < AD_MAXG; g++) {
                    if (g < Gb) {
                        float s = 0.0f;
#pragma unroll
                        for (int i = 0; i < AD_MAXHD / 32; i++) {
                            int d = lane + 32 * i;
                            if (d < hd) s = fmaf(qs[g][d], kr[jj][i], s);
                        }
#pragma unroll
                        for (int o = 16; o > 0; o >>= 1) s += __shfl_xor_sync(0xffffffffu, s, o);
                        if (lane == 0) sc[g][j] = j < n ? s : -INFINITY;
                    }
                }
            }
        }
        __syncthreads();
        /* online softmax: a warp per query head */
        for (int g = wid; g < Gb; g += AD_THREADS / 32) {
            float s = sc[g][lane];
            float mx = s;
#pragma unroll
            for (int o = 16; o > 0; o >>= 1) mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, o));
            float m_old = m_s[g], m_new = fmaxf(m_old, mx);
            float ex = s == -INFINITY ? 0.0f : expf(s - m_new);
            float sum = ex;
#pragma unroll
            for (int o = 16; o > 0; o >>= 1) sum += __shfl_xor_sync(0xffffffffu, sum, o);
            sc[g][lane] = ex;
            if (lane == 0) {
                float c = m_old == -INFINITY ? 0.0f : expf(m_old - m_new);
                corr_s[g] = c;
                l_s[g] = l_s[g] * c + sum;
                m_s[g] = m_new;
            }
        }
        __syncthreads();
        /* weighted sum of V: thread owns dims tid and tid + 128 */
#pragma unroll
        for (int dd = 0; dd < 2; dd++) {
            int d = tid + AD_THREADS * dd;
            if (d < hd) {
#pragma unroll
                for (int g = 0; g < AD_MAXG; g++)
                    if (g < Gb) acc[g][dd] *= corr_s[g];
                for (int j0 = 0; j0 < n; j0 += 8) {
                    float vv[8];
#pragma unroll
                    for (int jj = 0; jj < 8; jj++) vv[jj] = j0 + jj < n ? vb[offs[j0 + jj] + d] : 0.0f;
#pragma unroll
                    for (int jj = 0; jj < 8; jj++) {
                        if (j0 + jj < n) {
#pragma unroll
                            for (int g = 0; g < AD_MAXG; g++)
                                if (g < Gb) acc[g][dd] = fmaf(sc[g][j0 + jj], vv[jj], acc[g][dd]);
                        }
                    }
                }
            }
        }
        __syncthreads();
    }
    pdl_launch();
#pragma unroll
    for (int dd = 0; dd < 2; dd++) {
        int d = tid + AD_THREADS * dd;
        if (d >= hd) continue;
#pragma unroll
        for (int g = 0; g < AD_MAXG; g++) {
            if (g >= Gb) continue;
            size_t th = (size_t)t * n_heads + h0 + g;
            if (S == 1) {
                float l = l_s[g];
                out[th * hd + d] = l > 0.0f ? acc[g][dd] / l : 0.0f;
            } else {
                float *pp = part + (th * S + split) * (size_t)(hd + 2);
                pp[d] = acc[g][dd];
                if (d == 0) {
                    pp[hd] = m_s[g];
                    pp[hd + 1] = l_s[g];
                }
            }
        }
    }
}

__global__ void __launch_bounds__(AD_THREADS)
    attn_combine_kernel(float *__restrict__ out, const float *__restrict__ part, int n_heads, int hd, int S) {
    pdl_wait();
    const int h = blockIdx.x, t = blockIdx.y;
    const size_t th = (size_t)t * n_heads + h;
    const float *pp = part + th * S * (size_t)(hd + 2);
    float M = -INFINITY;
    for (int s = 0; s < S; s++)
        if (pp[s * (hd + 2) + hd + 1] > 0.0f) M = fmaxf(M, pp[s * (hd + 2) + hd]);
    float L = 0.0f;
    for (int s = 0; s < S; s++) {
        float l = pp[s * (hd + 2) + hd + 1];
        if (l > 0.0f) L += l * expf(pp[s * (hd + 2) + hd] - M);
    }
    pdl_launch();
    for (int d = threadIdx.x; d < hd; d += AD_THREADS) {
        float o = 0.0f;
        for (int s = 0; s < S; s++) {
            const float *ps = pp + s * (hd + 2);
            if (ps[hd + 1] > 0.0f) o += ps[d] * expf(ps[hd] - M);
        }
        out[th * hd + d] = L > 0.0f ? o / L : 0.0f;
    }
}

void cu_attention(const cu_launch *L, float *out, const float *q, int T, const cu_kv *kv, const int32_t *seq,
                  const int32_t *pos, int n_heads, int n_kv_heads, int head_dim, float scale, int window,
                  float *part, size_t part_floats) {
    const int G = n_heads / n_kv_heads, ngrp = (G + AD_MAXG - 1) / AD_MAXG;
    const int prefill = T > 32 && (head_dim == 64 || head_dim == 128);
    if (prefill) {
        cu_attention_prefill(L, out, q, T, kv, seq, pos, n_heads, n_kv_heads, head_dim, scale, window);
        cu_launch_k(L, attn_decode_kernel, dim3(1, n_kv_heads * ngrp, T), dim3(AD_THREADS), 0, out, q, *kv, seq, pos,
                    T, n_heads, n_kv_heads, head_dim, scale, window, 1, part, 64);
        return;
    }
    long want = (4L * L->n_sm + (long)T * n_kv_heads * ngrp - 1) / ((long)T * n_kv_heads * ngrp);
    int S = (int)(want < 1 ? 1 : want > 64 ? 64 : want);
    while (S > 1 && (size_t)T * n_heads * S * (size_t)(head_dim + 2) > part_floats) S--;
    cu_launch_k(L, attn_decode_kernel, dim3(S, n_kv_heads * ngrp, T), dim3(AD_THREADS), 0, out, q, *kv, seq, pos, T,
                n_heads, n_kv_heads, head_dim, scale, window, S, part, 0);
    if (S > 1)
        cu_launch_k(L, attn_combine_kernel, dim3(n_heads, T), dim3(AD_THREADS), 0, out, (const float *)part, n_heads,
                    head_dim, S);
}
