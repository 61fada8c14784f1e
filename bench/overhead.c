/*
 * Framework overhead and parallel speed-up.
 *
 * Case "overhead": range -> map(identity) -> batch(256) -> prefetch. The
 * callback does no work, so the time per element is what the framework
 * itself costs (task hand-off, element allocation, batching, the prefetch
 * ring), at 1 and 2 worker threads.
 *
 * Case "sync_chain": range -> skip -> shard -> filter -> take ->
 * assert_cardinality -> batch(256), all on the consumer's thread: what the
 * synchronous one-input ops cost per element (each passes every element
 * on), without a pool or a hand-off in the way.
 *
 * Case "map_speedup": a map whose callback burns 50 us of CPU on its own
 * thread's CPU clock (real work, not sleeping, so it only goes faster with
 * more cores), run at 1 and 2 threads interleaved so that noise from other
 * processes lands on both sides alike.
 *
 * One JSON object per line on stdout (and appended to --json FILE), a table
 * on stderr. Medians of --runs runs. Process CPU time is reported beside
 * wall time: a speed-up well under 2 with CPU use under 2 cores per second
 * means the machine was busy with something else; with CPU use near 2, the
 * framework itself is spending it.
 */
#ifndef _POSIX_C_SOURCE
#define _POSIX_C_SOURCE 200809L
#endif
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include "sluice.h"

#define OVERHEAD_BATCH 256
#define SPEEDUP_BATCH 64
#define CALLBACK_US 50
#define MAX_RUNS 1000

typedef struct config {
    int64_t elements;     /* case overhead */
    int64_t map_elements; /* case map_speedup */
    int runs;
    const char *json_path;
    int cpus;
} config;

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int64_t thread_cpu_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* User + system CPU of the whole process, all threads. */
static double process_cpu_s(void)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return (double)ru.ru_utime.tv_sec + (double)ru.ru_utime.tv_usec * 1e-6 +
           (double)ru.ru_stime.tv_sec + (double)ru.ru_stime.tv_usec * 1e-6;
}

typedef struct pass {
    double wall_s, cpu_s;
} pass;

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Sorts v in place. */
static double median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

static int identity(sl_map_ctx *ctx, const sl_element *in, sl_element **out, void *user)
{
    (void)ctx;
    (void)user;
    *out = sl_element_retain((sl_element *)in);
    return 0;
}

static int keep_all(sl_map_ctx *ctx, const sl_element *el, void *user)
{
    (void)ctx;
    (void)el;
    (void)user;
    return 1;
}

/* CPU time, not wall time: a descheduled worker does not count as working,
 * so the callback costs the same CPU whatever else runs on the machine. */
static int burn(sl_map_ctx *ctx, const sl_element *in, sl_element **out, void *user)
{
    (void)user;
    int64_t end = thread_cpu_ns() + CALLBACK_US * 1000;
    while (thread_cpu_ns() < end) {
    }
    sl_element *el = sl_element_create(1);
    if (!el || sl_element_add_int64(el, sl_tensor_int64(sl_element_tensor(in, 0)) + 1) < 0) {
        sl_element_release(el);
        return sl_map_ctx_error(ctx, SL_ENOMEM, "burn: out of memory");
    }
    *out = el;
    return 0;
}

static sl_dataset *pipeline(int64_t n, sl_map_fn fn, const char *name, int64_t batch)
{
    sl_dataset *ds = sl_range(0, n, 1);
    ds = sl_map(ds, name, fn, NULL, SL_AUTOTUNE, 0);
    ds = sl_batch(ds, batch, 0);
    ds = sl_prefetch(ds, SL_AUTOTUNE);
    if (!ds)
        fprintf(stderr, "overhead: building the pipeline: %s\n", sl_last_error());
    return ds;
}

static sl_dataset *sync_chain(int64_t n)
{
    sl_dataset *ds = sl_range(0, n + 1, 1);
    ds = sl_skip(ds, 1);
    ds = sl_shard(ds, 1, 0);
    ds = sl_filter(ds, "keep_all", keep_all, NULL);
    ds = sl_take(ds, n);
    ds = sl_assert_cardinality(ds, n);
    ds = sl_batch(ds, OVERHEAD_BATCH, 0);
    if (!ds)
        fprintf(stderr, "overhead: building the sync chain: %s\n", sl_last_error());
    return ds;
}

