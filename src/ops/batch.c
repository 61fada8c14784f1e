/* batch(size, flags): stacks `size` consecutive elements along a new leading
 * dimension. Each input element is copied into the batch as it arrives and
 * released at once, so a batch never pins `size` input elements. */
#include <string.h>
#include "../graph/node.h"

/* Largest buffer allocated for a column before its rows are seen: bigger
 * batches start there and double, rather than reserve memory that a short
 * input would never fill. */
#define PREALLOC_MAX ((size_t)64 << 20)

typedef struct batch_ds {
    sl_dataset base;
    int64_t size;
    unsigned flags;
} batch_ds;

/* Tensor j of the batch being built. */
typedef struct column {
    sl_dtype dtype;
    int ndim;
    int64_t shape[SL_MAX_DIMS]; /* of one element (the batch's first) */
    /* fixed-size dtypes: rows stacked in buf */
    size_t item; /* bytes of one element's tensor */
    sl__buf *buf;
    int64_t cap; /* rows buf holds */
    /* strings: offsets (nstr + 1) and bytes, gathered until the batch ends */
    uint64_t *off;
    size_t off_cap, nstr;
    char *bytes;
    size_t bytes_cap, bytes_len;
} column;

typedef struct batch_iter {
    sl__iter base;
    sl__iter *in;
    int64_t in_card; /* input cardinality, to size the first buffers */
    int64_t pulled;  /* input elements pulled in this pass */
    column *cols;
    int ncols;
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

static void free_columns(batch_iter *it)
{
    for (int j = 0; j < it->ncols; j++) {
        column *c = &it->cols[j];
        sl__buf_release(c->buf);
        sl__free(c->off, c->off_cap * sizeof *c->off);
        sl__free(c->bytes, c->bytes_cap);
    }
    sl__free(it->cols, (size_t)it->ncols * sizeof *it->cols);
    it->cols = NULL;
    it->ncols = 0;
}

/* Rows to reserve for a column of `item` bytes, the batch's first element
 * having just been pulled. */
static int64_t initial_rows(const batch_iter *it, size_t item)
{
    int64_t rows = ((const batch_ds *)it->base.ds)->size;
    int64_t left = it->in_card >= 0 ? it->in_card - it->pulled + 1 : rows;
    if (left >= 1 && left < rows)
        rows = left;
    if (item && (size_t)rows > PREALLOC_MAX / item) {
        rows = (int64_t)(PREALLOC_MAX / item);
        if (rows < 1)
            rows = 1;
    }
    return rows;
}

static int open_column(batch_iter *it, int j, const struct sl_tensor *t)
{
    column *c = &it->cols[j];
    if (t->ndim >= SL_MAX_DIMS)
        return sl__set_error(SL_ESHAPE, "batch: tensor %d has rank %d; a batch dimension "
                             "would exceed the maximum rank %d", j, t->ndim, SL_MAX_DIMS);
    c->dtype = t->dtype;
    c->ndim = t->ndim;
    memcpy(c->shape, t->shape, sizeof c->shape);
    if (t->dtype == SL_STRING)
        return 0;
    c->item = t->nbytes;
    c->cap = initial_rows(it, c->item);
    c->buf = sl__buf_get((size_t)c->cap * c->item);
    return c->buf ? 0 : SL_ENOMEM;
}

static int open_columns(batch_iter *it, const sl_element *first)
{
    if (first->n == 0)
        return 0;
    it->cols = sl__calloc(first->n, sizeof *it->cols);
    if (!it->cols)
        return SL_ENOMEM;
    it->ncols = first->n;
    for (int j = 0; j < first->n; j++) {
        int rc = open_column(it, j, &first->t[j]);
        if (rc < 0)
            return rc;
    }
    return 0;
}

/* Doubling growth of a plain array of `unit`-byte items to hold `need`. */
static int grow(void **p, size_t *cap, size_t need, size_t unit)
{
    if (need <= *cap)
        return 0;
    size_t ncap = *cap ? *cap : 16;
    while (ncap < need) {
        if (ncap > SIZE_MAX / 2 / unit)
            return sl__set_error(SL_ENOMEM, "batch: string data too large");
        ncap *= 2;
    }
    void *q = sl__alloc(ncap * unit);
    if (!q)
        return SL_ENOMEM;
    if (*cap)
        memcpy(q, *p, *cap * unit);
    sl__free(*p, *cap * unit);
    *p = q;
    *cap = ncap;
    return 0;
}

static int append_strings(column *c, const struct sl_tensor *t)
{
    size_t n = (size_t)sl__shape_count(t->ndim, t->shape);
    const uint64_t *off = sl__str_offsets(t);
    const char *bytes = (const char *)(off + n + 1);
    size_t len = (size_t)(off[n] - off[0]);
    if (grow((void **)&c->off, &c->off_cap, c->nstr + n + 1, sizeof *c->off) < 0 ||
        grow((void **)&c->bytes, &c->bytes_cap, c->bytes_len + len, 1) < 0)
        return SL_ENOMEM;
    if (c->nstr == 0)
        c->off[0] = 0;
    for (size_t i = 0; i < n; i++)
        c->off[c->nstr + i + 1] = c->bytes_len + (off[i + 1] - off[0]);
    if (len)
        memcpy(c->bytes + c->bytes_len, bytes + off[0], len);
    c->nstr += n;
    c->bytes_len += len;
    return 0;
}

static int append_fixed(column *c, const struct sl_tensor *t, int64_t row, int64_t size)
{
    if (c->item == 0) /* empty tensors: nothing to store */
        return 0;
    if (row >= c->cap) {
        int64_t ncap = c->cap > size / 2 ? size : c->cap * 2;
        if ((size_t)ncap > SIZE_MAX / c->item)
            return sl__set_error(SL_ENOMEM, "batch: %lld rows of %zu bytes are too large",
                                 (long long)ncap, c->item);
        sl__buf *nb = sl__buf_get((size_t)ncap * c->item);
        if (!nb)
            return SL_ENOMEM;
        memcpy(nb->data, c->buf->data, (size_t)row * c->item);
        sl__buf_release(c->buf);
        c->buf = nb;
        c->cap = ncap;
    }
    memcpy(c->buf->data + (size_t)row * c->item, t->data, c->item);
    return 0;
}

static int check_tensor(const column *c, int j, const struct sl_tensor *t)
{
    if (t->dtype != c->dtype)
        return sl__set_error(SL_EDTYPE, "batch: tensor %d: dtype %s does not match %s of the "
                             "batch's first element", j, sl_dtype_name(t->dtype),
                             sl_dtype_name(c->dtype));
    if (t->ndim != c->ndim || memcmp(t->shape, c->shape, (size_t)t->ndim * sizeof *t->shape)) {
        char got[128], want[128];
        sl__shape_str(got, sizeof got, t->ndim, t->shape);
        sl__shape_str(want, sizeof want, c->ndim, c->shape);
        return sl__set_error(SL_ESHAPE, "batch: tensor %d: shape %s does not match %s of the "
                             "batch's first element", j, got, want);
    }
    return 0;
}

static int add_row(batch_iter *it, const sl_element *el, int64_t row)
{
    if (el->n != it->ncols)
        return sl__set_error(SL_ESHAPE, "batch: element has %d tensors, the batch's first "
                             "element has %d", el->n, it->ncols);
    int64_t size = ((const batch_ds *)it->base.ds)->size;
    for (int j = 0; j < el->n; j++) {
        column *c = &it->cols[j];
        const struct sl_tensor *t = &el->t[j];
        int rc = check_tensor(c, j, t);
        if (rc == 0)
            rc = c->dtype == SL_STRING ? append_strings(c, t) : append_fixed(c, t, row, size);
        if (rc < 0)
            return rc;
    }
    return 0;
}

static int push_column(sl_element *el, const column *c, int64_t rows)
{
    int64_t shape[SL_MAX_DIMS];
    shape[0] = rows;
    memcpy(shape + 1, c->shape, (size_t)c->ndim * sizeof *shape);
    if (c->dtype != SL_STRING) /* the element takes its own reference */
        return sl__element_push_view(el, c->dtype, c->ndim + 1, shape, c->buf->data,
                                     (size_t)rows * c->item, c->buf) ? 0 : SL_ENOMEM;
    size_t head = (c->nstr + 1) * sizeof *c->off;
    struct sl_tensor *t = sl__element_push(el, SL_STRING, c->ndim + 1, shape,
                                           head + c->bytes_len);
    if (!t)
        return SL_ENOMEM;
    if (c->off)
        memcpy(t->data, c->off, head);
    else /* no rows had any strings */
        *(uint64_t *)t->data = 0;
    if (c->bytes_len)
        memcpy((char *)t->data + head, c->bytes, c->bytes_len);
    return 0;
}

static int emit(batch_iter *it, int64_t rows, sl_element **out)
{
    sl_element *el = sl__element_new(it->ncols, 0);
    if (!el)
        return SL_ENOMEM;
    for (int j = 0; j < it->ncols; j++) {
        int rc = push_column(el, &it->cols[j], rows);
        if (rc < 0) {
            sl_element_release(el);
            return rc;
        }
    }
    *out = el;
    return 0;
}

/* Pulls up to `size` elements into the columns; returns how many, or a
 * negative code. */
static int64_t fill(batch_iter *it, int64_t size)
{
    int64_t rows = 0;
    while (rows < size) {
        sl_element *el;
        int rc = sl__iter_next(it->in, &el);
        if (rc == SL_EOF) {
            it->done = true;
            break;
        }
        if (rc < 0)
            return rc;
        it->pulled++;
        if (rows == 0)
            rc = open_columns(it, el);
        if (rc == 0)
            rc = add_row(it, el, rows);
        sl_element_release(el);
        if (rc < 0)
            return rc;
        rows++;
    }
    return rows;
}

static int batch_next(sl__iter *base, sl_element **out)
{
    batch_iter *it = (batch_iter *)base;
    const batch_ds *b = (const batch_ds *)base->ds;
    if (it->done)
        return SL_EOF;
    int64_t rows = fill(it, b->size);
    int rc;
    if (rows < 0)
        rc = (int)rows;
    else if (rows == 0 || (rows < b->size && (b->flags & SL_DROP_REMAINDER)))
        rc = SL_EOF;
    else
        rc = emit(it, rows, out);
    free_columns(it);
    return rc;
}

static void batch_destroy(sl__iter *base)
{
    batch_iter *it = (batch_iter *)base;
    free_columns(it);
    sl__iter_free(it->in);
}

static const sl__iter_ops batch_iter_ops = {batch_next, NULL, batch_destroy};

static int batch_make(const sl_dataset *ds, sl__tree *tree, uint64_t key, int64_t epoch,
                      sl__iter **out)
{
    batch_iter *it = sl__iter_alloc(&batch_iter_ops, sizeof *it, ds, tree, key, epoch);
    if (!it)
        return SL_ENOMEM;
    it->in_card = sl_dataset_cardinality(ds->inputs[0]);
    int rc = sl__iter_make_input(&it->base, 0, epoch, &it->in);
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
