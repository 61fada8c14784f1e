/*
 * What a run looked like over time: the consumer's arrival curve (images
 * so far against pipeline time) and, every SERIES_PERIOD_S, a snapshot of
 * the iterator's statistics (stall, buffered bytes, every knob) taken by a
 * sampler thread. Throughput is read off the arrival curve rather than
 * sampled: a batch of 256 lands at once, so counting images per 100 ms
 * would swing between 0 and 2560 images/s; interpolating between arrivals
 * gives the rate the consumer actually saw, smoothly.
 */
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "sluice_bench.h"

/* Arrivals closer than this are merged: a read preset can yield 100k
 * elements a second, and the curve needs no finer grain than this. */
#define ARRIVAL_GRAIN_S 0.001
#define WINDOW_S 1.0      /* the moving throughput window */
#define GRID_S 0.1        /* where convergence looks at that window */
#define CONVERGED 0.05    /* within 5% of steady */

double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

void series_free(series *s)
{
    free(s->arr_t);
    free(s->arr_images);
    free(s->t);
    free(s->stall_s);
    free(s->measured_stall_s);
    free(s->buffered);
    for (int k = 0; k < s->nknobs; k++)
        free(s->knobs[k].v);
    memset(s, 0, sizeof *s);
}

/* ---- the arrival curve ---- */

static int grow(void **p, size_t cap, size_t item)
{
    void *q = realloc(*p, cap * item);
    if (!q)
        return -1;
    *p = q;
    return 0;
}

void series_arrival(series *s, double t, int64_t images)
{
    if (s->narr >= 2 && t - s->arr_t[s->narr - 2] < ARRIVAL_GRAIN_S) {
        s->arr_t[s->narr - 1] = t; /* move the newest point; its anchor stays */
        s->arr_images[s->narr - 1] = images;
        return;
    }
    if (s->narr == s->arr_cap) {
        size_t cap = s->arr_cap ? 2 * s->arr_cap : 4096;
        if (grow((void **)&s->arr_t, cap, sizeof *s->arr_t) < 0 ||
            grow((void **)&s->arr_images, cap, sizeof *s->arr_images) < 0) {
            s->arrivals_lost = true;
            return;
        }
        s->arr_cap = cap;
    }
    s->arr_t[s->narr] = t;
    s->arr_images[s->narr++] = images;
}

