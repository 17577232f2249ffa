#!/usr/bin/env python3
"""make_sampler_goldens.py - llama.cpp's samplers (DRY, typical_p, top_n_sigma,
XTC, mirostat, dynamic temperature) as goldens for hearth's (src/engine/sampler.c, dry.c).

Writes tests/fixtures/smollm2/sampler_golden.json with three parts:

- "dry": llama.cpp's DRY sampler (llama_sampler_init_dry over the default
  model's vocabulary, its sequence breakers given as strings) applied to
  all-zero logits after a history of token ids: the logit each penalized
  token ends with. tests/unit/test_sampler_llama.c builds the breakers from the
  same strings over hearth's vocabulary and must get the same numbers;
  tests/e2e/test_llama_sampling.py sends a history as a prompt to the
  server with and without the DRY fields: the logprobs' shift must be the
  golden penalties.
- "filters": typical_p, top_n_sigma and XTC (probability 1) applied alone
  to small logit vectors: the ids each keeps. The unit test draws from
  hearth's sampler and must see exactly those ids.
- "draws": mirostat (v1, v2) at its first draw: the ids it may choose; the
  dynamic temperature (temp_ext) of each vector: the temperature it sets.

llama.cpp settings (recorded): n_threads=2, n_ctx 1024, no extra buffer types
(see llamacpp_util.py).

Run:  python3 tools/oracle/make_sampler_goldens.py   (venv with llama-cpp-python)
"""
import ctypes
import json
import math
import os
import sys

import llama_cpp.llama_cpp as L

sys.path.insert(0, os.path.dirname(__file__))
from llamacpp_util import open_llama, settings  # noqa: E402

ROOT = os.path.normpath(os.path.join(os.path.dirname(__file__), "../.."))
MODEL = os.path.join(ROOT, "models/SmolLM2-135M-Instruct.Q4_1.gguf")
OUT = os.path.join(ROOT, "tests/fixtures/smollm2/sampler_golden.json")
DEFAULT_BREAKERS = ["\n", ":", "\"", "*"]

DRY_TEXTS = {
    "cat": "The cat sat on the mat. The cat sat on the mat. The cat sat on the",
    "list": "apples, pears, plums, apples, pears, plums, apples, pears,",
    "lines": "a b c\na b c\na b c d a b c d a b c",
    "code": "for i in range(10):\n    print(i)\nfor i in range(10):\n    print(i)\nfor i in range(",
}
# (text, multiplier, base, allowed_length, last_n, breakers)
DRY_CASES = [
    ("cat", 0.8, 1.75, 2, 1024, DEFAULT_BREAKERS),
    ("cat", 0.8, 1.75, 2, 12, DEFAULT_BREAKERS),
    ("cat", 1.0, 3.0, 0, 1024, DEFAULT_BREAKERS),
    ("cat", 0.5, 1.0, 1, 1024, ["."]),
    ("cat", 0.8, 1.75, 2, 1024, ["sat on", "the mat"]),
    ("cat", 0.8, 1.75, 2, 1024, ["cat sat", "mat. The"]),
    ("list", 0.8, 1.75, 2, 1024, DEFAULT_BREAKERS),
    ("list", 2.0, 1.5, 3, 1024, [","]),
    ("lines", 0.8, 1.75, 2, 1024, DEFAULT_BREAKERS),
    ("lines", 0.8, 1.75, 2, 1024, ["c d"]),
    ("code", 0.8, 1.75, 2, 1024, DEFAULT_BREAKERS),
    ("code", 0.8, 3.0, 1, 1024, ["range("]),
]

FILTER_VECTORS = [
    [4.0, 3.5, 3.0, 2.0, 1.9, 1.0, 0.5, 0.0, -0.5, -1.0, -2.0, -3.0],
    [2.0, 1.99, 1.9, 1.8, 1.7, 1.6, 1.0, 0.9, 0.1, 0.0, -1.0, -5.0],
    [8.0, 2.0, 1.5, 1.0, 0.5, 0.0, -0.5, -1.0, -1.5, -2.0, -2.5, -3.0],
]
# (kind, setting[, threshold])
FILTER_CASES = [("typical_p", 0.5), ("typical_p", 0.9), ("typical_p", 0.2), ("top_n_sigma", 1.0),
                ("top_n_sigma", 0.5), ("top_n_sigma", 2.0), ("xtc", 0.1), ("xtc", 0.2), ("xtc", 0.05)]

