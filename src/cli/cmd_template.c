/* cmd_template.c - `hearth template MODEL messages.json`: render a model's own
 * chat template for a conversation and print the prompt, for users and for
 * debugging templates.
 *
 * MODEL is a GGUF file (tokenizer.chat_template[.NAME], bos/eos from
 * tokenizer.ggml.{bos,eos}_token_id) or a Hugging Face model directory
 * (chat_template.jinja, else tokenizer_config.json's chat_template: a string or
 * a list of {name, template}; bos_token/eos_token as a string or {content}).
 * Which named template: --template NAME, else "tool_use" when tools are given
 * and the model has one, else "default" - as transformers' get_chat_template.
 *
 * messages.json ("-" = stdin) is a JSON array of messages, or an object with
 * "messages" and optionally "tools" and any extra template kwargs. */
#include "cli/cli.h"
#include "core/file.h"
#include "io/gguf.h"
#include "template/template.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void usage(FILE *f) {
    fprintf(f,
            "usage: hearth template MODEL MESSAGES.json [options]\n\n"
            "Render MODEL's chat template for the conversation in MESSAGES.json (\"-\" = stdin)\n"
            "and print the prompt exactly as transformers' apply_chat_template would.\n\n"
            "MODEL     a GGUF file or a Hugging Face model directory\n"
            "MESSAGES  a JSON array of messages, or an object {\"messages\": [...], \"tools\": [...],\n"
            "          other keys = extra template kwargs such as enable_thinking}\n\n"
            "options:\n"
            "  --no-generation-prompt   do not end with the assistant header (add_generation_prompt=false)\n"
            "  --tools FILE             a JSON array of tool schemas\n"
            "  --kwargs JSON            extra template kwargs, e.g. '{\"enable_thinking\": false}'\n"
            "  --template NAME          a named chat template (tool_use, rag, ...)\n"
            "  --now UNIX_SECONDS       the clock strftime_now reads (UTC), for reproducible output\n"
            "  --print-template         print the template source instead of rendering\n");
}

typedef struct model_tmpl {
    char *src;
    size_t len;
    char *bos, *eos; /* NULL when the model has none */
} model_tmpl;

static void model_tmpl_free(model_tmpl *m) {
    free(m->src);
    free(m->bos);
    free(m->eos);
    memset(m, 0, sizeof *m);
}

static char *dupn(const char *s, size_t n) {
    char *p = malloc(n + 1);
    if (p) {
        memcpy(p, s, n);
        p[n] = 0;
    }
    return p;
}

static int gguf_token(const hearth_gguf *g, const char *id_key, char **out) {
    int64_t id;
    if (hearth_gguf_get_int(g, id_key, &id, NULL) != HEARTH_OK || id < 0) return 0;
    size_t len;
    const char *s = hearth_gguf_arr_str(g, "tokenizer.ggml.tokens", (uint64_t)id, &len);
    if (s) *out = dupn(s, len);
    return 1;
}

static hearth_status load_gguf(const char *path, const char *name, int have_tools, model_tmpl *m, hearth_err *err) {
    hearth_gguf *g = NULL;
    hearth_status st = hearth_gguf_open(&g, path, err);
    if (st != HEARTH_OK) return st;
    char key[256];
    const char *s = NULL;
    size_t len = 0;
    if (name) snprintf(key, sizeof key, "tokenizer.chat_template.%s", name);
    else if (have_tools && hearth_gguf_find_key(g, "tokenizer.chat_template.tool_use") >= 0)
        snprintf(key, sizeof key, "tokenizer.chat_template.tool_use");
    else snprintf(key, sizeof key, "tokenizer.chat_template");
    st = hearth_gguf_get_str(g, key, &s, &len, err);
    if (st == HEARTH_OK) {
        m->src = dupn(s, len);
        m->len = len;
        gguf_token(g, "tokenizer.ggml.bos_token_id", &m->bos);
        gguf_token(g, "tokenizer.ggml.eos_token_id", &m->eos);
        if (!m->src) st = hearth_err_set(err, HEARTH_ENOMEM, "out of memory");
    } else if (st == HEARTH_ENOENT)
        st = hearth_err_set(err, HEARTH_ENOENT, "%s: no %s in the GGUF metadata (the model has no chat template)", path, key);
    hearth_gguf_close(g);
    return st;
}

