/* lora.c - LoRA adapters in PEFT's format, loaded beside a model and applied
 * per row of a forward (forward.c).
 *
 * An adapter directory holds what PEFT's save_pretrained writes:
 *   adapter_config.json        {"peft_type": "LORA", "r", "lora_alpha", "use_rslora", ...}
 *   adapter_model.safetensors  base_model.model.model.layers.<l>.<module>.lora_A.weight  [r, in]
 *                              base_model.model.model.layers.<l>.<module>.lora_B.weight  [out, r]
 * for <module> among self_attn.{q,k,v,o}_proj and mlp.{gate,up,down}_proj (a
 * ".<adapter name>" before ".weight" is accepted). A target's output is
 * W x + scale * B (A x), scale = lora_alpha / r (lora_alpha / sqrt(r) with
 * use_rslora), as PEFT computes it in inference.
 *
 * At load the pairs are stacked in F32 in backend memory by the input they
 * multiply (q, k and v; o; gate and up; down: the op set's lora op takes one
 * such group): each A padded to R = r rounded up to 16 rows (zeros), each B
 * [out, R] with the scale folded in and zero columns past r (transposed,
 * [R, out] beside the others', for a backend with ops->lora_b_t: the CPU's
 * expand adds a row of B^T a rank), a member the adapter leaves alone zeros,
 * so that the kernels see aligned shapes and the padding adds exact zeros. For a GGUF llama model, whose
 * converter permuted the q and k rows for its rope pairing, B's q and k rows
 * are permuted alike (llama.cpp's convert_lora_to_gguf does the same).
 *
 * What PEFT can also save and hearth does not apply is refused by name, never
 * ignored: DoRA, rank / alpha patterns, modules_to_save, LoRA biases, and
 * adapters of the embedding or the output head. */
#include "model/model_internal.h"

#include "core/file.h"
#include "core/log.h"
#include "ops/cpu/quant.h"

#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const MODULES[HEARTH_LORA_TARGETS] = {
    [HEARTH_LORA_T_Q] = "self_attn.q_proj",  [HEARTH_LORA_T_K] = "self_attn.k_proj",
    [HEARTH_LORA_T_V] = "self_attn.v_proj",  [HEARTH_LORA_T_O] = "self_attn.o_proj",
    [HEARTH_LORA_T_GATE] = "mlp.gate_proj",  [HEARTH_LORA_T_UP] = "mlp.up_proj",
    [HEARTH_LORA_T_DOWN] = "mlp.down_proj",
};
/* a group's first member */
static const int FIRST_OF[HEARTH_LORA_GROUPS] = {HEARTH_LORA_T_Q, HEARTH_LORA_T_O, HEARTH_LORA_T_GATE,
                                                 HEARTH_LORA_T_DOWN};
static const int SIZE_OF[HEARTH_LORA_GROUPS] = {3, 1, 2, 1};

const char *hearth_lora_module(int target) {
    return target >= 0 && target < HEARTH_LORA_TARGETS ? MODULES[target] : NULL;
}

void hearth_lora_target_shape(const hearth_model_config *c, int t, int *out, int *in) {
    const int dim = c->hidden_size, qd = c->n_heads * c->head_dim, kvd = c->n_kv_heads * c->head_dim,
              ffn = c->intermediate_size;
    static const int OUT = 0, IN = 1;
    int s[HEARTH_LORA_TARGETS][2] = {{qd, dim}, {kvd, dim}, {kvd, dim}, {dim, qd}, {ffn, dim}, {ffn, dim}, {dim, ffn}};
    *out = s[t][OUT];
    *in = s[t][IN];
}

/* Parse "...layers.<l>.<module>.lora_<A|B>[.<name>].weight" -> layer, target,
 * 0 for A / 1 for B. Returns 0 when the name is not such a key. */
