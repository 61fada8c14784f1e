/*
 * The observation layer: the statistics snapshot, the report and the trace
 * writer, all reading a tree (graph/), never an iterator: the public entry
 * points that take an sl_iterator are in iterator/. Shared here: the
 * snapshot's layout, the nodes in pipeline order, a growing text buffer and
 * JSON string quoting.
 */
#ifndef SL_OBS_OBS_H
#define SL_OBS_OBS_H

#include <stdbool.h>
#include <stdio.h>
#include "../graph/node.h"

/* The tree's entries in pipeline order (deepest first: the source, then
 * toward the root), as pointers into the registry, which lives as long as
 * the tree. */
typedef struct obs_nodes {
    int n;
    sl__node_stats **v;
} obs_nodes;
int sl__obs_nodes(sl__tree *t, obs_nodes *out); /* 0 or SL_ENOMEM */
void sl__obs_nodes_free(obs_nodes *nodes);

typedef struct obs_knob {
    const char *name; /* static */
    int kind;
    int64_t value, min, max;
    bool autotune;
} obs_knob;

typedef struct obs_node {
    char name[64];
    int kind, depth;
#define SL__OBS_FIELD(name, what) int64_t name;
    SL__NODE_COUNTERS(SL__OBS_FIELD, SL__OBS_FIELD) /* as of the snapshot */
#undef SL__OBS_FIELD
    int units; /* what SL_NODE_BUSY divides by: workers it can keep busy */
    int nknobs;
    obs_knob knobs[SL__MAX_KNOBS];
    double v[SL_NODE_STAT_COUNT];
} obs_node;

struct sl_stats {
    int n;
    obs_node *nodes;
    double g[SL_GLOBAL_STAT_COUNT];
    int64_t stat[SL_STAT_COUNT]; /* the tree's sl_stat counters */
    int threads;            /* workers of the runtime */
    double stall_target;    /* fraction */
    bool autotune;
    int64_t calls;          /* sl_next calls */
    char *json;             /* built on first sl_stats_json */
    size_t json_size;
};

/* A snapshot of t, or NULL with SL_ENOMEM set. */
sl_stats *sl__obs_snapshot(sl__tree *t);
/* The report of t onto a stream, or into buf (as sl_iterator_report and
 * sl_iterator_report_buf). */
int sl__obs_report_file(sl__tree *t, FILE *out);
int sl__obs_report_buf(sl__tree *t, char *buf, size_t size);
/* The trace ring of t as Chrome trace JSON in path (sl_iterator_trace). */
int sl__obs_trace_write(sl__tree *t, const char *path);
/* The knob of `kind` (sl__knob_kind) of node n, or NULL. */
const obs_knob *sl__obs_knob(const obs_node *n, int kind);

/* Text that grows as it is appended to; on allocation failure it stops
 * growing and remembers it (failed). */
typedef struct obs_text {
    char *p;
    size_t len, cap;
    bool failed;
} obs_text;
void sl__obs_printf(obs_text *s, const char *fmt, ...) SL__PRINTF(2, 3);
void sl__obs_text_free(obs_text *s);

/* s as a quoted JSON string (control characters escaped) into out. */
void sl__obs_json_string(obs_text *out, const char *s);
/* The same onto a stream. */
void sl__obs_json_fputs(FILE *f, const char *s);

#endif
