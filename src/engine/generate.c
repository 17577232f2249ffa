/* generate.c - serial generation over hearth_model_forward. */
#include "engine/generate.h"

#include "core/clock.h"
#include "engine/choose.h"

#include <stdlib.h>

hearth_status hearth_generate(hearth_model *m, hearth_kv *kv, int slot, int adapter, const int32_t *prompt,
                              int n_prompt, int max_new, hearth_sampler *smp, const int32_t *stop_ids, int n_stop,
                              int lp_wanted, hearth_token_fn fn, void *user, hearth_gen_stats *stats, hearth_err *err) {
    const hearth_model_config *c = hearth_model_config_get(m);
    int chunk = hearth_model_max_tokens(m), ctx = hearth_kv_max_ctx(kv);
    *stats = (hearth_gen_stats){.n_prompt = n_prompt};
    if (n_prompt <= 0) return hearth_err_set(err, HEARTH_EINVAL, "empty prompt");
    if (n_prompt >= ctx)
        return hearth_err_set(err, HEARTH_ERANGE, "prompt of %d tokens does not fit the context of %d", n_prompt,
                              ctx);
    if (max_new > ctx - n_prompt) max_new = ctx - n_prompt;
    hearth_chooser ch;
    int32_t *seq = malloc(sizeof(int32_t) * (size_t)chunk), *pos = malloc(sizeof(int32_t) * (size_t)chunk),
            *ad = malloc(sizeof(int32_t) * (size_t)chunk);
    hearth_status st = hearth_chooser_init(&ch, 1, c->vocab_size, 1, err);
    if (st != HEARTH_OK) {
        free(seq);
        free(pos);
        free(ad);
        return st;
    }
    if (!seq || !pos || !ad) {
        st = hearth_err_set(err, HEARTH_ENOMEM, "generate: out of memory");
        goto done;
    }
    if ((st = hearth_kv_reserve(kv, slot, n_prompt + max_new)) != HEARTH_OK) {
        st = hearth_err_set(err, st, "generate: no room in the KV cache for %d positions", n_prompt + max_new);
        goto done;
    }
    for (int i = 0; i < chunk; i++) seq[i] = slot, ad[i] = adapter;
    hearth_sampler_accept_prompt(smp, prompt, n_prompt);
    double t0 = hearth_time_now();
    for (int p0 = 0; p0 < n_prompt; p0 += chunk) {
        int n = n_prompt - p0 < chunk ? n_prompt - p0 : chunk;
        for (int i = 0; i < n; i++) pos[i] = p0 + i;
        int last = n - 1, want = p0 + n == n_prompt;
        if ((st = hearth_model_set_row_adapters(m, adapter ? ad : NULL, n, err)) ||
            (st = hearth_model_forward(m, kv, prompt + p0, seq, pos, n, &last, want, NULL, err)))
            goto done;
    }
    int32_t cur;
    hearth_logprobs lp;
    uint8_t want_lp = (uint8_t)(lp_wanted != 0);
    /* the first token is part of the prefill (its choice waits for the device) */
    if (max_new > 0 && (st = hearth_choose(&ch, m, &smp, &want_lp, NULL, 1, &cur, &lp, err))) goto done;
    double t1 = hearth_time_now();
    stats->prefill_s = t1 - t0;
    for (int i = 0; i < max_new; i++) {
        if (i > 0) {
            int32_t p = n_prompt + i - 1, zero = 0;
            if ((st = hearth_model_set_row_adapters(m, adapter ? ad : NULL, 1, err)) ||
                (st = hearth_model_forward(m, kv, &cur, seq, &p, 1, &zero, 1, NULL, err)))
                goto done;
            if ((st = hearth_choose(&ch, m, &smp, &want_lp, NULL, 1, &cur, &lp, err))) goto done;
        }
        stats->n_gen++; /* hearth_choose had the sampler accept it */
        int is_stop = 0;
        for (int k = 0; k < n_stop; k++) is_stop |= stop_ids[k] == cur;
        int halt = fn ? fn(user, cur, lp_wanted ? &lp : NULL) : 0;
        if (is_stop) stats->stopped_by_id = 1;
        if (is_stop || halt) break;
    }
    stats->decode_s = hearth_time_now() - t1;
done:
    hearth_kv_release_slot(kv, slot);
    hearth_chooser_deinit(&ch);
    free(seq);
    free(pos);
    free(ad);
    return st;
}
