/* cmd_devices.c - `hearth devices`: the CPU features and GPUs hearth sees. */
#include "cli/cli.h"
#include "core/pool.h"
#include "ops/cuda/cuda_info.h"

#include <stdio.h>
#include <string.h>


int cmd_devices(int argc, char **argv) {
    for (int i = 1; i < argc; i++) {
        if (cli_is_help(argv[i])) {
            printf("usage: hearth devices\n\nList the CPU (cores, SIMD features) and the CUDA GPUs.\n");
            return 0;
        }
        return cli_usage_error("devices", "unknown option '%s'", argv[i]);
    }
    __builtin_cpu_init();
    printf("cpu: %d cores;", hearth_cpu_count());
    if (__builtin_cpu_supports("avx2")) printf(" avx2");
    if (__builtin_cpu_supports("fma")) printf(" fma");
    if (__builtin_cpu_supports("f16c")) printf(" f16c");
    if (__builtin_cpu_supports("avx512f")) printf(" avx512f");
    if (__builtin_cpu_supports("avx512bw")) printf(" avx512bw");
    if (__builtin_cpu_supports("avx512vnni")) printf(" avx512vnni");
    printf("\n");
#ifdef HEARTH_CUDA
    int n = hearth_cuda_device_count();
    if (n == 0) printf("cuda: no device\n");
    for (int i = 0; i < n; i++) {
        hearth_cuda_device_info info;
        if (hearth_cuda_device_query(i, &info) != 0) continue;
        printf("cuda:%d: %s, compute %d.%d, %d SMs, %.1f GiB (%.1f GiB free)\n", i, info.name,
               info.cc_major, info.cc_minor, info.n_sm, info.mem_total / 1073741824.0,
               info.mem_free / 1073741824.0);
    }
#else
    printf("cuda: not built (make CUDA=0)\n");
#endif
    return 0;
}
