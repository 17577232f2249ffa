/* build.c - constructing a tokenizer: vocabulary storage, added tokens,
 * regex compilation, final validation. Shared by both loaders so that a
 * tokenizer from tokenizer.json and one from GGUF are the same object. */
#include "tok/tok_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

hearth_tokenizer *tok_new(void) {
    hearth_tokenizer *t = calloc(1, sizeof *t);
    if (!t) return NULL;
    t->unk_id = t->bos = t->eos = t->pad = -1;
    for (int i = 0; i < HEARTH_FIM_N; i++) t->fim[i] = -1;
    t->max_input_chars = 100;
    for (int i = 0; i < 256; i++) t->byte_id[i] = t->fb_id[i] = -1;
    return t;
}

hearth_status tok_alloc_vocab(hearth_tokenizer *t, int32_t n, hearth_err *err) {
    if (n <= 0 || n > (1 << 28)) return hearth_err_set(err, HEARTH_EFORMAT, "vocabulary size %d out of range", n);
    t->n_vocab = n;
    t->tok_str = calloc((size_t)n, sizeof *t->tok_str);
    t->tok_len = calloc((size_t)n, sizeof *t->tok_len);
    t->tok_flags = calloc((size_t)n, sizeof *t->tok_flags);
    if (!t->tok_str || !t->tok_len || !t->tok_flags) return hearth_err_set(err, HEARTH_ENOMEM, "out of memory");
    /* offsets into t->strings, fixed up into pointers by tok_finish_vocab */
    for (int32_t i = 0; i < n; i++) t->tok_str[i] = (const char *)(uintptr_t)SIZE_MAX;
    return HEARTH_OK;
}

hearth_status tok_set_token(hearth_tokenizer *t, int32_t id, const char *s, size_t len, hearth_err *err) {
    if (id < 0 || id >= t->n_vocab)
        return hearth_err_set(err, HEARTH_EFORMAT, "token id %d outside the vocabulary [0, %d)", id, t->n_vocab);
    if ((uintptr_t)t->tok_str[id] != (uintptr_t)SIZE_MAX)
        return hearth_err_set(err, HEARTH_EFORMAT, "token id %d given twice", id);
    size_t off = t->strings.n;
    if (tok_buf_put(&t->strings, s, len) || tok_buf_put(&t->strings, "", 1))
        return hearth_err_set(err, HEARTH_ENOMEM, "out of memory");
    t->tok_str[id] = (const char *)(uintptr_t)off;
    t->tok_len[id] = (uint32_t)len;
    return HEARTH_OK;
}

hearth_status tok_finish_vocab(hearth_tokenizer *t, hearth_err *err) {
    static const char empty[1] = "";
    if (tok_strmap_init(&t->vocab, (size_t)t->n_vocab)) return hearth_err_set(err, HEARTH_ENOMEM, "out of memory");
    for (int32_t i = 0; i < t->n_vocab; i++) {
        uintptr_t off = (uintptr_t)t->tok_str[i];
        if (off == (uintptr_t)SIZE_MAX) {
            t->tok_str[i] = empty;
            t->tok_len[i] = 0;
            continue;
        }
        t->tok_str[i] = t->strings.p + off;
        /* A string given twice (GGUF vocabularies do this, e.g. "  " next to
         * "ĠĠ" once re-spelled) maps to its last id, as the dict transformers
         * builds from the file does. */
        if (tok_strmap_put(&t->vocab, t->tok_str[i], t->tok_len[i], i))
            return hearth_err_set(err, HEARTH_ENOMEM, "out of memory");
    }
    char tmp[8];
    for (int b = 0; b < 256; b++) {
        int k = tok_utf8_encode(tok_byte_to_cp(b), tmp);
        t->byte_id[b] = tok_strmap_get(&t->vocab, tmp, (size_t)k);
        snprintf(tmp, sizeof tmp, "<0x%02X>", b);
        t->fb_id[b] = tok_strmap_get(&t->vocab, tmp, 6);
        if (t->fb_id[b] >= 0) t->tok_flags[t->fb_id[b]] |= TOKF_BYTE;
    }
    return HEARTH_OK;
}

