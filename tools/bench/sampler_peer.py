"""llama.cpp's samplers (DRY, typical_p + top_n_sigma + XTC, mirostat, the repeat
penalty's window), hearth against llama-server, on the CPU: what each costs its engine.

Both servers (`hearth serve MODEL --parallel 1`; llama-server from
tools/bench/build_llamacpp_cpu.sh, `-np 1 --no-repack`) get the same streamed
/v1/completions requests with the same fields (llama-server's names, which
both take): a plain draw at temperature 0.8 with llama-server's default
filters spelled out (top_k 40, top_p 0.95, min_p 0.05), then that plus each
sampler below; ignore_eos, so that both write the whole budget. The last
row turns the filters off and adds OpenAI's presence / frequency penalties
(what an OpenAI client sends). Decode tok/s
= (tokens - 1) / (last token's arrival - first's), so prefill is left out; a
sampler's cost is its rate against the same engine's plain rate.

usage: .venv/bin/python tools/bench/sampler_peer.py --llama-server BIN [--gen 128] [--reps 3] [--threads 2]
"""
import argparse
import os
import statistics
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from spec_peer import ROOT, Server  # noqa: E402

BASE = {"temperature": 0.8, "top_k": 40, "top_p": 0.95, "min_p": 0.05, "seed": 1, "ignore_eos": True}
SAMPLERS = {
    "plain": {},
    "dry": {"dry_multiplier": 0.8},
    "typical+nsigma+xtc": {"typical_p": 0.9, "top_n_sigma": 1.5, "xtc_probability": 0.5, "xtc_threshold": 0.1},
    "mirostat2": {"mirostat": 2},
    "repeat64": {"repeat_penalty": 1.1, "repeat_last_n": 64},
    "no filters+penalties": {"top_k": 0, "top_p": 1.0, "min_p": 0.0, "presence_penalty": 0.5,
                             "frequency_penalty": 0.3},
}
PROMPT = "Write a detailed description of a small town, its people and its history, as requested.\n\n"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default=str(ROOT / "models" / "SmolLM2-135M-Instruct.Q4_1.gguf"))
    ap.add_argument("--bin", default=str(ROOT / "hearth"))
    ap.add_argument("--llama-server", required=True, help="llama-server binary (tools/bench/build_llamacpp_cpu.sh)")
    ap.add_argument("--gen", type=int, default=128)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--reps", type=int, default=3)
    a = ap.parse_args()
    cmds = {
        "hearth": [a.bin, "serve", a.model, "--threads", str(a.threads), "--parallel", "1"],
        "llama-server": [a.llama_server, "-m", a.model, "-t", str(a.threads), "-tb", str(a.threads), "-c", "2048",
                         "-np", "1", "--no-warmup", "--no-repack"],
    }
    rates = {}
    for rep in range(a.reps):
        for engine, cmd in cmds.items():
            s = Server(cmd)
            try:
                s.run(PROMPT, 8, BASE)  # warm
                for name, extra in SAMPLERS.items():
                    text, _, t = s.run(PROMPT, a.gen, dict(BASE, **extra))
                    rate = (len(t) - 1) / (t[-1] - t[0]) if len(t) > 2 else float("nan")
                    rates.setdefault((engine, name), []).append(rate)
                    print(f"rep {rep} {engine:12s} {name:20s} {len(t):4d} pieces {rate:7.1f} tok/s  {text[:50]!r}",
                          flush=True)
            finally:
                s.close()
    med = {k: statistics.median(v) for k, v in rates.items()}
    print(f"\ndecode tok/s, median of {a.reps} (threads {a.threads}, {a.gen} tokens, temperature 0.8)")
    print("| sampler | hearth | of plain | llama-server | of plain | hearth / llama-server |")
    print("|---|---|---|---|---|---|")
    for name in SAMPLERS:
        h, l = med[("hearth", name)], med[("llama-server", name)]
        print(f"| {name} | {h:.1f} | {h / med[('hearth', 'plain')]:.2f} | {l:.1f} | "
              f"{l / med[('llama-server', 'plain')]:.2f} | {h / l:.2f}x |")


if __name__ == "__main__":
    main()
