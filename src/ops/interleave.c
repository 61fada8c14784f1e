/*
 * interleave(fn, cycle_length, block_length, parallelism): tf.data's
 * interleave, with threads of its own pulling ahead.
 *
 * Each input element becomes a *source*: fn's dataset and its iterator,
 * with a small buffer of elements pulled ahead. The consumer runs tf.data's
 * sequential algorithm over `cycle_length` slots of sources, taking from
 * the buffers: from slot ci, block_length elements, then the next slot; a
 * source that ends frees its slot, and an empty slot takes the next input.
 * So the output is tf.data's order whatever the timing. Fetcher threads
 * (the parallelism knob: how many may work at once) fill the buffers of
 * the sources in the slots, the current one first, and open the next
 * inputs ahead (up to cycle_length of them), so a new shard's first block
 * is ready when its slot comes up. Fetchers block on their sources' reads,
 * never a pool worker.
 *
 * Each source's iterator gets a key of its own (its random streams differ
 * from the other inputs') but shares statistics entries with the others.
 *
 * A saved position holds the slots' input positions and their sources'
 * records; restoring replays the input (paths: cheap) up to the last
 * input taken, reopening the sources that were in slots.
 */
#include <stdio.h>
#include <string.h>
#include <time.h>
#include "../core/clock.h"
#include "../core/salts.h"
#include "../graph/node.h"

#define MAX_CYCLE 1024
#define MAX_FETCHERS 64
#define PARKED_NS 20000000L /* how often a fetcher the knob parks looks at it again */
#define SOURCE_BUF 16 /* elements a source buffers ahead, at least (block_length if more) */

typedef struct interleave_ds {
    sl_dataset base;
    sl_interleave_fn fn;
    void *user;
    int cycle, block, parallelism;
    unsigned flags;
} interleave_ds;

typedef struct source {
    struct source *next;  /* futures queue */
    int64_t index;        /* input position */
    sl_dataset *ds;
    sl__iter *it;         /* NULL when fn or its make failed: rc says why */
    sl_element **buf;     /* ring of pulled elements */
    sl__bytes *snaps;     /* per pulled element: it's record after the pull */
    int cap, head, count;
    bool ended;           /* it returned its end: rc (SL_EOF or an error), msg */
    int rc;
    char *msg;
    bool busy;            /* a fetcher is pulling from it */
    bool nosave;          /* its iterator cannot save its position */
    bool typed;           /* its dataset's structure went to the interleave */
    int64_t held;         /* bytes of the buffered elements */
    sl__bytes taken;      /* it's record after the last element taken */
} source;

typedef struct interleave_iter {
    sl__iter base;
    sl__iter *in;
    const interleave_ds *d;
    pthread_mutex_t mu;
    pthread_cond_t cv_consumer, cv_work, cv_parked;
    atomic_bool stop;
    pthread_t threads[MAX_FETCHERS];
    int nthreads;
    sl__knob *parallelism;
    int working;          /* fetchers pulling now */
    int idle;             /* fetchers waiting for work */
    bool consumer_waiting;
    /* the input, pulled by one fetcher at a time (opening) */
    bool opening, input_ended;
    int input_rc;
    char *input_msg;
    int64_t pulled;       /* input elements pulled */
    source *fut_head, *fut_tail;
    int nfut;
    atomic_int buffered;  /* elements in all buffers (the budget's "own") */
    /* consumer */
    source **slot;
    int ci, bi, open;
    bool end_of_input;
    int64_t popped;       /* inputs taken into slots */
    bool ended;
    int ended_rc;
    bool inline_fetch; /* the edge profile: no fetcher threads */
    bool again;        /* the last next returned SL__AGAIN after waiting */
} interleave_iter;

static bool ordered(const interleave_iter *it)
{
    return !(it->d->flags & SL_NONDETERMINISTIC);
}

/* Frees a source nobody else holds any more. Not under mu: its nodes
 * (a map inside the source) unregister under the tree's lock, which
 * sl__tree_cancel holds while it takes mu (interleave_cancel). */
