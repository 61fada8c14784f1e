/*
 * The autotune decision logic (controller.h); the algorithm is described in
 * docs/design.md, "Autotune".
 *
 * In short: snapshots accumulate into a measuring window; once the window
 * holds enough time and consumer calls, it is judged. If the consumer
 * stalled more than the target, the bottleneck is found by walking from the
 * consumer upstream and one knob of it grows. If the consumer has not
 * stalled for a while, one over-provisioned knob steps down. Every
 * change restarts the window, so what is judged was measured under the
 * current knob values.
 */
#include <math.h>
#include <stdio.h>
#include <string.h>
#include "controller.h"

#define MS 1000000LL
#define SEC 1000000000LL

#define TICK_COLD (20 * MS)     /* from the start to the first change */
#define TICK_FAST (50 * MS)     /* while adapting */
#define TICK_SLOW (500 * MS)    /* when stable */
#define WINDOW_COLD (40 * MS)   /* ... at a cold start with a starved consumer */
#define WINDOW_FAST (100 * MS)  /* shortest window judged while adapting */
#define WINDOW_SLOW (400 * MS)  /* ... when stable */
#define WINDOW_MARGINAL (2 * SEC) /* a stall just over the target is judged on this */
#define WINDOW_MAX (5 * SEC)    /* then judged with fewer calls */
#define MIN_CALLS 4
#define SETTLE (50 * MS)        /* after a change, measurements this old are dropped */
#define STABLE_AFTER (1 * SEC)  /* without a change: stable */
#define QUIET_SLOW (4 * SEC)    /* no stall for this long before shrinking */
#define QUIET_FAST (1 * SEC)    /* ... at start and after a detected change */
#define FAST_PERIOD (15 * SEC)  /* how long "after a detected change" lasts */
#define SHRINK_GAP (1 * SEC)    /* a knob rests this long between changes before a shrink */
#define PROBE (3 * SEC)         /* a stall this soon after a shrink blames the shrink */
#define COOLDOWN_BASE (60 * SEC)
#define COOLDOWN_MAX (16 * 60 * SEC)
#define MINUTE (60 * SEC)

#define EMPTY_MIN 0.01  /* output empty in this fraction of takes: it starves its consumer */
#define BUSY_HI 0.75    /* workers (reads) busy this fraction of the time: saturated */
#define WAIT_HI 0.6     /* producer waiting on its input this fraction: the input is the cause */
#define WAIT_LO 0.25    /* ... this much, with the input saturated too: the deeper cause */
#define IO_BUSY_MIN 0.5 /* reads in flight at least this fraction: reads limit the reader */
#define SHRINK_LOAD 0.8 /* after a shrink, the units left are at most this loaded */
#define RAM_FULL 0.9    /* buffered at this fraction of the budget: grow nothing */
#define RAM_PLENTY 0.5  /* buffered under this fraction: RAM to spare for depth */
#define SMALL_STALL 0.25 /* of the target: a stall above it is not near zero, and buys
                          * depth while RAM is plentiful */
#define RUN_MAX (10 * SEC) /* the stall since the last change: its older part fades */
#define DEPTH_CHECK (2 * SEC) /* consumer time a stall is seen before depth is bought,
                               * and after, before the growth is judged */
#define DEPTH_FULL 0.25 /* ... kept if the buffer was full this part of the time, */
#define DEPTH_GAIN 0.25 /* ... or the stall fell by this part of the growth (doubling:
                         * by a quarter) */
#define SMALL_RUN 4    /* a stall under the target is seen this many DEPTH_CHECKs */
#define CHANGE 0.3      /* relative change of consumer step or element cost: re-tune */

/* ---- small helpers ---- */

static double frac(int64_t a, int64_t b)
{
    return b > 0 ? (double)a / (double)b : 0.0;
}

static void knob_state_init(sl__at_knob_state *ks)
{
    memset(ks, 0, sizeof *ks);
    ks->last_change_ns = INT64_MIN;
    ks->last_shrink_ns = INT64_MIN;
    ks->shrink_cooldown_ns = COOLDOWN_BASE;
    ks->no_shrink_until_ns = INT64_MIN;
    ks->ceiling_until_ns = INT64_MIN;
    ks->ceiling_cooldown_ns = COOLDOWN_BASE;
}

static void node_state_init(sl__at_node_state *ns, uint64_t key)
{
    memset(ns, 0, sizeof *ns);
    ns->key = key;
    ns->used = true;
    ns->quiet_since_ns = INT64_MIN;
    ns->busy_avg = -1;
    for (int k = 0; k < SL__MAX_KNOBS; k++)
        knob_state_init(&ns->knobs[k]);
}

static void window_reset(sl__at_state *s)
{
    s->window_ns = s->wait_ns = s->step_ns = s->calls = s->window_peak_bytes = 0;
    for (int i = 0; i < s->nnodes; i++) {
        sl__at_node_state *ns = &s->nodes[i];
#define RESET(name, what) ns->name = 0;
        SL__NODE_COUNTERS(RESET, SL__AT_NONE)
#undef RESET
        ns->others_peak = 0;
    }
}

static void quiet_reset(sl__at_node_state *ns)
{
    ns->quiet_since_ns = INT64_MIN;
    ns->quiet_empty = 0;
    ns->quiet_low = 0;
    ns->quiet_busy = 0;
}

/* Changes of this knob in the last minute are under the cap. */
/* The next cooldown: twice this one, at most COOLDOWN_MAX. */
static void double_cooldown(int64_t *cooldown)
{
    *cooldown = *cooldown * 2 > COOLDOWN_MAX ? COOLDOWN_MAX : *cooldown * 2;
}

static bool under_cap(const sl__at_knob_state *ks, int64_t now)
{
    if (ks->nrecent < SL__AT_PER_MINUTE)
        return true;
    return ks->recent[ks->recent_head] <= now - MINUTE; /* the oldest one */
}

static void note_change(sl__at_knob_state *ks, int64_t now)
{
    ks->recent[ks->recent_head] = now;
    ks->recent_head = (ks->recent_head + 1) % SL__AT_PER_MINUTE;
    if (ks->nrecent < SL__AT_PER_MINUTE)
        ks->nrecent++;
    ks->last_change_ns = now;
}

/* Index of the node's autotuned knob of `kind`, or -1. */
static int find_knob(const sl__at_node *n, int kind, bool tuned_only)
{
    for (int k = 0; k < n->nknobs; k++)
        if (n->knobs[k].kind == kind && (n->knobs[k].autotune || !tuned_only))
            return k;
    return -1;
}

/* The worker- or read-units knob of a node (tuned or not), or -1. */
static int units_knob(const sl__at_node *n)
{
    int k = find_knob(n, SL__KNOB_PARALLELISM, false);
    return k >= 0 ? k : find_knob(n, SL__KNOB_IO_DEPTH, false);
}

/* Mean number of busy units over the window. A reader that does not
 * measure read time reports what is in flight now. */
static double busy_units(const sl__at_node *n, const sl__at_node_state *ns, int64_t window)
{
    if (ns->busy_ns > 0 || n->kind != SL__NODE_READ)
        return frac(ns->busy_ns, window);
    return n->in_flight;
}

/* sl__at_cpu_units with `extra` more parallelism on one stage. */
static int64_t units_with(const sl__at_snapshot *snap, int64_t extra)
{
    int64_t sum = extra, stages = 0;
    for (int i = 0; i < snap->nnodes; i++)
        for (int k = 0; k < snap->nodes[i].nknobs; k++) {
            const sl__at_knob *kb = &snap->nodes[i].knobs[k];
            if (kb->autotune && kb->kind == SL__KNOB_PARALLELISM)
                sum += kb->value, stages++;
        }
    int64_t units = stages > 1 ? sum - (stages - 1) : sum;
    return snap->pool_threads > 0 && units > snap->pool_threads ? snap->pool_threads : units;
}

int64_t sl__at_cpu_units(const sl__at_snapshot *snap)
{
    return units_with(snap, 0);
}

