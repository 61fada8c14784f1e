/*
 * The controller thread of one iterator (autotune.h). Every tick it turns
 * the tree's counters into a snapshot of deltas, asks the decision function
 * (controller.c) what to change, and applies the answer: an atomic store
 * per knob, a claim on the runtime's CPU budget for more parallelism, a log
 * line per change when asked for, counter samples when tracing.
 *
 * CPU budget: the controller holds a claim on the runtime equal to the
 * units its autotuned parallelism counts (sl__at_cpu_units). For a tick
 * it also borrows whatever the runtime has free under its budget, so that
 * the decision knows how far it may grow, and gives back what it did not
 * use; two controllers on one runtime thus never hand out more than the
 * budget between them.
 */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include "../core/clock.h"
#include "../core/log.h"
#include "autotune.h"
#include "controller.h"

/* The running totals as of the previous snapshot. */
typedef struct seen {
    SL__NODE_COUNTERS(SL__AT_FIELD, SL__AT_NONE)
} seen;

typedef struct sl__autotune {
    sl__tree *t;
    pthread_t thread;
    pthread_mutex_t mu;
    pthread_cond_t cv; /* on CLOCK_MONOTONIC */
    bool stop;
    int claimed; /* CPU units held on the runtime */
    int nnodes;
    sl__node_stats *nodes[SL__AT_MAX_NODES];
    sl__knob *knobs[SL__AT_MAX_NODES][SL__MAX_KNOBS];
    seen prev[SL__AT_MAX_NODES];
    int64_t prev_wait, prev_step, prev_calls;
    int64_t prev_trace_ns;
    sl__at_state state;
    sl__at_snapshot snap;
    sl__at_decision decision;
} sl__autotune;

static int64_t load(atomic_llong *c)
{
    return atomic_load_explicit(c, memory_order_relaxed);
}

/* The parts of the entries that registration writes (kind, knobs), read
 * under the tree lock; the list only ever grows, so the order of the nodes
 * is the same from one tick to the next. */
static void read_nodes(sl__autotune *at, sl__at_snapshot *snap)
{
    sl__tree *t = at->t;
    pthread_mutex_lock(&t->mu);
    int n = 0;
    for (sl__node_stats *ns = t->stats_head; ns && n < SL__AT_MAX_NODES; ns = ns->next, n++) {
        sl__at_node *nd = &snap->nodes[n];
        at->nodes[n] = ns;
        nd->key = ns->key;
        nd->name = ns->name;
        nd->kind = ns->kind;
        nd->depth = ns->depth;
        nd->nknobs = ns->nknobs;
        for (int k = 0; k < ns->nknobs; k++) {
            sl__knob *kb = &ns->knobs[k];
            at->knobs[n][k] = kb;
            nd->knobs[k] = (sl__at_knob){kb->kind, sl__knob_get(kb), kb->min, kb->max,
                                         kb->autotune, kb->name};
        }
    }
    pthread_mutex_unlock(&t->mu);
    for (int i = at->nnodes; i < n; i++)
        memset(&at->prev[i], 0, sizeof at->prev[i]); /* a new node: counted from zero */
    at->nnodes = snap->nnodes = n;
}

static int64_t delta(int64_t now, int64_t *prev)
{
    int64_t d = now - *prev;
    *prev = now;
    return d;
}

static void read_counters(sl__autotune *at, sl__at_snapshot *snap)
{
    sl__tree *t = at->t;
    snap->consumer_wait_ns = delta(sl__consumer_wait(t, sl__now_ns()), &at->prev_wait);
    snap->consumer_step_ns = delta(load(&t->consumer_step_ns), &at->prev_step);
    snap->consumer_calls = delta(load(&t->consumer_calls), &at->prev_calls);
    snap->ram_budget = t->ram_budget;
    snap->pool_threads = sl_runtime_threads(t->rt);
    snap->buffered_bytes = load(&t->held);
    snap->stall_target_ppm = t->stall_target_ppm;
    for (int i = 0; i < at->nnodes; i++) {
        sl__node_stats *ns = at->nodes[i];
        sl__at_node *nd = &snap->nodes[i];
        seen *p = &at->prev[i];
#define READ_SUM(name, what) nd->name = delta(load(&ns->name), &p->name);
#define READ_NOW(name, what) nd->name = load(&ns->name);
        SL__NODE_COUNTERS(READ_SUM, READ_NOW)
#undef READ_SUM
#undef READ_NOW
    }
}

