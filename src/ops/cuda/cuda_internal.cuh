/* cuda_internal.cuh - what the CUDA op files share: the launch context, the
 * launch helper (programmatic dependent launch), the ggml block layouts as
 * device code, and each op's launcher.
 *
 * Kernel rule (programmatic dependent launch): every kernel calls pdl_wait()
 * before it reads anything an earlier op wrote and before its first global
 * write, and calls pdl_launch() once its main loop is done, or - the
 * small latency-bound kernels of a decode step (add_rmsnorm, rope_kv, the
 * few-rows attention, xprep), given `early` - right after the wait, so that
 * the next kernel (a GEMV) launches and streams its weights while they run;
 * never before the wait, which keeps every kernel but the one just before
 * finished when a kernel starts. Reads of what
 * only uploads write (weights; positions, sequences and block tables) may
 * come before the wait: an upload is never overlapped, so it completed
 * before any later kernel started. With PDL off both are no-ops. */
#ifndef HEARTH_OPS_CUDA_INTERNAL_CUH
#define HEARTH_OPS_CUDA_INTERNAL_CUH

#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>
#include <cuda_runtime.h>
#include <stddef.h>
#include <stdint.h>

#include "ops/cuda/ops_cuda.h"

/* Where launchers put their stream, the device's shape and the first error. */
struct cu_launch {
    cudaStream_t stream;
    int n_sm;
    int pdl;
    int pdl_early; /* kernels taking `early` trigger right after their wait (HEARTH_PDL_EARLY=0: after the work) */
    cudaError_t *err; /* sticky: the first failure is kept */
};

static inline void cu_note(const cu_launch *L, cudaError_t e) {
    if (e != cudaSuccess && *L->err == cudaSuccess) *L->err = e;
}

__device__ __forceinline__ void pdl_wait() { asm volatile("griddepcontrol.wait;" ::: "memory"); }
__device__ __forceinline__ void pdl_launch() { asm volatile("griddepcontrol.launch_dependents;" ::: "memory"); }
/* pdl_wait(), then the trigger when early (pdl_done(early) after the work triggers otherwise) */
__device__ __forceinline__ void pdl_wait_early(int early) {
    pdl_wait();
    if (early) pdl_launch();
}
__device__ __forceinline__ void pdl_done(int early) {
    if (!early) pdl_launch();
}

/* Launch kernel k on L's stream; with L->pdl the launch may start while the
 * previous kernel drains (it then waits in pdl_wait()). Empty grids are
 * skipped. cluster_x > 1: blocks in clusters of cluster_x along x (which
 * must divide grid.x). */
template <typename... KArgs, typename... Args>
static void cu_launch_cluster_k(const cu_launch *L, void (*k)(KArgs...), dim3 grid, dim3 block, size_t smem,
                                int cluster_x, Args... args) {
    if (grid.x == 0 || grid.y == 0 || grid.z == 0) return;
    cudaLaunchConfig_t cfg = {};
    cfg.gridDim = grid;
    cfg.blockDim = block;
    cfg.dynamicSmemBytes = smem;
    cfg.stream = L->stream;
    cudaLaunchAttribute attr[2];
    int n = 0;
    if (L->pdl) {
        attr[n].id = cudaLaunchAttributeProgrammaticStreamSerialization;
        attr[n++].val.programmaticStreamSerializationAllowed = 1;
    }
    if (cluster_x > 1) {
        attr[n].id = cudaLaunchAttributeClusterDimension;
        attr[n++].val.clusterDim = {(unsigned)cluster_x, 1, 1};
    }
    cfg.attrs = attr;
    cfg.numAttrs = n;
    cu_note(L, cudaLaunchKernelEx(&cfg, k, ((KArgs)args)...));
}

template <typename... KArgs, typename... Args>
static void cu_launch_k(const cu_launch *L, void (*k)(KArgs...), dim3 grid, dim3 block, size_t smem,
                        Args... args) {
    cu_launch_cluster_k(L, k, grid, block, smem, 1, args...);
}

/* 1 / rms of a row from each thread's double sum of its squares: summed
 * across the warp, then the NT / 32 warp sums in warp order (red: shared,
 * NT / 32 doubles); every thread gets the result. The rmsnorm kernels
 * round as the CPU does: f32 squares summed in double, the mean rounded to
 * f32. */
template <int NT>
__device__ __forceinline__ float block_inv_rms(double ss, double *red, int dim, float eps) {
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) ss += __shfl_xor_sync(0xffffffffu, ss, o);
    if ((threadIdx.x & 31) == 0) red[threadIdx.x >> 5] = ss;
    __syncthreads();
    double tot = 0.0;
#pragma unroll
    for (int i = 0; i < NT / 32; i++) tot += red[i];
    return 1.0f / sqrtf((float)(tot / dim) + eps);
}

/* A kernel's shared-memory settings, made once per device (they belong to
 * the function on the current device; host-side calls, so also fine while a
 * graph is being captured): dynamic shared memory that takes a block's
 * total (static included) above 48 KB needs an opt-in, and max_carveout
 * asks for the largest carveout, so that more blocks of a
 * shared-memory-heavy kernel fit a multiprocessor. *done is the caller's
 * static set of devices (bits) already set up for k. */
template <typename... KArgs>
static void cu_smem_setup(const cu_launch *L, void (*k)(KArgs...), int smem, bool max_carveout,
                          unsigned long long *done) {
    int dev = -1;
    const bool known = cudaGetDevice(&dev) == cudaSuccess && dev >= 0 && dev < 64;
    const unsigned long long bit = known ? 1ull << dev : 0;
    if (known && (__atomic_load_n(done, __ATOMIC_ACQUIRE) & bit)) return;
    /* the 48 KB default covers static and dynamic shared memory together */
    cudaFuncAttributes fa;
    cudaError_t e = cudaFuncGetAttributes(&fa, k);
    if (e == cudaSuccess && smem + fa.sharedSizeBytes > 48 * 1024)
        e = cudaFuncSetAttribute(k, cudaFuncAttributeMaxDynamicSharedMemorySize, smem);
    if (e == cudaSuccess && max_carveout)
        e = cudaFuncSetAttribute(k, cudaFuncAttributePreferredSharedMemoryCarveout, cudaSharedmemCarveoutMaxShared);
    cu_note(L, e);
    if (known && e == cudaSuccess) __atomic_fetch_or(done, bit, __ATOMIC_RELEASE);
}

static inline int cu_div_up(long a, long b) { return (int)((a + b - 1) / b); }

/* ---- asynchronous copies global -> shared (cp.async, 16 bytes) ---------- */

