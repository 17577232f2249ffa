#!/bin/bash
# s34-run3: test_cuda on this session's tree (the engine's sampler gained the
# constraint hook), then structured output through `hearth serve --device
# cuda` on the default model (notes/runs/s34-structured.py): constrained rows
# go through the host sampler with the logits of the device's forward.
set -u
mkdir -p "${OUT:-/tmp/out}"
{
bash tools/bench/device_run.sh tests
echo "## $(date +%T) hearth serve --device cuda: structured output"
/tmp/b/hearth serve models/SmolLM2-135M-Instruct.Q4_1.gguf --device cuda --port 8397 > /tmp/serve.log 2>&1 &
pid=$!
python3 - <<'PY'
import time, urllib.request
for _ in range(240):
    try:
        urllib.request.urlopen("http://127.0.0.1:8397/health", timeout=1); break
    except Exception:
        time.sleep(0.25)
PY
timeout 200 python3 notes/runs/s34-structured.py http://127.0.0.1:8397
kill $pid; wait $pid
grep -iE "error|device|cuda" /tmp/serve.log | head -5
echo "## $(date +%T) done"
} 2>&1 | tee "${OUT:-/tmp/out}/s34-run3.log"
