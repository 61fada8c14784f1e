/* from_element(el): one element (tf.data's from_tensors), for the
 * datasets an interleave function builds around one input element. */
#include "../graph/node.h"

typedef struct from_element_ds {
    sl_dataset base;
    sl_element *el;
} from_element_ds;

typedef struct from_element_iter {
    sl__iter base;
    int64_t pos; /* 0 or 1 */
} from_element_iter;

static int from_element_next(sl__iter *base, sl_element **out)
{
    from_element_iter *it = (from_element_iter *)base;
    if (it->pos > 0)
        return SL_EOF;
    it->pos = 1;
    *out = sl_element_retain(((const from_element_ds *)base->ds)->el);
    return 0;
}

static int from_element_save(sl__iter *base, sl__bytes *w)
{
    return sl__save_pos(w, base, ((from_element_iter *)base)->pos);
}

static const sl__iter_ops from_element_iter_ops = {
    .next = from_element_next,
    .save = from_element_save,
};

static int from_element_make(const sl_dataset *ds, sl__tree *tree, uint64_t key, int64_t epoch,
                    sl__iter **out)
{
    from_element_iter *it = sl__iter_alloc(&from_element_iter_ops, sizeof *it, ds, tree, key, epoch);
    if (!it)
        return SL_ENOMEM;
    int rc = sl__restored_pos(&it->base, 1, &it->pos);
    if (rc < 0) {
        sl__iter_free(&it->base);
        return rc;
    }
    *out = &it->base;
    return 0;
}

static int64_t from_element_card(const sl_dataset *ds)
{
    (void)ds;
    return 1;
}

static uint64_t from_element_fp(const sl_dataset *ds, uint64_t h)
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

static const sl__node_ops from_element_ops = {
    .kind = "from_element",
    .make_iter = from_element_make,
    .cardinality = from_element_card,
    .fingerprint = from_element_fp,
    .destroy = from_element_destroy,
    .can_get = from_element_can_get,
    .get = from_element_get,
};

SL_API sl_dataset *sl_from_element(sl_element *el)
{
    if (!el) {
        sl__set_error(SL_EINVAL, "from_element: NULL element");
        return NULL;
    }
    from_element_ds *d = (from_element_ds *)sl__dataset_new_source(&from_element_ops, sizeof *d);
    if (!d)
        return NULL;
    d->el = sl_element_retain(el);
    return sl__dataset_structured(&d->base, sl__structure_of_element(el, 0));
}
