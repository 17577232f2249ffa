#!/bin/bash
set -u
export HEARTH_ROOT=$PWD
mkdir -p /tmp/b && tar -C /tmp/b -xJf .dev/bin.tar.xz
mkdir -p models && cat /tmp/smol.aa /tmp/smol.ab .dev/smol.ac > models/SmolLM2-135M-Instruct.Q4_1.gguf && sha256sum models/SmolLM2-135M-Instruct.Q4_1.gguf
echo "## $(date +%T) test_cuda (all)"
timeout 400 /tmp/b/test_cuda 2>&1 | grep -vE "^ok |^  layer|^  cuda (mistral|llama|qwen)" | tail -30
echo "## $(date +%T) done"
