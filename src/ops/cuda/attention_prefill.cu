/* attention_prefill.cu - causal attention for tiles of 64 rows of one
 * sequence on the tensor cores (mma.sync m16n8k16, f16 operands, f32
 * accumulators), flash-attention 2 style.
 *
 * A block (4 warps) owns 64 query rows of one head; warp w owns rows
 * 16w..16w+15. Q is scaled by scale*log2(e) and held in registers as A
 * fragments. For each 64-position KV tile: K and V are read from the paged
 * cache into shared memory as f16 (an f32 cache rounded on the way, an f16
 * cache copied as stored, 16 bytes a load) ([position][dim], rows padded
 * by 8 halves so fragment loads are free of bank conflicts); S = Q K^T; each
 * score outside [lo(row), pos(row)] is masked; the online softmax rescales the
 * running output; P (the probabilities, in registers, re-packed as A
 * fragments) times V (B fragments via ldmatrix.trans) accumulates it.
 * Tiles are visited heaviest (latest positions) first. */
#include "ops/cuda/attention.cuh"

#include <limits.h>

__device__ __forceinline__ uint32_t pack_h2(float a, float b) {
    __half2 h = __floats2half2_rn(a, b);
    return *(uint32_t *)&h;
}

__device__ __forceinline__ void mma_f16(float *c, const uint32_t *a, uint32_t b0, uint32_t b1) {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
        "{%0,%1,%2,%3};"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

__device__ __forceinline__ void ldsm_x4_trans(uint32_t *r, const void *p) {
    unsigned s = (unsigned)__cvta_generic_to_shared(p);
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(s));
}

