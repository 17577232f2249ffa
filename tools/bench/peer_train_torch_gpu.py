#!/usr/bin/env python3
"""peer_train_torch_gpu.py - the PyTorch + PEFT peer of `hearth train --device cuda` (LoRA SFT on a GPU).

A Llama model built from a config with random weights (no download; the
Llama-3.1-8B shape by default: what tools/bench/make_llama_gguf.py writes for
hearth) in bfloat16 on the GPU, wrapped with PEFT's LoRA (rank --rank, alpha
2 x rank, the seven projections, dropout 0; PEFT keeps the adapter in float32
and casts its input), AdamW (0.9, 0.999, eps 1e-8), gradient clipped to norm
1, eager mode and sdpa attention: what a PEFT user on one GPU runs.

Each step takes --batch sequences of --seq random token ids, every token a
label; --micro 1 runs them one at a time with the gradient accumulated (the
schedule `hearth train` runs), --micro B as one [B, seq] batch. tok/s is
tokens of the step / the step's wall time (torch.cuda.synchronize at its
end), as hearth prints it; the median over the steps after the first. A
measurement, never a test.

  python3 tools/bench/peer_train_torch_gpu.py [--shape 8b] [--seq 512] [--batch 4] [--micro 1] [--steps 6]
"""
import argparse
import statistics
import sys
import time

SHAPES = {
    "8b": dict(hidden_size=4096, num_hidden_layers=32, num_attention_heads=32, num_key_value_heads=8,
               intermediate_size=14336, vocab_size=128256, rope_theta=500000.0, rms_norm_eps=1e-5),
    "1b": dict(hidden_size=2048, num_hidden_layers=16, num_attention_heads=32, num_key_value_heads=8,
               intermediate_size=8192, vocab_size=128256, rope_theta=500000.0, rms_norm_eps=1e-5),
}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--shape", default="8b", choices=sorted(SHAPES))
    ap.add_argument("--seq", type=int, default=512)
    ap.add_argument("--batch", type=int, default=4)
    ap.add_argument("--micro", type=int, default=1, help="sequences a forward (1: one at a time)")
    ap.add_argument("--steps", type=int, default=6)
    ap.add_argument("--rank", type=int, default=16)
    ap.add_argument("--lr", type=float, default=2e-4)
    a = ap.parse_args()

    import torch
    import torch.nn.functional as F
    import transformers
    import peft
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    cfg = LlamaConfig(**SHAPES[a.shape], max_position_embeddings=8192, tie_word_embeddings=False)
    cfg._attn_implementation = "sdpa"
    t0 = time.perf_counter()
    with torch.device("cuda"):
        model = LlamaForCausalLM(cfg).to(torch.bfloat16)
    lcfg = peft.LoraConfig(r=a.rank, lora_alpha=2 * a.rank, lora_dropout=0.0, bias="none", task_type="CAUSAL_LM",
                           target_modules=["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj",
                                           "down_proj"])
    model = peft.get_peft_model(model, lcfg)
    model.train()
    params = [p for p in model.parameters() if p.requires_grad]
    opt = torch.optim.AdamW(params, lr=a.lr, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.0)
    print(f"peer_train_torch_gpu: torch {torch.__version__}, transformers {transformers.__version__}, "
          f"peft {peft.__version__}; {torch.cuda.get_device_name()}; shape {a.shape} bf16, built in "
          f"{time.perf_counter() - t0:.1f} s; {sum(p.numel() for p in params)} trainable parameters "
          f"({params[0].dtype}); {a.batch} x {a.seq} tokens a step, {a.micro} a forward", flush=True)

    g = torch.Generator(device="cuda").manual_seed(1)
    rates = []
    for s in range(a.steps):
        x = torch.randint(0, cfg.vocab_size, (a.batch, a.seq), device="cuda", generator=g)
        torch.cuda.synchronize()
        ts = time.perf_counter()
        opt.zero_grad(set_to_none=True)
        loss_sum = 0.0
        for i in range(0, a.batch, a.micro):
            xb = x[i:i + a.micro]
            logits = model(input_ids=xb, use_cache=False).logits[:, :-1]
            ce = F.cross_entropy(logits.float().reshape(-1, cfg.vocab_size), xb[:, 1:].reshape(-1),
                                 reduction="sum")
            (ce / (a.batch * (a.seq - 1))).backward()
            loss_sum += ce.item()
        norm = torch.nn.utils.clip_grad_norm_(params, 1.0).item()
        opt.step()
        torch.cuda.synchronize()
        dt = time.perf_counter() - ts
        if s:
            rates.append(a.batch * a.seq / dt)
        print(f"step {s + 1}/{a.steps} | loss {loss_sum / (a.batch * (a.seq - 1)):.4f} | grad norm {norm:.3f} | "
              f"{dt:.2f} s | {a.batch * a.seq / dt:.0f} tok/s", flush=True)
    print(f"peer_train_torch_gpu: median {statistics.median(rates):.0f} tok/s over steps 2-{a.steps}; "
          f"peak memory {torch.cuda.max_memory_allocated() / 2**30:.1f} GiB", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
