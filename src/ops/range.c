/* range(start, stop, step): scalar int64 elements. Random access. */
#include "../graph/node.h"

typedef struct range_ds {
    sl_dataset base;
    int64_t start, stop, step;
} range_ds;

typedef struct range_iter {
    sl__iter base;
    int64_t next, left;
} range_iter;

static int64_t range_card(const sl_dataset *ds)
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

static int make_scalar(int64_t v, sl_element **out)
{
    return (*out = sl__element_i64(v)) ? 0 : SL_ENOMEM;
}

static int range_next(sl__iter *base, sl_element **out)
{
    range_iter *it = (range_iter *)base;
    if (it->left <= 0)
        return SL_EOF;
    int rc = make_scalar(it->next, out);
    if (rc)
        return rc;
    it->next = (int64_t)((uint64_t)it->next + (uint64_t)((const range_ds *)base->ds)->step);
    it->left--;
    return 0;
}

static int range_save(sl__iter *base, sl__bytes *w)
{
    range_iter *it = (range_iter *)base;
    return sl__save_pos(w, base, range_card(base->ds) - it->left);
}

static const sl__iter_ops range_iter_ops = {
    .next = range_next,
    .save = range_save,
};

static int range_make(const sl_dataset *ds, sl__tree *tree, uint64_t key, int64_t epoch,
                      sl__iter **out)
{
    range_iter *it = sl__iter_alloc(&range_iter_ops, sizeof *it, ds, tree, key, epoch);
    if (!it)
        return SL_ENOMEM;
    const range_ds *r = (const range_ds *)ds;
    int64_t card = range_card(ds), pos = 0;
    int rc = sl__restored_pos(&it->base, card, &pos);
    if (rc < 0) {
        sl__iter_free(&it->base);
        return rc;
    }
    it->next = (int64_t)((uint64_t)r->start + (uint64_t)pos * (uint64_t)r->step);
    it->left = card - pos;
    *out = &it->base;
    return 0;
}

static uint64_t range_fp(const sl_dataset *ds, uint64_t h)
{
    const range_ds *r = (const range_ds *)ds;
    return sl__hash_u64(sl__hash_u64(sl__hash_u64(h, (uint64_t)r->start), (uint64_t)r->stop),
                        (uint64_t)r->step);
}

static bool range_can_get(const sl_dataset *ds)
{
    (void)ds;
    return true;
}

static int range_get(const sl_dataset *ds, int64_t index, sl_element **out)
{
    const range_ds *r = (const range_ds *)ds;
    return make_scalar((int64_t)((uint64_t)r->start + (uint64_t)index * (uint64_t)r->step), out);
}

static const sl__node_ops range_ops = {
    .kind = "range",
    .make_iter = range_make,
    .cardinality = range_card,
    .fingerprint = range_fp,
    .can_get = range_can_get,
    .get = range_get,
};

SL_API sl_dataset *sl_range(int64_t start, int64_t stop, int64_t step)
{
    if (step == 0) {
        sl__set_error(SL_EINVAL, "range: step must not be 0");
        return NULL;
    }
    range_ds *r = (range_ds *)sl__dataset_new_source(&range_ops, sizeof *r);
    if (!r)
        return NULL;
    r->start = start;
    r->stop = stop;
    r->step = step;
    return sl__dataset_structured(&r->base, sl_structure_parse("int64[]"));
}
