/* bench_attn_cpu.c - times the CPU backend's paged attention
 * (hearth_cpu_ops.attention) at decode (one row over a long context, and 16
 * rows of 16 sequences) and prefill (a causal prompt) shapes, for a small
 * model's heads (9 / 3, head dim 64: SmolLM2-135M) and an 8B's (32 / 8, head
 * dim 128), and prints us a call and the GB/s of K and V it reads. Each
 * figure is the best of many short batches, as in bench_matmul. With
 * `-l L` the calls go through L layers' caches in turn, as a forward does:
 * with L = 30 a small-model decode reads its K and V from DRAM, not from
 * the caches that one layer's 3 MB fits in.
 *
 *   build/bench_attn_cpu [-t threads] [-i scalar|avx2|avx512] [--kv f32|f16] [-s seconds] [-l layers] [--rows]
 *
 * Prints and measures; passes or fails nothing. */
#include "core/clock.h"
#include "core/half.h"
#include "ops/cpu/matmul_impl.h"
#include "ops/cpu/ops_cpu.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { BS = 16 };

typedef struct {
    const char *name;
    int nh, nkv, hd;
    int T, ctx, seqs; /* T rows; decode rows are at position ctx - 1 of seqs sequences, prefill rows 0..T-1 */
} att_case;

typedef struct {
    hearth_cpu_ctx *c;
    const att_case *k;
    hearth_kv_view kv;
    float *q, *out;
    int32_t *seq, *pos;
    int layers, layer; /* the caches a call goes through in turn, the next one */
} att_call;

static void run(att_call *a) {
    hearth_cpu_ops.attention(a->c, a->out, a->q, a->k->T, &a->kv, a->layer, a->seq, a->pos, a->k->nh, a->k->nkv,
                             a->k->hd, 0.125f, 0);
    a->layer = (a->layer + 1) % a->layers;
}

static double best_time(att_call *a, double secs) {
    run(a); /* warm */
    double best = 1e30, start = hearth_time_now();
    int batch = 1;
    while (hearth_time_now() - start < secs) {
        double t0 = hearth_time_now();
        for (int i = 0; i < batch; i++) run(a);
        double per = (hearth_time_now() - t0) / batch;
        if (per < best) best = per;
        if (per * batch < 2e-3 && batch < (1 << 16)) batch *= 2;
    }
    return best;
}

