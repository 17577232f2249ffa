/* attention.cu - causal attention over the paged KV cache (f32, f16 or e4m3
 * elements), GQA, sliding windows, each row t at its own (seq[t], pos[t]).
 * An f16 or e4m3 cache is read as stored and widened exactly, so every
 * kernel does the same math on every element type.
 *
 * Which kernel takes a row (the split between the first two is decided on
 * the device, the same way by both: tile_uniform):
 *  - tiles of 64 rows of one sequence (T > 8, head_dim 64 or 128): the
 *    tensor-core prefill kernels, flash-attention style (attention_flash.cu
 *    for f16 and e4m3 caches, attention_prefill.cu for f32 ones);
 *  - every other row (batched decode rows, short chunks), flash-decoding:
 *      from the context's rows_min rows (6 by default): attention_rows_tc.cu
 *               on tensor cores (f16 and e4m3 caches), attention_rows.cu on
 *               CUDA cores (f32 caches);
 *      fewer rows (up to 8): attention_decode.cu, built for latency (splits
 *               merged in the same launch);
 *      other head sizes: the per-warp kernel here. One block per (split, kv
 *               head x query-head group, row) runs the query heads of its
 *               kv head (up to 8) over a slice of the row's positions (at
 *               least 16), K and V read once for all of them, each warp its
 *               own online softmax; a second kernel combines the splits'
 *               (max, sum, unnormalised output), for the rows kernels too.
 */
#include "ops/cuda/attention.cuh"

#include <stdlib.h>

#define AD_THREADS 128
#define AD_WARPS 4
#define AD_MAXG 8    /* query heads per block */
#define AD_MAXHD 256
#define AD_MINPOS 16 /* positions per split, at least (HEARTH_ATTN_MINPOS moves it, for benchmarks) */
#define AD_PB 4      /* positions a warp loads before it computes */

/* One block per (split, kv head x query-head group, row). Each warp runs its
 * own online softmax over every AD_WARPS-th position of the split (K and V
 * read once for the Gb query heads); the four warp states are merged at the
 * end through shared memory. Lane l holds dims l, l + 32, ... of q, and of
 * the output (PACK, e4m3 caches with hd = 32 * HDL, HDL 2/4/8: lane l holds
 * dims l*HDL .. l*HDL + HDL-1 instead, read by one HDL-byte load and widened
 * by cvt.rn.f16x2.e4m3x2). Part layout: [T][n_heads][S][hd + 2] =
 * unnormalised output, max, sum. */
