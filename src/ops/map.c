/*
 * Parallel map.
 *
 * A producer thread of the node's own pulls input in chunks (so sources and
 * other synchronous ops never run on pool workers, and a worker never waits
 * on anything) and submits each chunk as one task to the runtime's pool.
 * Chunk size adapts to the measured cost of the callback: cheap callbacks
 * get up to MAX_CHUNK elements per task, so locking and wake-ups happen per
 * chunk rather than per element; expensive ones get one element per task,
 * so work spreads evenly over the workers.
 *
 * Ordered mode hands chunks to the consumer by sequence number through a
 * window of `ahead` slots; unordered mode in completion order. Element
 * errors travel in their slot, with their message, and meet the error policy
 * on the consumer side, where the order is deterministic.
 */
#include <stdio.h>
#include <string.h>
#include "../core/clock.h"
#include "map.h"

#define MAX_CHUNK 256
#define TARGET_CHUNK_NS 1000000 /* about this much callback time per task */

typedef struct map_ds {
    sl_dataset base;
    sl_map_fn fn;
    void *user;
    int parallelism;
    unsigned flags;
} map_ds;

typedef struct slot {
    sl_element *el; /* input, then output */
    int rc;
    char *msg;      /* error message (owned) when rc < 0 */
    int64_t bytes;  /* the output's, held in the tree until it is handed out */
} slot;

struct map_iter;

typedef struct chunk {
    sl__task task;
    struct map_iter *owner;
    struct chunk *next; /* free list / done queue */
    int64_t seq;
    int64_t first_index;
    int n, pos;
    bool done;
    int64_t bytes;    /* output bytes held in the tree: once done, until handed out */
    int64_t reserved; /* estimate held in the tree while in flight */
    /* the input's record after each pull: slot i's is [end[i-1], end[i]) */
    sl__bytes snaps;
    uint32_t snap_end[MAX_CHUNK];
    slot s[MAX_CHUNK];
} chunk;

typedef struct map_iter {
    sl__iter base;
    sl__iter *in;
    sl_map_fn fn;
    void *user;
    uint64_t seed;
    bool ordered;

    sl__async a;
    pthread_cond_t cv_idle; /* no task in flight */
    /* chunks in flight at most; read at each decision, the controller may
     * move it. Chunks submitted and not yet consumed: at most twice that. */
    sl__knob *parallelism;
    int ahead;       /* window slots: room for the knob's maximum */
    int outstanding;
    int in_flight;
    int ready;       /* elements in finished chunks not yet taken (statistics) */
    atomic_int pending; /* chunks submitted and not yet taken by the consumer */
    int64_t next_seq, consume_seq;
    chunk **window;   /* ordered: by seq % ahead */
    chunk *done_head, *done_tail; /* unordered */
    chunk *free_chunks;
    chunk *cur;       /* being drained by the consumer, no lock needed */
    sl__task_sizer sizer; /* callback cost and output size per element */
    /* positions (state.h): the input's record after the last element the
     * consumer passed when that is not in cur, and the next input index */
    sl__bytes taken;
    int64_t taken_index;
    sl__snapper snap;
    int64_t p_index;    /* the producer's next input index */
    bool inline_chunks; /* the edge profile: no producer thread */
} map_iter;

static void slot_clear(slot *s)
{
    sl_element_release(s->el);
    s->el = NULL;
    sl__strfree(s->msg);
    s->msg = NULL;
}

void sl__task_sizer_note(sl__task_sizer *z, int n, int64_t ns, int64_t bytes)
{
    int64_t per = ns / n, eb = bytes / n;
    z->cost_ns = z->cost_ns ? (3 * z->cost_ns + per) / 4 : per;
    z->el_bytes = z->el_bytes ? (3 * z->el_bytes + eb) / 4 : eb;
}

int sl__task_sizer_size(const sl__task_sizer *z, int64_t target_ns, int max, int64_t room)
{
    if (z->cost_ns <= 0)
        return 1;
    int64_t k = target_ns / z->cost_ns;
    if (room >= 0 && z->el_bytes > 0 && k > room / z->el_bytes)
        k = room / z->el_bytes;
    return k < 1 ? 1 : k > max ? max : (int)k;
}