static int parse_key(const char *name, int *layer, int *target, int *which) {
    const char *p = strstr(name, "layers.");
    if (!p) return 0;
    char *end;
    long l = strtol(p + 7, &end, 10);
    if (end == p + 7 || *end != '.' || l < 0 || l > 100000) return 0;
    p = end + 1;
    for (int t = 0; t < HEARTH_LORA_TARGETS; t++) {
        size_t n = strlen(MODULES[t]);
        if (strncmp(p, MODULES[t], n) || strncmp(p + n, ".lora_", 6)) continue;
        const char *q = p + n + 6;
        if (*q != 'A' && *q != 'B') return 0;
        const char *rest = q + 1, *dot = rest[0] == '.' ? strchr(rest + 1, '.') : NULL;
        if (strcmp(rest, ".weight") && (!dot || dot == rest + 1 || strcmp(dot, ".weight"))) return 0;
        *layer = (int)l;
        *target = t;
        *which = *q == 'B';
        return 1;
    }
    return 0;
}

/* Fields of PEFT's LoraConfig that change what the adapter computes, beyond
 * y += scale * B (A x): any of them set (not null, false, {} or []) is
 * refused by name. */
static const char *const UNAPPLIED[] = {
    "use_dora", "fan_in_fan_out", "rank_pattern", "alpha_pattern", "modules_to_save", "lora_bias",
    "layer_replication", "trainable_token_indices", "target_parameters", "alora_invocation_tokens", "use_qalora",
    "use_bdlora", "arrow_config", "monteclora_config",
};

/* What an adapter's config says that hearth applies. */
typedef struct {
    int r, rslora;
    float alpha, scale;
} lora_config;

/* The adapter's config: r, alpha, the scale, and a refusal of what is not applied. */
static hearth_status read_config(const char *dir, lora_config *lc, hearth_err *err) {
    char path[4200];
    snprintf(path, sizeof path, "%s/adapter_config.json", dir);
    json_error_t je;
    json_t *j = json_load_file(path, 0, &je);
    if (!j) return hearth_err_set(err, HEARTH_EFORMAT, "%s: %s (line %d)", path, je.text, je.line);
    hearth_status st = HEARTH_OK;
    const json_t *pt = json_object_get(j, "peft_type"), *jr = json_object_get(j, "r"),
                 *ja = json_object_get(j, "lora_alpha");
    const char *refused = NULL;
    if (pt && !(json_is_string(pt) && !strcmp(json_string_value(pt), "LORA")))
        st = hearth_err_set(err, HEARTH_ENOTSUP, "%s: peft_type %s: only LORA adapters are supported", path,
                            json_is_string(pt) ? json_string_value(pt) : "(not a string)");
    else if (!json_is_integer(jr) || json_integer_value(jr) < 1 || json_integer_value(jr) > 4096)
        st = hearth_err_set(err, HEARTH_EFORMAT, "%s: r: expected an integer rank in [1, 4096]", path);
    else if (!json_is_number(ja) || !(json_number_value(ja) > 0))
        st = hearth_err_set(err, HEARTH_EFORMAT, "%s: lora_alpha: expected a positive number", path);
    else if (json_is_string(json_object_get(j, "bias")) &&
             strcmp(json_string_value(json_object_get(j, "bias")), "none"))
        refused = "bias (LoRA biases)";
    else
        for (size_t i = 0; i < sizeof UNAPPLIED / sizeof UNAPPLIED[0] && !refused; i++) {
            const json_t *v = json_object_get(j, UNAPPLIED[i]);
            if (v && !json_is_null(v) && !json_is_false(v) && !(json_is_object(v) && !json_object_size(v)) &&
                !(json_is_array(v) && !json_array_size(v)))
                refused = UNAPPLIED[i];
        }
    if (refused) st = hearth_err_set(err, HEARTH_ENOTSUP, "%s: %s is not supported", path, refused);
    if (st == HEARTH_OK) {
        lc->r = (int)json_integer_value(jr);
        lc->alpha = (float)json_number_value(ja);
        lc->rslora = json_is_true(json_object_get(j, "use_rslora"));
        double a = json_number_value(ja);
        lc->scale = (float)(lc->rslora ? a / sqrt((double)lc->r) : a / lc->r);
    }
    json_decref(j);
    return st;
}

