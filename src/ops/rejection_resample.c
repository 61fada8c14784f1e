/* rejection_resample(class_fn, target, initial): the input resampled so
 * its classes follow the target distribution, by rejection. Each element
 * of class k is kept with probability a_k = r_k / max_j r_j, where r_j =
 * target_j / initial_j over the classes with initial_j > 0, and comes out
 * as (class, element), as tf.data's does. The initial distribution is
 * given, or estimated from the classes seen so far this pass (this
 * element's included), as tf.data estimates it.
 *
 * tf.data also mixes in a second pass of the unfiltered input, which
 * repeats elements; one pass of exact rejection gives the same output
 * distribution without repeats. The draw for input position i comes from
 * the stream keyed by (seed, node, epoch, i): the same on any thread
 * count, new each epoch. With the initial distribution given, a saved
 * position is the input's and a count; estimating it, restoring replays
 * the pass's input (the counts seen are the state). */
#include <stdio.h>
#include <string.h>
#include "../graph/sync.h"

typedef struct rejection_resample_ds {
    sl_dataset base;
    sl_key_fn class_fn;
    void *user;
    int nclasses;
    double *target;
    double *accept;  /* per class, from the initial distribution; NULL: estimated */
    int64_t seed;
    bool same; /* SL_SAME_EACH_EPOCH */
} rejection_resample_ds;

typedef struct rejection_resample_iter {
    sl__sync_iter u;
    int64_t pulled; /* input elements taken this pass */
    bool done;
    uint64_t seed;
    int64_t *seen; /* per class this pass (estimating), else NULL */
} rejection_resample_iter;

static const rejection_resample_ds *ds_of(const rejection_resample_iter *it)
{
    return (const rejection_resample_ds *)it->u.base.ds;
}

/* The probability of keeping an element of class k, from the classes seen
 * (k counted). */
static double estimated_accept(const rejection_resample_iter *it, int k)
{
    const rejection_resample_ds *d = ds_of(it);
    double best = 0;
    for (int j = 0; j < d->nclasses; j++)
        if (it->seen[j]) {
            double r = d->target[j] / (double)it->seen[j];
            best = r > best ? r : best;
        }
    return best > 0 ? d->target[k] / (double)it->seen[k] / best : 0;
}

/* The class of el in [0, nclasses), or an element error. */
static int class_of(rejection_resample_iter *it, const sl_element *el, int64_t index,
                    int64_t *k)
{
    const rejection_resample_ds *d = ds_of(it);
    sl__iter *base = &it->u.base;
    sl_map_ctx ctx;
    sl__map_ctx_begin(&ctx, base->ds, it->seed, base->key, base->epoch, index);
    sl_clear_error();
    int rc = d->class_fn(&ctx, el, k, d->user);
    sl__map_ctx_end(&ctx);
    if (rc == 0 && (*k < 0 || *k >= d->nclasses))
        rc = sl__set_error(SL_EINVAL, "class %lld is not in [0, %d)", (long long)*k,
                           d->nclasses);
    if (rc < 0) {
        if (!sl__error_msg()[0])
            sl__set_error(rc, "class function failed: %s", sl_strerror(rc));
        sl__element_error_prefix(el);
        sl__error_prefix(sl_dataset_name(base->ds));
    }
    return rc;
}

/* The next kept element (out NULL: dropped, while replaying). */
static int next_kept(rejection_resample_iter *it, sl_element **out)
{
    const rejection_resample_ds *d = ds_of(it);
    sl__iter *base = &it->u.base;
    for (;;) {
        sl_element *el;
        int rc = sl__iter_next(it->u.in, &el);
        if (rc == SL_EOF) {
            it->done = true;
            sl__sync_drop_input(&it->u, 0); /* it may hold threads or files */
        }
        if (rc)
            return rc;
        int64_t index = it->pulled++, k = 0;
        if ((rc = class_of(it, el, index, &k)) < 0) {
            sl_element_release(el);
            if (it->u.replaying)
                continue; /* the policy skipped it before: again */
            if ((rc = sl__policy(base, rc)) != 0)
                return rc;
            continue;
        }
        double a;
        if (d->accept) {
            a = d->accept[k];
        } else {
            it->seen[k]++;
            a = estimated_accept(it, (int)k);
        }
        sl__rng rng = sl__rng_make(it->seed, base->key, d->same ? 0 : base->epoch, index);
        if (a >= 1 || sl__rng_uniform(&rng) < a) {
            if (!out) {
                sl_element_release(el);
                return 0;
            }
            *out = sl__element_i64_then(k, el, "rejection_resample");
            sl_element_release(el);
            return *out ? 0 : SL_ENOMEM;
        }
        sl_element_release(el);
    }
}

