/*
 * map_image_batch: map_image fused with the batch after it, one node that
 * decodes every image straight into its slot of the batch tensor.
 *
 *   - a producer thread pulls encoded inputs, opens a batch buffer of
 *     `size` image slots and hands the images to the pool in small tasks,
 *     so a batch is spread over all workers (no straggler at the epoch's
 *     end) and few encoded files are held at once;
 *   - the consumer takes finished batches in order. A batch whose slots all
 *     decoded goes out as it is (zero copy). An element error under a skip
 *     policy leaves a hole: the batches from there on are assembled by
 *     copying valid images into a fresh batch, and the producer shortens
 *     its next batch so that its boundaries line up with the output again
 *     (it knows how many elements failed so far), after which batches go
 *     out without copies again. Output is the input order minus failed
 *     elements, whatever the timing.
 */
#include <pthread.h>
#include <stddef.h>
#include <string.h>
#include "../core/clock.h"
#include "../ops/map.h"
#include "../ops/stack.h"
#include "map_image.h"

#define TASK_MAX 16
#define TARGET_TASK_NS 2000000
#define BATCHES_AHEAD 2


typedef struct islot {
    sl_element *rest;
    int rc;
    char *msg;
    uint32_t snap_end; /* its input position: the batch's snaps up to here */
} islot;

typedef struct ibatch {
    struct ibatch *next;
    int64_t seq;
    int n;         /* slots assigned */
    int remaining; /* assigned slots not decoded yet (under mu) */
    bool closed;   /* the producer assigned its last slot */
    int64_t held;  /* bytes accounted in the tree */
    int64_t first; /* input index of slot 0 */
    sl__buf *img;
    islot *slots;  /* batch size entries */
    sl__bytes snaps; /* the input's record after each slot's pull */
} ibatch;

struct map_image_batch_iter;

typedef struct itask {
    sl__task task;
    struct map_image_batch_iter *owner;
    struct itask *next;
    ibatch *b;
    int start, count;
    int64_t first_index;
    sl_element *in[TASK_MAX];
} itask;

typedef struct map_image_batch_iter {
    sl__iter base;
    sl__iter *in;
    const map_image_ds *ds;
    uint64_t seed;
    int n;            /* batch size */
    size_t img_bytes;
    sl__async a;
    pthread_cond_t cv_idle; /* no task in flight */
    sl__knob *parallelism; /* tasks in flight at most; the controller may move it */
    int in_flight, outstanding;
    atomic_int pending;
    int64_t next_seq, consume_seq;
    ibatch *window[BATCHES_AHEAD];
    ibatch *free_batches;
    itask *free_tasks;
    itask *staged;    /* inputs pulled, waiting for a free unit of parallelism:
                       * the worker that frees one runs it next, no wake-up */
    sl__task_sizer sizer; /* decode cost per image (its output goes into the batch) */
    atomic_llong failed; /* element errors the consumer has seen */
    int64_t drop_card;   /* input size when a final partial batch is dropped, else -1 */
    /* consumer side */
    ibatch *cur;
    int pos;
    bool cur_last;
    sl__buf *out_img; /* assembling by copy after a hole */
    int out_fill;
    sl__stack out_rest;
    bool ended;
    int ended_rc;
    /* positions (state.h): the input's record after the last image the
     * consumer passed when that is not in cur, and the next input index */
    sl__bytes taken;
    int64_t taken_index;
    sl__snapper snap;
    /* the producer's: the next input index (for the random streams) and
     * the images assigned to batches so far */
    int64_t p_index, p_assigned;
    bool inline_batches; /* the edge profile: no producer thread */
} map_image_batch_iter;

static void slot_clear(islot *s)
{
    sl_element_release(s->rest);
    s->rest = NULL;
    sl__strfree(s->msg);
    s->msg = NULL;
    s->rc = 0;
}

/* The parallelism knob now. */
static int parallelism(const map_image_batch_iter *it)
{
    int64_t p = sl__knob_get(it->parallelism);
    return p < 1 ? 1 : p > INT32_MAX ? INT32_MAX : (int)p;
}