hearth_status tok_add_added(hearth_tokenizer *t, const tok_added *a, hearth_err *err) {
    if (a->len == 0) return hearth_err_set(err, HEARTH_EFORMAT, "added token %d has empty content", a->id);
    if (a->id < 0) return hearth_err_set(err, HEARTH_EFORMAT, "added token '%s' has a negative id", a->content);
    if (a->id >= t->n_vocab) {
        /* added tokens may extend the vocabulary */
        int32_t n = a->id + 1;
        if (n > (1 << 28)) return hearth_err_set(err, HEARTH_EFORMAT, "added token id %d out of range", a->id);
        const char **s = realloc(t->tok_str, (size_t)n * sizeof *s);
        if (s) t->tok_str = s;
        uint32_t *l = realloc(t->tok_len, (size_t)n * sizeof *l);
        if (l) t->tok_len = l;
        uint8_t *f = realloc(t->tok_flags, (size_t)n);
        if (f) t->tok_flags = f;
        if (!s || !l || !f) return hearth_err_set(err, HEARTH_ENOMEM, "out of memory");
        for (int32_t i = t->n_vocab; i < n; i++) {
            t->tok_str[i] = "";
            t->tok_len[i] = 0;
            t->tok_flags[i] = 0;
        }
        t->n_vocab = n;
    }
    if (!t->added_map.cap && tok_strmap_init(&t->added_map, 64)) return hearth_err_set(err, HEARTH_ENOMEM, "out of memory");
    int32_t prev = tok_strmap_get(&t->added_map, a->content, a->len);
    tok_added *slot;
    if (prev >= 0) {
        /* the same content twice: the later definition wins (HF) */
        slot = &t->added[prev];
        free(slot->content);
    } else {
        tok_added *na = realloc(t->added, (size_t)(t->n_added + 1) * sizeof *na);
        if (!na) return hearth_err_set(err, HEARTH_ENOMEM, "out of memory");
        t->added = na;
        slot = &t->added[t->n_added];
    }
    *slot = *a;
    slot->content = malloc(a->len + 1);
    if (!slot->content) return hearth_err_set(err, HEARTH_ENOMEM, "out of memory");
    memcpy(slot->content, a->content, a->len);
    slot->content[a->len] = 0;
    if (prev < 0) {
        if (tok_strmap_put(&t->added_map, slot->content, slot->len, t->n_added))
            return hearth_err_set(err, HEARTH_ENOMEM, "out of memory");
        t->n_added++;
    }
    t->tok_str[a->id] = slot->content; /* HF: id_to_token looks at added tokens first */
    t->tok_len[a->id] = (uint32_t)a->len;
    t->tok_flags[a->id] |= TOKF_ADDED | (a->special ? TOKF_SPECIAL : 0);
    t->added_first[(unsigned char)a->content[0]] = 1;
    if ((int)a->len > t->added_max_len) t->added_max_len = (int)a->len;
    return HEARTH_OK;
}

/* Tokens that end a generation besides eos (as llama.cpp recognises them). */
static const char *const EOG_NAMES[] = {
    "<|eot_id|>", "<|im_end|>", "<|end|>", "<end_of_turn>", "<|endoftext|>", "<|eom_id|>",
    "<EOT>", "<|end_of_text|>", "<|return|>", "<|call|>", "<eos>", "</s>", "<|END_OF_TURN_TOKEN|>",
};

/* FIM tokens by their names in the models llama.cpp knows (llama-vocab.cpp),
 * for a vocabulary that does not name them in its metadata. */
