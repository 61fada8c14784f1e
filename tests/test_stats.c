/* sl_iterator_stats: one entry per node across passes with elements counted
 * once, pipeline order, consumer stall and step, busy fractions, bytes held
 * against the global count, knobs and their autotune flags, the fused image
 * node counting images, reads, JSON, snapshots taken while the pipeline
 * runs, SLUICE_LOG categories, bad arguments. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "graph/node.h"
#include "jpegutil.h"
#include "jsoncheck.h"
#include "iterator/iterator.h"
#include "obs/obs.h"
#include "testutil.h"

/* A 64 KiB element. */
static int big(sl_map_ctx *ctx, const sl_element *in, sl_element **out, void *user)
{
    (void)ctx, (void)in, (void)user;
    sl_element *el = sl_element_create(1);
    int64_t shape[1] = {65536};
    if (!el || !sl_element_add_tensor(el, SL_UINT8, 1, shape)) {
        sl_element_release(el);
        return SL_ENOMEM;
    }
    *out = el;
    return 0;
}

static sl_options *opts(int threads, int autotune)
{
    sl_options *o = tu_opts(threads, 0);
    assert_int_equal(sl_options_set(o, SL_OPT_AUTOTUNE, autotune), 0);
    return o;
}

static int64_t drain(sl_iterator *it, long sleep_per_element_us)
{
    sl_element *el;
    int rc;
    int64_t n = 0;
    while ((rc = sl_next(it, &el)) == 0) {
        sl_element_release(el);
        n++;
        if (sleep_per_element_us)
            tu_sleep_us(sleep_per_element_us);
    }
    assert_int_equal(rc, SL_EOF);
    return n;
}

static int find(const sl_stats *s, const char *name)
{
    int found = -1;
    for (int i = 0; i < sl_stats_nodes(s); i++)
        if (!strcmp(sl_stats_node_name(s, i), name)) {
            assert_int_equal(found, -1); /* one entry per node */
            found = i;
        }
    assert_true(found >= 0);
    return found;
}

static void test_elements_once_across_passes(void **state)
{
    (void)state;
    sl_dataset *ds = sl_map(sl_range(0, 100, 1), "id", tu_identity, NULL, 2, 0);
    ds = sl_repeat(sl_prefetch(ds, 2), 3);
    assert_non_null(ds);
    sl_options *o = opts(2, 0);
    sl_iterator *it = sl_iterator_create(ds, o);
    assert_non_null(it);
    assert_int_equal(drain(it, 0), 300);
    sl_stats *s = sl_iterator_stats(it);
    assert_non_null(s);
    /* one entry per node, not one per pass; source first, root last */
    assert_int_equal(sl_stats_nodes(s), 4);
    const char *order[] = {"range", "map(id)", "prefetch", "repeat"};
    for (int i = 0; i < 4; i++) {
        assert_string_equal(sl_stats_node_name(s, i), order[i]);
        assert_true(sl_stats_node(s, i, SL_NODE_ELEMENTS) == 300);
    }
    assert_true(sl_iterator_stat(it, SL_STAT_ELEMENTS) == 300);
    /* everything consumed: nothing held */
    for (int i = 0; i < 4; i++)
        assert_true(sl_stats_node(s, i, SL_NODE_BYTES_HELD) == 0);
    /* the map's buffer was sampled at its takes */
    int m = find(s, "map(id)");
    assert_true(sl_stats_node(s, m, SL_NODE_CAPACITY) >= 1);
    double empty = sl_stats_node(s, m, SL_NODE_EMPTY);
    assert_true(empty >= 0 && empty <= 1);
    sl_stats_free(s);
    sl_iterator_free(it);
    sl_options_free(o);
    sl_dataset_release(ds);
}

