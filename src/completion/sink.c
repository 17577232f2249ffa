/* sink.c - detokenize -> stop -> reasoning -> tool calls -> events. */
#include "completion/sink.h"

#include "core/clock.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

hearth_status hearth_sink_init(hearth_sink *s, const hearth_tokenizer *tok, const char *const *stops, int n_stops,
                               const int32_t *end_ids, int n_end, int reasoning, int in_reasoning, int tools,
                               hearth_err *err) {
    memset(s, 0, sizeof *s);
    s->tok = tok;
    s->end_ids = end_ids;
    s->n_end = n_end;
    hearth_status st = hearth_stop_init(&s->stop, stops, n_stops, err);
    if (st != HEARTH_OK) return st;
    if ((st = hearth_toolcall_init(&s->tc, tools, err)) != HEARTH_OK) {
        hearth_stop_deinit(&s->stop);
        return st;
    }
    hearth_reasoning_init(&s->rsn, reasoning, in_reasoning);
    hearth_detok_init(&s->detok, tok, 1);
    s->dbuf = malloc(HEARTH_DETOK_MAX_OUT);
    s->sbuf = malloc(hearth_stop_out_cap(&s->stop, HEARTH_DETOK_MAX_OUT));
    if (!s->dbuf || !s->sbuf) {
        hearth_sink_deinit(s);
        return hearth_err_set(err, HEARTH_ENOMEM, "completion: out of memory for the output buffers");
    }
    /* Tool-call ids only need to be unique within a conversation. */
    s->call_seed = (uint64_t)(hearth_time_now() * 1e9) ^ (uint64_t)(uintptr_t)s;
    return HEARTH_OK;
}

void hearth_sink_deinit(hearth_sink *s) {
    hearth_stop_deinit(&s->stop);
    hearth_toolcall_deinit(&s->tc);
    free(s->dbuf);
    free(s->sbuf);
    memset(s, 0, sizeof *s);
}

static void on_content(void *u, hearth_text_kind k, const char *t, size_t n) {
    hearth_sink *s = u;
    hearth_cpl_event ev = {.kind = HEARTH_CPL_CONTENT, .text = t, .len = n};
    s->fn(s->user, &ev);
}

static void on_tool(void *u, int index, const char *name, const char *args) {
    hearth_sink *s = u;
    static const char ALNUM[] = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
    char id[32] = "call_";
    uint64_t x = s->call_seed + (uint64_t)index * 0x9e3779b97f4a7c15ull;
    for (int i = 5; i < 29; i++) { /* splitmix64 digits */
        x += 0x9e3779b97f4a7c15ull;
        uint64_t z = x;
        z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
        z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
        z ^= z >> 31;
        id[i] = ALNUM[z % (sizeof ALNUM - 1)];
    }
    id[29] = 0;
    s->n_tool_calls = index + 1;
    hearth_cpl_event ev = {.kind = HEARTH_CPL_TOOL_CALL, .index = index, .id = id, .name = name, .arguments = args};
    s->fn(s->user, &ev);
}

static void on_split(void *u, hearth_text_kind k, const char *t, size_t n) {
    hearth_sink *s = u;
    if (k == HEARTH_TEXT_REASONING) {
        hearth_cpl_event ev = {.kind = HEARTH_CPL_REASONING, .text = t, .len = n};
        s->fn(s->user, &ev);
        return;
    }
    hearth_toolcall_feed(&s->tc, t, n, on_content, on_tool, s);
}

/* Released text through the line rules (as llama-server applies them to
 * the text so far): past the first newline, a line whose first character
 * after its spaces and tabs (a newline too: an empty line has none) comes
 * with less indentation than n_indent ends the text before that character;
 * a newline once t_max_s has passed since the first token ends it after. */
static void release(hearth_sink *s, const char *t, size_t n) {
    size_t keep = n;
    int nl = 0;
    for (size_t i = 0; i < n && (s->n_indent > 0 || s->t_max_s > 0); i++) {
        if (s->seen_nl && !s->line_text) {
            if (t[i] == ' ' || t[i] == '\t') {
                s->line_ws++;
                continue;
            }
            s->line_text = 1;
            if (s->line_ws < s->n_indent) {
                keep = i;
                s->stopped = s->limited = 1;
                break;
            }
        }
        if (t[i] == '\n') {
            s->seen_nl = nl = 1;
            s->line_ws = s->line_text = 0;
        }
    }
    if (keep) hearth_reasoning_feed(&s->rsn, t, keep, on_split, s);
    if (nl && !s->stopped && s->t_max_s > 0 && hearth_time_now() - s->t_first > s->t_max_s)
        s->stopped = s->limited = 1;
}

static void feed_text(hearth_sink *s, const char *t, size_t n) {
    if (!n || s->stopped) return;
    int hit = 0;
    size_t k = hearth_stop_feed(&s->stop, t, n, s->sbuf, &hit);
    if (k) release(s, s->sbuf, k);
    if (s->limited) return;
    if (hit && s->include_stop)
        hearth_reasoning_feed(&s->rsn, s->stop.strs[s->stop.which], s->stop.lens[s->stop.which], on_split, s);
    if (hit) s->stopped = 1;
}

int hearth_sink_push(hearth_sink *s, int32_t id, hearth_cpl_event_fn fn, void *user) {
    s->fn = fn;
    s->user = user;
    if (s->stopped) return 1;
    if (s->t_first == 0) s->t_first = hearth_time_now();
    for (int i = 0; i < s->n_end; i++)
        if (s->end_ids[i] == id) {
            s->stopped = 1;
            return 1;
        }
    size_t n = hearth_detok_push(&s->detok, id, s->dbuf, HEARTH_DETOK_MAX_OUT);
    feed_text(s, s->dbuf, n);
    return s->stopped;
}

void hearth_sink_finish(hearth_sink *s, hearth_cpl_event_fn fn, void *user) {
    s->fn = fn;
    s->user = user;
    size_t n = hearth_detok_finish(&s->detok, s->dbuf, HEARTH_DETOK_MAX_OUT);
    feed_text(s, s->dbuf, n);
    if (!s->stop.hit && !s->limited) {
        size_t k = hearth_stop_flush(&s->stop, s->sbuf);
        if (k) release(s, s->sbuf, k);
    }
    hearth_reasoning_flush(&s->rsn, on_split, s);
    hearth_toolcall_flush(&s->tc, on_content, on_tool, s);
}

size_t hearth_sink_token_text(const hearth_tokenizer *tok, int32_t id, char *out, size_t cap) {
    if (cap == 0) return 0;
    hearth_detok d;
    char buf[HEARTH_DETOK_MAX_OUT];
    hearth_detok_init(&d, tok, 0);
    size_t n = hearth_detok_push(&d, id, buf, sizeof buf);
    n += hearth_detok_finish(&d, buf + n, sizeof buf - n);
    if (n >= cap) n = cap - 1;
    memcpy(out, buf, n);
    out[n] = 0;
    return n;
}
