/* shard(n, i): the input elements whose position p has p % n == i. Random
 * access when the input has it. */
#include "../graph/node.h"

typedef struct shard_ds {
    sl_dataset base;
    int64_t n, index;
} shard_ds;

typedef struct shard_iter {
    sl__iter base;
    sl__iter *in;
    int64_t pos; /* input position of the next pull */
    bool done;
} shard_iter;

static int64_t shard_card(const sl_dataset *ds)
{
    const shard_ds *s = (const shard_ds *)ds;
    int64_t in = sl_dataset_cardinality(ds->inputs[0]);
    if (in < 0)
        return in;
    /* ceil((in - index) / n) clipped at 0, without overflow */
    return in / s->n + (in % s->n > s->index);
}

static int shard_next(sl__iter *base, sl_element **out)
{
    shard_iter *it = (shard_iter *)base;
    const shard_ds *s = (const shard_ds *)base->ds;
    if (it->done)
        return SL_EOF;
    int rc;
    while ((rc = sl__iter_next(it->in, out)) == 0 && it->pos++ % s->n != s->index) {
        sl_element_release(*out);
        *out = NULL;
    }
    if (rc == SL_EOF)
        it->done = true;
    return rc;
}

static void shard_destroy(sl__iter *base)
{
    sl__iter_free(((shard_iter *)base)->in);
}

static int shard_save(sl__iter *base, sl__bytes *w)
{
    shard_iter *it = (shard_iter *)base;
    int64_t f[2] = {it->pos, it->done};
    return sl__save_sync(w, base, 2, f, it->in);
}

static const sl__iter_ops shard_iter_ops = {
    .next = shard_next,
    .destroy = shard_destroy,
    .save = shard_save,
};

static int shard_make(const sl_dataset *ds, sl__tree *tree, uint64_t key, int64_t epoch,
                      sl__iter **out)
{
    shard_iter *it = sl__iter_alloc(&shard_iter_ops, sizeof *it, ds, tree, key, epoch);
    if (!it)
        return SL_ENOMEM;
    int64_t f[2];
    int rc = sl__iter_restored(&it->base, 2, f);
    if (rc > 0) {
        it->pos = f[0];
        it->done = f[1] != 0;
        rc = sl__state_range(&it->base, "pos", f[0], 0, INT64_MAX);
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

static uint64_t shard_fp(const sl_dataset *ds, uint64_t h)
{
    const shard_ds *s = (const shard_ds *)ds;
    return sl__hash_u64(sl__hash_u64(h, (uint64_t)s->n), (uint64_t)s->index);
}

static bool shard_can_get(const sl_dataset *ds)
{
    return sl__dataset_can_get(ds->inputs[0]) && shard_card(ds) >= 0;
}

static int shard_get(const sl_dataset *ds, int64_t index, sl_element **out)
{
    const shard_ds *s = (const shard_ds *)ds;
    const sl_dataset *in = ds->inputs[0];
    return in->ops->get(in, index * s->n + s->index, out);
}

static const sl__node_ops shard_ops = {
    .kind = "shard",
    .make_iter = shard_make,
    .cardinality = shard_card,
    .fingerprint = shard_fp,
    .can_get = shard_can_get,
    .get = shard_get,
};

static sl_dataset *build(sl_dataset *in, int64_t num_shards, int64_t index)
{
    shard_ds *s = (shard_ds *)sl__dataset_new(&shard_ops, sizeof *s, in);
    if (!s)
        return NULL;
    if (num_shards < 1)
        return sl__dataset_fail(&s->base, SL_EINVAL, "shard: num_shards %lld must be >= 1",
                                (long long)num_shards);
    if (index < 0 || index >= num_shards)
        return sl__dataset_fail(&s->base, SL_EINVAL, "shard: index %lld is outside [0, %lld)",
                                (long long)index, (long long)num_shards);
    s->n = num_shards;
    s->index = index;
    return &s->base;
}

typedef struct shard_args {
    int64_t num_shards;
    int64_t index;
} shard_args;

static sl_dataset *apply(sl_dataset *x, void *arg)
{
    const shard_args *a = arg;
    return build(x, a->num_shards, a->index);
}

/* Moves below nodes that read files, so dropped files are never read. */
SL_API sl_dataset *sl_shard(sl_dataset *in, int64_t num_shards, int64_t index)
{
    shard_args a = {num_shards, index};
    return sl__push_below(in, apply, &a);
}
