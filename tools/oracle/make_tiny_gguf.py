#!/usr/bin/env python3
"""make_tiny_gguf.py - GGUF conversions of the tiny HF models, and llama.cpp goldens.

For each tests/fixtures/tiny/<name>-f32/ (made by make_tiny_models.py) this
writes, into tests/fixtures/tiny-gguf/:
  <name>-f32.gguf, <name>-f16.gguf     written here with gguf-py
  <name>-q8_0.gguf, <name>-q4_0.gguf   quantized from the F32 file by llama.cpp
                                       itself (llama_model_quantize, its default
                                       tensor mix: 1-D tensors stay F32, and in
                                       Q4_0 output.weight becomes Q8_0 - the
                                       fallback of Q6_K for rows of 64/96)
  <name>-<type>.golden.json            goldens computed by llama.cpp
  <name>-<type>.logits<i>.f32          raw little-endian f32 [len(ids)][vocab]

The conversion follows llama.cpp's convert_hf_to_gguf.py (LlamaModel,
Qwen2Model, Qwen3Model): tensor names from gguf-py's TensorNameMap, Q/K rows
permuted for llama and mistral (llama.cpp runs them with "normal" rope, HF with
rotate_half), the llama3 rope scaling turned into a rope_freqs.weight tensor,
norms and biases kept F32, the same metadata keys. Two deliberate additions:
tokenizer.ggml.model is "none" (the tiny models have no tokenizer) and
<arch>.vocab_size is written for every arch, because llama.cpp sizes a "none"
vocabulary from that key. Mistral's sliding_window is not written, as
llama.cpp's converter does not write it either: llama.cpp's llama arch has no
sliding window, so the mistral GGUF and its goldens are full attention.

golden.json holds the same schema as the HF goldens (name, vocab_size,
sequences [{input_ids, logits_file}], greedy [{prompt_ids, output_ids}],
min_top1_top2_margin) plus the llama.cpp settings. llama.cpp runs with
n_threads=2, logits_all, flash attention off, an F32 KV cache (so an F32
GGUF is computed in f32 throughout) and no extra buffer types (llamacpp_util.py
says why). Sequence logits come from one batch of all
ids; greedy continuations are 32 llama.cpp decode steps (argmax; checked
against llama-cpp-python's own temp=0 sampler).

As for the HF goldens, the ids are chosen so that the top-1/top-2 logit margin
is at least PICK at every position and every greedy step in all four types, and
greedy prompts so that no continuation is a short loop (MIN_DISTINCT ids):
the parity tests demand identical top-1 and greedy output, and a near-tie
would flip on a rounding difference (llama.cpp quantizes activations to Q8_0
in its quantized matmuls; an engine need not).

Also prints, as a check of this converter, the max |dlogit| between llama.cpp
on the F32/F16 GGUF and PyTorch's goldens for the same ids (mistral: positions
before the window only), and records it in the golden.

Run:  python3 tools/oracle/make_tiny_gguf.py   (venv with gguf, numpy,
safetensors, llama-cpp-python)
"""
import argparse
import ctypes
import json
import os
import re
import sys
import time
import zlib
from collections import Counter

import numpy as np
import gguf
from safetensors.numpy import load_file

import llama_cpp
import llamacpp_util

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
TYPES = ("f32", "f16", "q8_0", "q4_0")
SEQ_LEN = 24
N_SEQ = 3
GREEDY_NEW = 32
GREEDY_PROMPT_LENS = (7, 13)
MIN_DISTINCT = 12     # distinct ids a greedy continuation must hold (no short loops)
PICK = 0.15           # margin demanded while choosing ids
CHECK = 0.1           # margin every recorded position must exceed
N_CTX = 128
N_THREADS = 2

# HF model_type -> (GGUF arch, permute Q/K rows as llama.cpp's LlamaModel does)
ARCHS = {"llama": ("llama", True), "mistral": ("llama", True),
         "qwen2": ("qwen2", False), "qwen3": ("qwen3", False)}


def log(*a):
    print(*a, flush=True)


def dump_json(obj):
    """Indented JSON with each list of numbers kept on one line."""
    text = json.dumps(obj, indent=1)
    return re.sub(r"\[\s*([-0-9.e, \n]+?)\s*\]",
                  lambda m: "[" + ", ".join(x.strip() for x in m.group(1).split(",")) + "]",
                  text) + "\n"


# ---------------------------------------------------------------- conversion