static void test_stall_when_the_pipeline_is_slow(void **state)
{
    (void)state;
    int us = 2000;
    sl_dataset *ds = sl_map(sl_range(0, 100, 1), "slow", tu_spin, &us, 2, 0);
    sl_options *o = opts(2, 0);
    sl_iterator *it = sl_iterator_create(ds, o);
    assert_non_null(it);
    drain(it, 0);
    sl_stats *s = sl_iterator_stats(it);
    double stall = sl_stats_global(s, SL_GLOBAL_STALL_FRACTION);
    int m = find(s, "map(slow)");
    double busy = sl_stats_node(s, m, SL_NODE_BUSY);
    print_message("slow map: stall %.3f, map busy %.3f, empty %.3f\n", stall, busy,
                  sl_stats_node(s, m, SL_NODE_EMPTY));
    assert_true(stall > 0.5 && stall <= 1.0);
    /* both workers tu_spin most of the time (not all of it: each task waits
     * for the producer's wake-up, which a loaded machine delays) */
    assert_true(busy > 0.25 && busy <= 1.0);
    /* the two workers finish about together: the consumer waits for one
     * chunk and finds the next one ready */
    assert_true(sl_stats_node(s, m, SL_NODE_EMPTY) > 0.2);
    /* a synchronous node measures no work of its own */
    assert_true(sl_stats_node(s, find(s, "range"), SL_NODE_BUSY) == 0);
    sl_stats_free(s);
    sl_iterator_free(it);
    sl_options_free(o);
    sl_dataset_release(ds);
}

static void test_step_when_the_consumer_is_slow(void **state)
{
    (void)state;
    sl_dataset *ds = sl_map(sl_range(0, 150, 1), "id", tu_identity, NULL, 2, 0);
    ds = sl_prefetch(ds, 4);
    sl_options *o = opts(2, 0);
    sl_iterator *it = sl_iterator_create(ds, o);
    assert_non_null(it);
    drain(it, 2000);
    sl_stats *s = sl_iterator_stats(it);
    double stall = sl_stats_global(s, SL_GLOBAL_STALL_FRACTION);
    double step = sl_stats_global(s, SL_GLOBAL_STEP_SECONDS);
    print_message("slow consumer: stall %.4f, step %.3f ms\n", stall, 1e3 * step);
    /* well under the slow-map case's > 0.5; not near 0 on a loaded machine,
     * where the first elements and late wake-ups count as stall */
    assert_true(stall >= 0 && stall < 0.35);
    assert_true(step >= 0.0019 && step < 0.5);
    double wall = sl_stats_global(s, SL_GLOBAL_WALL_SECONDS);
    assert_true(wall >= 150 * 0.002);
    int p = find(s, "prefetch");
    /* the prefetch was mostly full when the consumer came */
    assert_true(sl_stats_node(s, p, SL_NODE_OCCUPANCY) > 1);
    assert_true(sl_stats_node(s, p, SL_NODE_EMPTY) < 0.5);
    sl_stats_free(s);
    sl_iterator_free(it);
    sl_options_free(o);
    sl_dataset_release(ds);
}

static double node_bytes(const sl_stats *s)
{
    double sum = 0;
    for (int i = 0; i < sl_stats_nodes(s); i++)
        sum += sl_stats_node(s, i, SL_NODE_BYTES_HELD);
    return sum;
}

static void test_bytes_held_add_up(void **state)
{
    (void)state;
    sl_dataset *ds = sl_prefetch(sl_map(sl_range(0, 1000, 1), "big", big, NULL, 2, 0), 8);
    sl_options *o = opts(2, 0);
    int64_t budget = 4 << 20;
    assert_int_equal(sl_options_set(o, SL_OPT_RAM_BUDGET, budget), 0);
    sl_iterator *it = sl_iterator_create(ds, o);
    assert_non_null(it);
    sl_element *el;
    assert_int_equal(sl_next(it, &el), 0);
    sl_element_release(el);
    /* once the producers stop (buffers full or the budget reached), what
     * the nodes hold is what the iterator holds; the two can also agree
     * for a moment while the prefetch still fills (a loaded machine), so
     * its fill is awaited too */
    bool equal = false;
    for (int tries = 0; tries < 400 && !equal; tries++) {
        tu_sleep_us(5000);
        sl_stats *s = sl_iterator_stats(it);
        /* the snapshot's own copy of the iterator's counters (obs.h) */
        double held = (double)s->stat[SL_STAT_BUFFERED_BYTES];
        equal = held > 0 && node_bytes(s) == held &&
                sl_stats_node(s, find(s, "prefetch"), SL_NODE_BYTES_HELD) >= 65536;
        assert_true(s->stat[SL_STAT_RAM_BUDGET] == budget);
        assert_true(held <= (double)s->stat[SL_STAT_PEAK_BUFFERED_BYTES]);
        sl_stats_free(s);
    }
    assert_true(equal);
    sl_stats *s = sl_iterator_stats(it);
    assert_true(sl_stats_node(s, find(s, "prefetch"), SL_NODE_BYTES_HELD) >= 65536);
    assert_true(sl_stats_node(s, find(s, "prefetch"), SL_NODE_CAPACITY) == 8);
    sl_stats_free(s);
    drain(it, 0);
    s = sl_iterator_stats(it);
    assert_true(node_bytes(s) == 0);
    assert_true(sl_iterator_stat(it, SL_STAT_BUFFERED_BYTES) == 0);
    sl_stats_free(s);
    sl_iterator_free(it);
    sl_options_free(o);
    sl_dataset_release(ds);
}