/* First arrival at or after t (narr if none). */
static size_t arrival_after(const series *s, double t)
{
    size_t lo = 0, hi = s->narr;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (s->arr_t[mid] < t)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

double series_images_at(const series *s, double t)
{
    if (s->narr == 0)
        return 0;
    size_t i = arrival_after(s, t);
    if (i == 0)
        return (double)s->arr_images[0];
    if (i == s->narr)
        return (double)s->arr_images[s->narr - 1];
    double t0 = s->arr_t[i - 1], t1 = s->arr_t[i];
    double i0 = (double)s->arr_images[i - 1], i1 = (double)s->arr_images[i];
    return t1 > t0 ? i0 + (i1 - i0) * (t - t0) / (t1 - t0) : i1;
}

double series_rate(const series *s, double a, double b)
{
    return b > a ? (series_images_at(s, b) - series_images_at(s, a)) / (b - a) : NAN;
}

double series_start(const series *s)
{
    return s->narr ? s->arr_t[0] : 0;
}

double series_end(const series *s)
{
    return s->narr ? s->arr_t[s->narr - 1] : 0;
}

/* Past the last arrival the count stops, and a rate there would show a
 * drop that never happened: a sample after it covers up to it, or is NaN. */
double series_sample_rate(const series *s, size_t i)
{
    double a = i ? s->t[i - 1] : series_start(s), b = fmin(s->t[i], series_end(s));
    return series_rate(s, a, b);
}

static double interval_stall(const series *s, const double *stall, size_t i)
{
    double t0 = i ? s->t[i - 1] : series_start(s);
    double s0 = i ? stall[i - 1] : 0;
    if (!(s->t[i] > t0) || isnan(stall[i]) || isnan(s0))
        return NAN;
    double f = (stall[i] - s0) / (s->t[i] - t0);
    return f < 0 ? 0 : f > 1 ? 1 : f; /* counters read at slightly different instants */
}

double series_sample_stall(const series *s, size_t i)
{
    return interval_stall(s, s->stall_s, i);
}

double series_sample_measured_stall(const series *s, size_t i)
{
    return interval_stall(s, s->measured_stall_s, i);
}

/* ---- the consumer's stall clock ---- */

static int64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

void stall_clock_enter(stall_clock *c)
{
    int64_t total = atomic_load_explicit(&c->v, memory_order_relaxed);
    atomic_store_explicit(&c->v, -(now_ns() - total) - 1, memory_order_relaxed);
}

void stall_clock_leave(stall_clock *c)
{
    int64_t v = atomic_load_explicit(&c->v, memory_order_relaxed);
    atomic_store_explicit(&c->v, now_ns() + v + 1, memory_order_relaxed);
}

double stall_clock_read(const stall_clock *c)
{
    int64_t v = atomic_load_explicit(&c->v, memory_order_relaxed);
    return (double)(v >= 0 ? v : now_ns() + v + 1) * 1e-9;
}

/* ---- convergence ---- */

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* The median of the whole 1-s windows in the second half of [from, to]. */
static double steady_rate(const series *s, double from, double to)
{
    double mid = from + (to - from) / 2;
    int n = (int)floor((to - mid) / WINDOW_S + 1e-9);
    if (n < 1)
        return NAN;
    double *r = malloc((size_t)n * sizeof *r);
    if (!r)
        return NAN;
    for (int k = 0; k < n; k++)
        r[k] = series_rate(s, mid + k * WINDOW_S, mid + (k + 1) * WINDOW_S);
    qsort(r, (size_t)n, sizeof *r, cmp_double);
    double m = n % 2 ? r[n / 2] : (r[n / 2 - 1] + r[n / 2]) / 2;
    free(r);
    return m;
}

convergence series_convergence(const series *s, double from, double to)
{
    convergence c = {.seconds = NAN, .steady = steady_rate(s, from, to)};
    if (!(c.steady > 0))
        return c;
    /* Walk the window starts backwards: the answer is just after the last
     * window that strays. */
    int n = (int)floor((to - WINDOW_S - from) / GRID_S + 1e-9);
    if (n < 0)
        return c;
    for (int k = n; k >= 0; k--) {
        double a = from + k * GRID_S;
        if (fabs(series_rate(s, a, a + WINDOW_S) - c.steady) > CONVERGED * c.steady) {
            if (k < n)
                c.seconds = (k + 1) * GRID_S;
            return c;
        }
    }
    c.seconds = 0;
    return c;
}

/* ---- the sampler ---- */

struct sampler {
    pthread_t thread;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    bool stop;
    const sl_iterator *it;
    series *s;
    stall_clock *clock;
    double t_base, t0, stall_base;
};

static int grow_samples(series *s)
{
    size_t cap = s->cap ? 2 * s->cap : 1024;
    if (grow((void **)&s->t, cap, sizeof *s->t) < 0 ||
        grow((void **)&s->stall_s, cap, sizeof *s->stall_s) < 0 ||
        grow((void **)&s->measured_stall_s, cap, sizeof *s->measured_stall_s) < 0 ||
        grow((void **)&s->buffered, cap, sizeof *s->buffered) < 0)
        return -1;
    for (int k = 0; k < s->nknobs; k++)
        if (grow((void **)&s->knobs[k].v, cap, sizeof *s->knobs[k].v) < 0)
            return -1;
    s->cap = cap;
    return 0;
}

/* The track labelled `label`, created (NaN up to now) on first sight. */
static knob_track *track(series *s, const char *label, bool autotuned)
{
    for (int k = 0; k < s->nknobs; k++)
        if (!strcmp(s->knobs[k].label, label))
            return &s->knobs[k];
    if (s->nknobs == SERIES_MAX_KNOBS)
        return NULL;
    knob_track *kt = &s->knobs[s->nknobs];
    kt->v = malloc(s->cap * sizeof *kt->v);
    if (!kt->v)
        return NULL;
    for (size_t i = 0; i < s->cap; i++)
        kt->v[i] = NAN;
    snprintf(kt->label, sizeof kt->label, "%s", label);
    kt->autotuned = autotuned;
    s->nknobs++;
    return kt;
}

/* Two nodes of one name ("prefetch" twice) get "#2", "#3" on the later. */
static void knob_track_label(const sl_stats *st, int node, const char *knob, char *out, size_t size)
{
    const char *name = sl_stats_node_name(st, node);
    int same = 1;
    for (int j = 0; j < node; j++)
        same += !strcmp(sl_stats_node_name(st, j), name);
    if (same > 1)
        snprintf(out, size, "%s#%d.%s", name, same, knob);
    else
        snprintf(out, size, "%s.%s", name, knob);
}

static void record_knobs(series *s, const sl_stats *st, size_t i)
{
    for (int node = 0; node < sl_stats_nodes(st); node++)
        for (int k = 0; k < sl_stats_knobs(st, node); k++) {
            char label[sizeof s->knobs[0].label];
            knob_track_label(st, node, sl_stats_knob_name(st, node, k), label, sizeof label);
            knob_track *kt = track(s, label, sl_stats_knob_autotuned(st, node, k) == 1);
            if (kt)
                kt->v[i] = (double)sl_stats_knob_value(st, node, k);
        }
}

static void take_sample(sampler *sp)
{
    series *s = sp->s;
    if (s->n == s->cap && grow_samples(s) < 0) {
        s->samples_lost = true;
        return;
    }
    double t = now_s(), measured = stall_clock_read(sp->clock);
    sl_stats *st = sl_iterator_stats(sp->it);
    if (!st) {
        s->samples_lost = true;
        return;
    }
    size_t i = s->n++;
    for (int k = 0; k < s->nknobs; k++)
        s->knobs[k].v[i] = NAN;
    double wall = sl_stats_global(st, SL_GLOBAL_WALL_SECONDS);
    s->t[i] = sp->t_base + (t - sp->t0);
    s->stall_s[i] = sp->stall_base + sl_stats_global(st, SL_GLOBAL_STALL_FRACTION) * wall;
    s->measured_stall_s[i] = measured;
    s->buffered[i] = (double)sl_iterator_stat(sp->it, SL_STAT_BUFFERED_BYTES);
    record_knobs(s, st, i);
    sl_stats_free(st);
}

static void *sampler_main(void *arg)
{
    sampler *sp = arg;
    double next = now_s() + SERIES_PERIOD_S;
    pthread_mutex_lock(&sp->mu);
    while (!sp->stop) {
        struct timespec ts = {.tv_sec = (time_t)next,
                              .tv_nsec = (long)((next - floor(next)) * 1e9)};
        if (pthread_cond_timedwait(&sp->cv, &sp->mu, &ts) != ETIMEDOUT)
            continue; /* stop, or a spurious wake-up */
        pthread_mutex_unlock(&sp->mu);
        take_sample(sp);
        next += SERIES_PERIOD_S;
        double now = now_s();
        if (next < now) /* fell behind (a stopped process): no burst of samples */
            next = now + SERIES_PERIOD_S;
        pthread_mutex_lock(&sp->mu);
    }
    pthread_mutex_unlock(&sp->mu);
    return NULL;
}

sampler *sampler_start(const sl_iterator *it, series *s, stall_clock *clock, double t_base,
                       double t0, double stall_base)
{
    sampler *sp = calloc(1, sizeof *sp);
    if (!sp)
        return NULL;
    *sp = (sampler){.it = it, .s = s, .clock = clock, .t_base = t_base, .t0 = t0,
                    .stall_base = stall_base};
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC); /* the clock now_s() reads */
    pthread_mutex_init(&sp->mu, NULL);
    pthread_cond_init(&sp->cv, &ca);
    pthread_condattr_destroy(&ca);
    if (pthread_create(&sp->thread, NULL, sampler_main, sp) != 0) {
        pthread_cond_destroy(&sp->cv);
        pthread_mutex_destroy(&sp->mu);
        free(sp);
        return NULL;
    }
    return sp;
}

