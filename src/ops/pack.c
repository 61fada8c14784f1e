/* pack(length, bins): variable-length sequences packed into rows of a
 * fixed length, as LLM trainers pack tokens (Grain's first-fit packing):
 * no padding between sequences, only at a row's end.
 *
 * Each leaf of an element is a sequence along its first dimension (its
 * other dimensions fixed). An element goes whole into the first of the
 * `bins` open rows where every leaf fits; when none has room, the oldest
 * row comes out and a new one takes the element. A row comes out as soon
 * as a leaf of it is full, and the open rows in order at the input's end.
 * A sequence longer than the row is cut to it.
 *
 * The output is (values, segment_ids, positions), each with the input's
 * structure: values' leaves [length, ...] of the input's dtype, zero past
 * the packed items; segment_ids' int32[length], 1 for the row's first
 * sequence, 2 for its second ..., 0 for padding; positions' int32[length],
 * each item's index in its own sequence (0 for padding). A row is the
 * element it is written into: nothing is copied on the way out.
 *
 * The open rows are the state: restoring replays the pass's input (as
 * group_by_window does) up to the rows given out. */
#include <stdio.h>
#include <string.h>
#include "../graph/sync.h"

typedef struct pack_ds {
    sl_dataset base;
    int64_t length, bins;
} pack_ds;

typedef struct row {
    sl_element *el; /* 3n tensors: values, segment ids, positions */
    int64_t *used;  /* per leaf: items filled */
    int32_t segments;
} row;

/* What the first element says every element's leaves are. */
typedef struct leaf {
    sl_dtype dtype;
    int ndim;
    int64_t shape[SL_MAX_DIMS]; /* [length, the element's other dimensions] */
    size_t item;                /* bytes of one item along the first dimension */
} leaf;

typedef struct pack_iter {
    sl__sync_iter u;
    int64_t pulled, emitted; /* saved: inputs taken, rows given */
    bool done;
    int n; /* leaves; 0 until the first element */
    leaf *leaves;
    row *rows; /* bins of them; the first `open` are open, oldest first */
    int64_t open;
    sl_element *ready[2]; /* rows given out by the last element, in order */
    int nready;
} pack_iter;

static const pack_ds *ds_of(const pack_iter *it)
{
    return (const pack_ds *)it->u.base.ds;
}

/* Learns the leaves from the first element, or checks el against them. */
static int check_leaves(pack_iter *it, const sl_element *el)
{
    const pack_ds *d = ds_of(it);
    if (!it->n) {
        if (el->n < 1 || el->n > 0xffff / 3)
            return sl__set_error(SL_ESHAPE, "pack: elements of %d tensors", el->n);
        if (!(it->leaves = sl__calloc((size_t)el->n, sizeof *it->leaves)))
            return SL_ENOMEM;
        for (int j = 0; j < el->n; j++) {
            const struct sl_tensor *t = &el->t[j];
            leaf *l = &it->leaves[j];
            l->dtype = t->dtype;
            l->ndim = t->ndim;
            memcpy(l->shape, t->shape, sizeof l->shape);
            l->shape[0] = d->length;
            l->item = sl_dtype_size(t->dtype);
            for (int k = 1; k < t->ndim; k++)
                l->item *= (size_t)t->shape[k];
        }
        it->n = el->n;
    }
    if (el->n != it->n)
        return sl__set_error(SL_ESHAPE, "pack: an element of %d tensors after elements of %d",
                             el->n, it->n);
    for (int j = 0; j < el->n; j++) {
        const struct sl_tensor *t = &el->t[j];
        const leaf *l = &it->leaves[j];
        if (t->dtype == SL_STRING || t->ndim < 1)
            return sl__set_error(t->dtype == SL_STRING ? SL_EDTYPE : SL_ESHAPE,
                                 "pack: tensor %d is %s of rank %d (sequences of numbers, "
                                 "rank 1 or more, are packed)", j, sl_dtype_name(t->dtype),
                                 t->ndim);
        bool same = t->dtype == l->dtype && t->ndim == l->ndim;
        for (int k = 1; same && k < t->ndim; k++)
            same = t->shape[k] == l->shape[k];
        if (!same) {
            char a[96], b[96];
            int64_t want[SL_MAX_DIMS];
            memcpy(want, l->shape, sizeof want);
            want[0] = t->shape[0];
            sl__shape_str(a, sizeof a, t->ndim, t->shape);
            sl__shape_str(b, sizeof b, l->ndim, want);
            return sl__set_error(t->dtype != l->dtype ? SL_EDTYPE : SL_ESHAPE,
                                 "pack: tensor %d is %s%s where the first element's was %s%s",
                                 j, sl_dtype_name(t->dtype), a, sl_dtype_name(l->dtype), b);
        }
    }
    return 0;
}

static int64_t items_of(const pack_iter *it, const sl_element *el, int j)
{
    int64_t n = el->t[j].shape[0], cap = ds_of(it)->length;
    return n < cap ? n : cap;
}

