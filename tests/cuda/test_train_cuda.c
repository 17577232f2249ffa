/* test_train_cuda.c - the CUDA training ops (hearth_cuda_ops.train) against
 * the CPU's (hearth_cpu_ops.train), op family by op family (make test-cuda;
 * needs an NVIDIA GPU).
 *
 * Every check draws fresh random inputs (the seed is printed;
 * HEARTH_TEST_SEED repeats a run), poisons device outputs with NaN before
 * the op runs (where the op overwrites them), and compares with the CPU on
 * the same inputs. Tolerances, as max|cuda - cpu| / max|cpu| over an output:
 *   f32 products (gemm, matmul_t over an F32 copy, attention and its
 *     backward): 1e-5 (f32 sums in another order on both sides; no TF32);
 *   matmul_t over a BF16 copy (bf16, f16 and quantized weights): 1e-2, since
 *     the GPU rounds dy (and a quantized or f16 weight) to bf16, 8 significant
 *     bits, a relative error up to 2^-9 an element, where the CPU multiplies
 *     f32 dy by the f32 dequantized weight; over a few hundred products of
 *     random sign that is ~2e-3 of the largest output;
 *   rmsnorm and its backward, rope, swiglu_bwd, the loss's gradient: 1e-5
 *     (libm's and CUDA's expf, sinf, cosf differ by an ulp or two);
 *   axpy, adamw's moments: 1e-6 (each rounding as the CPU's; in practice equal); adamw's update w' - w:
 *     1e-2 (an ulp of w is up to ~1e-3 of the largest update);
 *   gather / scatter / zero: exact; the loss (double): 1e-6 absolute;
 *   sumsq (double): 1e-10 relative. */
#include "cuda_rig.h"

#include "ops/cpu/quant.h"

#include <math.h>

static const hearth_train_ops *TCU, *TCPU;

static int setup(void) {
    if (g_cu) return 1;
    if (!rig_contexts(64, 4096, 1024)) return 0;
    TCU = CU->train;
    TCPU = CPU->train;
    if (!TCU || !TCPU) {
        test_fail(__FILE__, __LINE__, "no train table: cuda %p, cpu %p", (const void *)TCU, (const void *)TCPU);
        return 0;
    }
    return 1;
}
#define NEED_GPU()                                                                 \
    do {                                                                           \
        if (!setup()) return;                                                      \
    } while (0)

/* ---- buffers ------------------------------------------------------------------ */

static float *copy_vec(const float *x, size_t n) {
    float *v = malloc(sizeof(float) * n);
    memcpy(v, x, sizeof(float) * n);
    return v;
}

/* max|a - b| / max|b|; infinity when a NaN appears on either side. */
static double rel_err(const float *a, const float *b, size_t n) {
    double md = 0.0, mb = 0.0;
    for (size_t i = 0; i < n; i++) {
        if (isnan(a[i]) || isnan(b[i])) return INFINITY;
        double d = fabs((double)a[i] - b[i]);
        if (d > md) md = d;
        if (fabs(b[i]) > mb) mb = fabs(b[i]);
    }
    return md / (mb > 0.0 ? mb : 1.0);
}

/* max|a - b| / max(max|b|, floor) of device buffer d (n floats) against host want. */
static double dev_err_floor(const float *d, const float *want, size_t n, double floor) {
    float *got = malloc(sizeof(float) * n);
    down(got, d, sizeof(float) * n);
    double md = 0.0, mb = floor;
    for (size_t i = 0; i < n; i++) {
        if (isnan(got[i])) md = INFINITY;
        md = fmax(md, fabs((double)got[i] - want[i]));
        mb = fmax(mb, fabs(want[i]));
    }
    free(got);
    return md / (mb > 0.0 ? mb : 1.0);
}

/* rel_err of device buffer d (n floats) against host want. */
static double dev_err(const float *d, const float *want, size_t n) {
    float *got = malloc(sizeof(float) * n);
    down(got, d, sizeof(float) * n);
    double e = rel_err(got, want, n);
    free(got);
    return e;
}


/* ---- gemm ------------------------------------------------------------------------ */

