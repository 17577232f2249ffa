/* tok_internal.h - the tokenizer's in-memory form, shared by the loaders
 * (load_json.c, load_gguf.c), the encoder (encode.c, bpe.c, models.c,
 * normalize.c, pretok.c) and the decoder (decode.c).
 *
 * Invariants after a successful load:
 *  - every id in [0, n_vocab) has a token string (tok_str/tok_len); ids that
 *    tokenizer.json leaves out are empty strings and never produced;
 *  - vocab_map maps every token string to its id (model vocab and added
 *    tokens; on a duplicate string the added token wins, as in HF);
 *  - merges only reference ids < n_vocab;
 *  - the pipeline arrays are fully parsed, so encode/decode never fail on
 *    configuration, only on bad input or memory. */
#ifndef HEARTH_TOK_INTERNAL_H
#define HEARTH_TOK_INTERNAL_H

#include "tok/tok.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>
#include <stdint.h>

/* ---- hash maps (strmap.c) ---------------------------------------------- */

/* Bytes -> int32 id; open addressing; the keys stay owned by the caller. */
typedef struct {
    const char **key;
    uint32_t *klen;
    int32_t *val;
    uint32_t *hash;
    size_t cap, n; /* cap a power of two */
} tok_strmap;

hearth_status tok_strmap_init(tok_strmap *m, size_t expect);
void tok_strmap_free(tok_strmap *m);
/* Insert or overwrite; key must outlive the map. */
hearth_status tok_strmap_put(tok_strmap *m, const char *key, size_t klen, int32_t val);
int32_t tok_strmap_get(const tok_strmap *m, const char *key, size_t klen); /* -1 if absent */

/* (left id, right id) -> (rank, merged id). */
typedef struct {
    uint64_t *key; /* (left << 32 | right) + 1; 0 = empty */
    int32_t *rank;
    int32_t *id;
    size_t cap, n;
} tok_pairmap;

hearth_status tok_pairmap_init(tok_pairmap *m, size_t expect);
void tok_pairmap_free(tok_pairmap *m);
/* Keeps the first insertion of a pair (HF: the first merge of a pair wins). */
hearth_status tok_pairmap_put(tok_pairmap *m, int32_t a, int32_t b, int32_t rank, int32_t id);
static inline uint64_t tok_pair_hash(uint64_t k) {
    k ^= k >> 33;
    k *= 0xff51afd7ed558ccdULL;
    k ^= k >> 33;
    return k;
}
/* 1 and fills rank/id if the pair merges. Inline: the BPE inner loop. */
static inline int tok_pairmap_get(const tok_pairmap *m, int32_t a, int32_t b, int32_t *rank, int32_t *id) {
    if (!m->cap) return 0;
    uint64_t k = (((uint64_t)(uint32_t)a << 32) | (uint32_t)b) + 1;
    size_t mask = m->cap - 1, i = (size_t)tok_pair_hash(k) & mask;
    for (;;) {
        uint64_t kk = m->key[i];
        if (kk == k) {
            *rank = m->rank[i];
            *id = m->id[i];
            return 1;
        }
        if (!kk) return 0;
        i = (i + 1) & mask;
    }
}

uint32_t tok_hash_bytes(const char *s, size_t n);

/* ---- growable byte buffer ---------------------------------------------- */
typedef struct {
    char *p;
    size_t n, cap;
} tok_buf;
hearth_status tok_buf_reserve(tok_buf *b, size_t extra);
hearth_status tok_buf_put(tok_buf *b, const void *s, size_t n);

/* ---- UTF-8 helpers (utf8.c) -------------------------------------------- */
/* Decode one code point at s (n bytes available). Returns its length (1..4)
 * and the code point in *cp, or 0 for an invalid/incomplete sequence. */
int tok_utf8_next(const unsigned char *s, size_t n, uint32_t *cp);
int tok_utf8_encode(uint32_t cp, char *out); /* returns 1..4 */
int tok_utf8_valid(const char *s, size_t n);
/* Length of the longest prefix of s[0..n) that is a valid but incomplete
 * UTF-8 sequence (0 if s does not start one). Used to hold back bytes. */
int tok_utf8_incomplete_len(const unsigned char *s, size_t n);
/* Append s[0..n) with each maximal invalid subpart replaced by U+FFFD, as
 * Rust's String::from_utf8_lossy does. */
hearth_status tok_utf8_lossy(tok_buf *out, const unsigned char *s, size_t n);
int tok_is_whitespace(uint32_t cp);  /* Unicode White_Space (Rust char::is_whitespace) */
int tok_is_punctuation(uint32_t cp); /* ASCII punctuation or Unicode P* */

