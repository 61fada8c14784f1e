/* sl_iterator_report: on pipelines built to have one bottleneck each, the
 * verdict names it: a slow map at the CPU budget (CPU-bound), a slow map
 * below it (raise its parallelism), a slow consumer, a slow synchronous
 * node under a map; the text itself: the table, report_buf's snprintf
 * semantics, the FILE variant, before any sl_next. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "testutil.h"

/* A predicate that takes *user microseconds (sleeping: synchronous work
 * that is not CPU). */
static int slow_keep(sl_map_ctx *ctx, const sl_element *el, void *user)
{
    (void)ctx, (void)el;
    tu_sleep_us(*(const int *)user);
    return 1;
}

/* Runs ds with 2 threads (sleeping `step_us` per element) and returns the
 * report (malloc'd). */
static char *report_of(sl_dataset *ds, long step_us, int64_t stall_target_ppm)
{
    assert_non_null(ds);
    sl_options *o = tu_opts(2, 0);
    assert_int_equal(sl_options_set(o, SL_OPT_AUTOTUNE, 0), 0);
    assert_int_equal(sl_options_set(o, SL_OPT_CPU_BUDGET, 2), 0);
    if (stall_target_ppm)
        assert_int_equal(sl_options_set(o, SL_OPT_STALL_TARGET_PPM, stall_target_ppm), 0);
    sl_iterator *it = sl_iterator_create(ds, o);
    assert_non_null(it);
    sl_element *el;
    int rc;
    while ((rc = sl_next(it, &el)) == 0) {
        sl_element_release(el);
        if (step_us)
            tu_sleep_us(step_us);
    }
    assert_int_equal(rc, SL_EOF);
    int n = sl_iterator_report_buf(it, NULL, 0);
    assert_true(n > 0);
    char *buf = malloc((size_t)n + 1);
    assert_int_equal(sl_iterator_report_buf(it, buf, (size_t)n + 1), n);
    assert_int_equal((int)strlen(buf), n);
    sl_iterator_free(it);
    sl_options_free(o);
    sl_dataset_release(ds);
    print_message("%s\n", buf);
    return buf;
}

/* The verdict line. */
static const char *verdict(const char *report)
{
    const char *v = strstr(report, "\nbottleneck: ");
    assert_non_null(v);
    return v + 1;
}

static void expect_in(const char *text, const char *what)
{
    if (!strstr(text, what))
        fail_msg("expected \"%s\" in: %s", what, text);
}

static void test_slow_map_is_cpu_bound(void **state)
{
    (void)state;
    int us = 2000;
    char *r = report_of(sl_map(sl_range(0, 150, 1), "slow", tu_spin, &us, 2, 0), 0, 0);
    const char *v = verdict(r);
    expect_in(v, "bottleneck: map(slow): 2/2 workers busy");
    expect_in(v, "CPU-bound; more cores would help");
    /* the table has a row per node */
    expect_in(r, "\nrange ");
    expect_in(r, "\nmap(slow) ");
    expect_in(r, "parallelism 2");
    free(r);
}

static void test_slow_map_below_budget(void **state)
{
    (void)state;
    int us = 2000;
    sl_dataset *ds = sl_prefetch(sl_map(sl_range(0, 100, 1), "slow", tu_spin, &us, 1, 0), 2);
    char *r = report_of(ds, 0, 0);
    const char *v = verdict(r);
    expect_in(v, "bottleneck: map(slow): 1/2 workers busy");
    expect_in(v, "raise its parallelism");
    free(r);
}

static void test_slow_consumer(void **state)
{
    (void)state;
    sl_dataset *ds = sl_prefetch(sl_map(sl_range(0, 150, 1), "id", tu_identity, NULL, 2, 0), 4);
    /* a generous target: sanitizers slow sl_next down */
    char *r = report_of(ds, 2000, 100000);
    const char *v = verdict(r);
    expect_in(v, "bottleneck: the consumer (step ");
    expect_in(v, "the pipeline keeps up");
    free(r);
}

static void test_slow_synchronous_input(void **state)
{
    (void)state;
    int us = 1000;
    sl_dataset *ds = sl_filter(sl_range(0, 150, 1), "slow", slow_keep, &us);
    ds = sl_prefetch(sl_map(ds, "id", tu_identity, NULL, 2, 0), 2);
    char *r = report_of(ds, 0, 0);
    const char *v = verdict(r);
    expect_in(v, "bottleneck: map(id): its producer waits on its input");
    expect_in(v, "(range, filter(slow)) are the bottleneck");
    free(r);
}

static void test_text(void **state)
{
    (void)state;
    sl_dataset *ds = sl_prefetch(sl_map(sl_range(0, 10, 1), "id", tu_identity, NULL, 2, 0), 2);
    sl_options *o = tu_opts(2, 0);
    sl_iterator *it = sl_iterator_create(ds, o);
    assert_non_null(it);
    /* nothing asked yet */
    char buf[8192];
    int n = sl_iterator_report_buf(it, buf, sizeof buf);
    assert_true(n > 0 && n < (int)sizeof buf);
    expect_in(verdict(buf), "sl_next has not been called");

    sl_element *el;
    while (sl_next(it, &el) == 0)
        sl_element_release(el);
    n = sl_iterator_report_buf(it, buf, sizeof buf);
    assert_true(n > 0 && n < (int)sizeof buf);
    expect_in(buf, "node ");
    expect_in(buf, "elements");
    /* the raw counters, by the list's names: the map made 10 elements */
    expect_in(buf, "counters since the start:\n");
    expect_in(buf, "  map(id): elements 10 busy_ns ");
    expect_in(buf, " bytes_read 0 ");
    /* truncated like snprintf: same length, a prefix, NUL-terminated */
    char small[16];
    memset(small, 'x', sizeof small);
    assert_int_equal(sl_iterator_report_buf(it, small, sizeof small), n);
    assert_int_equal(strlen(small), sizeof small - 1);
    assert_memory_equal(small, buf, sizeof small - 1);
    /* the FILE variant writes the same text */
    FILE *f = tmpfile();
    assert_non_null(f);
    assert_int_equal(sl_iterator_report(it, f), 0);
    rewind(f);
    char *back = calloc(1, (size_t)n + 2);
    assert_int_equal(fread(back, 1, (size_t)n + 1, f), n);
    fclose(f);
    /* after the end the figures stand still */
    assert_string_equal(back, buf);
    free(back);

    assert_int_equal(sl_iterator_report(NULL, stdout), SL_EINVAL);
    assert_int_equal(sl_iterator_report(it, NULL), SL_EINVAL);
    assert_int_equal(sl_iterator_report_buf(it, NULL, 5), SL_EINVAL);
    sl_iterator_free(it);
    sl_options_free(o);
    sl_dataset_release(ds);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_slow_map_is_cpu_bound),
        cmocka_unit_test(test_slow_map_below_budget),
        cmocka_unit_test(test_slow_consumer),
        cmocka_unit_test(test_slow_synchronous_input),
        cmocka_unit_test(test_text),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
