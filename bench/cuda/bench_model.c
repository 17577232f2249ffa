/* bench_model.c - a whole model on CUDA through hearth_model_forward:
 * prefill tokens/s at each prompt length, decode tokens/s at batch 1 after
 * a prompt (greedy, the pick op on the device as the server runs it), and the decode roofline from the
 * device-to-device copy bandwidth measured in the same run. A measurement,
 * never a test.
 *
 *   bench_model MODEL [--prompt 512] [--gen 128] [--prefill 512,2048] [--reps 3]
 *                     [--kv f16|f32|fp8] [--no-graphs] [--no-pdl] [--no-fusion] [--profile] [--ahead 0|1]
 *
 * --kv picks the KV cache's element type (default f16, as the server).
 *
 * --profile adds, after the timed runs, the device time of every launch unit
 * (hearth_cuda_ctx_profile) over 16 decode steps and over one prefill of each
 * length; profiled runs are eager and serialised, so only their shares mean
 * something, not their sum.
 *
 * Bytes per token = every matrix the decoder reads once per token (all layer
 * weights and the output head; of the embedding only one row) plus the norms,
 * and, listed apart, the KV cache read at the decode positions (2 or 4
 * bytes an element). */
#include "engine/kv.h"
#include "model/model_internal.h"
#include "ops/cuda/ops_cuda.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static int argmax(const float *x, int n) {
    int b = 0;
    for (int i = 1; i < n; i++)
        if (x[i] > x[b]) b = i;
    return b;
}

static size_t wbytes(const hearth_weight *w) { return w->row_bytes * (size_t)w->rows; }

