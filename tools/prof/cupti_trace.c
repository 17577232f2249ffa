/* cupti_trace.c - a GPU timeline of any hearth program, for the devices
 * that have no Nsight Systems: the CUDA driver loads this library when
 * CUDA_INJECTION64_PATH names it, and it records every kernel (graph nodes
 * included, with their real start and end, so PDL overlap shows) and every
 * copy through CUPTI's activity API. With HEARTH_TRACE_API=1 it also records
 * every CUDA runtime API call (kind "api", named by CUPTI, e.g.
 * "cudaLaunchKernel_v7000"; any thread), so host-side gaps show: CUPTI stamps
 * API calls on the same clock as kernels and copies. That costs a little host
 * time per call, so leave it off when the host time itself is measured. At
 * exit it writes one CSV line each, "start_ns,end_ns,kind,name", kind kernel,
 * memcpy or api, to $HEARTH_TRACE_OUT (default trace.csv);
 * tools/prof/timeline.py summarises it (--host for the API calls).
 *
 *   make trace-cuda
 *   CUDA_INJECTION64_PATH=$PWD/build/libhearth_trace.so build/bench/cuda/bench_model M ...
 */
#include <cupti.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static FILE *out;

static void CUPTIAPI buffer_requested(uint8_t **buf, size_t *size, size_t *max_records) {
    *buf = aligned_alloc(8, 16u << 20);
    *size = *buf ? 16u << 20 : 0; /* none: CUPTI drops those records (reported as dropped) */
    *max_records = 0;
}

static void CUPTIAPI buffer_completed(CUcontext ctx, uint32_t stream, uint8_t *buf, size_t size, size_t valid) {
    (void)ctx, (void)stream, (void)size;
    CUpti_Activity *r = NULL;
    while (out && cuptiActivityGetNextRecord(buf, valid, &r) == CUPTI_SUCCESS) {
        if (r->kind == CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL || r->kind == CUPTI_ACTIVITY_KIND_KERNEL) {
            const CUpti_ActivityKernel10 *k = (const CUpti_ActivityKernel10 *)r;
            fprintf(out, "%llu,%llu,kernel,%s\n", (unsigned long long)k->start, (unsigned long long)k->end,
                    k->name ? k->name : "?");
        } else if (r->kind == CUPTI_ACTIVITY_KIND_MEMCPY) {
            const CUpti_ActivityMemcpy6 *m = (const CUpti_ActivityMemcpy6 *)r;
            fprintf(out, "%llu,%llu,memcpy,%llu bytes kind %d\n", (unsigned long long)m->start,
                    (unsigned long long)m->end, (unsigned long long)m->bytes, (int)m->copyKind);
        } else if (r->kind == CUPTI_ACTIVITY_KIND_RUNTIME) {
            const CUpti_ActivityAPI *a = (const CUpti_ActivityAPI *)r;
            const char *name = NULL;
            if (cuptiGetCallbackName(CUPTI_CB_DOMAIN_RUNTIME_API, a->cbid, &name) == CUPTI_SUCCESS && name)
                fprintf(out, "%llu,%llu,api,%s\n", (unsigned long long)a->start, (unsigned long long)a->end, name);
            else
                fprintf(out, "%llu,%llu,api,cbid %u\n", (unsigned long long)a->start, (unsigned long long)a->end,
                        (unsigned)a->cbid);
        }
    }
    size_t dropped = 0;
    cuptiActivityGetNumDroppedRecords(NULL, stream, &dropped);
    if (dropped) fprintf(stderr, "cupti_trace: %zu records dropped\n", dropped);
    free(buf);
}

static void finish(void) {
    cuptiActivityFlushAll(1);
    if (out) fclose(out);
    out = NULL;
}

int InitializeInjection(void) {
    const char *path = getenv("HEARTH_TRACE_OUT");
    out = fopen(path ? path : "trace.csv", "w");
    if (!out) return 0;
    if (cuptiActivityRegisterCallbacks(buffer_requested, buffer_completed) != CUPTI_SUCCESS ||
        cuptiActivityEnable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL) != CUPTI_SUCCESS ||
        cuptiActivityEnable(CUPTI_ACTIVITY_KIND_MEMCPY) != CUPTI_SUCCESS) {
        fprintf(stderr, "cupti_trace: CUPTI activity tracing unavailable\n");
        return 0;
    }
    const char *api = getenv("HEARTH_TRACE_API");
    if (api && strcmp(api, "1") == 0 && cuptiActivityEnable(CUPTI_ACTIVITY_KIND_RUNTIME) != CUPTI_SUCCESS)
        fprintf(stderr, "cupti_trace: runtime API tracing unavailable\n");
    atexit(finish);
    return 1;
}
