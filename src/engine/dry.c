/* dry.c - the DRY penalty (dry.h): the longest repeat that each next token
 * would extend, by the Z-algorithm over the reversed context. */
#include "engine/dry.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

void hearth_dry_breakers_free(hearth_dry_breakers *b) {
    free(b->head);
    free(b->off);
    free(b->tail);
    memset(b, 0, sizeof *b);
}

int hearth_dry_breakers_copy(hearth_dry_breakers *dst, const hearth_dry_breakers *src) {
    memset(dst, 0, sizeof *dst);
    if (!src || src->n == 0) return 0;
    size_t nt = (size_t)src->off[src->n];
    dst->head = malloc(sizeof *dst->head * (size_t)src->n);
    dst->off = malloc(sizeof *dst->off * ((size_t)src->n + 1));
    dst->tail = malloc(sizeof *dst->tail * (nt ? nt : 1));
    if (!dst->head || !dst->off || !dst->tail) {
        hearth_dry_breakers_free(dst);
        return -1;
    }
    memcpy(dst->head, src->head, sizeof *dst->head * (size_t)src->n);
    memcpy(dst->off, src->off, sizeof *dst->off * ((size_t)src->n + 1));
    if (nt) memcpy(dst->tail, src->tail, sizeof *dst->tail * nt);
    dst->n = src->n;
    return 0;
}

/* The first entry whose head is id, or -1. */
static int find_head(const hearth_dry_breakers *b, int32_t id) {
    int lo = 0, hi = b->n;
    while (lo < hi) {
        int mid = (lo + hi) / 2;
        if (b->head[mid] < id) lo = mid + 1;
        else hi = mid;
    }
    return lo < b->n && b->head[lo] == id ? lo : -1;
}

/* How far back from the end a repeat may reach: up to the latest breaker
 * (the longest of the sequences that start with its head and end in the
 * context), or the whole window. r[i] is the i-th token from the end. */
static int repeat_limit(const hearth_dry_breakers *b, const int32_t *r, int n) {
    for (int i = 0; i < n; i++) {
        int e = b ? find_head(b, r[i]) : -1;
        if (e < 0) continue;
        int longest = -1;
        for (; e < b->n && b->head[e] == r[i]; e++) {
            int len = b->off[e + 1] - b->off[e];
            if (len <= longest || len > i) continue;
            int k = 0;
            while (k < len && b->tail[b->off[e] + k] == r[i - k - 1]) k++;
            if (k == len) longest = len;
        }
        if (longest >= 0) return i - longest;
    }
    return n;
}

static int cmp_i64(const void *a, const void *b) {
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

void hearth_dry_apply(const hearth_dry_params *p, const hearth_dry_breakers *b, const int32_t *h, int n, int32_t *z,
                      int64_t *pairs, float *logits, int vocab) {
    if (p->multiplier == 0.0f || p->base < 1.0f || n <= p->allowed_length) return;
    int32_t *r = z + n; /* h reversed: r[i] is the i-th token from the end */
    for (int i = 0; i < n; i++) r[i] = h[n - 1 - i];
    int limit = repeat_limit(b && b->n ? b : NULL, r, n);
    if (limit < p->allowed_length) return;
    /* z[k]: the longest common prefix of r and r[k..], i.e. the context's
     * end also ends k tokens earlier, z[k] tokens long */
    z[0] = n;
    for (int k = 1, lt = 0, rt = 0; k < n; k++) {
        int m = 0;
        if (k < rt) m = z[k - lt] < rt - k ? z[k - lt] : rt - k;
        while (k + m < n && r[m] == r[k + m]) m++;
        z[k] = m;
        if (k + m > rt) lt = k, rt = k + m;
    }
    /* each repeat, capped at the limit, with the token that would extend it (r[k - 1]) */
    int np = 0;
    for (int k = 1; k < n; k++) {
        int len = z[k] < limit ? z[k] : limit;
        if (len >= p->allowed_length && r[k - 1] >= 0 && r[k - 1] < vocab)
            pairs[np++] = (int64_t)r[k - 1] << 32 | (uint32_t)len;
    }
    qsort(pairs, (size_t)np, sizeof *pairs, cmp_i64);
    int max_exp = p->base > 1.000001f ? (int)(88.7228391f / logf(p->base)) : 0; /* pow stays finite */
    for (int i = 0; i < np; i++) {
        int32_t id = (int32_t)(pairs[i] >> 32);
        if (i + 1 < np && (int32_t)(pairs[i + 1] >> 32) == id) continue; /* the longest repeat of id is last */
        int e = b && b->n ? find_head(b, id) : -1, lone = 0;
        for (; e >= 0 && e < b->n && b->head[e] == id && !lone; e++) lone = b->off[e + 1] == b->off[e];
        if (lone) continue; /* a breaker by itself is never penalized */
        int x = (int)(uint32_t)pairs[i] - p->allowed_length;
        if (max_exp > 0 && x > max_exp) x = max_exp;
        logits[id] -= (float)((double)p->multiplier * pow((double)p->base, (double)x)); /* as llama.cpp's */
    }
}
