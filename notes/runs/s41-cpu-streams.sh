#!/bin/bash
# s41-cpu-streams: issue 6's CPU figures on the session's tree, llama.cpp beside it: hearth's engine at 1 / 4 / 16
# streams of 128 / 128 on the default model, 2 threads, against llama-batched-bench (llama.cpp of
# llama-cpp-python 0.3.36, GGML_NATIVE, built next to build/llamacpp-cpu's llama-server: ninja -C
# build/llamacpp-cpu/src/llama_cpp_python-0.3.36/vendor/llama.cpp/build llama-batched-bench), alternated, two
# rounds (--no-repack: its AMX buffer types crash on this Xeon, as llama-server's). llama-batched-bench's output rate is N x 128 / T with T its prompt and generation time.
set -u
D=models/SmolLM2-135M-Instruct.Q4_1.gguf
LB=build/llamacpp-cpu/src/llama_cpp_python-0.3.36/vendor/llama.cpp/build/bin/llama-batched-bench
for r in 1 2; do
  for n in 1 4 16; do
    echo "streams $n r$r hearth: $(./hearth bench $D --parallel $n --prompt 128 --gen 128 --threads 2 2>&1 | grep -oE 'output [0-9.]+ tok/s \| TTFT p50 [0-9.]+ s, p99 [0-9.]+ s')"
  done
  echo "streams r$r llama-batched-bench:"
  $LB -m $D -t 2 -tb 2 -c 16384 -b 2048 -ub 512 -npp 128 -ntg 128 -npl 1,4,16 --no-repack 2>&1 | grep -E "^\|"
done
