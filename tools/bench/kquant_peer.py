#!/usr/bin/env python3
"""kquant_peer.py - hearth against llama.cpp on the CPU, on the same GGUF files: prefill and decode tok/s.

hearth: `hearth bench MODEL --prompt P --gen G --threads T` (its serial path). llama.cpp: llama-cpp-python
(the oracle venv's build, scripts/setup.sh --oracle; extra buffer types off, as tools/oracle/llamacpp_util.py
says), the same P random ids in one batch, then G single-token decodes, timed here. The two alternate,
--rounds times. For the K-quant mixes of tools/bench/make_llama_gguf.py, e.g.

  .venv/bin/python tools/bench/make_llama_gguf.py /tmp/m-q5_K_M.gguf --type q5_K_M --layers 16 --hidden 2048 \\
      --ffn 5632 --heads 32 --kv-heads 4 --vocab 32000 --ctx 2048
  .venv/bin/python tools/bench/kquant_peer.py /tmp/m-q5_K_M.gguf /tmp/m-q4_K_M.gguf
"""
import argparse
import os
import re
import subprocess
import sys
import time

import numpy as np

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
sys.path.insert(0, os.path.join(ROOT, "tools", "oracle"))
import llamacpp_util  # noqa: E402


def hearth(bin_, path, a):
    out = subprocess.run([bin_, "bench", path, "--prompt", str(a.prompt), "--gen", str(a.gen), "--threads",
                          str(a.threads)], capture_output=True, text=True, check=True).stdout
    m = re.search(r"prefill \d+: ([\d.]+) tok/s \| decode \d+: ([\d.]+) tok/s", out)
    return float(m.group(1)), float(m.group(2))


def llama(path, a):
    llm = llamacpp_util.open_llama(path, n_ctx=a.prompt + a.gen + 16, n_batch=512, n_ubatch=512,
                                   n_threads=a.threads, n_threads_batch=a.threads, verbose=False)
    ids = [int(x) for x in np.random.default_rng(1).integers(3, llm.n_vocab(), size=a.prompt)]
    llm.eval(ids[:8])  # warm-up, as hearth bench's untimed first run
    llm.reset()
    t0 = time.perf_counter()
    llm.eval(ids)
    t1 = time.perf_counter()
    for i in range(a.gen):
        llm.eval([ids[i]])
    t2 = time.perf_counter()
    return a.prompt / (t1 - t0), a.gen / (t2 - t1)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("models", nargs="+")
    ap.add_argument("--bin", default=os.path.join(ROOT, "hearth"))
    ap.add_argument("--prompt", type=int, default=128)
    ap.add_argument("--gen", type=int, default=32)
    ap.add_argument("--threads", type=int, default=os.cpu_count())
    ap.add_argument("--rounds", type=int, default=2)
    a = ap.parse_args()
    import llama_cpp
    print(f"llama-cpp-python {llama_cpp.__version__}, {a.threads} threads, prompt {a.prompt}, gen {a.gen}")
    for r in range(a.rounds):
        for m in a.models:
            hp, hd = hearth(a.bin, m, a)
            lp, ld = llama(m, a)
            print(f"round {r + 1} {os.path.basename(m)}: prefill hearth {hp:.1f} llama.cpp {lp:.1f} ({hp / lp:.2f}x)"
                  f" | decode hearth {hd:.2f} llama.cpp {ld:.2f} ({hd / ld:.2f}x)", flush=True)


if __name__ == "__main__":
    main()
