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

static int env_level(void)
{
    const char *e = getenv("SLUICE_LOG");
    if (!e || !*e)
        return SL_LOG_WARN;
    if (!strcmp(e, "off"))
        return -2;
    if (!strcmp(e, "error"))
        return SL_LOG_ERROR;
    if (!strcmp(e, "info"))
        return SL_LOG_INFO;
    if (!strcmp(e, "debug"))
        return SL_LOG_DEBUG;
    return SL_LOG_WARN;
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

void sl__log(sl_log_level level, const char *fmt, ...)
{
    if (!sl__log_enabled(level))
        return;
    char msg[SL__ERRMSG_MAX + 128];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    static const char *names[] = {"error", "warning", "info", "debug"};
    pthread_mutex_lock(&log_mu);
    if (log_fn)
        log_fn(log_user, level, msg);
    else
        fprintf(stderr, "sluice: %s: %s\n", names[level], msg);
    pthread_mutex_unlock(&log_mu);
}
