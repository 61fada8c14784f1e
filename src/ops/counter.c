/* counter(start, step): start, start + step, ... without end (tf.data's
 * Dataset.counter); scalar int64, wrapping as int64 arithmetic would not
 * (the sum is taken modulo 2^64). Random access. */
#include "../graph/sync.h"

typedef struct counter_ds {
    sl_dataset base;
    int64_t start, step;
} counter_ds;

typedef struct counter_iter {
    sl__sync_iter u;
    int64_t pos;
} counter_iter;

static int64_t value(const sl_dataset *ds, int64_t pos)
{
    const counter_ds *c = (const counter_ds *)ds;
    return (int64_t)((uint64_t)c->start + (uint64_t)pos * (uint64_t)c->step);
}

static int counter_next(sl__iter *base, sl_element **out)
{
    counter_iter *it = (counter_iter *)base;
    if (!(*out = sl__element_i64(value(base->ds, it->pos))))
        return SL_ENOMEM;
    it->pos++;
    return 0;
}

static int64_t counter_cardinality(const sl_dataset *ds)
{
    (void)ds;
    return SL_INFINITE;
}

static bool counter_can_get(const sl_dataset *ds)
{
    (void)ds;
    return true;
}

static int counter_get(const sl_dataset *ds, int64_t index, sl_element **out)
{
    return (*out = sl__element_i64(value(ds, index))) ? 0 : SL_ENOMEM;
}

static const sl__field counter_state[] = {SL__FIELD_I64(counter_iter, pos, 0, INT64_MAX)};
static const sl__field counter_params[] = {SL__PARAM(counter_ds, start), SL__PARAM(counter_ds, step)};

static const sl__sync_def counter_def = {
    .node = {.kind = "counter", SL__SYNC_NODE, .cardinality = counter_cardinality,
             .can_get = counter_can_get, .get = counter_get},
    .iter = {SL__SYNC_ITER(counter_next)},
    .iter_size = sizeof(counter_iter),
    SL__SYNC_STATE(counter_state),
    SL__SYNC_PARAMS(counter_params),
};

SL_API sl_dataset *sl_counter(int64_t start, int64_t step)
{
    counter_ds *c = (counter_ds *)sl__dataset_new_source(&counter_def.node, sizeof *c);
    if (!c)
        return NULL;
    c->start = start;
    c->step = step;
    return sl__dataset_structured(&c->base, sl_structure_parse("int64[]"));
}
