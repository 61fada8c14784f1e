/*
 * The autotune decision logic: a pure function of counter snapshots.
 *
 * The driver (driver.c) reads the tree's counters every tick, turns them
 * into a snapshot of deltas, and calls sl__at_decide, which returns the knob
 * changes to make (each with its reason) and when to tick next. Nothing here
 * reads a clock, takes a lock or touches a node: the same snapshots give the
 * same decisions, which is what lets tests/test_autotune.c drive it with a
 * simulated pipeline and a fake clock.
 *
 * What the counters mean to the controller, per node kind (stats.h):
 *   MAP      busy_ns: callback time summed over workers; wait_ns: producer
 *            time waiting on the input; knob "parallelism".
 *   READ     busy_ns: time reads were in flight, summed over reads (0 if not
 *            measured: in_flight stands in); knob "io_depth".
 *   PREFETCH wait_ns: producer time pulling the input; knob "depth".
 * takes / occupancy_sum / empty_takes describe the node's output buffer as
 * its consumer (the next node down, or sl_next) sees it.
 */
#ifndef SL_AUTOTUNE_CONTROLLER_H
#define SL_AUTOTUNE_CONTROLLER_H

#include <stdbool.h>
#include <stdint.h>
#include "../graph/learned.h"
#include "../graph/stats.h"

#define SL__AT_MAX_NODES 64
#define SL__AT_MAX_CHANGES 4
#define SL__AT_REASON 192
/* Knob changes remembered per knob for the per-minute cap. */
#define SL__AT_PER_MINUTE 20

typedef struct sl__at_knob {
    int kind; /* sl__knob_kind */
    int64_t value, min, max;
    bool autotune;
    const char *name; /* for reasons; may be NULL */
} sl__at_knob;

/* One field per counter (graph/stats.h): running totals as their change
 * since the previous snapshot, levels as they are now. */
#define SL__AT_FIELD(name, what) int64_t name;
#define SL__AT_NONE(name, what)

typedef struct sl__at_node {
    uint64_t key;
    const char *name; /* for reasons; may be NULL */
    int kind;  /* sl__node_kind */
    int depth; /* 0: the node sl_next reads */
    SL__NODE_COUNTERS(SL__AT_FIELD, SL__AT_FIELD)
    int nknobs;
    sl__at_knob knobs[SL__MAX_KNOBS];
} sl__at_node;

typedef struct sl__at_snapshot {
    int64_t now_ns; /* any monotonic origin */
    /* consumer deltas since the previous snapshot */
    int64_t consumer_wait_ns, consumer_step_ns, consumer_calls;
    /* CPU units (worker threads) this controller may hold in total: what
     * sl__at_cpu_units counts of its autotuned parallelism must stay at or
     * below it */
    int64_t cpu_budget;
    /* threads of the pool the stages' tasks run on (0: unknown): however
     * many tasks are in flight, no more run at once */
    int64_t pool_threads;
    int64_t ram_budget, buffered_bytes;
    int64_t stall_target_ppm;
    int nnodes; /* in a stable order from one snapshot to the next */
    sl__at_node nodes[SL__AT_MAX_NODES];
} sl__at_snapshot;

/* Why a knob moved. SHARE: a parallel stage gave workers to a costlier one
 * that the CPU budget left short. SMOOTH: a buffer deepened for a stall
 * that no stage's growth removes (checked, and given back if it does not
 * pay). */
enum {
    SL__AT_GROW = 0,
    SL__AT_SHRINK,
    SL__AT_UNDO,
    SL__AT_BUDGET,
    SL__AT_RAM,
    SL__AT_SHARE,
    SL__AT_SMOOTH
};

typedef struct sl__at_change {
    int node, knob; /* indices into the snapshot */
    int64_t from, to;
    int why;        /* SL__AT_GROW... */
    char reason[SL__AT_REASON];
} sl__at_change;

typedef struct sl__at_decision {
    int nchanges;
    sl__at_change changes[SL__AT_MAX_CHANGES];
    /* a growth held back, said once until that knob moves ("": none) */
    char note[SL__AT_REASON];
    int64_t next_tick_ns; /* how long to wait before the next snapshot */
} sl__at_decision;

/* What the controller remembers about one knob. */
typedef struct sl__at_knob_state {
    int64_t last_change_ns;  /* INT64_MIN: never */
    int64_t last_shrink_ns;  /* INT64_MIN: never */
    int64_t shrunk_from;     /* the value before that shrink */
    int64_t shrink_cooldown_ns; /* doubles after each shrink that caused a stall */
    int64_t no_shrink_until_ns;
    int64_t recent[SL__AT_PER_MINUTE]; /* times of the latest changes, a ring */
    int nrecent, recent_head;
    /* a growth being checked (growths that follow it before it is judged
     * join it): the value it grew from (0: none); for parallelism the
     * node's cost per element and busy time per CPU time then, and since;
     * for a buffer's depth the consumer's stall then, and its wait and
     * step since, with the time the buffer was full */
    int64_t check_from;
    double check_cost_ns, check_stretch, check_stall;
    int64_t check_busy_ns, check_cpu_ns, check_elements, check_since_ns;
    int64_t check_wait_ns, check_step_ns, check_full_ns;
    int64_t check_for_ns; /* consumer time a depth growth is measured over */
    /* no growth past `ceiling` before ceiling_until_ns: a growth to more
     * bought nothing (the cooldown doubles each time) */
    int64_t ceiling, ceiling_until_ns, ceiling_cooldown_ns;
    bool ceiling_ram; /* ... set by the RAM budget cutting the knob */
    bool held_noted;  /* a growth held back was said (until the knob moves) */
} sl__at_knob_state;

