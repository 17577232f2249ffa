"""random_gguf.py - a llama-architecture GGUF with random weights and the vocabulary of another GGUF (one of
the vocabulary-only files under models/vocab/): for servers' answers that depend on the tokenizer and the
prompt layout, not on what the model knows (make_infill_goldens.py, tools/bench/infill_peer.py). gguf-py and
numpy (requirements-oracle.txt)."""
import gguf
import numpy as np


def write(path, name, vocab_path, hidden, layers, heads, kv_heads, ffn, ctx, seed=0, embed_type="Q8_0",
          embed_std=0.5, weight_type="F32", weight_std=0.15, norm="uniform", rope_base=10000.0, extra_u32=None):
    """Write the model; extra_u32: more uint32 metadata ({key: value}). Norm weights U(0.6, 1.4) ("uniform")
    or ones; matrices N(0, weight_std) in weight_type (F32 or Q8_0); the embedding, tied to the output, N(0,
    embed_std) in embed_type (Q4_0 or Q8_0)."""
    src = gguf.GGUFReader(str(vocab_path))
    tokens = src.fields["tokenizer.ggml.tokens"].contents()
    hd = hidden // heads
    w = gguf.GGUFWriter(str(path), "llama")
    w.add_type("model")
    w.add_name(name)
    w.add_block_count(layers)
    w.add_context_length(ctx)
    w.add_embedding_length(hidden)
    w.add_feed_forward_length(ffn)
    w.add_head_count(heads)
    w.add_head_count_kv(kv_heads)
    w.add_rope_freq_base(rope_base)
    w.add_layer_norm_rms_eps(1e-5)
    w.add_rope_dimension_count(hd)
    w.add_vocab_size(len(tokens))
    w.add_file_type(gguf.LlamaFileType.MOSTLY_Q8_0 if weight_type == "Q8_0" else gguf.LlamaFileType.MOSTLY_Q4_0)
    w.add_quantization_version(gguf.GGML_QUANT_VERSION)
    w.add_tokenizer_model("gpt2")
    w.add_tokenizer_pre(src.fields["tokenizer.ggml.pre"].contents())
    w.add_token_list(tokens)
    w.add_token_types(src.fields["tokenizer.ggml.token_type"].contents())
    w.add_token_merges(src.fields["tokenizer.ggml.merges"].contents())
    w.add_bos_token_id(0)
    w.add_eos_token_id(0)
    w.add_add_bos_token(False)
    for key, value in (extra_u32 or {}).items():
        w.add_uint32(key, value)
    rng = np.random.default_rng(seed)

    def tensor(name, rows, cols, std, qtype):
        x = rng.normal(0, std, size=(rows, cols)).astype(np.float32)
        if qtype == "F32":
            w.add_tensor(name, x)
        else:
            t = gguf.GGMLQuantizationType[qtype]
            w.add_tensor(name, gguf.quants.quantize(x, t), raw_dtype=t)

    def norm_weight():
        return (rng.uniform(0.6, 1.4, hidden) if norm == "uniform" else np.ones(hidden)).astype(np.float32)

    tensor("token_embd.weight", len(tokens), hidden, embed_std, embed_type)
    w.add_tensor("output_norm.weight", norm_weight())
    shapes = {"attn_q": (heads * hd, hidden), "attn_k": (kv_heads * hd, hidden), "attn_v": (kv_heads * hd, hidden),
              "attn_output": (hidden, heads * hd), "ffn_gate": (ffn, hidden), "ffn_up": (ffn, hidden),
              "ffn_down": (hidden, ffn)}
    for i in range(layers):
        w.add_tensor(f"blk.{i}.attn_norm.weight", norm_weight())
        w.add_tensor(f"blk.{i}.ffn_norm.weight", norm_weight())
        for name, (r, c) in shapes.items():
            tensor(f"blk.{i}.{name}.weight", r, c, weight_std, weight_type)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return tokens