int main(int argc, char **argv) {
    const char *path = NULL, *prefill_arg = "512,2048";
    int n_prompt = 512, n_gen = 128, reps = 3, graphs = 1, pdl = 1, fusion = 1, profile = 0, ahead = 1;
    hearth_dtype kv_type = HEARTH_DT_F16;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--prompt") && i + 1 < argc) n_prompt = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--gen") && i + 1 < argc) n_gen = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--prefill") && i + 1 < argc) prefill_arg = argv[++i];
        else if (!strcmp(argv[i], "--reps") && i + 1 < argc) reps = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--kv") && i + 1 < argc && !strcmp(argv[i + 1], "f16")) kv_type = HEARTH_DT_F16, i++;
        else if (!strcmp(argv[i], "--kv") && i + 1 < argc && !strcmp(argv[i + 1], "f32")) kv_type = HEARTH_DT_F32, i++;
        else if (!strcmp(argv[i], "--kv") && i + 1 < argc && !strcmp(argv[i + 1], "fp8")) kv_type = HEARTH_DT_E4M3, i++;
        else if (!strcmp(argv[i], "--no-graphs")) graphs = 0;
        else if (!strcmp(argv[i], "--no-pdl")) pdl = 0;
        else if (!strcmp(argv[i], "--no-fusion")) fusion = 0;
        else if (!strcmp(argv[i], "--profile")) profile = 1;
        else if (!strcmp(argv[i], "--ahead") && i + 1 < argc) ahead = atoi(argv[++i]) != 0;
        else if (argv[i][0] != '-' && !path) path = argv[i];
        else {
            fprintf(stderr, "usage: bench_model MODEL [--prompt N] [--gen N] [--prefill A,B] [--reps N] "
                            "[--kv f16|f32|fp8] [--no-graphs] [--no-pdl] [--no-fusion] [--profile] [--ahead 0|1]\n");
            return 2;
        }
    }
    if (!path || n_prompt < 1 || n_gen < 16) {
        fprintf(stderr, "bench_model: need a MODEL, --prompt >= 1, --gen >= 16\n");
        return 2;
    }
    int max_prefill = n_prompt;
    {
        char b[128];
        snprintf(b, sizeof b, "%s", prefill_arg);
        for (char *s = strtok(b, ","); s; s = strtok(NULL, ","))
            if (atoi(s) > max_prefill) max_prefill = atoi(s);
    }
    hearth_err err = {0};
    hearth_model_config cfg;
    if (hearth_model_peek_config(path, &cfg, &err)) {
        fprintf(stderr, "bench_model: %s\n", err.msg);
        return 1;
    }
    int cols = cfg.intermediate_size > cfg.hidden_size ? cfg.intermediate_size : cfg.hidden_size;
    if (cfg.n_heads * cfg.head_dim > cols) cols = cfg.n_heads * cfg.head_dim;
    int max_ctx = max_prefill > n_prompt + n_gen ? max_prefill : n_prompt + n_gen;
    max_ctx = (max_ctx + 16 + 15) / 16 * 16;
    hearth_cuda_ctx *c;
    if (hearth_cuda_ctx_new(&c, 0, max_prefill, cols, max_ctx, &err)) {
        fprintf(stderr, "bench_model: %s\n", err.msg);
        return 1;
    }
    hearth_cuda_ctx_set_graphs(c, graphs);
    hearth_cuda_ctx_set_pdl(c, pdl);
    hearth_cuda_ctx_set_fusion(c, fusion);
    const hearth_ops *o = &hearth_cuda_ops;
    double bw = hearth_cuda_copy_bandwidth(c, (size_t)1 << 31, 21);

    double t0 = now_s();
    hearth_model *m;
    if (hearth_model_load(&m, path, o, c, max_prefill, 1, &err)) {
        fprintf(stderr, "bench_model: %s\n", err.msg);
        return 1;
    }
    double load_s = now_s() - t0;
    const hearth_model_config *mc = hearth_model_config_get(m);
    hearth_kv *kv;
    if (hearth_kv_new(&kv, o, c, mc->n_layers, hearth_model_kv_dim(m), mc->head_dim, kv_type, 16, max_ctx / 16, 1,
                      max_ctx, &err)) {
        fprintf(stderr, "bench_model: %s\n", err.msg);
        return 1;
    }
    /* bytes one decode step reads */
    size_t tok = 0;
    for (int l = 0; l < mc->n_layers; l++) {
        const hearth_layer_weights *L = &m->layers[l];
        tok += wbytes(&L->wq) + wbytes(&L->wk) + wbytes(&L->wv) + wbytes(&L->wo) + wbytes(&L->w_gate) +
               wbytes(&L->w_up) + wbytes(&L->w_down) + 2 * 4 * (size_t)mc->hidden_size;
    }
    tok += wbytes(&m->output) + m->tok_embd.row_bytes + 4 * (size_t)mc->hidden_size;
    int ctx_mid = n_prompt + n_gen / 2;
    double kv_bytes = 2.0 * mc->n_layers * ctx_mid * (double)hearth_model_kv_dim(m) * hearth_dtype_get(kv_type)->block_bytes;

    printf("model %s: %s, %d layers, hidden %d, ffn %d, heads %d/%d, vocab %d; %.2f GB of weights, loaded in %.1f s\n",
           path, mc->arch, mc->n_layers, mc->hidden_size, mc->intermediate_size, mc->n_heads, mc->n_kv_heads,
           mc->vocab_size, hearth_model_weight_bytes(m) / 1e9, load_s);
    printf("copy bandwidth %.0f GB/s; graphs %s, PDL %s, fusion %s; KV cache %s\n", bw, graphs ? "on" : "off",
           pdl ? "on" : "off", fusion ? "on" : "off", hearth_dtype_get(kv_type)->name);

    int vocab = mc->vocab_size;
    int32_t *ids = malloc(sizeof(int32_t) * (size_t)max_ctx), *seq = calloc((size_t)max_ctx, sizeof(int32_t)),
            *pos = malloc(sizeof(int32_t) * (size_t)max_ctx);
    float *logits = malloc(sizeof(float) * (size_t)vocab);
    uint64_t r = 12345;
    for (int i = 0; i < max_ctx; i++) {
        r = r * 6364136223846793005ull + 1442695040888963407ull;
        ids[i] = (int32_t)((r >> 33) % (uint64_t)vocab);
        pos[i] = i;
    }

    /* prefill: one forward of P tokens, logits of the last one */
    char b[128];
    snprintf(b, sizeof b, "%s", prefill_arg);
    for (char *s = strtok(b, ","); s; s = strtok(NULL, ",")) {
        int P = atoi(s);
        if (P < 1 || P > max_prefill) continue;
        double best = 1e30;
        for (int rep = 0; rep < reps + 1; rep++) {
            if (hearth_kv_reserve(kv, 0, P)) {
                fprintf(stderr, "bench_model: kv reserve %d\n", P);
                return 1;
            }
            int32_t last = P - 1;
            double a = now_s();
            if (hearth_model_forward(m, kv, ids, seq, pos, P, &last, 1, logits, &err)) {
                fprintf(stderr, "bench_model: %s\n", err.msg);
                return 1;
            }
            double dt = now_s() - a;
            if (rep > 0 && dt < best) best = dt; /* the first run warms up cuBLAS */
            hearth_kv_release_slot(kv, 0);
        }
        printf("prefill %5d tokens: %8.1f ms  %8.0f tok/s\n", P, best * 1e3, P / best);
    }

    /* decode after a prompt */
    if (hearth_kv_reserve(kv, 0, n_prompt + n_gen)) {
        fprintf(stderr, "bench_model: kv reserve\n");
        return 1;
    }
    int32_t last = n_prompt - 1;
    if (hearth_model_forward(m, kv, ids, seq, pos, n_prompt, &last, 1, logits, &err)) {
        fprintf(stderr, "bench_model: %s\n", err.msg);
        return 1;
    }
    int32_t next = argmax(logits, vocab), row0 = 0;
    int warm = 8;
    double ta = 0;
    /* each token as the server picks it: greedy by the pick op on the device, its pick downloaded; with
     * --ahead 1 (the server's default on a GPU) step i + 1 is issued before step i's pick is read, its token
     * the one the pick left on the device */
    hearth_pick_params pp = {0};
    hearth_pick pk[2];
    hearth_cuda_stats st0 = {0};
    for (int i = 0; i < n_gen; i++) {
        if (i == warm) {
            ta = now_s();
            hearth_cuda_ctx_stats(c, &st0);
        }
        int32_t p = n_prompt + i;
        if (hearth_model_forward(m, kv, ahead && i > 0 ? NULL : &next, seq, &p, 1, &row0, 1, NULL, &err) ||
            hearth_model_pick_begin(m, 1, &pp, &pk[i % 2], &err)) {
            fprintf(stderr, "bench_model: %s\n", err.msg);
            return 1;
        }
        if (!ahead || i > 0) hearth_model_pick_end(m); /* step i's pick, or with ahead step i - 1's */
        next = pk[i % 2].id;
    }
    if (ahead) hearth_model_pick_end(m);
    double dec = (now_s() - ta) / (n_gen - warm);