static const char *const FIM_NAMES[HEARTH_FIM_N][9] = {
    [HEARTH_FIM_PRE] = {"<|fim_prefix|>", "<fim-prefix>", "<fim_prefix>", "<｜fim▁begin｜>",
                        "<PRE>", "▁<PRE>", "<|code_prefix|>", "<|prefix|>"},
    [HEARTH_FIM_SUF] = {"<|fim_suffix|>", "<fim-suffix>", "<fim_suffix>", "<｜fim▁hole｜>",
                        "<SUF>", "▁<SUF>", "<|code_suffix|>", "<|suffix|>"},
    [HEARTH_FIM_MID] = {"<|fim_middle|>", "<fim-middle>", "<fim_middle>", "<｜fim▁end｜>",
                        "<MID>", "▁<MID>", "<|code_middle|>", "<|middle|>"},
    [HEARTH_FIM_PAD] = {"<|fim_pad|>", "<fim-pad>", "<fim_pad>", "<PAD>", "[PAD]"},
    [HEARTH_FIM_REP] = {"<|fim_repo|>", "<|repo_name|>", "<fim-repo>", "<REPO>", "<reponame>"},
    [HEARTH_FIM_SEP] = {"<|file_sep|>"},
};

hearth_status tok_finish(hearth_tokenizer *t, const char *name, hearth_err *err) {
    if (t->unk_id >= t->n_vocab) return hearth_err_set(err, HEARTH_EFORMAT, "%s: unk token id %d out of range", name, t->unk_id);
    for (int i = 0; i < t->n_post; i++)
        for (int k = 0; k < t->post[i].n_ids; k++)
            if (t->post[i].ids[k] < 0 || t->post[i].ids[k] >= t->n_vocab)
                return hearth_err_set(err, HEARTH_EFORMAT, "%s: post_processor special token id %d out of range",
                                      name, t->post[i].ids[k]);
    if (t->bos >= t->n_vocab) t->bos = -1;
    if (t->eos >= t->n_vocab) t->eos = -1;
    t->eog = calloc(sizeof EOG_NAMES / sizeof EOG_NAMES[0] + 1, sizeof *t->eog);
    if (!t->eog) return hearth_err_set(err, HEARTH_ENOMEM, "out of memory");
    if (t->eos >= 0) t->eog[t->n_eog++] = t->eos;
    for (size_t i = 0; i < sizeof EOG_NAMES / sizeof EOG_NAMES[0]; i++) {
        int id = hearth_tok_find(t, EOG_NAMES[i]);
        if (id < 0 || id == t->eos || !(t->tok_flags[id] & TOKF_SPECIAL)) continue;
        t->eog[t->n_eog++] = id;
    }
    for (int i = 0; i < t->n_eog; i++) t->tok_flags[t->eog[i]] |= TOKF_EOG;
    for (int f = 0; f < HEARTH_FIM_N; f++) {
        if (t->fim[f] >= t->n_vocab) t->fim[f] = -1;
        for (int k = 0; t->fim[f] < 0 && k < 9 && FIM_NAMES[f][k]; k++) t->fim[f] = hearth_tok_find(t, FIM_NAMES[f][k]);
    }

    static const char *const MODEL[] = {"BPE", "WordPiece", "Unigram", "WordLevel"};
    char d[512];
    int k = snprintf(d, sizeof d, "%s%s%s, %d tokens (%d added), merges %zu", MODEL[t->model],
                     t->byte_level ? " byte-level" : "", t->byte_fallback ? " byte-fallback" : "", t->n_vocab,
                     t->n_added, t->merges.n);
    static const char *const NORM[] = {"NFC", "NFD", "NFKC", "NFKD", "Lowercase", "Strip", "StripAccents",
                                       "Replace", "Prepend", "BertNormalizer"};
    static const char *const PRE[] = {"ByteLevel", "Split", "Metaspace", "Digits", "Whitespace",
                                      "WhitespaceSplit", "Punctuation", "BertPreTokenizer", "CharDelimiterSplit"};
    static const char *const DEC[] = {"ByteLevel", "Metaspace", "ByteFallback", "Fuse", "Strip", "Replace",
                                      "WordPiece", "BPEDecoder"};
    k += snprintf(d + k, sizeof d - (size_t)k, "; normalizer");
    for (int i = 0; i < t->n_norm && k < (int)sizeof d - 32; i++)
        k += snprintf(d + k, sizeof d - (size_t)k, "%s%s", i ? "+" : " ", NORM[t->norm[i].kind]);
    if (!t->n_norm) k += snprintf(d + k, sizeof d - (size_t)k, " none");
    k += snprintf(d + k, sizeof d - (size_t)k, "; pre");
    for (int i = 0; i < t->n_pre && k < (int)sizeof d - 32; i++)
        k += snprintf(d + k, sizeof d - (size_t)k, "%s%s", i ? "+" : " ", PRE[t->pre[i].kind]);
    if (!t->n_pre) k += snprintf(d + k, sizeof d - (size_t)k, " none");
    k += snprintf(d + k, sizeof d - (size_t)k, "; decoder");
    for (int i = 0; i < t->n_dec && k < (int)sizeof d - 32; i++)
        k += snprintf(d + k, sizeof d - (size_t)k, "%s%s", i ? "+" : " ", DEC[t->dec[i].kind]);
    if (!t->n_dec) k += snprintf(d + k, sizeof d - (size_t)k, " none");
    t->describe = strdup(d);
    if (!t->describe) return hearth_err_set(err, HEARTH_ENOMEM, "out of memory");
    return HEARTH_OK;
}

