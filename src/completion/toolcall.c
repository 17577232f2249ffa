/* toolcall.c - Hermes/Qwen and Llama 3 JSON tool-call parsing (see toolcall.h). */
#include "completion/toolcall.h"

#include <jansson.h>
#include <stdlib.h>
#include <string.h>

static const char OPEN[] = "<tool_call>", CLOSE[] = "</tool_call>", PYTAG[] = "<|python_tag|>";
enum { N_OPEN = sizeof OPEN - 1, N_CLOSE = sizeof CLOSE - 1, N_PYTAG = sizeof PYTAG - 1 };
enum { START = 0, TEXT = 1, INCALL = 2, WHOLE = 3 };

static int is_ws(char c) { return c == ' ' || c == '\n' || c == '\r' || c == '\t'; }

hearth_status hearth_toolcall_init(hearth_toolcall *t, int enabled, hearth_err *err) {
    memset(t, 0, sizeof *t);
    t->enabled = enabled;
    t->state = enabled ? START : TEXT;
    if (!enabled) return HEARTH_OK;
    t->cap_size = 4096;
    t->cap = malloc(t->cap_size);
    if (!t->cap) return hearth_err_set(err, HEARTH_ENOMEM, "tool-call parser: out of memory");
    return HEARTH_OK;
}

void hearth_toolcall_deinit(hearth_toolcall *t) {
    free(t->cap);
    memset(t, 0, sizeof *t);
}

/* Append to the capture; 0 when it would pass the bound (or memory ran out). */
static int cap_put(hearth_toolcall *t, const char *s, size_t n) {
    if (t->n_cap + n + 1 > t->cap_size) {
        size_t want = t->cap_size;
        while (want < t->n_cap + n + 1) want *= 2;
        if (want > HEARTH_TOOLCALL_MAX_BYTES) return 0;
        char *p = realloc(t->cap, want);
        if (!p) return 0;
        t->cap = p;
        t->cap_size = want;
    }
    memcpy(t->cap + t->n_cap, s, n);
    t->n_cap += n;
    t->cap[t->n_cap] = 0;
    return 1;
}

static void text_out(hearth_toolcall *t, const char *s, size_t n, hearth_text_fn fn, void *user) {
    if (t->skip_ws) {
        while (n && is_ws(*s)) s++, n--;
        if (!n) return;
        t->skip_ws = 0;
    }
    fn(user, HEARTH_TEXT_CONTENT, s, n);
}

static int emit_call(hearth_toolcall *t, json_t *obj, hearth_tool_fn tool_fn, void *user) {
    if (!json_is_object(obj)) return 0;
    json_t *name = json_object_get(obj, "name");
    json_t *args = json_object_get(obj, "arguments");
    if (!args) args = json_object_get(obj, "parameters");
    if (!json_is_string(name) || json_string_length(name) == 0) return 0;
    json_t *parsed = NULL;
    if (json_is_string(args)) { /* arguments given as a JSON string */
        parsed = json_loads(json_string_value(args), 0, NULL);
        if (!json_is_object(parsed)) {
            json_decref(parsed);
            return 0;
        }
        args = parsed;
    }
    if (args && !json_is_object(args)) return 0;
    char *a = args ? json_dumps(args, JSON_COMPACT) : NULL;
    tool_fn(user, t->n_calls++, json_string_value(name), a ? a : "{}");
    free(a);
    json_decref(parsed);
    return 1;
}

/* Validate every candidate before emitting any, so that a half-valid list
 * is all content. */
static int all_calls(json_t *v) {
    if (json_is_array(v)) {
        if (json_array_size(v) == 0) return 0;
        size_t i;
        json_t *x;
        json_array_foreach(v, i, x) if (!all_calls(x)) return 0;
        return 1;
    }
    if (!json_is_object(v)) return 0;
    json_t *name = json_object_get(v, "name");
    json_t *args = json_object_get(v, "arguments");
    if (!args) args = json_object_get(v, "parameters");
    if (!json_is_string(name) || json_string_length(name) == 0) return 0;
    if (!args || json_is_object(args)) return 1;
    if (!json_is_string(args)) return 0;
    json_t *p = json_loads(json_string_value(args), 0, NULL);
    int ok = json_is_object(p);
    json_decref(p);
    return ok;
}