static void source_free(interleave_iter *it, source *s)
{
    if (!s)
        return;
    for (int i = 0; i < s->count; i++)
        sl_element_release(s->buf[(s->head + i) % s->cap]);
    if (s->held)
        sl__iter_unhold(&it->base, s->held);
    atomic_fetch_sub(&it->buffered, s->count);
    for (int i = 0; s->snaps && i < s->cap; i++)
        sl__bytes_free(&s->snaps[i]);
    sl__free(s->snaps, (size_t)s->cap * sizeof *s->snaps);
    sl__free(s->buf, (size_t)s->cap * sizeof *s->buf);
    sl__bytes_free(&s->taken);
    sl__iter_free(s->it);
    sl_dataset_release(s->ds);
    sl__strfree(s->msg);
    sl__free(s, sizeof *s);
}

/* The iterator of input element el's dataset (it->d->fn), as source
 * `index`. A failure of fn or of the make is kept in the source, to meet
 * the error policy when the consumer reaches it. */
static source *source_open(interleave_iter *it, const sl_element *el, int64_t index)
{
    source *s = sl__calloc(1, sizeof *s);
    if (!s)
        return NULL;
    s->index = index;
    s->cap = it->d->block > SOURCE_BUF ? it->d->block : SOURCE_BUF;
    s->buf = sl__calloc((size_t)s->cap, sizeof *s->buf);
    s->snaps = sl__calloc((size_t)s->cap, sizeof *s->snaps);
    if (!s->buf || !s->snaps) {
        source_free(it, s);
        return NULL;
    }
    sl_clear_error();
    s->ds = it->d->fn(el, it->d->user);
    int rc = 0;
    if (!s->ds) {
        rc = sl_last_error_code() < 0 ? sl_last_error_code() : SL_ECALLBACK;
        if (!sl__error_msg()[0])
            sl__set_error(rc, "interleave: the function returned no dataset");
    } else {
        /* the interleave's elements are its inputs' datasets': the first
         * that knows its structure gives it, the others must agree (one
         * that learns it from its elements, at its first) */
        s->typed = sl_dataset_structure(s->ds) != NULL;
        rc = sl__dataset_adopt_structure(it->base.ds, s->ds);
    }
    if (rc == 0 && s->ds) {
        uint64_t key = sl__hash_u64(sl__hash_u64(it->base.key, SL__SALT_INTERLEAVE),
                                    (uint64_t)index);
        uint64_t stats = sl__hash_u64(it->base.stats_key, SL__SALT_INTERLEAVE);
        rc = sl__iter_make_under(&it->base, s->ds, key, stats, it->base.epoch, &s->it);
    }
    if (rc < 0) {
        sl__element_error_prefix(el);
        sl__error_prefix(sl_dataset_name(it->base.ds));
        s->ended = true;
        s->rc = rc;
        s->msg = sl__strdup(sl__error_msg());
    } else {
        s->nosave = sl__iter_save(s->it, &s->taken) < 0; /* nothing taken yet */
    }
    return s;
}

/* ---- fetchers ---- */

/* The source a fetcher should fill next (under mu): the slots' from the
 * current one on, then the futures'; NULL when none needs it. */
static source *work(interleave_iter *it)
{
    int n = it->d->cycle;
    for (int k = 0; k < n; k++) {
        source *s = it->slot[(it->ci + k) % n];
        if (s && !s->busy && !s->ended && s->count < s->cap)
            return s;
    }
    for (source *s = it->fut_head; s; s = s->next)
        if (!s->busy && !s->ended && s->count < s->cap)
            return s;
    return NULL;
}

static int active(const interleave_iter *it)
{
    int64_t p = sl__knob_get(it->parallelism), max = it->parallelism->max;
    return p < 1 ? 1 : p > max ? (int)max : (int)p;
}

/* Pulls into s until its buffer is full or it ends. Called without mu,
 * with s->busy set. */
