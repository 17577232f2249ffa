/* score.c - text-pair scores from embeddings: vLLM's POST /score (alias
 * /v1/score: {"text_1", "text_2"}, each a string or a list, paired 1:1, 1:N
 * or N:N) and the rerank routes (vLLM's /rerank, /v1/rerank and /v2/rerank,
 * which answer Jina's and Cohere's clients; llama-server's /reranking and
 * /v1/reranking): {"query", "documents", "top_n"}, the documents answered
 * best first.
 *
 * A score is the cosine of the two texts' embeddings (embeddings.c: each
 * text's last-token hidden state, every text of the request run as one
 * batch), as vLLM scores with an embedding model; a cross-encoder's
 * classifier head is not among the models hearth loads. A query given once
 * is embedded once. Cohere's max_tokens_per_doc keeps a document's first N
 * tokens; vLLM's truncate_prompt_tokens keeps every text's last N. usage
 * counts the tokens embedded. */
#include "api/api_internal.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

#define MAX_TEXTS 2048 /* on one side of the pairs, as /v1/embeddings' inputs */

/* v, named k: one string (when one_ok) or a non-empty list of strings (or of Jina's {"text": ...} objects, where
 * objs) into out[*n]. */
static int texts_of(const json_t *v, const char *k, int one_ok, int objs, const char **out, size_t *n,
                    hearth_cpl_error *e) {
    if (!v) return api_fail(e, HEARTH_EINVAL, k, "Missing required parameter: '%s'.", k);
    if (one_ok && json_is_string(v)) {
        out[0] = json_string_value(v);
        *n = 1;
        return 0;
    }
    size_t m = json_array_size(v), i;
    if (!json_is_array(v) || m == 0 || m > MAX_TEXTS)
        return api_fail(e, HEARTH_EINVAL, k, "Invalid '%s': expected %sa list of 1 to %d strings, but got %s.", k,
                        one_ok ? "a string or " : "", MAX_TEXTS,
                        json_is_array(v) ? (m ? "a longer list" : "an empty list") : api_type_name(v));
    json_t *t;
    json_array_foreach(v, i, t) {
        json_t *s = objs && json_is_object(t) ? json_object_get(t, "text") : t;
        if (!json_is_string(s))
            return api_fail(e, HEARTH_EINVAL, k, "Invalid '%s[%zu]': expected a string%s, but got %s.", k, i,
                            objs ? " or {\"text\": string}" : "", api_type_name(t));
        out[i] = json_string_value(s);
    }
    *n = m;
    return 0;
}

/* The request embedding text s, cut to its first max_tokens tokens when max_tokens > 0. */
static int text_request(hearth_api *a, const char *s, const char *k, int max_tokens, hearth_cpl_request *r,
                        hearth_cpl_error *e) {
    hearth_cpl_request_init(r);
    r->embed = 1;
    r->prompt_field = k;
    if (!*s) return api_fail(e, HEARTH_EINVAL, k, "Invalid '%s': a text is empty.", k);
    if (!(r->prompt = strdup(s))) return api_fail(e, HEARTH_ENOMEM, NULL, "out of memory");
    if (max_tokens <= 0) return 0;
    int32_t *ids;
    int n;
    if (hearth_cpl_tokenize(a->cpl, r, &ids, &n, e) != HEARTH_OK) return 1;
    free(r->prompt);
    r->prompt = NULL;
    r->prompt_ids = ids;
    r->n_prompt_ids = n < max_tokens ? n : max_tokens;
    return 0;
}

typedef struct {
    size_t n1, n2;     /* texts on each side: n1 is 1 or n2 */
    double *score;     /* [n2] */
    long tokens;       /* embedded */
    char model[HEARTH_ADAPTER_NAME_MAX];
} pairs;

/* Embed t1[n1] and t2[n2] in one batch and score each pair (t1[n1 == 1 ? 0 : i], t2[i]). */
static int score_pairs(hearth_api *a, const hearth_http_request *rq, const json_t *b, const char **t1,
                       const char **t2, const char *k1, const char *k2, int max_tokens_2, pairs *p,
                       hearth_cpl_error *e) {
    size_t n = p->n1 + p->n2;
    hearth_cpl_request like, *reqs = calloc(n, sizeof *reqs);
    float **vecs = calloc(n, sizeof *vecs);
    int *tokens = calloc(n, sizeof *tokens), dim = 0;
    hearth_cpl_request_init(&like);
    int bad = !reqs || !vecs || !tokens || !(p->score = calloc(p->n2, sizeof *p->score))
                  ? api_fail(e, HEARTH_ENOMEM, NULL, "out of memory")
                  : api_check_body(b, &like, e) || api_parse_pooling_fields(b, &like, e);
    for (size_t i = 0; i < n && !bad; i++)
        bad = i < p->n1 ? text_request(a, t1[i], k1, 0, &reqs[i], e)
                        : text_request(a, t2[i - p->n1], k2, max_tokens_2, &reqs[i], e);
    if (bad)
        for (size_t i = 0; reqs && i < n; i++) hearth_cpl_request_deinit(&reqs[i]);
    else bad = api_embed_batch(a, rq, reqs, n, &like, 2, vecs, &dim, tokens, p->model, e);
    hearth_cpl_request_deinit(&like);
    for (size_t i = 0; i < p->n2 && !bad; i++) { /* unit vectors: the cosine is their dot product */
        const float *x = vecs[p->n1 == 1 ? 0 : i], *y = vecs[p->n1 + i];
        double d = 0;
        for (int j = 0; j < dim; j++) d += (double)x[j] * y[j];
        p->score[i] = d;
    }
    for (size_t i = 0; i < n && !bad; i++) p->tokens += tokens[i];
    for (size_t i = 0; vecs && i < n; i++) free(vecs[i]);
    free(vecs);
    free(tokens);
    free(reqs);
    return bad;
}

