/* load_gguf.c - build a tokenizer from GGUF metadata (tokenizer.ggml.*).
 *
 * The result is the tokenizer transformers builds from the same file
 * (integrations/gguf: GPT2Tokenizer for model "gpt2", LlamaTokenizer for
 * "llama"), control tokens (token_type 3) added as special tokens and
 * user-defined ones (type 4) as plain added tokens; except that the
 * pre-tokenizer split for `tokenizer.ggml.pre` follows llama.cpp's table,
 * which reproduces the model's original tokenizer.json where transformers
 * has no entry (e.g. "smollm", "starcoder": digits split one by one). */
#include "io/gguf.h"
#include "tok/tok_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define GPT2_NO_TAIL "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)"
#define LLAMA3_SPLIT                                                                                         \
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|" \
    "\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"
#define QWEN2_SPLIT                                                                                      \
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|" \
    "\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"
#define QWEN35_SPLIT                                                                                           \
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?[\\p{L}\\p{M}]+|\\p{N}| ?[^\\s\\p{L}\\p{M}\\p{N}]+[\\r\\n]*|" \
    "\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"
#define TEKKEN_SPLIT                                                                                 \
    "[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]*[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]+"      \
    "|[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]+[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]*"     \
    "|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"
#define GPT4O_SPLIT                                                                                              \
    "[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]*[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?" \
    "|[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]+[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?" \
    "|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"

/* tokenizer.ggml.pre -> the regex splits (applied in order, Isolated),
 * before ByteLevel without its own regex. NULL list: GPT-2's ByteLevel. */
typedef struct {
    const char *names; /* '|'-separated */
    const char *re[3];
} pre_entry;

static const pre_entry PRE_TABLE[] = {
    {"llama3|llama-v3|llama-bpe|falcon3|falcon-h1|pixtral|midm-2.0|lfm2|jina-v5-nano|dbrx|smaug-bpe", {LLAMA3_SPLIT}},
    {"qwen2|deepseek-r1-qwen|kormo|f2llmv2|megrez|stablelm2|hunyuan", {QWEN2_SPLIT}},
    {"qwen35", {QWEN35_SPLIT}},
    {"tekken", {TEKKEN_SPLIT}},
    {"gpt-4o|llama4|kanana2|talkie|minimax-m2", {GPT4O_SPLIT}},
    /* llama.cpp's STARCODER family: each digit alone, then GPT-2 */
    {"starcoder|refact|command-r|smollm|codeshell|exaone|minerva-7b", {"\\p{N}", GPT2_NO_TAIL}},
    {"deepseek-coder", {"[\\r\\n]", "\\s?\\p{L}+", "\\s?\\p{P}+", }},
    {"falcon", {"[\\p{P}\\$\\+<=>\\^~\\|`]+", GPT2_NO_TAIL, "[0-9][0-9][0-9]"}},
};

static int name_in(const char *names, const char *s, size_t n) {
    const char *p = names;
    while (*p) {
        const char *e = strchr(p, '|');
        size_t l = e ? (size_t)(e - p) : strlen(p);
        if (l == n && !memcmp(p, s, n)) return 1;
        if (!e) break;
        p = e + 1;
    }
    return 0;
}

static hearth_status push_pre(hearth_tokenizer *t, tok_pre pp, hearth_err *err) {
    tok_pre *p = realloc(t->pre, (size_t)(t->n_pre + 1) * sizeof *p);
    if (!p) {
        if (pp.re) pcre2_code_free(pp.re);
        return hearth_err_set(err, HEARTH_ENOMEM, "out of memory");
    }
    t->pre = p;
    t->pre[t->n_pre++] = pp;
    return HEARTH_OK;
}

static hearth_status push_dec(hearth_tokenizer *t, tok_dec d, hearth_err *err) {
    tok_dec *p = realloc(t->dec, (size_t)(t->n_dec + 1) * sizeof *p);
    if (!p) return hearth_err_set(err, HEARTH_ENOMEM, "out of memory");
    t->dec = p;
    t->dec[t->n_dec++] = d;
    t->has_decoder = 1;
    return HEARTH_OK;
}