/* Elements for the next task: enough work to amortise the hand-off, but
 * no more output than the RAM budget has room for. Under it->a.mu. */
static int chunk_target(map_iter *it)
{
    int64_t room = it->base.tree->ram_budget - atomic_load(&it->base.tree->held);
    return sl__task_sizer_size(&it->sizer, TARGET_CHUNK_NS, MAX_CHUNK, room > 0 ? room : 0);
}

static void run_one(map_iter *it, chunk *c, int i, sl_map_ctx *ctx)
{
    slot *s = &c->s[i];
    sl_element *out = NULL;
    sl__map_ctx_begin(ctx, it->base.ds, it->seed, it->base.key, it->base.epoch,
                      c->first_index + i);
    sl_clear_error();
    int rc = it->fn(ctx, s->el, &out, it->user);
    sl__map_ctx_end(ctx);
    if (rc > 0)
        rc = sl__set_error(SL_ECALLBACK, "callback returned %d (expected 0 or a negative code)", rc);
    if (rc == 0 && !out)
        rc = sl__set_error(SL_ECALLBACK, "callback returned no element");
    if (rc < 0) {
        sl_element_release(out);
        out = NULL;
        if (!sl__error_msg()[0])
            sl__set_error_str(rc, sl_strerror(rc));
        sl__element_error_prefix(s->el);
        sl__error_prefix(sl_dataset_name(it->base.ds));
        s->msg = sl__strdup(sl__error_msg());
        if (!s->msg)
            rc = SL_ENOMEM;
    } else {
        s->bytes = (int64_t)sl__element_bytes(out);
        c->bytes += s->bytes;
    }
    sl_element_release(s->el);
    s->el = out;
    s->rc = rc;
}

static void run_chunk(sl__task *task)
{
    chunk *c = (chunk *)task;
    map_iter *it = c->owner;
    sl_map_ctx ctx;
    int64_t t0 = sl__now_ns(), c0 = sl__thread_cpu_ns();
    sl__blocked b0 = sl__thread_blocked;
    int i = 0;
    for (; i < c->n && !atomic_load_explicit(&it->a.stop, memory_order_relaxed); i++)
        run_one(it, c, i, &ctx);
    for (; i < c->n; i++) {
        slot_clear(&c->s[i]);
        c->s[i].rc = SL_ECANCELED;
    }
    int64_t t1 = sl__now_ns();
    sl__node_stats *ns = it->base.stats;
    /* reads the function waited for are I/O, not work */
    int64_t blocked = sl__thread_blocked.ns - b0.ns;
    if (blocked > 0 || sl__thread_blocked.bytes != b0.bytes) {
        sl__stat_add(&ns->read_wait_ns, blocked);
        sl__stat_add(&ns->bytes_read, sl__thread_blocked.bytes - b0.bytes);
    }
    sl__stat_add(&ns->busy_ns, t1 - t0 - blocked);
    sl__stat_add(&ns->cpu_ns, sl__thread_cpu_ns() - c0);
    sl__stat_add(&ns->queue_ns, t0 - task->submitted_ns);
    sl__trace_span(it->base.tree, ns, t0, t1);
    /* trade the estimate for the real size in one step, so the total never
     * counts this chunk twice */
    int64_t delta = c->bytes - c->reserved;
    if (delta >= 0)
        sl__iter_hold(&it->base, delta);
    else
        sl__iter_unhold(&it->base, -delta);

    pthread_mutex_lock(&it->a.mu);
    sl__task_sizer_note(&it->sizer, c->n, t1 - t0, c->bytes);
    c->done = true;
    it->in_flight--;
    it->ready += c->n;
    atomic_fetch_sub_explicit(&ns->in_flight, 1, memory_order_relaxed);
    if (it->ordered) {
        if (c->seq == it->consume_seq)
            pthread_cond_signal(&it->a.cv_consumer);
    } else {
        c->next = NULL;
        if (it->done_tail)
            it->done_tail->next = c;
        else
            it->done_head = c;
        it->done_tail = c;
        pthread_cond_signal(&it->a.cv_consumer);
    }
    if (it->in_flight == 0)
        pthread_cond_broadcast(&it->cv_idle);
    pthread_cond_signal(&it->a.cv_producer);
    pthread_mutex_unlock(&it->a.mu);
}

