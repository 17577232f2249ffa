/* model_config.c - the consistency check shared by the HF and GGUF config
 * readers: whatever the source, a config that passes it describes a decoder
 * the model code can size its buffers from. */
#include "io/model_config.h"

#include <math.h>

hearth_status hearth_model_config_check(const hearth_model_config *c, const char *source, hearth_err *err) {
    const struct { const char *name; int v; } pos[] = {
        {"vocab_size", c->vocab_size},   {"hidden_size", c->hidden_size}, {"intermediate_size", c->intermediate_size},
        {"n_layers", c->n_layers},       {"n_heads", c->n_heads},         {"n_kv_heads", c->n_kv_heads},
        {"head_dim", c->head_dim},       {"max_position_embeddings", c->max_position_embeddings},
    };
    for (size_t i = 0; i < sizeof pos / sizeof pos[0]; i++)
        if (pos[i].v <= 0)
            return hearth_err_set(err, HEARTH_EFORMAT, "%s: %s = %d (must be > 0)", source, pos[i].name, pos[i].v);
    if (c->n_heads % c->n_kv_heads)
        return hearth_err_set(err, HEARTH_EFORMAT, "%s: n_heads %d is not a multiple of n_kv_heads %d", source,
                              c->n_heads, c->n_kv_heads);
    if (c->head_dim % 2)
        return hearth_err_set(err, HEARTH_EFORMAT, "%s: head_dim %d is odd (rotary embeddings need pairs)", source,
                              c->head_dim);
    if (!(c->rms_norm_eps > 0) || !isfinite(c->rms_norm_eps))
        return hearth_err_set(err, HEARTH_EFORMAT, "%s: rms_norm_eps %g (must be > 0)", source,
                              (double)c->rms_norm_eps);
    if (!(c->rope_theta > 0) || !isfinite(c->rope_theta))
        return hearth_err_set(err, HEARTH_EFORMAT, "%s: rope_theta %g (must be > 0)", source, c->rope_theta);
    if (c->sliding_window < 0)
        return hearth_err_set(err, HEARTH_EFORMAT, "%s: sliding_window %d (must be >= 0)", source, c->sliding_window);
    /* bos is embedded, so it must be a row of the table; an eos id past the
     * vocab is merely never sampled, so sloppy configs are let through. */
    if (c->bos_token_id >= c->vocab_size)
        return hearth_err_set(err, HEARTH_EFORMAT, "%s: bos_token_id %d outside vocab (%d)", source, c->bos_token_id,
                              c->vocab_size);
    if (c->rope_scaling != HEARTH_ROPE_DEFAULT && !(c->rope_factor > 0))
        return hearth_err_set(err, HEARTH_EFORMAT, "%s: rope scaling factor %g (must be > 0)", source, c->rope_factor);
    if (c->rope_scaling == HEARTH_ROPE_LLAMA3 &&
        (!(c->rope_low_freq_factor > 0) || !(c->rope_high_freq_factor > c->rope_low_freq_factor) ||
         c->rope_original_max_pos <= 0))
        return hearth_err_set(err, HEARTH_EFORMAT,
                              "%s: llama3 rope needs low_freq_factor > 0, high_freq_factor > low_freq_factor and "
                              "original_max_position_embeddings > 0 (got %g, %g, %d)",
                              source, c->rope_low_freq_factor, c->rope_high_freq_factor, c->rope_original_max_pos);
    return HEARTH_OK;
}
