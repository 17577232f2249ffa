#!/usr/bin/env python3
"""make_llama_gguf.py - write a random-weight llama GGUF of a given shape.

For benchmarks: the default shape is Llama-3.1-8B's (hidden 4096, 32 layers,
32 heads, 8 KV heads, FFN 14336, vocab 128256). Run it where the model is
used (16 GB in bf16: never copy it around):

    python3 tools/bench/make_llama_gguf.py OUT.gguf --type bf16|f16|q8_0|q4_0|q4_K|q4_K_M|q5_K|q5_K_M|q3_K_M...
                                          [--output-type q6_K] [--layers 32] ...

q4_K_M mixes types as llama.cpp's Q4_K_M does for llama: Q4_K everywhere but
attn_v and ffn_down in Q6_K in the layers llama.cpp gives more bits (the
first and last eighth, and every third between), and a Q6_K output; q5_K_M
the same with Q5_K. q3_K_M as llama.cpp's Q3_K_M for llama: Q3_K but
attn_v in Q5_K in the first two layers and Q4_K after them, attn_output in
Q4_K, ffn_down in Q5_K in the first sixteenth and Q4_K after, a Q6_K output.

Weights are random but valid: float types hold N(0, 0.02) values; quantized
blocks hold random codes under an f16 scale of the size ggml's quantizer
would give those values. To write 16 GB quickly, one 64 MiB tile of random
rows per type is generated and repeated through every tensor (the tensors
still lie at distinct addresses, so no cache sees the repetition). Norm
weights are 1. Only numpy is needed; the GGUF layout (v3, little-endian,
32-byte alignment) is written here byte by byte.
"""
import argparse
import struct
import sys

import numpy as np

GGUF_MAGIC = 0x46554747
T_F32, T_F16, T_Q4_0, T_Q5_0, T_Q5_1, T_Q8_0, T_Q2_K, T_Q3_K = 0, 1, 2, 6, 7, 8, 10, 11
T_Q4_K, T_Q5_K, T_Q6_K, T_IQ4_NL, T_IQ4_XS, T_BF16 = 12, 13, 14, 20, 23, 30
TYPES = {"f32": T_F32, "f16": T_F16, "bf16": T_BF16, "q4_0": T_Q4_0, "q5_0": T_Q5_0, "q5_1": T_Q5_1, "q8_0": T_Q8_0,
         "q2_K": T_Q2_K, "q3_K": T_Q3_K, "q4_K": T_Q4_K, "q5_K": T_Q5_K, "q6_K": T_Q6_K, "iq4_nl": T_IQ4_NL,
         "iq4_xs": T_IQ4_XS}
BLOCK = {T_F32: (1, 4), T_F16: (1, 2), T_BF16: (1, 2), T_Q4_0: (32, 18), T_Q5_0: (32, 22), T_Q5_1: (32, 24),
         T_Q8_0: (32, 34), T_Q2_K: (256, 84), T_Q3_K: (256, 110), T_Q4_K: (256, 144), T_Q5_K: (256, 176),
         T_Q6_K: (256, 210), T_IQ4_NL: (32, 18), T_IQ4_XS: (256, 136)}
V_I32, V_U32, V_F32, V_STR, V_ARR = 5, 4, 6, 8, 9
ALIGN = 32
TILE = 64 << 20


def row_bytes(t, n):
    blk, bb = BLOCK[t]
    assert n % blk == 0, (t, n)
    return n // blk * bb


def f16_bits(x):
    return np.asarray(x, dtype=np.float16).view(np.uint16)


