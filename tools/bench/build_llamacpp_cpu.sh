#!/bin/bash
# build_llamacpp_cpu.sh - llama.cpp's llama-server and llama-bench for this machine's CPU
# (GGML_NATIVE), from the source that the PyPI sdist of llama-cpp-python==0.3.36
# vendors (the sdist, checked by sha256, that scripts/setup.sh and
# build_llamacpp_cuda.sh take). The C++ peer of CPU serving benchmarks
# (tools/bench/spec_peer.py --llama-server OUT/bin/llama-server) and of the kernels' prefill / decode
# rates (OUT/bin/llama-bench, notes/runs/s47-cpu-bf16.sh).
#
#   tools/bench/build_llamacpp_cpu.sh [OUT]     (default build/llamacpp-cpu)
#
# About 15 minutes on two cores.
set -euo pipefail
cd "$(dirname "$0")/../.."
OUT=${1:-build/llamacpp-cpu}
L=$(tools/bench/llamacpp_sdist.sh "$OUT/src")
cmake -S "$L" -B "$L/build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DGGML_NATIVE=ON -DBUILD_SHARED_LIBS=OFF \
  -DLLAMA_CURL=OFF -DLLAMA_OPENSSL=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF \
  -DLLAMA_BUILD_SERVER=ON > "$OUT/cmake.log"
ninja -C "$L/build" -j"$(nproc)" llama-server llama-bench
mkdir -p "$OUT/bin"
cp "$L/build/bin/llama-server" "$L/build/bin/llama-bench" "$OUT/bin/"
echo "built $OUT/bin/llama-server and llama-bench (llama.cpp of llama-cpp-python 0.3.36)"