#ifdef HEARTH_ATTN_STAMPS
    { /* a measurement build: the decode attention's steps (attention_decode.cu) */
        extern void cu_attn_stamps_print(void);
        cu_attn_stamps_print();
    }
#endif
#ifdef HEARTH_DL_STAMPS
    { /* and decode_layers' steps (decode_layers.cu), its last launch */
        extern void cu_dl_stamps_print(void);
        cu_dl_stamps_print();
    }
#endif
    hearth_err e2 = {0};
    if (hearth_cuda_ctx_error(c, &e2) != HEARTH_OK) {
        fprintf(stderr, "bench_model: %s\n", e2.msg);
        return 1;
    }
    hearth_cuda_stats st;
    hearth_cuda_ctx_stats(c, &st);
    double roof_w = bw * 1e9 / (double)tok, roof_wkv = bw * 1e9 / ((double)tok + kv_bytes);
    printf("decode (batch 1, after %d prompt tokens, %d steps timed%s): %.3f ms/token  %.1f tok/s\n", n_prompt,
           n_gen - warm, ahead ? ", one ahead" : "", dec * 1e3, 1.0 / dec);
    printf("bytes per token: weights %.3f GB, %s KV at position %d %.3f GB\n", tok / 1e9,
           kv_type == HEARTH_DT_F16 ? "f16" : "f32", ctx_mid, kv_bytes / 1e9);
    printf("roofline (copy bandwidth / bytes): weights only %.0f tok/s -> %.1f%%; weights + KV %.0f tok/s -> %.1f%%\n",
           roof_w, 100.0 / dec / roof_w, roof_wkv, 100.0 / dec / roof_wkv);
    printf("recorder: %ld flushes, %ld graph captures, %ld graph replays, %ld ops recorded\n", st.flushes,
           st.graph_captures, st.graph_replays, st.ops_recorded);
    /* the host's time a token besides waiting for the device: finding the step's graph and launching it
     * (issuing), and the rest (recording the ops, the loop); at batch 1 the device idles through it */
    const double per = 1e6 / (n_gen - warm), issue = (st.issue_s - st0.issue_s) * per,
                 wait = (st.wait_s - st0.wait_s) * per;
    printf("host a token: %.1f us issuing (%.1f in the launch calls), %.1f us waiting, %.1f us else\n", issue,
           (st.launch_s - st0.launch_s) * per, wait, dec * 1e6 - issue - wait);
    if (profile) {
        static char text[16384];
        /* 16 more decode steps (positions after the timed ones) */
        hearth_cuda_ctx_profile(c, 1);
        for (int i = 0; i < 16 && n_prompt + n_gen + i < max_ctx; i++) {
            int32_t p = n_prompt + n_gen + i;
            if (hearth_kv_reserve(kv, 0, p + 1) || hearth_model_forward(m, kv, &next, seq, &p, 1, &row0, 1, logits, &err))
                break;
            next = argmax(logits, vocab);
        }
        hearth_cuda_ctx_profile_text(c, text, sizeof text);
        printf("\nprofile: 16 decode steps (device time per launch unit, eager, serialised)\n%s", text);
        hearth_kv_release_slot(kv, 0);
        snprintf(b, sizeof b, "%s", prefill_arg);
        for (char *s = strtok(b, ","); s; s = strtok(NULL, ",")) {
            int P = atoi(s);
            if (P < 1 || P > max_prefill || hearth_kv_reserve(kv, 0, P)) continue;
            int32_t lastp = P - 1;
            hearth_cuda_ctx_profile(c, 1);
            if (hearth_model_forward(m, kv, ids, seq, pos, P, &lastp, 1, logits, &err)) break;
            hearth_cuda_ctx_profile_text(c, text, sizeof text);
            printf("\nprofile: prefill %d\n%s", P, text);
            hearth_kv_release_slot(kv, 0);
        }
        hearth_cuda_ctx_profile(c, 0);
    }
    hearth_kv_free(kv);
    hearth_model_free(m);
    hearth_cuda_ctx_free(c);
    free(ids);
    free(seq);
    free(pos);
    free(logits);
    return 0;
}
