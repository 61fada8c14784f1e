/*
 * sl_iterator_report: the snapshot as a table, and a verdict that names the
 * bottleneck and why.
 *
 * The verdict follows the data's path backwards from the consumer:
 *   1. the consumer barely waits (stall under the target): the pipeline
 *      keeps up and the consumer's own step is what sets the pace;
 *   2. otherwise the most upstream buffered node whose output is often
 *      found empty: nothing after it can go faster than it supplies. Why
 *      it falls short decides the advice: its workers busy nearly all the
 *      time (CPU-bound: more cores, or more parallelism if it runs below
 *      the CPU budget; a reader: I/O-bound), the maps together filling
 *      every worker (CPU-bound as a whole), its producer mostly waiting on
 *      its input (the synchronous nodes below it, which run on that one
 *      thread, are the limit), or none of these: a prefetch is fed in
 *      bursts (a deeper buffer helps), a map or reader has too little in
 *      flight;
 *   3. no buffer runs empty: start-up, or work on the consumer's own
 *      thread after the last buffer.
 */
#include <math.h>
#include <string.h>
#include "obs.h"

#define BUSY 0.8    /* a node this busy is saturated */
#define EMPTY 0.2   /* an output found empty this often starves its consumer */
#define WAITING 0.5 /* a producer waiting on input this much is input-bound */

static void bytes_str(char *buf, size_t size, double b)
{
    static const char *units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
    int u = 0;
    while (fabs(b) >= 1024 && u < 4) {
        b /= 1024;
        u++;
    }
    if (u == 0)
        snprintf(buf, size, "%.0f B", b);
    else
        snprintf(buf, size, "%.1f %s", b, units[u]);
}

static void pct(char *buf, size_t size, double f)
{
    snprintf(buf, size, "%.0f%%", 100 * f);
}

static bool is_async(const obs_node *n)
{
    return n->kind != SL__NODE_OTHER;
}

static void knobs_str(char *buf, size_t size, const obs_node *n)
{
    size_t k = 0;
    buf[0] = '\0';
    for (int i = 0; i < n->nknobs && k < size; i++)
        k += (size_t)snprintf(buf + k, size - k, "%s%s %lld%s", i ? ", " : "", n->knobs[i].name,
                              (long long)n->knobs[i].value, n->knobs[i].autotune ? " auto" : "");
    if (!n->nknobs)
        snprintf(buf, size, "-");
}

/* ---- the table ---- */

static void header(obs_text *o, const sl_stats *s)
{
    const double *g = s->g;
    const int64_t *st = s->stat;
    double wall = g[SL_GLOBAL_WALL_SECONDS], el = (double)st[SL_STAT_ELEMENTS];
    char held[32], peak[32], budget[32];
    bytes_str(held, sizeof held, (double)st[SL_STAT_BUFFERED_BYTES]);
    bytes_str(peak, sizeof peak, (double)st[SL_STAT_PEAK_BUFFERED_BYTES]);
    bytes_str(budget, sizeof budget, (double)st[SL_STAT_RAM_BUDGET]);
    sl__obs_printf(o, "sluice: %.2f s, %.0f elements (%.1f/s), %d worker threads, CPU budget %.0f, "
                   "autotune %s\n",
                   wall, el, wall > 0 ? el / wall : 0.0, s->threads, g[SL_GLOBAL_CPU_BUDGET],
                   s->autotune ? "on" : "off");
    sl__obs_printf(o, "consumer: waits %.1f%% of the time in sl_next (target %.1f%%), "
                   "%.3f ms between calls\n",
                   100 * g[SL_GLOBAL_STALL_FRACTION], 100 * s->stall_target,
                   1e3 * g[SL_GLOBAL_STEP_SECONDS]);
    sl__obs_printf(o, "memory: %s buffered (peak %s) of a %s budget", held, peak, budget);
    if (st[SL_STAT_IO_BACKEND] != SL_IO_AUTO) {
        char rate[32];
        bytes_str(rate, sizeof rate, g[SL_GLOBAL_IO_BYTES_PER_S]);
        sl__obs_printf(o, "; reads: %s, %s/s, %.0f in flight",
                       st[SL_STAT_IO_BACKEND] == SL_IO_URING ? "io_uring"
                       : st[SL_STAT_IO_BACKEND] == SL_IO_HTTP ? "http (libcurl)" : "pread", rate,
                       g[SL_GLOBAL_IO_IN_FLIGHT]);
    }
    if (st[SL_STAT_ERRORS_SKIPPED] > 0)
        sl__obs_printf(o, "; %lld element errors skipped", (long long)st[SL_STAT_ERRORS_SKIPPED]);
    if (s->autotune)
        sl__obs_printf(o, "; %.0f knob changes", g[SL_GLOBAL_KNOB_CHANGES]);
    sl__obs_printf(o, "\n\n");
}