static void fill(interleave_iter *it, source *s)
{
    sl__node_stats *ns = it->base.stats;
    int64_t t0 = sl__now_ns();
    for (;;) {
        pthread_mutex_lock(&it->mu);
        bool room = s->count < s->cap && !atomic_load(&it->stop);
        int slot = (s->head + s->count) % s->cap;
        pthread_mutex_unlock(&it->mu);
        if (!room)
            break;
        sl_element *el;
        int rc = sl__iter_next(s->it, &el);
        if (rc == 0 && !s->typed) {
            s->typed = true;
            if ((rc = sl__dataset_adopt_structure(it->base.ds, s->ds)) < 0)
                sl_element_release(el);
        }
        sl__bytes *snap = &s->snaps[slot];
        snap->n = 0;
        bool nosave = rc == 0 && sl__iter_save(s->it, snap) < 0;
        int64_t b = rc == 0 ? (int64_t)sl__element_bytes(el) : 0;
        if (b)
            sl__iter_hold(&it->base, b);
        pthread_mutex_lock(&it->mu);
        if (rc == 0) {
            s->buf[slot] = el;
            s->nosave |= nosave;
            s->count++;
            s->held += b;
            atomic_fetch_add(&it->buffered, 1);
        } else {
            s->ended = true;
            s->rc = rc;
            if (rc < 0)
                s->msg = sl__strdup(sl__error_msg());
        }
        /* a waiting consumer is woken once the buffer is half full (or the
         * source ended), not per element: one wake-up per several */
        if (it->consumer_waiting && (rc || s->count >= s->cap / 2))
            pthread_cond_signal(&it->cv_consumer);
        pthread_mutex_unlock(&it->mu);
        if (rc)
            break;
    }
    int64_t t1 = sl__now_ns();
    sl__stat_add(&ns->busy_ns, t1 - t0);
    sl__trace_span(it->base.tree, ns, t0, t1);
}

/* Pulls the next input element and opens its source (mu not held, with
 * it->opening set). */
static void open_next(interleave_iter *it)
{
    sl_element *el;
    int64_t t0 = sl__now_ns();
    int rc = sl__iter_next(it->in, &el);
    sl__stat_add(&it->base.stats->wait_ns, sl__now_ns() - t0);
    source *s = NULL;
    if (rc == 0) {
        s = source_open(it, el, it->pulled);
        sl_element_release(el);
        if (!s)
            rc = SL_ENOMEM;
    }
    pthread_mutex_lock(&it->mu);
    if (s) {
        it->pulled++;
        if (it->fut_tail)
            it->fut_tail->next = s;
        else
            it->fut_head = s;
        it->fut_tail = s;
        it->nfut++;
    } else {
        it->input_ended = true;
        it->input_rc = rc;
        if (rc < 0)
            it->input_msg = sl__strdup(sl__error_msg());
    }
    it->opening = false;
    if (it->consumer_waiting)
        pthread_cond_signal(&it->cv_consumer);
    if (it->idle)
        pthread_cond_signal(&it->cv_work); /* the new source wants filling */
    pthread_mutex_unlock(&it->mu);
}

typedef struct fetcher {
    interleave_iter *it;
    int id;
} fetcher;

/* One piece of a fetcher's work (under mu, which it lets go of while it
 * works): fill the source that needs it most, or open the next input.
 * False when there is none. */
static bool fetch_round(interleave_iter *it)
{
    source *s = work(it);
    bool open = !s && !it->opening && !it->input_ended && it->nfut < it->d->cycle;
    if (!s && !open)
        return false;
    if (s)
        s->busy = true;
    else
        it->opening = true;
    it->working++;
    atomic_store_explicit(&it->base.stats->in_flight, it->working, memory_order_relaxed);
    pthread_mutex_unlock(&it->mu);
    /* (inline, the consumer is the only one to free the budget: no wait) */
    if (s && (it->inline_fetch || sl__tree_wait_budget(it->base.tree, &it->buffered, &it->stop)))
        fill(it, s);
    else if (!s)
        open_next(it);
    pthread_mutex_lock(&it->mu);
    if (s)
        s->busy = false;
    it->working--;
    atomic_store_explicit(&it->base.stats->in_flight, it->working, memory_order_relaxed);
    return true;
}

static void *fetcher_main(void *arg)
{
    interleave_iter *it = ((fetcher *)arg)->it;
    int id = ((fetcher *)arg)->id;
    sl__free(arg, sizeof(fetcher));
    pthread_mutex_lock(&it->mu);
    while (!atomic_load(&it->stop)) {
        if (id >= active(it)) {
            /* parked by the knob: look again now and then (the controller
             * moves it without telling), leaving wake-ups to active ones */
            struct timespec ts;
            clock_gettime(CLOCK_REALTIME, &ts);
            ts.tv_nsec += PARKED_NS;
            if (ts.tv_nsec >= 1000000000L) {
                ts.tv_sec++;
                ts.tv_nsec -= 1000000000L;
            }
            pthread_cond_timedwait(&it->cv_parked, &it->mu, &ts);
            continue;
        }
        if (!fetch_round(it)) {
            it->idle++;
            pthread_cond_wait(&it->cv_work, &it->mu);
            it->idle--;
            continue;
        }
        if (it->consumer_waiting) /* a source it held may have ended */
            pthread_cond_signal(&it->cv_consumer);
    }
    pthread_mutex_unlock(&it->mu);
    return NULL;
}

