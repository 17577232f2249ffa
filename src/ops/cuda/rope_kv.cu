/* rope_kv.cu - the recorder's fusion of rope(q), rope(k) and kv_write(k, v):
 * blocks (t, part) rotate token t's q and k heads (as rope.cu does) and
 * store k and v at (seq[t], pos[t]) of the paged cache (as kv_write.cu
 * does), a pair per thread spread over several blocks per token. q, k and v
 * are read from their own buffers (rotated in place) or from the rows of
 * the one GEMM that made all three (ops_cuda.cu's q|k|v unit: rotated q
 * into q's buffer, k and v into theirs unless nothing reads them).
 * Dimensions past rot_dim are not rotated but still stored. The cache (f32,
 * f16 or e4m3) and the buffers get exactly the values the unfused ops would
 * store. */
#include "ops/cuda/cuda_internal.cuh"

#include <stdlib.h>

template <typename E>
__global__ void rope_kv_kernel(cu_qkv_rows in, float *q, float *k, float *v, int n_q, int n_k, int head_dim,
                               const int32_t *__restrict__ pos, const float *__restrict__ inv_freq, int half,
                               int neox, cu_kv kv, const int32_t *__restrict__ seq, int early) {
    /* positions, sequences and the block table are uploaded before the step's first kernel: the pos -> table
     * chain runs before the wait */
    const int t = blockIdx.x, p = pos[t];
    const int blk = kv.table[(size_t)seq[t] * kv.max_blocks + p / kv.block_size];
    const size_t off = ((size_t)blk * kv.block_size + (size_t)(p % kv.block_size)) * kv.kv_dim;
    pdl_wait_early(early);
    const float *qi = in.q + (size_t)t * in.ld_q, *ki = in.k + (size_t)t * in.ld_kv;
    const float *__restrict__ vi = in.v + (size_t)t * in.ld_kv;
    float *qo = q + (size_t)t * n_q * head_dim, *ko = k ? k + (size_t)t * kv.kv_dim : NULL;
    E *kd = (E *)kv.k, *vd = (E *)kv.v;
    const int stride = blockDim.x * gridDim.y, i0 = blockIdx.y * blockDim.x + threadIdx.x;
    const int npairs = (n_q + n_k) * half;
    /* RB pairs a round: their loads are issued before any store (a store may alias a later load, so a
     * load-rotate-store loop would wait a memory round trip per pair: 20 a thread for long prompts) */
    constexpr int RB = 4;
    for (int ib = i0; ib < npairs; ib += RB * stride) {
        float x0[RB], x1[RB];
        int a[RB], b[RB];
#pragma unroll
        for (int u = 0; u < RB; u++) {
            const int i = ib + u * stride, h = i / half, pi = i - h * half;
            a[u] = neox ? pi : 2 * pi;
            b[u] = neox ? pi + half : 2 * pi + 1;
            const float *x = h < n_q ? qi + (size_t)h * head_dim : ki + (size_t)(h - n_q) * head_dim;
            if (i < npairs) x0[u] = x[a[u]], x1[u] = x[b[u]];
        }
#pragma unroll
        for (int u = 0; u < RB; u++) {
            const int i = ib + u * stride, h = i / half, pi = i - h * half;
            if (i >= npairs) break;
            float y0 = x0[u], y1 = x1[u];
            rope_rotate(y0, y1, p, inv_freq[pi]);
            float *y = h < n_q ? qo + (size_t)h * head_dim : ko ? ko + (size_t)(h - n_q) * head_dim : NULL;
            if (y) y[a[u]] = y0, y[b[u]] = y1;
            if (h >= n_q) {
                kv_st(kd, off + (size_t)(h - n_q) * head_dim + a[u], y0);
                kv_st(kd, off + (size_t)(h - n_q) * head_dim + b[u], y1);
            }
        }
    }
    /* the dimensions past rot_dim as they are: copied where an output is not its input */
    if (q != in.q && 2 * half < head_dim)
        for (int i = i0; i < n_q * head_dim; i += stride)
            if (i % head_dim >= 2 * half) qo[i] = qi[i];
    const int k_copy = k && k != in.k;
    for (int i = i0; i < kv.kv_dim; i += stride) {
        if (i % head_dim >= 2 * half) {
            kv_st(kd, off + i, ki[i]);
            if (k_copy) ko[i] = ki[i];
        }
        kv_st(vd, off + i, vi[i]);
        if (v) v[(size_t)t * kv.kv_dim + i] = vi[i];
    }
    pdl_done(early);
}