__device__ __forceinline__ void cp_async16(void *dst, const void *src) {
    unsigned s = (unsigned)__cvta_generic_to_shared(dst);
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"(s), "l"(src) : "memory");
}
/* with valid false the 16 bytes are zero-filled (nothing is read) */
__device__ __forceinline__ void cp_async16(void *dst, const void *src, bool valid) {
    unsigned s = (unsigned)__cvta_generic_to_shared(dst);
    int n = valid ? 16 : 0;
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;" ::"r"(s), "l"(src), "r"(n) : "memory");
}
/* c += a (16x16 f16, row) * b (16x8 f16, col), f32 accumulators */
__device__ __forceinline__ void mma_f16(float *c, const uint32_t *a, uint32_t b0, uint32_t b1) {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
        "{%0,%1,%2,%3};"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

/* the same with bf16 a and b */
__device__ __forceinline__ void mma_bf16(float *c, const uint32_t *a, uint32_t b0, uint32_t b1) {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
        "{%0,%1,%2,%3};"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

/* Four 8 x 8 matrices of 16-bit elements (8 rows of 16 bytes each; lanes
 * 8i..8i+7 give matrix i's row addresses): lane l gets bytes 4 (l % 4) ..
 * 4 (l % 4) + 3 of row l / 4 of each, in r[0..3]. */
__device__ __forceinline__ void ldsm_x4(uint32_t *r, const void *p) {
    unsigned s = (unsigned)__cvta_generic_to_shared(p);
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(s));
}

/* The 8 x 8 matrix of 16-bit elements whose row l / 4, columns 2 (l % 4) and
 * + 1 lane l holds in a, transposed: lane l gets row l / 4, columns 2 (l % 4)
 * and + 1 of the transpose (elements [2 (l % 4)][l / 4], [2 (l % 4) + 1][l / 4]). */
__device__ __forceinline__ uint32_t movm_trans(uint32_t a) {
    uint32_t d;
    asm volatile("movmatrix.sync.aligned.m8n8.trans.b16 %0, %1;" : "=r"(d) : "r"(a));
    return d;
}

__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;" ::: "memory"); }
__device__ __forceinline__ void cp_async_wait1() { asm volatile("cp.async.wait_group 1;" ::: "memory"); }
__device__ __forceinline__ void cp_async_wait_all() { asm volatile("cp.async.wait_group 0;" ::: "memory"); }

/* ---- mbarriers and bulk copies (sm_90) ------------------------------------ */

__device__ __forceinline__ uint32_t smem_u32(const void *p) { return (uint32_t)__cvta_generic_to_shared(p); }
__device__ __forceinline__ void mbar_init(uint32_t bar, uint32_t count) {
    asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(bar), "r"(count) : "memory");
}
__device__ __forceinline__ void mbar_expect_tx(uint32_t bar, uint32_t bytes) {
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(bar), "r"(bytes) : "memory");
}
/* bytes more to come before the phase ends, without an arrival (several threads each adding their copies') */
__device__ __forceinline__ void mbar_add_tx(uint32_t bar, uint32_t bytes) {
    asm volatile("mbarrier.expect_tx.relaxed.cta.shared::cta.b64 [%0], %1;" ::"r"(bar), "r"(bytes) : "memory");
}
__device__ __forceinline__ void mbar_arrive(uint32_t bar) {
    asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" ::"r"(bar) : "memory");
}
/* CLUSTER: acquiring at cluster scope, for what other blocks of the cluster stored into this block's shared
 * memory (st.async ... mbarrier::complete_tx) */
#define MBAR_TRY_WAIT(SEM)                                                                                             \
    asm volatile("{\n.reg .pred p;\nmbarrier.try_wait.parity" SEM ".shared::cta.b64 p, [%1], %2;\n"                    \
                 "selp.u32 %0, 1, 0, p;\n}\n"                                                                          \
                 : "=r"(done)                                                                                          \
                 : "r"(bar), "r"(parity)                                                                               \
                 : "memory")
template <bool CLUSTER = false> __device__ __forceinline__ void mbar_wait(uint32_t bar, uint32_t parity) {
    uint32_t done;
    do {
        if constexpr (CLUSTER)
            MBAR_TRY_WAIT(".acquire.cluster");
        else
            MBAR_TRY_WAIT("");
    } while (!done);
}
#undef MBAR_TRY_WAIT
/* bytes (a multiple of 16) of global src into shared dst, completing on bar (which expects them) */
__device__ __forceinline__ void bulk_load(uint32_t dst, const void *src, uint32_t bytes, uint32_t bar) {
    asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];"
                 ::"r"(dst), "l"(src), "r"(bytes), "r"(bar)
                 : "memory");
}

/* bulk_load for data read once (a token's weights): its L2 lines evicted first, so the stream does not evict
 * what is read again (activations, counters, the K / V cache) */
__device__ __forceinline__ uint64_t l2_evict_first() {
    uint64_t p;
    asm volatile("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;" : "=l"(p));
    return p;
}
__device__ __forceinline__ void bulk_load_once(uint32_t dst, const void *src, uint32_t bytes, uint32_t bar,
                                               uint64_t policy) {
    asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes.L2::cache_hint [%0], [%1], %2, "
                 "[%3], %4;" ::"r"(dst), "l"(src), "r"(bytes), "r"(bar), "l"(policy)
                 : "memory");
}

/* ---- ggml block layouts (device side) ------------------------------------
 * Blocks are read with 2-byte loads: every field of every block type is
 * 2-byte aligned in a row, whatever the row's alignment beyond that. */
#define QK 32

__device__ __forceinline__ float h2f(uint16_t h) { return __half2float(__ushort_as_half(h)); }
__device__ __forceinline__ uint16_t ld16(const uint8_t *p) { return *(const uint16_t *)p; }
__device__ __forceinline__ uint32_t ld32u(const uint8_t *p) {
    return (uint32_t)ld16(p) | ((uint32_t)ld16(p + 2) << 16);
}

template <int QT> struct qtraits;
template <> struct qtraits<HEARTH_DT_Q4_0> { enum { BYTES = 18, ELEMS = 32, UNITS = 1, SEG_BLOCKS = 128 }; };
template <> struct qtraits<HEARTH_DT_Q4_1> { enum { BYTES = 20, ELEMS = 32, UNITS = 1, SEG_BLOCKS = 128 }; };
template <> struct qtraits<HEARTH_DT_Q8_0> { enum { BYTES = 34, ELEMS = 32, UNITS = 1, SEG_BLOCKS = 64 }; };
template <> struct qtraits<HEARTH_DT_Q4_K> { enum { BYTES = 144, ELEMS = 256, UNITS = 4, SEG_BLOCKS = 16 }; };
template <> struct qtraits<HEARTH_DT_Q6_K> { enum { BYTES = 210, ELEMS = 256, UNITS = 4, SEG_BLOCKS = 8 }; };
/* read through the staged and direct GEMVs only (never split, no tensor-core kernel) */
template <> struct qtraits<HEARTH_DT_Q5_0> { enum { BYTES = 22, ELEMS = 32, UNITS = 1, SEG_BLOCKS = 128 }; };
template <> struct qtraits<HEARTH_DT_Q5_1> { enum { BYTES = 24, ELEMS = 32, UNITS = 1, SEG_BLOCKS = 64 }; };
template <> struct qtraits<HEARTH_DT_IQ4_NL> { enum { BYTES = 18, ELEMS = 32, UNITS = 1, SEG_BLOCKS = 128 }; };
template <> struct qtraits<HEARTH_DT_Q5_K> { enum { BYTES = 176, ELEMS = 256, UNITS = 4, SEG_BLOCKS = 16 }; };
template <> struct qtraits<HEARTH_DT_Q3_K> { enum { BYTES = 110, ELEMS = 256, UNITS = 4, SEG_BLOCKS = 16 }; };
template <> struct qtraits<HEARTH_DT_Q2_K> { enum { BYTES = 84, ELEMS = 256, UNITS = 4, SEG_BLOCKS = 16 }; };
template <> struct qtraits<HEARTH_DT_IQ4_XS> { enum { BYTES = 136, ELEMS = 256, UNITS = 4, SEG_BLOCKS = 16 }; };

/* ggml's kvalues_iq4nl (ops/cpu/quant.c hearth_iq4_values) as four words of
 * four int8, looked up for the 8 codes of a code word q (bytes of two
 * nibbles, q4_0's order): *lo gets the values of the low nibbles (elements
 * 4i.. of the block), *hi those of the high ones (16 + 4i..). Byte permutes
 * over the table's halves, by the codes' low 3 bits two at a time, the half
 * chosen by each code's bit 3; no selector has its bit 3 set (prmt's sign
 * replication). */
