/* pick.cu - the pick op (ops/ops.h) on the device: per logit row the argmax,
 * the Gumbel-max draw, log-sum-exp and the top-N list, so a decode step
 * downloads a hearth_pick per row instead of the vocabulary.
 *
 * One block of PK_THREADS per row:
 *  1. max and argmax (first index of the maximum), from the bests of the
 *     row's chunks that a wave of blocks found before it (pick_part_kernel),
 *     or over the row where there is no scratch for them;
 *  2. only when asked, one more pass for the draw (temperature > 0) and the
 *     sum of exp(x - max) (logprobs), after the truncation's passes (top_k,
 *     top_p; below) when those are asked;
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

/* Every thread gets the block's sum; sd is PK_WARPS of shared scratch. */
template <typename T> __device__ __forceinline__ T block_sum(T s, T *sd) {
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

/* The block's inclusive prefix sum in thread order; sd is PK_WARPS of shared scratch. */
__device__ __forceinline__ unsigned long long block_scan(unsigned long long s, unsigned long long *sd) {
    const int lane = threadIdx.x & 31, w = threadIdx.x >> 5;
#pragma unroll
    for (int o = 1; o < 32; o <<= 1) {
        unsigned long long t = __shfl_up_sync(0xffffffffu, s, o);
        if (lane >= o) s += t;
    }
    __syncthreads();
    if (lane == 31) sd[w] = s;
    __syncthreads();
    unsigned long long before = 0;
    for (int k = 0; k < w; k++) before += sd[k];
    return s + before;
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

/* ---- truncation (top_k, top_p): ops.h's rule, pick.c's truncation() the reference ----
 * Bins of 1/64 of a nat below the maximum (the last one the rest) are
 * counted and weighed in one pass (lanes of one bin added first, then one
 * shared atomic a bin), warp 0 finds the bin where top_k's count or top_p's
 * weight is reached, and that bin's order keys are gathered, sorted (bitonic)
 * and scanned; a bin of more than PK_GATHER tokens (a flat row) is searched
 * by bisection over the order keys instead, as on the host. */
#define PK_BINS 2048
#define PK_GATHER 2048

__device__ __forceinline__ int pk_bin(float d) { return d < 32.0f ? (int)__fmul_rn(d, 64.0f) : PK_BINS; }

/* The order key of the last token kept, 0 when all are (called by the whole block). */
__device__ unsigned long long pk_truncation(const float *__restrict__ x, int vocab, float mx,
                                            const hearth_pick_params &p) {
    __shared__ unsigned int cnt[PK_BINS + 1];
    __shared__ unsigned long long mass[PK_BINS + 1], keys[PK_GATHER], su[PK_WARPS];
    __shared__ unsigned long long s_before_m, s_need;
    __shared__ int s_bk, s_bp, s_before_c, s_n, s_j;
    const int tid = threadIdx.x, lane = tid & 31;
    const long long k = p.top_k > 0 && p.top_k < vocab ? p.top_k : 0;
    const bool by_p = p.top_p > 0.0f && p.top_p < 1.0f;
    if (!k && !by_p) return 0;
    for (int b = tid; b <= PK_BINS; b += PK_THREADS) cnt[b] = 0, mass[b] = 0;
    __syncthreads();
    for (int base = 0; base < vocab; base += PK_THREADS) { /* whole warps each round: the lanes' sums */
        const int i = base + tid;
        const float d = i < vocab ? __fsub_rn(mx, x[i]) : 0.0f;
        const int b = i < vocab ? pk_bin(d) : -1;
        const unsigned long long w = i < vocab && by_p ? hearth_pick_weight(d) : 0;
        const unsigned peers = __match_any_sync(0xffffffffu, b);
        const unsigned lo = __reduce_add_sync(peers, (unsigned)(w & 0x1fffff));
        const unsigned hi = __reduce_add_sync(peers, (unsigned)(w >> 21));
        if (b >= 0 && lane == __ffs(peers) - 1) {
            atomicAdd(&cnt[b], (unsigned)__popc(peers));
            if (lo | hi) atomicAdd(&mass[b], ((unsigned long long)hi << 21) + lo);
        }
    }
    __syncthreads();
    if (tid < 32) { /* lane l: bins [64 l, 64 l + 64), lane 31 the rest as well */
        const int b0 = lane * (PK_BINS / 32), b1 = lane == 31 ? PK_BINS + 1 : b0 + PK_BINS / 32;
        unsigned long long c = 0, m = 0;
        for (int b = b0; b < b1; b++) c += cnt[b], m += mass[b];
        unsigned long long ci = c, mi = m;
#pragma unroll
        for (int o = 1; o < 32; o <<= 1) {
            unsigned long long tc = __shfl_up_sync(0xffffffffu, ci, o), tm = __shfl_up_sync(0xffffffffu, mi, o);
            if (lane >= o) ci += tc, mi += tm;
        }
        const unsigned long long total = __shfl_sync(0xffffffffu, mi, 31);
        const unsigned long long need =
            by_p ? (unsigned long long)ceil(__dmul_rn((double)p.top_p, __ull2double_rn(total))) : 0;
        unsigned long long cb = ci - c, mb = mi - m;
        int bk = PK_BINS + 1, bp = PK_BINS + 1;
        unsigned long long cbk = 0, mbp = 0;
        for (int b = b0; b < b1; b++) {
            if (k && bk > PK_BINS && cb + cnt[b] >= (unsigned long long)k) bk = b, cbk = cb;
            if (by_p && bp > PK_BINS && mb + mass[b] >= need) bp = b, mbp = mb;
            cb += cnt[b], mb += mass[b];
        }
        const int bk_min = (int)__reduce_min_sync(0xffffffffu, (unsigned)bk);
        const int bp_min = (int)__reduce_min_sync(0xffffffffu, (unsigned)bp);
        if (bk == bk_min && bk <= PK_BINS) s_before_c = (int)cbk;
        if (bp == bp_min && bp <= PK_BINS) s_before_m = mbp;
        if (lane == 0) s_bk = bk_min, s_bp = bp_min, s_need = need;
    }
    __syncthreads();
    const int bk = s_bk, bp = s_bp, b = min(bk, bp);
    if (b > PK_BINS) return 0;
    const long long rk = bk == b ? k - s_before_c : 0;            /* the rank in the bin top_k stops at, 1.. */
    const unsigned long long need_b = bp == b ? s_need - s_before_m : 0; /* the weight top_p still needs there */
    const int nb = (int)cnt[b];
    unsigned long long last;
    if (nb <= PK_GATHER) {
        if (tid == 0) s_n = 0, s_j = INT_MAX;
        __syncthreads();
        visit_row(x, vocab, [&](float v, int i) {
            if (pk_bin(__fsub_rn(mx, v)) == b) keys[atomicAdd(&s_n, 1)] = hearth_pick_order(v, i);
        });
        __syncthreads();
        int np = 1;
        while (np < nb) np <<= 1;
        for (int i = nb + tid; i < np; i += PK_THREADS) keys[i] = 0;
        __syncthreads();
        for (int size = 2; size <= np; size <<= 1) /* bitonic, larger first */
            for (int stride = size >> 1; stride > 0; stride >>= 1) {
                for (int i = tid; i < np; i += PK_THREADS) {
                    const int j = i ^ stride;
                    if (j > i) {
                        const unsigned long long a = keys[i], c = keys[j];
                        if ((i & size) == 0 ? a < c : a > c) keys[i] = c, keys[j] = a;
                    }
                }
                __syncthreads();
            }
        if (need_b) { /* the first position where the running weight reaches need_b */
            const int j0 = 2 * tid, j1 = j0 + 1;
            const unsigned long long w0 =
                j0 < nb ? hearth_pick_weight(__fsub_rn(mx, x[(int)~(unsigned)keys[j0]])) : 0;
            const unsigned long long w1 =
                j1 < nb ? hearth_pick_weight(__fsub_rn(mx, x[(int)~(unsigned)keys[j1]])) : 0;
            const unsigned long long before = block_scan(w0 + w1, su) - (w0 + w1);
            if (j0 < nb && before + w0 >= need_b) atomicMin(&s_j, j0);
            else if (j1 < nb && before + w0 + w1 >= need_b) atomicMin(&s_j, j1);
            __syncthreads();
        }
        int j = s_j;
        if (rk && rk - 1 < j) j = (int)(rk - 1);
        last = keys[j < nb ? j : nb - 1];
    } else { /* bisection: the largest key whose tokens of the bin at or above it count rk / weigh need_b */
        unsigned long long lo_k = 0, hi_k = rk ? ~0ull : 0, lo_p = 0, hi_p = need_b ? ~0ull : 0;
        while (lo_k < hi_k || lo_p < hi_p) {
            const unsigned long long mid_k = lo_k + (hi_k - lo_k) / 2 + (lo_k < hi_k);
            const unsigned long long mid_p = lo_p + (hi_p - lo_p) / 2 + (lo_p < hi_p);
            unsigned long long c = 0, m = 0;
            visit_row(x, vocab, [&](float v, int i) {
                const float d = __fsub_rn(mx, v);
                if (pk_bin(d) != b) return;
                const unsigned long long key = hearth_pick_order(v, i);
                if (lo_k < hi_k && key >= mid_k) c++;
                if (lo_p < hi_p && key >= mid_p) m += hearth_pick_weight(d);
            });
            c = block_sum(c, su);
            m = block_sum(m, su);
            if (lo_k < hi_k) {
                if (c >= (unsigned long long)rk) lo_k = mid_k;
                else hi_k = mid_k - 1;
            }
            if (lo_p < hi_p) {
                if (m >= need_b) lo_p = mid_p;
                else hi_p = mid_p - 1;
            }
        }
        last = lo_k > lo_p ? lo_k : lo_p;
    }
    __syncthreads(); /* keys and the scratch are free again */
    return last;
}

/* ---- the first pass apart: each chunk's best ----
 * One block a row spends ~14 us reading a 128k vocabulary's 513 KB (s59's
 * trace of a Q4_0 token: the pick's end 14.5 us after the head's), where the
 * whole chip reads it in a wave. Block (j, row) writes the best (x, i) of the
 * row's chunk j, (-inf, INT_MAX) for a chunk without one (all NaN); the
 * pick's first step then takes the best of the row's chunks. ranks_above is
 * a total order on the non-NaN pairs, so the best of the bests is the best
 * of the row: the same (max, first index) bit for bit. */
#define PK_PART_THREADS 256
#define PK_CHUNK 4096 /* logits a chunk at least (4 float4 a thread) */

__global__ void __launch_bounds__(PK_PART_THREADS)
    pick_part_kernel(int2 *__restrict__ part, const float *__restrict__ logits, int vocab, int chunk, int n_part) {
    __shared__ float sx[PK_PART_THREADS / 32];
    __shared__ int si[PK_PART_THREADS / 32];
    pdl_wait();
    const int j = blockIdx.x, row = blockIdx.y, lane = threadIdx.x & 31, w = threadIdx.x >> 5;
    const float *x = logits + (size_t)row * vocab;
    const int i0 = j * chunk, i1 = min(vocab, i0 + chunk);
    float bx = -INFINITY;
    int bi = INT_MAX;
    if ((vocab & 3) == 0 && ((uintptr_t)x & 15) == 0) { /* chunk is a multiple of 4: i0 is too */
        const float4 *x4 = (const float4 *)x;
#pragma unroll 4
        for (int k = (i0 >> 2) + (int)threadIdx.x; k < (i1 >> 2); k += PK_PART_THREADS) {
            const float4 v = x4[k];
            if (ranks_above(v.x, 4 * k, bx, bi)) bx = v.x, bi = 4 * k;
            if (ranks_above(v.y, 4 * k + 1, bx, bi)) bx = v.y, bi = 4 * k + 1;
            if (ranks_above(v.z, 4 * k + 2, bx, bi)) bx = v.z, bi = 4 * k + 2;
            if (ranks_above(v.w, 4 * k + 3, bx, bi)) bx = v.w, bi = 4 * k + 3;
        }
    } else {
#pragma unroll 4
        for (int i = i0 + (int)threadIdx.x; i < i1; i += PK_PART_THREADS)
            if (ranks_above(x[i], i, bx, bi)) bx = x[i], bi = i;
    }
    pdl_launch();
    warp_best(bx, bi);
    if (lane == 0) sx[w] = bx, si[w] = bi;
    __syncthreads();
    if (w == 0) {
        bx = lane < PK_PART_THREADS / 32 ? sx[lane] : -INFINITY;
        bi = lane < PK_PART_THREADS / 32 ? si[lane] : INT_MAX;
        warp_best(bx, bi);
        if (lane == 0) part[(size_t)row * n_part + j] = make_int2(__float_as_int(bx), bi);
    }
}

__global__ void __launch_bounds__(PK_THREADS, 1)
    pick_kernel(hearth_pick *__restrict__ out, const float *__restrict__ logits, int vocab,
                const hearth_pick_params *__restrict__ params, const int2 *__restrict__ part, int n_part,
                int32_t *__restrict__ ids, hearth_pick *__restrict__ host) {
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

    /* 1. max, first index: of the row's chunks' bests (pick_part_kernel) where there are, else of the row */
    float mx = -INFINITY;
    int am = INT_MAX;
    if (part) {
        for (int j = tid; j < n_part; j += PK_THREADS) {
            const int2 b = part[(size_t)row * n_part + j];
            if (ranks_above(__int_as_float(b.x), b.y, mx, am)) mx = __int_as_float(b.x), am = b.y;
        }
    } else {
        visit_row(x, vocab, [&](float v, int i) {
            if (ranks_above(v, i, mx, am)) mx = v, am = i;
        });
    }
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
        const unsigned long long last = draw ? pk_truncation(x, vocab, mx, p) : 0;
        float bs = -INFINITY;
        int bi = INT_MAX;
        const bool lp = p.logprobs != 0;
        visit_row(x, vocab, [&](float v, int i) {
            if (lp) sum += (double)expf(__fsub_rn(v, mx));
            if (draw && v >= floor_x && (!last || hearth_pick_order(v, i) >= last)) {
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
    /* every field written, unused ones 0 (as the CPU's zeroed struct): word k of the struct by thread k, into
     * out and, where the download is fused in, the same into its pinned host memory */
    static_assert(sizeof(hearth_pick) == 4 * (5 + 2 * HEARTH_PICK_TOP), "hearth_pick's words");
    const int found = s_found;
    if (tid < 5 + 2 * HEARTH_PICK_TOP) {
        const int k = tid - 5 - HEARTH_PICK_TOP;
        uint32_t v;
        if (tid == 0) v = (uint32_t)id;
        else if (tid == 1) v = __float_as_uint(mx);
        else if (tid == 2) v = __float_as_uint(p.logprobs ? __fadd_rn(mx, (float)log(sum)) : 0.0f);
        else if (tid == 3) v = __float_as_uint(p.logprobs ? x[id] : 0.0f);
        else if (tid == 4) v = (uint32_t)found;
        else if (k < 0) v = tid - 5 < found ? (uint32_t)ti[tid - 5] : 0u;
        else v = k < found ? __float_as_uint(tx[k]) : 0u;
        ((uint32_t *)(out + row))[tid] = v;
        if (host) ((uint32_t *)(host + row))[tid] = v;
        if (tid == 0 && ids) ids[row] = id;
    }
}

__global__ void pick_noise_kernel(float *dst, int n) {
    pdl_wait();
    int k = blockIdx.x * blockDim.x + threadIdx.x;
    if (k < n) dst[k] = gumbel_bits((uint32_t)k);
    pdl_launch();
}

void cu_pick(const cu_launch *L, hearth_pick *out, const float *logits, int n_rows, int vocab,
             const hearth_pick_params *params, int32_t *ids, void *scratch, size_t scratch_bytes, hearth_pick *host) {
    /* chunks of PK_CHUNK, or more a chunk where the row has more than PK_THREADS of them */
    int chunk = PK_CHUNK;
    if (cu_div_up(vocab, chunk) > PK_THREADS) chunk = (int)cu_div_up(cu_div_up(vocab, PK_THREADS), 4) * 4;
    const int n_part = (int)cu_div_up(vocab, chunk);
    int2 *part = (int2 *)scratch;
    if (part && n_rows <= 65535 && sizeof(int2) * (size_t)n_rows * n_part <= scratch_bytes) { /* grid y <= 65535 */
        cu_launch_k(L, pick_part_kernel, dim3(n_part, n_rows), dim3(PK_PART_THREADS), 0, part, logits, vocab, chunk,
                    n_part);
    } else {
        part = NULL;
    }
    cu_launch_k(L, pick_kernel, dim3(n_rows), dim3(PK_THREADS), 0, out, logits, vocab, params, (const int2 *)part,
                n_part, ids, host);
}

void cu_pick_noise(const cu_launch *L, float *dst, int n) {
    cu_launch_k(L, pick_noise_kernel, dim3(cu_div_up(n, 256)), dim3(256), 0, dst, n);
}
