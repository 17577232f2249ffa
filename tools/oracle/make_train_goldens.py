#!/usr/bin/env python3
"""make_train_goldens.py - a few steps of LoRA fine-tuning (SFT) with PyTorch +
PEFT on the tiny HF models, recorded for the C trainer's tests.

For each case below, loads tests/fixtures/tiny/<model>/ (float32, eager
attention, on the CPU), wraps it in PEFT's LoraConfig (lora_dropout 0, bias
"none"), draws every lora_A and lora_B from a seeded generator (N(0, 0.1), in
sorted parameter-name order: PEFT starts B at zero, which would leave A with no
gradient at step 1), makes three token sequences with label masks, and trains
the LoRA parameters only with torch.optim.AdamW for four steps:

  tests/fixtures/train/<case>/
    init/               adapter_config.json, adapter_model.safetensors (before step 0)
    final/              adapter_config.json, adapter_model.safetensors (after step 3)
    grads0.safetensors  d loss / d param at step 0 (before the first update), float32,
                        under the adapter file's tensor names
                        (base_model.model.model.layers.0.self_attn.q_proj.lora_A.weight, ...)
    golden.json

golden.json:
  {"model": "tiny/<model>" (relative to tests/fixtures), "r", "lora_alpha",
   "use_rslora", "target_modules": [sorted], "lr", "betas", "eps", "weight_decay",
   "sequences": [{"tokens": [...], "labels": [0/1 per position]}, x3],
   "batches": [[0, 1, 2], [0], [1, 2], [2, 0]],
   "losses": [4 floats: each step's loss, before that step's update],
   "torch", "transformers", "peft", ...extras}
  mistral-window adds "sliding_window": 8 (token i attends to j when
  i - 8 < j <= i; sequences 0 and 2 are longer than the window) and
  "sliding_window_check" (see below).
  Extras: "scaling" (alpha / r, or alpha / sqrt(r) with rsLoRA), "vocab_size",
  "step_details" (per step: each sequence's summed cross-entropy and label count),
  "loss_after" (batch [0, 1, 2] with the final adapter: comparable to losses[0]),
  "checks" (what the sanity checks measured).

The loss of a step: every sequence of the batch is run alone (batch size 1, no
padding, positions 0..n-1); logits[i] predicts tokens[i+1], and counts where
labels[i+1] == 1 (labels[0] is always 0). loss = sum over the batch of the
summed cross-entropy / number of labels in the batch. One backward, one
optimizer.step(), zero_grad. AdamW is torch's single-tensor (foreach and fused
off) textbook update, one parameter group over all LoRA tensors (A and B both
decay), t = 1, 2, ...:
  p  *= 1 - lr * weight_decay
  m   = beta1 * m + (1 - beta1) * g
  v   = beta2 * v + (1 - beta2) * g * g
  p  -= lr / (1 - beta1^t) * m / (sqrt(v) / sqrt(1 - beta2^t) + eps)

Sanity checks, printed (a failed one exits non-zero, except the loss trend,
which only warns): every step-0 gradient tensor is non-zero; grads0's names are
the adapter file's; init/ and final/ reloaded with PeftModel.from_pretrained on
a fresh base give the in-memory model's logits (max |diff| printed); the losses
are printed and loss_after < losses[0]; for mistral, the same weights with
sliding_window=None agree with the windowed model before position 8 and differ
from position 8 on.

Numerics: float32 on the CPU (the models are tiny; no cuBLAS/TF32 in the
goldens), one thread, torch.use_deterministic_algorithms(True, warn_only=True),
eager attention, no dropout anywhere (model.eval(); the LoRA parameters still
get gradients).

PEFT: imported if installed; otherwise the wheels in .dev/wheels (peft and
accelerate, pure Python) are unpacked into a temporary folder put first on
sys.path. Or install them the usual way: pip install --no-deps .dev/wheels/*.whl

Run from the repository root on a machine with torch + transformers (the GPU
machine is fine; no GPU is used, no network is needed):
  python3 tools/oracle/make_train_goldens.py --out tests/fixtures
or, where the repository is read-only or the output must be collected, e.g.
into $OUT (the fixtures then go to tests/fixtures/train/):
  python3 tools/oracle/make_train_goldens.py --out "$OUT" [--cases llama3-all,qwen3-some]
(.dev/ is git-ignored locally: a device run has to carry .dev/wheels.)
"""
import argparse
import glob
import importlib
import importlib.util
import json
import os
import re
import sys
import tempfile
import time
import zipfile

