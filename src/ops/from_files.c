/* from_files(paths, labels): (path) or (path, label) elements. */
#include <string.h>
#include "../graph/sync.h"

typedef struct from_files_ds {
    sl_dataset base;
    char **paths;
    int64_t *labels; /* NULL when unlabelled */
    size_t n;
} from_files_ds;

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

static int64_t from_files_cardinality(const sl_dataset *ds)
{
    return (int64_t)((const from_files_ds *)ds)->n;
}

static uint64_t from_files_fingerprint(const sl_dataset *ds, uint64_t h)
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

static const sl__sync_def from_files_def = {
    .node = {.kind = "from_files", .make_iter = sl__sync_make,
             .cardinality = from_files_cardinality, .fingerprint = from_files_fingerprint, .destroy = from_files_destroy,
             .can_get = from_files_can_get, .get = from_files_get},
    SL__INDEXED_SOURCE(sl__indexed_start),
};

SL_API sl_dataset *sl_from_files(const char *const *paths, const int64_t *labels, size_t count)
{
    if (count && !paths) {
        sl__set_error(SL_EINVAL, "from_files: NULL paths");
        return NULL;
    }
    from_files_ds *d = (from_files_ds *)sl__dataset_new_source(&from_files_def.node, sizeof *d);
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
