#!/bin/bash
# s31-run2: issue 6 on f955c5f: saturation (512 x 1000/1000, e4m3 KV), the
# streams table, a repeated 4000-token prompt against cold, and the flash
# attention tests.
set -u
mkdir -p "${OUT:-/tmp/out}"
{
bash tools/bench/device_run.sh issue6 streams flash
echo "## $(date +%T) hearth bench --repeat --prompt 4000 --gen 16 --reps 6"
timeout 120 /tmp/b/hearth bench /tmp/l8b-bf16.gguf --device cuda --repeat --prompt 4000 --gen 16 --reps 6 2>&1 | grep -vE '^\s*$' | tail -12
echo "## $(date +%T) done"
} 2>&1 | tee "${OUT:-/tmp/out}/s31-run2.log"
