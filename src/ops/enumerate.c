/* enumerate(start): each element as (start + its position, element), as
 * tf.data's enumerate pairs them; the element's tensors are shared. Random
 * access where the input has it. */
#include "../graph/sync.h"

typedef struct enumerate_ds {
    sl_dataset base;
    int64_t start;
} enumerate_ds;

typedef struct enumerate_iter {
    sl__sync_iter u;
    int64_t pos;
} enumerate_iter;

/* (start + position, the tensors of el), wrapping as int64 arithmetic
 * would not. */
static int64_t index_at(const sl_dataset *ds, int64_t pos)
{
    return (int64_t)((uint64_t)((const enumerate_ds *)ds)->start + (uint64_t)pos);
}

static int enumerate_next(sl__iter *base, sl_element **out)
{
    enumerate_iter *it = (enumerate_iter *)base;
    sl_element *el;
    int rc = sl__iter_next(it->u.in, &el);
    if (rc)
        return rc;
    *out = sl__element_i64_then(index_at(base->ds, it->pos), el, "enumerate");
    sl_element_release(el);
    if (!*out)
        return SL_ENOMEM;
    it->pos++;
    return 0;
}

static int64_t enumerate_cardinality(const sl_dataset *ds)
{
    return sl_dataset_cardinality(ds->inputs[0]);
}

static sl_structure *enumerate_structure(const sl_dataset *ds)
{
    const sl_structure *in = sl_dataset_structure(ds->inputs[0]);
    sl_structure *index = in ? sl_structure_parse("int64[]") : NULL;
    const sl_structure *items[2] = {index, in};
    sl_structure *s = index ? sl__structure_compose(2, items, NULL) : NULL;
    sl_structure_release(index);
    return s;
}

static bool enumerate_can_get(const sl_dataset *ds)
{
    return sl__dataset_can_get(ds->inputs[0]);
}

static int enumerate_get(const sl_dataset *ds, int64_t index, sl_element **out)
{
    const sl_dataset *in = ds->inputs[0];
    sl_element *el;
    int rc = in->ops->get(in, index, &el);
    if (rc)
        return rc;
    *out = sl__element_i64_then(index_at(ds, index), el, "enumerate");
    sl_element_release(el);
    return *out ? 0 : SL_ENOMEM;
}

static const sl__field enumerate_state[] = {SL__FIELD_I64(enumerate_iter, pos, 0, INT64_MAX)};
static const sl__field enumerate_params[] = {SL__PARAM(enumerate_ds, start)};

static const sl__sync_def enumerate_def = {
    .node = {.kind = "enumerate", SL__SYNC_NODE, .cardinality = enumerate_cardinality,
             .structure = enumerate_structure, .can_get = enumerate_can_get,
             .get = enumerate_get},
    .iter = {SL__SYNC_ITER(enumerate_next)},
    .iter_size = sizeof(enumerate_iter),
    SL__SYNC_STATE(enumerate_state),
    SL__SYNC_PARAMS(enumerate_params),
};

SL_API sl_dataset *sl_enumerate(sl_dataset *in, int64_t start)
{
    enumerate_ds *d = (enumerate_ds *)sl__dataset_new(&enumerate_def.node, sizeof *d, in);
    if (d)
        d->start = start;
    return d ? &d->base : NULL;
}
