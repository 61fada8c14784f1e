/*
 * sl_iterator_stats: a snapshot of the tree's counters, the derived
 * per-node fractions, and the snapshot as JSON.
 *
 * Fractions are over the iterator's wall time (since sl_iterator_create,
 * until sl_next first returned the end or an error):
 * SL_NODE_BUSY = busy_ns / (wall × units): for a map, busy_ns is callback
 * time summed over workers and units its parallelism capped by the
 * runtime's threads (what it can keep busy at once); for a reader, busy_ns
 * is read time summed over reads and units its io_depth (the share of the
 * queue in use). SL_NODE_INPUT_WAIT = the producer's time inside its
 * input's next / wall.
 */
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include "../core/clock.h"
#include "obs.h"

/* ---- shared helpers ---- */

static int by_depth(const void *a, const void *b)
{
    const sl__node_stats *x = *(sl__node_stats *const *)a, *y = *(sl__node_stats *const *)b;
    return (x->depth < y->depth) - (x->depth > y->depth);
}

int sl__obs_nodes(sl__tree *t, obs_nodes *out)
{
    out->n = 0;
    out->v = NULL;
    pthread_mutex_lock(&t->mu);
    int n = 0;
    for (sl__node_stats *ns = t->stats_head; ns; ns = ns->next)
        n++;
    out->v = sl__calloc((size_t)n + 1, sizeof *out->v);
    if (out->v)
        for (sl__node_stats *ns = t->stats_head; ns; ns = ns->next)
            out->v[out->n++] = ns;
    pthread_mutex_unlock(&t->mu);
    if (!out->v)
        return SL_ENOMEM;
    /* registration order is parent before child: an insertion sort (stable,
     * and the list is short) by depth, deepest first */
    for (int i = 1; i < out->n; i++) {
        sl__node_stats *x = out->v[i];
        int j = i;
        while (j > 0 && by_depth(&out->v[j - 1], &x) > 0) {
            out->v[j] = out->v[j - 1];
            j--;
        }
        out->v[j] = x;
    }
    return 0;
}

void sl__obs_nodes_free(obs_nodes *nodes)
{
    sl__free(nodes->v, ((size_t)nodes->n + 1) * sizeof *nodes->v);
    nodes->v = NULL;
    nodes->n = 0;
}

void sl__obs_printf(obs_text *s, const char *fmt, ...)
{
    if (s->failed)
        return;
    va_list ap;
    va_start(ap, fmt);
    char small[256];
    int n = vsnprintf(small, sizeof small, fmt, ap);
    va_end(ap);
    if (n < 0)
        return;
    if (s->len + (size_t)n + 1 > s->cap) {
        size_t cap = s->cap ? s->cap : 1024;
        while (cap < s->len + (size_t)n + 1)
            cap *= 2;
        char *p = sl__alloc(cap);
        if (!p) {
            s->failed = true;
            return;
        }
        if (s->len)
            memcpy(p, s->p, s->len);
        sl__free(s->p, s->cap);
        s->p = p;
        s->cap = cap;
    }
    if ((size_t)n < sizeof small) {
        memcpy(s->p + s->len, small, (size_t)n + 1);
    } else {
        va_start(ap, fmt);
        vsnprintf(s->p + s->len, (size_t)n + 1, fmt, ap);
        va_end(ap);
    }
    s->len += (size_t)n;
}

void sl__obs_text_free(obs_text *s)
{
    sl__free(s->p, s->cap);
    *s = (obs_text){0};
}

/* s quoted for JSON into buf (at least 8 bytes). */
static void quote(char *buf, size_t size, const char *s)
{
    size_t k = 0;
    buf[k++] = '"';
    for (; *s && k + 8 < size; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\') {
            buf[k++] = '\\';
            buf[k++] = (char)c;
        } else if (c < 0x20) {
            k += (size_t)snprintf(buf + k, size - k, "\\u%04x", c);
        } else {
            buf[k++] = (char)c;
        }
    }
    buf[k++] = '"';
    buf[k] = '\0';
}

void sl__obs_json_string(obs_text *out, const char *s)
{
    char buf[1024];
    quote(buf, sizeof buf, s);
    sl__obs_printf(out, "%s", buf);
}

