#!/usr/bin/env python3
"""make_pref_goldens.py - a few steps of LoRA preference training (DPO, ORPO) with
PyTorch + PEFT on the tiny HF models, recorded for the C trainer's tests. The
sibling of make_train_goldens.py (SFT), whose helpers it imports: the same model
loading (float32, eager attention, CPU), LoRA setup, seeded A/B init, optimizer,
adapter saving and reload check.

TRL is not needed (nor used): its losses are re-implemented below, term by term,
from TRL's source (see "Formulas"). Per case:

  tests/fixtures/pref/<case>/
    init/               adapter_config.json, adapter_model.safetensors (before step 0)
    final/              adapter_config.json, adapter_model.safetensors (after step 2)
    grads0.safetensors  d loss / d param at step 0, float32, under the adapter file's names
    golden.json

Data: 4 preference pairs from torch.Generator().manual_seed(seed + 1000); pair i
draws, in this order, prompt, chosen response and rejected response ids, each
torch.randint(0, vocab_size, (len,)), with prompt lengths 9, 14, 6, 20, chosen
lengths 7, 12, 5, 9, rejected lengths 11, 4, 8, 6.
chosen_i = prompt + chosen response, rejected_i = prompt + rejected response;
labels 0 on the prompt's positions, 1 on the response's (labels[0] is always 0).

Per sequence (run alone: batch size 1, no padding, positions 0..n-1, float32;
logits[i] predicts tokens[i+1]):
  lp[i]     = log_softmax(logits[i-1])[tokens[i]]          (i = 1..n-1)
  logp_sum  = sum of lp[i] where labels[i] == 1;  n_labels = that count
  logp_avg  = logp_sum / n_labels

Formulas (P = the step's pairs; beta per case):
  dpo  - TRL DPOTrainer, loss_type "sigmoid", label_smoothing 0, PEFT model without
         ref_model: the reference is the same model with the adapter disabled
         (`with torch.no_grad(), model.disable_adapter():`), recomputed every step.
         Sources: trl/trainer/dpo_trainer.py, DPOTrainer.dpo_loss (loss_type
         "sigmoid": logits = (chosen_logps - rejected_logps) - (ref_chosen_logps -
         ref_rejected_logps); losses = -F.logsigmoid(beta * logits) * (1 -
         label_smoothing) - F.logsigmoid(-beta * logits) * label_smoothing;
         chosen_rewards = beta * (chosen_logps - ref_chosen_logps)), the newer
         DPOTrainer.compute_loss (chosen_logratios = chosen_logps - ref_chosen_logps,
         per_sequence_loss = -F.logsigmoid(beta * (chosen_logratios -
         rejected_logratios)), loss = per_sequence_loss.mean(); reference under
         torch.no_grad() and model.disable_adapter() when is_peft_model(model)),
         logps = per-token logps summed over the completion mask
         (concatenated_forward / _get_batch_logps with average_log_prob=False), and
         "rewards/accuracies" = (chosen_rewards > rejected_rewards).float().mean().
           z_p  = beta * ((logp_sum(c_p) - ref_logp_sum(c_p)) - (logp_sum(r_p) - ref_logp_sum(r_p)))
           loss = mean over P of -logsigmoid(z_p);  accuracy = fraction of P with z_p > 0
  orpo - TRL ORPOTrainer (trl/trainer/orpo_trainer.py, now
         trl/experimental/orpo/orpo_trainer.py): odds_ratio_loss, concatenated_forward,
         get_batch_logps(average_log_prob=True), get_batch_loss_metrics
         ("loss = policy_nll_loss - losses.mean()"), log1mexp.
           avg_x    = logp_avg(x)   (per-token average over the response labels)
           log_odds = (avg_c - avg_r) - (log1mexp(avg_c) - log1mexp(avg_r)),
                      log1mexp(x) = log(1 - exp(x)) (TRL: log1p(-exp(x)) for x < -ln 2,
                      log(-expm1(x)) otherwise; older TRL: log1p(-exp(x)) throughout)
           nll      = nn.CrossEntropyLoss() (mean) over the chosen sequences of P, where
                      TRL's labels are the chosen *input_ids* (attention mask only):
                      "orpo chosen nll loss is computed over the full prompt and
                      response". So: every position 1..n-1 of each chosen sequence,
                      prompt included, NOT only the response labels:
                      nll = sum over P of sum_{i=1..n_c-1} -lp_c[i] / sum over P of (n_c - 1)
           loss     = nll - mean over P of beta * logsigmoid(log_odds)

Optimizer and steps as in make_train_goldens.py: torch.optim.AdamW over the LoRA
params only (lr 1e-2, betas (0.9, 0.999), eps 1e-8, weight_decay 0.01, foreach and
fused off, one group), batches [[0, 1, 2, 3], [2, 0], [1, 3]]; per step: the loss,
one backward, one step, zero_grad. losses[k] is step k's loss before its update.

golden.json: "method", "model" ("tiny/<model>", relative to tests/fixtures), "r",
"lora_alpha", "use_rslora", "target_modules" (sorted), "beta", "lr", "betas", "eps",
"weight_decay", "pairs" [{"chosen": {"tokens", "labels"}, "rejected": {...}} x4],
"batches", "losses", "accuracies" (dpo), "step_details" (per step: per pair the
chosen and rejected logp_sum / n_labels / logp_avg, dpo: ref_logp_sum and z, orpo:
log_odds and the chosen NLL over all positions; per step dpo: accuracy, orpo: nll
and the odds-ratio term), "torch", "transformers", "peft", and extras ("scaling",
"vocab_size", "init", "loss_after" (batch [0, 1, 2, 3] after training; for dpo
against the same reference), "checks", "formulas", "trl_sources").

Checks (printed; a failure exits non-zero; the loss trend and a saturated step only warn): every step-0
gradient tensor is non-zero and grads0's names are the adapter file's; dpo: the
disabled-adapter reference differs from the policy at step 0 (logits and logp sums),
equals a freshly loaded base model, leaves the adapter enabled afterwards, and its
logp sums are the same at every step; init/ and final/ reloaded with
PeftModel.from_pretrained on a fresh base give the in-memory logits.

Run from the repository root on a machine with torch + transformers (no GPU is
used, no network is needed; PEFT from .dev/wheels if not installed):
  python3 tools/oracle/make_pref_goldens.py [--out DIR] [--cases llama3-dpo,qwen2-orpo]
(--out defaults to tests/fixtures; the fixtures go to <out>/pref/<case>/.)
"""
import os
import sys
import time

