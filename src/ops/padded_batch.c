/* padded_batch(size, shapes, values, flags): batch of elements whose
 * tensors differ in shape (tf.data's padded_batch): tensor j of the batch
 * is [rows, d1, ...], each dimension the given padded shape's or, where
 * that is -1, the longest of the batch's; each element's values sit at the
 * start of its row, the rest is padding_values' tensor j (0, or "" for
 * strings, when not given). The rows are kept until the batch is complete
 * (a tensor's size is known only then), then copied once. */
#include <stdio.h>
#include <string.h>
#include "../graph/sync.h"

typedef struct padded_batch_ds {
    sl_dataset base;
    int64_t size, flags;
    int n;                   /* tensors the shapes and values describe, or 0 */
    int64_t *shapes;         /* n x SL_MAX_DIMS, -1: the batch's longest */
    sl_element *values;      /* n scalars, or NULL */
} padded_batch_ds;

typedef struct padded_batch_iter {
    sl__sync_iter u;
    int64_t pulled;
    bool done;
    sl_element **rows;
    int64_t nrows;
} padded_batch_iter;

static int64_t padded_batch_cardinality(const sl_dataset *ds)
{
    const padded_batch_ds *b = (const padded_batch_ds *)ds;
    int64_t in = sl_dataset_cardinality(ds->inputs[0]);
    if (in < 0)
        return in;
    return in / b->size + (!(b->flags & SL_DROP_REMAINDER) && in % b->size);
}

/* The padded shape of tensor j over the rows: 0, or an error. */
static int target_shape(const padded_batch_iter *it, int j, int64_t *shape)
{
    const padded_batch_ds *d = (const padded_batch_ds *)it->u.base.ds;
    const struct sl_tensor *t0 = &it->rows[0]->t[j];
    for (int k = 0; k < t0->ndim; k++)
        shape[k] = d->n ? d->shapes[j * SL_MAX_DIMS + k] : -1;
    int64_t longest[SL_MAX_DIMS] = {0};
    for (int64_t r = 0; r < it->nrows; r++) {
        const struct sl_tensor *t = &it->rows[r]->t[j];
        if (t->dtype != t0->dtype || t->ndim != t0->ndim)
            return sl__set_error(t->dtype != t0->dtype ? SL_EDTYPE : SL_ESHAPE,
                                 "padded_batch: tensor %d is %s of rank %d in one element and "
                                 "%s of rank %d in another", j, sl_dtype_name(t0->dtype),
                                 t0->ndim, sl_dtype_name(t->dtype), t->ndim);
        for (int k = 0; k < t->ndim; k++)
            if (t->shape[k] > longest[k])
                longest[k] = t->shape[k];
    }
    for (int k = 0; k < t0->ndim; k++) {
        if (shape[k] < 0)
            shape[k] = longest[k];
        else if (longest[k] > shape[k])
            return sl__set_error(SL_ESHAPE, "padded_batch: tensor %d has %lld in dimension %d, "
                                 "more than its padded shape's %lld", j,
                                 (long long)longest[k], k, (long long)shape[k]);
    }
    return 0;
}

/* Copies src (shape sshape) into dst laid out as dshape, recursively over
 * the leading dimension; the innermost runs are one memcpy each. */
static void place(char *dst, const int64_t *dshape, const char *src, const int64_t *sshape,
                  int ndim, size_t item)
{
    if (ndim == 0) {
        memcpy(dst, src, item);
        return;
    }
    size_t dinner = item, sinner = item;
    for (int k = 1; k < ndim; k++) {
        dinner *= (size_t)dshape[k];
        sinner *= (size_t)sshape[k];
    }
    if (ndim == 1) {
        memcpy(dst, src, (size_t)sshape[0] * item);
        return;
    }
    for (int64_t i = 0; i < sshape[0]; i++)
        place(dst + (size_t)i * dinner, dshape + 1, src + (size_t)i * sinner, sshape + 1,
              ndim - 1, item);
}

