#!/bin/bash
# s30-run2: the long-sequence graph test with run 1's records made the same
# as the others' (nd's upload flushed first); bench_persist's flag variant
# with its producer asking L2 for chunks --l2 KB ahead, with and without the
# attention's stand-ins (a 7 us spin; 5 dependent DRAM loads); bench_pdl_chain
# (a kernel boundary: griddepcontrol.wait against a polled done counter).
set -u
export HEARTH_ROOT=$PWD
B=/tmp/b
mkdir -p $B && tar -C $B -xJf .dev/bin.tar.xz && tar -C $B -xJf .dev/extra.tar.xz
echo "## $(date +%T) test_cuda cuda_graph"
timeout 60 $B/test_cuda cuda_graph 2>&1 | tail -4
for r in 1 2; do
  echo "## $(date +%T) bench_pdl_chain --links 160 --mb 0,1,2,4,8,16,33 --reps 20"
  timeout 60 $B/bench_pdl_chain --links 160 --mb 0,1,2,4,8,16,33 --reps 20 2>&1 | tail -9
done
run() {
  echo "## $(date +%T) bench_persist $* --reps 5"
  timeout 40 $B/bench_persist "$@" --reps 5 2>&1 | grep -E '^(ring |flag|dyn|ring-only|stream)'
}
for l2 in 0 128 256 512 1024; do run --bpsm 2 --smem 96 --l2 $l2; done
for l2 in 0 256 512 1024; do run --bpsm 2 --smem 96 --stall 7 --l2 $l2; done
for l2 in 0 256 512; do run --bpsm 2 --smem 96 --chase 5 --l2 $l2; done
for st in 0 7; do for l2 in 0 256 512; do run --bpsm 1 --smem 192 --stall $st --l2 $l2; done; done
# issue 7's peer: llama.cpp (tools/bench/build_llamacpp_cuda.sh, packed as .dev/llama.tar.xz) on the same files
mkdir -p /tmp/lc && tar -C /tmp/lc -xJf .dev/llama.tar.xz
for t in bf16 q8_0 q4_0; do
  f=/tmp/l8b-$t.gguf
  [ -s $f ] || timeout 120 python3 tools/bench/make_llama_gguf.py $f --type $t $([ $t = q4_0 ] && echo --output-type q6_K) >/dev/null 2>&1
done
echo "## $(date +%T) peer_llamacpp.sh (llama-bench -fa on: pp512/pp2048 at ubatch 512 and 2048, tg128 after 512)"
timeout 330 bash tools/bench/peer_llamacpp.sh /tmp/lc /tmp/l8b-bf16.gguf /tmp/l8b-q8_0.gguf /tmp/l8b-q4_0.gguf
echo "## $(date +%T) done"
