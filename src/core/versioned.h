/* Structs versioned by size: a public spec begins with `size_t struct_size`,
 * the size of the layout the caller compiled against. One rule for all of
 * them, so a caller built against an older or a newer sluice.h gets the
 * same answers from every spec:
 *
 *   - smaller than the first published layout (v1): refused;
 *   - larger than SL__STRUCT_MAX: refused, taken for a struct never
 *     initialised rather than read far past its end;
 *   - an older caller's struct: the fields it lacks take their default;
 *   - a newer caller's struct: the bytes this library does not know must
 *     be zero (their default), or the call fails with SL_EUNSUPPORTED
 *     rather than silently ignoring a setting. */
#ifndef SL_CORE_VERSIONED_H
#define SL_CORE_VERSIONED_H

#include <stddef.h>

#define SL__STRUCT_MAX 4096

/* The _init half: writes struct_size bytes to dst, the first min(known,
 * struct_size) of them from defaults (this library's layout, `known`
 * bytes, whose struct_size field already says struct_size) and zeros after.
 * `what` names the function for the error. 0, or SL_EINVAL. */
int sl__struct_init(void *dst, size_t struct_size, const void *defaults, size_t known,
                    size_t v1, const char *what);

/* The loading half: `in` is the caller's struct of any layout; `out` (known
 * bytes, this library's) gets its fields, defaults_or_null's (or zeros) for
 * the ones an older caller lacks, and out's struct_size becomes known.
 * `what` names the op for the error. 0, SL_EINVAL or SL_EUNSUPPORTED. */
int sl__struct_load(const void *in, void *out, const void *defaults_or_null, size_t known,
                    size_t v1, const char *what);

#endif
