/* A source over elements already made (a group_by_window's window), in
 * order, with the structure of the dataset they came from: an indexed
 * source (graph/sync.h), its position its state. Its kind,
 * "from_elements", is what reports show. */
#include <string.h>
#include "../graph/sync.h"
#include "window_source.h"

typedef struct window_source_ds {
    sl_dataset base;
    sl_element **els;
    int64_t n;
} window_source_ds;

static int64_t window_source_cardinality(const sl_dataset *ds)
{
    return ((const window_source_ds *)ds)->n;
}

static bool window_source_can_get(const sl_dataset *ds)
{
    (void)ds;
    return true;
}

static int window_source_get(const sl_dataset *ds, int64_t index, sl_element **out)
{
    *out = sl_element_retain(((const window_source_ds *)ds)->els[index]);
    return 0;
}

static void window_source_destroy(sl_dataset *ds)
{
    window_source_ds *d = (window_source_ds *)ds;
    for (int64_t i = 0; i < d->n; i++)
        sl_element_release(d->els[i]);
    sl__free(d->els, (size_t)(d->n ? d->n : 1) * sizeof *d->els);
}

/* No fingerprint of its own: the elements' pipeline stands for them. */
static const sl__sync_def window_source_def = {
    .node = {.kind = "from_elements", .make_iter = sl__sync_make,
             .cardinality = window_source_cardinality, .can_get = window_source_can_get,
             .get = window_source_get, .destroy = window_source_destroy},
    SL__INDEXED_SOURCE(sl__indexed_start),
};

sl_dataset *sl__window_source(sl_element **els, int64_t n, const sl_structure *structure)
{
    window_source_ds *d = (window_source_ds *)sl__dataset_new_source(&window_source_def.node,
                                                                     sizeof *d);
    sl_element **copy = d ? sl__alloc((size_t)(n ? n : 1) * sizeof *copy) : NULL;
    if (!copy) {
        for (int64_t i = 0; i < n; i++)
            sl_element_release(els[i]);
        if (d)
            return sl__dataset_fail(&d->base, SL_ENOMEM, "window: out of memory");
        return NULL;
    }
    memcpy(copy, els, (size_t)n * sizeof *copy);
    d->els = copy;
    d->n = n;
    if (!structure)
        return &d->base;
    return sl__dataset_structured(&d->base, sl_structure_retain((sl_structure *)structure));
}