static void expect_knob(const sl_stats *s, const char *node, const char *knob, int64_t value,
                        int autotuned)
{
    int n = find(s, node);
    assert_int_equal(sl_stats_knobs(s, n), 1);
    assert_string_equal(sl_stats_knob_name(s, n, 0), knob);
    if (value > 0)
        assert_int_equal(sl_stats_knob_value(s, n, 0), value);
    else
        assert_true(sl_stats_knob_value(s, n, 0) >= 1);
    assert_int_equal(sl_stats_knob_autotuned(s, n, 0), autotuned);
}

static sl_stats *stats_of(sl_dataset *ds, const sl_options *o)
{
    sl_iterator *it = sl_iterator_create(ds, o);
    assert_non_null(it);
    drain(it, 0);
    sl_stats *s = sl_iterator_stats(it);
    assert_non_null(s);
    sl_iterator_free(it);
    return s;
}

static void test_knobs(void **state)
{
    (void)state;
    sl_dataset *ds = sl_map(sl_range(0, 50, 1), "auto", tu_identity, NULL, SL_AUTOTUNE, 0);
    ds = sl_map(ds, "three", tu_identity, NULL, 3, 0);
    ds = sl_prefetch(ds, SL_AUTOTUNE);
    assert_non_null(ds);

    /* controller off: the documented defaults, fixed */
    sl_options *o = opts(2, 0);
    sl_stats *s = stats_of(ds, o);
    expect_knob(s, "map(auto)", "parallelism", 4, 0);
    expect_knob(s, "map(three)", "parallelism", 3, 0);
    expect_knob(s, "prefetch", "depth", 2, 0);
    assert_int_equal(sl_stats_knobs(s, find(s, "range")), 0);
    sl_stats_free(s);
    sl_options_free(o);

    /* controller on: what was left at SL_AUTOTUNE is its to move */
    o = opts(2, 1);
    s = stats_of(ds, o);
    expect_knob(s, "map(auto)", "parallelism", 0, 1);
    expect_knob(s, "map(three)", "parallelism", 3, 0);
    expect_knob(s, "prefetch", "depth", 0, 1);
    /* unknown node or knob */
    assert_null(sl_stats_knob_name(s, 0, 5));
    assert_int_equal(sl_stats_knob_value(s, 99, 0), -1);
    assert_int_equal(sl_stats_knob_autotuned(s, -1, 0), -1);
    assert_int_equal(sl_stats_knobs(s, 99), 0);
    assert_null(sl_stats_node_name(s, 99));
    assert_true(isnan(sl_stats_node(s, 99, SL_NODE_BUSY)));
    assert_true(isnan(sl_stats_node(s, 0, SL_NODE_STAT_COUNT)));
    assert_true(isnan(sl_stats_global(s, SL_GLOBAL_STAT_COUNT)));
    assert_true(sl_stats_global(s, SL_GLOBAL_CPU_BUDGET) == sl_cpu_count());
    sl_stats_free(s);
    sl_options_free(o);
    sl_dataset_release(ds);
}