import torch
import torch.nn.functional as F
import transformers
from transformers import AutoConfig, AutoModelForCausalLM

ALL = ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]
SEQ_LENS = (37, 20, 50)
SEQ1_UNLABELED = 10          # sequence 1: no labels on its first 10 positions
SEQ2_MIN_LABELS = 5          # sequence 2: a random mask with at least this many ones
BATCHES = [[0, 1, 2], [0], [1, 2], [2, 0]]
LR, BETAS, EPS, WEIGHT_DECAY = 1e-2, (0.9, 0.999), 1e-8, 0.01
INIT_STD = 0.1
RELOAD_TOL = 1e-5            # reloaded adapter vs in-memory model (same CPU: expect 0)

CASES = {
    # every projection, alpha / r = 2
    "llama3-all": dict(model="llama3-f32", seed=91, r=4, alpha=8, targets=ALL, rslora=False),
    # q/k/v biases in the base (frozen); rsLoRA: alpha / sqrt(r) = 2
    "qwen2-rslora": dict(model="qwen2-f32", seed=92, r=4, alpha=4, targets=ALL, rslora=True),
    # q/k RMSNorm in the base; a subset of projections, odd rank
    "qwen3-some": dict(model="qwen3-f32", seed=93, r=3, alpha=6, targets=["q_proj", "v_proj", "down_proj"],
                       rslora=False),
    # the tiny mistral has sliding_window 8 (config.json): sequences 0 and 2 (37, 50) cross it
    "mistral-window": dict(model="mistral-f32", seed=94, r=4, alpha=8,
                           targets=["q_proj", "k_proj", "v_proj", "o_proj"], rslora=False),
}


def log(*a):
    print(*a, flush=True)


def fail(msg):
    sys.exit(f"FAILED: {msg}")


def import_peft(wheels):
    """peft as installed, else from the .whl files in `wheels` (unpacked to a temp dir)."""
    if importlib.util.find_spec("peft") is None or importlib.util.find_spec("accelerate") is None:
        whls = sorted(glob.glob(os.path.join(wheels, "*.whl")))
        if not whls:
            fail(f"peft/accelerate not installed and no wheels in {wheels}")
        dest = tempfile.mkdtemp(prefix="hearth-peft-")
        for w in whls:
            with zipfile.ZipFile(w) as z:
                z.extractall(dest)
        sys.path.insert(0, dest)
        importlib.invalidate_caches()
        log(f"peft: unpacked {', '.join(os.path.basename(w) for w in whls)} into {dest}")
    import peft
    return peft


def dump_json(obj):
    """Indented JSON with each list of numbers kept on one line."""
    text = json.dumps(obj, indent=1)
    return re.sub(r"\[\s*([-0-9.eE+, \n]+?)\s*\]",
                  lambda m: "[" + ", ".join(x.strip() for x in m.group(1).split(",")) + "]",
                  text) + "\n"


def load_base(path, **cfg_over):
    config = AutoConfig.from_pretrained(path)
    for k, v in cfg_over.items():
        setattr(config, k, v)
    model = AutoModelForCausalLM.from_pretrained(path, config=config, dtype=torch.float32,
                                                 attn_implementation="eager")
    return model.to(torch.device("cpu")).eval()


def make_sequences(vocab, gen):
    seqs = []
    for i, n in enumerate(SEQ_LENS):
        tokens = torch.randint(0, vocab, (n,), generator=gen).tolist()
        if i == 0:
            labels = [0] + [1] * (n - 1)
        elif i == 1:
            labels = [0] * SEQ1_UNLABELED + [1] * (n - SEQ1_UNLABELED)
        else:
            while True:
                labels = (torch.rand(n, generator=gen) < 0.5).long().tolist()
                labels[0] = 0
                if sum(labels) >= SEQ2_MIN_LABELS:
                    break
        assert len(tokens) == len(labels) == n and labels[0] == 0
        seqs.append({"tokens": tokens, "labels": labels})
    return seqs


