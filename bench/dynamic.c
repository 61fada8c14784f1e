/*
 * Autotune when the elements change size mid-run: a generator whose
 * elements (batches of float samples) grow tenfold at one time and shrink
 * back at another, through a map whose work is proportional to the samples
 * (parallelism AUTOTUNE) and a prefetch (AUTOTUNE), under a RAM budget, to
 * a consumer that spends a fixed step per element.
 *
 *   bench_dynamic [--samples N] [--factor F] [--grow-at S] [--shrink-at S]
 *                 [--seconds S] [--step-ms MS] [--work K] [--wait-us U]
 *                 [--budget-mib M] [--threads T] [--plot FILE.svg]
 *
 * The map's cost per 1,000 samples: K multiply-adds per sample (CPU) and
 * U microseconds of waiting (a remote feature store, an augmentation
 * service), so that the large elements need more than one worker even on
 * a 2-core machine, whose second core adds far less than a second worker's
 * worth of CPU. Defaults: 10,000 samples becoming 100,000 at 10 s, back at
 * 25 s, 40 s in all, K 8, U 60 (0.6 ms per small element, 6 ms per large
 * one), 5 ms steps, 4 MiB budget. Every 100 ms it samples the consumer's
 * stall (its own clock), the knobs and the buffered bytes. On stdout: one
 * JSON line per phase (stall after the change, from 2 s after it, the
 * seconds until the 1-s stall stays under 2%, the knobs at the end of the
 * phase) and a summary (peak buffered bytes against the budget). --plot
 * draws the run: stall, knobs, buffered MiB, on one time axis.
 */
#ifndef _POSIX_C_SOURCE
#define _POSIX_C_SOURCE 200809L
#endif
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#define SLUICE_EXPERIMENTAL
#include "sluice.h"

#define PERIOD 0.1
#define MAX_SAMPLES 4096
#define MAX_KNOBS 4

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static void sleep_s(double s)
{
    struct timespec ts = {(time_t)s, (long)((s - floor(s)) * 1e9)};
    nanosleep(&ts, NULL);
}

typedef struct run {
    /* the workload */
    int64_t samples;
    double factor, grow_at, shrink_at, seconds, step_s;
    int work;
    double wait_us; /* per 1,000 samples */
    double t0;
    /* the consumer's clock: seconds inside sl_next, and the call in progress */
    _Atomic double waited;
    _Atomic double in_call_since; /* 0: none */
    /* samples */
    int n;
    double t[MAX_SAMPLES], waited_at[MAX_SAMPLES], buffered[MAX_SAMPLES];
    double knob[MAX_KNOBS][MAX_SAMPLES];
    char knob_name[MAX_KNOBS][64];
    int nknobs;
    int64_t budget, peak;
    sl_iterator *it;
    atomic_bool stop;
} run;

static int64_t samples_now(const run *r)
{
    double t = now_s() - r->t0;
    return t >= r->grow_at && t < r->shrink_at ? (int64_t)((double)r->samples * r->factor)
                                               : r->samples;
}

static int gen(void *user, int64_t pass, sl_element **out)
{
    (void)pass;
    run *r = user;
    if (!out)
        return 0;
    if (now_s() - r->t0 >= r->seconds)
        return SL_EOF;
    int64_t n = samples_now(r);
    sl_element *el = sl_element_create(1);
    float *d = el ? sl_element_add_tensor(el, SL_FLOAT32, 1, &n) : NULL;
    if (!d) {
        sl_element_release(el);
        return sl_set_last_error(SL_ENOMEM, "bench_dynamic: out of memory");
    }
    for (int64_t i = 0; i < n; i++)
        d[i] = (float)(i & 1023) * (1.0f / 1024);
    *out = el;
    return 0;
}

/* work proportional to the samples: `work` multiply-adds each */
static int transform(sl_map_ctx *ctx, const sl_element *in, sl_element **out, void *user)
{
    (void)ctx;
    const run *r = user;
    const sl_tensor *t = sl_element_tensor(in, 0);
    int64_t n = sl_tensor_count(t);
    const float *x = sl_tensor_data(t);
    sl_element *el = sl_element_create(1);
    float *y = el ? sl_element_add_tensor(el, SL_FLOAT32, 1, &n) : NULL;
    if (!y) {
        sl_element_release(el);
        return sl_map_ctx_error(ctx, SL_ENOMEM, "out of memory");
    }
    for (int64_t i = 0; i < n; i++) {
        float v = x[i];
        for (int k = 0; k < r->work; k++)
            v = v * 0.999f + 0.001f;
        y[i] = v;
    }
    if (r->wait_us > 0)
        sleep_s(1e-6 * r->wait_us * (double)n / 1000);
    *out = el;
    return 0;
}