/* Many tokens (prefill): a block of RKR_NT threads per token, in 16-byte
 * units (4 elements of a head row; with neox pairs, 4 elements and the 4
 * their partners, half further). The token's sines and cosines are made
 * once, before the wait, into shared memory (the kernel above makes one a
 * pair: 40 a position for Llama's 32 + 8 heads), and each thread's units
 * are all loaded before any is rotated and stored. The same bits as the
 * kernel above (rope_rotate_sc, kv stores rounding as kv_st). */
#define RKR_NT 256
/* units a thread in flight: 8 took 128 registers (two blocks a multiprocessor, 37.2 us a Llama-8B layer at
 * 2048 rows), 4 fit four blocks (30.1 us; the per-pair kernel 40.1; s14-run4, s14-run5) */
#define RKR_RB 4
#define RKR_MAXH 256 /* rot_dim / 2 */

template <typename E>
__global__ void __launch_bounds__(RKR_NT, 4)
    rope_kv_rows_kernel(cu_qkv_rows in, float *q, float *k, float *v, int n_q, int n_k, int head_dim,
                        const int32_t *__restrict__ pos, const float *__restrict__ inv_freq, int half, int neox,
                        cu_kv kv, const int32_t *__restrict__ seq, int early) {
    __shared__ float sn[RKR_MAXH], cs[RKR_MAXH];
    const int t = blockIdx.x, p = pos[t], tid = threadIdx.x;
    const int blk = kv.table[(size_t)seq[t] * kv.max_blocks + p / kv.block_size];
    const size_t off = ((size_t)blk * kv.block_size + (size_t)(p % kv.block_size)) * kv.kv_dim;
    for (int i = tid; i < half; i += RKR_NT) sincosf((float)p * inv_freq[i], &sn[i], &cs[i]);
    __syncthreads();
    pdl_wait_early(early);
    const float *qi = in.q + (size_t)t * in.ld_q, *ki = in.k + (size_t)t * in.ld_kv;
    const float *__restrict__ vi = in.v + (size_t)t * in.ld_kv;
    float *qo = q + (size_t)t * n_q * head_dim, *ko = k ? k + (size_t)t * kv.kv_dim : NULL,
          *vo = v ? v + (size_t)t * kv.kv_dim : NULL;
    /* a unit left unrotated is stored only where the output is not the input */
    const int q_copy = q != in.q, k_copy = k && k != in.k;
    E *kd = (E *)kv.k, *vd = (E *)kv.v;
    /* a head row's units: neox, nr = half / 4 rotated pairs of float4 (e, e + half), then the unrotated
     * float4s from 2 * half on; otherwise its head_dim / 4 float4s, rotated below 2 * half */
    const int hd4 = head_dim / 4, nr = neox ? half / 4 : 0, per_head = hd4 - nr;
    const int nqk = (n_q + n_k) * per_head, nunits = nqk + kv.kv_dim / 4;
    for (int ub = tid; ub < nunits; ub += RKR_RB * RKR_NT) {
        float4 a[RKR_RB], b[RKR_RB];
        int e[RKR_RB];
#pragma unroll
        for (int r = 0; r < RKR_RB; r++) { /* every load of the round before the first store */
            const int u = ub + r * RKR_NT;
            if (u >= nunits) break;
            if (u >= nqk) {
                e[r] = 4 * (u - nqk);
                a[r] = *(const float4 *)(vi + e[r]);
                continue;
            }
            const int h = u / per_head, w = u - h * per_head;
            const float *x = h < n_q ? qi + (size_t)h * head_dim : ki + (size_t)(h - n_q) * head_dim;
            e[r] = w < nr ? 4 * w : neox ? 2 * half + 4 * (w - nr) : 4 * w;
            a[r] = *(const float4 *)(x + e[r]);
            if (w < nr) b[r] = *(const float4 *)(x + e[r] + half);
        }
#pragma unroll
        for (int r = 0; r < RKR_RB; r++) {
            const int u = ub + r * RKR_NT;
            if (u >= nunits) break;
            if (u >= nqk) {
                kv_st4(vd, off + e[r], a[r]);
                if (vo) *(float4 *)(vo + e[r]) = a[r];
                continue;
            }
            const int h = u / per_head, w = u - h * per_head;
            const size_t kc = off + (size_t)(h - n_q) * head_dim + e[r];
            float *y = h < n_q ? qo + (size_t)h * head_dim : ko ? ko + (size_t)(h - n_q) * head_dim : NULL;
            if (w < nr) { /* neox: element e + i pairs with e + i + half, angle e + i */
                rope_rotate_sc(a[r].x, b[r].x, sn[e[r]], cs[e[r]]);
                rope_rotate_sc(a[r].y, b[r].y, sn[e[r] + 1], cs[e[r] + 1]);
                rope_rotate_sc(a[r].z, b[r].z, sn[e[r] + 2], cs[e[r] + 2]);
                rope_rotate_sc(a[r].w, b[r].w, sn[e[r] + 3], cs[e[r] + 3]);
                if (y) {
                    *(float4 *)(y + e[r]) = a[r];
                    *(float4 *)(y + e[r] + half) = b[r];
                }
                if (h >= n_q) {
                    kv_st4(kd, kc, a[r]);
                    kv_st4(kd, kc + half, b[r]);
                }
                continue;
            }
            const int rot = !neox && e[r] < 2 * half;
            if (rot) { /* pairs (e, e + 1), (e + 2, e + 3): angles e / 2, e / 2 + 1 */
                rope_rotate_sc(a[r].x, a[r].y, sn[e[r] / 2], cs[e[r] / 2]);
                rope_rotate_sc(a[r].z, a[r].w, sn[e[r] / 2 + 1], cs[e[r] / 2 + 1]);
            }
            if (y && (rot || (h < n_q ? q_copy : k_copy))) *(float4 *)(y + e[r]) = a[r];
            if (h >= n_q) kv_st4(kd, kc, a[r]);
        }
    }
    pdl_done(early);
}

