/* random(seed): endless scalar int64 values, each drawn from the stream
 * keyed by (seed, node, epoch, position) (tf.data's Dataset.random): the
 * same on any thread count, and a new sequence each epoch unless
 * SL_SAME_EACH_EPOCH. Random access. */
#include "../graph/sync.h"

typedef struct random_ds {
    sl_dataset base;
    int64_t seed, flags;
} random_ds;

typedef struct random_iter {
    sl__sync_iter u;
    int64_t pos;
    uint64_t seed;
} random_iter;

static int64_t draw(const sl_dataset *ds, uint64_t seed, uint64_t key, int64_t epoch,
                    int64_t pos)
{
    const random_ds *r = (const random_ds *)ds;
    sl__rng rng = sl__rng_make(seed, key, r->flags & SL_SAME_EACH_EPOCH ? 0 : epoch, pos);
    return (int64_t)sl__rng_next(&rng);
}

static int random_next(sl__iter *base, sl_element **out)
{
    random_iter *it = (random_iter *)base;
    if (!(*out = sl__element_i64(draw(base->ds, it->seed, base->key, base->epoch, it->pos))))
        return SL_ENOMEM;
    it->pos++;
    return 0;
}

static int random_start(sl__sync_iter *u, bool resumed)
{
    (void)resumed;
    ((random_iter *)u)->seed = sl__node_seed(&u->base, ((const random_ds *)u->base.ds)->seed);
    return 0;
}

static int64_t random_cardinality(const sl_dataset *ds)
{
    (void)ds;
    return SL_INFINITE;
}

static const sl__field random_state[] = {SL__FIELD_I64(random_iter, pos, 0, INT64_MAX)};
static const sl__field random_params[] = {SL__PARAM(random_ds, seed), SL__PARAM(random_ds, flags)};

static const sl__sync_def random_def = {
    .node = {.kind = "random", SL__SYNC_NODE, .cardinality = random_cardinality},
    .iter = {SL__SYNC_ITER(random_next)},
    .iter_size = sizeof(random_iter),
    SL__SYNC_STATE(random_state),
    SL__SYNC_PARAMS(random_params),
    .start = random_start,
};

SL_API sl_dataset *sl_random(int64_t seed, unsigned flags)
{
    if (seed < -1 || (flags & ~SL_SAME_EACH_EPOCH)) {
        sl__set_error(SL_EINVAL, "random: seed %lld (>= 0, or -1) or flags %#x",
                      (long long)seed, flags);
        return NULL;
    }
    random_ds *r = (random_ds *)sl__dataset_new_source(&random_def.node, sizeof *r);
    if (!r)
        return NULL;
    r->seed = seed;
    r->flags = flags;
    return sl__dataset_structured(&r->base, sl_structure_parse("int64[]"));
}
