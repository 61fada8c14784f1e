/* enumerate, counter, random, take_while, unique, scan, rebatch, flat_map,
 * reduce, get_single_element and rejection_resample, with tf.data's semantics (its docstring
 * examples, written in C). Resuming each is test_checkpoint.c's. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "testutil.h"

static int64_t scalar(const sl_element *el, int i)
{
    return sl_tensor_int64(sl_element_tensor(el, i));
}

static void test_enumerate_counter_random(void **state)
{
    (void)state;
    /* range(100, 103).enumerate(start=5): (5, 100), (6, 101), (7, 102) */
    sl_dataset *e = sl_enumerate(sl_range(100, 103, 1), 5);
    assert_int_equal(sl_dataset_cardinality(e), 3);
    char text[128];
    sl_structure_format(sl_dataset_structure(e), text, sizeof text);
    assert_string_equal(text, "(int64[], int64[])");
    sl_options *o = tu_opts(2, 0);
    sl_iterator *it = sl_iterator_create(e, o);
    sl_element *el;
    for (int i = 0; i < 3; i++) {
        assert_int_equal(sl_next(it, &el), 0);
        assert_true(scalar(el, 0) == 5 + i && scalar(el, 1) == 100 + i);
        sl_element_release(el);
    }
    assert_int_equal(sl_next(it, &el), SL_EOF);
    sl_iterator_free(it);
    sl_dataset_release(e);
    /* counter(start=2, step=5).take(4): 2, 7, 12, 17 */
    sl_dataset *c = sl_take(sl_counter(2, 5), 4);
    int64_t want[] = {2, 7, 12, 17};
    tu_expect(c, want, 4);
    sl_dataset_release(c);
    assert_int_equal(sl_dataset_cardinality(c = sl_counter(0, 1)), SL_INFINITE);
    sl_dataset_release(c);
    /* random(seed): the same for a seed and epoch, another epoch or seed
     * differs, SL_SAME_EACH_EPOCH repeats */
    int64_t *a, *b;
    size_t n;
    sl_dataset *r = sl_take(sl_random(42, 0), 6), *r2 = sl_take(sl_random(43, 0), 6);
    sl_dataset *same = sl_take(sl_random(42, SL_SAME_EACH_EPOCH), 6);
    assert_int_equal(tu_collect(r, o, &a, &n, NULL), SL_EOF);
    assert_int_equal(tu_collect(r, o, &b, &n, NULL), SL_EOF);
    assert_memory_equal(a, b, sizeof *a * 6);
    free(b);
    assert_int_equal(tu_collect(r2, o, &b, &n, NULL), SL_EOF);
    assert_true(memcmp(a, b, sizeof *a * 6) != 0);
    free(b);
    sl_options_set(o, SL_OPT_EPOCH, 3);
    assert_int_equal(tu_collect(r, o, &b, &n, NULL), SL_EOF);
    assert_true(memcmp(a, b, sizeof *a * 6) != 0);
    free(b);
    int64_t *s0, *s3;
    assert_int_equal(tu_collect(same, o, &s3, &n, NULL), SL_EOF);
    sl_options_set(o, SL_OPT_EPOCH, 0);
    assert_int_equal(tu_collect(same, o, &s0, &n, NULL), SL_EOF);
    assert_memory_equal(s0, s3, sizeof *s0 * 6);
    free(a), free(s0), free(s3);
    sl_dataset_release(r), sl_dataset_release(r2), sl_dataset_release(same);
    sl_options_free(o);
}

static int below(sl_map_ctx *ctx, const sl_element *el, void *user)
{
    (void)ctx;
    return scalar(el, 0) < *(const int64_t *)user;
}

static void test_take_while_unique(void **state)
{
    (void)state;
    /* range(10).take_while(lambda x: x < 5): 0 1 2 3 4 */
    int64_t five = 5;
    sl_dataset *t = sl_take_while(sl_range(0, 10, 1), "below", below, &five);
    tu_expect_iota(t, 5);
    assert_int_equal(sl_dataset_cardinality(t), SL_UNKNOWN);
    sl_dataset_release(t);
    /* from_tensor_slices([1, 37, 2, 37, 2, 1]).unique(): 1, 37, 2 */
    sl_element *el = sl_element_create(1);
    int64_t six = 6;
    int64_t *v = sl_element_add_tensor(el, SL_INT64, 1, &six);
    const int64_t vals[6] = {1, 37, 2, 37, 2, 1};
    memcpy(v, vals, sizeof vals);
    sl_dataset *u = sl_unique(sl_from_tensor_slices(el));
    int64_t want[] = {1, 37, 2};
    tu_expect(u, want, 3);
    sl_dataset_release(u);
    /* strings: "hello", "world", "hello" -> "hello", "world" */
    el = sl_element_create(1);
    int64_t three = 3;
    const char *words[] = {"hello", "world", "hello"};
    tu_add_strings(el, 1, &three, words);
    u = sl_unique(sl_from_tensor_slices(el));
    assert_int_equal(tu_count(u, NULL), 2);
    sl_dataset_release(u);
    /* elements of several tensors are refused when built */
    sl_dataset *pair = sl_enumerate(sl_range(0, 3, 1), 0);
    assert_null(sl_unique(pair));
    assert_int_equal(sl_last_error_code(), SL_ESHAPE);
}

