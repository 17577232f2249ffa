/* pick.c - argmax, Gumbel-max draw (after top_k / top_p), log-sum-exp and
 * the top-N list of one logit row, exactly as ops.h defines them. */
#include "ops/cpu/pick.h"

#include "core/argmax.h"

#include <math.h>
#include <stdlib.h>

/* The noise of index k = z >> 41 (u = (k + 0.5) 2^-23 in (0, 1)): -log(-log(u)), increasing in k. */
#define NOISE_K 8388608 /* 2^23 indices */
static float noise(int32_t k) {
    float u = ((float)k + 0.5f) * 0x1.0p-23f;
    return -logf(-logf(u));
}

static void top_insert(hearth_pick *o, int n, int32_t id, float x) {
    if (o->n_top == n && (n == 0 || x <= o->top_x[n - 1])) return; /* ties keep the lower id */
    int j = o->n_top < n ? o->n_top++ : n - 1;
    while (j > 0 && o->top_x[j - 1] < x) {
        o->top_x[j] = o->top_x[j - 1];
        o->top_id[j] = o->top_id[j - 1];
        j--;
    }
    o->top_x[j] = x;
    o->top_id[j] = id;
}

/* The truncation's boundary: tokens of bins 0.. (1/64 of a nat each below
 * the maximum, the last bin the rest) are counted and weighed, the bin where
 * top_k's count or top_p's weight is reached is put in order, and the
 * boundary is read there; a bin of more than GATHER tokens is searched by
 * bisection over the order keys instead (a flat row). */
#define BINS 2048
#define GATHER 4096

static inline int bin_of(float d) { return d < 32.0f ? (int)(d * 64.0f) : BINS; }

static int cmp_key_desc(const void *a, const void *b) {
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? 1 : x > y ? -1 : 0;
}

/* The largest order key kt such that bin b's tokens of key >= kt number at
 * least rk or weigh at least need (whichever is asked; rk 0: weight): the
 * key of the token where that is reached, since keys are distinct. */
static uint64_t bisect_bin(const float *x, int vocab, float mx, int b, int64_t rk, uint64_t need) {
    uint64_t lo = 0, hi = UINT64_MAX;
    while (lo < hi) {
        uint64_t mid = lo + (hi - lo) / 2 + 1, got = 0;
        for (int i = 0; i < vocab; i++) {
            float d = mx - x[i];
            if (bin_of(d) != b || hearth_pick_order(x[i], i) < mid) continue;
            got += rk ? 1 : hearth_pick_weight(d);
        }
        if (rk ? got >= (uint64_t)rk : got >= need) lo = mid;
        else hi = mid - 1;
    }
    return lo;
}

/* The order key of the last token top_k and top_p keep (0: they keep all). */
static uint64_t truncation(const float *x, int vocab, float mx, const hearth_pick_params *p) {
    int64_t k = p->top_k > 0 && p->top_k < vocab ? p->top_k : 0;
    int by_p = p->top_p > 0.0f && p->top_p < 1.0f;
    if (!k && !by_p) return 0;
    uint32_t count[BINS + 1] = {0};
    uint64_t mass[BINS + 1] = {0}, total = 0;
    for (int i = 0; i < vocab; i++) {
        float d = mx - x[i];
        int b = bin_of(d);
        count[b]++;
        if (by_p) {
            uint64_t w = hearth_pick_weight(d);
            mass[b] += w;
            total += w;
        }
    }
    uint64_t need = by_p ? (uint64_t)ceil((double)p->top_p * (double)total) : 0;
    int bk = k ? -1 : BINS + 1, bp = by_p ? -1 : BINS + 1;
    int64_t c_before = 0, ck = 0;
    uint64_t m_before = 0, cm = 0;
    for (int b = 0; b <= BINS && (bk < 0 || bp < 0); b++) {
        if (bk < 0 && ck + count[b] >= k) bk = b, c_before = ck;
        if (bp < 0 && cm + mass[b] >= need) bp = b, m_before = cm;
        ck += count[b];
        cm += mass[b];
    }
    if (bk < 0) bk = BINS + 1; /* not reached (cannot happen: top_k < vocab) */
    if (bp < 0) bp = BINS + 1; /* not reached (cannot happen: need <= total) */
    int b = bk < bp ? bk : bp;
    if (b > BINS) return 0;
    int64_t rk = bk == b ? k - c_before : 0;
    uint64_t need_b = bp == b ? need - m_before : 0;
    if (count[b] > GATHER) {
        uint64_t kk = rk ? bisect_bin(x, vocab, mx, b, rk, 0) : 0;
        uint64_t kp = bp == b ? bisect_bin(x, vocab, mx, b, 0, need_b) : 0;
        return kk > kp ? kk : kp; /* the earlier of the two in the order */
    }
    uint64_t keys[GATHER];
    int n = 0;
    for (int i = 0; i < vocab; i++)
        if (bin_of(mx - x[i]) == b) keys[n++] = hearth_pick_order(x[i], i);
    qsort(keys, (size_t)n, sizeof *keys, cmp_key_desc);
    uint64_t cum = 0;
    for (int j = 0; j < n; j++) {
        int32_t id = (int32_t)~(uint32_t)keys[j];
        cum += hearth_pick_weight(mx - x[id]);
        if ((rk && j + 1 == rk) || (bp == b && cum >= need_b)) return keys[j];
    }
    return keys[n - 1];
}