static void row(obs_text *o, const obs_node *n, int name_w, int knob_w)
{
    char knobs[160], busy[16] = "-", wait[16] = "-", buf[32] = "-", empty[16] = "-",
         held[32] = "-";
    knobs_str(knobs, sizeof knobs, n);
    if (is_async(n)) {
        pct(busy, sizeof busy, n->v[SL_NODE_BUSY]);
        pct(wait, sizeof wait, n->v[SL_NODE_INPUT_WAIT]);
        if (n->takes) {
            snprintf(buf, sizeof buf, "%.1f/%lld", n->v[SL_NODE_OCCUPANCY],
                     (long long)n->capacity);
            pct(empty, sizeof empty, n->v[SL_NODE_EMPTY]);
        }
        if (n->kind == SL__NODE_PREFETCH)
            snprintf(busy, sizeof busy, "-");
    }
    if (n->bytes_held || is_async(n))
        bytes_str(held, sizeof held, (double)n->bytes_held);
    sl__obs_printf(o, "%-*s  %-*s %10lld %5s %7s %11s %6s %10s\n", name_w, n->name, knob_w,
                   knobs, (long long)n->elements, busy, wait, buf, empty, held);
}

static void table(obs_text *o, const sl_stats *s)
{
    int name_w = 4, knob_w = 5;
    for (int i = 0; i < s->n; i++) {
        char knobs[160];
        knobs_str(knobs, sizeof knobs, &s->nodes[i]);
        int a = (int)strlen(s->nodes[i].name), b = (int)strlen(knobs);
        name_w = a > name_w ? a : name_w;
        knob_w = b > knob_w ? b : knob_w;
    }
    sl__obs_printf(o, "%-*s  %-*s %10s %5s %7s %11s %6s %10s\n", name_w, "node", knob_w, "knobs",
                   "elements", "busy", "in-wait", "buffer", "empty", "held");
    for (int i = 0; i < s->n; i++)
        row(o, &s->nodes[i], name_w, knob_w);
    sl__obs_printf(o, "(busy: share of wall time its workers ran; in-wait: its producer waiting "
                   "on input;\n buffer: mean/capacity found at takes; empty: takes that found "
                   "nothing ready)\n\n");
}

/* Every counter of every node, by the names of the list (graph/stats.h):
 * the raw figures behind the table. */
static void counters(obs_text *o, const sl_stats *s)
{
    sl__obs_printf(o, "counters since the start:\n");
    for (int i = 0; i < s->n; i++) {
        const obs_node *n = &s->nodes[i];
        sl__obs_printf(o, "  %s:", n->name);
#define COUNTER(name, what) sl__obs_printf(o, " " #name " %lld", (long long)n->name);
        SL__NODE_COUNTERS(COUNTER, COUNTER)
#undef COUNTER
        sl__obs_printf(o, "\n");
    }
    sl__obs_printf(o, "\n");
}

/* ---- the verdict ---- */

static double busy_of(const obs_node *n)
{
    return n->v[SL_NODE_BUSY];
}

static bool starving(const obs_node *n)
{
    return n->takes > 0 && n->v[SL_NODE_EMPTY] >= EMPTY;
}

static void cpu_verdict(obs_text *o, const sl_stats *s, const obs_node *n)
{
    const obs_knob *par = sl__obs_knob(n, SL__KNOB_PARALLELISM);
    int64_t p = par ? par->value : n->units;
    int budget = (int)s->g[SL_GLOBAL_CPU_BUDGET];
    int usable = s->threads < budget ? s->threads : budget;
    sl__obs_printf(o, "%s: %d/%d workers busy %.0f%%, output buffer empty in %.0f%% of takes -> ",
                   n->name, n->units, s->threads, 100 * busy_of(n), 100 * n->v[SL_NODE_EMPTY]);
    if (n->units < usable && !(par && par->autotune && p >= par->max))
        sl__obs_printf(o, "raise its parallelism (%lld now, %d workers could run it)\n",
                       (long long)p, usable);
    else if (n->units < usable)
        sl__obs_printf(o, "CPU-bound at its parallelism limit (%lld)\n", (long long)p);
    else if (busy_of(n) >= BUSY)
        sl__obs_printf(o, "CPU-bound; more cores would help (or cheaper work per element)\n");
    else
        /* every worker it can use is assigned and the input keeps up, yet
         * they ran only part of the time: they waited for a core */
        sl__obs_printf(o, "CPU-bound; more cores would help (its workers ran only %.0f%% of "
                       "the time: other threads or processes compete for the cores)\n",
                       100 * busy_of(n));
}

