/* decode.c - decoders (ByteLevel, Metaspace, ByteFallback, Fuse, Strip,
 * Replace, WordPiece) and the streaming detokenizer.
 *
 * There is one implementation: hearth_tok_decode runs the streaming
 * detokenizer over all ids into a growing buffer, so the concatenation of
 * pushes equals the full decode by construction. Each HF decoder step is
 * applied per token in chain order; the steps whose HF semantics look at the
 * whole list (Fuse, then Strip/Metaspace on the fused string; ByteFallback's
 * grouping of byte runs; ByteLevel's lossy UTF-8 over all bytes) keep the
 * little state they need in hearth_detok. Output goes through one UTF-8
 * stage that replaces invalid bytes as Rust's from_utf8_lossy does and holds
 * back an incomplete trailing sequence until the next push or finish.
 * Steps whose HF result depends on tokens not yet seen (BPEDecoder's last
 * token, Strip from the right of a fused string) are refused at load. */
#include "tok/tok_internal.h"

#include <stdlib.h>
#include <string.h>

#define DEC_BUF 16384

typedef struct {
    char *p;
    size_t n, cap;
    tok_buf *grow; /* full decode: grow instead of truncating */
    int oom;
} sink;

static void sink_put(sink *k, const void *s, size_t n) {
    if (k->grow) {
        if (tok_buf_put(k->grow, s, n)) k->oom = 1;
        return;
    }
    if (n > k->cap - k->n) n = k->cap - k->n;
    memcpy(k->p + k->n, s, n);
    k->n += n;
}

static const char FFFD[3] = {(char)0xEF, (char)0xBF, (char)0xBD};

/* s[0..n) is a truncated prefix of a valid sequence. */
static int is_incomplete(const unsigned char *s, size_t n) {
    return n > 0 && n < 4 && tok_utf8_incomplete_len(s, n) == (int)n;
}

/* Emit s[0..n) lossily, everything being complete. */
static void lossy_put(sink *k, const unsigned char *s, size_t n) {
    size_t i = 0;
    while (i < n) {
        size_t j = i;
        while (j < n && s[j] < 0x80) j++;
        if (j > i) {
            sink_put(k, s + i, j - i);
            i = j;
            continue;
        }
        uint32_t cp;
        int r = tok_utf8_check(s + i, n - i, &cp);
        if (r > 0) {
            sink_put(k, s + i, (size_t)r);
            i += (size_t)r;
        } else {
            sink_put(k, FFFD, 3);
            i += (size_t)(-r);
        }
    }
}

/* The UTF-8 stage: pend + s, holding back a trailing incomplete sequence. */
static void utf8_feed(hearth_detok *d, sink *k, const unsigned char *s, size_t n) {
    if (d->raw) {
        sink_put(k, s, n);
        return;
    }
    size_t i = 0;
    while (d->n_pend && i < n) {
        d->pend[d->n_pend++] = s[i++];
        while (d->n_pend) {
            if (is_incomplete(d->pend, (size_t)d->n_pend)) break;
            uint32_t cp;
            int r = tok_utf8_check(d->pend, (size_t)d->n_pend, &cp);
            int used = r > 0 ? r : -r;
            if (r > 0)
                sink_put(k, d->pend, (size_t)r);
            else
                sink_put(k, FFFD, 3);
            memmove(d->pend, d->pend + used, (size_t)(d->n_pend - used));
            d->n_pend -= used;
        }
    }
    if (i >= n) return;
    s += i;
    n -= i;
    size_t j = n;
    for (int back = 1; back <= 3 && back <= (int)n; back++) {
        if ((s[n - (size_t)back] & 0xC0) != 0x80) {
            j = n - (size_t)back;
            break;
        }
    }
    if (j < n && is_incomplete(s + j, n - j)) {
        lossy_put(k, s, j);
        memcpy(d->pend, s + j, n - j);
        d->n_pend = (int)(n - j);
    } else {
        lossy_put(k, s, n);
    }
}

static int byte_token(const char *s, size_t n, unsigned char *b) {
    if (n != 6 || memcmp(s, "<0x", 3) || s[5] != '>') return 0;
    int v = 0;
    for (int i = 3; i < 5; i++) {
        char c = s[i];
        int x = (c >= '0' && c <= '9') ? c - '0' : (c >= 'a' && c <= 'f') ? c - 'a' + 10 : (c >= 'A' && c <= 'F') ? c - 'A' + 10 : -1;
        if (x < 0) return 0;
        v = v * 16 + x;
    }
    *b = (unsigned char)v;
    return 1;
}

