#!/usr/bin/env python3
"""make_quant_golden.py - GGUFs quantized by llama.cpp (Q5_K_M, Q5_0, Q5_1, Q3_K_M, Q2_K, IQ4_NL, IQ4_XS) + goldens.

The tiny models' rows (64-96 wide) are too short for K-quants (256-element
super-blocks: llama.cpp falls back to other types), so this writes a random
llama of width 256 in F32 (tools/bench/make_llama_gguf.py: 2 layers, FFN 512,
4 heads, 2 KV heads, vocab 512, N(0, 0.08) weights, every row drawn afresh),
has llama.cpp quantize it (llama_model_quantize, llama-quantize's default mix
for the type), and records llama.cpp's logits and greedy continuations on it:

  tests/fixtures/kquant/random-<type>.gguf          (q5_K_M: Q5_K, Q6_K where llama.cpp
                                                     gives more bits, a Q6_K output; q5_0 /
                                                     q5_1: those, a Q6_K output; q3_K_M: Q3_K,
                                                     Q4_K / Q5_K where llama.cpp gives more
                                                     bits; q2_K: Q2_K, Q3_K, Q4_K; iq4_nl /
                                                     iq4_xs: those, a Q6_K output)
  tests/fixtures/kquant/random-<type>.golden.json   make_tiny_gguf.py's schema
  tests/fixtures/kquant/random-<type>.logits<i>.f32

llama.cpp runs as make_tiny_gguf.py runs it (2 threads, F32 KV, flash attention
off, extra buffer types off). Ids are drawn until every position's top-1/top-2
margin is at least PICK and every greedy step's as well, so that a rounding
difference cannot flip a top-1: hearth quantizes the activations to Q8_K for
these weights as llama.cpp does, but sums in another order.

Run:  .venv/bin/python tools/oracle/make_quant_golden.py --type q5_K_M|q5_0|q5_1|q3_K_M|q2_K|iq4_nl|iq4_xs
      (scripts/setup.sh --oracle)
"""
import argparse
import ctypes
import json
import os
import subprocess
import sys
import tempfile

import numpy as np
import gguf
import llama_cpp

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import llamacpp_util  # noqa: E402

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
OUT = os.path.join(ROOT, "tests", "fixtures", "kquant")
N_CTX, N_THREADS, PICK = 128, 2, 0.05
SHAPE = ["--layers", "2", "--hidden", "256", "--ffn", "512", "--heads", "4", "--kv-heads", "2", "--vocab", "512",
         "--ctx", "256", "--std", "0.08", "--tile-mb", "4"]
FTYPES = {"q5_K_M": llama_cpp.LLAMA_FTYPE_MOSTLY_Q5_K_M, "q5_0": llama_cpp.LLAMA_FTYPE_MOSTLY_Q5_0,
          "q5_1": llama_cpp.LLAMA_FTYPE_MOSTLY_Q5_1, "q3_K_M": llama_cpp.LLAMA_FTYPE_MOSTLY_Q3_K_M,
          "q2_K": llama_cpp.LLAMA_FTYPE_MOSTLY_Q2_K, "iq4_nl": llama_cpp.LLAMA_FTYPE_MOSTLY_IQ4_NL,
          "iq4_xs": llama_cpp.LLAMA_FTYPE_MOSTLY_IQ4_XS}


def quantize(src, dst, qtype):
    p = llama_cpp.llama_model_quantize_default_params()
    p.nthread = N_THREADS
    p.ftype = FTYPES[qtype]
    if llama_cpp.llama_model_quantize(src.encode(), dst.encode(), ctypes.byref(p)) != 0:
        raise RuntimeError(f"llama_model_quantize {src} -> {dst} ({qtype}) failed")


def gap(row):
    top2 = np.partition(row, -2)[-2:]
    return float(top2[1] - top2[0])


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--type", default="q5_K_M", choices=sorted(FTYPES))
    ap.add_argument("--seed", type=int, default=11)
    a = ap.parse_args()
    os.makedirs(OUT, exist_ok=True)
    name = "random-" + a.type
    model = os.path.join(OUT, name + ".gguf")
    with tempfile.TemporaryDirectory() as tmp:
        f32 = os.path.join(tmp, "f32.gguf")
        subprocess.run([sys.executable, os.path.join(ROOT, "tools/bench/make_llama_gguf.py"), f32, "--type", "f32",
                        "--seed", str(a.seed)] + SHAPE, check=True, stdout=subprocess.DEVNULL,
                       stderr=subprocess.DEVNULL)
        quantize(f32, model, a.type)
    types = {}
    for t in gguf.GGUFReader(model).tensors:
        types[t.tensor_type.name] = types.get(t.tensor_type.name, 0) + 1
    print(f"{model}: {types}")
    llm = llamacpp_util.open_llama(
        model, n_ctx=N_CTX, n_batch=N_CTX, n_ubatch=N_CTX, n_threads=N_THREADS, n_threads_batch=N_THREADS,
        logits_all=True, flash_attn=False, type_k=int(gguf.GGMLQuantizationType.F32),
        type_v=int(gguf.GGMLQuantizationType.F32), seed=0, verbose=False)
    vocab = llm.n_vocab()
    rng = np.random.default_rng(a.seed)
    seqs, greedy, tries = [], [], 0
    while len(seqs) < 3 or len(greedy) < 2:
        tries += 1
        assert tries < 20000, "no ids with margins >= PICK found"
        ids = [int(x) for x in rng.integers(3, vocab, size=24 if len(seqs) < 3 else 8)]
        llm.reset()
        llm.eval(ids)
        logits = np.array(llm.scores[:len(ids)], dtype=np.float32, copy=True)
        if min(gap(r) for r in logits) < PICK:
            continue
        if len(seqs) < 3:
            f = f"{name}.logits{len(seqs)}.f32"
            logits.tofile(os.path.join(OUT, f))
            seqs.append({"input_ids": ids, "logits_file": f})
            continue
        out, ok = [], True
        for i in range(16):
            row = np.array(llm.scores[llm.n_tokens - 1], dtype=np.float32)
            if gap(row) < PICK:
                ok = False
                break
            out.append(int(np.argmax(row)))
            if i < 15:
                llm.eval([out[-1]])
        if ok and len(set(out)) >= 4:
            greedy.append({"prompt_ids": ids, "output_ids": out})
    golden = {"name": name, "vocab_size": vocab, "tensor_types": types, "pick_margin": PICK,
              "sequences": seqs, "greedy": greedy,
              "llama_cpp": llamacpp_util.settings(n_threads=N_THREADS, n_ctx=N_CTX, n_batch=N_CTX, logits_all=True,
                                                  flash_attn=False, type_k="f32", type_v="f32")}
    with open(os.path.join(OUT, name + ".golden.json"), "w") as f:
        json.dump(golden, f, indent=1)
    print(f"wrote {name}: {len(seqs)} sequences, {len(greedy)} greedy runs ({tries} draws)")


if __name__ == "__main__":
    main()
