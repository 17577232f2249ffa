/* pick.c - argmax, Gumbel-max draw, log-sum-exp and the top-N list of one
 * logit row, exactly as ops.h defines them. */
#include "ops/cpu/pick.h"

#include <math.h>

/* u in (0, 1) of token i, then the Gumbel noise -log(-log(u)). */
static float gumbel(uint64_t key, int i) {
    uint64_t z = hearth_pick_hash(key, (uint32_t)i);
    float u = ((float)(z >> 41) + 0.5f) * 0x1.0p-23f;
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

void hearth_pick_row(hearth_pick *out, const float *x, int vocab, const hearth_pick_params *p) {
    hearth_pick o = {0};
    int best = 0;
    for (int i = 1; i < vocab; i++)
        if (x[i] > x[best]) best = i;
    o.id = best;
    o.max = x[best];
    if (p->temperature > 0.0f && isfinite(o.max)) {
        float floor = o.max - 20.2f * p->temperature, inv_t = 1.0f / p->temperature;
        if (p->min_p > 0.0f) {
            float m = o.max + logf(p->min_p);
            if (m > floor) floor = m;
        }
        float best_s = -INFINITY;
        for (int i = 0; i < vocab; i++) {
            if (!(x[i] >= floor)) continue;
            float s = x[i] * inv_t + gumbel(p->key, i);
            if (s > best_s) {
                best_s = s;
                o.id = i;
            }
        }
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
