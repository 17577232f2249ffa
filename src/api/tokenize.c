/* tokenize.c - POST /tokenize and /detokenize, in the shapes of both vLLM
 * and llama-server (their field names do not collide):
 *
 *   /tokenize {"prompt": text, "add_special_tokens": true}       (vLLM)
 *             {"content": text, "add_special": false}             (llama-server)
 *             {"messages": [...], ...}: the chat completion's prompt, as
 *             /v1/chat/completions would render it (its fields, its rules)
 *             "with_pieces": true gives each token as {"id", "piece"}
 *   -> {"tokens": [...], "count": n, "max_model_len": the context length}
 *   /detokenize {"tokens": [...]} -> {"prompt": text, "content": text}
 *
 * Each default follows its own server: vLLM adds the special tokens to a
 * prompt, llama-server does not to its content. */
#include "api/api_internal.h"

#include <stdlib.h>
#include <string.h>

static json_t *token_list(hearth_api *a, const int32_t *ids, int n, int with_pieces) {
    json_t *out = json_array();
    char piece[1024];
    for (int i = 0; i < n; i++) {
        if (!with_pieces) {
            json_array_append_new(out, json_integer(ids[i]));
            continue;
        }
        size_t len = hearth_sink_token_text(hearth_cpl_ctx_tok(a->cpl), ids[i], piece, sizeof piece);
        json_t *p = json_stringn(piece, len);
        if (!p) { /* part of a UTF-8 sequence: its bytes, as llama-server gives them */
            p = json_array();
            for (size_t k = 0; k < len; k++) json_array_append_new(p, json_integer((unsigned char)piece[k]));
        }
        json_array_append_new(out, json_pack("{s:i,s:o}", "id", ids[i], "piece", p));
    }
    return out;
}

static int parse_text(const json_t *b, hearth_cpl_request *r, hearth_cpl_error *e) {
    json_t *prompt = api_field(b, "prompt"), *content = api_field(b, "content");
    const char *name = prompt ? "prompt" : "content";
    json_t *t = prompt ? prompt : content;
    if (!t)
        return api_fail(e, HEARTH_EINVAL, "prompt", "Missing required parameter: 'prompt', 'content' or 'messages'.");
    if (!json_is_string(t))
        return api_fail(e, HEARTH_EINVAL, name, "Invalid type for '%s': expected a string, but got %s instead.", name,
                        api_type_name(t));
    int special = prompt != NULL; /* each server's default */
    if (api_get_bool(b, prompt ? "add_special_tokens" : "add_special", &special, e)) return 1;
    r->chat = 0;
    r->prompt_field = name;
    r->no_special = !special;
    r->prompt = api_dup_str(json_string_value(t), json_string_length(t));
    return r->prompt ? 0 : api_fail(e, HEARTH_ENOMEM, NULL, "out of memory");
}

void api_tokenize(hearth_api *a, const json_t *body, hearth_http_response *r) {
    hearth_cpl_request req;
    hearth_cpl_request_init(&req);
    api_req_opts o = {0};
    hearth_cpl_error e = {0};
    int32_t *ids = NULL;
    int n = 0, pieces = 0;
    int bad = api_check_body(body, NULL, &e) || api_get_bool(body, "with_pieces", &pieces, &e);
    if (!bad) bad = api_field(body, "messages") ? api_parse_chat(body, &req, &o, &e) : parse_text(body, &req, &e);
    if (bad || hearth_cpl_tokenize(a->cpl, &req, &ids, &n, &e) != HEARTH_OK)
        api_cpl_error(a, r, &e);
    else
        api_json(r, 200, json_pack("{s:o,s:i,s:i}", "tokens", token_list(a, ids, n, pieces), "count", n,
                                   "max_model_len", hearth_cpl_ctx_len(a->cpl)));
    free(ids);
    hearth_cpl_request_deinit(&req);
}

void api_detokenize(hearth_api *a, const json_t *body, hearth_http_response *r) {
    hearth_cpl_error e = {0};
    if (api_check_body(body, NULL, &e)) {
        api_cpl_error(a, r, &e);
        return;
    }
    json_t *tokens = api_field(body, "tokens");
    const hearth_tokenizer *tok = hearth_cpl_ctx_tok(a->cpl);
    if (!json_is_array(tokens)) {
        api_error(r, 400, "invalid_request_error", "tokens", NULL,
                  "Missing required parameter: 'tokens' (an array of token ids).");
        return;
    }
    size_t n = json_array_size(tokens), i;
    int32_t *ids = malloc(sizeof *ids * (n ? n : 1));
    if (!ids) {
        api_error(r, 503, "unavailable_error", NULL, "out_of_memory", "out of memory");
        return;
    }
    json_t *v;
    json_array_foreach(tokens, i, v) {
        if (!json_is_integer(v) || json_integer_value(v) < 0 || json_integer_value(v) >= hearth_tok_n_vocab(tok)) {
            free(ids);
            api_error(r, 400, "invalid_request_error", "tokens", NULL,
                      "Invalid 'tokens[%zu]': expected a token id in [0, %d).", i, hearth_tok_n_vocab(tok));
            return;
        }
        ids[i] = (int32_t)json_integer_value(v);
    }
    char *text = NULL;
    size_t len = 0;
    hearth_err err = {0};
    hearth_status st = hearth_tok_decode(tok, ids, n, 0, &text, &len, &err);
    free(ids);
    json_t *s = st == HEARTH_OK ? json_stringn(text, len) : NULL;
    free(text);
    if (!s)
        api_error(r, 400, "invalid_request_error", "tokens", NULL,
                  "The tokens do not decode to valid UTF-8 text%s%s.", st == HEARTH_OK ? "" : ": ",
                  st == HEARTH_OK ? "" : err.msg);
    else
        api_json(r, 200, json_pack("{s:O,s:o}", "prompt", s, "content", s));
}

/* POST /apply-template, llama-server's: {"messages": [...], ...} -> {"prompt": the text /v1/chat/completions would
 * send the model for them (its fields: tools, chat_template_kwargs, a final assistant message continued)}. */
void api_apply_template(hearth_api *a, const json_t *body, hearth_http_response *r) {
    hearth_cpl_request req;
    hearth_cpl_request_init(&req);
    api_req_opts o = {0};
    hearth_cpl_error e = {0};
    char *text = NULL;
    size_t len = 0;
    if (!api_field(body, "messages"))
        api_error(r, 400, "invalid_request_error", "messages", NULL, "Missing required parameter: 'messages'.");
    else if (api_parse_chat(body, &req, &o, &e) || hearth_cpl_render(a->cpl, &req, &text, &len, &e) != HEARTH_OK)
        api_cpl_error(a, r, &e);
    else
        api_json(r, 200, json_pack("{s:s%}", "prompt", text, len));
    free(text);
    json_decref(o.echo);
    hearth_cpl_request_deinit(&req);
}
