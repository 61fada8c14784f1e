/* filter(name, fn): keeps the input elements for which fn returns 1. Runs
 * fn on the pulling thread; a negative return is an element error that goes
 * through the iterator's error policy. */
#include "../graph/node.h"

typedef struct filter_ds {
    sl_dataset base;
    sl_predicate_fn fn;
    void *user;
} filter_ds;

typedef struct filter_iter {
    sl__iter base;
    sl__iter *in;
    uint64_t seed;
    int64_t index; /* input position in this pass: the callback's index */
    bool done;
} filter_iter;

static int64_t filter_card(const sl_dataset *ds)
{
    return sl_dataset_cardinality(ds->inputs[0]) == 0 ? 0 : SL_UNKNOWN;
}

/* 1 keep, 0 drop, or a negative code with the message set and prefixed. */
static int test_element(filter_iter *it, const sl_element *el)
{
    const filter_ds *f = (const filter_ds *)it->base.ds;
    sl_map_ctx ctx;
    sl__map_ctx_begin(&ctx, it->seed, it->base.key, it->base.epoch, it->index++);
    sl_clear_error(); /* so a callback that fails silently leaves no stale text */
    int r = f->fn(&ctx, el, f->user);
    sl__map_ctx_end(&ctx);
    if (r >= 0)
        return r > 0;
    if (!sl__error_msg()[0])
        sl__set_error(r, "predicate failed: %s", sl_strerror(r));
    sl__element_error_prefix(el);
    sl__error_prefix(sl_dataset_name(it->base.ds));
    return r;
}

static int filter_next(sl__iter *base, sl_element **out)
{
    filter_iter *it = (filter_iter *)base;
    if (it->done)
        return SL_EOF;
    for (;;) {
        sl_element *el;
        int rc = sl__iter_next(it->in, &el);
        if (rc == SL_EOF)
            it->done = true;
        if (rc)
            return rc;
        int r = test_element(it, el);
        if (r == 1) {
            it->base.ok_count++;
            *out = el;
            return 0;
        }
        sl_element_release(el);
        if (r < 0 && (rc = sl__policy(base, r)) != 0)
            return rc;
    }
}

static void filter_destroy(sl__iter *base)
{
    sl__iter_free(((filter_iter *)base)->in);
}

static int filter_save(sl__iter *base, sl__bytes *w)
{
    filter_iter *it = (filter_iter *)base;
    int64_t f[2] = {it->index, it->done};
    return sl__save_sync(w, base, 2, f, it->in);
}

static const sl__iter_ops filter_iter_ops = {
    .next = filter_next,
    .destroy = filter_destroy,
    .save = filter_save,
};

static int filter_make(const sl_dataset *ds, sl__tree *tree, uint64_t key, int64_t epoch,
                       sl__iter **out)
{
    filter_iter *it = sl__iter_alloc(&filter_iter_ops, sizeof *it, ds, tree, key, epoch);
    if (!it)
        return SL_ENOMEM;
    it->seed = sl__node_seed(&it->base, -1);
    int64_t f[2];
    int rc = sl__iter_restored(&it->base, 2, f);
    if (rc > 0) {
        it->index = f[0];
        it->done = f[1] != 0;
        rc = sl__state_range(&it->base, "index", f[0], 0, INT64_MAX);
    }
    if (rc == 0)
        rc = sl__iter_make_input(&it->base, 0, epoch, &it->in);
    if (rc < 0) {
        sl__iter_free(&it->base);
        return rc;
    }
    *out = &it->base;
    return 0;
}

/* No fingerprint hook: the name stands for the predicate (a function
 * address changes from run to run, so it must not be hashed). */
static const sl__node_ops filter_ops = {
    .kind = "filter",
    .make_iter = filter_make,
    .cardinality = filter_card,
};

SL_API sl_dataset *sl_filter(sl_dataset *in, const char *name, sl_predicate_fn fn, void *user)
{
    filter_ds *f = (filter_ds *)sl__dataset_new(&filter_ops, sizeof *f, in);
    if (!f)
        return NULL;
    if (!fn)
        return sl__dataset_fail(&f->base, SL_EINVAL, "filter: NULL predicate");
    if (sl__dataset_set_name(&f->base, name) < 0)
        return sl__dataset_fail(&f->base, SL_ENOMEM, "filter: out of memory");
    f->fn = fn;
    f->user = user;
    return &f->base;
}
