/*
 * The tree every node iterator of one sl_iterator shares (node.h): how node
 * iterators are made, registered and freed, and the services ops use:
 * byte accounting and the RAM budget's waits, per-key slots, the error
 * policy, node seeds, the consumer's wait. sl__tree_init reads the
 * options into it.
 */
#include <stdio.h>
#include <string.h>
#include "../core/clock.h"
#include "../core/log.h"
#include "../core/salts.h"
#include "node.h"
#include "../runtime/io.h"
#include "trace.h"

/* ---- node iterators ---- */

/* Depth of the node being made on this thread: sl__iter_make_input sets it
 * around the child's make, so sl__iter_alloc knows it without a parameter
 * in every op. */
static _Thread_local int making_depth;
/* Likewise the statistics key of the node being made: its key, except
 * under an interleave, whose inputs' nodes have keys of their own (their
 * random streams differ) but share statistics entries. 0: the key. */
static _Thread_local uint64_t making_stats_key;
/* Likewise whether it is under an ignore_errors node (its `ignoring`). */
static _Thread_local int making_ignoring;

void *sl__iter_alloc(const sl__iter_ops *ops, size_t size, const sl_dataset *ds,
                     sl__tree *tree, uint64_t key, int64_t epoch)
{
    sl__iter *it = sl__calloc(1, size);
    if (!it)
        return NULL;
    it->depth = making_depth;
    it->ignoring = making_ignoring;
    it->stats_key = making_stats_key ? making_stats_key : key;
    making_stats_key = 0;
    it->stats = sl__stats_node(tree, it->stats_key, sl_dataset_name(ds), SL__NODE_OTHER,
                               it->depth);
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
    sl__restore_attach(tree, it);
    return it;
}

int sl__iter_make(const sl_dataset *ds, sl__tree *tree, uint64_t key, int64_t epoch,
                  sl__iter **out)
{
    *out = NULL;
    return ds->ops->make_iter(ds, tree, key, epoch, out);
}

static uint64_t child_key(uint64_t parent, int i, const sl_dataset *in)
{
    return sl__hash_str(sl__hash_u64(parent, (uint64_t)i + 1), in->ops->kind);
}

int sl__iter_input_saved(const sl__iter *parent, int i)
{
    return sl__restore_has(parent->tree, child_key(parent->key, i, parent->ds->inputs[i]));
}

int sl__iter_make_input(sl__iter *parent, int i, int64_t epoch, sl__iter **out)
{
    const sl_dataset *in = parent->ds->inputs[i];
    int saved = making_depth, saved_ignoring = making_ignoring;
    making_depth = parent->depth + 1;
    making_ignoring = parent->ignoring;
    making_stats_key = parent->stats_key == parent->key ? 0 : child_key(parent->stats_key, i, in);
    int rc = sl__iter_make(in, parent->tree, child_key(parent->key, i, in), epoch, out);
    making_stats_key = 0;
    making_depth = saved;
    making_ignoring = saved_ignoring;
    return rc;
}

int sl__iter_make_under(sl__iter *parent, const sl_dataset *ds, uint64_t key,
                        uint64_t stats_key, int64_t epoch, sl__iter **out)
{
    int saved = making_depth, saved_ignoring = making_ignoring;
    making_depth = parent->depth + 1;
    making_ignoring = parent->ignoring;
    making_stats_key = stats_key;
    int rc = sl__iter_make(ds, parent->tree, key, epoch, out);
    making_stats_key = 0;
    making_depth = saved;
    making_ignoring = saved_ignoring;
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
    if (!sl__error_skippable(code))
        return code;
    if (it->ignoring) { /* under ignore_errors: dropped whatever the policy */
        long long n = atomic_fetch_add(&t->skipped, 1) + 1;
        if (it->ignoring == SL__IGNORE_LOGGED && n <= t->error_log_limit)
            sl__log(SL_LOG_WARN, "ignored error: %s", sl__error_msg());
        return 0;
    }
    if (t->policy == SL_ERRORS_FAIL)
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
    sl__skip_logged(it);
    return 0;
}

