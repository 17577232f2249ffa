#!/bin/bash
# build_llamacpp_cpu.sh - llama.cpp's llama-server for this machine's CPU
# (GGML_NATIVE), from the source that the PyPI sdist of llama-cpp-python==0.3.36
# vendors (the sdist, checked by sha256, that scripts/setup.sh and
# build_llamacpp_cuda.sh take). The C++ peer of CPU serving benchmarks
# (tools/bench/spec_peer.py --llama-server OUT/bin/llama-server).
#
#   tools/bench/build_llamacpp_cpu.sh [OUT]     (default build/llamacpp-cpu)
#
# About 15 minutes on two cores.
set -euo pipefail
cd "$(dirname "$0")/../.."
OUT=${1:-build/llamacpp-cpu}
SDIST=llama_cpp_python-0.3.36.tar.gz
SHA=832db0699007f1be95a7e41ef12e88926b02ba836461e36a36372db2760c1a2e
mkdir -p "$OUT/src"
if [ ! -d "$OUT/src/llama_cpp_python-0.3.36" ]; then
  .venv/bin/python -m pip download -q --no-deps --no-binary :all: llama-cpp-python==0.3.36 -d "$OUT/src"
  echo "$SHA  $OUT/src/$SDIST" | sha256sum -c --status || { echo "$SDIST: sha256 mismatch" >&2; exit 1; }
  tar -xzf "$OUT/src/$SDIST" -C "$OUT/src"
fi
L=$OUT/src/llama_cpp_python-0.3.36/vendor/llama.cpp
cmake -S "$L" -B "$L/build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DGGML_NATIVE=ON -DBUILD_SHARED_LIBS=OFF \
  -DLLAMA_CURL=OFF -DLLAMA_OPENSSL=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF \
  -DLLAMA_BUILD_SERVER=ON > "$OUT/cmake.log"
ninja -C "$L/build" -j"$(nproc)" llama-server
mkdir -p "$OUT/bin"
cp "$L/build/bin/llama-server" "$OUT/bin/"
echo "built $OUT/bin/llama-server (llama.cpp of llama-cpp-python 0.3.36)"
