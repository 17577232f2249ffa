#!/usr/bin/env python3
"""make_bench_model.py - random-weight llama GGUFs of a few hundred million parameters.

For benchmarks only (hearth vs llama.cpp, `hearth bench`), never committed:
writes models/bench-llama-<size>-f16.gguf with gguf-py (through
make_tiny_gguf.write_gguf, the same conversion as the tiny models), then
quantizes it with llama.cpp itself to Q8_0 and Q4_0 (llama-quantize's default
tensor mix: in the Q4_0 file output.weight is Q6_K, as in real Q4_0 files). The vocabulary is tokenizer.ggml.model "none" with
llama.vocab_size, so benchmarks feed token ids. Weights are N(0, 0.02) from a
fixed seed (norm weights 1): the files are the same on every run, and the
sha256 printed at the end identifies them.

Each file is loaded with llama-cpp-python and run on a short prompt and a few
decode steps (the logits must be finite) before the script reports it.

Default shape: hidden 1024, 24 layers, 16 heads, 8 KV heads, FFN 4096, vocab
32000, untied: 443M parameters, F16 about 0.9 GB.

Run:  python3 tools/oracle/make_bench_model.py [--types f16 q8_0 q4_0]
"""
import argparse
import hashlib
import os
import sys
import time

import numpy as np

import llamacpp_util
from make_tiny_gguf import ROOT, quantize, write_gguf

CONFIG = dict(model_type="llama", hidden_size=1024, num_hidden_layers=24,
              num_attention_heads=16, num_key_value_heads=8, intermediate_size=4096,
              vocab_size=32000, max_position_embeddings=4096, rms_norm_eps=1e-5,
              rope_theta=10000.0, tie_word_embeddings=False)
STD = 0.02
SEED = 1234


def n_params(cfg):
    h, f, v, L = (cfg["hidden_size"], cfg["intermediate_size"], cfg["vocab_size"],
                  cfg["num_hidden_layers"])
    kv = h // cfg["num_attention_heads"] * cfg["num_key_value_heads"]
    return 2 * v * h + h + L * (2 * h * h + 2 * h * kv + 3 * h * f + 2 * h)


def random_tensors(cfg):
    """HF-named random weights, generated in f32 and kept as f16 (2-D) / f32 (norms)."""
    rng = np.random.default_rng(SEED)
    h, f, v = cfg["hidden_size"], cfg["intermediate_size"], cfg["vocab_size"]
    kv = h // cfg["num_attention_heads"] * cfg["num_key_value_heads"]

    def mat(rows, cols):
        return (rng.standard_normal((rows, cols), dtype=np.float32) * STD).astype(np.float16)

    t = {"model.embed_tokens.weight": mat(v, h), "lm_head.weight": mat(v, h),
         "model.norm.weight": np.ones(h, np.float32)}
    for i in range(cfg["num_hidden_layers"]):
        p = f"model.layers.{i}."
        t[p + "input_layernorm.weight"] = np.ones(h, np.float32)
        t[p + "post_attention_layernorm.weight"] = np.ones(h, np.float32)
        t[p + "self_attn.q_proj.weight"] = mat(h, h)
        t[p + "self_attn.k_proj.weight"] = mat(kv, h)
        t[p + "self_attn.v_proj.weight"] = mat(kv, h)
        t[p + "self_attn.o_proj.weight"] = mat(h, h)
        t[p + "mlp.gate_proj.weight"] = mat(f, h)
        t[p + "mlp.up_proj.weight"] = mat(f, h)
        t[p + "mlp.down_proj.weight"] = mat(h, f)
    return t


def sha256(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 22), b""):
            h.update(chunk)
    return h.hexdigest()


def smoke(path, vocab):
    """Load with llama.cpp, run 16 prompt ids and 4 decode steps; logits must be finite."""
    llm = llamacpp_util.open_llama(path, n_ctx=64, n_batch=64, n_threads=2, logits_all=True,
                                   verbose=False)
    if llm.n_vocab() != vocab:
        raise RuntimeError(f"{path}: llama.cpp sees {llm.n_vocab()} tokens, expected {vocab}")
    t0 = time.time()
    llm.eval(list(range(100, 116)))
    for _ in range(4):
        row = np.array(llm.scores[llm.n_tokens - 1])
        if not np.isfinite(row).all():
            raise RuntimeError(f"{path}: non-finite logits")
        llm.eval([int(row.argmax())])
    dt = time.time() - t0
    llm.close()
    return dt


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out-dir", default=os.path.join(ROOT, "models"))
    ap.add_argument("--types", nargs="*", default=["f16", "q8_0", "q4_0"],
                    choices=["f16", "q8_0", "q4_0"])
    args = ap.parse_args()
    cfg = CONFIG
    size = f"{round(n_params(cfg) / 1e6)}m"
    base = os.path.join(args.out_dir, f"bench-llama-{size}")
    f16 = base + "-f16.gguf"
    os.makedirs(args.out_dir, exist_ok=True)
    t0 = time.time()
    write_gguf(f16 + ".part", cfg, {}, random_tensors(cfg), "f16", f"bench-llama-{size}")
    os.replace(f16 + ".part", f16)
    print(f"wrote {f16} in {time.time() - t0:.0f}s", flush=True)
    paths = [f16] if "f16" in args.types else []
    for q in ("q8_0", "q4_0"):
        if q in args.types:
            dst = f"{base}-{q}.gguf"
            quantize(f16, dst + ".part", q)
            os.replace(dst + ".part", dst)
            paths.append(dst)
    if "f16" not in args.types:
        os.remove(f16)
    for p in paths:
        dt = smoke(p, cfg["vocab_size"])
        print(f"{os.path.relpath(p, ROOT)}  {os.path.getsize(p)} bytes  sha256 {sha256(p)}  "
              f"({n_params(cfg) / 1e6:.0f}M params; llama.cpp load+run ok, {dt:.1f}s)",
              flush=True)


if __name__ == "__main__":
    sys.exit(main())