/* A running sum: the state is the sum so far, the output the sum with the
 * element (tf.data's scan example: range(10).scan(0, lambda s, x: (s + x,
 * s + x))). */
static int running_sum(sl_map_ctx *ctx, const sl_element *st, const sl_element *in,
                       sl_element **new_state, sl_element **out, void *user)
{
    (void)ctx, (void)user;
    int64_t s = scalar(st, 0) + scalar(in, 0);
    sl_element *a = sl_element_create(1), *b = sl_element_create(1);
    sl_element_add_int64(a, s);
    sl_element_add_int64(b, s);
    *new_state = a;
    *out = b;
    return 0;
}

static void test_scan(void **state)
{
    (void)state;
    sl_element *zero = sl_element_create(1);
    sl_element_add_int64(zero, 0);
    sl_dataset *s = sl_scan(sl_range(0, 10, 1), "sum", zero, running_sum, NULL);
    sl_element_release(zero);
    int64_t want[] = {0, 1, 3, 6, 10, 15, 21, 28, 36, 45};
    tu_expect(s, want, 10);
    assert_int_equal(sl_dataset_cardinality(s), 10);
    sl_dataset_release(s);
}

static void test_rebatch(void **state)
{
    (void)state;
    /* range(6).batch(2).rebatch(3): [0 1 2], [3 4 5] */
    sl_dataset *r = sl_rebatch(sl_batch(sl_range(0, 6, 1), 2, SL_DROP_REMAINDER), 3, 0);
    assert_int_equal(sl_dataset_cardinality(r), 2);
    tu_expect_iota(r, 6); /* (tu_collect flattens each batch) */
    sl_dataset_release(r);
    /* range(7).batch(2).rebatch(3, drop_remainder): [0 1 2], [3 4 5]; the
     * input's batches are not all of known size: unknown */
    r = sl_rebatch(sl_batch(sl_range(0, 7, 1), 2, 0), 3, SL_DROP_REMAINDER);
    assert_int_equal(sl_dataset_cardinality(r), SL_UNKNOWN);
    tu_expect_iota(r, 6);
    sl_dataset_release(r);
}

static sl_dataset *three_of(const sl_element *el, void *user)
{
    (void)user;
    int64_t x = scalar(el, 0);
    return sl_take(sl_counter(x * 10, 1), 3);
}

static int add(const sl_element *st, const sl_element *el, sl_element **out, void *user)
{
    (void)user;
    sl_element *e = sl_element_create(1);
    sl_element_add_int64(e, scalar(st, 0) + scalar(el, 0));
    *out = e;
    return 0;
}

static void test_flat_map_reduce_single(void **state)
{
    (void)state;
    /* flat_map: [1, 2] -> 10 11 12 20 21 22 */
    sl_dataset *f = sl_flat_map(sl_range(1, 3, 1), three_of, NULL);
    int64_t want[] = {10, 11, 12, 20, 21, 22};
    tu_expect(f, want, 6);
    sl_dataset_release(f);
    /* reduce(0, add) over range(5): 10; an empty dataset gives the initial */
    sl_element *zero = sl_element_create(1), *out;
    sl_element_add_int64(zero, 0);
    sl_dataset *r = sl_range(0, 5, 1);
    assert_int_equal(sl_reduce(r, NULL, zero, add, NULL, &out), 0);
    assert_int_equal(scalar(out, 0), 10);
    sl_element_release(out);
    sl_dataset *none = sl_range(0, 0, 1);
    assert_int_equal(sl_reduce(none, NULL, zero, add, NULL, &out), 0);
    assert_ptr_equal(out, zero);
    sl_element_release(out);
    sl_element_release(zero);
    /* get_single_element: one, none, more */
    sl_dataset *one = sl_range(7, 8, 1);
    assert_int_equal(sl_get_single_element(one, NULL, &out), 0);
    assert_int_equal(scalar(out, 0), 7);
    sl_element_release(out);
    assert_int_equal(sl_get_single_element(none, NULL, &out), SL_EINVAL);
    assert_null(out);
    assert_non_null(strstr(sl_last_error(), "empty"));
    assert_int_equal(sl_get_single_element(r, NULL, &out), SL_EINVAL);
    assert_non_null(strstr(sl_last_error(), "more than one"));
    sl_dataset_release(one), sl_dataset_release(none), sl_dataset_release(r);
}

/* class 0 for x % 10 < 6, else 1 (0.6 / 0.4); x == 1000077 is class 7 */
static int six_four(sl_map_ctx *ctx, const sl_element *el, int64_t *cls, void *user)
{
    (void)ctx, (void)user;
    int64_t x = scalar(el, 0);
    *cls = x == 1000077 ? 7 : x % 10 < 6 ? 0 : 1;
    return 0;
}