def forward_logits(model, tokens):
    """[n, vocab] float32 logits of one sequence run alone (positions 0..n-1)."""
    x = torch.tensor([tokens], dtype=torch.long)
    return model(input_ids=x, use_cache=False).logits[0].float()


def seq_loss_sum(model, seq):
    """Summed cross-entropy over the labelled positions, and their count."""
    logits = forward_logits(model, seq["tokens"])
    tgt = torch.tensor(seq["tokens"][1:], dtype=torch.long)
    keep = torch.tensor(seq["labels"][1:], dtype=torch.bool)
    return F.cross_entropy(logits[:-1][keep], tgt[keep], reduction="sum"), int(keep.sum())


@torch.no_grad()
def all_logits(model, seqs):
    return [forward_logits(model, s["tokens"]) for s in seqs]


def max_diff(a, b):
    return max(float((x - y).abs().max()) for x, y in zip(a, b))


def save_adapter(pm, d):
    pm.save_pretrained(d, safe_serialization=True, save_embedding_layers=False)
    # save_pretrained writes a README.md model card; the fixture keeps only the adapter
    if os.path.exists(os.path.join(d, "README.md")):
        os.remove(os.path.join(d, "README.md"))
    for fn in ("adapter_config.json", "adapter_model.safetensors"):
        if not os.path.exists(os.path.join(d, fn)):
            fail(f"{d}: save_pretrained wrote no {fn}")


def reload_check(PeftModel, base_dir, adapter_dir, seqs, want, what):
    pm2 = PeftModel.from_pretrained(load_base(base_dir), adapter_dir).eval()
    d = max_diff(all_logits(pm2, seqs), want)
    log(f"    reload {what}: max |logit diff| vs in-memory {d:.3g}")
    if d > RELOAD_TOL:
        fail(f"{adapter_dir} reloaded gives other logits (max diff {d})")
    return d


def window_check(PeftModel, base_dir, init_dir, seqs, want, w):
    """The same weights (base + init adapter) with sliding_window=None must agree with the
    windowed model before position w and differ from w on (for sequences longer than w)."""
    nowin = PeftModel.from_pretrained(load_base(base_dir, sliding_window=None), init_dir).eval()
    got = all_logits(nowin, seqs)
    lo, hi, first = 0.0, 0.0, None
    for s, a, b in zip(seqs, want, got):
        d = (a - b).abs().amax(dim=1)
        lo = max(lo, float(d[:w].max()))
        if len(s["tokens"]) > w:
            hi = max(hi, float(d[w:].max()))
        nz = (d > 1e-3).nonzero().flatten().tolist()
        if nz:
            first = nz[0] if first is None else min(first, nz[0])
    res = {"window": w, "max_abs_diff_before_window": lo, "max_abs_diff_from_window_on": hi,
           "first_position_that_differs": first}
    log(f"    sliding window check: {res}")
    if not (lo < 1e-4 and hi > 1e-2 and first == w):
        fail(f"sliding window not applied as expected: {res}")
    return res


