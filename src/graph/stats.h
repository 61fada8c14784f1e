/*
 * Counters and knobs: what nodes publish and what the autotune controller
 * reads and moves. The controller never names a concrete op; a node becomes
 * observable by publishing a sl__node_stats and tunable by registering
 * knobs on it.
 *
 * Entries live in the tree, keyed by the node key, so they outlive one pass:
 * a repeat re-creates its input's node iterators each epoch, and the knob
 * values the controller learned (and the counters) carry over.
 *
 * Cost rule: a few relaxed atomic adds per element or per batch, one clock
 * read where a duration is measured; no lock, no syscall per element.
 */
#ifndef SL_GRAPH_STATS_H
#define SL_GRAPH_STATS_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

typedef struct sl__tree sl__tree;

typedef enum sl__node_kind {
    SL__NODE_OTHER = 0,
    SL__NODE_MAP,      /* CPU work in pool tasks (map, map_image) */
    SL__NODE_PREFETCH, /* a buffer filled by a thread */
    SL__NODE_READ,     /* file reads through the I/O engine */
    SL__NODE_SERVICE,  /* batches from the preprocessing service's workers */
} sl__node_kind;

/*
 * The counters every node publishes: this one list makes the node's entry
 * (below), the controller's snapshot (autotune/controller.h), the
 * statistics snapshot, its JSON and the report's counter lines (obs/).
 * Adding a counter is one line here, plus the code that counts it.
 *   SUM(name, what): a running total; the controller sees its change since
 *                    the previous tick
 *   NOW(name, what): a level; the controller sees its value
 */
#define SL__NODE_COUNTERS(SUM, NOW)                                              \
    SUM(elements, "elements produced")                                           \
    SUM(busy_ns, "work time, summed over workers or reads")                      \
    SUM(queue_ns, "time its tasks waited for a pool worker")                     \
    SUM(cpu_ns, "CPU time of its workers' threads while they worked")            \
    SUM(wait_ns, "producer time waiting on its input")                           \
    SUM(full_ns, "producer time waiting for room in its full buffer")            \
    SUM(takes, "takes from its output buffer")                                   \
    SUM(occupancy_sum, "elements found in the buffer, summed over takes")        \
    SUM(empty_takes, "takes that found the buffer empty")                        \
    SUM(bytes_read, "file bytes it read")                                        \
    SUM(read_wait_ns, "time its workers blocked in reads of their own (not work)") \
    SUM(bytes_out, "tensor bytes of the elements it produced")                   \
    NOW(bytes_held, "bytes in its output buffer")                                \
    NOW(capacity, "its output buffer's capacity, elements (0: no buffer)")       \
    NOW(in_flight, "tasks or reads running (a service: splits with its workers)")      \
    SUM(net_bytes, "bytes received from service workers")                        \
    SUM(recomputed, "service splits handed out again after their worker left")   \
    SUM(remote_busy_ns, "time service workers spent computing what it received") \
    NOW(workers, "service workers paired now")

/* A counter's name as a string, and its description, for the lists the
 * macro makes. */
#define SL__COUNTER_NAME(name, what) #name,
#define SL__COUNTER_WHAT(name, what) what,
#define SL__COUNTER_ONE(name, what) +1
enum { SL__NODE_COUNTER_COUNT = 0 SL__NODE_COUNTERS(SL__COUNTER_ONE, SL__COUNTER_ONE) };

/* The knobs nodes register: kind, name, what moving it costs. */
#define SL__KNOBS(X)                                                  \
    X(PARALLELISM, "parallelism", "tasks in flight: costs CPU")       \
    X(DEPTH, "depth", "buffer capacity: costs memory")                \
    X(IO_DEPTH, "io_depth", "reads in flight")

typedef enum sl__knob_kind {
#define SL__KNOB_ENUM(kind, name, what) SL__KNOB_##kind,
    SL__KNOBS(SL__KNOB_ENUM)
#undef SL__KNOB_ENUM
    SL__KNOB_KIND_COUNT
} sl__knob_kind;

/* "parallelism", "depth", "io_depth"; "?" for a bad kind. */
const char *sl__knob_name(int kind);

#define SL__MAX_KNOBS 3

typedef struct sl__knob {
    const char *name; /* sl__knob_name(kind) */
    int kind;         /* sl__knob_kind */
    int64_t min, max;
    atomic_llong value; /* nodes read it each time they decide; the controller writes */
    bool autotune;      /* the user asked for SL_AUTOTUNE: the controller may move it */
} sl__knob;

typedef struct sl__node_stats {
    struct sl__node_stats *next; /* tree list, in registration order */
    uint64_t key;
    int kind;      /* sl__node_kind */
    int depth;     /* distance from the root (0 = the node sl_next reads) */
    char name[64]; /* display name */
#define SL__STATS_FIELD(name, what) atomic_llong name;
    SL__NODE_COUNTERS(SL__STATS_FIELD, SL__STATS_FIELD)
#undef SL__STATS_FIELD
    int nknobs;
    sl__knob knobs[SL__MAX_KNOBS];
} sl__node_stats;

/* The entry for node `key`, created on first use (name and kind from this
 * call), or NULL on allocation failure. Thread-safe. */
sl__node_stats *sl__stats_node(sl__tree *t, uint64_t key, const char *name, int kind,
                               int depth);
/* The node's knob of `kind`, registered on first use with these bounds and
 * initial value (an existing knob keeps its value: what was learned in the
 * previous pass carries over). autotune: whether the controller may move
 * it. NULL if SL__MAX_KNOBS are taken. */
sl__knob *sl__stats_knob(sl__node_stats *ns, int kind, int64_t min, int64_t max,
                         int64_t initial, bool autotune);

static inline int64_t sl__knob_get(const sl__knob *k)
{
    return atomic_load_explicit(&((sl__knob *)k)->value, memory_order_relaxed);
}

static inline void sl__stat_add(atomic_llong *c, int64_t v)
{
    atomic_fetch_add_explicit(c, v, memory_order_relaxed);
}

/* A take from a node's output buffer that found `occupancy` elements. */
static inline void sl__stat_take(sl__node_stats *ns, int occupancy)
{
    sl__stat_add(&ns->takes, 1);
    sl__stat_add(&ns->occupancy_sum, occupancy);
    if (occupancy == 0)
        sl__stat_add(&ns->empty_takes, 1);
}

#endif