static void test_reads(void **state)
{
    (void)state;
    char dir[256];
    tu_tmpdir(dir);
    enum { N = 20 };
    char *paths[N];
    for (int i = 0; i < N; i++) {
        char p[300];
        snprintf(p, sizeof p, "%s/f%02d", dir, i);
        FILE *f = fopen(p, "wb");
        assert_non_null(f);
        for (int k = 0; k < 1000 + i; k++)
            fputc(k & 0xff, f);
        fclose(f);
        paths[i] = strdup(p);
    }
    sl_dataset *ds = sl_read_files(sl_from_files((const char *const *)paths, NULL, N), 0);
    sl_options *o = opts(2, 0);
    assert_int_equal(sl_options_set(o, SL_OPT_IO_DEPTH, 6), 0);
    sl_stats *s = stats_of(ds, o);
    int r = find(s, "read");
    expect_knob(s, "read", "io_depth", 6, 0);
    assert_true(sl_stats_node(s, r, SL_NODE_ELEMENTS) == N);
    assert_true(sl_stats_node(s, r, SL_NODE_BUSY) > 0);
    assert_true(sl_stats_global(s, SL_GLOBAL_IO_IN_FLIGHT) == 0);
    assert_true(s->stat[SL_STAT_IO_BACKEND] != SL_IO_AUTO);
    assert_true(sl_stats_global(s, SL_GLOBAL_IO_BYTES_PER_S) > 0);
    /* every counter of the list is in the JSON: the read node's bytes */
    int64_t total = 0;
    for (int i = 0; i < N; i++)
        total += 1000 + i;
    char want[64];
    snprintf(want, sizeof want, "\"bytes_read\":%lld", (long long)total);
    assert_non_null(strstr(sl_stats_json(s), want));
    sl_stats_free(s);
    sl_options_free(o);

    /* under the controller, the option is where io_depth starts */
    o = opts(2, 1);
    assert_int_equal(sl_options_set(o, SL_OPT_IO_DEPTH, 6), 0);
    s = stats_of(ds, o);
    expect_knob(s, "read", "io_depth", 0, 1);
    sl_stats_free(s);
    sl_options_free(o);
    sl_dataset_release(ds);
    for (int i = 0; i < N; i++)
        free(paths[i]);
    tu_rmdir(dir);
}

/* map_image + batch fused: its elements are images. */
static void test_fused_counts_images(void **state)
{
    (void)state;
    enum { N = 10 };
    sl_element *els[N];
    for (int i = 0; i < N; i++) {
        size_t n;
        uint8_t *jpg = ju_make(64, 48, (unsigned)i, NULL, &n);
        els[i] = sl_element_create(1);
        int64_t shape[1] = {(int64_t)n};
        memcpy(sl_element_add_tensor(els[i], SL_UINT8, 1, shape), jpg, n);
        free(jpg);
    }
    sl_image_spec spec;
    assert_int_equal(SL_IMAGE_SPEC_INIT(&spec, SL_CROP_RESIZE, 32), 0);
    sl_dataset *ds = sl_batch(sl_map_image(tu_elements(els, N, -3), &spec, 2), 4, 0);
    sl_options *o = opts(2, 0);
    sl_iterator *it = sl_iterator_create(ds, o);
    assert_non_null(it);
    assert_int_equal(drain(it, 0), 3);
    sl_stats *s = sl_iterator_stats(it);
    int f = find(s, "map_image_batch");
    assert_true(sl_stats_node(s, f, SL_NODE_ELEMENTS) == N);
    assert_true(sl_stats_node(s, f, SL_NODE_BUSY) > 0);
    assert_true(sl_stats_node(s, f, SL_NODE_CAPACITY) == 8);
    assert_true(sl_stats_node(s, f, SL_NODE_BYTES_HELD) == 0);
    expect_knob(s, "map_image_batch", "parallelism", 2, 0);
    assert_true(sl_iterator_stat(it, SL_STAT_ELEMENTS) == 3);
    sl_stats_free(s);
    sl_iterator_free(it);
    sl_options_free(o);
    sl_dataset_release(ds);
}

static void test_json(void **state)
{
    (void)state;
    sl_dataset *ds =
        sl_map(sl_range(0, 100, 1), "we\"ird\\name\t", tu_identity, NULL, SL_AUTOTUNE, 0);
    ds = sl_prefetch(ds, SL_AUTOTUNE);
    sl_options *o = opts(2, 1);
    sl_iterator *it = sl_iterator_create(ds, o);
    assert_non_null(it);
    drain(it, 0);
    sl_stats *s = sl_iterator_stats(it);
    const char *j = sl_stats_json(s);
    assert_non_null(j);
    assert_ptr_equal(sl_stats_json(s), j); /* made once */
    if (!json_valid(j))
        fail_msg("not JSON: %s", j);
    assert_int_equal(count_of(j, "\"name\":\"map(we\\\"ird\\\\name\\u0009)\""), 1);
    assert_int_equal(count_of(j, "\"name\":\"depth\""), 1);
    assert_int_equal(count_of(j, "\"autotune\":true"), 3); /* global, parallelism, depth */
    assert_int_equal(count_of(j, "\"elements\":100"), 4);  /* global and 3 nodes */
    assert_int_equal(count_of(j, "\"stall_fraction\":"), 1);
    sl_stats_free(s);
    sl_iterator_free(it);
    sl_options_free(o);
    sl_dataset_release(ds);
}

