#!/usr/bin/env bash
# pack_device.sh - the CUDA binaries and the shared libraries the GPU machine
# lacks (it has jansson, pcre2, cuBLAS and the driver, not libmicrohttpd or
# libutf8proc), as one xz archive small enough to travel with the working
# tree: ~12 MB for all four (xz with a 256 MiB dictionary finds the code they
# share).
#
#   make -j2 all build/test_cuda build/bench/cuda/bench_model build/bench/cuda/bench_attn build/bench/cuda/bench_pick \
#       build/bench/cuda/bench_persist build/bench/cuda/bench_cluster
#   tools/bench/pack_device.sh [OUT.tar.xz]        # default .dev/bin.tar.xz
#
# There: mkdir -p /tmp/b && tar -C /tmp/b -xJf .dev/bin.tar.xz, then run
# /tmp/b/hearth, /tmp/b/test_cuda (HEARTH_ROOT=$PWD), /tmp/b/bench_model,
# /tmp/b/bench_attn, /tmp/b/bench_pick, /tmp/b/bench_persist, /tmp/b/bench_cluster (and /tmp/b/bench_model_st where
# `make bench-stamps` built it); their rpath finds the libraries in /tmp/b/lib. Keep
# the archive's folder out of git (.git/info/exclude) and name it in carry.
set -euo pipefail
cd "$(dirname "$0")/../.."
out=${1:-.dev/bin.tar.xz}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$tmp/lib" "$(dirname "$out")"
# PACK_ONLY=1: only the programs of PACK_EXTRA (pack_variants.sh), not the standard set
if [ "${PACK_ONLY:-0}" != 1 ]; then
  for f in hearth build/test_cuda build/bench/cuda/bench_model build/bench/cuda/bench_attn build/bench/cuda/bench_pick \
      build/bench/cuda/bench_persist build/bench/cuda/bench_cluster; do
    [ -x "$f" ] || { echo "pack_device: $f is not built" >&2; exit 1; }
    cp "$f" "$tmp/"
  done
  # the measurement build (`make bench-stamps`), where there is one
  [ -x build/stamps/bench_model_st ] && cp build/stamps/bench_model_st "$tmp/"
fi
# and any other programs named in PACK_EXTRA (e.g. an earlier build of bench_model to run beside this one)
for f in ${PACK_EXTRA:-}; do cp "$f" "$tmp/"; done
for lib in libmicrohttpd.so.12 libutf8proc.so.2; do
  path=$(ldd hearth | awk -v l="$lib" '$1 == l { print $3 }')
  [ -n "$path" ] || { echo "pack_device: hearth does not link $lib" >&2; exit 1; }
  cp "$path" "$tmp/lib/"
done
tar -C "$tmp" -cf - . | xz -T2 --lzma2=preset=6,dict=256MiB > "$out"
ls -la "$out"
