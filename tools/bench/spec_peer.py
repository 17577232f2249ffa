"""Speculative decoding by prompt lookup, hearth against llama.cpp, on the CPU.

hearth: `hearth serve MODEL --parallel 1 --spec-ngram K` (and without it), one
streamed /v1/completions request at a time (the standard library's HTTP client,
so that it runs on the GPU machine as it is: `device_run.sh spec`).
llama-server (--llama-server BIN, built by tools/bench/build_llamacpp_cpu.sh):
`-np 1 --spec-type ngram-simple` with its default n-gram sizes (lookup 12,
draft 48) and with `--spec-ngram-simple-size-n 3 --spec-ngram-simple-size-m K`,
and without, through the same client.
llama-cpp-python (built from source by `scripts/setup.sh --oracle`) with its
prompt-lookup draft model, `LlamaPromptLookupDecoding(num_pred_tokens=K)` (and
without a draft model), streamed create_completion. All greedy, the same raw
prompts, the same threads, alternated.

Decode tok/s = (tokens - 1) / (time of the last token - time of the first):
prefill is left out (llama-cpp-python computes every prompt row's logits when it
drafts). Prints one line per (engine, K, prompt, rep) and a table of medians.

usage: .venv/bin/python tools/bench/spec_peer.py [--model M] [--k 5] [--gen 200] [--threads 2] [--reps 3]
                                                 [--llama-server BIN] [--only hearth]
"""
import argparse
import json
import os
import pathlib
import socket
import statistics
import subprocess
import sys
import time
import urllib.request

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tools" / "oracle"))

FRUIT = ("apple, banana, cherry, date, elderberry, fig, grape, honeydew, kiwi, lemon, mango, nectarine, orange, "
         "papaya, quince, raspberry, strawberry, tangerine, ugli fruit, vanilla bean, watermelon, xigua, yam, "
         "zucchini, apricot, blackberry, cantaloupe, dragonfruit, guava, jackfruit, lime, lychee, mulberry, olive, "
         "peach, pear, plum, pomegranate, starfruit, tamarind")
CODE = '''def summarize(records, threshold):
    total = 0
    count = 0
    largest = None
    for record in records:
        value = record["value"]
        if value < threshold:
            continue
        total += value
        count += 1
        if largest is None or value > largest:
            largest = value
    average = total / count if count else 0.0
    return {"total": total, "count": count, "largest": largest, "average": average}
'''
PROMPTS = {
    "copy": f"Copy the list exactly.\n{FRUIT}\nCopy: apple, banana,",
    "code": f"{CODE}\n# The same function with records renamed to rows and value renamed to amount:\n\n"
            "def summarize(rows, threshold):\n",
    "free": "Once upon a time, in a small village by the sea, there lived a",
}


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Server:
    """hearth serve or llama-server: an OpenAI-compatible server on a free port."""

    def __init__(self, args):
        self.port = free_port()
        self.proc = subprocess.Popen([*args, "--port", str(self.port)], stdout=subprocess.DEVNULL,
                                     stderr=subprocess.DEVNULL)
        url = f"http://127.0.0.1:{self.port}"
        for _ in range(600):
            try:
                if urllib.request.urlopen(url + "/health").status == 200:
                    break
            except OSError:
                time.sleep(0.05)
        self.url = url

    def run(self, prompt, gen, extra=None):
        """One streamed completion (extra: more body fields): its text, tokens and each piece's arrival time."""
        body = {"model": "default", "prompt": prompt, "max_tokens": gen, "temperature": 0, "stream": True,
                "stream_options": {"include_usage": True}, **(extra or {})}
        rq = urllib.request.Request(self.url + "/v1/completions", data=json.dumps(body).encode(),
                                    headers={"Content-Type": "application/json"})
        t, text, n = [], "", 0
        with urllib.request.urlopen(rq, timeout=600) as r:
            for line in r:
                line = line.decode().strip()
                if not line.startswith("data: ") or line == "data: [DONE]":
                    continue
                ch = json.loads(line[6:])
                if ch.get("choices") and ch["choices"][0]["text"]:
                    t.append(time.perf_counter())
                    text += ch["choices"][0]["text"]
                if ch.get("usage"):
                    n = ch["usage"]["completion_tokens"]
        return text, n or len(t), t

    def close(self):
        self.proc.terminate()
        self.proc.wait()


