/* take_while(fn): the input's elements up to the first for which fn
 * returns 0 (tf.data's take_while); that one and the rest are not
 * passed, and the input is let go at once. fn runs on the pulling thread,
 * as filter's; a negative return is an element error. */
#include "../graph/sync.h"

typedef struct take_while_ds {
    sl_dataset base;
    sl_predicate_fn fn;
    void *user;
} take_while_ds;

typedef struct take_while_iter {
    sl__sync_iter u;
    uint64_t seed;
    int64_t index; /* the callback's: input position */
    bool done;
} take_while_iter;

static int test(take_while_iter *it, const sl_element *el)
{
    const take_while_ds *d = (const take_while_ds *)it->u.base.ds;
    return sl__predicate_call(&it->u.base, d->fn, d->user, it->seed, it->index++, el);
}

static int take_while_next(sl__iter *base, sl_element **out)
{
    take_while_iter *it = (take_while_iter *)base;
    while (!it->done) {
        sl_element *el;
        int rc = sl__iter_next(it->u.in, &el);
        if (rc == SL_EOF)
            break;
        if (rc)
            return rc;
        int r = test(it, el);
        if (r == 1) {
            base->ok_count++;
            *out = el;
            return 0;
        }
        sl_element_release(el);
        if (r == 0)
            break;
        if ((rc = sl__policy(base, r)) != 0)
            return rc;
    }
    if (!it->done) {
        it->done = true;
        sl__sync_drop_input(&it->u, 0); /* it may hold threads or files */
    }
    return SL_EOF;
}

static int take_while_start(sl__sync_iter *u, bool resumed)
{
    take_while_iter *it = (take_while_iter *)u;
    it->seed = sl__node_seed(&u->base, -1);
    (void)resumed;
    return it->done ? 0 : sl__iter_make_input(&u->base, 0, u->base.epoch, &u->in);
}

static int64_t take_while_cardinality(const sl_dataset *ds)
{
    return sl_dataset_cardinality(ds->inputs[0]) == 0 ? 0 : SL_UNKNOWN;
}

static const sl__field take_while_state[] = {
    SL__FIELD_I64(take_while_iter, index, 0, INT64_MAX),
    SL__FIELD_BOOL(take_while_iter, done),
};

/* No parameters to hash: the name stands for the predicate (filter's
 * rule). */
static const sl__sync_def take_while_def = {
    .node = {.kind = "take_while", SL__SYNC_NODE, .cardinality = take_while_cardinality,
             .structure = sl__structure_of_input},
    .iter = {SL__SYNC_ITER(take_while_next)},
    .iter_size = sizeof(take_while_iter),
    SL__SYNC_STATE(take_while_state),
    .flags = SL__SYNC_OWN_INPUT,
    .start = take_while_start,
};

SL_API sl_dataset *sl_take_while(sl_dataset *in, const char *name, sl_predicate_fn fn,
                                 void *user)
{
    take_while_ds *d = (take_while_ds *)sl__dataset_new(&take_while_def.node, sizeof *d, in);
    if (!d)
        return NULL;
    if (!fn)
        return sl__dataset_fail(&d->base, SL_EINVAL, "take_while: NULL predicate");
    if (sl__dataset_set_name(&d->base, name) < 0)
        return sl__dataset_fail(&d->base, SL_ENOMEM, "take_while: out of memory");
    d->fn = fn;
    d->user = user;
    return &d->base;
}