/* ---- the consumer: tf.data's order ---- */

/* The consumer waits for a fetcher (under mu), waking one that is idle:
 * 0, or SL__AGAIN at the calling thread's deadline. */
static int consumer_wait(interleave_iter *it, bool *waited)
{
    *waited = true;
    if (it->inline_fetch) { /* the edge profile: do a fetcher's work here */
        int64_t d = sl__deadline_suspend();
        fetch_round(it);
        sl__deadline_resume(d);
        return 0;
    }
    if (it->idle)
        pthread_cond_signal(&it->cv_work);
    it->consumer_waiting = true;
    int rc = sl__consumer_cond_wait(&it->cv_consumer, &it->mu);
    it->consumer_waiting = false;
    return rc;
}

static void advance(interleave_iter *it)
{
    it->ci = (it->ci + 1) % it->d->cycle;
    it->bi = 0;
}

/* Takes the head of s's buffer (under mu). */
static sl_element *take(interleave_iter *it, source *s)
{
    sl_element *el = s->buf[s->head];
    s->buf[s->head] = NULL;
    sl__bytes_swap(&s->taken, &s->snaps[s->head]);
    s->head = (s->head + 1) % s->cap;
    s->count--;
    int64_t b = (int64_t)sl__element_bytes(el);
    s->held -= b;
    atomic_fetch_sub(&it->buffered, 1);
    sl__iter_unhold_nowake(&it->base, b);
    /* half empty: time to refill, in one go */
    if (s->count == s->cap / 2 && !s->busy && !s->ended && it->idle)
        pthread_cond_signal(&it->cv_work);
    return el;
}

/* A source at its end, in its slot: its error meets the policy (an input
 * that could not be opened) or comes out; 0 to go on. */
static int source_end(interleave_iter *it, source *s)
{
    if (s->rc == SL_EOF)
        return 0;
    sl__set_error_str(s->rc, s->msg ? s->msg : sl_strerror(s->rc));
    if (!s->it) /* fn or its make failed: an element error of this node */
        return sl__policy(&it->base, s->rc);
    return s->rc; /* the source's own failure, after its policy */
}

/* Deterministic: the next element in tf.data's order (under mu). */
static int next_ordered(interleave_iter *it, sl_element **out, bool *waited)
{
    while (!it->end_of_input || it->open > 0) {
        if (atomic_load(&it->stop) || sl__tree_cancelled(it->base.tree))
            return sl__set_error(SL_ECANCELED, "interleave: canceled");
        source *s = it->slot[it->ci];
        if (s) {
            if (s->count > 0) {
                *out = take(it, s);
                if (++it->bi == it->d->block)
                    advance(it);
                return 0;
            }
            if (!s->ended || s->busy) { /* a fetcher may still hold an ended one */
                if (consumer_wait(it, waited) == SL__AGAIN)
                    return SL__AGAIN;
                continue;
            }
            it->slot[it->ci] = NULL;
            it->open--;
            int rc = source_end(it, s);
            pthread_mutex_unlock(&it->mu);
            source_free(it, s);
            pthread_mutex_lock(&it->mu);
            advance(it);
            if (rc)
                return rc;
        } else if (!it->end_of_input) {
            if (it->fut_head) {
                s = it->fut_head;
                it->fut_head = s->next;
                if (!it->fut_head)
                    it->fut_tail = NULL;
                it->nfut--;
                s->next = NULL;
                it->slot[it->ci] = s;
                it->open++;
                it->popped++;
                pthread_cond_broadcast(&it->cv_work);
            } else if (it->input_ended) {
                it->end_of_input = true;
                if (it->input_rc < 0) {
                    sl__set_error_str(it->input_rc, it->input_msg);
                    return it->input_rc;
                }
            } else if (consumer_wait(it, waited) == SL__AGAIN) {
                return SL__AGAIN;
            }
        } else {
            advance(it);
        }
    }
    return SL_EOF;
}

