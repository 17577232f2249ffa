#!/usr/bin/env bash
# session 52: bench_cluster (fixed after s52-run1), then decode_layers with the attention's merge within
# clusters of 16 (notes/patches/decode-layers-cluster.patch) against HEAD: test_cuda_cluster decode_layers,
# bench_model_prev / bench_model_cluster alternated twice after 512 tokens for each type; on an H200 issue7
# first and issue6 last. Here: make -j2 all build/test_cuda build/bench/cuda/bench_model build/bench/cuda/bench_attn
# build/bench/cuda/bench_pick build/bench/cuda/bench_persist build/bench/cuda/bench_cluster;
# tools/bench/pack_variants.sh notes/patches/decode-layers-cluster.patch; make -j2 all build/test_cuda
# build/bench/cuda/bench_model; PACK_EXTRA="$(echo build/variants/*) build/bench/cuda/bench_cluster"
# tools/bench/pack_device.sh. There (carry [".dev"]): bash notes/runs/s52-run3.sh
cd "$(dirname "$0")/../.."
case $(nvidia-smi --query-gpu=name --format=csv,noheader) in *H200*) h200=1 ;; *) h200=0 ;; esac
bash tools/bench/device_run.sh cluster
[ $h200 = 1 ] && bash tools/bench/device_run.sh issue7
# a hung cluster launch must not eat the budget: the variant's test first, the benchmarks only if it passes
echo "## $(date +%T) test_cuda_cluster decode_layers"
HEARTH_ROOT=$PWD timeout 40 /tmp/b/test_cuda_cluster decode_layers 2>&1 | tail -3
[ "${PIPESTATUS[0]}" = 0 ] && bash tools/bench/device_run.sh variants
[ $h200 = 1 ] && bash tools/bench/device_run.sh issue6
echo "## $(date +%T) the cluster variant's plan"
HEARTH_ROOT=$PWD timeout 60 /tmp/b/bench_model_cluster /tmp/l8b-q4_0.gguf --prompt 16 --gen 8 --prefill 16 --reps 1 2>&1 |
    grep -E "decode_layers|^decode"
