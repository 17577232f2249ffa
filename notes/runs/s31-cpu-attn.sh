#!/bin/bash
# s31-cpu-attn: bench_attn_cpu (new) on this tree under AVX-512 and AVX2, and
# the same source built against f955c5f's libhearth.a (/tmp/bench_attn_parent:
# its attention takes no ISA choice), f32 and f16 caches, alternated twice.
for r in 1 2; do
  for kv in f32 f16; do
    echo "## round $r, f955c5f, $kv"; /tmp/bench_attn_parent -t 2 -s 0.5 --kv $kv | tail -6
    for isa in avx512 avx2; do echo "## round $r, now, $isa, $kv"; build/bench_attn_cpu -t 2 -s 0.5 -i $isa --kv $kv | tail -6; done
  done
done