template <int HDL, typename E, bool PACK = false>
__global__ void __launch_bounds__(AD_THREADS)
    attn_decode_kernel(float *__restrict__ out, const float *__restrict__ q, cu_kv kv, const int32_t *__restrict__ seq,
                       const int32_t *__restrict__ pos, int T, int n_heads, int n_kv, int hd, float scale, int window,
                       int S, int minpos, float *__restrict__ part, int skip_bm) {
    pdl_wait();
    const int split = blockIdx.x, tid = threadIdx.x, lane = tid & 31, wid = tid >> 5;
    dec_slice d;
    if (!dec_slice_of(d, seq, pos, T, n_heads, n_kv, AD_MAXG, S, minpos, window, skip_bm)) return;
    const int t = d.t, kvh = d.kvh, h0 = d.h0, Gb = d.Gb, Se = d.Se, a = d.a, e = d.e;
    const int32_t *trow = kv.table + (size_t)seq[t] * kv.max_blocks;

    float qr[AD_MAXG][HDL], acc[AD_MAXG][HDL], m[AD_MAXG], l[AD_MAXG];
#pragma unroll
    for (int g = 0; g < AD_MAXG; g++) {
        m[g] = -INFINITY;
        l[g] = 0.0f;
#pragma unroll
        for (int i = 0; i < HDL; i++) {
            int d = PACK ? lane * HDL + i : lane + 32 * i;
            qr[g][i] = (g < Gb && d < hd) ? q[((size_t)t * n_heads + h0 + g) * hd + d] * scale : 0.0f;
            acc[g][i] = 0.0f;
        }
    }
    const E *kb = (const E *)kv.k + (size_t)kvh * hd, *vb = (const E *)kv.v + (size_t)kvh * hd;
    for (int p0 = a + wid; p0 < e; p0 += AD_WARPS * AD_PB) {
        float kr[AD_PB][HDL], vr[AD_PB][HDL];
        int np = 0;
#pragma unroll
        for (int j = 0; j < AD_PB; j++) {
            int p = p0 + j * AD_WARPS;
            if (p < e) {
                np = j + 1;
                size_t off = ((size_t)trow[p / kv.block_size] * kv.block_size + p % kv.block_size) * kv.kv_dim;
                if constexpr (PACK) {
                    e4m3_ld<HDL>(kb + off + lane * HDL, kr[j]);
                    e4m3_ld<HDL>(vb + off + lane * HDL, vr[j]);
                } else {
#pragma unroll
                    for (int i = 0; i < HDL; i++) {
                        int d = lane + 32 * i;
                        kr[j][i] = d < hd ? kv_ld(kb, off + d) : 0.0f;
                        vr[j][i] = d < hd ? kv_ld(vb, off + d) : 0.0f;
                    }
                }
            }
        }
#pragma unroll
        for (int j = 0; j < AD_PB; j++) {
            if (j < np) {
#pragma unroll
                for (int g = 0; g < AD_MAXG; g++) {
                    if (g < Gb) {
                        float sc = 0.0f;
#pragma unroll
                        for (int i = 0; i < HDL; i++) sc = fmaf(qr[g][i], kr[j][i], sc);
#pragma unroll
                        for (int o = 16; o > 0; o >>= 1) sc += __shfl_xor_sync(0xffffffffu, sc, o);
                        float mn = fmaxf(m[g], sc);
                        float corr = m[g] == -INFINITY ? 0.0f : expf(m[g] - mn), pr = expf(sc - mn);
                        l[g] = l[g] * corr + pr;
#pragma unroll
                        for (int i = 0; i < HDL; i++) acc[g][i] = fmaf(pr, vr[j][i], acc[g][i] * corr);
                        m[g] = mn;
                    }
                }
            }
        }
    }
    /* merge the warps */
    __shared__ float sm_m[AD_WARPS][AD_MAXG], sm_l[AD_WARPS][AD_MAXG];
    __shared__ float sm_o[AD_WARPS][AD_MAXG][HDL * 32];
#pragma unroll
    for (int g = 0; g < AD_MAXG; g++) {
        if (lane == 0) {
            sm_m[wid][g] = m[g];
            sm_l[wid][g] = l[g];
        }
#pragma unroll
        for (int i = 0; i < HDL; i++) sm_o[wid][g][PACK ? lane * HDL + i : lane + 32 * i] = acc[g][i];
    }
    __syncthreads();
    pdl_launch();
    for (int x = tid; x < Gb * hd; x += AD_THREADS) {
        int g = x / hd, d = x - g * hd;
        float M = -INFINITY;
#pragma unroll
        for (int w = 0; w < AD_WARPS; w++)
            if (sm_l[w][g] > 0.0f) M = fmaxf(M, sm_m[w][g]);
        float L = 0.0f, O = 0.0f;
#pragma unroll
        for (int w = 0; w < AD_WARPS; w++) {
            if (sm_l[w][g] > 0.0f) {
                float c = expf(sm_m[w][g] - M);
                L += sm_l[w][g] * c;
                O += sm_o[w][g][d] * c;
            }
        }
        size_t th = (size_t)t * n_heads + h0 + g;
        if (Se == 1) {
            out[th * hd + d] = L > 0.0f ? O / L : 0.0f;
        } else {
            part_store(part, th, S, split, hd, d, O, M, L);
        }
    }
}

/* Merges the splits of each (row, head): weights from the splits' maxima and
 * sums (in shared memory), then each thread one output dim. Rows whose
 * splits collapsed to one were finished by the decode kernel. */