void sampler_stop(sampler *sp)
{
    if (!sp)
        return;
    pthread_mutex_lock(&sp->mu);
    sp->stop = true;
    pthread_cond_signal(&sp->cv);
    pthread_mutex_unlock(&sp->mu);
    pthread_join(sp->thread, NULL);
    take_sample(sp); /* the state at the end of the run */
    pthread_cond_destroy(&sp->cv);
    pthread_mutex_destroy(&sp->mu);
    free(sp);
}

/* ---- as JSON ---- */

static void json_column(FILE *f, const char *name, const series *s,
                        double (*value)(const series *, size_t))
{
    fprintf(f, ",\"%s\":[", name);
    for (size_t i = 0; i < s->n; i++) {
        fputs(i ? "," : "", f);
        json_number(f, value(s, i));
    }
    fputc(']', f);
}

static double column_t(const series *s, size_t i)
{
    return s->t[i];
}

static double column_buffered(const series *s, size_t i)
{
    return s->buffered[i];
}

void series_json(FILE *f, const series *s)
{
    fprintf(f, ",\"series\":{\"period_s\":%.3f", SERIES_PERIOD_S);
    json_column(f, "t", s, column_t);
    json_column(f, "images_per_s", s, series_sample_rate);
    json_column(f, "stall_fraction", s, series_sample_stall);
    json_column(f, "measured_stall_fraction", s, series_sample_measured_stall);
    json_column(f, "buffered_bytes", s, column_buffered);
    fputs(",\"knobs\":{", f);
    for (int k = 0; k < s->nknobs; k++) {
        fputs(k ? "," : "", f);
        json_string(f, s->knobs[k].label);
        fputs(":[", f);
        for (size_t i = 0; i < s->n; i++) {
            fputs(i ? "," : "", f);
            json_number(f, s->knobs[k].v[i]);
        }
        fputc(']', f);
    }
    fprintf(f, "},\"incomplete\":%s}", s->arrivals_lost || s->samples_lost ? "true" : "false");
}
