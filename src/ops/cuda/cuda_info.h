/* cuda_info.h - what CUDA devices this process can use. Callable from C;
 * in a build without CUDA (CUDA=0) the count is 0. */
#ifndef HEARTH_OPS_CUDA_INFO_H
#define HEARTH_OPS_CUDA_INFO_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct {
    char name[128];
    int cc_major, cc_minor;
    size_t mem_total, mem_free; /* bytes */
    int n_sm;
} hearth_cuda_device_info;

/* Number of usable devices (0 when no driver or GPU). Thread-safe. */
int hearth_cuda_device_count(void);
/* Fill info for device i; returns 0 on success, -1 on failure. */
int hearth_cuda_device_query(int i, hearth_cuda_device_info *info);

#ifdef __cplusplus
}
#endif

#endif
