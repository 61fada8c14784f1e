/* filter(name, fn): keep/drop, callback context, and element errors under
 * each error policy. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "testutil.h"

static int64_t value(const sl_element *el)
{
    return sl_tensor_int64(sl_element_tensor(el, 0));
}

static int even(sl_map_ctx *ctx, const sl_element *el, void *user)
{
    (void)ctx, (void)user;
    return value(el) % 2 == 0;
}

/* Fails on multiples of *user (a positive int64), keeps the rest. */
static int fail_multiples(sl_map_ctx *ctx, const sl_element *el, void *user)
{
    int64_t v = value(el), m = *(const int64_t *)user;
    if (v % m == m - 1) {
        char msg[64];
        snprintf(msg, sizeof msg, "value %lld is bad", (long long)v);
        return sl_map_ctx_error(ctx, SL_ECORRUPT, msg);
    }
    return 1;
}

static int fail_silently(sl_map_ctx *ctx, const sl_element *el, void *user)
{
    (void)ctx, (void)user;
    return value(el) == 2 ? SL_EIO : 1;
}

static int fail_nomem(sl_map_ctx *ctx, const sl_element *el, void *user)
{
    (void)user;
    return value(el) == 1 ? sl_map_ctx_error(ctx, SL_ENOMEM, "no room") : 1;
}

/* Checks the context and uses scratch memory (which must not leak). */
static int check_ctx(sl_map_ctx *ctx, const sl_element *el, void *user)
{
    int64_t *next_index = user;
    assert_int_equal(sl_map_ctx_index(ctx), *next_index);
    assert_int_equal(sl_map_ctx_epoch(ctx), 0);
    (*next_index)++;
    char *s = sl_map_ctx_scratch(ctx, 1000);
    assert_non_null(s);
    memset(s, 1, 1000);
    double u = sl_map_ctx_uniform(ctx);
    assert_true(u >= 0.0 && u < 1.0);
    return value(el) % 3 == 0;
}

static sl_options *policy_opts(int policy, int64_t ppm)
{
    sl_options *o = tu_opts(1, 0);
    assert_int_equal(sl_options_set(o, SL_OPT_ERROR_POLICY, policy), 0);
    assert_int_equal(sl_options_set(o, SL_OPT_ERROR_MAX_PPM, ppm), 0);
    assert_int_equal(sl_options_set(o, SL_OPT_ERROR_LOG_LIMIT, 0), 0);
    return o;
}

static void test_keeps_evens(void **state)
{
    (void)state;
    sl_dataset *ds = sl_filter(sl_range(0, 10, 1), "even", even, NULL);
    assert_non_null(ds);
    int64_t want[] = {0, 2, 4, 6, 8};
    tu_expect(ds, want, 5);
    assert_string_equal(sl_dataset_name(ds), "filter(even)");
    assert_int_equal(sl_dataset_cardinality(ds), SL_UNKNOWN);
    sl_dataset_release(ds);

    ds = sl_filter(sl_range(1, 10, 2), NULL, even, NULL); /* all odd */
    tu_expect(ds, NULL, 0);
    assert_string_equal(sl_dataset_name(ds), "filter");
    sl_dataset_release(ds);
}

static void test_context(void **state)
{
    (void)state;
    int64_t next_index = 0;
    sl_dataset *ds = sl_filter(sl_range(0, 10, 1), "ctx", check_ctx, &next_index);
    int64_t want[] = {0, 3, 6, 9};
    tu_expect(ds, want, 4);
    assert_int_equal(next_index, 10);
    sl_dataset_release(ds);
}

static void test_empty_input(void **state)
{
    (void)state;
    sl_dataset *ds = sl_filter(sl_range(0, 0, 1), "even", even, NULL);
    tu_expect(ds, NULL, 0);
    assert_int_equal(sl_dataset_cardinality(ds), 0);
    sl_dataset_release(ds);
}

static void test_error_fail(void **state)
{
    (void)state;
    int64_t m = 4;
    sl_dataset *ds = sl_filter(sl_range(0, 10, 1), "bad3", fail_multiples, &m);
    sl_options *o = policy_opts(SL_ERRORS_FAIL, 10000);
    int64_t *got;
    size_t n;
    char msg[1024];
    assert_int_equal(tu_collect(ds, o, &got, &n, msg), SL_ECORRUPT);
    assert_int_equal(n, 3);
    for (size_t i = 0; i < n; i++)
        assert_int_equal(got[i], (int64_t)i);
    free(got);
    assert_string_equal(msg, "filter(bad3): value 3 is bad");

    /* the iterator keeps returning the error */
    sl_iterator *it = sl_iterator_create(ds, o);
    sl_element *el;
    int rc;
    while ((rc = sl_next(it, &el)) == 0)
        sl_element_release(el);
    assert_int_equal(rc, SL_ECORRUPT);
    assert_int_equal(sl_next(it, &el), SL_ECORRUPT);
    assert_null(el);
    sl_iterator_free(it);
    sl_dataset_release(ds);
    sl_options_free(o);
}

