/* sl_iterator, options, the shared tree state and the error policy. */
#include <stdio.h>
#include <string.h>
#include "../core/clock.h"
#include "../autotune/autotune.h"
#include "../core/log.h"
#include "../obs/trace.h"
#include "node.h"

/* ---- options ---- */

struct sl_options {
    int64_t v[SL_OPT_COUNT];
    sl_runtime *rt;
};

static const struct {
    int64_t def, min, max;
} option_spec[SL_OPT_COUNT] = {
    [SL_OPT_THREADS] = {0, 0, 1024},
    [SL_OPT_RAM_BUDGET] = {0, 0, INT64_MAX},
    [SL_OPT_ERROR_POLICY] = {SL_ERRORS_FAIL, SL_ERRORS_FAIL, SL_ERRORS_SKIP_RATE},
    [SL_OPT_ERROR_MAX_PPM] = {10000, 0, 1000000},
    [SL_OPT_SEED] = {0, INT64_MIN, INT64_MAX},
    [SL_OPT_DETERMINISTIC] = {1, 0, 1},
    [SL_OPT_ERROR_LOG_LIMIT] = {5, 0, INT64_MAX},
    [SL_OPT_IO_BACKEND] = {SL_IO_AUTO, SL_IO_AUTO, SL_IO_PREAD},
    [SL_OPT_IO_DEPTH] = {32, 1, 4096},
    [SL_OPT_AUTOTUNE] = {1, 0, 1},
    [SL_OPT_CPU_BUDGET] = {0, 0, 4096},
    [SL_OPT_STALL_TARGET_PPM] = {20000, 0, 1000000},
    [SL_OPT_TRACE_EVENTS] = {0, 0, 1 << 26},
    [SL_OPT_AUTOTUNE_LOG] = {0, 0, 1},
    [SL_OPT_EPOCH] = {-1, -1, INT64_MAX},
};

SL_API sl_options *sl_options_create(void)
{
    sl_options *o = sl__calloc(1, sizeof *o);
    if (!o)
        return NULL;
    for (int i = 0; i < SL_OPT_COUNT; i++)
        o->v[i] = option_spec[i].def;
    return o;
}

SL_API void sl_options_free(sl_options *o)
{
    sl__free(o, sizeof *o);
}

SL_API int sl_option_bounds(sl_option key, int64_t *min, int64_t *max)
{
    if ((unsigned)key >= SL_OPT_COUNT)
        return sl__set_error(SL_EINVAL, "unknown option %d", (int)key);
    if (min)
        *min = option_spec[key].min;
    if (max)
        *max = option_spec[key].max;
    return 0;
}

SL_API int sl_options_set(sl_options *o, sl_option key, int64_t value)
{
    if (!o || (unsigned)key >= SL_OPT_COUNT)
        return sl__set_error(SL_EINVAL, "sl_options_set: unknown option %d", (int)key);
    if (value < option_spec[key].min || value > option_spec[key].max)
        return sl__set_error(SL_EINVAL, "sl_options_set: option %d: %lld is outside [%lld, %lld]",
                             (int)key, (long long)value, (long long)option_spec[key].min,
                             (long long)option_spec[key].max);
    o->v[key] = value;
    return 0;
}

SL_API int64_t sl_options_get(const sl_options *o, sl_option key)
{
    if ((unsigned)key >= SL_OPT_COUNT)
        return 0;
    return o ? o->v[key] : option_spec[key].def;
}

SL_API int sl_options_set_runtime(sl_options *o, sl_runtime *rt)
{
    if (!o)
        return sl__set_error(SL_EINVAL, "sl_options_set_runtime: NULL options");
    o->rt = rt;
    return 0;
}

/* ---- node iterators ---- */

/* Depth of the node being made on this thread: sl__iter_make_input sets it
 * around the child's make, so sl__iter_alloc knows it without a parameter
 * in every op. */
static _Thread_local int making_depth;

void *sl__iter_alloc(const sl__iter_ops *ops, size_t size, const sl_dataset *ds,
                     sl__tree *tree, uint64_t key, int64_t epoch)
{
    sl__iter *it = sl__calloc(1, size);
    if (!it)
        return NULL;
    it->depth = making_depth;
    it->stats = sl__stats_node(tree, key, sl_dataset_name(ds), SL__NODE_OTHER, it->depth);
    if (!it->stats) {
        sl__free(it, size);
        return NULL;
    }
    it->ops = ops;
    it->ds = ds;
    it->tree = tree;
    it->key = key;
    it->epoch = epoch;
    it->size = size;
    return it;
}

