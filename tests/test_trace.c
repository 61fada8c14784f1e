/* sl_iterator_trace: SL_ESTATE when off; the file is JSON with the
 * expected tracks (node spans, consumer stalls, knob / stall / buffered
 * bytes counters, names); the ring keeps only the latest events; writing
 * while the pipeline runs; a path that cannot be written. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "jsoncheck.h"
#include "testutil.h"

static int64_t mono_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* Keeps the CPU busy for *user microseconds. */
static int spin(sl_map_ctx *ctx, const sl_element *in, sl_element **out, void *user)
{
    (void)ctx;
    int64_t end = mono_ns() + 1000 * *(const int *)user;
    while (mono_ns() < end) {
    }
    *out = sl_element_retain((sl_element *)in);
    return 0;
}

static sl_options *opts(int64_t events)
{
    sl_options *o = tu_opts(2, 0);
    assert_int_equal(sl_options_set(o, SL_OPT_TRACE_EVENTS, events), 0);
    return o;
}

static void drain(sl_iterator *it)
{
    sl_element *el;
    int rc;
    while ((rc = sl_next(it, &el)) == 0)
        sl_element_release(el);
    assert_int_equal(rc, SL_EOF);
}

/* The file's text (malloc'd), asserted to be JSON. */
static char *slurp_json(const char *path)
{
    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    rewind(f);
    char *s = malloc((size_t)n + 1);
    assert_int_equal(fread(s, 1, (size_t)n, f), (size_t)n);
    s[n] = '\0';
    fclose(f);
    if (!json_valid(s))
        fail_msg("%s is not JSON:\n%.2000s", path, s);
    return s;
}

static void expect_in(const char *text, const char *what)
{
    if (!strstr(text, what))
        fail_msg("expected %s in the trace", what);
}

static void test_off(void **state)
{
    (void)state;
    sl_dataset *ds = sl_range(0, 3, 1);
    sl_iterator *it = sl_iterator_create(ds, NULL);
    assert_int_equal(sl_iterator_trace(it, "/tmp/never-written.json"), SL_ESTATE);
    assert_int_equal(sl_iterator_trace(NULL, "/tmp/x.json"), SL_EINVAL);
    assert_int_equal(sl_iterator_trace(it, NULL), SL_EINVAL);
    sl_iterator_free(it);
    sl_dataset_release(ds);
}

static void test_tracks(void **state)
{
    (void)state;
    char dir[256], path[300];
    tu_tmpdir(dir);
    snprintf(path, sizeof path, "%s/trace.json", dir);
    int us = 300;
    sl_dataset *ds = sl_map(sl_range(0, 300, 1), "work", spin, &us, 2, 0);
    ds = sl_prefetch(ds, SL_AUTOTUNE);
    sl_options *o = opts(100000);
    sl_iterator *it = sl_iterator_create(ds, o);
    assert_non_null(it);
    drain(it);
    assert_int_equal(sl_iterator_trace(it, path), 0);
    char *j = slurp_json(path);
    expect_in(j, "{\"traceEvents\":[");
    expect_in(j, "\"displayTimeUnit\":\"ms\"");
    /* the map's work: complete events in its own process */
    expect_in(j, "\"name\":\"process_name\",\"pid\":2,\"tid\":0,\"args\":{\"name\":\"range\"}");
    expect_in(j, "\"args\":{\"name\":\"map(work)\"}");
    int spans = count_of(j, "\"ph\":\"X\",\"pid\":3,");
    print_message("map spans: %d\n", spans);
    assert_true(spans >= 1);
    assert_int_equal(count_of(j, "\"name\":\"map(work)\",\"ts\":"), spans);
    /* the consumer's stalls */
    expect_in(j, "\"name\":\"thread_name\",\"pid\":1,");
    expect_in(j, "\"args\":{\"name\":\"consumer\"}");
    expect_in(j, "\"name\":\"stall\",\"ts\":");
    /* counter tracks, sampled at least when written */
    expect_in(j, "\"ph\":\"C\",\"pid\":1,\"tid\":0,\"name\":\"knob map(work).parallelism\"");
    expect_in(j, "\"ph\":\"C\",\"pid\":1,\"tid\":0,\"name\":\"knob prefetch.depth\"");
    expect_in(j, "\"ph\":\"C\",\"pid\":1,\"tid\":0,\"name\":\"stall\"");
    expect_in(j, "\"ph\":\"C\",\"pid\":1,\"tid\":0,\"name\":\"buffered bytes\"");
    expect_in(j, "\"name\":\"knob map(work).parallelism\",\"ts\":");
    expect_in(j, "\"args\":{\"value\":2}}");
    free(j);
    sl_iterator_free(it);
    sl_options_free(o);
    sl_dataset_release(ds);
    tu_rmdir(dir);
}