__device__ __forceinline__ void iq4_values8(uint32_t q, uint32_t *lo, uint32_t *hi) {
    const uint32_t t0 = 0xBFAD9881u, t1 = 0xF6EADDCFu, t2 = 0x26190D01u, t3 = 0x71594535u;
    const uint32_t s = q & 0x77777777u, pick = 0x32103210u | ((q & 0x88888888u) >> 1);
    /* a: elements 0, 16, 1, 17 of the four bytes; b: 2, 18, 3, 19 */
    const uint32_t a = __byte_perm(__byte_perm(t0, t1, s), __byte_perm(t2, t3, s), pick);
    const uint32_t b = __byte_perm(__byte_perm(t0, t1, s >> 16), __byte_perm(t2, t3, s >> 16), pick >> 16);
    *lo = __byte_perm(a, b, 0x6420);
    *hi = __byte_perm(a, b, 0x7531);
}
/* Four 5-bit codes: the nibbles in the bytes of nib, bits 0..3 of h their fifth bits. */
__device__ __forceinline__ uint32_t q5_codes4(uint32_t nib, uint32_t h) {
    const uint32_t spread = (h & 1) | ((h & 2) << 7) | ((h & 4) << 14) | ((h & 8) << 21);
    return nib | (spread << 4);
}

/* Q4_K: 6-bit scale and min of sub-block j (0..7) from the 12 packed bytes. */
__device__ __forceinline__ void q4k_scale_min(const uint8_t *sc, int j, int *d, int *m) {
    if (j < 4) {
        *d = sc[j] & 63;
        *m = sc[j + 4] & 63;
    } else {
        *d = (sc[j + 4] & 0xF) | ((sc[j - 4] >> 6) << 4);
        *m = (sc[j + 4] >> 4) | ((sc[j] >> 6) << 4);
    }
}

/* Elements [32g, 32g+32) of one quantized block, as floats, in the CPU
 * backend's arithmetic order with no fused multiply-add (__fmul_rn /
 * __fadd_rn), so the values match hearth_cpu_dequantize_row bit for bit. */
template <int QT> __device__ __forceinline__ void deq_group32(const uint8_t *b, int g, float *o);
/* Q4_0 and Q8_0 from their scale d and codes q (16 / 32 bytes). */
__device__ __forceinline__ void deq_q4_0(float d, const uint8_t *q, float *o) {
#pragma unroll
    for (int i = 0; i < 16; i++) {
        o[i] = (float)((q[i] & 0xF) - 8) * d;
        o[i + 16] = (float)((q[i] >> 4) - 8) * d;
    }
}
__device__ __forceinline__ void deq_q8_0(float d, const uint8_t *q, float *o) {
#pragma unroll
    for (int i = 0; i < 32; i++) o[i] = (float)(int8_t)q[i] * d;
}
template <> __device__ __forceinline__ void deq_group32<HEARTH_DT_Q4_0>(const uint8_t *b, int g, float *o) {
    deq_q4_0(h2f(ld16(b)), b + 2, o);
}
__device__ __forceinline__ void deq_q4_1(float d, float m, const uint8_t *q, float *o) {
#pragma unroll
    for (int i = 0; i < 16; i++) {
        o[i] = __fadd_rn(__fmul_rn(d, (float)(q[i] & 0xF)), m);
        o[i + 16] = __fadd_rn(__fmul_rn(d, (float)(q[i] >> 4)), m);
    }
}
template <> __device__ __forceinline__ void deq_group32<HEARTH_DT_Q4_1>(const uint8_t *b, int g, float *o) {
    deq_q4_1(h2f(ld16(b)), h2f(ld16(b + 2)), b + 4, o);
}
template <> __device__ __forceinline__ void deq_group32<HEARTH_DT_Q8_0>(const uint8_t *b, int g, float *o) {
    deq_q8_0(h2f(ld16(b)), b + 2, o);
}
/* Q4_K sub-block g (0..7) from the block's head (d, dmin, scales: 16 bytes)
 * and the 32 code bytes of sub-blocks g & ~1 (low nibbles) and g | 1 (high). */
__device__ __forceinline__ void deq_q4_k(const uint8_t *head, const uint8_t *q, int g, float *o) {
    float d = h2f(ld16(head)), dmin = h2f(ld16(head + 2));
    int sc, m;
    q4k_scale_min(head + 4, g, &sc, &m);
    float d1 = d * (float)sc, m1 = dmin * (float)m;
    int sh = (g & 1) * 4;
#pragma unroll
    for (int l = 0; l < 32; l++) o[l] = __fsub_rn(__fmul_rn(d1, (float)((q[l] >> sh) & 0xF)), m1);
}
template <> __device__ __forceinline__ void deq_group32<HEARTH_DT_Q4_K>(const uint8_t *b, int g, float *o) {
    deq_q4_k(b, b + 16 + 32 * (g >> 1), g, o);
}
template <> __device__ __forceinline__ void deq_group32<HEARTH_DT_Q6_K>(const uint8_t *b, int g, float *o) {
    float d = h2f(ld16(b + 208));
    int n = g >> 2, k = g & 3;
    const uint8_t *ql = b + 64 * n + 32 * (k & 1), *qh = b + 128 + 32 * n;
    const int8_t *sc = (const int8_t *)(b + 192 + 8 * n + 2 * k);
    int lsh = (k >> 1) * 4, hsh = 2 * k;
#pragma unroll
    for (int l = 0; l < 32; l++) {
        int q = (((ql[l] >> lsh) & 0xF) | (((qh[l] >> hsh) & 3) << 4)) - 32;
        o[l] = d * (float)sc[l / 16] * (float)q;
    }
}

/* q5_0 / q5_1: element e's code is nibble e % 16 (low for e < 16) of qs, bit e of qh its fifth */
__device__ __forceinline__ int q5_code(const uint8_t *qs, uint32_t qh, int e) {
    return ((qs[e & 15] >> (e < 16 ? 0 : 4)) & 0xF) | (int)((qh >> e) & 1) << 4;
}
/* a q5_0 (Q1 false) or q5_1 block from its d, m (q5_1), qh and 16 code bytes qs */
template <bool Q1> __device__ __forceinline__ void deq_q5(float d, float m, uint32_t qh, const uint8_t *qs, float *o) {
#pragma unroll
    for (int e = 0; e < 32; e++)
        o[e] = Q1 ? __fadd_rn(__fmul_rn(d, (float)q5_code(qs, qh, e)), m) : (float)(q5_code(qs, qh, e) - 16) * d;
}
template <> __device__ __forceinline__ void deq_group32<HEARTH_DT_Q5_0>(const uint8_t *b, int g, float *o) {
    deq_q5<false>(h2f(ld16(b)), 0.0f, ld32u(b + 2), b + 6, o);
}
template <> __device__ __forceinline__ void deq_group32<HEARTH_DT_Q5_1>(const uint8_t *b, int g, float *o) {
    deq_q5<true>(h2f(ld16(b)), h2f(ld16(b + 2)), ld32u(b + 4), b + 8, o);
}
/* an iq4_nl block from its d and 16 code bytes q */
__device__ __forceinline__ void deq_iq4nl(float d, const uint8_t *q, float *o) {
#pragma unroll
    for (int i = 0; i < 4; i++) {
        uint32_t lo, hi;
        iq4_values8(ld32u(q + 4 * i), &lo, &hi);
#pragma unroll
        for (int k = 0; k < 4; k++) {
            o[4 * i + k] = d * (float)(int8_t)(lo >> (8 * k));
            o[16 + 4 * i + k] = d * (float)(int8_t)(hi >> (8 * k));
        }
    }
}
template <> __device__ __forceinline__ void deq_group32<HEARTH_DT_IQ4_NL>(const uint8_t *b, int g, float *o) {
    deq_iq4nl(h2f(ld16(b)), b + 2, o);
}
/* q5_K sub-block g from the block's head (d, dmin, scales: 16 bytes), its 32 qh bytes and the 32 code bytes of
 * sub-blocks g & ~1 (low nibbles) and g | 1 (high): q4_K's scales and nibbles, bit g of qh[l] the fifth bit of
 * element l */
