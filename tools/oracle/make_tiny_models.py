#!/usr/bin/env python3
"""make_tiny_models.py - tiny random-weight HF models and their PyTorch goldens.

Builds, from the configs below (nothing is downloaded), one small decoder per
architecture the engine supports, saves each as a Hugging Face model directory
in float32 and in bfloat16, and records what PyTorch + transformers compute for
it, for hearth's parity tests:

  tests/fixtures/tiny/<name>-f32/   config.json, generation_config.json,
  tests/fixtures/tiny/<name>-bf16/  model.safetensors, golden.json, logits<i>.f32

golden.json:
  {"name", "torch_dtype", "vocab_size",
   "sequences": [{"input_ids": [24 ids], "logits_file": "logits0.f32"}, ...],
   "greedy":    [{"prompt_ids": [...], "output_ids": [32 ids]}, ...],
   "min_top1_top2_margin": {...}, ...provenance...}
logits<i>.f32 is raw little-endian float32 [len(input_ids)][vocab_size]: the
logits at every position of sequence i, run as one forward pass with no BOS
added (ids are fed verbatim).

Why the goldens can be trusted by a test that demands exact top-1 agreement:
random models have near-ties between their two best tokens, and a near-tie
flips on a rounding difference. So the input ids are chosen, one position at a
time, among random candidates, keeping a candidate only when the top-1/top-2
logit margin at that position is wide in every way the model is run:
  f32 model:  margin >= PICK_F32 (the check is > 1e-2);
  bf16 model: margin >= PICK_BF16 (the check is > 0.1) when run in bf16, AND
              the same bf16 weights run in f32 give the same top-1 with the same
              margin (an engine that computes bf16 weights with f32 activations
              lies between the two).
Greedy prompts are drawn likewise: a random prompt is kept only when every one
of its 32 greedy steps has such a margin, and its continuation is not a short
loop (at least MIN_DISTINCT distinct ids). The margins actually seen are
recorded in golden.json.

Numerics: float32 goldens run on the GPU with TF32 off (matmul and cuDNN) and
eager attention (softmax in float32); bf16 goldens run the bf16 model in bf16
and upcast the logits to float32 when saved.

Run (on a machine with torch + transformers; a GPU is expected for the real
goldens, --device cpu works for a dry run):
  python3 tools/oracle/make_tiny_models.py --out tests/fixtures/tiny
"""
import argparse
import copy
import json
import os
import re
import shutil
import sys
import time

import numpy as np
import torch
import transformers
from transformers import (AutoModelForCausalLM, GenerationConfig, LlamaConfig,
                          MistralConfig, Qwen2Config, Qwen3Config)

SEQ_LEN = 24          # tokens per logits sequence (mistral's window is 8: it matters)
N_SEQ = 3             # logits sequences per model
GREEDY_NEW = 32       # greedy continuation length
GREEDY_PROMPT_LENS = (7, 13)
MIN_DISTINCT = 12     # distinct ids a greedy continuation must hold: random models,
                      # tied ones above all, fall into short loops, which test little
PICK_F32 = 0.02       # margin demanded while choosing ids (f32); checked: > 1e-2
PICK_BF16 = 0.25      # margin demanded while choosing ids (bf16); checked: > 0.1
CHECK_F32 = 1e-2
CHECK_BF16 = 0.1
CANDIDATES = 64       # candidate tokens tried at once per position
GREEDY_CANDIDATES = 2048

# Weight init: N(0, std) for matrices; the embedding / lm_head std is set so the
# logits have a standard deviation near 5 (wide top-1/top-2 gaps, yet small
# enough that float32 rounding stays far below a 1e-4 tolerance).
# Norm weights are U(0.6, 1.4); biases N(0, BIAS_STD).
BIAS_STD = 0.2
NORM_LO, NORM_HI = 0.6, 1.4

COMMON = dict(num_attention_heads=4, num_key_value_heads=2, hidden_act="silu",
              max_position_embeddings=512, bos_token_id=1, eos_token_id=2,
              pad_token_id=None)

