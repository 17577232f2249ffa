/* mmv.cu - matrix-vector products for decode and small batches (T <= 8):
 * y[T][N] = x[T][K] @ W^T, each weight byte read once from device memory for
 * all T rows.
 *
 * Float weights (F32/F16/BF16): a warp owns R rows and streams them in
 * 16-byte loads (L1 bypassed), x rounded as the CPU backend rounds it (bf16
 * or f16 copies made by xprep.cu), f32 accumulation.
 *
 * Quantized weights (Q4_0, Q4_1, Q8_0, Q4_K, Q6_K): x is q8 / q8_K
 * (xprep.cu) and the dot products are integer (dp4a) per group, then scaled
 * with the CPU backend's fmaf steps. When rows are 16-byte aligned, each warp stages its rows through
 * shared memory in segments with cp.async (double buffered), so the loads are
 * 16 bytes wide and fully coalesced whatever the block size (18, 20, 34, 210
 * bytes); otherwise the blocks are read straight from global memory. */
#include "ops/cuda/cuda_internal.cuh"

/* ---- loads ---------------------------------------------------------------- */

__device__ __forceinline__ uint4 ld_stream16(const void *p) {
    uint4 r;
    asm("ld.global.nc.L1::no_allocate.v4.u32 {%0,%1,%2,%3}, [%4];"
        : "=r"(r.x), "=r"(r.y), "=r"(r.z), "=r"(r.w)
        : "l"(p));
    return r;
}

__device__ __forceinline__ void cp_async16(void *smem, const void *gmem) {
    unsigned s = (unsigned)__cvta_generic_to_shared(smem);
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"(s), "l"(gmem) : "memory");
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;" ::: "memory"); }
__device__ __forceinline__ void cp_async_wait1() { asm volatile("cp.async.wait_group 1;" ::: "memory"); }

__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}

/* ---- float weights -------------------------------------------------------- */