def load_hf(d):
    with open(os.path.join(d, "config.json")) as f:
        cfg = json.load(f)
    gen = {}
    if os.path.exists(os.path.join(d, "generation_config.json")):
        with open(os.path.join(d, "generation_config.json")) as f:
            gen = json.load(f)
    return cfg, gen, load_file(os.path.join(d, "model.safetensors"))


def rope_params(cfg):
    """rope_parameters (transformers 5) or rope_theta + rope_scaling (transformers 4)."""
    p = dict(cfg.get("rope_parameters") or {})
    if not p:
        p = dict(cfg.get("rope_scaling") or {})
        if "type" in p and "rope_type" not in p:
            p["rope_type"] = p.pop("type")
        p.setdefault("rope_theta", cfg.get("rope_theta", 10000.0))
    return p


def head_dim(cfg):
    return cfg.get("head_dim") or cfg["hidden_size"] // cfg["num_attention_heads"]


def llama3_rope_factors(cfg):
    """Per-frequency divisors, as convert_hf_to_gguf.py's LlamaModel.generate_extra_tensors."""
    rp = rope_params(cfg)
    dim = head_dim(cfg)
    base = rp.get("rope_theta", 10000.0)
    freqs = 1.0 / (base ** (np.arange(0, dim, 2, dtype=np.float32) / dim))
    factor = rp.get("factor", 8.0)
    lo, hi = rp.get("low_freq_factor", 1.0), rp.get("high_freq_factor", 4.0)
    old_ctx = rp.get("original_max_position_embeddings", 8192)
    lo_wl, hi_wl = old_ctx / lo, old_ctx / hi
    out = []
    for fr in freqs:
        wl = 2 * np.pi / fr
        if wl < hi_wl:
            out.append(1.0)
        elif wl > lo_wl:
            out.append(factor)
        else:
            smooth = (old_ctx / wl - lo) / (hi - lo)
            out.append(1 / ((1 - smooth) / factor + smooth))
    return np.array(out, dtype=np.float32)