static size_t replace_all(const char *s, size_t n, const char *pat, size_t pl, const char *rep, size_t rl, char *o,
                          size_t cap) {
    size_t k = 0;
    for (size_t i = 0; i < n;) {
        if (pl && i + pl <= n && !memcmp(s + i, pat, pl)) {
            if (k + rl > cap) break;
            memcpy(o + k, rep, rl);
            k += rl;
            i += pl;
        } else {
            if (k + 1 > cap) break;
            o[k++] = s[i++];
        }
    }
    return k;
}

static size_t wp_cleanup(char *s, size_t n, char *tmp) {
    static const char *const R[][2] = {{" .", "."},       {" ?", "?"},     {" !", "!"},     {" ,", ","},
                                       {" ' ", "'"},      {" n't", "n't"}, {" 'm", "'m"},   {" do not", " don't"},
                                       {" 's", "'s"},     {" 've", "'ve"}, {" 're", "'re"}};
    for (size_t r = 0; r < sizeof R / sizeof R[0]; r++) {
        size_t m = replace_all(s, n, R[r][0], strlen(R[r][0]), R[r][1], strlen(R[r][1]), tmp, DEC_BUF);
        memcpy(s, tmp, m);
        n = m;
    }
    return n;
}

static void run_steps(hearth_detok *d, sink *k, int step, const char *s, size_t n, int64_t idx, int fused);

/* Flush the current byte-fallback run into the steps after `step`. */
static void flush_run(hearth_detok *d, sink *k, int step, int fused) {
    if (!d->n_run) return;
    int n = d->n_run;
    d->n_run = 0;
    if (d->raw || tok_utf8_valid((const char *)d->run, (size_t)n)) {
        run_steps(d, k, step + 1, (const char *)d->run, (size_t)n, d->n_fb_out++, fused);
    } else {
        for (int i = 0; i < n; i++) run_steps(d, k, step + 1, FFFD, 3, d->n_fb_out++, fused);
    }
}

/* Apply decoder steps [step, n_dec) to one token string; idx is its index
 * in the token list that step sees; fused: a Fuse step came before. */
static void run_steps(hearth_detok *d, sink *k, int step, const char *s, size_t n, int64_t idx, int fused) {
    const hearth_tokenizer *t = d->t;
    char b0[DEC_BUF], b1[DEC_BUF];
    char *bufs[2] = {b0, b1};
    int w = 0;
    if (n > DEC_BUF) n = DEC_BUF; /* load guarantees tokens fit; defensive */
    for (int i = step; i < t->n_dec; i++) {
        const tok_dec *dc = &t->dec[i];
        char *o = bufs[w];
        size_t m = 0;
        switch (dc->kind) {
        case DEC_REPLACE:
            m = replace_all(s, n, dc->pattern, dc->pattern_len, dc->content, dc->content_len, o, DEC_BUF);
            break;
        case DEC_METASPACE: {
            char rep[4];
            int rl = tok_utf8_encode(dc->replacement, rep);
            int drop = (fused || idx == 0) && dc->prepend != PREPEND_NEVER;
            for (size_t j = 0; j < n;) {
                if (j + (size_t)rl <= n && !memcmp(s + j, rep, (size_t)rl)) {
                    if (!drop) o[m++] = ' ';
                    j += (size_t)rl;
                } else {
                    o[m++] = s[j++];
                }
            }
            break;
        }
        case DEC_BYTE_FALLBACK: {
            unsigned char b;
            if (byte_token(s, n, &b)) {
                if (d->n_run == HEARTH_DETOK_RUN) flush_run(d, k, i, fused);
                d->run[d->n_run++] = b;
                return;
            }
            flush_run(d, k, i, fused);
            idx = d->n_fb_out++;
            memcpy(o, s, n);
            m = n;
            break;
        }
        case DEC_FUSE:
            fused = 1;
            memcpy(o, s, n);
            m = n;
            break;
        case DEC_STRIP: {
            uint32_t c0 = 0;
            tok_utf8_next((const unsigned char *)dc->content, dc->content_len, &c0);
            size_t a = 0, e = n;
            if (fused) {
                while (d->strip_left > 0 && a + dc->content_len <= n && !memcmp(s + a, dc->content, dc->content_len)) {
                    a += dc->content_len;
                    d->strip_left--;
                }
                if (a < n) d->strip_left = 0;
            } else {
                for (int c = 0; c < dc->start && a + dc->content_len <= n && !memcmp(s + a, dc->content, dc->content_len); c++)
                    a += dc->content_len;
                for (int c = 0; c < dc->stop && e >= a + dc->content_len && !memcmp(s + e - dc->content_len, dc->content, dc->content_len); c++)
                    e -= dc->content_len;
            }
            m = e - a;
            memcpy(o, s + a, m);
            break;
        }
        case DEC_WORDPIECE:
            if (idx != 0) {
                if (n >= dc->content_len && !memcmp(s, dc->content, dc->content_len)) {
                    m = n - dc->content_len;
                    memcpy(o, s + dc->content_len, m);
                } else {
                    o[0] = ' ';
                    memcpy(o + 1, s, n);
                    m = n + 1;
                }
            } else {
                memcpy(o, s, n);
                m = n;
            }
            if (dc->cleanup) m = wp_cleanup(o, m, bufs[w ^ 1]);
            break;
        case DEC_BPE:
            /* refused at load unless it cannot matter; kept for completeness */
            memcpy(o, s, n);
            m = n;
            break;
        case DEC_BYTELEVEL: {
            /* chars -> bytes; a token with any char outside the map passes as is */
            const unsigned char *u = (const unsigned char *)s;
            int all = 1;
            for (size_t j = 0; j < n && all;) {
                uint32_t cp;
                int l = tok_utf8_next(u + j, n - j, &cp);
                if (l <= 0 || tok_cp_to_byte(cp) < 0) all = 0;
                j += (size_t)(l > 0 ? l : 1);
            }
            if (!all) {
                memcpy(o, s, n);
                m = n;
            } else {
                for (size_t j = 0; j < n;) {
                    uint32_t cp;
                    int l = tok_utf8_next(u + j, n - j, &cp);
                    o[m++] = (char)tok_cp_to_byte(cp);
                    j += (size_t)l;
                }
            }
            fused = 1;
            break;
        }
        }
        s = o;
        n = m;
        w ^= 1;
    }
    utf8_feed(d, k, (const unsigned char *)s, n);
}

