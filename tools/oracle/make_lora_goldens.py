#!/usr/bin/env python3
"""make_lora_goldens.py - random LoRA adapters for the tiny HF models, and what
PyTorch + PEFT compute with them.

For each case below, loads tests/fixtures/tiny/<base>/ (float32), wraps it in
PEFT's LoraConfig, draws the adapter's A and B from a seeded generator (PEFT
starts B at zero, which would test nothing), saves the adapter as PEFT saves it
(save_pretrained: adapter_config.json + adapter_model.safetensors) and records
the adapted model's logits and greedy continuations in the format of
make_tiny_models.py:

  tests/fixtures/lora/<case>/   adapter_config.json, adapter_model.safetensors,
                                golden.json, logits<i>.f32

golden.json also names the base ("base": "llama3-f32") and records how far the
adapter moves the logits from the base model's ("max_abs_delta_vs_base"), so a
test knows the adapter is not a no-op.

Ids are chosen as make_tiny_models.py chooses them, f32 only: a candidate is
kept where the adapted model's top-1/top-2 margin is >= 0.02 at every position
and every greedy step, and a greedy continuation holds >= 12 distinct ids.

Numerics: float32 on the GPU, TF32 off, eager attention (as the base goldens).

Run on a machine with torch + transformers (+ peft and accelerate, which
install without their dependencies: pip install --no-deps peft accelerate):
  python3 tools/oracle/make_lora_goldens.py --out tests/fixtures/lora
"""
import argparse
import json
import os
import sys
import time

import numpy as np
import torch
from transformers import AutoModelForCausalLM

SEQ_LEN, N_SEQ, GREEDY_NEW, GREEDY_PROMPT_LENS = 24, 3, 32, (7, 13)
PICK, MIN_DISTINCT, CANDIDATES = 0.02, 12, 64
ALL = ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]

CASES = {
    # every projection, the classic alpha / r scale
    "llama3-all": dict(base="llama3-f32", seed=71, r=8, alpha=16, targets=ALL, rslora=False, std=0.15),
    # q/k/v biases in the base; rsLoRA's alpha / sqrt(r) scale
    "qwen2-rslora": dict(base="qwen2-f32", seed=72, r=4, alpha=4, targets=ALL, rslora=True, std=0.15),
    # a subset of projections, one layer only (the others keep the base weights)
    "qwen3-some": dict(base="qwen3-f32", seed=73, r=6, alpha=12, targets=["q_proj", "v_proj", "down_proj"],
                       rslora=False, std=0.2, layers=[1]),
}


def log(*a):
    print(*a, flush=True)


def margin(logits):
    v, i = logits.float().topk(2, dim=-1)
    return i[..., 0], v[..., 0] - v[..., 1]


@torch.no_grad()
def choose_sequence(model, vocab, gen, device):
    ids = []
    for _ in range(SEQ_LEN):
        for _ in range(40):
            cand = torch.randint(0, vocab, (CANDIDATES,), generator=gen)
            prefix = torch.tensor(ids, dtype=torch.long).repeat(CANDIDATES, 1)
            batch = torch.cat([prefix, cand[:, None]], dim=1).to(device)
            _, g = margin(model(input_ids=batch).logits[:, -1, :])
            good = (g >= PICK).nonzero().flatten().tolist()
            if good:
                ids.append(int(cand[good[0]]))
                break
        else:
            return None
    return ids


