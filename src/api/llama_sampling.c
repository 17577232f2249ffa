/* llama_sampling.c - llama-server's sampling fields on the OpenAI routes:
 * repeat_penalty / repeat_last_n, typical_p, top_n_sigma, XTC, DRY, dynamic
 * temperature and mirostat, with llama-server's names, ranges and defaults
 * (engine/sampler.h says what each does); and on its own routes, samplers. */
#include "api/api_internal.h"

#include <stdlib.h>
#include <string.h>

#define MAX_BREAKERS 64

static int breakers(const json_t *v, hearth_cpl_request *r, hearth_cpl_error *e) {
    if (!json_is_array(v) || json_array_size(v) == 0 || json_array_size(v) > MAX_BREAKERS)
        return api_fail(e, HEARTH_EINVAL, "dry_sequence_breakers",
                        "Invalid 'dry_sequence_breakers': expected a non-empty array of at most %d strings.",
                        MAX_BREAKERS);
    size_t i;
    json_t *x;
    json_array_foreach(v, i, x) {
        if (!json_is_string(x) || json_string_length(x) == 0 || strlen(json_string_value(x)) != json_string_length(x))
            return api_fail(e, HEARTH_EINVAL, "dry_sequence_breakers",
                            "Invalid 'dry_sequence_breakers[%zu]': expected a non-empty string.", i);
    }
    if (!(r->dry_breakers = calloc(json_array_size(v), sizeof *r->dry_breakers)))
        return api_fail(e, HEARTH_ENOMEM, NULL, "out of memory");
    json_array_foreach(v, i, x) {
        if (!(r->dry_breakers[i] = strdup(json_string_value(x))))
            return api_fail(e, HEARTH_ENOMEM, NULL, "out of memory");
        r->n_dry_breakers++;
    }
    return 0;
}

int api_parse_llama_sampling(const json_t *b, hearth_cpl_request *r, hearth_cpl_error *e) {
    hearth_cpl_params *p = &r->p;
    long long iv;
    int has = 0;
    float v;
    if (api_field(b, "repeat_penalty")) { /* llama-server's repetition penalty: over the last 64 tokens by default */
        if (p->has_repetition_penalty)
            return api_fail(e, HEARTH_EINVAL, "repeat_penalty",
                            "'repeat_penalty' and 'repetition_penalty' are two names of one setting: give one.");
        if (api_get_number(b, "repeat_penalty", 0, 10, &p->has_repetition_penalty, &p->repetition_penalty, e))
            return 1;
        if (p->repetition_penalty <= 0)
            return api_fail(e, HEARTH_EINVAL, "repeat_penalty",
                            "Invalid 'repeat_penalty': it must be greater than 0 (1 turns it off).");
        r->repeat_penalty_llama = 1;
    }
    if (api_get_int(b, "repeat_last_n", -1, 1 << 30, &has, &iv, e)) return 1;
    if (has) p->has_repeat_last_n = 1, p->repeat_last_n = (int)iv;
    has = 0;
    if (api_get_number(b, "typical_p", 0, 1e9, &has, &v, e)) return 1;
    if (has && v <= 0)
        return api_fail(e, HEARTH_EINVAL, "typical_p",
                        "Invalid 'typical_p': it must be greater than 0 (1 turns it off).");
    if (has) p->has_typical_p = 1, p->typical_p = v >= 1 ? 1.0f : v;
    has = 0;
    if (api_get_number(b, "top_n_sigma", -1e9, 1e9, &has, &v, e)) return 1;
    if (has) p->has_top_n_sigma = 1, p->top_n_sigma = v > 0 ? v : 0.0f; /* <= 0 (-1): off */
    if (api_get_number(b, "xtc_probability", 0, 1, &p->has_xtc_probability, &p->xtc_probability, e) ||
        api_get_number(b, "xtc_threshold", 0, 1, &p->has_xtc_threshold, &p->xtc_threshold, e) ||
        api_get_number(b, "dry_multiplier", 0, 1e9, &p->has_dry_multiplier, &p->dry_multiplier, e))
        return 1;
    has = 0;
    if (api_get_number(b, "dry_base", -1e9, 1e9, &has, &v, e)) return 1;
    if (has && v >= 1) p->has_dry_base = 1, p->dry_base = v; /* below 1: the default, as llama-server does */
    has = 0;
    if (api_get_int(b, "dry_allowed_length", 0, 1 << 30, &has, &iv, e)) return 1;
    if (has) p->has_dry_allowed_length = 1, p->dry_allowed_length = (int)iv;
    has = 0;
    if (api_get_int(b, "dry_penalty_last_n", -1, 1 << 30, &has, &iv, e)) return 1;
    if (has) p->has_dry_penalty_last_n = 1, p->dry_penalty_last_n = (int)iv;
    json_t *brk = api_field(b, "dry_sequence_breakers");
    if (brk && breakers(brk, r, e)) return 1;
    has = 0;
    if (api_get_int(b, "mirostat", 0, 2, &has, &iv, e)) return 1;
    if (has) p->has_mirostat = 1, p->mirostat = (int)iv;
    if (api_get_number(b, "mirostat_tau", -1e9, 1e9, &p->has_mirostat_tau, &p->mirostat_tau, e) ||
        api_get_number(b, "mirostat_eta", -1e9, 1e9, &p->has_mirostat_eta, &p->mirostat_eta, e) ||
        api_get_number(b, "dynatemp_exponent", -1e9, 1e9, &p->has_dynatemp_exponent, &p->dynatemp_exponent, e))
        return 1;
    has = 0;
    if (api_get_number(b, "dynatemp_range", -1e9, 1e9, &has, &v, e)) return 1;
    if (has) p->has_dynatemp_range = 1, p->dynatemp_range = v > 0 ? v : 0.0f; /* <= 0: off */
    return 0;
}