int sl__iter_make(const sl_dataset *ds, sl__tree *tree, uint64_t key, int64_t epoch,
                  sl__iter **out)
{
    *out = NULL;
    return ds->ops->make_iter(ds, tree, key, epoch, out);
}

int sl__iter_make_input(sl__iter *parent, int i, int64_t epoch, sl__iter **out)
{
    const sl_dataset *in = parent->ds->inputs[i];
    uint64_t key = sl__hash_str(sl__hash_u64(parent->key, (uint64_t)i + 1), in->ops->kind);
    int saved = making_depth;
    making_depth = parent->depth + 1;
    int rc = sl__iter_make(in, parent->tree, key, epoch, out);
    making_depth = saved;
    return rc;
}

void sl__iter_free(sl__iter *it)
{
    if (!it)
        return;
    if (it->ops->destroy)
        it->ops->destroy(it);
    sl__free(it, it->size);
}

void sl__iter_register(sl__iter *it)
{
    sl__tree *t = it->tree;
    pthread_mutex_lock(&t->mu);
    it->async_prev = NULL;
    it->async_next = t->async_head;
    if (t->async_head)
        t->async_head->async_prev = it;
    t->async_head = it;
    it->registered = true;
    if (sl__tree_cancelled(t))
        it->ops->cancel(it);
    pthread_mutex_unlock(&t->mu);
}

void sl__iter_unregister(sl__iter *it)
{
    sl__tree *t = it->tree;
    pthread_mutex_lock(&t->mu);
    if (it->registered) {
        if (it->async_prev)
            it->async_prev->async_next = it->async_next;
        else
            t->async_head = it->async_next;
        if (it->async_next)
            it->async_next->async_prev = it->async_prev;
        it->registered = false;
    }
    pthread_mutex_unlock(&t->mu);
}

/* ---- tree ---- */

typedef struct sl__slot {
    struct sl__slot *next;
    uint64_t key;
    size_t size;
    void (*destroy)(void *);
    _Alignas(16) unsigned char data[];
} sl__slot;

void *sl__tree_slot(sl__tree *t, uint64_t key, size_t size, void (*destroy)(void *))
{
    pthread_mutex_lock(&t->mu);
    sl__slot *s = t->slots;
    while (s && s->key != key)
        s = s->next;
    if (!s) {
        s = sl__calloc(1, sizeof *s + size);
        if (s) {
            s->key = key;
            s->size = size;
            s->destroy = destroy;
            s->next = t->slots;
            t->slots = s;
        }
    }
    pthread_mutex_unlock(&t->mu);
    return s ? s->data : NULL;
}

void sl__tree_hold(sl__tree *t, int64_t bytes)
{
    long long now = atomic_fetch_add(&t->held, bytes) + bytes;
    long long peak = atomic_load_explicit(&t->peak_held, memory_order_relaxed);
    while (now > peak && !atomic_compare_exchange_weak(&t->peak_held, &peak, now)) {
    }
}

void sl__tree_budget_wake(sl__tree *t)
{
    if (atomic_load(&t->budget_waiters)) {
        pthread_mutex_lock(&t->mu);
        pthread_cond_broadcast(&t->budget_cv);
        pthread_mutex_unlock(&t->mu);
    }
}

void sl__tree_unhold(sl__tree *t, int64_t bytes)
{
    atomic_fetch_sub(&t->held, bytes);
    sl__tree_budget_wake(t);
}

void sl__iter_hold(sl__iter *it, int64_t bytes)
{
    sl__stat_add(&it->stats->bytes_held, bytes);
    sl__tree_hold(it->tree, bytes);
}

void sl__iter_unhold(sl__iter *it, int64_t bytes)
{
    sl__stat_add(&it->stats->bytes_held, -bytes);
    sl__tree_unhold(it->tree, bytes);
}

void sl__iter_unhold_nowake(sl__iter *it, int64_t bytes)
{
    sl__stat_add(&it->stats->bytes_held, -bytes);
    atomic_fetch_sub(&it->tree->held, bytes);
}

