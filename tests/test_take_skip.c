/* take(n), skip(n) and assert_cardinality(n): tf.data semantics,
 * cardinality, random access. */
#include <stdlib.h>
#include <string.h>
#include "graph/node.h" /* random access is internal: checked directly */
#include "testutil.h"

static int count_calls(sl_map_ctx *ctx, const sl_element *el, void *user)
{
    (void)ctx, (void)el;
    (*(int *)user)++;
    return 1;
}

static int drop_all(sl_map_ctx *ctx, const sl_element *el, void *user)
{
    (void)ctx, (void)el, (void)user;
    return 0;
}

static void expect_range(sl_dataset *ds, int64_t lo, int64_t hi)
{
    int64_t want[64];
    assert_true(hi - lo <= 64);
    for (int64_t i = lo; i < hi; i++)
        want[i - lo] = i;
    tu_expect(ds, want, (size_t)(hi > lo ? hi - lo : 0));
}

static void test_take(void **state)
{
    (void)state;
    sl_dataset *ds = sl_take(sl_range(0, 10, 1), 3);
    assert_non_null(ds);
    expect_range(ds, 0, 3);
    assert_int_equal(sl_dataset_cardinality(ds), 3);
    assert_string_equal(sl_dataset_name(ds), "take");
    sl_dataset_release(ds);

    ds = sl_take(sl_range(0, 10, 1), -1); /* all */
    expect_range(ds, 0, 10);
    assert_int_equal(sl_dataset_cardinality(ds), 10);
    sl_dataset_release(ds);

    ds = sl_take(sl_range(0, 3, 1), 10); /* more than there is */
    expect_range(ds, 0, 3);
    assert_int_equal(sl_dataset_cardinality(ds), 3);
    sl_dataset_release(ds);

    ds = sl_take(sl_range(0, 10, 1), 0);
    expect_range(ds, 0, 0);
    assert_int_equal(sl_dataset_cardinality(ds), 0);
    sl_dataset_release(ds);
}

static void test_take_pulls_no_more_than_n(void **state)
{
    (void)state;
    int calls = 0;
    sl_dataset *ds = sl_take(sl_filter(sl_range(0, 10, 1), "count", count_calls, &calls), 0);
    expect_range(ds, 0, 0);
    assert_int_equal(calls, 0);
    sl_dataset_release(ds);

    calls = 0;
    ds = sl_take(sl_filter(sl_range(0, 10, 1), "count", count_calls, &calls), 4);
    expect_range(ds, 0, 4);
    assert_int_equal(calls, 4);
    sl_dataset_release(ds);
}

static void test_skip(void **state)
{
    (void)state;
    sl_dataset *ds = sl_skip(sl_range(0, 10, 1), 4);
    expect_range(ds, 4, 10);
    assert_int_equal(sl_dataset_cardinality(ds), 6);
    assert_string_equal(sl_dataset_name(ds), "skip");
    sl_dataset_release(ds);

    ds = sl_skip(sl_range(0, 10, 1), 0);
    expect_range(ds, 0, 10);
    assert_int_equal(sl_dataset_cardinality(ds), 10);
    sl_dataset_release(ds);

    ds = sl_skip(sl_range(0, 10, 1), 10);
    expect_range(ds, 0, 0);
    assert_int_equal(sl_dataset_cardinality(ds), 0);
    sl_dataset_release(ds);

    ds = sl_skip(sl_range(0, 10, 1), 25); /* past the end */
    expect_range(ds, 0, 0);
    assert_int_equal(sl_dataset_cardinality(ds), 0);
    sl_dataset_release(ds);

    ds = sl_skip(sl_range(0, 10, 1), -1); /* all */
    expect_range(ds, 0, 0);
    assert_int_equal(sl_dataset_cardinality(ds), 0);
    sl_dataset_release(ds);
}

static void test_skip_then_take(void **state)
{
    (void)state;
    sl_dataset *ds = sl_take(sl_skip(sl_range(0, 100, 1), 10), 5);
    expect_range(ds, 10, 15);
    assert_int_equal(sl_dataset_cardinality(ds), 5);
    sl_dataset_release(ds);

    ds = sl_skip(sl_take(sl_range(0, 100, 1), 5), 3);
    expect_range(ds, 3, 5);
    assert_int_equal(sl_dataset_cardinality(ds), 2);
    sl_dataset_release(ds);

    /* an endless input: skip leaves it endless, take bounds it */
    ds = sl_take(sl_skip(sl_repeat(sl_range(0, 4, 1), -1), 2), 6);
    int64_t want[] = {2, 3, 0, 1, 2, 3};
    tu_expect(ds, want, 6);
    assert_int_equal(sl_dataset_cardinality(ds), 6);
    sl_dataset_release(ds);
}