__device__ __forceinline__ void deq_q5_k(const uint8_t *head, const uint8_t *qh, const uint8_t *q, int g, float *o) {
    const float d = h2f(ld16(head)), dmin = h2f(ld16(head + 2));
    int sc, m;
    q4k_scale_min(head + 4, g, &sc, &m);
    const float dj = d * (float)sc, mj = dmin * (float)m;
    const int sh = (g & 1) * 4;
#pragma unroll
    for (int l = 0; l < 32; l++)
        o[l] = __fsub_rn(__fmul_rn(dj, (float)(((q[l] >> sh) & 0xF) | ((qh[l] >> g) & 1) << 4)), mj);
}
template <> __device__ __forceinline__ void deq_group32<HEARTH_DT_Q5_K>(const uint8_t *b, int g, float *o) {
    deq_q5_k(b, b + 16, b + 48 + 32 * (g >> 1), g, o);
}
/* q2_K / q3_K group g (0..7): elements 128 h + 32 j + l (h = g / 4, j = g % 4), bits 2j of qs[32 h + l],
 * in sub-blocks 8 h + 2 j (l < 16) and 8 h + 2 j + 1 (ops/cpu/quant.h) */
template <> __device__ __forceinline__ void deq_group32<HEARTH_DT_Q2_K>(const uint8_t *b, int g, float *o) {
    const float d = h2f(ld16(b + 80)), dmin = h2f(ld16(b + 82));
    const int h = g >> 2, j = g & 3;
#pragma unroll
    for (int l = 0; l < 32; l++) {
        const int sc = b[8 * h + 2 * j + l / 16], q = (b[16 + 32 * h + l] >> (2 * j)) & 3;
        o[l] = __fsub_rn(__fmul_rn(d * (float)(sc & 15), (float)q), __fmul_rn(dmin, (float)(sc >> 4)));
    }
}
/* the scale of q3_K sub-block s less 32 (hearth_q3_K_scale) */
__device__ __forceinline__ int q3k_scale(const uint8_t *scales, int s) {
    return (((scales[s & 7] >> (4 * (s >> 3))) & 15) | ((scales[8 + (s & 3)] >> (2 * (s >> 2))) & 3) << 4) - 32;
}
template <> __device__ __forceinline__ void deq_group32<HEARTH_DT_Q3_K>(const uint8_t *b, int g, float *o) {
    const float d = h2f(ld16(b + 108));
    const int h = g >> 2, j = g & 3;
#pragma unroll
    for (int l = 0; l < 32; l++) {
        const int q = ((b[32 + 32 * h + l] >> (2 * j)) & 3) - ((b[l] >> (4 * h + j)) & 1 ? 0 : 4);
        o[l] = d * (float)q3k_scale(b + 96, 8 * h + 2 * j + l / 16) * (float)q;
    }
}
/* iq4_xs sub-block g: scale less 32 from nibble g % 2 of scales_l[g / 2] and bits 2g of scales_h */
__device__ __forceinline__ int iq4xs_scale(const uint8_t *b, int g) {
    return (((b[4 + g / 2] >> (4 * (g & 1))) & 15) | ((ld16(b + 2) >> (2 * g)) & 3) << 4) - 32;
}
/* iq4_xs sub-block g from the block's head (d, scales_h, scales_l: 8 bytes) and its 16 code bytes q */
__device__ __forceinline__ void deq_iq4xs(const uint8_t *head, const uint8_t *q, int g, float *o) {
    const float dl = h2f(ld16(head)) * (float)iq4xs_scale(head, g);
#pragma unroll
    for (int i = 0; i < 4; i++) {
        uint32_t lo, hi;
        iq4_values8(ld32u(q + 4 * i), &lo, &hi);
#pragma unroll
        for (int k = 0; k < 4; k++) {
            o[4 * i + k] = dl * (float)(int8_t)(lo >> (8 * k));
            o[16 + 4 * i + k] = dl * (float)(int8_t)(hi >> (8 * k));
        }
    }
}
template <> __device__ __forceinline__ void deq_group32<HEARTH_DT_IQ4_XS>(const uint8_t *b, int g, float *o) {
    deq_iq4xs(b, b + 8 + 16 * g, g, o);
}

/* Split rows (hearth_weight.layout == HEARTH_LAYOUT_SPLIT, made at load by
 * cu_split_rows for every quantized type; described here Q4_0, Q8_0, Q4_K,
 * Q5_K, Q6_K and IQ4_XS, the others below): a stored
 * block is QB bytes of codes and a head of HB bytes (Q4_0, Q8_0: the f16
 * scale d; Q4_K, Q5_K: d, dmin and the 12 bytes of packed scales and mins,
 * IQ4_XS: d, scales_h and scales_l, all before the codes; Q6_K: the 16 int8
 * scales and d, after them); a split row of nb blocks
 * holds the blocks' codes first (nb * QB bytes, so 16-byte aligned when the
 * row is), then their heads (nb * HB bytes); the row's size is unchanged.
 * The GEMV then streams codes in aligned 16-byte loads.
 *
 * Q6_K is re-laid by unit, the GEMV's (qdot): unit u = 2n + kk (0..3) of a
 * block is its groups A = 4n + kk and B = A + 2, elements l = 0..31 of each
 * (ql byte 64n + 32kk + l holds A[l]'s low 4 bits, B[l]'s in its high
 * nibble; qh byte 32n + l holds their top 2 bits at bits 2kk and 2kk + 4,
 * and serves unit u ^ 1 too). A block's 192 code bytes: ql as stored (unit
 * u's 32 bytes at 32u), then unit u's 16 bytes of top bits at 128 + 16u,
 * byte i holding those of A[i], A[16 + i], B[i], B[16 + i] from bit 0 up.
 * Its head: the row's heads are the nb blocks' scales, 16 bytes a block,
 * unit u's four (A[0..16), A[16..32), B[0..16), B[16..32)) at 4u, then the
 * nb blocks' f16 d.
 *
 * Q4_1 / Q5_0 / Q5_1 / IQ4_NL (session 46): a block's 16 code bytes as
 * stored; the row's heads are the nb blocks' qh words (Q5_0 / Q5_1), then
 * their d (and m) as stored, so that each is aligned. Q2_K and Q3_K are
 * re-laid by unit (qdot's: unit u = 2h + (j / 2) of a block is its groups
 * A = 4h + j and B = A + 1, j = 0 or 2): unit u's 16 code bytes at 16u,
 * byte p holding the 2-bit codes of A[p], B[p], A[16 + p], B[16 + p] from
 * bit 0 up; Q3_K then unit u's 8 bytes of high bits at 64 + 8u (word 0 A's,
 * word 1 B's; bit i of byte q is element 4i + q's). Q2_K's heads: the nb
 * blocks' 16 scale bytes (unit u's four at 4u), then their d | dmin words.
 * Q3_K's: the nb blocks' 12 bytes of scales, byte 4k + u being byte k of
 * unit u's four 6-bit scales (+ 32) packed from bit 0 up, then their f16 d. */