static hearth_status push_post(hearth_tokenizer *t, int is_seq, int32_t id, hearth_err *err) {
    tok_tmpl_piece *p = realloc(t->post, (size_t)(t->n_post + 1) * sizeof *p);
    if (!p) return hearth_err_set(err, HEARTH_ENOMEM, "out of memory");
    t->post = p;
    tok_tmpl_piece *q = &t->post[t->n_post++];
    q->is_sequence = is_seq;
    q->n_ids = is_seq ? 0 : 1;
    q->ids = NULL;
    if (!is_seq) {
        q->ids = malloc(sizeof *q->ids);
        if (!q->ids) return hearth_err_set(err, HEARTH_ENOMEM, "out of memory");
        q->ids[0] = id;
    }
    return HEARTH_OK;
}

/* Optional integer key: *out unchanged when absent. */
static hearth_status opt_int(const hearth_gguf *g, const char *key, int64_t *out, hearth_err *err) {
    if (hearth_gguf_find_key(g, key) < 0) return HEARTH_OK;
    return hearth_gguf_get_int(g, key, out, err);
}

static hearth_status opt_bool(const hearth_gguf *g, const char *key, int *out, hearth_err *err) {
    if (hearth_gguf_find_key(g, key) < 0) return HEARTH_OK;
    return hearth_gguf_get_bool(g, key, out, err);
}

/* The byte-level alphabet test transformers applies to each token. */
static int in_alphabet(const char *s, size_t n) {
    const unsigned char *u = (const unsigned char *)s;
    for (size_t i = 0; i < n;) {
        uint32_t cp;
        int k = tok_utf8_next(u + i, n - i, &cp);
        if (k <= 0 || tok_cp_to_byte(cp) < 0) return 0;
        i += (size_t)k;
    }
    return 1;
}

/* One merge candidate of transformers' generate_merges. */
typedef struct {
    int32_t l, r, id;
    float score;
    int32_t ll, rl; /* lengths in characters */
    int64_t seq;    /* order of generation (stable sort) */
} mcand;

static int mcand_cmp(const void *a, const void *b) {
    const mcand *x = a, *y = b;
    if (x->score != y->score) return x->score > y->score ? -1 : 1;
    if (x->ll != y->ll) return x->ll > y->ll ? -1 : 1;
    if (x->rl != y->rl) return x->rl > y->rl ? -1 : 1;
    return x->seq < y->seq ? -1 : x->seq > y->seq;
}

static int local_cmp(const void *a, const void *b) {
    const mcand *x = a, *y = b;
    if (x->l != y->l) return x->l < y->l ? -1 : 1;
    return (x->r > y->r) - (x->r < y->r);
}

/* A SentencePiece vocabulary without merges: every split of a token into
 * two vocabulary tokens is a merge, ranked by the token's score (best
 * first), then longer left and right parts first, then file order; as
 * transformers' generate_merges. */
static hearth_status merges_from_scores(hearth_tokenizer *t, const hearth_gguf *g, const char *name, hearth_err *err) {
    hearth_gguf_type et;
    uint64_t n = 0;
    const void *data = NULL;
    hearth_status st = hearth_gguf_get_arr(g, "tokenizer.ggml.scores", &et, &n, &data, err);
    if (st) return hearth_err_wrap(err, st, "%s: a vocabulary without merges needs scores", name);
    if (et != HEARTH_GGUF_F32 || n != (uint64_t)t->n_vocab)
        return hearth_err_set(err, HEARTH_EFORMAT, "%s: tokenizer.ggml.scores must be %d float32 values", name, t->n_vocab);
    size_t cap = 1024, nc = 0;
    mcand *c = malloc(cap * sizeof *c);
    if (!c) return hearth_err_set(err, HEARTH_ENOMEM, "out of memory");
    int64_t seq = 0;
    for (int32_t i = 0; i < t->n_vocab; i++) {
        const char *s = t->tok_str[i];
        size_t len = t->tok_len[i];
        if (tok_strmap_get(&t->vocab, s, len) != i) continue;
        float score;
        memcpy(&score, (const char *)data + (size_t)i * 4, 4);
        size_t first = nc;
        int lchars = 0, total = 0;
        for (size_t k = 0; k < len; k++) total += ((unsigned char)s[k] & 0xC0) != 0x80;
        for (size_t k = 1; k < len; k++) {
            if (((unsigned char)s[k - 1] & 0xC0) != 0x80) lchars++;
            if (((unsigned char)s[k] & 0xC0) == 0x80) continue;
            int32_t l = tok_strmap_get(&t->vocab, s, k), r = tok_strmap_get(&t->vocab, s + k, len - k);
            if (l < 0 || r < 0) continue;
            if (nc == cap) {
                mcand *p = realloc(c, (cap *= 2) * sizeof *c);
                if (!p) {
                    free(c);
                    return hearth_err_set(err, HEARTH_ENOMEM, "out of memory");
                }
                c = p;
            }
            c[nc++] = (mcand){l, r, i, score, lchars, total - lchars, 0};
        }
        qsort(c + first, nc - first, sizeof *c, local_cmp);
        for (size_t k = first; k < nc; k++) c[k].seq = seq++;
    }
    qsort(c, nc, sizeof *c, mcand_cmp);
    st = HEARTH_OK;
    if (tok_pairmap_init(&t->merges, nc)) st = hearth_err_set(err, HEARTH_ENOMEM, "out of memory");
    for (size_t k = 0; !st && k < nc; k++)
        if (tok_pairmap_put(&t->merges, c[k].l, c[k].r, (int32_t)k, c[k].id)) st = hearth_err_set(err, HEARTH_ENOMEM, "out of memory");
    free(c);
    return st;
}

