/* Listing nodes: (path, label) pairs with random access. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "../core/log.h"
#include "../core/salts.h"
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

sl__listing_ds *sl__listing_new(const sl__node_ops *ops, size_t size, const char *root)
{
    sl__listing_ds *l = (sl__listing_ds *)sl__dataset_new_source(ops, size);
    if (!l)
        return NULL;
    size_t n = strlen(root);
    while (n > 1 && root[n - 1] == '/')
        n--;
    l->root = sl__alloc(n + 1);
    if (!l->root) {
        sl_dataset_release(&l->base);
        return NULL;
    }
    memcpy(l->root, root, n);
    l->root[n] = '\0';
    l->root_len = n;
    return (sl__listing_ds *)sl__dataset_structured(&l->base,
                                                    sl_structure_parse("(string[], int64[])"));
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

/* ---- rescanning ---- */

struct sl__rescan {
    pthread_rwlock_t lock;  /* the arrays: passes read, a rescan appends */
    pthread_mutex_t scan_mu; /* one rescan at a time; the fields below */
    sl__relist_fn relist;
    bool fresh;             /* the build's listing, no pass has run yet */
    int64_t epoch;          /* the pass last listed for */
    /* the paths listed, by hash: index + 1 (0: empty), open addressing */
    uint32_t *set;
    size_t set_cap;
};

static uint64_t path_hash(const char *p, size_t n)
{
    return sl__hash_bytes(0x5ca9, p, n);
}

static bool set_has(const sl__listing_ds *l, const char *p, size_t n)
{
    const sl__rescan *r = l->rescan;
    for (size_t h = path_hash(p, n) & (r->set_cap - 1);; h = (h + 1) & (r->set_cap - 1)) {
        uint32_t v = r->set[h];
        if (!v)
            return false;
        if (sl__strs_len(&l->paths, v - 1) == n && !memcmp(sl__strs_get(&l->paths, v - 1), p, n))
            return true;
    }
}

static void set_put(sl__rescan *r, const sl__listing_ds *l, size_t i)
{
    size_t h = path_hash(sl__strs_get(&l->paths, i), sl__strs_len(&l->paths, i));
    for (h &= r->set_cap - 1; r->set[h]; h = (h + 1) & (r->set_cap - 1)) {
    }
    r->set[h] = (uint32_t)(i + 1);
}

/* Room in the set for `n` paths at most half full: 0 or SL_ENOMEM. */
static int set_reserve(sl__rescan *r, const sl__listing_ds *l, size_t n)
{
    if (2 * n <= r->set_cap)
        return 0;
    size_t cap = r->set_cap ? r->set_cap : 1024;
    while (cap < 2 * n)
        cap *= 2;
    uint32_t *set = sl__calloc(cap, sizeof *set);
    if (!set)
        return SL_ENOMEM;
    sl__free(r->set, r->set_cap * sizeof *r->set);
    r->set = set;
    r->set_cap = cap;
    for (size_t i = 0; i < l->paths.n; i++)
        set_put(r, l, i);
    return 0;
}

int sl__listing_rescan_init(sl__listing_ds *l, sl__relist_fn relist)
{
    if (l->paths.n >= UINT32_MAX)
        return sl__set_error(SL_ERANGE, "%s: %s: too many files to rescan",
                             sl_dataset_name(&l->base), l->root);
    sl__rescan *r = sl__calloc(1, sizeof *r);
    if (!r)
        return SL_ENOMEM;
    pthread_rwlock_init(&r->lock, NULL);
    pthread_mutex_init(&r->scan_mu, NULL);
    r->relist = relist;
    r->fresh = true;
    l->rescan = r;
    return 0;
}

/* The files of `fresh` that l lacks, appended (under the write lock). */
static int append_new(sl__listing_ds *l, const sl__listing_ds *fresh, size_t *added)
{
    sl__rescan *r = l->rescan;
    int rc = set_reserve(r, l, l->paths.n + fresh->paths.n);
    pthread_rwlock_wrlock(&r->lock);
    for (size_t i = 0; rc == 0 && i < fresh->paths.n; i++) {
        const char *p = sl__strs_get(&fresh->paths, i);
        size_t n = sl__strs_len(&fresh->paths, i);
        if (set_has(l, p, n))
            continue;
        if (l->paths.n + 1 >= UINT32_MAX) {
            rc = sl__set_error(SL_ERANGE, "%s: %s: too many files", sl_dataset_name(&l->base),
                               l->root);
            break;
        }
        rc = sl__listing_add(l, p, n, NULL, 0, fresh->labels[i]);
        if (rc == 0) {
            set_put(r, l, l->paths.n - 1);
            ++*added;
        }
    }
    pthread_rwlock_unlock(&r->lock);
    return rc;
}