/* Counts the classes of a resampled pass, checking each is its element's;
 * returns the pass's elements, *hash their order. */
static int64_t resampled(sl_dataset *ds, const sl_options *o, int64_t count[2], uint64_t *hash)
{
    sl_iterator *it = sl_iterator_create(ds, o);
    assert_non_null(it);
    sl_element *el;
    int64_t n = 0;
    count[0] = count[1] = 0;
    *hash = 0;
    while (sl_next(it, &el) == 0) {
        int64_t c = scalar(el, 0), x = scalar(el, 1);
        assert_int_equal(c, x % 10 < 6 ? 0 : 1);
        count[c]++;
        *hash = tu_mix(*hash ^ (uint64_t)x);
        n++;
        sl_element_release(el);
    }
    assert_string_equal(sl_iterator_errmsg(it), "");
    sl_iterator_free(it);
    return n;
}

static void test_rejection_resample(void **state)
{
    (void)state;
    /* tf.data's example: classes 0.6 / 0.4 resampled to 0.5 / 0.5 */
    const double target[2] = {0.5, 0.5}, initial[2] = {0.6, 0.4};
    const int64_t n = 40000;
    sl_dataset *given = sl_rejection_resample(sl_range(0, n, 1), "six_four", six_four, NULL,
                                              target, 2, initial, 9, 0);
    sl_dataset *est = sl_rejection_resample(sl_range(0, n, 1), "six_four", six_four, NULL,
                                            target, 2, NULL, 9, 0);
    char text[128];
    sl_structure_format(sl_dataset_structure(given), text, sizeof text);
    assert_string_equal(text, "(int64[], int64[])");
    assert_int_equal(sl_dataset_cardinality(given), SL_UNKNOWN);
    sl_options *o = tu_opts(2, 0);
    int64_t c[2], c2[2];
    uint64_t h, h2;
    /* kept: 0.6 * (0.5/0.6)/(0.5/0.4) + 0.4 = 0.8 of the input */
    int64_t kept = resampled(given, o, c, &h);
    assert_true(kept > n * 79 / 100 && kept < n * 81 / 100);
    assert_true(c[0] > kept * 48 / 100 && c[0] < kept * 52 / 100);
    int64_t kept_est = resampled(est, o, c2, &h2);
    assert_true(c2[0] > kept_est * 48 / 100 && c2[0] < kept_est * 52 / 100);
    /* the same for a seed on any thread count; new each epoch */
    sl_options *o1 = tu_opts(1, 0);
    assert_int_equal(resampled(given, o1, c2, &h2), kept);
    assert_true(h2 == h);
    sl_options_set(o1, SL_OPT_EPOCH, 1);
    resampled(given, o1, c2, &h2);
    assert_true(h2 != h);
    sl_dataset *same = sl_rejection_resample(sl_range(0, n, 1), "six_four", six_four, NULL,
                                             target, 2, initial, 9, SL_SAME_EACH_EPOCH);
    uint64_t s0, s1;
    resampled(same, o1, c2, &s1);
    sl_options_set(o1, SL_OPT_EPOCH, 0);
    resampled(same, o1, c2, &s0);
    assert_true(s0 == s1);
    /* a class outside [0, nclasses) is the element's error */
    sl_dataset *bad = sl_rejection_resample(sl_range(1000070, 1000080, 1), "six_four",
                                            six_four, NULL, target, 2, initial, 9, 0);
    int64_t *vals;
    size_t got;
    char msg[1024];
    assert_int_equal(tu_collect(bad, o, &vals, &got, msg), SL_EINVAL);
    assert_non_null(strstr(msg, "class 7 is not in [0, 2)"));
    free(vals);
    /* distributions that cannot be */
    const double negative[2] = {0.5, -0.1}, zero[2] = {0, 0}, one_sided[2] = {1, 0};
    assert_null(sl_rejection_resample(sl_range(0, 5, 1), "f", six_four, NULL, negative, 2,
                                      NULL, -1, 0));
    assert_non_null(strstr(sl_last_error(), "target_dist[1]"));
    assert_null(sl_rejection_resample(sl_range(0, 5, 1), "f", six_four, NULL, zero, 2, NULL,
                                      -1, 0));
    assert_null(sl_rejection_resample(sl_range(0, 5, 1), "f", six_four, NULL, target, 2,
                                      one_sided, -1, 0));
    assert_non_null(strstr(sl_last_error(), "initial 0"));
    sl_dataset_release(given), sl_dataset_release(est), sl_dataset_release(same);
    sl_dataset_release(bad);
    sl_options_free(o), sl_options_free(o1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_enumerate_counter_random),
        cmocka_unit_test(test_take_while_unique),
        cmocka_unit_test(test_scan),
        cmocka_unit_test(test_rebatch),
        cmocka_unit_test(test_flat_map_reduce_single),
        cmocka_unit_test(test_rejection_resample),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
