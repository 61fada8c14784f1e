/* The autotune controller on real pipelines: a map whose callback burns
 * ~200 us of thread CPU time per element. The CPU budget bounds the busy
 * workers (one iterator, and two sharing a runtime), the parallelism grows
 * when the budget allows, the RAM budget bounds what is buffered, and the
 * decision log gives a reason for each change. Asserts what the controller
 * may and may not do, never how fast anything runs. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "testutil.h"

#define MIB (1 << 20)

typedef struct work {
    int64_t cpu_ns; /* thread CPU time per element */
    size_t bytes;   /* output: a uint8 tensor of this size (0: the input) */
    atomic_int active, max_active;
} work;

static int64_t clock_ns(clockid_t c)
{
    struct timespec ts;
    clock_gettime(c, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static void sleep_ms(int ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000};
    nanosleep(&ts, NULL);
}

static int burn(sl_map_ctx *ctx, const sl_element *in, sl_element **out, void *user)
{
    (void)ctx;
    work *w = user;
    int a = atomic_fetch_add(&w->active, 1) + 1;
    int m = atomic_load(&w->max_active);
    while (a > m && !atomic_compare_exchange_weak(&w->max_active, &m, a)) {
    }
    int64_t end = clock_ns(CLOCK_THREAD_CPUTIME_ID) + w->cpu_ns;
    while (clock_ns(CLOCK_THREAD_CPUTIME_ID) < end) {
    }
    atomic_fetch_sub(&w->active, 1);
    if (!w->bytes) {
        *out = sl_element_retain((sl_element *)in);
        return 0;
    }
    sl_element *el = sl_element_create(1);
    int64_t shape[1] = {(int64_t)w->bytes};
    unsigned char *d = el ? sl_element_add_tensor(el, SL_UINT8, 1, shape) : NULL;
    if (!d) {
        sl_element_release(el);
        return SL_ENOMEM;
    }
    d[0] = 1;
    *out = el;
    return 0;
}

/* range -> map(burn, SL_AUTOTUNE) -> prefetch(SL_AUTOTUNE) */
static sl_dataset *pipeline(work *w, int64_t n)
{
    sl_dataset *ds = sl_range(0, n, 1);
    ds = sl_map(ds, "burn", burn, w, SL_AUTOTUNE, 0);
    ds = sl_prefetch(ds, SL_AUTOTUNE);
    assert_non_null(ds);
    return ds;
}

static sl_options *options(int threads, int cpu_budget)
{
    sl_options *o = tu_opts(threads, 0);
    assert_int_equal(sl_options_set(o, SL_OPT_CPU_BUDGET, cpu_budget), 0);
    return o;
}

/* The value of knob `knob` of the first node whose name starts with
 * `node`; -1 if there is none. *autotuned (if not NULL): whether the
 * controller moves it. */
static int64_t knob(const sl_iterator *it, const char *node, const char *knob, int *autotuned)
{
    sl_stats *s = sl_iterator_stats(it);
    assert_non_null(s);
    int64_t v = -1;
    for (int i = 0; i < sl_stats_nodes(s) && v < 0; i++) {
        if (strncmp(sl_stats_node_name(s, i), node, strlen(node)))
            continue;
        for (int k = 0; k < sl_stats_knobs(s, i); k++)
            if (!strcmp(sl_stats_knob_name(s, i, k), knob)) {
                v = sl_stats_knob_value(s, i, k);
                if (autotuned)
                    *autotuned = sl_stats_knob_autotuned(s, i, k);
                break;
            }
    }
    sl_stats_free(s);
    return v;
}

/* Pulls from it for up to `ms` (or to the end), sampling the map's
 * parallelism every few elements; returns the largest value seen. Stops
 * early once it exceeds `stop_above` (0: never). */
static int64_t run_sampling(sl_iterator *it, int ms, int64_t stop_above)
{
    int64_t end = clock_ns(CLOCK_MONOTONIC) + (int64_t)ms * 1000000, most = 0;
    sl_element *el;
    for (int64_t n = 0; clock_ns(CLOCK_MONOTONIC) < end; n++) {
        int rc = sl_next(it, &el);
        if (rc == SL_EOF)
            break;
        assert_int_equal(rc, 0);
        sl_element_release(el);
        if (n % 16 == 0) {
            int64_t p = knob(it, "map", "parallelism", NULL);
            assert_true(p >= 1);
            most = p > most ? p : most;
            if (stop_above && most > stop_above)
                break;
        }
    }
    return most;
}

/* A CPU budget of 1 on a pool of 4 threads: the consumer stalls on a
 * CPU-bound map the whole time, yet one worker at most is ever busy and
 * the knob stays at 1. */
static void test_cpu_budget_one(void **state)
{
    (void)state;
    work w = {.cpu_ns = 200000};
    sl_dataset *ds = pipeline(&w, 1 << 30);
    sl_options *o = options(4, 1);
    sl_iterator *it = sl_iterator_create(ds, o);
    assert_non_null(it);
    int64_t most = run_sampling(it, 1500, 0);
    sl_iterator_free(it);
    printf("budget 1: parallelism at most %lld, busy workers at most %d\n", (long long)most,
           atomic_load(&w.max_active));
    assert_int_equal(most, 1);
    assert_int_equal(atomic_load(&w.max_active), 1);
    sl_options_free(o);
    sl_dataset_release(ds);
}

/* With a budget of 2 the same map gets a second worker, and no third. */
static void test_cpu_budget_two(void **state)
{
    (void)state;
    work w = {.cpu_ns = 200000};
    sl_dataset *ds = pipeline(&w, 1 << 30);
    sl_options *o = options(4, 2);
    sl_iterator *it = sl_iterator_create(ds, o);
    assert_non_null(it);
    int64_t most = run_sampling(it, 4000, 1);
    /* keep going a little at the new value: still within the budget */
    int64_t later = run_sampling(it, 300, 0);
    sl_iterator_free(it);
    printf("budget 2: parallelism reached %lld, busy workers at most %d\n",
           (long long)(most > later ? most : later), atomic_load(&w.max_active));
    assert_int_equal(most, 2);
    assert_true(later <= 2);
    assert_true(atomic_load(&w.max_active) <= 2);
    sl_options_free(o);
    sl_dataset_release(ds);
}

typedef struct consumer {
    sl_iterator *it;
    atomic_bool *stop;
} consumer;

static void *consume(void *arg)
{
    consumer *c = arg;
    sl_element *el;
    while (!atomic_load(c->stop) && sl_next(c->it, &el) == 0)
        sl_element_release(el);
    return NULL;
}

/* Two iterators on one runtime of 4 threads share a budget of 3: their
 * parallelism summed never exceeds it, nor do the busy workers. */
static void test_shared_runtime_budget(void **state)
{
    (void)state;
    work w = {.cpu_ns = 200000};
    sl_runtime *rt = sl_runtime_create(4);
    assert_non_null(rt);
    sl_options *o = options(0, 3);
    assert_int_equal(sl_options_set_runtime(o, rt), 0);
    sl_dataset *ds = pipeline(&w, 1 << 30);
    atomic_bool stop = false;
    consumer c[2];
    pthread_t th[2];
    for (int i = 0; i < 2; i++) {
        c[i] = (consumer){sl_iterator_create(ds, o), &stop};
        assert_non_null(c[i].it);
        assert_int_equal(pthread_create(&th[i], NULL, consume, &c[i]), 0);
    }
    int64_t most = 0;
    for (int n = 0; n < 150; n++) {
        sleep_ms(10);
        int64_t sum = knob(c[0].it, "map", "parallelism", NULL) +
                      knob(c[1].it, "map", "parallelism", NULL);
        most = sum > most ? sum : most;
    }
    atomic_store(&stop, true);
    for (int i = 0; i < 2; i++) {
        pthread_join(th[i], NULL);
        sl_iterator_free(c[i].it);
    }
    printf("shared runtime, budget 3: parallelism summed at most %lld, busy workers at most %d\n",
           (long long)most, atomic_load(&w.max_active));
    assert_true(most >= 2 && most <= 3);
    assert_true(atomic_load(&w.max_active) <= 3);
    sl_dataset_release(ds);
    sl_options_free(o);
    sl_runtime_free(rt);
}

/* Two iterators that start warm, at the parallelism an earlier one
 * learned alone (3, the whole budget), on one runtime: the one that claims
 * second gets only what is left (its floor of 1 whatever the budget), so
 * from their first ticks on they hold at most the budget and that floor,
 * not twice the budget. */
static void test_warm_iterators_share_budget(void **state)
{
    (void)state;
    work w = {.cpu_ns = 200000};
    sl_runtime *rt = sl_runtime_create(4);
    sl_options *o = options(0, 3);
    assert_int_equal(sl_options_set_runtime(o, rt), 0);
    sl_dataset *ds = pipeline(&w, 1 << 30);
    sl_iterator *it = sl_iterator_create(ds, o);
    assert_int_equal(run_sampling(it, 4000, 2), 3);
    sl_iterator_free(it);
    atomic_bool stop = false;
    consumer c[2];
    pthread_t th[2];
    for (int i = 0; i < 2; i++) {
        c[i] = (consumer){sl_iterator_create(ds, o), &stop};
        assert_non_null(c[i].it);
        /* warm (the second may have been cut already at its first tick) */
        if (i == 0)
            assert_int_equal(knob(c[i].it, "map", "parallelism", NULL), 3);
        assert_int_equal(pthread_create(&th[i], NULL, consume, &c[i]), 0);
    }
    sleep_ms(300);
    int64_t most = 0;
    for (int n = 0; n < 60; n++) {
        sleep_ms(10);
        int64_t sum = knob(c[0].it, "map", "parallelism", NULL) +
                      knob(c[1].it, "map", "parallelism", NULL);
        most = sum > most ? sum : most;
    }
    atomic_store(&stop, true);
    for (int i = 0; i < 2; i++) {
        pthread_join(th[i], NULL);
        sl_iterator_free(c[i].it);
    }
    printf("two warm iterators, budget 3: parallelism summed at most %lld\n", (long long)most);
    assert_true(most <= 4);
    sl_dataset_release(ds);
    sl_options_free(o);
    sl_runtime_free(rt);
}

/* A RAM budget of 4 MiB with 1 MiB elements and a consumer that pauses now
 * and then (so a deeper buffer would help): what is buffered never exceeds
 * the budget by more than one element per buffering node. */
static void test_ram_budget(void **state)
{
    (void)state;
    work w = {.cpu_ns = 50000, .bytes = MIB};
    sl_dataset *ds = pipeline(&w, 300);
    sl_options *o = options(2, 2);
    assert_int_equal(sl_options_set(o, SL_OPT_RAM_BUDGET, 4 * MIB), 0);
    sl_iterator *it = sl_iterator_create(ds, o);
    assert_non_null(it);
    sl_element *el;
    int rc, n = 0;
    while ((rc = sl_next(it, &el)) == 0) {
        sl_element_release(el);
        if (++n % 10 == 0)
            sleep_ms(20);
    }
    assert_int_equal(rc, SL_EOF);
    assert_int_equal(n, 300);
    int64_t peak = sl_iterator_stat(it, SL_STAT_PEAK_BUFFERED_BYTES);
    int64_t depth = knob(it, "prefetch", "depth", NULL);
    sl_iterator_free(it);
    printf("ram budget 4 MiB: peak buffered %.2f MiB, prefetch depth %lld\n",
           (double)peak / MIB, (long long)depth);
    /* two buffering nodes (map, prefetch); an element is 1 MiB plus its
     * header */
    assert_true(peak <= 4 * MIB + 2 * (MIB + 4096));
    sl_options_free(o);
    sl_dataset_release(ds);
}

#define MAX_LINES 64

typedef struct captured {
    pthread_mutex_t mu;
    int autotune_lines;
    char lines[MAX_LINES][256];
} captured;

static void capture(void *user, sl_log_level level, const char *msg)
{
    (void)level;
    captured *c = user;
    pthread_mutex_lock(&c->mu);
    if (!strncmp(msg, "autotune: ", 10)) {
        if (c->autotune_lines < MAX_LINES)
            snprintf(c->lines[c->autotune_lines], sizeof c->lines[0], "%s", msg);
        c->autotune_lines++;
    }
    pthread_mutex_unlock(&c->mu);
}

/* The first captured line holding all of `a` and `b`, or NULL. */
static const char *find_line(const captured *c, const char *a, const char *b)
{
    for (int i = 0; i < c->autotune_lines && i < MAX_LINES; i++)
        if (strstr(c->lines[i], a) && strstr(c->lines[i], b))
            return c->lines[i];
    return NULL;
}

/* SL_OPT_AUTOTUNE_LOG: every change is logged with its reason, whatever
 * the log level; the number of lines matches the knob-change count. */
static void test_decision_log(void **state)
{
    (void)state;
    captured cap = {.mu = PTHREAD_MUTEX_INITIALIZER};
    sl_set_log_callback(capture, &cap);
    sl_set_log_level(SL_LOG_WARN);
    work w = {.cpu_ns = 200000};
    sl_dataset *ds = pipeline(&w, 1 << 30);
    sl_options *o = options(4, 2);
    assert_int_equal(sl_options_set(o, SL_OPT_AUTOTUNE_LOG, 1), 0);
    sl_iterator *it = sl_iterator_create(ds, o);
    assert_non_null(it);
    int64_t most = run_sampling(it, 4000, 1);
    /* a line is logged after its change is counted: count the lines first,
     * once the first (seen in `most`) has had time to land on a loaded
     * machine */
    int lines = 0;
    for (int waited = 0; waited < 2000; waited++) {
        pthread_mutex_lock(&cap.mu);
        lines = cap.autotune_lines;
        pthread_mutex_unlock(&cap.mu);
        if (lines >= 1)
            break;
        tu_sleep_us(1000);
    }
    sl_stats *s = sl_iterator_stats(it);
    assert_non_null(s);
    double changes = sl_stats_global(s, SL_GLOBAL_KNOB_CHANGES);
    sl_stats_free(s);
    sl_iterator_free(it);
    sl_set_log_callback(NULL, NULL);
    for (int i = 0; i < cap.autotune_lines && i < MAX_LINES; i++)
        printf("decision log: %s\n", cap.lines[i]);
    assert_true(most > 1);
    /* one line per change, each with a reason after the values */
    assert_true(lines >= 1 && lines <= changes);
    for (int i = 0; i < cap.autotune_lines && i < MAX_LINES; i++)
        assert_true(strlen(strstr(cap.lines[i], " -> ")) > 10);
    const char *grew = find_line(&cap, "autotune: map(burn).parallelism 1 -> 2: ", "busy");
    assert_non_null(grew); /* "CPU-bound: 0.9 of 1 workers busy, ..." */
    sl_options_free(o);
    sl_dataset_release(ds);
}

/* SL_OPT_AUTOTUNE = 0: the knobs keep their documented defaults, nothing
 * moves them, nothing is logged. */
static void test_autotune_off(void **state)
{
    (void)state;
    captured cap = {.mu = PTHREAD_MUTEX_INITIALIZER};
    sl_set_log_callback(capture, &cap);
    work w = {.cpu_ns = 200000};
    sl_dataset *ds = pipeline(&w, 1 << 30);
    sl_options *o = options(4, 2);
    assert_int_equal(sl_options_set(o, SL_OPT_AUTOTUNE, 0), 0);
    assert_int_equal(sl_options_set(o, SL_OPT_AUTOTUNE_LOG, 1), 0);
    sl_iterator *it = sl_iterator_create(ds, o);
    assert_non_null(it);
    run_sampling(it, 500, 0);
    int tuned = -1;
    int64_t p = knob(it, "map", "parallelism", &tuned);
    sl_stats *s = sl_iterator_stats(it);
    double changes = sl_stats_global(s, SL_GLOBAL_KNOB_CHANGES);
    sl_stats_free(s);
    sl_iterator_free(it);
    sl_set_log_callback(NULL, NULL);
    assert_int_equal(p, 8); /* 2 x runtime threads */
    assert_int_equal(tuned, 0);
    assert_true(changes == 0);
    assert_int_equal(cap.autotune_lines, 0);
    sl_options_free(o);
    sl_dataset_release(ds);
}

/* The next iterator of a dataset starts where the last one's controller
 * ended (one iterator per epoch, as training loops make them), on the
 * same threads and CPU budget; under other options, or on another
 * dataset, it starts cold. */
static void test_next_iterator_starts_warm(void **state)
{
    (void)state;
    work w = {.cpu_ns = 200000};
    sl_dataset *ds = pipeline(&w, 1 << 30);
    sl_options *o = options(2, 2), *other = options(3, 2);
    sl_iterator *it = sl_iterator_create(ds, o);
    assert_int_equal(knob(it, "map", "parallelism", NULL), 1); /* the first starts cold */
    assert_int_equal(run_sampling(it, 4000, 1), 2);
    sl_iterator_free(it);
    it = sl_iterator_create(ds, o);
    assert_int_equal(knob(it, "map", "parallelism", NULL), 2); /* before its first tick */
    run_sampling(it, 300, 0);
    sl_iterator_free(it);
    it = sl_iterator_create(ds, other);
    assert_int_equal(knob(it, "map", "parallelism", NULL), 1);
    sl_iterator_free(it);
    sl_dataset *fresh = pipeline(&w, 1 << 30);
    it = sl_iterator_create(fresh, o);
    assert_int_equal(knob(it, "map", "parallelism", NULL), 1);
    sl_iterator_free(it);
    sl_dataset_release(fresh);
    sl_options_free(o);
    sl_options_free(other);
    sl_dataset_release(ds);
}

/* Iterators freed while their controller is mid-tick or waiting, many
 * times: stop is prompt and leaves nothing behind. */
static void test_start_stop(void **state)
{
    (void)state;
    work w = {.cpu_ns = 20000};
    sl_dataset *ds = pipeline(&w, 1 << 30);
    sl_options *o = options(2, 2);
    int64_t t0 = clock_ns(CLOCK_MONOTONIC);
    for (int i = 0; i < 20; i++) {
        sl_iterator *it = sl_iterator_create(ds, o);
        assert_non_null(it);
        sl_element *el;
        for (int k = 0; k < i * 5; k++) {
            assert_int_equal(sl_next(it, &el), 0);
            sl_element_release(el);
        }
        sl_iterator_free(it);
    }
    /* a controller that slept out its tick would take 20 x 50 ms at least */
    printf("20 iterators created and freed in %.0f ms\n",
           (double)(clock_ns(CLOCK_MONOTONIC) - t0) / 1e6);
    sl_options_free(o);
    sl_dataset_release(ds);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_cpu_budget_one),
        cmocka_unit_test(test_cpu_budget_two),
        cmocka_unit_test(test_shared_runtime_budget),
        cmocka_unit_test(test_ram_budget),
        cmocka_unit_test(test_decision_log),
        cmocka_unit_test(test_autotune_off),
        cmocka_unit_test(test_next_iterator_starts_warm),
        cmocka_unit_test(test_warm_iterators_share_budget),
        cmocka_unit_test(test_start_stop),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
