#!/bin/bash
# s26-run4: are the engine's GEMMs power bound? bench_gemm in short bursts
# and sustained (many launches back to back), the SM clock and the power
# sampled every 200 ms meanwhile; and what bf16 outputs would save.
set -u
mkdir -p /tmp/b && tar -C /tmp/b -xJf .dev/bin.tar.xz && tar -C /tmp/b -xJf .dev/gemm.tar.xz
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit,enforced.power.limit --format=csv,noheader
nvidia-smi --query-gpu=timestamp,clocks.sm,power.draw,temperature.gpu,clocks_event_reasons.active --format=csv,noheader -lms 200 > /tmp/smi.log 2>&1 &
SMI=$!
echo "## $(date +%T.%N) bursts"
timeout 150 /tmp/b/bench_gemm --rows 512,8192 --reps 9 --copies 8 --algos 4
echo "## $(date +%T.%N) sustained"
timeout 200 /tmp/b/bench_gemm --rows 8192 --reps 48 --copies 32 --algos 1
echo "## $(date +%T.%N) end"
kill $SMI
awk -F', ' '{print $2, $3, $4, $5}' /tmp/smi.log | sort | uniq -c | sort -rn | head -25
echo "## the log, every 5th sample"
awk 'NR % 5 == 0' /tmp/smi.log | cut -c12-90
