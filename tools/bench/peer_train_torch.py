#!/usr/bin/env python3
"""peer_train_torch.py - the PyTorch + PEFT peer of `hearth train` (LoRA SFT on the CPU).

Loads the GGUF model with transformers' GGUF support (dequantized to float32:
the dense PyTorch equivalent of what hearth trains on), wraps it with PEFT's
LoRA (r 8, alpha 16, the seven projections q,k,v,o,gate,up,down, dropout 0,
no bias) and trains as `hearth train` does by default:
  - the same JSONL of {"messages": [...]} examples, rendered with the model's
    chat template; the labels are the assistant turn's tokens (everything
    after the prompt rendered with add_generation_prompt=True), cut to --max-len;
  - the same data order (hearth's seeded splitmix64 Fisher-Yates shuffle per
    epoch), --batch examples a step, each run alone at batch size 1 with no
    padding and its gradient accumulated; the loss is the summed
    cross-entropy over the step's labels / the step's label count;
  - AdamW (0.9, 0.999, eps 1e-8, no weight decay), lr --lr decayed linearly to
    0 over the steps, the gradient clipped to norm 1.
Eager mode (what a CPU PEFT user runs; no torch.compile). By default the LM
head is evaluated only on the rows that predict a label (logits_to_keep), as
hearth does; --full-logits evaluates it on every row, as a plain
`model(input_ids, labels=...)` would.

Each step prints its loss and tok/s computed as hearth computes it (tokens of
the step's examples / the step's wall time), and the end the median tok/s over
the steps after the first (warm-up). A measurement, never a test.

  python3 tools/bench/peer_train_torch.py [--model models/SmolLM2-135M-Instruct.Q4_1.gguf] --data FILE.jsonl
        [--steps N] [--batch 4] [--lr 2e-4] [--max-len 512] [--seed 0] [--threads T] [--time-limit S]
"""
import argparse
import json
import os
import statistics
import sys
import time

M64 = (1 << 64) - 1


def next_rand(state):
    """hearth's next_rand (splitmix64); state is a one-element list."""
    state[0] = (state[0] + 0x9E3779B97F4A7C15) & M64
    z = state[0]
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & M64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & M64
    return z ^ (z >> 31)


def batches(n, batch, steps, seed):
    """The example indices of each step, in hearth train's order."""
    rs = [(seed ^ 0x5EED) & M64]
    order, nxt = list(range(n)), n
    for _ in range(steps):
        idx = []
        for _ in range(batch):
            if nxt == n:
                order = list(range(n))
                for i in range(n - 1, 0, -1):
                    j = next_rand(rs) % (i + 1)
                    order[i], order[j] = order[j], order[i]
                nxt = 0
            idx.append(order[nxt])
            nxt += 1
        yield idx


def chat_template_of(path):
    """The GGUF's tokenizer.chat_template, in case the tokenizer came without one."""
    import gguf
    f = gguf.GGUFReader(path).fields.get("tokenizer.chat_template")
    return bytes(f.parts[f.data[0]]).decode("utf-8") if f else None