int hearth_model_lora_file_row(const hearth_model *m, int target, int o) {
    const hearth_model_config *c = &m->cfg;
    if (!m->gguf || c->rope_neox || (target != HEARTH_LORA_T_Q && target != HEARTH_LORA_T_K)) return o;
    /* GGUF row h*hd + 2j + i holds HF row h*hd + i*hd/2 + j */
    const int hd = c->head_dim, h = o / hd, r = o % hd;
    return h * hd + (r % 2) * (hd / 2) + r / 2;
}

/* Host data of n floats into backend memory the model owns. */
static hearth_status put(hearth_model *m, float **dst, const float *host, size_t n, const char *what,
                         hearth_err *err) {
    size_t bytes = sizeof(float) * n;
    void *d = hearth_model_alloc(m, bytes);
    if (!d)
        return hearth_err_set(err, HEARTH_ENOMEM, "out of %s memory for %s (%.1f MiB)", m->ops->name, what,
                              bytes / 1048576.0);
    m->ops->upload(m->ops_ctx, d, host, bytes);
    *dst = d;
    return HEARTH_OK;
}

/* Copy one target's pair from the file into its group's stacks (ha: its
 * rows of the group's A [n R][in]; hb: its first row of B [sum out][R], or
 * with bt its first column of B^T [R][ld]), B scaled. */
static void stack_pair(const hearth_model *m, int target, const hearth_st_tensor *ta, const hearth_st_tensor *tb,
                       int r, int R, float scale, float *ha, float *hb, int bt, int ld) {
    int out, in;
    hearth_lora_target_shape(&m->cfg, target, &out, &in);
    const size_t ea = hearth_dtype_row_bytes(ta->type, in), eb = hearth_dtype_row_bytes(tb->type, r);
    for (int i = 0; i < r; i++)
        hearth_cpu_dequantize_row((hearth_dtype)ta->type, (const uint8_t *)ta->data + ea * i, ha + (size_t)i * in, in);
    float row[4096]; /* r <= 4096 (read_config) */
    for (int o = 0; o < out; o++) {
        const uint8_t *src = (const uint8_t *)tb->data + eb * hearth_model_lora_file_row(m, target, o);
        hearth_cpu_dequantize_row((hearth_dtype)tb->type, src, row, r);
        for (int j = 0; j < r; j++) hb[bt ? (size_t)j * ld + o : (size_t)o * R + j] = row[j] * scale;
    }
}

/* The pair's shapes: A [r, in], B [out, r]. */
static hearth_status check_pair(const hearth_model *m, const char *path, int target, const hearth_st_tensor *ta,
                                const hearth_st_tensor *tb, int r, hearth_err *err) {
    int out, in;
    hearth_lora_target_shape(&m->cfg, target, &out, &in);
    const hearth_st_tensor *t[2] = {ta, tb};
    const int64_t want[2][2] = {{r, in}, {out, r}};
    for (int k = 0; k < 2; k++)
        if (t[k]->n_dims != 2 || t[k]->shape[0] != want[k][0] || t[k]->shape[1] != want[k][1])
            return hearth_err_set(err, HEARTH_EFORMAT, "%s: tensor %s: shape [%lld,%lld], expected [%lld,%lld]", path,
                                  t[k]->name, (long long)t[k]->shape[0],
                                  (long long)(t[k]->n_dims > 1 ? t[k]->shape[1] : 1), (long long)want[k][0],
                                  (long long)want[k][1]);
    return HEARTH_OK;
}

/* One group of one layer (ta: the layer's [HEARTH_LORA_TARGETS][2] tensors,
 * NULL where absent) stacked in host memory: G->a and G->b (malloc'd; NULL
 * where the adapter leaves the whole group alone) until hearth_model_add_staged uploads them. */