int64_t sl__at_cpu_units_floor(const sl__at_snapshot *snap)
{
    int64_t sum = 0, stages = 0;
    for (int i = 0; i < snap->nnodes; i++)
        for (int k = 0; k < snap->nodes[i].nknobs; k++) {
            const sl__at_knob *kb = &snap->nodes[i].knobs[k];
            if (kb->autotune && kb->kind == SL__KNOB_PARALLELISM)
                sum += kb->min, stages++;
        }
    return stages > 1 ? sum - (stages - 1) : sum;
}

static sl__at_change *add_change(sl__at_decision *out, int why, int node, int knob,
                                 int64_t from, int64_t to)
{
    if (out->nchanges >= SL__AT_MAX_CHANGES)
        return NULL;
    sl__at_change *c = &out->changes[out->nchanges++];
    c->node = node;
    c->knob = knob;
    c->from = from;
    c->to = to;
    c->why = why;
    c->reason[0] = 0;
    return c;
}

/* ---- bookkeeping of one snapshot ---- */

static void sync_nodes(sl__at_state *s, const sl__at_snapshot *snap)
{
    int n = snap->nnodes < SL__AT_MAX_NODES ? snap->nnodes : SL__AT_MAX_NODES;
    for (int i = 0; i < n; i++)
        if (!s->nodes[i].used || s->nodes[i].key != snap->nodes[i].key) {
            sl__at_node_state *ns = &s->nodes[i];
            node_state_init(ns, snap->nodes[i].key);
            const sl__learned_node *w = sl__learned_node_of(s->warm, ns->key);
            if (w) {
                ns->busy_avg = w->busy_avg;
                ns->cur_cost_ns = w->cost_ns;
                ns->el_bytes = w->el_bytes;
            }
        }
    if (n > s->nnodes)
        s->nnodes = n;
}

static void accumulate(sl__at_state *s, const sl__at_snapshot *snap, int64_t dt)
{
    s->window_ns += dt;
    s->wait_ns += snap->consumer_wait_ns;
    s->step_ns += snap->consumer_step_ns;
    s->calls += snap->consumer_calls;
    if (snap->buffered_bytes > s->window_peak_bytes)
        s->window_peak_bytes = snap->buffered_bytes;
    for (int i = 0; i < snap->nnodes && i < SL__AT_MAX_NODES; i++) {
        const sl__at_node *n = &snap->nodes[i];
        sl__at_node_state *ns = &s->nodes[i];
#define ADD(name, what) ns->name += n->name;
        SL__NODE_COUNTERS(ADD, SL__AT_NONE)
#undef ADD
        if (snap->buffered_bytes - n->bytes_held > ns->others_peak)
            ns->others_peak = snap->buffered_bytes - n->bytes_held;
    }
}

static bool window_ready(const sl__at_state *s)
{
    /* a consumer that spent most of the window waiting (the call in
     * progress included) needs no more calls to show the pipeline is
     * short: slow batches (large images, a cold start) would otherwise hold
     * the first decision back for seconds */
    bool starved = 2 * s->wait_ns >= s->window_ns;
    /* at a cold start, a consumer that did nothing but wait is judged
     * sooner: the knobs start at their minimum, so every tick spent
     * watching it wait runs the pipeline at a fraction of its speed */
    bool cold = s->cold && 10 * s->wait_ns >= 9 * s->window_ns;
    int64_t min = cold ? WINDOW_COLD : s->mode == SL__AT_ADAPTING ? WINDOW_FAST : WINDOW_SLOW;
    if (s->window_ns < min)
        return false;
    return s->calls >= MIN_CALLS || starved || (s->window_ns >= WINDOW_MAX && s->calls > 0);
}

static void update_el_bytes(sl__at_state *s, const sl__at_snapshot *snap)
{
    for (int i = 0; i < s->nnodes && i < snap->nnodes; i++) {
        const sl__at_node *n = &snap->nodes[i];
        sl__at_node_state *ns = &s->nodes[i];
        double est;
        if (ns->bytes_out > 0 && ns->elements > 0) {
            est = (double)ns->bytes_out / (double)ns->elements; /* the mean, exactly */
        } else {
            /* a node that counts its own elements: from what it holds */
            if (n->bytes_held <= 0 || ns->takes <= 0)
                continue;
            double occ = frac(ns->occupancy_sum, ns->takes);
            est = (double)n->bytes_held / (occ > 1 ? occ : 1);
        }
        ns->el_bytes = ns->el_bytes > 0 ? 0.5 * ns->el_bytes + 0.5 * est : est;
    }
}

/* ---- budgets ---- */

/* Brings the autotuned parallelism back under the CPU budget (which may
 * have shrunk: another iterator on the runtime, or a lower option). */
static void enforce_cpu(sl__at_state *s, const sl__at_snapshot *snap, sl__at_decision *out)
{
    int64_t held = sl__at_cpu_units(snap);
    int64_t excess = held - snap->cpu_budget;
    while (excess > 0) {
        int best = -1, bk = -1;
        double best_load = 0;
        for (int i = 0; i < snap->nnodes; i++) {
            int k = find_knob(&snap->nodes[i], SL__KNOB_PARALLELISM, true);
            if (k < 0)
                continue;
            const sl__at_knob *kb = &snap->nodes[i].knobs[k];
            bool done = false;
            for (int c = 0; c < out->nchanges; c++)
                done |= out->changes[c].node == i && out->changes[c].knob == k;
            if (done || kb->value <= kb->min)
                continue;
            double load = frac(s->nodes[i].busy_ns, s->window_ns) / (double)kb->value;
            if (best < 0 || load < best_load)
                best = i, bk = k, best_load = load;
        }
        if (best < 0)
            return; /* every knob at its minimum: nothing more to give */
        const sl__at_knob *kb = &snap->nodes[best].knobs[bk];
        int64_t to = kb->value - excess < kb->min ? kb->min : kb->value - excess;
        sl__at_change *c = add_change(out, SL__AT_BUDGET, best, bk, kb->value, to);
        if (!c)
            return;
        snprintf(c->reason, sizeof c->reason,
                 "CPU budget: %lld worker(s) for this controller, it held %lld",
                 (long long)snap->cpu_budget, (long long)held);
        excess -= kb->value - to;
    }
}

/* The value a buffer knob of node i may grow to under the RAM budget
 * (<= want): what fits beside the most the others held at a tick of the
 * window (the level swings by whole elements; sized on a low moment, a
 * buffer would be cut again at the next high one). */
static int64_t ram_cap(const sl__at_state *s, const sl__at_snapshot *snap, int i, int64_t want)
{
    double el = s->nodes[i].el_bytes;
    if (el <= 0)
        return want;
    int64_t others = snap->buffered_bytes - snap->nodes[i].bytes_held;
    if (s->nodes[i].others_peak > others)
        others = s->nodes[i].others_peak;
    double fit = floor((double)(snap->ram_budget - others) / el);
    return fit < (double)want ? (int64_t)(fit > 0 ? fit : 0) : want;
}

/* Buffers whose depth, at today's element size, no longer fits the RAM
 * budget (elements grew): cut the largest to what fits, so the knob says
 * what the buffer can hold and a later shrink of the elements does not
 * find a buffer as deep as the small ones had made it. One per call. */
static void enforce_ram(sl__at_state *s, const sl__at_snapshot *snap, sl__at_decision *out)
{
    int best = -1, bk = -1;
    int64_t best_to = 0;
    double best_over = 0;
    for (int i = 0; i < snap->nnodes && i < s->nnodes; i++) {
        int k = find_knob(&snap->nodes[i], SL__KNOB_DEPTH, true);
        double el = s->nodes[i].el_bytes;
        if (k < 0 || el <= 0)
            continue;
        const sl__at_knob *kb = &snap->nodes[i].knobs[k];
        int64_t fit = ram_cap(s, snap, i, kb->value);
        int64_t to = fit < kb->min ? kb->min : fit;
        double over = (double)(kb->value - to) * el;
        /* a margin, so that a noisy size estimate does not cut and regrow */
        if ((double)to < 0.8 * (double)kb->value && over > best_over)
            best = i, bk = k, best_to = to, best_over = over;
    }
    if (best < 0)
        return;
    const sl__at_knob *kb = &snap->nodes[best].knobs[bk];
    sl__at_change *c = add_change(out, SL__AT_RAM, best, bk, kb->value, best_to);
    int64_t others = snap->buffered_bytes - snap->nodes[best].bytes_held;
    if (s->nodes[best].others_peak > others)
        others = s->nodes[best].others_peak;
    if (c)
        snprintf(c->reason, sizeof c->reason,
                 "RAM budget: elements of %.0f KiB, %lld fit beside the %.1f MiB buffered "
                 "elsewhere (budget %.1f MiB)",
                 s->nodes[best].el_bytes / 1024, (long long)best_to,
                 (double)others / 1048576.0, (double)snap->ram_budget / 1048576.0);
}

