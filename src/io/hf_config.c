/* hf_config.c - config.json and generation_config.json of a Hugging Face
 * model dir -> hearth_model_config / hearth_gen_defaults.
 *
 * Defaults mirror the transformers config classes of each architecture, so a
 * hand-trimmed config.json means what transformers would make of it. Every
 * field is type-checked; messages name the field and the file. */
#include "io/model_config.h"

#include "core/file.h"

#include <jansson.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* What differs between architectures (transformers defaults). */
typedef struct {
    const char *name;
    int max_pos;          /* max_position_embeddings default */
    int head_dim;         /* head_dim default; 0 = hidden_size / num_attention_heads */
    int bias;             /* -1: read attention_bias (default false); else fixed */
    int qk_norm;
    int swa;              /* 0: none; 1: sliding_window (default 4096, null = none);
                             2: only when use_sliding_window is true */
} arch_info;

static const arch_info archs[] = {
    {"llama", 2048, 0, -1, 0, 0},
    {"mistral", 131072, 0, 0, 0, 1},
    {"qwen2", 32768, 0, 1, 0, 2},
    {"qwen3", 32768, 128, -1, 1, 2},
};

typedef struct {
    const char *file;
    hearth_err *err;
} jctx;

static int absent(const json_t *v) { return !v || json_is_null(v); }

/* "rope_scaling.factor" or "vocab_size" for messages. */
static const char *fname(char *buf, size_t cap, const char *obj, const char *key) {
    if (obj) snprintf(buf, cap, "%s.%s", obj, key);
    else snprintf(buf, cap, "%s", key);
    return buf;
}

/* An integer field >= min. Absent/null: required -> EFORMAT, else def. */
static hearth_status j_int(jctx *c, const json_t *o, const char *obj, const char *key, int required, int def,
                           int min, int *out) {
    char fn[96];
    const json_t *v = json_object_get(o, key);
    if (absent(v)) {
        if (required)
            return hearth_err_set(c->err, HEARTH_EFORMAT, "%s: required field %s missing", c->file,
                                  fname(fn, sizeof fn, obj, key));
        *out = def;
        return HEARTH_OK;
    }
    if (!json_is_integer(v) || json_integer_value(v) < min || json_integer_value(v) > INT_MAX)
        return hearth_err_set(c->err, HEARTH_EFORMAT, "%s: field %s must be an integer >= %d", c->file,
                              fname(fn, sizeof fn, obj, key), min);
    *out = (int)json_integer_value(v);
    return HEARTH_OK;
}

/* A number field (integer or real); absent/null -> def, or EFORMAT if required. */
static hearth_status j_num(jctx *c, const json_t *o, const char *obj, const char *key, int required, double def,
                           double *out) {
    char fn[96];
    const json_t *v = json_object_get(o, key);
    if (absent(v)) {
        if (required)
            return hearth_err_set(c->err, HEARTH_EFORMAT, "%s: required field %s missing", c->file,
                                  fname(fn, sizeof fn, obj, key));
        *out = def;
        return HEARTH_OK;
    }
    if (!json_is_number(v))
        return hearth_err_set(c->err, HEARTH_EFORMAT, "%s: field %s must be a number", c->file,
                              fname(fn, sizeof fn, obj, key));
    *out = json_number_value(v);
    return HEARTH_OK;
}

static hearth_status j_bool(jctx *c, const json_t *o, const char *key, int def, int *out) {
    const json_t *v = json_object_get(o, key);
    if (absent(v)) {
        *out = def;
        return HEARTH_OK;
    }
    if (!json_is_boolean(v))
        return hearth_err_set(c->err, HEARTH_EFORMAT, "%s: field %s must be true or false", c->file, key);
    *out = json_is_true(v);
    return HEARTH_OK;
}