void api_score(hearth_api *a, const hearth_http_request *rq, const json_t *b, hearth_http_response *r) {
    const char **t1 = malloc(sizeof *t1 * MAX_TEXTS), **t2 = malloc(sizeof *t2 * MAX_TEXTS);
    pairs p = {0};
    hearth_cpl_error e = {0};
    int bad = !t1 || !t2 ? api_fail(&e, HEARTH_ENOMEM, NULL, "out of memory") : 0;
    bad = bad || api_check_body(b, NULL, &e) || texts_of(api_field(b, "text_1"), "text_1", 1, 0, t1, &p.n1, &e) ||
          texts_of(api_field(b, "text_2"), "text_2", 1, 0, t2, &p.n2, &e);
    if (!bad && p.n1 > 1 && p.n1 != p.n2)
        bad = api_fail(&e, HEARTH_EINVAL, "text_2",
                       "Invalid 'text_2': text_1 has %zu texts and text_2 %zu; pair them 1:1, 1:N or N:N.", p.n1,
                       p.n2);
    bad = bad || score_pairs(a, rq, b, t1, t2, "text_1", "text_2", 0, &p, &e);
    free(t1);
    free(t2);
    if (bad) {
        free(p.score);
        api_cpl_error(a, r, &e);
        return;
    }
    json_t *data = json_array();
    for (size_t i = 0; i < p.n2; i++)
        json_array_append_new(data, json_pack("{s:I,s:s,s:f}", "index", (json_int_t)i, "object", "score", "score",
                                              p.score[i]));
    free(p.score);
    char id[48];
    api_make_id(id, sizeof id, "score-");
    api_json(r, 200, json_pack("{s:s,s:s,s:I,s:s,s:o,s:{s:I,s:I}}", "id", id, "object", "list", "created",
                               (json_int_t)time(NULL), "model", p.model, "data", data, "usage", "prompt_tokens",
                               (json_int_t)p.tokens, "total_tokens", (json_int_t)p.tokens));
}

typedef struct {
    double score;
    size_t index;
} ranked;

static int by_score(const void *x, const void *y) { /* best first; equal scores in the documents' order */
    const ranked *a = x, *b = y;
    return a->score > b->score ? -1 : a->score < b->score ? 1 : (a->index > b->index) - (a->index < b->index);
}

void api_rerank(hearth_api *a, const hearth_http_request *rq, const json_t *b, hearth_http_response *r) {
    const char *query[1], **docs = malloc(sizeof *docs * MAX_TEXTS);
    pairs p = {0};
    hearth_cpl_error e = {0};
    long long top_n = 0, max_tok = 0;
    int has, ret_docs = 1, ret_text = 1;
    json_t *dv = api_field(b, "documents");
    int bad = !docs ? api_fail(&e, HEARTH_ENOMEM, NULL, "out of memory") : api_check_body(b, NULL, &e);
    if (!bad && (!api_field(b, "query") || !json_is_string(api_field(b, "query"))))
        bad = api_fail(&e, HEARTH_EINVAL, "query", "%s 'query': expected a string.",
                       api_field(b, "query") ? "Invalid" : "Missing required parameter");
    bad = bad || texts_of(dv ? dv : api_field(b, "texts"), dv || !api_field(b, "texts") ? "documents" : "texts", 0,
                          1, docs, &p.n2, &e); /* llama-server takes "texts" as well */
    bad = bad || api_get_int(b, "top_n", 0, MAX_TEXTS, &has, &top_n, &e) ||
          api_get_int(b, "max_tokens_per_doc", 1, 1 << 30, &has, &max_tok, &e) ||
          api_get_bool(b, "return_documents", &ret_docs, &e) || api_get_bool(b, "return_text", &ret_text, &e);
    if (!bad) {
        query[0] = json_string_value(api_field(b, "query"));
        p.n1 = 1;
        bad = score_pairs(a, rq, b, query, docs, "query", "documents", (int)max_tok, &p, &e);
    }
    ranked *order = bad ? NULL : malloc(sizeof *order * p.n2);
    if (!bad && !order) bad = api_fail(&e, HEARTH_ENOMEM, NULL, "out of memory");
    if (bad) {
        free(docs);
        free(p.score);
        api_cpl_error(a, r, &e);
        return;
    }
    for (size_t i = 0; i < p.n2; i++) order[i] = (ranked){p.score[i], i};
    qsort(order, p.n2, sizeof *order, by_score);
    size_t n_out = top_n > 0 && (size_t)top_n < p.n2 ? (size_t)top_n : p.n2;
    json_t *results = json_array();
    for (size_t k = 0; k < n_out; k++) {
        json_t *res = json_pack("{s:I,s:f}", "index", (json_int_t)order[k].index, "relevance_score", order[k].score);
        if (ret_docs && ret_text)
            json_object_set_new(res, "document", json_pack("{s:s}", "text", docs[order[k].index]));
        json_array_append_new(results, res);
    }
    free(order);
    free(docs);
    free(p.score);
    char id[48];
    api_make_id(id, sizeof id, "rerank-");
    api_json(r, 200, json_pack("{s:s,s:s,s:s,s:o,s:{s:I,s:I}}", "id", id, "object", "list", "model", p.model,
                               "results", results, "usage", "prompt_tokens", (json_int_t)p.tokens, "total_tokens",
                               (json_int_t)p.tokens));
}
