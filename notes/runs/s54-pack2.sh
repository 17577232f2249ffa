#!/usr/bin/env bash
# session 54: packs what notes/runs/s54-run4.sh runs: HEAD's bench_model (bench_model_prev), the att-words
# patch's bench_model_attq8 / test_cuda_attq8 (pack_variants.sh), and the stamps builds (`make bench-stamps`) of
# HEAD and of attq8 as build/variants/stamps_prev / stamps_attq8, into .dev/bin.tar.xz (~2.5 min here).
set -euo pipefail
cd "$(dirname "$0")/../.."
make -j2 all build/test_cuda build/bench/cuda/bench_model
tools/bench/pack_variants.sh notes/patches/decode-layers-attq8.patch
make bench-stamps && cp build/stamps/bench_model_st build/variants/stamps_prev
trap 'git checkout -q -- src/ops/cuda/decode_layers.cu' EXIT
git apply notes/patches/decode-layers-attq8.patch
make bench-stamps && cp build/stamps/bench_model_st build/variants/stamps_attq8
git checkout -q -- src/ops/cuda/decode_layers.cu
make -j2 all bench-stamps
PACK_ONLY=1 PACK_EXTRA="$(echo build/variants/*)" tools/bench/pack_device.sh
