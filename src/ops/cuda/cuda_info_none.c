/* cuda_info_none.c - device discovery in a build without CUDA (make CUDA=0):
 * there are no devices. With CUDA, cuda_info.cu provides these. */
#include "ops/cuda/cuda_info.h"

#ifndef HEARTH_CUDA
int hearth_cuda_device_count(void) { return 0; }
int hearth_cuda_device_query(int i, hearth_cuda_device_info *info) {
    (void)i;
    (void)info;
    return -1;
}
#endif