/* Under it->a.mu. */
static chunk *chunk_take_free(map_iter *it)
{
    chunk *c = it->free_chunks;
    if (!c) {
        c = sl__obj_get(sizeof *c);
        if (c)
            c->snaps = (sl__bytes){0};
        return c;
    }
    it->free_chunks = c->next;
    return c;
}

static void chunk_give_back(map_iter *it, chunk *c)
{
    pthread_mutex_lock(&it->a.mu);
    c->next = it->free_chunks;
    it->free_chunks = c;
    pthread_mutex_unlock(&it->a.mu);
}

/* The parallelism knob now, within what the window holds. */
static int parallelism(const map_iter *it)
{
    int64_t p = sl__knob_get(it->parallelism);
    return p < 1 ? 1 : p > it->ahead / 2 ? it->ahead / 2 : (int)p;
}

enum { ROUND_ON, ROUND_ENDED, ROUND_STOPPED };

/* One chunk of the producer's work: pull its inputs, submit it.
 * ROUND_ENDED: the pass is over (finished). */
static int producer_round(map_iter *it)
{
    sl__node_stats *ns = it->base.stats;
    pthread_mutex_lock(&it->a.mu);
    while (!atomic_load(&it->a.stop) && (it->outstanding >= 2 * parallelism(it) ||
                                       it->in_flight >= parallelism(it)))
        pthread_cond_wait(&it->a.cv_producer, &it->a.mu);
    if (atomic_load(&it->a.stop)) {
        /* the consumer is gone or cancelled; nothing to report */
        pthread_mutex_unlock(&it->a.mu);
        return ROUND_STOPPED;
    }
    chunk *c = chunk_take_free(it);
    pthread_mutex_unlock(&it->a.mu);
    if (!c) {
        sl__async_finish(&it->a, SL_ENOMEM, NULL);
        return ROUND_ENDED;
    }
    if (!sl__tree_wait_budget(it->base.tree, &it->pending, &it->a.stop)) {
        chunk_give_back(it, c);
        return ROUND_STOPPED;
    }
    pthread_mutex_lock(&it->a.mu);
    int k = chunk_target(it);
    int64_t el_bytes = it->sizer.el_bytes;
    atomic_store_explicit(&ns->capacity, 2 * parallelism(it) * k, memory_order_relaxed);
    pthread_mutex_unlock(&it->a.mu);
    c->owner = it;
    c->task.run = run_chunk;
    c->first_index = it->p_index;
    c->n = c->pos = 0;
    c->done = false;
    c->bytes = 0;
    c->reserved = 0;
    c->snaps.n = 0;
    int rc = 0;
    int64_t t0 = sl__now_ns();
    while (c->n < k) {
        slot *s = &c->s[c->n];
        s->msg = NULL;
        s->rc = 0;
        s->bytes = 0;
        rc = sl__iter_next(it->in, &s->el);
        if (rc)
            break;
        sl__snap(&it->snap, it->in, &c->snaps);
        c->snap_end[c->n] = (uint32_t)c->snaps.n;
        c->n++;
    }
    sl__stat_add(&ns->wait_ns, sl__now_ns() - t0);
    it->p_index += c->n;
    pthread_mutex_lock(&it->a.mu);
    if (c->n) {
        c->seq = it->next_seq++;
        if (it->ordered)
            it->window[c->seq % it->ahead] = c;
        it->outstanding++;
        it->in_flight++;
        atomic_fetch_add(&it->pending, 1);
    } else {
        c->next = it->free_chunks;
        it->free_chunks = c;
    }
    pthread_mutex_unlock(&it->a.mu);
    if (c->n) {
        /* count the output to come against the budget now, so the
         * next chunk's size sees it */
        c->reserved = el_bytes * c->n;
        sl__iter_hold(&it->base, c->reserved);
        atomic_fetch_add_explicit(&ns->in_flight, 1, memory_order_relaxed);
        sl__runtime_submit(it->base.tree->rt, &c->task);
    }
    if (rc) {
        sl__async_finish(&it->a, rc, NULL);
        return ROUND_ENDED;
    }
    return ROUND_ON;
}