/* Decodes a task's images into their slots. */
static void run_images(map_image_batch_iter *it, itask *t)
{
    ibatch *b = t->b;
    int64_t t0 = sl__now_ns(), c0 = sl__thread_cpu_ns();
    for (int i = 0; i < t->count; i++) {
        islot *s = &b->slots[t->start + i];
        sl_element *in = t->in[i];
        t->in[i] = NULL;
        if (atomic_load_explicit(&it->a.stop, memory_order_relaxed)) {
            s->rc = SL_ECANCELED;
        } else {
            sl_map_ctx ctx;
            sl__map_ctx_begin(&ctx, it->base.ds, it->seed, it->base.key, it->base.epoch,
                              t->first_index + i);
            sl_clear_error();
            s->rc = sl__image_decode(&it->ds->spec, &ctx.rng, in,
                                b->img->data + (size_t)(t->start + i) * it->img_bytes);
            sl__map_ctx_end(&ctx);
            if (s->rc == 0) {
                s->rest = sl__image_rest(in, 0);
                s->rc = s->rest ? sl__image_add_rest(s->rest, in, &it->ds->spec, 0, in->n)
                                : SL_ENOMEM;
            }
            if (s->rc < 0 && s->rc != SL_ENOMEM) {
                sl__error_prefix(sl_dataset_name(&it->ds->base));
                s->msg = sl__strdup(sl__error_msg());
            }
        }
        sl_element_release(in);
    }
    int64_t t1 = sl__now_ns();
    sl__stat_add(&it->base.stats->busy_ns, t1 - t0);
    sl__stat_add(&it->base.stats->cpu_ns, sl__thread_cpu_ns() - c0);
    if (t->task.submitted_ns)
        sl__stat_add(&it->base.stats->queue_ns, t0 - t->task.submitted_ns);
    sl__trace_span(it->base.tree, it->base.stats, t0, t1);
    pthread_mutex_lock(&it->a.mu);
    sl__task_sizer_note(&it->sizer, t->count, t1 - t0, 0);
    b->remaining -= t->count;
    if (b->closed && b->remaining == 0)
        pthread_cond_broadcast(&it->a.cv_consumer);
    pthread_mutex_unlock(&it->a.mu);
}

/* Under mu: a task starts (counts against the parallelism). */
static void task_begin(map_image_batch_iter *it)
{
    it->in_flight++;
    atomic_fetch_add_explicit(&it->base.stats->in_flight, 1, memory_order_relaxed);
}

/* A pool task; runs the staged task next when there is one. */
static void run_task(sl__task *task)
{
    itask *t = (itask *)task;
    map_image_batch_iter *it = t->owner;
    while (t) {
        run_images(it, t);
        pthread_mutex_lock(&it->a.mu);
        it->in_flight--;
        atomic_fetch_sub_explicit(&it->base.stats->in_flight, 1, memory_order_relaxed);
        t->next = it->free_tasks;
        it->free_tasks = t;
        t = NULL;
        if (it->staged && it->in_flight < parallelism(it) &&
            !atomic_load_explicit(&it->a.stop, memory_order_relaxed)) {
            t = it->staged; /* the producer stages the next meanwhile */
            it->staged = NULL;
            t->task.submitted_ns = 0; /* it did not wait for a worker */
            task_begin(it);
            pthread_cond_signal(&it->a.cv_producer);
        }
        if (it->in_flight == 0)
            pthread_cond_broadcast(&it->cv_idle);
        pthread_mutex_unlock(&it->a.mu);
    }
}

/* Under mu. */
static ibatch *batch_take_free(map_image_batch_iter *it)
{
    ibatch *b = it->free_batches;
    if (b) {
        it->free_batches = b->next;
        return b;
    }
    b = sl__calloc(1, sizeof *b);
    if (b && !(b->slots = sl__calloc((size_t)it->n, sizeof *b->slots))) {
        sl__free(b, sizeof *b);
        b = NULL;
    }
    return b;
}

static void batch_free(map_image_batch_iter *it, ibatch *b)
{
    for (int i = 0; i < b->n; i++)
        slot_clear(&b->slots[i]);
    sl__buf_release(b->img);
    sl__bytes_free(&b->snaps);
    sl__free(b->slots, (size_t)it->n * sizeof *b->slots);
    sl__free(b, sizeof *b);
}