/* Oniguruma (what HF tokenizers uses) gives \s the Unicode White_Space
 * property and \w the Unicode "Word" class; PCRE2 10.42 with UCP gives \s
 * the Z categories + ASCII spaces (no U+0085) and \w L|N|_. Rewrite those
 * escapes into explicit classes so both engines agree. */
#define WS_ITEMS "\\t-\\r\\x{20}\\x{85}\\x{A0}\\x{1680}\\x{2000}-\\x{200A}\\x{2028}\\x{2029}\\x{202F}\\x{205F}\\x{3000}"
#define WORD_ITEMS "\\p{Alphabetic}\\p{M}\\p{Nd}\\p{Pc}\\x{200C}\\x{200D}"

hearth_status tok_regex_compile(pcre2_code **out, const char *pat, size_t len, int literal, hearth_err *err) {
    *out = NULL;
    tok_buf b = {0};
    uint32_t opts = PCRE2_UTF | PCRE2_UCP;
    if (literal) {
        opts |= PCRE2_LITERAL;
        if (tok_buf_put(&b, pat, len)) return hearth_err_set(err, HEARTH_ENOMEM, "out of memory");
    } else {
        int in_class = 0;
        for (size_t i = 0; i < len; i++) {
            char c = pat[i];
            hearth_status st = HEARTH_OK;
            if (c == '\\' && i + 1 < len) {
                char e = pat[i + 1];
                i++;
                if (e == 's')
                    st = tok_buf_put(&b, in_class ? WS_ITEMS : "[" WS_ITEMS "]", strlen(WS_ITEMS) + (in_class ? 0 : 2));
                else if (e == 'S' && !in_class)
                    st = tok_buf_put(&b, "[^" WS_ITEMS "]", strlen(WS_ITEMS) + 3);
                else if (e == 'w')
                    st = tok_buf_put(&b, in_class ? WORD_ITEMS : "[" WORD_ITEMS "]",
                                     strlen(WORD_ITEMS) + (in_class ? 0 : 2));
                else if (e == 'W' && !in_class)
                    st = tok_buf_put(&b, "[^" WORD_ITEMS "]", strlen(WORD_ITEMS) + 3);
                else {
                    char two[2] = {c, e};
                    st = tok_buf_put(&b, two, 2);
                }
            } else {
                if (c == '[' && !in_class) {
                    in_class = 1;
                    st = tok_buf_put(&b, &c, 1);
                    /* a ']' right after '[' or '[^' is a literal */
                    if (i + 1 < len && pat[i + 1] == '^') {
                        st = st ? st : tok_buf_put(&b, "^", 1);
                        i++;
                    }
                    if (i + 1 < len && pat[i + 1] == ']') {
                        st = st ? st : tok_buf_put(&b, "\\]", 2);
                        i++;
                    }
                } else {
                    if (c == ']' && in_class) in_class = 0;
                    st = tok_buf_put(&b, &c, 1);
                }
            }
            if (st) {
                free(b.p);
                return hearth_err_set(err, HEARTH_ENOMEM, "out of memory");
            }
        }
    }
    int ec;
    PCRE2_SIZE eo;
    pcre2_code *re = pcre2_compile((PCRE2_SPTR)(b.p ? b.p : ""), b.n, opts, &ec, &eo, NULL);
    free(b.p);
    if (!re) {
        PCRE2_UCHAR msg[256];
        pcre2_get_error_message(ec, msg, sizeof msg);
        return hearth_err_set(err, HEARTH_EFORMAT, "regex /%.*s/: %s (at offset %zu)", (int)(len > 200 ? 200 : len),
                              pat, (char *)msg, (size_t)eo);
    }
    pcre2_jit_compile(re, PCRE2_JIT_COMPLETE); /* best effort: the interpreter is the fallback */
    *out = re;
    return HEARTH_OK;
}

