/* sl_queue: a bounded FIFO of elements other threads push into, and
 * from_queue(q), the source that pops them. Bounded by bytes (what the
 * elements' tensors hold), so a producer receiving from the network blocks
 * instead of growing memory; one element larger than the whole capacity
 * still enters an empty queue. */
#include <errno.h>
#include "../core/clock.h"
#include "../graph/node.h"

struct sl_queue {
    atomic_int refs;
    pthread_mutex_t mu;
    pthread_cond_t cv_push, cv_pop;
    int64_t capacity; /* bytes */
    int64_t bytes;
    bool closed;
    /* a ring of element pointers, grown by doubling */
    sl_element **ring;
    size_t cap, head, n;
};

SL_API sl_queue *sl_queue_create(int64_t capacity_bytes)
{
    if (capacity_bytes <= 0) {
        sl__set_error(SL_EINVAL, "queue: capacity must be > 0 bytes, not %lld",
                      (long long)capacity_bytes);
        return NULL;
    }
    sl_queue *q = sl__alloc(sizeof *q);
    if (!q) {
        sl__set_error(SL_ENOMEM, "queue: out of memory");
        return NULL;
    }
    memset(q, 0, sizeof *q);
    atomic_init(&q->refs, 1);
    pthread_mutex_init(&q->mu, NULL);
    sl__cond_init_monotonic(&q->cv_push);
    sl__cond_init_monotonic(&q->cv_pop);
    q->capacity = capacity_bytes;
    return q;
}

static void queue_release(sl_queue *q)
{
    if (!q || atomic_fetch_sub(&q->refs, 1) != 1)
        return;
    for (size_t i = 0; i < q->n; i++)
        sl_element_release(q->ring[(q->head + i) % q->cap]);
    sl__free(q->ring, q->cap * sizeof *q->ring);
    pthread_cond_destroy(&q->cv_push);
    pthread_cond_destroy(&q->cv_pop);
    pthread_mutex_destroy(&q->mu);
    sl__free(q, sizeof *q);
}

SL_API void sl_queue_free(sl_queue *q)
{
    queue_release(q);
}

static int ring_grow(sl_queue *q)
{
    size_t ncap = q->cap ? 2 * q->cap : 16;
    sl_element **r = sl__alloc(ncap * sizeof *r);
    if (!r)
        return SL_ENOMEM;
    for (size_t i = 0; i < q->n; i++)
        r[i] = q->ring[(q->head + i) % q->cap];
    sl__free(q->ring, q->cap * sizeof *q->ring);
    q->ring = r;
    q->cap = ncap;
    q->head = 0;
    return 0;
}

SL_API int sl_queue_push(sl_queue *q, sl_element *el, int64_t timeout_ns)
{
    if (!q || !el)
        return sl__set_error(SL_EINVAL, "queue_push: %s is NULL", !q ? "the queue" : "el");
    int64_t bytes = (int64_t)sl__element_bytes(el);
    struct timespec until;
    if (timeout_ns > 0)
        sl__deadline(&until, timeout_ns);
    pthread_mutex_lock(&q->mu);
    int rc = 0;
    while (!q->closed && q->n > 0 && q->bytes + bytes > q->capacity) {
        if (timeout_ns == 0) {
            rc = ETIMEDOUT;
        } else if (timeout_ns < 0) {
            pthread_cond_wait(&q->cv_push, &q->mu);
            continue;
        } else {
            rc = pthread_cond_timedwait(&q->cv_push, &q->mu, &until);
        }
        if (rc == ETIMEDOUT)
            break;
    }
    if (q->closed) {
        rc = sl__set_error(SL_ESTATE, "queue_push: the queue is closed");
    } else if (rc == ETIMEDOUT && q->n > 0 && q->bytes + bytes > q->capacity) {
        rc = sl__set_error(SL_EBUSY, "queue_push: full (%lld of %lld bytes) after %lld ns",
                           (long long)q->bytes, (long long)q->capacity,
                           (long long)timeout_ns);
    } else if (q->n == q->cap && ring_grow(q)) {
        rc = sl__set_error(SL_ENOMEM, "queue_push: out of memory");
    } else {
        q->ring[(q->head + q->n++) % q->cap] = sl_element_retain(el);
        q->bytes += bytes;
        pthread_cond_signal(&q->cv_pop);
        rc = 0;
    }
    pthread_mutex_unlock(&q->mu);
    return rc;
}

