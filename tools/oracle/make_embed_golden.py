#!/usr/bin/env python3
"""make_embed_golden.py - llama.cpp embedding goldens for the default model.

Runs models/SmolLM2-135M-Instruct.Q4_1.gguf with llama-cpp-python (llama.cpp
built here from the sdist) with embeddings on and last-token pooling (the
final-normed hidden state of the prompt's last token, what hearth's
/v1/embeddings returns), L2-normalized, for a few texts, and writes
tests/fixtures/smollm2/embed_golden.json: settings, and per text its prompt
ids (llama.cpp's tokenization) and its embedding.

llama.cpp settings (recorded): n_threads=2, n_ctx 512, pooling LAST,
normalize, no extra buffer types (see llamacpp_util.py).

Run:  python3 tools/oracle/make_embed_golden.py   (venv with llama-cpp-python)
"""
import json
import os
import sys

import llama_cpp

sys.path.insert(0, os.path.dirname(__file__))
from llamacpp_util import open_llama, settings  # noqa: E402

ROOT = os.path.normpath(os.path.join(os.path.dirname(__file__), "../.."))
MODEL = os.path.join(ROOT, "models/SmolLM2-135M-Instruct.Q4_1.gguf")
OUT = os.path.join(ROOT, "tests/fixtures/smollm2/embed_golden.json")
TEXTS = [
    "The cat sat on the mat.",
    "A feline rested on the rug.",
    "Quarterly revenue grew by 12 percent, driven by strong demand in Europe and Asia.",
    "def add(a, b):\n    return a + b\n",
]


def main():
    llm = open_llama(MODEL, embedding=True, pooling_type=llama_cpp.LLAMA_POOLING_TYPE_LAST, n_ctx=512,
                     n_threads=2, n_batch=512, verbose=False)
    cases = []
    for t in TEXTS:
        ids = llm.tokenize(t.encode(), add_bos=True, special=True)
        vec = llm.embed(t, normalize=True)
        cases.append({"text": t, "prompt_ids": ids, "embedding": [float(x) for x in vec]})
    doc = {"model": os.path.basename(MODEL),
           "settings": settings(n_threads=2, n_ctx=512, pooling="last", normalize=True),
           "cases": cases}
    with open(OUT, "w") as f:
        json.dump(doc, f, indent=1)
    print(f"wrote {OUT}: {len(cases)} texts, {len(cases[0]['embedding'])} dimensions")


if __name__ == "__main__":
    main()