/* Fills n items of `item` bytes with the pad value (zero bytes if none). */
static void fill(char *dst, int64_t n, size_t item, const struct sl_tensor *pad)
{
    if (!pad || !sl_tensor_count(pad)) {
        memset(dst, 0, (size_t)n * item);
        return;
    }
    for (int64_t i = 0; i < n; i++)
        memcpy(dst + (size_t)i * item, pad->data, item);
}

static int numeric_column(padded_batch_iter *it, int j, const int64_t *shape,
                          const struct sl_tensor *pad, sl_element *out)
{
    const struct sl_tensor *t0 = &it->rows[0]->t[j];
    size_t item = sl_dtype_size(t0->dtype);
    int64_t per_row = sl__shape_count(t0->ndim, shape), full[SL_MAX_DIMS + 1] = {it->nrows};
    memcpy(full + 1, shape, (size_t)t0->ndim * sizeof *shape);
    if (pad && pad->dtype != t0->dtype)
        return sl__set_error(SL_EDTYPE, "padded_batch: padding value %d is %s, the tensor %s",
                             j, sl_dtype_name(pad->dtype), sl_dtype_name(t0->dtype));
    struct sl_tensor *t = sl__element_push(out, t0->dtype, t0->ndim + 1, full,
                                           (size_t)(it->nrows * per_row) * item);
    if (!t)
        return SL_ENOMEM;
    fill(t->data, it->nrows * per_row, item, pad);
    for (int64_t r = 0; r < it->nrows; r++) {
        const struct sl_tensor *s = &it->rows[r]->t[j];
        if (sl__shape_count(s->ndim, s->shape))
            place((char *)t->data + (size_t)(r * per_row) * item, shape, s->data, s->shape,
                  s->ndim, item);
    }
    return 0;
}

/* The item of a padded string tensor at flat index i of one row. */
static const char *string_at(const struct sl_tensor *s, const int64_t *shape, int ndim,
                             int64_t i, size_t *len)
{
    int64_t src = 0;
    for (int k = 0; k < ndim; k++) {
        int64_t inner = sl__shape_count(ndim - k - 1, shape + k + 1);
        int64_t at = i / inner % shape[k];
        if (at >= s->shape[k])
            return NULL;
        src = src * s->shape[k] + at;
    }
    return sl_tensor_string(s, src, len);
}

static int string_column(padded_batch_iter *it, int j, const int64_t *shape,
                         const struct sl_tensor *pad, sl_element *out)
{
    const struct sl_tensor *t0 = &it->rows[0]->t[j];
    int64_t per_row = sl__shape_count(t0->ndim, shape), total = it->nrows * per_row;
    int64_t full[SL_MAX_DIMS + 1] = {it->nrows};
    memcpy(full + 1, shape, (size_t)t0->ndim * sizeof *shape);
    size_t plen = 0;
    const char *pv = pad && pad->dtype == SL_STRING ? sl_tensor_string(pad, 0, &plen) : "";
    if (pad && pad->dtype != SL_STRING)
        return sl__set_error(SL_EDTYPE, "padded_batch: padding value %d is %s, the tensor "
                             "string", j, sl_dtype_name(pad->dtype));
    const char **items = sl__alloc((size_t)(total ? total : 1) * sizeof *items);
    size_t *lens = sl__alloc((size_t)(total ? total : 1) * sizeof *lens);
    int rc = items && lens ? 0 : SL_ENOMEM;
    for (int64_t r = 0; rc == 0 && r < it->nrows; r++)
        for (int64_t i = 0; i < per_row; i++) {
            int64_t at = r * per_row + i;
            items[at] = string_at(&it->rows[r]->t[j], shape, t0->ndim, i, &lens[at]);
            if (!items[at]) {
                items[at] = pv;
                lens[at] = plen;
            }
        }
    if (rc == 0)
        rc = sl_element_add_strings(out, t0->ndim + 1, full, items, lens);
    sl__free(items, (size_t)(total ? total : 1) * sizeof *items);
    sl__free(lens, (size_t)(total ? total : 1) * sizeof *lens);
    return rc;
}