/* bos_token / eos_token in tokenizer_config.json: a string or an AddedToken dict. */
static char *token_str(json_t *v) {
    if (json_is_object(v)) v = json_object_get(v, "content");
    return json_is_string(v) ? dupn(json_string_value(v), json_string_length(v)) : NULL;
}

static hearth_status load_hf_dir(const char *dir, const char *name, int have_tools, model_tmpl *m, hearth_err *err) {
    char path[4096];
    snprintf(path, sizeof path, "%s/tokenizer_config.json", dir);
    json_error_t jerr;
    json_t *cfg = hearth_path_is_file(path) ? json_load_file(path, 0, &jerr) : NULL;
    if (hearth_path_is_file(path) && !cfg)
        return hearth_err_set(err, HEARTH_EFORMAT, "%s: line %d: %s", path, jerr.line, jerr.text);
    hearth_status st = HEARTH_OK;
    if (cfg) {
        m->bos = token_str(json_object_get(cfg, "bos_token"));
        m->eos = token_str(json_object_get(cfg, "eos_token"));
    }
    char jpath[4096];
    snprintf(jpath, sizeof jpath, "%s/chat_template.jinja", dir);
    if (!name && hearth_path_is_file(jpath)) { /* transformers 4.43+ saves the default template here */
        st = hearth_file_read(jpath, &m->src, &m->len, err);
        json_decref(cfg);
        return st;
    }
    json_t *ct = cfg ? json_object_get(cfg, "chat_template") : NULL;
    if (json_is_string(ct) && !name) {
        m->src = dupn(json_string_value(ct), json_string_length(ct));
        m->len = json_string_length(ct);
    } else if (json_is_array(ct)) {
        const char *want = name;
        if (!want) {
            want = "default";
            size_t i;
            json_t *e;
            json_array_foreach(ct, i, e) {
                const char *n = json_string_value(json_object_get(e, "name"));
                if (have_tools && n && !strcmp(n, "tool_use")) want = "tool_use";
            }
        }
        size_t i;
        json_t *e;
        json_array_foreach(ct, i, e) {
            const char *n = json_string_value(json_object_get(e, "name"));
            json_t *t = json_object_get(e, "template");
            if (n && !strcmp(n, want) && json_is_string(t)) {
                m->src = dupn(json_string_value(t), json_string_length(t));
                m->len = json_string_length(t);
                break;
            }
        }
        if (!m->src) st = hearth_err_set(err, HEARTH_ENOENT, "%s: chat_template has no template named '%s'", path, want);
    } else if (name)
        st = hearth_err_set(err, HEARTH_ENOENT, "%s: chat_template has no template named '%s'", path, name);
    else
        st = hearth_err_set(err, HEARTH_ENOENT, "%s: no chat_template (and no chat_template.jinja)", dir);
    json_decref(cfg);
    return st;
}

static json_t *load_json(const char *path, hearth_err *err) {
    json_error_t jerr;
    json_t *j = !strcmp(path, "-") ? json_loadf(stdin, 0, &jerr) : json_load_file(path, 0, &jerr);
    if (!j) hearth_err_set(err, HEARTH_EFORMAT, "%s: line %d: %s", path, jerr.line, jerr.text);
    return j;
}