class LlamaCpp:
    def __init__(self, model, threads, k):
        from llamacpp_util import open_llama
        from llama_cpp.llama_speculative import LlamaPromptLookupDecoding
        draft = LlamaPromptLookupDecoding(num_pred_tokens=k) if k else None
        self.llm = open_llama(model, n_ctx=2048, n_threads=threads, n_threads_batch=threads, verbose=False,
                              draft_model=draft)

    def run(self, prompt, gen):
        t = []
        text = ""
        for ch in self.llm.create_completion(prompt, max_tokens=gen, temperature=0, stream=True):
            t.append(time.perf_counter())
            text += ch["choices"][0]["text"]
        return text, len(t), t

    def close(self):
        self.llm.close()


def open_engine(a, engine, k):
    if engine == "hearth":
        spec = ["--spec-ngram", str(k)] if k else []
        return Server([a.bin, "serve", a.model, "--threads", str(a.threads), "--parallel", "1", *spec])
    if engine.startswith("llama-server"):
        spec = ["--spec-type", "ngram-simple"] if k else []
        if k and engine == "llama-server":
            spec += ["--spec-ngram-simple-size-n", "3", "--spec-ngram-simple-size-m", str(k)]
        # --no-repack: the extra buffer types (AMX on this Xeon) crash here, as tools/oracle/llamacpp_util.py says
        return Server([a.llama_server, "-m", a.model, "-t", str(a.threads), "-tb", str(a.threads), "-c", "2048",
                       "-np", "1", "--no-warmup", "--no-repack", *spec])
    return LlamaCpp(a.model, a.threads, k)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default=str(ROOT / "models" / "SmolLM2-135M-Instruct.Q4_1.gguf"))
    ap.add_argument("--bin", default=str(ROOT / "hearth"))
    ap.add_argument("--k", type=int, default=5)
    ap.add_argument("--gen", type=int, default=200)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--llama-server", help="llama-server binary (tools/bench/build_llamacpp_cpu.sh)")
    ap.add_argument("--only", choices=["hearth"], help="no peers (the GPU machine has none)")
    a = ap.parse_args()
    rates, texts = {}, {}
    engines = ["hearth", "llama-cpp-python"]
    if a.llama_server:
        engines[1:1] = ["llama-server", "llama-server (its n-gram defaults)"]
    if a.only:
        engines = [a.only]
    for rep in range(a.reps):
        for engine in engines:
            for k in (0, a.k):
                if engine == "llama-server (its n-gram defaults)" and k == 0:
                    continue  # the same run as llama-server's
                e = open_engine(a, engine, k)
                try:
                    for name, prompt in PROMPTS.items():
                        text, n, t = e.run(prompt, a.gen)
                        rate = (n - 1) / (t[-1] - t[0]) if n > 1 and t[-1] > t[0] else float("nan")
                        rates.setdefault((engine, k, name), []).append(rate)
                        texts[(engine, k, name)] = text
                        print(f"rep {rep} {engine} k={k} {name:5s} {n:4d} tokens {rate:7.1f} tok/s", flush=True)
                finally:
                    e.close()
    print(f"\ndecode tok/s, median of {a.reps} (threads {a.threads}, {a.gen} tokens at most, K = {a.k})")
    print("| prompt | engine | without | with drafts | speed-up | hearth with / this with |")
    print("|---|---|---|---|---|---|")
    med = {key: statistics.median(v) for key, v in rates.items()}
    for name in PROMPTS:
        hk = med[("hearth", a.k, name)]
        for engine in engines:
            base = med[("llama-server" if engine.startswith("llama-server") else engine, 0, name)]
            with_k = med[(engine, a.k, name)]
            print(f"| {name} | {engine} | {base:.1f} | {with_k:.1f} | {with_k / base:.2f}x | {hk / with_k:.2f}x |")
    for name in PROMPTS:
        for engine in engines:
            same = texts[(engine, a.k, name)] == texts[("llama-server" if engine.startswith("llama-server") else engine,
                                                        0, name)]
            print(f"{name}: {engine}'s text with drafts {'equals' if same else 'DIFFERS from'} its text without")


if __name__ == "__main__":
    os.environ.setdefault("OMP_NUM_THREADS", "2")
    main()
