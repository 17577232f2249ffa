#!/usr/bin/env bash
# session 54: issue 7's measurements on the landed commit if the call gets an H200; on any other card it exits
# at once. Here: make -j2 all build/test_cuda build/bench/cuda/bench_model && tools/bench/pack_device.sh
# There (carry [".dev"]): bash notes/runs/s54-h200.sh
cd "$(dirname "$0")/../.."
nvidia-smi --query-gpu=name --format=csv,noheader
nvidia-smi --query-gpu=name --format=csv,noheader | grep -q H200 || exit 0
bash tools/bench/device_run.sh issue7