template <int HD, typename E>
__global__ void __launch_bounds__(128)
    attn_prefill_kernel(float *__restrict__ out, const float *__restrict__ q, cu_kv kv, const int32_t *__restrict__ seq,
                        const int32_t *__restrict__ pos, int T, int n_heads, int n_kv, float qscale, int window) {
    constexpr int LD = HD + 8;   /* halves per shared row */
    constexpr int NKS = HD / 16; /* k-steps over the head dim */
    constexpr int NDT = HD / 8;  /* output n-tiles over the head dim */
    constexpr int F4 = HD / 4;   /* float4 per row */
    __shared__ __align__(16) __half Ks[64 * LD];
    __shared__ __align__(16) __half Vs[64 * LD];
    __shared__ int rlo[64], rhi[64];
    __shared__ int s_lo, s_hi;
    __shared__ long long offs[64];

    pdl_wait();
    const int tid = threadIdx.x, lane = tid & 31, w = tid >> 5;
    const int ntiles = (T + 63) / 64;
    const int tile = ntiles - 1 - (int)blockIdx.x;
    const int h = blockIdx.y, kvh = h / (n_heads / n_kv);
    if (!tile_uniform(seq, T, tile, 64)) return;
    const int r0 = tile * 64, nrows = min(64, T - r0);
    const int sq = seq[r0];
    const int32_t *trow = kv.table + (size_t)sq * kv.max_blocks;

    if (tid == 0) {
        s_lo = INT_MAX;
        s_hi = -1;
    }
    __syncthreads();
    if (tid < 64) {
        int hi = -1, lo = 0;
        if (tid < nrows) {
            hi = pos[r0 + tid];
            lo = window > 0 ? max(0, hi - window + 1) : 0;
            atomicMin(&s_lo, lo);
            atomicMax(&s_hi, hi);
        }
        rlo[tid] = lo;
        rhi[tid] = hi;
    }
    /* Q tile, scaled, staged in Ks */
    for (int f = tid; f < 64 * F4; f += 128) {
        int r = f / F4, c = (f % F4) * 4;
        float4 v = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
        if (r < nrows) v = __ldg((const float4 *)(q + ((size_t)(r0 + r) * n_heads + h) * HD + c));
        __half2 *d = (__half2 *)&Ks[r * LD + c];
        d[0] = __floats2half2_rn(v.x * qscale, v.y * qscale);
        d[1] = __floats2half2_rn(v.z * qscale, v.w * qscale);
    }
    __syncthreads();

    const int g = lane >> 2, cq = 2 * (lane & 3);
    const int ra = 16 * w + g, rb = ra + 8;
    uint32_t qf[NKS][4];
#pragma unroll
    for (int kk = 0; kk < NKS; kk++) {
        qf[kk][0] = *(const uint32_t *)&Ks[ra * LD + 16 * kk + cq];
        qf[kk][1] = *(const uint32_t *)&Ks[rb * LD + 16 * kk + cq];
        qf[kk][2] = *(const uint32_t *)&Ks[ra * LD + 16 * kk + 8 + cq];
        qf[kk][3] = *(const uint32_t *)&Ks[rb * LD + 16 * kk + 8 + cq];
    }
    const int loA = rlo[ra], hiA = rhi[ra], loB = rlo[rb], hiB = rhi[rb];
    const int kv_lo = s_lo, kv_hi = s_hi;

    float o[NDT][4];
#pragma unroll
    for (int j = 0; j < NDT; j++) o[j][0] = o[j][1] = o[j][2] = o[j][3] = 0.0f;
    float mA = -INFINITY, mB = -INFINITY, lA = 0.0f, lB = 0.0f;
    const E *kbase = (const E *)kv.k + (size_t)kvh * HD, *vbase = (const E *)kv.v + (size_t)kvh * HD;

    for (int kb = kv_lo; kb <= kv_hi; kb += 64) {
        __syncthreads(); /* the previous tile (or the Q staging) is consumed */
        if (tid < 64) {
            int p = kb + tid;
            offs[tid] = p <= kv_hi ? ((long long)trow[p / kv.block_size] * kv.block_size + p % kv.block_size) *
                                         kv.kv_dim
                                   : -1;
        }
        __syncthreads();
        if constexpr (sizeof(E) == 2) {
            /* f16 cache: 8 halves (16 bytes) of K and of V per load, stored as read */
            constexpr int F8 = HD / 8;
#pragma unroll 4
            for (int f = tid; f < 64 * F8; f += 128) {
                int i = f / F8, c = (f % F8) * 8;
                long long off = offs[i];
                uint4 k8 = make_uint4(0u, 0u, 0u, 0u), v8 = k8;
                if (off >= 0) {
                    k8 = __ldg((const uint4 *)(kbase + off + c));
                    v8 = __ldg((const uint4 *)(vbase + off + c));
                }
                *(uint4 *)&Ks[i * LD + c] = k8;
                *(uint4 *)&Vs[i * LD + c] = v8;
            }
        } else {
            /* every load of the tile is independent: eight float4 of K and V in flight per thread at a time */
#pragma unroll 8
            for (int f = tid; f < 64 * F4; f += 128) {
                int i = f / F4, c = (f % F4) * 4;
                long long off = offs[i];
                float4 k4 = make_float4(0.0f, 0.0f, 0.0f, 0.0f), v4 = k4;
                if (off >= 0) {
                    /* read-only loads: they may be hoisted above the shared stores */
                    k4 = __ldg((const float4 *)(kbase + off + c));
                    v4 = __ldg((const float4 *)(vbase + off + c));
                }
                __half2 *dk = (__half2 *)&Ks[i * LD + c], *dv = (__half2 *)&Vs[i * LD + c];
                dk[0] = __floats2half2_rn(k4.x, k4.y);
                dk[1] = __floats2half2_rn(k4.z, k4.w);
                dv[0] = __floats2half2_rn(v4.x, v4.y);
                dv[1] = __floats2half2_rn(v4.z, v4.w);
            }
        }
        __syncthreads();

        float s[8][4];
#pragma unroll
        for (int j = 0; j < 8; j++) {
            s[j][0] = s[j][1] = s[j][2] = s[j][3] = 0.0f;
#pragma unroll
            for (int kk = 0; kk < NKS; kk++) {
                uint32_t b0 = *(const uint32_t *)&Ks[(8 * j + g) * LD + 16 * kk + cq];
                uint32_t b1 = *(const uint32_t *)&Ks[(8 * j + g) * LD + 16 * kk + 8 + cq];
                mma_f16(s[j], qf[kk], b0, b1);
            }
        }
        float mxA = -INFINITY, mxB = -INFINITY;
#pragma unroll
        for (int j = 0; j < 8; j++) {
#pragma unroll
            for (int e = 0; e < 2; e++) {
                int p = kb + 8 * j + cq + e;
                if (p < loA || p > hiA) s[j][e] = -INFINITY;
                if (p < loB || p > hiB) s[j][2 + e] = -INFINITY;
                mxA = fmaxf(mxA, s[j][e]);
                mxB = fmaxf(mxB, s[j][2 + e]);
            }
        }
#pragma unroll
        for (int o2 = 1; o2 <= 2; o2 <<= 1) {
            mxA = fmaxf(mxA, __shfl_xor_sync(0xffffffffu, mxA, o2));
            mxB = fmaxf(mxB, __shfl_xor_sync(0xffffffffu, mxB, o2));
        }
        const float mnA = fmaxf(mA, mxA), mnB = fmaxf(mB, mxB);
        const float uA = mnA == -INFINITY ? 0.0f : mnA, uB = mnB == -INFINITY ? 0.0f : mnB;
        const float cA = exp2f(mA - uA), cB = exp2f(mB - uB);
        mA = mnA;
        mB = mnB;
        lA *= cA;
        lB *= cB;
#pragma unroll
        for (int j = 0; j < NDT; j++) {
            o[j][0] *= cA;
            o[j][1] *= cA;
            o[j][2] *= cB;
            o[j][3] *= cB;
        }
        uint32_t pf[4][4];
#pragma unroll
        for (int j = 0; j < 8; j++) {
            float p0 = exp2f(s[j][0] - uA), p1 = exp2f(s[j][1] - uA);
            float p2 = exp2f(s[j][2] - uB), p3 = exp2f(s[j][3] - uB);
            lA += p0 + p1;
            lB += p2 + p3;
            pf[j >> 1][(j & 1) * 2 + 0] = pack_h2(p0, p1);
            pf[j >> 1][(j & 1) * 2 + 1] = pack_h2(p2, p3);
        }
#pragma unroll
        for (int jd = 0; jd < NDT; jd++) {
#pragma unroll
            for (int pr = 0; pr < 2; pr++) {
                uint32_t b[4];
                ldsm_x4_trans(b, &Vs[(32 * pr + lane) * LD + 8 * jd]);
                mma_f16(o[jd], pf[2 * pr], b[0], b[1]);
                mma_f16(o[jd], pf[2 * pr + 1], b[2], b[3]);
            }
        }
    }
    pdl_launch();
#pragma unroll
    for (int o2 = 1; o2 <= 2; o2 <<= 1) {
        lA += __shfl_xor_sync(0xffffffffu, lA, o2);
        lB += __shfl_xor_sync(0xffffffffu, lB, o2);
    }
    const float iA = lA > 0.0f ? 1.0f / lA : 0.0f, iB = lB > 0.0f ? 1.0f / lB : 0.0f;
#pragma unroll
    for (int jd = 0; jd < NDT; jd++) {
        if (ra < nrows)
            *(float2 *)(out + ((size_t)(r0 + ra) * n_heads + h) * HD + 8 * jd + cq) =
                make_float2(o[jd][0] * iA, o[jd][1] * iA);
        if (rb < nrows)
            *(float2 *)(out + ((size_t)(r0 + rb) * n_heads + h) * HD + 8 * jd + cq) =
                make_float2(o[jd][2] * iB, o[jd][3] * iB);
    }
}

