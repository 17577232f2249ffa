/* tok.h - tokenizers, id-exact with Hugging Face `tokenizers`.
 *
 * A hearth_tokenizer is built from an HF tokenizer.json (+ optional
 * tokenizer_config.json) or from the tokenizer.ggml.* metadata of a GGUF file.
 * It reproduces the HF pipeline: added tokens -> normalizer -> pre-tokenizer
 * -> model (BPE byte-level or with byte fallback, WordPiece, Unigram,
 * WordLevel) -> post-processor; and decode through the decoder chain.
 *
 * Threading: after load a tokenizer is immutable; any number of threads may
 * call encode/decode/lookup concurrently. A hearth_detok belongs to one
 * thread (one generation stream).
 *
 * Ownership: ids and strings returned through `**out` are malloc'd and freed
 * by the caller; `const char *` returned by lookups stay owned by the
 * tokenizer until hearth_tok_free. */
#ifndef HEARTH_TOK_TOK_H
#define HEARTH_TOK_TOK_H

#include "core/status.h"

#include <stddef.h>
#include <stdint.h>

typedef struct hearth_tokenizer hearth_tokenizer;
typedef struct hearth_gguf hearth_gguf;

/* From an HF tokenizer.json (+ optional tokenizer_config.json, which supplies
 * added_tokens_decoder entries missing from tokenizer.json and the bos/eos
 * token names). Errors name the file and the JSON field at fault. */
hearth_status hearth_tok_load_json(hearth_tokenizer **out, const char *tokenizer_json_path,
                                   const char *tokenizer_config_path /* or NULL */, hearth_err *err);
/* The same from in-memory documents (config_json may be NULL). `name` is used
 * in error messages. */
hearth_status hearth_tok_load_json_mem(hearth_tokenizer **out, const char *tokenizer_json, size_t len,
                                       const char *config_json, size_t config_len, const char *name,
                                       hearth_err *err);
/* From GGUF metadata tokenizer.ggml.* (model gpt2 / llama / bert; pre = the
 * pre-tokenizer name). Builds the tokenizer transformers builds from the same
 * file, with the pre-tokenizer regexes llama.cpp uses for `pre`. The result
 * does not reference g: g may be closed afterwards. */
hearth_status hearth_tok_load_gguf(hearth_tokenizer **out, const hearth_gguf *g, hearth_err *err);
/* From a model path: a .gguf file, a directory with tokenizer.json (and
 * tokenizer_config.json when present), or a tokenizer.json file. */
hearth_status hearth_tok_load_path(hearth_tokenizer **out, const char *path, hearth_err *err);
void hearth_tok_free(hearth_tokenizer *t); /* NULL is a no-op */

/* Encode UTF-8 text (invalid UTF-8 -> HEARTH_EINVAL). add_special: add
 * bos/eos/cls/sep as the post-processor says. parse_special: recognise
 * special added tokens written in the text (non-special added tokens are
 * always recognised, as in HF). *ids is malloc'd (non-NULL even when
 * *n_ids == 0); the caller frees it. */
hearth_status hearth_tok_encode(const hearth_tokenizer *t, const char *text, size_t len, int add_special,
                                int parse_special, int32_t **ids, size_t *n_ids, hearth_err *err);
/* Full decode (HF Tokenizer.decode with skip_special_tokens as given).
 * *out is malloc'd and NUL-terminated, *len (optional) without the NUL.
 * An id outside the vocabulary -> HEARTH_ERANGE. */
hearth_status hearth_tok_decode(const hearth_tokenizer *t, const int32_t *ids, size_t n, int skip_special,
                                char **out, size_t *len, hearth_err *err);

int hearth_tok_n_vocab(const hearth_tokenizer *t);
int hearth_tok_bos(const hearth_tokenizer *t);            /* -1 if none */
int hearth_tok_eos(const hearth_tokenizer *t);            /* -1 if none */
int hearth_tok_adds_bos(const hearth_tokenizer *t);       /* encoding with add_special starts with bos */
int hearth_tok_is_eog(const hearth_tokenizer *t, int id); /* eos, eot, <|im_end|>, <|endoftext|>, ... */
int hearth_tok_is_special(const hearth_tokenizer *t, int id);
/* Raw vocabulary string of id (as written in tokenizer.json / GGUF), NULL if
 * out of range. *len (optional) receives its byte length. */
const char *hearth_tok_token_text(const hearth_tokenizer *t, int id, size_t *len);
int hearth_tok_find(const hearth_tokenizer *t, const char *token_text); /* id or -1 */
/* Fill-in-the-middle tokens: [REP]repo [SEP]file ... [PRE]prefix[SUF]suffix[MID]middle. */
typedef enum { HEARTH_FIM_PRE, HEARTH_FIM_SUF, HEARTH_FIM_MID, HEARTH_FIM_PAD, HEARTH_FIM_REP, HEARTH_FIM_SEP,
               HEARTH_FIM_N } hearth_fim;
/* The model's FIM token: GGUF's tokenizer.ggml.fim_*_token_id, else the
 * vocabulary's token of a name llama.cpp knows for it (<|fim_prefix|>,
 * <fim_prefix>, <PRE>, ...); -1 if none. */
int hearth_tok_fim(const hearth_tokenizer *t, hearth_fim which);
/* A short description of the pipeline ("BPE byte-level, pre=Split+ByteLevel, ..."). */
const char *hearth_tok_describe(const hearth_tokenizer *t);

/* Streaming detokenizer: feed ids one at a time; it writes only complete
 * UTF-8 (holding back partial sequences), and the concatenation of all
 * pushes + finish equals hearth_tok_decode of the whole sequence.
 * Caller-owned; no allocation. One push writes at most 3 * (token bytes) +
 * 3 * HEARTH_DETOK_RUN bytes; give cap >= HEARTH_DETOK_MAX_OUT to never
 * truncate (a smaller cap truncates the output of that push). A run of
 * byte-fallback tokens (<0xXX>) longer than HEARTH_DETOK_RUN bytes is
 * released early and converted in parts. */
#define HEARTH_DETOK_RUN 1024
#define HEARTH_DETOK_MAX_OUT 16384
typedef struct hearth_detok {
    const struct hearth_tokenizer *t;
    int skip_special;
    int64_t n_tok;    /* tokens that entered the decoder chain (after skipping) */
    int64_t n_fb_out; /* tokens the ByteFallback step has passed on */
    int strip_left;   /* leading chars still to strip once the chain is fused */
    int n_pend;       /* bytes of an incomplete UTF-8 sequence held back */
    int n_run;        /* bytes of the current byte-fallback run */
    int raw;          /* set after init: the bytes as the tokens make them, an incomplete or invalid UTF-8
                         sequence included (a token's own bytes, for constraints), not text made valid */
    unsigned char pend[4];
    unsigned char run[HEARTH_DETOK_RUN];
} hearth_detok;

void hearth_detok_init(hearth_detok *d, const hearth_tokenizer *t, int skip_special);
/* Appends the newly decodable text to out (up to cap); returns bytes written. */
size_t hearth_detok_push(hearth_detok *d, int32_t id, char *out, size_t cap);
size_t hearth_detok_finish(hearth_detok *d, char *out, size_t cap);

#endif
