/* zip(inputs): element i is element i of every input, as a tuple, or as a
 * dict under the inputs' keys (tf.data's zip); it ends with the shortest
 * input. The element's tensors are the inputs' tensors, shared, in the
 * structure's order: a dict's inputs are kept sorted by key. */
#include <stdlib.h>
#include <string.h>
#include "../graph/sync.h"

typedef struct zip_ds {
    sl_dataset base;
    char **keys; /* ninputs keys, sorted, or NULL: a tuple */
} zip_ds;

typedef struct zip_iter {
    sl__sync_iter u;
    bool done;
    sl_element **pulled; /* one element per input, while an element is made */
} zip_iter;

static int64_t zip_cardinality(const sl_dataset *ds)
{
    int64_t n = SL_INFINITE;
    bool unknown = false;
    for (int i = 0; i < ds->ninputs; i++) {
        int64_t c = sl_dataset_cardinality(ds->inputs[i]);
        if (c == SL_UNKNOWN)
            unknown = true;
        else if (c >= 0 && (n < 0 || c < n))
            n = c;
    }
    /* an input known to be empty ends it whatever the others are */
    return n == 0 ? 0 : unknown ? SL_UNKNOWN : n;
}

static void release_pulled(zip_iter *it, int n)
{
    for (int i = 0; i < n; i++) {
        sl_element_release(it->pulled[i]);
        it->pulled[i] = NULL;
    }
}

static int zip_next(sl__iter *base, sl_element **out)
{
    zip_iter *it = (zip_iter *)base;
    int n = base->ds->ninputs, tensors = 0;
    if (it->done)
        return SL_EOF;
    /* inputs pulled before one that stops are not given back: tf.data's
     * zip drops them too, and a saved position counts them as taken */
    for (int i = 0; i < n; i++) {
        int rc = sl__iter_next(it->u.ins[i], &it->pulled[i]);
        if (rc != 0) {
            release_pulled(it, i);
            if (rc == SL_EOF)
                it->done = true;
            return rc;
        }
        tensors += it->pulled[i]->n;
    }
    sl_element *el = sl_element_create(tensors);
    int rc = el ? 0 : SL_ENOMEM;
    for (int i = 0; rc == 0 && i < n; i++)
        for (int j = 0; rc == 0 && j < it->pulled[i]->n; j++)
            rc = sl_element_add_shared(el, it->pulled[i], j);
    release_pulled(it, n);
    if (rc < 0) {
        sl_element_release(el);
        return sl__set_error(rc, "zip: out of memory");
    }
    *out = el;
    return 0;
}

static int zip_start(sl__sync_iter *u, bool resumed)
{
    (void)resumed;
    zip_iter *it = (zip_iter *)u;
    it->pulled = sl__calloc((size_t)u->base.ds->ninputs, sizeof *it->pulled);
    return it->pulled ? 0 : SL_ENOMEM;
}

static void zip_fini(sl__sync_iter *u)
{
    zip_iter *it = (zip_iter *)u;
    if (it->pulled)
        sl__free(it->pulled, (size_t)u->base.ds->ninputs * sizeof *it->pulled);
}

static sl_structure *zip_structure(const sl_dataset *ds)
{
    const zip_ds *z = (const zip_ds *)ds;
    int n = ds->ninputs;
    const sl_structure **items = sl__calloc((size_t)n, sizeof *items);
    if (!items)
        return NULL;
    for (int i = 0; i < n; i++)
        items[i] = sl_dataset_structure(ds->inputs[i]);
    sl_structure *s = sl__structure_compose(n, items, (const char *const *)z->keys);
    sl__free(items, (size_t)n * sizeof *items);
    return s;
}

/* The keys name the inputs; their hash stands for them in the fingerprint
 * (the inputs themselves are mixed in by the caller, in order). */