static void test_ring_keeps_the_latest(void **state)
{
    (void)state;
    char dir[256], path[300];
    tu_tmpdir(dir);
    snprintf(path, sizeof path, "%s/t.json", dir);
    int us = 50;
    sl_dataset *ds = sl_map(sl_range(0, 500, 1), "work", spin, &us, 2, 0);
    sl_options *o = opts(16);
    sl_iterator *it = sl_iterator_create(ds, o);
    assert_non_null(it);
    drain(it);
    assert_int_equal(sl_iterator_trace(it, path), 0);
    char *j = slurp_json(path);
    int events = count_of(j, "\"ph\":\"X\"") + count_of(j, "\"ph\":\"C\"");
    print_message("events kept: %d\n", events);
    assert_true(events >= 1 && events <= 16);
    /* the last thing recorded is the final counter sample */
    expect_in(j, "\"name\":\"knob map(work).parallelism\"");
    free(j);
    sl_iterator_free(it);
    sl_options_free(o);
    sl_dataset_release(ds);
    tu_rmdir(dir);
}

typedef struct writer {
    sl_iterator *it;
    const char *path;
    atomic_bool stop;
    int writes, failed;
} writer;

static void *write_loop(void *arg)
{
    writer *w = arg;
    while (!atomic_load(&w->stop)) {
        if (sl_iterator_trace(w->it, w->path) != 0)
            w->failed++;
        w->writes++;
        struct timespec ts = {0, 2000000};
        nanosleep(&ts, NULL);
    }
    return NULL;
}

/* Written from another thread while workers append: each file is whole. */
static void test_written_while_running(void **state)
{
    (void)state;
    char dir[256], path[300];
    tu_tmpdir(dir);
    snprintf(path, sizeof path, "%s/live.json", dir);
    int us = 100;
    sl_dataset *ds = sl_map(sl_range(0, 3000, 1), "work", spin, &us, 2, 0);
    ds = sl_prefetch(sl_batch(ds, 4, 0), 2);
    sl_options *o = opts(64);
    sl_iterator *it = sl_iterator_create(ds, o);
    assert_non_null(it);
    writer w = {.it = it, .path = path};
    pthread_t th;
    assert_int_equal(pthread_create(&th, NULL, write_loop, &w), 0);
    drain(it);
    atomic_store(&w.stop, true);
    pthread_join(th, NULL);
    assert_int_equal(w.failed, 0);
    assert_true(w.writes > 0);
    free(slurp_json(path));
    sl_iterator_free(it);
    sl_options_free(o);
    sl_dataset_release(ds);
    tu_rmdir(dir);
}

static void test_unwritable(void **state)
{
    (void)state;
    sl_dataset *ds = sl_range(0, 3, 1);
    sl_options *o = opts(8);
    sl_iterator *it = sl_iterator_create(ds, o);
    assert_int_equal(sl_iterator_trace(it, "/nonexistent-dir/trace.json"), SL_EIO);
    expect_in(sl_last_error(), "/nonexistent-dir/trace.json");
    sl_iterator_free(it);
    sl_options_free(o);
    sl_dataset_release(ds);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_off),
        cmocka_unit_test(test_tracks),
        cmocka_unit_test(test_ring_keeps_the_latest),
        cmocka_unit_test(test_written_while_running),
        cmocka_unit_test(test_unwritable),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
