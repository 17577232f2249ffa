/* dequant.cu - weight rows dequantized to bf16, the A operand of the cuBLAS
 * path of matmul (T above the GEMV range). Values are computed exactly as
 * the CPU dequantizes them, then rounded to bf16.
 *
 * Split Q4_0 / Q8_0 rows (split_rows.cu, every such weight the loader could
 * re-lay) are a write-bound stream: 3.6x (Q4_0) or 1.9x (Q8_0) more bytes
 * out than in. A thread makes 8 elements, one 16-byte store, so a warp's
 * store is 512 contiguous bytes, and it loads the codes of DEQ_U such pieces
 * before it stores any, so that a thread's short life keeps several loads
 * in flight. Other types and layouts (the other types' split rows too):
 * 32-element groups through shared memory (dequant_groups_kernel). The
 * kernel they replaced, a thread a group, took 42.2 us a matrix where these
 * take 22.9 (notes/cuda-kernels.md v16). */
#include "ops/cuda/cuda_internal.cuh"

#define DEQ_NT 256
#define DEQ_U 4

template <int QT>
__global__ void __launch_bounds__(DEQ_NT) dequant_split_kernel(__nv_bfloat16 *__restrict__ dst,
                                                             const uint8_t *__restrict__ W, int K, size_t row_bytes,
                                                             int r0, unsigned n_items) {
    constexpr int QB = split_fmt<QT>::QB; /* code bytes of a 32-group: 16 (Q4_0) or 32 (Q8_0) */
    static_assert(QT == HEARTH_DT_Q4_0 || QT == HEARTH_DT_Q8_0, "a block is one 32-group with an f16 scale");
    const unsigned ipr = (unsigned)K / 8, nb = (unsigned)K / 32;
    const unsigned base = blockIdx.x * (DEQ_NT * DEQ_U) + threadIdx.x;
    uint2 c[DEQ_U];
    float d[DEQ_U];
    int shift[DEQ_U];
    /* weights are never written after load: their loads may precede the wait */
#pragma unroll
    for (int u = 0; u < DEQ_U; u++) {
        const unsigned it = base + u * DEQ_NT;
        if (it < n_items) {
            const unsigned r = it / ipr, k8 = it - r * ipr, g = k8 >> 2, q = k8 & 3;
            const uint8_t *row = W + (size_t)(r0 + r) * row_bytes;
            /* Q4_0: elements 8q.. are the low (q < 2) or high nibbles of code bytes 8(q & 1)..; Q8_0: bytes 8q.. */
            c[u] = *(const uint2 *)(row + g * QB + (QT == HEARTH_DT_Q4_0 ? (q & 1) * 8 : q * 8));
            d[u] = h2f(ld16(row + (size_t)nb * QB + 2 * g));
            shift[u] = (q >> 1) * 4;
        }
    }
    pdl_wait();
#pragma unroll
    for (int u = 0; u < DEQ_U; u++) {
        const unsigned it = base + u * DEQ_NT;
        if (it < n_items) {
            const uint8_t *b = (const uint8_t *)&c[u];
            float f[8];
#pragma unroll
            for (int j = 0; j < 8; j++)
                f[j] = QT == HEARTH_DT_Q4_0 ? (float)(((b[j] >> shift[u]) & 0xF) - 8) * d[u] : (float)(int8_t)b[j] * d[u];
            __nv_bfloat162 h[4];
#pragma unroll
            for (int e = 0; e < 4; e++) h[e] = __floats2bfloat162_rn(f[2 * e], f[2 * e + 1]);
            ((uint4 *)dst)[it] = *(const uint4 *)h;
        }
    }
    pdl_launch();
}

/* Other types and layouts: a thread makes DEQ_G 32-groups, DEQ_NT apart,
 * with the CPU's arithmetic (deq_row_group32); the block's groups are
 * contiguous in dst and go out through shared memory (rows of 5 chunks:
 * 80 bytes apart, no bank conflicts) as 16-byte stores, 512 contiguous bytes
 * a warp. */
