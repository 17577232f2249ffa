#!/usr/bin/env python3
"""make_lora_adapter.py - a random LoRA adapter in PEFT's file layout
(adapter_config.json + adapter_model.safetensors, F32) for a llama-shaped model:
what `hearth serve --lora` / `hearth bench --lora` read, for benchmarks and the
end-to-end tests (tests/e2e/test_lora.py). numpy only.

  make_lora_adapter.py DIR --hidden 4096 --layers 32 --heads 32 --kv-heads 8 --head-dim 128 --ffn 14336 --rank 16
"""
import argparse
import json
import pathlib
import struct

import numpy as np

MODULES = ("self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj", "self_attn.o_proj", "mlp.gate_proj",
           "mlp.up_proj", "mlp.down_proj")


def llama_shapes(hidden, heads, kv_heads, head_dim, ffn):
    """(out, in) of each projection."""
    qd, kvd = heads * head_dim, kv_heads * head_dim
    return {"self_attn.q_proj": (qd, hidden), "self_attn.k_proj": (kvd, hidden), "self_attn.v_proj": (kvd, hidden),
            "self_attn.o_proj": (hidden, qd), "mlp.gate_proj": (ffn, hidden), "mlp.up_proj": (ffn, hidden),
            "mlp.down_proj": (hidden, ffn)}


def write_adapter(d, shapes, layers, seed, r=8, alpha=16, std=0.03, extra=None):
    """Write the adapter to directory d (created); shapes: module -> (out, in). Returns d."""
    d = pathlib.Path(d)
    d.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(seed)
    header, off, blobs = {}, 0, []
    for layer in range(layers):
        for mod, (out, inp) in sorted(shapes.items()):
            key = f"base_model.model.model.layers.{layer}.{mod}"
            for name, shape in (("lora_A", (r, inp)), ("lora_B", (out, r))):
                b = rng.normal(0, std, shape).astype("<f4").tobytes()
                header[f"{key}.{name}.weight"] = {"dtype": "F32", "shape": list(shape),
                                                  "data_offsets": [off, off + len(b)]}
                off += len(b)
                blobs.append(b)
    h = json.dumps(header).encode()
    h += b" " * (-len(h) % 8)
    with open(d / "adapter_model.safetensors", "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h)
        for b in blobs:
            f.write(b)
    cfg = {"peft_type": "LORA", "r": r, "lora_alpha": alpha, "target_modules": [m.split(".")[1] for m in shapes],
           "bias": "none", "use_rslora": False, "use_dora": False, "task_type": "CAUSAL_LM"}
    cfg.update(extra or {})
    (d / "adapter_config.json").write_text(json.dumps(cfg))
    return d


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("dir")
    for k, v in (("hidden", 4096), ("layers", 32), ("heads", 32), ("kv-heads", 8), ("head-dim", 128),
                 ("ffn", 14336), ("rank", 16), ("alpha", 32), ("seed", 1)):
        ap.add_argument("--" + k, type=int, default=v)
    a = ap.parse_args()
    write_adapter(a.dir, llama_shapes(a.hidden, a.heads, a.kv_heads, a.head_dim, a.ffn), a.layers, a.seed,
                  r=a.rank, alpha=a.alpha, std=0.01)


if __name__ == "__main__":
    main()
