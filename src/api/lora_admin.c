/* lora_admin.c - LoRA adapters loaded and unloaded while the server runs, as
 * vLLM's runtime LoRA updating does (VLLM_ALLOW_RUNTIME_LORA_UPDATING):
 *   POST /v1/load_lora_adapter    {"lora_name": N, "lora_path": DIR, "load_inplace": false}
 *   POST /v1/unload_lora_adapter  {"lora_name": N}
 * answered with vLLM's plain-text "Success: ..." line, errors in OpenAI's
 * shape. Only with `serve --runtime-lora` (the routes read directories on the
 * server's disk); without it they are 404s that name the flag. A loaded
 * adapter is selected by its name in a request's "model" and listed by
 * /v1/models at once; an unloaded one takes no new request, and its memory is
 * given back once the requests already running with it end (the engine's
 * hearth_engine_lora_unload). load_inplace (vLLM's) replaces the adapter a
 * name serves: the new one is loaded first, then the name points at it and the
 * old one drains as an unloaded one does; a failed load leaves the old. */
#include "api/api_internal.h"

#include <stdio.h>
#include <string.h>

static pthread_mutex_t lora_mu = PTHREAD_MUTEX_INITIALIZER; /* one load or unload at a time */

static void success(hearth_http_response *r, const char *fmt, const char *name) {
    char msg[HEARTH_ADAPTER_NAME_MAX + 64];
    int n = snprintf(msg, sizeof msg, fmt, name);
    r->status = 200;
    r->content_type = "text/plain; charset=utf-8";
    r->body = strdup(msg);
    r->len = r->body ? (size_t)n : 0;
    if (!r->body) api_error(r, 503, "unavailable_error", NULL, "out_of_memory", "out of memory");
}

/* The body is an object, else a 400 is answered. */
static int object_body(const json_t *body, hearth_http_response *r) {
    if (json_is_object(body)) return 1;
    api_error(r, 400, "invalid_request_error", NULL, NULL, "the body must be an object");
    return 0;
}

/* body's string field, or NULL (an error answered) when absent or not a string. */
static const char *field(json_t *body, const char *key, hearth_http_response *r) {
    const char *v = json_string_value(json_object_get(body, key));
    if (!v || !*v)
        api_error(r, 400, "invalid_request_error", key, NULL,
                  json_object_get(body, key) ? "'%s' must be a non-empty string" : "'%s' is required", key);
    return v && *v ? v : NULL;
}

static int refused(hearth_api *a, hearth_http_response *r) {
    if (a->runtime_lora) return 0;
    api_error(r, 404, "invalid_request_error", NULL, "not_found",
              "runtime LoRA updating is off: start the server with --runtime-lora to load and unload adapters");
    return 1;
}

void api_lora_load(hearth_api *a, json_t *body, hearth_http_response *r) {
    if (refused(a, r) || !object_body(body, r)) return;
    const char *name = field(body, "lora_name", r), *dir = name ? field(body, "lora_path", r) : NULL;
    if (!dir) return;
    json_t *inplace = json_object_get(body, "load_inplace");
    if (inplace && !json_is_boolean(inplace)) {
        api_error(r, 400, "invalid_request_error", "load_inplace", NULL, "'load_inplace' must be a boolean");
        return;
    }
    hearth_err err = {0};
    if (!strcmp(name, a->model_id)) {
        api_error(r, 400, "invalid_request_error", "lora_name", NULL,
                  "'%s' is the served model's name; give the adapter another", name);
        return;
    }
    if (hearth_adapter_name_check(name, &err) != HEARTH_OK) {
        api_error(r, 400, "invalid_request_error", "lora_name", NULL, "%s", err.msg);
        return;
    }
    hearth_adapter_names *names = hearth_cpl_adapters(a->cpl);
    pthread_mutex_lock(&lora_mu);
    const int had = hearth_adapter_names_find(names, name, NULL);
    if (had && !json_is_true(inplace)) {
        pthread_mutex_unlock(&lora_mu);
        api_error(r, 400, "invalid_request_error", "lora_name", NULL, "The lora adapter '%s' has already been loaded.",
                  name);
        return;
    }
    int id = 0;
    hearth_status st = hearth_engine_lora_load(a->engine, name, dir, &id, &err);
    if (st == HEARTH_OK && had) { /* in place: the name serves the new one, the old drains */
        hearth_engine_lora_unload(a->engine, hearth_adapter_names_replace(names, name, id), NULL);
    } else if (st == HEARTH_OK && (st = hearth_adapter_names_add(names, id, name, &err)) != HEARTH_OK) {
        hearth_engine_lora_unload(a->engine, id, NULL); /* cannot be: the engine holds as many as the names */
    }
    pthread_mutex_unlock(&lora_mu);
    if (st == HEARTH_OK) success(r, "Success: LoRA adapter '%s' added successfully.", name);
    else if (st == HEARTH_ENOMEM || st == HEARTH_EBUSY)
        api_error(r, 503, "unavailable_error", NULL, st == HEARTH_ENOMEM ? "out_of_memory" : NULL, "%s", err.msg);
    else api_error(r, st == HEARTH_ENOENT ? 404 : 400, "invalid_request_error", "lora_path", NULL, "%s", err.msg);
}

void api_lora_unload(hearth_api *a, json_t *body, hearth_http_response *r) {
    if (refused(a, r) || !object_body(body, r)) return;
    const char *name = field(body, "lora_name", r);
    if (!name) return;
    pthread_mutex_lock(&lora_mu);
    int id = hearth_adapter_names_remove(hearth_cpl_adapters(a->cpl), name);
    if (id) hearth_engine_lora_unload(a->engine, id, NULL);
    pthread_mutex_unlock(&lora_mu);
    if (id) success(r, "Success: LoRA adapter '%s' removed successfully.", name);
    else api_error(r, 404, "invalid_request_error", "lora_name", "model_not_found",
                   "The lora adapter '%s' cannot be found.", name);
}
