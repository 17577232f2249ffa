#!/bin/bash
# s32-run4: the AVX2 q4_K tile's PMADDWD in place of PMULLD (2 uops on
# Intel) on the GPU machine's Xeon: bench_matmul -i avx2 q4_K before /
# after, alternated, and the 16-layer Q4_K_M model's prefill under
# HEARTH_CPU_ISA=avx2 at 16 threads, before (.dev/bin.tar.xz, 16f4836) /
# after (.dev/ab/bin_after.tar.xz).
set -u
mkdir -p "${OUT:-/tmp/out}"
{
mkdir -p /tmp/b /tmp/b2 && tar -C /tmp/b -xJf .dev/bin.tar.xz && tar -C /tmp/b2 -xJf .dev/ab/bin_after.tar.xz
export LD_LIBRARY_PATH=/tmp/b/lib
for r in 1 2 3; do
  for v in before after; do
    echo "$r $v: $(.dev/ab/bench_matmul_$v -t 1 -s 0.4 -i avx2 q4_K 2>&1 | grep -E 'prefill|decode' | awk '{print $3, $7}' | tr '\n' ' ')"
  done
done
m=/tmp/small-q4_K_M.gguf
timeout 120 python3 tools/bench/make_llama_gguf.py $m --type q4_K_M --layers 16 --hidden 1024 --ffn 4096 --heads 16 --kv-heads 4 --vocab 32000 >/dev/null 2>&1
for r in 1 2 3; do
  echo "$r before: $(HEARTH_CPU_ISA=avx2 timeout 60 /tmp/b/hearth bench $m --device cpu --threads 16 --prompt 512 --gen 16 --reps 3 2>&1 | grep -oE 'prefill 512: [0-9.]+')"
  echo "$r after: $(HEARTH_CPU_ISA=avx2 timeout 60 /tmp/b2/hearth bench $m --device cpu --threads 16 --prompt 512 --gen 16 --reps 3 2>&1 | grep -oE 'prefill 512: [0-9.]+')"
done
echo "## $(date +%T) done"
} 2>&1 | tee "${OUT:-/tmp/out}/s32-run4.log"