void sl__obs_json_fputs(FILE *f, const char *s)
{
    char buf[1024];
    quote(buf, sizeof buf, s);
    fputs(buf, f);
}

const obs_knob *sl__obs_knob(const obs_node *n, int kind)
{
    for (int k = 0; k < n->nknobs; k++)
        if (n->knobs[k].kind == kind)
            return &n->knobs[k];
    return NULL;
}

/* ---- the snapshot ---- */

static double ratio(double a, double b)
{
    return b > 0 ? a / b : 0.0;
}

static double clamp01(double x)
{
    return x < 0 ? 0 : x > 1 ? 1 : x;
}

static void copy_node(obs_node *o, const sl__node_stats *ns, int threads, double wall_ns)
{
    snprintf(o->name, sizeof o->name, "%s", ns->name);
    o->kind = ns->kind;
    o->depth = ns->depth;
#define COPY(name, what) o->name = atomic_load_explicit(&ns->name, memory_order_relaxed);
    SL__NODE_COUNTERS(COPY, COPY)
#undef COPY
    o->nknobs = ns->nknobs;
    for (int k = 0; k < ns->nknobs; k++) {
        const sl__knob *kn = &ns->knobs[k];
        o->knobs[k] = (obs_knob){kn->name, kn->kind, sl__knob_get(kn), kn->min, kn->max,
                                 kn->autotune};
    }
    o->units = 1;
    const obs_knob *par = sl__obs_knob(o, SL__KNOB_PARALLELISM);
    const obs_knob *io = sl__obs_knob(o, SL__KNOB_IO_DEPTH);
    if (o->kind == SL__NODE_MAP) {
        int64_t p = par ? par->value : threads;
        o->units = (int)(p < threads ? p : threads);
    } else if (o->kind == SL__NODE_READ && io) {
        o->units = (int)io->value;
    }
    if (o->units < 1)
        o->units = 1;
    o->v[SL_NODE_ELEMENTS] = (double)o->elements;
    o->v[SL_NODE_BUSY] = clamp01(ratio((double)o->busy_ns, wall_ns * o->units));
    o->v[SL_NODE_INPUT_WAIT] = clamp01(ratio((double)o->wait_ns, wall_ns));
    o->v[SL_NODE_OCCUPANCY] = ratio((double)o->occupancy_sum, (double)o->takes);
    o->v[SL_NODE_EMPTY] = ratio((double)o->empty_takes, (double)o->takes);
    o->v[SL_NODE_CAPACITY] = o->capacity;
    o->v[SL_NODE_BYTES_HELD] = (double)o->bytes_held;
}

static void globals(sl_stats *s, sl__tree *t, double wall_ns)
{
    double *g = s->g;
    int64_t wait = sl__consumer_wait(t, sl__now_ns()), step = atomic_load(&t->consumer_step_ns);
    s->calls = atomic_load(&t->consumer_calls);
    g[SL_GLOBAL_WALL_SECONDS] = wall_ns / 1e9;
    g[SL_GLOBAL_STALL_FRACTION] = clamp01(ratio((double)wait, wall_ns));
    /* the first call has no step before it */
    g[SL_GLOBAL_STEP_SECONDS] = s->calls > 1 ? (double)step / 1e9 / (double)(s->calls - 1) : 0;
    for (int k = 0; k < SL_STAT_COUNT; k++)
        s->stat[k] = sl__tree_stat(t, (sl_stat)k);
    g[SL_GLOBAL_CPU_BUDGET] = t->cpu_budget;
    double in_flight = 0;
    for (int i = 0; i < s->n; i++)
        if (s->nodes[i].kind == SL__NODE_READ)
            in_flight += s->nodes[i].in_flight;
    g[SL_GLOBAL_IO_IN_FLIGHT] = in_flight;
    g[SL_GLOBAL_IO_BYTES_PER_S] = ratio((double)atomic_load(&t->bytes_read), wall_ns / 1e9);
    g[SL_GLOBAL_KNOB_CHANGES] = (double)atomic_load(&t->knob_changes);
}

