/* vllm_fields.c - vLLM's extra sampling and output fields on the OpenAI
 * routes: allowed_token_ids, bad_words, include_stop_str_in_output,
 * skip_special_tokens, spaces_between_special_tokens, truncate_prompt_tokens
 * cache_salt and priority, with vLLM's meanings (completion.h says what each does). */
#include "api/api_internal.h"

#include <stdlib.h>
#include <string.h>

#define MAX_IDS 131072
#define MAX_WORDS 256

static int allowed_ids(const json_t *v, hearth_cpl_request *r, hearth_cpl_error *e) {
    size_t n = json_is_array(v) ? json_array_size(v) : 0;
    if (n && n <= MAX_IDS && !(r->allowed_ids = malloc(sizeof *r->allowed_ids * n)))
        return api_fail(e, HEARTH_ENOMEM, NULL, "out of memory");
    return api_token_ids(v, "allowed_token_ids", 1, MAX_IDS, r->allowed_ids, &r->n_allowed, e);
}

static int bad_words(const json_t *v, hearth_cpl_request *r, hearth_cpl_error *e) {
    if (!json_is_array(v) || json_array_size(v) > MAX_WORDS)
        return api_fail(e, HEARTH_EINVAL, "bad_words", "Invalid 'bad_words': expected an array of at most %d strings.",
                        MAX_WORDS);
    if (json_array_size(v) == 0) return 0;
    if (!(r->bad_words = calloc(json_array_size(v), sizeof *r->bad_words)))
        return api_fail(e, HEARTH_ENOMEM, NULL, "out of memory");
    size_t i;
    json_t *x;
    json_array_foreach(v, i, x) {
        const char *s = json_is_string(x) ? json_string_value(x) : NULL;
        size_t n = s ? strspn(s, " ") : 0;
        if (!s || strlen(s) != json_string_length(x) || s[n] == 0)
            return api_fail(e, HEARTH_EINVAL, "bad_words", "Invalid 'bad_words[%zu]': expected a non-blank string.", i);
        if (!(r->bad_words[i] = strdup(s))) return api_fail(e, HEARTH_ENOMEM, NULL, "out of memory");
        r->n_bad_words++;
    }
    return 0;
}

int api_parse_pooling_fields(const json_t *b, hearth_cpl_request *r, hearth_cpl_error *e) {
    long long iv;
    int has = 0;
    if (api_get_int(b, "truncate_prompt_tokens", -1, 1 << 30, &has, &iv, e)) return 1;
    if (has && iv == 0)
        return api_fail(e, HEARTH_EINVAL, "truncate_prompt_tokens",
                        "Invalid 'truncate_prompt_tokens': it must be at least 1 (or -1: the context length).");
    if (has) r->truncate_prompt = (int)iv;
    has = 0;
    if (api_get_int(b, "priority", -(1LL << 31), (1LL << 31) - 1, &has, &iv, e)) return 1;
    if (has) r->priority = (int)iv;
    return 0;
}

int api_parse_vllm_fields(const json_t *b, hearth_cpl_request *r, hearth_cpl_error *e) {
    json_t *v = api_field(b, "allowed_token_ids");
    if (v && allowed_ids(v, r, e)) return 1;
    if ((v = api_field(b, "bad_words")) && bad_words(v, r, e)) return 1;
    int skip = 1, spaces = 1;
    /* spaces_between_special_tokens: a fast tokenizer's decode, as vLLM's, puts none of its own between tokens */
    if (api_get_bool(b, "include_stop_str_in_output", &r->include_stop, e) ||
        api_get_bool(b, "skip_special_tokens", &skip, e) || api_get_bool(b, "spaces_between_special_tokens", &spaces, e))
        return 1;
    r->keep_special = !skip;
    if (api_parse_pooling_fields(b, r, e)) return 1;
    if ((v = api_field(b, "cache_salt"))) {
        if (!json_is_string(v) || json_string_length(v) == 0 || json_string_length(v) > 4096 ||
            strlen(json_string_value(v)) != json_string_length(v))
            return api_fail(e, HEARTH_EINVAL, "cache_salt",
                            "Invalid 'cache_salt': expected a non-empty string (at most 4096 bytes).");
        if (!(r->cache_salt = strdup(json_string_value(v)))) return api_fail(e, HEARTH_ENOMEM, NULL, "out of memory");
    }
    return 0;
}