import torch
import torch.nn.functional as F
import transformers

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from make_train_goldens import (ALL, BETAS, EPS, INIT_STD, LR, WEIGHT_DECAY, all_logits,  # noqa: E402
                                cli_main, fail, forward_logits, load_base, log,
                                max_diff, reload_check, save_adapter, write_golden)

PROMPT_LENS = (9, 14, 6, 20)
CHOSEN_LENS = (7, 12, 5, 9)
REJECTED_LENS = (11, 4, 8, 6)
BATCHES = [[0, 1, 2, 3], [2, 0], [1, 3]]
LABEL_SMOOTHING = 0.0        # dpo
REF_DIFF_MIN = 1e-3          # dpo: the reference's logits must differ from the policy's by more than this
SATURATED = 1e-4            # a step's loss below this only warns (the golden then tests that step weakly)
REF_BASE_TOL = 1e-5          # dpo: disabled adapter vs a fresh base model (same CPU: expect 0)

CASES = {
    "llama3-dpo": dict(method="dpo", model="llama3-f32", seed=101, r=4, alpha=8, targets=ALL, rslora=False,
                       beta=0.5, lr=1e-3, std=0.02),  # lr and init small enough that no step saturates
    "qwen2-orpo": dict(method="orpo", model="qwen2-f32", seed=102, r=4, alpha=4, targets=ALL, rslora=True,
                       beta=0.2),
}

