/* from_element(el): one element (tf.data's from_tensors), for the
 * datasets an interleave function builds around one input element. */
#include "../graph/node.h"

typedef struct one_ds {
    sl_dataset base;
    sl_element *el;
} one_ds;

typedef struct one_iter {
    sl__iter base;
    int64_t pos; /* 0 or 1 */
} one_iter;

static int one_next(sl__iter *base, sl_element **out)
{
    one_iter *it = (one_iter *)base;
    if (it->pos > 0)
        return SL_EOF;
    it->pos = 1;
    *out = sl_element_retain(((const one_ds *)base->ds)->el);
    return 0;
}

static int one_save(sl__iter *base, sl__bytes *w)
{
    return sl__save_pos(w, base, ((one_iter *)base)->pos);
}

static const sl__iter_ops one_iter_ops = {
    .next = one_next,
    .save = one_save,
};

static int one_make(const sl_dataset *ds, sl__tree *tree, uint64_t key, int64_t epoch,
                    sl__iter **out)
{
    one_iter *it = sl__iter_alloc(&one_iter_ops, sizeof *it, ds, tree, key, epoch);
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

static int64_t one_card(const sl_dataset *ds)
{
    (void)ds;
    return 1;
}

static uint64_t one_fp(const sl_dataset *ds, uint64_t h)
{
    /* the element's bytes: a path, typically */
    const sl_element *el = ((const one_ds *)ds)->el;
    for (int j = 0; j < el->n; j++) {
        h = sl__hash_u64(h, ((uint64_t)el->t[j].dtype << 8) | (uint64_t)el->t[j].ndim);
        h = sl__hash_bytes(h, el->t[j].shape, (size_t)el->t[j].ndim * sizeof(int64_t));
        h = sl__hash_bytes(h, el->t[j].data, el->t[j].nbytes);
    }
    return h;
}

static void one_destroy(sl_dataset *ds)
{
    sl_element_release(((one_ds *)ds)->el);
}

static bool one_can_get(const sl_dataset *ds)
{
    (void)ds;
    return true;
}

static int one_get(const sl_dataset *ds, int64_t index, sl_element **out)
{
    (void)index;
    *out = sl_element_retain(((const one_ds *)ds)->el);
    return 0;
}

static const sl__node_ops one_ops = {
    .kind = "from_element",
    .make_iter = one_make,
    .cardinality = one_card,
    .fingerprint = one_fp,
    .destroy = one_destroy,
    .can_get = one_can_get,
    .get = one_get,
};

SL_API sl_dataset *sl_from_element(sl_element *el)
{
    if (!el) {
        sl__set_error(SL_EINVAL, "from_element: NULL element");
        return NULL;
    }
    one_ds *d = (one_ds *)sl__dataset_new_source(&one_ops, sizeof *d);
    if (!d)
        return NULL;
    d->el = sl_element_retain(el);
    return &d->base;
}