/* what a rescan lists into, freed once merged */
static const sl__sync_def fresh_def = SL__LISTING_DEF("rescan", sl__listing_destroy, NULL);

int sl__listing_refresh(const sl_dataset *ds, int64_t epoch)
{
    sl__listing_ds *l = (sl__listing_ds *)ds; /* (the dataset's mutable part) */
    sl__rescan *r = l->rescan;
    if (!r)
        return 0;
    pthread_mutex_lock(&r->scan_mu);
    int rc = 0;
    if (r->fresh || r->epoch == epoch) {
        r->fresh = false;
        r->epoch = epoch;
        pthread_mutex_unlock(&r->scan_mu);
        return 0;
    }
    r->epoch = epoch;
    sl__listing_ds *fresh = sl__listing_new(&fresh_def.node, sizeof *fresh, l->root);
    if (!fresh) {
        rc = SL_ENOMEM;
    } else if ((rc = r->relist(l, fresh)) < 0 && rc != SL_ENOMEM) {
        /* the folder cannot be listed now (moved, being replaced): the
         * pass runs on what was listed before */
        sl__log(SL_LOG_WARN, "%s: rescan for epoch %lld failed (%s); the %zu files listed "
                "before stay", sl_dataset_name(ds), (long long)epoch, sl__error_msg(),
                l->paths.n);
        rc = 0;
    } else if (rc == 0) {
        size_t added = 0;
        rc = append_new(l, fresh, &added);
        if (added)
            sl__log(SL_LOG_INFO, "%s: %s: %zu new files for epoch %lld (%zu in all)",
                    sl_dataset_name(ds), l->root, added, (long long)epoch, l->paths.n);
    }
    sl_dataset_release(&fresh->base);
    pthread_mutex_unlock(&r->scan_mu);
    return rc == SL_ENOMEM ? sl__set_error(SL_ENOMEM, "%s: %s: out of memory rescanning",
                                           sl_dataset_name(ds), l->root)
                           : rc;
}

static void rescan_free(sl__rescan *r)
{
    if (!r)
        return;
    pthread_rwlock_destroy(&r->lock);
    pthread_mutex_destroy(&r->scan_mu);
    sl__free(r->set, r->set_cap * sizeof *r->set);
    sl__free(r, sizeof *r);
}

void sl__listing_destroy(sl_dataset *ds)
{
    sl__listing_ds *l = (sl__listing_ds *)ds;
    rescan_free(l->rescan);
    if (l->root)
        sl__free(l->root, l->root_len + 1);
    sl__strs_free(&l->paths);
    sl__free(l->labels, l->labels_cap * sizeof *l->labels);
}

int64_t sl__listing_cardinality(const sl_dataset *ds)
{
    const sl__listing_ds *l = (const sl__listing_ds *)ds;
    if (!l->rescan)
        return (int64_t)l->paths.n;
    pthread_rwlock_rdlock(&l->rescan->lock);
    int64_t n = (int64_t)l->paths.n;
    pthread_rwlock_unlock(&l->rescan->lock);
    return n;
}

uint64_t sl__listing_fingerprint(const sl_dataset *ds, uint64_t h)
{
    const sl__listing_ds *l = (const sl__listing_ds *)ds;
    if (l->rescan) /* its files change; the folder is what it is */
        return sl__hash_str(sl__hash_u64(h, SL__SALT_RESCAN), l->root);
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

static int listing_get(const sl__listing_ds *l, int64_t index, sl_element **out);

int sl__listing_get(const sl_dataset *ds, int64_t index, sl_element **out)
{
    const sl__listing_ds *l = (const sl__listing_ds *)ds;
    if (!l->rescan)
        return listing_get(l, index, out);
    pthread_rwlock_rdlock(&l->rescan->lock);
    int rc = listing_get(l, index, out);
    pthread_rwlock_unlock(&l->rescan->lock);
    return rc;
}

static int listing_get(const sl__listing_ds *l, int64_t index, sl_element **out)
{
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

int sl__listing_start(sl__sync_iter *it, bool resumed)
{
    int rc = sl__listing_refresh(it->base.ds, it->base.epoch);
    return rc < 0 ? rc : sl__indexed_start(it, resumed);
}