/* The GPT-2 byte <-> printable-char map (bytes_to_unicode). */
uint32_t tok_byte_to_cp(int b);
int tok_cp_to_byte(uint32_t cp); /* -1 if cp is not in the map */
/* Check the sequence at s: > 0 its length if valid (cp filled); < 0 minus
 * the length of the maximal invalid subpart to replace by one U+FFFD (a
 * truncated but valid prefix at the end of the buffer counts as invalid). */
int tok_utf8_check(const unsigned char *s, size_t n, uint32_t *cp);

/* ---- pipeline components ----------------------------------------------- */

typedef enum {
    NORM_NFC,
    NORM_NFD,
    NORM_NFKC,
    NORM_NFKD,
    NORM_LOWERCASE,
    NORM_STRIP,
    NORM_STRIP_ACCENTS,
    NORM_REPLACE,
    NORM_PREPEND,
    NORM_BERT,
} norm_kind;

typedef struct {
    norm_kind kind;
    int left, right;              /* Strip */
    int clean_text, chinese, strip_accents, lowercase; /* Bert (strip_accents: -1 = follow lowercase) */
    char *pattern;                /* Replace: literal pattern (if re == NULL) */
    size_t pattern_len;
    pcre2_code *re;               /* Replace: regex */
    char *content;                /* Replace content / Prepend string */
    size_t content_len;
} tok_norm;

typedef enum { SPLIT_REMOVED, SPLIT_ISOLATED, SPLIT_MERGED_PREV, SPLIT_MERGED_NEXT, SPLIT_CONTIGUOUS } split_behavior;

typedef enum {
    PRE_BYTELEVEL,
    PRE_SPLIT,
    PRE_METASPACE,
    PRE_DIGITS,
    PRE_WHITESPACE,
    PRE_WHITESPACE_SPLIT,
    PRE_PUNCTUATION,
    PRE_BERT,
    PRE_CHAR_DELIM,
} pre_kind;

typedef enum { PREPEND_ALWAYS, PREPEND_FIRST, PREPEND_NEVER } prepend_scheme;

typedef struct {
    pre_kind kind;
    int add_prefix_space;     /* ByteLevel */
    int use_regex;            /* ByteLevel */
    pcre2_code *re;           /* Split (regex or escaped literal), ByteLevel (GPT-2), Whitespace */
    split_behavior behavior;  /* Split, Punctuation */
    int invert;               /* Split */
    uint32_t replacement;     /* Metaspace: code point (U+2581 usually); CharDelimiterSplit: delimiter */
    prepend_scheme prepend;   /* Metaspace */
    int split;                /* Metaspace */
    int individual_digits;    /* Digits */
} tok_pre;

typedef enum { DEC_BYTELEVEL, DEC_METASPACE, DEC_BYTE_FALLBACK, DEC_FUSE, DEC_STRIP, DEC_REPLACE, DEC_WORDPIECE, DEC_BPE } dec_kind;

typedef struct {
    dec_kind kind;
    char *pattern;      /* Replace (literal) */
    size_t pattern_len;
    char *content;      /* Replace content, Strip content (one char), WordPiece prefix, BPE suffix */
    size_t content_len;
    int start, stop;    /* Strip */
    uint32_t replacement; /* Metaspace */
    prepend_scheme prepend;
    int cleanup;        /* WordPiece */
} tok_dec;

/* One element of a TemplateProcessing "single" template. */
typedef struct {
    int is_sequence;    /* 1: $A; 0: special token (ids below) */
    int32_t *ids;       /* the ids of the special token */
    int n_ids;
} tok_tmpl_piece;

typedef struct {
    char *content;
    size_t len;
    int32_t id;
    int special, lstrip, rstrip, single_word, normalized;
} tok_added;

typedef enum { MODEL_BPE, MODEL_WORDPIECE, MODEL_UNIGRAM, MODEL_WORDLEVEL } model_kind;

struct hearth_tokenizer {
    char *describe;

    /* vocabulary */
    int32_t n_vocab;
    const char **tok_str; /* id -> NUL-terminated token string */
    uint32_t *tok_len;
    uint8_t *tok_flags;   /* TOKF_* */
    tok_strmap vocab;     /* token string -> id (model vocab only: model lookups) */
    tok_buf strings;      /* owns model token strings (offsets fixed up at the end of load) */

