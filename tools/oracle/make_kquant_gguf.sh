#!/bin/sh
# make_kquant_gguf.sh - the random-weight K-quant GGUF of the CPU layout tests:
# tests/fixtures/kquant/random-q4_K_M.gguf (Q4_K layers and embedding, a
# Q6_K output; tools/bench/make_llama_gguf.py, seed 7). No oracle: the tests
# compare hearth with itself (panel-laid against stored weights, bit for bit).
set -e
cd "$(dirname "$0")/../.."
PY=${PYTHON:-.venv/bin/python}
"$PY" tools/bench/make_llama_gguf.py tests/fixtures/kquant/random-q4_K_M.gguf --type q4_K_M \
    --layers 2 --hidden 256 --ffn 512 --heads 4 --kv-heads 2 --vocab 512 --ctx 256 --seed 7
