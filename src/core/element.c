#include <stdio.h>
#include <string.h>
#include "element.h"
#include "error.h"

#define DEFAULT_INLINE 64

static const struct {
    const char *name;
    size_t size;
} dtypes[SL_DTYPE_COUNT] = {
    [SL_UINT8] = {"uint8", 1},     [SL_INT8] = {"int8", 1},     [SL_UINT16] = {"uint16", 2},
    [SL_INT16] = {"int16", 2},     [SL_INT32] = {"int32", 4},   [SL_INT64] = {"int64", 8},
    [SL_FLOAT32] = {"float32", 4}, [SL_FLOAT64] = {"float64", 8}, [SL_STRING] = {"string", 0},
};

SL_API size_t sl_dtype_size(sl_dtype d)
{
    return (unsigned)d < SL_DTYPE_COUNT ? dtypes[d].size : 0;
}

SL_API const char *sl_dtype_name(sl_dtype d)
{
    return (unsigned)d < SL_DTYPE_COUNT ? dtypes[d].name : "invalid";
}

int64_t sl__shape_count(int ndim, const int64_t *shape)
{
    int64_t n = 1;
    for (int i = 0; i < ndim; i++)
        n *= shape[i];
    return n;
}

bool sl__strings_valid(const struct sl_tensor *t)
{
    int64_t n = sl__shape_count(t->ndim, t->shape);
    if ((uint64_t)n >= t->nbytes / 8)
        return false;
    const uint64_t *off = sl__str_offsets(t);
    uint64_t room = t->nbytes - ((uint64_t)n + 1) * 8;
    if (off[0] != 0 || off[n] != room)
        return false;
    for (int64_t i = 0; i < n; i++)
        if (off[i] > off[i + 1])
            return false;
    return true;
}

void sl__shape_str(char *buf, size_t n, int ndim, const int64_t *shape)
{
    size_t off = (size_t)snprintf(buf, n, "[");
    for (int i = 0; i < ndim && off < n; i++)
        off += (size_t)snprintf(buf + off, n - off, i ? ", %lld" : "%lld", (long long)shape[i]);
    if (off < n)
        snprintf(buf + off, n - off, "]");
}

static size_t inline_offset(int ntensors)
{
    size_t end = sizeof(sl_element) + (size_t)ntensors * sizeof(struct sl_tensor);
    return (end + 63) & ~(size_t)63;
}

sl_element *sl__element_new(int ntensors, size_t inline_bytes)
{
    if (ntensors < 0 || ntensors > 0xffff) {
        sl__set_error(SL_EINVAL, "element: bad tensor count %d", ntensors);
        return NULL;
    }
    /* every tensor's data is 64-byte aligned, inline or not: leave room for
     * the padding between inline tensors */
    if (inline_bytes)
        inline_bytes = ((inline_bytes + 63) & ~(size_t)63) +
                       (ntensors > 1 ? (size_t)(ntensors - 1) * 64 : 0);
    size_t size = inline_offset(ntensors) + inline_bytes;
    if (size > UINT32_MAX) { /* the sizes are kept in 32 bits */
        sl__set_error(SL_EINVAL, "element: %zu bytes of inline data", inline_bytes);
        return NULL;
    }
    sl_element *el = sl__obj_get(size);
    if (!el)
        return NULL;
    atomic_init(&el->refs, 1);
    el->n = 0;
    el->cap = (uint16_t)ntensors;
    el->inline_used = 0;
    el->inline_cap = (uint32_t)inline_bytes;
    el->alloc_size = (uint32_t)size;
    el->origin = NULL;
    return el;
}

static unsigned char *inline_area(sl_element *el)
{
    return (unsigned char *)el + inline_offset(el->cap);
}

static struct sl_tensor *push_header(sl_element *el, sl_dtype dtype, int ndim,
                                     const int64_t *shape)
{
    if (el->n >= el->cap) {
        sl__set_error(SL_EINVAL, "element: all %d tensor slots are used", el->cap);
        return NULL;
    }
    if (ndim < 0 || ndim > SL_MAX_DIMS || (unsigned)dtype >= SL_DTYPE_COUNT) {
        sl__set_error(SL_EINVAL, "element: bad dtype %d or rank %d", (int)dtype, ndim);
        return NULL;
    }
    for (int i = 0; i < ndim; i++)
        if (shape[i] < 0) {
            sl__set_error(SL_EINVAL, "element: negative dimension %lld", (long long)shape[i]);
            return NULL;
        }
    struct sl_tensor *t = &el->t[el->n];
    t->dtype = dtype;
    t->ndim = ndim;
    if (ndim)
        memcpy(t->shape, shape, (size_t)ndim * sizeof(int64_t));
    t->data = NULL;
    t->nbytes = 0;
    t->buf = NULL;
    return t;
}