/* transformers' LlamaTokenizer pipeline (Phi-3: the prefix space from a
 * normalizer instead of Metaspace). */
static hearth_status spm_pipeline(hearth_tokenizer *t, const char *arch, hearth_err *err) {
    hearth_status st;
    if (!strcmp(arch, "phi3")) {
        t->norm = calloc(2, sizeof *t->norm);
        if (!t->norm) return hearth_err_set(err, HEARTH_ENOMEM, "out of memory");
        t->n_norm = 2;
        t->norm[0] = (tok_norm){.kind = NORM_PREPEND, .content = strdup("\xE2\x96\x81"), .content_len = 3};
        t->norm[1] = (tok_norm){.kind = NORM_REPLACE, .pattern = strdup(" "), .pattern_len = 1,
                                .content = strdup("\xE2\x96\x81"), .content_len = 3};
        if (!t->norm[0].content || !t->norm[1].pattern || !t->norm[1].content)
            return hearth_err_set(err, HEARTH_ENOMEM, "out of memory");
    } else {
        tok_pre pp = {.kind = PRE_METASPACE, .replacement = 0x2581, .prepend = PREPEND_FIRST, .split = 0};
        if ((st = push_pre(t, pp, err))) return st;
    }
    tok_dec d[4] = {{.kind = DEC_REPLACE, .pattern = strdup("\xE2\x96\x81"), .pattern_len = 3, .content = strdup(" "), .content_len = 1},
                    {.kind = DEC_BYTE_FALLBACK},
                    {.kind = DEC_FUSE},
                    {.kind = DEC_STRIP, .content = strdup(" "), .content_len = 1, .start = 1}};
    if (!d[0].pattern || !d[0].content || !d[3].content) {
        free(d[0].pattern), free(d[0].content), free(d[3].content);
        return hearth_err_set(err, HEARTH_ENOMEM, "out of memory");
    }
    for (int i = 0; i < 4; i++)
        if ((st = push_dec(t, d[i], err))) {
            for (int j = i; j < 4; j++) free(d[j].pattern), free(d[j].content);
            return st;
        }
    return HEARTH_OK;
}