/* One C[M][N] = alpha op(A) op(B) + beta C; returns the relative error. */
static double gemm_case(int M, int N, int K, int ta, int tb, float alpha, float beta) {
    const size_t na = (size_t)M * K, nb = (size_t)K * N, nc = (size_t)M * N;
    float *a = rand_vec(na), *b = rand_vec(nb), *c0 = rand_vec(nc), *want = copy_vec(c0, nc);
    TCPU->gemm(g_cpu, want, a, b, M, N, K, ta, tb, alpha, beta);
    float *ad = dup_host(a, 4 * na), *bd = dup_host(b, 4 * nb), *cd = dup_host(c0, 4 * nc);
    if (beta == 0.0f) poison(cd, 4 * nc); /* beta 0 must not read C */
    TCU->gemm(g_cu, cd, ad, bd, M, N, K, ta, tb, alpha, beta);
    double e = dev_err(cd, want, nc);
    dfree(ad), dfree(bd), dfree(cd);
    free(a), free(b), free(c0), free(want);
    return e;
}

TEST(cuda_train_op_gemm) {
    NEED_GPU();
    static const float alphas[] = {1.0f, 0.75f, -1.5f};
    for (int ta = 0; ta <= 1; ta++)
        for (int tb = 0; tb <= 1; tb++)
            for (int beta = 0; beta <= 1; beta++)
                for (size_t ai = 0; ai < sizeof alphas / sizeof alphas[0]; ai++) {
                    /* odd sizes, and M above N or below it (the CPU's A^T B takes another path for each) */
                    const int M = 1 + 2 * irand(60), N = 1 + 2 * irand(60), K = 1 + 2 * irand(90);
                    double e = gemm_case(M, N, K, ta, tb, alphas[ai], (float)beta);
                    if (!check_cuda_ok()) return;
                    CHECK_MSG(e <= 1e-5, "gemm M %d N %d K %d ta %d tb %d alpha %g beta %d: rel err %.3g", M, N, K,
                              ta, tb, alphas[ai], beta, e);
                }
    /* larger ones: cuBLAS's tiled kernels */
    double e = gemm_case(301, 257, 515, 1, 0, 0.5f, 1.0f);
    double e2 = gemm_case(129, 333, 700, 0, 1, 1.0f, 0.0f);
    if (!check_cuda_ok()) return;
    CHECK_MSG(e <= 1e-5 && e2 <= 1e-5, "gemm large: rel err %.3g, %.3g", e, e2);
}

/* ---- weight_copy + matmul_t ---------------------------------------------------------- */

/* A weight of type t [rows][cols] on both sides (the device one prepared as the loader does, its rows split
 * with want_split, else as stored; pad bytes after each row), dx = dy W with acc 0 then 1; returns the larger
 * relative error, -1 on a failure (reported). An unpadded F32 or BF16 weight is its own copy (0 bytes). */