static void io_verdict(obs_text *o, const obs_node *n)
{
    const obs_knob *d = sl__obs_knob(n, SL__KNOB_IO_DEPTH);
    sl__obs_printf(o, "%s: %.1f reads in flight on average of io_depth %d%s, output empty in "
                   "%.0f%% of takes -> I/O-bound; the storage sets the pace (a deeper queue "
                   "helps only if the device serves more reads at once)\n",
                   n->name, busy_of(n) * n->units, n->units, d && d->autotune ? " (auto)" : "",
                   100 * n->v[SL_NODE_EMPTY]);
}

/* The most upstream node whose output buffer its consumer often finds
 * empty: everything after it waits for it (a node further down cannot be
 * fed faster than this one supplies), so it is where to look. */
static int first_starving(const sl_stats *s)
{
    for (int i = 0; i < s->n; i++)
        if (is_async(&s->nodes[i]) && starving(&s->nodes[i]))
            return i;
    return -1;
}

/* The maps' work over what all workers could do. */
static double pool_busy(const sl_stats *s)
{
    double busy = 0;
    for (int i = 0; i < s->n; i++)
        if (s->nodes[i].kind == SL__NODE_MAP)
            busy += (double)s->nodes[i].busy_ns;
    double cap = s->g[SL_GLOBAL_WALL_SECONDS] * 1e9 * s->threads;
    return cap > 0 ? busy / cap : 0;
}

static void input_verdict(obs_text *o, const sl_stats *s, int i)
{
    const obs_node *n = &s->nodes[i];
    sl__obs_printf(o, "%s: its producer waits on its input %.0f%% of the time and its output is "
                   "empty in %.0f%% of takes -> ",
                   n->name, 100 * n->v[SL_NODE_INPUT_WAIT], 100 * n->v[SL_NODE_EMPTY]);
    int first = i;
    while (first > 0 && !is_async(&s->nodes[first - 1]))
        first--;
    if (first == i) {
        sl__obs_printf(o, "its input is the bottleneck\n");
        return;
    }
    sl__obs_printf(o, "the synchronous node%s below it (", i - first > 1 ? "s" : "");
    for (int j = first; j < i; j++)
        sl__obs_printf(o, "%s%s", j > first ? ", " : "", s->nodes[j].name);
    sl__obs_printf(o, ") %s the bottleneck: they run on that one producer thread; move costly "
                   "work into a parallel map\n", i - first > 1 ? "are" : "is");
}

/* The preprocessing service starves the trainer: are its workers short
 * (busy nearly all the time: how many a step of this length asks for), or
 * do they wait (the network, or the trainer's receiving)? */
static void service_verdict(obs_text *o, const sl_stats *s, const obs_node *n)
{
    double wall = s->g[SL_GLOBAL_WALL_SECONDS], step = s->g[SL_GLOBAL_STEP_SECONDS];
    double work = (double)n->remote_busy_ns / 1e9;
    double per_batch = n->elements > 0 ? work / (double)n->elements : 0;
    double busy = n->workers > 0 && wall > 0 ? work / (wall * (double)n->workers) : 0;
    sl__obs_printf(o, "%s: %lld workers busy %.0f%%, %.1f ms of work a batch, %.1f MB/s "
                   "received, empty in %.0f%% of takes -> ",
                   n->name, (long long)n->workers, 100 * busy, 1e3 * per_batch,
                   wall > 0 ? (double)n->net_bytes / wall / 1e6 : 0, 100 * n->v[SL_NODE_EMPTY]);
    if (n->workers == 0) {
        sl__obs_printf(o, "no workers are connected: start some (sluice-worker, python3 -m "
                       "sluice.worker)\n");
    } else if (busy >= BUSY && step > 0 && per_batch > 0) {
        long long need = (long long)ceil(per_batch / step);
        sl__obs_printf(o, "the workers are short: a step of %.3f ms asks for about %lld "
                       "workers (%lld now)%s\n", 1e3 * step, need, (long long)n->workers,
                       need > n->workers ? "; start more" : "");
    } else if (busy >= BUSY) {
        sl__obs_printf(o, "the workers are short; start more\n");
    } else {
        sl__obs_printf(o, "the workers wait %.0f%% of the time: the network or the trainer's "
                       "receiving is short, or too few splits are out (raise max_bytes)\n",
                       100 * (1 - busy));
    }
}