static hearth_status load(hearth_tokenizer *t, const hearth_gguf *g, const char *name, hearth_err *err) {
    const char *model;
    size_t model_len;
    hearth_status st = hearth_gguf_get_str(g, "tokenizer.ggml.model", &model, &model_len, err);
    if (st) return st;
    int is_bpe = !strcmp(model, "gpt2"), is_spm = !strcmp(model, "llama");
    const char *arch = "";
    size_t arch_len = 0;
    if (hearth_gguf_find_key(g, "general.architecture") >= 0 &&
        (st = hearth_gguf_get_str(g, "general.architecture", &arch, &arch_len, err)))
        return st;
    if (is_spm && (!strncmp(arch, "gemma", 5)))
        return hearth_err_set(err, HEARTH_ENOTSUP, "%s: the SentencePiece vocabulary of architecture '%s' is not supported yet", name, arch);
    if (!is_bpe && !is_spm)
        return hearth_err_set(err, HEARTH_ENOTSUP, "%s: tokenizer.ggml.model '%s' is not supported (gpt2, llama)", name, model);

    int64_t kv_tokens = hearth_gguf_find_key(g, "tokenizer.ggml.tokens");
    hearth_gguf_type et;
    uint64_t n_tok = 0;
    if (kv_tokens < 0) return hearth_err_set(err, HEARTH_EFORMAT, "%s: tokenizer.ggml.tokens is missing", name);
    if ((st = hearth_gguf_get_arr(g, "tokenizer.ggml.tokens", &et, &n_tok, NULL, err))) return st;
    if (et != HEARTH_GGUF_STRING || n_tok == 0 || n_tok > (1u << 28))
        return hearth_err_set(err, HEARTH_EFORMAT, "%s: tokenizer.ggml.tokens must be a non-empty string array", name);
    if ((st = tok_alloc_vocab(t, (int32_t)n_tok, err))) return st;

    /* token types (optional) */
    const void *tt_data = NULL;
    uint64_t n_tt = 0;
    hearth_gguf_type tt_type = HEARTH_GGUF_I32;
    if (hearth_gguf_find_key(g, "tokenizer.ggml.token_type") >= 0) {
        if ((st = hearth_gguf_get_arr(g, "tokenizer.ggml.token_type", &tt_type, &n_tt, &tt_data, err))) return st;
        if ((tt_type != HEARTH_GGUF_I32 && tt_type != HEARTH_GGUF_U32) || n_tt != n_tok)
            return hearth_err_set(err, HEARTH_EFORMAT, "%s: tokenizer.ggml.token_type must be %llu int32 values", name,
                                  (unsigned long long)n_tok);
    }

    tok_buf spelled = {0};
    for (uint64_t i = 0; i < n_tok; i++) {
        size_t len;
        const char *s = hearth_gguf_arr_str_at(g, kv_tokens, i, &len);
        if (!s) return hearth_err_set(err, HEARTH_EFORMAT, "%s: tokenizer.ggml.tokens[%llu] unreadable", name, (unsigned long long)i);
        if (!tok_utf8_valid(s, len))
            return hearth_err_set(err, HEARTH_EFORMAT, "%s: tokenizer.ggml.tokens[%llu] is not valid UTF-8", name, (unsigned long long)i);
        if (is_bpe && !in_alphabet(s, len)) {
            /* transformers re-spells such a token through the byte map */
            spelled.n = 0;
            for (size_t k = 0; k < len; k++) {
                char b[4];
                int m = tok_utf8_encode(tok_byte_to_cp((unsigned char)s[k]), b);
                if (tok_buf_put(&spelled, b, (size_t)m)) {
                    free(spelled.p);
                    return hearth_err_set(err, HEARTH_ENOMEM, "out of memory");
                }
            }
            s = spelled.p;
            len = spelled.n;
        }
        if ((st = tok_set_token(t, (int32_t)i, s, len, err))) {
            free(spelled.p);
            return st;
        }
    }
    free(spelled.p);
    if ((st = tok_finish_vocab(t, err))) return st;
    t->model = MODEL_BPE;
    t->byte_level = is_bpe;
    if (is_spm) {
        /* transformers' LlamaTokenizer: BPE with byte fallback, unknowns fused, no unk token */
        t->byte_fallback = 1;
        t->fuse_unk = 1;
    }

    /* merges */
    int64_t kv_merges = hearth_gguf_find_key(g, "tokenizer.ggml.merges");
    uint64_t n_merges = 0;
    if (kv_merges >= 0) {
        if ((st = hearth_gguf_get_arr(g, "tokenizer.ggml.merges", &et, &n_merges, NULL, err))) return st;
        if (et != HEARTH_GGUF_STRING) return hearth_err_set(err, HEARTH_EFORMAT, "%s: tokenizer.ggml.merges must be a string array", name);
    }
    if (kv_merges < 0 && is_spm) {
        if ((st = merges_from_scores(t, g, name, err))) return st;
        n_merges = 0;
    } else if (tok_pairmap_init(&t->merges, (size_t)n_merges))
        return hearth_err_set(err, HEARTH_ENOMEM, "out of memory");
    tok_buf cat = {0};
    for (uint64_t i = 0; i < n_merges; i++) {
        size_t len;
        const char *s = hearth_gguf_arr_str_at(g, kv_merges, i, &len);
        const char *sp = s ? memchr(s, ' ', len) : NULL;
        if (!sp) {
            free(cat.p);
            return hearth_err_set(err, HEARTH_EFORMAT, "%s: tokenizer.ggml.merges[%llu] is not two tokens separated by a space",
                                  name, (unsigned long long)i);
        }
        size_t al = (size_t)(sp - s), bl = len - al - 1;
        int32_t a = tok_strmap_get(&t->vocab, s, al), b = tok_strmap_get(&t->vocab, sp + 1, bl);
        cat.n = 0;
        tok_buf_put(&cat, s, al);
        if (tok_buf_put(&cat, sp + 1, bl)) {
            free(cat.p);
            return hearth_err_set(err, HEARTH_ENOMEM, "out of memory");
        }
        int32_t m = tok_strmap_get(&t->vocab, cat.p, cat.n);
        if (a < 0 || b < 0 || m < 0) {
            hearth_status e = hearth_err_set(err, HEARTH_EFORMAT, "%s: tokenizer.ggml.merges[%llu] '%s': %s is not in the vocabulary",
                                             name, (unsigned long long)i, s, a < 0 ? "the left token" : b < 0 ? "the right token" : "the merged token");
            free(cat.p);
            return e;
        }
        if (tok_pairmap_put(&t->merges, a, b, (int32_t)i, m)) {
            free(cat.p);
            return hearth_err_set(err, HEARTH_ENOMEM, "out of memory");
        }
    }
    free(cat.p);

    if (is_spm) {
        if ((st = spm_pipeline(t, arch, err))) return st;
        goto specials;
    }
    /* pre-tokenizer */
    const char *pre = "default";
    size_t pre_len = 7;
    if (hearth_gguf_find_key(g, "tokenizer.ggml.pre") >= 0 &&
        (st = hearth_gguf_get_str(g, "tokenizer.ggml.pre", &pre, &pre_len, err)))
        return st;
    const pre_entry *pe = NULL;
    for (size_t i = 0; i < sizeof PRE_TABLE / sizeof PRE_TABLE[0]; i++)
        if (name_in(PRE_TABLE[i].names, pre, pre_len)) pe = &PRE_TABLE[i];
    for (int i = 0; pe && i < 3 && pe->re[i]; i++) {
        tok_pre pp = {.kind = PRE_SPLIT, .behavior = SPLIT_ISOLATED};
        if ((st = tok_regex_compile(&pp.re, pe->re[i], strlen(pe->re[i]), 0, err)))
            return hearth_err_wrap(err, st, "%s: pre-tokenizer '%s'", name, pre);
        if ((st = push_pre(t, pp, err))) return st;
    }
    tok_pre bl = {.kind = PRE_BYTELEVEL, .use_regex = pe == NULL};
    if (bl.use_regex) {
        static const char GPT2[] = GPT2_NO_TAIL "|\\s+";
        if ((st = tok_regex_compile(&bl.re, GPT2, strlen(GPT2), 0, err))) return st;
    }
    if ((st = push_pre(t, bl, err))) return st;
    if ((st = push_dec(t, (tok_dec){.kind = DEC_BYTELEVEL}, err))) return st;

specials:;
    /* special tokens */
    int64_t bos = -1, eos = -1, unk = -1, pad = -1;
    if ((st = opt_int(g, "tokenizer.ggml.bos_token_id", &bos, err)) || (st = opt_int(g, "tokenizer.ggml.eos_token_id", &eos, err)) ||
        (st = opt_int(g, "tokenizer.ggml.unknown_token_id", &unk, err)) ||
        (st = opt_int(g, "tokenizer.ggml.padding_token_id", &pad, err)))
        return st;
    int add_bos = is_spm, add_eos = 0; /* transformers: a llama vocabulary adds BOS unless told not to */
    if ((st = opt_bool(g, "tokenizer.ggml.add_bos_token", &add_bos, err)) ||
        (st = opt_bool(g, "tokenizer.ggml.add_eos_token", &add_eos, err)))
        return st;
    t->bos = bos >= 0 && bos < (int64_t)n_tok ? (int32_t)bos : -1;
    t->eos = eos >= 0 && eos < (int64_t)n_tok ? (int32_t)eos : -1;
    t->pad = pad >= 0 && pad < (int64_t)n_tok ? (int32_t)pad : -1;
    static const char *const FIM_KEYS[HEARTH_FIM_N] = {"pre", "suf", "mid", "pad", "rep", "sep"};
    for (int f = 0; f < HEARTH_FIM_N; f++) {
        char key[48];
        int64_t id = -1;
        snprintf(key, sizeof key, "tokenizer.ggml.fim_%s_token_id", FIM_KEYS[f]);
        if ((st = opt_int(g, key, &id, err))) return st;
        t->fim[f] = id >= 0 && id < (int64_t)n_tok ? (int32_t)id : -1;
    }

    /* control tokens (3) become special added tokens, user-defined ones (4)
     * plain added tokens; transformers adds them by string, so the id is the
     * one the vocabulary gives that string, and a string missing from the
     * (re-spelled) vocabulary is not added */
    for (uint64_t i = 0; tt_data && i < n_tok; i++) {
        int32_t ty;
        memcpy(&ty, (const char *)tt_data + i * 4, 4);
        if (ty != 3 && ty != 4) continue;
        size_t len;
        const char *s = hearth_gguf_arr_str_at(g, kv_tokens, i, &len);
        if (!len || (is_bpe && ty == 3 && !in_alphabet(s, len))) continue; /* transformers skips these mislabels */
        int32_t id = tok_strmap_get(&t->vocab, s, len);
        if (id < 0) continue;
        tok_added a = {.content = (char *)s, .len = len, .id = id, .special = ty == 3};
        if ((st = tok_add_added(t, &a, err))) return st;
    }
    /* transformers registers bos/eos/unk/pad as special tokens by string; a
     * string outside the re-spelled vocabulary would get a new id past the
     * model's vocabulary there, which no model can take: hearth leaves it */
    int64_t sp_ids[4] = {bos, eos, unk, pad};
    int32_t *sp_out[4] = {&t->bos, &t->eos, NULL, &t->pad};
    for (int i = 0; i < 4; i++) {
        if (sp_ids[i] < 0 || sp_ids[i] >= (int64_t)n_tok) continue;
        size_t len;
        const char *s = hearth_gguf_arr_str_at(g, kv_tokens, (uint64_t)sp_ids[i], &len);
        int32_t id = len && (is_spm || in_alphabet(s, len)) ? tok_strmap_get(&t->vocab, s, len) : -1;
        if (id < 0) continue;
        if (sp_out[i]) *sp_out[i] = id;
        tok_added a = {.content = (char *)s, .len = len, .id = id, .special = 1};
        if (!(t->tok_flags[id] & TOKF_ADDED) && (st = tok_add_added(t, &a, err))) return st;
    }
    /* LlamaTokenizer's own defaults (unk "<unk>", bos "<s>", eos "</s>") end
     * up special in transformers too, even when the file marks them
     * user-defined (Phi-3's "</s>") */
    static const char *const SPM_DEFAULTS[] = {"<unk>", "<s>", "</s>"};
    for (int i = 0; is_spm && i < 3; i++) {
        int32_t id = tok_strmap_get(&t->vocab, SPM_DEFAULTS[i], strlen(SPM_DEFAULTS[i]));
        if (id < 0) continue;
        int32_t ai = tok_strmap_get(&t->added_map, SPM_DEFAULTS[i], strlen(SPM_DEFAULTS[i]));
        if (ai >= 0) {
            t->added[ai].special = 1;
            t->tok_flags[t->added[ai].id] |= TOKF_SPECIAL;
            continue;
        }
        tok_added a = {.content = (char *)SPM_DEFAULTS[i], .len = strlen(SPM_DEFAULTS[i]), .id = id, .special = 1};
        if ((st = tok_add_added(t, &a, err))) return st;
    }
    if (add_bos && t->bos >= 0 && (st = push_post(t, 0, t->bos, err))) return st;
    if ((st = push_post(t, 1, 0, err))) return st;
    if (add_eos && t->eos >= 0 && (st = push_post(t, 0, t->eos, err))) return st;
    return tok_finish(t, name, err);
}

hearth_status hearth_tok_load_gguf(hearth_tokenizer **out, const hearth_gguf *g, hearth_err *err) {
    *out = NULL;
    hearth_tokenizer *t = tok_new();
    if (!t) return hearth_err_set(err, HEARTH_ENOMEM, "out of memory");
    const char *name = hearth_gguf_path(g);
    hearth_status st = load(t, g, name ? name : "gguf", err);
    if (st) {
        hearth_tok_free(t);
        return st;
    }
    *out = t;
    return HEARTH_OK;
}