/* Images per task: about TARGET_TASK_NS of work. Under mu. */
static int task_size(const map_image_batch_iter *it)
{
    return sl__task_sizer_size(&it->sizer, TARGET_TASK_NS, TASK_MAX, -1);
}

/* Fills batch b with up to `want` images; returns 0, or the input's end
 * code (SL_EOF or an error) when it ended. */
static int fill_batch(map_image_batch_iter *it, ibatch *b, int want, int64_t *index)
{
    while (b->n < want) {
        pthread_mutex_lock(&it->a.mu);
        /* one task staged at a time: the next is prepared once a worker
         * has taken it */
        while (!atomic_load(&it->a.stop) && it->staged)
            pthread_cond_wait(&it->a.cv_producer, &it->a.mu);
        itask *t = NULL;
        if (!atomic_load(&it->a.stop)) {
            t = it->free_tasks;
            if (t)
                it->free_tasks = t->next;
        }
        int k = task_size(it);
        pthread_mutex_unlock(&it->a.mu);
        if (atomic_load(&it->a.stop)) {
            if (t) { /* taken before the stop: back where destroy frees it */
                pthread_mutex_lock(&it->a.mu);
                t->next = it->free_tasks;
                it->free_tasks = t;
                pthread_mutex_unlock(&it->a.mu);
            }
            return SL_ECANCELED;
        }
        if (!t && !(t = sl__calloc(1, sizeof *t)))
            return SL_ENOMEM;
        if (k > want - b->n)
            k = want - b->n;
        int rc = 0, got = 0;
        int64_t t0 = sl__now_ns();
        while (got < k && (rc = sl__iter_next(it->in, &t->in[got])) == 0) {
            sl__snap(&it->snap, it->in, &b->snaps);
            b->slots[b->n + got].snap_end = (uint32_t)b->snaps.n;
            got++;
        }
        sl__stat_add(&it->base.stats->wait_ns, sl__now_ns() - t0);
        if (got) {
            t->task.run = run_task;
            t->owner = it;
            t->b = b;
            t->start = b->n;
            t->count = got;
            t->first_index = *index;
            *index += got;
            pthread_mutex_lock(&it->a.mu);
            b->n += got;
            b->remaining += got;
            /* start it if the parallelism allows, else stage it for the
             * worker that finishes first */
            bool start = it->in_flight < parallelism(it);
            if (start)
                task_begin(it);
            else
                it->staged = t;
            pthread_mutex_unlock(&it->a.mu);
            if (start)
                sl__runtime_submit(it->base.tree->rt, &t->task);
        } else {
            pthread_mutex_lock(&it->a.mu);
            t->next = it->free_tasks;
            it->free_tasks = t;
            pthread_mutex_unlock(&it->a.mu);
        }
        if (rc)
            return rc;
    }
    return 0;
}

/* Input elements that can still reach a full output batch, when the last
 * partial one is dropped: decoding more would be wasted. Failures found
 * later make it grow. */
static int64_t useful(const map_image_batch_iter *it)
{
    int64_t f = atomic_load(&it->failed);
    return (it->drop_card - f) / it->n * it->n + f;
}

/* With a known input size and drop_remainder: 0 when more images are
 * useful, 1 when the pass is over (every assigned batch consumed and no
 * failure asks for more), -1 when stopped. */
static int wait_useful(map_image_batch_iter *it, int64_t assigned)
{
    if (it->drop_card < 0 || assigned < useful(it))
        return 0;
    pthread_mutex_lock(&it->a.mu);
    while (!atomic_load(&it->a.stop) && it->outstanding > 0 && assigned >= useful(it))
        pthread_cond_wait(&it->a.cv_producer, &it->a.mu);
    pthread_mutex_unlock(&it->a.mu);
    if (atomic_load(&it->a.stop))
        return -1;
    return assigned >= useful(it);
}

enum { ROUND_ON, ROUND_ENDED, ROUND_STOPPED };

/* One batch of the producer's work: open it, assign its images, hand
 * them to the pool. ROUND_ENDED: the pass is over (finished). */