int cmd_template(int argc, char **argv) {
    const char *model = NULL, *msgs_path = NULL, *tools_path = NULL, *kwargs = NULL, *name = NULL;
    int agp = 1, print_template = 0;
    long now = -1;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (cli_is_help(a)) {
            usage(stdout);
            return 0;
        } else if (!strcmp(a, "--no-generation-prompt")) agp = 0;
        else if (!strcmp(a, "--print-template")) print_template = 1;
        else if (!strcmp(a, "--tools") || !strcmp(a, "--kwargs") || !strcmp(a, "--template") || !strcmp(a, "--now")) {
            if (i + 1 >= argc) return cli_usage_error("template", "%s needs a value", a);
            const char *v = argv[++i];
            if (!strcmp(a, "--tools")) tools_path = v;
            else if (!strcmp(a, "--kwargs")) kwargs = v;
            else if (!strcmp(a, "--template")) name = v;
            else if (!cli_parse_int("template", a, v, &now)) return 2;
        } else if (a[0] == '-' && a[1]) return cli_usage_error("template", "unknown option '%s'", a);
        else if (!model) model = a;
        else if (!msgs_path) msgs_path = a;
        else return cli_usage_error("template", "unexpected argument '%s'", a);
    }
    if (!model || (!msgs_path && !print_template))
        return cli_usage_error("template", "expects MODEL and MESSAGES.json");

    hearth_err err = {0};
    json_t *doc = NULL, *tools = NULL, *extra = json_object(), *messages = NULL;
    model_tmpl m = {0};
    hearth_tmpl *t = NULL;
    char *out = NULL;
    int rc = 1;
    if (kwargs) { /* a usage error, so before reading any file */
        json_error_t jerr;
        json_t *kw = json_loads(kwargs, 0, &jerr);
        if (!json_is_object(kw)) {
            json_decref(kw);
            json_decref(extra);
            return cli_usage_error("template", "--kwargs expects a JSON object, got '%s'", kwargs);
        }
        json_object_update(extra, kw);
        json_decref(kw);
    }
    if (msgs_path) {
        if (!(doc = load_json(msgs_path, &err))) goto fail;
        if (json_is_array(doc)) messages = doc;
        else if (json_is_object(doc)) {
            messages = json_object_get(doc, "messages");
            const char *k;
            json_t *v;
            json_object_foreach(doc, k, v) {
                if (!strcmp(k, "tools")) tools = json_incref(v);
                else if (strcmp(k, "messages") && !json_object_get(extra, k)) json_object_set(extra, k, v); /* --kwargs wins */
            }
        }
        if (!json_is_array(messages)) {
            hearth_err_set(&err, HEARTH_EINVAL, "%s: expected a JSON array of messages or an object with \"messages\"", msgs_path);
            goto fail;
        }
    }
    if (tools_path) {
        json_decref(tools);
        if (!(tools = load_json(tools_path, &err))) goto fail;
        if (!json_is_array(tools)) {
            hearth_err_set(&err, HEARTH_EINVAL, "%s: tools must be a JSON array", tools_path);
            goto fail;
        }
    }
    int have_tools = tools && !json_is_null(tools);
    hearth_status st = hearth_path_is_dir(model) ? load_hf_dir(model, name, have_tools, &m, &err)
                                                 : load_gguf(model, name, have_tools, &m, &err);
    if (st != HEARTH_OK) goto fail;
    if (print_template) {
        fwrite(m.src, 1, m.len, stdout);
        rc = 0;
        goto done;
    }
    if (hearth_tmpl_parse(&t, m.src, m.len, &err) != HEARTH_OK) {
        hearth_err_wrap(&err, err.status, "%s: chat template", model);
        goto fail;
    }
    if (now >= 0) hearth_tmpl_set_now(t, now);
    size_t len = 0;
    if (hearth_tmpl_render_chat(t, messages, have_tools ? tools : NULL, agp, m.bos, m.eos, extra, &out, &len, &err) !=
        HEARTH_OK) {
        hearth_err_wrap(&err, err.status, "%s: chat template", model);
        goto fail;
    }
    fwrite(out, 1, len, stdout);
    rc = 0;
    goto done;
fail:
    fprintf(stderr, "hearth template: %s\n", err.msg);
done:
    free(out);
    hearth_tmpl_free(t);
    model_tmpl_free(&m);
    json_decref(tools);
    json_decref(extra);
    json_decref(doc);
    return rc;
}