int hearth_toolcall_parse_one(hearth_toolcall *t, const char *s, size_t n, hearth_tool_fn tool_fn, void *user) {
    json_t *v = json_loadb(s, n, 0, NULL);
    int ok = v && json_is_object(v) && all_calls(v) && emit_call(t, v, tool_fn, user);
    json_decref(v);
    return ok;
}

/* The whole output as Llama 3 JSON: one object, an array, or objects joined
 * by ';'. */
static int parse_whole(hearth_toolcall *t, const char *s, size_t n, hearth_tool_fn tool_fn, void *user) {
    json_t *v = json_loadb(s, n, 0, NULL);
    if (v) {
        int ok = all_calls(v);
        if (ok) {
            if (json_is_array(v)) {
                size_t i;
                json_t *x;
                json_array_foreach(v, i, x) emit_call(t, x, tool_fn, user);
            } else {
                emit_call(t, v, tool_fn, user);
            }
        }
        json_decref(v);
        return ok;
    }
    /* a;b;c - jansson stops at the end of the first value with DISABLE_EOF_CHECK */
    json_t *parts = json_array();
    size_t off = 0;
    int ok = parts != NULL;
    while (ok && off < n) {
        json_error_t je;
        json_t *x = json_loadb(s + off, n - off, JSON_DISABLE_EOF_CHECK, &je);
        if (!x || !all_calls(x) || json_is_array(x)) {
            json_decref(x);
            ok = 0;
            break;
        }
        json_array_append_new(parts, x);
        off += je.position;
        while (off < n && is_ws(s[off])) off++;
        if (off < n && s[off] == ';') {
            off++;
            while (off < n && is_ws(s[off])) off++;
            if (off == n) ok = 0; /* a trailing ';' with nothing after */
        } else if (off < n) {
            ok = 0;
        }
    }
    if (ok && json_array_size(parts) > 1) {
        size_t i;
        json_t *x;
        json_array_foreach(parts, i, x) emit_call(t, x, tool_fn, user);
    } else {
        ok = 0;
    }
    json_decref(parts);
    return ok;
}

/* A <tool_call> body is complete: a call, or content as written. */
static void close_call(hearth_toolcall *t, int closed, hearth_text_fn text_fn, hearth_tool_fn tool_fn, void *user) {
    if (hearth_toolcall_parse_one(t, t->cap, t->n_cap, tool_fn, user)) {
        t->skip_ws = 1;
    } else {
        t->skip_ws = 0;
        text_fn(user, HEARTH_TEXT_CONTENT, OPEN, N_OPEN);
        if (t->n_cap) text_fn(user, HEARTH_TEXT_CONTENT, t->cap, t->n_cap);
        if (closed) text_fn(user, HEARTH_TEXT_CONTENT, CLOSE, N_CLOSE);
    }
    t->n_cap = 0;
    t->state = TEXT;
}

