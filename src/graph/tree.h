/*
 * The tree: what the node iterators of one sl_iterator share (runtime,
 * budgets, error policy, seed, counters, cancellation, slots that outlive a
 * pass), and the services ops use on it.
 */
#ifndef SL_GRAPH_TREE_H
#define SL_GRAPH_TREE_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include "../remote/cache.h"
#include "../runtime/io.h"
#include "learned.h"
#include "state.h"
#include "stats.h"
#include "sluice.h"

typedef struct sl__iter sl__iter;
typedef struct sl__tree sl__tree;

struct sl__tree {
    sl_runtime *rt;
    bool own_rt;
    int64_t ram_budget;
    int policy;
    int64_t error_max_ppm;
    int64_t error_log_limit;
    uint64_t seed;
    int64_t seed_option;   /* SL_OPT_SEED as given (saved states carry it) */
    int64_t epoch;         /* of the root pass */
    bool deterministic;
    int io_backend;        /* requested sl_io_backend */
    int io_depth;          /* reads in flight per reading node */
    sl__http_opts http;    /* remote reads' retry limits */
    sl__rcache_opts rcache; /* the local shard cache (dir owned) */
    int64_t max_record;    /* SL_OPT_MAX_RECORD_BYTES */
    /* SL_PROFILE_EDGE on one thread: the runtime has no workers and the
     * async nodes do their producers' work on the thread that calls next */
    bool inline_nodes;
    atomic_int io_backend_used; /* what reads actually use (statistics) */
    atomic_llong bytes_read;

    atomic_bool cancelled;
    atomic_llong held;      /* bytes in buffers now */
    atomic_llong peak_held;
    atomic_llong skipped;   /* element errors dropped */
    atomic_llong padded;    /* elements distribute repeated for equal steps */
    atomic_int cache_placement; /* an automatic cache's choice (sl_cache_placement) */
    atomic_llong cache_bytes;
    atomic_llong elements;  /* handed to the consumer */

    /* observation and control (src/graph/stats.h, src/autotune/) */
    int64_t start_ns;
    atomic_llong end_ns;           /* when sl_next first returned SL_EOF or an error */
    atomic_llong consumer_wait_ns; /* time inside sl_next, calls that returned */
    atomic_llong consumer_since_ns; /* when the call in progress began, 0: none */
    atomic_llong consumer_step_ns; /* time between sl_next calls */
    atomic_llong consumer_calls;
    sl__node_stats *stats_head;    /* under mu; entries are never removed */
    bool autotune;                 /* SL_OPT_AUTOTUNE */
    bool autotune_log;             /* SL_OPT_AUTOTUNE_LOG or SLUICE_LOG=autotune */
    int cpu_budget;                /* SL_OPT_CPU_BUDGET resolved */
    int64_t stall_target_ppm;
    atomic_llong knob_changes;
    struct sl__trace *trace;       /* NULL when tracing is off */
    struct sl__autotune *at;       /* the controller, NULL when off */
    /* what an earlier iterator of this dataset learned (owned copy, NULL:
     * none): autotuned knobs start from its values, the controller from
     * its estimates */
    sl__learned *learned;

    pthread_mutex_t mu;     /* registry, budget waits, state slots */
    pthread_cond_t budget_cv;
    atomic_int budget_waiters;
    sl__iter *async_head;
    struct sl__slot *slots;
    /* a saved state's records by key, while the root is made from it
     * (read only by the thread making it: state.h) */
    sl__restore *restore;
    /* A service worker's pass over part of an epoch (src/service/): the
     * node split_node (the one whose positions split) yields its positions
     * [split_first, split_end) only, and the maps above it number their
     * elements from split_first, so that each element is made exactly as
     * in the whole pass. NULL: a whole pass. */
    const sl_dataset *split_node;
    int64_t split_first, split_end;
};

/* For the node that gives the positions a service worker's pass splits:
 * whether `it` is that node, and the range. */
bool sl__split_range(const sl__iter *it, int64_t *first, int64_t *end);
/* The number a map gives its first element: the split's first position in
 * a service worker's pass, else 0. */
int64_t sl__split_base(const sl__iter *it);

enum { SL__IGNORE_NONE, SL__IGNORE_SILENT, SL__IGNORE_LOGGED };

/* The element-error policy: called where an element error originates, with
 * the message already set. Returns 0 to skip the element (counted, maybe
 * logged) or the code to fail with. it->fail_count is updated here;
 * producing nodes bump it->ok_count for their good elements. */
int sl__policy(sl__iter *it, int code);
/* Counts an element error as skipped and logs it (the first few), whatever
 * the policy: for errors that are no fault of the data (a file deleted
 * from a rescanning folder). */
