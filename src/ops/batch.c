/* batch(size, flags): stacks `size` consecutive elements along a new leading
 * dimension. Each input element is copied into the batch as it arrives and
 * released at once, so a batch never pins `size` input elements. */
#include <string.h>
#include "../graph/sync.h"
#include "stack.h"

typedef struct batch_ds {
    sl_dataset base;
    int64_t size;
    int64_t flags;
} batch_ds;

typedef struct batch_iter {
    sl__sync_iter u;
    int64_t in_card; /* input cardinality, to size the first buffers */
    int64_t pulled;  /* input elements pulled in this pass */
    sl__stack st;
    bool done;
} batch_iter;

static int64_t batch_cardinality(const sl_dataset *ds)
{
    const batch_ds *b = (const batch_ds *)ds;
    int64_t in = sl_dataset_cardinality(ds->inputs[0]);
    if (in < 0)
        return in;
    return in / b->size + (!(b->flags & SL_DROP_REMAINDER) && in % b->size);
}

static int emit(batch_iter *it, sl_element **out)
{
    sl_element *el = sl__element_new(it->st.ncols, 0);
    if (!el)
        return SL_ENOMEM;
    int rc = sl__stack_emit(&it->st, el);
    if (rc < 0) {
        sl_element_release(el);
        return rc;
    }
    *out = el;
    return 0;
}

/* Pulls up to `size` elements into the stack; returns how many, or a
 * negative code. */
static int64_t fill(batch_iter *it, int64_t size)
{
    while (it->st.rows < size) {
        sl_element *el;
        int rc = sl__iter_next(it->u.in, &el);
        if (rc == SL_EOF) {
            it->done = true;
            break;
        }
        if (rc < 0)
            return rc;
        it->pulled++;
        /* reserve for the rows this batch will get: a short input's last
         * batch needs less than `size` */
        int64_t expect = size;
        if (it->st.rows == 0 && it->in_card >= 0 && it->in_card - it->pulled + 1 < size)
            expect = it->in_card - it->pulled + 1;
        rc = sl__stack_add(&it->st, el, expect, size);
        sl_element_release(el);
        if (rc < 0)
            return rc;
    }
    return it->st.rows;
}

static int batch_next(sl__iter *base, sl_element **out)
{
    batch_iter *it = (batch_iter *)base;
    const batch_ds *b = (const batch_ds *)base->ds;
    if (it->done)
        return SL_EOF;
    int64_t rows = fill(it, b->size);
    if (rows == SL__AGAIN)
        return SL__AGAIN; /* the rows stay for the next call */
    int rc;
    if (rows < 0)
        rc = (int)rows;
    else if (rows == 0 || (rows < b->size && (b->flags & SL_DROP_REMAINDER)))
        rc = SL_EOF;
    else
        rc = emit(it, out);
    sl__stack_reset(&it->st);
    return rc;
}

static void batch_fini(sl__sync_iter *u)
{
    sl__stack_reset(&((batch_iter *)u)->st);
}

static int batch_start(sl__sync_iter *u, bool resumed)
{
    (void)resumed;
    ((batch_iter *)u)->in_card = sl_dataset_cardinality(u->base.ds->inputs[0]);
    return 0;
}

/* Between two outputs nothing is held: what was pulled and whether the
 * input ended, then the input's record. */
static const sl__field batch_state[] = {
    SL__FIELD_I64(batch_iter, pulled, 0, INT64_MAX),
    SL__FIELD_BOOL(batch_iter, done),
};
static const sl__field batch_params[] = {SL__PARAM(batch_ds, size), SL__PARAM(batch_ds, flags)};

static int64_t batch_rows(const sl_dataset *ds, bool *drop)
{
    const batch_ds *b = (const batch_ds *)ds;
    *drop = b->flags & SL_DROP_REMAINDER;
    return b->size;
}

/* Each leaf gains a leading dimension: the batch size where every batch
 * has it (drop_remainder), else not known (tf.data's None). */
static void batch_leaf(sl__stext *t, int leaf, const sl__leaf_spec *spec, void *arg)
{
    (void)leaf;
    sl__leaf_spec b = *spec;
    if (b.ndim >= SL_MAX_DIMS) {
        b.ndim = -1;
    } else if (b.ndim >= 0) {
        memmove(b.shape + 1, b.shape, (size_t)b.ndim * sizeof *b.shape);
        b.shape[0] = *(const int64_t *)arg;
        b.ndim++;
    }
    sl__stext_leaf(t, &b);
}

static sl_structure *batch_structure(const sl_dataset *ds)
{
    const batch_ds *b = (const batch_ds *)ds;
    const sl_structure *in = sl_dataset_structure(ds->inputs[0]);
    int64_t rows = b->flags & SL_DROP_REMAINDER ? b->size : -1;
    return in ? sl__structure_rewrite(in, batch_leaf, &rows) : NULL;
}

static const sl__sync_def batch_def = {
    .node = {.kind = "batch", SL__SYNC_NODE, .cardinality = batch_cardinality,
             .batch_rows = batch_rows,
             .structure = batch_structure},
    .iter = {SL__SYNC_ITER(batch_next)},
    .iter_size = sizeof(batch_iter),
    SL__SYNC_STATE(batch_state),
    SL__SYNC_PARAMS(batch_params),
    .start = batch_start,
    .fini = batch_fini,
};

SL_API sl_dataset *sl_batch(sl_dataset *in, int64_t size, unsigned flags)
{
    if (in && in->ops->fuse_batch && size >= 1 && !(flags & ~SL_DROP_REMAINDER))
        return in->ops->fuse_batch(in, size, flags);
    batch_ds *b = (batch_ds *)sl__dataset_new(&batch_def.node, sizeof *b, in);
    if (!b)
        return NULL;
    if (size < 1)
        return sl__dataset_fail(&b->base, SL_EINVAL, "batch: size %lld must be >= 1",
                                (long long)size);
    if (flags & ~SL_DROP_REMAINDER)
        return sl__dataset_fail(&b->base, SL_EINVAL, "batch: unknown flags 0x%x",
                                flags & ~SL_DROP_REMAINDER);
    b->size = size;
    b->flags = flags;
    return &b->base;
}
