/* test_tok_misc.c - tokenizer behaviour beyond the goldens: lossless round
 * trips on random text, the streaming detokenizer's hold-back, lookups and
 * end-of-generation ids, and malformed tokenizer.json / GGUF metadata. */
#include "testhelp.h"
#include "smollm_tok.h"
#include "test_io_util.h"

#include "core/file.h"
#include "io/gguf.h"
#include "tok/tok.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>


static uint64_t rng = 0x9E3779B97F4A7C15ull;
static uint32_t rnd(void) {
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return (uint32_t)(rng >> 11);
}

/* Random valid UTF-8 mixing ASCII, whitespace, Latin, CJK, emoji, marks. */
static size_t random_text(char *o, size_t cap) {
    size_t n = 0;
    int len = (int)(rnd() % 60);
    for (int i = 0; i < len && n + 4 < cap; i++) {
        uint32_t cp, r = rnd() % 10;
        if (r < 4) cp = 0x20 + rnd() % 95;
        else if (r == 4) cp = " \t\n\r"[rnd() % 4];
        else if (r == 5) cp = 0xA0 + rnd() % 0x500;
        else if (r == 6) cp = 0x4E00 + rnd() % 0x5000;
        else if (r == 7) cp = 0x1F300 + rnd() % 0x300;
        else if (r == 8) cp = 0x300 + rnd() % 0x70;
        else cp = 1 + rnd() % 0x3FFFF; /* planes 0-3: lead byte F0 at most */
        if (cp >= 0xD800 && cp <= 0xDFFF) cp = 'x';
        if (cp < 0x80) o[n++] = (char)cp;
        else if (cp < 0x800) o[n++] = (char)(0xC0 | cp >> 6), o[n++] = (char)(0x80 | (cp & 0x3F));
        else if (cp < 0x10000)
            o[n++] = (char)(0xE0 | cp >> 12), o[n++] = (char)(0x80 | ((cp >> 6) & 0x3F)), o[n++] = (char)(0x80 | (cp & 0x3F));
        else
            o[n++] = (char)(0xF0 | cp >> 18), o[n++] = (char)(0x80 | ((cp >> 12) & 0x3F)),
            o[n++] = (char)(0x80 | ((cp >> 6) & 0x3F)), o[n++] = (char)(0x80 | (cp & 0x3F));
    }
    o[n] = 0;
    return n;
}

/* The GPT-2 byte map's char for b, UTF-8 encoded into key. */
static void byte_char(unsigned b, char *key) {
    uint32_t cp = b;
    if (!((cp >= 0x21 && cp <= 0x7E) || (cp >= 0xA1 && cp <= 0xAC) || (cp >= 0xAE && cp <= 0xFF)))
        cp = cp <= 0x20 ? 256 + cp : cp <= 0xA0 ? 256 + 33 + (cp - 0x7F) : 323;
    memset(key, 0, 4);
    if (cp < 0x80) key[0] = (char)cp;
    else key[0] = (char)(0xC0 | cp >> 6), key[1] = (char)(0x80 | (cp & 0x3F));
}

/* Byte-level BPE is lossless exactly on texts whose every byte has a token
 * (SmolLM2's vocabulary lacks a few bytes, e.g. 0xF1, as HF agrees). */
static int lossless_for(const hearth_tokenizer *t, const char *s, size_t n) {
    char key[4];
    for (size_t i = 0; i < n; i++) {
        byte_char((unsigned char)s[i], key);
        if (hearth_tok_find(t, key) < 0) return 0;
    }
    return 1;
}

TEST(tok_bytelevel_roundtrip_random) {
    hearth_tokenizer *t = smollm();
    CHECK_MSG(t, "cannot load the default model's tokenizer (run scripts/setup.sh)");
    char text[512];
    int tested = 0;
    for (int it = 0; it < 2000; it++) {
        size_t n = random_text(text, sizeof text);
        if (!lossless_for(t, text, n)) continue;
        tested++;
        int32_t *ids;
        size_t k;
        hearth_err err = {0};
        CHECK(hearth_tok_encode(t, text, n, 0, 0, &ids, &k, &err) == HEARTH_OK);
        char *back;
        size_t bl;
        CHECK(hearth_tok_decode(t, ids, k, 0, &back, &bl, &err) == HEARTH_OK);
        int same = bl == n && !memcmp(back, text, n);
        free(back);
        free(ids);
        CHECK_MSG(same, "round trip %d differs for \"%s\"", it, text);
    }
    CHECK_MSG(tested > 1500, "only %d of 2000 random texts were lossless", tested);
    hearth_tok_free(t);
}