static void test_error_without_message(void **state)
{
    (void)state;
    sl_dataset *ds = sl_filter(sl_range(0, 10, 1), "quiet", fail_silently, NULL);
    int64_t *got;
    size_t n;
    char msg[1024];
    assert_int_equal(tu_collect(ds, NULL, &got, &n, msg), SL_EIO);
    free(got);
    assert_int_equal(n, 2);
    assert_non_null(strstr(msg, "filter(quiet): "));
    assert_non_null(strstr(msg, sl_strerror(SL_EIO)));
    sl_dataset_release(ds);
}

static void test_error_skip(void **state)
{
    (void)state;
    int64_t m = 3;
    sl_dataset *ds = sl_filter(sl_range(0, 30, 1), "bad", fail_multiples, &m);
    sl_options *o = policy_opts(SL_ERRORS_SKIP, 10000);
    sl_iterator *it = sl_iterator_create(ds, o);
    assert_non_null(it);
    sl_element *el;
    int rc, n = 0;
    while ((rc = sl_next(it, &el)) == 0) {
        assert_int_not_equal(value(el) % 3, 2);
        sl_element_release(el);
        n++;
    }
    assert_int_equal(rc, SL_EOF);
    assert_int_equal(n, 20);
    assert_int_equal(sl_iterator_stat(it, SL_STAT_ERRORS_SKIPPED), 10);
    assert_int_equal(sl_iterator_stat(it, SL_STAT_ELEMENTS), 20);
    sl_iterator_free(it);
    sl_dataset_release(ds);
    sl_options_free(o);
}

static void test_error_skip_rate(void **state)
{
    (void)state;
    int64_t m = 10; /* 10% of elements fail: 9, 19, 29, ... */
    sl_dataset *ds = sl_filter(sl_range(0, 100, 1), "bad", fail_multiples, &m);

    /* under a 20% limit every failure is skipped */
    sl_options *o = policy_opts(SL_ERRORS_SKIP_RATE, 200000);
    int64_t *got;
    size_t n;
    assert_int_equal(tu_collect(ds, o, &got, &n, NULL), SL_EOF);
    assert_int_equal(n, 90);
    free(got);
    sl_options_free(o);

    /* under 5%: at 9, 1 of 10 failed (1 is always allowed); at 19, 2 of 20
     * exceed max(1, 5% of 20) */
    o = policy_opts(SL_ERRORS_SKIP_RATE, 50000);
    char msg[1024];
    assert_int_equal(tu_collect(ds, o, &got, &n, msg), SL_ETOO_MANY_ERRORS);
    assert_int_equal(n, 18);
    free(got);
    assert_non_null(strstr(msg, "filter(bad): value 19 is bad"));
    sl_options_free(o);
    sl_dataset_release(ds);
}

static void test_unskippable_error(void **state)
{
    (void)state;
    sl_dataset *ds = sl_filter(sl_range(0, 10, 1), "oom", fail_nomem, NULL);
    sl_options *o = policy_opts(SL_ERRORS_SKIP, 10000);
    int64_t *got;
    size_t n;
    assert_int_equal(tu_collect(ds, o, &got, &n, NULL), SL_ENOMEM);
    assert_int_equal(n, 1);
    free(got);
    sl_options_free(o);
    sl_dataset_release(ds);
}

static void test_eof_repeats(void **state)
{
    (void)state;
    sl_dataset *ds = sl_filter(sl_range(0, 3, 1), "even", even, NULL);
    sl_iterator *it = sl_iterator_create(ds, NULL);
    sl_element *el;
    assert_int_equal(sl_next(it, &el), 0);
    sl_element_release(el);
    assert_int_equal(sl_next(it, &el), 0);
    sl_element_release(el);
    for (int k = 0; k < 3; k++)
        assert_int_equal(sl_next(it, &el), SL_EOF);
    sl_iterator_free(it);
    sl_dataset_release(ds);
}

static void test_bad_args_and_fingerprint(void **state)
{
    (void)state;
    sl_clear_error();
    assert_null(sl_filter(sl_range(0, 3, 1), "x", NULL, NULL));
    assert_non_null(strstr(sl_last_error(), "filter"));
    sl_clear_error();
    assert_null(sl_filter(NULL, "x", even, NULL));
    assert_string_equal(sl_last_error(), "");

    sl_dataset *a = sl_filter(sl_range(0, 3, 1), "a", even, NULL);
    sl_dataset *a2 = sl_filter(sl_range(0, 3, 1), "a", even, NULL);
    sl_dataset *b = sl_filter(sl_range(0, 3, 1), "b", even, NULL);
    assert_true(sl_dataset_fingerprint(a) == sl_dataset_fingerprint(a2));
    assert_true(sl_dataset_fingerprint(a) != sl_dataset_fingerprint(b));
    sl_dataset_release(a);
    sl_dataset_release(a2);
    sl_dataset_release(b);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_keeps_evens),
        cmocka_unit_test(test_context),
        cmocka_unit_test(test_empty_input),
        cmocka_unit_test(test_error_fail),
        cmocka_unit_test(test_error_without_message),
        cmocka_unit_test(test_error_skip),
        cmocka_unit_test(test_error_skip_rate),
        cmocka_unit_test(test_unskippable_error),
        cmocka_unit_test(test_eof_repeats),
        cmocka_unit_test(test_bad_args_and_fingerprint),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