TRL_SOURCES = {
    "dpo": ["trl/trainer/dpo_trainer.py: DPOTrainer.dpo_loss (loss_type 'sigmoid', label_smoothing)",
            "trl/trainer/dpo_trainer.py: DPOTrainer.compute_loss (newer: chosen_logratios, "
            "per_sequence_loss.mean(), disable_adapter reference, rewards/accuracies)",
            "trl/trainer/dpo_trainer.py: DPOTrainer.concatenated_forward / _get_batch_logps "
            "(sum over completion tokens)"],
    "orpo": ["trl/trainer/orpo_trainer.py (now trl/experimental/orpo/orpo_trainer.py): "
             "ORPOTrainer.odds_ratio_loss, log1mexp",
             "ORPOTrainer.concatenated_forward (chosen_nll_loss: nn.CrossEntropyLoss over the chosen "
             "input_ids, 'computed over the full prompt and response'; "
             "get_batch_logps(average_log_prob=True) over the response labels)",
             "ORPOTrainer.get_batch_loss_metrics: loss = policy_nll_loss - losses.mean()"],
}


def make_pairs(vocab, gen):
    pairs = []
    for lp, lc, lr in zip(PROMPT_LENS, CHOSEN_LENS, REJECTED_LENS):
        prompt = torch.randint(0, vocab, (lp,), generator=gen).tolist()
        chosen = torch.randint(0, vocab, (lc,), generator=gen).tolist()
        rejected = torch.randint(0, vocab, (lr,), generator=gen).tolist()
        pair = {}
        for key, resp in (("chosen", chosen), ("rejected", rejected)):
            pair[key] = {"tokens": prompt + resp, "labels": [0] * lp + [1] * len(resp)}
            assert pair[key]["labels"][0] == 0
        pairs.append(pair)
    return pairs


def flat(pairs):
    """[c0, r0, c1, r1, ...] for the reload/logit checks."""
    return [p[k] for p in pairs for k in ("chosen", "rejected")]


def token_logps(model, seq):
    """lp[i-1] = log_softmax(logits[i-1])[tokens[i]] for i = 1..n-1 (TRL: selective_log_softmax
    of the shifted logits), and the label mask over the same positions."""
    logits = forward_logits(model, seq["tokens"])
    tgt = torch.tensor(seq["tokens"][1:], dtype=torch.long)
    lp = logits[:-1].log_softmax(-1).gather(-1, tgt.unsqueeze(-1)).squeeze(-1)
    mask = torch.tensor(seq["labels"][1:], dtype=torch.float32)
    return logits, lp, mask


def seq_stats(model, seq):
    """logp_sum (tensor), n_labels, logits."""
    logits, lp, mask = token_logps(model, seq)
    return (lp * mask).sum(), int(mask.sum()), logits


def log1mexp(x):
    """log(1 - exp(x)), x < 0, as TRL's ORPO log1mexp (branch at -ln 2)."""
    t = -0.6931471805599453
    return torch.where(x < t, torch.log1p(-torch.exp(x.clamp_max(t))), torch.log(-torch.expm1(x)))