/* One pass with a private runtime of `threads` workers, timed from
 * iterator creation to the end; checks that every element came through.
 * 0, or -1 after printing why. */
static int timed_pass(sl_dataset *ds, int threads, int64_t expect, pass *p)
{
    sl_options *opts = sl_options_create();
    if (!opts || sl_options_set(opts, SL_OPT_THREADS, threads) < 0) {
        fprintf(stderr, "overhead: options: %s\n", sl_last_error());
        sl_options_free(opts);
        return -1;
    }
    double c0 = process_cpu_s(), t0 = now_s();
    sl_iterator *it = sl_iterator_create(ds, opts);
    sl_options_free(opts);
    if (!it) {
        fprintf(stderr, "overhead: iterator: %s\n", sl_last_error());
        return -1;
    }
    int64_t got = 0;
    sl_element *batch;
    int rc;
    while ((rc = sl_next(it, &batch)) == 0) {
        got += sl_tensor_count(sl_element_tensor(batch, 0));
        sl_element_release(batch);
    }
    p->wall_s = now_s() - t0;
    p->cpu_s = process_cpu_s() - c0;
    if (rc < 0)
        fprintf(stderr, "overhead: %s\n", sl_iterator_errmsg(it));
    else if (got != expect)
        fprintf(stderr, "overhead: got %lld elements, expected %lld\n", (long long)got,
                (long long)expect);
    sl_iterator_free(it);
    return rc < 0 || got != expect ? -1 : 0;
}

static void emit(const config *cfg, const char *line)
{
    printf("%s\n", line);
    fflush(stdout);
    if (!cfg->json_path)
        return;
    FILE *f = fopen(cfg->json_path, "a");
    if (!f) {
        fprintf(stderr, "overhead: %s: %s\n", cfg->json_path, strerror(errno));
        return;
    }
    fprintf(f, "%s\n", line);
    fclose(f);
}

static int bench_overhead(const config *cfg, const char *name, int threads)
{
    bool sync = !strcmp(name, "sync_chain");
    sl_dataset *ds = sync ? sync_chain(cfg->elements)
                          : pipeline(cfg->elements, identity, "identity", OVERHEAD_BATCH);
    if (!ds)
        return -1;
    double ns[MAX_RUNS], cpu_ns[MAX_RUNS];
    for (int r = 0; r < cfg->runs; r++) {
        pass p;
        if (timed_pass(ds, threads, cfg->elements, &p) < 0) {
            sl_dataset_release(ds);
            return -1;
        }
        ns[r] = p.wall_s * 1e9 / (double)cfg->elements;
        cpu_ns[r] = p.cpu_s * 1e9 / (double)cfg->elements;
    }
    sl_dataset_release(ds);
    double med = median(ns, cfg->runs), cpu = median(cpu_ns, cfg->runs);
    char line[512];
    snprintf(line, sizeof line,
             "{\"bench\":\"%s\",\"threads\":%d,\"cpus\":%d,\"elements\":%lld,"
             "\"elements_per_s\":%.0f,\"ns_per_element\":%.1f,\"runs\":%d,"
             "\"min_ns_per_element\":%.1f,\"max_ns_per_element\":%.1f,"
             "\"cpu_ns_per_element\":%.1f}",
             name, threads, cfg->cpus, (long long)cfg->elements, 1e9 / med, med, cfg->runs,
             ns[0], ns[cfg->runs - 1], cpu);
    emit(cfg, line);
    fprintf(stderr, "%-12s threads %d  %10.0f elements/s  %6.1f ns/element  "
            "(min %.1f, max %.1f; CPU %.1f ns/element)\n", name, threads, 1e9 / med, med, ns[0],
            ns[cfg->runs - 1], cpu);
    return 0;
}

