#!/usr/bin/env bash
# device_run.sh - the standard measurements and tests, run ON the GPU machine
# from the repository root, from the binaries pack_device.sh packed. Every
# step has a timeout (a hung kernel must not eat the session's device time)
# and prints a "## HH:MM:SS what" header, so a log reads as notes/runs/*.log.
#
# Here:   make -j2 all build/test_cuda build/bench/cuda/bench_model build/bench/cuda/bench_attn build/bench/cuda/bench_persist \
#             build/bench/cuda/bench_pick build/bench/cuda/bench_cluster
#         tools/bench/pack_device.sh                  # .dev/bin.tar.xz (~12 MB)
# There (the device tool, carry [".dev"]):
#         bash tools/bench/device_run.sh SUITE...
#
# Suites:
#   tests       the whole test_cuda (~4 min); the two default-model tests need
#               models/SmolLM2-135M-Instruct.Q4_1.gguf, which is 98 MB: carry it
#               in parts over consecutive calls (tools/bench/split_model.sh says how)
#   flash       test_cuda cuda_attention_flash (both cache types, ~20 s)
#   attn        bench_attn, the prefill cases, f16 and e4m3 caches
#   issue7      bench_model on the 8B shape in BF16, Q8_0 and Q4_0 (+ Q6_K head):
#               decode at batch 1 after 512 tokens, prefill 512 / 2048 (~3 min)
#   layers47    decode_layers (session 47): test_cuda decode_layers, then on the 8B shape in BF16 with
#               HEARTH_DECODE_LAYERS=1 and 0: bench_model after 512, hearth bench --parallel 1 at 128 / 128 and
#               1000 / 1000, and hearth run greedy for 200 tokens (the texts compared) (~3 min)
#   layers48    the same for each of LAYERS_TYPES (default "bf16 q8_0 q4_0"; the quantized at 128 / 128 only)
#   abprev      this build's bench_model beside an earlier one packed as bench_model_prev (PACK_EXTRA=... pack_device.sh),
#               alternated three times after 512 tokens for each of LAYERS_TYPES (default "q4_0 q8_0 bf16") (~1 min)
#   variants    the patches tools/bench/pack_variants.sh packed against this commit's kernel: test_cuda_NAME
#               decode_layers for each at the full grid and at HEARTH_DL_GRID=100 (blocks with two items; a
#               variant that fails or hangs, 60 s, is not measured), then bench_model_prev and every
#               bench_model_NAME alternated twice after 512 tokens for each of LAYERS_TYPES (default "q4_0 q8_0
#               bf16"); VARIANT_ENVS="NAME:VAR=V ..." adds a run of bench_model_NAME under VAR=V each time; then,
#               where PACK_STAMPS=1 packed them, the stamps builds' steps of a layer, stamps_prev and every
#               stamps_NAME, on the first type (~1.5 min for one patch)
#   dlstamps    decode_layers' steps a layer (`make bench-stamps`, packed as bench_model_st): bench_model_st
#               after 512 tokens for each of LAYERS_TYPES (default "q4_0 q8_0 bf16"), then the same at 3000
#               positions for the first type (~1 min)
#   grid        decode_layers on all the multiprocessors and on DL_GRID (default 128, what clusters of 16 would
#               leave it) (HEARTH_DL_GRID), alternated twice after 512 tokens for each of LAYERS_TYPES (~1 min)
#   cluster     bench_cluster: clusters of decode_layers' shape resident at once, and a head's partials exchanged
#               through distributed shared memory against today's global count and loads, inside a weight stream
#   ceiling     bench_persist (a persistent kernel streaming a token's layer weights through the layer's
#               dependencies, no arithmetic) in BF16, Q8_0 and Q4_0 bytes, one block of 192 KB and two of 96 KB a
#               multiprocessor, without and with a 7 us stall after q/k/v (the attention's chain): the batch-1
#               ceiling of a persistent design beside issue 7's goals (~2 min)
#   issue6      hearth bench at saturation: 512 streams x 1000 / 1000, e4m3 KV (~1 min)
#   streams     hearth bench at 1, 8, 64 and 256 streams, 128/128 and 1000/1000 (~3 min)
#   train       test_cuda train, then LoRA SFT on the 8B shape (BF16, rank 16, 4 x 512 tokens a step): hearth
#               train packed, one sequence a forward and with --gradient-checkpointing, beside PyTorch + PEFT
#               (tools/bench/peer_train_torch_gpu.py) batched and one at a time; needs .dev/wheels (peft,
#               accelerate) carried too (~3 min)
#   lora        hearth bench on the 8B shape (BF16) without and with a rank-16 LoRA adapter on every
#               projection (tools/bench/make_lora_adapter.py): batch 1 after 512 tokens, 64 streams of 128 / 128
#   spec        speculative decoding by prompt lookup on the GPU: tools/bench/spec_peer.py --only hearth
#               (the default model served with and without --spec-ngram 5, one request of each of three
#               prompts, decode tok/s; needs the default model, as tests) (~1 min)
#   grammar     grammar-constrained decoding on the GPU: tools/bench/grammar_peer.py --only hearth (the default
#               model served with and without a GBNF grammar, decode tok/s; needs the default model, as tests)
#   session43   what session 43 left untried for want of a GPU: test_cuda engine (cuda_engine_lora_runtime: adapters
#               loaded and unloaded while serving) and pick, then 64 / 256 sampled streams with the truncating pick's
#               default (c71e364) against the host sampler (HEARTH_PICK_TRUNCATE=0) (~4 min)
#   sampled     bench_pick (the pick op alone, with and without top_k / top_p), then hearth bench at 1, 64 and
#               256 streams of 128 / 128, greedy and sampled with llama-server's default filters (temperature
#               0.8, top_k 40, top_p 0.95, min_p 0.05) picked on the device (HEARTH_PICK_TRUNCATE=1) and
#               on the host (=0) (~2 min)
#   quants      the weight types first read on the GPU in session 45 (q5_0, q5_1, iq4_nl, q5_K, q3_K, q2_K, iq4_xs):
#               test_cuda cuda_matmul, cuda_embed and cuda_parity (llama.cpp's K-quant goldens on the GPU), then
#               bench_model on the 8B shape in Q5_K_M and Q3_K_M (llama.cpp's mixes), and IQ4_XS, Q5_0, Q3_K,
#               Q2_K, Q5_1, IQ4_NL with a Q6_K head (~4 min)
#   split46     the weight types split at load from session 46 (q4_1, q5_0, q5_1, iq4_nl, q3_K, q2_K): test_cuda
#               cuda_matmul, cuda_embed, cuda_parity and cuda_layer, then bench_model on the 8B shape in Q5_0,
#               Q5_1, IQ4_NL, Q3_K and Q2_K (Q6_K head; SPLIT46_TYPES picks), HEARTH_SPLIT_ROWS=0 (the staged
#               kernel), then split (~8 min)
#   two46       v of another type than q and k as one launch with them (cu_mmv2's pairs of session 46): test_cuda
#               cuda_layer_split_qkv_rope, then bench_model on the 8B shape in Q5_K_M and Q3_K_M (llama.cpp's mixes),
#               HEARTH_MMV_TWO=0 (two launches) and 1 alternated twice (~3 min)
#   quantpeer   llama.cpp on the files of `quants` (llama-bench as in peer); needs .dev/llama.tar.xz only
#   peer        the peers beside issue7 and streams: llama.cpp on the same files, llama-bench (prefill
#               512 / 2048, decode after 512) for the three types and llama-batched-bench 128/128 at
#               1-256 streams, then PyTorch (tools/bench/peer_torch.py; ~2 min in all); needs .dev/llama.tar.xz, packed here after tools/bench/build_llamacpp_cuda.sh:
#               tar -C build/llamacpp-cuda -cf - bin lib | xz -T2 --lzma2=preset=6,dict=256MiB > .dev/llama.tar.xz
#               (~23 MB; the tree, bin.tar.xz and it pass the 64 MiB a call carries: run `peer` alone, carrying
#               .dev with llama.tar.xz only)
set -uo pipefail
cd "$(dirname "$0")/../.."
export HEARTH_ROOT=$PWD
B=/tmp/b
# the peer suites need only .dev/llama.tar.xz: the two archives and the tree together pass the 64 MiB a call carries
peers_only=1
for s in "$@"; do [ "$s" = peer ] || [ "$s" = quantpeer ] || peers_only=0; done
mkdir -p $B && { [ ! -s .dev/bin.tar.xz ] && [ $peers_only = 1 ] || tar -C $B -xJf .dev/bin.tar.xz; } ||
    { echo "device_run: no .dev/bin.tar.xz (pack_device.sh)"; exit 1; }
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,memory.total --format=csv,noheader

