#!/usr/bin/env python3
"""peer_llamacpp.py - llama.cpp (llama-cpp-python, built from source) as the
CPU peer of `hearth bench` on a GGUF model.

Measures, as `hearth bench MODEL --prompt P --gen N --threads T` does: prefill
tok/s of a prompt of P random token ids (one eval, batch 512) and greedy
decode tok/s of N tokens after it (one eval a token, argmax of the logits);
the best of --reps runs after one untimed warm-up. A measurement, never a
test.

  pip install llama-cpp-python==0.3.36     (PyPI sdist: builds llama.cpp here)
  python3 tools/bench/peer_llamacpp.py MODEL [--prompt 128] [--gen 128] [--threads 2] [--reps 3]
"""
import argparse
import random
import time

import numpy as np
from llama_cpp import Llama, __version__


def run(llm, ids, gen):
    llm.reset()
    t0 = time.perf_counter()
    llm.eval(ids)
    t1 = time.perf_counter()
    for _ in range(gen):
        tok = int(np.argmax(llm.scores[llm.n_tokens - 1]))
        llm.eval([tok])
    t2 = time.perf_counter()
    return len(ids) / (t1 - t0), gen / (t2 - t1)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("model")
    ap.add_argument("--prompt", type=int, default=128)
    ap.add_argument("--gen", type=int, default=128)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--reps", type=int, default=3)
    a = ap.parse_args()
    llm = Llama(model_path=a.model, n_ctx=a.prompt + a.gen + 16, n_batch=512, n_threads=a.threads,
                n_threads_batch=a.threads, verbose=False)
    rng = random.Random(12345)
    ids = [rng.randrange(llm.n_vocab()) for _ in range(a.prompt)]
    run(llm, ids, 2)  # warm-up
    best_pp = best_tg = 0.0
    for _ in range(a.reps):
        pp, tg = run(llm, ids, a.gen)
        best_pp, best_tg = max(best_pp, pp), max(best_tg, tg)
    print(f"peer llama.cpp (llama-cpp-python {__version__}) | {a.model} | {a.threads} threads | "
          f"prefill {a.prompt}: {best_pp:.1f} tok/s | decode {a.gen}: {best_tg:.2f} tok/s")


if __name__ == "__main__":
    main()
