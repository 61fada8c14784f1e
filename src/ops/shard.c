/* shard(n, i): the input elements whose position p has p % n == i. Random
 * access when the input has it. */
#include "../graph/sync.h"

typedef struct shard_ds {
    sl_dataset base;
    int64_t n, index;
} shard_ds;

typedef struct shard_iter {
    sl__sync_iter u;
    int64_t pos; /* input position of the next pull */
    bool done;
} shard_iter;

static int64_t shard_cardinality(const sl_dataset *ds)
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
    while ((rc = sl__iter_next(it->u.in, out)) == 0 && it->pos++ % s->n != s->index) {
        sl_element_release(*out);
        *out = NULL;
    }
    if (rc == SL_EOF)
        it->done = true;
    return rc;
}

static bool shard_can_get(const sl_dataset *ds)
{
    return sl__dataset_can_get(ds->inputs[0]) && shard_cardinality(ds) >= 0;
}

static int shard_get(const sl_dataset *ds, int64_t index, sl_element **out)
{
    const shard_ds *s = (const shard_ds *)ds;
    const sl_dataset *in = ds->inputs[0];
    return in->ops->get(in, index * s->n + s->index, out);
}

static const sl__field shard_state[] = {
    SL__FIELD_I64(shard_iter, pos, 0, INT64_MAX),
    SL__FIELD_BOOL(shard_iter, done),
};
static const sl__field shard_params[] = {SL__PARAM(shard_ds, n), SL__PARAM(shard_ds, index)};

static const sl__sync_def shard_def = {
    .node = {.kind = "shard", SL__SYNC_NODE, .cardinality = shard_cardinality,
             .structure = sl__structure_of_input,
             .can_get = shard_can_get, .get = shard_get},
    .iter = {SL__SYNC_ITER(shard_next)},
    .iter_size = sizeof(shard_iter),
    SL__SYNC_STATE(shard_state),
    SL__SYNC_PARAMS(shard_params),
};

static sl_dataset *build(sl_dataset *in, void *arg)
{
    const int64_t *a = arg; /* num_shards, index */
    shard_ds *s = (shard_ds *)sl__dataset_new(&shard_def.node, sizeof *s, in);
    if (!s)
        return NULL;
    if (a[0] < 1)
        return sl__dataset_fail(&s->base, SL_EINVAL, "shard: num_shards %lld must be >= 1",
                                (long long)a[0]);
    if (a[1] < 0 || a[1] >= a[0])
        return sl__dataset_fail(&s->base, SL_EINVAL, "shard: index %lld is outside [0, %lld)",
                                (long long)a[1], (long long)a[0]);
    s->n = a[0];
    s->index = a[1];
    return &s->base;
}

/* Moves below nodes that read files, so dropped files are never read. */
SL_API sl_dataset *sl_shard(sl_dataset *in, int64_t num_shards, int64_t index)
{
    int64_t a[2] = {num_shards, index};
    return sl__push_below(in, build, a);
}
