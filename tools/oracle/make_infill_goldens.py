#!/usr/bin/env python3
"""make_infill_goldens.py - a tiny code model and llama-server's answers to
POST /infill, the goldens of tests/e2e/test_infill.py.

Writes tests/fixtures/infill/:
  starcoder2-fim.gguf   llama arch, 2 layers of 32, random weights (seed 0; the
                        token embedding, tied to the output, in Q4_0), with the
                        StarCoder2 vocabulary of models/vocab/ggml-vocab-starcoder.gguf
                        (which scripts/setup.sh fetches). Its <fim_prefix>,
                        <fim_suffix>, <fim_middle> and <fim_pad> are found by name;
                        its <repo_name> and <file_sep> are names llama.cpp does not
                        know, so the file names them in tokenizer.ggml.fim_rep_token_id
                        and fim_sep_token_id (as convert_hf_to_gguf.py does for models
                        it knows), and the repository layout is the one laid out.
  golden.json           for each case: the request, and llama-server's prompt (the
                        whole prompt it laid out, as text with the special tokens),
                        tokens_evaluated, content and generated token ids, and the
                        fields a response_fields request got back; and line_cases:
                        llama-server's greedy /completion text on the default model
                        (SmolLM2, which writes newlines) with n_indent.

llama-server (tools/bench/build_llamacpp_cpu.sh) runs with -c 4096 -np 1 -t 2
--no-repack (the CPU's repacked kernels are not usable in this VM: llamacpp_util.py
says why), and once more with --spm-infill for the cases marked spm. Greedy
(temperature 0), 8 tokens; ids with top-1/top-2 margins are not chosen here, so
the test compares the content only where llama-server's own top-2 margin at every
step was at least MARGIN (recorded per case).

Run:  .venv/bin/python tools/oracle/make_infill_goldens.py --llama-server build/llamacpp-cpu/bin/llama-server
(venv with requirements-oracle.txt: gguf, numpy)
"""
import argparse
import json
import math
import os
import socket
import subprocess
import time
import urllib.request

import gguf
import numpy as np

import random_gguf

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
OUT = os.path.join(ROOT, "tests", "fixtures", "infill")
VOCAB = os.path.join(ROOT, "models", "vocab", "ggml-vocab-starcoder.gguf")
N_CTX = 4096
N_PREDICT = 8
MARGIN = 0.05  # nats between top-1 and top-2 at every step for the content to be compared

HIDDEN, LAYERS, HEADS, KV_HEADS, FFN = 32, 2, 2, 1, 64


def write_model(path):
    tokens = gguf.GGUFReader(VOCAB).fields["tokenizer.ggml.tokens"].contents()
    random_gguf.write(path, "starcoder2-fim-tiny", VOCAB, HIDDEN, LAYERS, HEADS, KV_HEADS, FFN, N_CTX, embed_type="Q4_0",
                      extra_u32={"tokenizer.ggml.fim_rep_token_id": tokens.index("<repo_name>"),
                                 "tokenizer.ggml.fim_sep_token_id": tokens.index("<file_sep>")})


def code(n_lines, seed):
    """Python-looking text of n_lines lines (the long cases' prefix, suffix and files)."""
    r = np.random.default_rng(seed)
    words = ["value", "count", "items", "total", "result", "index", "name", "data", "key", "node"]
    lines = []
    for i in range(n_lines):
        a, b = r.choice(words, 2)
        lines.append(f"    {a}_{i} = {b}_{i % 7} + {int(r.integers(100))}  # step {i}")
    return "\n".join(lines) + "\n"


CASES = [
    {"name": "prefix_suffix",
     "body": {"input_prefix": "def add(a, b):\n    ", "input_suffix": "\n\nprint(add(1, 2))\n"}},
    {"name": "with_prompt",
     "body": {"input_prefix": "import os\n\ndef main():\n", "input_suffix": "\n\nif __name__ == '__main__':\n    main()\n",
              "prompt": "    path = os.path"}},
    {"name": "extra_files",
     "body": {"input_prefix": "from util import mean\n\nxs = [1, 2, 3]\n", "input_suffix": "\nprint(m)\n",
              "input_extra": [{"filename": "util.py", "text": "def mean(xs):\n    return sum(xs) / len(xs)\n"},
                              {"text": "# no file name: llama-server calls it tmp\n"}]}},
    {"name": "special_text",  # special tokens written in the code stay text; in the prompt they are tokens
     "body": {"input_prefix": "s = '<fim_prefix><file_sep>'\n", "input_suffix": "t = '<fim_middle>'\n",
              "prompt": "u = 1<fim_pad>"}},
    {"name": "long_prefix_suffix",  # the prefix keeps its last 1,536 tokens, the suffix its first 510 less the prompt
     "body": {"input_prefix": code(220, 1), "input_suffix": code(120, 2), "prompt": "    last = "}},
    {"name": "long_extra",  # the files keep their last n_ctx - 2,048 + 2 tokens
     "body": {"input_prefix": "x = 1\n", "input_suffix": "y = 2\n",
              "input_extra": [{"filename": f"f{i}.py", "text": code(60, 10 + i)} for i in range(3)]}},
    {"name": "llama_vim",  # what llama.vim sends (autoload/llama.vim), greedy: the infill sampler before the temperature
     "body": {"input_prefix": "def add(a, b):\n", "input_suffix": "\n\nprint(add(1, 2))\n", "prompt": "    ",
              "input_extra": [{"filename": "util.py", "text": "def mean(xs):\n    return sum(xs) / len(xs)\n",
                               "time": [1, 2]}],
              "n_indent": 4, "top_k": 40, "top_p": 0.90, "samplers": ["top_k", "top_p", "infill", "temperature"],
              "cache_prompt": True, "t_max_prompt_ms": 500, "t_max_predict_ms": 1000,
              "response_fields": ["content", "timings/prompt_n", "timings/predicted_n", "truncated", "tokens_cached",
                                  "stop_type", "tokens_evaluated", "prompt", "no/such"]}},
    {"name": "infill_sampler_only",  # the infill sampler on the whole vocabulary: llama.cpp counts every candidate
     "body": {"input_prefix": "x = ", "input_suffix": "\n", "samplers": ["infill", "temperature"]}},
    {"name": "warm_cache",  # llama.vim's background request: n_predict 0 computes the prompt alone
     "n_predict": 0,
     "body": {"input_prefix": "", "input_suffix": "", "prompt": "", "samplers": [], "t_max_prompt_ms": 1,
              "t_max_predict_ms": 1, "response_fields": [""],
              "input_extra": [{"filename": "a.py", "text": "A = 1\nB = 2\n"}]}},
    {"name": "spm", "spm": True,
     "body": {"input_prefix": "def sub(a, b):\n    ", "input_suffix": "\n\nprint(sub(3, 1))\n",
              "input_extra": [{"filename": "a.py", "text": "A = 1\n"}]}},
]