def encode(tok, messages, max_len):
    """(ids, p): the conversation's tokens and where its labels (the last assistant turn) begin."""
    if messages[-1]["role"] != "assistant":
        raise ValueError("the last message must be the assistant's")
    full = tok.apply_chat_template(messages, tokenize=False)
    prompt = tok.apply_chat_template(messages[:-1], tokenize=False, add_generation_prompt=True)
    if not full.startswith(prompt):
        raise ValueError("the chat template renders the prompt otherwise than it begins the conversation")
    # Tokenized as two pieces, as hearth does (its pieces end at the turn's boundary).
    p_ids = tok(prompt, add_special_tokens=False)["input_ids"]
    a_ids = tok(full[len(prompt):], add_special_tokens=False)["input_ids"]
    ids = (p_ids + a_ids)[:max_len]
    return ids, len(p_ids)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", default="models/SmolLM2-135M-Instruct.Q4_1.gguf")
    ap.add_argument("--data", required=True)
    ap.add_argument("--steps", type=int, default=0, help="default: one epoch")
    ap.add_argument("--batch", type=int, default=4)
    ap.add_argument("--lr", type=float, default=2e-4)
    ap.add_argument("--max-len", type=int, default=512)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--threads", type=int, default=0, help="torch.set_num_threads (default: torch's)")
    ap.add_argument("--rank", type=int, default=8)
    ap.add_argument("--alpha", type=float, default=16)
    ap.add_argument("--full-logits", action="store_true", help="the LM head on every row, not only the labelled")
    ap.add_argument("--time-limit", type=float, default=0,
                    help="stop after the step that takes the training past S seconds (0 = off)")
    a = ap.parse_args()

    t_start = time.perf_counter()
    import torch
    import torch.nn.functional as F
    import transformers
    import peft
    from transformers import AutoModelForCausalLM, AutoTokenizer

    if a.threads:
        torch.set_num_threads(a.threads)
    torch.manual_seed(a.seed)
    d, name = os.path.split(os.path.abspath(a.model))
    t0 = time.perf_counter()
    tok = AutoTokenizer.from_pretrained(d, gguf_file=name)
    if not tok.chat_template:
        tok.chat_template = chat_template_of(a.model)
    model = AutoModelForCausalLM.from_pretrained(d, gguf_file=name, dtype=torch.float32)
    t_load = time.perf_counter() - t0
    alpha = int(a.alpha) if float(a.alpha).is_integer() else a.alpha
    cfg = peft.LoraConfig(r=a.rank, lora_alpha=alpha, lora_dropout=0.0, bias="none", task_type="CAUSAL_LM",
                          target_modules=["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj",
                                          "down_proj"])
    model = peft.get_peft_model(model, cfg)
    model.train()  # dropout is 0 in the LoRA config and the model's attention anyway
    params = [p for p in model.parameters() if p.requires_grad]
    n_train = sum(p.numel() for p in params)
    opt = torch.optim.AdamW(params, lr=a.lr, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.0)

    exs = []
    with open(a.data, encoding="utf-8") as f:
        for line in f:
            if line.strip():
                exs.append(encode(tok, json.loads(line)["messages"], a.max_len))
    n_labels = sum(len(ids) - p for ids, p in exs)
    steps = a.steps or (len(exs) + a.batch - 1) // a.batch
    print(f"peer_train_torch: torch {torch.__version__}, transformers {transformers.__version__}, "
          f"peft {peft.__version__}; {torch.get_num_threads()} threads; model loaded (float32) in {t_load:.1f} s, "
          f"tied head {model.get_base_model().config.tie_word_embeddings}, attention "
          f"{model.get_base_model().config._attn_implementation}; {n_train} trainable parameters; "
          f"{len(exs)} examples ({n_labels} label tokens, {sum(len(i) for i, _ in exs)} in all); {'full' if a.full_logits else 'labelled-row'} logits",
          flush=True)

    rates, t_train = [], time.perf_counter()
    done = 0
    for s, idx in enumerate(batches(len(exs), a.batch, steps, a.seed)):
        ts = time.perf_counter()
        labels = sum(len(exs[i][0]) - exs[i][1] for i in idx)
        tokens = sum(len(exs[i][0]) for i in idx)
        opt.zero_grad(set_to_none=True)
        loss_sum = 0.0
        for i in idx:
            ids, p = exs[i]
            x = torch.tensor([ids])
            tgt = x[0, p:]
            if a.full_logits:
                logits = model(input_ids=x, use_cache=False).logits[0, p - 1:-1]
            else:  # the rows p-1 .. n-2 predict the labels p .. n-1
                logits = model(input_ids=x, use_cache=False, logits_to_keep=len(ids) - p + 1).logits[0, :-1]
            ce = F.cross_entropy(logits.float(), tgt, reduction="sum")
            (ce / labels).backward()
            loss_sum += ce.item()
        norm = torch.nn.utils.clip_grad_norm_(params, 1.0).item()
        lr = a.lr * (1.0 - s / steps)
        for g in opt.param_groups:
            g["lr"] = lr
        opt.step()
        dt = time.perf_counter() - ts
        done = s + 1
        if s:
            rates.append(tokens / dt)
        print(f"step {s + 1}/{steps} | loss {loss_sum / labels:.4f} | grad norm {norm:.3f} | lr {lr:.2e} | "
              f"{dt:.2f} s | {tokens / dt:.0f} tok/s", flush=True)
        if a.time_limit and time.perf_counter() - t_train > a.time_limit and s + 1 < steps:
            print(f"peer_train_torch: --time-limit {a.time_limit:g} s reached after step {s + 1}", flush=True)
            break
    med = statistics.median(rates) if rates else float("nan")
    print(f"peer_train_torch: {done} steps in {time.perf_counter() - t_train:.1f} s "
          f"({time.perf_counter() - t_start:.1f} s with imports and loading); "
          f"median {med:.0f} tok/s over steps 2-{done}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