    /* model */
    model_kind model;
    int32_t unk_id;       /* -1 if none */
    /* BPE */
    tok_pairmap merges;
    int byte_level;       /* initial symbols come from bytes via byte_id (ByteLevel pre-tokenizer) */
    int32_t byte_id[256]; /* ByteLevel: id of each byte's char (-1 if absent) */
    int32_t fb_id[256];   /* byte fallback: id of <0xXX> (-1 if absent) */
    int byte_fallback, fuse_unk, ignore_merges;
    char *cont_prefix;    /* BPE continuing_subword_prefix / WordPiece prefix ("##") */
    size_t cont_prefix_len;
    char *eow_suffix;     /* BPE end_of_word_suffix */
    size_t eow_suffix_len;
    /* WordPiece */
    int max_input_chars;
    /* Unigram */
    double *scores;
    double min_score;
    int max_token_chars;  /* longest token in code points (Unigram lattice bound) */

    /* pipeline */
    tok_norm *norm;
    int n_norm;
    tok_pre *pre;
    int n_pre;
    tok_dec *dec;
    int n_dec;
    int has_decoder;
    /* post-processor: template for a single sequence */
    tok_tmpl_piece *post;
    int n_post;

    /* added tokens, sorted by content for the matcher */
    tok_added *added;
    int n_added;
    tok_strmap added_map; /* content -> index into added */
    uint8_t added_first[256]; /* 1 if some added token starts with this byte (fast skip) */
    int added_max_len;

    int32_t bos, eos, pad;
    int32_t fim[HEARTH_FIM_N]; /* hearth_tok_fim; -1 = none */
    int32_t *eog;
    int n_eog;
};

#define TOKF_SPECIAL 1
#define TOKF_ADDED 2
#define TOKF_EOG 4
#define TOKF_BYTE 8 /* a byte-fallback token <0xXX> */
#define TOKF_ALPHABET 16 /* ByteLevel: every char of the token is in the byte map */

/* ---- construction helpers (build.c) ------------------------------------ */
hearth_tokenizer *tok_new(void);
/* Set the vocab size and allocate the per-id arrays (all tokens empty). */
hearth_status tok_alloc_vocab(hearth_tokenizer *t, int32_t n, hearth_err *err);
/* Copy s as the string of id (model vocabulary). */
hearth_status tok_set_token(hearth_tokenizer *t, int32_t id, const char *s, size_t len, hearth_err *err);
/* After all tokens are set: build vocab map, byte tables. */
hearth_status tok_finish_vocab(hearth_tokenizer *t, hearth_err *err);
/* Add an added token (after tok_finish_vocab). The id may extend the vocab. */
hearth_status tok_add_added(hearth_tokenizer *t, const tok_added *a, hearth_err *err);
/* Final checks, describe string, EOG set. */
hearth_status tok_finish(hearth_tokenizer *t, const char *name, hearth_err *err);
/* Compile a regex (PCRE2, UTF + UCP, with \s rewritten to Unicode
 * White_Space as Oniguruma has it). */
hearth_status tok_regex_compile(pcre2_code **out, const char *pat, size_t len, int literal, hearth_err *err);

/* ---- encode internals --------------------------------------------------- */

/* Per-call scratch; grows, freed at the end of encode. */
typedef struct {
    tok_buf a, b;              /* text buffers (normalizer / pre-tokenizer ping-pong) */
    uint32_t *off, *len;       /* pieces: ranges into the current buffer */
    size_t n, cap;
    uint32_t *off2, *len2;     /* second piece list (pre-tokenizer ping-pong) */
    size_t n2, cap2;
    /* model scratch */
    void *sym;
    size_t sym_cap;
    void *heap;
    size_t heap_cap;
    pcre2_match_data *md;
    int32_t *ids;
    size_t n_ids, cap_ids;
} tok_scratch;

hearth_status tok_emit(tok_scratch *s, int32_t id);
hearth_status tok_normalize(const hearth_tokenizer *t, const char *s, size_t n, tok_buf *out, tok_buf *tmp);
/* Pre-tokenize s[0..n) (a normalized segment); first = 1 for the first
 * segment of the input (Metaspace prepend_scheme "first"). Leaves pieces in
 * sc->off/len as ranges into *text (which may be replaced). */
hearth_status tok_pretokenize(const hearth_tokenizer *t, tok_scratch *sc, const char **text, size_t *n, int first);
/* Run the model on one piece; appends ids. */
hearth_status tok_model_piece(const hearth_tokenizer *t, tok_scratch *sc, const char *s, size_t n);

#endif