static double matmul_t_case(hearth_dtype t, int rows, int cols, int T, int want_split, int pad) {
    const size_t rb = hearth_dtype_row_bytes(t, cols) + (size_t)pad;
    uint8_t *w = malloc(rb * (size_t)rows);
    float *row = malloc(sizeof(float) * (size_t)cols);
    for (int r = 0; r < rows; r++) {
        for (int k = 0; k < cols; k++) row[k] = nrand() * 0.05f;
        if (hearth_cpu_quantize_row(t, row, w + (size_t)r * rb, cols) != HEARTH_OK) {
            test_fail(__FILE__, __LINE__, "quantize_row %s", hearth_dtype_get(t)->name);
            return -1;
        }
    }
    free(row);
    const size_t ny = (size_t)T * rows, nx = (size_t)T * cols;
    float *dy = rand_vec(ny), *dx0 = rand_vec(nx), *want0 = malloc(4 * nx), *want1 = copy_vec(dx0, nx);
    hearth_weight wh = {w, t, rows, cols, rb, HEARTH_LAYOUT_STORED};
    size_t cpu_bytes = 0, cu_bytes = 0;
    void *cpu_copy = TCPU->weight_copy(g_cpu, &wh, &cpu_bytes);
    TCPU->matmul_t(g_cpu, want0, dy, T, cpu_copy, &wh, 0);
    TCPU->matmul_t(g_cpu, want1, dy, T, cpu_copy, &wh, 1);
    if (cpu_bytes) CPU->free(g_cpu, cpu_copy);
    else if (cpu_copy != wh.data || t != HEARTH_DT_F32 || pad)
        test_fail(__FILE__, __LINE__, "the CPU's %s copy: 0 bytes, not the weight", hearth_dtype_get(t)->name);

    double e = -1;
    void *wd = dup_host(w, rb * (size_t)rows);
    float *dyd = dup_host(dy, 4 * ny), *dxd = dnew(4 * nx);
    hearth_weight wdv = {wd, t, rows, cols, rb, HEARTH_LAYOUT_STORED};
    hearth_err err = {0};
    hearth_cuda_ctx_set_split_rows(g_cu, want_split);
    const hearth_status st = CU->prepare_weight(g_cu, &wdv, &err);
    hearth_cuda_ctx_set_split_rows(g_cu, 1);
    if (st != HEARTH_OK) {
        test_fail(__FILE__, __LINE__, "prepare_weight: %s", err.msg);
    } else if (wdv.layout != (want_split ? HEARTH_LAYOUT_SPLIT : HEARTH_LAYOUT_STORED)) {
        test_fail(__FILE__, __LINE__, "%s [%d][%d]: layout %d", hearth_dtype_get(t)->name, rows, cols, wdv.layout);
    } else {
        void *copy = TCU->weight_copy(g_cu, &wdv, &cu_bytes);
        const size_t el = t == HEARTH_DT_F32 ? 4 : 2;
        const int own = (t == HEARTH_DT_F32 || t == HEARTH_DT_BF16) && !pad;
        if (!copy || (own ? copy != wdv.data || cu_bytes : cu_bytes != el * (size_t)rows * cols)) {
            test_fail(__FILE__, __LINE__, "weight_copy %s: %p, %zu bytes", hearth_dtype_get(t)->name, copy, cu_bytes);
        } else {
            poison(dxd, 4 * nx);
            TCU->matmul_t(g_cu, dxd, dyd, T, copy, &wdv, 0);
            const double e0 = dev_err(dxd, want0, nx);
            CU->upload(g_cu, dxd, dx0, 4 * nx);
            TCU->matmul_t(g_cu, dxd, dyd, T, copy, &wdv, 1);
            const double e1 = dev_err(dxd, want1, nx);
            e = e0 > e1 ? e0 : e1;
        }
        if (cu_bytes) dfree(copy);
    }
    dfree(wd), dfree(dyd), dfree(dxd);
    free(w), free(dy), free(dx0), free(want0), free(want1);
    return e;
}

TEST(cuda_train_op_weight_copy_matmul_t) {
    NEED_GPU();
    static const struct {
        hearth_dtype t;
        int cols, split, pad;
        double tol;
    } cases[] = {
        {HEARTH_DT_F32, 0, 0, 0, 1e-5},  /* cols: 0 = odd, random; its own copy */
        {HEARTH_DT_F32, 0, 0, 8, 1e-5},  /* padded rows: copied */
        {HEARTH_DT_BF16, 0, 0, 0, 1e-2}, /* bf16 dy (the header says why) */
        {HEARTH_DT_BF16, 0, 0, 4, 1e-2},
        {HEARTH_DT_F16, 0, 0, 0, 1e-2},
        {HEARTH_DT_Q4_0, 256, 1, 0, 1e-2}, /* 8 blocks of 18 bytes: rows 16-byte aligned, split */
        {HEARTH_DT_Q4_0, 256, 0, 0, 1e-2}, /* the same kept as stored */
        {HEARTH_DT_Q8_0, 512, 1, 0, 1e-2},
        {HEARTH_DT_Q4_1, 256, 0, 0, 1e-2},
        {HEARTH_DT_Q4_K, 512, 1, 0, 1e-2},
        {HEARTH_DT_Q6_K, 256, 0, 0, 1e-2}, /* one block of 210 bytes: not aligned, stored */
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const int rows = 33 + irand(200), cols = cases[i].cols ? cases[i].cols : 1 + 2 * irand(300), T = 1 + irand(70);
        double e = matmul_t_case(cases[i].t, rows, cols, T, cases[i].split, cases[i].pad);
        if (e < 0) return;
        if (!check_cuda_ok()) return;
        CHECK_MSG(e <= cases[i].tol, "matmul_t %s rows %d cols %d T %d: rel err %.3g (tolerance %g)",
                  hearth_dtype_get(cases[i].t)->name, rows, cols, T, e, cases[i].tol);
    }
    /* dy's bf16 copy past the 64 MiB scratch (a vocabulary head's shape): taken in chunks of rows */
    double e = matmul_t_case(HEARTH_DT_BF16, 33000, 32, 1100, 0, 4);
    if (e < 0) return;
    if (!check_cuda_ok()) return;
    CHECK_MSG(e <= 1e-2, "matmul_t bf16 rows 33000 cols 32 T 1100 (chunked): rel err %.3g", e);
}

