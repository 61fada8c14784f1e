/* skip(n): drops the first n elements of the input; n = -1 drops all.
 * Random access when the input has it. */
#include "../graph/sync.h"

typedef struct skip_ds {
    sl_dataset base;
    int64_t n;
} skip_ds;

typedef struct skip_iter {
    sl__sync_iter u;
    int64_t to_skip; /* -1: everything */
    bool done;
} skip_iter;

static int64_t skip_cardinality(const sl_dataset *ds)
{
    int64_t n = ((const skip_ds *)ds)->n, in = sl_dataset_cardinality(ds->inputs[0]);
    /* as tf.data: skipping from an endless input leaves an endless input */
    if (in == SL_INFINITE || in == SL_UNKNOWN)
        return in;
    if (n < 0 || n >= in)
        return 0;
    return in - n;
}

static int skip_next(sl__iter *base, sl_element **out)
{
    skip_iter *it = (skip_iter *)base;
    if (it->done)
        return SL_EOF;
    int rc;
    while ((rc = sl__iter_next(it->u.in, out)) == 0 && it->to_skip != 0) {
        sl_element_release(*out);
        *out = NULL;
        if (it->to_skip > 0)
            it->to_skip--;
    }
    if (rc == SL_EOF)
        it->done = true;
    return rc;
}

static int skip_start(sl__sync_iter *u, bool resumed)
{
    skip_iter *it = (skip_iter *)u;
    int64_t n = ((const skip_ds *)u->base.ds)->n;
    if (!resumed) {
        it->to_skip = n;
        return 0;
    }
    return sl__state_range(&u->base, "to_skip", it->to_skip, n < 0 ? -1 : 0, n < 0 ? -1 : n);
}

static bool skip_can_get(const sl_dataset *ds)
{
    return sl__dataset_can_get(ds->inputs[0]) && skip_cardinality(ds) >= 0;
}

static int skip_get(const sl_dataset *ds, int64_t index, sl_element **out)
{
    /* index < card means n >= 0 here: skip(-1) has no elements to get */
    const sl_dataset *in = ds->inputs[0];
    return in->ops->get(in, index + ((const skip_ds *)ds)->n, out);
}

static const sl__field skip_state[] = {
    SL__FIELD_I64(skip_iter, to_skip, -1, INT64_MAX),
    SL__FIELD_BOOL(skip_iter, done),
};
static const sl__field skip_params[] = {SL__PARAM(skip_ds, n)};

static const sl__sync_def skip_def = {
    .node = {.kind = "skip", SL__SYNC_NODE, .cardinality = skip_cardinality,
             .structure = sl__structure_of_input,
             .can_get = skip_can_get, .get = skip_get},
    .iter = {SL__SYNC_ITER(skip_next)},
    .iter_size = sizeof(skip_iter),
    SL__SYNC_STATE(skip_state),
    SL__SYNC_PARAMS(skip_params),
    .start = skip_start,
};

static sl_dataset *build(sl_dataset *in, void *arg)
{
    int64_t n = *(const int64_t *)arg;
    skip_ds *s = (skip_ds *)sl__dataset_new(&skip_def.node, sizeof *s, in);
    if (!s)
        return NULL;
    if (n < -1)
        return sl__dataset_fail(&s->base, SL_EINVAL, "skip: count %lld is negative (-1 skips all)",
                                (long long)n);
    s->n = n;
    return &s->base;
}

/* Moves below nodes that read files, so dropped files are never read. */
SL_API sl_dataset *sl_skip(sl_dataset *in, int64_t n)
{
    return sl__push_below(in, build, &n);
}
