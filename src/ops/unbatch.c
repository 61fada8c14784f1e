/* unbatch: splits each input element along its first dimension. Slices of
 * fixed-size tensors are views of the input's buffers; string slices are
 * copied, since each needs its own offset table. */
#include <string.h>
#include "../graph/sync.h"

/* Inline room for the copied parts of one slice; bigger parts go to pooled
 * buffers. */
#define INLINE_MAX 1024

typedef struct unbatch_iter {
    sl__sync_iter u;
    sl_element *cur; /* the element being split */
    int64_t row, rows;
    bool done;
    /* saving: the input's record from before cur was pulled; restoring:
     * the row to resume at in the first element pulled, or -1 */
    sl__bytes before;
    sl__snapper snap;
    int64_t resume_row;
} unbatch_iter;

/* The rows of an input element where its structure says every tensor
 * has the same known first dimension (a batch that drops its remainder,
 * a fixed-size tensor); -1 otherwise. */
static int64_t known_rows(const sl_structure *s)
{
    int64_t rows = -1;
    if (!s)
        return -1;
    if (sl_structure_kind(s) == SL_STRUCTURE_LEAF) {
        const int64_t *shape = sl_structure_shape(s);
        return sl_structure_ndim(s) >= 1 ? shape[0] : -1;
    }
    for (int i = 0; i < sl_structure_size(s); i++) {
        int64_t r = known_rows(sl_structure_child(s, i));
        if (r < 0 || (rows >= 0 && r != rows))
            return -1;
        rows = r;
    }
    return rows;
}

static int64_t unbatch_cardinality(const sl_dataset *ds)
{
    int64_t in = sl_dataset_cardinality(ds->inputs[0]);
    if (in == 0)
        return 0;
    int64_t rows = known_rows(sl_dataset_structure(ds->inputs[0]));
    if (in < 0 || rows < 0) /* rows per element only known as they come */
        return in == SL_INFINITE && rows > 0 ? SL_INFINITE : SL_UNKNOWN;
    return rows && in > INT64_MAX / rows ? SL_UNKNOWN : in * rows;
}

static int check_element(const sl_element *el)
{
    if (el->n == 0)
        return sl__set_error(SL_ESHAPE, "unbatch: element has no tensors");
    for (int j = 0; j < el->n; j++) {
        const struct sl_tensor *t = &el->t[j];
        if (t->ndim == 0)
            return sl__set_error(SL_ESHAPE, "unbatch: tensor %d is a scalar", j);
        if (t->shape[0] != el->t[0].shape[0]) {
            char a[128], b[128];
            sl__shape_str(a, sizeof a, t->ndim, t->shape);
            sl__shape_str(b, sizeof b, el->t[0].ndim, el->t[0].shape);
            return sl__set_error(SL_ESHAPE, "unbatch: tensor %d has shape %s but tensor 0 has "
                                 "%s: first dimensions differ", j, a, b);
        }
    }
    return 0;
}

static size_t row_bytes(const struct sl_tensor *t)
{
    return (size_t)sl__shape_count(t->ndim - 1, t->shape + 1) * sl_dtype_size(t->dtype);
}

/* Inline bytes a slice of `src` needs for the parts that are copied. */
static size_t copied_bytes(const sl_element *src, int64_t row)
{
    size_t n = 0;
    for (int j = 0; j < src->n && n <= INLINE_MAX; j++) {
        const struct sl_tensor *t = &src->t[j];
        if (t->dtype == SL_STRING)
            n += sl__string_row_bytes(t, row) + 15;
        else if (!t->buf)
            n += row_bytes(t) + 15;
    }
    return n <= INLINE_MAX ? n : INLINE_MAX;
}

static int push_row(sl_element *el, const struct sl_tensor *t, int64_t row)
{
    if (t->dtype == SL_STRING)
        return sl__element_push_string_row(el, t, row);
    size_t rb = row_bytes(t);
    return sl__element_push_view(el, t->dtype, t->ndim - 1, t->shape + 1,
                                 (char *)t->data + (size_t)row * rb, rb, t->buf) ? 0 : SL_ENOMEM;
}

static int slice(unbatch_iter *it, sl_element **out)
{
    const sl_element *src = it->cur;
    sl_element *el = sl__element_new(src->n, copied_bytes(src, it->row));
    if (!el)
        return SL_ENOMEM;
    for (int j = 0; j < src->n; j++) {
        int rc = push_row(el, &src->t[j], it->row);
        if (rc < 0) {
            sl_element_release(el);
            return rc;
        }
    }
    it->row++;
    *out = el;
    return 0;
}

