/* skip(n): drops the first n elements of the input; n = -1 drops all.
 * Random access when the input has it. */
#include "../graph/node.h"

typedef struct skip_ds {
    sl_dataset base;
    int64_t n;
} skip_ds;

typedef struct skip_iter {
    sl__iter base;
    sl__iter *in;
    int64_t to_skip; /* -1: everything */
    bool done;
} skip_iter;

static int64_t skip_card(const sl_dataset *ds)
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
    while ((rc = sl__iter_next(it->in, out)) == 0 && it->to_skip != 0) {
        sl_element_release(*out);
        *out = NULL;
        if (it->to_skip > 0)
            it->to_skip--;
    }
    if (rc == SL_EOF)
        it->done = true;
    return rc;
}

static void skip_destroy(sl__iter *base)
{
    sl__iter_free(((skip_iter *)base)->in);
}

static int skip_save(sl__iter *base, sl__bytes *w)
{
    skip_iter *it = (skip_iter *)base;
    int64_t f[2] = {it->to_skip, it->done};
    return sl__save_sync(w, base, 2, f, it->in);
}

static const sl__iter_ops skip_iter_ops = {
    .next = skip_next,
    .destroy = skip_destroy,
    .save = skip_save,
};

static int skip_make(const sl_dataset *ds, sl__tree *tree, uint64_t key, int64_t epoch,
                     sl__iter **out)
{
    skip_iter *it = sl__iter_alloc(&skip_iter_ops, sizeof *it, ds, tree, key, epoch);
    if (!it)
        return SL_ENOMEM;
    int64_t n = ((const skip_ds *)ds)->n, f[2];
    it->to_skip = n;
    int rc = sl__iter_restored(&it->base, 2, f);
    if (rc > 0) {
        it->to_skip = f[0];
        it->done = f[1] != 0;
        rc = sl__state_range(&it->base, "to_skip", f[0], n < 0 ? -1 : 0, n < 0 ? -1 : n);
    }
    if (rc == 0)
        rc = sl__iter_make_input(&it->base, 0, epoch, &it->in);
    if (rc < 0) {
        sl__iter_free(&it->base);
        return rc;
    }
    *out = &it->base;
    return 0;
}

static uint64_t skip_fp(const sl_dataset *ds, uint64_t h)
{
    return sl__hash_u64(h, (uint64_t)((const skip_ds *)ds)->n);
}

static bool skip_can_get(const sl_dataset *ds)
{
    return sl__dataset_can_get(ds->inputs[0]) && skip_card(ds) >= 0;
}

static int skip_get(const sl_dataset *ds, int64_t index, sl_element **out)
{
    /* index < card means n >= 0 here: skip(-1) has no elements to get */
    const sl_dataset *in = ds->inputs[0];
    return in->ops->get(in, index + ((const skip_ds *)ds)->n, out);
}

static const sl__node_ops skip_ops = {
    .kind = "skip",
    .make_iter = skip_make,
    .cardinality = skip_card,
    .fingerprint = skip_fp,
    .can_get = skip_can_get,
    .get = skip_get,
};

static sl_dataset *build(sl_dataset *in, int64_t n)
{
    skip_ds *s = (skip_ds *)sl__dataset_new(&skip_ops, sizeof *s, in);
    if (!s)
        return NULL;
    if (n < -1)
        return sl__dataset_fail(&s->base, SL_EINVAL, "skip: count %lld is negative (-1 skips all)",
                                (long long)n);
    s->n = n;
    return &s->base;
}

typedef struct skip_args {
    int64_t n;
} skip_args;

static sl_dataset *apply(sl_dataset *x, void *arg)
{
    const skip_args *a = arg;
    return build(x, a->n);
}

/* Moves below nodes that read files, so dropped files are never read. */
SL_API sl_dataset *sl_skip(sl_dataset *in, int64_t n)
{
    skip_args a = {n};
    return sl__push_below(in, apply, &a);
}