static void *producer_main(void *arg)
{
    map_iter *it = arg;
    while (producer_round(it) == ROUND_ON) {
    }
    return NULL;
}

/* Hands the drained chunk back and lets the producer go on. */
static void chunk_recycle(map_iter *it, chunk *c)
{
    for (int i = c->pos; i < c->n; i++)
        slot_clear(&c->s[i]);
    pthread_mutex_lock(&it->a.mu);
    c->next = it->free_chunks;
    it->free_chunks = c;
    it->outstanding--;
    pthread_cond_signal(&it->a.cv_producer);
    pthread_mutex_unlock(&it->a.mu);
}

static int map_level(void *self)
{
    return ((map_iter *)self)->ready;
}

/* Under mu: the next finished chunk, in order unless unordered. */
static bool map_take(void *self, void *out)
{
    map_iter *it = self;
    chunk *c = NULL;
    if (it->ordered) {
        chunk *w = it->window[it->consume_seq % it->ahead];
        if (w && w->seq == it->consume_seq && w->done) {
            it->window[it->consume_seq % it->ahead] = NULL;
            it->consume_seq++;
            c = w;
        }
    } else if (it->done_head) {
        c = it->done_head;
        it->done_head = c->next;
        if (!it->done_head)
            it->done_tail = NULL;
    }
    if (!c)
        return false;
    it->ready -= c->n;
    *(chunk **)out = c;
    return true;
}

static bool map_busy(void *self)
{
    return ((map_iter *)self)->outstanding > 0;
}

/* The edge profile: this thread pulls and runs the next chunk (the
 * runtime has no workers: it runs as it is submitted). */
static int map_round(void *self)
{
    producer_round(self);
    return 0;
}

static const sl__take_ops map_take_ops = {
    .take = map_take, .level = map_level, .busy = map_busy};
static const sl__take_ops map_inline_take_ops = {
    .take = map_take, .level = map_level, .busy = map_busy, .round = map_round};

/* Waits for the next chunk; NULL at the end (with *rc set). */
static chunk *chunk_next(map_iter *it, int *rc)
{
    chunk *c = NULL;
    *rc = sl__async_take(&it->a, &it->base, it->inline_chunks ? &map_inline_take_ops
                                                              : &map_take_ops, it, &c);
    if (c)
        atomic_fetch_sub(&it->pending, 1);
    return c;
}

static int map_next(sl__iter *base, sl_element **out)
{
    map_iter *it = (map_iter *)base;
    for (;;) {
        chunk *c = it->cur;
        while (c && c->pos < c->n) {
            slot *s = &c->s[c->pos++];
            if (s->rc == 0) {
                /* held until now, not from the chunk's take on: the rest
                 * of the chunk still counts against the budget */
                c->bytes -= s->bytes;
                sl__iter_unhold(base, s->bytes);
                *out = s->el;
                s->el = NULL;
                base->ok_count++;
                return 0;
            }
            sl__set_error_str(s->rc, s->msg);
            int rc = s->rc == SL_ECANCELED ? SL_ECANCELED : sl__policy(base, s->rc);
            slot_clear(s);
            if (rc)
                return rc;
        }
        if (c) {
            it->cur = NULL;
            if (c->n) { /* its last position outlives it */
                size_t from = c->n > 1 ? c->snap_end[c->n - 2] : 0;
                int e = sl__bytes_assign(&it->taken, c->snaps.p + from,
                                         c->snap_end[c->n - 1] - from);
                it->taken_index = c->first_index + c->n;
                if (e) {
                    chunk_recycle(it, c);
                    return e;
                }
            }
            chunk_recycle(it, c);
        }
        int rc = 0;
        it->cur = chunk_next(it, &rc);
        if (!it->cur)
            return rc;
    }
}

