#!/usr/bin/env python3
"""make_smollm2_golden.py - llama.cpp goldens for the default model.

Runs models/SmolLM2-135M-Instruct.Q4_1.gguf with llama-cpp-python (llama.cpp
built here from the sdist) on three prompts, tokenized by llama.cpp itself, and
writes tests/fixtures/smollm2/golden.json plus, per prompt, the full logits of
the last prompt position (raw little-endian float32 [vocab_size]).

For each prompt golden.json records:
  text, prompt_ids        llama_tokenize(text, add_special=True, parse_special=True)
  top1                    argmax id at every prompt position
  top10                   [[id, logit] x10] at every prompt position, best first
  last_logits_file        all logits at the last prompt position
  greedy                  32 ids of llama.cpp greedy decoding, their text, and
                          the top-1/top-2 margin at each step
Prompts: one short, one of about 40 tokens, one in the model's chat format
(rendered from the GGUF's own tokenizer.chat_template with jinja2, as
llama-cpp-python does).

llama.cpp settings (recorded): n_threads=2, n_batch 512, logits_all, flash
attention off, F32 KV cache, no extra buffer types (see llamacpp_util.py).

Run:  python3 tools/oracle/make_smollm2_golden.py   (venv with llama-cpp-python)
"""
import argparse
import hashlib
import json
import os
import re
import sys

import llama_cpp
import numpy as np
from llama_cpp.llama_chat_format import Jinja2ChatFormatter

import llamacpp_util

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
MODEL = "models/SmolLM2-135M-Instruct.Q4_1.gguf"
N_THREADS = 2
N_CTX = 512
GREEDY_NEW = 32
F32 = 0   # ggml type id

# Candidates per kind; the one whose smallest top-1/top-2 margin (over its
# prompt positions and greedy steps) is widest is recorded, so that an engine
# whose Q4_1 arithmetic differs from llama.cpp's in the last bits still agrees
# on every top-1. Every candidate's margin is recorded too.
SHORT = ["The capital of France is",
         "The largest planet in the solar system is",
         "Water boils at a temperature of",
         "The first president of the United States was",
         "Once upon a time, there was a"]
LONG = ["Photosynthesis is the process by which green plants, algae and some bacteria "
        "turn light into chemical energy. Inside the chloroplasts, water is split and "
        "carbon dioxide is fixed into sugars, which",
        "The Python programming language was created by Guido van Rossum and first "
        "released in 1991. It is known for its readable syntax and large standard "
        "library, and today it is widely used for",
        "A recipe for pancakes: mix one cup of flour, one tablespoon of sugar, two "
        "teaspoons of baking powder and a pinch of salt. In another bowl, whisk one "
        "egg with one cup of milk, then",
        "The water cycle describes how water moves between the oceans, the air and the "
        "land. The sun heats the surface of the sea, water evaporates and rises, and "
        "as the vapour cools it"]
CHAT = [[{"role": "user", "content": "Name three primary colors."}],
        [{"role": "user", "content": "What is the capital of Japan?"}],
        [{"role": "user", "content": "Write a haiku about the sea."}],
        [{"role": "system", "content": "You are a concise assistant."},
         {"role": "user", "content": "How many legs does a spider have?"}],
        [{"role": "user", "content": "What is 12 times 12?"}],
        [{"role": "user", "content": "Translate 'good morning' into French."}],
        [{"role": "user", "content": "Give me one tip for sleeping better."}],
        [{"role": "user", "content": "Who wrote Romeo and Juliet?"}]]


def dump_json(obj):
    """Indented JSON with each list of numbers kept on one line."""
    text = json.dumps(obj, indent=1, ensure_ascii=False)
    return re.sub(r"\[\s*([-0-9.e, \n]+?)\s*\]",
                  lambda m: "[" + ", ".join(x.strip() for x in m.group(1).split(",")) + "]",
                  text) + "\n"