static void test_empty_input(void **state)
{
    (void)state;
    int64_t ns[] = {-1, 0, 1, 5};
    for (size_t i = 0; i < 4; i++) {
        sl_dataset *ds = sl_take(sl_range(0, 0, 1), ns[i]);
        expect_range(ds, 0, 0);
        assert_int_equal(sl_dataset_cardinality(ds), 0);
        sl_dataset_release(ds);
        ds = sl_skip(sl_range(0, 0, 1), ns[i]);
        expect_range(ds, 0, 0);
        assert_int_equal(sl_dataset_cardinality(ds), 0);
        sl_dataset_release(ds);
    }
}

static void test_cardinality(void **state)
{
    (void)state;
    sl_dataset *inf = sl_repeat(sl_range(0, 3, 1), -1);
    sl_dataset *unk = sl_filter(sl_range(0, 3, 1), NULL, drop_all, NULL);
    assert_int_equal(sl_dataset_cardinality(inf), SL_INFINITE);
    assert_int_equal(sl_dataset_cardinality(unk), SL_UNKNOWN);

    struct {
        sl_dataset *(*op)(sl_dataset *, int64_t);
        sl_dataset *in;
        int64_t n, card;
    } cases[] = {
        {sl_take, inf, 5, 5},
        {sl_take, inf, 0, 0},
        {sl_take, inf, -1, SL_INFINITE},
        {sl_take, unk, 5, SL_UNKNOWN},
        {sl_take, unk, -1, SL_UNKNOWN},
        {sl_skip, inf, 5, SL_INFINITE},
        {sl_skip, inf, -1, SL_INFINITE},
        {sl_skip, unk, 5, SL_UNKNOWN},
        {sl_skip, unk, -1, SL_UNKNOWN},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        sl_dataset *ds = cases[i].op(sl_dataset_retain(cases[i].in), cases[i].n);
        assert_non_null(ds);
        assert_int_equal(sl_dataset_cardinality(ds), cases[i].card);
        sl_dataset_release(ds);
    }
    sl_dataset_release(inf);
    sl_dataset_release(unk);
}

static void test_eof_repeats(void **state)
{
    (void)state;
    sl_dataset *ds = sl_skip(sl_take(sl_range(0, 10, 1), 3), 1);
    sl_iterator *it = sl_iterator_create(ds, NULL);
    assert_non_null(it);
    sl_element *el;
    for (int64_t i = 1; i < 3; i++) {
        assert_int_equal(sl_next(it, &el), 0);
        assert_int_equal(sl_tensor_int64(sl_element_tensor(el, 0)), i);
        sl_element_release(el);
    }
    for (int k = 0; k < 3; k++) {
        assert_int_equal(sl_next(it, &el), SL_EOF);
        assert_null(el);
    }
    sl_iterator_free(it);
    sl_dataset_release(ds);
}

static void test_bad_args(void **state)
{
    (void)state;
    sl_clear_error();
    assert_null(sl_take(sl_range(0, 3, 1), -2));
    assert_non_null(strstr(sl_last_error(), "take"));
    sl_clear_error();
    assert_null(sl_skip(sl_range(0, 3, 1), -7));
    assert_non_null(strstr(sl_last_error(), "skip"));

    /* a NULL input passes through, keeping the first error */
    sl_clear_error();
    assert_null(sl_take(sl_skip(sl_range(0, 3, 0), 1), 1));
    assert_non_null(strstr(sl_last_error(), "range"));
}

static void test_fingerprint(void **state)
{
    (void)state;
    sl_dataset *a = sl_take(sl_range(0, 10, 1), 3), *b = sl_take(sl_range(0, 10, 1), 3);
    sl_dataset *c = sl_take(sl_range(0, 10, 1), 4), *d = sl_skip(sl_range(0, 10, 1), 3);
    assert_true(sl_dataset_fingerprint(a) == sl_dataset_fingerprint(b));
    assert_true(sl_dataset_fingerprint(a) != sl_dataset_fingerprint(c));
    assert_true(sl_dataset_fingerprint(a) != sl_dataset_fingerprint(d));
    sl_dataset_release(a);
    sl_dataset_release(b);
    sl_dataset_release(c);
    sl_dataset_release(d);
}

static int64_t get_value(sl_dataset *ds, int64_t index)
{
    sl_element *el = NULL;
    assert_int_equal(ds->ops->get(ds, index, &el), 0);
    int64_t v = sl_tensor_int64(sl_element_tensor(el, 0));
    sl_element_release(el);
    return v;
}

static void test_random_access(void **state)
{
    (void)state;
    sl_dataset *ds = sl_take(sl_skip(sl_range(100, 200, 2), 5), 10);
    assert_true(sl__dataset_can_get(ds));
    for (int64_t i = 0; i < 10; i++)
        assert_int_equal(get_value(ds, i), 100 + 2 * (5 + i));
    sl_dataset_release(ds);

    /* take of an endless input has a known size, but repeat has no get */
    ds = sl_take(sl_repeat(sl_range(0, 3, 1), -1), 10);
    assert_false(sl__dataset_can_get(ds));
    sl_dataset_release(ds);
    ds = sl_skip(sl_filter(sl_range(0, 3, 1), NULL, drop_all, NULL), 1);
    assert_false(sl__dataset_can_get(ds));
    sl_dataset_release(ds);
}

