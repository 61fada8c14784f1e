/* Recording into the trace-event ring (trace.h). */
#include <stdio.h>
#include <string.h>
#include "node.h"
#include "trace.h"

static atomic_uint next_tid;
static _Thread_local unsigned my_tid;

/* A small id per thread, process-wide, for the tracks. */
static unsigned tid_self(void)
{
    if (!my_tid)
        my_tid = atomic_fetch_add_explicit(&next_tid, 1, memory_order_relaxed) + 1;
    return my_tid;
}

sl__trace *sl__trace_new(int64_t events)
{
    sl__trace *tr = sl__calloc(1, sizeof *tr);
    if (!tr)
        return NULL;
    tr->cap = (uint64_t)events;
    tr->ring = sl__calloc((size_t)events, sizeof *tr->ring);
    if (!tr->ring) {
        sl__free(tr, sizeof *tr);
        return NULL;
    }
    pthread_mutex_init(&tr->names_mu, NULL);
    return tr;
}

void sl__trace_free(sl__trace *tr)
{
    if (!tr)
        return;
    for (int i = 0; i < tr->nnames; i++)
        sl__strfree(tr->names[i]);
    pthread_mutex_destroy(&tr->names_mu);
    sl__free(tr->ring, (size_t)tr->cap * sizeof *tr->ring);
    sl__free(tr, sizeof *tr);
}

static void append(sl__trace *tr, unsigned type, uintptr_t what, int64_t t0, int64_t v)
{
    uint64_t i = atomic_fetch_add_explicit(&tr->next, 1, memory_order_relaxed);
    rec *r = &tr->ring[i % tr->cap];
    atomic_store_explicit(&r->seq, 2 * i + 1, memory_order_relaxed);
    atomic_store_explicit(&r->meta, type | tid_self() << 8, memory_order_release);
    atomic_store_explicit(&r->what, what, memory_order_release);
    atomic_store_explicit(&r->t0, t0, memory_order_release);
    atomic_store_explicit(&r->v, v, memory_order_release);
    atomic_store_explicit(&r->seq, 2 * i + 2, memory_order_release);
}

void sl__trace_span(sl__tree *t, const sl__node_stats *ns, int64_t t0, int64_t t1)
{
    if (t->trace)
        append(t->trace, REC_SPAN, (uintptr_t)ns, t0, t1);
}

void sl__trace_span_named(sl__tree *t, const char *name, int64_t t0, int64_t t1)
{
    if (t->trace)
        append(t->trace, REC_SPAN_NAMED, (uintptr_t)name, t0, t1);
}

void sl__trace_consumer(sl__tree *t)
{
    if (t->trace)
        atomic_store_explicit(&t->trace->consumer_tid, tid_self(), memory_order_relaxed);
}

/* The index of counter `name`, added on first use; -1 when the table is
 * full or out of memory (the sample is dropped). */
static int intern(sl__trace *tr, const char *name)
{
    pthread_mutex_lock(&tr->names_mu);
    int i = 0;
    while (i < tr->nnames && strcmp(tr->names[i], name))
        i++;
    if (i == tr->nnames) {
        char *copy = i < MAX_COUNTERS ? sl__strdup(name) : NULL;
        if (copy)
            tr->names[tr->nnames++] = copy;
        else
            i = -1;
    }
    pthread_mutex_unlock(&tr->names_mu);
    return i;
}

void sl__trace_counter(sl__tree *t, const char *name, int64_t ts, double value)
{
    sl__trace *tr = t->trace;
    if (!tr)
        return;
    int i = intern(tr, name);
    if (i < 0)
        return;
    int64_t bits;
    memcpy(&bits, &value, sizeof bits);
    append(tr, REC_COUNTER, (uintptr_t)i, ts, bits);
}

void sl__trace_sample(sl__tree *t, int64_t now, int64_t min_interval_ns)
{
    sl__trace *tr = t->trace;
    if (!tr)
        return;
    /* one sampler per interval: whoever moves last_sample_ns wins */
    long long last = atomic_load_explicit(&tr->last_sample_ns, memory_order_relaxed);
    do {
        if (min_interval_ns && now - last < min_interval_ns)
            return;
    } while (!atomic_compare_exchange_weak(&tr->last_sample_ns, &last, now));
    int64_t wait = atomic_load_explicit(&t->consumer_wait_ns, memory_order_relaxed);
    int64_t prev_wait = atomic_exchange(&tr->last_wait_ns, wait);
    int64_t since = last ? last : t->start_ns;
    if (now > since)
        sl__trace_counter(t, "stall", now, (double)(wait - prev_wait) / (double)(now - since));
    sl__trace_counter(t, "buffered bytes", now, (double)atomic_load(&t->held));
    pthread_mutex_lock(&t->mu);
    for (sl__node_stats *ns = t->stats_head; ns; ns = ns->next)
        for (int k = 0; k < ns->nknobs; k++) {
            char name[128];
            snprintf(name, sizeof name, "knob %s.%s", ns->name, ns->knobs[k].name);
            sl__trace_counter(t, name, now, (double)sl__knob_get(&ns->knobs[k]));
        }
    pthread_mutex_unlock(&t->mu);
}