/* Completion order: the first slot from ci on with an element ready. */
static int next_any(interleave_iter *it, sl_element **out, bool *waited)
{
    int n = it->d->cycle;
    for (;;) {
        if (atomic_load(&it->stop) || sl__tree_cancelled(it->base.tree))
            return sl__set_error(SL_ECANCELED, "interleave: canceled");
        for (int k = 0; k < n; k++) {
            int i = (it->ci + k) % n;
            source *s = it->slot[i];
            if (s && s->count > 0) {
                *out = take(it, s);
                it->ci = i;
                if (++it->bi >= it->d->block)
                    advance(it);
                return 0;
            }
            if (s && s->ended && !s->busy) {
                it->slot[i] = NULL;
                it->open--;
                int rc = source_end(it, s);
                pthread_mutex_unlock(&it->mu);
                source_free(it, s);
                pthread_mutex_lock(&it->mu);
                if (rc)
                    return rc;
            }
        }
        /* fill empty slots from the futures */
        bool filled = false;
        for (int i = 0; i < n && it->fut_head; i++)
            if (!it->slot[i]) {
                source *s = it->fut_head;
                it->fut_head = s->next;
                if (!it->fut_head)
                    it->fut_tail = NULL;
                it->nfut--;
                s->next = NULL;
                it->slot[i] = s;
                it->open++;
                it->popped++;
                filled = true;
            }
        if (filled) {
            pthread_cond_broadcast(&it->cv_work);
            continue;
        }
        if (it->open == 0 && !it->fut_head && it->input_ended) {
            if (it->input_rc < 0) {
                sl__set_error_str(it->input_rc, it->input_msg);
                return it->input_rc;
            }
            return SL_EOF;
        }
        if (consumer_wait(it, waited) == SL__AGAIN)
            return SL__AGAIN;
    }
}

static int interleave_next(sl__iter *base, sl_element **out)
{
    interleave_iter *it = (interleave_iter *)base;
    if (it->ended)
        return it->ended_rc;
    bool waited = it->again;
    pthread_mutex_lock(&it->mu);
    int ready = atomic_load(&it->buffered);
    int rc = ordered(it) ? next_ordered(it, out, &waited) : next_any(it, out, &waited);
    pthread_mutex_unlock(&it->mu);
    it->again = rc == SL__AGAIN;
    sl__tree_budget_wake(base->tree);
    if (rc == 0)
        sl__stat_take(base->stats, waited ? 0 : ready);
    if (rc && rc != SL_ECANCELED && rc != SL__AGAIN) {
        it->ended = true;
        it->ended_rc = rc;
    }
    return rc;
}

static void interleave_cancel(sl__iter *base)
{
    interleave_iter *it = (interleave_iter *)base;
    atomic_store(&it->stop, true);
    pthread_mutex_lock(&it->mu);
    pthread_cond_broadcast(&it->cv_work);
    pthread_cond_broadcast(&it->cv_parked);
    pthread_cond_broadcast(&it->cv_consumer);
    pthread_mutex_unlock(&it->mu);
}

static void interleave_destroy(sl__iter *base)
{
    interleave_iter *it = (interleave_iter *)base;
    sl__iter_unregister(base);
    interleave_cancel(base);
    sl__tree_wake(base->tree);
    for (int i = 0; i < it->nthreads; i++)
        pthread_join(it->threads[i], NULL);
    for (int i = 0; it->slot && i < it->d->cycle; i++)
        source_free(it, it->slot[i]);
    sl__free(it->slot, (size_t)it->d->cycle * sizeof *it->slot);
    while (it->fut_head) {
        source *s = it->fut_head;
        it->fut_head = s->next;
        source_free(it, s);
    }
    sl__strfree(it->input_msg);
    sl__iter_free(it->in);
    pthread_cond_destroy(&it->cv_work);
    pthread_cond_destroy(&it->cv_parked);
    pthread_cond_destroy(&it->cv_consumer);
    pthread_mutex_destroy(&it->mu);
}

/* ---- positions ---- */

/* Fields: the cycle's position (slot ci, element bi of its block), whether
 * the input ended, how many input elements were popped, then each slot's
 * input position (-1: empty); children: the records of the sources in the
 * slots, as of their last element taken. The input's record is not kept:
 * restoring replays it from the pass start, to reopen the slots' inputs. */
#define INTERLEAVE_FIELDS(X) X(ci) X(bi) X(end_of_input) X(popped)
SL__STATE_FIELDS(INTERLEAVE_FIELDS);
#define MAX_SAVED_CYCLE 64

