#!/usr/bin/env python3
"""s35-serve.py - on the GPU machine: `hearth serve --device cuda` with the
default model and a random LoRA adapter (tools/bench/make_lora_adapter.py),
driven with urllib: /v1/embeddings against llama.cpp's golden (as
tests/e2e/test_embeddings.py on the CPU), the adapter listed and applied, and
mixed concurrent requests equal to each alone. Prints one line a check; exits
1 on a failure."""
import concurrent.futures as cf
import json
import pathlib
import socket
import subprocess
import sys
import time
import urllib.request

import numpy as np

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tools" / "bench"))
from make_lora_adapter import llama_shapes, write_adapter  # noqa: E402

BIN = sys.argv[1] if len(sys.argv) > 1 else "/tmp/b/hearth"
MODEL = ROOT / "models" / "SmolLM2-135M-Instruct.Q4_1.gguf"
ad = write_adapter("/tmp/s35-tutor", llama_shapes(576, 9, 3, 64, 1536), 30, 1, r=8, alpha=16)
with socket.socket() as s:
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
url = f"http://127.0.0.1:{port}"
proc = subprocess.Popen([BIN, "serve", str(MODEL), "--device", "cuda", "--port", str(port), "--lora", f"tutor={ad}"],
                        stdout=subprocess.DEVNULL, stderr=open("/tmp/s35-serve.log", "w"))
fails = 0


def post(path, body):
    req = urllib.request.Request(url + path, json.dumps(body).encode(), {"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=120) as r:
        return json.loads(r.read())


def check(name, ok, detail=""):
    global fails
    fails += not ok
    print(f"{'ok  ' if ok else 'FAIL'} {name} {detail}", flush=True)


try:
    for _ in range(600):
        try:
            if urllib.request.urlopen(url + "/health", timeout=2).status == 200:
                break
        except OSError:
            time.sleep(0.1)
    golden = json.loads((ROOT / "tests/fixtures/smollm2/embed_golden.json").read_text())
    texts = [c["text"] for c in golden["cases"]]
    r = post("/v1/embeddings", {"model": "m", "input": texts})
    cos = [float(np.array(d["embedding"]) @ np.array(c["embedding"])) for d, c in zip(r["data"], golden["cases"])]
    check("embeddings on cuda vs llama.cpp", min(cos) > 0.999, f"cosine min {min(cos):.5f}")
    ids = [m["id"] for m in json.loads(urllib.request.urlopen(url + "/v1/models").read())["data"]]
    check("models lists the adapter", "tutor" in ids, str(ids))

    def one(model, prompt):
        return post("/v1/completions", {"model": model, "prompt": prompt, "max_tokens": 20, "temperature": 0})

    a, b = one("tutor", "The capital of France is"), one("m", "The capital of France is")
    check("adapter applied and named", a["model"] == "tutor" and a["choices"][0]["text"] != b["choices"][0]["text"],
          repr((a["choices"][0]["text"], b["choices"][0]["text"])))
    jobs = [("tutor" if i % 2 else "m", f"Write one line about the number {i}.") for i in range(16)]
    alone = [one(*j)["choices"][0]["text"] for j in jobs]
    with cf.ThreadPoolExecutor(16) as ex:
        together = [r["choices"][0]["text"] for r in ex.map(lambda j: one(*j), jobs)]
    same = sum(x == y for x, y in zip(alone, together))
    check("16 mixed requests at once equal each alone", same == 16, f"{same} of 16")
finally:
    proc.terminate()
    proc.wait(timeout=30)
sys.exit(1 if fails else 0)