void hearth_toolcall_feed(hearth_toolcall *t, const char *s, size_t n, hearth_text_fn text_fn, hearth_tool_fn tool_fn,
                          void *user) {
    if (!t->enabled) {
        if (n) text_fn(user, HEARTH_TEXT_CONTENT, s, n);
        return;
    }
    while (n) {
        switch (t->state) {
        case START: {
            /* held = whitespace, then maybe a prefix of <|python_tag|> or <tool_call> */
            size_t ws = 0;
            while (ws < t->n_held && is_ws(t->held[ws])) ws++;
            size_t k = t->n_held - ws;
            char c = *s;
            if (k == 0 && is_ws(c) && t->n_held < sizeof t->held) {
                t->held[t->n_held++] = c;
                s++, n--;
                continue;
            }
            if (k == 0 && (c == '{' || c == '[')) {
                t->state = WHOLE; /* the '{' is captured by WHOLE, after the held whitespace */
                t->n_cap = 0;
                cap_put(t, t->held, t->n_held); /* fits: cap_size > sizeof held */
                t->n_held = 0;
                continue;
            }
            if (k < N_PYTAG && c == PYTAG[k] && !memcmp(t->held + ws, PYTAG, k)) {
                t->held[t->n_held++] = c;
                s++, n--;
                if (k + 1 == N_PYTAG) {
                    t->n_held = 0;
                    t->state = WHOLE;
                }
                continue;
            }
            /* Anything else: plain text from here, <tool_call> handled by TEXT. */
            t->state = TEXT;
            char tmp[sizeof t->held];
            size_t nh = t->n_held;
            memcpy(tmp, t->held, nh);
            t->n_held = 0;
            if (nh) hearth_toolcall_feed(t, tmp, nh, text_fn, tool_fn, user);
            continue;
        }
        case TEXT: {
            if (t->n_held) { /* a proper prefix of <tool_call> */
                char c = *s;
                if (c == OPEN[t->n_held]) {
                    t->held[t->n_held++] = c;
                    s++, n--;
                    if (t->n_held == N_OPEN) {
                        t->n_held = 0;
                        t->n_cap = 0;
                        t->state = INCALL;
                    }
                    continue;
                }
                text_out(t, t->held, t->n_held, text_fn, user);
                t->n_held = 0;
                continue;
            }
            const char *lt = memchr(s, '<', n);
            size_t run = lt ? (size_t)(lt - s) : n;
            if (run) text_out(t, s, run, text_fn, user);
            s += run, n -= run;
            if (n) {
                t->held[t->n_held++] = '<';
                s++, n--;
            }
            continue;
        }
        case INCALL: {
            size_t before = t->n_cap;
            if (!cap_put(t, s, n)) { /* too long to be a call: it is text */
                text_fn(user, HEARTH_TEXT_CONTENT, OPEN, N_OPEN);
                text_fn(user, HEARTH_TEXT_CONTENT, t->cap, t->n_cap);
                t->n_cap = 0;
                t->state = TEXT;
                continue;
            }
            size_t from = before >= N_CLOSE ? before - (N_CLOSE - 1) : 0;
            char *end = NULL;
            for (size_t i = from; i + N_CLOSE <= t->n_cap; i++)
                if (!memcmp(t->cap + i, CLOSE, N_CLOSE)) {
                    end = t->cap + i;
                    break;
                }
            if (!end) return;
            /* Text after the tag goes back through the loop. */
            size_t body = (size_t)(end - t->cap), rest_off = body + N_CLOSE, rest = t->n_cap - rest_off;
            size_t consumed = n - rest;
            t->n_cap = body;
            t->cap[body] = 0;
            close_call(t, 1, text_fn, tool_fn, user);
            s += consumed, n -= consumed;
            continue;
        }
        case WHOLE:
            if (!cap_put(t, s, n)) {
                text_fn(user, HEARTH_TEXT_CONTENT, t->cap, t->n_cap);
                t->n_cap = 0;
                t->state = TEXT;
                continue;
            }
            return;
        }
    }
}

void hearth_toolcall_flush(hearth_toolcall *t, hearth_text_fn text_fn, hearth_tool_fn tool_fn, void *user) {
    if (!t->enabled) return;
    switch (t->state) {
    case START:
        if (t->n_held) text_fn(user, HEARTH_TEXT_CONTENT, t->held, t->n_held);
        break;
    case TEXT:
        if (t->n_held) text_out(t, t->held, t->n_held, text_fn, user);
        break;
    case INCALL:
        close_call(t, 0, text_fn, tool_fn, user);
        break;
    case WHOLE:
        if (!parse_whole(t, t->cap, t->n_cap, tool_fn, user) && t->n_cap)
            text_fn(user, HEARTH_TEXT_CONTENT, t->cap, t->n_cap);
        break;
    }
    t->n_held = 0;
    t->n_cap = 0;
    t->state = TEXT;
}