/* A string field or "" when absent/null; EFORMAT if another type. */
static hearth_status j_str(jctx *c, const json_t *o, const char *obj, const char *key, const char **out) {
    char fn[96];
    const json_t *v = json_object_get(o, key);
    *out = "";
    if (absent(v)) return HEARTH_OK;
    if (!json_is_string(v))
        return hearth_err_set(c->err, HEARTH_EFORMAT, "%s: field %s must be a string", c->file,
                              fname(fn, sizeof fn, obj, key));
    *out = json_string_value(v);
    return HEARTH_OK;
}

/* Token ids: an int, a list of ints, or absent/null (n = 0). */
static hearth_status j_ids(jctx *c, const json_t *o, const char *key, int *ids, int *n) {
    const json_t *v = json_object_get(o, key);
    *n = 0;
    if (absent(v)) return HEARTH_OK;
    size_t cnt = json_is_array(v) ? json_array_size(v) : 1;
    if (cnt > HEARTH_MAX_EOS)
        return hearth_err_set(c->err, HEARTH_ENOTSUP, "%s: field %s has %zu ids (at most %d supported)", c->file,
                              key, cnt, HEARTH_MAX_EOS);
    for (size_t i = 0; i < cnt; i++) {
        const json_t *x = json_is_array(v) ? json_array_get(v, i) : v;
        if (!json_is_integer(x) || json_integer_value(x) < 0 || json_integer_value(x) > INT_MAX)
            return hearth_err_set(c->err, HEARTH_EFORMAT, "%s: field %s must be a token id or a list of them",
                                  c->file, key);
        ids[(*n)++] = (int)json_integer_value(x);
    }
    return HEARTH_OK;
}

/* Parse dir/name into *root. A missing file -> ENOENT (message names it). */
static hearth_status load_json(const char *dir, const char *name, char *path, size_t cap, json_t **root,
                               hearth_err *err) {
    *root = NULL;
    snprintf(path, cap, "%s/%s", dir, name);
    char *text;
    size_t len;
    hearth_status st = hearth_file_read(path, &text, &len, err);
    if (st) return st;
    json_error_t jerr;
    *root = json_loadb(text, len, 0, &jerr);
    free(text);
    if (!*root)
        return hearth_err_set(err, HEARTH_EFORMAT, "%s: JSON: %s (line %d, column %d)", path, jerr.text, jerr.line,
                              jerr.column);
    if (!json_is_object(*root)) {
        json_decref(*root);
        *root = NULL;
        return hearth_err_set(err, HEARTH_EFORMAT, "%s: not a JSON object", path);
    }
    return HEARTH_OK;
}

/* rope_theta and scaling, from rope_parameters (transformers 5) or
 * rope_theta + rope_scaling (transformers 4). */
static hearth_status read_rope(jctx *c, const json_t *root, hearth_model_config *cfg) {
    hearth_status st;
    const json_t *rp = json_object_get(root, "rope_parameters");
    const char *obj = "rope_parameters";
    if (absent(rp)) {
        rp = json_object_get(root, "rope_scaling");
        obj = "rope_scaling";
    }
    if ((st = j_num(c, root, NULL, "rope_theta", 0, 10000.0, &cfg->rope_theta))) return st;
    cfg->rope_scaling = HEARTH_ROPE_DEFAULT;
    if (absent(rp)) return HEARTH_OK;
    if (!json_is_object(rp))
        return hearth_err_set(c->err, HEARTH_EFORMAT, "%s: field %s must be an object", c->file, obj);
    if (!strcmp(obj, "rope_parameters") &&
        (st = j_num(c, rp, obj, "rope_theta", 0, cfg->rope_theta, &cfg->rope_theta)))
        return st;

    const char *type;
    if ((st = j_str(c, rp, obj, "rope_type", &type))) return st;
    if (!type[0] && (st = j_str(c, rp, obj, "type", &type))) return st;
    if (!type[0]) {
        if (!strcmp(obj, "rope_scaling"))
            return hearth_err_set(c->err, HEARTH_EFORMAT, "%s: rope_scaling has no rope_type", c->file);
        type = "default";
    }
    if (!strcmp(type, "default")) return HEARTH_OK;
    if (!strcmp(type, "linear")) {
        cfg->rope_scaling = HEARTH_ROPE_LINEAR;
        return j_num(c, rp, obj, "factor", 1, 0, &cfg->rope_factor);
    }
    if (!strcmp(type, "llama3")) {
        cfg->rope_scaling = HEARTH_ROPE_LLAMA3;
        if ((st = j_num(c, rp, obj, "factor", 1, 0, &cfg->rope_factor)) ||
            (st = j_num(c, rp, obj, "low_freq_factor", 1, 0, &cfg->rope_low_freq_factor)) ||
            (st = j_num(c, rp, obj, "high_freq_factor", 1, 0, &cfg->rope_high_freq_factor)) ||
            (st = j_int(c, rp, obj, "original_max_position_embeddings", 1, 0, 1, &cfg->rope_original_max_pos)))
            return st;
        return HEARTH_OK;
    }
    return hearth_err_set(c->err, HEARTH_ENOTSUP, "%s: %s type %s is not supported (default, linear, llama3)",
                          c->file, obj, type);
}

