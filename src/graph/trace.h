/*
 * The trace-event ring (SL_OPT_TRACE_EVENTS): what nodes, the controller
 * and the iterator record into; obs/trace.c writes it out as JSON.
 *
 * Fixed-size records appended lock-free: an atomic index picks the slot,
 * the oldest events are overwritten when the ring is full, and a per-slot
 * sequence number lets the writer skip a slot being rewritten. Spans name
 * their node by its statistics entry (which lives as long as the tree);
 * counter names are interned once (counters are rare: a few per controller
 * tick). Every call is cheap when tracing is off (one load).
 */
#ifndef SL_GRAPH_TRACE_H
#define SL_GRAPH_TRACE_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include "stats.h"

#define MAX_COUNTERS 256

enum { REC_SPAN = 1, REC_SPAN_NAMED, REC_COUNTER };

/* All fields atomic so that writing the JSON while workers append is not
 * a data race; seq brackets the write (odd while it is under way, 2 i + 2
 * once record i is complete). A seqlock without fences (which TSan cannot
 * follow): the writer stores the fields with release after the odd seq, so
 * a reader whose acquire load sees a newer field also sees a newer seq on
 * its second look. On x86 all of these are plain moves. */
typedef struct sl__trace sl__trace;

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

/* A ring of `events` records, or NULL with SL_ENOMEM set. */
sl__trace *sl__trace_new(int64_t events);
/* NULL ok. */
void sl__trace_free(sl__trace *tr);
/* A span of work on node ns from t0 to t1 (sl__now_ns), on the calling
 * thread's track. */
void sl__trace_span(sl__tree *t, const sl__node_stats *ns, int64_t t0, int64_t t1);
/* A span on the calling thread's track named by a static string rather
 * than a node ("stall"). */
void sl__trace_span_named(sl__tree *t, const char *name, int64_t t0, int64_t t1);
/* A counter sample ("knob map(image).parallelism", "stall"...). */
void sl__trace_counter(sl__tree *t, const char *name, int64_t ts, double value);
/* Marks the calling thread as the consumer (its track is named so). */
void sl__trace_consumer(sl__tree *t);
/* Samples counters: every knob ("knob <node>.<knob>"), "stall" (the
 * consumer's wait over the time since the previous sample) and "buffered
 * bytes". Does nothing if the previous sample is less than min_interval_ns
 * old. Any thread; cheap to call often (one load when not due). */
void sl__trace_sample(sl__tree *t, int64_t now, int64_t min_interval_ns);

#endif
