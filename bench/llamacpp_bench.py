"""Peer benchmark: llama.cpp (through llama-cpp-python, built from source here)
on the same GGUF, the same random prompt ids as `hearth bench`, same threads.

usage: python bench/llamacpp_bench.py MODEL.gguf [--prompt 512] [--gen 128] [--threads 2] [--reps 3]
Prints prefill and decode tok/s in the same format as `hearth bench`.
"""
import argparse
import pathlib
import sys
import time

import llama_cpp

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "tools" / "oracle"))
from llamacpp_util import open_llama  # noqa: E402  (AMX buffer types off: SIGILL in this VM)


def prompt_ids(n, vocab):
    # the same LCG as src/cli/cmd_bench.c
    x, out = 12345, []
    for _ in range(n):
        x = (x * 6364136223846793005 + 1442695040888963407) % (1 << 64)
        out.append((x >> 33) % vocab)
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("model")
    ap.add_argument("--prompt", type=int, default=512)
    ap.add_argument("--gen", type=int, default=128)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--reps", type=int, default=1)
    ap.add_argument("--batch", type=int, default=512)
    a = ap.parse_args()
    llm = open_llama(a.model, n_ctx=a.prompt + a.gen + 16, n_threads=a.threads, n_threads_batch=a.threads,
                     n_batch=a.batch, n_ubatch=a.batch, verbose=False, logits_all=False)
    ids = prompt_ids(a.prompt, llm.n_vocab())
    best_pp = best_tg = 0.0
    for _ in range(a.reps):
        llm.reset()
        llm._ctx.kv_cache_clear() if hasattr(llm._ctx, "kv_cache_clear") else None
        t0 = time.perf_counter()
        llm.eval(ids)
        t1 = time.perf_counter()
        # Decode cost does not depend on which token is fed: feed the next ids of
        # the same stream (llama-cpp-python does not keep logits with logits_all=False).
        feed = prompt_ids(a.prompt + a.gen, llm.n_vocab())[a.prompt:]
        t2 = time.perf_counter()
        for k in range(a.gen - 1):
            llm.eval([feed[k]])
        t3 = time.perf_counter()
        best_pp = max(best_pp, a.prompt / (t1 - t0))
        best_tg = max(best_tg, (a.gen - 1) / (t3 - t2))
    print(f"model {a.model} | llama.cpp {llama_cpp.__version__} | prefill {a.prompt}: {best_pp:.1f} tok/s | "
          f"decode {a.gen}: {best_tg:.2f} tok/s")


if __name__ == "__main__":
    main()