def permute(w, n_head, n_head_kv):
    """llama.cpp's LlamaModel.permute: HF's rotate_half row order -> interleaved pairs."""
    if n_head_kv is not None and n_head != n_head_kv:
        n_head = n_head_kv
    return (w.reshape(n_head, 2, w.shape[0] // n_head // 2, *w.shape[1:])
            .swapaxes(1, 2).reshape(w.shape))


def add_metadata(w, arch, cfg, gen, name, ftype):
    w.add_type("model")
    w.add_name(name)
    for key, fn in (("top_k", w.add_sampling_top_k), ("top_p", w.add_sampling_top_p),
                    ("min_p", w.add_sampling_min_p), ("temperature", w.add_sampling_temp)):
        if gen.get(key) is not None:
            fn(gen[key])
    w.add_block_count(cfg["num_hidden_layers"])
    w.add_context_length(cfg["max_position_embeddings"])
    w.add_embedding_length(cfg["hidden_size"])
    w.add_feed_forward_length(cfg["intermediate_size"])
    w.add_head_count(cfg["num_attention_heads"])
    w.add_head_count_kv(cfg["num_key_value_heads"])
    rp = rope_params(cfg)
    rt = rp.get("rope_type", "default")
    if rt == "linear":
        w.add_rope_scaling_type(gguf.RopeScalingType.LINEAR)
        w.add_rope_scaling_factor(rp["factor"])
    elif rt not in ("default", "llama3"):
        raise ValueError(f"rope_type {rt!r}: not handled by this converter")
    w.add_rope_freq_base(rp["rope_theta"])
    w.add_layer_norm_rms_eps(cfg["rms_norm_eps"])
    if cfg.get("head_dim") is not None:
        w.add_key_length(cfg["head_dim"])
        w.add_value_length(cfg["head_dim"])
    w.add_file_type(ftype)
    w.add_vocab_size(cfg["vocab_size"])
    if arch == "llama":
        w.add_rope_dimension_count(head_dim(cfg))
    w.add_quantization_version(gguf.GGML_QUANT_VERSION)
    w.add_tokenizer_model("none")


def convert(hf_dir, out_path, outtype, name):
    """Write hf_dir's model as GGUF `outtype` ("f32" or "f16") to out_path."""
    cfg, gen, tensors = load_hf(hf_dir)
    write_gguf(out_path, cfg, gen, tensors, outtype, name, where=hf_dir)


def write_gguf(out_path, cfg, gen, tensors, outtype, name, where="model"):
    """Write HF-named tensors (numpy, any float dtype) with an HF config as GGUF.
    outtype "f32": every tensor F32; "f16": 2-D .weight tensors F16, the rest F32."""
    mt = cfg["model_type"]
    if mt not in ARCHS:
        raise ValueError(f"{where}: model_type {mt!r} not handled")
    arch, undo_permute = ARCHS[mt]
    ftype = {"f32": gguf.LlamaFileType.ALL_F32, "f16": gguf.LlamaFileType.MOSTLY_F16}[outtype]
    n_head, n_kv = cfg["num_attention_heads"], cfg["num_key_value_heads"]
    tmap = gguf.get_tensor_name_map(gguf.MODEL_ARCH[arch.upper()], cfg["num_hidden_layers"])

    w = gguf.GGUFWriter(out_path, arch)
    add_metadata(w, arch, cfg, gen, name, ftype)
    if rope_params(cfg).get("rope_type") == "llama3":
        w.add_tensor(gguf.TENSOR_NAMES[gguf.MODEL_TENSOR.ROPE_FREQS] + ".weight",
                     llama3_rope_factors(cfg))
    for hf_name in sorted(tensors):
        data = tensors[hf_name]
        new = tmap.get_name(hf_name, try_suffixes=(".weight", ".bias"))
        if new is None:
            raise ValueError(f"{where}: tensor {hf_name} has no GGUF name")
        if undo_permute and hf_name.endswith(("q_proj.weight", "q_proj.bias")):
            data = permute(data, n_head, n_head)
        if undo_permute and hf_name.endswith(("k_proj.weight", "k_proj.bias")):
            data = permute(data, n_head, n_kv)
        if outtype == "f16" and data.ndim >= 2 and not new.endswith("_norm.weight") \
                and new.endswith(".weight"):
            data = data.astype(np.float16)
        else:
            data = data.astype(np.float32)
        w.add_tensor(new, np.ascontiguousarray(data))
    total, shared, expert, n_expert = w.get_total_parameter_count()
    w.add_size_label(gguf.size_label(total, shared, expert, n_expert))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def quantize(src, dst, qtype):
    """llama.cpp's own quantizer (llama-quantize's default tensor mix for the type)."""
    p = llama_cpp.llama_model_quantize_default_params()
    p.nthread = N_THREADS
    p.ftype = {"q8_0": llama_cpp.LLAMA_FTYPE_MOSTLY_Q8_0,
               "q4_0": llama_cpp.LLAMA_FTYPE_MOSTLY_Q4_0}[qtype]
    rc = llama_cpp.llama_model_quantize(src.encode(), dst.encode(), ctypes.byref(p))
    if rc != 0:
        raise RuntimeError(f"llama_model_quantize {src} -> {dst} ({qtype}) failed: {rc}")


def tensor_types(path):
    r = gguf.GGUFReader(path)
    return dict(sorted(Counter(t.tensor_type.name for t in r.tensors).items()))


# ------------------------------------------------------------------ llama.cpp

def open_llama(path):
    return llamacpp_util.open_llama(
        path, n_ctx=N_CTX, n_batch=N_CTX, n_ubatch=N_CTX, n_threads=N_THREADS,
        n_threads_batch=N_THREADS, logits_all=True, flash_attn=False,
        type_k=int(gguf.GGMLQuantizationType.F32), type_v=int(gguf.GGMLQuantizationType.F32),
        seed=0, verbose=False)


def llama_settings():
    return llamacpp_util.settings(n_threads=N_THREADS, n_ctx=N_CTX, n_batch=N_CTX,
                                  logits_all=True, flash_attn=False, type_k="f32", type_v="f32")


def gap(row):
    top2 = np.partition(row, -2)[-2:]
    return float(top2[1] - top2[0])


def seq_logits(llm, ids):
    llm.reset()
    llm.eval(ids)
    return np.array(llm.scores[:len(ids)], dtype=np.float32, copy=True)


def greedy(llm, prompt, n, stop_below=None):
    """n greedy llama.cpp steps after prompt: (ids, margins), or None when a
    step's margin falls below stop_below."""
    llm.reset()
    llm.eval(prompt)
    out, gaps = [], []
    for i in range(n):
        row = llm.scores[llm.n_tokens - 1]
        g = gap(row)
        if stop_below is not None and g < stop_below:
            return None
        t = int(np.argmax(row))
        out.append(t)
        gaps.append(g)
        if i + 1 < n:
            llm.eval([t])
    return out, gaps


def sampler_greedy(llm, prompt, n):
    """The same continuation through llama-cpp-python's own sampler (temp 0)."""
    llm.reset()
    out = []
    for t in llm.generate(prompt, temp=0.0, reset=True):
        out.append(int(t))
        if len(out) == n:
            break
    return out


def choose_sequence(llms, vocab, rng):
    ids = []
    for t in range(SEQ_LEN):
        for _ in range(400):
            cand = int(rng.integers(vocab))
            ok = True
            for llm in llms:
                llm.n_tokens = t
                llm.eval([cand])
                if gap(llm.scores[t]) < PICK:
                    ok = False
                    break
            if ok:
                ids.append(cand)
                break
        else:
            raise RuntimeError(f"no token with margin >= {PICK} at position {t}")
        for llm in llms:
            llm.n_tokens = t + 1
    return ids


def set_threads(llms, n):
    for llm in llms:
        llama_cpp.llama_set_n_threads(llm.ctx, n, n)


def wide_and_varied(llm, p):
    r = greedy(llm, p, GREEDY_NEW, stop_below=PICK)
    return r is not None and len(set(r[0])) >= MIN_DISTINCT


def choose_prompt(llms, vocab, length, rng, tries=50000):
    for i in range(tries):
        p = [int(x) for x in rng.integers(vocab, size=length)]
        if all(wide_and_varied(llm, p) for llm in llms):
            log(f"    greedy prompt of {length}: found after {i + 1} tries")
            return p
    raise RuntimeError(f"no greedy prompt of {length} with margin >= {PICK} and "
                       f">= {MIN_DISTINCT} distinct ids in {tries} tries")


def vs_pytorch(llm, hf_dir, window):
    """max |dlogit| of llama.cpp against the PyTorch golden's logits, same ids."""
    with open(os.path.join(hf_dir, "golden.json")) as f:
        g = json.load(f)
    worst, worst_after, top1 = 0.0, 0.0, True
    for s in g["sequences"]:
        ids = s["input_ids"]
        want = np.fromfile(os.path.join(hf_dir, s["logits_file"]), "<f4").reshape(len(ids), -1)
        got = seq_logits(llm, ids)
        d = np.abs(got - want).max(axis=1)
        lim = window or len(ids)
        worst = max(worst, float(d[:lim].max()))
        if window:
            worst_after = max(worst_after, float(d[lim:].max()))
        top1 &= bool((got[:lim].argmax(1) == want[:lim].argmax(1)).all())
    r = {"pytorch_golden": os.path.relpath(hf_dir, ROOT), "max_abs_dlogit": worst,
         "top1_identical": top1}
    if window:
        r["positions_compared"] = f"0..{window - 1} (PyTorch applies sliding_window={window}, " \
                                  "llama.cpp's llama arch does not)"
        r["max_abs_dlogit_from_window_on"] = worst_after
    return r


# ---------------------------------------------------------------------- main

def make_model(name, tiny, out, seed):
    t0 = time.time()
    hf_dir = os.path.join(tiny, f"{name}-f32")
    cfg, _, _ = load_hf(hf_dir)
    vocab = cfg["vocab_size"]
    paths = {t: os.path.join(out, f"{name}-{t}.gguf") for t in TYPES}
    convert(hf_dir, paths["f32"], "f32", f"tiny-{name}")
    convert(hf_dir, paths["f16"], "f16", f"tiny-{name}")
    quantize(paths["f32"], paths["q8_0"], "q8_0")
    quantize(paths["f32"], paths["q4_0"], "q4_0")
    llms = [open_llama(paths[t]) for t in TYPES]
    window = cfg.get("sliding_window") if cfg["model_type"] == "mistral" else None

    # The search runs one thread (faster for models this small; a row's result
    # does not depend on the thread count) and tries Q4_0, the type furthest
    # from the others, first.
    set_threads(llms, 1)
    rng = np.random.default_rng(seed)
    seqs = [choose_sequence(llms[::-1], vocab, rng) for _ in range(N_SEQ)]
    prompts = [choose_prompt(llms[::-1], vocab, L, rng) for L in GREEDY_PROMPT_LENS]
    set_threads(llms, N_THREADS)

    summary = {}
    for t, llm in zip(TYPES, llms):
        tag = f"{name}-{t}"
        files, seq_min = [], float("inf")
        for i, ids in enumerate(seqs):
            lg = seq_logits(llm, ids)
            assert lg.shape == (len(ids), vocab)
            seq_min = min(seq_min, min(gap(r) for r in lg))
            fn = f"{tag}.logits{i}.f32"
            lg.astype("<f4").tofile(os.path.join(out, fn))
            files.append(fn)
        greedy_rec, g_min = [], float("inf")
        for p in prompts:
            ids, gaps = greedy(llm, p, GREEDY_NEW)
            if sampler_greedy(llm, p, GREEDY_NEW) != ids:
                raise RuntimeError(f"{tag}: llama.cpp sampler disagrees with argmax for {p}")
            g_min = min(g_min, min(gaps))
            greedy_rec.append({"prompt_ids": p, "output_ids": ids})
        margins = {"sequences": seq_min, "greedy": g_min}
        if min(seq_min, g_min) <= CHECK:
            raise RuntimeError(f"{tag}: margins {margins} not > {CHECK}")
        g = {"name": tag, "gguf_file": os.path.basename(paths[t]), "gguf_type": t.upper(),
             "tensor_types": tensor_types(paths[t]), "vocab_size": vocab,
             "sequences": [{"input_ids": s, "logits_file": f} for s, f in zip(seqs, files)],
             "greedy": greedy_rec, "min_top1_top2_margin": margins,
             "margin_threshold_checked": CHECK, "made_by": "tools/oracle/make_tiny_gguf.py",
             "converted_from": os.path.relpath(hf_dir, ROOT), "seed": seed,
             "bos_added": False,
             "logits_layout": "raw little-endian float32 [len(input_ids)][vocab_size]",
             "llama_cpp": llama_settings()}
        if window:
            g["note"] = ("llama.cpp's llama arch has no sliding window: this GGUF carries no "
                         "sliding_window key and its goldens are full attention")
        if t in ("f32", "f16"):
            g["vs_pytorch"] = vs_pytorch(llm, hf_dir, window)
            log(f"  {tag}: vs PyTorch {g['vs_pytorch']}")
        with open(os.path.join(out, f"{tag}.golden.json"), "w") as f:
            f.write(dump_json(g))
        summary[t] = dict(margins, **({"vs_pytorch_max_abs": g["vs_pytorch"]["max_abs_dlogit"]}
                                      if "vs_pytorch" in g else {}))
        log(f"  {tag}: margins {margins} types {g['tensor_types']}")
    for llm in llms:
        llm.close()
    log(f"  {name}: done in {time.time() - t0:.1f}s")
    return summary


def verify(out):
    """Recompute every golden under `out` in a fresh llama.cpp context: the
    logits must be bit-identical and the greedy ids the same. Returns 0 if so."""
    bad = 0
    for fn in sorted(f for f in os.listdir(out) if f.endswith(".golden.json")):
        with open(os.path.join(out, fn)) as f:
            g = json.load(f)
        llm = open_llama(os.path.join(out, g["gguf_file"]))
        worst = 0.0
        for s in g["sequences"]:
            want = np.fromfile(os.path.join(out, s["logits_file"]), "<f4")
            want = want.reshape(len(s["input_ids"]), g["vocab_size"])
            worst = max(worst, float(np.abs(seq_logits(llm, s["input_ids"]) - want).max()))
        same = all(greedy(llm, e["prompt_ids"], GREEDY_NEW)[0] == e["output_ids"]
                   for e in g["greedy"])
        llm.close()
        ok = worst == 0.0 and same
        bad += not ok
        log(f"{g['name']}: max|dlogit| {worst:.3g}, greedy {'same' if same else 'DIFFERS'}"
            f"{'' if ok else '  <-- FAIL'}")
    return 1 if bad else 0


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--tiny", default=os.path.join(ROOT, "tests/fixtures/tiny"))
    ap.add_argument("--out", default=os.path.join(ROOT, "tests/fixtures/tiny-gguf"))
    ap.add_argument("--only", nargs="*", help="model names (default: every <name>-f32 dir)")
    ap.add_argument("--verify", action="store_true",
                    help="recompute the goldens under --out with llama.cpp and compare")
    args = ap.parse_args()
    if args.verify:
        return verify(args.out)
    names = args.only or sorted(d[:-4] for d in os.listdir(args.tiny) if d.endswith("-f32"))
    os.makedirs(args.out, exist_ok=True)
    summary = {}
    for name in names:
        log(f"{name}:")
        summary[name] = make_model(name, args.tiny, args.out, seed=zlib.crc32(name.encode()))
    log(json.dumps(summary, indent=1))


if __name__ == "__main__":
    sys.exit(main())