static bool ram_full(const sl__at_snapshot *snap)
{
    return (double)snap->buffered_bytes >= RAM_FULL * (double)snap->ram_budget;
}

/* RAM to spare for `more` bytes of depth: the most buffered at a tick of
 * the window (the level swings by whole batches), and that, stays under
 * RAM_PLENTY of the budget. */
static bool ram_plenty(const sl__at_state *s, const sl__at_snapshot *snap, double more)
{
    int64_t most = s->window_peak_bytes > snap->buffered_bytes ? s->window_peak_bytes
                                                               : snap->buffered_bytes;
    return (double)most + more < RAM_PLENTY * (double)snap->ram_budget;
}

/* ---- growing: the bottleneck walk ---- */

/* Nodes that take part, ordered from the consumer upstream. */
static int walk_order(const sl__at_snapshot *snap, int *order)
{
    int n = 0;
    for (int i = 0; i < snap->nnodes && i < SL__AT_MAX_NODES; i++) {
        if (snap->nodes[i].kind == SL__NODE_OTHER)
            continue;
        int j = n++;
        while (j > 0 && snap->nodes[order[j - 1]].depth > snap->nodes[i].depth) {
            order[j] = order[j - 1];
            j--;
        }
        order[j] = i;
    }
    return n;
}

typedef struct judged {
    double empty, wait, busy, units; /* fractions; busy units and their count */
    double queued;                   /* tasks waiting for a pool worker, on average */
} judged;

/* No take from node i in the window while the consumer waited through
 * most of it: whoever takes from the node is stuck in one take that began
 * in an earlier window (a take counts when it starts), so the node starves
 * it all along. A cold start on large images is one long take. */
static bool stuck_take(const sl__at_state *s, const sl__at_node_state *ns)
{
    return ns->takes == 0 && 2 * s->wait_ns >= s->window_ns;
}

static judged judge(const sl__at_state *s, const sl__at_snapshot *snap, int i)
{
    const sl__at_node *n = &snap->nodes[i];
    const sl__at_node_state *ns = &s->nodes[i];
    judged j = {stuck_take(s, ns) ? 1.0 : frac(ns->empty_takes, ns->takes),
                frac(ns->wait_ns, s->window_ns), 0, 0, frac(ns->queue_ns, s->window_ns)};
    int k = units_knob(n);
    if (k >= 0) {
        j.units = (double)n->knobs[k].value;
        j.busy = busy_units(n, ns, s->window_ns);
    }
    return j;
}

/* What the consumer would take over what it gets: wall / step (the rate
 * it would take if it never waited); 2 when it has not stepped. */
static double demand(const sl__at_state *s)
{
    return s->step_ns > 0 ? (double)(s->wait_ns + s->step_ns) / (double)s->step_ns : 2.0;
}

/* ---- sharing the CPU between parallel stages by cost ---- */

/* A stage's share of the CPU in workers is rounded up to whole ones, less
 * this much: a share of 2.03 workers is 2, so that noise in the measured
 * shares does not move a worker back and forth. */
#define SHARE_TOL 0.05
/* A bottleneck at its share gets one more task in flight while the pool's
 * workers are busy less than this fraction of the time: with all of them
 * busy, more tasks would only wait longer. */
#define POOL_FULL 0.98

/* Pool workers busy on average in the window, over the map stages. */
static double pool_busy(const sl__at_state *s, const sl__at_snapshot *snap)
{
    double busy = 0;
    for (int n = 0; n < snap->nnodes && n < s->nnodes; n++)
        if (snap->nodes[n].kind == SL__NODE_MAP)
            busy += frac(s->nodes[n].busy_ns, s->window_ns);
    return busy;
}

/* Stage i's share of the CPU the pipeline should use, in workers: the
 * CPU its autotuned parallel stages are busy with now, times what the
 * consumer would take more (at most the budget), split by their work:
 * each one's busy time, smoothed over windows, over their sum. All of them
 * run at the pipeline's rate, so their busy times stand in the ratio of
 * their work per output element, whichever of them limits it; a stage
 * with more workers than its share is merely idle more. Negative when not
 * measured yet. */
static double fair_units(const sl__at_state *s, const sl__at_snapshot *snap, int i)
{
    double mine = -1, sum = 0, now = 0;
    for (int n = 0; n < snap->nnodes && n < s->nnodes; n++) {
        if (find_knob(&snap->nodes[n], SL__KNOB_PARALLELISM, true) < 0)
            continue;
        const sl__at_node_state *ns = &s->nodes[n];
        if (ns->busy_avg < 0)
            return -1;
        sum += ns->busy_avg;
        now += busy_units(&snap->nodes[n], ns, s->window_ns);
        if (n == i)
            mine = ns->busy_avg;
    }
    if (mine < 0 || sum <= 0)
        return -1;
    double cpu = now * demand(s);
    if (cpu > (double)snap->cpu_budget)
        cpu = (double)snap->cpu_budget;
    return cpu * mine / sum;
}

static bool changed_now(const sl__at_decision *out, int i, int k)
{
    for (int c = 0; c < out->nchanges; c++)
        if (out->changes[c].node == i && out->changes[c].knob == k)
            return true;
    return false;
}

static const char *node_name(const sl__at_snapshot *snap, int i)
{
    return snap->nodes[i].name ? snap->nodes[i].name : "another stage";
}

/* Takes up to `want` workers for stage i from the autotuned parallel
 * stages that hold more than their share of the CPU, the most over first,
 * never below their share; how many it got. (Stage i takes them, or, when
 * it cannot grow, they stop queueing ahead of its tasks on the pool.) */
static int64_t take_from_donors(sl__at_state *s, const sl__at_snapshot *snap, int i,
                                int64_t want, bool grow, sl__at_decision *out)
{
    int64_t got = 0;
    /* (a change is left for the growth the workers are for) */
    while (got < want && out->nchanges < SL__AT_MAX_CHANGES - 1) {
        int best = -1, bk = -1;
        double best_over = 0, best_fair = 0;
        int64_t best_keep = 0;
        for (int n = 0; n < snap->nnodes && n < s->nnodes; n++) {
            int k = find_knob(&snap->nodes[n], SL__KNOB_PARALLELISM, true);
            if (n == i || k < 0 || changed_now(out, n, k) ||
                !under_cap(&s->nodes[n].knobs[k], snap->now_ns))
                continue;
            const sl__at_knob *kb = &snap->nodes[n].knobs[k];
            double fair = fair_units(s, snap, n);
            /* its share with room to spare (a stage held to exactly its
             * share lags whenever its tasks wait behind others'), and the
             * task that covers its wait for workers */
            int64_t keep = (int64_t)ceil(fair + SHARE_TOL) + s->nodes[n].covered;
            if (keep < kb->min)
                keep = kb->min;
            if (fair < 0 || kb->value <= keep || (double)kb->value - fair <= best_over)
                continue;
            best = n, bk = k, best_over = (double)kb->value - fair;
            best_fair = fair, best_keep = keep;
        }
        if (best < 0)
            break;
        const sl__at_knob *kb = &snap->nodes[best].knobs[bk];
        int64_t give = kb->value - best_keep < want - got ? kb->value - best_keep : want - got;
        sl__at_change *c = add_change(out, SL__AT_SHARE, best, bk, kb->value, kb->value - give);
        if (!c)
            break;
        snprintf(c->reason, sizeof c->reason,
                 "CPU shared by cost: its work is %.1f workers' worth, so %lld of its %lld %s "
                 "%s, which is short of its share",
                 best_fair, (long long)give, (long long)kb->value,
                 grow ? "go to" : "stop queueing ahead of", node_name(snap, i));
        got += give;
    }
    return got;
}

/* Autotuned parallel stages. */
static int parallel_stages(const sl__at_snapshot *snap)
{
    int n = 0;
    for (int i = 0; i < snap->nnodes; i++)
        n += find_knob(&snap->nodes[i], SL__KNOB_PARALLELISM, true) >= 0;
    return n;
}