template <int QT> struct split_fmt { enum { QB = 0, HB = 0 }; }; /* 0: the type is never split */
template <> struct split_fmt<HEARTH_DT_Q4_0> { enum { QB = 16, HB = 2 }; };
template <> struct split_fmt<HEARTH_DT_Q8_0> { enum { QB = 32, HB = 2 }; };
template <> struct split_fmt<HEARTH_DT_Q4_K> { enum { QB = 128, HB = 16 }; };
template <> struct split_fmt<HEARTH_DT_Q6_K> { enum { QB = 192, HB = 18 }; };
template <> struct split_fmt<HEARTH_DT_Q5_K> { enum { QB = 160, HB = 16 }; }; /* codes: qh[32], then qs[128] */
template <> struct split_fmt<HEARTH_DT_IQ4_XS> { enum { QB = 128, HB = 8 }; };
template <> struct split_fmt<HEARTH_DT_Q4_1> { enum { QB = 16, HB = 4 }; };
template <> struct split_fmt<HEARTH_DT_Q5_0> { enum { QB = 16, HB = 6 }; };
template <> struct split_fmt<HEARTH_DT_Q5_1> { enum { QB = 16, HB = 8 }; };
template <> struct split_fmt<HEARTH_DT_IQ4_NL> { enum { QB = 16, HB = 2 }; };
template <> struct split_fmt<HEARTH_DT_Q2_K> { enum { QB = 64, HB = 20 }; };
template <> struct split_fmt<HEARTH_DT_Q3_K> { enum { QB = 96, HB = 14 }; };

/* The 2-bit code of element l (0..31) of group A (w 0) or B (w 1) of a split q2_K / q3_K unit's codes uc. */
__device__ __forceinline__ int q23_split_code(const uint8_t *uc, int w, int l) {
    return (uc[l & 15] >> (2 * w + 4 * (l >> 4))) & 3;
}

/* Elements [32g, 32g+32) of a row (nb blocks) of either layout. */
template <int QT>
__device__ __forceinline__ void deq_row_group32(const uint8_t *row, int nb, int g, bool split, float *o) {
    using TR = qtraits<QT>;
    constexpr int GPB = TR::ELEMS / 32, QB = split_fmt<QT>::QB;
    if constexpr (QT == HEARTH_DT_Q4_K) {
        if (split) { /* the 32 code bytes of g's sub-block pair, 16-byte aligned */
            const int b = g / GPB;
            uint4 c[2];
#pragma unroll
            for (int i = 0; i < 2; i++) c[i] = ((const uint4 *)(row + (size_t)b * QB + 32 * (g % GPB / 2)))[i];
            deq_q4_k(row + (size_t)nb * QB + (size_t)b * split_fmt<QT>::HB, (const uint8_t *)c, g % GPB, o);
            return;
        }
    } else if constexpr (QT == HEARTH_DT_Q6_K) {
        if (split) { /* g is group A (hi = 0) or B (hi = 1) of unit u; its codes are 16-byte aligned */
            const int b = g / GPB, k = g % GPB & 3, u = 2 * (g % GPB >> 2) + (k & 1), hi = k >> 1;
            const uint4 *q = (const uint4 *)(row + (size_t)b * QB);
            const uint4 c[3] = {q[2 * u], q[2 * u + 1], q[8 + u]}; /* ql at 32u, top bits at 128 + 16u */
            const uint8_t *ql = (const uint8_t *)c, *qh = ql + 32;
            const int8_t *sc = (const int8_t *)(row + (size_t)nb * QB + 16 * b + 4 * u + 2 * hi);
            const float d = h2f(ld16(row + (size_t)nb * (QB + 16) + 2 * b));
#pragma unroll
            for (int l = 0; l < 32; l++) {
                int v = (((ql[l] >> (4 * hi)) & 0xF) | (((qh[l & 15] >> (2 * (l >> 4) + 4 * hi)) & 3) << 4)) - 32;
                o[l] = d * (float)sc[l / 16] * (float)v;
            }
            return;
        }
    } else if constexpr (QT == HEARTH_DT_Q5_K) {
        if (split) {
            const uint8_t *codes = row + (size_t)(g / GPB) * QB, *head = row + (size_t)nb * QB + (size_t)(g / GPB) * 16;
            deq_q5_k(head, codes, codes + 32 + 32 * (g % GPB / 2), g % GPB, o);
            return;
        }
    } else if constexpr (QT == HEARTH_DT_IQ4_XS) {
        if (split) {
            deq_iq4xs(row + (size_t)nb * QB + (size_t)(g / GPB) * 8, row + (size_t)g * 16, g % GPB, o);
            return;
        }
    } else if constexpr (QT == HEARTH_DT_Q5_0 || QT == HEARTH_DT_Q5_1) {
        if (split) {
            constexpr int QD = QT == HEARTH_DT_Q5_1 ? 4 : 2; /* bytes of d (and m) a block */
            const uint8_t *dm = row + (size_t)nb * (QB + 4) + (size_t)g * QD;
            const uint32_t qh = ld32u(row + (size_t)nb * QB + 4 * (size_t)g);
            const float m = QD == 4 ? h2f(ld16(dm + 2)) : 0.0f;
            deq_q5<QT == HEARTH_DT_Q5_1>(h2f(ld16(dm)), m, qh, row + (size_t)g * QB, o);
            return;
        }
    } else if constexpr (QT == HEARTH_DT_Q4_1) {
        if (split) {
            const uint8_t *dm = row + (size_t)nb * QB + 4 * (size_t)g;
            deq_q4_1(h2f(ld16(dm)), h2f(ld16(dm + 2)), row + (size_t)g * QB, o);
            return;
        }
    } else if constexpr (QT == HEARTH_DT_IQ4_NL) {
        if (split) {
            deq_iq4nl(h2f(ld16(row + (size_t)nb * QB + 2 * (size_t)g)), row + (size_t)g * QB, o);
            return;
        }
    } else if constexpr (QT == HEARTH_DT_Q2_K) {
        if (split) { /* g is group A (w = 0) or B of unit u */
            const int b = g / GPB, u = g % GPB >> 1, w = g & 1;
            const uint8_t *uc = row + (size_t)b * QB + 16 * u;
            const uint8_t *sc = row + (size_t)nb * QB + 16 * (size_t)b + 4 * u + 2 * w;
            const uint8_t *dm = row + (size_t)nb * (QB + 16) + 4 * (size_t)b;
            const float d = h2f(ld16(dm)), dmin = h2f(ld16(dm + 2));
#pragma unroll
            for (int l = 0; l < 32; l++) {
                const int s = sc[l / 16], q = q23_split_code(uc, w, l);
                o[l] = __fsub_rn(__fmul_rn(d * (float)(s & 15), (float)q), __fmul_rn(dmin, (float)(s >> 4)));
            }
            return;
        }
    } else if constexpr (QT == HEARTH_DT_Q3_K) {
        if (split) {
            const int b = g / GPB, u = g % GPB >> 1, w = g & 1;
            const uint8_t *uc = row + (size_t)b * QB + 16 * u, *hb = row + (size_t)b * QB + 64 + 8 * u + 4 * w;
            const uint8_t *sc = row + (size_t)nb * QB + 12 * (size_t)b + u;
            const uint32_t v24 = sc[0] | (uint32_t)sc[4] << 8 | (uint32_t)sc[8] << 16;
            const float d = h2f(ld16(row + (size_t)nb * (QB + 12) + 2 * (size_t)b));
#pragma unroll
            for (int l = 0; l < 32; l++) {
                const int s = (int)((v24 >> (6 * (2 * w + l / 16))) & 63) - 32;
                const int q = q23_split_code(uc, w, l) - ((hb[l & 3] >> (l >> 2)) & 1 ? 0 : 4);
                o[l] = d * (float)s * (float)q;
            }
            return;
        }
    } else if constexpr (QB != 0) {
        if (split) { /* a block is a group; the codes are 16-byte aligned */
            uint4 c[QB / 16];
#pragma unroll
            for (int i = 0; i < QB / 16; i++) c[i] = ((const uint4 *)(row + (size_t)g * QB))[i];
            float d = h2f(ld16(row + (size_t)nb * QB + 2 * g));
            if constexpr (QT == HEARTH_DT_Q4_0) deq_q4_0(d, (const uint8_t *)c, o);
            else deq_q8_0(d, (const uint8_t *)c, o);
            return;
        }
    }
    deq_group32<QT>(row + (size_t)(g / GPB) * TR::BYTES, g % GPB, o);
}