/* The rows kernel's conditions: whole 16-byte units, rotated parts included. */
static int rope_kv_rows_fits(const cu_qkv_rows *in, const float *q, const float *k, const float *v, int head_dim,
                             int rot_dim, int neox, const cu_kv *kv) {
    static int off = -1; /* HEARTH_ROPE_ROWS=0: the kernel above at every T (benchmarks) */
    if (off < 0) {
        const char *s = getenv("HEARTH_ROPE_ROWS");
        off = s && atoi(s) == 0;
    }
    const int half = rot_dim / 2;
    const uintptr_t ptrs = (uintptr_t)in->q | (uintptr_t)in->k | (uintptr_t)in->v | (uintptr_t)q | (uintptr_t)k |
                           (uintptr_t)v;
    return !off && head_dim % 4 == 0 && (neox ? half % 4 == 0 : rot_dim % 4 == 0) && half <= RKR_MAXH &&
           kv->kv_dim % 4 == 0 && in->ld_q % 4 == 0 && in->ld_kv % 4 == 0 && ptrs % 16 == 0;
}

template <typename E>
static void launch(const cu_launch *L, int rows, int parts, const cu_qkv_rows *in, float *q, float *k, float *v,
                   int T, int n_q, int n_k, int head_dim, const int32_t *pos, const float *inv_freq, int half,
                   int neox, const cu_kv *kv, const int32_t *seq) {
    if (rows)
        cu_launch_k(L, rope_kv_rows_kernel<E>, dim3(T), dim3(RKR_NT), 0, *in, q, k, v, n_q, n_k, head_dim, pos,
                    inv_freq, half, neox, *kv, seq, L->pdl_early);
    else
        cu_launch_k(L, rope_kv_kernel<E>, dim3(T, parts), dim3(128), 0, *in, q, k, v, n_q, n_k, head_dim, pos,
                    inv_freq, half, neox, *kv, seq, L->pdl_early);
}

void cu_rope_kv(const cu_launch *L, const cu_qkv_rows *in, float *q, float *k, float *v, int T, int n_q, int n_k,
                int head_dim, const int32_t *pos, const float *inv_freq, int rot_dim, int neox, const cu_kv *kv,
                const int32_t *seq) {
    const int rows = T > 8 && rope_kv_rows_fits(in, q, k, v, head_dim, rot_dim, neox, kv);
    /* the per-pair kernel's blocks per token: enough to fill the chip for a
     * few tokens (decode); one for long prompts, so the pos -> block-table ->
     * cache chain at a block's start is paid once per token, not once per
     * 128 pairs */
    int parts = cu_div_up((long)(n_q + n_k) * (rot_dim / 2), 128);
    int fill = cu_div_up(4L * L->n_sm, T);
    if (parts > fill) parts = fill;
    if (parts > 32) parts = 32;
    if (parts < 1) parts = 1;
    if (kv->f16)
        launch<__half>(L, rows, parts, in, q, k, v, T, n_q, n_k, head_dim, pos, inv_freq, rot_dim / 2, neox, kv, seq);
    else if (kv->fp8)
        launch<__nv_fp8_e4m3>(L, rows, parts, in, q, k, v, T, n_q, n_k, head_dim, pos, inv_freq, rot_dim / 2, neox,
                              kv, seq);
    else
        launch<float>(L, rows, parts, in, q, k, v, T, n_q, n_k, head_dim, pos, inv_freq, rot_dim / 2, neox, kv, seq);
}