static int producer_round(map_image_batch_iter *it)
{
    int done = wait_useful(it, it->p_assigned);
    if (done < 0)
        return ROUND_STOPPED;
    if (done) {
        sl__async_finish(&it->a, SL_EOF, NULL);
        return ROUND_ENDED;
    }
    pthread_mutex_lock(&it->a.mu);
    while (!atomic_load(&it->a.stop) && it->outstanding >= BATCHES_AHEAD)
        pthread_cond_wait(&it->a.cv_producer, &it->a.mu);
    ibatch *b = atomic_load(&it->a.stop) ? NULL : batch_take_free(it);
    pthread_mutex_unlock(&it->a.mu);
    if (atomic_load(&it->a.stop)) {
        if (b)
            batch_free(it, b);
        return ROUND_STOPPED;
    }
    if (!b) {
        sl__async_finish(&it->a, SL_ENOMEM, NULL);
        return ROUND_ENDED;
    }
    if (!sl__tree_wait_budget(it->base.tree, &it->pending, &it->a.stop)) {
        batch_free(it, b);
        return ROUND_STOPPED;
    }
    if (!b->img && !(b->img = sl__buf_get((size_t)it->n * it->img_bytes))) {
        batch_free(it, b);
        sl__async_finish(&it->a, SL_ENOMEM, NULL);
        return ROUND_ENDED;
    }
    /* end this batch where an output batch ends, given the failures
     * seen so far (none: every batch is full size) */
    int64_t assigned = it->p_assigned;
    int64_t misalign = (assigned - atomic_load(&it->failed)) % it->n;
    int want = it->n - (int)misalign;
    if (it->drop_card >= 0 && want > useful(it) - assigned)
        want = (int)(useful(it) - assigned);
    b->n = b->remaining = 0;
    b->closed = false;
    b->first = it->p_index;
    b->snaps.n = 0;
    b->held = (int64_t)want * (int64_t)it->img_bytes;
    sl__iter_hold(&it->base, b->held);
    pthread_mutex_lock(&it->a.mu);
    b->seq = it->next_seq++;
    it->window[b->seq % BATCHES_AHEAD] = b;
    it->outstanding++;
    atomic_fetch_add(&it->pending, 1);
    pthread_mutex_unlock(&it->a.mu);

    int rc = fill_batch(it, b, want, &it->p_index);
    it->p_assigned += b->n;
    pthread_mutex_lock(&it->a.mu);
    b->closed = true;
    pthread_cond_broadcast(&it->a.cv_consumer);
    pthread_mutex_unlock(&it->a.mu);
    if (rc == SL_ECANCELED)
        return ROUND_STOPPED;
    if (rc) {
        sl__async_finish(&it->a, rc, NULL);
        return ROUND_ENDED;
    }
    return ROUND_ON;
}

static void *producer_main(void *arg)
{
    map_image_batch_iter *it = arg;
    while (producer_round(it) == ROUND_ON) {
    }
    return NULL;
}

/* Images in finished batches, for the occupancy statistic. Under mu. */
static int finished_images(const map_image_batch_iter *it)
{
    int n = 0;
    for (int i = 0; i < BATCHES_AHEAD; i++) {
        const ibatch *w = it->window[i];
        if (w && w->closed && w->remaining == 0)
            n += w->n;
    }
    return n;
}

static int batch_level(void *self)
{
    return finished_images(self);
}

/* Under mu: the next batch in order, once all its images are in. */
static bool batch_take(void *self, void *out)
{
    map_image_batch_iter *it = self;
    ibatch *w = it->window[it->consume_seq % BATCHES_AHEAD];
    if (!w || w->seq != it->consume_seq || !w->closed || w->remaining != 0)
        return false;
    it->window[it->consume_seq % BATCHES_AHEAD] = NULL;
    it->consume_seq++;
    it->cur_last = it->a.ended && it->outstanding == 1;
    *(ibatch **)out = w;
    return true;
}

static bool batch_busy(void *self)
{
    return ((map_image_batch_iter *)self)->outstanding > 0;
}

/* The edge profile: this thread makes the batch (its images decode in
 * place: the runtime has no workers). */
static int batch_round(void *self)
{
    producer_round(self);
    return 0;
}

static const sl__take_ops batch_take_ops = {
    .take = batch_take, .level = batch_level, .busy = batch_busy};
static const sl__take_ops batch_inline_take_ops = {
    .take = batch_take, .level = batch_level, .busy = batch_busy, .round = batch_round};

