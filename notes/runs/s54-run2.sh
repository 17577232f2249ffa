#!/usr/bin/env bash
# session 54: decode_layers with only q / k / v and the splits' partials as tagged words
# (notes/patches/decode-layers-llqkv.patch) against HEAD: device_run.sh's variants suite (the patch's test at the
# full grid and at HEARTH_DL_GRID=100, the A/B alternated twice after 512 tokens for each type, the stamps
# builds' steps of a layer). Here: bash notes/runs/s54-pack.sh. There (carry [".dev"]): bash notes/runs/s54-run2.sh.
# notes/runs/s54-run2.log was made with this file as of 3f7f2d2, which ran the same steps by hand.
cd "$(dirname "$0")/../.."
bash tools/bench/device_run.sh variants
