/* prefetch: order and content at several depths, errors from below with
 * their message, nesting, bad depths, the producer's scheduling policy. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <dirent.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "testutil.h"

static int64_t in_value(const sl_element *in)
{
    return sl_tensor_int64(sl_element_tensor(in, 0));
}

/* [v, v * v] with a little delay every few elements, so that the producer
 * sometimes runs ahead and sometimes behind the consumer. */
static int square(sl_map_ctx *ctx, const sl_element *in, sl_element **out, void *user)
{
    (void)ctx, (void)user;
    int64_t v = in_value(in);
    if (v % 7 == 0)
        tu_sleep_us(200);
    sl_element *el = sl_element_create(1);
    if (!el)
        return SL_ENOMEM;
    int64_t shape[1] = {2};
    int64_t *d = sl_element_add_tensor(el, SL_INT64, 1, shape);
    if (!d) {
        sl_element_release(el);
        return SL_ENOMEM;
    }
    d[0] = v;
    d[1] = v * v;
    *out = el;
    return 0;
}

static void expect_squares(sl_dataset *ds, int64_t n_expect, int slow_consumer)
{
    sl_options *o = tu_opts(2, 0);
    sl_iterator *it = sl_iterator_create(ds, o);
    assert_non_null(it);
    sl_element *el;
    int rc;
    int64_t i = 0;
    while ((rc = sl_next(it, &el)) == 0) {
        const sl_tensor *t = sl_element_tensor(el, 0);
        assert_int_equal(sl_tensor_ndim(t), 1);
        assert_int_equal(sl_tensor_shape(t)[0], 2);
        const int64_t *d = sl_tensor_data(t);
        assert_int_equal(d[0], i);
        assert_int_equal(d[1], i * i);
        sl_element_release(el);
        if (slow_consumer && i % 5 == 0)
            tu_sleep_us(300);
        i++;
    }
    if (rc != SL_EOF)
        print_error("iteration failed: %d %s\n", rc, sl_iterator_errmsg(it));
    assert_int_equal(rc, SL_EOF);
    assert_int_equal(i, n_expect);
    /* the end stays the end */
    for (int k = 0; k < 3; k++) {
        assert_int_equal(sl_next(it, &el), SL_EOF);
        assert_null(el);
    }
    assert_int_equal(sl_iterator_stat(it, SL_STAT_ELEMENTS), n_expect);
    assert_int_equal(sl_iterator_stat(it, SL_STAT_BUFFERED_BYTES), 0);
    sl_iterator_free(it);
    sl_options_free(o);
}

static void test_depths(void **state)
{
    (void)state;
    enum { N = 500 };
    const int64_t depths[] = {1, 2, 16, SL_AUTOTUNE};
    for (int d = 0; d < 4; d++) {
        for (int slow = 0; slow < 2; slow++) {
            sl_dataset *ds = sl_prefetch(sl_map(sl_range(0, N, 1), "sq", square, NULL, 4, 0),
                                         depths[d]);
            assert_non_null(ds);
            assert_int_equal(sl_dataset_cardinality(ds), N);
            assert_string_equal(sl_dataset_name(ds), "prefetch");
            expect_squares(ds, N, slow);
            sl_dataset_release(ds);
        }
        /* straight from a source */
        sl_dataset *ds = sl_prefetch(sl_range(0, 1000, 1), depths[d]);
        int64_t want[1000];
        for (int i = 0; i < 1000; i++)
            want[i] = i;
        tu_expect(ds, want, 1000);
        sl_dataset_release(ds);
    }
}

static void test_empty(void **state)
{
    (void)state;
    sl_dataset *ds = sl_prefetch(sl_range(0, 0, 1), 4);
    assert_int_equal(sl_dataset_cardinality(ds), 0);
    expect_squares(ds, 0, 0);
    sl_dataset_release(ds);
}

static void test_nested(void **state)
{
    (void)state;
    enum { N = 300 };
    sl_dataset *ds = sl_prefetch(
        sl_prefetch(sl_map(sl_range(0, N, 1), "sq", square, NULL, 2, 0), 3), SL_AUTOTUNE);
    assert_non_null(ds);
    expect_squares(ds, N, 1);
    sl_dataset_release(ds);
    ds = sl_prefetch(sl_prefetch(sl_prefetch(sl_range(0, N, 1), 1), 1), 1);
    int64_t want[N];
    for (int i = 0; i < N; i++)
        want[i] = i;
    tu_expect(ds, want, N);
    sl_dataset_release(ds);
}

static int fail_at_40(sl_map_ctx *ctx, const sl_element *in, sl_element **out, void *user)
{
    (void)user;
    if (in_value(in) == 40)
        return sl_map_ctx_error(ctx, SL_ECORRUPT, "/data/40.bin: truncated");
    *out = sl_element_retain((sl_element *)in);
    return 0;
}

static void expect_error_through(sl_dataset *ds)
{
    sl_options *o = tu_opts(2, 0);
    sl_iterator *it = sl_iterator_create(ds, o);
    assert_non_null(it);
    sl_element *el;
    int rc;
    int64_t i = 0;
    while ((rc = sl_next(it, &el)) == 0) {
        assert_int_equal(in_value(el), i);
        i++;
        sl_element_release(el);
    }
    assert_int_equal(rc, SL_ECORRUPT);
    assert_int_equal(i, 40);
    assert_string_equal(sl_iterator_errmsg(it), "map(check): /data/40.bin: truncated");
    assert_int_equal(sl_next(it, &el), SL_ECORRUPT);
    assert_null(el);
    assert_string_equal(sl_iterator_errmsg(it), "map(check): /data/40.bin: truncated");
    sl_iterator_free(it);
    sl_options_free(o);
}