static hearth_status stage_group(const hearth_model *m, hearth_lora *a, const char *path, int layer, int g,
                                 const hearth_st_tensor *const *ta, int r, float scale, hearth_err *err) {
    hearth_lora_group *G = &a->groups[(size_t)layer * HEARTH_LORA_GROUPS + g];
    const int R = a->rank, first = FIRST_OF[g];
    int any = 0, sum_out = 0, in = 0;
    G->n = SIZE_OF[g];
    for (int i = 0; i < G->n; i++) {
        hearth_lora_target_shape(&m->cfg, first + i, &G->out[i], &in);
        sum_out += G->out[i];
        if (ta[2 * (first + i)]) any = 1;
    }
    G->in = in;
    if (!any) return HEARTH_OK;
    float *ha = calloc((size_t)G->n * R * in, sizeof(float)), *hb = calloc((size_t)sum_out * R, sizeof(float));
    hearth_status st = ha && hb ? HEARTH_OK : hearth_err_set(err, HEARTH_ENOMEM, "out of host memory for %s", path);
    for (int i = 0, o = 0; st == HEARTH_OK && i < G->n; o += G->out[i++]) {
        const hearth_st_tensor *A = ta[2 * (first + i)], *B = ta[2 * (first + i) + 1];
        if (A && !(st = check_pair(m, path, first + i, A, B, r, err)))
            stack_pair(m, first + i, A, B, r, R, scale, ha + (size_t)i * R * in,
                       m->ops->lora_b_t ? hb + o : hb + (size_t)o * R, m->ops->lora_b_t, sum_out);
    }
    G->a = ha, G->b = hb; /* freed by the caller's cleanup on failure */
    return st;
}

/* A group's stacks: A [n R][in], B [sum out][R]. */
static size_t group_a_len(const hearth_lora_group *G, int R) { return (size_t)G->n * R * G->in; }
static size_t group_b_len(const hearth_lora_group *G, int R) {
    return (size_t)(G->out[0] + (G->n > 1 ? G->out[1] : 0) + (G->n > 2 ? G->out[2] : 0)) * R;
}

/* The file's tensors by layer and target: ta[(l * HEARTH_LORA_TARGETS + t) * 2] its A,
 * + 1 its B (ta holds n_layers * HEARTH_LORA_TARGETS * 2 zeroed slots); every name a
 * LoRA A or B of a layer's projection, every A beside its B, at least one. */
static hearth_status collect(const hearth_model *m, const char *path, const hearth_st_set *sts,
                             const hearth_st_tensor **ta, int *pairs, hearth_err *err) {
    const int L = m->cfg.n_layers;
    for (int64_t i = 0; i < hearth_st_n_tensors(sts); i++) {
        const hearth_st_tensor *t = hearth_st_tensor_at(sts, i);
        int l, tg, w;
        if (!parse_key(t->name, &l, &tg, &w))
            return hearth_err_set(err, HEARTH_ENOTSUP, "%s: tensor %s: not a LoRA A or B of a layer's q/k/v/o, gate, "
                                                       "up or down projection; not supported", path, t->name);
        if (l >= L)
            return hearth_err_set(err, HEARTH_EFORMAT, "%s: tensor %s: layer %d, the model has %d", path, t->name, l,
                                  L);
        const hearth_st_tensor **slot = &ta[((size_t)l * HEARTH_LORA_TARGETS + tg) * 2 + w];
        if (*slot)
            return hearth_err_set(err, HEARTH_EFORMAT, "%s: tensors %s and %s are the same matrix", path, (*slot)->name,
                                  t->name);
        *slot = t;
    }
    *pairs = 0;
    for (int i = 0; i < L * HEARTH_LORA_TARGETS; i++) {
        if (!ta[2 * i] != !ta[2 * i + 1])
            return hearth_err_set(err, HEARTH_EFORMAT, "%s: tensor %s has no lora_%c beside it", path,
                                  (ta[2 * i] ? ta[2 * i] : ta[2 * i + 1])->name, ta[2 * i] ? 'B' : 'A');
        *pairs += ta[2 * i] != NULL;
    }
    if (!*pairs) return hearth_err_set(err, HEARTH_EFORMAT, "%s: no LoRA tensors", path);
    return HEARTH_OK;
}