/* ---- launchers (one op per .cu file) ------------------------------------- */

/* Activations prepared for a matmul (xprep.cu): bf16 / f16 copies, or q8
 * codes int8 qs [T][K] followed by float4 [T][K/32] = (scale, sum of the
 * group's codes, f16(scale*sum), 0), with 32-blocks (Q8) or 256-blocks (Q8K). */
enum { XPREP_NONE = 0, XPREP_BF16, XPREP_F16, XPREP_Q8, XPREP_Q8K };

__device__ __forceinline__ int8_t q8_sat(float v) {
    int q = __float2int_rn(v);
    return (int8_t)(q > 127 ? 127 : q < -128 ? -128 : q);
}

/* Eight codes q[0..8) stored as bytes at p (8-byte aligned). */
__device__ __forceinline__ void st_q8x8(int8_t *p, const int *q) {
    uint32_t w[2];
#pragma unroll
    for (int h = 0; h < 2; h++)
        w[h] = (uint32_t)(q[4 * h] & 0xff) | (uint32_t)(q[4 * h + 1] & 0xff) << 8 |
               (uint32_t)(q[4 * h + 2] & 0xff) << 16 | (uint32_t)(q[4 * h + 3] & 0xff) << 24;
    *(uint2 *)p = make_uint2(w[0], w[1]);
}

/* q8_K of one 256-block held by a warp, lane i holding elements 8i .. 8i + 7 in v (xprep.cu's rule): the
 * block's scale comes from its first element of largest magnitude mx, iscale = -127 / mx, q = rne(iscale
 * x), d = 1 / iscale; codes to qs[0..256), each 32-group's (d, sum of its codes, 0, 0) to ds[0..8). */
__device__ __forceinline__ void warp_q8k_block(const float *v, int lane, int8_t *qs, float4 *ds) {
    float amax = 0.0f, mx = 0.0f;
    int idx = 1 << 30;
#pragma unroll
    for (int i = 0; i < 8; i++)
        if (fabsf(v[i]) > amax) amax = fabsf(v[i]), mx = v[i], idx = 8 * lane + i;
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) {
        const float a2 = __shfl_xor_sync(0xffffffffu, amax, o), m2 = __shfl_xor_sync(0xffffffffu, mx, o);
        const int i2 = __shfl_xor_sync(0xffffffffu, idx, o);
        if (a2 > amax || (a2 == amax && i2 < idx)) amax = a2, mx = m2, idx = i2;
    }
    int q[8];
    float d = 0.0f;
    if (amax > 0.0f) {
        const float iscale = -127.0f / mx;
#pragma unroll
        for (int i = 0; i < 8; i++) q[i] = q8_sat(iscale * v[i]);
        d = 1.0f / iscale;
    } else {
#pragma unroll
        for (int i = 0; i < 8; i++) q[i] = 0;
    }
    int sum = 0;
#pragma unroll
    for (int i = 0; i < 8; i++) sum += q[i];
    st_q8x8(qs + 8 * lane, q);
    /* four lanes per 32-group */
    sum += __shfl_xor_sync(0xffffffffu, sum, 1);
    sum += __shfl_xor_sync(0xffffffffu, sum, 2);
    if ((lane & 3) == 0) ds[lane / 4] = make_float4(d, (float)sum, 0.0f, 0.0f);
}

/* q8 of one 32-group held an element a lane (lane i: element i), as
 * xprep.cu makes it: the lane's code to *q, and from lane 0 the group's
 * (d, sum, s, 0) to *ds. Every lane of the warp calls it. */
__device__ __forceinline__ void warp_q8_group(float v, int lane, int8_t *q, float4 *ds) {
    float amax = fabsf(v);
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) amax = fmaxf(amax, __shfl_xor_sync(0xffffffffu, amax, o));
    float d = amax / 127.0f, id = amax != 0.0f ? 127.0f / amax : 0.0f;
    int c = __float2int_rn(v * id);
    c = c > 127 ? 127 : c < -128 ? -128 : c;
    *q = (int8_t)c;
    int sum = c;
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) sum += __shfl_xor_sync(0xffffffffu, sum, o);
    if (lane == 0)
        *ds = make_float4(__half2float(__float2half_rn(d)), (float)sum, __half2float(__float2half_rn(d * (float)sum)),
                          0.0f);
}

/* q8 of the eight 32-groups of 256 values held by a warp, lane i holding
 * elements 8i .. 8i + 7 in v (a group is four lanes), the bits of
 * warp_q8_group for each (the same max, in another order: fmaxf is
 * exact): codes to qs[0..256), the groups' (d, sum, s, 0) to ds[0..8). */
__device__ __forceinline__ void warp_q8_groups8(const float *v, int lane, int8_t *qs, float4 *ds) {
    float amax = fabsf(v[0]);
#pragma unroll
    for (int i = 1; i < 8; i++) amax = fmaxf(amax, fabsf(v[i]));
    amax = fmaxf(amax, __shfl_xor_sync(0xffffffffu, amax, 1));
    amax = fmaxf(amax, __shfl_xor_sync(0xffffffffu, amax, 2));
    const float d = amax / 127.0f, id = amax != 0.0f ? 127.0f / amax : 0.0f;
    int q[8], sum = 0;
#pragma unroll
    for (int i = 0; i < 8; i++) {
        q[i] = q8_sat(v[i] * id);
        sum += q[i];
    }
    st_q8x8(qs + 8 * lane, q);
    sum += __shfl_xor_sync(0xffffffffu, sum, 1);
    sum += __shfl_xor_sync(0xffffffffu, sum, 2);
    if ((lane & 3) == 0)
        ds[lane / 4] = make_float4(__half2float(__float2half_rn(d)), (float)sum,
                                   __half2float(__float2half_rn(d * (float)sum)), 0.0f);
}

/* The q8 (XPREP_Q8) or q8_K (XPREP_Q8K) copy of the 256 floats at p (shared memory, 16-byte aligned) by a
 * warp, lane i taking p[8i .. 8i + 7]: codes to qs[0..256), ds[0..8). */
__device__ __forceinline__ void warp_q8_block_at(int kind, const float *p, int lane, int8_t *qs, float4 *ds) {
    const float4 a = *(const float4 *)(p + 8 * lane), b = *(const float4 *)(p + 8 * lane + 4);
    const float v[8] = {a.x, a.y, a.z, a.w, b.x, b.y, b.z, b.w};
    if (kind == XPREP_Q8K) warp_q8k_block(v, lane, qs, ds);
    else warp_q8_groups8(v, lane, qs, ds);
}

/* Element e (of n) of a prepared copy of kind XPREP_BF16, XPREP_F16 or
 * XPREP_Q8 (the whole warp calls it for Q8, lane i holding element i of a
 * 32-group). */
__device__ __forceinline__ void prep_store(int kind, void *prep, size_t n, size_t e, float v, int lane) {
    if (kind == XPREP_BF16) ((__nv_bfloat16 *)prep)[e] = __float2bfloat16_rn(v);
    else if (kind == XPREP_F16) ((__half *)prep)[e] = __float2half_rn(v);
    else if (kind == XPREP_Q8) warp_q8_group(v, lane, (int8_t *)prep + e, (float4 *)((int8_t *)prep + n) + e / QK);
}
void cu_xprep(const cu_launch *L, int kind, void *dst, const float *x, int T, int K);
size_t cu_xprep_bytes(int kind, int T, int K);