bool sl__tree_wait_budget(sl__tree *t, const atomic_int *own_count, const atomic_bool *stop)
{
    if (atomic_load(&t->held) < t->ram_budget || atomic_load(own_count) == 0)
        return !sl__tree_cancelled(t) && !atomic_load(stop);
    pthread_mutex_lock(&t->mu);
    atomic_fetch_add(&t->budget_waiters, 1);
    while (!sl__tree_cancelled(t) && !atomic_load(stop) &&
           atomic_load(&t->held) >= t->ram_budget && atomic_load(own_count) > 0)
        pthread_cond_wait(&t->budget_cv, &t->mu);
    atomic_fetch_sub(&t->budget_waiters, 1);
    pthread_mutex_unlock(&t->mu);
    return !sl__tree_cancelled(t) && !atomic_load(stop);
}

void sl__tree_wake(sl__tree *t)
{
    pthread_mutex_lock(&t->mu);
    pthread_cond_broadcast(&t->budget_cv);
    pthread_mutex_unlock(&t->mu);
}

int sl__policy(sl__iter *it, int code)
{
    sl__tree *t = it->tree;
    it->fail_count++;
    if (!sl__error_skippable(code) || t->policy == SL_ERRORS_FAIL)
        return code;
    if (t->policy == SL_ERRORS_SKIP_RATE) {
        int64_t seen = it->ok_count + it->fail_count;
        int64_t allowed = (int64_t)((__int128)t->error_max_ppm * seen / 1000000);
        if (allowed < 1)
            allowed = 1;
        if (it->fail_count > allowed) {
            char msg[SL__ERRMSG_MAX];
            snprintf(msg, sizeof msg, "%s", sl__error_msg());
            return sl__set_error(SL_ETOO_MANY_ERRORS,
                                 "%s (%lld of %lld elements failed, over the limit of %g%%)",
                                 msg, (long long)it->fail_count, (long long)seen,
                                 (double)t->error_max_ppm / 1e4);
        }
    }
    long long n = atomic_fetch_add(&t->skipped, 1) + 1;
    if (n <= t->error_log_limit)
        sl__log(SL_LOG_WARN, "skipped element: %s%s", sl__error_msg(),
                n == t->error_log_limit ? " (further skips are counted, not logged)" : "");
    return 0;
}

uint64_t sl__node_seed(const sl__iter *it, int64_t op_seed)
{
    uint64_t base = op_seed >= 0 ? sl__hash_u64(0x0bu, (uint64_t)op_seed) : it->tree->seed;
    return sl__hash_u64(base, it->key);
}

/* ---- map context ---- */

typedef struct sl__scratch {
    struct sl__scratch *next;
    size_t size;
    _Alignas(64) unsigned char data[];
} sl__scratch;

void sl__map_ctx_begin(sl_map_ctx *ctx, uint64_t seed, uint64_t key, int64_t epoch,
                       int64_t index)
{
    ctx->rng = sl__rng_make(seed, key, epoch, index);
    ctx->index = index;
    ctx->epoch = epoch;
    ctx->scratch = NULL;
}

void sl__map_ctx_end(sl_map_ctx *ctx)
{
    while (ctx->scratch) {
        sl__scratch *s = ctx->scratch;
        ctx->scratch = s->next;
        sl__free_aligned(s, sizeof *s + s->size, 64);
    }
}

SL_API uint64_t sl_map_ctx_random(sl_map_ctx *ctx)
{
    return sl__rng_next(&ctx->rng);
}

SL_API double sl_map_ctx_uniform(sl_map_ctx *ctx)
{
    return sl__rng_uniform(&ctx->rng);
}

SL_API int64_t sl_map_ctx_index(const sl_map_ctx *ctx)
{
    return ctx->index;
}

SL_API int64_t sl_map_ctx_epoch(const sl_map_ctx *ctx)
{
    return ctx->epoch;
}

SL_API int sl_map_ctx_error(sl_map_ctx *ctx, int code, const char *msg)
{
    (void)ctx;
    if (code >= 0)
        code = SL_ECALLBACK;
    return sl__set_error_str(code, msg);
}

SL_API void *sl_map_ctx_scratch(sl_map_ctx *ctx, size_t size)
{
    sl__scratch *s = sl__alloc_aligned(sizeof *s + size, 64);
    if (!s)
        return NULL;
    s->size = size;
    s->next = ctx->scratch;
    ctx->scratch = s;
    return s->data;
}

/* ---- sl_iterator ---- */

struct sl_iterator {
    sl__tree tree;
    sl__iter *root;
    sl_dataset *ds;
    int err;
    int64_t epoch;          /* of the root pass */
    int64_t last_return_ns; /* when sl_next last returned; 0 before the first call */
    char errmsg[SL__ERRMSG_MAX];
};

