#!/bin/bash
# build_llamacpp_cuda.sh - llama.cpp's llama-bench and llama-batched-bench with
# CUDA (sm_90), from the source that the PyPI sdist of llama-cpp-python==0.3.36
# vendors (the same sdist, checked by the same sha256, that scripts/setup.sh
# takes the tokenizer vocabularies from). The peer for the GPU benchmarks:
# build here, carry OUT to the GPU machine, run tools/bench/peer_llamacpp.sh.
#
#   tools/bench/build_llamacpp_cuda.sh [OUT]     (default build/llamacpp-cuda)
#
# OUT/bin holds the two tools, statically linked to ggml and llama (cuBLAS,
# the CUDA runtime and libgomp stay shared; libgomp is copied to OUT/lib).
# About an hour on two cores: ggml-cuda's ~140 kernel files. SASS only
# (90-real): with the PTX beside it, the two tools packed with hearth's
# binaries pass the 64 MiB that a call to the GPU machine carries.
set -euo pipefail
cd "$(dirname "$0")/../.."
OUT=${1:-build/llamacpp-cuda}
NVCC=${NVCC:-$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)}
L=$(tools/bench/llamacpp_sdist.sh "$OUT/src")
cmake -S "$L" -B "$L/build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_COMPILER="$NVCC" \
  -DGGML_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90-real -DGGML_CUDA_NCCL=OFF -DGGML_NATIVE=OFF \
  -DBUILD_SHARED_LIBS=OFF -DLLAMA_CURL=OFF -DLLAMA_OPENSSL=OFF \
  -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_SERVER=OFF > "$OUT/cmake.log"
ninja -C "$L/build" -j"$(nproc)" llama-bench llama-batched-bench
mkdir -p "$OUT/bin" "$OUT/lib"
cp "$L/build/bin/llama-bench" "$L/build/bin/llama-batched-bench" "$OUT/bin/"
strip "$OUT/bin/"*
cp "$(gcc -print-file-name=libgomp.so.1)" "$OUT/lib/"
echo "built $OUT/bin (llama.cpp $(git -C "$L" log -1 --format=%h 2>/dev/null || echo 'of llama-cpp-python 0.3.36'))"