static int bench_speedup(const config *cfg)
{
    sl_dataset *ds = pipeline(cfg->map_elements, burn, "burn", SPEEDUP_BATCH);
    if (!ds)
        return -1;
    /* interleaved, so that a burst of outside load hits both sides */
    double rate[2][MAX_RUNS], cores[2][MAX_RUNS];
    for (int r = 0; r < cfg->runs; r++)
        for (int k = 0; k < 2; k++) {
            pass p;
            if (timed_pass(ds, k + 1, cfg->map_elements, &p) < 0) {
                sl_dataset_release(ds);
                return -1;
            }
            rate[k][r] = (double)cfg->map_elements / p.wall_s;
            cores[k][r] = p.cpu_s / p.wall_s;
        }
    sl_dataset_release(ds);
    double t1 = median(rate[0], cfg->runs), t2 = median(rate[1], cfg->runs);
    double c1 = median(cores[0], cfg->runs), c2 = median(cores[1], cfg->runs);
    char line[512];
    snprintf(line, sizeof line,
             "{\"bench\":\"map_speedup\",\"cpus\":%d,\"callback_us\":%d,\"elements\":%lld,"
             "\"runs\":%d,\"t1_elements_per_s\":%.0f,\"t2_elements_per_s\":%.0f,"
             "\"speedup\":%.3f,\"t1_cpu_cores\":%.2f,\"t2_cpu_cores\":%.2f}",
             cfg->cpus, CALLBACK_US, (long long)cfg->map_elements, cfg->runs, t1, t2, t2 / t1,
             c1, c2);
    emit(cfg, line);
    fprintf(stderr, "map_speedup  %d us callback  1 thread %.0f/s  2 threads %.0f/s  "
            "speedup %.2fx (ideal %.0f/s per thread)  CPU cores busy %.2f / %.2f\n",
            CALLBACK_US, t1, t2, t2 / t1, 1e6 / CALLBACK_US, c1, c2);
    return 0;
}

static void usage(void)
{
    fprintf(stderr, "usage: bench_overhead [--elements N] [--map-elements M] [--runs R] "
            "[--json FILE]\n"
            "  --elements N      elements of the overhead case (default 2000000)\n"
            "  --map-elements M  elements of the 50 us map case (default 20000)\n"
            "  --runs R          runs per measurement, the median is reported (default 5)\n"
            "  --json FILE       also append the JSON lines to FILE\n");
}

static int parse_args(int argc, char **argv, config *cfg)
{
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        char *end = NULL;
        if (!strcmp(a, "--json") && v) {
            cfg->json_path = v;
        } else if (!strcmp(a, "--elements") && v) {
            cfg->elements = strtoll(v, &end, 10);
        } else if (!strcmp(a, "--map-elements") && v) {
            cfg->map_elements = strtoll(v, &end, 10);
        } else if (!strcmp(a, "--runs") && v) {
            cfg->runs = (int)strtol(v, &end, 10);
        } else {
            usage();
            return -1;
        }
        if (end && *end) {
            fprintf(stderr, "overhead: %s: not a number: %s\n", a, v);
            return -1;
        }
        i++;
    }
    if (cfg->elements < 1 || cfg->map_elements < 1 || cfg->runs < 1 || cfg->runs > MAX_RUNS) {
        fprintf(stderr, "overhead: need elements >= 1 and 1 <= runs <= %d\n", MAX_RUNS);
        return -1;
    }
    return 0;
}

int main(int argc, char **argv)
{
    config cfg = {.elements = 2000000, .map_elements = 20000, .runs = 5};
    if (parse_args(argc, argv, &cfg) < 0)
        return 2;
    cfg.cpus = sl_cpu_count();
    fprintf(stderr, "sluice %s, %d CPUs, %d runs each (median; min and max over runs)\n",
            sl_version_string(), cfg.cpus, cfg.runs);
    if (bench_overhead(&cfg, "overhead", 1) < 0 || bench_overhead(&cfg, "overhead", 2) < 0 ||
        bench_overhead(&cfg, "sync_chain", 1) < 0 || bench_speedup(&cfg) < 0)
        return 1;
    return 0;
}
