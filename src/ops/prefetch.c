/*
 * prefetch(depth): a thread of the node's own keeps up to `depth` elements
 * ready in a ring, so the consumer's step and the pipeline overlap.
 */
#include "../graph/node.h"

#define DEFAULT_DEPTH 2

typedef struct prefetch_ds {
    sl_dataset base;
    int64_t depth;
} prefetch_ds;

typedef struct prefetch_iter {
    sl__iter base;
    sl__iter *input;
    pthread_t producer;
    bool producer_started;
    pthread_mutex_t mu;
    pthread_cond_t cv_consumer, cv_producer;
    atomic_bool stop;
    atomic_int count;
    int depth, head;
    sl_element **ring;
    bool done;
    int end_rc;
    char *end_msg;
} prefetch_iter;

static void producer_finish(prefetch_iter *it, int rc)
{
    char *msg = rc < 0 ? sl__strdup(sl__error_msg()) : NULL;
    pthread_mutex_lock(&it->mu);
    it->done = true;
    it->end_rc = rc < 0 && !msg ? SL_ENOMEM : rc;
    it->end_msg = msg;
    pthread_cond_signal(&it->cv_consumer);
    pthread_mutex_unlock(&it->mu);
}

static void *producer_main(void *arg)
{
    prefetch_iter *it = arg;
    for (;;) {
        pthread_mutex_lock(&it->mu);
        while (!atomic_load(&it->stop) && atomic_load(&it->count) >= it->depth)
            pthread_cond_wait(&it->cv_producer, &it->mu);
        pthread_mutex_unlock(&it->mu);
        if (!sl__tree_wait_budget(it->base.tree, &it->count, &it->stop))
            break;
        sl_element *el;
        int rc = sl__iter_next(it->input, &el);
        if (rc) {
            producer_finish(it, rc);
            break;
        }
        sl__tree_hold(it->base.tree, (int64_t)sl__element_bytes(el));
        pthread_mutex_lock(&it->mu);
        int c = atomic_load(&it->count);
        it->ring[(it->head + c) % it->depth] = el;
        atomic_store(&it->count, c + 1);
        pthread_cond_signal(&it->cv_consumer);
        pthread_mutex_unlock(&it->mu);
    }
    return NULL;
}

static int prefetch_next(sl__iter *base, sl_element **out)
{
    prefetch_iter *it = (prefetch_iter *)base;
    int rc = 0;
    sl_element *el = NULL;
    pthread_mutex_lock(&it->mu);
    for (;;) {
        int c = atomic_load(&it->count);
        if (c > 0) {
            el = it->ring[it->head];
            it->ring[it->head] = NULL;
            it->head = (it->head + 1) % it->depth;
            atomic_store(&it->count, c - 1);
            pthread_cond_signal(&it->cv_producer);
            break;
        }
        if (it->done) {
            rc = it->end_rc;
            if (rc < 0)
                sl__set_error_str(rc, it->end_msg);
            break;
        }
        if (sl__tree_cancelled(base->tree) || atomic_load(&it->stop)) {
            rc = sl__set_error(SL_ECANCELED, "prefetch: canceled");
            break;
        }
        pthread_cond_wait(&it->cv_consumer, &it->mu);
    }
    pthread_mutex_unlock(&it->mu);
    if (el) {
        sl__tree_unhold(base->tree, (int64_t)sl__element_bytes(el));
        *out = el;
    }
    return rc;
}

static void prefetch_cancel(sl__iter *base)
{
    prefetch_iter *it = (prefetch_iter *)base;
    pthread_mutex_lock(&it->mu);
    atomic_store(&it->stop, true);
    pthread_cond_broadcast(&it->cv_consumer);
    pthread_cond_broadcast(&it->cv_producer);
    pthread_mutex_unlock(&it->mu);
}

static void prefetch_destroy(sl__iter *base)
{
    prefetch_iter *it = (prefetch_iter *)base;
    sl__iter_unregister(base);
    prefetch_cancel(base);
    sl__tree_wake(base->tree);
    if (it->producer_started)
        pthread_join(it->producer, NULL);
    int c = atomic_load(&it->count);
    for (int i = 0; i < c; i++) {
        sl_element *el = it->ring[(it->head + i) % it->depth];
        sl__tree_unhold(base->tree, (int64_t)sl__element_bytes(el));
        sl_element_release(el);
    }
    sl__free(it->ring, (size_t)it->depth * sizeof *it->ring);
    sl__strfree(it->end_msg);
    sl__iter_free(it->input);
    pthread_cond_destroy(&it->cv_consumer);
    pthread_cond_destroy(&it->cv_producer);
    pthread_mutex_destroy(&it->mu);
}

static const sl__iter_ops prefetch_iter_ops = {prefetch_next, prefetch_cancel, prefetch_destroy};

static int prefetch_make(const sl_dataset *ds, sl__tree *tree, uint64_t key, int64_t epoch,
                         sl__iter **out)
{
    prefetch_iter *it = sl__iter_alloc(&prefetch_iter_ops, sizeof *it, ds, tree, key, epoch);
    if (!it)
        return SL_ENOMEM;
    int64_t d = ((const prefetch_ds *)ds)->depth;
    it->depth = d == SL_AUTOTUNE ? DEFAULT_DEPTH : (int)d;
    pthread_mutex_init(&it->mu, NULL);
    pthread_cond_init(&it->cv_consumer, NULL);
    pthread_cond_init(&it->cv_producer, NULL);
    int rc = sl__iter_make_input(&it->base, 0, epoch, &it->input);
    if (rc == 0) {
        it->ring = sl__calloc((size_t)it->depth, sizeof *it->ring);
        rc = it->ring ? sl__thread_start(&it->producer, producer_main, it) : SL_ENOMEM;
    }
    if (rc < 0) {
        sl__iter_free(&it->base);
        return rc;
    }
    it->producer_started = true;
    sl__iter_register(&it->base);
    *out = &it->base;
    return 0;
}

static int64_t prefetch_card(const sl_dataset *ds)
{
    return sl_dataset_cardinality(ds->inputs[0]);
}

static const sl__node_ops prefetch_ops = {
    .kind = "prefetch",
    .make_iter = prefetch_make,
    .cardinality = prefetch_card,
};

SL_API sl_dataset *sl_prefetch(sl_dataset *in, int64_t depth)
{
    prefetch_ds *p = (prefetch_ds *)sl__dataset_new(&prefetch_ops, sizeof *p, in);
    if (!p)
        return NULL;
    if (depth != SL_AUTOTUNE && (depth < 1 || depth > 1 << 20))
        return sl__dataset_fail(&p->base, SL_EINVAL, "prefetch: bad depth %lld",
                                (long long)depth);
    p->depth = depth;
    return &p->base;
}