static double waited_now(run *r)
{
    double since = atomic_load(&r->in_call_since);
    return atomic_load(&r->waited) + (since > 0 ? now_s() - since : 0);
}

static void *sampler_main(void *arg)
{
    run *r = arg;
    double next = r->t0;
    while (!atomic_load(&r->stop) && r->n < MAX_SAMPLES) {
        next += PERIOD;
        double d = next - now_s();
        if (d > 0)
            sleep_s(d);
        int i = r->n;
        r->t[i] = now_s() - r->t0;
        r->waited_at[i] = waited_now(r);
        r->buffered[i] = (double)sl_iterator_stat(r->it, SL_STAT_BUFFERED_BYTES);
        sl_stats *st = sl_iterator_stats(r->it);
        int k = 0;
        for (int node = 0; st && node < sl_stats_nodes(st); node++)
            for (int j = 0; j < sl_stats_knobs(st, node) && k < MAX_KNOBS; j++, k++) {
                if (i == 0 || !r->knob_name[k][0])
                    snprintf(r->knob_name[k], sizeof r->knob_name[k], "%s.%s",
                             sl_stats_node_name(st, node), sl_stats_knob_name(st, node, j));
                r->knob[k][i] = (double)sl_stats_knob_value(st, node, j);
            }
        if (k > r->nknobs)
            r->nknobs = k;
        sl_stats_free(st);
        r->n = i + 1;
    }
    return NULL;
}

/* Stall fraction over samples (a, b]. */
static double stall_between(const run *r, int a, int b)
{
    if (b <= a)
        return NAN;
    return (r->waited_at[b] - r->waited_at[a]) / (r->t[b] - r->t[a]);
}

static int sample_at(const run *r, double t)
{
    int i = 0;
    while (i + 1 < r->n && r->t[i] < t)
        i++;
    return i;
}

/* Seconds after `from` until every 1-s window up to `to` stalls < 2%. */
static double recovery(const run *r, double from, double to)
{
    int a = sample_at(r, from), b = sample_at(r, to);
    int w = (int)lround(1.0 / PERIOD);
    double last_bad = from;
    for (int i = a + w; i <= b; i++)
        if (stall_between(r, i - w, i) >= 0.02)
            last_bad = r->t[i];
    return last_bad - from;
}

static void phase(const run *r, const char *name, double from, double to, int64_t samples)
{
    int a = sample_at(r, from), a2 = sample_at(r, from + 2), b = sample_at(r, to);
    printf("{\"bench\":\"dynamic\",\"phase\":\"%s\",\"from_s\":%.1f,\"to_s\":%.1f,"
           "\"samples_per_element\":%lld,\"element_kib\":%.0f,\"stall\":%.4f,"
           "\"stall_from_2s\":%.4f,\"recovered_after_s\":%.1f",
           name, from, to, (long long)samples, (double)samples * 4 / 1024,
           stall_between(r, a, b), stall_between(r, a2, b), recovery(r, from, to));
    for (int k = 0; k < r->nknobs; k++)
        printf(",\"%s\":%.0f", r->knob_name[k], r->knob[k][b]);
    double peak = 0;
    for (int i = a; i <= b; i++)
        peak = r->buffered[i] > peak ? r->buffered[i] : peak;
    printf(",\"peak_buffered_mib\":%.2f}\n", peak / 1048576);
}

/* ---- the picture ---- */

static void polyline(FILE *f, const run *r, const double *v, double x0, double w, double y0,
                     double h, double vmax, const char *colour, bool step)
{
    fprintf(f, "<polyline fill='none' stroke='%s' stroke-width='1.5' points='", colour);
    double prev = NAN;
    for (int i = 0; i < r->n; i++) {
        double x = x0 + w * r->t[i] / r->seconds;
        double y = y0 + h - h * (v[i] > vmax ? vmax : v[i]) / vmax;
        if (step && !isnan(prev))
            fprintf(f, "%.1f,%.1f ", x, prev);
        fprintf(f, "%.1f,%.1f ", x, y);
        prev = y;
    }
    fprintf(f, "'/>\n");
}

