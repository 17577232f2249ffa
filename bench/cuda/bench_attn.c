/* bench_attn.c - attention alone on CUDA (Llama-3.1-8B shape: 32 query
 * heads, 8 kv heads, head_dim 128, f16 or e4m3 paged KV cache of 16-position
 * blocks as the server uses): the median device time of one attention op
 * over N runs (CUDA events: the context's profile mode puts an event pair
 * around each launch unit; see run_variant for how the host's launch latency
 * is taken out) and the TFLOP/s of the causal work it does, for each prefill
 * kernel variant. A measurement, never a test.
 *
 *   bench_attn [--T 512,2048,512@1536,256x1100] [--reps 21] [--window 0] [--hd 128]
 *              [--heads 32/8] [--kv f16|fp8] [--variants flash,flash-mt1,...]
 *
 * A case "T@P" is T new rows of one sequence after P cached positions
 * (512@1536 is the last chunk of a 2048-token prompt prefilled 512 at a
 * time); a case "NxP" is one decode step of N sequences, each a row at
 * position P (its blocks shuffled among the others'). Each variant runs in
 * its own child process, because the kernel switches (HEARTH_ATTN_PREFILL,
 * HEARTH_ATTN_FLASH_MT / _MINB, HEARTH_ATTN_PREFILL_HP, HEARTH_ATTN_ROWS_*)
 * are read once per process:
 *   flash          the default (f16 caches at head_dim 128 on an H100 / H200:
 *                  attention_flash_wg.cu; else attention_flash.cu)
 *   flash-fa2      attention_flash.cu, heads a block by size (HEARTH_ATTN_WG=0)
 *   flash-mt1      flash-fa2, one head a block, 2 blocks an SM
 *   flash-mt1-mb3  flash-fa2, one head a block, 3 blocks an SM (168 registers)
 *   flash-mt2      flash-fa2, two heads a block
 *   v7 / v7-hp1    the GQA kernel of attention_prefill.cu (2 / 1 heads a block)
 *   v4             the first tensor-core kernel
 *   rows-v1        batches of decode rows: the first tiled kernel (a thread per K row)
 *   rows-v2        batches of decode rows: the CUDA-core kernel with K read coalesced
 *                  (the default for 9+ rows is the tensor-core kernel, attention_rows_tc.cu)
 *   dec            batches of decode rows: the few-rows latency kernel (attention_decode.cu)
 * The op's time includes the flash-decoding launch that the prefill rows
 * skip (its blocks return at once), as the model pays it.
 * FLOPs: 4 * head_dim * heads * (positions each row attends), summed over
 * rows (the causal work; masked halves of diagonal tiles not counted). */
#include "core/fp8.h"
#include "core/half.h"
#include "ops/cuda/ops_cuda.h"
#include "bench_rand.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>


typedef struct {
    const char *name;
    const char *env[3][2]; /* variable, value */
} variant;

static const variant VARIANTS[] = {
    {"flash", {{NULL, NULL}}},
    {"flash-fa2", {{"HEARTH_ATTN_WG", "0"}}},
    {"flash-mt1", {{"HEARTH_ATTN_WG", "0"}, {"HEARTH_ATTN_FLASH_MT", "1"}}},
    {"flash-mt1-mb3", {{"HEARTH_ATTN_WG", "0"}, {"HEARTH_ATTN_FLASH_MT", "1"}, {"HEARTH_ATTN_FLASH_MINB", "3"}}},
    {"flash-mt2", {{"HEARTH_ATTN_WG", "0"}, {"HEARTH_ATTN_FLASH_MT", "2"}}},
    {"v7", {{"HEARTH_ATTN_PREFILL", "7"}}},
    {"v7-hp1", {{"HEARTH_ATTN_PREFILL", "7"}, {"HEARTH_ATTN_PREFILL_HP", "1"}}},
    {"v4", {{"HEARTH_ATTN_PREFILL", "1"}}},
    {"rows-v1", {{"HEARTH_ATTN_ROWS", "1"}}},
    {"rows-v2", {{"HEARTH_ATTN_ROWS", "2"}}},
    {"dec", {{"HEARTH_ATTN_ROWS_MIN", "1000000"}}},
};
enum { N_VARIANTS = sizeof VARIANTS / sizeof VARIANTS[0], MAX_CASES = 16, BS = 16, BURST = 8 };

