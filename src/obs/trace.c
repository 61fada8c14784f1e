/*
 * The trace ring (graph/trace.h) as Chrome trace-event JSON.
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
#include "../graph/trace.h"
#include "obs.h"

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

int sl__obs_trace_write(sl__tree *t, const char *path)
{
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
