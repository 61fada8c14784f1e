#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "log.h"

static pthread_mutex_t log_mu = PTHREAD_MUTEX_INITIALIZER;
static sl_log_fn log_fn;
static void *log_user;
static int log_level = -1; /* -1: not read from the environment yet */

/* One word of SLUICE_LOG as a level, or -3 if it is not one. */
static int word_level(const char *w, size_t n)
{
    static const struct {
        const char *name;
        int level;
    } levels[] = {{"off", -2},
                  {"error", SL_LOG_ERROR},
                  {"warn", SL_LOG_WARN},
                  {"info", SL_LOG_INFO},
                  {"debug", SL_LOG_DEBUG}};
    for (size_t i = 0; i < sizeof levels / sizeof *levels; i++)
        if (strlen(levels[i].name) == n && !strncmp(w, levels[i].name, n))
            return levels[i].level;
    return -3;
}

/* SLUICE_LOG is a comma list of a level and categories ("info,autotune"):
 * the last level wins; other words are categories. */
static int env_level(void)
{
    const char *e = getenv("SLUICE_LOG");
    int level = SL_LOG_WARN;
    while (e && *e) {
        size_t n = strcspn(e, ",");
        int l = word_level(e, n);
        if (l != -3)
            level = l;
        e += n + (e[n] == ',');
    }
    return level;
}

int sl__env_on(const char *name)
{
    const char *e = getenv(name);
    return e && *e && *e != '0';
}

int sl__log_category_enabled(const char *category)
{
    const char *e = getenv("SLUICE_LOG");
    size_t len = strlen(category);
    while (e && *e) {
        size_t n = strcspn(e, ",");
        if (n == len && !strncmp(e, category, n))
            return 1;
        e += n + (e[n] == ',');
    }
    return 0;
}

SL_API void sl_set_log_callback(sl_log_fn fn, void *user)
{
    pthread_mutex_lock(&log_mu);
    log_fn = fn;
    log_user = user;
    pthread_mutex_unlock(&log_mu);
}

SL_API void sl_set_log_level(sl_log_level level)
{
    pthread_mutex_lock(&log_mu);
    log_level = (int)level;
    pthread_mutex_unlock(&log_mu);
}

int sl__log_enabled(sl_log_level level)
{
    pthread_mutex_lock(&log_mu);
    if (log_level == -1)
        log_level = env_level();
    int on = (int)level <= log_level;
    pthread_mutex_unlock(&log_mu);
    return on;
}

static void emit(sl_log_level level, const char *fmt, va_list ap)
{
    char msg[SL__ERRMSG_MAX + 128];
    vsnprintf(msg, sizeof msg, fmt, ap);
    static const char *names[] = {"error", "warning", "info", "debug"};
    pthread_mutex_lock(&log_mu);
    if (log_fn)
        log_fn(log_user, level, msg);
    else
        fprintf(stderr, "sluice: %s: %s\n", names[level], msg);
    pthread_mutex_unlock(&log_mu);
}

void sl__log(sl_log_level level, const char *fmt, ...)
{
    if (!sl__log_enabled(level))
        return;
    va_list ap;
    va_start(ap, fmt);
    emit(level, fmt, ap);
    va_end(ap);
}

void sl__log_always(sl_log_level level, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    emit(level, fmt, ap);
    va_end(ap);
}
