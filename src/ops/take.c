/* take(n): at most n elements of the input; n = -1 takes all. Random access
 * when the input has it. */
#include "../graph/node.h"

typedef struct take_ds {
    sl_dataset base;
    int64_t n;
} take_ds;

typedef struct take_iter {
    sl__iter base;
    sl__iter *in;
    int64_t left; /* -1: unlimited */
} take_iter;

static int64_t take_card(const sl_dataset *ds)
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
    int rc = sl__iter_next(it->in, out);
    if (rc == SL_EOF || (rc == 0 && it->left > 0 && --it->left == 0)) {
        /* done: stop the input now, which may be holding threads or files */
        sl__iter_free(it->in);
        it->in = NULL;
        it->left = 0;
    }
    return rc;
}

static void take_destroy(sl__iter *base)
{
    sl__iter_free(((take_iter *)base)->in);
}

static int take_save(sl__iter *base, sl__bytes *w)
{
    take_iter *it = (take_iter *)base;
    return sl__save_sync(w, base, 1, &it->left, it->in);
}

static const sl__iter_ops take_iter_ops = {
    .next = take_next,
    .destroy = take_destroy,
    .save = take_save,
};

static int take_make(const sl_dataset *ds, sl__tree *tree, uint64_t key, int64_t epoch,
                     sl__iter **out)
{
    take_iter *it = sl__iter_alloc(&take_iter_ops, sizeof *it, ds, tree, key, epoch);
    if (!it)
        return SL_ENOMEM;
    int64_t n = ((const take_ds *)ds)->n;
    it->left = n;
    int rc = sl__iter_restored(&it->base, 1, &it->left);
    if (rc > 0)
        rc = sl__state_range(&it->base, "left", it->left, n < 0 ? -1 : 0, n < 0 ? -1 : n);
    /* take(0) never pulls, so it does not start the input either */
    if (rc == 0 && it->left != 0)
        rc = sl__iter_make_input(&it->base, 0, epoch, &it->in);
    if (rc < 0) {
        sl__iter_free(&it->base);
        return rc;
    }
    *out = &it->base;
    return 0;
}

static uint64_t take_fp(const sl_dataset *ds, uint64_t h)
{
    return sl__hash_u64(h, (uint64_t)((const take_ds *)ds)->n);
}

static bool take_can_get(const sl_dataset *ds)
{
    return sl__dataset_can_get(ds->inputs[0]) && take_card(ds) >= 0;
}

static int take_get(const sl_dataset *ds, int64_t index, sl_element **out)
{
    const sl_dataset *in = ds->inputs[0];
    return in->ops->get(in, index, out);
}

static const sl__node_ops take_ops = {
    .kind = "take",
    .make_iter = take_make,
    .cardinality = take_card,
    .fingerprint = take_fp,
    .can_get = take_can_get,
    .get = take_get,
};

static sl_dataset *build(sl_dataset *in, int64_t n)
{
    take_ds *t = (take_ds *)sl__dataset_new(&take_ops, sizeof *t, in);
    if (!t)
        return NULL;
    if (n < -1)
        return sl__dataset_fail(&t->base, SL_EINVAL, "take: count %lld is negative (-1 takes all)",
                                (long long)n);
    t->n = n;
    return &t->base;
}

typedef struct take_args {
    int64_t n;
} take_args;

static sl_dataset *apply(sl_dataset *x, void *arg)
{
    const take_args *a = arg;
    return build(x, a->n);
}

/* Moves below nodes that read files, so dropped files are never read. */
SL_API sl_dataset *sl_take(sl_dataset *in, int64_t n)
{
    take_args a = {n};
    return sl__push_below(in, apply, &a);
}