static bool fits(const pack_iter *it, const row *r, const sl_element *el)
{
    for (int j = 0; j < it->n; j++)
        if (r->used[j] + items_of(it, el, j) > ds_of(it)->length)
            return false;
    return true;
}

static bool full(const pack_iter *it, const row *r)
{
    for (int j = 0; j < it->n; j++)
        if (r->used[j] == ds_of(it)->length)
            return true;
    return false;
}

/* Opens a row at the end of the open ones (a slot is free). */
static int open_row(pack_iter *it)
{
    int n = it->n;
    int64_t len = ds_of(it)->length;
    row *r = &it->rows[it->open];
    sl_element *el = sl__element_new(3 * n, 0);
    for (int part = 0; el && part < 3; part++)
        for (int j = 0; j < n; j++) {
            const leaf *l = &it->leaves[j];
            bool values = part == 0;
            if (!sl__element_push(el, values ? l->dtype : SL_INT32, values ? l->ndim : 1,
                                  values ? l->shape : &len,
                                  values ? (size_t)len * l->item : (size_t)len * 4)) {
                sl_element_release(el);
                el = NULL;
                break;
            }
        }
    if (!el)
        return sl__set_error(SL_ENOMEM, "pack: out of memory for a row");
    if (!r->used && !(r->used = sl__calloc((size_t)n, sizeof *r->used))) {
        sl_element_release(el);
        return sl__set_error(SL_ENOMEM, "pack: out of memory");
    }
    memset(r->used, 0, (size_t)n * sizeof *r->used);
    r->el = el;
    r->segments = 0;
    it->open++;
    return 0;
}

static void place(pack_iter *it, row *r, const sl_element *el)
{
    int n = it->n;
    int32_t seg = ++r->segments;
    for (int j = 0; j < n; j++) {
        int64_t k = items_of(it, el, j), at = r->used[j];
        size_t item = it->leaves[j].item;
        if (k)
            memcpy((char *)r->el->t[j].data + (size_t)at * item, el->t[j].data,
                   (size_t)k * item);
        int32_t *ids = (int32_t *)r->el->t[n + j].data + at;
        int32_t *pos = (int32_t *)r->el->t[2 * n + j].data + at;
        for (int64_t i = 0; i < k; i++) {
            ids[i] = seg;
            pos[i] = (int32_t)i;
        }
        r->used[j] = at + k;
    }
}

/* Row i, its padding zeroed, into the ready queue; the rows after it move
 * up. */
static void give(pack_iter *it, int64_t i)
{
    row r = it->rows[i];
    int n = it->n;
    int64_t len = ds_of(it)->length;
    for (int j = 0; j < n; j++) {
        int64_t at = r.used[j], rest = len - at;
        size_t item = it->leaves[j].item;
        memset((char *)r.el->t[j].data + (size_t)at * item, 0, (size_t)rest * item);
        memset((int32_t *)r.el->t[n + j].data + at, 0, (size_t)rest * 4);
        memset((int32_t *)r.el->t[2 * n + j].data + at, 0, (size_t)rest * 4);
    }
    it->ready[it->nready++] = r.el;
    memmove(&it->rows[i], &it->rows[i + 1], (size_t)(it->open - i - 1) * sizeof r);
    it->open--;
    r.el = NULL;
    it->rows[it->open] = r; /* the freed slot keeps its used array */
}

/* One input element into a row: 0 (maybe with rows ready), 1 at the
 * input's end, or an error (an element's, after the policy). */
static int take_one(pack_iter *it)
{
    sl__iter *base = &it->u.base;
    sl_element *el;
    int rc = sl__iter_next(it->u.in, &el);
    if (rc == SL_EOF) {
        it->done = true;
        sl__sync_drop_input(&it->u, 0);
        return 1;
    }
    if (rc)
        return rc;
    it->pulled++;
    if ((rc = check_leaves(it, el)) < 0) {
        sl__element_error_prefix(el);
        sl_element_release(el);
        if (rc == SL_ENOMEM)
            return rc;
        return it->u.replaying ? 0 : sl__policy(base, rc); /* skipped before: again */
    }
    int64_t i = 0;
    while (i < it->open && !fits(it, &it->rows[i], el))
        i++;
    if (i == it->open) {
        if (it->open == ds_of(it)->bins)
            give(it, 0);
        if ((rc = open_row(it)) < 0) {
            sl_element_release(el);
            return rc;
        }
        i = it->open - 1;
    }
    place(it, &it->rows[i], el);
    sl_element_release(el);
    if (full(it, &it->rows[i]))
        give(it, i);
    return 0;
}

/* The next row: one ready, or more input packed until one is, or the
 * open rows at the end. */
static int produce(pack_iter *it, sl_element **out)
{
    while (!it->nready) {
        int rc = it->done ? 1 : take_one(it);
        if (rc < 0)
            return rc;
        if (rc == 1) {
            if (!it->open)
                return SL_EOF;
            give(it, 0);
        }
    }
    *out = it->ready[0];
    it->ready[0] = it->ready[1];
    it->nready--;
    return 0;
}

