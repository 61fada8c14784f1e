/*
 * list_files(patterns): the paths matching glob(3) patterns, sorted and
 * deduplicated at build time, as scalar strings. Random access, so a
 * shuffle(ALL) over it (SL_LIST_SHUFFLE) permutes the list per epoch and
 * shard takes every n-th path; no file is opened here.
 */
#include <glob.h>
#include <string.h>
#include "../remote/remote.h"
#include "listing.h"

typedef struct list_files_ds {
    sl_dataset base;
    sl__strs paths;
} list_files_ds;

static int64_t list_files_cardinality(const sl_dataset *ds)
{
    return (int64_t)((const list_files_ds *)ds)->paths.n;
}

static int list_files_get(const sl_dataset *ds, int64_t i, sl_element **out)
{
    const sl__strs *p = &((const list_files_ds *)ds)->paths;
    size_t len = sl__strs_len(p, (size_t)i);
    sl_element *el = sl__element_new(1, 16 + len);
    if (!el || sl_element_add_string(el, sl__strs_get(p, (size_t)i), len) < 0) {
        sl_element_release(el);
        return SL_ENOMEM;
    }
    *out = el;
    return 0;
}

static uint64_t list_files_fingerprint(const sl_dataset *ds, uint64_t h)
{
    const sl__strs *p = &((const list_files_ds *)ds)->paths;
    h = sl__hash_u64(h, p->n);
    return sl__hash_bytes(h, p->buf, p->len);
}

static void list_files_destroy(sl_dataset *ds)
{
    sl__strs_free(&((list_files_ds *)ds)->paths);
}

static bool list_files_can_get(const sl_dataset *ds)
{
    (void)ds;
    return true;
}

static const sl__sync_def list_files_def = {
    .node = {.kind = "list_files", .make_iter = sl__sync_make,
             .cardinality = list_files_cardinality, .fingerprint = list_files_fingerprint, .destroy = list_files_destroy,
             .can_get = list_files_can_get, .get = list_files_get},
    SL__INDEXED_SOURCE(sl__indexed_start),
};

static int push_url(void *user, const char *url, size_t n)
{
    return sl__strs_push(user, url, n, NULL, 0) < 0
               ? sl__set_error(SL_ENOMEM, "list_files: out of memory") : 0;
}

static int glob_error(const char *path, int err)
{
    (void)path, (void)err;
    return 0; /* unreadable directories match nothing, as Python's glob */
}

SL_API sl_dataset *sl_list_files(const char *const *patterns, int n, unsigned flags,
                                 int64_t seed)
{
    if (!patterns || n < 1 || (flags & ~SL_LIST_SHUFFLE) || seed < -1) {
        sl__set_error(SL_EINVAL, "list_files: bad arguments (%d patterns, flags 0x%x, seed "
                      "%lld)", n, flags, (long long)seed);
        return NULL;
    }
    sl__strs all = {0};
    for (int i = 0; i < n; i++) {
        if (!patterns[i] || !patterns[i][0]) {
            sl__strs_free(&all);
            sl__set_error(SL_EINVAL, "list_files: pattern %d is %s", i,
                          patterns[i] ? "empty" : "NULL");
            return NULL;
        }
        if (sl__is_url(patterns[i])) { /* a bucket's listing */
            size_t before = all.n;
            int rc = sl__remote_glob(patterns[i], push_url, &all);
            if (rc < 0)
                sl__error_prefix("list_files");
            if (rc == 0 && all.n == before)
                rc = sl__set_error(SL_ENOENT, "list_files: no object matches %s", patterns[i]);
            if (rc < 0) {
                sl__strs_free(&all);
                return NULL;
            }
            continue;
        }
        glob_t g;
        int r = glob(patterns[i], 0, glob_error, &g);
        if (r == GLOB_NOMATCH || (r == 0 && g.gl_pathc == 0)) {
            if (r == 0)
                globfree(&g);
            sl__strs_free(&all);
            sl__set_error(SL_ENOENT, "list_files: no file matches %s", patterns[i]);
            return NULL;
        }
        if (r != 0) {
            sl__strs_free(&all);
            sl__set_error(r == GLOB_NOSPACE ? SL_ENOMEM : SL_EIO, "list_files: %s: glob failed",
                          patterns[i]);
            return NULL;
        }
        for (size_t k = 0; k < g.gl_pathc; k++)
            if (sl__strs_push(&all, g.gl_pathv[k], strlen(g.gl_pathv[k]), NULL, 0) < 0) {
                globfree(&g);
                sl__strs_free(&all);
                sl__set_error(SL_ENOMEM, "list_files: out of memory");
                return NULL;
            }
        globfree(&g);
    }
    /* every process must see the same list: sorted bytewise, once each */
    size_t *order = sl__strs_sorted(&all, 0, all.n);
    list_files_ds *d = order ? (list_files_ds *)sl__dataset_new_source(&list_files_def.node, sizeof *d) : NULL;
    int rc = d ? 0 : SL_ENOMEM;
    for (size_t k = 0; rc == 0 && k < all.n; k++) {
        size_t i = order[k];
        const char *s = sl__strs_get(&all, i);
        size_t len = sl__strs_len(&all, i);
        size_t m = d->paths.n;
        if (m && sl__strs_len(&d->paths, m - 1) == len &&
            memcmp(sl__strs_get(&d->paths, m - 1), s, len) == 0)
            continue;
        rc = sl__strs_push(&d->paths, s, len, NULL, 0);
    }
    sl__sorted_free(order, all.n);
    sl__strs_free(&all);
    if (rc < 0) {
        sl_dataset_release(d ? &d->base : NULL);
        sl__set_error(SL_ENOMEM, "list_files: out of memory");
        return NULL;
    }
    sl_dataset *ds = sl__dataset_structured(&d->base, sl_structure_parse("string[]"));
    if (ds && (flags & SL_LIST_SHUFFLE))
        return sl_shuffle(ds, SL_SHUFFLE_ALL, seed, 0);
    return ds;
}
