/* range(start, stop, step): scalar int64 elements. Random access. */
#include "../graph/sync.h"

typedef struct range_ds {
    sl_dataset base;
    int64_t start, stop, step;
} range_ds;

static int64_t range_cardinality(const sl_dataset *ds)
{
    const range_ds *r = (const range_ds *)ds;
    if ((r->step > 0 && r->stop <= r->start) || (r->step < 0 && r->stop >= r->start))
        return 0;
    /* in unsigned arithmetic the span cannot overflow */
    uint64_t span = r->step > 0 ? (uint64_t)r->stop - (uint64_t)r->start
                                : (uint64_t)r->start - (uint64_t)r->stop;
    uint64_t s = r->step > 0 ? (uint64_t)r->step : -(uint64_t)r->step;
    return (int64_t)(span / s + (span % s != 0));
}

static bool range_can_get(const sl_dataset *ds)
{
    (void)ds;
    return true;
}

static int range_get(const sl_dataset *ds, int64_t index, sl_element **out)
{
    const range_ds *r = (const range_ds *)ds;
    int64_t v = (int64_t)((uint64_t)r->start + (uint64_t)index * (uint64_t)r->step);
    return (*out = sl__element_i64(v)) ? 0 : SL_ENOMEM;
}

static const sl__field range_params[] = {
    SL__PARAM(range_ds, start), SL__PARAM(range_ds, stop), SL__PARAM(range_ds, step)};

static const sl__sync_def range_def = {
    .node = {.kind = "range", SL__SYNC_NODE, .cardinality = range_cardinality,
             .can_get = range_can_get, .get = range_get},
    SL__INDEXED_SOURCE(sl__indexed_start),
    SL__SYNC_PARAMS(range_params),
};

SL_API sl_dataset *sl_range(int64_t start, int64_t stop, int64_t step)
{
    if (step == 0) {
        sl__set_error(SL_EINVAL, "range: step must not be 0");
        return NULL;
    }
    range_ds *r = (range_ds *)sl__dataset_new_source(&range_def.node, sizeof *r);
    if (!r)
        return NULL;
    r->start = start;
    r->stop = stop;
    r->step = step;
    return sl__dataset_structured(&r->base, sl_structure_parse("int64[]"));
}
