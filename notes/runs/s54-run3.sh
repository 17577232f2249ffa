#!/usr/bin/env bash
# session 54, after llqkv landed (c7b0862): on an H200 the issue 7 measurements; on any other card the landed
# kernel end to end: test_cuda decode_layers, then for BF16, Q8_0 and Q4_0 bench_model and hearth bench with
# HEARTH_DECODE_LAYERS=1 and 0, and hearth run's greedy texts of both compared (device_run.sh layers48).
# Here: make -j2 all build/test_cuda build/bench/cuda/bench_model && tools/bench/pack_device.sh
# There (carry [".dev"]): bash notes/runs/s54-run3.sh
cd "$(dirname "$0")/../.."
case $(nvidia-smi --query-gpu=name --format=csv,noheader) in
*H200*) bash tools/bench/device_run.sh issue7 ;;
*) bash tools/bench/device_run.sh layers48 ;;
esac