typedef struct {
    int T, past, decode; /* decode: T sequences, one row each at position past */
} bcase;

static int case_ctx(const bcase *b) { return b->decode ? b->past + 1 : b->T + b->past; }
static int case_seqs(const bcase *b) { return b->decode ? b->T : 1; }

static int cmp_f(const void *a, const void *b) {
    float x = *(const float *)a, y = *(const float *)b;
    return (x > y) - (x < y);
}

/* Device time in ms of n attention ops issued back to back (one flush in
 * profile mode: an event pair around each op), from the profile table's
 * total line; -1 when the table has none. */
static float timed_ops(hearth_cuda_ctx *c, int n, float *out, const float *q, int T, const hearth_kv_view *kv,
                       const int32_t *seq, const int32_t *pos, int nh, int nkv, int hd, int window) {
    static char buf[8192];
    hearth_cuda_ctx_profile(c, 1);
    for (int i = 0; i < n; i++)
        hearth_cuda_ops.attention(c, out, q, T, kv, 0, seq, pos, nh, nkv, hd, 1.0f / sqrtf((float)hd), window);
    size_t len = hearth_cuda_ctx_profile_text(c, buf, sizeof buf - 1);
    buf[len] = 0;
    hearth_cuda_ctx_profile(c, 0);
    const char *t = strstr(buf, " total\n");
    if (!t) return -1.0f;
    while (t > buf && t[-1] != '\n') t--;
    return strtof(t, NULL);
}