MODELS = {
    # Llama 3 style: GQA, untied, llama3 rope scaling (all three frequency bands
    # occur for head_dim 16 with theta 5e5: wavelengths < 16, between, > 64).
    "llama3": dict(cls=LlamaConfig, seed=1001, std=0.15, emb_std=0.6,
                   gen=dict(do_sample=True, temperature=0.6, top_p=0.9),
                   cfg=dict(hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                            vocab_size=512, tie_word_embeddings=False, rms_norm_eps=1e-5,
                            rope_theta=500000.0,
                            rope_scaling={"rope_type": "llama3", "factor": 8.0,
                                          "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                                          "original_max_position_embeddings": 64})),
    # Llama 2 style: tied embeddings, default rope.
    "llama2": dict(cls=LlamaConfig, seed=2002, std=0.15, emb_std=0.6, gen={},
                   cfg=dict(hidden_size=64, intermediate_size=128, num_hidden_layers=3,
                            vocab_size=384, tie_word_embeddings=True, rms_norm_eps=1e-5,
                            rope_theta=10000.0)),
    # Mistral: sliding window 8 over sequences of 24.
    "mistral": dict(cls=MistralConfig, seed=3003, std=0.15, emb_std=0.6, gen={},
                    cfg=dict(hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                             vocab_size=256, tie_word_embeddings=False, rms_norm_eps=1e-5,
                             rope_theta=10000.0, sliding_window=8, head_dim=16)),
    # Qwen2: q/k/v biases (non-zero), tied, head_dim 24.
    "qwen2": dict(cls=Qwen2Config, seed=4004, std=0.12, emb_std=0.5, gen={},
                  cfg=dict(hidden_size=96, intermediate_size=192, num_hidden_layers=2,
                           vocab_size=320, tie_word_embeddings=True, rms_norm_eps=1e-6,
                           rope_theta=1000000.0, use_sliding_window=False)),
    # Qwen3: q/k RMSNorm, head_dim 32 != hidden/heads = 16, untied.
    "qwen3": dict(cls=Qwen3Config, seed=5005, std=0.15, emb_std=0.6, gen={},
                  cfg=dict(hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                           vocab_size=384, tie_word_embeddings=False, rms_norm_eps=1e-6,
                           rope_theta=1000000.0, head_dim=32, use_sliding_window=False)),
}


def log(*a):
    print(*a, flush=True)


def make_config(spec, **over):
    kw = dict(COMMON, initializer_range=spec["std"])
    kw.update(spec["cfg"])
    kw.update(over)
    return spec["cls"](**kw)


def randomize(model, spec, gen):
    """Draw every parameter from the spec's distributions (seeded generator)."""
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith("norm.weight"):
                p.copy_(torch.empty(p.shape).uniform_(NORM_LO, NORM_HI, generator=gen))
            elif name.endswith(".bias"):
                p.copy_(torch.empty(p.shape).normal_(0.0, BIAS_STD, generator=gen))
            elif "embed_tokens" in name or name.startswith("lm_head"):
                p.copy_(torch.empty(p.shape).normal_(0.0, spec["emb_std"], generator=gen))
            elif p.ndim == 2:
                p.copy_(torch.empty(p.shape).normal_(0.0, spec["std"], generator=gen))
            else:
                raise RuntimeError(f"no init rule for parameter {name} {tuple(p.shape)}")


def build(spec, device, **cfg_over):
    config = make_config(spec, **cfg_over)
    model = AutoModelForCausalLM.from_config(config, attn_implementation="eager",
                                             dtype=torch.float32)
    gen = torch.Generator().manual_seed(spec["seed"])
    randomize(model, spec, gen)
    return model.to(device).eval()


def margin(logits):
    """top-1 id and top1 - top2 gap along the last dim (float32 in, tensors out)."""
    v, i = logits.float().topk(2, dim=-1)
    return i[..., 0], v[..., 0] - v[..., 1]


class Runner:
    """The three ways a model is run while choosing ids: f32; bf16; bf16 weights in f32."""

    def __init__(self, m32, m16, m16f):
        self.m32, self.m16, self.m16f = m32, m16, m16f

    @torch.no_grad()
    def last(self, ids):
        """ids [B,T] -> per-variant (top1 [B], margin [B]) at the last position."""
        out = []
        for m in (self.m32, self.m16, self.m16f):
            out.append(margin(m(input_ids=ids).logits[:, -1, :]))
        return out

    def ok(self, res):
        (t32, g32), (t16, g16), (t16f, g16f) = res
        return (g32 >= PICK_F32) & (g16 >= PICK_BF16) & (g16f >= PICK_BF16) & (t16 == t16f)


def choose_sequence(run, vocab, gen, device):
    ids = []
    for t in range(SEQ_LEN):
        for _ in range(40):
            cand = torch.randint(0, vocab, (CANDIDATES,), generator=gen)
            prefix = torch.tensor(ids, dtype=torch.long).repeat(CANDIDATES, 1)
            batch = torch.cat([prefix, cand[:, None]], dim=1).to(device)
            good = run.ok(run.last(batch)).nonzero().flatten().tolist()
            if good:
                ids.append(int(cand[good[0]]))
                break
        else:
            return None
    return ids


@torch.no_grad()
def greedy_batch(model, prompts, n):
    """Greedy decode by full recomputation; returns (tokens [B,n], margins [B,n], top1 at each step)."""
    ids = prompts
    toks, gaps = [], []
    for _ in range(n):
        t, g = margin(model(input_ids=ids).logits[:, -1, :])
        toks.append(t)
        gaps.append(g)
        ids = torch.cat([ids, t[:, None]], dim=1)
    return torch.stack(toks, 1), torch.stack(gaps, 1)


def distinct(toks):
    """Number of distinct ids in each row of [B, n]."""
    s, _ = toks.sort(dim=1)
    return 1 + (s[:, 1:] != s[:, :-1]).sum(dim=1)


def choose_greedy_prompt(run, vocab, length, gen, device):
    """A prompt whose greedy steps all have wide margins; among those, the one
    whose continuations hold the most distinct ids (first to reach MIN_DISTINCT)."""
    prompts = torch.randint(0, vocab, (GREEDY_CANDIDATES, length), generator=gen).to(device)
    t32, g32 = greedy_batch(run.m32, prompts, GREEDY_NEW)
    t16, g16 = greedy_batch(run.m16, prompts, GREEDY_NEW)
    t16f, g16f = greedy_batch(run.m16f, prompts, GREEDY_NEW)
    ok = ((g32 >= PICK_F32).all(1) & (g16 >= PICK_BF16).all(1) & (g16f >= PICK_BF16).all(1)
          & (t16 == t16f).all(1))
    good = ok.nonzero().flatten().tolist()
    if not good:
        log(f"    greedy prompts of {length}: none of {GREEDY_CANDIDATES} has wide margins")
        return None
    variety = torch.minimum(distinct(t32), distinct(t16)).clamp(max=MIN_DISTINCT)
    best = max(good, key=lambda i: (int(variety[i]), -i))
    log(f"    greedy prompts of {length}: {len(good)}/{GREEDY_CANDIDATES} have wide margins; "
        f"taking #{best}, {int(distinct(t32[best:best + 1]))} distinct ids (f32)")
    if int(variety[best]) < MIN_DISTINCT:
        log(f"    WARNING: no wide-margin continuation holds {MIN_DISTINCT} distinct ids")
    return prompts[best].tolist()


@torch.no_grad()
def hf_generate(model, prompt, eos, device):
    gc = GenerationConfig(do_sample=False, max_new_tokens=GREEDY_NEW, min_new_tokens=0,
                          eos_token_id=eos, pad_token_id=eos, bos_token_id=1)
    inp = torch.tensor([prompt], dtype=torch.long, device=device)
    out = model.generate(input_ids=inp, attention_mask=torch.ones_like(inp), generation_config=gc)
    return out[0, len(prompt):].tolist()


def save_dir(model, spec, path, eos):
    if os.path.exists(path):
        shutil.rmtree(path)
    gcfg = dict(bos_token_id=1, eos_token_id=eos)
    gcfg.update(spec["gen"])
    model.generation_config = GenerationConfig(**gcfg)
    model.config.eos_token_id = eos
    model.save_pretrained(path, safe_serialization=True)
    names = sorted(os.listdir(path))
    want = ["config.json", "generation_config.json", "model.safetensors"]
    if names != want:
        raise RuntimeError(f"{path}: save_pretrained wrote {names}, expected {want}")


@torch.no_grad()
def full_logits(model, ids, device):
    return model(input_ids=torch.tensor([ids], device=device)).logits[0].float().cpu()


def sliding_window_check(spec, m32, seqs, device):
    """Prove the window is applied: same weights with sliding_window=None must
    agree before position `window` and differ after it."""
    w = spec["cfg"]["sliding_window"]
    nowin = build(spec, device, sliding_window=None)
    nowin.load_state_dict(m32.state_dict())
    res = {"window": w, "attn_implementation": "eager"}
    lo, hi = 0.0, 0.0
    first_diff = None
    for ids in seqs:
        a = full_logits(m32, ids, device)
        b = full_logits(nowin, ids, device)
        d = (a - b).abs().amax(dim=1)
        lo = max(lo, float(d[:w].max()))
        hi = max(hi, float(d[w:].max()))
        nz = (d > 1e-3).nonzero().flatten().tolist()
        if nz:
            first_diff = nz[0] if first_diff is None else min(first_diff, nz[0])
    res.update(max_abs_diff_before_window=lo, max_abs_diff_from_window_on=hi,
               first_position_that_differs=first_diff)
    log(f"    sliding window check: {res}")
    if not (lo < 1e-4 and hi > 1e-2 and first_diff == w):
        raise RuntimeError(f"mistral sliding window not applied as expected: {res}")
    return res


def dump_json(obj):
    """Indented JSON with each list of numbers kept on one line."""
    text = json.dumps(obj, indent=1)
    return re.sub(r"\[\s*([-0-9.e, \n]+?)\s*\]",
                  lambda m: "[" + ", ".join(x.strip() for x in m.group(1).split(",")) + "]",
                  text) + "\n"


def write_golden(dirpath, name, dtype_name, vocab, seqs, seq_logits, greedy, margins, extra):
    files = []
    for i, lg in enumerate(seq_logits):
        fn = f"logits{i}.f32"
        arr = lg.numpy().astype("<f4")
        assert arr.shape == (len(seqs[i]), vocab)
        arr.tofile(os.path.join(dirpath, fn))
        files.append(fn)
    g = {"name": name, "torch_dtype": dtype_name, "vocab_size": vocab,
         "sequences": [{"input_ids": s, "logits_file": f} for s, f in zip(seqs, files)],
         "greedy": greedy,
         "min_top1_top2_margin": margins}
    g.update(extra)
    with open(os.path.join(dirpath, "golden.json"), "w") as f:
        f.write(dump_json(g))


class Reseed(Exception):
    """These weights give no wide-margin goldens; draw new ones."""


def make_one(name, spec, out, device, provenance):
    t0 = time.time()
    for attempt in range(8):
        seed = spec["seed"] + 100 * attempt
        try:
            res = make_seeded(name, dict(spec, seed=seed), out, device, provenance)
            log(f"  {name}: done in {time.time() - t0:.1f}s (seed {seed})")
            return res
        except Reseed as e:
            log(f"  {name}: seed {seed}: {e}; re-seeding")
    raise RuntimeError(f"{name}: no seed gave wide margins")


def make_seeded(name, spec, out, device, provenance):
    vocab = spec["cfg"]["vocab_size"]
    m32 = build(spec, device)
    m16 = copy.deepcopy(m32).to(torch.bfloat16)
    m16f = copy.deepcopy(m16).to(torch.float32)
    run = Runner(m32, m16, m16f)
    gen = torch.Generator().manual_seed(spec["seed"] + 7)
    seqs = [choose_sequence(run, vocab, gen, device) for _ in range(N_SEQ)]
    if any(s is None for s in seqs):
        raise Reseed("no wide-margin token at some position")
    prompts = [choose_greedy_prompt(run, vocab, L, gen, device) for L in GREEDY_PROMPT_LENS]
    if any(p is None for p in prompts):
        raise Reseed("no greedy prompt with wide margins at every step")

    # greedy reference by full recomputation, then transformers' own generate()
    ref = {}
    for tag, m in (("f32", m32), ("bf16", m16)):
        ref[tag] = [greedy_batch(m, torch.tensor([p], device=device), GREEDY_NEW)[0][0].tolist()
                    for p in prompts]
    used = set(x for tag in ref for o in ref[tag] for x in o) | set(x for s in seqs for x in s) \
        | set(x for p in prompts for x in p)
    eos = next(i for i in range(vocab - 1, 2, -1) if i not in used)

    sw = sliding_window_check(spec, m32, seqs, device) if "sliding_window" in spec["cfg"] else None
    todo = []
    for tag, m, dname in (("f32", m32, "float32"), ("bf16", m16, "bfloat16")):
        lgs = [full_logits(m, s, device) for s in seqs]
        seq_margin = min(float(margin(lg)[1].min()) for lg in lgs)
        greedy, gmin = [], float("inf")
        for p, r in zip(prompts, ref[tag]):
            o = hf_generate(m, p, eos, device)
            if o != r:
                raise Reseed(f"{tag}: generate() {o} != full recompute {r}")
            _, g = greedy_batch(m, torch.tensor([p], device=device), GREEDY_NEW)
            gmin = min(gmin, float(g.min()))
            greedy.append({"prompt_ids": p, "output_ids": o})
        margins = {"sequences": seq_margin, "greedy": gmin}
        thr = CHECK_F32 if tag == "f32" else CHECK_BF16
        if min(seq_margin, gmin) <= thr:
            raise Reseed(f"{tag}: margin {margins} not > {thr}")
        extra = dict(provenance)
        extra.update(seed=spec["seed"], bos_added=False, eos_token_id_never_generated=eos,
                     margin_threshold_checked=thr,
                     logits_layout="raw little-endian float32 [len(input_ids)][vocab_size]")
        if tag == "bf16":
            lgf = [full_logits(m16f, s, device) for s in seqs]
            if not all(bool((margin(a)[0] == margin(b)[0]).all()) for a, b in zip(lgs, lgf)):
                raise Reseed("bf16: top-1 differs between bf16 and f32 compute")
            extra["bf16_weights_f32_compute"] = {
                "top1_identical_every_position": True,
                "greedy_identical": True,
                "min_top1_top2_margin": min(float(margin(lg)[1].min()) for lg in lgf),
                "max_abs_diff_vs_bf16_logits": max(float((a - b).abs().max())
                                                   for a, b in zip(lgs, lgf))}
        if sw is not None:
            extra["sliding_window_check"] = sw
        todo.append((tag, m, dname, lgs, greedy, margins, extra))

    result = {}
    for tag, m, dname, lgs, greedy, margins, extra in todo:
        d = os.path.join(out, f"{name}-{tag}")
        save_dir(m, spec, d, eos)
        write_golden(d, f"{name}-{tag}", dname, vocab, seqs, lgs, greedy, margins, extra)
        result[tag] = margins
        log(f"  {name}-{tag}: margins {margins}")
    return result


@torch.no_grad()
def verify(out, device):
    """Reload every saved directory with from_pretrained and recompute its
    goldens on `device`: logits max |diff| and greedy ids. Returns 0 if all agree
    (f32: |diff| <= 1e-4; bf16: top-1 identical at every position)."""
    bad = 0
    for name in sorted(os.listdir(out)):
        d = os.path.join(out, name)
        with open(os.path.join(d, "golden.json")) as f:
            g = json.load(f)
        dtype = {"float32": torch.float32, "bfloat16": torch.bfloat16}[g["torch_dtype"]]
        m = AutoModelForCausalLM.from_pretrained(d, dtype=dtype, attn_implementation="eager")
        m = m.to(device).eval()
        V = g["vocab_size"]
        worst, top1_ok = 0.0, True
        for s in g["sequences"]:
            want = torch.from_numpy(np.fromfile(os.path.join(d, s["logits_file"]), "<f4")
                                    .reshape(len(s["input_ids"]), V))
            got = full_logits(m, s["input_ids"], device)
            worst = max(worst, float((got - want).abs().max()))
            top1_ok &= bool((got.argmax(-1) == want.argmax(-1)).all())
        greedy_ok = all(hf_generate(m, e["prompt_ids"], g["eos_token_id_never_generated"], device)
                        == e["output_ids"] for e in g["greedy"])
        ok = top1_ok and greedy_ok and (dtype != torch.float32 or worst <= 1e-4)
        bad += not ok
        log(f"{name}: max|dlogit| {worst:.3g}, top-1 {'same' if top1_ok else 'DIFFERS'}, "
            f"greedy {'same' if greedy_ok else 'DIFFERS'}{'' if ok else '  <-- FAIL'}")
    return 1 if bad else 0


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", default="tests/fixtures/tiny")
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--only", nargs="*", help="model names (default: all)")
    ap.add_argument("--greedy-candidates", type=int, default=GREEDY_CANDIDATES,
                    help="random prompts tried at once (fewer for a quick CPU run)")
    ap.add_argument("--verify", action="store_true",
                    help="reload the saved directories under --out and recompute their goldens")
    args = ap.parse_args()

    # float32 means float32: no TF32 in matmuls or convolutions.
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    torch.set_float32_matmul_precision("highest")
    device = torch.device(args.device)
    if args.verify:
        return verify(args.out, device)
    globals()["GREEDY_CANDIDATES"] = args.greedy_candidates
    provenance = {
        "made_by": "tools/oracle/make_tiny_models.py",
        "torch": torch.__version__, "transformers": transformers.__version__,
        "device": torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu",
        "attn_implementation": "eager", "tf32": False,
    }
    log(f"provenance: {provenance}")
    os.makedirs(args.out, exist_ok=True)
    summary = {}
    for name in (args.only or MODELS):
        log(f"{name}:")
        summary[name] = make_one(name, MODELS[name], args.out, device, provenance)
    log(json.dumps(summary))


if __name__ == "__main__":
    sys.exit(main())