__global__ void __launch_bounds__(AD_THREADS)
    attn_combine_kernel(float *__restrict__ out, const float *__restrict__ part, const int32_t *__restrict__ seq,
                        const int32_t *__restrict__ pos, int T, int n_heads, int hd, int S, int minpos, int window,
                        int skip_bm) {
    pdl_wait();
    __shared__ float wgt[64];
    __shared__ float s_L;
    const int h = blockIdx.x, t = blockIdx.y;
    if (skip_bm > 0 && tile_uniform(seq, T, t / skip_bm, skip_bm)) return; /* the prefill kernel's row */
    const int p_hi = pos[t], p_lo = window > 0 ? max(0, p_hi - window + 1) : 0;
    const int Se = split_count(S, p_hi - p_lo + 1, minpos);
    if (Se == 1) return;
    const size_t th = (size_t)t * n_heads + h;
    const float *pp = part + th * S * (size_t)(hd + 2);
    if (threadIdx.x < 32) {
        int lane = threadIdx.x;
        float m0 = -INFINITY, m1 = -INFINITY, l0 = 0.0f, l1 = 0.0f;
        if (lane < Se) m0 = pp[lane * (hd + 2) + hd], l0 = pp[lane * (hd + 2) + hd + 1];
        if (lane + 32 < Se) m1 = pp[(lane + 32) * (hd + 2) + hd], l1 = pp[(lane + 32) * (hd + 2) + hd + 1];
        float M = fmaxf(l0 > 0.0f ? m0 : -INFINITY, l1 > 0.0f ? m1 : -INFINITY);
#pragma unroll
        for (int o = 16; o > 0; o >>= 1) M = fmaxf(M, __shfl_xor_sync(0xffffffffu, M, o));
        float w0 = l0 > 0.0f ? expf(m0 - M) : 0.0f, w1 = l1 > 0.0f ? expf(m1 - M) : 0.0f;
        float L = l0 * w0 + l1 * w1;
#pragma unroll
        for (int o = 16; o > 0; o >>= 1) L += __shfl_xor_sync(0xffffffffu, L, o);
        wgt[lane] = w0;
        wgt[lane + 32] = w1;
        if (lane == 0) s_L = L;
    }
    __syncthreads();
    pdl_launch();
    const float L = s_L;
    for (int d = threadIdx.x; d < hd; d += AD_THREADS) {
        float o = 0.0f;
#pragma unroll 8
        for (int s = 0; s < Se; s++) o = fmaf(pp[s * (hd + 2) + d], wgt[s], o);
        out[th * hd + d] = L > 0.0f ? o / L : 0.0f;
    }
}

template <int HDL>
static void launch_decode(const cu_launch *L, dim3 grid, float *out, const float *q, const cu_kv *kv,
                          const int32_t *seq, const int32_t *pos, int T, int n_heads, int n_kv, int hd, float scale,
                          int window, int S, int minpos, float *part, int skip_bm) {
    constexpr bool can_pack = HDL == 2 || HDL == 4 || HDL == 8;
    if (kv->f16)
        cu_launch_k(L, attn_decode_kernel<HDL, __half>, grid, dim3(AD_THREADS), 0, out, q, *kv, seq, pos, T, n_heads,
                    n_kv, hd, scale, window, S, minpos, part, skip_bm);
    else if (kv->fp8 && can_pack && hd == 32 * HDL && ((uintptr_t)kv->k | (uintptr_t)kv->v) % HDL == 0)
        cu_launch_k(L, attn_decode_kernel<HDL, __nv_fp8_e4m3, can_pack>, grid, dim3(AD_THREADS), 0, out, q, *kv, seq,
                    pos, T, n_heads, n_kv, hd, scale, window, S, minpos, part, skip_bm);
    else if (kv->fp8)
        cu_launch_k(L, attn_decode_kernel<HDL, __nv_fp8_e4m3>, grid, dim3(AD_THREADS), 0, out, q, *kv, seq, pos, T,
                    n_heads, n_kv, hd, scale, window, S, minpos, part, skip_bm);
    else
        cu_launch_k(L, attn_decode_kernel<HDL, float>, grid, dim3(AD_THREADS), 0, out, q, *kv, seq, pos, T, n_heads,
                    n_kv, hd, scale, window, S, minpos, part, skip_bm);
}