/* ---- rmsnorm, rope, swiglu ---------------------------------------------------------------- */

TEST(cuda_train_op_rmsnorm_and_backward) {
    NEED_GPU();
    static const int dims[] = {16, 64, 577, 4096};
    for (size_t di = 0; di < sizeof dims / sizeof dims[0]; di++) {
        const int dim = dims[di], rows = 1 + irand(20);
        const size_t n = (size_t)rows * dim;
        float *x = rand_vec(n), *w = rand_vec((size_t)dim), *dy = rand_vec(n), *dx0 = rand_vec(n);
        float *y = malloc(4 * n), *rs = malloc(4 * (size_t)rows), *dx = malloc(4 * n), *dxa = copy_vec(dx0, n);
        TCPU->rmsnorm(g_cpu, y, rs, x, w, rows, dim, 1e-6f);
        TCPU->rmsnorm_bwd(g_cpu, dx, dy, x, rs, w, rows, dim, 0);
        TCPU->rmsnorm_bwd(g_cpu, dxa, dy, x, rs, w, rows, dim, 1);
        float *xd = dup_host(x, 4 * n), *wd = dup_host(w, 4 * (size_t)dim), *dyd = dup_host(dy, 4 * n);
        float *yd = dnew(4 * n), *rsd = dnew(4 * (size_t)rows), *dxd = dnew(4 * n);
        poison(yd, 4 * n);
        poison(rsd, 4 * (size_t)rows);
        TCU->rmsnorm(g_cu, yd, rsd, xd, wd, rows, dim, 1e-6f);
        const double ey = dev_err(yd, y, n), ers = dev_err(rsd, rs, (size_t)rows);
        poison(dxd, 4 * n);
        TCU->rmsnorm_bwd(g_cu, dxd, dyd, xd, rsd, wd, rows, dim, 0);
        const double ed = dev_err(dxd, dx, n);
        CU->upload(g_cu, dxd, dx0, 4 * n);
        TCU->rmsnorm_bwd(g_cu, dxd, dyd, xd, rsd, wd, rows, dim, 1);
        const double ea = dev_err(dxd, dxa, n);
        dfree(xd), dfree(wd), dfree(dyd), dfree(yd), dfree(rsd), dfree(dxd);
        free(x), free(w), free(dy), free(dx0), free(y), free(rs), free(dx), free(dxa);
        if (!check_cuda_ok()) return;
        CHECK_MSG(ey <= 1e-5 && ers <= 1e-5, "rmsnorm dim %d rows %d: y %.3g, rs %.3g", dim, rows, ey, ers);
        CHECK_MSG(ed <= 1e-5 && ea <= 1e-5, "rmsnorm_bwd dim %d rows %d: %.3g, acc %.3g", dim, rows, ed, ea);
    }
}

TEST(cuda_train_op_rope_both_pairings_and_inverse) {
    NEED_GPU();
    for (int neox = 0; neox <= 1; neox++)
        for (int hd = 64; hd <= 128; hd += 64)
            for (int partial = 0; partial <= 1; partial++) {
                const int T = 1 + irand(300), nh = 1 + irand(6), rot = partial ? hd / 2 : hd, half = rot / 2;
                const size_t n = (size_t)T * nh * hd;
                float *x = rand_vec(n), *inv = malloc(4 * (size_t)half), *want = copy_vec(x, n),
                      *back = copy_vec(x, n);
                for (int i = 0; i < half; i++) inv[i] = 1.0f / powf(10000.0f, (float)(2 * i) / (float)rot);
                hearth_rope rh = {inv, rot, neox};
                TCPU->rope(g_cpu, want, T, nh, hd, &rh, 0);
                TCPU->rope(g_cpu, back, T, nh, hd, &rh, 1);
                float *xd = dup_host(x, 4 * n), *invd = dup_host(inv, 4 * (size_t)half);
                hearth_rope rd = {invd, rot, neox};
                TCU->rope(g_cu, xd, T, nh, hd, &rd, 0);
                const double ef = dev_err(xd, want, n);
                TCU->rope(g_cu, xd, T, nh, hd, &rd, 1); /* undoes the forward */
                const double eu = dev_err(xd, x, n);
                CU->upload(g_cu, xd, x, 4 * n);
                TCU->rope(g_cu, xd, T, nh, hd, &rd, 1);
                const double ei = dev_err(xd, back, n);
                dfree(xd), dfree(invd);
                free(x), free(inv), free(want), free(back);
                if (!check_cuda_ok()) return;
                CHECK_MSG(ef <= 1e-5 && eu <= 1e-5 && ei <= 1e-5,
                          "rope neox %d hd %d rot %d T %d: forward %.3g, undone %.3g, inverse %.3g", neox, hd, rot,
                          T, ef, eu, ei);
            }
}

