/* from_element(el): one element (tf.data's from_tensors), for the
 * datasets an interleave function builds around one input element. */
#include "../graph/sync.h"

typedef struct from_element_ds {
    sl_dataset base;
    sl_element *el;
} from_element_ds;

static int64_t from_element_cardinality(const sl_dataset *ds)
{
    (void)ds;
    return 1;
}

static uint64_t from_element_fingerprint(const sl_dataset *ds, uint64_t h)
{
    /* the element's bytes: a path, typically */
    const sl_element *el = ((const from_element_ds *)ds)->el;
    for (int j = 0; j < el->n; j++) {
        h = sl__hash_u64(h, ((uint64_t)el->t[j].dtype << 8) | (uint64_t)el->t[j].ndim);
        h = sl__hash_bytes(h, el->t[j].shape, (size_t)el->t[j].ndim * sizeof(int64_t));
        h = sl__hash_bytes(h, el->t[j].data, el->t[j].nbytes);
    }
    return h;
}

static void from_element_destroy(sl_dataset *ds)
{
    sl_element_release(((from_element_ds *)ds)->el);
}

static bool from_element_can_get(const sl_dataset *ds)
{
    (void)ds;
    return true;
}

static int from_element_get(const sl_dataset *ds, int64_t index, sl_element **out)
{
    (void)index;
    *out = sl_element_retain(((const from_element_ds *)ds)->el);
    return 0;
}

static const sl__sync_def from_element_def = {
    .node = {.kind = "from_element", .make_iter = sl__sync_make,
             .cardinality = from_element_cardinality, .fingerprint = from_element_fingerprint,
             .destroy = from_element_destroy, .can_get = from_element_can_get,
             .get = from_element_get},
    SL__INDEXED_SOURCE(sl__indexed_start),
};

SL_API sl_dataset *sl_from_element(sl_element *el)
{
    if (!el) {
        sl__set_error(SL_EINVAL, "from_element: NULL element");
        return NULL;
    }
    from_element_ds *d = (from_element_ds *)sl__dataset_new_source(&from_element_def.node, sizeof *d);
    if (!d)
        return NULL;
    d->el = sl_element_retain(el);
    return sl__dataset_structured(&d->base, sl__structure_of_element(el, 0));
}
