/* Growable byte strings (bytes.h). */
#include <string.h>
#include "alloc.h"
#include "bytes.h"
#include "error.h"

int sl__bytes_reserve(sl__bytes *b, size_t extra)
{
    if (b->cap - b->n >= extra)
        return 0;
    size_t cap = b->cap ? b->cap : 256;
    while (cap - b->n < extra)
        cap *= 2;
    unsigned char *p = sl__alloc(cap);
    if (!p)
        return sl__set_error(SL_ENOMEM, "out of memory (saved state)");
    if (b->n)
        memcpy(p, b->p, b->n);
    sl__free(b->p, b->cap);
    b->p = p;
    b->cap = cap;
    return 0;
}

int sl__bytes_append(sl__bytes *b, const void *p, size_t n)
{
    int rc = sl__bytes_reserve(b, n);
    if (rc == 0 && n) {
        memcpy(b->p + b->n, p, n);
        b->n += n;
    }
    return rc;
}

int sl__bytes_assign(sl__bytes *b, const void *p, size_t n)
{
    b->n = 0;
    return sl__bytes_append(b, p, n);
}

void sl__bytes_free(sl__bytes *b)
{
    sl__free(b->p, b->cap);
    *b = (sl__bytes){0};
}
