/* take(n): at most n elements of the input; n = -1 takes all. Random access
 * when the input has it. */
#include "../graph/sync.h"

typedef struct take_ds {
    sl_dataset base;
    int64_t n;
} take_ds;

typedef struct take_iter {
    sl__sync_iter u;
    int64_t left; /* -1: unlimited */
} take_iter;

static int64_t take_cardinality(const sl_dataset *ds)
{
    int64_t n = ((const take_ds *)ds)->n, in = sl_dataset_cardinality(ds->inputs[0]);
    if (n < 0 || in == SL_UNKNOWN)
        return in;
    if (in == SL_INFINITE)
        return n;
    return in < n ? in : n;
}

static int take_next(sl__iter *base, sl_element **out)
{
    take_iter *it = (take_iter *)base;
    if (it->left == 0)
        return SL_EOF;
    int rc = sl__iter_next(it->u.in, out);
    if (rc == SL_EOF || (rc == 0 && it->left > 0 && --it->left == 0)) {
        /* done: stop the input now, which may be holding threads or files */
        sl__iter_free(it->u.in);
        it->u.in = NULL;
        it->left = 0;
    }
    return rc;
}

static int take_start(sl__sync_iter *u, bool resumed)
{
    take_iter *it = (take_iter *)u;
    int64_t n = ((const take_ds *)u->base.ds)->n;
    int rc = 0;
    if (!resumed)
        it->left = n;
    else
        rc = sl__state_range(&u->base, "left", it->left, n < 0 ? -1 : 0, n < 0 ? -1 : n);
    /* take(0) never pulls, so it does not start the input either */
    if (rc == 0 && it->left != 0)
        rc = sl__iter_make_input(&u->base, 0, u->base.epoch, &u->in);
    return rc;
}

static bool take_can_get(const sl_dataset *ds)
{
    return sl__dataset_can_get(ds->inputs[0]) && take_cardinality(ds) >= 0;
}

static int take_get(const sl_dataset *ds, int64_t index, sl_element **out)
{
    const sl_dataset *in = ds->inputs[0];
    return in->ops->get(in, index, out);
}

static const sl__field take_state[] = {SL__FIELD_I64(take_iter, left, -1, INT64_MAX)};
static const sl__field take_params[] = {SL__PARAM(take_ds, n)};

static const sl__sync_def take_def = {
    .node = {.kind = "take", SL__SYNC_NODE, .cardinality = take_cardinality,
             .structure = sl__structure_of_input,
             .can_get = take_can_get, .get = take_get},
    .iter = {SL__SYNC_ITER(take_next)},
    .iter_size = sizeof(take_iter),
    SL__SYNC_STATE(take_state),
    SL__SYNC_PARAMS(take_params),
    .flags = SL__SYNC_OWN_INPUT,
    .start = take_start,
};

static sl_dataset *build(sl_dataset *in, void *arg)
{
    int64_t n = *(const int64_t *)arg;
    take_ds *t = (take_ds *)sl__dataset_new(&take_def.node, sizeof *t, in);
    if (!t)
        return NULL;
    if (n < -1)
        return sl__dataset_fail(&t->base, SL_EINVAL, "take: count %lld is negative (-1 takes all)",
                                (long long)n);
    t->n = n;
    return &t->base;
}

/* Moves below nodes that read files, so dropped files are never read. */
SL_API sl_dataset *sl_take(sl_dataset *in, int64_t n)
{
    return sl__push_below(in, build, &n);
}