/* Returns 1 when the splits still need the combine kernel. */
static int decode(const cu_launch *L, dim3 grid, float *out, const float *q, const cu_kv *kv, const int32_t *seq,
                  const int32_t *pos, int T, int n_heads, int n_kv, int hd, float scale, int window, int S,
                  int minpos, int cluster, int rows_min, float *part, int *cnt, int n_cnt, int skip_bm,
                  int prep_kind, void *prep, int *prepped) {
    /* batches of rows: the tiled kernel (one softmax update per 64 positions),
     * from the context's rows_min (hearth_cuda_ctx_set_attn_rows_min) */
    if (T >= rows_min && cu_attention_rows_fits(hd, kv)) {
        cu_attention_rows(L, grid, out, q, kv, seq, pos, T, n_heads, n_kv, hd, scale, window, S, minpos, part,
                          skip_bm);
        return 1;
    }
    /* a few rows: the latency kernel (HEARTH_ATTN_DECODE=1 keeps the per-warp one, for benchmarks) */
    static int old_decode = -1;
    if (old_decode < 0) {
        const char *s = getenv("HEARTH_ATTN_DECODE");
        old_decode = s && atoi(s) == 1;
    }
    if (!old_decode && cu_attention_decode_fits(hd, kv, T, n_heads, n_kv, S, n_cnt)) {
        *prepped = cu_attention_decode(L, grid, out, q, kv, seq, pos, T, n_heads, n_kv, hd, scale, window, S,
                                       cluster, part, cnt, skip_bm, prep_kind, prep) != XPREP_NONE;
        return 0;
    }
    int hdl = (hd + 31) / 32;
    switch (hdl) {
    case 1: launch_decode<1>(L, grid, out, q, kv, seq, pos, T, n_heads, n_kv, hd, scale, window, S, minpos, part, skip_bm); break;
    case 2: launch_decode<2>(L, grid, out, q, kv, seq, pos, T, n_heads, n_kv, hd, scale, window, S, minpos, part, skip_bm); break;
    case 3: launch_decode<3>(L, grid, out, q, kv, seq, pos, T, n_heads, n_kv, hd, scale, window, S, minpos, part, skip_bm); break;
    case 4: launch_decode<4>(L, grid, out, q, kv, seq, pos, T, n_heads, n_kv, hd, scale, window, S, minpos, part, skip_bm); break;
    default: launch_decode<8>(L, grid, out, q, kv, seq, pos, T, n_heads, n_kv, hd, scale, window, S, minpos, part, skip_bm); break;
    }
    return 1;
}

int cu_attention_cluster(int ctx_len, int cap) {
    int cs = 2;
    while (cs * 64 < ctx_len) cs *= 2;
    return ctx_len > 64 && cs <= 16 && cs <= cap ? cs : 0;
}

int cu_attention(const cu_launch *L, float *out, const float *q, int T, const cu_kv *kv, const int32_t *seq,
                 const int32_t *pos, int n_heads, int n_kv_heads, int head_dim, float scale, int window,
                 int one_seq, int cluster, int rows_min, float *part, size_t part_floats, int *cnt, int n_cnt,
                 int prep_kind, void *prep) {
    const int G = n_heads / n_kv_heads, ngrp = (G + AD_MAXG - 1) / AD_MAXG;
    /* the tensor-core kernel reads K/V rows in 16-byte pieces */
    const int aligned = kv->kv_dim % 8 == 0 && ((uintptr_t)kv->k | (uintptr_t)kv->v) % 16 == 0;
    /* Tiles of one sequence go to the tensor-core kernel (from 9 rows on: a
     * short chunk after a long cached prefix reads its K/V once per tile,
     * not once per row); every other row
     * (batched decode rows, short chunks) to flash-decoding, split so that
     * about 16 blocks per SM are in flight (a batch of decode rows over
     * long contexts is latency-bound with one block per row and head). */
    const int skip_bm = T > 8 && (head_dim == 64 || head_dim == 128) && aligned ? 64 : 0;
    /* rows of one sequence: every tile is uniform, the prefill kernel takes them all (and may write the copy) */
    if (skip_bm) {
        cu_kv kp = *kv;
        kp.splits = one_seq ? kv->splits : 0; /* rows of several sequences: the combine would not know them */
        const int pp = cu_attention_prefill(L, out, q, T, &kp, seq, pos, n_heads, n_kv_heads, head_dim, scale,
                                            window, one_seq ? prep_kind : XPREP_NONE, prep, part, part_floats);
        if (one_seq) return pp;
    }
    long per_split = (long)T * n_kv_heads * ngrp;
    long want = (16L * L->n_sm + per_split - 1) / per_split;
    int S = (int)(want < 1 ? 1 : want > 64 ? 64 : want);
    while (S > 1 && (size_t)T * n_heads * S * (size_t)(head_dim + 2) > part_floats) S--;
    static int minpos = -1;
    if (minpos < 0) {
        const char *s = getenv("HEARTH_ATTN_MINPOS");
        minpos = s && atoi(s) > 0 ? atoi(s) : AD_MINPOS;
    }
    int prepped = 0;
    int combine = decode(L, dim3(S, n_kv_heads * ngrp, T), out, q, kv, seq, pos, T, n_heads, n_kv_heads, head_dim,
                         scale, window, S, minpos, cluster, rows_min, part, cnt, n_cnt, skip_bm,
                         skip_bm ? XPREP_NONE : prep_kind, prep, &prepped);
    if (combine && S > 1)
        cu_launch_k(L, attn_combine_kernel, dim3(n_heads, T), dim3(AD_THREADS), 0, out, (const float *)part, seq, pos,
                    T, n_heads, head_dim, S, minpos, window, skip_bm);
    return prepped;
}
