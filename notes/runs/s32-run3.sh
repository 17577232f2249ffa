#!/bin/bash
# s32-run3: the CPU backend on the GPU machine's host CPU (16 cores), beside
# llama.cpp: the 16-layer Q4_0 / Q8_0 / Q4_K_M models (make_llama_gguf.py,
# as on the VM), prefill 512 and decode 128 after 512 at 16 threads. hearth
# is ./hearth of bin.tar.xz with --device cpu, at its best ISA and under
# HEARTH_CPU_ISA=avx2; llama.cpp is the peer suite's build (0c1e570, its
# CPU backend compiled for AVX2: GGML_NATIVE=OFF) with no GPU visible.
set -u
mkdir -p "${OUT:-/tmp/out}"
{
B=/tmp/b; mkdir -p $B && tar -C $B -xJf .dev/bin.tar.xz
mkdir -p /tmp/lc && tar -C /tmp/lc -xJf .dev/llama.tar.xz
lscpu | grep -E "^Model name|^CPU\(s\)|^Thread|^Core|^Socket" 
echo "avx512f / vnni: $(grep -c avx512f /proc/cpuinfo) / $(grep -c avx512_vnni /proc/cpuinfo) of $(nproc) cpus"
for t in q4_0 q8_0 q4_K_M; do
  m=/tmp/small-$t.gguf
  timeout 120 python3 tools/bench/make_llama_gguf.py $m --type $t --layers 16 --hidden 1024 --ffn 4096 --heads 16 --kv-heads 4 --vocab 32000 >/dev/null 2>&1
  for T in 16 8; do
    echo "## $(date +%T) $t threads $T"
    echo "hearth: $(timeout 60 $B/hearth bench $m --device cpu --threads $T --prompt 512 --gen 128 --reps 2 2>&1 | grep -oE 'prefill 512: [0-9.]+ tok/s \| decode 128: [0-9.]+')"
    echo "hearth avx2: $(HEARTH_CPU_ISA=avx2 timeout 60 $B/hearth bench $m --device cpu --threads $T --prompt 512 --gen 128 --reps 2 2>&1 | grep -oE 'prefill 512: [0-9.]+ tok/s \| decode 128: [0-9.]+')"
    echo "llama.cpp: $(CUDA_VISIBLE_DEVICES= LD_LIBRARY_PATH=/tmp/lc/lib timeout 90 /tmp/lc/bin/llama-bench -m $m -ngl 0 -t $T -r 2 -p 512 -n 0 2>&1 | grep -oE 'pp512 .*|error.*') | $(CUDA_VISIBLE_DEVICES= LD_LIBRARY_PATH=/tmp/lc/lib timeout 90 /tmp/lc/bin/llama-bench -m $m -ngl 0 -t $T -r 2 -p 0 -n 128 -d 512 2>&1 | grep -oE 'tg128 @ d512 .*|error.*')"
  done
done
echo "## $(date +%T) done"
} 2>&1 | tee "${OUT:-/tmp/out}/s32-run3.log"
