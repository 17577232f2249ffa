#!/bin/bash
export HEARTH_ROOT=$PWD
mkdir -p /tmp/b && tar -C /tmp/b -xJf .dev/bin.tar.xz
echo "## $(date +%T) the s25-run8 seed"
HEARTH_TEST_SEED=0x6b048d2c6ca98 timeout 120 /tmp/b/test_cuda cuda_attention_flash 2>&1 | tail -6
echo "## $(date +%T) a new seed"
timeout 120 /tmp/b/test_cuda cuda_attention_flash 2>&1 | tail -6