/* Consumer waits shorter than this are hand-offs, not stalls: no span. */
#define STALL_SPAN_NS 20000
/* Counter samples for the trace when no controller ticks. */
#define TRACE_SAMPLE_NS 100000000

sl__tree *sl__iterator_tree(const sl_iterator *it)
{
    return (sl__tree *)&it->tree;
}

#define ROOT_KEY 0x726f6f74ull

/* Half of what the process may still use (a container's limit included). */
static int64_t default_budget(void)
{
    int64_t avail = sl__available_memory("/proc", "/sys/fs/cgroup");
    /* 0 (a cgroup at its limit) is a real answer: each buffer then holds
     * one element; only an unreadable system gets a guess */
    return avail >= 0 ? avail / 2 : (int64_t)1 << 30;
}

static void tree_fini(sl__tree *t)
{
    while (t->slots) {
        sl__slot *s = t->slots;
        t->slots = s->next;
        if (s->destroy)
            s->destroy(s->data);
        sl__free(s, sizeof *s + s->size);
    }
    if (t->own_rt)
        sl_runtime_free(t->rt);
    sl__stats_fini(t);
    sl__trace_free(t->trace);
    pthread_cond_destroy(&t->budget_cv);
    pthread_mutex_destroy(&t->mu);
}

SL_API sl_iterator *sl_iterator_create(sl_dataset *ds, const sl_options *opts)
{
    if (!ds) {
        if (!sl__error_msg()[0])
            sl__set_error(SL_EINVAL, "sl_iterator_create: NULL dataset");
        return NULL;
    }
    sl_iterator *it = sl__calloc(1, sizeof *it);
    if (!it)
        return NULL;
    sl__tree *t = &it->tree;
    pthread_mutex_init(&t->mu, NULL);
    pthread_cond_init(&t->budget_cv, NULL);
    int64_t threads = sl_options_get(opts, SL_OPT_THREADS);
    t->ram_budget = sl_options_get(opts, SL_OPT_RAM_BUDGET);
    if (t->ram_budget == 0)
        t->ram_budget = default_budget();
    t->policy = (int)sl_options_get(opts, SL_OPT_ERROR_POLICY);
    t->error_max_ppm = sl_options_get(opts, SL_OPT_ERROR_MAX_PPM);
    t->error_log_limit = sl_options_get(opts, SL_OPT_ERROR_LOG_LIMIT);
    t->seed = sl__hash_u64(0x5eedull, (uint64_t)sl_options_get(opts, SL_OPT_SEED));
    t->deterministic = sl_options_get(opts, SL_OPT_DETERMINISTIC) != 0;
    t->io_backend = (int)sl_options_get(opts, SL_OPT_IO_BACKEND);
    t->io_depth = (int)sl_options_get(opts, SL_OPT_IO_DEPTH);
    t->start_ns = sl__now_ns();
    t->autotune = sl_options_get(opts, SL_OPT_AUTOTUNE) != 0;
    t->autotune_log = sl_options_get(opts, SL_OPT_AUTOTUNE_LOG) != 0 ||
                      sl__log_category_enabled("autotune");
    t->cpu_budget = (int)sl_options_get(opts, SL_OPT_CPU_BUDGET);
    if (t->cpu_budget == 0)
        t->cpu_budget = sl_cpu_count();
    t->stall_target_ppm = sl_options_get(opts, SL_OPT_STALL_TARGET_PPM);
    int64_t events = sl_options_get(opts, SL_OPT_TRACE_EVENTS);
    if (events > 0 && !(t->trace = sl__trace_new(events))) {
        tree_fini(t);
        sl__free(it, sizeof *it);
        return NULL;
    }
    if (threads > 0) {
        t->rt = sl_runtime_create((int)threads);
        t->own_rt = true;
    } else {
        t->rt = opts && opts->rt ? opts->rt : sl__runtime_default();
    }
    if (!t->rt) {
        tree_fini(t);
        sl__free(it, sizeof *it);
        return NULL;
    }
    it->ds = sl_dataset_retain(ds);
    it->epoch = sl_options_get(opts, SL_OPT_EPOCH);
    if (it->epoch < 0)
        it->epoch = atomic_fetch_add_explicit(&ds->next_epoch, 1, memory_order_relaxed);
    int saved = making_depth;
    making_depth = 0;
    int rc = sl__iter_make(ds, t, ROOT_KEY, it->epoch, &it->root);
    making_depth = saved;
    if (rc == 0)
        rc = sl__autotune_start(t);
    if (rc < 0) {
        char msg[SL__ERRMSG_MAX];
        snprintf(msg, sizeof msg, "%s", sl__error_msg());
        sl_iterator_free(it);
        sl__set_error_str(rc, msg);
        return NULL;
    }
    return it;
}

