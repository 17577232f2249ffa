#!/usr/bin/env bash
# session 53: decode_layers with its boundaries as tagged words (notes/patches/decode-layers-ll.patch, -llact.patch)
# against HEAD: device_run.sh's variants suite (each patch's test at the full grid and at HEARTH_DL_GRID=100, the
# A/B alternated twice after 512 tokens for each type, the stamps builds' steps of a layer); on an H200 issue7
# and issue6 too. Here: bash notes/runs/s53-pack.sh. There (carry [".dev"]): bash notes/runs/s53-run2.sh.
# notes/runs/s54-run1.log was made with this file as of 80ac253, which ran the same steps by hand.
cd "$(dirname "$0")/../.."
bash tools/bench/device_run.sh variants
nvidia-smi --query-gpu=name --format=csv,noheader | grep -q H200 && bash tools/bench/device_run.sh issue7 issue6