/* Autotuned parallelism summed: the workers in flight at most. */
static int64_t tuned_workers(const sl__at_snapshot *snap)
{
    int64_t sum = 0;
    for (int i = 0; i < snap->nnodes; i++) {
        int k = find_knob(&snap->nodes[i], SL__KNOB_PARALLELISM, true);
        sum += k >= 0 ? snap->nodes[i].knobs[k].value : 0;
    }
    return sum;
}

static int64_t pool_threads(const sl__at_snapshot *snap)
{
    return snap->pool_threads > 0 ? snap->pool_threads : snap->cpu_budget;
}

/* A bottleneck at its share, with no worker free, may have a task more in
 * flight while the pool is not kept busy: its tasks wait behind the other
 * stages' on the FIFO pool, or the stages hand each other too little to
 * keep every worker going (one task each leaves gaps). One more in flight
 * runs while another waits or fills a gap. Tasks cost no CPU while they
 * wait, so the budget counts none beyond the pool's threads; in flight,
 * twice those at most. A stage alone on the pool has neither trouble:
 * more tasks would only hold more of its output. */
static bool cover_fits(const sl__at_state *s, const sl__at_snapshot *snap)
{
    int64_t pool = pool_threads(snap);
    return parallel_stages(snap) > 1 && pool_busy(s, snap) < POOL_FULL * (double)pool &&
           tuned_workers(snap) < 2 * pool && units_with(snap, 1) <= snap->cpu_budget;
}

/* Grows a node's workers. saturated: they were all busy (else the output
 * was bursty, and more workers widen the node's window). A saturated stage
 * gets its share of the CPU by cost (fair_units, rounded up: the budget's
 * allowance of one worker per stage after the first is for these), from
 * the budget's room or from stages that hold more than their share.
 * Beyond its share, throughput scales with workers: aim at the consumer's
 * demand, at most doubling, with workers the budget has free whole. */
static bool grow_parallelism(sl__at_state *s, const sl__at_snapshot *snap, int i, int k,
                             judged j, bool saturated, double stall, sl__at_decision *out)
{
    const sl__at_knob *kb = &snap->nodes[i].knobs[k];
    const sl__at_knob_state *ks = &s->nodes[i].knobs[k];
    int64_t v = kb->value;
    if (snap->now_ns < ks->ceiling_until_ns && v >= ks->ceiling)
        return false; /* more workers bought this stage nothing a moment ago */
    double need = demand(s);
    int64_t to = (int64_t)ceil((double)v * (need < 2.0 ? need : 2.0) - 0.1);
    if (to < v + 1)
        to = v + 1;
    double fair = saturated ? fair_units(s, snap, i) : -1;
    int64_t fair_to = fair > 0 ? (int64_t)ceil(fair - SHARE_TOL) : 0;
    if (fair_to > kb->max)
        fair_to = kb->max;
    if (to < fair_to)
        to = fair_to;
    if (to > kb->max)
        to = kb->max;
    if (snap->now_ns < ks->ceiling_until_ns) { /* not past what bought nothing */
        fair_to = fair_to < ks->ceiling ? fair_to : ks->ceiling;
        to = to < ks->ceiling ? to : ks->ceiling;
    }
    int64_t room = snap->cpu_budget - sl__at_cpu_units(snap);
    int64_t got = fair_to - v < room ? fair_to - v : room;
    if (got < 0)
        got = 0;
    if (v + got < fair_to)
        got += take_from_donors(s, snap, i, fair_to - v - got, true, out);
    int64_t whole = snap->cpu_budget - tuned_workers(snap) - got;
    if (room - got < whole)
        whole = room - got;
    if (v + got < to && whole > 0)
        got += to - v - got < whole ? to - v - got : whole;
    int64_t pool = pool_threads(snap);
    bool cover = got <= 0 && saturated && v < kb->max && cover_fits(s, snap);
    if (cover)
        got = 1;
    /* at its share, and the others hold more workers than the pool has:
     * those over their shares only queue ahead of this stage's tasks */
    int64_t over = tuned_workers(snap) - pool;
    if (got <= 0 && saturated && fair > 0 && over > 0)
        return take_from_donors(s, snap, i, over, false, out) > 0;
    if (got <= 0)
        return false;
    sl__at_change *c = add_change(out, SL__AT_GROW, i, k, v, v + got);
    if (!c)
        return false;
    if (cover) {
        s->nodes[i].covered = true;
        snprintf(c->reason, sizeof c->reason,
                 "pool not kept busy: its workers %.0f%% busy, %.1f of its %lld busy and %.2f "
                 "waiting for one, consumer stall %.1f%%; a task more in flight",
                 100 * pool_busy(s, snap) / (double)pool, j.busy, (long long)v, j.queued,
                 100 * stall);
        return true;
    }
    int len = snprintf(c->reason, sizeof c->reason,
                       "%s: %.1f of %lld workers busy, output empty in %.0f%% of takes, input "
                       "wait %.0f%%, consumer stall %.1f%%",
                       saturated ? "CPU-bound" : "bursty, a wider window", j.busy, (long long)v,
                       100 * j.empty, 100 * j.wait, 100 * stall);
    if (fair > 0 && len > 0 && (size_t)len < sizeof c->reason)
        snprintf(c->reason + len, sizeof c->reason - (size_t)len,
                 "; its share of the CPU by cost %.1f workers", fair);
    return true;
}

/* Grows a node's workers or reads (see grow_parallelism). */
static bool grow_units(sl__at_state *s, const sl__at_snapshot *snap, int i, int k, judged j,
                       bool saturated, double stall, sl__at_decision *out)
{
    const sl__at_knob *kb = &snap->nodes[i].knobs[k];
    int64_t v = kb->value;
    if (v >= kb->max || ram_full(snap) || !under_cap(&s->nodes[i].knobs[k], snap->now_ns))
        return false;
    if (kb->kind == SL__KNOB_PARALLELISM)
        return grow_parallelism(s, snap, i, k, j, saturated, stall, out);
    int64_t to = ram_cap(s, snap, i, 2 * v);
    if (to > kb->max)
        to = kb->max;
    if (to <= v)
        return false;
    sl__at_change *c = add_change(out, SL__AT_GROW, i, k, v, to);
    snprintf(c->reason, sizeof c->reason,
             "%s: %.1f of %lld reads busy, output empty in %.0f%% of takes, input wait %.0f%%, "
             "consumer stall %.1f%%",
             saturated ? "reads dominate" : "bursty, a wider window", j.busy, (long long)v,
             100 * j.empty, 100 * j.wait, 100 * stall);
    return true;
}

enum { DEPTH_GREW, DEPTH_HELD, DEPTH_NOT };

/* Grows buffer knob k of node i, for `cause`: doubles while the stall is
 * over 4x the target, else a quarter more, once the last growth was seen
 * to pay (check_depth); never past what a growth that bought nothing
 * reached (for its cooldown), nor past what the RAM budget fits
 * (DEPTH_HELD). */
static int grow_depth(sl__at_state *s, const sl__at_snapshot *snap, int i, int k, judged j,
                      int why, const char *cause, double stall, sl__at_decision *out)
{
    const sl__at_knob *kb = &snap->nodes[i].knobs[k];
    const sl__at_knob_state *ks = &s->nodes[i].knobs[k];
    int64_t v = kb->value;
    double target = (double)snap->stall_target_ppm / 1e6;
    /* far from the target: double; close: a quarter more. Bought for a
     * stall over the target (SMOOTH), double too: a step whose effect
     * stands out of the stall's noise when it is checked */
    int64_t want = stall > 4 * target || (why == SL__AT_SMOOTH && stall > target)
                       ? 2 * v
                       : v + (v / 4 > 1 ? v / 4 : 1);
    if (snap->now_ns < ks->ceiling_until_ns && want > ks->ceiling) {
        if (ks->ceiling_ram && v >= ks->ceiling)
            return DEPTH_HELD; /* cut by the budget a moment ago */
        want = ks->ceiling;
    }
    if (want > kb->max)
        want = kb->max;
    if (want <= v || ks->check_from || !under_cap(ks, snap->now_ns))
        return DEPTH_NOT;
    int64_t to = ram_full(snap) ? v : ram_cap(s, snap, i, want);
    /* for a stall under the target, only while RAM stays plentiful with
     * the growth */
    if (to <= v || (stall <= target && !ram_plenty(s, snap, (double)(to - v) *
                                                                s->nodes[i].el_bytes)))
        return DEPTH_HELD;
    sl__at_change *c = add_change(out, why, i, k, v, to);
    if (!c)
        return DEPTH_NOT;
    snprintf(c->reason, sizeof c->reason,
             "%s: output empty in %.0f%% of takes, input wait %.0f%%, consumer stall %.1f%%",
             cause, 100 * j.empty, 100 * j.wait, 100 * stall);
    return DEPTH_GREW;
}