hearth_status hearth_hf_config_load(hearth_model_config *cfg, const char *dir, hearth_err *err) {
    memset(cfg, 0, sizeof *cfg);
    char path[4096];
    json_t *root;
    hearth_status st = load_json(dir, "config.json", path, sizeof path, &root, err);
    if (st) return st;
    jctx c = {path, err};

    const char *mt;
    const arch_info *a = NULL;
    if ((st = j_str(&c, root, NULL, "model_type", &mt))) goto done;
    if (!mt[0]) { st = hearth_err_set(err, HEARTH_EFORMAT, "%s: required field model_type missing", path); goto done; }
    for (size_t i = 0; i < sizeof archs / sizeof archs[0]; i++)
        if (!strcmp(mt, archs[i].name)) a = &archs[i];
    if (!a) {
        st = hearth_err_set(err, HEARTH_ENOTSUP, "%s: model_type %s is not supported (llama, mistral, qwen2, qwen3)",
                            path, mt);
        goto done;
    }
    snprintf(cfg->arch, sizeof cfg->arch, "%s", a->name);

    double eps;
    if ((st = j_int(&c, root, NULL, "vocab_size", 1, 0, 1, &cfg->vocab_size)) ||
        (st = j_int(&c, root, NULL, "hidden_size", 1, 0, 1, &cfg->hidden_size)) ||
        (st = j_int(&c, root, NULL, "intermediate_size", 1, 0, 1, &cfg->intermediate_size)) ||
        (st = j_int(&c, root, NULL, "num_hidden_layers", 1, 0, 1, &cfg->n_layers)) ||
        (st = j_int(&c, root, NULL, "num_attention_heads", 1, 0, 1, &cfg->n_heads)) ||
        (st = j_int(&c, root, NULL, "num_key_value_heads", 0, cfg->n_heads, 1, &cfg->n_kv_heads)) ||
        (st = j_int(&c, root, NULL, "head_dim", 0, a->head_dim, 1, &cfg->head_dim)) ||
        (st = j_int(&c, root, NULL, "max_position_embeddings", 0, a->max_pos, 1, &cfg->max_position_embeddings)) ||
        (st = j_num(&c, root, NULL, "rms_norm_eps", 0, 1e-6, &eps)) ||
        (st = j_bool(&c, root, "tie_word_embeddings", 0, &cfg->tie_word_embeddings)) ||
        (st = read_rope(&c, root, cfg)))
        goto done;
    cfg->rms_norm_eps = (float)eps;
    if (!cfg->head_dim) {
        if (cfg->hidden_size % cfg->n_heads) {
            st = hearth_err_set(err, HEARTH_EFORMAT,
                                "%s: hidden_size %d is not a multiple of num_attention_heads %d and head_dim is unset",
                                path, cfg->hidden_size, cfg->n_heads);
            goto done;
        }
        cfg->head_dim = cfg->hidden_size / cfg->n_heads;
    }

    cfg->attention_bias = a->bias;
    if (a->bias < 0 && (st = j_bool(&c, root, "attention_bias", 0, &cfg->attention_bias))) goto done;
    cfg->qk_norm = a->qk_norm;
    if (a->swa == 1) {
        const json_t *v = json_object_get(root, "sliding_window");
        if (!v) cfg->sliding_window = 4096; /* MistralConfig default; null = full attention */
        else if ((st = j_int(&c, root, NULL, "sliding_window", 0, 0, 0, &cfg->sliding_window))) goto done;
    } else if (a->swa == 2) {
        int use;
        if ((st = j_bool(&c, root, "use_sliding_window", 0, &use))) goto done;
        if (use && (st = j_int(&c, root, NULL, "sliding_window", 0, 4096, 0, &cfg->sliding_window))) goto done;
    }

    if ((st = j_int(&c, root, NULL, "bos_token_id", 0, -1, 0, &cfg->bos_token_id)) ||
        (st = j_ids(&c, root, "eos_token_id", cfg->eos_token_ids, &cfg->n_eos)))
        goto done;
    const char *dt;
    if ((st = j_str(&c, root, NULL, "dtype", &dt))) goto done; /* transformers 5 */
    if (!dt[0] && (st = j_str(&c, root, NULL, "torch_dtype", &dt))) goto done;
    snprintf(cfg->torch_dtype, sizeof cfg->torch_dtype, "%s", dt);
    cfg->rope_neox = 1; /* HF checkpoints rotate halves (rotate_half) */
    st = hearth_model_config_check(cfg, path, err);
done:
    json_decref(root);
    return st;
}