static uint64_t zip_fingerprint(const sl_dataset *ds, uint64_t h)
{
    const zip_ds *z = (const zip_ds *)ds;
    for (int i = 0; z->keys && i < ds->ninputs; i++)
        h = sl__hash_str(h, z->keys[i]);
    return sl__hash_u64(h, (uint64_t)ds->ninputs);
}

static void zip_destroy(sl_dataset *ds)
{
    zip_ds *z = (zip_ds *)ds;
    for (int i = 0; z->keys && i < ds->ninputs; i++)
        sl__strfree(z->keys[i]);
    if (z->keys)
        sl__free(z->keys, (size_t)ds->ninputs * sizeof *z->keys);
}

static const sl__field zip_state[] = {SL__FIELD_BOOL(zip_iter, done)};

static const sl__sync_def zip_def = {
    .node = {.kind = "zip", .make_iter = sl__sync_make, .cardinality = zip_cardinality,
             .fingerprint = zip_fingerprint, .destroy = zip_destroy,
             .structure = zip_structure},
    .iter = {SL__SYNC_ITER(zip_next)},
    .iter_size = sizeof(zip_iter),
    SL__SYNC_STATE(zip_state),
    .start = zip_start,
    .fini = zip_fini,
};

typedef struct keyed {
    const char *key;
    sl_dataset *ds;
} keyed;

static int by_key(const void *a, const void *b)
{
    return strcmp(((const keyed *)a)->key, ((const keyed *)b)->key);
}

static sl_dataset *refuse(sl_dataset *const *inputs, int n, int code, const char *msg)
{
    for (int i = 0; inputs && i < n && i < SL__MAX_INPUTS; i++)
        sl_dataset_release(inputs[i]);
    sl__set_error(code, "zip: %s", msg);
    return NULL;
}

SL_API sl_dataset *sl_zip(sl_dataset *const *inputs, int n, const char *const *keys)
{
    if (!inputs || n < 1 || n > SL__MAX_INPUTS)
        return refuse(inputs, n, SL_EINVAL, "1 to 4096 inputs");
    for (int i = 0; keys && i < n; i++)
        if (!keys[i])
            return refuse(inputs, n, SL_EINVAL, "a NULL key");
    keyed *k = sl__calloc((size_t)n, sizeof *k);
    if (!k)
        return refuse(inputs, n, SL_ENOMEM, "out of memory");
    for (int i = 0; i < n; i++)
        k[i] = (keyed){keys ? keys[i] : NULL, inputs[i]};
    if (keys) /* a dict's leaves come in key order: so do its inputs */
        qsort(k, (size_t)n, sizeof *k, by_key);
    for (int i = 1; keys && i < n; i++)
        if (!strcmp(k[i - 1].key, k[i].key)) {
            char msg[256];
            snprintf(msg, sizeof msg, "key \"%.200s\" twice", k[i].key);
            sl__free(k, (size_t)n * sizeof *k);
            return refuse(inputs, n, SL_EINVAL, msg);
        }
    sl_dataset **sorted = sl__calloc((size_t)n, sizeof *sorted);
    zip_ds *z = NULL;
    if (sorted) {
        for (int i = 0; i < n; i++)
            sorted[i] = k[i].ds;
        z = (zip_ds *)sl__dataset_new_n(&zip_def.node, sizeof *z, sorted, n);
        sl__free(sorted, (size_t)n * sizeof *sorted);
    } else {
        sl__free(k, (size_t)n * sizeof *k);
        return refuse(inputs, n, SL_ENOMEM, "out of memory");
    }
    int rc = z && keys && !(z->keys = sl__calloc((size_t)n, sizeof *z->keys)) ? SL_ENOMEM : 0;
    for (int i = 0; z && keys && rc == 0 && i < n; i++)
        if (!(z->keys[i] = sl__strdup(k[i].key)))
            rc = SL_ENOMEM;
    sl__free(k, (size_t)n * sizeof *k);
    if (rc < 0)
        return sl__dataset_fail(&z->base, rc, "zip: out of memory");
    return z ? &z->base : NULL;
}
