/* load(path): the elements a save wrote, in the order they were saved
 * (saved_file.h: the directory's format). The manifest is read when the
 * dataset is built, so its structure and cardinality are known then; the
 * shard files are opened by each pass.
 *
 * Random access (shuffle(ALL), distribute resumed on another world size):
 * the first get indexes every element in one pass over the shards
 * (sl__saved_index), kept for the dataset's life. */
#include <pthread.h>
#include "../graph/node.h"
#include "../store/saved_file.h"

typedef struct load_ds {
    sl_dataset base;
    sl__saved *saved;
    pthread_mutex_t mu; /* making the index; under it, why that failed */
    sl__saved_index *_Atomic index;
    int failed;
    char *failure;
} load_ds;

static int load_get(const sl_dataset *ds, int64_t i, sl_element **out)
{
    load_ds *d = (load_ds *)ds; /* the index is made once, on first use */
    sl__saved_index *x = atomic_load_explicit(&d->index, memory_order_acquire);
    if (!x) { /* made once; a failure is kept, not tried again per element */
        pthread_mutex_lock(&d->mu);
        x = atomic_load_explicit(&d->index, memory_order_relaxed);
        int rc = x ? 0 : d->failed;
        if (rc)
            sl__set_error_str(rc, d->failure ? d->failure : "out of memory");
        else if (!x && (rc = sl__saved_index_build(d->saved, &x)) == 0)
            atomic_store_explicit(&d->index, x, memory_order_release);
        else if (!x) {
            d->failed = rc;
            d->failure = sl__strdup(sl__error_msg());
        }
        pthread_mutex_unlock(&d->mu);
        if (rc)
            return rc;
    }
    return sl__saved_index_get(x, i, out);
}

static bool load_can_get(const sl_dataset *ds)
{
    (void)ds;
    return true;
}

static int load_iter_get(sl__iter *base, int64_t i, sl_element **out)
{
    return load_get(base->ds, i, out);
}

typedef struct load_iter {
    sl__iter base;
    sl__saved_reader *r;
    int64_t *pos; /* nshards saved fields, reused */
} load_iter;

static int load_next(sl__iter *base, sl_element **out)
{
    load_iter *it = (load_iter *)base;
    for (;;) {
        int rc = sl__saved_reader_next(it->r, out);
        if (rc != SL_ECORRUPT)
            return rc;
        if ((rc = sl__policy(base, rc)) != 0)
            return rc;
    }
}

static int load_save(sl__iter *base, sl__bytes *w)
{
    load_iter *it = (load_iter *)base;
    const sl__saved *s = ((const load_ds *)base->ds)->saved;
    sl__saved_reader_position(it->r, it->pos);
    return sl__state_node(w, base, s->nshards, it->pos, 0);
}

static void load_destroy(sl__iter *base)
{
    load_iter *it = (load_iter *)base;
    const sl__saved *s = ((const load_ds *)base->ds)->saved;
    sl__saved_reader_free(it->r);
    sl__free(it->pos, (size_t)(s->nshards ? s->nshards : 1) * sizeof *it->pos);
}

static const sl__iter_ops load_iter_ops = {
    .next = load_next,
    .destroy = load_destroy,
    .save = load_save,
    .get = load_iter_get,
};

static int load_make(const sl_dataset *ds, sl__tree *tree, uint64_t key, int64_t epoch,
                     sl__iter **out)
{
    const sl__saved *s = ((const load_ds *)ds)->saved;
    load_iter *it = sl__iter_alloc(&load_iter_ops, sizeof *it, ds, tree, key, epoch);
    if (!it)
        return SL_ENOMEM;
    it->pos = sl__calloc((size_t)(s->nshards ? s->nshards : 1), sizeof *it->pos);
    int rc = it->pos ? sl__iter_restored(&it->base, s->nshards, it->pos) : SL_ENOMEM;
    if (rc >= 0)
        rc = sl__saved_reader_resume(s, rc ? it->pos : NULL, &it->r);
    if (rc < 0) {
        sl__iter_free(&it->base);
        return rc;
    }
    *out = &it->base;
    return 0;
}

static int64_t load_cardinality(const sl_dataset *ds)
{
    return ((const load_ds *)ds)->saved->elements;
}

static uint64_t load_fingerprint(const sl_dataset *ds, uint64_t h)
{
    const sl__saved *s = ((const load_ds *)ds)->saved;
    return sl__hash_u64(sl__hash_str(h, s->dir), s->fingerprint);
}

static void load_ds_destroy(sl_dataset *ds)
{
    load_ds *d = (load_ds *)ds;
    sl__saved_index_free(atomic_load(&d->index));
    sl__strfree(d->failure);
    pthread_mutex_destroy(&d->mu);
    sl__saved_free(d->saved);
}

static const sl__node_ops load_ops = {
    .kind = "load",
    .make_iter = load_make,
    .cardinality = load_cardinality,
    .fingerprint = load_fingerprint,
    .destroy = load_ds_destroy,
    .can_get = load_can_get,
    .get = load_get,
};

SL_API sl_dataset *sl_load(const char *path)
{
    if (!path) {
        sl__set_error(SL_EINVAL, "load: NULL path");
        return NULL;
    }
    sl__saved *s;
    int rc = sl__saved_open("load", path, &s);
    if (rc == 0)
        sl__set_error(SL_ENOENT, "load(%s): no saved dataset there (no manifest: never "
                      "saved, or its save did not finish)", path);
    if (rc <= 0)
        return NULL;
    load_ds *d = (load_ds *)sl__dataset_new_source(&load_ops, sizeof *d);
    if (!d) {
        sl__saved_free(s);
        return NULL;
    }
    d->saved = s;
    pthread_mutex_init(&d->mu, NULL);
    if (!s->structure)
        return &d->base;
    return sl__dataset_structured(&d->base, sl_structure_retain(s->structure));
}
