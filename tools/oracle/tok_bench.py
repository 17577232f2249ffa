#!/usr/bin/env python3
"""tok_bench.py - encode throughput, hearth vs HF `tokenizers` (Rust core via Python), same text,
same machine, same run. Prints MB/s for each and the ratio hearth / HF.

  .venv/bin/python tools/oracle/tok_bench.py TEXT_FILE [MODEL.gguf] [--reps N]

single: the whole file encoded as one string (HF Tokenizer.encode; hearth tokenize --bench).
batch:  the file's lines encoded separately (HF encode_batch, which uses every core;
        hearth tokenize --bench --lines, one thread).
The HF tokenizer is the one tok_goldens.py builds for the same GGUF (the golden oracle).
"""
import argparse
import pathlib
import re
import subprocess
import sys
import time

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
import tok_goldens  # noqa: E402

ROOT = tok_goldens.ROOT


def hearth(model, path, reps, lines):
    args = [str(ROOT / "hearth"), "tokenize", model, "-", "--no-add-special", "--bench", str(reps)]
    if lines:
        args.append("--lines")
    with open(path, "rb") as f:
        r = subprocess.run(args, stdin=f, capture_output=True, text=True, check=True)
    m = re.search(r"tokens (\d+) bytes (\d+) seconds ([\d.]+) MB/s ([\d.]+)", r.stderr)
    return int(m.group(1)), float(m.group(4))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("text")
    ap.add_argument("model", nargs="?", default="models/SmolLM2-135M-Instruct.Q4_1.gguf")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--json", help="compare on this tokenizer.json instead (both sides load it)")
    a = ap.parse_args()
    if a.json:
        from tokenizers import Tokenizer
        tok = Tokenizer.from_file(a.json)
        a.model = a.json
    else:
        tok, _ = tok_goldens.gguf_tokenizer(str(ROOT / a.model))
    data = pathlib.Path(a.text).read_bytes()
    text = data.decode("utf-8")
    lines = text.splitlines(keepends=True)
    mb = len(data) / 1e6

    t0 = time.perf_counter()
    for _ in range(a.reps):
        n_hf = len(tok.encode(text, add_special_tokens=False).ids)
    hf_single = mb * a.reps / (time.perf_counter() - t0)
    t0 = time.perf_counter()
    for _ in range(a.reps):
        n_hf_b = sum(len(e.ids) for e in tok.encode_batch(lines, add_special_tokens=False))
    hf_batch = mb * a.reps / (time.perf_counter() - t0)

    n_h, h_single = hearth(a.model, a.text, a.reps, False)
    n_h_b, h_batch = hearth(a.model, a.text, a.reps, True)
    print(f"text: {a.text}, {mb:.2f} MB; model {a.model}")
    print(f"single: hearth {h_single:.2f} MB/s ({n_h} tokens), HF {hf_single:.2f} MB/s ({n_hf} tokens), ratio {h_single / hf_single:.2f}x")
    print(f"batch:  hearth {h_batch:.2f} MB/s ({n_h_b} tokens, 1 thread), HF {hf_batch:.2f} MB/s ({n_hf_b} tokens), ratio {h_batch / hf_batch:.2f}x")
    if n_h != n_hf or n_h_b != n_hf_b:
        print("TOKEN COUNTS DIFFER", file=sys.stderr)
        sys.exit(1)


if __name__ == "__main__":
    main()