/* Fingerprint: the scale, the rank and every byte of the tensors, in name order. */
static void fingerprint(hearth_lora *a, const hearth_st_set *st, float scale) {
    hearth_sha256 s;
    hearth_sha256_init(&s);
    hearth_sha256_update(&s, "hearth-lora-1", 13);
    hearth_sha256_update(&s, &scale, sizeof scale);
    hearth_sha256_update(&s, &a->rank, sizeof a->rank);
    for (int64_t i = 0; i < hearth_st_n_tensors(st); i++) {
        const hearth_st_tensor *t = hearth_st_tensor_at(st, i);
        hearth_sha256_update(&s, t->name, strlen(t->name) + 1);
        hearth_sha256_update(&s, t->data, t->nbytes);
    }
    hearth_sha256_final(&s, a->fingerprint);
}

/* What applying adapters takes, shared by all: the rows' adapter ids (host
 * and backend) and the op's scratch, T x (3 R + the widest output) floats. */
static hearth_status scratch(hearth_model *m, int R, hearth_err *err) {
    const hearth_model_config *c = &m->cfg;
    int wide = c->intermediate_size;
    if (c->n_heads * c->head_dim > wide) wide = c->n_heads * c->head_dim;
    if (c->hidden_size > wide) wide = c->hidden_size;
    const size_t T = (size_t)m->max_tokens, bytes = sizeof(float) * T * (3 * (size_t)R + wide);
    if ((!m->h_lora && !(m->h_lora = calloc(T, sizeof(int32_t)))) ||
        (!m->lora_ids && !(m->lora_ids = hearth_model_alloc(m, sizeof(int32_t) * T))))
        return hearth_err_set(err, HEARTH_ENOMEM, "out of memory for the adapters' row ids");
    if (R > m->lora_rank) {
        if (!(m->lora_tmp = hearth_model_alloc(m, bytes)))
            return hearth_err_set(err, HEARTH_ENOMEM, "out of %s memory for the adapters' activations (%.1f MiB)",
                                  m->ops->name, bytes / 1048576.0);
        m->lora_rank = R;
    }
    return HEARTH_OK;
}

/* A slot's memory given back (its groups' stacks: in host memory while
 * staged, backend memory once committed); the slot is free again. */
static void release(hearth_model *m, hearth_lora *a, int staged) {
    for (int i = 0; a->groups && i < m->cfg.n_layers * HEARTH_LORA_GROUPS; i++) {
        if (staged) {
            free(a->groups[i].a);
            free(a->groups[i].b);
        } else {
            hearth_model_free_mem(m, a->groups[i].a);
            hearth_model_free_mem(m, a->groups[i].b);
        }
    }
    free(a->name);
    free(a->path);
    free(a->groups);
    memset(a, 0, sizeof *a);
}

struct hearth_lora_staged {
    hearth_lora a; /* its groups' stacks in host memory */
    int pairs, r;
};

hearth_status hearth_lora_stage(hearth_lora_staged **out, const hearth_model *m, const char *name, const char *dir,
                                hearth_err *err) {
    *out = NULL;
    if (!hearth_path_is_dir(dir))
        return hearth_err_set(err, HEARTH_ENOENT, "%s: not a directory (a LoRA adapter is PEFT's directory: "
                                                  "adapter_config.json + adapter_model.safetensors)", dir);
    lora_config lc;
    hearth_status st = read_config(dir, &lc, err);
    if (st) return st;
    const int r = lc.r, L = m->cfg.n_layers;
    char path[4200];
    snprintf(path, sizeof path, "%s/adapter_model.safetensors", dir);
    hearth_st_set *sts;
    if ((st = hearth_st_open_file(&sts, path, err))) return st;
    hearth_lora_staged *sg = calloc(1, sizeof *sg);
    hearth_lora *a = sg ? &sg->a : NULL;
    const hearth_st_tensor **ta = calloc((size_t)L * HEARTH_LORA_TARGETS * 2, sizeof *ta);
    if (a) {
        a->rank = (r + 15) / 16 * 16;
        a->scale = lc.scale;
        a->name = strdup(name);
        a->path = strdup(dir);
        a->groups = calloc((size_t)L * HEARTH_LORA_GROUPS, sizeof *a->groups);
    }
    if (!a || !a->name || !a->path || !a->groups || !ta) st = hearth_err_set(err, HEARTH_ENOMEM, "out of memory");
    if (!st) st = collect(m, path, sts, ta, &sg->pairs, err);
    for (int l = 0; !st && l < L; l++)
        for (int g = 0; !st && g < HEARTH_LORA_GROUPS; g++)
            st = stage_group(m, a, path, l, g, ta + (size_t)l * HEARTH_LORA_TARGETS * 2, r, lc.scale, err);
    if (!st) fingerprint(a, sts, lc.scale);
    free(ta);
    hearth_st_close(sts);
    if (st) {
        hearth_lora_staged_free(sg, m);
        return st;
    }
    sg->r = r;
    *out = sg;
    return HEARTH_OK;
}