static int interleave_save(sl__iter *base, sl__bytes *w)
{
    interleave_iter *it = (interleave_iter *)base;
    if (!ordered(it))
        return sl__set_error(SL_EUNSUPPORTED, "interleave: in completion order "
                             "(SL_NONDETERMINISTIC) it has no position to save");
    int n = it->d->cycle, nf = NFIELDS + n, open = 0;
    int64_t f[NFIELDS + MAX_SAVED_CYCLE];
    if (n > MAX_SAVED_CYCLE)
        return sl__set_error(SL_EUNSUPPORTED, "interleave: a cycle of %d inputs is too long "
                             "to save (at most %d)", n, MAX_SAVED_CYCLE);
    pthread_mutex_lock(&it->mu);
    f[F_ci] = it->ci;
    f[F_bi] = it->bi;
    f[F_end_of_input] = it->end_of_input;
    f[F_popped] = it->popped;
    for (int i = 0; i < n; i++) {
        source *s = it->slot[i];
        f[NFIELDS + i] = s ? s->index : -1;
        open += s && s->it;
    }
    int rc = sl__state_node(w, base, nf, f, open);
    for (int i = 0; rc == 0 && i < n; i++) {
        source *s = it->slot[i];
        if (s && s->it)
            rc = !s->nosave ? sl__bytes_append(w, s->taken.p, s->taken.n)
                            : sl__set_error(SL_EUNSUPPORTED, "interleave: input %lld cannot "
                                            "save its position", (long long)s->index);
    }
    pthread_mutex_unlock(&it->mu);
    return rc;
}

/* Rebuilds the slots from a saved position: the input replayed from its
 * start up to `popped`, the slots' inputs reopened (their sources take
 * their records), the others dropped. */
static int resume(interleave_iter *it, const int64_t *f)
{
    int n = it->d->cycle;
    it->ci = (int)f[F_ci];
    it->bi = (int)f[F_bi];
    it->end_of_input = f[F_end_of_input] != 0;
    int64_t popped = f[F_popped];
    for (it->pulled = 0; it->pulled < popped; it->pulled++) {
        sl_element *el;
        int rc = sl__iter_next(it->in, &el);
        if (rc)
            return rc == SL_EOF ? sl__set_error(SL_EMISMATCH, "saved state: interleave had "
                                                "taken %lld inputs, the input has %lld",
                                                (long long)popped, (long long)it->pulled)
                                : rc;
        for (int i = 0; i < n; i++)
            if (f[NFIELDS + i] == it->pulled) {
                source *s = source_open(it, el, it->pulled);
                if (!s) {
                    sl_element_release(el);
                    return SL_ENOMEM;
                }
                it->slot[i] = s;
                it->open++;
            }
        sl_element_release(el);
    }
    it->popped = popped;
    if (it->end_of_input)
        it->input_ended = true;
    return 0;
}

static const sl__iter_ops interleave_iter_ops = {
    .next = interleave_next,
    .cancel = interleave_cancel,
    .destroy = interleave_destroy,
    .save = interleave_save,
};