def sha256(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def gap(row):
    top2 = np.partition(row, -2)[-2:]
    return float(top2[1] - top2[0])


def render_chat(llm, messages):
    meta = llm.metadata
    tmpl = meta["tokenizer.chat_template"]
    bos = llm.detokenize([llm.token_bos()], special=True).decode()
    eos = llm.detokenize([llm.token_eos()], special=True).decode()
    fmt = Jinja2ChatFormatter(template=tmpl, eos_token=eos, bos_token=bos,
                              add_generation_prompt=True)
    return fmt(messages=messages).prompt


def min_margin(llm, text):
    """Smallest top-1/top-2 margin over the prompt positions and greedy steps."""
    ids = llm.tokenize(text.encode("utf-8"), add_bos=True, special=True)
    llm.reset()
    llm.eval(ids)
    m = min(gap(r) for r in llm.scores[:len(ids)])
    for i in range(GREEDY_NEW):
        row = llm.scores[llm.n_tokens - 1]
        m = min(m, gap(row))
        if i + 1 < GREEDY_NEW:
            llm.eval([int(np.argmax(row))])
    return m


def choose(llm, name, texts):
    """The candidate with the widest smallest margin, and every candidate's margin."""
    scored = [(min_margin(llm, t), i) for i, t in enumerate(texts)]
    best = max(scored)[1]
    print(f"{name}: candidates' min margins {[round(m, 4) for m, _ in scored]}; "
          f"taking #{best}", flush=True)
    return best, [{"text": t, "min_top1_top2_margin": m} for (m, _), t in zip(scored, texts)]


def set_threads(llm, n):
    llama_cpp.llama_set_n_threads(llm.ctx, n, n)


def record(llm, name, text, out_dir, idx):
    ids = llm.tokenize(text.encode("utf-8"), add_bos=True, special=True)
    llm.reset()
    llm.eval(ids)
    logits = np.array(llm.scores[:len(ids)], dtype=np.float32, copy=True)
    top1 = [int(r.argmax()) for r in logits]
    top10 = []
    for r in logits:
        best = np.argsort(-r, kind="stable")[:10]
        top10.append([[int(i), float(r[i])] for i in best])
    last_file = f"prompt{idx}.last_logits.f32"
    logits[-1].astype("<f4").tofile(os.path.join(out_dir, last_file))

    # greedy: argmax of llama.cpp's logits, one decode step at a time
    out, margins = [], []
    for i in range(GREEDY_NEW):
        row = llm.scores[llm.n_tokens - 1]
        margins.append(gap(row))
        t = int(np.argmax(row))
        out.append(t)
        if i + 1 < GREEDY_NEW:
            llm.eval([t])
    sampled = []
    for t in llm.generate(ids, temp=0.0, reset=True):
        sampled.append(int(t))
        if len(sampled) == GREEDY_NEW:
            break
    if sampled != out:
        raise RuntimeError(f"{name}: llama.cpp's temp=0 sampler {sampled} != argmax {out}")
    text_out = llm.detokenize(out, prev_tokens=ids, special=True).decode("utf-8", errors="replace")
    print(f"{name}: {len(ids)} prompt tokens; greedy -> {text_out!r}; "
          f"min margin prompt {min(gap(r) for r in logits):.3f} greedy {min(margins):.3f}",
          flush=True)
    return {"name": name, "text": text, "add_special": True, "parse_special": True,
            "prompt_ids": ids, "top1": top1, "top10": top10, "last_logits_file": last_file,
            "min_top1_top2_margin_prompt": min(gap(r) for r in logits),
            "greedy": {"output_ids": out, "output_text": text_out,
                       "top1_top2_margins": [round(m, 5) for m in margins],
                       "min_top1_top2_margin": min(margins)}}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", default=MODEL, help="path from the repo root")
    ap.add_argument("--out", default=os.path.join(ROOT, "tests/fixtures/smollm2"))
    args = ap.parse_args()
    path = os.path.join(ROOT, args.model)
    llm = llamacpp_util.open_llama(path, n_ctx=N_CTX, n_batch=N_CTX, n_ubatch=N_CTX,
                                   n_threads=N_THREADS, n_threads_batch=N_THREADS,
                                   logits_all=True, flash_attn=False, type_k=F32, type_v=F32,
                                   seed=0, verbose=False)
    os.makedirs(args.out, exist_ok=True)
    chats = [render_chat(llm, m) for m in CHAT]
    # Choosing runs one thread: on a loaded 2-core machine llama.cpp's two
    # threads spin-wait; the logits are bit-identical for any thread count.
    set_threads(llm, 1)
    picks = [choose(llm, "short", SHORT), choose(llm, "long", LONG), choose(llm, "chat", chats)]
    set_threads(llm, N_THREADS)
    prompts = []
    for idx, (name, texts, (best, cands)) in enumerate(zip(("short", "long", "chat"),
                                                          (SHORT, LONG, chats), picks)):
        p = record(llm, name, texts[best], args.out, idx)
        if name == "chat":
            p["chat_messages"] = CHAT[best]
        p["candidates"] = cands
        prompts.append(p)
    g = {"model": args.model, "model_sha256": sha256(path), "vocab_size": llm.n_vocab(),
         "made_by": "tools/oracle/make_smollm2_golden.py",
         "llama_cpp": llamacpp_util.settings(n_threads=N_THREADS, n_ctx=N_CTX, n_batch=N_CTX,
                                             logits_all=True, flash_attn=False,
                                             type_k="f32", type_v="f32"),
         "logits_layout": "raw little-endian float32 [vocab_size], last prompt position",
         "prompts": prompts}
    with open(os.path.join(args.out, "golden.json"), "w") as f:
        f.write(dump_json(g))
    llm.close()


if __name__ == "__main__":
    sys.exit(main())