void sl__skip_logged(sl__iter *it)
{
    sl__tree *t = it->tree;
    long long n = atomic_fetch_add(&t->skipped, 1) + 1;
    if (n <= t->error_log_limit)
        sl__log(SL_LOG_WARN, "skipped element: %s%s", sl__error_msg(),
                n == t->error_log_limit ? " (further skips are counted, not logged)" : "");
}

uint64_t sl__node_seed(const sl__iter *it, int64_t op_seed)
{
    uint64_t base = op_seed >= 0 ? sl__hash_u64(SL__SALT_OP_SEED, (uint64_t)op_seed) : it->tree->seed;
    return sl__hash_u64(base, it->key);
}


/* Half of what the process may still use (a container's limit included). */
static int64_t default_budget(void)
{
    int64_t avail = sl__available_memory("/proc", "/sys/fs/cgroup");
    /* 0 (a cgroup at its limit) is a real answer: each buffer then holds
     * one element; only an unreadable system gets a guess */
    return avail >= 0 ? avail / 2 : (int64_t)1 << 30;
}

void sl__tree_cancel(sl__tree *t)
{
    pthread_mutex_lock(&t->mu);
    atomic_store(&t->cancelled, true);
    pthread_cond_broadcast(&t->budget_cv);
    for (sl__iter *a = t->async_head; a; a = a->async_next)
        a->ops->cancel(a);
    pthread_mutex_unlock(&t->mu);
}

void sl__tree_fini(sl__tree *t)
{
    while (t->slots) {
        sl__slot *s = t->slots;
        t->slots = s->next;
        if (s->destroy)
            s->destroy(s->data);
        sl__free(s, sizeof *s + s->size);
    }
    sl__restore_free(t->restore);
    t->restore = NULL;
    if (t->own_rt)
        sl_runtime_free(t->rt);
    sl__stats_fini(t);
    sl__learned_free(t->learned);
    t->learned = NULL;
    sl__trace_free(t->trace);
    sl__strfree((char *)t->rcache.dir);
    t->rcache.dir = NULL;
    pthread_cond_destroy(&t->budget_cv);
    pthread_mutex_destroy(&t->mu);
}

/* The root's key: the same in every run, so node keys (and with them the
 * random streams and statistics entries) are too. */
#define ROOT_KEY SL__SALT_ROOT_KEY

static bool key_below(const sl_dataset *ds, uint64_t key, const sl_dataset *target,
                      uint64_t *out)
{
    if (ds == target) {
        *out = key;
        return true;
    }
    for (int i = 0; i < ds->ninputs; i++)
        if (key_below(ds->inputs[i], child_key(key, i, ds->inputs[i]), target, out))
            return true;
    return false;
}

int sl__node_key(const sl_dataset *root, const sl_dataset *target, uint64_t *key)
{
    return key_below(root, ROOT_KEY, target, key) ? 0 : -1;
}

int sl__iter_make_root(const sl_dataset *ds, sl__tree *t, int64_t epoch, sl__iter **out)
{
    t->epoch = epoch;
    int saved = making_depth;
    making_depth = 0;
    int rc = sl__iter_make(ds, t, ROOT_KEY, epoch, out);
    making_depth = saved;
    return rc;
}

