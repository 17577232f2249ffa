/* log.h - leveled logging to stderr. Thread-safe (one fprintf per line). */
#ifndef HEARTH_CORE_LOG_H
#define HEARTH_CORE_LOG_H

typedef enum { HEARTH_LOG_DEBUG = 0, HEARTH_LOG_INFO, HEARTH_LOG_WARN, HEARTH_LOG_ERROR, HEARTH_LOG_QUIET } hearth_log_level;

void hearth_log_set_level(hearth_log_level lvl);
hearth_log_level hearth_log_get_level(void);
void hearth_log(hearth_log_level lvl, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#define hearth_log_debug(...) hearth_log(HEARTH_LOG_DEBUG, __VA_ARGS__)
#define hearth_log_info(...) hearth_log(HEARTH_LOG_INFO, __VA_ARGS__)
#define hearth_log_warn(...) hearth_log(HEARTH_LOG_WARN, __VA_ARGS__)
#define hearth_log_error(...) hearth_log(HEARTH_LOG_ERROR, __VA_ARGS__)

#endif