TEST(cuda_train_op_swiglu_bwd) {
    NEED_GPU();
    const size_t n = 1 + (size_t)irand(20000); /* odd sizes */
    float *g = rand_vec(n), *u = rand_vec(n), *dh = rand_vec(n), *dg = malloc(4 * n), *du = malloc(4 * n);
    TCPU->swiglu_bwd(g_cpu, dg, du, g, u, dh, n);
    float *gd = dup_host(g, 4 * n), *ud = dup_host(u, 4 * n), *dhd = dup_host(dh, 4 * n), *dud = dnew(4 * n);
    poison(dud, 4 * n);
    TCU->swiglu_bwd(g_cu, dhd, dud, gd, ud, dhd, n); /* dg aliasing dh, as ops.h allows */
    const double eg = dev_err(dhd, dg, n), eu = dev_err(dud, du, n);
    dfree(gd), dfree(ud), dfree(dhd), dfree(dud);
    free(g), free(u), free(dh), free(dg), free(du);
    if (!check_cuda_ok()) return;
    CHECK_MSG(eg <= 1e-5 && eu <= 1e-5, "swiglu_bwd n %zu: dg %.3g, du %.3g", n, eg, eu);
}

/* ---- attention ------------------------------------------------------------------------------ */

/* Heads nh over nkv kv heads: g = nh / nkv query heads a kv head. CUDA batches a product over the g heads
 * of each kv head when g exceeds the kv heads a pass takes (here all nkv), else over the kv heads for each
 * of the g: (4, 2) and (4, 4) (MHA) take the second way, (8, 2) the first. */