/* Says once, until the knob moves or the load changes, that a growth of
 * buffer knob k of node i was held back by the RAM budget, with the
 * figures the decision used. */
static void note_held(sl__at_state *s, const sl__at_snapshot *snap, int i, int k, double stall,
                      sl__at_decision *out)
{
    sl__at_knob_state *ks = &s->nodes[i].knobs[k];
    if (ks->held_noted || out->note[0])
        return;
    ks->held_noted = true;
    const sl__at_node *n = &snap->nodes[i];
    int64_t most = s->window_peak_bytes > snap->buffered_bytes ? s->window_peak_bytes
                                                               : snap->buffered_bytes;
    int len = snprintf(out->note, sizeof out->note,
                       "%s.%s held at %lld: consumer stall %.1f%% would buy depth, but ",
                       n->name ? n->name : "?", n->knobs[k].name ? n->knobs[k].name : "depth",
                       (long long)n->knobs[k].value, 100 * stall);
    if (len < 0 || (size_t)len >= sizeof out->note)
        return;
    if (snap->now_ns < ks->ceiling_until_ns && ks->ceiling_ram)
        snprintf(out->note + len, sizeof out->note - (size_t)len,
                 "the RAM budget cut it to %lld a moment ago", (long long)ks->ceiling);
    else
        snprintf(out->note + len, sizeof out->note - (size_t)len,
                 "up to %.1f MiB of the %.1f MiB RAM budget was buffered (elements of %.0f KiB)",
                 (double)most / 1048576.0, (double)snap->ram_budget / 1048576.0,
                 s->nodes[i].el_bytes / 1024);
}

/* Node i's output was empty when taken and its workers (reads) are all
 * busy: it cannot keep up, whatever the nodes below it do. */
static bool starving_saturated(const sl__at_state *s, const sl__at_snapshot *snap, int i)
{
    const sl__at_node *node = &snap->nodes[i];
    judged j = judge(s, snap, i);
    int uk = units_knob(node);
    const sl__at_node_state *ns = &s->nodes[i];
    if (uk < 0 || j.empty < EMPTY_MIN || (ns->empty_takes == 0 && !stuck_take(s, ns)))
        return false;
    /* a task waiting for a worker is one the node could not do without */
    if (node->kind == SL__NODE_READ)
        return j.busy >= IO_BUSY_MIN * j.units;
    return j.busy + j.queued >= BUSY_HI * j.units;
}

/* How far node i's workers fall short of its share of the CPU (negative:
 * beyond it; 0 when there is no share to tell). */
static double short_of_share(const sl__at_state *s, const sl__at_snapshot *snap, int i)
{
    int k = find_knob(&snap->nodes[i], SL__KNOB_PARALLELISM, true);
    double fair = k >= 0 ? fair_units(s, snap, i) : -1;
    return fair > 0 ? fair - (double)snap->nodes[i].knobs[k].value : 0;
}

/* Walks from the consumer upstream to the first node that starves its
 * consumer for reasons of its own, and grows it. A saturated node whose
 * producer waits on a saturated input is passed for the input when the
 * input is as far short of its share (or there are no shares): the
 * deeper cause. */
static void grow(sl__at_state *s, const sl__at_snapshot *snap, double stall, sl__at_decision *out)
{
    int order[SL__AT_MAX_NODES];
    int n = walk_order(snap, order);
    for (int o = 0; o < n; o++) {
        int i = order[o];
        const sl__at_node *node = &snap->nodes[i];
        const sl__at_node_state *ns = &s->nodes[i];
        judged j = judge(s, snap, i);
        if (j.empty < EMPTY_MIN || (ns->empty_takes == 0 && !stuck_take(s, ns)))
            return; /* it keeps up: the stall is synchronous work below it */
        int uk = units_knob(node);
        int tuned_units = uk >= 0 && node->knobs[uk].autotune ? uk : -1;
        bool input_saturated = o + 1 < n && starving_saturated(s, snap, order[o + 1]);
        bool deeper = input_saturated && j.wait >= WAIT_LO &&
                      !(short_of_share(s, snap, i) > short_of_share(s, snap, order[o + 1]));
        if (starving_saturated(s, snap, i) && !deeper) {
            if (tuned_units >= 0)
                grow_units(s, snap, i, tuned_units, j, true, stall, out);
            return; /* grown, or blocked by a budget or a fixed knob */
        }
        /* its input is the cause: the node waited on it, the input is
         * saturated, or a buffer passed nothing on in the window (its wait
         * is counted when its input delivers, so one that lasts the whole
         * window shows none yet) */
        if (j.wait >= WAIT_HI || (uk < 0 && ns->elements == 0) || input_saturated)
            continue;
        int dk = find_knob(node, SL__KNOB_DEPTH, true);
        if (dk >= 0) {
            if (grow_depth(s, snap, i, dk, j, SL__AT_GROW, "bursty, its input kept up", stall,
                           out) ==
                DEPTH_HELD)
                note_held(s, snap, i, dk, stall, out);
        } else if (tuned_units >= 0)
            grow_units(s, snap, i, tuned_units, j, false, stall, out);
        return;
    }
}

/* A stall that growing no stage removed (they are at their budgets, or
 * none starves its consumer for reasons of its own), or one under the
 * target but not near zero, seen over DEPTH_CHECK at least since the last
 * change (SMALL_RUN of them under the target): the buffer nearest the
 * consumer, when it ran dry, grows; a deeper one lets the stages run
 * ahead through what makes them late now and then. Under the target only
 * while RAM is plentiful (ram_ok, and with the growth: grow_depth), else
 * it is held, said once. Whether it paid is checked (check_depth). True
 * if it grew. */
static bool buy_depth(sl__at_state *s, const sl__at_snapshot *snap, double stall, bool ram_ok,
                      sl__at_decision *out)
{
    int order[SL__AT_MAX_NODES];
    int n = walk_order(snap, order);
    for (int o = 0; o < n; o++) {
        int i = order[o];
        int k = find_knob(&snap->nodes[i], SL__KNOB_DEPTH, false);
        if (k < 0)
            continue;
        const sl__at_node_state *ns = &s->nodes[i];
        if (!snap->nodes[i].knobs[k].autotune || (ns->empty_takes == 0 && !stuck_take(s, ns)))
            return false; /* fixed, or it never ran dry: not what the consumer waits for */
        double target = (double)snap->stall_target_ppm / 1e6;
        /* on the stall since the last change, not on the window's alone:
         * that is the baseline the growth is checked against; a stall
         * under the target must last longer, so that noise around a small
         * stall does not move the buffer up and down */
        int64_t run = s->run_wait_ns + s->run_step_ns;
        if (run < (stall > target ? 1 : SMALL_RUN) * DEPTH_CHECK ||
            frac(s->run_wait_ns, run) <= SMALL_STALL * target)
            return false;
        bool over = stall > target;
        int r = !ram_ok ? DEPTH_HELD
                        : grow_depth(s, snap, i, k, judge(s, snap, i), SL__AT_SMOOTH,
                                     over ? "a stall no stage can take back, a deeper buffer"
                                          : "a stall not near zero, RAM to spare",
                                     stall, out);
        if (r == DEPTH_HELD)
            note_held(s, snap, i, k, stall, out);
        return r == DEPTH_GREW;
    }
    return false;
}

/* A stall right after a shrink: undo it (of a knob of `kind`, or any for
 * -1), and leave that knob alone for a cooldown that doubles each time.
 * True if something was undone. */