/* llama.cpp's samplers in the order its default chain runs them, which is
 * the order hearth's sampler runs them in (infill, not in the default chain,
 * after the filters); each with its other names and its letter. */
static const struct {
    const char *name, *alt[5];
    char letter;
} SAMPLERS[] = {
    {"penalties", {0}, 'e'},
    {"dry", {0}, 'd'},
    {"top_n_sigma", {"top-n-sigma"}, 's'},
    {"top_k", {"top-k"}, 'k'},
    {"typ_p", {"typical_p", "typical", "typ-p", "typical-p", "typ"}, 'y'},
    {"top_p", {"top-p", "nucleus"}, 'p'},
    {"min_p", {"min-p"}, 'm'},
    {"xtc", {0}, 'x'},
    {"infill", {0}, 'i'},
    {"temperature", {"temp"}, 't'},
};
enum { S_PENALTIES, S_DRY, S_SIGMA, S_TOP_K, S_TYPICAL, S_TOP_P, S_MIN_P, S_XTC, S_INFILL, S_TEMP, S_N };

static int sampler_index(const char *name, size_t len) {
    for (int i = 0; i < S_N; i++) {
        if (len == 1 && name[0] == SAMPLERS[i].letter) return i;
        if (strlen(SAMPLERS[i].name) == len && !memcmp(SAMPLERS[i].name, name, len)) return i;
        for (int k = 0; k < 5 && SAMPLERS[i].alt[k]; k++)
            if (strlen(SAMPLERS[i].alt[k]) == len && !memcmp(SAMPLERS[i].alt[k], name, len)) return i;
    }
    return -1;
}

/* llama-server's samplers: the samplers that run, as names (["top_k",
 * "top_p", "infill"]) or letters ("kpi"); one left out is off (the
 * temperature's: a draw at 1; penalties': no repetition, presence or
 * frequency penalty). A list in llama.cpp's default order is what hearth
 * runs; another order is refused by name. With mirostat, llama.cpp runs no
 * list, and neither does hearth. */
int api_parse_llama_samplers(const json_t *b, hearth_cpl_request *r, hearth_cpl_error *e) {
    json_t *v = api_field(b, "samplers");
    if (!v) return 0;
    int on[S_N] = {0}, last = -1;
    size_t n = json_is_array(v) ? json_array_size(v) : json_is_string(v) ? json_string_length(v) : 0;
    if (!json_is_array(v) && !json_is_string(v))
        return api_fail(e, HEARTH_EINVAL, "samplers",
                        "Invalid 'samplers': expected an array of sampler names or a string of their letters.");
    for (size_t i = 0; i < n; i++) {
        json_t *x = json_is_array(v) ? json_array_get(v, i) : NULL;
        if (x && !json_is_string(x))
            return api_fail(e, HEARTH_EINVAL, "samplers", "Invalid 'samplers[%zu]': expected a sampler's name.", i);
        const char *name = x ? json_string_value(x) : json_string_value(v) + i;
        size_t len = x ? json_string_length(x) : 1;
        int k = sampler_index(name, len);
        if (k < 0)
            return api_fail(e, HEARTH_EINVAL, "samplers", "Invalid 'samplers[%zu]': '%.*s' is not a sampler here.", i,
                            (int)(len > 64 ? 64 : len), name);
        if (k <= last)
            return api_fail(e, HEARTH_ENOTSUP, "samplers",
                            "'samplers': '%s' after '%s' is an order hearth does not run; it runs them in llama.cpp's "
                            "default order (penalties, dry, top_n_sigma, top_k, typ_p, top_p, min_p, xtc, infill, "
                            "temperature), and a list in that order picks which.",
                            SAMPLERS[k].name, SAMPLERS[last].name);
        on[k] = 1;
        last = k;
    }
    hearth_cpl_params *p = &r->p;
    if (p->has_mirostat && p->mirostat) return 0;
    if (!on[S_PENALTIES]) {
        p->has_repetition_penalty = p->has_presence_penalty = p->has_frequency_penalty = 1;
        p->repetition_penalty = 1.0f;
        p->presence_penalty = p->frequency_penalty = 0.0f;
    }
    if (!on[S_DRY]) p->has_dry_multiplier = 1, p->dry_multiplier = 0.0f;
    if (!on[S_SIGMA]) p->has_top_n_sigma = 1, p->top_n_sigma = 0.0f;
    if (!on[S_TOP_K]) p->has_top_k = 1, p->top_k = 0;
    if (!on[S_TYPICAL]) p->has_typical_p = 1, p->typical_p = 1.0f;
    if (!on[S_TOP_P]) p->has_top_p = 1, p->top_p = 1.0f;
    if (!on[S_MIN_P]) p->has_min_p = 1, p->min_p = 0.0f;
    if (!on[S_XTC]) p->has_xtc_probability = 1, p->xtc_probability = 0.0f;
    if (!on[S_TEMP]) p->has_temperature = p->has_dynatemp_range = 1, p->temperature = 1.0f, p->dynatemp_range = 0.0f;
    r->infill_sampler = on[S_INFILL];
    return 0;
}
