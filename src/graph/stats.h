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
} sl__node_kind;

typedef enum sl__knob_kind {
    SL__KNOB_PARALLELISM = 0, /* tasks in flight: costs CPU */
    SL__KNOB_DEPTH,           /* buffer capacity: costs memory */
    SL__KNOB_IO_DEPTH,        /* reads in flight */
} sl__knob_kind;

#define SL__MAX_KNOBS 3

typedef struct sl__knob {
    const char *name; /* static: "parallelism", "depth", "io_depth" */
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

    atomic_llong elements;      /* produced */
    atomic_llong busy_ns;       /* work time, summed over workers */
    atomic_llong wait_ns;       /* producer time waiting on the input */
    atomic_llong takes;         /* takes from the output buffer */
    atomic_llong occupancy_sum; /* sum of the occupancy seen at each take */
    atomic_llong empty_takes;   /* takes that found it empty */
    atomic_llong bytes_held;    /* in the output buffer now */
    atomic_int capacity;        /* current capacity, elements (0: no buffer) */
    atomic_int in_flight;       /* tasks or reads running now */

    int nknobs;
    sl__knob knobs[SL__MAX_KNOBS];
} sl__node_stats;

/* The entry for node `key`, created on first use (name and kind from this
 * call), or NULL on allocation failure. Thread-safe. */
sl__node_stats *sl__stats_node(sl__tree *t, uint64_t key, const char *name, int kind,
                               int depth);
/* The node's knob `name`, registered on first use with these bounds and
 * initial value (an existing knob keeps its value: what was learned in the
 * previous pass carries over). autotune: whether the controller may move
 * it. NULL if SL__MAX_KNOBS are taken. */
sl__knob *sl__stats_knob(sl__node_stats *ns, const char *name, int kind, int64_t min,
                         int64_t max, int64_t initial, bool autotune);

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
