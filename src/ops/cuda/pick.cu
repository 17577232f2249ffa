/* pick.cu - the pick op (ops/ops.h) on the device: per logit row the argmax,
 * the Gumbel-max draw, log-sum-exp and the top-N list, so a decode step
 * downloads a hearth_pick per row instead of the vocabulary.
 *
 * One block of PK_THREADS per row:
 *  1. max and argmax (first index of the maximum);
 *  2. only when asked, one more pass for the draw (temperature > 0) and the
 *     sum of exp(x - max) (logprobs);
 *  3. only when logprobs and n_top > 0, the top list: warp w owns a slice of
 *     the row and keeps the best element of its slice that ranks below every
 *     pick so far; each round takes the best of the warps' bests, and only
 *     the winning warp rescans its slice (the others' bests stay valid).
 *
 * Exactness against hearth_pick_row (ops/cpu/pick.c): id, max, chosen and
 * the top list are equal bit for bit. Every float step of the draw is the
 * CPU's, with the rounding spelled out (__fmul_rn / __fadd_rn / __fsub_rn /
 * __fdiv_rn: no fused multiply-add), the same candidate floor (the CPU skips
 * the same tokens) and the same tie rules; the noise uses the device's
 * full-precision logf, which agrees with glibc's within 1 ulp (the test
 * cuda_pick_noise_matches_host measures every one of the 2^23 noise values),
 * so a draw could differ only where two scores are that close. lse: exp in
 * float (expf of the float x - max), summed in double, log in double; against
 * the CPU's all-double sum |dlse| <= 4e-6 * max(1, |lse|) (expf's 2 ulp and
 * the rounding of x - max, weighted by the softmax). Rows holding NaN have no
 * defined result beyond an id in [0, vocab). */
#include "ops/cuda/cuda_internal.cuh"

#include <limits.h>

#define PK_THREADS 1024
#define PK_WARPS (PK_THREADS / 32)

/* (x, i) ranks above (y, j): larger value, ties to the lower id. */
__device__ __forceinline__ bool ranks_above(float x, int i, float y, int j) { return x > y || (x == y && i < j); }

/* Every lane ends with the best (x, i) of the warp. */
__device__ __forceinline__ void warp_best(float &x, int &i) {
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) {
        float y = __shfl_xor_sync(0xffffffffu, x, o);
        int j = __shfl_xor_sync(0xffffffffu, i, o);
        if (ranks_above(y, j, x, i)) x = y, i = j;
    }
}

/* Every thread gets the best (x, i) of the block; sx/si are PK_WARPS of
 * shared scratch. */
__device__ __forceinline__ void block_best(float &x, int &i, float *sx, int *si) {
    const int lane = threadIdx.x & 31, w = threadIdx.x >> 5;
    warp_best(x, i);
    __syncthreads(); /* sx/si may still be read from a previous call */
    if (lane == 0) sx[w] = x, si[w] = i;
    __syncthreads();
    x = sx[lane];
    i = si[lane];
    warp_best(x, i);
}

__device__ __forceinline__ double block_sum(double s, double *sd) {
    const int lane = threadIdx.x & 31, w = threadIdx.x >> 5;
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) s += __shfl_xor_sync(0xffffffffu, s, o);
    __syncthreads();
    if (lane == 0) sd[w] = s;
    __syncthreads();
    s = sd[lane];
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) s += __shfl_xor_sync(0xffffffffu, s, o);
    return s;
}

/* f(x[i], i) for this thread's elements of the row, in increasing i (so a
 * strict > keeps the first index within a thread). */
template <typename F> __device__ __forceinline__ void visit_row(const float *x, int vocab, F &&f) {
    if ((vocab & 3) == 0 && ((uintptr_t)x & 15) == 0) {
        const float4 *x4 = (const float4 *)x;
        const int n4 = vocab >> 2;
#pragma unroll 4
        for (int j = threadIdx.x; j < n4; j += PK_THREADS) {
            float4 v = x4[j];
            f(v.x, 4 * j);
            f(v.y, 4 * j + 1);
            f(v.z, 4 * j + 2);
            f(v.w, 4 * j + 3);
        }
    } else {
#pragma unroll 4
        for (int i = threadIdx.x; i < vocab; i += PK_THREADS) f(x[i], i);
    }
}

/* The noise of ops.h for k = z >> 41: u = (k + 0.5f) * 2^-23, -logf(-logf(u)). */
__device__ __forceinline__ float gumbel_bits(uint32_t k) {
    float u = __fmul_rn(__fadd_rn(__uint2float_rn(k), 0.5f), 0x1.0p-23f);
    return -logf(-logf(u));
}

__device__ __forceinline__ float gumbel(uint64_t key, int i) {
    uint64_t z = key + ((uint64_t)(uint32_t)i + 1) * 0x9e3779b97f4a7c15ull; /* hearth_pick_hash */
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    z ^= z >> 31;
    return gumbel_bits((uint32_t)(z >> 41));
}

/* The best element of [s0, s1) that ranks below (px, pi), reduced over the
 * warp; (-inf, INT_MAX) when there is none. */
__device__ __forceinline__ void warp_scan_below(const float *x, int s0, int s1, float px, int pi, float &bx,
                                                int &bi) {
    bx = -INFINITY;
    bi = INT_MAX;
#pragma unroll 4
    for (int i = s0 + (int)(threadIdx.x & 31); i < s1; i += 32) {
        float v = x[i];
        if ((v < px || (v == px && i > pi)) && ranks_above(v, i, bx, bi)) bx = v, bi = i;
    }
    warp_best(bx, bi);
}

