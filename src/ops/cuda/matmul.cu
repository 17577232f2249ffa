/* matmul.cu - y[T][N] = x[T][K] @ W^T for every weight type: the GEMV
 * kernels (mmv.cu) up to mmv_max_t rows, cuBLAS above.
 *
 * cuBLAS path: bf16 and f16 weights go to the GEMM as they are, with x
 * rounded to the same type (as the CPU backend rounds it); f32 weights run a
 * plain f32 GEMM; quantized weights are dequantized to bf16, a chunk of rows
 * at a time, into a scratch buffer, and x is rounded to bf16. Accumulation is
 * f32 throughout.
 *
 * The prepared x (bf16/f16/q8 copy) is kept while the same x feeds the next
 * matmuls (q, k, v from one norm output; gate and up): the cache is dropped by
 * every other op and by a matmul whose output overlaps it. */
#include "ops/cuda/matmul.cuh"
#include "ops/cuda/mmv.cuh"

void cu_mm_invalidate(cu_mm_state *s) { s->c_x = NULL; }

static int is_float(hearth_dtype t) { return t == HEARTH_DT_F32 || t == HEARTH_DT_F16 || t == HEARTH_DT_BF16; }

static void prep(const cu_launch *L, cu_mm_state *s, int kind, const float *x, int T, int K) {
    if (s->c_x == x && s->c_T == T && s->c_K == K && s->c_kind == kind) return;
    cu_xprep(L, kind, s->xprep, x, T, K);
    cu_mm_set_cache(s, x, T, K, kind, s->xprep);
}

/* Two products of one x as one strided-batched GEMM: member 1's A and C are
 * stride_a / stride_c elements past member 0's. */
