/* A strict JSON syntax checker (RFC 8259: no NaN, no trailing commas, no
 * control characters in strings) and substring counting, for the tests of
 * sl_stats_json and sl_iterator_trace. Header-only. */
#ifndef SLUICE_TESTS_JSONCHECK_H
#define SLUICE_TESTS_JSONCHECK_H

#include <ctype.h>
#include <stdbool.h>
#include <stddef.h>
#include <string.h>

static const char *jc_value(const char *p, int depth);

static inline const char *jc_ws(const char *p)
{
    while (*p == ' ' || *p == '\n' || *p == '\t' || *p == '\r')
        p++;
    return p;
}

static inline const char *jc_string(const char *p)
{
    if (*p++ != '"')
        return NULL;
    for (; *p != '"'; p++) {
        if (!*p || (unsigned char)*p < 0x20)
            return NULL;
        if (*p != '\\')
            continue;
        p++;
        if (*p == 'u') {
            for (int i = 1; i <= 4; i++)
                if (!isxdigit((unsigned char)p[i]))
                    return NULL;
            p += 4;
        } else if (!*p || !strchr("\"\\/bfnrt", *p)) {
            return NULL;
        }
    }
    return p + 1;
}

static inline const char *jc_digits(const char *p)
{
    if (!isdigit((unsigned char)*p))
        return NULL;
    while (isdigit((unsigned char)*p))
        p++;
    return p;
}

static inline const char *jc_number(const char *p)
{
    if (*p == '-')
        p++;
    if (*p == '0')
        p++;
    else if (!(p = jc_digits(p)))
        return NULL;
    if (*p == '.' && !(p = jc_digits(p + 1)))
        return NULL;
    if (*p == 'e' || *p == 'E') {
        p++;
        if (*p == '+' || *p == '-')
            p++;
        if (!(p = jc_digits(p)))
            return NULL;
    }
    return p;
}

/* '{' members '}' or '[' values ']'. */
static inline const char *jc_container(const char *p, int depth, bool object)
{
    char close = object ? '}' : ']';
    p = jc_ws(p + 1);
    if (*p == close)
        return p + 1;
    for (;;) {
        if (object) {
            if (!(p = jc_string(p)))
                return NULL;
            p = jc_ws(p);
            if (*p++ != ':')
                return NULL;
        }
        if (!(p = jc_value(jc_ws(p), depth + 1)))
            return NULL;
        p = jc_ws(p);
        if (*p == close)
            return p + 1;
        if (*p++ != ',')
            return NULL;
        p = jc_ws(p);
    }
}

static const char *jc_value(const char *p, int depth)
{
    if (depth > 64)
        return NULL;
    switch (*p) {
    case '{':
        return jc_container(p, depth, true);
    case '[':
        return jc_container(p, depth, false);
    case '"':
        return jc_string(p);
    case 't':
        return strncmp(p, "true", 4) ? NULL : p + 4;
    case 'f':
        return strncmp(p, "false", 5) ? NULL : p + 5;
    case 'n':
        return strncmp(p, "null", 4) ? NULL : p + 4;
    default:
        return jc_number(p);
    }
}

/* Whether s is exactly one JSON value (with surrounding white space). */
static inline bool json_valid(const char *s)
{
    const char *p = jc_value(jc_ws(s), 0);
    return p && *jc_ws(p) == '\0';
}

/* Occurrences of needle in s. */
static inline int count_of(const char *s, const char *needle)
{
    int n = 0;
    size_t len = strlen(needle);
    for (const char *p = s; (p = strstr(p, needle)); p += len)
        n++;
    return n;
}

#endif