TEST(tok_smollm2_specials_and_lookups) {
    hearth_tokenizer *t = smollm();
    CHECK(t);
    CHECK_EQ(hearth_tok_n_vocab(t), 49152);
    CHECK_EQ(hearth_tok_bos(t), 1);
    CHECK_EQ(hearth_tok_eos(t), 2);
    CHECK_EQ(hearth_tok_find(t, "<|im_end|>"), 2);
    CHECK_EQ(hearth_tok_find(t, "Hello"), 19556);
    CHECK_EQ(hearth_tok_find(t, "no such token at all"), -1);
    CHECK(hearth_tok_is_eog(t, 2));
    CHECK(hearth_tok_is_eog(t, 0)); /* <|endoftext|> */
    CHECK(!hearth_tok_is_eog(t, 1));
    CHECK(hearth_tok_is_special(t, 1));
    CHECK(!hearth_tok_is_special(t, 19556));
    size_t len;
    CHECK_STR(hearth_tok_token_text(t, 905, &len), "\xC4\xA0world");
    CHECK_EQ(len, 7);
    CHECK(hearth_tok_token_text(t, 49152, NULL) == NULL);
    /* special tokens inside text: recognised, or plain text */
    int32_t *ids;
    size_t n;
    hearth_err err = {0};
    const char *s = "<|im_start|>user\nHi<|im_end|>";
    CHECK(hearth_tok_encode(t, s, strlen(s), 1, 1, &ids, &n, &err) == HEARTH_OK);
    CHECK(n >= 4 && ids[0] == 1 && ids[n - 1] == 2);
    free(ids);
    CHECK(hearth_tok_encode(t, s, strlen(s), 1, 0, &ids, &n, &err) == HEARTH_OK);
    for (size_t i = 0; i < n; i++) CHECK(ids[i] != 1 && ids[i] != 2);
    free(ids);
    /* errors */
    CHECK_EQ(hearth_tok_encode(t, "a\xC3(", 3, 0, 0, &ids, &n, &err), HEARTH_EINVAL);
    CHECK_CONTAINS(err.msg, "not valid UTF-8 (byte 1)");
    int32_t bad[] = {5, 49152};
    char *out;
    CHECK_EQ(hearth_tok_decode(t, bad, 2, 0, &out, NULL, &err), HEARTH_ERANGE);
    CHECK_CONTAINS(err.msg, "position 1");
    hearth_tok_free(t);
}

TEST(tok_detok_holds_back_partial_utf8) {
    hearth_tokenizer *t = smollm();
    CHECK(t);
    /* "é😀" as byte tokens: each push may only emit complete characters */
    const char *text = "\xC3\xA9\xF0\x9F\x98\x80 ok";
    int32_t ids[16];
    size_t n = 0;
    for (const unsigned char *p = (const unsigned char *)text; *p; p++) {
        char key[4];
        byte_char(*p, key);
        ids[n] = hearth_tok_find(t, key);
        CHECK_MSG(ids[n] >= 0, "byte token for %02x missing", *p);
        n++;
    }
    hearth_detok d;
    hearth_detok_init(&d, t, 0);
    char out[64];
    size_t w[16];
    for (size_t i = 0; i < n; i++) w[i] = hearth_detok_push(&d, ids[i], out, sizeof out);
    CHECK_EQ(w[0], 0);  /* C3 held */
    CHECK_EQ(w[1], 2);  /* é */
    CHECK_EQ(w[2] + w[3] + w[4], 0);
    CHECK_EQ(w[5], 4);  /* 😀 */
    CHECK_EQ(hearth_detok_finish(&d, out, sizeof out), 0);
    /* a dangling lead byte at the end becomes U+FFFD at finish, as HF decode does */
    hearth_detok_init(&d, t, 0);
    CHECK_EQ(hearth_detok_push(&d, ids[2], out, sizeof out), 0);
    CHECK_EQ(hearth_detok_finish(&d, out, sizeof out), 3);
    CHECK(!memcmp(out, "\xEF\xBF\xBD", 3));
    char *full;
    CHECK(hearth_tok_decode(t, &ids[2], 1, 0, &full, NULL, NULL) == HEARTH_OK);
    CHECK_STR(full, "\xEF\xBF\xBD");
    free(full);
    hearth_tok_free(t);
}

