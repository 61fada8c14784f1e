/* assert_cardinality(n): the input's elements, as they are, with the
 * cardinality n stated (tf.data's assert_cardinality). Streamed formats
 * cannot know their size; told it, what follows can plan with it: a
 * batch that drops its remainder stops decoding at the last full batch,
 * distribute gives every rank the same steps, len() works. Each pass is
 * checked as it runs: an input that ends early is an error naming both
 * counts, and so is an (n+1)th element if something pulls it (a shuffle
 * does; a drop-remainder batch, take and distribute stop at n). */
#include <stdio.h>
#include "../graph/sync.h"

typedef struct assert_cardinality_ds {
    sl_dataset base;
    int64_t n; /* or SL_INFINITE */
} assert_cardinality_ds;

typedef struct assert_cardinality_iter {
    sl__sync_iter u;
    int64_t seen; /* elements of this pass so far */
} assert_cardinality_iter;

static int64_t assert_cardinality_cardinality(const sl_dataset *ds)
{
    return ((const assert_cardinality_ds *)ds)->n;
}

static int mismatch(const assert_cardinality_iter *it, const char *how)
{
    int64_t n = ((const assert_cardinality_ds *)it->u.base.ds)->n;
    if (n == SL_INFINITE)
        return sl__set_error(SL_ECORRUPT, "assert_cardinality: the input was expected to be "
                             "infinite but ended after %lld elements", (long long)it->seen);
    return sl__set_error(SL_ECORRUPT, "assert_cardinality: the input was expected to hold %lld "
                         "elements but %s %lld", (long long)n, how, (long long)it->seen);
}

static int assert_cardinality_next(sl__iter *base, sl_element **out)
{
    assert_cardinality_iter *it = (assert_cardinality_iter *)base;
    int64_t n = ((const assert_cardinality_ds *)base->ds)->n;
    if (n != SL_INFINITE && it->seen > n) /* went past n: stays an error */
        return mismatch(it, "gave at least");
    if (!it->u.in) /* ended: as it ended */
        return it->seen == n ? SL_EOF : mismatch(it, "ended after");
    int rc = sl__iter_next(it->u.in, out);
    if (rc == SL_EOF) {
        /* stop the input now, which may hold threads or files */
        sl__iter_free(it->u.in);
        it->u.in = NULL;
        return it->seen == n ? SL_EOF : mismatch(it, "ended after");
    }
    if (rc != 0)
        return rc;
    if (n != SL_INFINITE && it->seen == n) {
        sl_element_release(*out);
        *out = NULL;
        it->seen++;
        return mismatch(it, "gave at least");
    }
    it->seen++;
    return 0;
}

static int assert_cardinality_start(sl__sync_iter *u, bool resumed)
{
    int64_t n = ((const assert_cardinality_ds *)u->base.ds)->n;
    int64_t seen = ((assert_cardinality_iter *)u)->seen;
    return resumed ? sl__state_range(&u->base, "seen", seen, 0, n == SL_INFINITE ? INT64_MAX : n)
                   : 0;
}

/* Random access where the input has it with the same known size. */
static bool assert_cardinality_can_get(const sl_dataset *ds)
{
    return sl__dataset_can_get(ds->inputs[0]) &&
           sl_dataset_cardinality(ds->inputs[0]) == assert_cardinality_cardinality(ds);
}

static int assert_cardinality_get(const sl_dataset *ds, int64_t index, sl_element **out)
{
    const sl_dataset *in = ds->inputs[0];
    return in->ops->get(in, index, out);
}

static const sl__field assert_cardinality_state[] = {
    SL__FIELD_I64(assert_cardinality_iter, seen, 0, INT64_MAX),
};
static const sl__field assert_cardinality_params[] = {SL__PARAM(assert_cardinality_ds, n)};

static const sl__sync_def assert_cardinality_def = {
    .node = {.kind = "assert_cardinality", SL__SYNC_NODE,
             .cardinality = assert_cardinality_cardinality,
             .structure = sl__structure_of_input,
             .can_get = assert_cardinality_can_get, .get = assert_cardinality_get},
    .iter = {SL__SYNC_ITER(assert_cardinality_next)},
    .iter_size = sizeof(assert_cardinality_iter),
    SL__SYNC_STATE(assert_cardinality_state),
    SL__SYNC_PARAMS(assert_cardinality_params),
    .start = assert_cardinality_start,
};

SL_API sl_dataset *sl_assert_cardinality(sl_dataset *in, int64_t n)
{
    assert_cardinality_ds *a =
        (assert_cardinality_ds *)sl__dataset_new(&assert_cardinality_def.node, sizeof *a, in);
    if (!a)
        return NULL;
    if (n < 0 && n != SL_INFINITE)
        return sl__dataset_fail(&a->base, SL_EINVAL, "assert_cardinality: %lld is not a size "
                                "(a count >= 0, or SL_INFINITE)", (long long)n);
    a->n = n;
    /* a size the input already knows is checked now, not a pass later */
    int64_t known = sl_dataset_cardinality(a->base.inputs[0]);
    if (known == SL_INFINITE && n != SL_INFINITE)
        return sl__dataset_fail(&a->base, SL_EINVAL, "assert_cardinality: the input is "
                                "infinite, not %lld elements", (long long)n);
    if (known >= 0 && n == SL_INFINITE)
        return sl__dataset_fail(&a->base, SL_EINVAL, "assert_cardinality: the input has %lld "
                                "elements, not infinitely many", (long long)known);
    if (known >= 0 && known != n)
        return sl__dataset_fail(&a->base, SL_EINVAL, "assert_cardinality: the input has %lld "
                                "elements, not %lld", (long long)known, (long long)n);
    return &a->base;
}