/* What the controller's claim must cover (sl__at_cpu_units). */
static int cpu_in_use(const sl__at_snapshot *snap)
{
    int64_t units = sl__at_cpu_units(snap);
    return units > INT_MAX ? INT_MAX : (int)units;
}

/* Moves the claim towards `units`. The floor (every knob at its minimum,
 * registered before the first tick) is claimed whatever the budget says:
 * the runtime's sum then stays over it until others shrink. Above the
 * floor, only what the runtime's budget leaves: knobs that started higher
 * (an earlier iterator's learned values) and do not fit are then cut at
 * this tick, the controller's budget being what it holds. */
static void claim_to(sl__autotune *at, int units, int floor, int budget)
{
    sl_runtime *rt = at->t->rt;
    if (units < at->claimed) {
        sl__runtime_cpu_release(rt, at->claimed - units);
        at->claimed = units;
        return;
    }
    if (at->claimed < floor)
        at->claimed += sl__runtime_cpu_claim(rt, floor - at->claimed, INT_MAX);
    if (at->claimed < units)
        at->claimed += sl__runtime_cpu_claim(rt, units - at->claimed, budget);
}

static void log_change(sl__autotune *at, const sl__at_change *c)
{
    const sl__at_knob *k = &at->snap.nodes[c->node].knobs[c->knob];
    sl__log_always(SL_LOG_INFO, "autotune: %s.%s %lld -> %lld: %s", at->nodes[c->node]->name,
                   k->name ? k->name : "knob", (long long)c->from, (long long)c->to, c->reason);
}

static void apply(sl__autotune *at)
{
    sl__tree *t = at->t;
    for (int i = 0; i < at->decision.nchanges; i++) {
        const sl__at_change *c = &at->decision.changes[i];
        sl__knob *kb = at->knobs[c->node][c->knob];
        atomic_store_explicit(&kb->value, c->to, memory_order_relaxed);
        atomic_fetch_add_explicit(&t->knob_changes, 1, memory_order_relaxed);
        if (t->autotune_log)
            log_change(at, c);
    }
    if (t->autotune_log && at->decision.note[0])
        sl__log_always(SL_LOG_INFO, "autotune: %s", at->decision.note);
}

/* Counter samples for the trace, named as src/obs/trace.c names them when
 * no controller runs: the stall since the last tick, buffered bytes, every
 * knob. */
static void trace_tick(sl__autotune *at, int64_t now)
{
    sl__tree *t = at->t;
    const sl__at_snapshot *snap = &at->snap;
    int64_t dt = now - at->prev_trace_ns;
    if (at->prev_trace_ns && dt > 0)
        sl__trace_counter(t, "stall", now, (double)snap->consumer_wait_ns / (double)dt);
    at->prev_trace_ns = now;
    sl__trace_counter(t, "buffered bytes", now, (double)load(&t->held));
    for (int i = 0; i < snap->nnodes; i++)
        for (int k = 0; k < snap->nodes[i].nknobs; k++) {
            char name[128];
            snprintf(name, sizeof name, "knob %s.%s", at->nodes[i]->name,
                     snap->nodes[i].knobs[k].name);
            sl__trace_counter(t, name, now, (double)snap->nodes[i].knobs[k].value);
        }
}