sl_element *sl__element_i64(int64_t v)
{
    sl_element *el = sl__element_new(1, sizeof v);
    if (!el)
        return NULL;
    struct sl_tensor *t = sl__element_push(el, SL_INT64, 0, NULL, sizeof v);
    memcpy(t->data, &v, sizeof v); /* fits inline: cannot fail */
    return el;
}

sl_element *sl__element_i64_then(int64_t v, const sl_element *el, const char *op)
{
    sl_element *out = sl__element_new(el->n + 1, sizeof v);
    struct sl_tensor *t = out ? sl__element_push(out, SL_INT64, 0, NULL, sizeof v) : NULL;
    if (t)
        memcpy(t->data, &v, sizeof v);
    for (int j = 0; t && j < el->n; j++)
        if (sl_element_add_shared(out, el, j) < 0)
            t = NULL;
    if (!t) {
        sl_element_release(out);
        sl__set_error(SL_ENOMEM, "%s: out of memory", op);
        return NULL;
    }
    return out;
}

struct sl_tensor *sl__element_push(sl_element *el, sl_dtype dtype, int ndim,
                                   const int64_t *shape, size_t nbytes)
{
    struct sl_tensor *t = push_header(el, dtype, ndim, shape);
    if (!t)
        return NULL;
    size_t at = (el->inline_used + 63) & ~(size_t)63;
    if (at + nbytes <= el->inline_cap) {
        t->data = inline_area(el) + at;
        el->inline_used = (uint32_t)(at + nbytes);
    } else {
        t->buf = sl__buf_get(nbytes);
        if (!t->buf)
            return NULL;
        t->data = t->buf->data;
    }
    t->nbytes = nbytes;
    el->n++;
    return t;
}

struct sl_tensor *sl__element_push_view(sl_element *el, sl_dtype dtype, int ndim,
                                        const int64_t *shape, void *data, size_t nbytes,
                                        sl__buf *buf)
{
    if (!buf) { /* the source is inline in another element: copy */
        struct sl_tensor *t = sl__element_push(el, dtype, ndim, shape, nbytes);
        if (t && nbytes)
            memcpy(t->data, data, nbytes);
        return t;
    }
    struct sl_tensor *t = push_header(el, dtype, ndim, shape);
    if (!t)
        return NULL;
    t->buf = sl__buf_retain(buf);
    t->data = data;
    t->nbytes = nbytes;
    el->n++;
    return t;
}

void sl__element_set_origin(sl_element *el, sl_element *src)
{
    sl_element *old = el->origin;
    el->origin = sl_element_retain(src);
    sl_element_release(old);
}

const char *sl__element_origin(const sl_element *el, size_t *len)
{
    const sl_element *o = el->origin;
    if (!o || o->n < 1 || o->t[0].dtype != SL_STRING || o->t[0].ndim != 0)
        return NULL;
    return sl_tensor_string(&o->t[0], 0, len);
}

void sl__element_error_prefix(const sl_element *el)
{
    size_t len;
    const char *p = sl__element_origin(el, &len);
    if (!p)
        return;
    char buf[1024];
    snprintf(buf, sizeof buf, "%.*s", (int)(len < sizeof buf ? len : sizeof buf - 1), p);
    const char *msg = sl__error_msg();
    size_t n = strlen(buf);
    if (strncmp(msg, buf, n) == 0 && msg[n] == ':')
        return; /* named already (map_image names its file itself) */
    sl__error_prefix(buf);
}

size_t sl__string_row_bytes(const struct sl_tensor *t, int64_t row)
{
    const uint64_t *off = sl__str_offsets(t);
    int64_t count = sl__shape_count(t->ndim - 1, t->shape + 1), first = row * count;
    return (size_t)(count + 1) * sizeof *off + (size_t)(off[first + count] - off[first]);
}

