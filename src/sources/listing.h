/*
 * Listings: the (path, label) pairs of a file source (image_folder,
 * file_list), scanned or parsed once at build time and stored compactly:
 * one string arena of paths relative to a root, one array of labels.
 * A listing node has random access, so shuffle-all and shard work on it,
 * and the read node above it opens only the files they keep.
 */
#ifndef SL_SOURCES_LISTING_H
#define SL_SOURCES_LISTING_H

#include "../graph/sync.h"

/* Makes room for `need` items of `item` bytes in *p (capacity *cap,
 * doubling). 0 or SL_ENOMEM. */
int sl__array_grow(void **p, size_t *cap, size_t need, size_t item);

/* Growable array of NUL-terminated strings in one arena. */
typedef struct sl__strs {
    char *buf;
    size_t len, cap;
    size_t *off;
    size_t n, ncap;
} sl__strs;

/* Appends a, or "a/b" when b is not NULL; either may be a string of s
 * itself. 0 or SL_ENOMEM. */
int sl__strs_push(sl__strs *s, const char *a, size_t alen, const char *b, size_t blen);
static inline const char *sl__strs_get(const sl__strs *s, size_t i)
{
    return s->buf + s->off[i];
}
static inline size_t sl__strs_len(const sl__strs *s, size_t i)
{
    return (i + 1 < s->n ? s->off[i + 1] : s->len) - s->off[i] - 1;
}
void sl__strs_free(sl__strs *s);
/* Indices from .. from+count-1 of s sorted by the byte order of their
 * strings (as Python's sorted() orders UTF-8 names); NULL with SL_ENOMEM.
 * Free with sl__sorted_free. */
size_t *sl__strs_sorted(const sl__strs *s, size_t from, size_t count);
void sl__sorted_free(size_t *order, size_t count);

typedef struct sl__rescan sl__rescan;

typedef struct sl__listing_ds {
    sl_dataset base;
    char *root; /* paths are relative to it, unless absolute */
    size_t root_len;
    sl__strs paths;
    int64_t *labels;
    size_t labels_cap;
    /* a listing that picks up new files at each pass (NULL: fixed): the
     * arrays grow under its lock while passes read them */
    sl__rescan *rescan;
} sl__listing_ds;

/* A listing node under `root` (copied; trailing slashes dropped) in a
 * dataset of `size` bytes (>= sizeof(sl__listing_ds): a kind's own
 * fields follow). NULL with SL_ENOMEM. */
sl__listing_ds *sl__listing_new(const sl__node_ops *ops, size_t size, const char *root);

/* Lists the files anew into `fresh` (an empty listing over the same
 * root), labels final: 0, or a negative code with the message set. */
typedef int (*sl__relist_fn)(sl__listing_ds *l, sl__listing_ds *fresh);
/* Makes l rescan with `relist` at each pass after the first (the build's
 * listing serves it): the files relist finds that l lacks are appended,
 * in relist's order, so no index moves. Its ops must have .refresh =
 * sl__listing_refresh. 0 or SL_ENOMEM. */
int sl__listing_rescan_init(sl__listing_ds *l, sl__relist_fn relist);
int sl__listing_refresh(const sl_dataset *ds, int64_t epoch);
/* Appends the file dir/name (name NULL: dir is the whole relative path). */
int sl__listing_add(sl__listing_ds *l, const char *dir, size_t dlen, const char *name,
                    size_t nlen, int64_t label);
/* Entries now; only for a listing no pass reads yet (at build). */
static inline size_t sl__listing_count(const sl__listing_ds *l)
{
    return l->paths.n;
}

/* The node every listing kind shares, an indexed source (graph/sync.h)
 * that rescans first where it does; elements are (path: string, label:
 * int64). */
int sl__listing_start(sl__sync_iter *it, bool resumed);
int64_t sl__listing_cardinality(const sl_dataset *ds);
uint64_t sl__listing_fingerprint(const sl_dataset *ds, uint64_t h);
void sl__listing_destroy(sl_dataset *ds);
bool sl__listing_can_get(const sl_dataset *ds);
int sl__listing_get(const sl_dataset *ds, int64_t index, sl_element **out);

/* A listing kind's def: its kind, its dataset's destroy and refresh
 * (sl__listing_refresh where it rescans, else NULL). */
#define SL__LISTING_DEF(kind_, destroy_, refresh_)                                        \
    {                                                                                     \
        .node = {.kind = (kind_), .make_iter = sl__sync_make,                             \
                 .cardinality = sl__listing_cardinality,                                  \
                 .fingerprint = sl__listing_fingerprint, .destroy = (destroy_),           \
                 .can_get = sl__listing_can_get, .get = sl__listing_get,                  \
                 .refresh = (refresh_)},                                                  \
        SL__INDEXED_SOURCE(sl__listing_start),                                            \
    }

#endif