/* One rope pair (x0, x1) turned by pos * inv_freq: rope.cu, the fused
 * rope_kv.cu and the q/k/v GEMV's epilogue all rotate through it, so they
 * store the same bits. sincosf is the accurate one (positions reach tens of
 * thousands). rope_rotate_sc: the same from a sine and cosine computed so. */
__device__ __forceinline__ void rope_rotate_sc(float &x0, float &x1, float sn, float cs) {
    const float y0 = x0 * cs - x1 * sn, y1 = x0 * sn + x1 * cs;
    x0 = y0;
    x1 = y1;
}
__device__ __forceinline__ void rope_rotate(float &x0, float &x1, int pos, float inv_freq) {
    float sn, cs;
    sincosf((float)pos * inv_freq, &sn, &cs);
    rope_rotate_sc(x0, x1, sn, cs);
}

/* Paged KV as the kernels see one layer of it: k and v hold f16 elements
 * (__half) when f16 is set, OCP FP8 E4M3 codes (__nv_fp8_e4m3, scale 1,
 * core/fp8.h) when fp8 is set, else f32. */
struct cu_kv {
    void *k, *v;
    const int32_t *table;
    int block_size, max_blocks, kv_dim;
    int f16;
    int fp8;
    /* attention only: 1 when the kernel launched just before wrote no KV but
     * that of the attention's own rows (their positions, from pos[t] - (T-1)
     * on for row t): earlier positions may be read before pdl_wait */
    int early;
    int n_blocks; /* blocks in each pool (k and v: [n_blocks][block_size][kv_dim]) */
    /* attention only: into how many parts the Hopper prefill kernel may cut
     * each item's positions when its items leave SMs idle (a chunk of one
     * sequence after a long cached prefix); 0 or 1: none */
    int splits;
};

/* The matrices of one GEMV launch, all of one type and K, sharing x: up to 3
 * stacked by rows (y[m] [T][n[m]]), or with swiglu set the gate (w[0]) and
 * up (w[1]) matrices of n[0] = n[1] rows: y[0] = gate, y[1] = up and
 * out = silu(gate) * up, out written last (it may alias y[0] or y[1]). */
struct mmv_set {
    const uint8_t *w[3];
    float *y[3];
    int n[3];
    int count;
    int swiglu;
    float *out;
    int prep_kind; /* swiglu only: XPREP_BF16 / XPREP_F16 copy of out into prep, or XPREP_NONE */
    void *prep;
    int split; /* the matrices' rows are HEARTH_LAYOUT_SPLIT */
    /* Rope + KV epilogue (rope_half > 0; q, k, v: count 3, rows of head_dim
     * hd): the rows of y[0] and y[1] are rotated in (2i, 2i + 1) pairs for
     * 2i < 2 * rope_half at pos[t] (as rope.cu, not neox), and y[1], y[2]
     * are also stored in the KV cache at (seq[t], pos[t]) (as kv_write.cu):
     * the recorder's q/k/v matmuls + rope + rope + kv_write. */
    int rope_half, hd;
    const int32_t *pos, *seq;
    const float *inv_freq;
    cu_kv kv;
};

/* y = x @ W^T for T <= 8 from prepared x (xp; or x itself for f32). */
int cu_mmv_supported(hearth_dtype t);
int cu_mmv_xprep_kind(hearth_dtype t);
void cu_mmv(const cu_launch *L, const mmv_set *set, const void *xp, int T, hearth_dtype t, int K, size_t row_bytes);
/* 1 when cu_mmv runs set (rope fields aside) at T rows on a kernel that
 * stores rows in pairs (a warp's rows 2j and 2j + 1), which the rope
 * epilogue needs: rows laid out for the streamed or staged kernels, xp
 * 16-byte aligned, and not the tensor-core kernel. */
int cu_mmv_pairs(const mmv_set *set, hearth_dtype t, int T, int K, size_t row_bytes, const void *xp);
/* The tensor-core GEMV (mmv_tc.cu) for 3..8 rows of x and bf16 / f16
 * weights, or split Q4_0 / Q6_K rows (Q4_K from 2 rows, Q8_0 from 5), which cu_mmv
 * runs where cu_mmv_tc_fits (K % 32 == 0, rows and x 16-byte aligned; never
 * with the rope epilogue, see cu_mmv_pairs). */
int cu_mmv_tc_fits(const mmv_set *set, hearth_dtype t, int T, int K, size_t row_bytes, const void *xp);
void cu_mmv_tc(const cu_launch *L, const mmv_set *set, const void *xp, int T, hearth_dtype t, int K, size_t row_bytes);

/* Rows [r0, r0+nr) of weight w dequantized to bf16 [nr][K]. */
void cu_dequant_bf16(const cu_launch *L, __nv_bfloat16 *dst, const void *w, hearth_dtype t, int K, size_t row_bytes,
                     int split, int r0, int nr);
void cu_embed(const cu_launch *L, float *out, const void *table, hearth_dtype t, int rows, int cols, size_t row_bytes,
              int split, const int32_t *ids, int T);
/* Re-lays rows of a Q4_0 / Q8_0 / Q4_K / Q6_K matrix in place as split rows
 * (codes, then heads); returns 0, doing nothing, where it cannot (another
 * type, rows not 16-byte aligned or too long for shared memory). */
int cu_split_rows(const cu_launch *L, void *w, hearth_dtype t, int rows, int cols, size_t row_bytes);
void cu_rmsnorm(const cu_launch *L, float *y, const float *x, const float *w, int n_rows, int dim, float eps);
void cu_rope(const cu_launch *L, float *x, int T, int n_heads, int head_dim, const int32_t *pos,
             const float *inv_freq, int rot_dim, int neox);
void cu_add_bias(const cu_launch *L, float *y, const float *b, int T, int n);
void cu_add(const cu_launch *L, float *y, const float *x, size_t n);
void cu_swiglu(const cu_launch *L, float *out, const float *gate, const float *up, int T, int n);
/* The recorder's fusion of swiglu with the preparation (bf16 / f16 copy of
 * out, into prep) that the next matmul needs; cu_swiglu_prep_fits says which kinds. */
int cu_swiglu_prep_fits(int kind);
void cu_swiglu_prep(const cu_launch *L, float *out, const float *gate, const float *up, int T, int n, int kind,
                    void *prep);

/* One element of a KV cache of element type E, as f32 and from f32
 * (round to nearest even: as hearth_f32_to_f16; e4m3 saturated to +-448 by
 * the sm_90 cvt.rn.satfinite, as hearth_f32_to_e4m3). */
__device__ __forceinline__ float kv_ld(const float *p, size_t i) { return p[i]; }
__device__ __forceinline__ float kv_ld(const __half *p, size_t i) { return __half2float(p[i]); }
__device__ __forceinline__ float kv_ld(const __nv_fp8_e4m3 *p, size_t i) {
    return __half2float(__half(__nv_cvt_fp8_to_halfraw(p[i].__x, __NV_E4M3)));
}
__device__ __forceinline__ void kv_st(float *p, size_t i, float x) { p[i] = x; }
__device__ __forceinline__ void kv_st(__half *p, size_t i, float x) { p[i] = __float2half_rn(x); }
__device__ __forceinline__ void kv_st(__nv_fp8_e4m3 *p, size_t i, float x) {
    p[i].__x = __nv_cvt_float_to_fp8(x, __NV_SATFINITE, __NV_E4M3);
}
/* Four consecutive elements at off (a multiple of 4), each rounded as kv_st
 * rounds it, in one store. */