typedef struct watcher {
    sl_iterator *it;
    atomic_bool stop;
    int snapshots;
    const char *bad; /* what went wrong (asserts belong on the main thread) */
} watcher;

static void *watch(void *arg)
{
    watcher *w = arg;
    char buf[4096];
    while (!atomic_load(&w->stop) && !w->bad) {
        sl_stats *s = sl_iterator_stats(w->it);
        const char *j = s ? sl_stats_json(s) : NULL;
        if (!j || !json_valid(j))
            w->bad = "snapshot JSON";
        sl_stats_free(s);
        if (sl_iterator_report_buf(w->it, buf, sizeof buf) <= 0)
            w->bad = "report";
        w->snapshots++;
        tu_sleep_us(1000);
    }
    return NULL;
}

/* Snapshots and reports from another thread while the pipeline runs. */
static void test_snapshots_while_running(void **state)
{
    (void)state;
    int us = 100;
    sl_dataset *ds = sl_map(sl_range(0, 2000, 1), "work", tu_spin, &us, 2, 0);
    ds = sl_repeat(sl_prefetch(sl_batch(ds, 8, 0), 2), 2);
    sl_options *o = opts(2, 1);
    sl_iterator *it = sl_iterator_create(ds, o);
    assert_non_null(it);
    watcher w = {.it = it};
    pthread_t th;
    assert_int_equal(pthread_create(&th, NULL, watch, &w), 0);
    drain(it, 0);
    atomic_store(&w.stop, true);
    pthread_join(th, NULL);
    if (w.bad)
        fail_msg("while running: %s", w.bad);
    assert_true(w.snapshots > 0);
    sl_stats *s = sl_iterator_stats(it);
    assert_true(sl_stats_node(s, find(s, "map(work)"), SL_NODE_ELEMENTS) == 4000);
    assert_true(sl_stats_node(s, find(s, "batch"), SL_NODE_ELEMENTS) == 500);
    sl_stats_free(s);
    sl_iterator_free(it);
    sl_options_free(o);
    sl_dataset_release(ds);
}

typedef struct mover {
    sl__tree *t;
    atomic_bool stop;
    int moves;
} mover;

/* Moves every autotuned knob to a random value within its bounds, as a
 * (wild) controller would. */
static void *move_knobs(void *arg)
{
    mover *m = arg;
    uint64_t x = 12345;
    while (!atomic_load(&m->stop)) {
        pthread_mutex_lock(&m->t->mu);
        for (sl__node_stats *ns = m->t->stats_head; ns; ns = ns->next)
            for (int k = 0; k < ns->nknobs; k++) {
                sl__knob *kb = &ns->knobs[k];
                x = x * 6364136223846793005ull + 1442695040888963407ull;
                if (kb->autotune)
                    atomic_store(&kb->value, kb->min + (int64_t)((x >> 33) %
                                                                 (uint64_t)(kb->max - kb->min + 1)));
            }
        pthread_mutex_unlock(&m->t->mu);
        m->moves++;
        tu_sleep_us(300);
    }
    return NULL;
}

/* Knobs moved up and down while elements flow: buffers and windows are
 * sized for the maximum, and the order and content stay right. */
static void test_knobs_move_while_running(void **state)
{
    (void)state;
    char dir[256];
    tu_tmpdir(dir);
    enum { N = 400 };
    char *paths[N];
    for (int i = 0; i < N; i++) {
        char p[300];
        snprintf(p, sizeof p, "%s/f%03d", dir, i);
        FILE *f = fopen(p, "wb");
        assert_non_null(f);
        for (int k = 0; k < 1 + i; k++)
            fputc(i & 0xff, f);
        fclose(f);
        paths[i] = strdup(p);
    }
    sl_dataset *ds = sl_read_files(sl_from_files((const char *const *)paths, NULL, N), 0);
    ds = sl_prefetch(sl_map(ds, "id", tu_identity, NULL, SL_AUTOTUNE, 0), SL_AUTOTUNE);
    ds = sl_repeat(ds, 3);
    sl_options *o = opts(2, 1);
    assert_int_equal(sl_options_set(o, SL_OPT_IO_DEPTH, 4), 0);
    sl_iterator *it = sl_iterator_create(ds, o);
    assert_non_null(it);
    mover m = {.t = sl__iterator_tree(it)};
    pthread_t th;
    assert_int_equal(pthread_create(&th, NULL, move_knobs, &m), 0);
    sl_element *el;
    int rc;
    int64_t n = 0;
    while ((rc = sl_next(it, &el)) == 0) {
        const sl_tensor *t = sl_element_tensor(el, 0);
        int64_t i = n % N;
        assert_int_equal(sl_tensor_count(t), 1 + i);
        assert_int_equal(((const uint8_t *)sl_tensor_data(t))[i], i & 0xff);
        sl_element_release(el);
        n++;
    }
    atomic_store(&m.stop, true);
    pthread_join(th, NULL);
    assert_int_equal(rc, SL_EOF);
    assert_int_equal(n, 3 * N);
    assert_true(m.moves > 0);
    sl_stats *s = sl_iterator_stats(it);
    assert_true(sl_stats_node(s, find(s, "read"), SL_NODE_ELEMENTS) == 3 * N);
    sl_stats_free(s);
    sl_iterator_free(it);
    sl_options_free(o);
    sl_dataset_release(ds);
    for (int i = 0; i < N; i++)
        free(paths[i]);
    tu_rmdir(dir);
}