static void frame(FILE *f, const run *r, double x0, double w, double y0, double h, double vmax,
                  const char *title, const char *unit)
{
    fprintf(f, "<rect x='%.0f' y='%.0f' width='%.0f' height='%.0f' fill='none' stroke='#555'/>\n",
            x0, y0, w, h);
    fprintf(f, "<text x='%.0f' y='%.0f' font-size='13'>%s</text>\n", x0, y0 - 6, title);
    fprintf(f, "<text x='%.0f' y='%.0f' font-size='11' text-anchor='end'>%.4g%s</text>\n",
            x0 - 4, y0 + 10, vmax, unit);
    fprintf(f, "<text x='%.0f' y='%.0f' font-size='11' text-anchor='end'>0</text>\n", x0 - 4,
            y0 + h);
    double marks[2] = {r->grow_at, r->shrink_at};
    const char *what[2] = {"x10 samples", "back"};
    for (int m = 0; m < 2; m++) {
        double x = x0 + w * marks[m] / r->seconds;
        fprintf(f, "<line x1='%.1f' y1='%.0f' x2='%.1f' y2='%.0f' stroke='#999' "
                   "stroke-dasharray='4,3'/>\n", x, y0, x, y0 + h);
        fprintf(f, "<text x='%.1f' y='%.0f' font-size='10' fill='#666'>%s</text>\n", x + 3,
                y0 + 12, what[m]);
    }
}

static int plot(const run *r, const char *path)
{
    FILE *f = fopen(path, "w");
    if (!f) {
        perror(path);
        return -1;
    }
    const double x0 = 70, w = 760, h = 150, gap = 50;
    static double stall[MAX_SAMPLES], mib[MAX_SAMPLES];
    int win = (int)lround(1.0 / PERIOD);
    for (int i = 0; i < r->n; i++) {
        int a = i - win < 0 ? 0 : i - win;
        stall[i] = i > a ? 100 * stall_between(r, a, i) : 0;
        mib[i] = r->buffered[i] / 1048576;
    }
    fprintf(f, "<svg xmlns='http://www.w3.org/2000/svg' width='880' height='%.0f' "
               "font-family='DejaVu Sans, Helvetica, sans-serif'>\n<rect width='100%%' "
               "height='100%%' fill='white'/>\n", 3 * (h + gap) + 60);
    fprintf(f, "<text x='%.0f' y='24' font-size='15'>Autotune while elements grow %.0fx and "
               "shrink back (%lld to %lld samples per element)</text>\n", x0, r->factor,
            (long long)r->samples, (long long)((double)r->samples * r->factor));
    double y = 60;
    frame(f, r, x0, w, y, h, 20, "consumer stall over the last second", "%");
    fprintf(f, "<line x1='%.0f' x2='%.0f' y1='%.1f' y2='%.1f' stroke='#d62728' "
               "stroke-dasharray='2,2'/>\n", x0, x0 + w, y + h - h * 2 / 20, y + h - h * 2 / 20);
    polyline(f, r, stall, x0, w, y, h, 20, "#e6550d", false);
    y += h + gap;
    double kmax = 1;
    for (int k = 0; k < r->nknobs; k++)
        for (int i = 0; i < r->n; i++)
            kmax = r->knob[k][i] > kmax ? r->knob[k][i] : kmax;
    frame(f, r, x0, w, y, h, kmax, "knobs", "");
    const char *colours[MAX_KNOBS] = {"#1b9e77", "#7570b3", "#d95f02", "#e7298a"};
    for (int k = 0; k < r->nknobs; k++) {
        polyline(f, r, r->knob[k], x0, w, y, h, kmax, colours[k], true);
        fprintf(f, "<text x='%.0f' y='%.0f' font-size='11' fill='%s'>%s</text>\n",
                x0 + 200 + 180 * k, y - 6, colours[k], r->knob_name[k]);
    }
    y += h + gap;
    double bmax = (double)r->budget / 1048576 * 1.1;
    frame(f, r, x0, w, y, h, bmax, "buffered MiB (dashed: the RAM budget)", "");
    double yb = y + h - h * ((double)r->budget / 1048576) / bmax;
    fprintf(f, "<line x1='%.0f' x2='%.0f' y1='%.1f' y2='%.1f' stroke='#d62728' "
               "stroke-dasharray='2,2'/>\n", x0, x0 + w, yb, yb);
    polyline(f, r, mib, x0, w, y, h, bmax, "#2171b5", false);
    fprintf(f, "<text x='%.0f' y='%.0f' font-size='11' text-anchor='middle'>seconds (0 to "
               "%.0f)</text>\n</svg>\n", x0 + w / 2, y + h + 18, r->seconds);
    return fclose(f) ? -1 : 0;
}