void sl__skip_logged(sl__iter *it);

/* Seed for a node: an explicit op seed wins, else the global seed; both are
 * mixed with the node key so twin nodes differ. */
uint64_t sl__node_seed(const sl__iter *it, int64_t op_seed);

/* consumer_wait_ns plus the call to sl_next in progress, as of `now`: so a
 * long wait shows while it lasts, not only when it ends. Any thread. */
int64_t sl__consumer_wait(sl__tree *t, int64_t now);

/* Byte accounting for buffered elements. */
void sl__tree_hold(sl__tree *t, int64_t bytes);
void sl__tree_unhold(sl__tree *t, int64_t bytes);
/* The same, also counted in the node's bytes_held (its own buffer). */
void sl__iter_hold(sl__iter *it, int64_t bytes);
void sl__iter_unhold(sl__iter *it, int64_t bytes);
/* The same without waking producers waiting on the RAM budget (it takes
 * the tree's lock): for callers holding a node lock, which then call
 * sl__tree_budget_wake once they have let go of it. */
void sl__iter_unhold_nowake(sl__iter *it, int64_t bytes);
void sl__tree_budget_wake(sl__tree *t);
/* Registers the node's kind (stats.h) and its knob of `knob_kind`, once
 * per pass. requested is the op's parameter, >= 1 or SL_AUTOTUNE: the
 * controller moves the knob only when SL_AUTOTUNE was asked and it runs,
 * from auto_start up to auto_max; otherwise the knob stays at requested,
 * or at `fixed` for SL_AUTOTUNE without the controller. NULL (message set)
 * on failure. */
sl__knob *sl__iter_knob(sl__iter *it, int node_kind, int knob_kind, int64_t requested,
                        int64_t auto_start, int64_t auto_max, int64_t fixed);
/* Frees the tree's statistics entries (src/graph/stats.c). */
void sl__stats_fini(sl__tree *t);

/* A tree from the options (runtime, budgets, policy, seed, trace ring):
 * 0 or a negative code; sl__tree_fini undoes it, also after a failure.
 * sl__tree_cancel stops every async node (under the tree lock): the first
 * step of freeing an iterator. */
int sl__tree_init(sl__tree *t, const sl_options *opts);
void sl__tree_cancel(sl__tree *t);
void sl__tree_fini(sl__tree *t);
/* The sl_stat counters of the tree: what sl_iterator_stat returns, and
 * what the statistics snapshot reads them with. -1 for an unknown key. */
int64_t sl__tree_stat(const sl__tree *t, sl_stat key);
/* The root node iterator of a tree, for `epoch`. */
int sl__iter_make_root(const sl_dataset *ds, sl__tree *t, int64_t epoch, sl__iter **out);
/* The key node `target` (somewhere under root, along its inputs) gets in
 * a pass of root, as saved states name it: 0, or -1 when it is not there. */
int sl__node_key(const sl_dataset *root, const sl_dataset *target, uint64_t *key);
/* The runtime set with sl_options_set_runtime, or NULL. */
sl_runtime *sl__options_runtime(const sl_options *opts);
const char *sl__options_cache_dir(const sl_options *opts);
/* An option as the iterator uses it: set explicitly, else the profile's
 * default (SL_OPT_PROFILE), else the option's. */
int64_t sl__options_get(const sl_options *opts, sl_option key);
/* A pass over positions [first, end) of node (a service worker's): set on
 * opts, copied into the tree of each iterator made with them. node is
 * borrowed (the dataset the iterator runs holds it). */
void sl__options_set_split(sl_options *opts, const sl_dataset *node, int64_t first, int64_t end);
void sl__options_get_split(const sl_options *opts, const sl_dataset **node, int64_t *first,
                           int64_t *end);
/* Blocks while the budget is exhausted and the caller's own buffer is not
 * empty (*own_count > 0; the caller's consumer must call sl__tree_unhold
 * after taking from that buffer, which wakes the wait). Returns false if the
 * tree was cancelled or *stop became true (a node stopping on its own must
 * call sl__tree_wake after setting it). */
bool sl__tree_wait_budget(sl__tree *t, const atomic_int *own_count, const atomic_bool *stop);
void sl__tree_wake(sl__tree *t);
static inline bool sl__tree_cancelled(sl__tree *t)
{
    return atomic_load_explicit(&t->cancelled, memory_order_acquire);
}

/* Node state that outlives one pass (an in-memory cache): one slot per key,
 * created on first use, destroyed with the tree. Returns the slot's data
 * pointer (zeroed `size` bytes) or NULL on allocation failure. */
void *sl__tree_slot(sl__tree *t, uint64_t key, size_t size, void (*destroy)(void *data));

#endif