/* 8 (2-byte types) or 4 (f32) elements of a 16-byte chunk, as floats. */
template <int WT> __device__ __forceinline__ void unpack16(uint4 v, float *f);
template <> __device__ __forceinline__ void unpack16<HEARTH_DT_BF16>(uint4 v, float *f) {
    uint32_t w[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
    for (int i = 0; i < 4; i++) {
        f[2 * i] = __uint_as_float(w[i] << 16);
        f[2 * i + 1] = __uint_as_float(w[i] & 0xffff0000u);
    }
}
template <> __device__ __forceinline__ void unpack16<HEARTH_DT_F16>(uint4 v, float *f) {
    uint32_t w[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
    for (int i = 0; i < 4; i++) {
        float2 p = __half22float2(*(const __half2 *)&w[i]);
        f[2 * i] = p.x;
        f[2 * i + 1] = p.y;
    }
}
template <> __device__ __forceinline__ void unpack16<HEARTH_DT_F32>(uint4 v, float *f) {
    f[0] = __uint_as_float(v.x);
    f[1] = __uint_as_float(v.y);
    f[2] = __uint_as_float(v.z);
    f[3] = __uint_as_float(v.w);
}

/* One warp owns rows [R*warp, R*warp + R). Weights and x in 16-byte chunks:
 * chunk c of a row is elements [E*c, E*c + E). */
template <int WT, int NT, int R>
__global__ void __launch_bounds__(256) mmv_float_kernel(const uint8_t *__restrict__ W, size_t row_bytes,
                                                        const void *__restrict__ xp, float *__restrict__ y, int K,
                                                        int N) {
    constexpr int E = WT == HEARTH_DT_F32 ? 4 : 8;
    constexpr int U = 4;
    const int lane = threadIdx.x & 31;
    const int row0 = (int)((blockIdx.x * blockDim.x + threadIdx.x) >> 5) * R;
    const int nch = K / E;
    const uint8_t *wr[R];
#pragma unroll
    for (int r = 0; r < R; r++) wr[r] = W + (size_t)min(row0 + r, N - 1) * row_bytes;
    const uint8_t *xb = (const uint8_t *)xp;
    const size_t xrow = (size_t)K * (WT == HEARTH_DT_F32 ? 4 : 2);

    uint4 w[U][R];
    auto load = [&](int c0) {
#pragma unroll
        for (int u = 0; u < U; u++) {
            int c = c0 + 32 * u;
#pragma unroll
            for (int r = 0; r < R; r++) w[u][r] = c < nch ? ld_stream16(wr[r] + (size_t)c * 16) : make_uint4(0, 0, 0, 0);
        }
    };
    if (row0 < N) load(lane);
    pdl_wait();
    if (row0 >= N) return;

    float acc[R][NT];
#pragma unroll
    for (int r = 0; r < R; r++)
#pragma unroll
        for (int t = 0; t < NT; t++) acc[r][t] = 0.0f;

    for (int c0 = lane; c0 < nch; c0 += 32 * U) {
        uint4 cur[U][R];
#pragma unroll
        for (int u = 0; u < U; u++)
#pragma unroll
            for (int r = 0; r < R; r++) cur[u][r] = w[u][r];
        if (c0 + 32 * U < nch) load(c0 + 32 * U);
#pragma unroll
        for (int u = 0; u < U; u++) {
            int c = c0 + 32 * u;
            if (c < nch) {
                float wf[R][E];
#pragma unroll
                for (int r = 0; r < R; r++) unpack16<WT>(cur[u][r], wf[r]);
#pragma unroll
                for (int t = 0; t < NT; t++) {
                    float xf[E];
                    unpack16<WT>(*(const uint4 *)(xb + (size_t)t * xrow + (size_t)c * 16), xf);
#pragma unroll
                    for (int r = 0; r < R; r++) {
                        float s = acc[r][t];
#pragma unroll
                        for (int e = 0; e < E; e++) s = fmaf(wf[r][e], xf[e], s);
                        acc[r][t] = s;
                    }
                }
            }
        }
    }
    pdl_launch();
#pragma unroll
    for (int r = 0; r < R; r++)
#pragma unroll
        for (int t = 0; t < NT; t++) {
            float v = warp_sum(acc[r][t]);
            if (lane == 0 && row0 + r < N) y[(size_t)t * N + row0 + r] = v;
        }
}

/* Any K and alignment: warp per row, one element per lane step. */
template <int WT>
__device__ __forceinline__ float load_elem(const void *p, size_t i) {
    if constexpr (WT == HEARTH_DT_F32) return ((const float *)p)[i];
    else if constexpr (WT == HEARTH_DT_F16) return __half2float(((const __half *)p)[i]);
    else return __bfloat162float(((const __nv_bfloat16 *)p)[i]);
}

template <int WT, int NT>
__global__ void __launch_bounds__(256) mmv_float_generic(const uint8_t *__restrict__ W, size_t row_bytes,
                                                         const void *__restrict__ xp, float *__restrict__ y, int K,
                                                         int N) {
    pdl_wait();
    const int lane = threadIdx.x & 31;
    const int row = (int)((blockIdx.x * blockDim.x + threadIdx.x) >> 5);
    if (row >= N) return;
    const uint8_t *wr = W + (size_t)row * row_bytes;
    float acc[NT];
#pragma unroll
    for (int t = 0; t < NT; t++) acc[t] = 0.0f;
    for (int k = lane; k < K; k += 32) {
        float wv = load_elem<WT>(wr, k);
#pragma unroll
        for (int t = 0; t < NT; t++) acc[t] = fmaf(wv, load_elem<WT>(xp, (size_t)t * K + k), acc[t]);
    }
    pdl_launch();
#pragma unroll
    for (int t = 0; t < NT; t++) {
        float v = warp_sum(acc[t]);
        if (lane == 0) y[(size_t)t * N + row] = v;
    }
}

/* ---- quantized weights ---------------------------------------------------- */

/* x in q8 (xprep.cu): qs [T][K] int8, ds [T][K/32] = (d, sum, s, 0). */
struct xq8 {
    const int8_t *qs;
    const float4 *ds;
    int K;
};

__device__ __forceinline__ void x_group(const xq8 &x, int t, int g, int *v, float4 *ds) {
    const int4 *p = (const int4 *)(x.qs + (size_t)t * x.K + (size_t)g * QK);
    int4 a = p[0], b = p[1];
    v[0] = a.x; v[1] = a.y; v[2] = a.z; v[3] = a.w;
    v[4] = b.x; v[5] = b.y; v[6] = b.z; v[7] = b.w;
    *ds = x.ds[(size_t)t * (x.K / QK) + g];
}

/* acc[t] += the dot product of one unit of a block (b: its bytes; sub: which
 * unit of the block; gb: the block's index in the row) with x row t. The
 * integer part is exact and each scaling step is the CPU's fmaf (see
 * ops/cpu/matmul_scalar.c); K-quant blocks are cut in 4 units of 64
 * elements, each scaled on its own. */
template <int QT, int NT> struct qdot;

template <int NT> struct qdot<HEARTH_DT_Q4_0, NT> {
    static __device__ __forceinline__ void run(const uint8_t *b, int sub, int gb, const xq8 &x, float *acc) {
        float d = h2f(ld16(b));
        uint32_t q[4];
#pragma unroll
        for (int i = 0; i < 4; i++) q[i] = ld32u(b + 2 + 4 * i);
#pragma unroll
        for (int t = 0; t < NT; t++) {
            int v[8];
            float4 ds;
            x_group(x, t, gb, v, &ds);
            int s = 0;
#pragma unroll
            for (int i = 0; i < 4; i++) {
                s = __dp4a((int)(q[i] & 0x0F0F0F0Fu), v[i], s);
                s = __dp4a((int)((q[i] >> 4) & 0x0F0F0F0Fu), v[4 + i], s);
            }
            s -= 8 * (int)ds.y;
            acc[t] = fmaf(d * ds.x, (float)s, acc[t]);
        }
    }
};

template <int NT> struct qdot<HEARTH_DT_Q4_1, NT> {
    static __device__ __forceinline__ void run(const uint8_t *b, int sub, int gb, const xq8 &x, float *acc) {
        float d = h2f(ld16(b)), m = h2f(ld16(b + 2));
        uint32_t q[4];
#pragma unroll
        for (int i = 0; i < 4; i++) q[i] = ld32u(b + 4 + 4 * i);
#pragma unroll
        for (int t = 0; t < NT; t++) {
            int v[8];
            float4 ds;
            x_group(x, t, gb, v, &ds);
            int s = 0;
#pragma unroll
            for (int i = 0; i < 4; i++) {
                s = __dp4a((int)(q[i] & 0x0F0F0F0Fu), v[i], s);
                s = __dp4a((int)((q[i] >> 4) & 0x0F0F0F0Fu), v[4 + i], s);
            }
            acc[t] = fmaf(d * ds.x, (float)s, acc[t]);
            acc[t] = fmaf(m, ds.z, acc[t]);
        }
    }
};

template <int NT> struct qdot<HEARTH_DT_Q8_0, NT> {
    static __device__ __forceinline__ void run(const uint8_t *b, int sub, int gb, const xq8 &x, float *acc) {
        float d = h2f(ld16(b));
        uint32_t q[8];
#pragma unroll
        for (int i = 0; i < 8; i++) q[i] = ld32u(b + 2 + 4 * i);
#pragma unroll
        for (int t = 0; t < NT; t++) {
            int v[8];
            float4 ds;
            x_group(x, t, gb, v, &ds);
            int s = 0;
#pragma unroll
            for (int i = 0; i < 8; i++) s = __dp4a((int)q[i], v[i], s);
            acc[t] = fmaf(d * ds.x, (float)s, acc[t]);
        }
    }
};

/* Q4_K unit j (0..3): sub-blocks 2j (low nibbles of qs[32j..32j+32)) and 2j+1
 * (high nibbles). */
template <int NT> struct qdot<HEARTH_DT_Q4_K, NT> {
    static __device__ __forceinline__ void run(const uint8_t *b, int j, int gb, const xq8 &x, float *acc) {
        float d = h2f(ld16(b)), dmin = h2f(ld16(b + 2));
        int sc0, m0, sc1, m1;
        q4k_scale_min(b + 4, 2 * j, &sc0, &m0);
        q4k_scale_min(b + 4, 2 * j + 1, &sc1, &m1);
        uint32_t q[8];
#pragma unroll
        for (int i = 0; i < 8; i++) q[i] = ld32u(b + 16 + 32 * j + 4 * i);
        int g0 = gb * 8 + 2 * j;
#pragma unroll
        for (int t = 0; t < NT; t++) {
            int v0[8], v1[8];
            float4 ds0, ds1;
            x_group(x, t, g0, v0, &ds0);
            x_group(x, t, g0 + 1, v1, &ds1);
            int s0 = 0, s1 = 0;
#pragma unroll
            for (int i = 0; i < 8; i++) {
                s0 = __dp4a((int)(q[i] & 0x0F0F0F0Fu), v0[i], s0);
                s1 = __dp4a((int)((q[i] >> 4) & 0x0F0F0F0Fu), v1[i], s1);
            }
            int s = sc0 * s0 + sc1 * s1, mins = m0 * (int)ds0.y + m1 * (int)ds1.y;
            acc[t] = fmaf(d * ds0.x, (float)s, acc[t]);
            acc[t] = fmaf(-(dmin * ds0.x), (float)mins, acc[t]);
        }
    }
};

/* Q6_K unit u (0..3): half n = u/2 of the block, groups k = u%2 and k + 2
 * (low / high nibbles of the same 32 ql bytes, the same 32 qh bytes). */
template <int NT> struct qdot<HEARTH_DT_Q6_K, NT> {
    static __device__ __forceinline__ void run(const uint8_t *b, int u, int gb, const xq8 &x, float *acc) {
        const int n = u >> 1, kk = u & 1;
        float d = h2f(ld16(b + 208));
        const uint8_t *ql = b + 64 * n + 32 * kk, *qh = b + 128 + 32 * n;
        const int8_t *sc = (const int8_t *)(b + 192 + 8 * n);
        int scA0 = sc[2 * kk], scA1 = sc[2 * kk + 1], scB0 = sc[2 * kk + 4], scB1 = sc[2 * kk + 5];
        int va[8], vb[8];
#pragma unroll
        for (int i = 0; i < 8; i++) {
            uint32_t L = ld32u(ql + 4 * i), H = ld32u(qh + 4 * i);
            va[i] = (int)__vsubss4((L & 0x0F0F0F0Fu) | (((H >> (2 * kk)) & 0x03030303u) << 4), 0x20202020u);
            vb[i] = (int)__vsubss4(((L >> 4) & 0x0F0F0F0Fu) | (((H >> (2 * kk + 4)) & 0x03030303u) << 4),
                                   0x20202020u);
        }
        int gA = gb * 8 + 4 * n + kk;
#pragma unroll
        for (int t = 0; t < NT; t++) {
            int xa[8], xb[8];
            float4 dsa, dsb;
            x_group(x, t, gA, xa, &dsa);
            x_group(x, t, gA + 2, xb, &dsb);
            int a0 = 0, a1 = 0, b0 = 0, b1 = 0;
#pragma unroll
            for (int i = 0; i < 4; i++) {
                a0 = __dp4a(va[i], xa[i], a0);
                a1 = __dp4a(va[4 + i], xa[4 + i], a1);
                b0 = __dp4a(vb[i], xb[i], b0);
                b1 = __dp4a(vb[4 + i], xb[4 + i], b1);
            }
            int s = scA0 * a0 + scA1 * a1 + scB0 * b0 + scB1 * b1;
            acc[t] = fmaf(d * dsa.x, (float)s, acc[t]);
        }
    }
};

/* Rows 16-byte aligned: each warp streams its rows (gw, gw + nw, ...) in
 * segments of SEG_BLOCKS blocks through a double buffer in shared memory. */
template <int QT, int NT>
__global__ void __launch_bounds__(128) mmv_quant_staged(const uint8_t *__restrict__ W, size_t row_bytes, xq8 x,
                                                        float *__restrict__ y, int N) {
    using TR = qtraits<QT>;
    constexpr int SEG = TR::SEG_BLOCKS * TR::BYTES;
    static_assert(SEG % 16 == 0, "segment must be whole 16-byte chunks");
    __shared__ __align__(16) uint8_t sm[4][2][SEG];
    const int lane = threadIdx.x & 31, wid = threadIdx.x >> 5;
    const int gw = blockIdx.x * 4 + wid, nw = gridDim.x * 4;
    const int nblk_row = x.K / TR::ELEMS;
    const int nseg = (int)((row_bytes + SEG - 1) / SEG);
    const int nrows = gw < N ? (N - 1 - gw) / nw + 1 : 0;
    const int nitems = nrows * nseg;

    auto issue = [&](int it) {
        int j = it / nseg, s = it - j * nseg;
        size_t row = (size_t)gw + (size_t)j * nw;
        const uint8_t *src = W + row * row_bytes + (size_t)s * SEG;
        int bytes = (int)min((size_t)SEG, row_bytes - (size_t)s * SEG);
        uint8_t *dst = sm[wid][it & 1];
        for (int c = lane * 16; c < bytes; c += 512) cp_async16(dst + c, src + c);
    };
    if (nitems > 0) issue(0);
    cp_async_commit();
    pdl_wait();

    float acc[NT];
#pragma unroll
    for (int t = 0; t < NT; t++) acc[t] = 0.0f;
    for (int it = 0; it < nitems; it++) {
        if (it + 1 < nitems) issue(it + 1);
        cp_async_commit();
        cp_async_wait1();
        __syncwarp();
        int j = it / nseg, s = it - j * nseg;
        int blk0 = s * TR::SEG_BLOCKS;
        int nu = min((int)TR::SEG_BLOCKS, nblk_row - blk0) * TR::UNITS;
        const uint8_t *sb = sm[wid][it & 1];
        for (int u = lane; u < nu; u += 32) {
            int b = u / TR::UNITS;
            qdot<QT, NT>::run(sb + b * TR::BYTES, u - b * TR::UNITS, blk0 + b, x, acc);
        }
        __syncwarp();
        if (s == nseg - 1) {
            int row = gw + j * nw;
#pragma unroll
            for (int t = 0; t < NT; t++) {
                float v = warp_sum(acc[t]);
                if (lane == 0) y[(size_t)t * N + row] = v;
                acc[t] = 0.0f;
            }
        }
    }
    pdl_launch();
}

/* Any row alignment: warp per row, blocks read straight from global memory. */
template <int QT, int NT>
__global__ void __launch_bounds__(256) mmv_quant_direct(const uint8_t *__restrict__ W, size_t row_bytes, xq8 x,
                                                        float *__restrict__ y, int N) {
    using TR = qtraits<QT>;
    pdl_wait();
    const int lane = threadIdx.x & 31;
    const int row = (int)((blockIdx.x * blockDim.x + threadIdx.x) >> 5);
    if (row >= N) return;
    const uint8_t *wr = W + (size_t)row * row_bytes;
    const int nu = x.K / TR::ELEMS * TR::UNITS;
    float acc[NT];
#pragma unroll
    for (int t = 0; t < NT; t++) acc[t] = 0.0f;
    for (int u = lane; u < nu; u += 32) {
        int b = u / TR::UNITS;
        qdot<QT, NT>::run(wr + (size_t)b * TR::BYTES, u - b * TR::UNITS, b, x, acc);
    }
    pdl_launch();
#pragma unroll
    for (int t = 0; t < NT; t++) {
        float v = warp_sum(acc[t]);
        if (lane == 0) y[(size_t)t * N + row] = v;
    }
}

/* ---- dispatch ------------------------------------------------------------- */

int cu_mmv_supported(hearth_dtype t) {
    switch (t) {
    case HEARTH_DT_F32: case HEARTH_DT_F16: case HEARTH_DT_BF16: case HEARTH_DT_Q4_0: case HEARTH_DT_Q4_1:
    case HEARTH_DT_Q8_0: case HEARTH_DT_Q4_K: case HEARTH_DT_Q6_K: return 1;
    default: return 0;
    }
}

int cu_mmv_xprep_kind(hearth_dtype t) {
    switch (t) {
    case HEARTH_DT_F32: return XPREP_NONE;
    case HEARTH_DT_F16: return XPREP_F16;
    case HEARTH_DT_BF16: return XPREP_BF16;
    case HEARTH_DT_Q4_K: case HEARTH_DT_Q6_K: return XPREP_Q8K;
    default: return XPREP_Q8;
    }
}

template <int WT, int NT>
static void launch_float(const cu_launch *L, float *y, const void *xp, const void *w, int K, int N,
                         size_t row_bytes) {
    constexpr int E = WT == HEARTH_DT_F32 ? 4 : 8;
    int fast = K % E == 0 && ((uintptr_t)w & 15) == 0 && row_bytes % 16 == 0 && ((uintptr_t)xp & 15) == 0;
    if (fast) {
        constexpr int R = 2;
        int warps = cu_div_up(N, R);
        cu_launch_k(L, mmv_float_kernel<WT, NT, R>, dim3(cu_div_up(warps, 8)), dim3(256), 0, (const uint8_t *)w,
                    row_bytes, xp, y, K, N);
    } else {
        cu_launch_k(L, mmv_float_generic<WT, NT>, dim3(cu_div_up(N, 8)), dim3(256), 0, (const uint8_t *)w,
                    row_bytes, xp, y, K, N);
    }
}

template <int QT, int NT>
static void launch_quant(const cu_launch *L, float *y, const void *xp, const void *w, int K, int N,
                         size_t row_bytes) {
    size_t n = (size_t)NT * (size_t)K;
    xq8 x = {(const int8_t *)xp, (const float4 *)((const int8_t *)xp + n), K};
    if (((uintptr_t)w & 15) == 0 && row_bytes % 16 == 0) {
        int blocks = cu_div_up(N, 4);
        if (blocks > L->n_sm * 16) blocks = L->n_sm * 16;
        cu_launch_k(L, mmv_quant_staged<QT, NT>, dim3(blocks), dim3(128), 0, (const uint8_t *)w, row_bytes, x, y,
                    N);
    } else {
        cu_launch_k(L, mmv_quant_direct<QT, NT>, dim3(cu_div_up(N, 8)), dim3(256), 0, (const uint8_t *)w,
                    row_bytes, x, y, N);
    }
}

template <int NT>
static void launch_nt(const cu_launch *L, float *y, const void *xp, const void *w, hearth_dtype t, int K, int N,
                      size_t rb) {
    switch (t) {
    case HEARTH_DT_F32: launch_float<HEARTH_DT_F32, NT>(L, y, xp, w, K, N, rb); break;
    case HEARTH_DT_F16: launch_float<HEARTH_DT_F16, NT>(L, y, xp, w, K, N, rb); break;
    case HEARTH_DT_BF16: launch_float<HEARTH_DT_BF16, NT>(L, y, xp, w, K, N, rb); break;
    case HEARTH_DT_Q4_0: launch_quant<HEARTH_DT_Q4_0, NT>(L, y, xp, w, K, N, rb); break;
    case HEARTH_DT_Q4_1: launch_quant<HEARTH_DT_Q4_1, NT>(L, y, xp, w, K, N, rb); break;
    case HEARTH_DT_Q8_0: launch_quant<HEARTH_DT_Q8_0, NT>(L, y, xp, w, K, N, rb); break;
    case HEARTH_DT_Q4_K: launch_quant<HEARTH_DT_Q4_K, NT>(L, y, xp, w, K, N, rb); break;
    case HEARTH_DT_Q6_K: launch_quant<HEARTH_DT_Q6_K, NT>(L, y, xp, w, K, N, rb); break;
    default: break;
    }
}

void cu_mmv(const cu_launch *L, float *y, const void *xp, int T, const void *w, hearth_dtype t, int K, int N,
            size_t row_bytes) {
    switch (T) {
    case 1: launch_nt<1>(L, y, xp, w, t, K, N, row_bytes); break;
    case 2: launch_nt<2>(L, y, xp, w, t, K, N, row_bytes); break;
    case 3: launch_nt<3>(L, y, xp, w, t, K, N, row_bytes); break;
    case 4: launch_nt<4>(L, y, xp, w, t, K, N, row_bytes); break;
    case 5: launch_nt<5>(L, y, xp, w, t, K, N, row_bytes); break;
    case 6: launch_nt<6>(L, y, xp, w, t, K, N, row_bytes); break;
    case 7: launch_nt<7>(L, y, xp, w, t, K, N, row_bytes); break;
    case 8: launch_nt<8>(L, y, xp, w, t, K, N, row_bytes); break;
    default: break;
    }
}
