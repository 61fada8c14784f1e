/* repeat(count): count passes over the input (-1: forever), each a fresh
 * input iterator with its own epoch so that shuffles reshuffle and
 * per-element random streams differ from pass to pass.
 *
 * A pass whose input drains a buffer at its end (a buffer shuffle after
 * its input ended) has the next pass made early and primed a step per
 * element it gives, so that the next pass's buffer is full when it
 * starts instead of filling while everything downstream waits: tf.data's
 * fused shuffle-and-repeat, without mixing the passes. The held bytes
 * stay level (one leaves the old buffer as one enters the new), and the
 * output is what it would be without it: priming takes the same pulls
 * the next pass's first element would. */
#include "../graph/sync.h"

/* Epoch stride of a forever-repeat nested in a repeated pipeline. A finite
 * repeat(count) numbers its passes epoch * count + pass instead, so nested
 * finite repeats count epochs 0, 1, 2, ... as if flattened. */
#define FOREVER_STRIDE ((uint64_t)1 << 32)

typedef struct repeat_ds {
    sl_dataset base;
    int64_t count;
} repeat_ds;

typedef struct repeat_iter {
    sl__sync_iter u; /* in: the current pass, NULL between passes */
    sl__iter *early; /* the next pass, made while this one drains, or NULL */
    bool no_early;   /* making it failed: it is made when due, as usual */
    int64_t pass;
    int64_t got;   /* elements of the current pass */
    bool done;
} repeat_iter;

static int64_t repeat_cardinality(const sl_dataset *ds)
{
    int64_t count = ((const repeat_ds *)ds)->count, in = sl_dataset_cardinality(ds->inputs[0]);
    /* tf.data's rules: an empty pass ends a forever-repeat */
    if (count < 0)
        return in == 0 ? 0 : SL_INFINITE;
    if (count == 0 || in == 0)
        return 0;
    if (in < 0)
        return in;
    return in > INT64_MAX / count ? SL_UNKNOWN : in * count;
}

static int make_pass(repeat_iter *it, int64_t pass, sl__iter **out)
{
    const sl__iter *base = &it->u.base;
    int64_t count = ((const repeat_ds *)base->ds)->count;
    uint64_t stride = count > 0 ? (uint64_t)count : FOREVER_STRIDE;
    /* unsigned: wraps rather than overflows for absurd nestings */
    int64_t epoch = (int64_t)((uint64_t)base->epoch * stride + (uint64_t)pass);
    return sl__iter_make_input(&it->u.base, 0, epoch, out);
}

static int start_pass(repeat_iter *it)
{
    it->got = 0;
    it->no_early = false;
    if (it->early) {
        it->u.in = it->early;
        it->early = NULL;
        return 0;
    }
    return make_pass(it, it->pass, &it->u.in);
}

/* One step of the next pass's start while this one drains. A failure to
 * make it early is left for when it is due, where it comes out as it
 * would have. */
static void overlap(repeat_iter *it, int64_t count)
{
    const sl__iter_ops *ops = it->u.in->ops;
    if (it->no_early || !ops->draining || !ops->draining(it->u.in) ||
        (count >= 0 && it->pass + 1 >= count))
        return;
    if (!it->early && make_pass(it, it->pass + 1, &it->early) < 0) {
        it->early = NULL;
        it->no_early = true;
        return;
    }
    if (it->early->ops->prime)
        it->early->ops->prime(it->early);
}

static int repeat_next(sl__iter *base, sl_element **out)
{
    repeat_iter *it = (repeat_iter *)base;
    int64_t count = ((const repeat_ds *)base->ds)->count;
    while (!it->done) {
        if (!it->u.in) {
            if (count >= 0 && it->pass >= count) {
                it->done = true;
                break;
            }
            int rc = start_pass(it);
            if (rc < 0)
                return rc;
        }
        int rc = sl__iter_next(it->u.in, out);
        if (rc == 0) {
            it->got++;
            overlap(it, count);
        }
        if (rc != SL_EOF)
            return rc;
        sl__iter_free(it->u.in);
        it->u.in = NULL;
        it->pass++;
        if (it->got == 0) /* an empty pass: more passes would be empty too */
            it->done = true;
    }
    return SL_EOF;
}

static void repeat_fini(sl__sync_iter *u)
{
    sl__iter_free(((repeat_iter *)u)->early);
}

/* The first pass starts now, so that setup errors (a missing file)
 * surface at sl_iterator_create as without repeat; a resumed one restarts
 * the pass it was in. */
static int repeat_start(sl__sync_iter *u, bool resumed)
{
    repeat_iter *it = (repeat_iter *)u;
    int64_t count = ((const repeat_ds *)u->base.ds)->count, got = it->got;
    int rc = resumed ? sl__state_range(&u->base, "pass", it->pass, 0,
                                       count < 0 ? INT64_MAX : count)
                     : 0;
    if (rc == 0 && count != 0 && !it->done && (count < 0 || it->pass < count)) {
        rc = start_pass(it);
        it->got = resumed ? got : 0;
    }
    return rc;
}

/* The pass, its elements so far, then the pass's input record (none
 * between passes or at the end). A next pass made early is not saved:
 * restored, it is made when due, with the same output. */
static const sl__field repeat_state[] = {
    SL__FIELD_I64(repeat_iter, pass, 0, INT64_MAX),
    SL__FIELD_I64(repeat_iter, got, 0, INT64_MAX),
    SL__FIELD_BOOL(repeat_iter, done),
};
static const sl__field repeat_params[] = {SL__PARAM(repeat_ds, count)};

static const sl__sync_def repeat_def = {
    .node = {.kind = "repeat", SL__SYNC_NODE, .cardinality = repeat_cardinality,
             .structure = sl__structure_of_input},
    .iter = {SL__SYNC_ITER(repeat_next)},
    .iter_size = sizeof(repeat_iter),
    SL__SYNC_STATE(repeat_state),
    SL__SYNC_PARAMS(repeat_params),
    .flags = SL__SYNC_OWN_INPUT,
    .start = repeat_start,
    .fini = repeat_fini,
};

SL_API sl_dataset *sl_repeat(sl_dataset *in, int64_t count)
{
    repeat_ds *r = (repeat_ds *)sl__dataset_new(&repeat_def.node, sizeof *r, in);
    if (!r)
        return NULL;
    if (count < -1)
        return sl__dataset_fail(&r->base, SL_EINVAL,
                                "repeat: count %lld is negative (-1 repeats forever)",
                                (long long)count);
    r->count = count;
    return &r->base;
}