/* Waits for the next batch in order; NULL at the end (*rc set). */
static ibatch *batch_next(map_image_batch_iter *it, int *rc)
{
    ibatch *b = NULL;
    *rc = sl__async_take(&it->a, &it->base, it->inline_batches ? &batch_inline_take_ops
                                                               : &batch_take_ops, it, &b);
    if (b) {
        atomic_fetch_sub(&it->pending, 1);
        sl__iter_unhold(&it->base, b->held);
        b->held = 0;
    }
    return b;
}

static void batch_recycle(map_image_batch_iter *it, ibatch *b);

/* The batch is used up: keeps its last position, then recycles it. */
static int batch_done(map_image_batch_iter *it, ibatch *b)
{
    int rc = 0;
    if (b->n) {
        size_t from = b->n > 1 ? b->slots[b->n - 2].snap_end : 0;
        rc = sl__bytes_assign(&it->taken, b->snaps.p + from, b->slots[b->n - 1].snap_end - from);
        it->taken_index = b->first + b->n;
    }
    batch_recycle(it, b);
    return rc;
}

static void batch_recycle(map_image_batch_iter *it, ibatch *b)
{
    for (int i = 0; i < b->n; i++)
        slot_clear(&b->slots[i]);
    b->n = 0;
    pthread_mutex_lock(&it->a.mu);
    b->next = it->free_batches;
    it->free_batches = b;
    it->outstanding--;
    pthread_cond_signal(&it->a.cv_producer);
    pthread_mutex_unlock(&it->a.mu);
}

/* An output element from an image buffer (rows images) and stacked rest. */
static int emit(map_image_batch_iter *it, sl__buf *img, int rows, const sl__stack *rest, sl_element **out)
{
    const sl_image_spec *spec = &it->ds->spec;
    sl_element *el = sl__element_new(1 + rest->ncols, 0);
    if (!el)
        return SL_ENOMEM;
    int64_t shape[4] = {rows};
    sl__image_shape(spec, shape + 1);
    int k = spec->image_index < rest->ncols ? spec->image_index : rest->ncols;
    int rc = sl__stack_emit_cols(rest, el, 0, k);
    if (rc == 0)
        rc = sl__element_push_view(el, spec->dtype, 4, shape, img->data,
                                   (size_t)rows * it->img_bytes, img) ? 0 : SL_ENOMEM;
    if (rc == 0)
        rc = sl__stack_emit_cols(rest, el, k, rest->ncols);
    if (rc < 0) {
        sl_element_release(el);
        return rc;
    }
    *out = el;
    return 0;
}

/* The whole of b as one output batch, without copying images. */
static int emit_direct(map_image_batch_iter *it, ibatch *b, sl_element **out)
{
    sl__stack st = {0};
    int rc = 0;
    for (int i = 0; i < b->n && rc == 0; i++)
        rc = sl__stack_add(&st, b->slots[i].rest, b->n, b->n);
    if (rc == 0)
        rc = emit(it, b->img, b->n, &st, out);
    sl__stack_reset(&st);
    if (rc == 0) {
        /* the element holds the image buffer now; the batch gets a new one */
        sl__buf_release(b->img);
        b->img = NULL;
        it->base.ok_count += b->n;
    }
    return rc;
}

static int emit_assembled(map_image_batch_iter *it, sl_element **out)
{
    int rc = emit(it, it->out_img, it->out_fill, &it->out_rest, out);
    sl__buf_release(it->out_img);
    it->out_img = NULL;
    it->out_fill = 0;
    sl__stack_reset(&it->out_rest);
    return rc;
}

static bool all_valid(const ibatch *b)
{
    for (int i = 0; i < b->n; i++)
        if (b->slots[i].rc)
            return false;
    return true;
}

/* Copies the images of cur from pos on into the assembled batch until it is
 * full (1), cur is used up (0), or an error fails the pass (< 0). */