int main(int argc, char **argv) {
    int threads = 0, isa = HEARTH_CPU_ISA_AUTO, layers = 1, heads = 1;
    double secs = 1.0;
    hearth_dtype kvt = HEARTH_DT_F32;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "-t") && i + 1 < argc) threads = atoi(argv[++i]);
        else if (!strcmp(argv[i], "-s") && i + 1 < argc) secs = atof(argv[++i]);
        else if (!strcmp(argv[i], "-l") && i + 1 < argc && atoi(argv[i + 1]) > 0) layers = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--rows")) heads = 0;
        else if (!strcmp(argv[i], "-i") && i + 1 < argc) {
            const char *v = argv[++i];
            isa = !strcmp(v, "scalar") ? HEARTH_CPU_ISA_SCALAR : !strcmp(v, "avx2") ? HEARTH_CPU_ISA_AVX2
                  : !strcmp(v, "avx512")                    ? HEARTH_CPU_ISA_AVX512
                                                            : -2;
            if (isa == -2 || !hearth_cpu_isa_force(isa)) {
                fprintf(stderr, "bench_attn_cpu: ISA '%s' is not available here\n", v);
                return 2;
            }
        } else if (!strcmp(argv[i], "--kv") && i + 1 < argc) {
            const char *v = argv[++i];
            if (!strcmp(v, "f16")) kvt = HEARTH_DT_F16;
            else if (strcmp(v, "f32")) {
                fprintf(stderr, "bench_attn_cpu: --kv takes f32 or f16, not '%s'\n", v);
                return 2;
            }
        } else {
            fprintf(stderr,
                    "usage: %s [-t threads] [-i scalar|avx2|avx512] [--kv f32|f16] [-s seconds] [-l layers] [--rows]\n",
                    argv[0]);
            return 2;
        }
    }
    static const att_case cases[] = {
        {"small decode 1 x 512", 9, 3, 64, 1, 512, 1},       {"small decode 1 x 4096", 9, 3, 64, 1, 4096, 1},
        {"small decode 16 x 1024", 9, 3, 64, 16, 1024, 16}, {"small prefill 512", 9, 3, 64, 512, 512, 1},
        {"8B decode 1 x 4096", 32, 8, 128, 1, 4096, 1},      {"8B prefill 512", 32, 8, 128, 512, 512, 1},
    };
    const int max_ctx = 4096, max_t = 512;
    hearth_cpu_ctx *c;
    hearth_err err = {0};
    if (hearth_cpu_ctx_new(&c, threads, max_t, 4096, max_ctx, &err) != HEARTH_OK) {
        fprintf(stderr, "bench_attn_cpu: %s\n", err.msg);
        return 1;
    }
    char tdesc[32];
    if (threads > 0) snprintf(tdesc, sizeof tdesc, "%d threads", threads);
    else snprintf(tdesc, sizeof tdesc, "a thread per core");
    printf("isa %s, %s KV in %s, %s, %d layer%s\n", hearth_cpu_isa_name(hearth_cpu_isa_current()),
           kvt == HEARTH_DT_F16 ? "f16" : "f32", heads ? "head blocks" : "rows", tdesc, layers, layers == 1 ? "" : "s");
    printf("%-24s %12s %10s\n", "case", "us a call", "KV GB/s");
    for (size_t ci = 0; ci < sizeof cases / sizeof cases[0]; ci++) {
        const att_case *k = &cases[ci];
        const int kvd = k->nkv * k->hd, nb_seq = max_ctx / BS, nb = nb_seq * k->seqs;
        const size_t esz = kvt == HEARTH_DT_F16 ? 2 : 4, n = (size_t)nb * BS * kvd;
        void **kp = malloc(sizeof(void *) * (size_t)layers), **vp = malloc(sizeof(void *) * (size_t)layers);
        int32_t *table = malloc(sizeof(int32_t) * (size_t)nb);
        att_call a = {c, k, {0}, malloc(sizeof(float) * (size_t)k->T * k->nh * k->hd),
                      malloc(sizeof(float) * (size_t)k->T * k->nh * k->hd), malloc(sizeof(int32_t) * (size_t)k->T),
                      malloc(sizeof(int32_t) * (size_t)k->T), layers, 0};
        for (int l = 0; l < layers; l++) {
            void *kb = kp[l] = malloc(n * esz), *vb = vp[l] = malloc(n * esz);
            for (size_t i = 0; i < n; i++) {
                float x = (float)((i * 2654435761u) % 1000) / 1000.0f - 0.5f;
                if (kvt == HEARTH_DT_F16) ((uint16_t *)kb)[i] = ((uint16_t *)vb)[i] = hearth_f32_to_f16(x);
                else ((float *)kb)[i] = ((float *)vb)[i] = x;
            }
        }
        for (int i = 0; i < nb; i++) table[i] = (int32_t)((i * 7 + 3) % nb); /* scattered blocks */
        for (size_t i = 0; i < (size_t)k->T * k->nh * k->hd; i++) a.q[i] = (float)(i % 17) / 17.0f - 0.5f;
        for (int t = 0; t < k->T; t++) {
            a.seq[t] = k->seqs > 1 ? t : 0;
            a.pos[t] = k->T == 1 || k->seqs > 1 ? k->ctx - 1 : t;
        }
        a.kv = (hearth_kv_view){kp, vp, table, BS, nb_seq, kvd, nb, kvt, 0, 0, heads ? k->hd : 0};
        double per = best_time(&a, secs);
        double pos_read = 0; /* positions of K and V each row attends (a prefill reads its prefix once a row) */
        for (int t = 0; t < k->T; t++) pos_read += a.pos[t] + 1;
        printf("%-24s %12.1f %10.1f\n", k->name, per * 1e6, pos_read * 2 * kvd * esz / per / 1e9);
        for (int l = 0; l < layers; l++) free(kp[l]), free(vp[l]);
        free(kp), free(vp), free(table), free(a.q), free(a.out), free(a.seq), free(a.pos);
    }
    hearth_cpu_ctx_free(c);
    return 0;
}
