/* shard(n, i): coverage, disjointness, order, cardinality, random access. */
#include <stdlib.h>
#include <string.h>
#include "graph/node.h" /* random access is internal: checked directly */
#include "testutil.h"

static int drop_none(sl_map_ctx *ctx, const sl_element *el, void *user)
{
    (void)ctx, (void)el, (void)user;
    return 1;
}

/* For every input size and shard count: the shards are the residue classes
 * of the input positions, each in input order, so together they cover the
 * input exactly once. */
static void test_union_is_input(void **state)
{
    (void)state;
    const int64_t shard_counts[] = {1, 2, 3, 7};
    const int64_t sizes[] = {0, 1, 5, 7, 20, 23};
    sl_options *o = tu_opts(2, 0);
    for (size_t a = 0; a < sizeof sizes / sizeof *sizes; a++) {
        for (size_t b = 0; b < sizeof shard_counts / sizeof *shard_counts; b++) {
            int64_t size = sizes[a], n = shard_counts[b];
            int seen[32] = {0};
            for (int64_t i = 0; i < n; i++) {
                /* values differ from positions, to catch index mix-ups */
                sl_dataset *ds = sl_shard(sl_range(1000, 1000 + 3 * size, 3), n, i);
                assert_non_null(ds);
                int64_t *got;
                size_t len;
                assert_int_equal(tu_collect(ds, o, &got, &len, NULL), SL_EOF);
                assert_int_equal((int64_t)len, sl_dataset_cardinality(ds));
                for (size_t k = 0; k < len; k++) {
                    int64_t pos = (got[k] - 1000) / 3;
                    assert_int_equal(got[k], 1000 + 3 * pos);
                    assert_int_equal(pos, i + (int64_t)k * n); /* in order */
                    seen[pos]++;
                }
                free(got);
                sl_dataset_release(ds);
            }
            for (int64_t p = 0; p < size; p++)
                assert_int_equal(seen[p], 1);
        }
    }
    sl_options_free(o);
}

static void test_values(void **state)
{
    (void)state;
    sl_dataset *ds = sl_shard(sl_range(0, 10, 1), 3, 1);
    int64_t want[] = {1, 4, 7};
    tu_expect(ds, want, 3);
    assert_string_equal(sl_dataset_name(ds), "shard");
    sl_dataset_release(ds);

    /* sharding an endless input */
    ds = sl_take(sl_shard(sl_repeat(sl_range(0, 4, 1), -1), 3, 2), 4);
    int64_t want2[] = {2, 1, 0, 3};
    tu_expect(ds, want2, 4);
    sl_dataset_release(ds);
}

static void test_cardinality(void **state)
{
    (void)state;
    for (int64_t size = 0; size < 12; size++)
        for (int64_t n = 1; n < 6; n++)
            for (int64_t i = 0; i < n; i++) {
                sl_dataset *ds = sl_shard(sl_range(0, size, 1), n, i);
                int64_t want = size > i ? (size - i + n - 1) / n : 0;
                assert_int_equal(sl_dataset_cardinality(ds), want);
                assert_int_equal(tu_count(ds, NULL), want);
                sl_dataset_release(ds);
            }
    sl_dataset *ds = sl_shard(sl_repeat(sl_range(0, 4, 1), -1), 3, 2);
    assert_int_equal(sl_dataset_cardinality(ds), SL_INFINITE);
    sl_dataset_release(ds);
    ds = sl_shard(sl_filter(sl_range(0, 4, 1), NULL, drop_none, NULL), 3, 2);
    assert_int_equal(sl_dataset_cardinality(ds), SL_UNKNOWN);
    assert_int_equal(tu_count(ds, NULL), 1);
    sl_dataset_release(ds);
    ds = sl_shard(sl_range(0, INT64_MAX - 1, 1), 2, 1); /* no overflow near the top */
    assert_int_equal(sl_dataset_cardinality(ds), (INT64_MAX - 1) / 2);
    sl_dataset_release(ds);
}

static void test_bad_args(void **state)
{
    (void)state;
    const int64_t bad[][2] = {{0, 0}, {-1, 0}, {3, 3}, {3, -1}, {1, 1}};
    for (size_t k = 0; k < sizeof bad / sizeof *bad; k++) {
        sl_clear_error();
        assert_null(sl_shard(sl_range(0, 10, 1), bad[k][0], bad[k][1]));
        assert_non_null(strstr(sl_last_error(), "shard"));
    }
    sl_clear_error();
    assert_null(sl_shard(NULL, 2, 0));
    assert_string_equal(sl_last_error(), "");
}

static void test_eof_repeats(void **state)
{
    (void)state;
    sl_dataset *ds = sl_shard(sl_range(0, 5, 1), 2, 1);
    sl_iterator *it = sl_iterator_create(ds, NULL);
    assert_non_null(it);
    sl_element *el;
    for (int64_t v = 1; v < 5; v += 2) {
        assert_int_equal(sl_next(it, &el), 0);
        assert_int_equal(sl_tensor_int64(sl_element_tensor(el, 0)), v);
        sl_element_release(el);
    }
    assert_int_equal(sl_next(it, &el), SL_EOF);
    assert_int_equal(sl_next(it, &el), SL_EOF);
    sl_iterator_free(it);
    sl_dataset_release(ds);
}

static void test_fingerprint(void **state)
{
    (void)state;
    sl_dataset *a = sl_shard(sl_range(0, 10, 1), 3, 1), *b = sl_shard(sl_range(0, 10, 1), 3, 1);
    sl_dataset *c = sl_shard(sl_range(0, 10, 1), 3, 2), *d = sl_shard(sl_range(0, 10, 1), 4, 1);
    assert_true(sl_dataset_fingerprint(a) == sl_dataset_fingerprint(b));
    assert_true(sl_dataset_fingerprint(a) != sl_dataset_fingerprint(c));
    assert_true(sl_dataset_fingerprint(a) != sl_dataset_fingerprint(d));
    sl_dataset_release(a);
    sl_dataset_release(b);
    sl_dataset_release(c);
    sl_dataset_release(d);
}

static void test_random_access(void **state)
{
    (void)state;
    sl_dataset *ds = sl_shard(sl_skip(sl_range(0, 50, 1), 3), 4, 3);
    assert_true(sl__dataset_can_get(ds));
    int64_t card = sl_dataset_cardinality(ds);
    assert_int_equal(card, 11); /* 47 elements 3..49: positions 3, 7, ..., 43 */
    for (int64_t i = 0; i < card; i++) {
        sl_element *el = NULL;
        assert_int_equal(ds->ops->get(ds, i, &el), 0);
        assert_int_equal(sl_tensor_int64(sl_element_tensor(el, 0)), 3 + 3 + 4 * i);
        sl_element_release(el);
    }
    sl_dataset_release(ds);
    ds = sl_shard(sl_repeat(sl_range(0, 50, 1), 2), 4, 3);
    assert_false(sl__dataset_can_get(ds));
    sl_dataset_release(ds);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_union_is_input),
        cmocka_unit_test(test_values),
        cmocka_unit_test(test_cardinality),
        cmocka_unit_test(test_bad_args),
        cmocka_unit_test(test_eof_repeats),
        cmocka_unit_test(test_fingerprint),
        cmocka_unit_test(test_random_access),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