SL_API void sl_queue_close(sl_queue *q)
{
    if (!q)
        return;
    pthread_mutex_lock(&q->mu);
    q->closed = true;
    pthread_cond_broadcast(&q->cv_pop);
    pthread_cond_broadcast(&q->cv_push);
    pthread_mutex_unlock(&q->mu);
}

SL_API int64_t sl_queue_length(sl_queue *q)
{
    if (!q)
        return 0;
    pthread_mutex_lock(&q->mu);
    int64_t n = (int64_t)q->n;
    pthread_mutex_unlock(&q->mu);
    return n;
}

/* ---- the source ---- */

typedef struct from_queue_ds {
    sl_dataset base;
    sl_queue *q;
} from_queue_ds;

typedef struct from_queue_iter {
    sl__iter base;
    atomic_bool stop;
} from_queue_iter;

static int from_queue_next(sl__iter *base, sl_element **out)
{
    from_queue_iter *it = (from_queue_iter *)base;
    sl_queue *q = ((const from_queue_ds *)base->ds)->q;
    pthread_mutex_lock(&q->mu);
    while (q->n == 0 && !q->closed && !atomic_load(&it->stop) &&
           !sl__tree_cancelled(base->tree))
        if (sl__consumer_cond_wait(&q->cv_pop, &q->mu) == SL__AGAIN) {
            pthread_mutex_unlock(&q->mu);
            return SL__AGAIN;
        }
    int rc;
    if (q->n > 0 && !atomic_load(&it->stop)) {
        sl_element *el = q->ring[q->head];
        q->head = (q->head + 1) % q->cap;
        q->n--;
        q->bytes -= (int64_t)sl__element_bytes(el);
        pthread_cond_signal(&q->cv_push);
        *out = el;
        rc = 0;
    } else if (q->n == 0 && q->closed) {
        rc = SL_EOF;
    } else {
        rc = SL_ECANCELED;
    }
    pthread_mutex_unlock(&q->mu);
    if (rc == SL_ECANCELED)
        return sl__set_error(rc, "from_queue: canceled");
    return rc;
}

static void from_queue_cancel(sl__iter *base)
{
    from_queue_iter *it = (from_queue_iter *)base;
    sl_queue *q = ((const from_queue_ds *)base->ds)->q;
    atomic_store(&it->stop, true);
    pthread_mutex_lock(&q->mu);
    pthread_cond_broadcast(&q->cv_pop);
    pthread_mutex_unlock(&q->mu);
}

static void from_queue_iter_destroy(sl__iter *base)
{
    sl__iter_unregister(base);
}

static const sl__iter_ops from_queue_iter_ops = {
    .next = from_queue_next,
    .cancel = from_queue_cancel,
    .destroy = from_queue_iter_destroy,
};

static int from_queue_make(const sl_dataset *ds, sl__tree *tree, uint64_t key, int64_t epoch,
                      sl__iter **out)
{
    from_queue_iter *it = sl__iter_alloc(&from_queue_iter_ops, sizeof *it, ds, tree, key, epoch);
    if (!it)
        return SL_ENOMEM;
    atomic_init(&it->stop, false);
    sl__iter_register(&it->base);
    *out = &it->base;
    return 0;
}

static void from_queue_ds_destroy(sl_dataset *ds)
{
    queue_release(((from_queue_ds *)ds)->q);
}

static const sl__node_ops from_queue_ops = {
    .kind = "from_queue",
    .make_iter = from_queue_make,
    .destroy = from_queue_ds_destroy,
};

SL_API sl_dataset *sl_from_queue(sl_queue *q)
{
    if (!q) {
        sl__set_error(SL_EINVAL, "from_queue: the queue is NULL");
        return NULL;
    }
    from_queue_ds *d = (from_queue_ds *)sl__dataset_new_source(&from_queue_ops, sizeof *d);
    if (!d)
        return NULL;
    atomic_fetch_add(&q->refs, 1);
    d->q = q;
    return &d->base;
}