def run_case(name, spec, args, peft):
    from peft import LoraConfig, PeftModel, get_peft_model
    from peft.utils import get_peft_model_state_dict
    from safetensors.torch import load_file, save_file

    t0 = time.time()
    base_dir = os.path.join(args.tiny, spec["model"])
    out = os.path.join(args.out, "train", name)
    init_dir, final_dir = os.path.join(out, "init"), os.path.join(out, "final")
    os.makedirs(out, exist_ok=True)
    log(f"{name}: {base_dir} -> {out}")

    torch.manual_seed(spec["seed"])           # PEFT's own init draws from the global RNG
    base = load_base(base_dir)
    vocab = base.config.vocab_size
    sliding = getattr(base.config, "sliding_window", None)
    if spec["model"].startswith("mistral"):
        if sliding is None or sliding >= max(SEQ_LENS):
            # not so with the committed tiny mistral (window 8); kept so that a regenerated one is noticed
            log(f"    NOTE: {spec['model']} has sliding_window={sliding}: the window is not exercised")
    cfg = LoraConfig(r=spec["r"], lora_alpha=spec["alpha"], target_modules=spec["targets"], lora_dropout=0.0,
                     bias="none", use_rslora=spec["rslora"], init_lora_weights=False, task_type="CAUSAL_LM")
    pm = get_peft_model(base, cfg).eval()

    # A and B from a seeded generator, sorted parameter-name order
    gen = torch.Generator().manual_seed(spec["seed"])
    named = dict(pm.named_parameters())
    lora_names = sorted(n for n in named if ".lora_A." in n or ".lora_B." in n)
    trainable = sorted(n for n, p in named.items() if p.requires_grad)
    if trainable != lora_names or not lora_names:
        fail(f"trainable parameters are not exactly the LoRA ones: {sorted(set(trainable) ^ set(lora_names))}")
    with torch.no_grad():
        for n in lora_names:
            p = named[n]
            if p.dtype != torch.float32:
                fail(f"{n} is {p.dtype}")
            p.copy_(torch.randn(p.shape, generator=gen) * INIT_STD)
    params = [named[n] for n in lora_names]
    n_elems = sum(p.numel() for p in params)
    log(f"    {len(params)} LoRA tensors, {n_elems} parameters, vocab {vocab}")

    seqs = make_sequences(vocab, torch.Generator().manual_seed(spec["seed"] + 1000))
    before = all_logits(pm, seqs)

    save_adapter(pm, init_dir)
    adapter_keys = sorted(load_file(os.path.join(init_dir, "adapter_model.safetensors")).keys())
    checks = {"reload_init_max_abs_diff": reload_check(PeftModel, base_dir, init_dir, seqs, before, "init")}
    extra = {}
    if sliding is not None:
        extra["sliding_window"] = sliding
        if sliding < max(SEQ_LENS):
            extra["sliding_window_check"] = window_check(PeftModel, base_dir, init_dir, seqs, before, sliding)

    opt = torch.optim.AdamW(params, lr=LR, betas=BETAS, eps=EPS, weight_decay=WEIGHT_DECAY,
                            amsgrad=False, foreach=False, fused=False)
    losses, details = [], []
    for step, batch in enumerate(BATCHES):
        opt.zero_grad(set_to_none=True)
        total, n_labels, sums = None, 0, []
        for i in batch:
            s, n = seq_loss_sum(pm, seqs[i])
            total = s if total is None else total + s
            n_labels += n
            sums.append(float(s))
        loss = total / n_labels
        loss.backward()
        if step == 0:
            grads = {n: named[n].grad.detach().clone() for n in lora_names}
            zero = [n for n, g in grads.items() if not bool(g.abs().max() > 0)]
            if zero:
                fail(f"zero gradient at step 0: {zero}")
            gmin = min(float(g.abs().max()) for g in grads.values())
            g0 = get_peft_model_state_dict(pm, state_dict=grads, save_embedding_layers=False)
            g0 = {k: v.float().contiguous() for k, v in g0.items()}
            if sorted(g0) != adapter_keys:
                fail(f"grads0 names differ from the adapter's: {sorted(set(g0) ^ set(adapter_keys))[:6]}")
            save_file(g0, os.path.join(out, "grads0.safetensors"))
            checks["grads0_min_of_max_abs"] = gmin
            log(f"    step 0: {len(g0)} gradient tensors, all non-zero (smallest max |g| {gmin:.3g})")
        opt.step()
        losses.append(float(loss.detach()))
        details.append({"loss_sum": sums, "n_labels": n_labels})
        log(f"    step {step} batch {batch}: loss {losses[-1]:.6f} ({n_labels} labels)")
    opt.zero_grad(set_to_none=True)

    with torch.no_grad():
        sums = [seq_loss_sum(pm, seqs[i]) for i in BATCHES[0]]
        loss_after = float(sum(float(s) for s, _ in sums) / sum(n for _, n in sums))
    log(f"    losses {['%.6f' % x for x in losses]}; batch {BATCHES[0]} before {losses[0]:.6f}, "
        f"after {loss_after:.6f}")
    if not loss_after < losses[0]:
        log("    WARNING: the loss did not decrease over the 4 steps")
    checks["loss_decreased"] = loss_after < losses[0]

    after = all_logits(pm, seqs)
    save_adapter(pm, final_dir)
    checks["reload_final_max_abs_diff"] = reload_check(PeftModel, base_dir, final_dir, seqs, after, "final")
    checks["max_abs_logit_change_from_training"] = max_diff(after, before)

    golden = {"model": f"tiny/{spec['model']}", "r": spec["r"], "lora_alpha": spec["alpha"],
              "use_rslora": spec["rslora"], "target_modules": sorted(spec["targets"]),
              "lr": LR, "betas": list(BETAS), "eps": EPS, "weight_decay": WEIGHT_DECAY,
              "sequences": seqs, "batches": BATCHES, "losses": losses,
              "torch": torch.__version__, "transformers": transformers.__version__, "peft": peft.__version__}
    golden.update(extra)
    golden.update({"name": name, "vocab_size": vocab,
                   "scaling": spec["alpha"] / (spec["r"] ** 0.5 if spec["rslora"] else spec["r"]),
                   "init": {"seed": spec["seed"], "std": INIT_STD, "order": "sorted parameter names",
                            "tensors": len(params), "parameters": n_elems},
                   "optimizer": "torch.optim.AdamW(foreach=False, fused=False, amsgrad=False), one group",
                   "loss": "per step: sum of summed cross-entropy over labelled positions / labels in the batch",
                   "step_details": details, "loss_after": loss_after, "checks": checks,
                   "device": "cpu", "dtype": "float32", "attn_implementation": "eager",
                   "script": "tools/oracle/make_train_goldens.py"})
    write_golden(out, golden, name, t0)