/* Runs every case with the kernel the environment selects; 0 on success. */
static int run_variant(const variant *v, const bcase *cases, int n_cases, int reps, int window, int hd, int nh,
                       int nkv, int fp8) {
    int max_t = 0, max_ctx = 0, max_seqs = 0;
    for (int i = 0; i < n_cases; i++) {
        if (cases[i].T > max_t) max_t = cases[i].T;
        if (case_ctx(&cases[i]) > max_ctx) max_ctx = case_ctx(&cases[i]);
        if (case_seqs(&cases[i]) > max_seqs) max_seqs = case_seqs(&cases[i]);
    }
    hearth_err err = {0};
    hearth_cuda_ctx *c;
    if (hearth_cuda_ctx_new(&c, 0, max_t, nh * hd, max_ctx, &err) != HEARTH_OK) {
        fprintf(stderr, "bench_attn: %s\n", err.msg);
        return 1;
    }
    const hearth_ops *o = &hearth_cuda_ops;
    const int kv_dim = nkv * hd, mbps = (max_ctx + BS - 1) / BS, max_blocks = max_seqs * mbps,
              n_blocks = max_blocks + 3, esz = fp8 ? 1 : 2;
    const size_t kv_elems = (size_t)n_blocks * BS * kv_dim, qn = (size_t)max_t * nh * hd;
    uint8_t *hk = malloc(esz * kv_elems), *hv = malloc(esz * kv_elems);
    float *hq = malloc(4 * qn);
    int32_t *table = malloc(sizeof(int32_t) * (size_t)max_blocks), *hseq = calloc((size_t)max_t, 4),
            *hpos = malloc(4 * (size_t)max_t);
    for (size_t i = 0; i < kv_elems; i++) {
        if (fp8) {
            hk[i] = hearth_f32_to_e4m3(frand());
            hv[i] = hearth_f32_to_e4m3(frand());
        } else {
            ((uint16_t *)hk)[i] = hearth_f32_to_f16(frand());
            ((uint16_t *)hv)[i] = hearth_f32_to_f16(frand());
        }
    }
    for (size_t i = 0; i < qn; i++) hq[i] = 2.0f * frand();
    /* blocks in shuffled order, as a pool in use hands them out; sequence s
     * owns table entries [s * mbps, (s + 1) * mbps) */
    for (int i = 0; i < max_blocks; i++) table[i] = i;
    for (int i = max_blocks - 1; i > 0; i--) {
        int j = (int)(rnd() % (uint64_t)(i + 1)), t = table[i];
        table[i] = table[j];
        table[j] = t;
    }
    void *dk = o->alloc(c, esz * kv_elems), *dv = o->alloc(c, esz * kv_elems);
    float *dq = o->alloc(c, 4 * qn), *dout = o->alloc(c, 4 * qn);
    int32_t *dtable = o->alloc(c, sizeof(int32_t) * (size_t)max_blocks), *dseq = o->alloc(c, 4 * (size_t)max_t),
            *dpos = o->alloc(c, 4 * (size_t)max_t);
    int rc = 1;
    if (!dk || !dv || !dq || !dout || !dtable || !dseq || !dpos) {
        fprintf(stderr, "bench_attn: device allocation failed\n");
        goto done;
    }
    o->upload(c, dk, hk, esz * kv_elems);
    o->upload(c, dv, hv, esz * kv_elems);
    o->upload(c, dq, hq, 4 * qn);
    o->upload(c, dtable, table, sizeof(int32_t) * (size_t)max_blocks);
    void *kp[1] = {dk}, *vp[1] = {dv};
    hearth_kv_view view = {kp, vp, dtable, BS, mbps, kv_dim, n_blocks, fp8 ? HEARTH_DT_E4M3 : HEARTH_DT_F16, 1, 0, 0};
    for (int ci = 0; ci < n_cases; ci++) {
        const int T = cases[ci].T, past = cases[ci].past, dec = cases[ci].decode;
        view.one_seq = !dec; /* a lone prompt is marked so by the model */
        /* and its context length (it may cut a short chunk's positions in parts); decode cases keep 0, as
         * the figures of earlier sessions' logs were measured */
        view.ctx_len = dec ? 0 : past + T;
        double work = 0.0; /* positions attended, summed over rows */
        for (int t = 0; t < T; t++) {
            hseq[t] = dec ? t : 0;
            hpos[t] = dec ? past : past + t;
            int lo = window > 0 && hpos[t] - window + 1 > 0 ? hpos[t] - window + 1 : 0;
            work += hpos[t] - lo + 1;
        }
        o->upload(c, dpos, hpos, 4 * (size_t)T);
        o->upload(c, dseq, hseq, 4 * (size_t)T);
        /* one op alone carries the host's launch latency (the GPU idles
         * until the kernel arrives); in a run of 1 + BURST ops the others
         * queue behind the first, so (t(1 + BURST) - t(1)) / BURST is the
         * device time of one op, as in a graph replay */
        float ms[256], one[256];
        int n = reps < 256 ? reps : 256, ok = 1;
        for (int r = 0; r < 3; r++) timed_ops(c, 1 + BURST, dout, dq, T, &view, dseq, dpos, nh, nkv, hd, window);
        for (int r = 0; r < n; r++) {
            one[r] = timed_ops(c, 1, dout, dq, T, &view, dseq, dpos, nh, nkv, hd, window);
            float b = timed_ops(c, 1 + BURST, dout, dq, T, &view, dseq, dpos, nh, nkv, hd, window);
            ms[r] = (b - one[r]) / BURST;
            if (one[r] < 0.0f || b < 0.0f) ok = 0;
        }
        if (hearth_cuda_ctx_error(c, &err) != HEARTH_OK) {
            fprintf(stderr, "bench_attn: %s: %s\n", v->name, err.msg);
            goto done;
        }
        if (!ok) {
            fprintf(stderr, "bench_attn: no profile total\n");
            goto done;
        }
        qsort(ms, (size_t)n, sizeof ms[0], cmp_f);
        qsort(one, (size_t)n, sizeof one[0], cmp_f);
        const double us = 1e3 * ms[n / 2], flop = 4.0 * hd * nh * work;
        /* bytes: each row's K and V positions, read once per kv head */
        const double bytes = 2.0 * esz * kv_dim * (dec ? work : (double)(T + past));
        printf("%-14s %s %5d %s %5d window %4d  %8.1f us  %6.1f TFLOP/s  %6.0f GB/s KV   (one op alone %8.1f us)\n",
               v->name, dec ? "rows" : "T   ", T, dec ? "at  " : "past", past, window, us,
               flop / (us * 1e-6) / 1e12, bytes / (us * 1e-6) / 1e9, 1e3 * one[n / 2]);
    }
    rc = 0;
done:
    o->free(c, dk);
    o->free(c, dv);
    o->free(c, dq);
    o->free(c, dout);
    o->free(c, dtable);
    o->free(c, dseq);
    o->free(c, dpos);
    free(hk);
    free(hv);
    free(hq);
    free(table);
    free(hseq);
    free(hpos);
    hearth_cuda_ctx_free(c);
    return rc;
}

