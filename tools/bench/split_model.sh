#!/usr/bin/env bash
# split_model.sh - the default model (98 MB) to the GPU machine, whose calls
# carry at most 64 MiB with the working tree (~35 MB tracked) and the
# binaries (~22 MB): four parts over four consecutive calls, while the
# machine stays warm (it goes back after ~30 s idle, and /tmp with it).
#
# Here:    tools/bench/split_model.sh split        # .dev1/part.aa, .dev2/part.ab, .dev3/part.ac, .dev/part.ad
#          (it adds /.dev/ .. /.dev3/ to .git/info/exclude: the parts travel by carry only)
# There:   calls 1-3, carry [".dev1"], [".dev2"], [".dev3"]: tools/bench/split_model.sh stash
#          call 4, carry [".dev"]:  tools/bench/device_run.sh tests   (joins the parts itself)
set -euo pipefail
cd "$(dirname "$0")/../.."
M=models/SmolLM2-135M-Instruct.Q4_1.gguf
PART=31000000 # three of these fill calls 1-3; the rest rides with the binaries
case ${1:-} in
split)
    [ -s "$M" ] || { echo "split_model: $M is missing (scripts/setup.sh fetches it)" >&2; exit 1; }
    mkdir -p .dev .dev1 .dev2 .dev3 .git/info
    for d in .dev .dev1 .dev2 .dev3; do
        grep -qx "/$d/" .git/info/exclude 2>/dev/null || echo "/$d/" >> .git/info/exclude
    done
    rm -f .dev*/part.a?
    split -b $PART "$M" /tmp/hearth-part.
    mv /tmp/hearth-part.aa .dev1/part.aa
    mv /tmp/hearth-part.ab .dev2/part.ab
    mv /tmp/hearth-part.ac .dev3/part.ac
    mv /tmp/hearth-part.ad .dev/part.ad
    sha256sum "$M" | cut -d' ' -f1 > .dev/part.sha256
    ls -la .dev1/part.aa .dev2/part.ab .dev3/part.ac .dev/part.ad ;;
stash)
    for p in .dev1/part.aa .dev2/part.ab .dev3/part.ac; do [ -s $p ] && cp $p /tmp/; done
    ls -la /tmp/part.a? ;;
join)
    mkdir -p models
    if ! cat /tmp/part.aa /tmp/part.ab /tmp/part.ac .dev/part.ad > "$M.part" ||
        [ "$(sha256sum "$M.part" | cut -d' ' -f1)" != "$(cat .dev/part.sha256)" ]; then
        echo "split_model: the parts do not make the model (one missing: were the calls consecutive?)" >&2
        rm -f "$M.part"
        exit 1
    fi
    mv "$M.part" "$M"
    echo "split_model: $M joined" ;;
*)
    echo "usage: split_model.sh split|stash|join" >&2
    exit 2 ;;
esac