int sl__element_push_string_row(sl_element *el, const struct sl_tensor *t, int64_t row)
{
    const uint64_t *off = sl__str_offsets(t);
    int64_t count = sl__shape_count(t->ndim - 1, t->shape + 1), first = row * count;
    const char *bytes = (const char *)(off + sl__shape_count(t->ndim, t->shape) + 1);
    struct sl_tensor *s = sl__element_push(el, SL_STRING, t->ndim - 1, t->shape + 1,
                                           sl__string_row_bytes(t, row));
    if (!s)
        return SL_ENOMEM;
    uint64_t *o = s->data, lo = off[first];
    for (int64_t i = 0; i <= count; i++)
        o[i] = off[first + i] - lo;
    memcpy(o + count + 1, bytes + lo, (size_t)o[count]);
    return 0;
}

size_t sl__element_bytes(const sl_element *el)
{
    size_t n = 0;
    for (int i = 0; i < el->n; i++)
        n += el->t[i].nbytes;
    return n;
}

/* ---- public ---- */

SL_API sl_element *sl_element_create(int ntensors)
{
    return sl__element_new(ntensors, DEFAULT_INLINE);
}

SL_API sl_element *sl_element_retain(sl_element *el)
{
    if (el)
        atomic_fetch_add_explicit(&el->refs, 1, memory_order_relaxed);
    return el;
}

SL_API void sl_element_release(sl_element *el)
{
    /* iterative along origins, which may chain */
    while (el && atomic_fetch_sub_explicit(&el->refs, 1, memory_order_acq_rel) == 1) {
        sl_element *origin = el->origin;
        for (int i = 0; i < el->n; i++)
            sl__buf_release(el->t[i].buf);
        sl__obj_put(el, el->alloc_size);
        el = origin;
    }
}

SL_API void *sl_element_add_tensor(sl_element *el, sl_dtype dtype, int ndim,
                                   const int64_t *shape)
{
    if (!el || dtype == SL_STRING || (ndim > 0 && !shape)) {
        sl__set_error(SL_EINVAL, "sl_element_add_tensor: bad arguments");
        return NULL;
    }
    size_t item = sl_dtype_size(dtype);
    if (ndim < 0 || ndim > SL_MAX_DIMS || !item) {
        sl__set_error(SL_EINVAL, "sl_element_add_tensor: bad dtype or rank");
        return NULL;
    }
    int64_t count = 1;
    for (int i = 0; i < ndim; i++) {
        if (shape[i] < 0 || (shape[i] && count > INT64_MAX / 16 / shape[i])) {
            sl__set_error(SL_EINVAL, "sl_element_add_tensor: bad dimension %lld",
                          (long long)shape[i]);
            return NULL;
        }
        count *= shape[i];
    }
    struct sl_tensor *t = sl__element_push(el, dtype, ndim, shape, (size_t)count * item);
    return t ? t->data : NULL;
}

SL_API int sl_element_add_string(sl_element *el, const void *bytes, size_t len)
{
    if (!el || (len && !bytes))
        return sl__set_error(SL_EINVAL, "sl_element_add_string: bad arguments");
    struct sl_tensor *t = sl__element_push(el, SL_STRING, 0, NULL, 2 * sizeof(uint64_t) + len);
    if (!t)
        return el->n >= el->cap ? SL_EINVAL : SL_ENOMEM;
    uint64_t *off = t->data;
    off[0] = 0;
    off[1] = len;
    if (len)
        memcpy(off + 2, bytes, len);
    return 0;
}

SL_API int sl_element_add_strings(sl_element *el, int ndim, const int64_t *shape,
                                  const char *const *items, const size_t *lens)
{
    if (!el || ndim < 0 || ndim > SL_MAX_DIMS || (ndim && !shape))
        return sl__set_error(SL_EINVAL, "sl_element_add_strings: bad arguments");
    int64_t n = 1;
    for (int i = 0; i < ndim; i++) {
        if (shape[i] < 0 || (shape[i] && n > INT64_MAX / 16 / shape[i]))
            return sl__set_error(SL_EINVAL, "sl_element_add_strings: bad dimension %lld",
                                 (long long)shape[i]);
        n *= shape[i];
    }
    if (n && !items)
        return sl__set_error(SL_EINVAL, "sl_element_add_strings: NULL items");
    size_t bytes = (size_t)(n + 1) * sizeof(uint64_t);
    for (int64_t i = 0; i < n; i++) {
        if (!items[i] && (!lens || lens[i]))
            return sl__set_error(SL_EINVAL, "sl_element_add_strings: item %lld is NULL",
                                 (long long)i);
        if (__builtin_add_overflow(bytes, lens ? lens[i] : strlen(items[i]), &bytes))
            return sl__set_error(SL_EINVAL, "sl_element_add_strings: the strings' total "
                                 "length overflows");
    }
    struct sl_tensor *t = sl__element_push(el, SL_STRING, ndim, shape, bytes);
    if (!t)
        return el->n >= el->cap ? SL_EINVAL : SL_ENOMEM;
    uint64_t *off = t->data;
    char *dst = (char *)(off + n + 1);
    off[0] = 0;
    for (int64_t i = 0; i < n; i++) {
        size_t len = lens ? lens[i] : strlen(items[i]);
        if (len)
            memcpy(dst + off[i], items[i], len);
        off[i + 1] = off[i] + len;
    }
    return 0;
}

