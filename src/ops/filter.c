/* filter(name, fn): keeps the input elements for which fn returns 1. Runs
 * fn on the pulling thread; a negative return is an element error that goes
 * through the iterator's error policy. */
#include "../graph/sync.h"

typedef struct filter_ds {
    sl_dataset base;
    sl_predicate_fn fn;
    void *user;
} filter_ds;

typedef struct filter_iter {
    sl__sync_iter u;
    uint64_t seed;
    int64_t index; /* input position in this pass: the callback's index */
    bool done;
} filter_iter;

static int64_t filter_cardinality(const sl_dataset *ds)
{
    return sl_dataset_cardinality(ds->inputs[0]) == 0 ? 0 : SL_UNKNOWN;
}

/* 1 keep, 0 drop, or a negative code with the message set and prefixed. */
static int test_element(filter_iter *it, const sl_element *el)
{
    const filter_ds *f = (const filter_ds *)it->u.base.ds;
    return sl__predicate_call(&it->u.base, f->fn, f->user, it->seed, it->index++, el);
}

static int filter_next(sl__iter *base, sl_element **out)
{
    filter_iter *it = (filter_iter *)base;
    if (it->done)
        return SL_EOF;
    for (;;) {
        sl_element *el;
        int rc = sl__iter_next(it->u.in, &el);
        if (rc == SL_EOF)
            it->done = true;
        if (rc)
            return rc;
        int r = test_element(it, el);
        if (r == 1) {
            base->ok_count++;
            *out = el;
            return 0;
        }
        sl_element_release(el);
        if (r < 0 && (rc = sl__policy(base, r)) != 0)
            return rc;
    }
}

static int filter_start(sl__sync_iter *u, bool resumed)
{
    (void)resumed;
    ((filter_iter *)u)->seed = sl__node_seed(&u->base, -1);
    return 0;
}

static const sl__field filter_state[] = {
    SL__FIELD_I64(filter_iter, index, 0, INT64_MAX),
    SL__FIELD_BOOL(filter_iter, done),
};

/* No parameters to hash: the name stands for the predicate (a function
 * address changes from run to run, so it must not be hashed). */
static const sl__sync_def filter_def = {
    .node = {.kind = "filter", SL__SYNC_NODE, .cardinality = filter_cardinality,
             .structure = sl__structure_of_input},
    .iter = {SL__SYNC_ITER(filter_next)},
    .iter_size = sizeof(filter_iter),
    SL__SYNC_STATE(filter_state),
    .start = filter_start,
};
SL_API sl_dataset *sl_filter(sl_dataset *in, const char *name, sl_predicate_fn fn, void *user)
{
    filter_ds *f = (filter_ds *)sl__dataset_new(&filter_def.node, sizeof *f, in);
    if (!f)
        return NULL;
    if (!fn)
        return sl__dataset_fail(&f->base, SL_EINVAL, "filter: NULL predicate");
    if (sl__dataset_set_name(&f->base, name) < 0)
        return sl__dataset_fail(&f->base, SL_ENOMEM, "filter: out of memory");
    f->fn = fn;
    f->user = user;
    return &f->base;
}