static void attention_heads(int nh, int nkv) {
    const int hd = 64, Tmax = 100;
    static const int Ts[] = {1, 17, 100};
    void *cpu_ws = malloc(TCPU->attn_ws_bytes(Tmax, nh, nkv, hd));
    void *cu_ws = dnew(TCU->attn_ws_bytes(Tmax, nh, nkv, hd));
    CHECK_MSG(cpu_ws && cu_ws, "attention workspaces");
    for (size_t ti = 0; ti < sizeof Ts / sizeof Ts[0]; ti++)
        for (int window = 0; window <= 8; window += 8) {
            const int T = Ts[ti];
            const size_t nq = (size_t)T * nh * hd, nk = (size_t)T * nkv * hd, nl = (size_t)nh * T;
            float *q = rand_vec(nq), *k = rand_vec(nk), *v = rand_vec(nk), *dout = rand_vec(nq);
            float *out = malloc(4 * nq), *lse = malloc(4 * nl), *dq = malloc(4 * nq), *dk = malloc(4 * nk),
                  *dv = malloc(4 * nk);
            TCPU->attn(g_cpu, out, lse, q, k, v, T, nh, nkv, hd, window, cpu_ws);
            TCPU->attn_bwd(g_cpu, dq, dk, dv, dout, out, lse, q, k, v, T, nh, nkv, hd, window, cpu_ws);
            float *qd = dup_host(q, 4 * nq), *kd = dup_host(k, 4 * nk), *vd = dup_host(v, 4 * nk),
                  *doutd = dup_host(dout, 4 * nq);
            float *outd = dnew(4 * nq), *lsed = dnew(4 * nl), *dqd = dnew(4 * nq), *dkd = dnew(4 * nk),
                  *dvd = dnew(4 * nk);
            poison(outd, 4 * nq), poison(lsed, 4 * nl), poison(dqd, 4 * nq), poison(dkd, 4 * nk), poison(dvd, 4 * nk);
            poison(cu_ws, TCU->attn_ws_bytes(T, nh, nkv, hd));
            TCU->attn(g_cu, outd, lsed, qd, kd, vd, T, nh, nkv, hd, window, cu_ws);
            TCU->attn_bwd(g_cu, dqd, dkd, dvd, doutd, outd, lsed, qd, kd, vd, T, nh, nkv, hd, window, cu_ws);
            /* dq and dk against dv's scale too: with one key in reach (T 1) the scores' gradient is exactly 0,
             * and both backends leave rounding residues of dP - rowsum(dO O) (~1e-7) of no size to compare */
            double mdv = 0.0;
            for (size_t i = 0; i < nk; i++) mdv = fmax(mdv, fabs(dv[i]));
            const double eo = dev_err(outd, out, nq), el = dev_err(lsed, lse, nl),
                         eq = dev_err_floor(dqd, dq, nq, mdv), ek = dev_err_floor(dkd, dk, nk, mdv),
                         ev = dev_err(dvd, dv, nk);
            dfree(qd), dfree(kd), dfree(vd), dfree(doutd), dfree(outd), dfree(lsed), dfree(dqd), dfree(dkd),
                dfree(dvd);
            free(q), free(k), free(v), free(dout), free(out), free(lse), free(dq), free(dk), free(dv);
            if (!check_cuda_ok()) break;
            if (!(eo <= 1e-5 && el <= 1e-5 && eq <= 1e-5 && ek <= 1e-5 && ev <= 1e-5)) {
                test_fail(__FILE__, __LINE__,
                          "attention nh %d nkv %d T %d window %d: out %.3g lse %.3g dq %.3g dk %.3g dv %.3g", nh, nkv,
                          T, window, eo, el, eq, ek, ev);
                break;
            }
        }
    free(cpu_ws);
    dfree(cu_ws);
}

TEST(cuda_train_op_attention_and_backward) {
    NEED_GPU();
    attention_heads(4, 2);
    attention_heads(8, 2);
    attention_heads(4, 4);
}

/* ---- rows, the loss -------------------------------------------------------------------------- */

TEST(cuda_train_op_gather_scatter) {
    NEED_GPU();
    const int R = 50 + irand(50), n = 1 + irand(R), dim = 1 + irand(700);
    int32_t *rows = malloc(sizeof(int32_t) * R);
    for (int i = 0; i < R; i++) rows[i] = i;
    for (int i = R - 1; i > 0; i--) { /* distinct rows for the scatter: a shuffle's first n */
        int j = irand(i + 1), t = rows[i];
        rows[i] = rows[j], rows[j] = t;
    }
    const size_t big = (size_t)R * dim, small = (size_t)n * dim;
    float *src = rand_vec(big), *part = rand_vec(small), *gw = malloc(4 * small), *sw = rand_vec(big);
    float *sgot = malloc(4 * big), *ggot = malloc(4 * small);
    float *dst0 = copy_vec(sw, big);
    TCPU->gather_rows(g_cpu, gw, src, rows, n, dim);
    TCPU->scatter_rows(g_cpu, sw, part, rows, n, dim);
    float *srcd = dup_host(src, 4 * big), *partd = dup_host(part, 4 * small), *gd = dnew(4 * small),
          *sd = dup_host(dst0, 4 * big);
    int32_t *rowsd = dup_host(rows, sizeof(int32_t) * R);
    poison(gd, 4 * small);
    TCU->gather_rows(g_cu, gd, srcd, rowsd, n, dim);
    TCU->scatter_rows(g_cu, sd, partd, rowsd, n, dim);
    down(ggot, gd, 4 * small);
    down(sgot, sd, 4 * big);
    const int gok = !memcmp(ggot, gw, 4 * small), sok = !memcmp(sgot, sw, 4 * big);
    dfree(srcd), dfree(partd), dfree(gd), dfree(sd), dfree(rowsd);
    free(rows), free(src), free(part), free(gw), free(sw), free(sgot), free(ggot), free(dst0);
    if (!check_cuda_ok()) return;
    CHECK_MSG(gok && sok, "rows R %d n %d dim %d: gather %s, scatter %s", R, n, dim, gok ? "ok" : "differs",
              sok ? "ok" : "differs (or touched other rows)");
}

