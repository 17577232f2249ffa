#!/bin/bash
set -u
export HEARTH_ROOT=$PWD
mkdir -p /tmp/b && tar -C /tmp/b -xJf .dev/bin.tar.xz
mkdir -p models && cat /tmp/smol.aa /tmp/smol.ab .dev/smol.ac > models/SmolLM2-135M-Instruct.Q4_1.gguf && sha256sum models/SmolLM2-135M-Instruct.Q4_1.gguf
echo "## $(date +%T) default-model tests"
timeout 120 /tmp/b/test_cuda cuda_default_model 2>&1 | tail -8
echo "## $(date +%T) focused tests"
timeout 120 /tmp/b/test_cuda cuda_attention_flash 2>&1 | tail -6
echo "## $(date +%T) bench_attn 28/4 fp8 (odd group over e4m3: FA2 both)"
timeout 60 /tmp/b/bench_attn --heads 28/4 --kv fp8 --T 2048,4096 --reps 11 --variants flash,flash-fa2 2>&1
echo "## $(date +%T) done"
