/* embeddings.c - POST /v1/embeddings (OpenAI's shape), and llama-server's own
 * POST /embedding (alias /embeddings): "content" or "input", answered as a
 * list of {"index", "embedding": [vector]} (one pooled vector each).
 *
 * input: a string, an array of strings, an array of token ids, or an array
 * of arrays of token ids. Each input is a completion request marked embed
 * (completion.h): the engine runs its prompt beside everything else that is
 * running and keeps the final-normed hidden state of its last token
 * (last-token pooling, as llama-server's --pooling last), L2-normalized.
 * All inputs are started before the first is waited for, so they are
 * batched. encoding_format float or base64 (little-endian float32, what the
 * openai SDK asks for by default); dimensions only as the model's own.
 * llama-server's embd_normalize on both routes: -1 none, 0 max-abs (int16
 * range), 1 taxicab, 2 L2 (the default), p > 2 the p-norm. */
#include "api/api_internal.h"

#include <stdlib.h>
#include <string.h>

#define MAX_INPUTS 2048

static int one_input(const json_t *v, size_t i, hearth_cpl_request *r, hearth_cpl_error *e) {
    hearth_cpl_request_init(r);
    r->embed = 1;
    r->prompt_field = "input";
    if (json_is_string(v)) {
        if (!json_string_length(v)) return api_fail(e, HEARTH_EINVAL, "input", "Invalid 'input[%zu]': it is empty.", i);
        r->prompt = api_dup_str(json_string_value(v), json_string_length(v));
        return r->prompt ? 0 : api_fail(e, HEARTH_ENOMEM, NULL, "out of memory");
    }
    size_t n = json_array_size(v), k;
    json_t *id;
    if (!json_is_array(v) || n == 0)
        return api_fail(e, HEARTH_EINVAL, "input",
                        "Invalid 'input[%zu]': expected a non-empty string or array of token ids.", i);
    if (!(r->prompt_ids = malloc(sizeof *r->prompt_ids * n))) return api_fail(e, HEARTH_ENOMEM, NULL, "out of memory");
    json_array_foreach(v, k, id) {
        if (!json_is_integer(id) || json_integer_value(id) < 0 || json_integer_value(id) > 0x7fffffff)
            return api_fail(e, HEARTH_EINVAL, "input", "Invalid 'input[%zu][%zu]': expected a token id.", i, k);
        r->prompt_ids[k] = (int32_t)json_integer_value(id);
    }
    r->n_prompt_ids = (int)n;
    return 0;
}