/* n rows of V logits, with and without w (one row's w 0, the gradient in place): ce within 1e-6, the
 * gradient within 1e-5 where w != 0, the w == 0 row zeros (ops.h). */
static void ce_case(int n, int V) {
    const size_t nz = (size_t)n * V;
    float *z = malloc(4 * nz), *w = malloc(4 * (size_t)n), *dz = malloc(4 * nz), *got = malloc(4 * nz);
    int32_t *y = malloc(sizeof(int32_t) * n);
    double *ce = malloc(sizeof(double) * n), *ce_w = malloc(sizeof(double) * n), *gce = malloc(sizeof(double) * n);
    for (size_t i = 0; i < nz; i++) z[i] = 3.0f * nrand();
    const int zero_row = irand(n);
    for (int j = 0; j < n; j++) {
        y[j] = irand(V);
        w[j] = j == zero_row ? 0.0f : 0.25f + frand();
    }
    TCPU->cross_entropy(g_cpu, dz, ce, z, y, NULL, n, V);
    TCPU->cross_entropy(g_cpu, dz, ce_w, z, y, w, n, V);
    float *zd = dup_host(z, 4 * nz), *wd = dup_host(w, 4 * (size_t)n), *dzd = dnew(4 * nz);
    int32_t *yd = dup_host(y, sizeof(int32_t) * n);
    double *ced = dnew(sizeof(double) * n);
    /* without w: ce only, dz not written */
    poison(dzd, 4 * nz);
    TCU->cross_entropy(g_cu, dzd, ced, zd, yd, NULL, n, V);
    down(gce, ced, sizeof(double) * n);
    down(got, dzd, 4 * nz);
    double ece = 0.0;
    int untouched = 1;
    for (int j = 0; j < n; j++) ece = fmax(ece, fabs(gce[j] - ce[j]));
    for (size_t i = 0; i < nz; i++) untouched = untouched && isnan(got[i]);
    /* with w, in place */
    TCU->cross_entropy(g_cu, zd, ced, zd, yd, wd, n, V);
    down(gce, ced, sizeof(double) * n);
    down(got, zd, 4 * nz);
    double ecw = 0.0, eg = 0.0;
    int zero_kept = 1;
    for (int i = 0; i < V; i++) zero_kept = zero_kept && got[(size_t)zero_row * V + i] == 0.0f;
    for (int j = 0; j < n; j++) {
        ecw = fmax(ecw, fabs(gce[j] - ce_w[j]));
        if (j != zero_row) eg = fmax(eg, rel_err(got + (size_t)j * V, dz + (size_t)j * V, (size_t)V));
    }
    dfree(zd), dfree(wd), dfree(dzd), dfree(yd), dfree(ced);
    free(z), free(w), free(dz), free(got), free(y), free(ce), free(ce_w), free(gce);
    if (!check_cuda_ok()) return;
    CHECK_MSG(ece <= 1e-6 && ecw <= 1e-6, "cross_entropy n %d V %d: ce off by %.3g / %.3g with w", n, V, ece, ecw);
    CHECK_MSG(untouched, "cross_entropy n %d V %d: dz written without w", n, V);
    CHECK_MSG(eg <= 1e-5, "cross_entropy n %d V %d: gradient rel err %.3g", n, V, eg);
    CHECK_MSG(zero_kept, "cross_entropy n %d V %d: the w == 0 row %d is not zeros", n, V, zero_row);
}

TEST(cuda_train_op_cross_entropy) {
    NEED_GPU();
    ce_case(2 + irand(6), 1000);
    ce_case(2, 70001); /* many elements a thread */
}

/* ---- vectors, AdamW --------------------------------------------------------------------------- */