static int assemble(map_image_batch_iter *it)
{
    ibatch *b = it->cur;
    while (it->pos < b->n) {
        islot *s = &b->slots[it->pos++];
        if (s->rc) {
            sl__set_error_str(s->rc, s->msg);
            int rc = s->rc == SL_ECANCELED ? SL_ECANCELED : sl__policy(&it->base, s->rc);
            atomic_fetch_add(&it->failed, 1);
            if (rc)
                return rc;
            continue;
        }
        if (!it->out_img && !(it->out_img = sl__buf_get((size_t)it->n * it->img_bytes)))
            return SL_ENOMEM;
        memcpy(it->out_img->data + (size_t)it->out_fill * it->img_bytes,
               b->img->data + (size_t)(it->pos - 1) * it->img_bytes, it->img_bytes);
        int rc = sl__stack_add(&it->out_rest, s->rest, it->n, it->n);
        if (rc < 0)
            return rc;
        it->base.ok_count++;
        if (++it->out_fill == it->n)
            return 1;
    }
    return 0;
}

static int map_image_batch_next_inner(map_image_batch_iter *it, sl_element **out)
{
    bool drop = it->ds->flags & SL_DROP_REMAINDER;
    for (;;) {
        if (!it->cur) {
            int rc = 0;
            it->cur = batch_next(it, &rc);
            it->pos = 0;
            if (!it->cur) {
                if (rc == SL_EOF && it->out_fill > 0 && !drop)
                    return emit_assembled(it, out);
                return rc;
            }
        }
        ibatch *b = it->cur;
        if (it->out_fill == 0 && it->pos == 0 && b->n > 0 &&
            (b->n == it->n || (it->cur_last && !drop)) && all_valid(b)) {
            int rc = emit_direct(it, b, out);
            it->cur = NULL;
            int e = batch_done(it, b);
            return rc ? rc : e;
        }
        int rc = assemble(it);
        if (rc < 0)
            return rc;
        if (rc == 1)
            return emit_assembled(it, out);
        it->cur = NULL;
        if ((rc = batch_done(it, b)) < 0)
            return rc;
    }
}

static int map_image_batch_next(sl__iter *base, sl_element **out)
{
    map_image_batch_iter *it = (map_image_batch_iter *)base;
    if (it->ended)
        return it->ended_rc;
    int rc = map_image_batch_next_inner(it, out);
    if (rc == 0) /* the node counts images, not batches */
        sl__stat_add_single(&base->stats->elements, (*out)->t[0].shape[0]);
    if (rc && rc != SL__AGAIN) {
        it->ended = true;
        it->ended_rc = rc;
    }
    return rc;
}

static void map_image_batch_cancel(sl__iter *base)
{
    sl__async_cancel(&((map_image_batch_iter *)base)->a);
}

static void map_image_batch_destroy(sl__iter *base)
{
    map_image_batch_iter *it = (map_image_batch_iter *)base;
    sl__iter_unregister(base);
    sl__async_join(&it->a, base->tree);
    pthread_mutex_lock(&it->a.mu);
    while (it->in_flight > 0)
        pthread_cond_wait(&it->cv_idle, &it->a.mu);
    itask *staged = it->staged; /* left when the pass was cancelled */
    it->staged = NULL;
    pthread_mutex_unlock(&it->a.mu);
    if (staged) {
        for (int i = 0; i < staged->count; i++)
            sl_element_release(staged->in[i]);
        sl__free(staged, sizeof *staged);
    }
    if (it->cur)
        batch_free(it, it->cur);
    for (int i = 0; i < BATCHES_AHEAD; i++)
        if (it->window[i]) {
            sl__iter_unhold(base, it->window[i]->held);
            batch_free(it, it->window[i]);
        }
    while (it->free_batches) {
        ibatch *b = it->free_batches;
        it->free_batches = b->next;
        batch_free(it, b);
    }
    while (it->free_tasks) {
        itask *t = it->free_tasks;
        it->free_tasks = t->next;
        sl__free(t, sizeof *t);
    }
    sl__buf_release(it->out_img);
    sl__stack_reset(&it->out_rest);
    sl__iter_free(it->in);
    sl__bytes_free(&it->taken);
    sl__snap_fini(&it->snap);
    pthread_cond_destroy(&it->cv_idle);
    sl__async_fini(&it->a);
}

/* The next input index and the failures passed, then the input's record
 * after the last image passed. Between two outputs no image is half
 * assembled (an output ends where one is full). */
#define BATCH_FIELDS(X) X(index) X(failed)
SL__STATE_FIELDS(BATCH_FIELDS);

