"""Requests that share a long prompt, arriving together: hearth against a
second hearth binary (the tree before a change) and llama-server, on the CPU.

Four streamed /v1/completions requests are sent at once through a server
with four slots: (a) `n`-like, the same 1,500-token prompt four times; (b) a
shared 1,500-token system text, each with its own short question. Reports the
wall time until all four ended, the TTFT of each (median, max), and for hearth
the prompt positions the prefix cache served (/stats tokens_cached). Each
server starts fresh for each case, so nothing is cached before it.

usage: .venv/bin/python tools/bench/shared_prompt.py [--bin B] [--base-bin OLD] [--llama-server BIN]
                                                     [--reps 3] [--threads 2]
"""
import argparse
import json
import os
import statistics
import sys
import threading
import time
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from spec_peer import ROOT, Server  # noqa: E402

SYSTEM = " ".join(f"Rule {i}: the answer to question {i} is the number {i * 7 % 101}." for i in range(110))
QUESTIONS = ["What is the answer to question 3?", "What is the answer to question 12?",
             "What is the answer to question 40?", "What is the answer to question 77?"]
CASES = {
    "same prompt x4": [SYSTEM + "\nQuestion: what is the answer to question 5?\nAnswer:"] * 4,
    "shared head + own question": [SYSTEM + f"\nQuestion: {q}\nAnswer:" for q in QUESTIONS],
}


def one(url, prompt, gen, out, i, t0):
    body = {"model": "default", "prompt": prompt, "max_tokens": gen, "temperature": 0, "stream": True}
    rq = urllib.request.Request(url + "/v1/completions", data=json.dumps(body).encode(),
                                headers={"Content-Type": "application/json"})
    first = None
    with urllib.request.urlopen(rq, timeout=600) as r:
        for line in r:
            line = line.decode().strip()
            if first is None and line.startswith("data: {"):
                first = time.perf_counter() - t0
    out[i] = (first, time.perf_counter() - t0)


def run_case(url, prompts, gen):
    out = [None] * len(prompts)
    t0 = time.perf_counter()
    th = [threading.Thread(target=one, args=(url, p, gen, out, i, t0)) for i, p in enumerate(prompts)]
    for t in th:
        t.start()
    for t in th:
        t.join()
    ttft = [o[0] for o in out]
    return max(o[1] for o in out), statistics.median(ttft), max(ttft)


def cached(url):
    try:
        return json.loads(urllib.request.urlopen(url + "/stats").read())["tokens"]["cached"]
    except OSError:
        return None


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default=str(ROOT / "models" / "SmolLM2-135M-Instruct.Q4_1.gguf"))
    ap.add_argument("--bin", default=str(ROOT / "hearth"))
    ap.add_argument("--base-bin", help="a hearth binary built from the tree before the change")
    ap.add_argument("--llama-server")
    ap.add_argument("--gen", type=int, default=16)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--reps", type=int, default=3)
    a = ap.parse_args()
    engines = {"hearth": [a.bin, "serve", a.model, "--threads", str(a.threads), "--parallel", "4"]}
    if a.base_bin:
        engines["hearth (before)"] = [a.base_bin, "serve", a.model, "--threads", str(a.threads), "--parallel", "4"]
    if a.llama_server:
        engines["llama-server"] = [a.llama_server, "-m", a.model, "-t", str(a.threads), "-tb", str(a.threads),
                                   "-c", "16384", "-np", "4", "--no-warmup", "--no-repack"]
    res = {}
    for rep in range(a.reps):
        for name, cmd in engines.items():
            for case, prompts in CASES.items():
                s = Server(cmd)
                try:
                    wall, ttft_med, ttft_max = run_case(s.url, prompts, a.gen)
                    c = cached(s.url) if name.startswith("hearth") else None
                finally:
                    s.close()
                res.setdefault((name, case), []).append((wall, ttft_med, ttft_max, c))
                print(f"rep {rep} {name:16s} {case:28s} all done {wall:6.3f} s, TTFT median {ttft_med:6.3f} "
                      f"max {ttft_max:6.3f} s, cached {c}", flush=True)
    print(f"\nmedians of {a.reps} (4 requests at once, 4 slots, threads {a.threads}, {a.gen} tokens each, greedy)")
    print("| case | engine | all done (s) | TTFT median (s) | TTFT max (s) | prompt positions from the cache |")
    print("|---|---|---|---|---|---|")
    for case in CASES:
        for name in engines:
            v = res[(name, case)]
            med = [statistics.median(x[k] for x in v) for k in range(3)]
            print(f"| {case} | {name} | {med[0]:.3f} | {med[1]:.3f} | {med[2]:.3f} | "
                  f"{v[-1][3] if v[-1][3] is not None else '-'} |")


if __name__ == "__main__":
    main()