void hearth_lora_staged_free(hearth_lora_staged *sg, const hearth_model *m) {
    if (!sg) return;
    release((hearth_model *)m, &sg->a, 1);
    free(sg);
}

hearth_status hearth_model_add_staged(hearth_model *m, hearth_lora_staged *sg, int *id, hearth_err *err) {
    *id = 0;
    hearth_lora *a = NULL, *h = &sg->a;
    for (int i = 0; i < HEARTH_MAX_LORA && !a; i++)
        if (!m->lora[i].id) a = &m->lora[i];
    hearth_status st = a ? scratch(m, h->rank, err)
                         : hearth_err_set(err, HEARTH_ERANGE, "%s: at most %d adapters are loaded at once", h->path,
                                          HEARTH_MAX_LORA);
    if (st) {
        hearth_lora_staged_free(sg, m);
        return st;
    }
    const int n = m->cfg.n_layers * HEARTH_LORA_GROUPS;
    *a = *h; /* the groups' shapes, names and fingerprint; the stacks go up one by one */
    a->groups = calloc((size_t)n, sizeof *a->groups);
    if (!a->groups) st = hearth_err_set(err, HEARTH_ENOMEM, "out of memory");
    for (int i = 0; !st && i < n; i++) {
        const hearth_lora_group *G = &h->groups[i];
        char what[200];
        snprintf(what, sizeof what, "%s: layer %d", h->path, i / HEARTH_LORA_GROUPS);
        a->groups[i] = *G;
        a->groups[i].a = a->groups[i].b = NULL;
        if (G->a && !(st = put(m, &a->groups[i].a, G->a, group_a_len(G, h->rank), what, err)))
            st = put(m, &a->groups[i].b, G->b, group_b_len(G, h->rank), what, err);
    }
    h->name = h->path = NULL; /* now a's */
    if (st) {
        release(m, a, 0);
        hearth_lora_staged_free(sg, m);
        return st;
    }
    hearth_log_info("%s: adapter '%s': %d matrices of rank %d, scale %g", a->path, a->name, sg->pairs, sg->r, a->scale);
    hearth_lora_staged_free(sg, m);
    a->id = *id = ++m->last_lora_id;
    m->n_lora++;
    return HEARTH_OK;
}

hearth_status hearth_model_add_lora(hearth_model *m, const char *name, const char *dir, int *id, hearth_err *err) {
    *id = 0;
    hearth_lora_staged *sg;
    hearth_status st = hearth_lora_stage(&sg, m, name, dir, err);
    return st ? st : hearth_model_add_staged(m, sg, id, err);
}

hearth_status hearth_model_remove_lora(hearth_model *m, int id, hearth_err *err) {
    hearth_lora *a = hearth_model_lora_get(m, id);
    if (!a) return hearth_err_set(err, HEARTH_ENOENT, "no LoRA adapter of id %d is loaded", id);
    hearth_log_info("%s: adapter '%s' unloaded", a->path, a->name);
    release(m, a, 0);
    m->n_lora--;
    return HEARTH_OK;
}