int main(int argc, char **argv) {
    const char *t_arg = "512,2048,512@1536", *v_arg = "flash,flash-mt1,flash-mt1-mb3,flash-mt2,v7,v7-hp1,v4";
    int reps = 21, window = 0, hd = 128, nh = 32, nkv = 8, fp8 = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--T") && i + 1 < argc) t_arg = argv[++i];
        else if (!strcmp(argv[i], "--reps") && i + 1 < argc) reps = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--window") && i + 1 < argc) window = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--hd") && i + 1 < argc) hd = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--heads") && i + 1 < argc && sscanf(argv[i + 1], "%d/%d", &nh, &nkv) == 2) i++;
        else if (!strcmp(argv[i], "--variants") && i + 1 < argc) v_arg = argv[++i];
        else if (!strcmp(argv[i], "--kv") && i + 1 < argc && (!strcmp(argv[i + 1], "f16") || !strcmp(argv[i + 1], "fp8")))
            fp8 = !strcmp(argv[++i], "fp8");
        else {
            fprintf(stderr, "usage: bench_attn [--T 512,2048,512@1536] [--reps N] [--window W] [--hd 64|128] "
                            "[--heads 32/8] [--kv f16|fp8] [--variants flash,v7,...]\n");
            return 2;
        }
    }
    if (reps < 1 || window < 0 || (hd != 64 && hd != 128) || nh < 1 || nkv < 1 || nh % nkv) {
        fprintf(stderr, "bench_attn: need --reps >= 1, --window >= 0, --hd 64 or 128, heads a multiple of kv heads\n");
        return 2;
    }
    bcase cases[MAX_CASES];
    int n_cases = 0;
    char buf[256];
    snprintf(buf, sizeof buf, "%s", t_arg);
    for (char *s = strtok(buf, ","); s && n_cases < MAX_CASES; s = strtok(NULL, ",")) {
        bcase b = {atoi(s), 0, 0};
        const char *at = strchr(s, '@'), *x = strchr(s, 'x');
        if (at) b.past = atoi(at + 1);
        if (x) b.past = atoi(x + 1), b.decode = 1;
        if (b.T < (b.decode ? 1 : 9) || b.past < 0) {
            fprintf(stderr, "bench_attn: case %s: need T >= 9 prefill rows (or N >= 1 decode rows) and P >= 0\n", s);
            return 2;
        }
        cases[n_cases++] = b;
    }
    printf("attention, %d/%d heads, head_dim %d, %s KV (blocks of %d), median of %d\n", nh, nkv, hd, fp8 ? "e4m3" : "f16",
           BS, reps);
    fflush(stdout);
    int rc = 0;
    snprintf(buf, sizeof buf, "%s", v_arg);
    char *save = NULL;
    for (char *s = strtok_r(buf, ",", &save); s; s = strtok_r(NULL, ",", &save)) {
        const variant *v = NULL;
        for (int i = 0; i < N_VARIANTS; i++)
            if (!strcmp(s, VARIANTS[i].name)) v = &VARIANTS[i];
        if (!v) {
            fprintf(stderr, "bench_attn: unknown variant %s\n", s);
            rc = 2;
            continue;
        }
        /* a child per variant: the switches are read once per process */
        pid_t pid = fork();
        if (pid < 0) {
            perror("bench_attn: fork");
            return 1;
        }
        if (pid == 0) {
            unsetenv("HEARTH_ATTN_PREFILL");
            unsetenv("HEARTH_ATTN_PREFILL_HP");
            unsetenv("HEARTH_ATTN_FLASH_MT");
            unsetenv("HEARTH_ATTN_FLASH_MINB");
            unsetenv("HEARTH_ATTN_ROWS");
            unsetenv("HEARTH_ATTN_ROWS_MIN");
            for (int e = 0; e < 3 && v->env[e][0]; e++) setenv(v->env[e][0], v->env[e][1], 1);
            int r = run_variant(v, cases, n_cases, reps, window, hd, nh, nkv, fp8);
            fflush(stdout);
            _exit(r);
        }
        int st = 0;
        waitpid(pid, &st, 0);
        if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) rc = 1;
    }
    return rc;
}