def make_tile(t, cols, rng, std=0.02, tile=TILE):
    """About `tile` bytes of whole rows of type t with `cols` columns."""
    rb = row_bytes(t, cols)
    rows = max(1, tile // rb)
    if t in (T_F32, T_F16, T_BF16):
        v = rng.standard_normal((rows, cols), dtype=np.float32) * std
        if t == T_F32:
            return v.tobytes()
        if t == T_F16:
            return v.astype(np.float16).tobytes()
        u = v.view(np.uint32)
        return ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16).tobytes()
    nb = rows * cols // BLOCK[t][0]
    blk = np.empty((nb, BLOCK[t][1]), dtype=np.uint8)
    # scales: |w| of N(0, 0.02) reaches ~0.05 in a block of 32 (~0.07 in 256)
    scale_amax = {T_IQ4_NL: 0.05 / 127, T_IQ4_XS: 0.07 / 127 / 31, T_Q2_K: 0.07 / 3 / 15, T_Q3_K: 0.07 / 4 / 32,
                  T_Q4_0: 0.05 / 8, T_Q5_0: 0.05 / 16, T_Q5_1: 0.1 / 31, T_Q8_0: 0.05 / 127, T_Q4_K: 0.07 / 15 / 63, T_Q5_K: 0.07 / 31 / 63,
                  T_Q6_K: 0.07 / 32 / 127}[t]
    d = f16_bits(scale_amax * (0.75 + 0.5 * rng.random(nb, dtype=np.float32))).view(np.uint8).reshape(nb, 2)
    codes = rng.integers(0, 256, size=(nb, BLOCK[t][1]), dtype=np.uint8)
    if t in (T_Q4_0, T_Q5_0, T_IQ4_NL, T_IQ4_XS):  # d first, then codes (iq4_xs: its scales among them)
        blk[:, 0:2] = d
        blk[:, 2:] = codes[:, 2:]
    elif t == T_Q5_1:  # d, m = -16 d (about zero-centred), qh[4], qs[16]
        blk[:, 0:2] = d
        blk[:, 2:4] = f16_bits(-16 * scale_amax * (0.75 + 0.5 * rng.random(nb, dtype=np.float32))).view(
            np.uint8).reshape(nb, 2)
        blk[:, 4:] = codes[:, 4:]
    elif t == T_Q8_0:
        blk[:, 0:2] = d
        blk[:, 2:] = codes[:, 2:]
    elif t == T_Q2_K:  # scales[16] (4-bit scale | 4-bit min), qs[64], d, dmin
        blk[:, :80] = codes[:, :80]
        blk[:, 80:82] = d
        blk[:, 82:84] = d
    elif t == T_Q3_K:  # hmask[32], qs[64], scales[12], d
        blk[:, :108] = codes[:, :108]
        blk[:, 108:110] = d
    elif t in (T_Q4_K, T_Q5_K):  # d, dmin, 6-bit scales and mins packed in 12 bytes, (q5_K: qh[32]) qs[128]
        blk[:, 0:2] = d
        blk[:, 2:4] = d  # dmin: w = d * sc * q - dmin * m, about zero-centred
        blk[:, 4:] = codes[:, 4:]
    else:  # q6_K: ql[128] qh[64] scales int8[16] d
        blk[:, :192] = codes[:, :192]
        blk[:, 192:208] = rng.integers(64, 128, size=(nb, 16), dtype=np.uint8)  # positive int8 scales
        blk[:, 208:210] = d
    return blk.tobytes()


class Writer:
    def __init__(self):
        self.kv = []
        self.tensors = []  # (name, dims(ne0 first), type)

    def add_u32(self, k, v):
        self.kv.append((k, V_U32, struct.pack("<I", v)))

    def add_f32(self, k, v):
        self.kv.append((k, V_F32, struct.pack("<f", v)))

    def add_str(self, k, s):
        b = s.encode()
        self.kv.append((k, V_STR, struct.pack("<Q", len(b)) + b))

    def add_arr(self, k, vt, items):
        """An array of u32 / i32 / f32 (items: numbers) or strings."""
        if vt == V_STR:
            body = b"".join(struct.pack("<Q", len(b)) + b for b in (x.encode() for x in items))
        else:
            body = np.asarray(items, dtype={V_U32: "<u4", V_I32: "<i4", V_F32: "<f4"}[vt]).tobytes()
        self.kv.append((k, V_ARR, struct.pack("<IQ", vt, len(items)) + body))

    def add_tensor(self, name, dims, t):
        self.tensors.append((name, dims, t))

    def write(self, path, fill):
        with open(path, "wb") as f:
            f.write(struct.pack("<IIQQ", GGUF_MAGIC, 3, len(self.tensors), len(self.kv)))
            for k, vt, vb in self.kv:
                kb = k.encode()
                f.write(struct.pack("<Q", len(kb)) + kb + struct.pack("<I", vt) + vb)
            off = 0
            sizes = []
            for name, dims, t in self.tensors:
                nb = name.encode()
                n = row_bytes(t, dims[0]) * (int(np.prod(dims[1:])) if len(dims) > 1 else 1)
                sizes.append(n)
                f.write(struct.pack("<Q", len(nb)) + nb + struct.pack("<I", len(dims)))
                f.write(struct.pack("<%dQ" % len(dims), *dims) + struct.pack("<IQ", t, off))
                off += (n + ALIGN - 1) // ALIGN * ALIGN
            f.write(b"\0" * ((-f.tell()) % ALIGN))
            for (name, dims, t), n in zip(self.tensors, sizes):
                fill(f, name, dims, t, n)
                f.write(b"\0" * ((-n) % ALIGN))


