#!/usr/bin/env python3
"""peer_torch.py - the PyTorch + transformers peer for hearth's CUDA benchmarks.

Builds the Llama-3.1-8B-shaped model (hidden 4096, 32 layers, 32/8 heads,
FFN 14336, vocab 128256) with random bf16 weights directly on the GPU (no
download), then measures, as bench_model does for hearth:
  - prefill tok/s at the given lengths (one forward, logits of the last row);
  - decode tok/s at batch 1 (or --batch B prompts of the same length) after
    a 512-token prompt, greedy, with a static KV cache: a step is (time of
    prompt + N tokens - time of prompt + 1 token) / (N - 1), B tokens a step;
    --compile adds torch.compile(mode="reduce-overhead") of the forward, as
    the issue's anchor figure did.
A measurement, never a test.

  python3 tools/bench/peer_torch.py [--prefill 512,2048] [--prompt 512] [--gen 128] [--reps 3] [--compile]
                                    [--batch B]
"""
import argparse
import time

import torch
from transformers import LlamaConfig, LlamaForCausalLM


def config():
    return LlamaConfig(hidden_size=4096, intermediate_size=14336, num_hidden_layers=32,
                       num_attention_heads=32, num_key_value_heads=8, vocab_size=128256,
                       max_position_embeddings=8192, rope_theta=500000.0, rms_norm_eps=1e-5,
                       tie_word_embeddings=False)


def timed(fn, reps):
    best = []
    for _ in range(reps):
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        fn()
        torch.cuda.synchronize()
        best.append(time.perf_counter() - t0)
    best.sort()
    return best[len(best) // 2]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--prefill", default="512,2048")
    ap.add_argument("--prompt", type=int, default=512)
    ap.add_argument("--gen", type=int, default=128)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--compile", action="store_true")
    ap.add_argument("--batch", type=int, default=1)
    a = ap.parse_args()

    import transformers
    torch.manual_seed(0)
    torch.set_default_dtype(torch.bfloat16)
    t0 = time.perf_counter()
    with torch.device("cuda"):
        model = LlamaForCausalLM(config())
    model.eval()
    print(f"torch {torch.__version__}, transformers {transformers.__version__}, {torch.cuda.get_device_name()}; "
          f"model built in {time.perf_counter() - t0:.1f} s, attention {model.config._attn_implementation}")

    vocab = model.config.vocab_size
    with torch.inference_mode():
        for P in [int(x) for x in a.prefill.split(",") if x]:
            ids = torch.randint(0, vocab, (1, P), device="cuda")
            fwd = lambda: model(ids, use_cache=False, logits_to_keep=1)
            fwd()
            s = timed(fwd, a.reps)
            print(f"peer prefill {P}: {s * 1e3:.2f} ms  {P / s:.0f} tok/s")

        if a.compile:
            model.forward = torch.compile(model.forward, mode="reduce-overhead", fullgraph=True)
        ids = torch.randint(0, vocab, (a.batch, a.prompt), device="cuda")

        def gen(n):
            return model.generate(ids, max_new_tokens=n, min_new_tokens=n, do_sample=False,
                                  cache_implementation="static", pad_token_id=0)

        gen(a.gen)  # warm-up (and compilation)
        gen(a.gen)
        t_one = timed(lambda: gen(1), a.reps)
        t_all = timed(lambda: gen(a.gen), a.reps)
        per = (t_all - t_one) / (a.gen - 1)
        print(f"peer decode (batch {a.batch}, after {a.prompt} prompt tokens{', torch.compile' if a.compile else ''}): "
              f"{per * 1e3:.3f} ms/step  {a.batch / per:.1f} tok/s")


if __name__ == "__main__":
    main()
