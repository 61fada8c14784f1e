/* Listing nodes: (path, label) pairs with random access. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "listing.h"

/* ---- string arrays ---- */

int sl__array_grow(void **p, size_t *cap, size_t need, size_t item)
{
    if (need <= *cap)
        return 0;
    size_t ncap = *cap ? *cap : 64;
    while (ncap < need)
        ncap *= 2;
    void *q = sl__alloc(ncap * item);
    if (!q)
        return SL_ENOMEM;
    if (*p)
        memcpy(q, *p, *cap * item);
    sl__free(*p, *cap * item);
    *p = q;
    *cap = ncap;
    return 0;
}

/* Offset of p in s's arena, or SIZE_MAX when p is not in it. */
static size_t arena_offset(const sl__strs *s, const char *p)
{
    uintptr_t at = (uintptr_t)p, lo = (uintptr_t)s->buf;
    return s->buf && at >= lo && at < lo + s->cap ? (size_t)(at - lo) : SIZE_MAX;
}

int sl__strs_push(sl__strs *s, const char *a, size_t alen, const char *b, size_t blen)
{
    size_t len = alen + (b ? 1 + blen : 0);
    /* a or b may be one of s's own strings (a folder's path made from its
     * parent's), which growing the arena moves */
    size_t a_at = arena_offset(s, a), b_at = b ? arena_offset(s, b) : SIZE_MAX;
    if (sl__array_grow((void **)&s->buf, &s->cap, s->len + len + 1, 1) ||
        sl__array_grow((void **)&s->off, &s->ncap, s->n + 1, sizeof *s->off))
        return SL_ENOMEM;
    if (a_at != SIZE_MAX)
        a = s->buf + a_at;
    if (b_at != SIZE_MAX)
        b = s->buf + b_at;
    char *d = s->buf + s->len;
    memcpy(d, a, alen);
    if (b) {
        d[alen] = '/';
        memcpy(d + alen + 1, b, blen);
    }
    d[len] = '\0';
    s->off[s->n++] = s->len;
    s->len += len + 1;
    return 0;
}

void sl__strs_free(sl__strs *s)
{
    sl__free(s->buf, s->cap);
    sl__free(s->off, s->ncap * sizeof *s->off);
    memset(s, 0, sizeof *s);
}

static int by_string(const void *a, const void *b, void *ctx)
{
    const sl__strs *s = ctx;
    return strcmp(sl__strs_get(s, *(const size_t *)a), sl__strs_get(s, *(const size_t *)b));
}

size_t *sl__strs_sorted(const sl__strs *s, size_t from, size_t n)
{
    size_t *order = sl__alloc(n ? n * sizeof *order : 1);
    if (!order)
        return NULL;
    for (size_t i = 0; i < n; i++)
        order[i] = from + i;
    qsort_r(order, n, sizeof *order, by_string, (void *)s);
    return order;
}

void sl__sorted_free(size_t *order, size_t count)
{
    sl__free(order, count ? count * sizeof *order : 1);
}

/* ---- the node ---- */

sl__listing_ds *sl__listing_new(const sl__node_ops *ops, const char *root)
{
    sl__listing_ds *l = (sl__listing_ds *)sl__dataset_new_source(ops, sizeof *l);
    if (!l)
        return NULL;
    size_t n = strlen(root);
    while (n > 1 && root[n - 1] == '/')
        n--;
    l->root = sl__alloc(n + 1);
    if (!l->root) {
        sl_dataset_free(&l->base);
        return NULL;
    }
    memcpy(l->root, root, n);
    l->root[n] = '\0';
    l->root_len = n;
    return l;
}

int sl__listing_add(sl__listing_ds *l, const char *dir, size_t dlen, const char *name,
                    size_t nlen, int64_t label)
{
    size_t i = l->paths.n;
    if (sl__array_grow((void **)&l->labels, &l->labels_cap, i + 1, sizeof *l->labels) ||
        sl__strs_push(&l->paths, dir, dlen, name, nlen))
        return SL_ENOMEM;
    l->labels[i] = label;
    return 0;
}

