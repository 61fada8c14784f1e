/*
 * Trace events and their Chrome trace-event JSON (trace.h).
 *
 * Layout of the JSON, for Perfetto and chrome://tracing: process 1
 * ("sluice") holds the consumer's thread, with its stalls as spans, and
 * every counter track (knobs, "stall", "buffered bytes"); each node that
 * records spans gets a process of its own, in pipeline order, holding one
 * track per thread that did its work. Spans on one thread never overlap
 * (a thread runs one task at a time), so every track nests cleanly.
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <string.h>
#include "../core/clock.h"
#include "obs.h"
#include "trace.h"

#define MAX_COUNTERS 256

enum { REC_SPAN = 1, REC_SPAN_NAMED, REC_COUNTER };

/* All fields atomic so that writing the JSON while workers append is not
 * a data race; seq brackets the write (odd while it is under way, 2 i + 2
 * once record i is complete). A seqlock without fences (which TSan cannot
 * follow): the writer stores the fields with release after the odd seq, so
 * a reader whose acquire load sees a newer field also sees a newer seq on
 * its second look. On x86 all of these are plain moves. */
typedef struct rec {
    atomic_ullong seq;
    atomic_uint meta; /* type | thread id << 8 */
    atomic_uintptr_t what; /* span: sl__node_stats * or static name; counter: name index */
    atomic_llong t0;
    atomic_llong v; /* span: t1; counter: the double's bits */
} rec;

struct sl__trace {
    uint64_t cap;
    rec *ring;
    atomic_ullong next;
    atomic_uint consumer_tid;
    atomic_llong last_sample_ns, last_wait_ns;
    pthread_mutex_t names_mu; /* a leaf lock */
    int nnames;
    char *names[MAX_COUNTERS];
};

/* ---- recording ---- */

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

/* ---- writing ---- */

typedef struct event {
    unsigned type, tid;
    uintptr_t what;
    int64_t t0, v;
} event;

/* The complete records, oldest first; *n of them. NULL on no memory. */
static event *collect(sl__trace *tr, size_t *n, size_t *size)
{
    uint64_t end = atomic_load_explicit(&tr->next, memory_order_acquire);
    uint64_t begin = end > tr->cap ? end - tr->cap : 0;
    *size = (size_t)(end - begin) * sizeof(event);
    event *ev = sl__alloc(*size ? *size : 1);
    if (!ev)
        return NULL;
    size_t k = 0;
    for (uint64_t i = begin; i < end; i++) {
        rec *r = &tr->ring[i % tr->cap];
        uint64_t s = atomic_load_explicit(&r->seq, memory_order_acquire);
        unsigned meta = atomic_load_explicit(&r->meta, memory_order_acquire);
        event e = {meta & 0xff, meta >> 8, atomic_load_explicit(&r->what, memory_order_acquire),
                   atomic_load_explicit(&r->t0, memory_order_acquire),
                   atomic_load_explicit(&r->v, memory_order_acquire)};
        /* skip a slot still being written, or already rewritten */
        if (s != 2 * i + 2 || atomic_load_explicit(&r->seq, memory_order_relaxed) != s)
            continue;
        ev[k++] = e;
    }
    *n = k;
    return ev;
}

static double us(const sl__tree *t, int64_t ns)
{
    return (double)(ns - t->start_ns) / 1e3;
}

/* The process (pid) of a node's spans: 2 + its place in pipeline order. */
static int node_pid(const obs_nodes *nodes, uintptr_t ns)
{
    for (int i = 0; i < nodes->n; i++)
        if ((uintptr_t)nodes->v[i] == ns)
            return 2 + i;
    return 1;
}

static void meta_name(FILE *f, const char *what, int pid, unsigned tid, const char *name)
{
    fprintf(f, ",\n{\"ph\":\"M\",\"name\":\"%s\",\"pid\":%d,\"tid\":%u,\"args\":{\"name\":", what,
            pid, tid);
    sl__obs_json_fputs(f, name);
    fputs("}}", f);
}

typedef struct track {
    int pid;
    unsigned tid;
} track;

/* Names every (pid, tid) track of node spans, once: "thread N". */
static int thread_names(FILE *f, const event *ev, size_t n, const obs_nodes *nodes)
{
    size_t ntracks = 0, cap = 0;
    track *tracks = NULL;
    for (size_t i = 0; i < n; i++) {
        if (ev[i].type != REC_SPAN)
            continue;
        track k = {node_pid(nodes, ev[i].what), ev[i].tid};
        size_t j = 0;
        while (j < ntracks && (tracks[j].pid != k.pid || tracks[j].tid != k.tid))
            j++;
        if (j < ntracks)
            continue;
        if (ntracks == cap) {
            size_t ncap = cap ? 2 * cap : 64;
            track *p = sl__alloc(ncap * sizeof *p);
            if (!p) {
                sl__free(tracks, cap * sizeof *tracks);
                return SL_ENOMEM;
            }
            if (ntracks)
                memcpy(p, tracks, ntracks * sizeof *p);
            sl__free(tracks, cap * sizeof *tracks);
            tracks = p;
            cap = ncap;
        }
        tracks[ntracks++] = k;
        char name[32];
        snprintf(name, sizeof name, "thread %u", k.tid);
        meta_name(f, "thread_name", k.pid, k.tid, name);
    }
    sl__free(tracks, cap * sizeof *tracks);
    return 0;
}