TEST(cuda_train_op_axpy_zero_sumsq) {
    NEED_GPU();
    const size_t n = 100001 + (size_t)irand(1000);
    const float a = -0.37f;
    float *y = rand_vec(n), *x = rand_vec(n), *want = copy_vec(y, n), *got = malloc(4 * n);
    TCPU->axpy(g_cpu, want, a, x, n);
    float *yd = dup_host(y, 4 * n), *xd = dup_host(x, 4 * n);
    TCU->axpy(g_cu, yd, a, xd, n);
    const double ea = dev_err(yd, want, n);
    /* zero: an odd byte range inside a poisoned buffer; the bytes around it stay */
    const size_t off = 1 + (size_t)irand(100), len = 1 + (size_t)irand(40000);
    poison(xd, 4 * n);
    TCU->zero(g_cu, (uint8_t *)xd + off, len);
    down(got, xd, 4 * n);
    const uint8_t *b = (const uint8_t *)got;
    int zok = 1;
    for (size_t i = 0; i < 4 * n; i++) zok = zok && b[i] == (i >= off && i < off + len ? 0 : 0xff);
    /* sumsq adds to what is there */
    double s0 = 1.5, s = s0, gs = 0;
    TCPU->sumsq(g_cpu, &s, y, n);
    TCPU->sumsq(g_cpu, &s, want, n);
    double *sd = dup_host(&s0, sizeof s0);
    CU->upload(g_cu, yd, y, 4 * n);
    TCU->sumsq(g_cu, sd, yd, n);
    CU->upload(g_cu, yd, want, 4 * n);
    TCU->sumsq(g_cu, sd, yd, n);
    down(&gs, sd, sizeof gs);
    dfree(yd), dfree(xd), dfree(sd);
    free(y), free(x), free(want), free(got);
    if (!check_cuda_ok()) return;
    CHECK_MSG(ea <= 1e-6, "axpy n %zu: rel err %.3g", n, ea);
    CHECK_MSG(zok, "zero [%zu, %zu) of a poisoned buffer: wrong bytes", off, off + len);
    CHECK_MSG(fabs(gs - s) <= 1e-10 * fabs(s), "sumsq: %.17g vs %.17g", gs, s);
}

TEST(cuda_train_op_adamw) {
    NEED_GPU();
    const size_t n = 10001 + (size_t)irand(5000);
    float *w = rand_vec(n), *g = rand_vec(n), *m = rand_vec(n), *v = rand_vec(n);
    for (size_t i = 0; i < n; i++) v[i] = fabsf(v[i]) * 1e-3f, m[i] *= 1e-2f;
    float *w1 = copy_vec(w, n), *g1 = copy_vec(g, n), *m1 = copy_vec(m, n), *v1 = copy_vec(v, n);
    const int step = 3;
    const float lr = 1e-3f, wd = 0.1f; /* the decay is a tenth of a typical update: a wrong one shows */
    const double bc1 = 1.0 - pow(0.9, step), bc2 = 1.0 - pow(0.999, step);
    TCPU->adamw(g_cpu, w1, g1, m1, v1, n, lr, 0.9f, 0.999f, 1e-8f, wd, 0.5f, bc1, bc2);
    float *wd_ = dup_host(w, 4 * n), *gd = dup_host(g, 4 * n), *md = dup_host(m, 4 * n), *vd = dup_host(v, 4 * n);
    TCU->adamw(g_cu, wd_, gd, md, vd, n, lr, 0.9f, 0.999f, 1e-8f, wd, 0.5f, bc1, bc2);
    const double em = dev_err(md, m1, n), ev = dev_err(vd, v1, n);
    float *got = malloc(4 * n), *dw = malloc(4 * n), *dw1 = malloc(4 * n);
    down(got, wd_, 4 * n);
    /* the updates w' - w, exact differences of nearby floats: an ulp of w is ~1e-3 of the largest update */
    for (size_t i = 0; i < n; i++) dw[i] = got[i] - w[i], dw1[i] = w1[i] - w[i];
    const double ew = rel_err(dw, dw1, n);
    down(got, gd, 4 * n);
    int gz = 1;
    for (size_t i = 0; i < n; i++) gz = gz && got[i] == 0.0f;
    dfree(wd_), dfree(gd), dfree(md), dfree(vd);
    free(w), free(g), free(m), free(v), free(w1), free(g1), free(m1), free(v1), free(got), free(dw), free(dw1);
    if (!check_cuda_ok()) return;
    CHECK_MSG(ew <= 1e-2 && em <= 1e-6 && ev <= 1e-6, "adamw n %zu: update %.3g, m %.3g, v %.3g", n, ew, em, ev);
    CHECK_MSG(gz, "adamw: the gradient was not zeroed");
}