static int map_image_batch_save(sl__iter *base, sl__bytes *w)
{
    map_image_batch_iter *it = (map_image_batch_iter *)base;
    const ibatch *b = it->cur;
    const unsigned char *p = it->taken.p;
    size_t n = it->taken.n;
    int64_t index = it->taken_index;
    if (b && it->pos > 0) {
        size_t from = it->pos > 1 ? b->slots[it->pos - 2].snap_end : 0;
        p = b->snaps.p + from;
        n = b->slots[it->pos - 1].snap_end - from;
        index = b->first + it->pos;
    }
    int64_t f[NFIELDS] = {[F_index] = index, [F_failed] = atomic_load(&it->failed)};
    return sl__save_async(w, base, &it->snap, NFIELDS, f, p, n);
}

static const sl__iter_ops map_image_batch_iter_ops = {
    .next = map_image_batch_next,
    .cancel = map_image_batch_cancel,
    .destroy = map_image_batch_destroy,
    .save = map_image_batch_save,
};

/* Registers the node and its parallelism knob as a map does. Capacity:
 * the batches ahead. */
static int parallelism_knob(map_image_batch_iter *it, int parallelism)
{
    it->parallelism = sl__map_parallelism_knob(&it->base, parallelism);
    if (!it->parallelism)
        return SL_EINTERNAL;
    atomic_store(&it->base.stats->capacity, BATCHES_AHEAD * it->n);
    return 0;
}

static int map_image_batch_make(const sl_dataset *ds, sl__tree *tree, uint64_t key,
                                int64_t epoch, sl__iter **out)
{
    const map_image_ds *d = (const map_image_ds *)ds;
    map_image_batch_iter *it = sl__iter_alloc(&map_image_batch_iter_ops, sizeof *it, ds, tree,
                                              key, epoch);
    if (!it)
        return SL_ENOMEM;
    it->ds = d;
    it->seed = sl__node_seed(&it->base, -1);
    it->n = (int)d->batch;
    it->img_bytes = sl__image_bytes(&d->spec);
    int64_t card = sl_dataset_cardinality(ds->inputs[0]);
    it->drop_card = (d->flags & SL_DROP_REMAINDER) && card >= 0 ? card : -1;
    it->base.own_count = true;
    sl__async_init(&it->a);
    pthread_cond_init(&it->cv_idle, NULL);
    int rc = parallelism_knob(it, d->parallelism);
    int64_t f[NFIELDS];
    if (rc == 0 && (rc = sl__iter_restored(&it->base, NFIELDS, f)) > 0) {
        it->taken_index = f[F_index];
        atomic_store(&it->failed, f[F_failed]);
        rc = sl__state_range(&it->base, field_names[F_index], f[F_index], 0, INT64_MAX);
        if (rc == 0)
            rc = sl__state_range(&it->base, field_names[F_failed], f[F_failed], 0, f[F_index]);
    }
    if (rc == 0 && !it->taken_index)
        it->taken_index = sl__split_base(&it->base); /* a service worker's part */
    if (rc == 0)
        rc = sl__iter_make_input(&it->base, 0, epoch, &it->in);
    if (rc == 0) {
        sl__snap(&it->snap, it->in, &it->taken); /* nothing passed yet */
        it->p_index = it->p_assigned = it->taken_index;
        /* the edge profile's runtime runs tasks where they are submitted:
         * the consumer's thread makes each batch when it needs it */
        it->inline_batches = tree->inline_nodes;
        if (!it->inline_batches)
            rc = sl__async_start(&it->a, producer_main, it, "map_image_batch");
    }
    if (rc < 0) {
        sl__iter_free(&it->base);
        return rc;
    }
    sl__iter_register(&it->base);
    *out = &it->base;
    return 0;
}

static int64_t map_image_batch_rows(const sl_dataset *ds, bool *drop)
{
    const map_image_ds *d = (const map_image_ds *)ds;
    *drop = d->flags & SL_DROP_REMAINDER;
    return d->batch;
}

const sl__node_ops sl__map_image_batch_ops = {
    .kind = "map_image_batch",
    .batch_rows = map_image_batch_rows,
    .make_iter = map_image_batch_make,
    .cardinality = sl__map_image_cardinality,
    .structure = sl__map_image_structure,
    .fingerprint = sl__map_image_fingerprint,
};
