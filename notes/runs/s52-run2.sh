#!/usr/bin/env bash
# session 52, after s52-run1: bench_cluster again (s52-run1's build set a dynamic shared-memory cap the
# static share pushed past the device's, and its consumers met at __syncthreads without the producer warp:
# both fixed); on an H200 issue7 and issue6 on HEAD after it. Packed as s52-run1.sh says; there (carry [".dev"]):
#   bash notes/runs/s52-run2.sh
cd "$(dirname "$0")/../.."
case $(nvidia-smi --query-gpu=name --format=csv,noheader) in
*H200*) bash tools/bench/device_run.sh cluster issue7 issue6 ;;
*) bash tools/bench/device_run.sh cluster ;;
esac
