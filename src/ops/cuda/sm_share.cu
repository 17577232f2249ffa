/* sm_share.cu - a CUDA stream whose kernels run on a share of the device's
 * multiprocessors (a green context), for measuring whether two kinds of
 * kernels can run side by side on disjoint parts of the chip (bench_overlap:
 * NanoFlow's question, issue 6). The driver's green-context calls are
 * reached through cudaGetDriverEntryPointByVersion, so nothing links
 * libcuda and a machine without a GPU still runs the binary. */
#include "ops/cuda/sm_share.h"

#include <cuda.h>
#include <stdio.h>

namespace {

/* The driver's entry point of `name` at the ABI of CUDA 12.4 (where green
 * contexts came) or of this runtime, or NULL with why filled in. */
template <typename F> F drv(const char *name, char *why, size_t whylen) {
    void *fn = NULL;
    cudaDriverEntryPointQueryResult q = cudaDriverEntryPointSymbolNotFound;
    cudaError_t e = cudaErrorUnknown;
    for (int v : {12040, CUDART_VERSION}) { /* the 12.4 ABI, else this runtime's */
        e = cudaGetDriverEntryPointByVersion(name, &fn, v, cudaEnableDefault, &q);
        if (e == cudaSuccess && q == cudaDriverEntryPointSuccess && fn) break;
    }
    if (e != cudaSuccess || q != cudaDriverEntryPointSuccess || !fn) {
        int dv = 0;
        cudaDriverGetVersion(&dv);
        snprintf(why, whylen, "the driver (version %d) has no %s: %s, query result %d", dv, name,
                 cudaGetErrorString(e), (int)q);
        cudaGetLastError();
        return NULL;
    }
    return (F)fn;
}

} // namespace

int cu_sm_share_stream(int device, int n, int rest, cu_sm_share *out, char *why, size_t whylen) {
    auto get_device = drv<CUresult (*)(CUdevice *, int)>("cuDeviceGet", why, whylen);
    auto get_res = drv<CUresult (*)(CUdevice, CUdevResource *, CUdevResourceType)>("cuDeviceGetDevResource", why,
                                                                                    whylen);
    auto split = drv<CUresult (*)(CUdevResource *, unsigned *, const CUdevResource *, CUdevResource *, unsigned,
                                  unsigned)>("cuDevSmResourceSplitByCount", why, whylen);
    auto gen_desc = drv<CUresult (*)(CUdevResourceDesc *, CUdevResource *, unsigned)>("cuDevResourceGenerateDesc", why,
                                                                                      whylen);
    auto green_new =
        drv<CUresult (*)(CUgreenCtx *, CUdevResourceDesc, CUdevice, unsigned)>("cuGreenCtxCreate", why, whylen);
    auto green_stream = drv<CUresult (*)(CUstream *, CUgreenCtx, unsigned, int)>("cuGreenCtxStreamCreate", why, whylen);
    if (!get_device || !get_res || !split || !gen_desc || !green_new || !green_stream) return -1;
    CUdevice dev;
    CUdevResource all, group, remaining;
    unsigned ng = 1;
    CUresult r = get_device(&dev, device);
    if (r == CUDA_SUCCESS) r = get_res(dev, &all, CU_DEV_RESOURCE_TYPE_SM);
    if (r == CUDA_SUCCESS) r = split(&group, &ng, &all, &remaining, 0, (unsigned)n);
    if (r != CUDA_SUCCESS || ng != 1) {
        snprintf(why, whylen, "cannot split %d multiprocessors off the device (driver error %d)", n, (int)r);
        return -1;
    }
    CUdevResource *mine = rest ? &remaining : &group;
    CUdevResourceDesc desc;
    CUgreenCtx g;
    CUstream s;
    if ((r = gen_desc(&desc, mine, 1)) != CUDA_SUCCESS ||
        (r = green_new(&g, desc, dev, CU_GREEN_CTX_DEFAULT_STREAM)) != CUDA_SUCCESS) {
        snprintf(why, whylen, "green context of %u multiprocessors: driver error %d", mine->sm.smCount, (int)r);
        return -1;
    }
    if ((r = green_stream(&s, g, CU_STREAM_NON_BLOCKING, 0)) != CUDA_SUCCESS) {
        snprintf(why, whylen, "a stream on the green context of %u multiprocessors: driver error %d",
                 mine->sm.smCount, (int)r);
        cu_sm_share green = {g, NULL, 0};
        cu_sm_share_free(&green); /* not leaked with the failure */
        return -1;
    }
    out->green = g;
    out->stream = (cudaStream_t)s;
    out->sms = (int)mine->sm.smCount;
    return 0;
}

void cu_sm_share_free(cu_sm_share *s) {
    if (!s->green) return;
    char why[160];
    auto destroy = drv<CUresult (*)(CUgreenCtx)>("cuGreenCtxDestroy", why, sizeof why);
    if (destroy) destroy((CUgreenCtx)s->green);
    s->green = NULL;
}
