/* The element record codec (record.h). */
#include <string.h>
#include "../core/le.h"
#include "record.h"

#define INLINE_BYTES 64 /* an element's inline room, for small tensors */

int sl__record_put(const sl_element *el, int (*write)(void *self, const void *p, size_t n),
                   void *self)
{
    unsigned char h[8 + 8 * SL_MAX_DIMS + 8];
    sl__put_le32(h, (uint32_t)el->n);
    int rc = write(self, h, 4);
    for (int i = 0; i < el->n && !rc; i++) {
        const struct sl_tensor *t = &el->t[i];
        sl__put_le32(h, (uint32_t)t->dtype);
        sl__put_le32(h + 4, (uint32_t)t->ndim);
        size_t at = 8;
        for (int d = 0; d < t->ndim; d++, at += 8)
            sl__put_le64(h + at, (uint64_t)t->shape[d]);
        if (t->dtype != SL_STRING || sl__str_offsets(t)[0] == 0) {
            sl__put_le64(h + at, t->nbytes);
            rc = write(self, h, at + 8);
            if (!rc && t->nbytes)
                rc = write(self, t->data, t->nbytes);
            continue;
        }
        /* a view whose strings start after a gap: written from offset 0 */
        int64_t n = sl__shape_count(t->ndim, t->shape);
        const uint64_t *off = sl__str_offsets(t);
        uint64_t gap = off[0];
        sl__put_le64(h + at, t->nbytes - gap);
        rc = write(self, h, at + 8);
        for (int64_t k = 0; k <= n && !rc; k++) {
            unsigned char o[8];
            sl__put_le64(o, off[k] - gap);
            rc = write(self, o, 8);
        }
        if (!rc && off[n] > gap)
            rc = write(self, (const char *)(off + n + 1) + gap, off[n] - gap);
    }
    return rc;
}

typedef struct reader {
    sl__record_src *src;
    uint64_t at; /* bytes read from the record's start */
    const char *why;
    uint64_t where;
} reader;

/* SL_ECORRUPT: `why` at the record's offset `where`. */
static int bad(reader *r, const char *why, uint64_t where)
{
    r->why = why;
    r->where = where;
    return SL_ECORRUPT;
}

static int get(reader *r, void *dst, size_t n)
{
    if (n > r->src->left)
        return bad(r, "truncated record", r->at);
    int rc = r->src->read(r->src->self, dst, n);
    if (rc == 0) {
        r->src->left -= n;
        r->at += n;
    }
    return rc;
}

static int get_field(reader *r, size_t n, uint64_t *v)
{
    unsigned char b[8];
    int rc = get(r, b, n);
    if (rc == 0)
        *v = n == 4 ? sl__get_le32(b) : sl__get_le64(b);
    return rc;
}

static int get_tensor(reader *r, sl_element *el)
{
    uint64_t at = r->at, dtype, ndim, nbytes, dim;
    int64_t shape[SL_MAX_DIMS];
    int rc = get_field(r, 4, &dtype);
    if (!rc && dtype >= SL_DTYPE_COUNT)
        return bad(r, "bad dtype", at);
    if (!rc)
        rc = get_field(r, 4, &ndim);
    if (!rc && ndim > SL_MAX_DIMS)
        return bad(r, "bad rank", at + 4);
    int64_t count = 1;
    for (uint64_t d = 0; d < ndim && !rc; d++) {
        rc = get_field(r, 8, &dim);
        if (!rc && (dim > INT64_MAX || __builtin_mul_overflow(count, (int64_t)dim, &count)))
            return bad(r, "bad dimension", r->at - 8);
        shape[d] = (int64_t)dim;
    }
    if (!rc)
        rc = get_field(r, 8, &nbytes);
    if (rc)
        return rc;
    size_t item = sl_dtype_size((sl_dtype)dtype);
    if (nbytes > r->src->left ||
        (item && (count > INT64_MAX / (int64_t)item || nbytes != (uint64_t)count * item)))
        return bad(r, "bad tensor size", r->at - 8);
    struct sl_tensor *t = sl__element_push(el, (sl_dtype)dtype, (int)ndim, shape, nbytes);
    if (!t)
        return SL_ENOMEM;
    rc = nbytes ? get(r, t->data, nbytes) : 0; /* straight into place */
    if (!rc && dtype == SL_STRING && !sl__strings_valid(t))
        return bad(r, "bad string offsets", at);
    return rc;
}

int sl__record_get(sl__record_src *src, sl_element **out, const char **why, uint64_t *where)
{
    reader r = {src, 0, NULL, 0};
    uint64_t nt;
    int rc = get_field(&r, 4, &nt);
    /* a tensor takes 16 bytes at least */
    if (!rc && (nt > 0xffff || nt > src->left / 16))
        rc = bad(&r, "bad tensor count", 0);
    sl_element *el = rc ? NULL : sl__element_new((int)nt, INLINE_BYTES);
    if (!rc && !el)
        rc = SL_ENOMEM;
    for (uint64_t i = 0; i < nt && !rc; i++)
        rc = get_tensor(&r, el);
    if (rc) {
        sl_element_release(el);
        *why = r.why;
        *where = r.where;
        return rc;
    }
    *out = el;
    return 0;
}