def dpo_step(pm, pairs, batch, beta):
    pol_c, pol_r, det = [], [], []
    for i in batch:
        for key, acc in (("chosen", pol_c), ("rejected", pol_r)):
            s, n, _ = seq_stats(pm, pairs[i][key])
            acc.append((s, n))
    # reference: the same model with the adapter disabled, no grad (TRL with a PEFT model and no ref_model)
    with torch.no_grad(), pm.disable_adapter():
        ref = [(seq_stats(pm, pairs[i]["chosen"])[0], seq_stats(pm, pairs[i]["rejected"])[0]) for i in batch]
    chosen_logps = torch.stack([s for s, _ in pol_c])
    rejected_logps = torch.stack([s for s, _ in pol_r])
    ref_chosen_logps = torch.stack([c for c, _ in ref])
    ref_rejected_logps = torch.stack([r for _, r in ref])
    chosen_logratios = chosen_logps - ref_chosen_logps
    rejected_logratios = rejected_logps - ref_rejected_logps
    logits = chosen_logratios - rejected_logratios
    losses = (-F.logsigmoid(beta * logits) * (1 - LABEL_SMOOTHING)
              - F.logsigmoid(-beta * logits) * LABEL_SMOOTHING)
    loss = losses.mean()
    chosen_rewards = beta * chosen_logratios.detach()
    rejected_rewards = beta * rejected_logratios.detach()
    accuracy = float((chosen_rewards > rejected_rewards).float().mean())
    z = (beta * logits).detach()
    for k, i in enumerate(batch):
        d = {"pair": i}
        for key, pol, rf in (("chosen", pol_c, ref_chosen_logps), ("rejected", pol_r, ref_rejected_logps)):
            s, n = pol[k]
            s = float(s.detach())
            d[key] = {"logp_sum": s, "n_labels": n, "logp_avg": s / n, "ref_logp_sum": float(rf[k])}
        d["z"] = float(z[k])
        det.append(d)
    return loss, {"batch": batch, "pairs": det, "accuracy": accuracy}


def orpo_step(pm, pairs, batch, beta):
    avg_c, avg_r, nll_logits, nll_tgts, det = [], [], [], [], []
    for i in batch:
        row = {"pair": i}
        for key, avg in (("chosen", avg_c), ("rejected", avg_r)):
            seq = pairs[i][key]
            logits, lp, mask = token_logps(pm, seq)
            s, n = (lp * mask).sum(), int(mask.sum())
            avg.append(s / n)          # TRL get_batch_logps(average_log_prob=True)
            row[key] = {"logp_sum": float(s.detach()), "n_labels": n, "logp_avg": float(s.detach()) / n}
            if key == "chosen":
                # TRL's NLL: labels = the chosen input_ids where attention_mask == 1 (prompt included)
                nll_logits.append(logits[:-1])
                nll_tgts.append(torch.tensor(seq["tokens"][1:], dtype=torch.long))
                row[key]["nll_sum_all_positions"] = float(-lp.detach().sum())
                row[key]["n_positions"] = len(seq["tokens"]) - 1
        det.append(row)
    nll = F.cross_entropy(torch.cat(nll_logits), torch.cat(nll_tgts), reduction="mean")
    chosen_logps, rejected_logps = torch.stack(avg_c).float(), torch.stack(avg_r).float()
    log_odds = (chosen_logps - rejected_logps) - (log1mexp(chosen_logps) - log1mexp(rejected_logps))
    ratio = F.logsigmoid(log_odds)
    losses = beta * ratio
    loss = nll - losses.mean()
    for k, row in enumerate(det):
        row["log_odds"] = float(log_odds[k].detach())
    return loss, {"batch": batch, "pairs": det, "nll": float(nll.detach()), "or_term": float(losses.detach().mean()),
                  "n_chosen_positions": sum(len(t) for t in nll_tgts)}


