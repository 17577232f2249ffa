/* strmap.c - the tokenizer's hash maps (token string -> id, merge pair ->
 * rank/id) and its growable byte buffer.
 *
 * Open addressing with linear probing at load factor <= 1/2. Keys of the
 * string map are not copied: they point into the tokenizer's own storage. */
#include "tok/tok_internal.h"

#include <stdlib.h>
#include <string.h>

uint32_t tok_hash_bytes(const char *s, size_t n) {
    /* FNV-1a, then a final avalanche: token strings are short. */
    uint32_t h = 2166136261u;
    for (size_t i = 0; i < n; i++) h = (h ^ (unsigned char)s[i]) * 16777619u;
    h ^= h >> 16;
    h *= 0x7feb352du;
    h ^= h >> 15;
    return h;
}

static size_t pow2_at_least(size_t n) {
    size_t c = 16;
    while (c < n) c <<= 1;
    return c;
}

hearth_status tok_strmap_init(tok_strmap *m, size_t expect) {
    memset(m, 0, sizeof *m);
    m->cap = pow2_at_least(expect * 2 + 1);
    m->key = calloc(m->cap, sizeof *m->key);
    m->klen = calloc(m->cap, sizeof *m->klen);
    m->val = calloc(m->cap, sizeof *m->val);
    m->hash = calloc(m->cap, sizeof *m->hash);
    if (!m->key || !m->klen || !m->val || !m->hash) {
        tok_strmap_free(m);
        return HEARTH_ENOMEM;
    }
    return HEARTH_OK;
}

void tok_strmap_free(tok_strmap *m) {
    free(m->key);
    free(m->klen);
    free(m->val);
    free(m->hash);
    memset(m, 0, sizeof *m);
}

static hearth_status strmap_grow(tok_strmap *m) {
    tok_strmap g;
    hearth_status st = tok_strmap_init(&g, m->cap);
    if (st) return st;
    for (size_t i = 0; i < m->cap; i++) {
        if (!m->key[i]) continue;
        size_t j = m->hash[i] & (g.cap - 1);
        while (g.key[j]) j = (j + 1) & (g.cap - 1);
        g.key[j] = m->key[i];
        g.klen[j] = m->klen[i];
        g.val[j] = m->val[i];
        g.hash[j] = m->hash[i];
        g.n++;
    }
    tok_strmap_free(m);
    *m = g;
    return HEARTH_OK;
}

hearth_status tok_strmap_put(tok_strmap *m, const char *key, size_t klen, int32_t val) {
    if ((m->n + 1) * 2 > m->cap) {
        hearth_status st = strmap_grow(m);
        if (st) return st;
    }
    uint32_t h = tok_hash_bytes(key, klen);
    size_t i = h & (m->cap - 1);
    while (m->key[i]) {
        if (m->hash[i] == h && m->klen[i] == klen && !memcmp(m->key[i], key, klen)) {
            m->val[i] = val;
            return HEARTH_OK;
        }
        i = (i + 1) & (m->cap - 1);
    }
    m->key[i] = key;
    m->klen[i] = (uint32_t)klen;
    m->val[i] = val;
    m->hash[i] = h;
    m->n++;
    return HEARTH_OK;
}

int32_t tok_strmap_get(const tok_strmap *m, const char *key, size_t klen) {
    if (!m->cap) return -1;
    uint32_t h = tok_hash_bytes(key, klen);
    size_t i = h & (m->cap - 1);
    while (m->key[i]) {
        if (m->hash[i] == h && m->klen[i] == klen && !memcmp(m->key[i], key, klen)) return m->val[i];
        i = (i + 1) & (m->cap - 1);
    }
    return -1;
}

hearth_status tok_pairmap_init(tok_pairmap *m, size_t expect) {
    memset(m, 0, sizeof *m);
    m->cap = pow2_at_least(expect * 2 + 1);
    m->key = calloc(m->cap, sizeof *m->key);
    m->rank = malloc(m->cap * sizeof *m->rank);
    m->id = malloc(m->cap * sizeof *m->id);
    if (!m->key || !m->rank || !m->id) {
        tok_pairmap_free(m);
        return HEARTH_ENOMEM;
    }
    return HEARTH_OK;
}

void tok_pairmap_free(tok_pairmap *m) {
    free(m->key);
    free(m->rank);
    free(m->id);
    memset(m, 0, sizeof *m);
}

hearth_status tok_pairmap_put(tok_pairmap *m, int32_t a, int32_t b, int32_t rank, int32_t id) {
    if ((m->n + 1) * 2 > m->cap) {
        tok_pairmap g;
        hearth_status st = tok_pairmap_init(&g, m->cap);
        if (st) return st;
        for (size_t i = 0; i < m->cap; i++) {
            if (!m->key[i]) continue;
            size_t j = (size_t)tok_pair_hash(m->key[i]) & (g.cap - 1);
            while (g.key[j]) j = (j + 1) & (g.cap - 1);
            g.key[j] = m->key[i];
            g.rank[j] = m->rank[i];
            g.id[j] = m->id[i];
            g.n++;
        }
        tok_pairmap_free(m);
        *m = g;
    }
    uint64_t k = (((uint64_t)(uint32_t)a << 32) | (uint32_t)b) + 1;
    size_t mask = m->cap - 1, i = (size_t)tok_pair_hash(k) & mask;
    while (m->key[i]) {
        if (m->key[i] == k) return HEARTH_OK; /* first wins */
        i = (i + 1) & mask;
    }
    m->key[i] = k;
    m->rank[i] = rank;
    m->id[i] = id;
    m->n++;
    return HEARTH_OK;
}

hearth_status tok_buf_reserve(tok_buf *b, size_t extra) {
    if (b->n + extra + 1 <= b->cap) return HEARTH_OK;
    size_t c = b->cap ? b->cap : 256;
    while (c < b->n + extra + 1) c *= 2;
    char *p = realloc(b->p, c);
    if (!p) return HEARTH_ENOMEM;
    b->p = p;
    b->cap = c;
    return HEARTH_OK;
}

hearth_status tok_buf_put(tok_buf *b, const void *s, size_t n) {
    hearth_status st = tok_buf_reserve(b, n);
    if (st) return st;
    if (n) memcpy(b->p + b->n, s, n);
    b->n += n;
    b->p[b->n] = 0;
    return HEARTH_OK;
}