/* What it remembers about one node: the current measuring window, the quiet
 * period used to decide shrinking, and the reference for change detection. */
typedef struct sl__at_node_state {
    uint64_t key;
    bool used;
    SL__NODE_COUNTERS(SL__AT_FIELD, SL__AT_NONE) /* the running totals over the window */
    int64_t others_peak;    /* the most buffered elsewhere at a tick of the window */
    /* over the quiet period (the consumer did not stall) */
    int64_t quiet_since_ns; /* INT64_MIN: not tracking */
    double quiet_low;       /* lowest mean occupancy of a window */
    int64_t quiet_empty;    /* empty takes */
    double quiet_busy;      /* highest mean number of busy workers/reads */
    double el_bytes;        /* estimated bytes per buffered element */
    double ref_el_bytes;    /* ... when the controller became stable */
    double cur_cost_ns;     /* busy ns per element, smoothed over windows */
    double last_cost_ns;    /* ... in the last window judged (0: not measured) */
    double last_stretch;    /* its busy time over its CPU time then (0: not measured) */
    double busy_avg;        /* busy workers, smoothed over windows (-1: none yet):
                             * its share of the stages' sum is its share of the work */
    bool covered;           /* it was given a task beyond its share while the
                             * pool idled (until it shrinks) */
    double ref_cost_ns;     /* ... when the controller became stable */
    sl__at_knob_state knobs[SL__MAX_KNOBS];
} sl__at_node_state;

enum { SL__AT_ADAPTING = 0, SL__AT_STABLE };

typedef struct sl__at_state {
    int mode;
    int64_t last_now_ns;
    int64_t last_change_ns;
    int64_t settle_until_ns; /* measurements before it are discarded */
    int64_t window_ns, wait_ns, step_ns, calls;
    int64_t window_peak_bytes; /* the most buffered at a tick of the window */
    /* the consumer's wait and step over the windows judged since the last
     * change: the stall a growth of depth is measured against */
    int64_t run_wait_ns, run_step_ns;
    int64_t changes;         /* total, for tests */
    bool cold;               /* no change made yet: a starved consumer is
                              * judged on a shorter window */
    double cur_step_ns;      /* consumer step per call, smoothed (-1: none yet) */
    double ref_step_ns;      /* ... when the controller became stable */
    bool have_ref;
    int64_t fast_until_ns;   /* at start and after a detected change: shrink sooner */
    int nnodes;
    sl__at_node_state nodes[SL__AT_MAX_NODES];
    /* an earlier iterator's estimates, seeding the nodes it knew (NULL:
     * none; owned by the caller, outliving the state) */
    const sl__learned *warm;
} sl__at_state;

/* The CPU units a snapshot's autotuned parallelism holds: the knobs summed,
 * less one for each autotuned parallel stage after the first, and at most
 * the pool's threads. Each stage needs a worker of its own, and a budget
 * split between stages by cost rounds each share up, so n stages may hold
 * n - 1 workers more than the budget between them; and tasks beyond the
 * pool's threads wait for one, so they hold no CPU (a bottleneck may have
 * more in flight while the pool idles). */
int64_t sl__at_cpu_units(const sl__at_snapshot *snap);
/* The units with every autotuned parallelism knob at its minimum: what a
 * controller holds whatever the budget says. */
int64_t sl__at_cpu_units_floor(const sl__at_snapshot *snap);

/* A fresh controller state at time now_ns. */
void sl__at_init(sl__at_state *s, int64_t now_ns);
/* Starts from what an earlier controller learned (l outlives s): the
 * nodes it knew begin with its estimates (their shares of the work, costs,
 * element sizes), and the start is not a cold one (the knobs begin at its
 * values, set by the caller). */
void sl__at_warm(sl__at_state *s, const sl__learned *l);
/* Writes the controller's estimates of the nodes it knows into l. */
void sl__at_learned(const sl__at_state *s, sl__learned *l);
/* Feeds one snapshot and fills *out with the changes to apply (at most one
 * grow or one shrink per call, plus budget corrections) and the next tick.
 * The caller applies every change it can; a change it cannot apply (a CPU
 * claim that another controller won) simply shows in the next snapshot. */
void sl__at_decide(sl__at_state *s, const sl__at_snapshot *snap, sl__at_decision *out);

#endif