@torch.no_grad()
def choose_greedy(model, vocab, gen, device, plen):
    for _ in range(64):
        prompts = torch.randint(0, vocab, (256, plen), generator=gen).to(device)
        ids, ok = prompts, torch.ones(256, dtype=torch.bool, device=device)
        min_gap = torch.full((256,), 1e9, device=device)
        for _ in range(GREEDY_NEW):
            t, g = margin(model(input_ids=ids).logits[:, -1, :])
            ok &= g >= PICK
            min_gap = torch.minimum(min_gap, g)
            ids = torch.cat([ids, t[:, None]], dim=1)
        for b in ok.nonzero().flatten().tolist():
            out = ids[b, plen:].tolist()
            if len(set(out)) >= MIN_DISTINCT:
                return prompts[b].tolist(), out, float(min_gap[b])
    return None


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--tiny", default="tests/fixtures/tiny")
    ap.add_argument("--out", default="tests/fixtures/lora")
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--only", default="")
    args = ap.parse_args()
    import peft
    from peft import LoraConfig, get_peft_model

    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    for name, spec in CASES.items():
        if args.only and name not in args.only.split(","):
            continue
        t0 = time.time()
        base_dir = os.path.join(args.tiny, spec["base"])
        model = AutoModelForCausalLM.from_pretrained(base_dir, dtype=torch.float32, attn_implementation="eager")
        model = model.to(args.device).eval()
        vocab = model.config.vocab_size
        cfg = LoraConfig(r=spec["r"], lora_alpha=spec["alpha"], target_modules=spec["targets"], lora_dropout=0.0,
                         bias="none", use_rslora=spec["rslora"], init_lora_weights=False,
                         layers_to_transform=spec.get("layers"), task_type="CAUSAL_LM")
        pm = get_peft_model(model, cfg).eval()
        gen = torch.Generator().manual_seed(spec["seed"])
        with torch.no_grad():
            n_ad = 0
            for pname, p in pm.named_parameters():
                if "lora_A" in pname or "lora_B" in pname:
                    p.copy_(torch.empty(p.shape).normal_(0.0, spec["std"], generator=gen))
                    n_ad += 1
        out = os.path.join(args.out, name)
        os.makedirs(out, exist_ok=True)
        pm.save_pretrained(out)
        # save_pretrained writes a README.md model card; the fixture keeps only the adapter
        if os.path.exists(os.path.join(out, "README.md")):
            os.remove(os.path.join(out, "README.md"))
        gsel = torch.Generator().manual_seed(spec["seed"] + 1000)
        seqs, delta = [], 0.0
        for i in range(N_SEQ):
            ids = choose_sequence(pm, vocab, gsel, args.device)
            if ids is None:
                sys.exit(f"{name}: no sequence with wide margins")
            x = torch.tensor([ids], device=args.device)
            with torch.no_grad():
                lg = pm(input_ids=x).logits[0].float().cpu()
                with pm.disable_adapter():
                    lb = pm(input_ids=x).logits[0].float().cpu()
            delta = max(delta, float((lg - lb).abs().max()))
            fn = f"logits{i}.f32"
            lg.numpy().astype("<f4").tofile(os.path.join(out, fn))
            seqs.append({"input_ids": ids, "logits_file": fn})
        greedy, gmin = [], 1e9
        for plen in GREEDY_PROMPT_LENS:
            r = choose_greedy(pm, vocab, gsel, args.device, plen)
            if r is None:
                sys.exit(f"{name}: no greedy prompt with wide margins")
            greedy.append({"prompt_ids": r[0], "output_ids": r[1]})
            gmin = min(gmin, r[2])
        golden = {"name": name, "base": spec["base"], "torch_dtype": "float32", "vocab_size": vocab,
                  "sequences": seqs, "greedy": greedy,
                  "lora": {"r": spec["r"], "alpha": spec["alpha"], "rslora": spec["rslora"],
                           "targets": spec["targets"], "layers": spec.get("layers"), "tensors": n_ad},
                  "max_abs_delta_vs_base": delta, "min_top1_top2_margin": {"greedy": gmin},
                  "provenance": {"torch": torch.__version__, "peft": peft.__version__,
                                 "transformers": __import__("transformers").__version__,
                                 "device": torch.cuda.get_device_name() if args.device == "cuda" else "cpu",
                                 "script": "tools/oracle/make_lora_goldens.py"}}
        with open(os.path.join(out, "golden.json"), "w") as f:
            json.dump(golden, f, indent=1)
        log(f"{name}: {n_ad} adapter tensors, max |logit - base| {delta:.3f}, greedy margin {gmin:.3f}, "
            f"{time.time() - t0:.1f} s")


if __name__ == "__main__":
    main()