static void test_options_and_log_category(void **state)
{
    (void)state;
    sl_dataset *ds = sl_range(0, 3, 1);
    setenv("SLUICE_LOG", "warn,autotune", 1);
    sl_iterator *it = sl_iterator_create(ds, NULL);
    assert_non_null(it);
    sl__tree *t = sl__iterator_tree(it);
    assert_true(t->autotune_log);
    assert_true(t->autotune);
    assert_int_equal(t->cpu_budget, sl_cpu_count());
    assert_int_equal(t->stall_target_ppm, 20000);
    assert_null(t->trace);
    sl_iterator_free(it);
    setenv("SLUICE_LOG", "warn", 1);
    sl_options *o = sl_options_create();
    assert_int_equal(sl_options_set(o, SL_OPT_CPU_BUDGET, 3), 0);
    assert_int_equal(sl_options_set(o, SL_OPT_STALL_TARGET_PPM, 50000), 0);
    assert_int_equal(sl_options_set(o, SL_OPT_AUTOTUNE, 0), 0);
    it = sl_iterator_create(ds, o);
    t = sl__iterator_tree(it);
    assert_false(t->autotune_log);
    assert_false(t->autotune);
    assert_int_equal(t->cpu_budget, 3);
    sl_stats *s = sl_iterator_stats(it);
    assert_true(sl_stats_global(s, SL_GLOBAL_CPU_BUDGET) == 3);
    /* nothing asked yet */
    assert_true(sl_stats_global(s, SL_GLOBAL_STALL_FRACTION) == 0);
    assert_true(sl_stats_global(s, SL_GLOBAL_STEP_SECONDS) == 0);
    sl_stats_free(s);
    sl_iterator_free(it);
    assert_int_equal(sl_options_set(o, SL_OPT_AUTOTUNE_LOG, 1), 0);
    it = sl_iterator_create(ds, o);
    assert_true(sl__iterator_tree(it)->autotune_log);
    sl_iterator_free(it);
    unsetenv("SLUICE_LOG");
    sl_options_free(o);
    sl_dataset_release(ds);
}

static void test_bad_arguments(void **state)
{
    (void)state;
    assert_null(sl_iterator_stats(NULL));
    assert_int_equal(sl_last_error_code(), SL_EINVAL);
    sl_stats_free(NULL);
    assert_int_equal(sl_stats_nodes(NULL), 0);
    assert_null(sl_stats_node_name(NULL, 0));
    assert_true(isnan(sl_stats_global(NULL, SL_GLOBAL_WALL_SECONDS)));
    assert_true(isnan(sl_stats_global(NULL, SL_GLOBAL_STAT_COUNT)));
    assert_null(sl_stats_json(NULL));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_elements_once_across_passes),
        cmocka_unit_test(test_stall_when_the_pipeline_is_slow),
        cmocka_unit_test(test_step_when_the_consumer_is_slow),
        cmocka_unit_test(test_bytes_held_add_up),
        cmocka_unit_test(test_knobs),
        cmocka_unit_test(test_reads),
        cmocka_unit_test(test_fused_counts_images),
        cmocka_unit_test(test_json),
        cmocka_unit_test(test_snapshots_while_running),
        cmocka_unit_test(test_knobs_move_while_running),
        cmocka_unit_test(test_options_and_log_category),
        cmocka_unit_test(test_bad_arguments),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