__global__ void __launch_bounds__(PK_THREADS, 1)
    pick_kernel(hearth_pick *__restrict__ out, const float *__restrict__ logits, int vocab,
                const hearth_pick_params *__restrict__ params) {
    __shared__ float sx[PK_WARPS];
    __shared__ int si[PK_WARPS];
    __shared__ double sd[PK_WARPS];
    __shared__ float wx[PK_WARPS], tx[HEARTH_PICK_TOP];
    __shared__ int wi[PK_WARPS], ti[HEARTH_PICK_TOP];
    __shared__ int s_win, s_found;

    pdl_wait();
    const int row = blockIdx.x, tid = threadIdx.x, lane = tid & 31, w = tid >> 5;
    const float *x = logits + (size_t)row * vocab;
    const hearth_pick_params p = params[row];

    /* 1. max, first index */
    float mx = -INFINITY;
    int am = INT_MAX;
    visit_row(x, vocab, [&](float v, int i) {
        if (ranks_above(v, i, mx, am)) mx = v, am = i;
    });
    block_best(mx, am, sx, si);
    if (am == INT_MAX) am = 0, mx = x[0]; /* an all-NaN row */

    /* 2. the draw and the sum of exp(x - max) */
    const bool draw = p.temperature > 0.0f && isfinite(mx);
    int id = am;
    double sum = 0.0;
    if (draw || p.logprobs) {
        float floor_x = 0.0f, inv_t = 0.0f;
        if (draw) {
            floor_x = __fsub_rn(mx, __fmul_rn(20.2f, p.temperature));
            inv_t = __fdiv_rn(1.0f, p.temperature);
            if (p.min_p > 0.0f) {
                float m = __fadd_rn(mx, logf(p.min_p));
                if (m > floor_x) floor_x = m;
            }
        }
        float bs = -INFINITY;
        int bi = INT_MAX;
        const bool lp = p.logprobs != 0;
        visit_row(x, vocab, [&](float v, int i) {
            if (lp) sum += (double)expf(__fsub_rn(v, mx));
            if (draw && v >= floor_x) {
                float s = __fadd_rn(__fmul_rn(v, inv_t), gumbel(p.key, i));
                if (s > bs) bs = s, bi = i;
            }
        });
        if (draw) {
            block_best(bs, bi, sx, si);
            if (bi != INT_MAX) id = bi;
        }
        if (lp) sum = block_sum(sum, sd);
    }

    /* 3. the top list */
    const int n_top = p.logprobs ? (p.n_top < 0 ? 0 : p.n_top > HEARTH_PICK_TOP ? HEARTH_PICK_TOP : p.n_top) : 0;
    if (tid == 0) s_found = 0;
    if (n_top > 0) {
        const int seg = (vocab + PK_WARPS - 1) / PK_WARPS;
        const int s0 = min(vocab, w * seg), s1 = min(vocab, s0 + seg);
        float bx;
        int bi;
        warp_scan_below(x, s0, s1, INFINITY, -1, bx, bi);
        if (lane == 0) wx[w] = bx, wi[w] = bi;
        __syncthreads();
        for (int r = 0; r < n_top; r++) {
            if (w == 0) {
                float cx = wx[lane];
                int ci = wi[lane];
                warp_best(cx, ci);
                if (lane == 0) {
                    s_win = ci == INT_MAX ? -1 : ci / seg;
                    if (ci != INT_MAX) tx[r] = cx, ti[r] = ci, s_found = r + 1;
                }
            }
            __syncthreads();
            const int win = s_win;
            if (win < 0) break;
            if (w == win) {
                warp_scan_below(x, s0, s1, tx[r], ti[r], bx, bi);
                if (lane == 0) wx[w] = bx, wi[w] = bi;
            }
            __syncthreads();
        }
    }
    pdl_launch();
    __syncthreads();
    /* every field written, unused ones 0 (as the CPU's zeroed struct) */
    hearth_pick *o = out + row;
    const int found = s_found;
    if (tid == 0) {
        o->id = id;
        o->max = mx;
        o->lse = p.logprobs ? __fadd_rn(mx, (float)log(sum)) : 0.0f;
        o->chosen = p.logprobs ? x[id] : 0.0f;
        o->n_top = found;
    }
    if (tid < HEARTH_PICK_TOP) {
        o->top_id[tid] = tid < found ? ti[tid] : 0;
        o->top_x[tid] = tid < found ? tx[tid] : 0.0f;
    }
}

__global__ void pick_noise_kernel(float *dst, int n) {
    pdl_wait();
    int k = blockIdx.x * blockDim.x + threadIdx.x;
    if (k < n) dst[k] = gumbel_bits((uint32_t)k);
    pdl_launch();
}

void cu_pick(const cu_launch *L, hearth_pick *out, const float *logits, int n_rows, int vocab,
             const hearth_pick_params *params) {
    cu_launch_k(L, pick_kernel, dim3(n_rows), dim3(PK_THREADS), 0, out, logits, vocab, params);
}

void cu_pick_noise(const cu_launch *L, float *dst, int n) {
    cu_launch_k(L, pick_noise_kernel, dim3(cu_div_up(n, 256)), dim3(256), 0, dst, n);
}