int sl__tree_init(sl__tree *t, const sl_options *opts)
{
    pthread_mutex_init(&t->mu, NULL);
    pthread_cond_init(&t->budget_cv, NULL);
    int64_t threads = sl__options_get(opts, SL_OPT_THREADS);
    t->ram_budget = sl__options_get(opts, SL_OPT_RAM_BUDGET);
    if (t->ram_budget == 0)
        t->ram_budget = default_budget();
    t->policy = (int)sl__options_get(opts, SL_OPT_ERROR_POLICY);
    t->error_max_ppm = sl__options_get(opts, SL_OPT_ERROR_MAX_PPM);
    t->error_log_limit = sl__options_get(opts, SL_OPT_ERROR_LOG_LIMIT);
    t->seed_option = sl__options_get(opts, SL_OPT_SEED);
    t->seed = sl__hash_u64(SL__SALT_SEED, (uint64_t)t->seed_option);
    t->deterministic = sl__options_get(opts, SL_OPT_DETERMINISTIC) != 0;
    t->io_backend = (int)sl__options_get(opts, SL_OPT_IO_BACKEND);
    t->io_depth = (int)sl__options_get(opts, SL_OPT_IO_DEPTH);
    t->max_record = sl__options_get(opts, SL_OPT_MAX_RECORD_BYTES);
    sl__options_get_split(opts, &t->split_node, &t->split_first, &t->split_end);
    t->http = (sl__http_opts){(int)sl__options_get(opts, SL_OPT_REMOTE_MAX_ATTEMPTS),
                              (double)sl__options_get(opts, SL_OPT_REMOTE_RETRY_SECONDS), 30};
    const char *cache_dir = sl__options_cache_dir(opts);
    t->rcache.dir = cache_dir ? sl__strdup(cache_dir) : NULL;
    t->rcache.max_bytes = sl__options_get(opts, SL_OPT_REMOTE_CACHE_BYTES);
    if (cache_dir && !t->rcache.dir)
        return SL_ENOMEM;
    /* the edge profile's one thread: every node works on the caller's */
    t->inline_nodes = sl__options_get(opts, SL_OPT_PROFILE) == SL_PROFILE_EDGE && threads == 1;
    if (t->inline_nodes && t->io_backend == SL_IO_PREAD)
        t->io_backend |= SL__IO_INLINE; /* no reader threads either */
    t->start_ns = sl__now_ns();
    t->autotune = sl__options_get(opts, SL_OPT_AUTOTUNE) != 0;
    t->autotune_log = sl__options_get(opts, SL_OPT_AUTOTUNE_LOG) != 0 ||
                      sl__log_category_enabled("autotune");
    t->cpu_budget = (int)sl__options_get(opts, SL_OPT_CPU_BUDGET);
    if (t->cpu_budget == 0)
        t->cpu_budget = sl_cpu_count();
    t->stall_target_ppm = sl__options_get(opts, SL_OPT_STALL_TARGET_PPM);
    int64_t events = sl__options_get(opts, SL_OPT_TRACE_EVENTS);
    if (events > 0 && !(t->trace = sl__trace_new(events)))
        return SL_ENOMEM;
    if (t->inline_nodes) { /* work runs where it is asked for */
        t->rt = sl__runtime_inline();
        t->own_rt = true;
    } else if (threads > 0) {
        t->rt = sl_runtime_create((int)threads);
        t->own_rt = true;
    } else {
        t->rt = sl__options_runtime(opts) ? sl__options_runtime(opts) : sl__runtime_default();
    }
    return t->rt ? 0 : SL_ENOMEM;
}


int64_t sl__tree_stat(const sl__tree *t, sl_stat key)
{
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
        return t->epoch;
    case SL_STAT_PADDED:
        return atomic_load(&t->padded);
    case SL_STAT_CACHE_PLACEMENT:
        return atomic_load(&t->cache_placement);
    case SL_STAT_CACHE_BYTES:
        return atomic_load(&t->cache_bytes);
    default:
        return -1;
    }
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

bool sl__split_range(const sl__iter *it, int64_t *first, int64_t *end)
{
    if (!it->tree->split_node || it->tree->split_node != it->ds)
        return false;
    *first = it->tree->split_first;
    *end = it->tree->split_end;
    return true;
}

int64_t sl__split_base(const sl__iter *it)
{
    return it->tree->split_node ? it->tree->split_first : 0;
}