static void gemm_pair(const cu_launch *L, cu_mm_state *s, cudaDataType_t ab, const void *A, int lda, long long stride_a,
                      const void *B, float *C, long long stride_c, int m, int n, int k, int ldc) {
    const float one = 1.0f, zero = 0.0f;
    cublasStatus_t st = cublasGemmStridedBatchedEx(s->blas, CUBLAS_OP_T, CUBLAS_OP_N, m, n, k, &one, A, ab, lda, stride_a,
                                                   B, ab, k, 0, &zero, C, CUDA_R_32F, ldc, stride_c, 2,
                                                   CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
    if (st != CUBLAS_STATUS_SUCCESS) cu_note(L, cudaErrorUnknown);
}

static void gemm(const cu_launch *L, cu_mm_state *s, cudaDataType_t ab, const void *A, int lda, const void *B,
                 float *C, int m, int n, int k, int ldc) {
    const float one = 1.0f, zero = 0.0f;
    cublasStatus_t st = cublasGemmEx(s->blas, CUBLAS_OP_T, CUBLAS_OP_N, m, n, k, &one, A, ab, lda, B, ab, k, &zero,
                                     C, CUDA_R_32F, ldc, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
    if (st != CUBLAS_STATUS_SUCCESS) cu_note(L, cudaErrorUnknown);
}

void cu_gemm_f32(const cu_launch *L, cu_mm_state *s, const float *A, int lda, const float *x, int ldx, float *C, int m,
                 int n, int k, int ldc, int accumulate) {
    const float one = 1.0f, beta = accumulate ? 1.0f : 0.0f;
    cublasStatus_t st = cublasGemmEx(s->blas, CUBLAS_OP_T, CUBLAS_OP_N, m, n, k, &one, A, CUDA_R_32F, lda, x, CUDA_R_32F,
                                     ldx, &beta, C, CUDA_R_32F, ldc, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
    if (st != CUBLAS_STATUS_SUCCESS) cu_note(L, cudaErrorUnknown);
}

/* x as a GEMM over float weights of type t reads it (f32: x itself; f16 /
 * bf16: the prepared copy), and the weights' cuBLAS type in *ab. */
static const void *float_input(const cu_launch *L, cu_mm_state *s, hearth_dtype t, const float *x, int T, int K,
                               cudaDataType_t *ab) {
    if (t == HEARTH_DT_F32) {
        *ab = CUDA_R_32F;
        return x;
    }
    *ab = t == HEARTH_DT_F16 ? CUDA_R_16F : CUDA_R_16BF;
    prep(L, s, t == HEARTH_DT_F16 ? XPREP_F16 : XPREP_BF16, x, T, K);
    return s->c_buf;
}

/* y[T][N] = x W^T for N rows of float weights (f32, f16, bf16) row_bytes apart. */
static void float_gemm(const cu_launch *L, cu_mm_state *s, hearth_dtype t, const void *w, size_t row_bytes,
                       const float *x, float *y, int N, int T, int K) {
    cudaDataType_t ab;
    const void *xb = float_input(L, s, t, x, T, K, &ab);
    gemm(L, s, ab, w, (int)(row_bytes / (t == HEARTH_DT_F32 ? 4 : 2)), xb, y, N, T, K, N);
}

void cu_mm_set_cache(cu_mm_state *s, const float *x, int T, int K, int kind, void *buf) {
    s->c_x = x;
    s->c_T = T;
    s->c_K = K;
    s->c_kind = kind;
    s->c_buf = buf;
}

int cu_mm_gemv(const cu_mm_state *s, int T, hearth_dtype t) {
    return T <= s->mmv_max_t && T <= 8 && cu_mmv_supported(t);
}

int cu_mm_prep_kind(const cu_mm_state *s, int T, hearth_dtype t) {
    if (cu_mm_gemv(s, T, t)) return cu_mmv_xprep_kind(t);
    if (t == HEARTH_DT_F32) return XPREP_NONE;
    return t == HEARTH_DT_F16 ? XPREP_F16 : XPREP_BF16; /* quantized: dequantized to bf16 for cuBLAS */
}

/* Drop the cache if [y, y + bytes) overlaps the cached input. */
static void out_written(cu_mm_state *s, const float *y, size_t bytes) {
    if (!s->c_x) return;
    const char *ya = (const char *)y, *yb = ya + bytes;
    const char *xa = (const char *)s->c_x, *xb = xa + sizeof(float) * (size_t)s->c_T * s->c_K;
    if (ya < xb && xa < yb) cu_mm_invalidate(s);
}

static const void *gemv_input(const cu_launch *L, cu_mm_state *s, const float *x, int T, hearth_dtype t, int K) {
    int kind = cu_mmv_xprep_kind(t);
    if (kind == XPREP_NONE) return x;
    prep(L, s, kind, x, T, K);
    return s->c_buf;
}

void cu_matmul_set(const cu_launch *L, cu_mm_state *s, const mmv_set *set_in, const float *x, int T, hearth_dtype t,
                   int K, size_t row_bytes) {
    mmv_set set = *set_in;
    const void *xp = gemv_input(L, s, x, T, t, K);
    if (set.prep_kind != XPREP_NONE) set.prep = xp == s->xprep ? s->xprep2 : s->xprep;
    cu_mmv(L, &set, xp, T, t, K, row_bytes);
    int n = set.swiglu ? 2 : set.count;
    for (int m = 0; m < n; m++) out_written(s, set.y[m], sizeof(float) * (size_t)T * set.n[m]);
    if (set.swiglu) out_written(s, set.out, sizeof(float) * (size_t)T * set.n[0]);
    if (set.prep_kind != XPREP_NONE) cu_mm_set_cache(s, set.out, T, set.n[0], set.prep_kind, set.prep);
}

int cu_matmul_set2(const cu_launch *L, cu_mm_state *s, const mmv_set *a, hearth_dtype ta, size_t rba,
                   const mmv_set *b, hearth_dtype tb, size_t rbb, const float *x, int T, int K) {
    if (a->prep_kind != XPREP_NONE || b->prep_kind != XPREP_NONE || cu_mmv_xprep_kind(ta) != cu_mmv_xprep_kind(tb))
        return 0;
    const void *xp = gemv_input(L, s, x, T, ta, K);
    if (!cu_mmv2(L, a, ta, rba, b, tb, rbb, xp, T, K)) return 0;
    for (const mmv_set *set : {a, b})
        for (int m = 0; m < set->count; m++) out_written(s, set->y[m], sizeof(float) * (size_t)T * set->n[m]);
    return 1;
}

void cu_matmul(const cu_launch *L, cu_mm_state *s, float *y, const float *x, int T, const void *w, hearth_dtype t,
               int N, int K, size_t row_bytes, int layout) {
    if (cu_mm_gemv(s, T, t)) {
        mmv_set set = {};
        set.split = layout == HEARTH_LAYOUT_SPLIT;
        set.w[0] = (const uint8_t *)w;
        set.y[0] = y;
        set.n[0] = N;
        set.count = 1;
        cu_matmul_set(L, s, &set, x, T, t, K, row_bytes);
        return;
    } else if (is_float(t)) {
        float_gemm(L, s, t, w, row_bytes, x, y, N, T, K);
    } else {
        prep(L, s, XPREP_BF16, x, T, K);
        int chunk = (int)(s->deq_bytes / ((size_t)K * 2));
        if (chunk < 1) { /* not a row of scratch: op_matmul asserts that prepare_weight reserved it */
            cu_note(L, cudaErrorInvalidValue);
            return;
        }
        if (chunk > N) chunk = N;
        if (chunk > 64) chunk -= chunk % 64;
        for (int n0 = 0; n0 < N; n0 += chunk) {
            int nr = N - n0 < chunk ? N - n0 : chunk;
            cu_dequant_bf16(L, s->deq, w, t, K, row_bytes, layout == HEARTH_LAYOUT_SPLIT, n0, nr);
            gemm(L, s, CUDA_R_16BF, s->deq, K, s->c_buf, y + n0, nr, T, K, N);
        }
    }
    /* the output may have overwritten the cached input */
    out_written(s, y, sizeof(float) * (size_t)T * N);
}

/* A quantized matrix on the cuBLAS path is dequantized into the scratch
 * whole (twice: a pair dequantizes both members at once, cu_matmul_pair),
 * up to the 256 MiB of a Llama-8B gate + up pair (2 x 14336 x 4096 bf16);
 * larger matrices (a vocabulary head) go in chunks of rows. */
#define DEQ_MAX_BYTES ((size_t)256 << 20)

size_t cu_mm_deq_need(hearth_dtype t, int rows, int cols) {
    if (is_float(t)) return 0;
    size_t need = 2 * (size_t)rows * (size_t)cols * sizeof(__nv_bfloat16);
    return need < DEQ_MAX_BYTES ? need : DEQ_MAX_BYTES;
}

long long cu_mm_stack_deq(const cu_mm_mat *m, int n, int K) {
    long long rows = 0;
    for (int j = 0; j < n; j++) {
        if (is_float(m[j].t) != is_float(m[0].t)) return -1;
        /* one GEMM reads float rows where they are: one type, one row stride, each matrix right after the last */
        if (is_float(m[0].t) && j > 0 &&
            (m[j].t != m[0].t || m[j].row_bytes != m[0].row_bytes ||
             (const char *)m[j].w != (const char *)m[j - 1].w + (size_t)m[j - 1].N * m[j - 1].row_bytes))
            return -1;
        rows += m[j].N;
    }
    if (is_float(m[0].t)) return m[0].row_bytes % hearth_dtype_get(m[0].t)->block_bytes ? -1 : 0;
    long long deq = rows * K * (long long)sizeof(__nv_bfloat16);
    return deq <= (long long)DEQ_MAX_BYTES ? deq : -1;
}

int cu_matmul_stack(const cu_launch *L, cu_mm_state *s, float *y, const float *x, int T, int K, const cu_mm_mat *m,
                    int n) {
    long long deq = cu_mm_stack_deq(m, n, K);
    if (deq < 0 || (size_t)deq > s->deq_bytes) return 0;
    int N = 0;
    for (int j = 0; j < n; j++) N += m[j].N;
    if (is_float(m[0].t)) {
        float_gemm(L, s, m[0].t, m[0].w, m[0].row_bytes, x, y, N, T, K);
    } else {
        prep(L, s, XPREP_BF16, x, T, K);
        size_t at = 0;
        for (int j = 0; j < n; j++) {
            cu_dequant_bf16(L, s->deq + at, m[j].w, m[j].t, K, m[j].row_bytes, m[j].layout == HEARTH_LAYOUT_SPLIT, 0,
                            m[j].N);
            at += (size_t)m[j].N * K;
        }
        gemm(L, s, CUDA_R_16BF, s->deq, K, s->c_buf, y, N, T, K, N);
    }
    out_written(s, y, sizeof(float) * (size_t)T * N);
    return 1;
}

/* Where two products of one x go as one batched GEMM (bench_gemm on the
 * H200, bf16: k + v at 128..2048 rows took 41-92% of the two GEMMs' time;
 * gate + up 98% at 128 rows, 83% at 512, 88% at 640, but 106% at 768 and
 * 104% at 1024): up to this many output elements a member (T x N; gate + up
 * up to 697 rows); HEARTH_MM_PAIR overrides, 0 = never. */
static long pair_max_elems(void) {
    static long v = -1;
    if (v < 0) {
        const char *e = getenv("HEARTH_MM_PAIR");
        v = e && *e ? atol(e) : 10000000L;
    }
    return v;
}

int cu_matmul_pair(const cu_launch *L, cu_mm_state *s, float *y1, float *y2, const float *x, int T, const void *w1,
                   const void *w2, hearth_dtype t, int N, int K, size_t row_bytes, int layout) {
    if (cu_mm_gemv(s, T, t) || t == HEARTH_DT_F32 || (long)T * N > pair_max_elems()) return 0;
    /* the members' order is y's (the strides' signs must agree); the buffers are separate allocations, so
     * their distances are taken as addresses */
    if ((uintptr_t)y2 < (uintptr_t)y1) {
        float *ty = y1;
        const void *tw = w1;
        y1 = y2, y2 = ty, w1 = w2, w2 = tw;
    }
    long long stride_c = (long long)((uintptr_t)y2 - (uintptr_t)y1) / (long long)sizeof(float);
    if (stride_c < (long long)T * N) return 0;
    if (t == HEARTH_DT_F16 || t == HEARTH_DT_BF16) {
        long long diff = (long long)((intptr_t)w2 - (intptr_t)w1);
        if (diff <= 0 || diff % 2 || row_bytes != (size_t)K * 2) return 0;
        cudaDataType_t ab;
        const void *xb = float_input(L, s, t, x, T, K, &ab);
        gemm_pair(L, s, ab, w1, K, diff / 2, xb, y1, stride_c, N, T, K, N);
    } else {
        size_t one = (size_t)N * K;
        if (2 * one * 2 > s->deq_bytes) return 0;
        prep(L, s, XPREP_BF16, x, T, K);
        cu_dequant_bf16(L, s->deq, w1, t, K, row_bytes, layout == HEARTH_LAYOUT_SPLIT, 0, N);
        cu_dequant_bf16(L, s->deq + one, w2, t, K, row_bytes, layout == HEARTH_LAYOUT_SPLIT, 0, N);
        gemm_pair(L, s, CUDA_R_16BF, s->deq, K, (long long)one, s->c_buf, y1, stride_c, N, T, K, N);
    }
    out_written(s, y1, sizeof(float) * (size_t)T * N);
    out_written(s, y2, sizeof(float) * (size_t)T * N);
    return 1;
}