sl_stats *sl__obs_snapshot(sl__tree *t)
{
    obs_nodes nodes;
    if (sl__obs_nodes(t, &nodes) < 0)
        return NULL;
    sl_stats *s = sl__calloc(1, sizeof *s);
    obs_node *v = sl__calloc((size_t)nodes.n + 1, sizeof *v);
    if (!s || !v) {
        sl__free(s, sizeof *s);
        sl__free(v, ((size_t)nodes.n + 1) * sizeof *v);
        sl__obs_nodes_free(&nodes);
        return NULL;
    }
    s->nodes = v;
    s->n = nodes.n;
    s->threads = sl_runtime_threads(t->rt);
    s->stall_target = (double)t->stall_target_ppm / 1e6;
    s->autotune = t->autotune;
    /* a finished pass keeps its figures: the wall stops at its end */
    int64_t end = atomic_load_explicit(&t->end_ns, memory_order_relaxed);
    double wall_ns = (double)((end ? end : sl__now_ns()) - t->start_ns);
    /* knob descriptions (bounds, autotune) change under the lock only */
    pthread_mutex_lock(&t->mu);
    for (int i = 0; i < nodes.n; i++)
        copy_node(&v[i], nodes.v[i], s->threads, wall_ns);
    pthread_mutex_unlock(&t->mu);
    sl__obs_nodes_free(&nodes);
    globals(s, t, wall_ns);
    return s;
}

/* ---- public ---- */

SL_API void sl_stats_free(sl_stats *s)
{
    if (!s)
        return;
    sl__free(s->nodes, ((size_t)s->n + 1) * sizeof *s->nodes);
    sl__free(s->json, s->json_size);
    sl__free(s, sizeof *s);
}

SL_API int sl_stats_nodes(const sl_stats *s)
{
    return s ? s->n : 0;
}

static const obs_node *node_at(const sl_stats *s, int node)
{
    return s && node >= 0 && node < s->n ? &s->nodes[node] : NULL;
}

SL_API const char *sl_stats_node_name(const sl_stats *s, int node)
{
    const obs_node *n = node_at(s, node);
    return n ? n->name : NULL;
}

SL_API double sl_stats_node(const sl_stats *s, int node, sl_node_stat key)
{
    const obs_node *n = node_at(s, node);
    if (!n || (unsigned)key >= SL_NODE_STAT_COUNT)
        return NAN;
    return n->v[key];
}

SL_API double sl_stats_global(const sl_stats *s, sl_global_stat key)
{
    if (!s || (unsigned)key >= SL_GLOBAL_STAT_COUNT)
        return NAN;
    return s->g[key];
}

SL_API int sl_stats_knobs(const sl_stats *s, int node)
{
    const obs_node *n = node_at(s, node);
    return n ? n->nknobs : 0;
}

static const obs_knob *knob_at(const sl_stats *s, int node, int knob)
{
    const obs_node *n = node_at(s, node);
    return n && knob >= 0 && knob < n->nknobs ? &n->knobs[knob] : NULL;
}

SL_API const char *sl_stats_knob_name(const sl_stats *s, int node, int knob)
{
    const obs_knob *k = knob_at(s, node, knob);
    return k ? k->name : NULL;
}

SL_API int64_t sl_stats_knob_value(const sl_stats *s, int node, int knob)
{
    const obs_knob *k = knob_at(s, node, knob);
    return k ? k->value : -1;
}

SL_API int sl_stats_knob_autotuned(const sl_stats *s, int node, int knob)
{
    const obs_knob *k = knob_at(s, node, knob);
    return k ? k->autotune : -1;
}

/* ---- JSON ---- */

static const char *kind_name(int kind)
{
    static const char *names[] = {"other", "map", "prefetch", "read", "service"};
    return kind >= 0 && kind <= SL__NODE_SERVICE ? names[kind] : "other";
}

static const char *placement_name(int p)
{
    static const char *const names[] = {"undecided", "none", "memory", "file"};
    return p >= 0 && p < 4 ? names[p] : "?";
}

static const char *backend_name(int b)
{
    return b == SL_IO_URING  ? "io_uring"
           : b == SL_IO_PREAD ? "pread"
           : b == SL_IO_HTTP  ? "http"
                              : "none";
}

/* JSON has no NaN or infinity. */
static double json_num(double x)
{
    return isfinite(x) ? x : 0.0;
}

