/* cuda_info.cu - device discovery through the CUDA runtime. */
#include "ops/cuda/cuda_info.h"

#include <cuda_runtime.h>
#include <stdio.h>
#include <string.h>

extern "C" int hearth_cuda_device_count(void) {
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess) {
        cudaGetLastError(); /* clear the sticky "no driver" error */
        return 0;
    }
    return n;
}

extern "C" int hearth_cuda_device_query(int i, hearth_cuda_device_info *info) {
    cudaDeviceProp prop;
    memset(info, 0, sizeof *info);
    if (cudaGetDeviceProperties(&prop, i) != cudaSuccess) return -1;
    snprintf(info->name, sizeof info->name, "%s", prop.name);
    info->cc_major = prop.major;
    info->cc_minor = prop.minor;
    info->n_sm = prop.multiProcessorCount;
    int prev = 0;
    cudaGetDevice(&prev);
    if (cudaSetDevice(i) == cudaSuccess) {
        size_t f = 0, t = 0;
        if (cudaMemGetInfo(&f, &t) == cudaSuccess) {
            info->mem_free = f;
            info->mem_total = t;
        }
        cudaSetDevice(prev);
    }
    return 0;
}