template <typename E> __device__ __forceinline__ void kv_st4(E *p, size_t off, float4 y) {
    __align__(16) E b[4];
    kv_st(b, 0, y.x);
    kv_st(b, 1, y.y);
    kv_st(b, 2, y.z);
    kv_st(b, 3, y.w);
    if constexpr (sizeof(E) == 4) *(uint4 *)(p + off) = *(const uint4 *)b;
    else if constexpr (sizeof(E) == 2) *(uint2 *)(p + off) = *(const uint2 *)b;
    else *(uint32_t *)(p + off) = *(const uint32_t *)b;
}
/* Two e4m3 codes (the one at the lower address in the low byte) widened
 * exactly by one cvt.rn.f16x2.e4m3x2: as half2 and as float2. */
__device__ __forceinline__ __half2 e4m3x2_to_half2(uint16_t v) {
    return __half2(__nv_cvt_fp8x2_to_halfraw2((__nv_fp8x2_storage_t)v, __NV_E4M3));
}
__device__ __forceinline__ float2 e4m3x2_to_float2(uint16_t v) { return __half22float2(e4m3x2_to_half2(v)); }
/* Four e4m3 codes (a 32-bit word, the lowest address in the low byte) as
 * two half2 words, exactly: bytes 0, 1 into lo, bytes 2, 3 into hi. Two
 * cvt.rn.f16x2.e4m3x2, the second reading the word's upper half directly
 * (F2FP's .H1 source): e4m3x2_to_half2(w >> 16) costs a shift more. */
__device__ __forceinline__ void e4m3x4_to_half2x2(uint32_t w, uint32_t &lo, uint32_t &hi) {
    asm("{\n\t.reg .b16 l, h;\n\tmov.b32 {l, h}, %2;\n\tcvt.rn.f16x2.e4m3x2 %0, l;\n\tcvt.rn.f16x2.e4m3x2 %1, h;\n\t}"
        : "=r"(lo), "=r"(hi)
        : "r"(w));
}
/* 8 e4m3 codes (one 8-byte load, the lowest address in the low byte of x)
 * as 8 halves (16 bytes), exactly. */
__device__ __forceinline__ uint4 e4m3x8_to_half8(uint2 u) {
    uint4 r;
    e4m3x4_to_half2x2(u.x, r.x, r.y);
    e4m3x4_to_half2x2(u.y, r.z, r.w);
    return r;
}
/* N (2, 4 or 8) consecutive e4m3 codes from one N-byte load (p N-byte aligned) as f32. */
template <int N> __device__ __forceinline__ void e4m3_ld(const __nv_fp8_e4m3 *p, float *f) {
    static_assert(N == 2 || N == 4 || N == 8, "2-, 4- or 8-byte loads");
    uint32_t w[N == 8 ? 2 : 1];
    if constexpr (N == 2) w[0] = *(const uint16_t *)p;
    else if constexpr (N == 4) w[0] = *(const uint32_t *)p;
    else {
        uint2 u = *(const uint2 *)p;
        w[0] = u.x, w[1] = u.y;
    }
#pragma unroll
    for (int i = 0; i < N / 2; i++) {
        float2 x = e4m3x2_to_float2((uint16_t)(w[i / 2] >> (16 * (i % 2))));
        f[2 * i] = x.x;
        f[2 * i + 1] = x.y;
    }
}
void cu_kv_write(const cu_launch *L, const cu_kv *kv, const float *k, const float *v, int T, const int32_t *seq,
                 const int32_t *pos);
/* Fusions the recorder makes (ops_cuda.cu): X += D (D may be NULL), then
 * Y = rmsnorm(X) * w, then Y prepared as kind into prep for T = rows rows
 * (XPREP_NONE: no preparation); cu_add_rmsnorm_fits says which (dim, kind). */
int cu_add_rmsnorm_fits(int dim, int kind);
void cu_add_rmsnorm(const cu_launch *L, float *X, const float *D, float *Y, const float *w, int rows, int dim,
                    float eps, int kind, void *prep);
/* Where cu_rope_kv reads token t's q, k and v: at q + t * ld_q, k + t * ld_kv
 * and v + t * ld_kv (their own buffers, ld their widths; or rows of one
 * [T][n_q * head_dim + 2 * kv_dim] product, ld that width). */
struct cu_qkv_rows {
    const float *q, *k, *v;
    int ld_q, ld_kv;
};
/* rope on in's q (n_q heads) and k (n_k heads) of each token into q
 * [T][n_q * head_dim] and k [T][kv_dim] (in's own buffers: in place; k NULL:
 * not stored), then k and v into the cache (kv->kv_dim == n_k * head_dim);
 * in's v copied into v [T][kv_dim] unless NULL. */
void cu_rope_kv(const cu_launch *L, const cu_qkv_rows *in, float *q, float *k, float *v, int T, int n_q, int n_k,
                int head_dim, const int32_t *pos, const float *inv_freq, int rot_dim, int neox, const cu_kv *kv,
                const int32_t *seq);

/* Process-wide on / off of the Hopper prefill kernel (attention_flash_wg.cu,
 * as HEARTH_ATTN_WG); returns whether it can run on the current device. */
int cu_attention_flash_wg_set(int on);
/* Its launches in this process so far. */
unsigned long long cu_attention_flash_wg_launches(void);
unsigned long long cu_attention_flash_wg_launches_split(void); /* of those, the ones whose items were cut in parts */
/* Process-wide: whether it may cut a short chunk's positions in parts (as HEARTH_ATTN_SPLIT). */
void cu_attention_flash_wg_split_set(int on);

/* one_seq: the caller knows all T rows belong to one sequence; cluster: what
 * cu_attention_cluster said for the rows' context length; rows_min: from how
 * many rows the tensor-core rows kernel takes decode rows. part: scratch
 * of part_floats floats for split partial results; cnt: n_cnt zeroed ints
 * that the decode kernel's blocks count themselves on (each count is back to
 * 0 when the kernel ends). */
/* prep_kind / prep: a prepared copy of out (XPREP_BF16, XPREP_F16, XPREP_Q8
 * or XPREP_NONE) for the matmul that reads it; returns 1 when the kernels
 * wrote it (the few-rows decode kernel does), 0 when the caller must. */
int cu_attention(const cu_launch *L, float *out, const float *q, int T, const cu_kv *kv, const int32_t *seq,
                 const int32_t *pos, int n_heads, int n_kv_heads, int head_dim, float scale, int window,
                 int one_seq, int cluster, int rows_min, float *part, size_t part_floats, int *cnt, int n_cnt,
                 int prep_kind, void *prep);
/* The cluster size (splits) of the few-rows decode kernel for rows of up to
 * ctx_len positions (hearth_kv_view.ctx_len; 0 = unknown): one 64-position
 * tile a split, 2..16 splits, so up to 1024 positions; 0 (the counter
 * merge) beyond, where more splits pay (s6-run4: 2000 positions 438 vs 453
 * tok/s), or when unknown; at most cap (the context's setting: 16, 8, or 0
 * = off). A size, not the length, goes into a record, so graphs stay valid
 * for many steps. */
int cu_attention_cluster(int ctx_len, int cap);

/* The pick op (ops.h) for n_rows rows of logits [n_rows][vocab]: each
 * row's chunks' bests in a wave of blocks (where scratch holds n_rows x
 * ceil(vocab / 4096) int2; the row's one block reads the row otherwise),
 * then one block per row, which writes its pick into out and, unless NULL,
 * its id into ids and the pick into host (pinned host memory the device can
 * write: a download fused in). */
void cu_pick(const cu_launch *L, hearth_pick *out, const float *logits, int n_rows, int vocab,
             const hearth_pick_params *params, int32_t *ids, void *scratch, size_t scratch_bytes, hearth_pick *host);
/* dst[k] = the Gumbel noise of ops.h for z >> 41 == k, k < n (tests). */
void cu_pick_noise(const cu_launch *L, float *dst, int n);

#endif