def run_case(name, spec, args, peft):
    from peft import LoraConfig, PeftModel, get_peft_model
    from peft.utils import get_peft_model_state_dict
    from safetensors.torch import load_file, save_file

    t0 = time.time()
    method, beta = spec["method"], spec["beta"]
    step_fn = dpo_step if method == "dpo" else orpo_step
    base_dir = os.path.join(args.tiny, spec["model"])
    out = os.path.join(args.out, "pref", name)
    init_dir, final_dir = os.path.join(out, "init"), os.path.join(out, "final")
    os.makedirs(out, exist_ok=True)
    log(f"{name}: {method}, beta {beta}, {base_dir} -> {out}")

    torch.manual_seed(spec["seed"])
    base = load_base(base_dir)
    vocab = base.config.vocab_size
    cfg = LoraConfig(r=spec["r"], lora_alpha=spec["alpha"], target_modules=spec["targets"], lora_dropout=0.0,
                     bias="none", use_rslora=spec["rslora"], init_lora_weights=False, task_type="CAUSAL_LM")
    pm = get_peft_model(base, cfg).eval()

    # A and B from a seeded generator, sorted parameter-name order (as make_train_goldens.py)
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
            p.copy_(torch.randn(p.shape, generator=gen) * spec.get("std", INIT_STD))
    params = [named[n] for n in lora_names]
    n_elems = sum(p.numel() for p in params)
    log(f"    {len(params)} LoRA tensors, {n_elems} parameters, vocab {vocab}")

    pairs = make_pairs(vocab, torch.Generator().manual_seed(spec["seed"] + 1000))
    seqs = flat(pairs)
    before = all_logits(pm, seqs)

    save_adapter(pm, init_dir)
    adapter_keys = sorted(load_file(os.path.join(init_dir, "adapter_model.safetensors")).keys())
    checks = {"reload_init_max_abs_diff": reload_check(PeftModel, base_dir, init_dir, seqs, before, "init")}

    if method == "dpo":
        with torch.no_grad(), pm.disable_adapter():
            ref_logits = all_logits(pm, seqs)
        again = all_logits(pm, seqs)
        d_pol_ref = max_diff(before, ref_logits)
        d_again = max_diff(before, again)
        d_base = max_diff(ref_logits, all_logits(load_base(base_dir), seqs))
        checks.update({"ref_vs_policy_max_abs_logit_diff": d_pol_ref, "ref_vs_fresh_base_max_abs_diff": d_base,
                       "policy_after_disable_adapter_max_abs_diff": d_again})
        log(f"    reference (adapter disabled): max |logit diff| vs policy {d_pol_ref:.3g}, "
            f"vs a fresh base {d_base:.3g}; policy afterwards vs before {d_again:.3g}")
        if not d_pol_ref > REF_DIFF_MIN:
            fail(f"the disabled-adapter reference does not differ from the policy (max diff {d_pol_ref})")
        if d_base > REF_BASE_TOL:
            fail(f"the disabled-adapter reference is not the base model (max diff {d_base})")
        if d_again > REF_BASE_TOL:
            fail(f"the adapter is not re-enabled after disable_adapter() (max diff {d_again})")

    opt = torch.optim.AdamW(params, lr=spec.get("lr", LR), betas=BETAS, eps=EPS, weight_decay=WEIGHT_DECAY,
                            amsgrad=False, foreach=False, fused=False)
    losses, accuracies, details = [], [], []
    ref_seen = {}
    for step, batch in enumerate(BATCHES):
        opt.zero_grad(set_to_none=True)
        loss, det = step_fn(pm, pairs, batch, beta)
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
            if method == "dpo":
                dl = max(max(abs(d[k]["logp_sum"] - d[k]["ref_logp_sum"]) for k in ("chosen", "rejected"))
                         for d in det["pairs"])
                checks["step0_max_abs_policy_minus_ref_logp_sum"] = dl
                log(f"    step 0: max |logp_sum - ref_logp_sum| {dl:.3g}")
                if not dl > REF_DIFF_MIN:
                    fail(f"policy and reference logp sums agree at step 0 (max diff {dl})")
        opt.step()
        losses.append(float(loss.detach()))
        details.append(det)
        extra = ""
        if method == "dpo":
            accuracies.append(det["accuracy"])
            extra = f", rewards accuracy {det['accuracy']:.2f}"
            for d in det["pairs"]:      # the reference is frozen: its logps must not move
                for k in ("chosen", "rejected"):
                    v = d[k]["ref_logp_sum"]
                    w = ref_seen.setdefault((d["pair"], k), v)
                    if abs(v - w) > 1e-6 * max(1.0, abs(w)):
                        fail(f"reference logp sum of pair {d['pair']} {k} moved: {w} -> {v}")
        else:
            extra = f", nll {det['nll']:.6f}, odds-ratio term {det['or_term']:.6f}"
        log(f"    step {step} batch {batch}: loss {losses[-1]:.6g}{extra}")
        if losses[-1] < SATURATED:
            log(f"    WARNING: step {step}'s loss is below {SATURATED:g} (saturated): its own gradient hardly "
                f"moves the update (AdamW's momentum from the earlier steps does)")
            checks.setdefault("saturated_steps", []).append(step)
    opt.zero_grad(set_to_none=True)

    with torch.no_grad():
        loss_after = float(step_fn(pm, pairs, BATCHES[0], beta)[0])
    log(f"    losses {['%.6f' % x for x in losses]}; batch {BATCHES[0]} before {losses[0]:.6f}, "
        f"after {loss_after:.6f}")
    if not loss_after < losses[0]:
        log("    WARNING: the loss did not decrease over the 3 steps")
    checks["loss_decreased"] = loss_after < losses[0]

    after = all_logits(pm, seqs)
    save_adapter(pm, final_dir)
    checks["reload_final_max_abs_diff"] = reload_check(PeftModel, base_dir, final_dir, seqs, after, "final")
    checks["max_abs_logit_change_from_training"] = max_diff(after, before)

    if method == "dpo":
        formulas = {"logp": "sum over response labels of log_softmax(logits[i-1])[tokens[i]]",
                    "z": "beta * ((logp(c) - ref_logp(c)) - (logp(r) - ref_logp(r)))",
                    "loss": "mean over the batch's pairs of -logsigmoid(z) (label_smoothing 0)",
                    "accuracy": "fraction of the batch's pairs with z > 0",
                    "reference": "the same model with the LoRA adapter disabled, no grad, every step"}
    else:
        formulas = {"logp_avg": "mean over response labels of log_softmax(logits[i-1])[tokens[i]]",
                    "log_odds": "(avg_c - avg_r) - (log1mexp(avg_c) - log1mexp(avg_r)), "
                                "log1mexp(x) = log(1 - exp(x))",
                    "nll": "mean cross-entropy over ALL positions 1..n-1 of the batch's chosen sequences "
                           "(prompt included, as TRL)",
                    "loss": "nll - mean over the batch's pairs of beta * logsigmoid(log_odds)"}
    golden = {"method": method, "model": f"tiny/{spec['model']}", "r": spec["r"], "lora_alpha": spec["alpha"],
              "use_rslora": spec["rslora"], "target_modules": sorted(spec["targets"]), "beta": beta,
              "lr": spec.get("lr", LR), "betas": list(BETAS), "eps": EPS, "weight_decay": WEIGHT_DECAY,
              "pairs": pairs, "batches": BATCHES, "losses": losses}
    if method == "dpo":
        golden["accuracies"] = accuracies
        golden["loss_type"] = "sigmoid"
        golden["label_smoothing"] = LABEL_SMOOTHING
    golden.update({"step_details": details,
                   "torch": torch.__version__, "transformers": transformers.__version__, "peft": peft.__version__,
                   "name": name, "vocab_size": vocab,
                   "scaling": spec["alpha"] / (spec["r"] ** 0.5 if spec["rslora"] else spec["r"]),
                   "init": {"seed": spec["seed"], "std": spec.get("std", INIT_STD), "order": "sorted parameter names",
                            "tensors": len(params), "parameters": n_elems},
                   "data": {"seed": spec["seed"] + 1000, "prompt_lens": list(PROMPT_LENS),
                            "chosen_lens": list(CHOSEN_LENS), "rejected_lens": list(REJECTED_LENS),
                            "draw_order": "per pair: prompt, chosen, rejected; torch.randint(0, vocab_size)"},
                   "optimizer": "torch.optim.AdamW(foreach=False, fused=False, amsgrad=False), one group",
                   "formulas": formulas, "trl_sources": TRL_SOURCES[method],
                   "loss_after": loss_after, "checks": checks,
                   "device": "cpu", "dtype": "float32", "attn_implementation": "eager",
                   "script": "tools/oracle/make_pref_goldens.py"})
    write_golden(out, golden, name, t0)


def main():
    cli_main(CASES, run_case, "pref")


if __name__ == "__main__":
    main()