def token_array(logits):
    n = len(logits)
    data = (L.llama_token_data * n)()
    for i, x in enumerate(logits):
        data[i].id, data[i].logit, data[i].p = i, x, 0.0
    arr = L.llama_token_data_array(data=data, size=n, selected=-1, sorted=False)
    return data, arr


def survivors(arr):
    return sorted(arr.data[i].id for i in range(arr.size) if math.isfinite(arr.data[i].logit))


def dry_sampler(vocab, mult, base, allowed, last_n, breakers):
    arr = (ctypes.c_char_p * len(breakers))(*[b.encode() for b in breakers])
    return L.llama_sampler_init_dry(vocab, mult, base, allowed, last_n, arr, len(breakers))


def dry_cases(llm, vocab, n_vocab):
    out = []
    for text, mult, base, allowed, last_n, breakers in DRY_CASES:
        ids = llm.tokenize(DRY_TEXTS[text].encode(), add_bos=False, special=False)
        s = dry_sampler(vocab, mult, base, allowed, last_n, breakers)
        for t in ids:
            L.llama_sampler_accept(s, t)
        data, arr = token_array([0.0] * n_vocab)
        L.llama_sampler_apply(s, ctypes.byref(arr))
        pen = sorted([arr.data[i].id, arr.data[i].logit] for i in range(arr.size) if arr.data[i].logit != 0.0)
        L.llama_sampler_free(s)
        out.append({"history": ids, "multiplier": mult, "base": base, "allowed_length": allowed,
                    "last_n": last_n, "breakers": breakers, "logits": pen})
    return out


# (kind, tau or delta, exponent)
DRAW_CASES = [("mirostat_v2", 1.5, 0), ("mirostat_v2", 3.0, 0), ("mirostat_v2", 5.0, 0), ("mirostat_v1", 1.0, 0),
              ("mirostat_v1", 3.0, 0), ("mirostat_v1", 5.0, 0), ("dynatemp", 0.5, 1.0), ("dynatemp", 0.8, 2.0),
              ("dynatemp", 0.3, 0.5)]


def draw_cases():
    """Mirostat's first draw at temperature 1 (mu = 2 tau): the ids it can choose; dynamic temperature at 1 +- delta:
    the temperature it sets (a logit divided by it)."""
    out = []
    for v in FILTER_VECTORS:
        for kind, x, ex in DRAW_CASES:
            data, arr = token_array(v)
            if kind == "dynatemp":
                s = L.llama_sampler_init_temp_ext(1.0, x, ex)
                L.llama_sampler_apply(s, ctypes.byref(arr))
                t = next(v[arr.data[i].id] / arr.data[i].logit for i in range(arr.size) if arr.data[i].logit != 0)
                out.append({"logits": v, "kind": kind, "delta": x, "exponent": ex, "temperature": t})
            else:
                s = (L.llama_sampler_init_mirostat_v2(1, x, 0.1) if kind == "mirostat_v2"
                     else L.llama_sampler_init_mirostat(len(v), 1, x, 0.1, 100))
                L.llama_sampler_apply(s, ctypes.byref(arr))
                out.append({"logits": v, "kind": kind, "tau": x, "keep": sorted(arr.data[i].id for i in range(arr.size))})
            L.llama_sampler_free(s)
    return out


def filter_cases():
    out = []
    for v in FILTER_VECTORS:
        for kind, x in FILTER_CASES:
            if kind == "typical_p":
                s = L.llama_sampler_init_typical(x, 0)
            elif kind == "top_n_sigma":
                s = L.llama_sampler_init_top_n_sigma(x)
            else:
                s = L.llama_sampler_init_xtc(1.0, x, 0, 1)
            data, arr = token_array(v)
            L.llama_sampler_apply(s, ctypes.byref(arr))
            out.append({"logits": v, "kind": kind, "value": x, "keep": survivors(arr)})
            L.llama_sampler_free(s)
    return out


def main():
    llm = open_llama(MODEL, n_ctx=1024, n_threads=2, n_batch=512, verbose=False)
    vocab = L.llama_model_get_vocab(llm.model)
    n_vocab = llm.n_vocab()
    doc = {"model": os.path.basename(MODEL),
           "settings": settings(n_threads=2, n_ctx=1024),
           "dry": dry_cases(llm, vocab, n_vocab), "filters": filter_cases(), "draws": draw_cases()}
    with open(OUT, "w") as f:
        json.dump(doc, f, indent=1)
    print(f"wrote {OUT}: {len(doc['dry'])} DRY cases, {len(doc['filters'])} filter cases, "
          f"{len(doc['draws'])} mirostat / dynamic temperature cases")


if __name__ == "__main__":
    main()
