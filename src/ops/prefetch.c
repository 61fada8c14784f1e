/*
 * prefetch(depth): a thread of the node's own keeps up to `depth` elements
 * ready in a ring, so the consumer's step and the pipeline overlap.
 */
#include "../core/clock.h"
#include "../graph/node.h"

#define DEFAULT_DEPTH 2
#define MAX_AUTO_DEPTH 64

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
    sl__knob *depth; /* read at each decision: the controller may move it */
    int size, head;  /* ring slots: room for the knob's maximum */
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

/* The depth knob now, within the ring. */
static int depth(const prefetch_iter *it)
{
    int64_t d = sl__knob_get(it->depth);
    return d < 1 ? 1 : d > it->size ? it->size : (int)d;
}

static void *producer_main(void *arg)
{
    prefetch_iter *it = arg;
    sl__node_stats *ns = it->base.stats;
    for (;;) {
        pthread_mutex_lock(&it->mu);
        while (!atomic_load(&it->stop) && atomic_load(&it->count) >= depth(it))
            pthread_cond_wait(&it->cv_producer, &it->mu);
        atomic_store_explicit(&ns->capacity, depth(it), memory_order_relaxed);
        pthread_mutex_unlock(&it->mu);
        if (!sl__tree_wait_budget(it->base.tree, &it->count, &it->stop))
            break;
        sl_element *el;
        int64_t t0 = sl__now_ns();
        int rc = sl__iter_next(it->input, &el);
        sl__stat_add(&ns->wait_ns, sl__now_ns() - t0);
        if (rc) {
            producer_finish(it, rc);
            break;
        }
        sl__iter_hold(&it->base, (int64_t)sl__element_bytes(el));
        pthread_mutex_lock(&it->mu);
        int c = atomic_load(&it->count);
        it->ring[(it->head + c) % it->size] = el;
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
    int seen = -1; /* occupancy at the first look; 0 if it had to wait */
    pthread_mutex_lock(&it->mu);
    for (;;) {
        int c = atomic_load(&it->count);
        if (seen < 0)
            seen = c;
        if (c > 0) {
            el = it->ring[it->head];
            it->ring[it->head] = NULL;
            it->head = (it->head + 1) % it->size;
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
        sl__iter_unhold(base, (int64_t)sl__element_bytes(el));
        sl__stat_take(base->stats, seen);
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
        sl_element *el = it->ring[(it->head + i) % it->size];
        sl__iter_unhold(base, (int64_t)sl__element_bytes(el));
        sl_element_release(el);
    }
    sl__free(it->ring, (size_t)it->size * sizeof *it->ring);
    sl__strfree(it->end_msg);
    sl__iter_free(it->input);
    pthread_cond_destroy(&it->cv_consumer);
    pthread_cond_destroy(&it->cv_producer);
    pthread_mutex_destroy(&it->mu);
}

static const sl__iter_ops prefetch_iter_ops = {prefetch_next, prefetch_cancel, prefetch_destroy};

/* Registers the node and its depth knob: SL_AUTOTUNE under the controller
 * starts at 1 and may grow to MAX_AUTO_DEPTH, without it it is the
 * documented 2. The ring has room for the maximum. */
static int depth_knob(prefetch_iter *it, int64_t d)
{
    sl__tree *tree = it->base.tree;
    bool autotune = d == SL_AUTOTUNE && tree->autotune;
    int64_t initial = d != SL_AUTOTUNE ? d : autotune ? 1 : DEFAULT_DEPTH;
    int64_t max = autotune ? MAX_AUTO_DEPTH : initial;
    sl__node_stats *ns = sl__stats_node(tree, it->base.key, sl_dataset_name(it->base.ds),
                                        SL__NODE_PREFETCH, it->base.depth);
    it->depth = ns ? sl__stats_knob(ns, "depth", SL__KNOB_DEPTH, 1, max, initial, autotune)
                   : NULL;
    if (!it->depth)
        return sl__set_error(SL_EINTERNAL, "prefetch: cannot register its depth knob");
    it->size = (int)max;
    return 0;
}

static int prefetch_make(const sl_dataset *ds, sl__tree *tree, uint64_t key, int64_t epoch,
                         sl__iter **out)
{
    prefetch_iter *it = sl__iter_alloc(&prefetch_iter_ops, sizeof *it, ds, tree, key, epoch);
    if (!it)
        return SL_ENOMEM;
    pthread_mutex_init(&it->mu, NULL);
    pthread_cond_init(&it->cv_consumer, NULL);
    pthread_cond_init(&it->cv_producer, NULL);
    int rc = depth_knob(it, ((const prefetch_ds *)ds)->depth);
    if (rc == 0)
        rc = sl__iter_make_input(&it->base, 0, epoch, &it->input);
    if (rc == 0) {
        it->ring = sl__calloc((size_t)it->size, sizeof *it->ring);
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
