/*
 * prefetch(depth): a thread of the node's own keeps up to `depth` elements
 * ready in a ring, so the consumer's step and the pipeline overlap.
 */
#include "../core/clock.h"
#include "../graph/sync.h"

#define DEFAULT_DEPTH 2
#define MAX_AUTO_DEPTH 64

typedef struct prefetch_ds {
    sl_dataset base;
    int64_t depth;
} prefetch_ds;

typedef struct prefetch_iter {
    sl__iter base;
    sl__iter *in;
    sl__async a;
    atomic_int count;
    sl__knob *depth; /* read at each decision: the controller may move it */
    int size, head;  /* ring slots: room for the knob's maximum */
    sl_element **ring;
    /* positions (state.h): the input's record after each element in the
     * ring, the one being pulled, the one of the last element taken */
    sl__bytes *snaps, pulling, taken;
    sl__snapper snap;
} prefetch_iter;

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
    /* each take wakes this thread: on a busy machine it took the CPU of
     * the consumer that woke it, inside sl_next (bench/README.md, section
     * 22); moving a ready element can wait for a tick */
    sl__thread_no_wake_preempt();
    for (;;) {
        pthread_mutex_lock(&it->a.mu);
        if (!atomic_load(&it->a.stop) && atomic_load(&it->count) >= depth(it)) {
            int64_t full_at = sl__now_ns();
            while (!atomic_load(&it->a.stop) && atomic_load(&it->count) >= depth(it))
                pthread_cond_wait(&it->a.cv_producer, &it->a.mu);
            sl__stat_add(&ns->full_ns, sl__now_ns() - full_at);
        }
        atomic_store_explicit(&ns->capacity, depth(it), memory_order_relaxed);
        pthread_mutex_unlock(&it->a.mu);
        if (!sl__tree_wait_budget(it->base.tree, &it->count, &it->a.stop))
            break;
        sl_element *el;
        int64_t t0 = sl__now_ns();
        int rc = sl__iter_next(it->in, &el);
        sl__stat_add(&ns->wait_ns, sl__now_ns() - t0);
        if (rc) {
            sl__async_finish(&it->a, rc, NULL);
            break;
        }
        it->pulling.n = 0;
        sl__snap(&it->snap, it->in, &it->pulling);
        sl__iter_hold(&it->base, (int64_t)sl__element_bytes(el));
        pthread_mutex_lock(&it->a.mu);
        int c = atomic_load(&it->count);
        it->ring[(it->head + c) % it->size] = el;
        sl__bytes_swap(&it->snaps[(it->head + c) % it->size], &it->pulling);
        atomic_store(&it->count, c + 1);
        pthread_cond_signal(&it->a.cv_consumer);
        pthread_mutex_unlock(&it->a.mu);
    }
    return NULL;
}

static int prefetch_level(void *self)
{
    return atomic_load(&((prefetch_iter *)self)->count);
}

/* Under mu: the oldest element, if there is one. */
static bool prefetch_take(void *self, void *out)
{
    prefetch_iter *it = self;
    int c = atomic_load(&it->count);
    if (c == 0)
        return false;
    sl_element *el = it->ring[it->head];
    it->ring[it->head] = NULL;
    sl__bytes_swap(&it->taken, &it->snaps[it->head]);
    it->head = (it->head + 1) % it->size;
    atomic_store(&it->count, c - 1);
    /* not held from here: unheld before the producer may refill, or the
     * peak would count this element and its replacement (budget waiters
     * are woken after, without the lock) */
    sl__iter_unhold_nowake(&it->base, (int64_t)sl__element_bytes(el));
    pthread_cond_signal(&it->a.cv_producer);
    *(sl_element **)out = el;
    return true;
}

static const sl__take_ops prefetch_take_ops = {.take = prefetch_take, .level = prefetch_level};

static int prefetch_next(sl__iter *base, sl_element **out)
{
    prefetch_iter *it = (prefetch_iter *)base;
    int rc = sl__async_take(&it->a, base, &prefetch_take_ops, it, out);
    if (rc == 0)
        sl__tree_budget_wake(base->tree);
    return rc;
}

static void prefetch_cancel(sl__iter *base)
{
    sl__async_cancel(&((prefetch_iter *)base)->a);
}

