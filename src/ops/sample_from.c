/* sample_from(weights, seed): an endless stream of input indices, i with
 * probability weights[i] / sum, drawn from the stream keyed by (seed,
 * node, epoch, position), so the same on any thread count and new each
 * epoch. sl_sample_from chooses from its inputs by it (tf.data's
 * sample_from_datasets, which also picks with a random choice stream and
 * passes over inputs that have ended). */
#include <math.h>
#include <stdio.h>
#include "../graph/sync.h"

typedef struct sample_from_ds {
    sl_dataset base;
    int64_t seed;
    bool same; /* SL_SAME_EACH_EPOCH */
    int n;
    double *cumulative; /* n partial sums of the weights, the last 1 */
} sample_from_ds;

typedef struct sample_from_iter {
    sl__sync_iter u;
    int64_t pos;
    uint64_t seed;
} sample_from_iter;

static int sample_from_next(sl__iter *base, sl_element **out)
{
    sample_from_iter *it = (sample_from_iter *)base;
    const sample_from_ds *d = (const sample_from_ds *)base->ds;
    sl__rng rng = sl__rng_make(it->seed, base->key, d->same ? 0 : base->epoch, it->pos);
    double u = sl__rng_uniform(&rng);
    int lo = 0, hi = d->n - 1;
    while (lo < hi) { /* the first partial sum above u */
        int mid = (lo + hi) / 2;
        if (d->cumulative[mid] > u)
            hi = mid;
        else
            lo = mid + 1;
    }
    if (!(*out = sl__element_i64(lo)))
        return SL_ENOMEM;
    it->pos++;
    return 0;
}

static int sample_from_start(sl__sync_iter *u, bool resumed)
{
    (void)resumed;
    sample_from_iter *it = (sample_from_iter *)u;
    it->seed = sl__node_seed(&u->base, ((const sample_from_ds *)u->base.ds)->seed);
    return 0;
}

static int64_t sample_from_cardinality(const sl_dataset *ds)
{
    (void)ds;
    return SL_INFINITE;
}

static uint64_t sample_from_fingerprint(const sl_dataset *ds, uint64_t h)
{
    const sample_from_ds *d = (const sample_from_ds *)ds;
    h = sl__hash_u64(sl__hash_u64(h, (uint64_t)d->seed), d->same);
    return sl__hash_bytes(h, d->cumulative, (size_t)d->n * sizeof *d->cumulative);
}

static void sample_from_destroy(sl_dataset *ds)
{
    sample_from_ds *d = (sample_from_ds *)ds;
    if (d->cumulative)
        sl__free(d->cumulative, (size_t)d->n * sizeof *d->cumulative);
}

static const sl__field sample_from_state[] = {
    SL__FIELD_I64(sample_from_iter, pos, 0, INT64_MAX),
};

static const sl__sync_def sample_from_def = {
    .node = {.kind = "sample_from", .make_iter = sl__sync_make,
             .cardinality = sample_from_cardinality, .fingerprint = sample_from_fingerprint,
             .destroy = sample_from_destroy},
    .iter = {SL__SYNC_ITER(sample_from_next)},
    .iter_size = sizeof(sample_from_iter),
    SL__SYNC_STATE(sample_from_state),
    .start = sample_from_start,
};

/* The choice stream: NULL with the error set for bad weights. */
static sl_dataset *choices(int n, const double *weights, int64_t seed, bool same)
{
    if (seed < -1) {
        sl__set_error(SL_EINVAL, "sample_from: seed %lld (>= 0, or -1)", (long long)seed);
        return NULL;
    }
    double sum = 0;
    for (int i = 0; weights && i < n; i++) {
        if (!(weights[i] >= 0) || isinf(weights[i])) {
            sl__set_error(SL_EINVAL, "sample_from: weight %d is %g (finite, >= 0)", i,
                          weights[i]);
            return NULL;
        }
        sum += weights[i];
    }
    if (weights && !(sum > 0)) {
        sl__set_error(SL_EINVAL, "sample_from: the weights add up to 0");
        return NULL;
    }
    sample_from_ds *d = (sample_from_ds *)sl__dataset_new_source(&sample_from_def.node,
                                                                 sizeof *d);
    if (!d)
        return NULL;
    d->seed = seed;
    d->same = same;
    if (!(d->cumulative = sl__alloc((size_t)n * sizeof *d->cumulative)))
        return sl__dataset_fail(&d->base, SL_ENOMEM, "sample_from: out of memory");
    d->n = n;
    double acc = 0;
    for (int i = 0; i < n; i++) {
        acc += weights ? weights[i] / sum : 1.0 / n;
        d->cumulative[i] = acc;
    }
    d->cumulative[n - 1] = 1.0; /* rounding must not leave a gap at the top */
    return sl__dataset_structured(&d->base, sl_structure_parse("int64[]"));
}

SL_API sl_dataset *sl_sample_from(sl_dataset *const *inputs, int n, const double *weights,
                                  int64_t seed, unsigned flags)
{
    sl_dataset *c = n >= 1 && n < SL__MAX_INPUTS
                        ? choices(n, weights, seed, flags & SL_SAME_EACH_EPOCH) : NULL;
    if (!c && n >= 1 && n < SL__MAX_INPUTS) {
        for (int i = 0; inputs && i < n; i++)
            sl_dataset_release(inputs[i]);
        return NULL;
    }
    return sl_choose_from(c, inputs, n, flags & ~SL_SAME_EACH_EPOCH);
}