hearth_status hearth_lora_pairs_read(hearth_lora_pairs *p, const hearth_model *m, const char *dir, hearth_err *err) {
    memset(p, 0, sizeof *p);
    lora_config lc;
    hearth_status st = read_config(dir, &lc, err);
    if (st) return st;
    char path[4200];
    snprintf(path, sizeof path, "%s/adapter_model.safetensors", dir);
    hearth_st_set *sts;
    if ((st = hearth_st_open_file(&sts, path, err))) return st;
    p->r = lc.r, p->rslora = lc.rslora, p->alpha = lc.alpha, p->scale = lc.scale;
    p->n = m->cfg.n_layers * HEARTH_LORA_TARGETS;
    p->a = calloc((size_t)p->n, sizeof *p->a);
    p->b = calloc((size_t)p->n, sizeof *p->b);
    const hearth_st_tensor **ta = calloc((size_t)p->n * 2, sizeof *ta);
    int pairs;
    if (!p->a || !p->b || !ta) st = hearth_err_set(err, HEARTH_ENOMEM, "out of memory");
    else st = collect(m, path, sts, ta, &pairs, err);
    for (int i = 0; st == HEARTH_OK && i < p->n; i++) {
        const hearth_st_tensor *A = ta[2 * i], *B = ta[2 * i + 1];
        if (!A || (st = check_pair(m, path, i % HEARTH_LORA_TARGETS, A, B, p->r, err))) continue;
        int out, in;
        hearth_lora_target_shape(&m->cfg, i % HEARTH_LORA_TARGETS, &out, &in);
        p->a[i] = malloc(sizeof(float) * (size_t)p->r * in);
        p->b[i] = malloc(sizeof(float) * (size_t)out * p->r);
        if (!p->a[i] || !p->b[i]) {
            st = hearth_err_set(err, HEARTH_ENOMEM, "out of memory for %s", path);
            break;
        }
        hearth_cpu_dequantize_row((hearth_dtype)A->type, A->data, p->a[i], (int64_t)p->r * in);
        hearth_cpu_dequantize_row((hearth_dtype)B->type, B->data, p->b[i], (int64_t)out * p->r);
    }
    free(ta);
    hearth_st_close(sts);
    if (st) hearth_lora_pairs_free(p);
    return st;
}

void hearth_lora_pairs_free(hearth_lora_pairs *p) {
    for (int i = 0; i < p->n; i++) {
        if (p->a) free(p->a[i]);
        if (p->b) free(p->b[i]);
    }
    free(p->a);
    free(p->b);
    memset(p, 0, sizeof *p);
}

int hearth_model_n_lora(const hearth_model *m) { return m->n_lora; }

hearth_lora *hearth_model_lora_get(hearth_model *m, int id) {
    for (int i = 0; id > 0 && i < HEARTH_MAX_LORA; i++)
        if (m->lora[i].id == id) return &m->lora[i];
    return NULL;
}

int hearth_model_lora_ids(const hearth_model *m, int *ids, int cap) {
    int n = 0;
    for (int i = 0; i < HEARTH_MAX_LORA; i++)
        if (m->lora[i].id && n < cap) ids[n++] = m->lora[i].id;
    return n;
}

const char *hearth_model_lora_name(const hearth_model *m, int id) {
    const hearth_lora *a = hearth_model_lora_get((hearth_model *)m, id);
    return a ? a->name : NULL;
}

const uint8_t *hearth_model_lora_fingerprint(const hearth_model *m, int id) {
    const hearth_lora *a = hearth_model_lora_get((hearth_model *)m, id);
    return a ? a->fingerprint : NULL;
}

int hearth_model_lora_find(const hearth_model *m, const char *name) {
    for (int i = 0; i < HEARTH_MAX_LORA; i++)
        if (m->lora[i].id && !strcmp(m->lora[i].name, name)) return m->lora[i].id;
    return 0;
}

void hearth_model_lora_free_all(hearth_model *m) {
    for (int i = 0; i < HEARTH_MAX_LORA; i++) { /* the backend memory goes with the model's */
        free(m->lora[i].name);
        free(m->lora[i].path);
        free(m->lora[i].groups);
        memset(&m->lora[i], 0, sizeof m->lora[i]);
    }
    free(m->h_lora);
    m->n_lora = 0;
}