void hearth_tok_free(hearth_tokenizer *t) {
    if (!t) return;
    free(t->describe);
    free(t->tok_str);
    free(t->tok_len);
    free(t->tok_flags);
    tok_strmap_free(&t->vocab);
    free(t->strings.p);
    tok_pairmap_free(&t->merges);
    free(t->cont_prefix);
    free(t->eow_suffix);
    free(t->scores);
    for (int i = 0; i < t->n_norm; i++) {
        free(t->norm[i].pattern);
        free(t->norm[i].content);
        if (t->norm[i].re) pcre2_code_free(t->norm[i].re);
    }
    free(t->norm);
    for (int i = 0; i < t->n_pre; i++)
        if (t->pre[i].re) pcre2_code_free(t->pre[i].re);
    free(t->pre);
    for (int i = 0; i < t->n_dec; i++) {
        free(t->dec[i].pattern);
        free(t->dec[i].content);
    }
    free(t->dec);
    for (int i = 0; i < t->n_post; i++) free(t->post[i].ids);
    free(t->post);
    for (int i = 0; i < t->n_added; i++) free(t->added[i].content);
    free(t->added);
    tok_strmap_free(&t->added_map);
    free(t->eog);
    free(t);
}

int hearth_tok_n_vocab(const hearth_tokenizer *t) { return t->n_vocab; }
int hearth_tok_bos(const hearth_tokenizer *t) { return t->bos; }
int hearth_tok_eos(const hearth_tokenizer *t) { return t->eos; }
int hearth_tok_adds_bos(const hearth_tokenizer *t) {
    return t->bos >= 0 && t->n_post > 0 && !t->post[0].is_sequence && t->post[0].n_ids == 1 &&
           t->post[0].ids[0] == t->bos;
}
int hearth_tok_fim(const hearth_tokenizer *t, hearth_fim which) {
    return which >= 0 && which < HEARTH_FIM_N ? t->fim[which] : -1;
}
int hearth_tok_is_eog(const hearth_tokenizer *t, int id) {
    return id >= 0 && id < t->n_vocab && (t->tok_flags[id] & TOKF_EOG);
}
int hearth_tok_is_special(const hearth_tokenizer *t, int id) {
    return id >= 0 && id < t->n_vocab && (t->tok_flags[id] & TOKF_SPECIAL);
}
const char *hearth_tok_token_text(const hearth_tokenizer *t, int id, size_t *len) {
    if (id < 0 || id >= t->n_vocab) return NULL;
    if (len) *len = t->tok_len[id];
    return t->tok_str[id];
}
int hearth_tok_find(const hearth_tokenizer *t, const char *s) {
    size_t n = strlen(s);
    int32_t a = t->added_map.cap ? tok_strmap_get(&t->added_map, s, n) : -1;
    if (a >= 0) return t->added[a].id;
    return tok_strmap_get(&t->vocab, s, n);
}
const char *hearth_tok_describe(const hearth_tokenizer *t) { return t->describe ? t->describe : ""; }