static char *base64(const float *x, int n) {
    static const char T[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    const unsigned char *b = (const unsigned char *)x; /* x86-64: little-endian, as the format wants */
    size_t len = sizeof *x * (size_t)n, o = 0;
    char *out = malloc((len + 2) / 3 * 4 + 1);
    if (!out) return NULL;
    for (size_t i = 0; i < len; i += 3) {
        unsigned v = (unsigned)b[i] << 16 | (i + 1 < len ? (unsigned)b[i + 1] << 8 : 0) | (i + 2 < len ? b[i + 2] : 0);
        out[o++] = T[v >> 18 & 63];
        out[o++] = T[v >> 12 & 63];
        out[o++] = i + 1 < len ? T[v >> 6 & 63] : '=';
        out[o++] = i + 2 < len ? T[v & 63] : '=';
    }
    out[o] = 0;
    return out;
}

static void ignore(void *user, const hearth_cpl_event *ev) {}

int api_embed_batch(hearth_api *a, const hearth_http_request *rq, hearth_cpl_request *reqs, size_t n,
                    const hearth_cpl_request *like, int norm, float **vecs, int *dim, int *tokens, char *model_out,
                    hearth_cpl_error *e) {
    hearth_cpl **q = calloc(n, sizeof *q);
    size_t started = 0;
    int bad = q ? 0 : api_fail(e, HEARTH_ENOMEM, NULL, "out of memory");
    for (size_t i = 0; i < n; i++) { /* every input started before any is waited for: one batch */
        reqs[i].embed = 1;
        reqs[i].truncate_prompt = like->truncate_prompt;
        reqs[i].priority = like->priority;
        if (!bad && like->model && !(reqs[i].model = strdup(like->model))) /* an adapter's name selects it */
            bad = api_fail(e, HEARTH_ENOMEM, NULL, "out of memory");
        bad = bad || hearth_cpl_start(a->cpl, &reqs[i], &q[i], e) != HEARTH_OK;
        if (!bad) started++;
        hearth_cpl_request_deinit(&reqs[i]);
    }
    if (model_out) /* the model or adapter that answers, as the responses name it */
        snprintf(model_out, HEARTH_ADAPTER_NAME_MAX, "%s",
                 started && hearth_cpl_model(q[0]) ? hearth_cpl_model(q[0]) : a->model_id);
    for (size_t i = 0; i < started; i++) {
        if (bad) hearth_cpl_cancel(q[i]); /* another input was refused: the answer is the error */
        while (hearth_cpl_step(q[i], ignore, NULL, api_conn_gone, rq->conn)) { /* the one token is not read */
        }
        const float *v = bad ? NULL : hearth_cpl_embedding(q[i], norm, dim);
        if (!bad && !v) {
            const hearth_cpl_summary *s = hearth_cpl_summary_get(q[i]);
            snprintf(e->msg, sizeof e->msg, "%s", s->error[0] ? s->error : "the embedding failed");
            e->status = s->finish == HEARTH_CPL_FINISH_CANCELED ? HEARTH_EBUSY : HEARTH_EIO;
            bad = 1;
        }
        if (!bad && !(vecs[i] = malloc(sizeof *vecs[i] * (size_t)*dim)))
            bad = api_fail(e, HEARTH_ENOMEM, NULL, "out of memory");
        if (!bad) {
            memcpy(vecs[i], v, sizeof *v * (size_t)*dim);
            tokens[i] = hearth_cpl_summary_get(q[i])->prompt_tokens;
        }
        hearth_cpl_free(q[i]);
    }
    free(q);
    if (bad)
        for (size_t i = 0; i < n; i++) {
            free(vecs[i]);
            vecs[i] = NULL;
        }
    return bad;
}

void api_embeddings(hearth_api *a, const hearth_http_request *rq, const json_t *b, hearth_http_response *r,
                    int native) {
    hearth_cpl_error e = {0};
    if (api_check_body(b, NULL, &e)) {
        api_cpl_error(a, r, &e);
        return;
    }
    json_t *in = api_field(b, "input"), *fmt = native ? NULL : api_field(b, "encoding_format");
    json_t *nj = api_field(b, "embd_normalize");
    const char *fs = fmt ? json_string_value(fmt) : "float";
    if (!in && native) in = api_field(b, "content");
    if (!in) {
        api_error(r, 400, "invalid_request_error", "input", NULL,
                  native ? "\"input\" or \"content\" must be provided" : "Missing required parameter: 'input'.");
        return;
    }
    if (nj && !json_is_integer(nj)) {
        api_error(r, 400, "invalid_request_error", "embd_normalize", NULL,
                  "Invalid 'embd_normalize': expected an integer (-1 none, 0 max-abs, 1 taxicab, 2 L2, p > 2 "
                  "p-norm).");
        return;
    }
    const int norm = nj ? (json_integer_value(nj) < -1 ? -1 : json_integer_value(nj) > 64 ? 64
                                                                                    : (int)json_integer_value(nj))
                        : 2;
    if (!fs || (strcmp(fs, "float") && strcmp(fs, "base64"))) {
        api_error(r, 400, "invalid_request_error", "encoding_format", NULL,
                  "Invalid 'encoding_format': expected 'float' or 'base64'.");
        return;
    }
    /* one input, or a list of them (a list of ids is one input) */
    int many = json_is_array(in) && json_array_size(in) && !json_is_integer(json_array_get(in, 0));
    size_t n = many ? json_array_size(in) : 1;
    if (n > MAX_INPUTS) {
        api_error(r, 400, "invalid_request_error", "input", NULL, "Invalid 'input': at most %d inputs, got %zu.",
                  MAX_INPUTS, n);
        return;
    }
    hearth_cpl_request like; /* what every input's request shares */
    hearth_cpl_request_init(&like);
    if (api_check_body(b, &like, &e) || api_parse_pooling_fields(b, &like, &e)) {
        hearth_cpl_request_deinit(&like);
        api_cpl_error(a, r, &e);
        return;
    }
    hearth_cpl_request *reqs = calloc(n, sizeof *reqs);
    float **vecs = calloc(n, sizeof *vecs);
    int *tokens = calloc(n, sizeof *tokens), dim = 0, bad = !reqs || !vecs || !tokens;
    if (bad) api_fail(&e, HEARTH_ENOMEM, NULL, "out of memory");
    for (size_t i = 0; i < n && !bad; i++) bad = one_input(many ? json_array_get(in, i) : in, i, &reqs[i], &e);
    char model[HEARTH_ADAPTER_NAME_MAX];
    if (bad) /* the inputs parsed so far are let go */
        for (size_t i = 0; reqs && i < n; i++) hearth_cpl_request_deinit(&reqs[i]);
    else bad = api_embed_batch(a, rq, reqs, n, &like, norm, vecs, &dim, tokens, model, &e);
    hearth_cpl_request_deinit(&like);
    json_t *data = json_array();
    long n_tokens = 0;
    for (size_t i = 0; i < n && !bad; i++) {
        json_t *vec;
        if (!strcmp(fs, "base64")) {
            char *s64 = base64(vecs[i], dim);
            vec = s64 ? json_string(s64) : NULL;
            free(s64);
        } else {
            vec = json_array();
            for (int k = 0; k < dim; k++) json_array_append_new(vec, json_real(vecs[i][k]));
        }
        if (native) /* one pooled vector, in a list as llama-server gives it */
            json_array_append_new(data, json_pack("{s:I,s:[o*]}", "index", (json_int_t)i, "embedding", vec));
        else
            json_array_append_new(data, json_pack("{s:s,s:I,s:o*}", "object", "embedding", "index", (json_int_t)i,
                                                  "embedding", vec));
        n_tokens += tokens[i];
    }
    for (size_t i = 0; vecs && i < n; i++) free(vecs[i]);
    free(vecs);
    free(tokens);
    free(reqs);
    if (bad) {
        json_decref(data);
        api_cpl_error(a, r, &e);
        return;
    }
    if (native) {
        api_json(r, 200, data);
        return;
    }
    json_t *dims = api_field(b, "dimensions");
    if (dims && (!json_is_integer(dims) || json_integer_value(dims) != dim)) {
        json_decref(data);
        api_error(r, 400, "invalid_request_error", "dimensions", NULL,
                  "Invalid 'dimensions': this model's embeddings have %d dimensions and cannot be shortened.",
                  dim);
        return;
    }
    api_json(r, 200, json_pack("{s:s,s:o,s:s,s:{s:I,s:I}}", "object", "list", "data", data, "model",
                               model, "usage", "prompt_tokens", (json_int_t)n_tokens, "total_tokens",
                               (json_int_t)n_tokens));
}
