/* sm_share.h - a stream on a share of the device's multiprocessors (green
 * contexts; sm_share.cu). For measurements (bench_overlap). */
#ifndef HEARTH_OPS_CUDA_SM_SHARE_H
#define HEARTH_OPS_CUDA_SM_SHARE_H

#include <cuda_runtime.h>
#include <stddef.h>

typedef struct {
    void *green; /* CUgreenCtx; NULL: none */
    cudaStream_t stream;
    int sms; /* multiprocessors its kernels run on */
} cu_sm_share;

/* Splits n multiprocessors off device `device` (the driver rounds n up to
 * its partition size) and creates a non-blocking stream on them (rest 0) or
 * on the others (rest 1). 0, or -1 with why filled in. The stream is the
 * caller's to destroy, before cu_sm_share_free. */
int cu_sm_share_stream(int device, int n, int rest, cu_sm_share *out, char *why, size_t whylen);
void cu_sm_share_free(cu_sm_share *s);

#endif