int main(int argc, char **argv)
{
    static run r;
    r.samples = 10000;
    r.factor = 10;
    r.grow_at = 10;
    r.shrink_at = 25;
    r.seconds = 40;
    r.step_s = 0.005;
    r.work = 8;
    r.wait_us = 60;
    double budget_mib = 4;
    int threads = 0;
    const char *plot_path = NULL;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!v) {
            fprintf(stderr, "bench_dynamic: %s needs a value (see the comment at the top of "
                            "bench/dynamic.c)\n", a);
            return 2;
        }
        i++;
        if (!strcmp(a, "--samples"))
            r.samples = atoll(v);
        else if (!strcmp(a, "--factor"))
            r.factor = atof(v);
        else if (!strcmp(a, "--grow-at"))
            r.grow_at = atof(v);
        else if (!strcmp(a, "--shrink-at"))
            r.shrink_at = atof(v);
        else if (!strcmp(a, "--seconds"))
            r.seconds = atof(v);
        else if (!strcmp(a, "--step-ms"))
            r.step_s = atof(v) / 1000;
        else if (!strcmp(a, "--work"))
            r.work = atoi(v);
        else if (!strcmp(a, "--wait-us"))
            r.wait_us = atof(v);
        else if (!strcmp(a, "--budget-mib"))
            budget_mib = atof(v);
        else if (!strcmp(a, "--threads"))
            threads = atoi(v);
        else if (!strcmp(a, "--plot"))
            plot_path = v;
        else {
            fprintf(stderr, "bench_dynamic: unknown option %s\n", a);
            return 2;
        }
    }
    r.budget = (int64_t)(budget_mib * 1048576);
    sl_dataset *ds = sl_prefetch(sl_map(sl_from_generator(gen, &r, 0), "transform", transform,
                                        &r, SL_AUTOTUNE, 0),
                                 SL_AUTOTUNE);
    sl_options *o = sl_options_create();
    if (!ds || !o) {
        fprintf(stderr, "bench_dynamic: %s\n", sl_last_error());
        return 1;
    }
    sl_options_set(o, SL_OPT_RAM_BUDGET, r.budget);
    if (threads > 0)
        sl_options_set(o, SL_OPT_THREADS, threads);
    r.t0 = now_s();
    r.it = sl_iterator_create(ds, o);
    if (!r.it) {
        fprintf(stderr, "bench_dynamic: %s\n", sl_last_error());
        return 1;
    }
    pthread_t th;
    pthread_create(&th, NULL, sampler_main, &r);
    sl_element *el;
    int rc;
    int64_t elements = 0;
    for (;;) {
        double t = now_s();
        atomic_store(&r.in_call_since, t);
        rc = sl_next(r.it, &el);
        atomic_store(&r.in_call_since, 0.0);
        atomic_store(&r.waited, atomic_load(&r.waited) + now_s() - t);
        if (rc)
            break;
        sl_element_release(el);
        elements++;
        sleep_s(r.step_s); /* the training step */
    }
    atomic_store(&r.stop, true);
    pthread_join(th, NULL);
    r.peak = sl_iterator_stat(r.it, SL_STAT_PEAK_BUFFERED_BYTES);
    if (rc != SL_EOF)
        fprintf(stderr, "bench_dynamic: %s\n", sl_iterator_errmsg(r.it));
    phase(&r, "small", 0, r.grow_at, r.samples);
    phase(&r, "large", r.grow_at, r.shrink_at, (int64_t)((double)r.samples * r.factor));
    phase(&r, "small_again", r.shrink_at, r.seconds, r.samples);
    printf("{\"bench\":\"dynamic\",\"summary\":true,\"elements\":%lld,\"seconds\":%.1f,"
           "\"step_ms\":%.1f,\"work\":%d,\"wait_us\":%.0f,\"ram_budget_mib\":%.1f,\"peak_buffered_mib\":%.2f,"
           "\"peak_over_budget\":%s,\"cpus\":%d}\n",
           (long long)elements, r.seconds, r.step_s * 1000, r.work, r.wait_us, budget_mib,
           (double)r.peak / 1048576, r.peak > r.budget ? "true" : "false", sl_cpu_count());
    if (getenv("BENCH_DYNAMIC_SERIES")) /* one line a second, for a look in a terminal */
        for (int i = 10; i < r.n; i += 10) {
            fprintf(stderr, "%5.1f s  stall %5.1f%%  buffered %6.2f MiB ", r.t[i],
                    100 * stall_between(&r, i - 10, i), r.buffered[i] / 1048576);
            for (int k = 0; k < r.nknobs; k++)
                fprintf(stderr, " %s %.0f", r.knob_name[k], r.knob[k][i]);
            fputc('\n', stderr);
        }
    int bad = rc != SL_EOF;
    if (plot_path && plot(&r, plot_path))
        bad = 1;
    sl_iterator_free(r.it);
    sl_options_free(o);
    sl_dataset_release(ds);
    return bad;
}
