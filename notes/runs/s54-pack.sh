#!/usr/bin/env bash
# session 54: packs the hybrid tagged-word patch (llqkv) against HEAD with its test and the stamps builds, into
# .dev/bin.tar.xz, for notes/runs/s54-run2.sh (~2.5 min here). notes/runs/s54-run2.log was made with this file
# as of 3f7f2d2, which did the same steps by hand.
# The patches apply to 3f7f2d2's tree (llqkv landed after, c7b0862): check out 3f7f2d2 to run it again.
set -euo pipefail
cd "$(dirname "$0")/../.."
PACK_STAMPS=1 tools/bench/pack_variants.sh notes/patches/decode-layers-llqkv.patch
