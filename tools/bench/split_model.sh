#!/usr/bin/env bash
# split_model.sh - the default model (98 MB) to the GPU machine, whose calls
# carry at most 64 MiB with the working tree (~21 MB tracked): three parts
# over three consecutive calls, while the machine stays warm (it goes back
# after ~30 s idle, and /tmp with it).
#
# Here:    tools/bench/split_model.sh split        # .dev1/part.aa, .dev2/part.ab, .dev/part.ac
#          (it adds /.dev/, /.dev1/ and /.dev2/ to .git/info/exclude: the parts travel by carry only)
# There:   call 1, carry [".dev1"]: tools/bench/split_model.sh stash
#          call 2, carry [".dev2"]: tools/bench/split_model.sh stash
#          call 3, carry [".dev"]:  tools/bench/device_run.sh tests   (joins the parts itself)
set -euo pipefail
cd "$(dirname "$0")/../.."
M=models/SmolLM2-135M-Instruct.Q4_1.gguf
case ${1:-} in
split)
    [ -s "$M" ] || { echo "split_model: $M is missing (scripts/setup.sh fetches it)" >&2; exit 1; }
    mkdir -p .dev .dev1 .dev2 .git/info
    for d in .dev .dev1 .dev2; do grep -qx "/$d/" .git/info/exclude 2>/dev/null || echo "/$d/" >> .git/info/exclude; done
    rm -f .dev*/part.a?
    split -b 38000000 "$M" /tmp/hearth-part.
    mv /tmp/hearth-part.aa .dev1/part.aa
    mv /tmp/hearth-part.ab .dev2/part.ab
    mv /tmp/hearth-part.ac .dev/part.ac
    sha256sum "$M" | cut -d' ' -f1 > .dev/part.sha256
    ls -la .dev1/part.aa .dev2/part.ab .dev/part.ac ;;
stash)
    [ -s .dev1/part.aa ] && cp .dev1/part.aa /tmp/
    [ -s .dev2/part.ab ] && cp .dev2/part.ab /tmp/
    ls -la /tmp/part.a? ;;
join)
    mkdir -p models
    if ! cat /tmp/part.aa /tmp/part.ab .dev/part.ac > "$M.part" ||
        [ "$(sha256sum "$M.part" | cut -d' ' -f1)" != "$(cat .dev/part.sha256)" ]; then
        echo "split_model: the parts do not make the model (one missing: were the calls consecutive?)" >&2
        rm -f "$M.part"
        exit 1
    fi
    mv "$M.part" "$M"
    echo "split_model: $M joined" ;;
*)
    echo "usage: tools/bench/split_model.sh split|stash|join" >&2
    exit 2 ;;
esac