static bool undo_shrinks(sl__at_state *s, const sl__at_snapshot *snap, double stall, int kind,
                         sl__at_decision *out)
{
    bool any = false;
    for (int i = 0; i < s->nnodes && i < snap->nnodes; i++)
        for (int k = 0; k < snap->nodes[i].nknobs; k++) {
            sl__at_knob_state *ks = &s->nodes[i].knobs[k];
            const sl__at_knob *kb = &snap->nodes[i].knobs[k];
            if ((kind >= 0 && kb->kind != kind) || ks->last_shrink_ns == INT64_MIN ||
                ks->last_shrink_ns < snap->now_ns - PROBE ||
                ks->last_shrink_ns != ks->last_change_ns)
                continue;
            ks->no_shrink_until_ns = snap->now_ns + ks->shrink_cooldown_ns;
            double cool = (double)ks->shrink_cooldown_ns / SEC;
            double_cooldown(&ks->shrink_cooldown_ns);
            ks->last_shrink_ns = INT64_MIN;
            int64_t to = ks->shrunk_from < kb->max ? ks->shrunk_from : kb->max;
            if (kb->kind == SL__KNOB_PARALLELISM) {
                int64_t room = snap->cpu_budget - sl__at_cpu_units(snap);
                to = to < kb->value + room ? to : kb->value + room;
            }
            if (!kb->autotune || to <= kb->value)
                continue;
            sl__at_change *c = add_change(out, SL__AT_UNDO, i, k, kb->value, to);
            if (!c)
                return any;
            snprintf(c->reason, sizeof c->reason,
                     "undo: consumer stall %.1f%% right after shrinking; no shrinking for %.0f s",
                     100 * stall, cool);
            any = true;
        }
    return any;
}

/* ---- shrinking ---- */

static void quiet_update(sl__at_state *s, const sl__at_snapshot *snap)
{
    for (int i = 0; i < s->nnodes && i < snap->nnodes; i++) {
        sl__at_node_state *ns = &s->nodes[i];
        double busy = busy_units(&snap->nodes[i], ns, s->window_ns);
        double low = ns->takes > 0 ? frac(ns->occupancy_sum, ns->takes) : -1;
        if (ns->quiet_since_ns == INT64_MIN) {
            /* the window just judged counts: it was quiet */
            ns->quiet_since_ns = snap->now_ns - s->window_ns;
            ns->quiet_low = low;
            ns->quiet_busy = busy;
            ns->quiet_empty = ns->empty_takes;
            continue;
        }
        if (low >= 0 && (ns->quiet_low < 0 || low < ns->quiet_low))
            ns->quiet_low = low;
        if (busy > ns->quiet_busy)
            ns->quiet_busy = busy;
        ns->quiet_empty += ns->empty_takes;
    }
}

/* A score for stepping knob k of node i down (0: it should not): buffers
 * (memory) before workers. */
static double shrink_score(const sl__at_state *s, const sl__at_snapshot *snap, int i, int k,
                           int64_t quiet_needed)
{
    const sl__at_node_state *ns = &s->nodes[i];
    const sl__at_knob_state *ks = &ns->knobs[k];
    const sl__at_knob *kb = &snap->nodes[i].knobs[k];
    int64_t now = snap->now_ns;
    if (!kb->autotune || kb->value <= kb->min || ks->check_from ||
        ns->quiet_since_ns == INT64_MIN ||
        now - ns->quiet_since_ns < quiet_needed || now < ks->no_shrink_until_ns ||
        (ks->last_change_ns != INT64_MIN && now - ks->last_change_ns < SHRINK_GAP) ||
        !under_cap(ks, now))
        return 0;
    double v = (double)kb->value;
    switch (kb->kind) {
    case SL__KNOB_DEPTH:
        /* a buffer whose level never fell below two elements has one spare */
        if (ns->quiet_empty == 0 && ns->quiet_low >= 2)
            return 2 + ns->el_bytes;
        return 0;
    case SL__KNOB_IO_DEPTH:
        if (ns->quiet_empty == 0 && ns->quiet_busy <= SHRINK_LOAD * (v - 1))
            return 1 + ns->el_bytes;
        return 0;
    default:
        return ns->quiet_busy <= SHRINK_LOAD * (v - 1) ? 1 : 0;
    }
}

/* One step down: by one, or by half the measured surplus when that is
 * more, so a large over-provision comes back in a few steps but never
 * below what was seen in use. */
static int64_t shrink_to(const sl__at_node_state *ns, const sl__at_knob *kb)
{
    double need = kb->kind == SL__KNOB_DEPTH ? (double)kb->value - (floor(ns->quiet_low) - 1)
                                             : ceil(ns->quiet_busy / SHRINK_LOAD);
    int64_t surplus = kb->value - (int64_t)(need > 1 ? need : 1);
    int64_t step = surplus / 2 > 1 ? surplus / 2 : 1;
    return kb->value - step < kb->min ? kb->min : kb->value - step;
}

static void shrink(sl__at_state *s, const sl__at_snapshot *snap, double stall,
                   sl__at_decision *out)
{
    int64_t quiet_needed = snap->now_ns < s->fast_until_ns ? QUIET_FAST : QUIET_SLOW;
    int bi = -1, bk = -1;
    double best = 0;
    for (int i = 0; i < s->nnodes && i < snap->nnodes; i++) {
        double node_best = 0;
        for (int k = 0; k < snap->nodes[i].nknobs; k++) {
            double sc = shrink_score(s, snap, i, k, quiet_needed);
            if (sc > node_best)
                node_best = sc;
            if (sc > best)
                best = sc, bi = i, bk = k;
        }
        /* judged over a full quiet period and found right: judge the next
         * period afresh, so that an old empty take does not count forever */
        sl__at_node_state *ns = &s->nodes[i];
        if (node_best == 0 && ns->quiet_since_ns != INT64_MIN &&
            snap->now_ns - ns->quiet_since_ns >= quiet_needed)
            quiet_reset(ns);
    }
    if (bi < 0)
        return;
    const sl__at_node_state *ns = &s->nodes[bi];
    const sl__at_knob *kb = &snap->nodes[bi].knobs[bk];
    sl__at_change *c = add_change(out, SL__AT_SHRINK, bi, bk, kb->value, shrink_to(ns, kb));
    double quiet = (double)(snap->now_ns - ns->quiet_since_ns) / SEC;
    if (kb->kind == SL__KNOB_DEPTH)
        snprintf(c->reason, sizeof c->reason,
                 "over-provisioned: no consumer stall for %.0f s (%.1f%% now), buffer never "
                 "below %.1f elements",
                 quiet, 100 * stall, ns->quiet_low);
    else
        snprintf(c->reason, sizeof c->reason,
                 "idle: at most %.1f of %lld %s busy, no consumer stall for %.0f s (%.1f%% now)",
                 ns->quiet_busy, (long long)kb->value,
                 kb->kind == SL__KNOB_PARALLELISM ? "workers" : "reads", quiet, 100 * stall);
}

/* ---- change detection ---- */

static bool moved(double now, double ref, double floor_abs)
{
    double d = fabs(now - ref);
    return d > floor_abs && d > CHANGE * (now > ref ? now : ref);
}

static void take_reference(sl__at_state *s, const sl__at_snapshot *snap)
{
    s->ref_step_ns = s->cur_step_ns;
    for (int i = 0; i < s->nnodes && i < snap->nnodes; i++) {
        s->nodes[i].ref_cost_ns = s->nodes[i].cur_cost_ns;
        s->nodes[i].ref_el_bytes = s->nodes[i].el_bytes;
    }
    s->have_ref = s->cur_step_ns >= 0;
}

static void track_costs(sl__at_state *s, const sl__at_snapshot *snap)
{
    double step = frac(s->step_ns, s->calls);
    s->cur_step_ns = s->cur_step_ns < 0 ? step : 0.5 * s->cur_step_ns + 0.5 * step;
    for (int i = 0; i < s->nnodes && i < snap->nnodes; i++) {
        sl__at_node_state *ns = &s->nodes[i];
        double busy = busy_units(&snap->nodes[i], ns, s->window_ns);
        ns->busy_avg = ns->busy_avg < 0 ? busy : 0.5 * ns->busy_avg + 0.5 * busy;
        ns->last_cost_ns = ns->last_stretch = 0;
        if (ns->elements < MIN_CALLS || ns->busy_ns <= 0)
            continue;
        double cost = frac(ns->busy_ns, ns->elements);
        ns->cur_cost_ns = ns->cur_cost_ns <= 0 ? cost : 0.5 * ns->cur_cost_ns + 0.5 * cost;
        ns->last_cost_ns = cost;
        ns->last_stretch = frac(ns->busy_ns, ns->cpu_ns);
    }
}