hdr() { echo "## $(date +%T) $*"; }
# a random-weight Llama-3.1-8B-shaped GGUF of type $1 at /tmp/l8b-$1.gguf (~15 s each)
model() {
    local f=/tmp/l8b-$1.gguf
    [ -s "$f" ] || timeout 120 python3 tools/bench/make_llama_gguf.py "$f" --type "$1" \
        $(case $1 in q4_0 | q5_0 | q5_1 | iq4_nl | iq4_xs | q3_K | q2_K) echo --output-type q6_K ;; esac) >/dev/null 2>&1
    echo "$f"
}

for suite in "$@"; do
    case $suite in
    tests)
        [ -s models/SmolLM2-135M-Instruct.Q4_1.gguf ] || tools/bench/split_model.sh join
        hdr "test_cuda (ok lines left out; the failures first)"
        timeout 400 $B/test_cuda 2>&1 | grep -vE "^ok |^  layer |^  cuda (mistral|llama|qwen)" > /tmp/test_cuda.log
        grep -E "FAIL" /tmp/test_cuda.log | head -20
        tail -40 /tmp/test_cuda.log ;;
    layers47 | layers48)
        hdr "test_cuda decode_layers"
        timeout 240 $B/test_cuda decode_layers 2>&1 | tail -12
        types=bf16
        [ "$suite" = layers48 ] && types=${LAYERS_TYPES:-"bf16 q8_0 q4_0"}
        for t in $types; do
            m=$(model "$t")
            for dl in 1 0; do
                hdr "HEARTH_DECODE_LAYERS=$dl bench_model $m --prompt 512 --gen 128 --prefill 512 --reps 2"
                HEARTH_DECODE_LAYERS=$dl timeout 200 $B/bench_model "$m" --prompt 512 --gen 128 --prefill 512 \
                    --reps 2 2>&1 | grep -E "decode|roofline"
                for pg in "128 128" "1000 1000"; do
                    read -r P G <<<"$pg"
                    [ "$t" != bf16 ] && [ "$P" = 1000 ] && continue
                    hdr "HEARTH_DECODE_LAYERS=$dl hearth bench $m --parallel 1 --prompt $P --gen $G"
                    HEARTH_DECODE_LAYERS=$dl timeout 120 $B/hearth bench "$m" --device cuda --prompt "$P" \
                        --gen "$G" --parallel 1 2>&1 | grep -E "^engine \|" | head -2
                done
                HEARTH_DECODE_LAYERS=$dl timeout 120 $B/hearth run "$m" "The quick brown fox jumps over the lazy dog." \
                    --temp 0 -n 200 --device cuda >/tmp/greedy$dl.txt 2>/dev/null
            done
            cmp -s /tmp/greedy0.txt /tmp/greedy1.txt && echo "$t greedy text identical" ||
                { echo "$t greedy text DIFFERS:"; head -c 600 /tmp/greedy1.txt; echo; head -c 600 /tmp/greedy0.txt; echo; }
        done ;;
    abprev)
        [ -x $B/bench_model_prev ] || { echo "device_run: no bench_model_prev packed"; continue; }
        for t in ${LAYERS_TYPES:-q4_0 q8_0 bf16}; do
            m=$(model "$t")
            for i in 1 2 3; do
                for b in bench_model_prev bench_model; do
                    hdr "$b $m --prompt 512 --gen 128 --prefill 512 --reps 1"
                    timeout 100 $B/$b "$m" --prompt 512 --gen 128 --prefill 512 --reps 1 2>&1 |
                        grep -E "^(decode|roofline|bench_model)"
                done
            done
        done ;;
    variants)
        names=$(cd $B && ls bench_model_* | grep -vxE "bench_model_(prev|st)" | sed 's/^bench_model_//')
        [ -n "$names" ] || { echo "device_run: no bench_model_NAME packed (pack_variants.sh)"; continue; }
        passed=
        for v in $names; do
            ok=1
            for g in 0 100; do
                hdr "HEARTH_DL_GRID=$g test_cuda_$v decode_layers"
                HEARTH_DL_GRID=$g timeout 60 $B/test_cuda_$v decode_layers 2>&1 | tail -3
                [ "${PIPESTATUS[0]}" = 0 ] || ok=0
            done
            [ $ok = 1 ] && passed="$passed $v" || echo "device_run: $v failed its test; not measured"
        done
        [ -n "$passed" ] || continue
        runs="bench_model_prev:"
        for v in $passed; do runs="$runs bench_model_$v:"; done
        for e in ${VARIANT_ENVS:-}; do
            case " $passed " in *" ${e%%:*} "*) runs="$runs bench_model_${e%%:*}:${e#*:}" ;; esac
        done
        for t in ${LAYERS_TYPES:-q4_0 q8_0 bf16}; do
            m=$(model "$t")
            for i in 1 2; do
                for r in $runs; do
                    b=${r%%:*} set=${r#*:}
                    hdr "$set $b $m --prompt 512 --gen 128 --prefill 512 --reps 1"
                    env $set timeout 60 $B/$b "$m" --prompt 512 --gen 128 --prefill 512 --reps 1 2>&1 |
                        grep -E "^(decode|bench_model)"
                done
            done
        done
        t=${LAYERS_TYPES:-q4_0}
        m=$(model "${t%% *}")
        for v in prev $passed; do
            [ -x $B/stamps_$v ] || continue
            hdr "stamps_$v $m --prompt 512 --gen 128 --prefill 512 --reps 1"
            timeout 60 $B/stamps_$v "$m" --prompt 512 --gen 128 --prefill 512 --reps 1 2>&1 |
                grep -E "^decode|^decode_layers stamps|^  "
        done ;;
    grid)
        for t in ${LAYERS_TYPES:-q4_0 q8_0 bf16}; do
            m=$(model "$t")
            for i in 1 2; do
                for set in HEARTH_DL_GRID=0 HEARTH_DL_GRID=${DL_GRID:-128}; do
                    hdr "$set bench_model $m --prompt 512 --gen 128 --prefill 512 --reps 1"
                    env $set timeout 60 $B/bench_model "$m" --prompt 512 --gen 128 --prefill 512 --reps 1 2>&1 |
                        grep -E "^(decode|bench_model)"
                done
            done
        done ;;
    cluster)
        hdr "bench_cluster --smem 0,200,220 --iters 2000"
        timeout 40 $B/bench_cluster --smem 0,200,220 --iters 2000 2>&1
        hdr "bench_cluster --smem 220 --iters 2000 --stream 0"
        timeout 20 $B/bench_cluster --smem 220 --iters 2000 --stream 0 2>&1 ;;
    dlstamps)
        first=
        for t in ${LAYERS_TYPES:-q4_0 q8_0 bf16}; do
            m=$(model "$t")
            first=${first:-$m}
            hdr "bench_model_st $m --prompt 512 --gen 128 --prefill 512 --reps 1"
            timeout 200 $B/bench_model_st "$m" --prompt 512 --gen 128 --prefill 512 --reps 1 2>&1 |
                grep -E "^decode|^roofline|^decode_layers stamps|^  "
        done
        hdr "bench_model_st $first --prompt 3000 --gen 64 --prefill 512 --reps 1"
        timeout 200 $B/bench_model_st "$first" --prompt 3000 --gen 64 --prefill 512 --reps 1 2>&1 |
            grep -E "^decode|^roofline|^decode_layers stamps|^  " ;;
    ceiling)
        for t in bf16 q8_0 q4_0; do
            for cfg in "--bpsm 1 --smem 192" "--bpsm 2 --smem 96"; do
                for st in 0 7; do
                    hdr "bench_persist --type $t $cfg --stall $st --reps 5"
                    timeout 60 $B/bench_persist --type $t $cfg --stall $st --reps 5 2>&1 | tail -11
                done
            done
        done ;;
    flash)
        hdr "test_cuda cuda_attention_flash"
        timeout 150 $B/test_cuda cuda_attention_flash 2>&1 | tail -8 ;;
    attn)
        for kv in f16 fp8; do
            hdr "bench_attn --kv $kv"
            timeout 90 $B/bench_attn --kv $kv --T 2048,512@1536,4096,1100@300 --reps 21 \
                --variants flash,flash-fa2 2>&1
        done ;;
    issue7)
        for t in bf16 q8_0 q4_0; do
            m=$(model $t)
            hdr "bench_model $m --prompt 512 --gen 128 --prefill 512,2048 --reps 3"
            timeout 150 $B/bench_model "$m" --prompt 512 --gen 128 --prefill 512,2048 --reps 3 2>&1 |
                grep -E "^(model|copy|prefill|decode|roofline)"
        done ;;
    issue6)
        m=$(model bf16)
        hdr "hearth bench --parallel 512 --prompt 1000 --gen 1000 --kv-type fp8"
        timeout 180 $B/hearth bench "$m" --device cuda --prompt 1000 --gen 1000 --parallel 512 --kv-type fp8 2>&1 |
            grep -E "^engine" ;;
    streams)
        m=$(model bf16)
        for pg in "128 128" "1000 1000"; do
            read -r P G <<<"$pg"
            for n in 1 8 64 256; do
                hdr "hearth bench --parallel $n --prompt $P --gen $G"
                timeout 120 $B/hearth bench "$m" --device cuda --prompt "$P" --gen "$G" --parallel "$n" 2>&1 |
                    grep -E "^engine \|" | head -2
            done
        done ;;
    quants)
        for f in cuda_matmul cuda_embed cuda_parity; do
            hdr "test_cuda $f (ok lines left out)"
            timeout 200 $B/test_cuda $f 2>&1 | grep -vE "^ok |^  layer |^  cuda (mistral|llama|qwen)" | tail -30
        done
        for t in q5_K_M iq4_xs q5_0 q3_K q2_K q5_1 iq4_nl q3_K_M; do
            m=$(model $t)
            hdr "bench_model $m --prompt 512 --gen 128 --prefill 2048 --reps 2"
            timeout 150 $B/bench_model "$m" --prompt 512 --gen 128 --prefill 2048 --reps 2 2>&1 |
                grep -E "^(model|copy|prefill|decode|roofline)"
        done ;;
    split46)
        for f in cuda_matmul cuda_embed cuda_parity cuda_layer; do
            hdr "test_cuda $f (ok lines left out)"
            timeout 240 $B/test_cuda $f 2>&1 | grep -vE "^ok |^  layer |^  cuda (mistral|llama|qwen)" | tail -30
        done
        for t in ${SPLIT46_TYPES:-q3_K q2_K q5_0 q5_1 iq4_nl}; do
            m=$(model $t)
            for split in 0 1; do
                hdr "HEARTH_SPLIT_ROWS=$split bench_model $m --prompt 512 --gen 128 --prefill 2048 --reps 2"
                HEARTH_SPLIT_ROWS=$split timeout 150 $B/bench_model "$m" --prompt 512 --gen 128 --prefill 2048 \
                    --reps 2 2>&1 | grep -E "^(copy|prefill|decode|roofline)"
            done
        done ;;
    two46)
        hdr "test_cuda cuda_layer_split_qkv_rope"
        timeout 240 $B/test_cuda cuda_layer_split_qkv_rope 2>&1 | grep -vE "^ok |^  layer " | tail -20
        for t in q5_K_M q3_K_M; do
            m=$(model $t)
            for two in 0 1 0 1; do
                hdr "HEARTH_MMV_TWO=$two bench_model $m --prompt 512 --gen 128 --prefill 512 --reps 2"
                HEARTH_MMV_TWO=$two timeout 150 $B/bench_model "$m" --prompt 512 --gen 128 --prefill 512 --reps 2 \
                    2>&1 | grep -E "^(copy|decode|roofline)"
            done
        done ;;
    quantpeer)
        [ -s .dev/llama.tar.xz ] || { echo "device_run: no .dev/llama.tar.xz (see the peer suite above)"; continue; }
        mkdir -p /tmp/lc && tar -C /tmp/lc -xJf .dev/llama.tar.xz
        hdr "peer_llamacpp.sh on Q5_K_M, IQ4_XS, Q5_0, Q3_K, Q2_K, Q5_1, IQ4_NL, Q3_K_M"
        timeout 500 bash tools/bench/peer_llamacpp.sh /tmp/lc "$(model q5_K_M)" "$(model iq4_xs)" "$(model q5_0)" \
            "$(model q3_K)" "$(model q2_K)" "$(model q5_1)" "$(model iq4_nl)" "$(model q3_K_M)" ;;
    session43)
        for f in engine pick; do
            hdr "test_cuda $f (ok lines left out)"
            timeout 200 $B/test_cuda $f 2>&1 | grep -vE "^ok |^  layer |^  cuda (mistral|llama|qwen)" | tail -30
        done
        m=$(model bf16)
        smp="--temp 0.8 --top-p 0.95 --top-k 40 --min-p 0.05"
        for n in 64 256; do
            for how in default host; do
                hdr "hearth bench --parallel $n --prompt 128 --gen 128 sampled ($how)"
                env $([ $how = host ] && echo HEARTH_PICK_TRUNCATE=0) timeout 100 $B/hearth bench "$m" --device cuda \
                    --prompt 128 --gen 128 --parallel "$n" $smp 2>&1 | grep -E "^engine \|" | head -2
            done
        done ;;
    sampled)
        hdr "bench_pick --reps 20"
        timeout 120 $B/bench_pick --reps 20
        m=$(model bf16)
        smp="--temp 0.8 --top-p 0.95 --top-k 40 --min-p 0.05"
        for n in 1 64 256; do
            for how in greedy device host; do
                hdr "hearth bench --parallel $n --prompt 128 --gen 128 ($how)"
                HEARTH_PICK_TRUNCATE=$([ $how = host ] && echo 0 || echo 1) timeout 120 $B/hearth bench "$m" \
                    --device cuda --prompt 128 --gen 128 --parallel "$n" $([ $how = greedy ] || echo "$smp") 2>&1 |
                    grep -E "^engine \|" | head -2
            done
        done ;;
    peer)
        [ -s .dev/llama.tar.xz ] || { echo "device_run: no .dev/llama.tar.xz (see the peer suite above)"; continue; }
        mkdir -p /tmp/lc && tar -C /tmp/lc -xJf .dev/llama.tar.xz
        hdr "peer_llamacpp.sh: llama-bench -fa on, pp512 / pp2048 at ubatch 512 and 2048, tg128 after 512"
        timeout 240 bash tools/bench/peer_llamacpp.sh /tmp/lc "$(model bf16)" "$(model q8_0)" "$(model q4_0)"
        hdr "llama-batched-bench 128 / 128 at 1, 8, 64, 256 streams (output tok/s = N x 128 / (T_PP + T_TG))"
        LD_LIBRARY_PATH=/tmp/lc/lib:/usr/local/cuda/lib64 timeout 150 /tmp/lc/bin/llama-batched-bench \
            -m "$(model bf16)" -ngl 99 -fa on -c 65536 -b 2048 -ub 512 -npp 128 -ntg 128 -npl 1,8,64,256 2>&1 |
            grep -E "^\||error"
        hdr "peer_torch.py --prefill 512,2048 --prompt 512 --gen 128 --reps 3 (PyTorch + transformers, bf16, sdpa)"
        timeout 200 python3 tools/bench/peer_torch.py --prefill 512,2048 --prompt 512 --gen 128 --reps 3 2>&1 |
            grep -E "^(torch|peer)" ;;
    lora)
        m=$(model bf16)
        [ -s /tmp/l8b-lora/adapter_model.safetensors ] || timeout 120 python3 tools/bench/make_lora_adapter.py \
            /tmp/l8b-lora --rank 16 --alpha 32
        for l in "" "--lora /tmp/l8b-lora" "" "--lora /tmp/l8b-lora"; do
            hdr "hearth bench --prompt 512 --gen 128 ${l:-(base)}"
            timeout 120 $B/hearth bench "$m" --device cuda --prompt 512 --gen 128 --reps 3 $l 2>&1 | grep -E "^model"
            hdr "hearth bench --parallel 64 --prompt 128 --gen 128 ${l:-(base)}"
            timeout 120 $B/hearth bench "$m" --device cuda --prompt 128 --gen 128 --parallel 64 $l 2>&1 |
                grep -E "^engine \|" | head -2
        done ;;
    train)
        hdr "test_cuda train"
        timeout 240 $B/test_cuda train 2>&1 | grep -v "^ok" | tail -40
        m=$(model bf16)
        python3 -c 'import json, random
