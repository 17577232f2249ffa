/* add_rmsnorm.cu - the recorder's fusion of a residual add, the rmsnorm that
 * reads its result, and the preparation of the normed row for the matmuls
 * that follow (bf16 / f16 copy, or q8 in 32-blocks, as xprep.cu makes them):
 *   X += D (when D is given); Y = X / rms(X) * w; prep(Y).
 * Y NULL: the recorder found Y dead (only its prepared copy is read), so
 * only the copy is written.
 * One block of 1024 threads per row (a decode step has one row: the whole
 * chip waits on this block, so it is wide and shallow), each thread holding
 * the elements k with k % 1024 == tid (dim <= 8192), so Y may alias X or D:
 * every element is read and written by one thread. Rounding as rmsnorm.cu
 * and add.cu. */
#include "ops/cuda/cuda_internal.cuh"

#define AR_NT 1024
#define AR_MAXJ 8 /* dim <= AR_NT * AR_MAXJ */

__global__ void __launch_bounds__(AR_NT) add_rmsnorm_kernel(float *X, const float *D, float *Y,
                                                          const float *__restrict__ w, int dim, float eps, int kind,
                                                          void *prep, int T, int early) {
    __shared__ double red[AR_NT / 32];
    const int row = blockIdx.x, tid = threadIdx.x, lane = tid & 31;
    float wv[AR_MAXJ]; /* the norm weight is no kernel's output: read before the wait */
#pragma unroll
    for (int j = 0; j < AR_MAXJ; j++) wv[j] = j * AR_NT + tid < dim ? w[j * AR_NT + tid] : 0.0f;
    pdl_wait_early(early);
    float *xr = X + (size_t)row * dim;
    const float *dr = D ? D + (size_t)row * dim : NULL;
    float *yr = Y ? Y + (size_t)row * dim : NULL; /* NULL: only the prepared copy is wanted */
    float v[AR_MAXJ];
    double ss = 0.0;
#pragma unroll
    for (int j = 0; j < AR_MAXJ; j++) {
        int k = j * AR_NT + tid;
        v[j] = 0.0f;
        if (k < dim) {
            float a = xr[k];
            if (dr) a = a + dr[k];
            v[j] = a;
            ss += (double)(a * a);
        }
    }
    if (dr) {
#pragma unroll
        for (int j = 0; j < AR_MAXJ; j++) {
            int k = j * AR_NT + tid;
            if (k < dim) xr[k] = v[j];
        }
    }
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) ss += __shfl_xor_sync(0xffffffffu, ss, o);
    if (lane == 0) red[tid >> 5] = ss;
    __syncthreads();
    double tot = 0.0;
#pragma unroll
    for (int i = 0; i < AR_NT / 32; i++) tot += red[i];
    const float s = 1.0f / sqrtf((float)(tot / dim) + eps);
    pdl_done(early);
    const size_t n = (size_t)T * dim;
#pragma unroll
    for (int j = 0; j < AR_MAXJ; j++) {
        int k = j * AR_NT + tid;
        if (j * AR_NT >= dim) break;
        float y = 0.0f;
        if (k < dim) {
            y = v[j] * s * wv[j];
            if (yr) yr[k] = y;
        }
        /* Q8: dim % 32 == 0, so a warp holds one 32-group */
        if (kind == XPREP_Q8 ? j * AR_NT + (tid & ~31) < dim : k < dim)
            prep_store(kind, prep, n, (size_t)row * dim + k, y, lane);
    }
}

int cu_add_rmsnorm_fits(int dim, int kind) {
    return dim <= AR_NT * AR_MAXJ && (kind != XPREP_Q8 || dim % QK == 0) && kind != XPREP_Q8K;
}

void cu_add_rmsnorm(const cu_launch *L, float *X, const float *D, float *Y, const float *w, int rows, int dim,
                    float eps, int kind, void *prep) {
    cu_launch_k(L, add_rmsnorm_kernel, dim3(rows), dim3(AR_NT), 0, X, D, Y, w, dim, eps, kind, prep, rows,
                L->pdl_early);
}
