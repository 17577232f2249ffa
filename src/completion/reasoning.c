/* reasoning.c - the <think> splitter (see reasoning.h for the rules). */
#include "completion/reasoning.h"

#include <string.h>

static const char OPEN[] = "<think>", CLOSE[] = "</think>";
enum { N_OPEN = sizeof OPEN - 1, N_CLOSE = sizeof CLOSE - 1 };
enum { START = 0, REASONING = 1, CONTENT = 2 };

static int is_ws(char c) { return c == ' ' || c == '\n' || c == '\r' || c == '\t'; }

void hearth_reasoning_init(hearth_reasoning *r, int enabled, int in_reasoning) {
    memset(r, 0, sizeof *r);
    r->enabled = enabled;
    r->state = !enabled ? CONTENT : in_reasoning ? REASONING : START;
    r->skip_ws = enabled && in_reasoning;
}

static void emit(hearth_reasoning *r, hearth_text_kind k, const char *s, size_t n, hearth_text_fn fn, void *user) {
    if (r->skip_ws) {
        while (n && is_ws(*s)) s++, n--;
        if (!n) return;
        r->skip_ws = 0;
    }
    fn(user, k, s, n);
}

/* One byte at a time through the small state machine; runs of plain text are
 * released in one call. */
void hearth_reasoning_feed(hearth_reasoning *r, const char *s, size_t n, hearth_text_fn fn, void *user) {
    while (n) {
        if (r->state == CONTENT) {
            emit(r, HEARTH_TEXT_CONTENT, s, n, fn, user);
            return;
        }
        if (r->state == START) {
            /* held = whitespace, then a prefix of <think>. */
            char c = *s;
            size_t ws = 0;
            while (ws < r->n_held && is_ws(r->held[ws])) ws++;
            size_t tag = r->n_held - ws;
            if (tag == 0 && is_ws(c) && r->n_held < HEARTH_REASONING_HOLD) {
                r->held[r->n_held++] = c;
                s++, n--;
                continue;
            }
            if (tag < N_OPEN && c == OPEN[tag] && r->n_held < HEARTH_REASONING_HOLD) {
                r->held[r->n_held++] = c;
                s++, n--;
                if (tag + 1 == N_OPEN) {
                    r->n_held = 0;
                    r->state = REASONING;
                    r->skip_ws = 1;
                }
                continue;
            }
            /* Not a tag: what was held is content, and so is the rest. */
            r->state = CONTENT;
            if (r->n_held) emit(r, HEARTH_TEXT_CONTENT, r->held, r->n_held, fn, user);
            r->n_held = 0;
            continue;
        }
        /* REASONING: held = a proper prefix of </think>. */
        if (r->n_held) {
            char c = *s;
            if (c == CLOSE[r->n_held]) {
                r->held[r->n_held++] = c;
                s++, n--;
                if (r->n_held == N_CLOSE) {
                    r->n_held = 0;
                    r->state = CONTENT;
                    r->skip_ws = 1;
                }
                continue;
            }
            /* The held bytes were text. The first one cannot start </think>
             * again at a later offset unless it is '<', which only the first
             * byte is; so release all of them and re-examine c. */
            emit(r, HEARTH_TEXT_REASONING, r->held, r->n_held, fn, user);
            r->n_held = 0;
            continue;
        }
        const char *lt = memchr(s, '<', n);
        size_t run = lt ? (size_t)(lt - s) : n;
        if (run) emit(r, HEARTH_TEXT_REASONING, s, run, fn, user);
        s += run, n -= run;
        if (n) {
            r->held[r->n_held++] = '<';
            s++, n--;
        }
    }
}

void hearth_reasoning_flush(hearth_reasoning *r, hearth_text_fn fn, void *user) {
    if (!r->n_held) return;
    hearth_text_kind k = r->state == REASONING ? HEARTH_TEXT_REASONING : HEARTH_TEXT_CONTENT;
    if (r->state == START) r->skip_ws = 0; /* leading whitespace of plain content is kept */
    emit(r, k, r->held, r->n_held, fn, user);
    r->n_held = 0;
}
