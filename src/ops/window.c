/* window(size, shift, stride, flags): tf.data's windows of the input,
 * each given stacked as batch stacks its elements. Window k starts at
 * input position k * shift and takes up to `size` elements `stride`
 * apart; every window that starts before the input's end comes out, those
 * cut short by the end too unless SL_DROP_REMAINDER. The elements a window
 * still needs are kept (at most (size - 1) * stride + 1); a saved position
 * holds counters and is restored by replaying the input (as a buffer
 * shuffle's). */
#include <string.h>
#include "../graph/sync.h"
#include "stack.h"

typedef struct window_ds {
    sl_dataset base;
    int64_t size, shift, stride, flags;
} window_ds;

typedef struct window_iter {
    sl__sync_iter u;
    int64_t pulled, emitted; /* saved */
    bool input_done;
    sl_element **buf; /* input positions first .. first + n - 1 */
    int64_t cap, n, first;
} window_iter;

static void drop_before(window_iter *it, int64_t pos)
{
    int64_t k = pos - it->first;
    if (k <= 0)
        return;
    if (k > it->n)
        k = it->n;
    for (int64_t i = 0; i < k; i++)
        sl_element_release(it->buf[i]);
    memmove(it->buf, it->buf + k, (size_t)(it->n - k) * sizeof *it->buf);
    it->n -= k;
    it->first += k;
}

/* Pulls until position `last` is buffered or the input ends: 0, or an
 * error. Positions before `keep_from` are not kept. */
static int fill_to(window_iter *it, int64_t keep_from, int64_t last)
{
    while (!it->input_done && it->first + it->n <= last) {
        sl_element *el;
        int rc = sl__iter_next(it->u.in, &el);
        if (rc == SL_EOF) {
            it->input_done = true;
            break;
        }
        if (rc)
            return rc;
        it->pulled++;
        if (it->first + it->n < keep_from) { /* between windows (shift > span) */
            sl_element_release(el);
            it->first++;
            continue;
        }
        it->buf[it->n++] = el;
    }
    return 0;
}

/* The next window stacked, out NULL to drop it: 0, SL_EOF or an error. */
static int produce(window_iter *it, sl_element **out)
{
    const window_ds *d = (const window_ds *)it->u.base.ds;
    int64_t start = it->emitted * d->shift, last = start + (d->size - 1) * d->stride;
    drop_before(it, start);
    int rc = fill_to(it, start, last);
    if (rc)
        return rc;
    int64_t count = 0;
    for (int64_t p = start; p <= last && p < it->first + it->n; p += d->stride)
        count += p >= it->first;
    if (count == 0 || ((d->flags & SL_DROP_REMAINDER) && count < d->size))
        return SL_EOF;
    sl__stack st = {0};
    for (int64_t p = start; rc == 0 && p <= last && p < it->first + it->n; p += d->stride)
        rc = sl__stack_add(&st, it->buf[p - it->first], count, count);
    sl_element *el = rc == 0 && out ? sl__element_new(st.ncols, 0) : NULL;
    if (rc == 0 && out)
        rc = el ? sl__stack_emit(&st, el) : SL_ENOMEM;
    sl__stack_reset(&st);
    if (rc < 0) {
        sl_element_release(el);
        return rc;
    }
    it->emitted++;
    if (out)
        *out = el;
    return 0;
}

static int window_next(sl__iter *base, sl_element **out)
{
    return produce((window_iter *)base, out);
}

static int window_replay(sl__sync_iter *u)
{
    return produce((window_iter *)u, NULL);
}

static int window_start(sl__sync_iter *u, bool resumed)
{
    (void)resumed;
    window_iter *it = (window_iter *)u;
    const window_ds *d = (const window_ds *)u->base.ds;
    it->cap = (d->size - 1) * d->stride + 1;
    return (it->buf = sl__calloc((size_t)it->cap, sizeof *it->buf)) ? 0 : SL_ENOMEM;
}

static void window_fini(sl__sync_iter *u)
{
    window_iter *it = (window_iter *)u;
    if (!it->buf)
        return;
    for (int64_t i = 0; i < it->n; i++)
        sl_element_release(it->buf[i]);
    sl__free(it->buf, (size_t)it->cap * sizeof *it->buf);
}

static int64_t window_cardinality(const sl_dataset *ds)
{
    const window_ds *d = (const window_ds *)ds;
    int64_t in = sl_dataset_cardinality(ds->inputs[0]);
    if (in < 0)
        return in;
    if (!(d->flags & SL_DROP_REMAINDER)) /* every start before the end */
        return (in + d->shift - 1) / d->shift;
    int64_t span = (d->size - 1) * d->stride + 1;
    return in < span ? 0 : (in - span) / d->shift + 1;
}

/* Each leaf gains the window's dimension, as batch's. */
static void window_leaf(sl__stext *t, int leaf, const sl__leaf_spec *spec, void *arg)
{
    (void)leaf;
    const window_ds *d = arg;
    sl__leaf_spec b = *spec;
    if (b.ndim >= SL_MAX_DIMS) {
        b.ndim = -1;
    } else if (b.ndim >= 0) {
        memmove(b.shape + 1, b.shape, (size_t)b.ndim * sizeof *b.shape);
        b.shape[0] = d->flags & SL_DROP_REMAINDER ? d->size : -1;
        b.ndim++;
    }
    sl__stext_leaf(t, &b);
}

static sl_structure *window_structure(const sl_dataset *ds)
{
    const sl_structure *in = sl_dataset_structure(ds->inputs[0]);
    return in ? sl__structure_rewrite(in, window_leaf, (void *)ds) : NULL;
}

static const sl__field window_state[] = {
    SL__FIELD_I64(window_iter, pulled, 0, INT64_MAX),
    SL__FIELD_I64(window_iter, emitted, 0, INT64_MAX),
};
static const sl__field window_params[] = {
    SL__PARAM(window_ds, size), SL__PARAM(window_ds, shift), SL__PARAM(window_ds, stride),
    SL__PARAM(window_ds, flags),
};

static const sl__sync_def window_def = {
    .node = {.kind = "window", SL__SYNC_NODE, .cardinality = window_cardinality,
             .structure = window_structure},
    .iter = {SL__SYNC_ITER(window_next)},
    .iter_size = sizeof(window_iter),
    SL__SYNC_STATE(window_state),
    SL__SYNC_PARAMS(window_params),
    SL__SYNC_REPLAY(window_replay, "emitted", NULL),
    .start = window_start,
    .fini = window_fini,
};

SL_API sl_dataset *sl_window(sl_dataset *in, int64_t size, int64_t shift, int64_t stride,
                             unsigned flags)
{
    window_ds *d = (window_ds *)sl__dataset_new(&window_def.node, sizeof *d, in);
    if (!d)
        return NULL;
    if (shift == 0)
        shift = size;
    if (size < 1 || shift < 1 || stride < 1 || size > (1 << 24) || stride > (1 << 24) ||
        (flags & ~SL_DROP_REMAINDER))
        return sl__dataset_fail(&d->base, SL_EINVAL, "window: size %lld, shift %lld, stride "
                                "%lld (each >= 1, size and stride at most 2^24), flags %#x",
                                (long long)size, (long long)shift, (long long)stride, flags);
    d->size = size;
    d->shift = shift;
    d->stride = stride;
    d->flags = flags;
    return &d->base;
}
