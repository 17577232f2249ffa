#!/bin/bash
# s26-run9: issue 7's table at the end of session 26 (device_run.sh issue7)
set -u
bash tools/bench/device_run.sh issue7