/* A minimal valid tokenizer.json to break in one place at a time. */
#define TINY_OK                                                                                            \
    "{\"model\":{\"type\":\"BPE\",\"vocab\":{\"a\":0,\"b\":1,\"ab\":2,\"<unk>\":3},\"merges\":[\"a b\"]," \
    "\"unk_token\":\"<unk>\"},\"added_tokens\":[{\"id\":4,\"content\":\"<eos>\",\"special\":true}]}"

static hearth_status load_str(const char *json, hearth_err *err, hearth_tokenizer **t) {
    return hearth_tok_load_json_mem(t, json, strlen(json), NULL, 0, "x/tokenizer.json", err);
}

TEST(tok_json_minimal_works) {
    hearth_tokenizer *t;
    hearth_err err = {0};
    CHECK_MSG(load_str(TINY_OK, &err, &t) == HEARTH_OK, "%s", err.msg);
    int32_t *ids;
    size_t n;
    CHECK(hearth_tok_encode(t, "abab<eos>c", 10, 1, 1, &ids, &n, &err) == HEARTH_OK);
    CHECK_EQ(n, 4);
    CHECK_EQ(ids[0], 2);
    CHECK_EQ(ids[1], 2);
    CHECK_EQ(ids[2], 4);
    CHECK_EQ(ids[3], 3); /* c -> unk */
    free(ids);
    CHECK_EQ(hearth_tok_n_vocab(t), 5);
    hearth_tok_free(t);
}