static int emit(padded_batch_iter *it, sl_element **out)
{
    const padded_batch_ds *d = (const padded_batch_ds *)it->u.base.ds;
    int n = it->rows[0]->n;
    if (d->n && d->n != n)
        return sl__set_error(SL_ESHAPE, "padded_batch: elements of %d tensors, padded shapes "
                             "for %d", n, d->n);
    for (int64_t r = 1; r < it->nrows; r++)
        if (it->rows[r]->n != n)
            return sl__set_error(SL_ESHAPE, "padded_batch: elements of %d and %d tensors", n,
                                 it->rows[r]->n);
    sl_element *el = sl__element_new(n, 0);
    int rc = el ? 0 : SL_ENOMEM;
    for (int j = 0; rc == 0 && j < n; j++) {
        int64_t shape[SL_MAX_DIMS];
        rc = target_shape(it, j, shape);
        const struct sl_tensor *pad = d->values ? &d->values->t[j] : NULL;
        if (rc == 0)
            rc = it->rows[0]->t[j].dtype == SL_STRING ? string_column(it, j, shape, pad, el)
                                                       : numeric_column(it, j, shape, pad, el);
    }
    if (rc < 0) {
        sl_element_release(el);
        return rc;
    }
    *out = el;
    return 0;
}

static void drop_rows(padded_batch_iter *it)
{
    for (int64_t r = 0; r < it->nrows; r++)
        sl_element_release(it->rows[r]);
    it->nrows = 0;
}

static int padded_batch_next(sl__iter *base, sl_element **out)
{
    padded_batch_iter *it = (padded_batch_iter *)base;
    const padded_batch_ds *d = (const padded_batch_ds *)base->ds;
    while (!it->done && it->nrows < d->size) {
        sl_element *el;
        int rc = sl__iter_next(it->u.in, &el);
        if (rc == SL_EOF)
            it->done = true;
        else if (rc == SL__AGAIN)
            return rc; /* the rows stay for the next call */
        else if (rc) {
            drop_rows(it);
            return rc;
        } else {
            it->rows[it->nrows++] = el;
            it->pulled++;
        }
    }
    int rc = SL_EOF;
    if (it->nrows && (it->nrows == d->size || !(d->flags & SL_DROP_REMAINDER)))
        rc = emit(it, out);
    drop_rows(it);
    return rc;
}

static int padded_batch_start(sl__sync_iter *u, bool resumed)
{
    (void)resumed;
    padded_batch_iter *it = (padded_batch_iter *)u;
    int64_t size = ((const padded_batch_ds *)u->base.ds)->size;
    it->rows = sl__calloc((size_t)size, sizeof *it->rows);
    return it->rows ? 0 : SL_ENOMEM;
}

static void padded_batch_fini(sl__sync_iter *u)
{
    padded_batch_iter *it = (padded_batch_iter *)u;
    if (!it->rows)
        return;
    drop_rows(it);
    sl__free(it->rows, (size_t)((const padded_batch_ds *)u->base.ds)->size * sizeof *it->rows);
}

/* Each leaf gains the batch dimension; a dimension padded to the batch's
 * longest is not known, one with a padded size is that. */
static void padded_leaf(sl__stext *t, int leaf, const sl__leaf_spec *spec, void *arg)
{
    const padded_batch_ds *d = arg;
    sl__leaf_spec b = *spec;
    if (b.ndim >= SL_MAX_DIMS) {
        b.ndim = -1;
    } else if (b.ndim >= 0) {
        for (int k = b.ndim; k > 0; k--)
            b.shape[k] = d->n && leaf < d->n ? d->shapes[leaf * SL_MAX_DIMS + k - 1] : -1;
        b.shape[0] = d->flags & SL_DROP_REMAINDER ? d->size : -1;
        b.ndim++;
    }
    sl__stext_leaf(t, &b);
}

