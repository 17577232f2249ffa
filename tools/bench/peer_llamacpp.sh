#!/bin/bash
# peer_llamacpp.sh DIR MODEL.gguf... - llama.cpp's figures beside hearth's, on
# the GPU machine, for the same GGUF files (tools/bench/make_llama_gguf.py):
#   - issue 7: prefill 512 and 2048 tokens (llama-bench, ubatch 512 and 2048),
#     decode of 128 tokens after a 512-token prompt (llama-bench -d 512);
#     hearth's: bench_model M --prompt 512 --gen 128 --prefill 512,2048;
#   - issue 6 (PEER_STREAMS=1): N streams of 128 in / 128 out and 1000 / 1000
#     (llama-batched-bench: every prompt prefilled, then the streams decoded
#     in lockstep); hearth's: hearth bench M --prompt P --gen G --parallel N.
# DIR is what tools/bench/build_llamacpp_cuda.sh made (bin/, lib/).
# Flash attention on, every layer on the GPU, f16 KV cache (llama.cpp's
# default). Output tok/s of a batched run = N * G / (its T_PP + T_TG).
set -u
D=$1
shift
export LD_LIBRARY_PATH=$D/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
for m in "$@"; do
  echo "=== llama.cpp $(basename "$m")"
  "$D/bin/llama-bench" -m "$m" -ngl 99 -fa on -p 512,2048 -n 0 -ub 512,2048 -r 3 -o md 2>&1 | grep -E "^\||error"
  "$D/bin/llama-bench" -m "$m" -ngl 99 -fa on -p 0 -n 128 -d 512 -r 3 -o md 2>&1 | grep -E "^\| .*tg|error"
  if [ "${PEER_STREAMS:-0}" = 1 ]; then
    timeout 240 "$D/bin/llama-batched-bench" -m "$m" -ngl 99 -fa on -c 65536 -b 2048 -ub 512 \
      -npp 128 -ntg 128 -npl 1,8,64,256 2>&1 | grep -E "^\||error"
    timeout 240 "$D/bin/llama-batched-bench" -m "$m" -ngl 99 -fa on -c 128000 -b 2048 -ub 512 \
      -npp 1000 -ntg 1000 -npl 1,8,64 2>&1 | grep -E "^\||error"
  fi
done