static int interleave_make(const sl_dataset *ds, sl__tree *tree, uint64_t key, int64_t epoch,
                       sl__iter **out)
{
    const interleave_ds *d = (const interleave_ds *)ds;
    interleave_iter *it = sl__iter_alloc(&interleave_iter_ops, sizeof *it, ds, tree, key, epoch);
    if (!it)
        return SL_ENOMEM;
    it->d = d;
    pthread_mutex_init(&it->mu, NULL);
    sl__cond_init_monotonic(&it->cv_consumer);
    pthread_cond_init(&it->cv_work, NULL);
    pthread_cond_init(&it->cv_parked, NULL);
    int max = d->cycle < MAX_FETCHERS ? d->cycle : MAX_FETCHERS;
    int asked = d->parallelism != SL_AUTOTUNE && d->parallelism > max ? max : d->parallelism;
    /* the fetchers wait on their inputs' reads more than they compute: a
     * reading node to the controller (in flight, not a CPU claim). Under
     * autotune they start one per worker thread: before the first element
     * a shuffle buffer's fill is all there is to do, and one fetcher fills
     * it much more slowly than the pool's threads can (bench/README). */
    int start = sl_runtime_threads(tree->rt);
    start = start < 1 ? 1 : start > max ? max : start;
    it->parallelism = sl__iter_knob(&it->base, SL__NODE_READ, SL__KNOB_IO_DEPTH, asked, start,
                                    max, max);
    it->slot = sl__calloc((size_t)d->cycle, sizeof *it->slot);
    int rc = it->parallelism && it->slot ? 0 : it->slot ? SL_EINTERNAL : SL_ENOMEM;
    int64_t f[NFIELDS + MAX_SAVED_CYCLE];
    int resumed = 0;
    if (rc == 0 && d->cycle <= MAX_SAVED_CYCLE) {
        resumed = sl__iter_restored(&it->base, NFIELDS + d->cycle, f);
        rc = resumed < 0 ? resumed : 0;
        int64_t hi[NFIELDS] = {[F_ci] = d->cycle - 1, [F_bi] = d->block - 1,
                               [F_end_of_input] = 1, [F_popped] = INT64_MAX};
        for (int i = 0; resumed > 0 && rc == 0 && i < NFIELDS; i++)
            rc = sl__state_range(&it->base, field_names[i], f[i], 0, hi[i]);
        for (int i = 0; resumed > 0 && rc == 0 && i < d->cycle; i++)
            rc = sl__state_range(&it->base, "slot", f[NFIELDS + i], -1, INT64_MAX);
    }
    if (rc == 0)
        rc = sl__iter_make_input(&it->base, 0, epoch, &it->in);
    if (rc == 0 && resumed > 0)
        rc = resume(it, f);
    it->inline_fetch = tree->inline_nodes;
    int64_t threads = it->parallelism && !it->inline_fetch ? it->parallelism->max : 0;
    for (int i = 0; rc == 0 && i < threads; i++) {
        fetcher *a = sl__alloc(sizeof *a);
        if (!a) {
            rc = SL_ENOMEM;
            break;
        }
        *a = (fetcher){it, i};
        rc = sl__thread_start(&it->threads[i], fetcher_main, a, "interleave");
        if (rc < 0)
            sl__free(a, sizeof *a);
        else
            it->nthreads++;
    }
    if (rc < 0) {
        sl__iter_free(&it->base);
        return rc;
    }
    atomic_store(&it->base.stats->capacity, d->cycle * (d->block > 2 ? d->block : 2));
    sl__iter_register(&it->base);
    *out = &it->base;
    return 0;
}

static uint64_t interleave_fingerprint(const sl_dataset *ds, uint64_t h)
{
    /* the name stands for fn; the parallelism does not change the output
     * (ordered), the order does */
    const interleave_ds *d = (const interleave_ds *)ds;
    h = sl__hash_u64(h, ((uint64_t)d->cycle << 32) | (uint32_t)d->block);
    return sl__hash_u64(h, d->flags);
}

static sl_dataset *interleave_rebuild_files(const sl_dataset *ds, sl_dataset *files)
{
    const interleave_ds *d = (const interleave_ds *)ds;
    return sl_interleave(files, d->fn, d->user, d->cycle, d->block, d->parallelism, d->flags);
}

static const sl__node_ops interleave_ops = {
    .kind = "interleave",
    .make_iter = interleave_make,
    .fingerprint = interleave_fingerprint,
    .rebuild_files = interleave_rebuild_files,
};

SL_API sl_dataset *sl_interleave(sl_dataset *in, sl_interleave_fn fn, void *user,
                                 int cycle_length, int block_length, int parallelism,
                                 unsigned flags)
{
    interleave_ds *d = (interleave_ds *)sl__dataset_new(&interleave_ops, sizeof *d, in);
    if (!d)
        return NULL;
    if (!fn || cycle_length < 1 || cycle_length > MAX_CYCLE || block_length < 1 ||
        (parallelism < 1 && parallelism != SL_AUTOTUNE) || parallelism > MAX_FETCHERS ||
        (flags & ~SL_NONDETERMINISTIC))
        return sl__dataset_fail(&d->base, SL_EINVAL, "interleave: bad arguments (fn %s, "
                                "cycle_length %d, block_length %d, parallelism %d, flags 0x%x)",
                                fn ? "set" : "NULL", cycle_length, block_length, parallelism,
                                flags);
    d->fn = fn;
    d->user = user;
    d->cycle = cycle_length;
    d->block = block_length;
    d->parallelism = parallelism;
    d->flags = flags;
    return &d->base;
}

/* tf.data's flat_map is interleave with one input open at a time. */
SL_API sl_dataset *sl_flat_map(sl_dataset *in, sl_interleave_fn fn, void *user)
{
    return sl_interleave(in, fn, user, 1, 1, 1, 0);
}
