/*
 * The trace-event ring behind sl_iterator_trace (SL_OPT_TRACE_EVENTS).
 *
 * Fixed-size records appended lock-free: an atomic index picks the slot,
 * the oldest events are overwritten when the ring is full, and a per-slot
 * sequence number lets the writer of the JSON skip a slot being rewritten.
 * Spans name their node by its statistics entry (which lives as long as
 * the tree); counter names are interned once (counters are rare: a few per
 * controller tick).
 *
 * sl__trace_span and sl__trace_counter (declared in graph/stats.h) are what
 * nodes and the controller call; this header adds what the iterator needs.
 */
#ifndef SL_OBS_TRACE_H
#define SL_OBS_TRACE_H

#include <stdint.h>
#include "../graph/node.h"

typedef struct sl__trace sl__trace;

/* A ring of `events` records, or NULL with SL_ENOMEM set. */
sl__trace *sl__trace_new(int64_t events);
/* NULL ok. */
void sl__trace_free(sl__trace *tr);

/* A span on the calling thread's track named by a static string rather
 * than a node ("stall"). */
void sl__trace_span_named(sl__tree *t, const char *name, int64_t t0, int64_t t1);
/* Marks the calling thread as the consumer (its track is named so). */
void sl__trace_consumer(sl__tree *t);
/* Samples counters: every knob ("knob <node>.<knob>"), "stall" (the
 * consumer's wait over the time since the previous sample) and "buffered
 * bytes". Does nothing if the previous sample is less than min_interval_ns
 * old. Any thread; cheap to call often (one load when not due). */
void sl__trace_sample(sl__tree *t, int64_t now, int64_t min_interval_ns);

#endif
