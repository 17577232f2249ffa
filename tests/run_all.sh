#!/usr/bin/env bash
# Run every test tier: the C unit runner, then pytest against the real binary.
# Usage: tests/run_all.sh HEARTH_BIN UNIT_RUNNER
# Last line: `N passed, N failed` over all tiers; exit 1 on any failure.
set -u
cd "$(dirname "$0")/.."
bin=$(realpath "$1")
unit=$2
export HEARTH_ROOT=$PWD HEARTH_BIN=$bin

log=$(mktemp)
"$unit" | tee "$log"
unit_rc=${PIPESTATUS[0]}
read -r up uf < <(tail -n 1 "$log" | sed -n 's/^\([0-9]*\) passed, \([0-9]*\) failed$/\1 \2/p')
up=${up:-0}; uf=${uf:-1}
[ "$unit_rc" -ne 0 ] && [ "$uf" -eq 0 ] && uf=1   # a crash counts as a failure

counts=$(mktemp)
HEARTH_PYTEST_COUNTS=$counts .venv/bin/python -m pytest -q -p no:cacheprovider tests/e2e
py_rc=$?
read -r pp pf < "$counts" || { pp=0; pf=1; }
[ "$py_rc" -ne 0 ] && [ "$pf" -eq 0 ] && pf=1
rm -f "$log" "$counts"

echo "$((up + pp)) passed, $((uf + pf)) failed"
[ $((uf + pf)) -eq 0 ]
