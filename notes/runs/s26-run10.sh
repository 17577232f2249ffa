#!/bin/bash
# s26-run10: the board power while the decode rows' e4m3 attention runs
# back to back (512 rows at 1000-2000 positions), to bound what overlapping
# it with the power-capped GEMMs could gain.
set -u
export HEARTH_ROOT=$PWD
mkdir -p /tmp/b && tar -C /tmp/b -xJf .dev/bin.tar.xz
nvidia-smi --query-gpu=timestamp,clocks.sm,clocks.mem,power.draw,clocks_event_reasons.active --format=csv,noheader -lms 100 > /tmp/smi.log 2>&1 &
SMI=$!
sleep 0.5
echo "## $(date +%T.%N) bench_attn fp8 decode rows"
timeout 120 /tmp/b/bench_attn --kv fp8 --T 512x1500,512x2000,512x1000,512x1500 --reps 256 --variants flash 2>&1 | grep -v "^#"
echo "## $(date +%T.%N) f16"
timeout 120 /tmp/b/bench_attn --kv f16 --T 512x1500,512x2000 --reps 256 --variants flash 2>&1 | grep -v "^#"
echo "## $(date +%T.%N) end"
sleep 0.3
kill $SMI
awk -F', ' '{split($1,t," "); print t[2], $2, $3, $4, $5}' /tmp/smi.log