static int rejection_resample_next(sl__iter *base, sl_element **out)
{
    rejection_resample_iter *it = (rejection_resample_iter *)base;
    return it->done ? SL_EOF : next_kept(it, out);
}

static int rejection_resample_replay(sl__sync_iter *u)
{
    return next_kept((rejection_resample_iter *)u, NULL);
}

/* Estimating the input's distribution, the classes seen are the state:
 * the record holds the fields only and restoring replays the input.
 * Given it, the record holds the input's too. */
static bool rejection_resample_replays(const sl_dataset *ds)
{
    return !((const rejection_resample_ds *)ds)->accept;
}

static int rejection_resample_start(sl__sync_iter *u, bool resumed)
{
    (void)resumed;
    rejection_resample_iter *it = (rejection_resample_iter *)u;
    const rejection_resample_ds *d = ds_of(it);
    it->seed = sl__node_seed(&u->base, d->seed);
    if (!d->accept && !(it->seen = sl__calloc((size_t)d->nclasses, sizeof *it->seen)))
        return sl__set_error(SL_ENOMEM, "rejection_resample: out of memory");
    /* an input that had ended is not made again (it may hold threads) */
    return it->done ? 0 : sl__iter_make_input(&u->base, 0, u->base.epoch, &u->in);
}

static void rejection_resample_fini(sl__sync_iter *u)
{
    rejection_resample_iter *it = (rejection_resample_iter *)u;
    if (it->seen)
        sl__free(it->seen, (size_t)ds_of(it)->nclasses * sizeof *it->seen);
}

static int64_t rejection_resample_cardinality(const sl_dataset *ds)
{
    int64_t n = sl_dataset_cardinality(ds->inputs[0]);
    return n == 0 || n == SL_INFINITE ? n : SL_UNKNOWN;
}

static sl_structure *rejection_resample_structure(const sl_dataset *ds)
{
    const sl_structure *in = sl_dataset_structure(ds->inputs[0]);
    sl_structure *cls = in ? sl_structure_parse("int64[]") : NULL;
    const sl_structure *items[2] = {cls, in};
    sl_structure *s = cls ? sl__structure_compose(2, items, NULL) : NULL;
    sl_structure_release(cls);
    return s;
}

/* The name stands for the class function (filter's rule); the
 * distributions and the seed are hashed. */
static uint64_t rejection_resample_fingerprint(const sl_dataset *ds, uint64_t h)
{
    const rejection_resample_ds *d = (const rejection_resample_ds *)ds;
    h = sl__hash_u64(sl__hash_u64(sl__hash_u64(h, (uint64_t)d->seed), d->same),
                     (uint64_t)d->nclasses);
    h = sl__hash_bytes(h, d->target, (size_t)d->nclasses * sizeof *d->target);
    return d->accept ? sl__hash_bytes(h, d->accept, (size_t)d->nclasses * sizeof *d->accept)
                     : h;
}

static void rejection_resample_destroy(sl_dataset *ds)
{
    rejection_resample_ds *d = (rejection_resample_ds *)ds;
    size_t bytes = (size_t)(d->nclasses > 0 ? d->nclasses : 1) * sizeof(double);
    if (d->target)
        sl__free(d->target, bytes);
    if (d->accept)
        sl__free(d->accept, bytes);
}

static const sl__field rejection_resample_state[] = {
    SL__FIELD_I64(rejection_resample_iter, pulled, 0, INT64_MAX),
    SL__FIELD_BOOL(rejection_resample_iter, done),
};