void hearth_detok_init(hearth_detok *d, const hearth_tokenizer *t, int skip_special) {
    memset(d, 0, sizeof *d);
    d->t = t;
    d->skip_special = skip_special;
    for (int i = 0; i < t->n_dec; i++)
        if (t->dec[i].kind == DEC_STRIP) d->strip_left = t->dec[i].start;
}

static void push(hearth_detok *d, int32_t id, sink *k) {
    const hearth_tokenizer *t = d->t;
    if (id < 0 || id >= t->n_vocab) return;
    if (d->skip_special && (t->tok_flags[id] & TOKF_SPECIAL)) return;
    const char *s = t->tok_str[id];
    size_t n = t->tok_len[id];
    if (!t->has_decoder) {
        if (d->n_tok) utf8_feed(d, k, (const unsigned char *)" ", 1);
        utf8_feed(d, k, (const unsigned char *)s, n);
    } else {
        run_steps(d, k, 0, s, n, d->n_tok, 0);
    }
    d->n_tok++;
}

static void finish(hearth_detok *d, sink *k) {
    const hearth_tokenizer *t = d->t;
    for (int i = 0; i < t->n_dec; i++) {
        if (t->dec[i].kind != DEC_BYTE_FALLBACK) continue;
        int fused = 0;
        for (int j = 0; j < i; j++) fused |= t->dec[j].kind == DEC_FUSE;
        flush_run(d, k, i, fused);
    }
    if (d->n_pend) {
        lossy_put(k, d->pend, (size_t)d->n_pend);
        d->n_pend = 0;
    }
}

size_t hearth_detok_push(hearth_detok *d, int32_t id, char *out, size_t cap) {
    sink k = {out, 0, cap, NULL, 0};
    push(d, id, &k);
    return k.n;
}

size_t hearth_detok_finish(hearth_detok *d, char *out, size_t cap) {
    sink k = {out, 0, cap, NULL, 0};
    finish(d, &k);
    return k.n;
}

hearth_status hearth_tok_decode(const hearth_tokenizer *t, const int32_t *ids, size_t n, int skip_special, char **out,
                                size_t *len, hearth_err *err) {
    *out = NULL;
    if (len) *len = 0;
    for (size_t i = 0; i < n; i++)
        if (ids[i] < 0 || ids[i] >= t->n_vocab)
            return hearth_err_set(err, HEARTH_ERANGE, "decode: id %d at position %zu is outside the vocabulary [0, %d)",
                                  ids[i], i, t->n_vocab);
    hearth_detok *d = malloc(sizeof *d);
    tok_buf b = {0};
    if (!d || tok_buf_reserve(&b, n * 4 + 16)) {
        free(d);
        free(b.p);
        return hearth_err_set(err, HEARTH_ENOMEM, "decode: out of memory");
    }
    hearth_detok_init(d, t, skip_special);
    sink k = {NULL, 0, 0, &b, 0};
    for (size_t i = 0; i < n; i++) push(d, ids[i], &k);
    finish(d, &k);
    free(d);
    if (k.oom) {
        free(b.p);
        return hearth_err_set(err, HEARTH_ENOMEM, "decode: out of memory");
    }
    b.p[b.n] = 0;
    *out = b.p;
    if (len) *len = b.n;
    return HEARTH_OK;
}