static int pack_next(sl__iter *base, sl_element **out)
{
    pack_iter *it = (pack_iter *)base;
    int rc = produce(it, out);
    if (rc == 0)
        it->emitted++;
    return rc;
}

static int pack_replay(sl__sync_iter *u)
{
    sl_element *el;
    int rc = pack_next(&u->base, &el);
    if (rc == 0)
        sl_element_release(el);
    return rc;
}

static int pack_start(sl__sync_iter *u, bool resumed)
{
    (void)resumed;
    pack_iter *it = (pack_iter *)u;
    if (!(it->rows = sl__calloc((size_t)ds_of(it)->bins, sizeof *it->rows)))
        return sl__set_error(SL_ENOMEM, "pack: out of memory");
    return 0;
}

static void pack_fini(sl__sync_iter *u)
{
    pack_iter *it = (pack_iter *)u;
    for (int64_t i = 0; it->rows && i < ds_of(it)->bins; i++) {
        sl_element_release(it->rows[i].el);
        if (it->rows[i].used)
            sl__free(it->rows[i].used, (size_t)it->n * sizeof *it->rows[i].used);
    }
    if (it->rows)
        sl__free(it->rows, (size_t)ds_of(it)->bins * sizeof *it->rows);
    for (int i = 0; i < it->nready; i++)
        sl_element_release(it->ready[i]);
    if (it->leaves)
        sl__free(it->leaves, (size_t)it->n * sizeof *it->leaves);
}

static int64_t pack_cardinality(const sl_dataset *ds)
{
    int64_t n = sl_dataset_cardinality(ds->inputs[0]);
    return n == 0 || n == SL_INFINITE ? n : SL_UNKNOWN;
}

/* values: the leaf with its first dimension the row length (a leaf of
 * unknown rank stays so); segment ids and positions: int32[length] */
static void values_leaf(sl__stext *t, int leaf, const sl__leaf_spec *spec, void *arg)
{
    (void)leaf;
    sl__leaf_spec v = *spec;
    if (v.ndim >= 1)
        v.shape[0] = *(const int64_t *)arg;
    sl__stext_leaf(t, &v);
}

static void ids_leaf(sl__stext *t, int leaf, const sl__leaf_spec *spec, void *arg)
{
    (void)leaf, (void)spec;
    sl__leaf_spec v = {.dtype = SL_INT32, .ndim = 1, .shape = {*(const int64_t *)arg}};
    sl__stext_leaf(t, &v);
}

static sl_structure *pack_structure(const sl_dataset *ds)
{
    const pack_ds *d = (const pack_ds *)ds;
    const sl_structure *in = sl_dataset_structure(ds->inputs[0]);
    if (!in)
        return NULL;
    sl_structure *values = sl__structure_rewrite(in, values_leaf, (void *)&d->length);
    sl_structure *ids = sl__structure_rewrite(in, ids_leaf, (void *)&d->length);
    const sl_structure *items[3] = {values, ids, ids};
    sl_structure *s = values && ids ? sl__structure_compose(3, items, NULL) : NULL;
    sl_structure_release(values);
    sl_structure_release(ids);
    return s;
}

static const sl__field pack_state[] = {
    SL__FIELD_I64(pack_iter, pulled, 0, INT64_MAX),
    SL__FIELD_I64(pack_iter, emitted, 0, INT64_MAX),
};
static const sl__field pack_params[] = {SL__PARAM(pack_ds, length), SL__PARAM(pack_ds, bins)};

static const sl__sync_def pack_def = {
    .node = {.kind = "pack", SL__SYNC_NODE, .cardinality = pack_cardinality,
             .structure = pack_structure},
    .iter = {SL__SYNC_ITER(pack_next)},
    .iter_size = sizeof(pack_iter),
    SL__SYNC_STATE(pack_state),
    SL__SYNC_PARAMS(pack_params),
    SL__SYNC_REPLAY(pack_replay, "emitted", NULL),
    .start = pack_start,
    .fini = pack_fini,
};

SL_API sl_dataset *sl_pack(sl_dataset *in, int64_t length, int64_t bins)
{
    pack_ds *d = (pack_ds *)sl__dataset_new(&pack_def.node, sizeof *d, in);
    if (!d)
        return NULL;
    if (length < 1 || length > INT32_MAX || bins < 1 || bins > 4096)
        return sl__dataset_fail(&d->base, SL_EINVAL, "pack: sequence length %lld (1 to 2^31 - "
                                "1) and %lld bins (1 to 4096)", (long long)length,
                                (long long)bins);
    d->length = length;
    d->bins = bins;
    const sl_structure *s = sl_dataset_structure(in);
    if (s && sl_structure_leaves(s) * 3 > 0xffff)
        return sl__dataset_fail(&d->base, SL_ESHAPE, "pack: elements of %d tensors",
                                sl_structure_leaves(s));
    return &d->base;
}
