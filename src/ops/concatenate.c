/* concatenate(a, b): the elements of a, then those of b (tf.data's
 * concatenate). Their structures must fit one dataset's; b's iterator is
 * made when a ends, so b's files are not opened while a runs. Random access
 * where both inputs have it. */
#include "../graph/sync.h"

typedef struct concatenate_iter {
    sl__sync_iter u;
    int64_t which; /* the input being read: 0, 1, or 2 at the end */
} concatenate_iter;

static int64_t concatenate_cardinality(const sl_dataset *ds)
{
    int64_t a = sl_dataset_cardinality(ds->inputs[0]), b = sl_dataset_cardinality(ds->inputs[1]);
    if (a == SL_INFINITE || b == SL_INFINITE)
        return SL_INFINITE;
    if (a < 0 || b < 0)
        return SL_UNKNOWN;
    return a > INT64_MAX - b ? SL_UNKNOWN : a + b;
}

static int open_input(concatenate_iter *it)
{
    sl__sync_iter *u = &it->u;
    return it->which < 2 ? sl__iter_make_input(&u->base, (int)it->which, u->base.epoch,
                                               &u->ins[it->which])
                         : 0;
}

static int concatenate_next(sl__iter *base, sl_element **out)
{
    concatenate_iter *it = (concatenate_iter *)base;
    while (it->which < 2) {
        int rc = sl__iter_next(it->u.ins[it->which], out);
        if (rc != SL_EOF)
            return rc;
        sl__sync_drop_input(&it->u, (int)it->which);
        it->which++;
        if ((rc = open_input(it)) < 0)
            return rc;
    }
    return SL_EOF;
}

static int concatenate_start(sl__sync_iter *u, bool resumed)
{
    (void)resumed;
    return open_input((concatenate_iter *)u);
}

static sl_structure *concatenate_structure(const sl_dataset *ds)
{
    return sl__structure_unify(sl_dataset_structure(ds->inputs[0]),
                               sl_dataset_structure(ds->inputs[1]));
}

static bool concatenate_can_get(const sl_dataset *ds)
{
    return sl__dataset_can_get(ds->inputs[0]) && sl__dataset_can_get(ds->inputs[1]) &&
           concatenate_cardinality(ds) >= 0;
}

static int concatenate_get(const sl_dataset *ds, int64_t index, sl_element **out)
{
    const sl_dataset *a = ds->inputs[0], *b = ds->inputs[1];
    int64_t na = sl_dataset_cardinality(a);
    return index < na ? a->ops->get(a, index, out) : b->ops->get(b, index - na, out);
}

static const sl__field concatenate_state[] = {
    SL__FIELD_I64(concatenate_iter, which, 0, 2),
};

static const sl__sync_def concatenate_def = {
    .node = {.kind = "concatenate", SL__SYNC_NODE, .cardinality = concatenate_cardinality,
             .structure = concatenate_structure, .can_get = concatenate_can_get,
             .get = concatenate_get},
    .iter = {SL__SYNC_ITER(concatenate_next)},
    .iter_size = sizeof(concatenate_iter),
    SL__SYNC_STATE(concatenate_state),
    .flags = SL__SYNC_OWN_INPUT,
    .start = concatenate_start,
};

SL_API sl_dataset *sl_concatenate(sl_dataset *a, sl_dataset *b)
{
    sl_dataset *in[2] = {a, b};
    sl_dataset *ds = sl__dataset_new_n(&concatenate_def.node, sizeof(sl_dataset), in, 2);
    if (!ds)
        return NULL;
    const sl_structure *sa = sl_dataset_structure(a), *sb = sl_dataset_structure(b);
    if (sa && sb) { /* checked now: elements that cannot be one dataset's */
        sl_structure *s = sl__structure_unify(sa, sb);
        if (!s)
            return sl__dataset_fail(ds, sl_last_error_code(), "concatenate: %s",
                                    sl__error_msg());
        sl_structure_release(s);
    }
    return ds;
}
