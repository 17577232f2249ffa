#!/usr/bin/env bash
# session 54: att as tagged words already prepared for o (notes/patches/decode-layers-attq8.patch: each merger's
# 32 dims as one q8 group in 10 words, or BF16 two bf16 a word; o reads its thread's group or chunks once they
# carry the layer's tag, without the merges' count, its ordering wait, the float loads and the q8 step) against
# HEAD (llqkv landed). The variant's tests at grid 0 and 100, then bench_model_prev / _attq8 alternated twice
# after 512 tokens for each type, then both stamps builds (Q4_0). Here: bash notes/runs/s54-pack2.sh.
# There (carry [".dev"]): bash notes/runs/s54-run4.sh
cd "$(dirname "$0")/../.."
case $(nvidia-smi --query-gpu=name --format=csv,noheader) in *H200*) h200=1 ;; *) h200=0 ;; esac
mkdir -p /tmp/b && tar -C /tmp/b -xJf .dev/bin.tar.xz && nvidia-smi --query-gpu=name --format=csv,noheader
ok=0
for v in attq8; do
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
            for b in prev attq8; do
                [ -x /tmp/b/bench_model_$b ] || continue
                echo "## $(date +%T) bench_model_$b $m --prompt 512 --gen 128 --prefill 512 --reps 1"
                HEARTH_ROOT=$PWD timeout 60 /tmp/b/bench_model_$b $m --prompt 512 --gen 128 --prefill 512 --reps 1 2>&1 |
                    grep -E "^(decode|bench_model)"
            done
        done
    done
fi
# where the layer's time goes now: HEAD's steps and attq8's, Q4_0 after 512 tokens
model q4_0
for b in prev attq8; do
    [ -x /tmp/b/stamps_$b ] || continue
    echo "## $(date +%T) stamps_$b /tmp/l8b-q4_0.gguf --prompt 512 --gen 128 --prefill 512 --reps 1"
    HEARTH_ROOT=$PWD timeout 60 /tmp/b/stamps_$b /tmp/l8b-q4_0.gguf --prompt 512 --gen 128 --prefill 512 --reps 1 2>&1 |
        grep -E "^decode|^decode_layers stamps|^  "
done
[ $h200 = 1 ] && bash tools/bench/device_run.sh issue7 issue6
echo "## $(date +%T) end"
