#!/bin/bash
# llamacpp_sdist.sh - the llama.cpp source that the PyPI sdist of
# llama-cpp-python==0.3.36 vendors (the sdist scripts/setup.sh takes the
# tokenizer vocabularies from), fetched into DIR and checked by sha256 once;
# prints the llama.cpp directory. Used by build_llamacpp_cuda.sh and
# build_llamacpp_cpu.sh.
#
#   tools/bench/llamacpp_sdist.sh DIR
set -euo pipefail
cd "$(dirname "$0")/../.."
DIR=$1
SDIST=llama_cpp_python-0.3.36.tar.gz
SHA=832db0699007f1be95a7e41ef12e88926b02ba836461e36a36372db2760c1a2e
mkdir -p "$DIR"
if [ ! -d "$DIR/llama_cpp_python-0.3.36" ]; then
  .venv/bin/python -m pip download -q --no-deps --no-binary :all: llama-cpp-python==0.3.36 -d "$DIR" >&2
  echo "$SHA  $DIR/$SDIST" | sha256sum -c --status || { echo "$SDIST: sha256 mismatch" >&2; exit 1; }
  tar -xzf "$DIR/$SDIST" -C "$DIR"
fi
echo "$DIR/llama_cpp_python-0.3.36/vendor/llama.cpp"
