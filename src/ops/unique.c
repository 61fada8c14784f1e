/* unique(): the input's elements less those equal to an earlier one
 * (tf.data's unique), for elements of one tensor of any dtype and shape:
 * equal means the same dtype, shape and bytes. What it has seen grows
 * with the distinct values; restored, it replays its input from the pass
 * start to see them again (as a buffer shuffle does). */
#include <string.h>
#include "../graph/sync.h"

typedef struct seen {
    uint64_t hash;
    size_t len;
    unsigned char *key; /* dtype, ndim, shape, data */
} seen;

typedef struct unique_iter {
    sl__sync_iter u;
    int64_t pulled; /* input elements taken this pass */
    bool done;
    seen *table;    /* open addressing; key NULL: empty */
    size_t cap, used;
    sl__bytes scratch;
} unique_iter;

static uint64_t fnv(uint64_t h, const void *p, size_t n)
{
    const unsigned char *b = p;
    for (size_t i = 0; i < n; i++)
        h = (h ^ b[i]) * 0x100000001b3ull;
    return h;
}

/* The element's key into it->scratch, or an error. */
static int key_of(unique_iter *it, const sl_element *el)
{
    if (el->n != 1)
        return sl__set_error(SL_ESHAPE, "unique: elements of %d tensors (one only)", el->n);
    const struct sl_tensor *t = &el->t[0];
    int32_t head[2] = {t->dtype, t->ndim};
    it->scratch.n = 0;
    int rc = sl__bytes_append(&it->scratch, head, sizeof head);
    if (rc == 0)
        rc = sl__bytes_append(&it->scratch, t->shape, (size_t)t->ndim * sizeof *t->shape);
    if (rc == 0 && t->dtype == SL_STRING) { /* the strings, not where they start */
        for (int64_t i = 0; rc == 0 && i < sl_tensor_count(t); i++) {
            size_t len;
            const char *s = sl_tensor_string(t, i, &len);
            uint64_t l = len;
            rc = sl__bytes_append(&it->scratch, &l, sizeof l);
            if (rc == 0)
                rc = sl__bytes_append(&it->scratch, s, len);
        }
    } else if (rc == 0) {
        rc = sl__bytes_append(&it->scratch, t->data, t->nbytes);
    }
    return rc;
}

static int grow(unique_iter *it)
{
    size_t cap = it->cap ? it->cap * 2 : 256;
    seen *t = sl__calloc(cap, sizeof *t);
    if (!t)
        return SL_ENOMEM;
    for (size_t i = 0; i < it->cap; i++)
        if (it->table[i].key) {
            size_t j = it->table[i].hash & (cap - 1);
            while (t[j].key)
                j = (j + 1) & (cap - 1);
            t[j] = it->table[i];
        }
    sl__free(it->table, it->cap * sizeof *it->table);
    it->table = t;
    it->cap = cap;
    return 0;
}

/* 1 when the key in scratch is new (and now remembered), 0 when seen. */
static int remember(unique_iter *it)
{
    if ((it->used + 1) * 2 > it->cap && grow(it) < 0)
        return SL_ENOMEM;
    uint64_t h = fnv(0xcbf29ce484222325ull, it->scratch.p, it->scratch.n);
    size_t j = h & (it->cap - 1);
    for (; it->table[j].key; j = (j + 1) & (it->cap - 1))
        if (it->table[j].hash == h && it->table[j].len == it->scratch.n &&
            memcmp(it->table[j].key, it->scratch.p, it->scratch.n) == 0)
            return 0;
    unsigned char *k = sl__alloc(it->scratch.n ? it->scratch.n : 1);
    if (!k)
        return SL_ENOMEM;
    memcpy(k, it->scratch.p, it->scratch.n);
    it->table[j] = (seen){h, it->scratch.n, k};
    it->used++;
    return 1;
}

/* The next new element (out NULL: dropped, while replaying). */
static int next_new(unique_iter *it, sl_element **out)
{
    for (;;) {
        sl_element *el;
        int rc = sl__iter_next(it->u.in, &el);
        if (rc == SL_EOF)
            it->done = true;
        if (rc)
            return rc;
        it->pulled++;
        rc = key_of(it, el);
        if (rc == 0)
            rc = remember(it);
        if (rc == 1 && out) {
            *out = el;
            return 0;
        }
        sl_element_release(el);
        if (rc < 0)
            return rc;
        if (rc == 1)
            return 0;
    }
}

static int unique_next(sl__iter *base, sl_element **out)
{
    unique_iter *it = (unique_iter *)base;
    return it->done ? SL_EOF : next_new(it, out);
}

static int unique_replay(sl__sync_iter *u)
{
    return next_new((unique_iter *)u, NULL);
}

static void unique_fini(sl__sync_iter *u)
{
    unique_iter *it = (unique_iter *)u;
    for (size_t i = 0; i < it->cap; i++)
        if (it->table[i].key)
            sl__free(it->table[i].key, it->table[i].len ? it->table[i].len : 1);
    sl__free(it->table, it->cap * sizeof *it->table);
    sl__bytes_free(&it->scratch);
}

static int64_t unique_cardinality(const sl_dataset *ds)
{
    return sl_dataset_cardinality(ds->inputs[0]) == 0 ? 0 : SL_UNKNOWN;
}

static const sl__field unique_state[] = {
    SL__FIELD_I64(unique_iter, pulled, 0, INT64_MAX),
    SL__FIELD_BOOL(unique_iter, done),
};

static const sl__sync_def unique_def = {
    .node = {.kind = "unique", SL__SYNC_NODE, .cardinality = unique_cardinality,
             .structure = sl__structure_of_input},
    .iter = {SL__SYNC_ITER(unique_next)},
    .iter_size = sizeof(unique_iter),
    SL__SYNC_STATE(unique_state),
    SL__SYNC_REPLAY(unique_replay, "pulled", "done"),
    .fini = unique_fini,
};

SL_API sl_dataset *sl_unique(sl_dataset *in)
{
    sl_dataset *ds = sl__dataset_new(&unique_def.node, sizeof(sl_dataset), in);
    const sl_structure *s = ds ? sl_dataset_structure(in) : NULL;
    if (s && sl_structure_leaves(s) != 1)
        return sl__dataset_fail(ds, SL_ESHAPE, "unique: elements of %d tensors (one only, as "
                                "tf.data's)", sl_structure_leaves(s));
    return ds;
}