static void map_cancel(sl__iter *base)
{
    sl__async_cancel(&((map_iter *)base)->a);
}

static void chunk_drop(map_iter *it, chunk *c)
{
    if (!c)
        return;
    for (int i = c->pos; i < c->n; i++)
        slot_clear(&c->s[i]);
    sl__iter_unhold(&it->base, c->bytes);
    sl__bytes_free(&c->snaps);
    sl__obj_put(c, sizeof *c);
}

static void map_destroy(sl__iter *base)
{
    map_iter *it = (map_iter *)base;
    sl__iter_unregister(base);
    sl__async_join(&it->a, base->tree);
    pthread_mutex_lock(&it->a.mu);
    while (it->in_flight > 0)
        pthread_cond_wait(&it->cv_idle, &it->a.mu);
    pthread_mutex_unlock(&it->a.mu);

    chunk_drop(it, it->cur);
    for (int i = 0; it->window && i < it->ahead; i++)
        chunk_drop(it, it->window[i]);
    while (it->done_head) {
        chunk *c = it->done_head;
        it->done_head = c->next;
        chunk_drop(it, c);
    }
    while (it->free_chunks) {
        chunk *c = it->free_chunks;
        it->free_chunks = c->next;
        sl__bytes_free(&c->snaps);
        sl__obj_put(c, sizeof *c);
    }
    sl__free(it->window, (size_t)it->ahead * sizeof *it->window);
    sl__iter_free(it->in);
    sl__bytes_free(&it->taken);
    sl__snap_fini(&it->snap);
    pthread_cond_destroy(&it->cv_idle);
    sl__async_fini(&it->a);
}

/* The record: the next input index, then the input's record after the
 * last element passed (taken or skipped by the error policy). */
#define MAP_FIELDS(X) X(index)
SL__STATE_FIELDS(MAP_FIELDS);

static int map_save(sl__iter *base, sl__bytes *w)
{
    map_iter *it = (map_iter *)base;
    if (!it->ordered)
        return sl__set_error(SL_EUNSUPPORTED, "%s: an unordered map (SL_NONDETERMINISTIC, or "
                             "SL_OPT_DETERMINISTIC off) has no position to save",
                             sl_dataset_name(base->ds));
    const chunk *c = it->cur;
    const unsigned char *p = it->taken.p;
    size_t n = it->taken.n;
    int64_t f[NFIELDS] = {[F_index] = it->taken_index};
    if (c && c->pos > 0) {
        size_t from = c->pos > 1 ? c->snap_end[c->pos - 2] : 0;
        p = c->snaps.p + from;
        n = c->snap_end[c->pos - 1] - from;
        f[F_index] = c->first_index + c->pos;
    }
    return sl__save_async(w, base, &it->snap, NFIELDS, f, p, n);
}

static const sl__iter_ops map_iter_ops = {
    .next = map_next,
    .cancel = map_cancel,
    .destroy = map_destroy,
    .save = map_save,
};

sl__knob *sl__map_parallelism_knob(sl__iter *it, int parallelism)
{
    int64_t threads = sl_runtime_threads(it->tree->rt);
    return sl__iter_knob(it, SL__NODE_MAP, SL__KNOB_PARALLELISM, parallelism, 1, 4 * threads,
                         2 * threads);
}

/* The window is sized for the knob's maximum, so the controller can raise
 * it without reallocating. */
static int parallelism_knob(map_iter *it, int parallelism)
{
    it->parallelism = sl__map_parallelism_knob(&it->base, parallelism);
    if (!it->parallelism)
        return SL_EINTERNAL;
    int64_t max = it->parallelism->max;
    it->ahead = (int)(2 * max);
    return 0;
}