/* The draw skips most tokens without their noise: a token that is to beat the maximum's score L needs
 * noise above L - x / T, so one of bin b (x at most max - b / 64) whose noise index is at most kmax[b], the
 * largest index whose noise stays under L - (max - b / 64) / T less a margin for the rounding of x / T + noise,
 * cannot; only the others are scored. kmax[b] is found when bin b is first met: expf twice for an estimate,
 * then the noise itself to settle it (the noise is monotone, so the test is exact). */
#define KMAX_UNSET (-2)

static int32_t kmax_of(int b, float mx, float inv_t, float best, float g_lo, float g_hi) {
    float x_hi = b < BINS ? mx - (float)b / 64.0f : mx - 32.0f;
    float thr = best - x_hi * inv_t - 1e-3f * (1.0f + fabsf(best));
    if (!(thr >= g_lo)) return -1;
    if (thr >= g_hi) return NOISE_K - 1;
    double u = exp(-exp(-(double)thr));
    int32_t k = (int32_t)(u * NOISE_K);
    k = k < 0 ? 0 : k > NOISE_K - 1 ? NOISE_K - 1 : k;
    while (k > 0 && noise(k) > thr) k--;
    while (k + 1 < NOISE_K && noise(k + 1) <= thr) k++;
    return noise(k) <= thr ? k : -1;
}

/* Gumbel-max over the tokens that pass floor and the truncation (last), ties to the lower id (ops.h). */
static int32_t draw(const float *x, int vocab, int32_t best, float floor, uint64_t last, const hearth_pick_params *p) {
    const float mx = x[best], inv_t = 1.0f / p->temperature;
    float best_s = mx * inv_t + noise((int32_t)(hearth_pick_hash(p->key, (uint32_t)best) >> 41));
    const float g_lo = noise(0), g_hi = noise(NOISE_K - 1); /* the noise's range */
    int32_t id = best, kmax[BINS + 1];
    for (int b = 0; b <= BINS; b++) kmax[b] = KMAX_UNSET;
    for (int i = 0; i < vocab; i++) {
        if (!(x[i] >= floor) || i == best || (last && hearth_pick_order(x[i], i) < last)) continue;
        int b = bin_of(mx - x[i]);
        if (kmax[b] == KMAX_UNSET) kmax[b] = kmax_of(b, mx, inv_t, best_s, g_lo, g_hi);
        int32_t k = (int32_t)(hearth_pick_hash(p->key, (uint32_t)i) >> 41);
        if (k <= kmax[b]) continue;
        float s = x[i] * inv_t + noise(k);
        if (s > best_s || (s == best_s && i < id)) {
            best_s = s;
            id = i;
        }
    }
    return id;
}

void hearth_pick_row(hearth_pick *out, const float *x, int vocab, const hearth_pick_params *p) {
    hearth_pick o = {0};
    int best = hearth_argmax(x, vocab);
    o.id = best;
    o.max = x[best];
    if (p->temperature > 0.0f && isfinite(o.max)) {
        float floor = o.max - 20.2f * p->temperature;
        if (p->min_p > 0.0f) {
            float m = o.max + logf(p->min_p);
            if (m > floor) floor = m;
        }
        o.id = draw(x, vocab, best, floor, truncation(x, vocab, o.max, p), p);
    }
    if (p->logprobs) {
        double sum = 0.0;
        for (int i = 0; i < vocab; i++) sum += exp((double)x[i] - o.max);
        o.lse = o.max + (float)log(sum);
        o.chosen = x[o.id];
        int n = p->n_top < 0 ? 0 : p->n_top > HEARTH_PICK_TOP ? HEARTH_PICK_TOP : p->n_top;
        for (int i = 0; i < vocab; i++) top_insert(&o, n, i, x[i]);
    }
    *out = o;
}