TEST(tok_json_malformed_errors) {
    static const struct {
        const char *json, *want;
        hearth_status st;
    } C[] = {
        {"{\"model\": ", "invalid JSON at line 1", HEARTH_EFORMAT},
        {"[]", "not a JSON object", HEARTH_EFORMAT},
        {"{}", "\"model\" is missing", HEARTH_EFORMAT},
        {"{\"model\":{\"type\":\"Magic\",\"vocab\":{}}}", "model.type 'Magic' is not supported", HEARTH_ENOTSUP},
        {"{\"model\":{\"type\":\"BPE\",\"vocab\":[1]}}", "model.vocab must be an object", HEARTH_EFORMAT},
        {"{\"model\":{\"type\":\"BPE\",\"vocab\":{\"a\":-1}}}", "model.vocab['a']", HEARTH_EFORMAT},
        {"{\"model\":{\"type\":\"BPE\",\"vocab\":{\"a\":0,\"b\":0}}}", "given twice", HEARTH_EFORMAT},
        {"{\"model\":{\"type\":\"BPE\",\"vocab\":{\"a\":0,\"b\":1},\"merges\":[\"a c\"]}}",
         "model.merges[0]: token 'c' is not in the vocabulary", HEARTH_EFORMAT},
        {"{\"model\":{\"type\":\"BPE\",\"vocab\":{\"a\":0,\"b\":1},\"merges\":[\"a b\"]}}",
         "model.merges[0]: merged token 'ab' is not in the vocabulary", HEARTH_EFORMAT},
        {"{\"model\":{\"type\":\"BPE\",\"vocab\":{\"a\":0},\"merges\":[\"ab\"]}}", "model.merges[0] 'ab' is not two tokens",
         HEARTH_EFORMAT},
        {"{\"model\":{\"type\":\"BPE\",\"vocab\":{\"a\":0},\"merges\":[7]}}", "model.merges[0] must be", HEARTH_EFORMAT},
        {"{\"model\":{\"type\":\"BPE\",\"vocab\":{\"a\":0},\"unk_token\":\"<unk>\"}}", "unk_token '<unk>' is not in the vocabulary",
         HEARTH_EFORMAT},
        {"{\"model\":{\"type\":\"BPE\",\"vocab\":{\"a\":0}},\"added_tokens\":[{\"id\":\"x\"}]}", "added_tokens[0]", HEARTH_EFORMAT},
        {"{\"model\":{\"type\":\"BPE\",\"vocab\":{\"a\":0}},\"added_tokens\":[{\"id\":1,\"content\":\"\"}]}", "empty content",
         HEARTH_EFORMAT},
        {"{\"model\":{\"type\":\"BPE\",\"vocab\":{\"a\":0}},\"pre_tokenizer\":{\"type\":\"Nope\"}}",
         "pre_tokenizer: pre-tokenizer type 'Nope' is not supported", HEARTH_ENOTSUP},
        {"{\"model\":{\"type\":\"BPE\",\"vocab\":{\"a\":0}},\"pre_tokenizer\":{\"type\":\"Split\",\"pattern\":{\"Regex\":\"(\"},"
         "\"behavior\":\"Isolated\"}}",
         "pre_tokenizer.pattern: regex /(/", HEARTH_EFORMAT},
        {"{\"model\":{\"type\":\"BPE\",\"vocab\":{\"a\":0}},\"pre_tokenizer\":{\"type\":\"Split\",\"pattern\":{\"Regex\":\"a\"},"
         "\"behavior\":\"Sideways\"}}",
         "behavior 'Sideways'", HEARTH_EFORMAT},
        {"{\"model\":{\"type\":\"BPE\",\"vocab\":{\"a\":0}},\"normalizer\":{\"type\":\"Sequence\",\"normalizers\":[{\"type\":\"Foo\"}]}}",
         "normalizer.normalizers[0]: normalizer type 'Foo'", HEARTH_ENOTSUP},
        {"{\"model\":{\"type\":\"BPE\",\"vocab\":{\"a\":0}},\"decoder\":{\"type\":\"Strip\"}}", "decoder.content is missing",
         HEARTH_EFORMAT},
        {"{\"model\":{\"type\":\"BPE\",\"vocab\":{\"a\":0}},\"post_processor\":{\"type\":\"TemplateProcessing\",\"single\":"
         "[{\"SpecialToken\":{\"id\":\"<s>\",\"type_id\":0}}],\"special_tokens\":{}}}",
         "special_tokens has no ids for '<s>'", HEARTH_EFORMAT},
        {"{\"model\":{\"type\":\"BPE\",\"vocab\":{\"a\":0}},\"post_processor\":{\"type\":\"BertProcessing\",\"cls\":[\"[CLS]\",9],"
         "\"sep\":[\"[SEP]\",1]}}",
         "post_processor special token id 9 out of range", HEARTH_EFORMAT},
        {"{\"model\":{\"type\":\"Unigram\",\"vocab\":[[\"a\"]]}}", "model.vocab[0] must be [token, score]", HEARTH_EFORMAT},
        {"{\"model\":{\"type\":\"WordPiece\",\"vocab\":{\"a\":0},\"unk_token\":\"[UNK]\"}}", "unk_token '[UNK]'", HEARTH_EFORMAT},
    };
    for (size_t i = 0; i < sizeof C / sizeof C[0]; i++) {
        hearth_tokenizer *t = (hearth_tokenizer *)1;
        hearth_err err = {0};
        hearth_status st = load_str(C[i].json, &err, &t);
        CHECK_MSG(st == C[i].st, "case %zu: status %s, want %s (%s)", i, hearth_status_name(st),
                  hearth_status_name(C[i].st), err.msg);
        CHECK_MSG(t == NULL, "case %zu: out not cleared", i);
        CHECK_CONTAINS(err.msg, C[i].want);
        CHECK_CONTAINS(err.msg, "x/tokenizer.json");
    }
}