hearth_status hearth_hf_gen_config_load(hearth_gen_defaults *g, const char *dir, hearth_err *err) {
    memset(g, 0, sizeof *g);
    g->bos_token_id = -1;
    char path[4096];
    snprintf(path, sizeof path, "%s/generation_config.json", dir);
    if (!hearth_path_is_file(path)) return HEARTH_OK;
    json_t *root;
    hearth_status st = load_json(dir, "generation_config.json", path, sizeof path, &root, err);
    if (st) return st;
    jctx c = {path, err};
    struct { const char *key; int *has; float *val; } nums[] = {
        {"temperature", &g->has_temperature, &g->temperature},
        {"top_p", &g->has_top_p, &g->top_p},
        {"min_p", &g->has_min_p, &g->min_p},
        {"repetition_penalty", &g->has_repetition_penalty, &g->repetition_penalty},
    };
    for (size_t i = 0; i < sizeof nums / sizeof nums[0]; i++) {
        if (absent(json_object_get(root, nums[i].key))) continue;
        double d;
        if ((st = j_num(&c, root, NULL, nums[i].key, 1, 0, &d))) goto done;
        if (d < 0) {
            st = hearth_err_set(err, HEARTH_EFORMAT, "%s: field %s must be >= 0 (got %g)", path, nums[i].key, d);
            goto done;
        }
        *nums[i].has = 1;
        *nums[i].val = (float)d;
    }
    if (!absent(json_object_get(root, "top_k"))) {
        if ((st = j_int(&c, root, NULL, "top_k", 1, 0, 0, &g->top_k))) goto done;
        g->has_top_k = 1;
    }
    if (!absent(json_object_get(root, "max_new_tokens"))) {
        if ((st = j_int(&c, root, NULL, "max_new_tokens", 1, 0, 1, &g->max_new_tokens))) goto done;
        g->has_max_new_tokens = 1;
    }
    if (!absent(json_object_get(root, "do_sample"))) {
        if ((st = j_bool(&c, root, "do_sample", 0, &g->do_sample))) goto done;
        g->has_do_sample = 1;
    }
    if ((st = j_int(&c, root, NULL, "bos_token_id", 0, -1, 0, &g->bos_token_id))) goto done;
    st = j_ids(&c, root, "eos_token_id", g->eos_token_ids, &g->n_eos);
done:
    json_decref(root);
    return st;
}
