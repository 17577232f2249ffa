#!/usr/bin/env bash
# session 52: bench_cluster (the questions before the attention's merge moves into a cluster) on whatever card
# comes; on an H200 first issue7 and issue6 on HEAD. Here: make -j2 all build/test_cuda build/bench/cuda/bench_model
# build/bench/cuda/bench_attn build/bench/cuda/bench_pick build/bench/cuda/bench_persist build/bench/cuda/bench_cluster,
# then PACK_EXTRA=build/bench/cuda/bench_cluster tools/bench/pack_device.sh; there (carry [".dev"]):
#   bash notes/runs/s52-run1.sh
cd "$(dirname "$0")/../.."
gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader)
echo "$gpu"
mkdir -p /tmp/b && tar -C /tmp/b -xJf .dev/bin.tar.xz
echo "## $(date +%T) bench_cluster"
timeout 120 /tmp/b/bench_cluster --smem 0,200,220 --iters 2000 --stream 1 2>&1
echo "## $(date +%T) bench_cluster --stream 0"
timeout 60 /tmp/b/bench_cluster --smem 220 --iters 2000 --stream 0 2>&1
case $gpu in *H200*) bash tools/bench/device_run.sh issue7 issue6 2>&1 ;; esac