/* Pulls ds to its end: the elements (values), and the code it ended with
 * and its message. */
static int pull_all(sl_dataset *ds, int64_t *vals, int max, int *n, char *msg, size_t msz)
{
    sl_iterator *it = sl_iterator_create(ds, NULL);
    assert_non_null(it);
    sl_element *el;
    int rc;
    *n = 0;
    while ((rc = sl_next(it, &el)) == 0) {
        assert_true(*n < max);
        vals[(*n)++] = sl_tensor_int64(sl_element_tensor(el, 0));
        sl_element_release(el);
    }
    snprintf(msg, msz, "%s", sl_iterator_errmsg(it));
    /* the end stays, as does an error: the next call gives it again */
    assert_int_equal(sl_next(it, &el), rc);
    sl_iterator_free(it);
    return rc;
}

static void test_assert_cardinality(void **state)
{
    (void)state;
    /* a filter keeping everything: the size is unknown until stated */
    sl_dataset *ds = sl_assert_cardinality(sl_filter(sl_range(0, 10, 1), NULL, count_calls,
                                                     &(int){0}), 10);
    assert_non_null(ds);
    assert_int_equal(sl_dataset_cardinality(ds), 10);
    expect_range(ds, 0, 10);
    int64_t got[16];
    int k;
    char why[256];
    assert_int_equal(pull_all(ds, got, 16, &k, why, sizeof why), SL_EOF);
    assert_int_equal(k, 10);
    sl_dataset *rep = sl_repeat(sl_dataset_retain(ds), 3); /* each pass is checked */
    assert_int_equal(sl_dataset_cardinality(rep), 30);
    assert_int_equal(tu_count(rep, NULL), 30);
    sl_dataset_release(rep);
    sl_dataset_release(ds);

    int64_t vals[16];
    int n;
    char msg[512];
    struct {
        int64_t stated, given;
        const char *says;
    } wrong[] = {
        {9, 9, "expected to hold 9 elements but gave at least 10"},
        {11, 10, "expected to hold 11 elements but ended after 10"},
        {0, 0, "expected to hold 0 elements but gave at least 1"},
        {SL_INFINITE, 10, "expected to be infinite but ended after 10 elements"},
    };
    for (size_t i = 0; i < sizeof wrong / sizeof *wrong; i++) {
        ds = sl_assert_cardinality(sl_filter(sl_range(0, 10, 1), NULL, count_calls, &(int){0}),
                                   wrong[i].stated);
        assert_int_equal(sl_dataset_cardinality(ds), wrong[i].stated);
        assert_int_equal(pull_all(ds, vals, 16, &n, msg, sizeof msg), SL_ECORRUPT);
        assert_int_equal(n, wrong[i].given);
        for (int k = 0; k < n; k++)
            assert_int_equal(vals[k], k);
        if (!strstr(msg, wrong[i].says))
            fail_msg("stated %lld: \"%s\"", (long long)wrong[i].stated, msg);
        sl_dataset_release(ds);
    }

    /* a size the input knows: the same passes through (with random
     * access); another is refused when built */
    ds = sl_assert_cardinality(sl_range(0, 10, 1), 10);
    assert_true(sl__dataset_can_get(ds));
    expect_range(ds, 0, 10);
    sl_dataset_release(ds);
    ds = sl_assert_cardinality(sl_repeat(sl_range(0, 3, 1), -1), SL_INFINITE);
    assert_int_equal(sl_dataset_cardinality(ds), SL_INFINITE);
    sl_dataset_release(ds);
    sl_clear_error();
    assert_null(sl_assert_cardinality(sl_range(0, 10, 1), 12));
    assert_non_null(strstr(sl_last_error(), "has 10 elements, not 12"));
    assert_null(sl_assert_cardinality(sl_repeat(sl_range(0, 3, 1), -1), 5));
    assert_non_null(strstr(sl_last_error(), "infinite"));
    assert_null(sl_assert_cardinality(sl_range(0, 3, 1), SL_INFINITE));
    assert_non_null(strstr(sl_last_error(), "has 3 elements, not infinitely many"));
    assert_null(sl_assert_cardinality(sl_range(0, 3, 1), -5));
    assert_int_equal(sl_last_error_code(), SL_EINVAL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_take),
        cmocka_unit_test(test_take_pulls_no_more_than_n),
        cmocka_unit_test(test_skip),
        cmocka_unit_test(test_skip_then_take),
        cmocka_unit_test(test_empty_input),
        cmocka_unit_test(test_cardinality),
        cmocka_unit_test(test_eof_repeats),
        cmocka_unit_test(test_bad_args),
        cmocka_unit_test(test_fingerprint),
        cmocka_unit_test(test_random_access),
        cmocka_unit_test(test_assert_cardinality),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