/* One tick; returns how long to wait for the next. */
static int64_t tick(sl__autotune *at)
{
    sl__tree *t = at->t;
    sl__at_snapshot *snap = &at->snap;
    snap->now_ns = sl__now_ns();
    read_nodes(at, snap);
    read_counters(at, snap);
    /* no more than the pool's threads can run at once */
    int budget = t->cpu_budget > 0 ? t->cpu_budget : 1;
    int threads = sl_runtime_threads(t->rt);
    if (threads > 0 && budget > threads)
        budget = threads;
    int floor = (int)sl__at_cpu_units_floor(snap);
    claim_to(at, cpu_in_use(snap), floor, budget);
    /* borrow what is free, so the decision may grow into it */
    at->claimed += sl__runtime_cpu_claim(t->rt, budget, budget);
    snap->cpu_budget = at->claimed < budget ? at->claimed : budget;
    sl__at_decide(&at->state, snap, &at->decision);
    apply(at);
    for (int i = 0; i < at->decision.nchanges; i++) {
        const sl__at_change *c = &at->decision.changes[i];
        sl__at_knob *k = &snap->nodes[c->node].knobs[c->knob];
        k->value = c->to;
    }
    claim_to(at, cpu_in_use(snap), floor, budget); /* give back what was not used */
    if (t->trace)
        trace_tick(at, snap->now_ns);
    return at->decision.next_tick_ns;
}

static void *controller_main(void *arg)
{
    sl__autotune *at = arg;
    pthread_mutex_lock(&at->mu);
    while (!at->stop) {
        pthread_mutex_unlock(&at->mu);
        int64_t wake = sl__now_ns() + tick(at);
        struct timespec ts = {(time_t)(wake / 1000000000), (long)(wake % 1000000000)};
        pthread_mutex_lock(&at->mu);
        while (!at->stop && pthread_cond_timedwait(&at->cv, &at->mu, &ts) != ETIMEDOUT) {
        }
    }
    pthread_mutex_unlock(&at->mu);
    return NULL;
}

int sl__autotune_start(sl__tree *t)
{
    if (!t->autotune || t->at)
        return 0;
    sl__autotune *at = sl__calloc(1, sizeof *at);
    if (!at)
        return sl__set_error(SL_ENOMEM, "autotune: out of memory");
    at->t = t;
    pthread_mutex_init(&at->mu, NULL);
    sl__cond_init_monotonic(&at->cv);
    int64_t now = sl__now_ns();
    sl__at_init(&at->state, now);
    if (t->learned)
        sl__at_warm(&at->state, t->learned);
    /* the first tick's deltas start at the iterator's creation */
    at->state.last_now_ns = t->start_ns ? t->start_ns : now;
    int rc = sl__thread_start(&at->thread, controller_main, at, "autotune");
    if (rc < 0) {
        pthread_cond_destroy(&at->cv);
        pthread_mutex_destroy(&at->mu);
        sl__free(at, sizeof *at);
        return rc;
    }
    t->at = at;
    return 0;
}

/* The autotuned knobs' values and the controller's estimates. */
static sl__learned *learned_state(sl__autotune *at)
{
    sl__tree *t = at->t;
    sl__learned *l = sl__calloc(1, sizeof *l);
    if (!l)
        return NULL;
    l->threads = sl_runtime_threads(t->rt);
    l->cpu_budget = t->cpu_budget;
    pthread_mutex_lock(&t->mu);
    for (sl__node_stats *ns = t->stats_head; ns; ns = ns->next)
        for (int k = 0; k < ns->nknobs && l->nknobs < SL__LEARNED_MAX; k++)
            if (ns->knobs[k].autotune)
                l->knobs[l->nknobs++] = (sl__learned_knob){ns->key, ns->knobs[k].kind,
                                                           sl__knob_get(&ns->knobs[k])};
    pthread_mutex_unlock(&t->mu);
    sl__at_learned(&at->state, l);
    return l;
}

void sl__autotune_stop(sl__tree *t, sl__learned **learned)
{
    sl__autotune *at = t ? t->at : NULL;
    if (learned)
        *learned = NULL;
    if (!at)
        return;
    pthread_mutex_lock(&at->mu);
    at->stop = true;
    pthread_cond_signal(&at->cv);
    pthread_mutex_unlock(&at->mu);
    pthread_join(at->thread, NULL);
    if (learned && (at->state.changes > 0 || sl__now_ns() - t->start_ns >= 1000000000))
        *learned = learned_state(at);
    claim_to(at, 0, 0, 0);
    pthread_cond_destroy(&at->cv);
    pthread_mutex_destroy(&at->mu);
    sl__free(at, sizeof *at);
    t->at = NULL;
}
