/* assert_cardinality(n): the input's elements, as they are, with the
 * cardinality n stated (tf.data's assert_cardinality). Streamed formats
 * cannot know their size; told it, what follows can plan with it: a
 * batch that drops its remainder stops decoding at the last full batch,
 * distribute gives every rank the same steps, len() works. Each pass is
 * checked as it runs: an input that ends early is an error naming both
 * counts, and so is an (n+1)th element if something pulls it (a shuffle
 * does; a drop-remainder batch, take and distribute stop at n). */
#include <stdio.h>
#include "../graph/node.h"

typedef struct assert_ds {
    sl_dataset base;
    int64_t n; /* or SL_INFINITE */
} assert_ds;

typedef struct assert_iter {
    sl__iter base;
    sl__iter *in;
    int64_t seen; /* elements of this pass so far */
} assert_iter;

static int64_t assert_card(const sl_dataset *ds)
{
    return ((const assert_ds *)ds)->n;
}

static int mismatch(const assert_iter *it, const char *how)
{
    int64_t n = ((const assert_ds *)it->base.ds)->n;
    if (n == SL_INFINITE)
        return sl__set_error(SL_ECORRUPT, "assert_cardinality: the input was expected to be "
                             "infinite but ended after %lld elements", (long long)it->seen);
    return sl__set_error(SL_ECORRUPT, "assert_cardinality: the input was expected to hold %lld "
                         "elements but %s %lld", (long long)n, how, (long long)it->seen);
}

static int assert_next(sl__iter *base, sl_element **out)
{
    assert_iter *it = (assert_iter *)base;
    int64_t n = ((const assert_ds *)base->ds)->n;
    if (n != SL_INFINITE && it->seen > n) /* went past n: stays an error */
        return mismatch(it, "gave at least");
    if (!it->in) /* ended: as it ended */
        return it->seen == n ? SL_EOF : mismatch(it, "ended after");
    int rc = sl__iter_next(it->in, out);
    if (rc == SL_EOF) {
        /* stop the input now, which may hold threads or files */
        sl__iter_free(it->in);
        it->in = NULL;
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

static void assert_destroy(sl__iter *base)
{
    sl__iter_free(((assert_iter *)base)->in);
}

static int assert_save(sl__iter *base, sl__bytes *w)
{
    assert_iter *it = (assert_iter *)base;
    return sl__save_sync(w, base, 1, &it->seen, it->in);
}

static const sl__iter_ops assert_iter_ops = {
    .next = assert_next,
    .destroy = assert_destroy,
    .save = assert_save,
};

static int assert_make(const sl_dataset *ds, sl__tree *tree, uint64_t key, int64_t epoch,
                       sl__iter **out)
{
    assert_iter *it = sl__iter_alloc(&assert_iter_ops, sizeof *it, ds, tree, key, epoch);
    if (!it)
        return SL_ENOMEM;
    int64_t n = ((const assert_ds *)ds)->n;
    int rc = sl__iter_restored(&it->base, 1, &it->seen);
    if (rc > 0)
        rc = sl__state_range(&it->base, "seen", it->seen, 0, n == SL_INFINITE ? INT64_MAX : n);
    if (rc == 0)
        rc = sl__iter_make_input(&it->base, 0, epoch, &it->in);
    if (rc < 0) {
        sl__iter_free(&it->base);
        return rc;
    }
    *out = &it->base;
    return 0;
}

static uint64_t assert_fp(const sl_dataset *ds, uint64_t h)
{
    return sl__hash_u64(h, (uint64_t)((const assert_ds *)ds)->n);
}

/* Random access where the input has it with the same known size. */
static bool assert_can_get(const sl_dataset *ds)
{
    return sl__dataset_can_get(ds->inputs[0]) &&
           sl_dataset_cardinality(ds->inputs[0]) == assert_card(ds);
}

static int assert_get(const sl_dataset *ds, int64_t index, sl_element **out)
{
    const sl_dataset *in = ds->inputs[0];
    return in->ops->get(in, index, out);
}

static const sl__node_ops assert_ops = {
    .kind = "assert_cardinality",
    .make_iter = assert_make,
    .cardinality = assert_card,
    .fingerprint = assert_fp,
    .can_get = assert_can_get,
    .get = assert_get,
};

SL_API sl_dataset *sl_assert_cardinality(sl_dataset *in, int64_t n)
{
    assert_ds *a = (assert_ds *)sl__dataset_new(&assert_ops, sizeof *a, in);
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
