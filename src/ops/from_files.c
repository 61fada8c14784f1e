/* from_files(paths, labels): (path) or (path, label) elements. */
#include <string.h>
#include "../graph/node.h"

typedef struct from_files_ds {
    sl_dataset base;
    char **paths;
    int64_t *labels; /* NULL when unlabelled */
    size_t n;
} from_files_ds;

typedef struct from_files_iter {
    sl__iter base;
    size_t next;
} from_files_iter;

static int from_files_get(const sl_dataset *ds, int64_t i, sl_element **out)
{
    const from_files_ds *d = (const from_files_ds *)ds;
    const char *p = d->paths[i];
    size_t len = strlen(p);
    sl_element *el = sl__element_new(d->labels ? 2 : 1, 2 * sizeof(uint64_t) + len + 16 + 8);
    if (!el)
        return SL_ENOMEM;
    /* both fit the inline area, so these cannot fail */
    sl_element_add_string(el, p, len);
    if (d->labels)
        sl_element_add_int64(el, d->labels[i]);
    *out = el;
    return 0;
}

static int from_files_next(sl__iter *base, sl_element **out)
{
    from_files_iter *it = (from_files_iter *)base;
    if (it->next >= ((const from_files_ds *)base->ds)->n)
        return SL_EOF;
    int rc = from_files_get(base->ds, (int64_t)it->next, out);
    if (rc == 0)
        it->next++;
    return rc;
}

static int from_files_save(sl__iter *base, sl__bytes *w)
{
    return sl__save_pos(w, base, (int64_t)((from_files_iter *)base)->next);
}

static const sl__iter_ops from_files_iter_ops = {
    .next = from_files_next,
    .save = from_files_save,
};

static int64_t from_files_card(const sl_dataset *ds);

static int from_files_make(const sl_dataset *ds, sl__tree *tree, uint64_t key, int64_t epoch,
                      sl__iter **out)
{
    from_files_iter *it = sl__iter_alloc(&from_files_iter_ops, sizeof *it, ds, tree, key, epoch);
    if (!it)
        return SL_ENOMEM;
    int64_t pos = 0;
    int rc = sl__restored_pos(&it->base, (int64_t)(from_files_card(ds)), &pos);
    if (rc < 0) {
        sl__iter_free(&it->base);
        return rc;
    }
    it->next = (size_t)pos;
    *out = &it->base;
    return 0;
}

static int64_t from_files_card(const sl_dataset *ds)
{
    return (int64_t)((const from_files_ds *)ds)->n;
}

static uint64_t from_files_fp(const sl_dataset *ds, uint64_t h)
{
    const from_files_ds *d = (const from_files_ds *)ds;
    for (size_t i = 0; i < d->n; i++) {
        h = sl__hash_str(h, d->paths[i]);
        if (d->labels)
            h = sl__hash_u64(h, (uint64_t)d->labels[i]);
    }
    return h;
}

static void from_files_destroy(sl_dataset *ds)
{
    from_files_ds *d = (from_files_ds *)ds;
    for (size_t i = 0; d->paths && i < d->n; i++)
        sl__strfree(d->paths[i]);
    sl__free(d->paths, (d->n ? d->n : 1) * sizeof *d->paths);
    if (d->labels)
        sl__free(d->labels, d->n * sizeof *d->labels);
}

static bool from_files_can_get(const sl_dataset *ds)
{
    (void)ds;
    return true;
}

static const sl__node_ops from_files_ops = {
    .kind = "from_files",
    .make_iter = from_files_make,
    .cardinality = from_files_card,
    .fingerprint = from_files_fp,
    .destroy = from_files_destroy,
    .can_get = from_files_can_get,
    .get = from_files_get,
};

SL_API sl_dataset *sl_from_files(const char *const *paths, const int64_t *labels, size_t count)
{
    if (count && !paths) {
        sl__set_error(SL_EINVAL, "from_files: NULL paths");
        return NULL;
    }
    from_files_ds *d = (from_files_ds *)sl__dataset_new_source(&from_files_ops, sizeof *d);
    if (!d)
        return NULL;
    d->paths = sl__calloc(count ? count : 1, sizeof *d->paths);
    if (!d->paths)
        return sl__dataset_fail(&d->base, SL_ENOMEM, "from_files: out of memory");
    d->n = count;
    for (size_t i = 0; i < count; i++) {
        if (!paths[i])
            return sl__dataset_fail(&d->base, SL_EINVAL, "from_files: path %zu is NULL", i);
        d->paths[i] = sl__strdup(paths[i]);
        if (!d->paths[i])
            return sl__dataset_fail(&d->base, SL_ENOMEM, "from_files: out of memory");
    }
    if (labels) {
        d->labels = sl__alloc(count * sizeof *labels);
        if (!d->labels && count)
            return sl__dataset_fail(&d->base, SL_ENOMEM, "from_files: out of memory");
        memcpy(d->labels, labels, count * sizeof *labels);
    }
    return sl__dataset_structured(&d->base,
                                  sl_structure_parse(labels ? "(string[], int64[])" : "string[]"));
}
