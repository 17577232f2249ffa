#!/bin/bash
# s30-run5: the new peer suite of tools/bench/device_run.sh, run once as committed
bash tools/bench/device_run.sh peer
