/* The column store behind batch: fixed-size tensors are copied into one
 * pooled buffer per column; strings are gathered into offsets and bytes. */
#include <string.h>
#include "stack.h"

/* Largest buffer allocated for a column before its rows are seen: bigger
 * batches start there and double, rather than reserve memory that a short
 * input would never fill. */
#define PREALLOC_MAX ((size_t)64 << 20)

/* Tensor j of the batch being built. */
struct sl__column {
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
};
typedef struct sl__column column;

void sl__stack_reset(sl__stack *s)
{
    for (int j = 0; j < s->ncols; j++) {
        column *c = &s->cols[j];
        sl__buf_release(c->buf);
        sl__free(c->off, c->off_cap * sizeof *c->off);
        sl__free(c->bytes, c->bytes_cap);
    }
    sl__free(s->cols, (size_t)s->ncols * sizeof *s->cols);
    s->cols = NULL;
    s->ncols = 0;
    s->rows = 0;
}

static int64_t initial_rows(int64_t expect, size_t item)
{
    int64_t rows = expect < 1 ? 1 : expect;
    if (item && (size_t)rows > PREALLOC_MAX / item) {
        rows = (int64_t)(PREALLOC_MAX / item);
        if (rows < 1)
            rows = 1;
    }
    return rows;
}

static int open_column(sl__stack *s, int j, const struct sl_tensor *t, int64_t expect)
{
    column *c = &s->cols[j];
    if (t->ndim >= SL_MAX_DIMS)
        return sl__set_error(SL_ESHAPE, "batch: tensor %d has rank %d; a batch dimension "
                             "would exceed the maximum rank %d", j, t->ndim, SL_MAX_DIMS);
    c->dtype = t->dtype;
    c->ndim = t->ndim;
    memcpy(c->shape, t->shape, sizeof c->shape);
    if (t->dtype == SL_STRING)
        return 0;
    c->item = t->nbytes;
    c->cap = initial_rows(expect, c->item);
    c->buf = sl__buf_get((size_t)c->cap * c->item);
    return c->buf ? 0 : SL_ENOMEM;
}

static int open_columns(sl__stack *s, const sl_element *first, int64_t expect)
{
    if (first->n == 0)
        return 0;
    s->cols = sl__calloc(first->n, sizeof *s->cols);
    if (!s->cols)
        return SL_ENOMEM;
    s->ncols = first->n;
    for (int j = 0; j < first->n; j++) {
        int rc = open_column(s, j, &first->t[j], expect);
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

int sl__stack_add(sl__stack *s, const sl_element *el, int64_t expect, int64_t max_rows)
{
    if (s->rows == 0 && !s->cols) {
        int rc = open_columns(s, el, expect);
        if (rc < 0)
            return rc;
    }
    if (el->n != s->ncols)
        return sl__set_error(SL_ESHAPE, "batch: element has %d tensors, the batch's first "
                             "element has %d", el->n, s->ncols);
    for (int j = 0; j < el->n; j++) {
        column *c = &s->cols[j];
        const struct sl_tensor *t = &el->t[j];
        int rc = check_tensor(c, j, t);
        if (rc == 0)
            rc = c->dtype == SL_STRING ? append_strings(c, t)
                                       : append_fixed(c, t, s->rows, max_rows);
        if (rc < 0)
            return rc;
    }
    s->rows++;
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

int sl__stack_emit(const sl__stack *s, sl_element *out)
{
    return sl__stack_emit_cols(s, out, 0, s->ncols);
}

int sl__stack_emit_cols(const sl__stack *s, sl_element *out, int from, int to)
{
    for (int j = from; j < to; j++) {
        int rc = push_column(out, &s->cols[j], s->rows);
        if (rc < 0)
            return rc;
    }
    return 0;
}