/* Every counter of the list (graph/stats.h), then the derived fractions. */
static void json_node(obs_text *o, const obs_node *n)
{
    sl__obs_printf(o, "{\"name\":");
    sl__obs_json_string(o, n->name);
    sl__obs_printf(o, ",\"kind\":\"%s\",\"depth\":%d", kind_name(n->kind), n->depth);
#define JSON_COUNTER(name, what) sl__obs_printf(o, ",\"" #name "\":%lld", (long long)n->name);
    SL__NODE_COUNTERS(JSON_COUNTER, JSON_COUNTER)
#undef JSON_COUNTER
    sl__obs_printf(o, ",\"busy\":%.6g,\"input_wait\":%.6g,\"occupancy\":%.6g,\"empty\":%.6g,"
                   "\"knobs\":[",
                   json_num(n->v[SL_NODE_BUSY]), json_num(n->v[SL_NODE_INPUT_WAIT]),
                   json_num(n->v[SL_NODE_OCCUPANCY]), json_num(n->v[SL_NODE_EMPTY]));
    for (int k = 0; k < n->nknobs; k++) {
        const obs_knob *kn = &n->knobs[k];
        sl__obs_printf(o, "%s{\"name\":", k ? "," : "");
        sl__obs_json_string(o, kn->name);
        sl__obs_printf(o, ",\"value\":%lld,\"min\":%lld,\"max\":%lld,\"autotune\":%s}",
                       (long long)kn->value, (long long)kn->min, (long long)kn->max,
                       kn->autotune ? "true" : "false");
    }
    sl__obs_printf(o, "]}");
}

SL_API const char *sl_stats_json(sl_stats *s)
{
    if (!s)
        return NULL;
    if (s->json)
        return s->json;
    const double *g = s->g;
    const int64_t *st = s->stat;
    obs_text o = {0};
    sl__obs_printf(&o, "{\"wall_seconds\":%.6g,\"stall_fraction\":%.6g,\"stall_target\":%.6g,"
                   "\"step_seconds\":%.6g,\"elements\":%lld,\"buffered_bytes\":%lld,"
                   "\"peak_buffered_bytes\":%lld,\"ram_budget\":%lld,\"cpu_budget\":%.0f,"
                   "\"threads\":%d,\"autotune\":%s,\"io_backend\":\"%s\",\"io_in_flight\":%.0f,"
                   "\"io_bytes_per_s\":%.6g,\"bytes_read\":%lld,\"errors_skipped\":%lld,"
                   "\"knob_changes\":%.0f,\"epoch\":%lld,\"padded\":%lld,"
                   "\"cache_placement\":\"%s\",\"cache_bytes\":%lld,\"nodes\":[",
                   json_num(g[SL_GLOBAL_WALL_SECONDS]), json_num(g[SL_GLOBAL_STALL_FRACTION]),
                   s->stall_target, json_num(g[SL_GLOBAL_STEP_SECONDS]),
                   (long long)st[SL_STAT_ELEMENTS], (long long)st[SL_STAT_BUFFERED_BYTES],
                   (long long)st[SL_STAT_PEAK_BUFFERED_BYTES], (long long)st[SL_STAT_RAM_BUDGET],
                   g[SL_GLOBAL_CPU_BUDGET], s->threads, s->autotune ? "true" : "false",
                   backend_name((int)st[SL_STAT_IO_BACKEND]), g[SL_GLOBAL_IO_IN_FLIGHT],
                   json_num(g[SL_GLOBAL_IO_BYTES_PER_S]), (long long)st[SL_STAT_BYTES_READ],
                   (long long)st[SL_STAT_ERRORS_SKIPPED], g[SL_GLOBAL_KNOB_CHANGES],
                   (long long)st[SL_STAT_EPOCH], (long long)st[SL_STAT_PADDED],
                   placement_name((int)st[SL_STAT_CACHE_PLACEMENT]),
                   (long long)st[SL_STAT_CACHE_BYTES]);
    for (int i = 0; i < s->n; i++) {
        if (i)
            sl__obs_printf(&o, ",");
        json_node(&o, &s->nodes[i]);
    }
    sl__obs_printf(&o, "]}");
    if (o.failed) {
        sl__obs_text_free(&o);
        sl__set_error(SL_ENOMEM, "sl_stats_json: out of memory");
        return NULL;
    }
    s->json = o.p;
    s->json_size = o.cap;
    return s->json;
}