static sl_structure *padded_batch_structure(const sl_dataset *ds)
{
    const sl_structure *in = sl_dataset_structure(ds->inputs[0]);
    return in ? sl__structure_rewrite(in, padded_leaf, (void *)ds) : NULL;
}

static uint64_t padded_batch_fingerprint(const sl_dataset *ds, uint64_t h)
{
    const padded_batch_ds *d = (const padded_batch_ds *)ds;
    h = sl__hash_u64(sl__hash_u64(h, (uint64_t)d->size), (uint64_t)d->flags);
    if (d->n)
        h = sl__hash_bytes(h, d->shapes, (size_t)d->n * SL_MAX_DIMS * sizeof *d->shapes);
    for (int j = 0; d->values && j < d->values->n; j++)
        h = sl__hash_bytes(h, d->values->t[j].data, d->values->t[j].nbytes);
    return h;
}

static void padded_batch_destroy(sl_dataset *ds)
{
    padded_batch_ds *d = (padded_batch_ds *)ds;
    if (d->shapes)
        sl__free(d->shapes, (size_t)d->n * SL_MAX_DIMS * sizeof *d->shapes);
    sl_element_release(d->values);
}

/* Between two outputs nothing is held: as batch's. */
static const sl__field padded_batch_state[] = {
    SL__FIELD_I64(padded_batch_iter, pulled, 0, INT64_MAX),
    SL__FIELD_BOOL(padded_batch_iter, done),
};

static const sl__sync_def padded_batch_def = {
    .node = {.kind = "padded_batch", .make_iter = sl__sync_make,
             .fingerprint = padded_batch_fingerprint, .destroy = padded_batch_destroy,
             .cardinality = padded_batch_cardinality, .structure = padded_batch_structure},
    .iter = {SL__SYNC_ITER(padded_batch_next)},
    .iter_size = sizeof(padded_batch_iter),
    SL__SYNC_STATE(padded_batch_state),
    .start = padded_batch_start,
    .fini = padded_batch_fini,
};

SL_API sl_dataset *sl_padded_batch(sl_dataset *in, int64_t size, int n,
                                   const int64_t *padded_shapes, const sl_element *padding_values,
                                   unsigned flags)
{
    padded_batch_ds *d = (padded_batch_ds *)sl__dataset_new(&padded_batch_def.node, sizeof *d,
                                                             in);
    if (!d)
        return NULL;
    if (size < 1 || size > (1 << 24) || (flags & ~SL_DROP_REMAINDER) || n < 0 ||
        n > SL__MAX_INPUTS)
        return sl__dataset_fail(&d->base, SL_EINVAL, "padded_batch: size %lld (1 to 2^24), "
                                "flags %#x or %d tensors", (long long)size, flags, n);
    if (padding_values && padding_values->n != n)
        return sl__dataset_fail(&d->base, SL_EINVAL, "padded_batch: %d padding values for %d "
                                "tensors", padding_values->n, n);
    for (int j = 0; padding_values && j < n; j++)
        if (padding_values->t[j].ndim != 0)
            return sl__dataset_fail(&d->base, SL_ESHAPE, "padded_batch: padding value %d is "
                                    "not a scalar", j);
    d->size = size;
    d->flags = flags;
    if (n) {
        if (!(d->shapes = sl__alloc((size_t)n * SL_MAX_DIMS * sizeof *d->shapes)))
            return sl__dataset_fail(&d->base, SL_ENOMEM, "padded_batch: out of memory");
        d->n = n;
        for (int i = 0; i < n * SL_MAX_DIMS; i++)
            d->shapes[i] = padded_shapes && padded_shapes[i] >= 0 ? padded_shapes[i] : -1;
        d->values = padding_values ? sl_element_retain((sl_element *)padding_values) : NULL;
    }
    const sl_structure *s = sl_dataset_structure(d->base.inputs[0]);
    if (s && n && sl_structure_leaves(s) != n)
        return sl__dataset_fail(&d->base, SL_ESHAPE, "padded_batch: shapes or values for %d "
                                "tensors; the elements have %d", n, sl_structure_leaves(s));
    return &d->base;
}