void cu_attention_prefill(const cu_launch *L, float *out, const float *q, int T, const cu_kv *kv, const int32_t *seq,
                          const int32_t *pos, int n_heads, int n_kv_heads, int head_dim, float scale, int window) {
    const float qscale = scale * 1.4426950408889634f; /* log2(e): the softmax runs in exp2 */
    dim3 grid((T + 63) / 64, n_heads);
    if (head_dim == 128 && kv->f16)
        cu_launch_k(L, attn_prefill_kernel<128, __half>, grid, dim3(128), 0, out, q, *kv, seq, pos, T, n_heads,
                    n_kv_heads, qscale, window);
    else if (head_dim == 128)
        cu_launch_k(L, attn_prefill_kernel<128, float>, grid, dim3(128), 0, out, q, *kv, seq, pos, T, n_heads,
                    n_kv_heads, qscale, window);
    else if (head_dim == 64 && kv->f16)
        cu_launch_k(L, attn_prefill_kernel<64, __half>, grid, dim3(128), 0, out, q, *kv, seq, pos, T, n_heads,
                    n_kv_heads, qscale, window);
    else if (head_dim == 64)
        cu_launch_k(L, attn_prefill_kernel<64, float>, grid, dim3(128), 0, out, q, *kv, seq, pos, T, n_heads,
                    n_kv_heads, qscale, window);
}
