#!/bin/bash
# s31-run6: after 20258e0 (ops matmul_n; forward.c calls the matmuls of one
# input through it, CUDA leaves it NULL and loops as before): the CUDA tests
# that run forward.c end to end (engine batching, parity with PyTorch's
# goldens), and the q|k|v GEMM ones.
set -u
mkdir -p "${OUT:-/tmp/out}"
{
export HEARTH_ROOT=$PWD
B=/tmp/b
mkdir -p $B && tar -C $B -xJf .dev/bin.tar.xz
for t in cuda_parity_tiny_vs_pytorch cuda_engine_batching_bf16_model_f16_kv cuda_engine_batching_f32_model_e4m3_kv \
         cuda_qkv_one_gemm_matches_unfused_and_cpu cuda_layer_fused_matches_unfused_and_cpu cuda_graph_replay_matches_eager; do
  echo "## $(date +%T) test_cuda $t"
  timeout 120 $B/test_cuda $t 2>&1 | grep -vE "^  layer " | tail -4
done
echo "## $(date +%T) done"
} 2>&1 | tee "${OUT:-/tmp/out}/s31-run6.log"