SL_API int sl_element_add_int64(sl_element *el, int64_t v)
{
    void *p = sl_element_add_tensor(el, SL_INT64, 0, NULL);
    if (!p)
        return el && el->n >= el->cap ? SL_EINVAL : SL_ENOMEM;
    memcpy(p, &v, sizeof v);
    return 0;
}

SL_API int sl_element_add_float32(sl_element *el, float v)
{
    void *p = sl_element_add_tensor(el, SL_FLOAT32, 0, NULL);
    if (!p)
        return el && el->n >= el->cap ? SL_EINVAL : SL_ENOMEM;
    memcpy(p, &v, sizeof v);
    return 0;
}

SL_API int sl_element_add_shared(sl_element *el, const sl_element *src, int i)
{
    if (!el || !src || i < 0 || i >= src->n)
        return sl__set_error(SL_EINVAL, "sl_element_add_shared: bad arguments");
    const struct sl_tensor *s = &src->t[i];
    if (!sl__element_push_view(el, s->dtype, s->ndim, s->shape, s->data, s->nbytes, s->buf))
        return el->n >= el->cap ? SL_EINVAL : SL_ENOMEM;
    return 0;
}

SL_API int sl_element_size(const sl_element *el)
{
    return el ? el->n : 0;
}

SL_API const sl_tensor *sl_element_tensor(const sl_element *el, int i)
{
    return el && i >= 0 && i < el->n ? &el->t[i] : NULL;
}

SL_API sl_dtype sl_tensor_dtype(const sl_tensor *t)
{
    return t->dtype;
}

SL_API int sl_tensor_ndim(const sl_tensor *t)
{
    return t->ndim;
}

SL_API const int64_t *sl_tensor_shape(const sl_tensor *t)
{
    return t->shape;
}

SL_API int64_t sl_tensor_count(const sl_tensor *t)
{
    return sl__shape_count(t->ndim, t->shape);
}

SL_API const void *sl_tensor_data(const sl_tensor *t)
{
    return t->data;
}

SL_API size_t sl_tensor_nbytes(const sl_tensor *t)
{
    return t->nbytes;
}

SL_API const char *sl_tensor_string(const sl_tensor *t, int64_t i, size_t *len)
{
    if (!t || t->dtype != SL_STRING)
        return NULL;
    int64_t n = sl__shape_count(t->ndim, t->shape);
    if (i < 0 || i >= n)
        return NULL;
    const uint64_t *off = sl__str_offsets(t);
    const char *bytes = (const char *)(off + n + 1);
    if (len)
        *len = (size_t)(off[i + 1] - off[i]);
    return bytes + off[i];
}

SL_API int64_t sl_tensor_int64(const sl_tensor *t)
{
    if (!t || sl__shape_count(t->ndim, t->shape) < 1) {
        sl__set_error(SL_EINVAL, "sl_tensor_int64: %s", t ? "the tensor has no items" : "NULL tensor");
        return INT64_MIN;
    }
    const void *p = t->data;
    switch (t->dtype) {
    case SL_UINT8: return *(const uint8_t *)p;
    case SL_INT8: return *(const int8_t *)p;
    case SL_UINT16: return *(const uint16_t *)p;
    case SL_INT16: return *(const int16_t *)p;
    case SL_INT32: return *(const int32_t *)p;
    case SL_INT64: return *(const int64_t *)p;
    default:
        sl__set_error(SL_EDTYPE, "sl_tensor_int64: a %s tensor is not an integer",
                      sl_dtype_name(t->dtype));
        return INT64_MIN;
    }
}