static int unbatch_next(sl__iter *base, sl_element **out)
{
    unbatch_iter *it = (unbatch_iter *)base;
    for (;;) {
        if (it->cur && it->row < it->rows)
            return slice(it, out);
        sl_element_release(it->cur);
        it->cur = NULL;
        if (it->done)
            return SL_EOF;
        sl_element *el;
        it->before.n = 0;
        sl__snap(&it->snap, it->u.in, &it->before);
        int rc = sl__iter_next(it->u.in, &el);
        if (rc == SL_EOF)
            it->done = true;
        if (rc)
            return rc;
        if ((rc = check_element(el)) < 0) {
            sl_element_release(el);
            return rc;
        }
        it->cur = el;
        it->row = 0;
        it->rows = el->t[0].shape[0];
        if (it->resume_row >= 0) {
            int64_t r = it->resume_row;
            it->resume_row = -1;
            if (r > it->rows)
                return sl__set_error(SL_ECORRUPT, "saved state: unbatch resumes at row %lld "
                                     "of an element of %lld rows", (long long)r,
                                     (long long)it->rows);
            it->row = r;
        }
    }
}

/* The record: the row within the element being split (or -1) and the
 * input's record from before it was pulled; without one, the input's
 * record now. Restored through unbatch_state, whose order this is. */
#define UNBATCH_FIELDS(X) X(resume_row) X(done)
SL__STATE_FIELDS(UNBATCH_FIELDS);

static int unbatch_save(sl__iter *base, sl__bytes *w)
{
    unbatch_iter *it = (unbatch_iter *)base;
    bool mid = it->cur && it->row < it->rows;
    int64_t f[NFIELDS] = {[F_resume_row] = mid ? it->row : -1, [F_done] = it->done};
    int rc = mid ? sl__snap_check(&it->snap, "unbatch") : 0;
    if (rc == 0)
        rc = sl__state_node(w, base, NFIELDS, f, 1);
    if (rc == 0)
        rc = mid ? sl__bytes_append(w, it->before.p, it->before.n) : sl__iter_save(it->u.in, w);
    return rc;
}

static void unbatch_fini(sl__sync_iter *u)
{
    unbatch_iter *it = (unbatch_iter *)u;
    sl_element_release(it->cur);
    sl__bytes_free(&it->before);
    sl__snap_fini(&it->snap);
}

static int unbatch_start(sl__sync_iter *u, bool resumed)
{
    if (!resumed)
        ((unbatch_iter *)u)->resume_row = -1;
    return 0;
}

/* Restoring only: unbatch_save writes the row (or -1) as resume_row. */
static const sl__field unbatch_state[] = {
    SL__FIELD_I64(unbatch_iter, resume_row, -1, INT64_MAX),
    SL__FIELD_BOOL(unbatch_iter, done),
};
_Static_assert(sizeof unbatch_state / sizeof *unbatch_state == NFIELDS,
               "unbatch_save writes unbatch_state's fields");

/* Each leaf loses its leading dimension. */
static void unbatch_leaf(sl__stext *t, int leaf, const sl__leaf_spec *spec, void *arg)
{
    (void)leaf, (void)arg;
    sl__leaf_spec u = *spec;
    if (u.ndim > 0) {
        u.ndim--;
        memmove(u.shape, u.shape + 1, (size_t)u.ndim * sizeof *u.shape);
    }
    sl__stext_leaf(t, &u);
}

static sl_structure *unbatch_structure(const sl_dataset *ds)
{
    const sl_structure *in = sl_dataset_structure(ds->inputs[0]);
    return in ? sl__structure_rewrite(in, unbatch_leaf, NULL) : NULL;
}

static const sl__sync_def unbatch_def = {
    .node = {.kind = "unbatch", SL__SYNC_NODE, .cardinality = unbatch_cardinality,
             .structure = unbatch_structure},
    .iter = {.next = unbatch_next, .destroy = sl__sync_destroy, .save = unbatch_save},
    .iter_size = sizeof(unbatch_iter),
    SL__SYNC_STATE(unbatch_state),
    .start = unbatch_start,
    .fini = unbatch_fini,
};

SL_API sl_dataset *sl_unbatch(sl_dataset *in)
{
    return sl__dataset_new(&unbatch_def.node, sizeof(sl_dataset), in);
}