#define DEQ_G 2
template <int QT>
__global__ void __launch_bounds__(DEQ_NT) dequant_groups_kernel(__nv_bfloat16 *__restrict__ dst,
                                                              const uint8_t *__restrict__ W, int K, size_t row_bytes,
                                                              int r0, unsigned n_groups, int split) {
    __shared__ uint4 sm[DEQ_G * DEQ_NT * 5];
    const unsigned gpr = (unsigned)K / 32, b0 = blockIdx.x * (DEQ_NT * DEQ_G);
    const unsigned n = min(n_groups - b0, (unsigned)(DEQ_NT * DEQ_G)); /* this block's groups */
#pragma unroll
    for (int u = 0; u < DEQ_G; u++) {
        const unsigned j = u * DEQ_NT + threadIdx.x, i = b0 + j;
        if (j < n) { /* weights only: before the wait */
            const unsigned r = i / gpr, g = i - r * gpr;
            float f[32];
            deq_row_group32<QT>(W + (size_t)(r0 + r) * row_bytes, K / qtraits<QT>::ELEMS, (int)g, split, f);
#pragma unroll
            for (int v = 0; v < 4; v++) {
                __nv_bfloat162 h[4];
#pragma unroll
                for (int e = 0; e < 4; e++) h[e] = __floats2bfloat162_rn(f[8 * v + 2 * e], f[8 * v + 2 * e + 1]);
                sm[j * 5 + v] = *(const uint4 *)h;
            }
        }
    }
    __syncthreads();
    pdl_wait();
    uint4 *o = (uint4 *)dst + (size_t)b0 * 4;
    for (unsigned c = threadIdx.x; c < n * 4; c += DEQ_NT) o[c] = sm[(c >> 2) * 5 + (c & 3)];
    pdl_launch();
}

template <typename S>
__global__ void float_to_bf16_kernel(__nv_bfloat16 *__restrict__ dst, const uint8_t *__restrict__ W, int K,
                                     size_t row_bytes, int r0, int nr) {
    pdl_wait();
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < (size_t)nr * K) {
        int r = (int)(i / K), k = (int)(i % K);
        S v = ((const S *)(W + (size_t)(r0 + r) * row_bytes))[k];
        dst[i] = __float2bfloat16_rn((float)v);
    }
    pdl_launch();
}

void cu_dequant_bf16(const cu_launch *L, __nv_bfloat16 *dst, const void *w, hearth_dtype t, int K, size_t row_bytes,
                     int split, int r0, int nr) {
    const uint8_t *W = (const uint8_t *)w;
    if (split && (t == HEARTH_DT_Q4_0 || t == HEARTH_DT_Q8_0)) {
        const unsigned n_items = (unsigned)((size_t)nr * K / 8);
        const dim3 grid(cu_div_up((long)n_items, DEQ_NT * DEQ_U));
        if (t == HEARTH_DT_Q4_0)
            cu_launch_k(L, dequant_split_kernel<HEARTH_DT_Q4_0>, grid, dim3(DEQ_NT), 0, dst, W, K, row_bytes, r0, n_items);
        else
            cu_launch_k(L, dequant_split_kernel<HEARTH_DT_Q8_0>, grid, dim3(DEQ_NT), 0, dst, W, K, row_bytes, r0, n_items);
        return;
    }
    const unsigned n_groups = (unsigned)((size_t)nr * (K / 32));
    const dim3 grid(cu_div_up((long)n_groups, DEQ_NT * DEQ_G)), block(DEQ_NT);
    int eblocks = cu_div_up((long)nr * K, 256);
    switch (t) {
#define DEQ_GROUPS(QT)                                                                                                 \
    case QT: cu_launch_k(L, dequant_groups_kernel<QT>, grid, block, 0, dst, W, K, row_bytes, r0, n_groups, split); break
    DEQ_GROUPS(HEARTH_DT_Q4_0); DEQ_GROUPS(HEARTH_DT_Q4_1); DEQ_GROUPS(HEARTH_DT_Q5_0); DEQ_GROUPS(HEARTH_DT_Q5_1);
    DEQ_GROUPS(HEARTH_DT_Q8_0); DEQ_GROUPS(HEARTH_DT_Q2_K); DEQ_GROUPS(HEARTH_DT_Q3_K); DEQ_GROUPS(HEARTH_DT_Q4_K);
    DEQ_GROUPS(HEARTH_DT_Q5_K); DEQ_GROUPS(HEARTH_DT_Q6_K); DEQ_GROUPS(HEARTH_DT_IQ4_NL); DEQ_GROUPS(HEARTH_DT_IQ4_XS);
#undef DEQ_GROUPS
    case HEARTH_DT_F32: cu_launch_k(L, float_to_bf16_kernel<float>, dim3(eblocks), dim3(256), 0, dst, W, K, row_bytes, r0, nr); break;
    case HEARTH_DT_F16: cu_launch_k(L, float_to_bf16_kernel<__half>, dim3(eblocks), dim3(256), 0, dst, W, K, row_bytes, r0, nr); break;
    default: break;
    }
}
