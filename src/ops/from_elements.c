/* A source over elements already made (a group_by_window's window), in
 * order, with the structure of the dataset they came from. Random access;
 * its position is its state. */
#include <string.h>
#include "../graph/sync.h"
#include "from_elements.h"

typedef struct from_elements_ds {
    sl_dataset base;
    sl_element **els;
    int64_t n;
} from_elements_ds;

typedef struct from_elements_iter {
    sl__sync_iter u;
    int64_t pos;
} from_elements_iter;

static int from_elements_next(sl__iter *base, sl_element **out)
{
    from_elements_iter *it = (from_elements_iter *)base;
    const from_elements_ds *d = (const from_elements_ds *)base->ds;
    if (it->pos >= d->n)
        return SL_EOF;
    *out = sl_element_retain(d->els[it->pos++]);
    return 0;
}

static int from_elements_start(sl__sync_iter *u, bool resumed)
{
    int64_t n = ((const from_elements_ds *)u->base.ds)->n;
    return resumed ? sl__state_range(&u->base, "pos", ((from_elements_iter *)u)->pos, 0, n) : 0;
}

static int64_t from_elements_cardinality(const sl_dataset *ds)
{
    return ((const from_elements_ds *)ds)->n;
}

static bool from_elements_can_get(const sl_dataset *ds)
{
    (void)ds;
    return true;
}

static int from_elements_get(const sl_dataset *ds, int64_t index, sl_element **out)
{
    *out = sl_element_retain(((const from_elements_ds *)ds)->els[index]);
    return 0;
}

static void from_elements_destroy(sl_dataset *ds)
{
    from_elements_ds *d = (from_elements_ds *)ds;
    for (int64_t i = 0; i < d->n; i++)
        sl_element_release(d->els[i]);
    sl__free(d->els, (size_t)(d->n ? d->n : 1) * sizeof *d->els);
}

static const sl__field from_elements_state[] = {
    SL__FIELD_I64(from_elements_iter, pos, 0, INT64_MAX),
};

/* No fingerprint of its own: the elements' pipeline stands for them. */
static const sl__sync_def from_elements_def = {
    .node = {.kind = "from_elements", .make_iter = sl__sync_make,
             .cardinality = from_elements_cardinality, .can_get = from_elements_can_get,
             .get = from_elements_get, .destroy = from_elements_destroy},
    .iter = {SL__SYNC_ITER(from_elements_next)},
    .iter_size = sizeof(from_elements_iter),
    SL__SYNC_STATE(from_elements_state),
    .start = from_elements_start,
};

sl_dataset *sl__from_elements(sl_element **els, int64_t n, const sl_structure *structure)
{
    from_elements_ds *d = (from_elements_ds *)sl__dataset_new_source(&from_elements_def.node,
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