/* The consumer's step or a node's cost per element moved since the
 * controller became stable: measure again, and let shrinking happen soon. */
static bool changed(sl__at_state *s, const sl__at_snapshot *snap)
{
    if (!s->have_ref)
        return false;
    bool ch = moved(s->cur_step_ns, s->ref_step_ns, 20000);
    for (int i = 0; !ch && i < s->nnodes && i < snap->nnodes; i++) {
        const sl__at_node_state *ns = &s->nodes[i];
        if (ns->ref_cost_ns > 0 && ns->cur_cost_ns > 0)
            ch = moved(ns->cur_cost_ns, ns->ref_cost_ns, 2000);
        /* elements that grew or shrank: what the buffers hold per slot
         * moved, and with it what each knob's setting costs */
        if (!ch && ns->ref_el_bytes > 0 && ns->el_bytes > 0)
            ch = moved(ns->el_bytes, ns->ref_el_bytes, 256);
    }
    return ch;
}

static void on_change_detected(sl__at_state *s, int64_t now)
{
    s->mode = SL__AT_ADAPTING;
    s->have_ref = false;
    s->fast_until_ns = now + FAST_PERIOD;
    s->last_change_ns = now;
    for (int i = 0; i < s->nnodes; i++) {
        quiet_reset(&s->nodes[i]);
        for (int k = 0; k < SL__MAX_KNOBS; k++) {
            sl__at_knob_state *ks = &s->nodes[i].knobs[k];
            ks->shrink_cooldown_ns = ks->ceiling_cooldown_ns = COOLDOWN_BASE;
            ks->no_shrink_until_ns = ks->ceiling_until_ns = INT64_MIN;
            ks->held_noted = false;
        }
    }
}

/* ---- the decision ---- */

void sl__at_init(sl__at_state *s, int64_t now_ns)
{
    memset(s, 0, sizeof *s);
    s->mode = SL__AT_ADAPTING;
    s->last_now_ns = now_ns;
    s->last_change_ns = now_ns;
    s->settle_until_ns = INT64_MIN;
    s->fast_until_ns = now_ns + FAST_PERIOD;
    s->cur_step_ns = -1;
    s->cold = true;
}

/* ---- checking that a growth paid ---- */

#define CHECK_MIN (300 * MS)  /* measured at least this long after a growth ... */
#define CHECK_ELEMENTS 64     /* ... and over this many elements */
#define CHECK_GAIN 0.25       /* capacity up by this part of the growth at least */
#define CHECK_GROWTH 1.3      /* growths by less are not checked: noise in the costs of
                               * two windows would weigh as much as what they bought */

/* Takes back growth of a knob that bought nothing (to `from`), and keeps
 * it below that for a cooldown that doubles each time. */
static sl__at_change *give_back(sl__at_knob_state *ks, const sl__at_knob *kb, int i, int k,
                                int64_t from, int64_t now, sl__at_decision *out)
{
    sl__at_change *c = add_change(out, SL__AT_UNDO, i, k, kb->value, from);
    if (!c)
        return NULL;
    ks->ceiling = from;
    ks->ceiling_until_ns = now + ks->ceiling_cooldown_ns;
    ks->ceiling_ram = false;
    return c;
}


/* A buffer grown to smooth the consumer's stall, after as much consumer
 * time as the stall was seen before (DEPTH_CHECK at least, SMALL_RUN of
 * them at most): kept if the stall is near zero now; or if the buffer was
 * full (its producer waiting for room) DEPTH_FULL of that time at least:
 * the stages upstream have capacity to spare and the new depth banks it
 * for the stretches that outrun them (a consumer in bursts, slow
 * elements); or if the stall fell by DEPTH_GAIN of the growth from what it
 * was since the change before (not on the window that bought it, which
 * was picked for its stall). A pipeline short of capacity never fills the
 * buffer, and its stall stays: there the growth buys nothing and is given
 * back. */
static void check_depth(sl__at_state *s, const sl__at_snapshot *snap, int i, int k,
                        sl__at_decision *out)
{
    sl__at_knob_state *ks = &s->nodes[i].knobs[k];
    const sl__at_knob *kb = &snap->nodes[i].knobs[k];
    ks->check_wait_ns += s->wait_ns;
    ks->check_step_ns += s->step_ns;
    ks->check_full_ns += s->nodes[i].full_ns;
    int64_t time = ks->check_wait_ns + ks->check_step_ns;
    if (time < ks->check_for_ns)
        return;
    int64_t from = ks->check_from;
    double after = frac(ks->check_wait_ns, time), full = frac(ks->check_full_ns, time);
    double small = SMALL_STALL * (double)snap->stall_target_ppm / 1e6;
    double grew = (double)(kb->value - from) / (double)from;
    bool gain = after <= (1 - DEPTH_GAIN * (grew < 1 ? grew : 1)) * ks->check_stall;
    if (kb->value <= from || !kb->autotune) {
        ks->check_from = 0;
        return;
    }
    if (after <= small || full >= DEPTH_FULL || gain) {
        /* it paid: no shrink probe for the longest cooldown, or until the
         * consumer or the elements change (or the RAM budget cuts it); a
         * probe would find the buffer full between the moments it is
         * needed, and buy it back */
        ks->check_from = 0;
        ks->no_shrink_until_ns = snap->now_ns + COOLDOWN_MAX;
        return;
    }
    sl__at_change *c = give_back(ks, kb, i, k, from, snap->now_ns, out);
    if (!c)
        return; /* no room in this decision: judged again at the next */
    ks->check_from = 0;
    snprintf(c->reason, sizeof c->reason,
             "no gain: consumer stall %.1f%% at depth %lld, %.1f%% at %lld, full %.0f%% of "
             "the time; not past %lld for %.0f s",
             100 * ks->check_stall, (long long)from, 100 * after, (long long)kb->value,
             100 * full, (long long)from, (double)ks->ceiling_cooldown_ns / SEC);
    double_cooldown(&ks->ceiling_cooldown_ns);
}

/* A stage's capacity is its workers over its cost per element. More
 * workers that left it no faster because they wait for each other (each
 * element costs more wall time in proportion, its CPU time the same: a
 * lock or Python's GIL serialises the stage) are given back, and the knob
 * stays below them for a cooldown that doubles each time. Elements that
 * grew costlier meanwhile cost more CPU time too, and do not count. */
static void check_growths(sl__at_state *s, const sl__at_snapshot *snap, sl__at_decision *out)
{
    int64_t now = snap->now_ns;
    for (int i = 0; i < s->nnodes && i < snap->nnodes; i++)
        for (int k = 0; k < snap->nodes[i].nknobs; k++) {
            sl__at_node_state *ns = &s->nodes[i];
            sl__at_knob_state *ks = &ns->knobs[k];
            const sl__at_knob *kb = &snap->nodes[i].knobs[k];
            if (!ks->check_from || now < ks->check_since_ns)
                continue;
            if (kb->kind == SL__KNOB_DEPTH) {
                check_depth(s, snap, i, k, out);
                continue;
            }
            ks->check_busy_ns += ns->busy_ns;
            ks->check_cpu_ns += ns->cpu_ns;
            ks->check_elements += ns->elements;
            if (ks->check_elements < CHECK_ELEMENTS || now - ks->check_since_ns < CHECK_MIN)
                continue;
            int64_t from = ks->check_from;
            ks->check_from = 0;
            double cost = frac(ks->check_busy_ns, ks->check_elements);
            double stretch = frac(ks->check_busy_ns, ks->check_cpu_ns);
            if (kb->value <= from || ks->check_cost_ns <= 0 || cost <= 0 ||
                ks->check_stretch <= 0 || stretch <= 0)
                continue;
            double grew = (double)kb->value / (double)from;
            double gain = grew * ks->check_cost_ns / cost; /* capacity now / before */
            bool waited = stretch >= ks->check_stretch * (1 + 0.5 * (grew - 1));
            if (gain >= 1 + CHECK_GAIN * (grew - 1) || !waited || !kb->autotune)
                continue;
            sl__at_change *c = give_back(ks, kb, i, k, from, now, out);
            if (!c)
                return;
            snprintf(c->reason, sizeof c->reason,
                     "no gain: an element cost %.2f ms with %lld workers, %.2f ms with %lld "
                     "(something serialises it: a lock, the GIL?); not past %lld for %.0f s",
                     ks->check_cost_ns / 1e6, (long long)from, cost / 1e6,
                     (long long)kb->value, (long long)from,
                     (double)ks->ceiling_cooldown_ns / SEC);
            double_cooldown(&ks->ceiling_cooldown_ns);
        }
}

