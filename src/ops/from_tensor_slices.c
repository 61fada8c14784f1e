/* from_tensor_slices(element): slices along the first dimension, sharing
 * memory. Its kind stays "from_tensors", the name it had before it took
 * tf.data's: kinds are hashed into fingerprints and saved-state keys, and
 * the reports show the display name. */
#include <string.h>
#include "../graph/sync.h"

/* Inline room for the copied parts of one slice, at most. */
#define INLINE_MAX 1024

typedef struct from_tensor_slices_ds {
    sl_dataset base;
    sl_element *el;
    int64_t n;
} from_tensor_slices_ds;

static int push_slice(sl_element *out, const struct sl_tensor *t, int64_t i)
{
    if (t->dtype == SL_STRING)
        return sl__element_push_string_row(out, t, i);
    int64_t n = t->shape[0];
    size_t stride = n ? t->nbytes / (size_t)n : 0;
    if (!sl__element_push_view(out, t->dtype, t->ndim - 1, t->shape + 1,
                               (unsigned char *)t->data + (size_t)i * stride, stride, t->buf))
        return SL_ENOMEM;
    return 0;
}

static int from_tensor_slices_get(const sl_dataset *ds, int64_t i, sl_element **out)
{
    const from_tensor_slices_ds *d = (const from_tensor_slices_ds *)ds;
    size_t small = 0;
    for (int j = 0; j < d->el->n; j++) { /* strings and inline sources copy */
        const struct sl_tensor *t = &d->el->t[j];
        if (t->dtype == SL_STRING)
            small += sl__string_row_bytes(t, i);
        else if (!t->buf)
            small += 64;
    }
    if (small > INLINE_MAX) /* the rest goes to pooled buffers */
        small = INLINE_MAX;
    sl_element *el = sl__element_new(d->el->n, small);
    if (!el)
        return SL_ENOMEM;
    for (int j = 0; j < d->el->n; j++) {
        int rc = push_slice(el, &d->el->t[j], i);
        if (rc < 0) {
            sl_element_release(el);
            return rc;
        }
    }
    *out = el;
    return 0;
}

static int64_t from_tensor_slices_cardinality(const sl_dataset *ds)
{
    return ((const from_tensor_slices_ds *)ds)->n;
}

static uint64_t from_tensor_slices_fingerprint(const sl_dataset *ds, uint64_t h)
{
    const sl_element *el = ((const from_tensor_slices_ds *)ds)->el;
    for (int j = 0; j < el->n; j++) {
        const struct sl_tensor *t = &el->t[j];
        h = sl__hash_u64(h, (uint64_t)t->dtype);
        h = sl__hash_bytes(h, t->shape, (size_t)t->ndim * sizeof t->shape[0]);
        h = sl__hash_bytes(h, t->data, t->nbytes);
    }
    return h;
}

static void from_tensor_slices_destroy(sl_dataset *ds)
{
    sl_element_release(((from_tensor_slices_ds *)ds)->el);
}

static bool from_tensor_slices_can_get(const sl_dataset *ds)
{
    (void)ds;
    return true;
}

static const sl__sync_def from_tensor_slices_def = {
    .node = {.kind = "from_tensors", .display = "from_tensor_slices",
             .make_iter = sl__sync_make, .cardinality = from_tensor_slices_cardinality,
             .fingerprint = from_tensor_slices_fingerprint, .destroy = from_tensor_slices_destroy,
             .can_get = from_tensor_slices_can_get, .get = from_tensor_slices_get},
    SL__INDEXED_SOURCE(sl__indexed_start),
};

SL_API sl_dataset *sl_from_tensor_slices(sl_element *el)
{
    if (!el) {
        sl__set_error(SL_EINVAL, "from_tensor_slices: NULL element");
        return NULL;
    }
    from_tensor_slices_ds *d =
        (from_tensor_slices_ds *)sl__dataset_new_source(&from_tensor_slices_def.node, sizeof *d);
    if (!d) {
        sl_element_release(el);
        return NULL;
    }
    d->el = el;
    if (el->n == 0)
        return sl__dataset_fail(&d->base, SL_EINVAL,
                                "from_tensor_slices: the element has no tensors");
    for (int j = 0; j < el->n; j++) {
        const struct sl_tensor *t = &el->t[j];
        if (t->ndim < 1)
            return sl__dataset_fail(&d->base, SL_ESHAPE, "from_tensor_slices: tensor %d is a "
                                    "scalar; need a first dimension", j);
        if (t->shape[0] != el->t[0].shape[0]) {
            char a[128], b[128];
            sl__shape_str(a, sizeof a, t->ndim, t->shape);
            sl__shape_str(b, sizeof b, el->t[0].ndim, el->t[0].shape);
            return sl__dataset_fail(&d->base, SL_ESHAPE, "from_tensor_slices: tensor %d has "
                                    "shape %s, tensor 0 has %s: first dimensions differ", j,
                                    a, b);
        }
    }
    d->n = el->t[0].shape[0];
    return sl__dataset_structured(&d->base, sl__structure_of_element(el, 1));
}

SL_API sl_dataset *sl_from_tensors(sl_element *tensors)
{
    return sl_from_tensor_slices(tensors);
}