/* A starving node that is neither saturated nor waiting on its input. */
static void idle_verdict(obs_text *o, const sl_stats *s, const obs_node *n)
{
    double empty = 100 * n->v[SL_NODE_EMPTY], wait = 100 * n->v[SL_NODE_INPUT_WAIT];
    if (n->kind == SL__NODE_PREFETCH) {
        const obs_knob *d = sl__obs_knob(n, SL__KNOB_DEPTH);
        sl__obs_printf(o, "%s: empty in %.0f%% of takes while its producer waited on input only "
                       "%.0f%% of the time -> bursty supply; a deeper buffer would help "
                       "(depth %lld%s)\n",
                       n->name, empty, wait, d ? (long long)d->value : 0LL,
                       d && d->autotune ? ", auto" : "");
    } else if (n->kind == SL__NODE_READ) {
        sl__obs_printf(o, "%s: output empty in %.0f%% of takes with only %.1f reads in flight on "
                       "average -> raise io_depth\n",
                       n->name, empty, busy_of(n) * n->units);
    } else {
        cpu_verdict(o, s, n);
    }
}

static void verdict(obs_text *o, const sl_stats *s)
{
    const double *g = s->g;
    double stall = g[SL_GLOBAL_STALL_FRACTION];
    sl__obs_printf(o, "bottleneck: ");
    if (s->calls == 0) {
        sl__obs_printf(o, "none measured yet: sl_next has not been called\n");
        return;
    }
    if (stall < s->stall_target) {
        sl__obs_printf(o, "the consumer (step %.3f ms, stall %.1f%%): the pipeline keeps up; "
                       "a faster pipeline would not speed this up\n",
                       1e3 * g[SL_GLOBAL_STEP_SECONDS], 100 * stall);
        return;
    }
    int i = first_starving(s);
    if (i < 0) {
        bool any_async = false;
        for (int k = 0; k < s->n; k++)
            any_async |= is_async(&s->nodes[k]);
        if (!any_async)
            sl__obs_printf(o, "the whole pipeline runs on the consumer's thread (stall %.1f%%): "
                           "add a parallel map or a prefetch\n", 100 * stall);
        else
            sl__obs_printf(o, "no buffer runs empty (stall %.1f%%): the time goes to start-up "
                           "or to work on the consumer's thread after the last buffer; a "
                           "prefetch at the end would overlap it\n", 100 * stall);
        return;
    }
    const obs_node *n = &s->nodes[i];
    double pb = pool_busy(s);
    if (n->kind == SL__NODE_SERVICE)
        service_verdict(o, s, n);
    else if (n->kind == SL__NODE_READ && busy_of(n) >= BUSY)
        io_verdict(o, n);
    else if (n->kind == SL__NODE_MAP && busy_of(n) >= BUSY)
        cpu_verdict(o, s, n);
    else if (n->kind == SL__NODE_MAP && pb >= BUSY && n->v[SL_NODE_INPUT_WAIT] < WAITING)
        sl__obs_printf(o, "%s starves, and the maps together keep the %d workers busy %.0f%% "
                       "-> CPU-bound; more cores would help\n", n->name, s->threads, 100 * pb);
    else if (n->v[SL_NODE_INPUT_WAIT] >= WAITING)
        input_verdict(o, s, i);
    else
        idle_verdict(o, s, n);
}

/* ---- the text, for the iterator's sl_iterator_report ---- */

static int build(sl__tree *t, obs_text *o)
{
    sl_stats *s = sl__obs_snapshot(t);
    if (!s)
        return SL_ENOMEM;
    header(o, s);
    table(o, s);
    counters(o, s);
    verdict(o, s);
    sl_stats_free(s);
    if (o->failed) {
        sl__obs_text_free(o);
        return sl__set_error(SL_ENOMEM, "sl_iterator_report: out of memory");
    }
    return 0;
}

int sl__obs_report_file(sl__tree *t, FILE *out)
{
    obs_text o = {0};
    int rc = build(t, &o);
    if (rc < 0)
        return rc;
    if (fputs(o.p, out) == EOF)
        rc = sl__set_error(SL_EIO, "sl_iterator_report: write failed");
    sl__obs_text_free(&o);
    return rc;
}

int sl__obs_report_buf(sl__tree *t, char *buf, size_t size)
{
    obs_text o = {0};
    int rc = build(t, &o);
    if (rc < 0)
        return rc;
    if (size) {
        size_t k = o.len < size - 1 ? o.len : size - 1;
        memcpy(buf, o.p, k);
        buf[k] = '\0';
    }
    rc = o.len > (size_t)INT32_MAX ? INT32_MAX : (int)o.len;
    sl__obs_text_free(&o);
    return rc;
}