def write_golden(out, golden, name, t0):
    """golden.json into out, and a line of what the case wrote."""
    with open(os.path.join(out, "golden.json"), "w") as f:
        f.write(dump_json(golden))
    sizes = {}
    for root, _, files in os.walk(out):
        for fn in files:
            p = os.path.join(root, fn)
            sizes[os.path.relpath(p, out)] = os.path.getsize(p)
    log(f"    wrote {sum(sizes.values())} bytes: " + ", ".join(f"{k} {v}" for k, v in sorted(sizes.items())))
    log(f"{name}: done in {time.time() - t0:.1f} s")


def cli_main(cases, run_case, sub):
    """The command line both oracles share: run the chosen cases into <out>/<sub>/<case>/."""
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default="tests/fixtures", help=f"writes <out>/{sub}/<case>/")
    ap.add_argument("--tiny", default="tests/fixtures/tiny", help="where the tiny HF models are")
    ap.add_argument("--cases", default="", help="comma-separated subset of " + ",".join(cases))
    ap.add_argument("--wheels", default=".dev/wheels", help="peft/accelerate wheels, used when not installed")
    ap.add_argument("--threads", type=int, default=1)
    args = ap.parse_args()
    names = [c for c in args.cases.split(",") if c] or list(cases)
    unknown = [c for c in names if c not in cases]
    if unknown:
        fail(f"unknown case(s) {unknown}; known: {list(cases)}")

    peft = import_peft(args.wheels)
    torch.set_num_threads(args.threads)
    try:
        torch.use_deterministic_algorithms(True, warn_only=True)
    except Exception as e:  # older torch without warn_only
        log(f"deterministic algorithms not enabled: {e}")
    torch.set_grad_enabled(True)
    log(f"torch {torch.__version__}, transformers {transformers.__version__}, peft {peft.__version__}, "
        f"{args.threads} thread(s)")
    for name in names:
        run_case(name, cases[name], args, peft)


def main():
    cli_main(CASES, run_case, "train")


if __name__ == "__main__":
    main()
