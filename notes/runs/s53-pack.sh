#!/usr/bin/env bash
# session 53: packs the tagged-word patches (ll, llact) against HEAD with their tests and the stamps builds, into
# .dev/bin.tar.xz, for notes/runs/s53-run2.sh (~4 min here). notes/runs/s54-run1.log was made with this file as
# of 80ac253, which did the same steps by hand.
# The patches apply to 80ac253's tree (llqkv landed after, c7b0862): check out 80ac253 to run it again.
set -euo pipefail
cd "$(dirname "$0")/../.."
PACK_STAMPS=1 tools/bench/pack_variants.sh notes/patches/decode-layers-ll.patch notes/patches/decode-layers-llact.patch