static void test_error_passes_through(void **state)
{
    (void)state;
    const int64_t depths[] = {1, 2, 16, SL_AUTOTUNE};
    for (int d = 0; d < 4; d++) {
        sl_dataset *ds =
            sl_prefetch(sl_map(sl_range(0, 100, 1), "check", fail_at_40, NULL, 4, 0), depths[d]);
        expect_error_through(ds);
        sl_dataset_release(ds);
    }
    sl_dataset *ds = sl_prefetch(
        sl_prefetch(sl_map(sl_range(0, 100, 1), "check", fail_at_40, NULL, 4, 0), 2), 5);
    expect_error_through(ds);
    sl_dataset_release(ds);
}

static void test_skip_policy_below(void **state)
{
    (void)state;
    /* a skipped element below a prefetch is just absent */
    sl_dataset *ds =
        sl_prefetch(sl_map(sl_range(0, 100, 1), "check", fail_at_40, NULL, 4, 0), 8);
    sl_options *o = tu_opts(2, 0);
    assert_int_equal(sl_options_set(o, SL_OPT_ERROR_POLICY, SL_ERRORS_SKIP), 0);
    assert_int_equal(sl_options_set(o, SL_OPT_ERROR_LOG_LIMIT, 0), 0);
    sl_iterator *it = sl_iterator_create(ds, o);
    sl_element *el;
    int64_t want = 0;
    int rc;
    while ((rc = sl_next(it, &el)) == 0) {
        if (want == 40)
            want++;
        assert_int_equal(in_value(el), want);
        want++;
        sl_element_release(el);
    }
    assert_int_equal(rc, SL_EOF);
    assert_int_equal(want, 100);
    assert_int_equal(sl_iterator_stat(it, SL_STAT_ERRORS_SKIPPED), 1);
    sl_iterator_free(it);
    sl_options_free(o);
    sl_dataset_release(ds);
}

static void test_bad_depth(void **state)
{
    (void)state;
    const int64_t bad[] = {0, -2, -100, ((int64_t)1 << 20) + 1, INT64_MAX};
    for (int i = 0; i < 5; i++) {
        sl_clear_error();
        assert_null(sl_prefetch(sl_range(0, 10, 1), bad[i]));
        assert_non_null(strstr(sl_last_error(), "prefetch"));
    }
    sl_dataset *ds = sl_prefetch(sl_range(0, 10, 1), (int64_t)1 << 20);
    assert_non_null(ds);
    sl_dataset_release(ds);
    /* NULL input: NULL, and the first error stays */
    sl_clear_error();
    assert_null(sl_prefetch(sl_prefetch(sl_range(0, 10, 0), 2), 0));
    assert_non_null(strstr(sl_last_error(), "range"));
}

/* The scheduling policy of this process's thread named `name` (-1: none
 * such). */
static int policy_of(const char *name)
{
    DIR *d = opendir("/proc/self/task");
    if (!d)
        return -1;
    int policy = -1;
    struct dirent *e;
    while (policy < 0 && (e = readdir(d))) {
        char path[300], comm[32] = "";
        snprintf(path, sizeof path, "/proc/self/task/%s/comm", e->d_name);
        FILE *f = fopen(path, "r");
        if (!f)
            continue;
        if (fgets(comm, sizeof comm, f) && !strncmp(comm, name, strlen(name)) &&
            comm[strlen(name)] == '\n')
            policy = sched_getscheduler(atoi(e->d_name));
        fclose(f);
    }
    closedir(d);
    return policy;
}

/* The producer that each take wakes does not preempt the consumer that
 * woke it (SCHED_BATCH); the pool's workers and the caller keep the
 * caller's policy. */
static void test_producer_yields_to_consumer(void **state)
{
    (void)state;
    int mine = sched_getscheduler(0);
    if (mine != SCHED_OTHER && mine != SCHED_BATCH)
        skip(); /* run under chrt: a thread may not leave SCHED_IDLE for SCHED_BATCH */
    sl_dataset *ds = sl_prefetch(sl_range(0, 1000, 1), 2);
    sl_options *o = tu_opts(2, 0);
    sl_iterator *it = sl_iterator_create(ds, o);
    assert_non_null(it);
    sl_element *el;
    assert_int_equal(sl_next(it, &el), 0); /* the producer is running */
    sl_element_release(el);
    assert_int_equal(policy_of("sl-prefetch"), SCHED_BATCH);
    assert_int_equal(policy_of("sl-worker"), mine); /* as created, from this thread */
    assert_int_equal(sched_getscheduler(0), mine);  /* the consumer's own */
    sl_iterator_free(it);
    sl_options_free(o);
    sl_dataset_release(ds);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_depths),
        cmocka_unit_test(test_empty),
        cmocka_unit_test(test_nested),
        cmocka_unit_test(test_error_passes_through),
        cmocka_unit_test(test_skip_policy_below),
        cmocka_unit_test(test_bad_depth),
        cmocka_unit_test(test_producer_yields_to_consumer),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
