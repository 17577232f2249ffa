#!/usr/bin/env python3
"""Embeddings on the CPU, hearth against llama-server, through llama-server's own POST /embedding
(the same request to both): the default model, last-token pooling (llama-server --embeddings --pooling
last), L2-normalized. A corpus of short passages is sent in batches (one request holds a batch, as a RAG
indexer sends them); reported: passages a second over the whole corpus (after one warm-up batch), each
server's median batch time, and how close the two servers' vectors are (cosine, per passage).

usage: .venv/bin/python tools/bench/embed_peer.py --llama-server BIN [--passages 256] [--batch 16]
       [--threads 2] [--reps 2]
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

MODEL = ROOT / "models" / "SmolLM2-135M-Instruct.Q4_1.gguf"
TOPICS = ["lighthouses", "tax law", "sourdough", "black holes", "chess openings", "river deltas", "jazz harmony",
          "compilers", "beekeeping", "glaciers", "medieval trade", "solar panels", "octopuses", "railways"]


def corpus(n):
    r = np.random.default_rng(7)
    out = []
    for i in range(n):
        t = TOPICS[i % len(TOPICS)]
        k = int(r.integers(12, 40))
        words = " ".join(r.choice(["the", "a", "of", "and", "in", "which", "its", "new", "old", "many"], k))
        out.append(f"Passage {i} about {t}: {words}.")
    return out


def embed(url, texts):
    rq = urllib.request.Request(url + "/embedding", data=json.dumps({"input": texts}).encode(),
                                headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(rq, timeout=600) as r:
        d = json.load(r)
    return [np.array(x["embedding"][0]) for x in sorted(d, key=lambda x: x["index"])]


def run(url, texts, batch):
    embed(url, texts[:batch])  # warm-up
    times, vecs = [], []
    t0 = time.perf_counter()
    for i in range(0, len(texts), batch):
        t = time.perf_counter()
        vecs += embed(url, texts[i:i + batch])
        times.append(time.perf_counter() - t)
    return len(texts) / (time.perf_counter() - t0), statistics.median(times), vecs


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--llama-server", required=True)
    ap.add_argument("--passages", type=int, default=256)
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--reps", type=int, default=2)
    a = ap.parse_args()
    texts = corpus(a.passages)
    servers = {
        "hearth": [str(ROOT / "hearth"), "serve", str(MODEL), "--threads", str(a.threads), "--parallel",
                   str(a.batch)],
        "llama-server": [a.llama_server, "-m", str(MODEL), "--embeddings", "--pooling", "last", "-t",
                         str(a.threads), "-np", str(a.batch), "-c", str(256 * a.batch), "-b", "4096", "-ub", "4096",
                         "--no-repack"],
    }
    rate, vecs = {}, {}
    for rep in range(a.reps):
        for name, args in servers.items():
            s = Server(args)
            try:
                r, med, v = run(s.url, texts, a.batch)
            finally:
                s.close()
            rate.setdefault(name, []).append(r)
            vecs[name] = v
            print(f"rep {rep} {name}: {r:.1f} passages/s, median batch of {a.batch} {med * 1e3:.0f} ms", flush=True)
    cos = [float(x @ y) for x, y in zip(vecs["hearth"], vecs["llama-server"])]
    best = {k: max(v) for k, v in rate.items()}
    print(f"best: hearth {best['hearth']:.1f}, llama-server {best['llama-server']:.1f} passages/s "
          f"({best['hearth'] / best['llama-server']:.2f}x); cosine hearth vs llama-server min {min(cos):.4f}, "
          f"median {statistics.median(cos):.4f}")


if __name__ == "__main__":
    main()