static const sl__sync_def rejection_resample_def = {
    .node = {.kind = "rejection_resample", .make_iter = sl__sync_make,
             .cardinality = rejection_resample_cardinality,
             .structure = rejection_resample_structure,
             .fingerprint = rejection_resample_fingerprint,
             .destroy = rejection_resample_destroy},
    .iter = {SL__SYNC_ITER(rejection_resample_next)},
    .iter_size = sizeof(rejection_resample_iter),
    SL__SYNC_STATE(rejection_resample_state),
    SL__SYNC_REPLAY(rejection_resample_replay, "pulled", "done"),
    .replays = rejection_resample_replays,
    .flags = SL__SYNC_OWN_INPUT,
    .start = rejection_resample_start,
    .fini = rejection_resample_fini,
};

/* A copy of a distribution of n classes, normalized: NULL with the error
 * set for a bad one. */
static double *distribution(const char *what, const double *p, int n)
{
    double sum = 0;
    for (int i = 0; i < n; i++) {
        if (!(p[i] >= 0) || p[i] > 1e300) {
            sl__set_error(SL_EINVAL, "rejection_resample: %s[%d] is %g (finite, >= 0)", what,
                          i, p[i]);
            return NULL;
        }
        sum += p[i];
    }
    if (!(sum > 0)) {
        sl__set_error(SL_EINVAL, "rejection_resample: %s adds up to 0", what);
        return NULL;
    }
    double *q = sl__alloc((size_t)n * sizeof *q);
    if (!q) {
        sl__set_error(SL_ENOMEM, "rejection_resample: out of memory");
        return NULL;
    }
    for (int i = 0; i < n; i++)
        q[i] = p[i] / sum;
    return q;
}

SL_API sl_dataset *sl_rejection_resample(sl_dataset *in, const char *name, sl_key_fn class_fn,
                                         void *user, const double *target, int nclasses,
                                         const double *initial, int64_t seed, unsigned flags)
{
    rejection_resample_ds *d = (rejection_resample_ds *)sl__dataset_new(
        &rejection_resample_def.node, sizeof *d, in);
    if (!d)
        return NULL;
    if (!class_fn || !target || nclasses < 1)
        return sl__dataset_fail(&d->base, SL_EINVAL, "rejection_resample: %s",
                                !class_fn ? "NULL class function" : !target
                                ? "NULL target distribution" : "no classes");
    if (seed < -1)
        return sl__dataset_fail(&d->base, SL_EINVAL, "rejection_resample: seed %lld (>= 0, "
                                "or -1)", (long long)seed);
    if (flags & ~SL_SAME_EACH_EPOCH)
        return sl__dataset_fail(&d->base, SL_EINVAL, "rejection_resample: unknown flags 0x%x",
                                flags & ~SL_SAME_EACH_EPOCH);
    d->nclasses = nclasses;
    if (!(d->target = distribution("target_dist", target, nclasses)))
        goto fail;
    if (initial) {
        if (!(d->accept = distribution("initial_dist", initial, nclasses)))
            goto fail;
        double best = 0;
        for (int j = 0; j < nclasses; j++) {
            double r = d->accept[j] > 0 ? d->target[j] / d->accept[j] : 0;
            if (d->accept[j] == 0 && d->target[j] > 0)
                return sl__dataset_fail(&d->base, SL_EINVAL, "rejection_resample: class %d "
                                        "has target probability %g but initial 0", j,
                                        d->target[j]);
            d->accept[j] = r;
            best = r > best ? r : best;
        }
        for (int j = 0; j < nclasses; j++)
            d->accept[j] /= best;
    }
    d->class_fn = class_fn;
    d->user = user;
    d->seed = seed;
    d->same = flags & SL_SAME_EACH_EPOCH;
    if (sl__dataset_set_name(&d->base, name) < 0)
        return sl__dataset_fail(&d->base, SL_ENOMEM, "rejection_resample: out of memory");
    return &d->base;
fail:;
    char why[256];
    snprintf(why, sizeof why, "%s", sl__error_msg());
    return sl__dataset_fail(&d->base, sl_last_error_code(), "%s", why);
}