r = random.Random(1)
with open("/tmp/t8b.jsonl", "w") as f:
    for _ in range(48):
        f.write(json.dumps({"text": " ".join("t%d" % r.randrange(300, 128000) for _ in range(600))}) + "\n")'
        for extra in "" "--pack 512" "--gradient-checkpointing"; do
            hdr "hearth train --device cuda, rank 16, 4 x 512 a step ${extra:-(packed)}"
            timeout 300 $B/hearth train "$m" --data /tmp/t8b.jsonl --out /tmp/o8b --steps 5 --batch 4 --max-len 512 \
                --rank 16 --alpha 32 --device cuda $extra 2>&1 | grep -E "^step|GiB|error|out of"
        done
        mkdir -p /tmp/py && for w in .dev/wheels/peft-*.whl .dev/wheels/accelerate-*.whl; do
            python3 -m zipfile -e "$w" /tmp/py; done
        for micro in 4 1; do
            hdr "PyTorch + PEFT, bf16, rank 16, 4 x 512 a step, $micro a forward"
            PYTHONPATH=/tmp/py timeout 300 python3 tools/bench/peer_train_torch_gpu.py --batch 4 --micro $micro \
                --steps 5 2>&1 | tail -6
        done ;;
    spec)
        [ -s models/SmolLM2-135M-Instruct.Q4_1.gguf ] || tools/bench/split_model.sh join
        hdr "spec_peer.py --only hearth (cuda)"
        timeout 300 python3 tools/bench/spec_peer.py --only hearth --bin $B/hearth --threads 16 --reps 3 --gen 200 \
            2>&1 | tail -12 ;;
    grammar)
        [ -s models/SmolLM2-135M-Instruct.Q4_1.gguf ] || tools/bench/split_model.sh join
        hdr "grammar_peer.py --only hearth (cuda)"
        timeout 300 python3 tools/bench/grammar_peer.py --only hearth --bin $B/hearth --threads 16 --reps 3 2>&1 |
            tail -8 ;;
    *) echo "device_run: unknown suite '$suite' (tests flash attn issue7 issue6 streams peer lora train spec grammar" \
            "sampled session43 quants quantpeer split46 two46 layers47 layers48 abprev variants dlstamps ceiling grid" \
            "cluster)" ;;
    esac
done
hdr done