TEST(tok_json_mutations_never_crash) {
    char *src;
    size_t n;
    hearth_err err = {0};
    CHECK(hearth_file_read(test_path("tests/fixtures/tok/tiny_bytelevel.tokenizer.json"), &src, &n, &err) == HEARTH_OK);
    char *buf = malloc(n + 1);
    int loaded = 0, rejected = 0;
    for (int it = 0; it < 300; it++) {
        memcpy(buf, src, n);
        size_t len = n;
        if (it % 3 == 0) len = rnd() % n; /* truncated */
        else
            for (int k = 0; k < 1 + it % 4; k++) buf[rnd() % n] = " {}[]\",:0a\\\xC3"[rnd() % 13];
        hearth_tokenizer *t;
        if (hearth_tok_load_json_mem(&t, buf, len, NULL, 0, "m", &err) == HEARTH_OK) {
            loaded++;
            int32_t *ids;
            size_t k;
            const char *s = "Hello <think> world 123 xyz!";
            if (hearth_tok_encode(t, s, strlen(s), 1, 1, &ids, &k, &err) == HEARTH_OK) {
                char *d;
                if (hearth_tok_decode(t, ids, k, 0, &d, NULL, &err) == HEARTH_OK) free(d);
                free(ids);
            }
            hearth_tok_free(t);
        } else {
            rejected++;
            CHECK(err.msg[0] != 0);
        }
    }
    free(buf);
    free(src);
    CHECK(rejected > 100);
}

/* GGUF metadata: build small files with the io tests' writer. */
static int write_vocab_gguf(const char *path, const char *model, const char *const *toks, size_t nt,
                            const char *const *merges, size_t nm) {
    gw_buf w = {0};
    gw_header(&w, 3, 0, merges ? 3 : 2);
    gw_kv_str(&w, "tokenizer.ggml.model", model);
    gw_kv_strs(&w, "tokenizer.ggml.tokens", toks, nt);
    if (merges) gw_kv_strs(&w, "tokenizer.ggml.merges", merges, nm);
    int rc = write_file(path, w.b, w.n);
    gw_free(&w);
    return rc;
}

static hearth_status load_gguf_file(const char *path, hearth_tokenizer **t, hearth_err *err) {
    hearth_gguf *g;
    *t = NULL;
    hearth_status st = hearth_gguf_open(&g, path, err);
    if (st) return st;
    st = hearth_tok_load_gguf(t, g, err);
    hearth_gguf_close(g);
    return st;
}

TEST(tok_gguf_metadata_errors) {
    char path[512];
    snprintf(path, sizeof path, "%s/tok_vocab.gguf", test_tmpdir());
    hearth_err err = {0};
    hearth_tokenizer *t;
    static const char *const toks[] = {"a", "b", "ab", "\xC4\xA0"};
    static const char *const good[] = {"a b"};
    static const char *const bad[] = {"a c"};
    static const char *const nospace[] = {"ab"};
    CHECK(write_vocab_gguf(path, "gpt2", toks, 4, good, 1) == 0);
    CHECK_MSG(load_gguf_file(path, &t, &err) == HEARTH_OK, "%s", err.msg);
    int32_t *ids;
    size_t n;
    CHECK(hearth_tok_encode(t, "ab a", 4, 0, 0, &ids, &n, &err) == HEARTH_OK);
    CHECK_EQ(n, 3);
    CHECK_EQ(ids[0], 2);
    CHECK_EQ(ids[1], 3);
    CHECK_EQ(ids[2], 0);
    free(ids);
    hearth_tok_free(t);

    CHECK(write_vocab_gguf(path, "gpt2", toks, 4, bad, 1) == 0);
    CHECK_EQ(load_gguf_file(path, &t, &err), HEARTH_EFORMAT);
    CHECK_CONTAINS(err.msg, "tokenizer.ggml.merges[0] 'a c': the right token is not in the vocabulary");
    CHECK(t == NULL);
    CHECK(write_vocab_gguf(path, "gpt2", toks, 4, nospace, 1) == 0);
    CHECK_EQ(load_gguf_file(path, &t, &err), HEARTH_EFORMAT);
    CHECK_CONTAINS(err.msg, "not two tokens");
    CHECK(write_vocab_gguf(path, "rwkv", toks, 4, NULL, 0) == 0);
    CHECK_EQ(load_gguf_file(path, &t, &err), HEARTH_ENOTSUP);
    CHECK_CONTAINS(err.msg, "tokenizer.ggml.model 'rwkv'");
    CHECK_CONTAINS(err.msg, "tok_vocab.gguf");
    CHECK(write_vocab_gguf(path, "gpt2", toks, 0, NULL, 0) == 0);
    CHECK_EQ(load_gguf_file(path, &t, &err), HEARTH_EFORMAT);
    CHECK_CONTAINS(err.msg, "tokenizer.ggml.tokens");
}
