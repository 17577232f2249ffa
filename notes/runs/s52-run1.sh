#!/usr/bin/env bash
# session 52: on whatever card comes, bench_cluster (the questions before the attention's merge moves into a
# cluster of 16) and decode_layers on 128 multiprocessors against all (what a grid of 8 clusters of 16 would
# give up); on an H200 first issue7 and issue6 on HEAD. Here: make -j2 all build/test_cuda
# build/bench/cuda/bench_model build/bench/cuda/bench_attn build/bench/cuda/bench_pick build/bench/cuda/bench_persist
# build/bench/cuda/bench_cluster, then tools/bench/pack_device.sh; there (carry [".dev"]):
#   bash notes/runs/s52-run1.sh
cd "$(dirname "$0")/../.."
case $(nvidia-smi --query-gpu=name --format=csv,noheader) in
*H200*) bash tools/bench/device_run.sh cluster issue7 issue6 ;;
*) bash tools/bench/device_run.sh cluster grid ;;
esac