def add_vocab(w, n):
    """A placeholder SentencePiece vocabulary of n pieces (see the docstring)."""
    assert n >= 259, "the vocabulary needs room for <unk>, <s>, </s> and 256 byte pieces"
    toks = ["<unk>", "<s>", "</s>"] + ["<0x%02X>" % b for b in range(256)]
    toks += ["\u2581t%d" % i for i in range(len(toks), n)]
    types = [2, 3, 3] + [6] * 256 + [1] * (n - 259)  # unknown, control, byte, normal
    w.add_str("tokenizer.ggml.model", "llama")
    w.add_arr("tokenizer.ggml.tokens", V_STR, toks)
    w.add_arr("tokenizer.ggml.scores", V_F32, [0.0] * 259 + [-float(i) for i in range(n - 259)])
    w.add_arr("tokenizer.ggml.token_type", V_I32, types)
    w.add_u32("tokenizer.ggml.bos_token_id", 1)
    w.add_u32("tokenizer.ggml.eos_token_id", 2)
    w.add_u32("tokenizer.ggml.unknown_token_id", 0)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("out")
    ap.add_argument("--type", default="bf16", choices=["f32", "f16", "bf16", "q8_0", "q4_0", "q5_0", "q5_1",
                                                           "q2_K", "q3_K", "q3_K_M", "q4_K", "q4_K_M", "q5_K", "q5_K_M",
                                                           "iq4_nl", "iq4_xs"])
    ap.add_argument("--output-type", default=None, help="type of output.weight (default: --type)")
    ap.add_argument("--layers", type=int, default=32)
    ap.add_argument("--hidden", type=int, default=4096)
    ap.add_argument("--ffn", type=int, default=14336)
    ap.add_argument("--heads", type=int, default=32)
    ap.add_argument("--kv-heads", type=int, default=8)
    ap.add_argument("--vocab", type=int, default=128256)
    ap.add_argument("--ctx", type=int, default=8192)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--std", type=float, default=0.02, help="float types: the weights' standard deviation")
    ap.add_argument("--tile-mb", type=float, default=TILE / 2**20,
                    help="MiB of random rows repeated through each tensor (small models: make it cover them)")
    a = ap.parse_args()
    mix = a.type.endswith("_M")
    wt = TYPES[a.type[:-2]] if mix else TYPES[a.type]
    ot = TYPES[a.output_type] if a.output_type else (T_Q6_K if mix else wt)

    def more_bits(l):  # llama.cpp's use_more_bits(i_layer, n_layers)
        n = a.layers
        return l < n // 8 or l >= 7 * n // 8 or (l - n // 8) % 3 == 2

    def v_type(l):
        if not mix:
            return wt
        if wt == TYPES["q3_K"]:
            return TYPES["q5_K"] if l < 2 else TYPES["q4_K"]
        return T_Q6_K if more_bits(l) else wt

    def down_type(l):
        if not mix:
            return wt
        if wt == TYPES["q3_K"]:
            return TYPES["q5_K"] if l < a.layers // 16 else TYPES["q4_K"]
        return T_Q6_K if more_bits(l) else wt
    o_type = TYPES["q4_K"] if mix and wt == TYPES["q3_K"] else wt
    hd = a.hidden // a.heads
    w = Writer()
    w.add_str("general.architecture", "llama")
    w.add_str("general.name", "random llama %d layers %s" % (a.layers, a.type))
    w.add_u32("general.alignment", ALIGN)
    w.add_u32("llama.block_count", a.layers)
    w.add_u32("llama.context_length", a.ctx)
    w.add_u32("llama.embedding_length", a.hidden)
    w.add_u32("llama.feed_forward_length", a.ffn)
    w.add_u32("llama.attention.head_count", a.heads)
    w.add_u32("llama.attention.head_count_kv", a.kv_heads)
    w.add_f32("llama.attention.layer_norm_rms_epsilon", 1e-5)
    w.add_f32("llama.rope.freq_base", 500000.0)
    w.add_u32("llama.vocab_size", a.vocab)
    add_vocab(w, a.vocab)
    H, F, KV = a.hidden, a.ffn, a.kv_heads * hd
    w.add_tensor("token_embd.weight", [H, a.vocab], wt)
    w.add_tensor("output_norm.weight", [H], T_F32)
    w.add_tensor("output.weight", [H, a.vocab], ot)
    for l in range(a.layers):
        p = "blk.%d." % l
        w.add_tensor(p + "attn_norm.weight", [H], T_F32)
        w.add_tensor(p + "attn_q.weight", [H, H], wt)
        w.add_tensor(p + "attn_k.weight", [H, KV], wt)
        w.add_tensor(p + "attn_v.weight", [H, KV], v_type(l))
        w.add_tensor(p + "attn_output.weight", [H, H], o_type)
        w.add_tensor(p + "ffn_norm.weight", [H], T_F32)
        w.add_tensor(p + "ffn_gate.weight", [H, F], wt)
        w.add_tensor(p + "ffn_up.weight", [H, F], wt)
        w.add_tensor(p + "ffn_down.weight", [F, H], down_type(l))

    rng = np.random.default_rng(a.seed)
    tiles = {}

    def fill(f, name, dims, t, n):
        if name.endswith("norm.weight"):
            f.write(np.ones(dims[0], dtype=np.float32).tobytes())
            return
        key = (t, dims[0])
        if key not in tiles:
            tiles[key] = make_tile(t, dims[0], rng, a.std, int(a.tile_mb * 2**20))
        tile = tiles[key]
        left = n
        while left > 0:
            k = min(left, len(tile))
            f.write(tile[:k])  # tiles are whole rows, and n is whole rows
            left -= k
        print("  %-28s %-5s %8.1f MB" % (name, [k for k, v in TYPES.items() if v == t][0], n / 1e6),
              file=sys.stderr) if name.startswith(("token", "output", "blk.0.")) else None

    w.write(a.out, fill)
    print("wrote %s" % a.out)


if __name__ == "__main__":
    main()
