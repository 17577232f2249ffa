#!/usr/bin/env bash
# session 54: decode_layers with only q / k / v and the splits' partials as tagged words (notes/patches/
# decode-layers-llqkv.patch: the attention waits for its head's q / k / v words, each split merges 32 dims from the
# head's tagged partials, writes att and adds to a count; att, x and act keep HEAD's counters) against HEAD.
# The variant's test first (and with a grid of 100, where blocks take two items); the benchmarks only if both
# pass: bench_model_prev / _llqkv alternated twice after 512 tokens for each type; then the stamps builds' steps of
# a layer (HEAD and llqkv); on an H200 issue7 and issue6 (HEAD). Here: bash notes/runs/s54-pack.sh.
# There (carry [".dev"]): bash notes/runs/s54-run2.sh
cd "$(dirname "$0")/../.."
case $(nvidia-smi --query-gpu=name --format=csv,noheader) in *H200*) h200=1 ;; *) h200=0 ;; esac
mkdir -p /tmp/b && tar -C /tmp/b -xJf .dev/bin.tar.xz && nvidia-smi --query-gpu=name --format=csv,noheader
ok=0
for v in llqkv; do
    pass=1
    for g in 0 100; do
        echo "## $(date +%T) HEARTH_DL_GRID=$g test_cuda_$v decode_layers"
        HEARTH_DL_GRID=$g HEARTH_ROOT=$PWD timeout 60 /tmp/b/test_cuda_$v decode_layers 2>&1 | tail -4
        [ "${PIPESTATUS[0]}" = 0 ] || pass=0
    done
    # a variant that fails its test (or hangs) is not measured
    [ $pass = 1 ] && ok=1 || rm -f /tmp/b/bench_model_$v /tmp/b/test_cuda_$v /tmp/b/stamps_$v
done
model() { # a random-weight 8B-shaped GGUF of type $1 at /tmp/l8b-$1.gguf (~15 s)
    [ -s /tmp/l8b-$1.gguf ] || timeout 120 python3 tools/bench/make_llama_gguf.py /tmp/l8b-$1.gguf --type $1 \
        $([ $1 = q4_0 ] && echo --output-type q6_K) >/dev/null 2>&1
}
# device_run.sh variants would unpack the failed ones again: the same runs here
if [ $ok = 1 ]; then
    for t in q4_0 q8_0 bf16; do
        m=/tmp/l8b-$t.gguf
        model $t
        for i in 1 2; do
            for b in prev llqkv; do
                [ -x /tmp/b/bench_model_$b ] || continue
                echo "## $(date +%T) bench_model_$b $m --prompt 512 --gen 128 --prefill 512 --reps 1"
                HEARTH_ROOT=$PWD timeout 60 /tmp/b/bench_model_$b $m --prompt 512 --gen 128 --prefill 512 --reps 1 2>&1 |
                    grep -E "^(decode|bench_model)"
            done
        done
    done
fi
# where the layer's time goes now: HEAD's steps and llqkv's, Q4_0 after 512 tokens
model q4_0
for b in prev llqkv; do
    [ -x /tmp/b/stamps_$b ] || continue
    echo "## $(date +%T) stamps_$b /tmp/l8b-q4_0.gguf --prompt 512 --gen 128 --prefill 512 --reps 1"
    HEARTH_ROOT=$PWD timeout 60 /tmp/b/stamps_$b /tmp/l8b-q4_0.gguf --prompt 512 --gen 128 --prefill 512 --reps 1 2>&1 |
        grep -E "^decode|^decode_layers stamps|^  "
done
[ $h200 = 1 ] && bash tools/bench/device_run.sh issue7 issue6
echo "## $(date +%T) end"