static void trace_consumer(sl__tree *t, int64_t t0, int64_t t1)
{
    sl__trace_consumer(t);
    if (t1 - t0 >= STALL_SPAN_NS)
        sl__trace_span_named(t, "stall", t0, t1);
    /* the controller samples the counters at each tick; without it, the
     * consumer does, now and then */
    if (!t->at)
        sl__trace_sample(t, t1, TRACE_SAMPLE_NS);
}

int64_t sl__consumer_wait(sl__tree *t, int64_t now)
{
    for (;;) {
        int64_t since = atomic_load_explicit(&t->consumer_since_ns, memory_order_acquire);
        int64_t wait = atomic_load_explicit(&t->consumer_wait_ns, memory_order_acquire);
        /* a call that ended (or began) between the two loads: read again */
        if (atomic_load_explicit(&t->consumer_since_ns, memory_order_acquire) != since)
            continue;
        return wait + (since && now > since ? now - since : 0);
    }
}

SL_API int sl_next(sl_iterator *it, sl_element **out)
{
    *out = NULL;
    if (!it)
        return sl__set_error(SL_EINVAL, "sl_next: NULL iterator");
    if (it->err)
        return it->err;
    sl__tree *t = &it->tree;
    int64_t t0 = sl__now_ns();
    atomic_store_explicit(&t->consumer_since_ns, t0, memory_order_release);
    if (it->last_return_ns)
        sl__stat_add_single(&t->consumer_step_ns, t0 - it->last_return_ns);
    int rc = sl__iter_next(it->root, out);
    int64_t t1 = sl__now_ns();
    it->last_return_ns = t1;
    /* one thread at a time uses the iterator: single writer */
    sl__stat_add_single(&t->consumer_wait_ns, t1 - t0);
    atomic_store_explicit(&t->consumer_since_ns, 0, memory_order_release);
    sl__stat_add_single(&t->consumer_calls, 1);
    if (t->trace)
        trace_consumer(t, t0, t1);
    if (rc != 0 && !atomic_load_explicit(&t->end_ns, memory_order_relaxed))
        atomic_store_explicit(&t->end_ns, t1, memory_order_relaxed);
    if (rc == 0) {
        atomic_fetch_add_explicit(&it->tree.elements, 1, memory_order_relaxed);
    } else if (rc < 0) {
        it->err = rc;
        snprintf(it->errmsg, sizeof it->errmsg, "%s", sl__error_msg());
        if (!it->errmsg[0])
            snprintf(it->errmsg, sizeof it->errmsg, "%s", sl_strerror(rc));
    }
    return rc;
}

SL_API const char *sl_iterator_errmsg(const sl_iterator *it)
{
    return it ? it->errmsg : "";
}

SL_API void sl_iterator_free(sl_iterator *it)
{
    if (!it)
        return;
    sl__tree *t = &it->tree;
    sl__autotune_stop(t); /* before the nodes whose knobs it moves go */
    pthread_mutex_lock(&t->mu);
    atomic_store(&t->cancelled, true);
    pthread_cond_broadcast(&t->budget_cv);
    for (sl__iter *a = t->async_head; a; a = a->async_next)
        a->ops->cancel(a);
    pthread_mutex_unlock(&t->mu);
    sl__iter_free(it->root);
    sl_dataset_free(it->ds);
    tree_fini(t);
    sl__free(it, sizeof *it);
}

SL_API int64_t sl_iterator_stat(const sl_iterator *it, sl_stat key)
{
    if (!it)
        return -1;
    const sl__tree *t = &it->tree;
    switch (key) {
    case SL_STAT_ELEMENTS:
        return atomic_load(&t->elements);
    case SL_STAT_ERRORS_SKIPPED:
        return atomic_load(&t->skipped);
    case SL_STAT_BUFFERED_BYTES:
        return atomic_load(&t->held);
    case SL_STAT_PEAK_BUFFERED_BYTES:
        return atomic_load(&t->peak_held);
    case SL_STAT_RAM_BUDGET:
        return t->ram_budget;
    case SL_STAT_IO_BACKEND:
        return atomic_load(&t->io_backend_used);
    case SL_STAT_BYTES_READ:
        return atomic_load(&t->bytes_read);
    case SL_STAT_EPOCH:
        return it->epoch;
    default:
        return -1;
    }
}