void sl__listing_destroy(sl_dataset *ds)
{
    sl__listing_ds *l = (sl__listing_ds *)ds;
    if (l->root)
        sl__free(l->root, l->root_len + 1);
    sl__strs_free(&l->paths);
    sl__free(l->labels, l->labels_cap * sizeof *l->labels);
}

int64_t sl__listing_card(const sl_dataset *ds)
{
    return (int64_t)((const sl__listing_ds *)ds)->paths.n;
}

uint64_t sl__listing_fp(const sl_dataset *ds, uint64_t h)
{
    const sl__listing_ds *l = (const sl__listing_ds *)ds;
    /* the arena and the offsets together say exactly which paths */
    h = sl__hash_str(h, l->root);
    h = sl__hash_bytes(h, l->paths.buf, l->paths.len);
    h = sl__hash_bytes(h, l->paths.off, l->paths.n * sizeof *l->paths.off);
    return sl__hash_bytes(h, l->labels, l->paths.n * sizeof *l->labels);
}

bool sl__listing_can_get(const sl_dataset *ds)
{
    (void)ds;
    return true;
}

int sl__listing_get(const sl_dataset *ds, int64_t index, sl_element **out)
{
    const sl__listing_ds *l = (const sl__listing_ds *)ds;
    const char *rel = sl__strs_get(&l->paths, (size_t)index);
    size_t rlen = sl__strs_len(&l->paths, (size_t)index);
    /* an absolute path in a file list stands on its own, as os.path.join does */
    size_t rootn = rel[0] == '/' ? 0 : l->root_len;
    bool sep = rootn && l->root[rootn - 1] != '/';
    size_t plen = rootn + sep + rlen;
    size_t sbytes = 2 * sizeof(uint64_t) + plen;
    sl_element *el = sl__element_new(2, sbytes + sizeof(int64_t));
    if (!el)
        return SL_ENOMEM;
    /* both fit the inline area, so these cannot fail */
    struct sl_tensor *t = sl__element_push(el, SL_STRING, 0, NULL, sbytes);
    uint64_t *off = t->data;
    off[0] = 0;
    off[1] = plen;
    char *d = (char *)(off + 2);
    memcpy(d, l->root, rootn);
    if (sep)
        d[rootn] = '/';
    memcpy(d + rootn + sep, rel, rlen);
    sl_element_add_int64(el, l->labels[index]);
    *out = el;
    return 0;
}

typedef struct listing_iter {
    sl__iter base;
    size_t next;
} listing_iter;

static int listing_next(sl__iter *base, sl_element **out)
{
    listing_iter *it = (listing_iter *)base;
    if (it->next >= ((const sl__listing_ds *)base->ds)->paths.n)
        return SL_EOF;
    int rc = sl__listing_get(base->ds, (int64_t)it->next, out);
    if (rc == 0)
        it->next++;
    return rc;
}

static int listing_save(sl__iter *base, sl__bytes *w)
{
    return sl__save_pos(w, base, (int64_t)((listing_iter *)base)->next);
}

static const sl__iter_ops listing_iter_ops = {listing_next, NULL, NULL, listing_save};

int sl__listing_make(const sl_dataset *ds, sl__tree *tree, uint64_t key, int64_t epoch,
                     sl__iter **out)
{
    listing_iter *it = sl__iter_alloc(&listing_iter_ops, sizeof *it, ds, tree, key, epoch);
    if (!it)
        return SL_ENOMEM;
    int64_t pos = 0;
    int rc = sl__restored_pos(&it->base, (int64_t)(((const sl__listing_ds *)ds)->paths.n), &pos);
    if (rc < 0) {
        sl__iter_free(&it->base);
        return rc;
    }
    it->next = (size_t)pos;
    *out = &it->base;
    return 0;
}