static void prefetch_destroy(sl__iter *base)
{
    prefetch_iter *it = (prefetch_iter *)base;
    sl__iter_unregister(base);
    sl__async_join(&it->a, base->tree);
    int c = atomic_load(&it->count);
    for (int i = 0; i < c; i++) {
        sl_element *el = it->ring[(it->head + i) % it->size];
        sl__iter_unhold(base, (int64_t)sl__element_bytes(el));
        sl_element_release(el);
    }
    sl__free(it->ring, (size_t)it->size * sizeof *it->ring);
    for (int i = 0; it->snaps && i < it->size; i++)
        sl__bytes_free(&it->snaps[i]);
    sl__free(it->snaps, (size_t)it->size * sizeof *it->snaps);
    sl__bytes_free(&it->pulling);
    sl__bytes_free(&it->taken);
    sl__snap_fini(&it->snap);
    sl__iter_free(it->in);
    sl__async_fini(&it->a);
}

/* No fields: the input's record as of the last element taken. */
static int prefetch_save(sl__iter *base, sl__bytes *w)
{
    prefetch_iter *it = (prefetch_iter *)base;
    return sl__save_async(w, base, &it->snap, 0, NULL, it->taken.p, it->taken.n);
}

static const sl__iter_ops prefetch_iter_ops = {
    .next = prefetch_next,
    .cancel = prefetch_cancel,
    .destroy = prefetch_destroy,
    .save = prefetch_save,
};

/* Registers the node and its depth knob: SL_AUTOTUNE under the controller
 * starts at 1 (a batch more costs memory for nothing unless the output
 * proves bursty) and may grow to MAX_AUTO_DEPTH, without it it is the
 * documented 2. The ring has room for the maximum. */
static int depth_knob(prefetch_iter *it, int64_t d)
{
    it->depth = sl__iter_knob(&it->base, SL__NODE_PREFETCH, SL__KNOB_DEPTH, d, 1,
                              MAX_AUTO_DEPTH, DEFAULT_DEPTH);
    if (!it->depth)
        return SL_EINTERNAL;
    it->size = (int)it->depth->max;
    return 0;
}

/* The edge profile's prefetch: elements pass straight through on the
 * caller's thread (no buffer, no producer); its record is the one the
 * buffered node writes (no fields, then the input's). */
static int prefetch_inline_next(sl__iter *base, sl_element **out)
{
    return sl__iter_next(((sl__sync_iter *)base)->in, out);
}

static const sl__sync_def prefetch_inline_def = {
    .iter = {SL__SYNC_ITER(prefetch_inline_next)},
    .iter_size = sizeof(sl__sync_iter),
};

static int prefetch_make(const sl_dataset *ds, sl__tree *tree, uint64_t key, int64_t epoch,
                         sl__iter **out)
{
    if (tree->inline_nodes)
        return sl__sync_make_as(&prefetch_inline_def, ds, tree, key, epoch, out);
    prefetch_iter *it = sl__iter_alloc(&prefetch_iter_ops, sizeof *it, ds, tree, key, epoch);
    if (!it)
        return SL_ENOMEM;
    sl__async_init(&it->a);
    int rc = depth_knob(it, ((const prefetch_ds *)ds)->depth);
    int64_t none[1];
    if (rc == 0 && (rc = sl__iter_restored(&it->base, 0, none)) > 0)
        rc = 0;
    if (rc == 0)
        rc = sl__iter_make_input(&it->base, 0, epoch, &it->in);
    if (rc == 0) {
        it->ring = sl__calloc((size_t)it->size, sizeof *it->ring);
        it->snaps = sl__calloc((size_t)it->size, sizeof *it->snaps);
        rc = it->ring && it->snaps ? 0 : SL_ENOMEM;
    }
    if (rc == 0) {
        sl__snap(&it->snap, it->in, &it->taken); /* nothing taken yet */
        rc = sl__async_start(&it->a, producer_main, it, "prefetch");
    }
    if (rc < 0) {
        sl__iter_free(&it->base);
        return rc;
    }
    sl__iter_register(&it->base);
    *out = &it->base;
    return 0;
}

static int64_t prefetch_cardinality(const sl_dataset *ds)
{
    return sl_dataset_cardinality(ds->inputs[0]);
}

static const sl__node_ops prefetch_ops = {
    .kind = "prefetch",
    .make_iter = prefetch_make,
    .cardinality = prefetch_cardinality,
    .structure = sl__structure_of_input,
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
