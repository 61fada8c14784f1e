/* See versioned.h for the rule. */
#include "versioned.h"

#include <string.h>

#include "error.h"
#include "sluice.h"

int sl__struct_init(void *dst, size_t struct_size, const void *defaults, size_t known,
                    size_t v1, const char *what)
{
    if (!dst)
        return sl__set_error(SL_EINVAL, "%s: NULL spec", what);
    if (struct_size < v1 || struct_size > SL__STRUCT_MAX)
        return sl__set_error(SL_EINVAL, "%s: struct_size %zu is not the size of any layout "
                             "of this struct (pass sizeof the struct)", what, struct_size);
    size_t n = struct_size < known ? struct_size : known;
    memcpy(dst, defaults, n);
    memset((char *)dst + n, 0, struct_size - n);
    memcpy(dst, &struct_size, sizeof struct_size);
    return 0;
}

int sl__struct_load(const void *in, void *out, const void *defaults_or_null, size_t known,
                    size_t v1, const char *what)
{
    if (!in)
        return sl__set_error(SL_EINVAL, "%s: NULL spec", what);
    size_t n;
    memcpy(&n, in, sizeof n);
    if (n < v1 || n > SL__STRUCT_MAX)
        return sl__set_error(SL_EINVAL, "%s: spec.struct_size is %zu, not the size of any "
                             "layout of this struct (initialise it with its _init function)",
                             what, n);
    for (size_t i = known; i < n; i++)
        if (((const unsigned char *)in)[i])
            return sl__set_error(SL_EUNSUPPORTED, "%s: the spec sets fields this library (%s) "
                                 "does not know (struct_size %zu, this library's %zu): link "
                                 "a newer libsluice", what, sl_version_string(), n, known);
    if (defaults_or_null)
        memcpy(out, defaults_or_null, known);
    else
        memset(out, 0, known);
    memcpy(out, in, n < known ? n : known);
    memcpy(out, &known, sizeof known);
    return 0;
}