void sl__at_warm(sl__at_state *s, const sl__learned *l)
{
    s->warm = l;
    s->cold = false;
}

void sl__at_learned(const sl__at_state *s, sl__learned *l)
{
    l->nnodes = 0;
    for (int i = 0; i < s->nnodes && l->nnodes < SL__LEARNED_MAX; i++)
        if (s->nodes[i].used)
            l->nodes[l->nnodes++] = (sl__learned_node){s->nodes[i].key, s->nodes[i].busy_avg,
                                                       s->nodes[i].cur_cost_ns,
                                                       s->nodes[i].el_bytes};
}

static void record(sl__at_state *s, const sl__at_snapshot *snap, const sl__at_decision *out,
                   int64_t now)
{
    s->cold = false;
    for (int c = 0; c < out->nchanges; c++) {
        const sl__at_change *ch = &out->changes[c];
        sl__at_node_state *ns = &s->nodes[ch->node];
        sl__at_knob_state *ks = &ns->knobs[ch->knob];
        note_change(ks, now);
        /* a growth of workers or depth is checked once it has been
         * measured; one that follows it first joins it (measured from the
         * first's base) */
        int kind = snap->nodes[ch->node].knobs[ch->knob].kind;
        bool smooth = ch->why == SL__AT_SMOOTH;
        bool grow = smooth || (ch->why == SL__AT_GROW && kind == SL__KNOB_PARALLELISM);
        if (smooth && !ks->check_from) {
            ks->check_from = ch->from;
            ks->check_stall = frac(s->run_wait_ns, s->run_wait_ns + s->run_step_ns);
            /* as long as the stall was seen before it was bought */
            ks->check_for_ns = s->run_wait_ns + s->run_step_ns;
            if (ks->check_for_ns > SMALL_RUN * DEPTH_CHECK)
                ks->check_for_ns = SMALL_RUN * DEPTH_CHECK;
        } else if (grow && kind == SL__KNOB_PARALLELISM && !ks->check_from &&
                   ns->last_cost_ns > 0 && ns->last_stretch > 0) {
            ks->check_from = ch->from;
            ks->check_cost_ns = ns->last_cost_ns;
            ks->check_stretch = ns->last_stretch;
        } else if (!grow) {
            ks->check_from = 0;
        }
        if (kind == SL__KNOB_PARALLELISM && ks->check_from &&
            (double)ch->to < CHECK_GROWTH * (double)ks->check_from)
            ks->check_from = 0;
        ks->check_busy_ns = ks->check_cpu_ns = ks->check_elements = 0;
        ks->check_wait_ns = ks->check_step_ns = ks->check_full_ns = 0;
        ks->held_noted = false;
        ks->check_since_ns = now + SETTLE;
        if (ch->to < ch->from)
            ns->covered = false;
        /* grown back to where a shrink took it from, before that shrink's
         * cooldown would have run out: the shrink was wrong, as when a
         * stall undoes it at once (undo_shrinks) */
        if (ch->to > ch->from && ks->last_shrink_ns != INT64_MIN &&
            now - ks->last_shrink_ns < ks->shrink_cooldown_ns && ch->to >= ks->shrunk_from) {
            ks->no_shrink_until_ns = now + ks->shrink_cooldown_ns;
            double_cooldown(&ks->shrink_cooldown_ns);
        }
        ks->last_shrink_ns = ch->why == SL__AT_SHRINK ? now : INT64_MIN;
        ks->shrunk_from = ch->from;
        if (ch->why == SL__AT_RAM) {
            /* the buffers' levels swing: bought on a low moment, cut at a
             * high one; not again past the cut for a while */
            ks->ceiling = ch->to;
            ks->ceiling_until_ns = now + ks->ceiling_cooldown_ns;
            ks->ceiling_ram = true;
            double_cooldown(&ks->ceiling_cooldown_ns);
        }
        quiet_reset(ns);
    }
    s->changes += out->nchanges;
    s->run_wait_ns = s->run_step_ns = 0;
    s->mode = SL__AT_ADAPTING;
    s->have_ref = false;
    s->last_change_ns = now;
    s->settle_until_ns = now + SETTLE;
}

/* Judges the window; false if it needs more time first. */
static bool judge_window(sl__at_state *s, const sl__at_snapshot *snap, sl__at_decision *out)
{
    int64_t now = snap->now_ns;
    double stall = frac(s->wait_ns, s->wait_ns + s->step_ns);
    double target = (double)snap->stall_target_ppm / 1e6;
    double small = SMALL_STALL * target;
    /* a stall just over the target, or under it but one that would buy
     * depth, may be noise in a short window: act only if a longer one
     * confirms it */
    bool acts = stall > target || (stall > small && ram_plenty(s, snap, 0));
    if (acts && stall <= 2 * target && s->window_ns < WINDOW_MARGINAL)
        return false;
    s->run_wait_ns += s->wait_ns;
    s->run_step_ns += s->step_ns;
    if (s->run_wait_ns + s->run_step_ns > RUN_MAX)
        s->run_wait_ns /= 2, s->run_step_ns /= 2;
    update_el_bytes(s, snap);
    track_costs(s, snap);
    check_growths(s, snap, out);
    if (out->nchanges)
        return true;
    if (stall > target) {
        for (int i = 0; i < s->nnodes; i++)
            quiet_reset(&s->nodes[i]);
        if (!undo_shrinks(s, snap, stall, -1, out)) {
            grow(s, snap, stall, out);
            if (!out->nchanges)
                buy_depth(s, snap, stall, true, out);
        }
        return true;
    }
    /* under the target but not near zero: depth, if RAM allows (else the
     * controller says why once); otherwise the window counts as quiet, and
     * a buffer that ran dry in it has an empty take that keeps it from
     * shrinking */
    if (stall > small &&
        ((acts && undo_shrinks(s, snap, stall, SL__KNOB_DEPTH, out)) ||
         buy_depth(s, snap, stall, acts, out)))
        return true;
    quiet_update(s, snap);
    if (s->mode == SL__AT_STABLE && changed(s, snap))
        on_change_detected(s, now);
    else
        shrink(s, snap, stall, out);
    return true;
}

void sl__at_decide(sl__at_state *s, const sl__at_snapshot *snap, sl__at_decision *out)
{
    int64_t now = snap->now_ns;
    int64_t dt = now - s->last_now_ns;
    s->last_now_ns = now;
    out->nchanges = 0;
    out->note[0] = 0;
    sync_nodes(s, snap);
    if (now <= s->settle_until_ns) {
        window_reset(s); /* measured while the change was taking effect */
    } else {
        accumulate(s, snap, dt > 0 ? dt : 0);
    }
    enforce_cpu(s, snap, out);
    enforce_ram(s, snap, out);
    if (out->nchanges == 0 && now > s->settle_until_ns && window_ready(s)) {
        if (judge_window(s, snap, out))
            window_reset(s);
    } else if (s->window_ns >= WINDOW_MAX) {
        window_reset(s); /* the consumer is not pulling: nothing to judge */
    }
    if (out->nchanges) {
        record(s, snap, out, now);
    } else if (s->mode == SL__AT_ADAPTING && now - s->last_change_ns >= STABLE_AFTER) {
        s->mode = SL__AT_STABLE;
        take_reference(s, snap);
    }
    out->next_tick_ns = s->cold ? TICK_COLD : s->mode == SL__AT_ADAPTING ? TICK_FAST : TICK_SLOW;
}
