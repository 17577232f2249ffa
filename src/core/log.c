/* log.c - leveled logging; the level is read once from HEARTH_LOG if set. */
#include "core/log.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static hearth_log_level g_level = HEARTH_LOG_INFO;

void hearth_log_set_level(hearth_log_level lvl) { g_level = lvl; }
hearth_log_level hearth_log_get_level(void) { return g_level; }

void hearth_log(hearth_log_level lvl, const char *fmt, ...) {
    if (lvl < g_level) return;
    static const char *names[] = {"debug", "info", "warn", "error"};
    char line[2048];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    fprintf(stderr, "hearth %s: %s\n", names[lvl < 4 ? lvl : 3], line);
}
