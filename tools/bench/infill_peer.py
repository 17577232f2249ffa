"""A code editor's fill-in-the-middle session against hearth and llama-server, on the CPU.

The model: SmolLM2-135M's shape (30 layers of 576, 9 heads / 3 KV heads, FFN 1536, Q8_0) with random weights
and StarCoder2's vocabulary (its FIM tokens), written once to models/bench-fim-135m-q8_0.gguf (git-ignored;
gguf-py, requirements-oracle.txt): no FIM model ships on PyPI. The session is what llama.vim sends
(autoload/llama.vim): POST /infill with the 256 lines before the cursor, 64 after, 16 files of 32 lines as
input_extra, the text typed so far on the line as prompt, n_indent, samplers top_k/top_p/infill, greedy, 16
tokens (ignore_eos: random weights would end at once); one character typed between requests, so each asks for
what the last one cached, and every 8th request the cursor moves down a line. Per request: the time to the
whole answer from the client, and the prompt tokens each server computed (timings.prompt_n). The first
request (everything cold) is reported apart. Both servers: one slot, 2 threads, the same context.

usage: .venv/bin/python tools/bench/infill_peer.py --llama-server BIN [--requests 40] [--threads 2]
"""
import argparse
import json
import os
import statistics
import sys
import time
import urllib.request

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from spec_peer import ROOT, Server  # noqa: E402

MODEL = ROOT / "models" / "bench-fim-135m-q8_0.gguf"
VOCAB = ROOT / "models" / "vocab" / "ggml-vocab-starcoder.gguf"


def write_model(path):
    sys.path.insert(0, str(ROOT / "tools" / "oracle"))
    import random_gguf
    random_gguf.write(path, "bench-fim-135m", VOCAB, 576, 30, 9, 3, 1536, 16384, embed_type="Q8_0",
                      weight_type="Q8_0", weight_std=0.04, norm="ones", rope_base=100000.0)


def source(n_lines, seed):
    r = np.random.default_rng(seed)
    words = ["value", "count", "items", "total", "result", "index", "name", "data", "key", "node"]
    out = []
    for i in range(n_lines):
        a, b = r.choice(words, 2)
        out.append(f"    {a}_{i} = compute({b}_{i % 7}, {int(r.integers(100))})")
    return out


def session(n_requests):
    """The requests of a typing session: (body) each."""
    lines = source(2000, 1)
    extra = [{"filename": f"src/mod{k}.py", "text": "\n".join(source(32, 100 + k)) + "\n"} for k in range(16)]
    typed = "    result = compute(value_1, 4"
    y, x = 600, 8
    for i in range(n_requests):
        if i and i % 8 == 0:
            y, x = y + 1, 8
        x = min(x + 1, len(typed))
        yield {"input_prefix": "\n".join(lines[y - 256:y]) + "\n", "input_suffix": "\n" + "\n".join(lines[y:y + 64]) + "\n",
               "prompt": typed[:x], "input_extra": extra, "n_predict": 16, "n_indent": 4, "top_k": 40, "top_p": 0.9,
               "samplers": ["top_k", "top_p", "infill"], "temperature": 0, "ignore_eos": True, "cache_prompt": True,
               "t_max_prompt_ms": 500, "t_max_predict_ms": 1000}


def infill(url, body):
    rq = urllib.request.Request(url + "/infill", data=json.dumps(body).encode(),
                                headers={"Content-Type": "application/json"})
    t0 = time.perf_counter()
    with urllib.request.urlopen(rq, timeout=600) as r:
        out = json.loads(r.read())
    return time.perf_counter() - t0, out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", default=str(ROOT / "hearth"))
    ap.add_argument("--llama-server")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--requests", type=int, default=40)
    ap.add_argument("--ctx", type=int, default=16384)
    a = ap.parse_args()
    if not MODEL.exists():
        write_model(MODEL)
        print(f"wrote {MODEL}", flush=True)
    rows = {}
    for engine in ["hearth"] + (["llama-server"] if a.llama_server else []):
        if engine == "hearth":
            args = [a.bin, "serve", str(MODEL), "--threads", str(a.threads), "--parallel", "1", "--ctx", str(a.ctx)]
        else:
            args = [a.llama_server, "-m", str(MODEL), "-t", str(a.threads), "-np", "1", "-c", str(a.ctx),
                    "--no-repack", "--host", "127.0.0.1"]
        srv = Server(args)
        try:
            got = [infill(srv.url, body) for body in session(a.requests)]
        finally:
            srv.close()
        first_s, first = got[0]
        rest = got[1:]
        rows[engine] = {"first_s": first_s, "first_prompt_n": first["timings"]["prompt_n"],
                        "tokens_evaluated": first["tokens_evaluated"],
                        "median_s": statistics.median(t for t, _ in rest),
                        "mean_prompt_n": statistics.mean(r["timings"]["prompt_n"] for _, r in rest),
                        "total_s": sum(t for t, _ in got)}
        r = rows[engine]
        print(f"{engine}: first request {r['first_s']:.3f} s ({r['tokens_evaluated']} prompt tokens, "
              f"{r['first_prompt_n']} computed); then median {r['median_s']:.3f} s a request, "
              f"{r['mean_prompt_n']:.1f} prompt tokens computed on average; {len(got)} requests in "
              f"{r['total_s']:.2f} s", flush=True)
    if len(rows) == 2:
        h, l = rows["hearth"], rows["llama-server"]
        print(f"llama-server / hearth: first {l['first_s'] / h['first_s']:.2f}x, median {l['median_s'] / h['median_s']:.2f}x, "
              f"session {l['total_s'] / h['total_s']:.2f}x")


if __name__ == "__main__":
    main()