int sl__map_iter_make(const sl_dataset *ds, sl__tree *tree, uint64_t key, int64_t epoch,
                      sl_map_fn fn, void *user, int parallelism, unsigned flags, sl__iter **out)
{
    map_iter *it = sl__iter_alloc(&map_iter_ops, sizeof *it, ds, tree, key, epoch);
    if (!it)
        return SL_ENOMEM;
    it->fn = fn;
    it->user = user;
    it->seed = sl__node_seed(&it->base, -1);
    it->ordered = (flags & SL_MAP_ORDERED) ||
                  (!(flags & SL_NONDETERMINISTIC) && tree->deterministic);
    if (!it->ordered) /* no position to save: skip the snapshots */
        atomic_store(&it->snap.rc, SL_EUNSUPPORTED);
    sl__async_init(&it->a);
    pthread_cond_init(&it->cv_idle, NULL);
    int rc = parallelism_knob(it, parallelism);
    int64_t f[NFIELDS] = {0};
    if (rc == 0 && (rc = sl__iter_restored(&it->base, NFIELDS, f)) > 0)
        rc = sl__state_range(&it->base, field_names[F_index], f[F_index], 0, INT64_MAX);
    it->taken_index = f[F_index];
    if (rc == 0 && !f[F_index])
        it->taken_index = sl__split_base(&it->base); /* a service worker's part */
    if (rc == 0)
        rc = sl__iter_make_input(&it->base, 0, epoch, &it->in);
    if (rc == 0) {
        it->window = sl__calloc((size_t)it->ahead, sizeof *it->window);
        rc = it->window ? 0 : SL_ENOMEM;
    }
    if (rc == 0) {
        sl__snap(&it->snap, it->in, &it->taken); /* nothing passed yet */
        it->p_index = it->taken_index; /* 0, or where a saved state resumes */
        it->inline_chunks = tree->inline_nodes;
        if (!it->inline_chunks)
            rc = sl__async_start(&it->a, producer_main, it, "map");
    }
    if (rc < 0) {
        sl__iter_free(&it->base);
        return rc;
    }
    sl__iter_register(&it->base);
    *out = &it->base;
    return 0;
}

static int map_make(const sl_dataset *ds, sl__tree *tree, uint64_t key, int64_t epoch,
                    sl__iter **out)
{
    const map_ds *m = (const map_ds *)ds;
    return sl__map_iter_make(ds, tree, key, epoch, m->fn, m->user, m->parallelism, m->flags,
                             out);
}

static int64_t map_cardinality(const sl_dataset *ds)
{
    return sl_dataset_cardinality(ds->inputs[0]);
}

static uint64_t map_fingerprint(const sl_dataset *ds, uint64_t h)
{
    /* parallelism and order do not change the elements (ordered), so they
     * stay out of the fingerprint; the name stands for the function */
    (void)ds;
    return h;
}

static const sl__node_ops map_ops = {
    .kind = "map",
    .make_iter = map_make,
    .cardinality = map_cardinality,
    .fingerprint = map_fingerprint,
};

SL_API sl_dataset *sl_map(sl_dataset *in, const char *name, sl_map_fn fn, void *user,
                          int parallelism, unsigned flags)
{
    map_ds *m = (map_ds *)sl__dataset_new(&map_ops, sizeof *m, in);
    if (!m)
        return NULL;
    if (!fn || (parallelism < 1 && parallelism != SL_AUTOTUNE) || parallelism > 4096 ||
        (flags & ~(SL_MAP_ORDERED | SL_NONDETERMINISTIC)) ||
        (flags & SL_MAP_ORDERED && flags & SL_NONDETERMINISTIC))
        return sl__dataset_fail(&m->base, SL_EINVAL, "map(%s): bad arguments (fn %s, parallelism %d, flags %#x)",
                                name ? name : "", fn ? "set" : "NULL", parallelism, flags);
    m->fn = fn;
    m->user = user;
    m->parallelism = parallelism;
    m->flags = flags;
    if (sl__dataset_set_name(&m->base, name) < 0)
        return sl__dataset_fail(&m->base, SL_ENOMEM, "map: out of memory");
    return &m->base;
}
