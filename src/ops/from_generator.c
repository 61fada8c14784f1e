/* from_generator(next, user): elements a program function makes, one call
 * at a time. Cardinality unknown; no random access; cannot save (the
 * function's position is the program's). */
#include "../graph/node.h"

typedef struct from_generator_ds {
    sl_dataset base;
    sl_generator_fn fn;
    void *user;
    /* one call at a time over every pass and iterator of this dataset */
    pthread_mutex_t mu;
    atomic_llong passes;
} from_generator_ds;

typedef struct from_generator_iter {
    sl__iter base;
    int64_t pass;
    bool ended;
} from_generator_iter;

static int from_generator_next(sl__iter *base, sl_element **out)
{
    from_generator_iter *it = (from_generator_iter *)base;
    from_generator_ds *g = (from_generator_ds *)base->ds;
    for (;;) {
        if (it->ended)
            return SL_EOF;
        sl_element *el = NULL;
        sl_clear_error();
        pthread_mutex_lock(&g->mu);
        int rc = g->fn(g->user, it->pass, &el);
        pthread_mutex_unlock(&g->mu);
        if (rc == 0 && el) {
            base->ok_count++;
            *out = el;
            return 0;
        }
        if (rc == SL_EOF) {
            sl_element_release(el);
            it->ended = true;
            return SL_EOF;
        }
        sl_element_release(el);
        if (rc >= 0) /* a bug in the function, not an element error: no policy
                      * skips it (under SKIP it would be called forever) */
            return sl__set_error(SL_ECALLBACK, "from_generator: the function returned %d%s",
                                 rc, rc == 0 ? " without an element"
                                             : " (expected 0, SL_EOF or < 0)");
        if (sl_last_error_code())
            sl__error_prefix("from_generator");
        else
            sl__set_error(rc, "from_generator: %s", sl_strerror(rc));
        rc = sl__policy(base, rc);
        if (rc)
            return rc;
    }
}

static void from_generator_destroy(sl__iter *base)
{
    from_generator_iter *it = (from_generator_iter *)base;
    from_generator_ds *g = (from_generator_ds *)base->ds;
    /* the pass is over: the program may let go of what it held for it */
    pthread_mutex_lock(&g->mu);
    g->fn(g->user, it->pass, NULL);
    pthread_mutex_unlock(&g->mu);
}

static const sl__iter_ops from_generator_iter_ops = {
    .next = from_generator_next,
    .destroy = from_generator_destroy,
};

static int from_generator_make(const sl_dataset *ds, sl__tree *tree, uint64_t key, int64_t epoch,
                    sl__iter **out)
{
    from_generator_iter *it = sl__iter_alloc(&from_generator_iter_ops, sizeof *it, ds, tree, key, epoch);
    if (!it)
        return SL_ENOMEM;
    it->pass = atomic_fetch_add(&((from_generator_ds *)ds)->passes, 1);
    *out = &it->base;
    return 0;
}

static void from_generator_ds_destroy(sl_dataset *ds)
{
    pthread_mutex_destroy(&((from_generator_ds *)ds)->mu);
}

static const sl__node_ops from_generator_ops = {
    .kind = "from_generator",
    .make_iter = from_generator_make,
    .destroy = from_generator_ds_destroy,
};

SL_API sl_dataset *sl_from_generator(sl_generator_fn next, void *user, unsigned flags)
{
    if (!next || flags) {
        sl__set_error(SL_EINVAL, "from_generator: %s",
                      !next ? "the function must not be NULL" : "unknown flags");
        return NULL;
    }
    from_generator_ds *g = (from_generator_ds *)sl__dataset_new_source(&from_generator_ops, sizeof *g);
    if (!g)
        return NULL;
    g->fn = next;
    g->user = user;
    pthread_mutex_init(&g->mu, NULL);
    return &g->base;
}
