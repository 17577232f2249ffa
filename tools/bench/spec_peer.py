"""Speculative decoding by prompt lookup, hearth against llama.cpp, on the CPU.

hearth: `hearth serve MODEL --parallel 1 --spec-ngram K` (and without it), one
streamed /v1/completions request at a time through the official OpenAI SDK.
llama.cpp: llama-cpp-python (built from source by `scripts/setup.sh --oracle`)
with its prompt-lookup draft model, `LlamaPromptLookupDecoding(num_pred_tokens=K)`
(and without a draft model), streamed create_completion. Both greedy, the same
raw prompts, the same threads, alternated.

Decode tok/s = (tokens - 1) / (time of the last token - time of the first):
prefill is left out (llama-cpp-python computes every prompt row's logits when it
drafts). Prints one line per (engine, K, prompt, rep) and a table of medians.

usage: .venv/bin/python tools/bench/spec_peer.py [--model M] [--k 5] [--gen 200] [--threads 2] [--reps 3]
"""
import argparse
import os
import pathlib
import socket
import statistics
import subprocess
import sys
import time
import urllib.request

import openai

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


class Hearth:
    def __init__(self, binary, model, threads, k):
        self.port = free_port()
        args = [binary, "serve", model, "--port", str(self.port), "--threads", str(threads), "--parallel", "1"]
        if k:
            args += ["--spec-ngram", str(k)]
        self.proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        url = f"http://127.0.0.1:{self.port}"
        for _ in range(600):
            try:
                if urllib.request.urlopen(url + "/health").status == 200:
                    break
            except OSError:
                time.sleep(0.05)
        self.client = openai.OpenAI(base_url=url + "/v1", api_key="none", max_retries=0)

    def run(self, prompt, gen):
        t = []
        text, n = "", 0
        for ch in self.client.completions.create(model="default", prompt=prompt, max_tokens=gen, temperature=0,
                                                 stream=True, stream_options={"include_usage": True}):
            if ch.choices:
                t.append(time.perf_counter())
                text += ch.choices[0].text
            if ch.usage:
                n = ch.usage.completion_tokens
        return text, n, t

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


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default=str(ROOT / "models" / "SmolLM2-135M-Instruct.Q4_1.gguf"))
    ap.add_argument("--bin", default=str(ROOT / "hearth"))
    ap.add_argument("--k", type=int, default=5)
    ap.add_argument("--gen", type=int, default=200)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--reps", type=int, default=3)
    a = ap.parse_args()
    rates, texts = {}, {}
    for rep in range(a.reps):
        for engine in ("hearth", "llama.cpp"):
            for k in (0, a.k):
                e = Hearth(a.bin, a.model, a.threads, k) if engine == "hearth" else LlamaCpp(a.model, a.threads, k)
                try:
                    for name, prompt in PROMPTS.items():
                        text, n, t = e.run(prompt, a.gen)
                        rate = (n - 1) / (t[-1] - t[0]) if n > 1 and t[-1] > t[0] else float("nan")
                        rates.setdefault((engine, k, name), []).append(rate)
                        texts[(engine, k, name)] = text
                        print(f"rep {rep} {engine:9s} k={k} {name:5s} {n:4d} tokens {rate:7.1f} tok/s", flush=True)
                finally:
                    e.close()
    print(f"\ndecode tok/s, median of {a.reps} (threads {a.threads}, {a.gen} tokens at most, K = {a.k})")
    print("| prompt | hearth | hearth K | speed-up | llama.cpp | llama.cpp K | speed-up | hearth K / llama.cpp K |")
    print("|---|---|---|---|---|---|---|---|")
    for name in PROMPTS:
        h0, hk = (statistics.median(rates[("hearth", k, name)]) for k in (0, a.k))
        l0, lk = (statistics.median(rates[("llama.cpp", k, name)]) for k in (0, a.k))
        print(f"| {name} | {h0:.1f} | {hk:.1f} | {hk / h0:.2f}x | {l0:.1f} | {lk:.1f} | {lk / l0:.2f}x | "
              f"{hk / lk:.2f}x |")
    for name in PROMPTS:
        same_h = texts[("hearth", 0, name)] == texts[("hearth", a.k, name)]
        same_l = texts[("llama.cpp", 0, name)] == texts[("llama.cpp", a.k, name)]
        same_x = texts[("hearth", 0, name)] == texts[("llama.cpp", 0, name)]
        print(f"{name}: hearth's text with K {'equals' if same_h else 'DIFFERS from'} without; llama.cpp's "
              f"{'equals' if same_l else 'DIFFERS from'} its own; hearth's and llama.cpp's "
              f"{'are the same' if same_x else 'differ'}")
        if not same_x:
            print(f"  hearth:    {texts[('hearth', 0, name)][:160]!r}\n  llama.cpp: {texts[('llama.cpp', 0, name)][:160]!r}")


if __name__ == "__main__":
    os.environ.setdefault("OMP_NUM_THREADS", "2")
    main()
