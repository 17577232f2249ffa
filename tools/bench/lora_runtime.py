#!/usr/bin/env python3
"""What a runtime adapter load costs the streams already running (serve --runtime-lora):
the time POST /v1/load_lora_adapter takes, and the longest gap between two tokens of
streams running while it happens, against their gaps without a load.

    tools/bench/lora_runtime.py [--bin ./hearth] [--model M] [--streams 4] [--loads 5]

The adapter is random, on every projection of the default model (rank 8), written
with tools/bench/make_lora_adapter.py."""
import argparse
import json
import pathlib
import statistics
import sys
import tempfile
import threading
import time
import urllib.request

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests" / "e2e"))
sys.path.insert(0, str(ROOT / "tools" / "bench"))
from make_lora_adapter import llama_shapes, write_adapter  # noqa: E402
from test_server import Server  # noqa: E402


def post(url, path, body):
    req = urllib.request.Request(url + path, json.dumps(body).encode(), {"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=120) as r:
        return r.status, r.read().decode()


def stream_gaps(url, n_tokens, out):
    """One streamed completion; the gaps between its chunks (s), after the first."""
    body = {"model": "base", "prompt": "Tell me a long story about a lighthouse keeper.", "max_tokens": n_tokens,
            "temperature": 0, "stream": True, "ignore_eos": True}
    req = urllib.request.Request(url + "/v1/completions", json.dumps(body).encode(),
                                 {"Content-Type": "application/json"})
    times = []
    with urllib.request.urlopen(req, timeout=300) as r:
        for line in r:
            if line.startswith(b"data: {"):
                times.append(time.perf_counter())
    out.append([b - a for a, b in zip(times[1:], times[2:])])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--streams", type=int, default=4)
    ap.add_argument("--loads", type=int, default=5)
    ap.add_argument("--tokens", type=int, default=400)
    a = ap.parse_args()
    with tempfile.TemporaryDirectory() as t:
        d = write_adapter(pathlib.Path(t) / "a", llama_shapes(576, 9, 3, 64, 1536), 30, 1, r=8, alpha=16)
        s = Server("--parallel", a.streams, "--runtime-lora")
        try:
            for with_loads in (False, True):
                gaps = []
                threads = [threading.Thread(target=stream_gaps, args=(s.url, a.tokens, gaps))
                           for _ in range(a.streams)]
                for th in threads:
                    th.start()
                time.sleep(0.5)
                load_s = []
                for i in range(a.loads if with_loads else 0):
                    t0 = time.perf_counter()
                    st, _ = post(s.url, "/v1/load_lora_adapter", {"lora_name": f"x{i}", "lora_path": str(d)})
                    load_s.append(time.perf_counter() - t0)
                    assert st == 200
                    post(s.url, "/v1/unload_lora_adapter", {"lora_name": f"x{i}"})
                    time.sleep(0.2)
                for th in threads:
                    th.join()
                flat = [g for gs in gaps for g in gs]
                print(f"{'with' if with_loads else 'without'} loads: {a.streams} streams, token gap median "
                      f"{statistics.median(flat) * 1e3:.1f} ms, max {max(flat) * 1e3:.1f} ms"
                      + (f"; load {statistics.median(load_s) * 1e3:.1f} ms median, {max(load_s) * 1e3:.1f} max "
                         f"({len(load_s)} loads)" if load_s else ""))
        finally:
            s.stop()


if __name__ == "__main__":
    main()