FIB = "def fibonacci(n):\n    \"\"\"Return the n-th Fibonacci number.\"\"\"\n"
LINE_CASES = [
    {"name": "n_indent", "body": {"prompt": FIB, "n_predict": 40, "n_indent": 4}},
    {"name": "n_indent_deeper", "body": {"prompt": "def f(xs):\n    for x in xs:\n", "n_predict": 40, "n_indent": 8}},
]


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def post(port, path, body):
    req = urllib.request.Request(f"http://127.0.0.1:{port}{path}", json.dumps(body).encode(),
                                 {"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=300) as r:
        return json.loads(r.read())


def serve(binary, model, spm):
    port = free_port()
    args = [binary, "-m", model, "-c", str(N_CTX), "-np", "1", "-t", "2", "--no-repack", "--port", str(port),
            "--host", "127.0.0.1"] + (["--spm-infill"] if spm else [])
    p = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    for _ in range(600):
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=2) as r:
                if r.status == 200:
                    return p, port
        except Exception:
            time.sleep(0.1)
    p.kill()
    raise RuntimeError("llama-server did not start")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--llama-server", required=True)
    a = ap.parse_args()
    os.makedirs(OUT, exist_ok=True)
    model = os.path.join(OUT, "starcoder2-fim.gguf")
    write_model(model)
    goldens = []
    for spm in (False, True):
        p, port = serve(a.llama_server, model, spm)
        try:
            for case in CASES:
                if case.get("spm", False) != spm:
                    continue
                n_predict = case.get("n_predict", N_PREDICT)
                body = dict(case["body"], n_predict=n_predict, temperature=0)
                # the margins of the greedy steps, from a run with n_probs and the whole answer
                full = post(port, "/infill", {k: v for k, v in dict(body, n_probs=2, return_tokens=True).items()
                                              if k != "response_fields"})
                margins = []
                for step in full.get("completion_probabilities", []):
                    top = step["top_logprobs"]
                    margins.append(top[0]["logprob"] - top[1]["logprob"] if len(top) > 1 else math.inf)
                min_margin = min(margins) if margins else math.inf
                r = post(port, "/infill", body)  # the answer as asked (response_fields)
                goldens.append({"name": case["name"], "spm": spm, "request": case["body"], "n_predict": n_predict,
                                "prompt": full["prompt"], "tokens_evaluated": full["tokens_evaluated"],
                                "content": full["content"], "tokens": full["tokens"], "stop_type": full["stop_type"],
                                "answer_keys": sorted(r),
                                "answer": {k: r[k] for k in r
                                           if not k.startswith("timings") and k != "generation_settings"},
                                "min_top2_margin": min_margin if math.isfinite(min_margin) else None,
                                "compare_content": min_margin >= MARGIN})
                print(f"{case['name']}: {full['tokens_evaluated']} prompt tokens, {len(full['tokens'])} generated "
                      f"({full['stop_type']}), min margin {min_margin:.3f}, answer keys {sorted(r)}", flush=True)
        finally:
            p.terminate()
            p.wait(30)
    # llama-server's line rules for code completion on the default model (SmolLM2, which writes newlines)
    smol = os.path.join(ROOT, "models", "SmolLM2-135M-Instruct.Q4_1.gguf")
    lines = []
    p, port = serve(a.llama_server, smol, False)
    try:
        for case in LINE_CASES:
            body = dict(case["body"], temperature=0)
            full = post(port, "/completion", dict(body, n_probs=2))
            margins = [st["top_logprobs"][0]["logprob"] - st["top_logprobs"][1]["logprob"]
                       for st in full.get("completion_probabilities", [])]
            lines.append({"name": case["name"], "request": case["body"], "content": full["content"],
                          "stop_type": full["stop_type"], "tokens_predicted": full["tokens_predicted"],
                          "min_top2_margin": min(margins)})
            print(f"{case['name']}: {full['content']!r} ({full['stop_type']}), min margin {min(margins):.3f}",
                  flush=True)
    finally:
        p.terminate()
        p.wait(30)
    doc = {"llama_server": "llama.cpp of llama-cpp-python 0.3.36 (tools/bench/build_llamacpp_cpu.sh)",
           "server_args": f"-c {N_CTX} -np 1 -t 2 --no-repack [--spm-infill]", "cases": goldens,
           "line_cases": lines}
    with open(os.path.join(OUT, "golden.json"), "w") as f:
        json.dump(doc, f, indent=1, ensure_ascii=False)
        f.write("\n")
    print(f"wrote {model} ({os.path.getsize(model)} bytes) and golden.json")


if __name__ == "__main__":
    main()