static int write_events(FILE *f, const sl__tree *t, const event *ev, size_t n,
                        const obs_nodes *nodes, unsigned consumer, char *const *names)
{
    fputs("{\"traceEvents\":[\n{\"ph\":\"M\",\"name\":\"process_name\",\"pid\":1,\"tid\":0,"
          "\"args\":{\"name\":\"sluice\"}}",
          f);
    fputs(",\n{\"ph\":\"M\",\"name\":\"process_sort_index\",\"pid\":1,\"tid\":0,"
          "\"args\":{\"sort_index\":0}}",
          f);
    for (int i = 0; i < nodes->n; i++) {
        meta_name(f, "process_name", 2 + i, 0, nodes->v[i]->name);
        fprintf(f, ",\n{\"ph\":\"M\",\"name\":\"process_sort_index\",\"pid\":%d,\"tid\":0,"
                "\"args\":{\"sort_index\":%d}}", 2 + i, 1 + i);
    }
    meta_name(f, "thread_name", 1, consumer, "consumer");
    int rc = thread_names(f, ev, n, nodes);
    for (size_t i = 0; i < n; i++) {
        const event *e = &ev[i];
        if (e->type == REC_COUNTER) {
            double v;
            memcpy(&v, &e->v, sizeof v);
            fputs(",\n{\"ph\":\"C\",\"pid\":1,\"tid\":0,\"name\":", f);
            sl__obs_json_fputs(f, names[e->what]);
            fprintf(f, ",\"ts\":%.3f,\"args\":{\"value\":%.9g}}", us(t, e->t0),
                    isfinite(v) ? v : 0.0);
            continue;
        }
        bool named = e->type == REC_SPAN_NAMED;
        int pid = named ? 1 : node_pid(nodes, e->what);
        fprintf(f, ",\n{\"ph\":\"X\",\"pid\":%d,\"tid\":%u,\"name\":", pid, e->tid);
        const char *name =
            named ? (const char *)e->what : ((const sl__node_stats *)e->what)->name;
        sl__obs_json_fputs(f, name);
        fprintf(f, ",\"ts\":%.3f,\"dur\":%.3f}", us(t, e->t0),
                (double)(e->v > e->t0 ? e->v - e->t0 : 0) / 1e3);
    }
    fputs("\n],\"displayTimeUnit\":\"ms\"}\n", f);
    return rc;
}

SL_API int sl_iterator_trace(const sl_iterator *it, const char *path)
{
    if (!it || !path)
        return sl__set_error(SL_EINVAL, "sl_iterator_trace: NULL %s", it ? "path" : "iterator");
    sl__tree *t = sl__iterator_tree(it);
    sl__trace *tr = t->trace;
    if (!tr)
        return sl__set_error(SL_ESTATE, "sl_iterator_trace: tracing is off "
                             "(set SL_OPT_TRACE_EVENTS)");
    /* a last sample, so that every counter track has a value even when no
     * controller ticked */
    sl__trace_sample(t, sl__now_ns(), 0);
    obs_nodes nodes;
    if (sl__obs_nodes(t, &nodes) < 0)
        return SL_ENOMEM;
    size_t n, size;
    event *ev = collect(tr, &n, &size);
    if (!ev) {
        sl__obs_nodes_free(&nodes);
        return SL_ENOMEM;
    }
    int rc = 0;
    FILE *f = fopen(path, "w");
    if (!f) {
        rc = sl__set_error(SL_EIO, "sl_iterator_trace: %s: %s", path, strerror(errno));
    } else {
        /* the table only grows and its strings stay until the trace goes:
         * a copy of the pointers, taken after the records, covers them */
        char *names[MAX_COUNTERS];
        pthread_mutex_lock(&tr->names_mu);
        memcpy(names, tr->names, sizeof names);
        pthread_mutex_unlock(&tr->names_mu);
        rc = write_events(f, t, ev, n, &nodes, atomic_load(&tr->consumer_tid), names);
        bool bad = ferror(f) != 0;
        if (fclose(f) != 0 || bad)
            rc = sl__set_error(SL_EIO, "sl_iterator_trace: %s: write failed", path);
    }
    sl__free(ev, size ? size : 1);
    sl__obs_nodes_free(&nodes);
    return rc;
}
