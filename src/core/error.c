#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include "error.h"

static _Thread_local char tls_msg[SL__ERRMSG_MAX];
static _Thread_local int tls_code;

SL_API unsigned sl_version_number(void)
{
    return SL_VERSION_NUMBER;
}

#define SL__STR2(x) #x
#define SL__STR(x) SL__STR2(x)
SL_API const char *sl_version_string(void)
{
    return SL__STR(SL_VERSION_MAJOR) "." SL__STR(SL_VERSION_MINOR) "." SL__STR(SL_VERSION_PATCH);
}

SL_API const char *sl_strerror(int code)
{
    switch (code) {
    case SL_OK:
        return "success";
    case SL_EOF:
        return "end of data";
#define SL__ERR_CASE(name, c, text) \
    case c:                         \
        return text;
        SL_ERRNO_MAP(SL__ERR_CASE)
#undef SL__ERR_CASE
    }
    return "unknown error";
}

SL_API const char *sl_last_error(void)
{
    return tls_msg;
}

SL_API int sl_last_error_code(void)
{
    return tls_code;
}

SL_API int sl_set_last_error(int code, const char *msg)
{
    if (code >= 0)
        code = SL_EINVAL;
    return sl__set_error_str(code, msg ? msg : sl_strerror(code));
}

SL_API void sl_clear_error(void)
{
    tls_msg[0] = '\0';
    tls_code = 0;
}

const char *sl__error_msg(void)
{
    return tls_msg;
}

int sl__set_error(int code, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(tls_msg, sizeof tls_msg, fmt, ap);
    va_end(ap);
    tls_code = code;
    return code;
}

int sl__set_error_str(int code, const char *msg)
{
    if (msg != tls_msg)
        snprintf(tls_msg, sizeof tls_msg, "%s", msg ? msg : sl_strerror(code));
    tls_code = code;
    return code;
}

void sl__error_prefix(const char *prefix)
{
    size_t pl = strlen(prefix), ml = strlen(tls_msg);
    if (pl + 2 >= sizeof tls_msg)
        pl = sizeof tls_msg - 3;
    if (pl + 2 + ml >= sizeof tls_msg)
        ml = sizeof tls_msg - pl - 3;
    memmove(tls_msg + pl + 2, tls_msg, ml);
    memcpy(tls_msg, prefix, pl);
    tls_msg[pl] = ':';
    tls_msg[pl + 1] = ' ';
    tls_msg[pl + 2 + ml] = '\0';
}

int sl__errno_code(int e)
{
    switch (e) {
    case ENOENT:
    case ENOTDIR:
        return SL_ENOENT;
    case EACCES:
    case EPERM:
        return SL_EACCES;
    case ENOMEM:
        return SL_ENOMEM;
    default:
        return SL_EIO;
    }
}

int sl__error_skippable(int code)
{
    return code < 0 && code != SL_ENOMEM && code != SL_ECANCELED && code != SL_EINTERNAL &&
           code != SL_ETOO_MANY_ERRORS && code != SL_ESTATE;
}
