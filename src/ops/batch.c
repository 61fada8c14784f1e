/* batch(size, flags): stacks `size` consecutive elements along a new leading
 * dimension. Each input element is copied into the batch as it arrives and
 * released at once, so a batch never pins `size` input elements. */
#include <string.h>
#include "stack.h"

typedef struct batch_ds {
    sl_dataset base;
    int64_t size;
    unsigned flags;
} batch_ds;

typedef struct batch_iter {
    sl__iter base;
    sl__iter *in;
    int64_t in_card; /* input cardinality, to size the first buffers */
    int64_t pulled;  /* input elements pulled in this pass */
    sl__stack st;
    bool done;
} batch_iter;

static int64_t batch_card(const sl_dataset *ds)
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
        int rc = sl__iter_next(it->in, &el);
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

static void batch_destroy(sl__iter *base)
{
    batch_iter *it = (batch_iter *)base;
    sl__stack_reset(&it->st);
    sl__iter_free(it->in);
}

/* Between two outputs nothing is held: what was pulled and whether the
 * input ended, then the input's record. */
static int batch_save(sl__iter *base, sl__bytes *w)
{
    batch_iter *it = (batch_iter *)base;
    int64_t f[2] = {it->pulled, it->done};
    return sl__save_sync(w, base, 2, f, it->in);
}

static const sl__iter_ops batch_iter_ops = {
    .next = batch_next,
    .destroy = batch_destroy,
    .save = batch_save,
};

static int batch_make(const sl_dataset *ds, sl__tree *tree, uint64_t key, int64_t epoch,
                      sl__iter **out)
{
    batch_iter *it = sl__iter_alloc(&batch_iter_ops, sizeof *it, ds, tree, key, epoch);
    if (!it)
        return SL_ENOMEM;
    it->in_card = sl_dataset_cardinality(ds->inputs[0]);
    int64_t f[2];
    int rc = sl__iter_restored(&it->base, 2, f);
    if (rc > 0) {
        it->pulled = f[0];
        it->done = f[1] != 0;
        rc = sl__state_range(&it->base, "pulled", f[0], 0, INT64_MAX);
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

static uint64_t batch_fp(const sl_dataset *ds, uint64_t h)
{
    const batch_ds *b = (const batch_ds *)ds;
    return sl__hash_u64(sl__hash_u64(h, (uint64_t)b->size), b->flags);
}

static const sl__node_ops batch_ops = {
    .kind = "batch",
    .make_iter = batch_make,
    .cardinality = batch_card,
    .fingerprint = batch_fp,
};

SL_API sl_dataset *sl_batch(sl_dataset *in, int64_t size, unsigned flags)
{
    if (in && in->ops->fuse_batch && size >= 1 && !(flags & ~SL_DROP_REMAINDER))
        return in->ops->fuse_batch(in, size, flags);
    batch_ds *b = (batch_ds *)sl__dataset_new(&batch_ops, sizeof *b, in);
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
