/* batch(size, flags): stacking, remainders, shape and dtype checks, strings,
 * buffer growth, cardinality. */
#include <stdlib.h>
#include <string.h>
#include "graph/node.h"
#include "testutil.h"


static int keep_all(sl_map_ctx *ctx, const sl_element *el, void *user)
{
    (void)ctx, (void)el, (void)user;
    return 1;
}

/* Runs ds and checks the leading dimension of tensor 0 of each batch. */
static void expect_batch_sizes(sl_dataset *ds, const int64_t *sizes, int n)
{
    sl_iterator *it = sl_iterator_create(ds, NULL);
    assert_non_null(it);
    sl_element *el;
    int rc, k = 0;
    while ((rc = sl_next(it, &el)) == 0) {
        assert_true(k < n);
        const sl_tensor *t = sl_element_tensor(el, 0);
        assert_int_equal(sl_tensor_ndim(t), 1);
        assert_int_equal(sl_tensor_shape(t)[0], sizes[k]);
        assert_int_equal(sl_tensor_nbytes(t), sizes[k] * 8);
        sl_element_release(el);
        k++;
    }
    assert_int_equal(rc, SL_EOF);
    assert_int_equal(k, n);
    assert_int_equal(sl_next(it, &el), SL_EOF); /* and again */
    sl_iterator_free(it);
}

static void test_remainder(void **state)
{
    (void)state;
    sl_dataset *ds = sl_batch(sl_range(0, 10, 1), 3, 0);
    assert_non_null(ds);
    expect_batch_sizes(ds, (int64_t[]){3, 3, 3, 1}, 4);
    tu_expect_iota(ds, 10);
    assert_int_equal(sl_dataset_cardinality(ds), 4);
    assert_string_equal(sl_dataset_name(ds), "batch");
    sl_dataset_release(ds);

    ds = sl_batch(sl_range(0, 10, 1), 3, SL_DROP_REMAINDER);
    expect_batch_sizes(ds, (int64_t[]){3, 3, 3}, 3);
    tu_expect_iota(ds, 9);
    assert_int_equal(sl_dataset_cardinality(ds), 3);
    sl_dataset_release(ds);
}

static void test_sizes(void **state)
{
    (void)state;
    sl_dataset *ds = sl_batch(sl_range(0, 4, 1), 1, 0);
    expect_batch_sizes(ds, (int64_t[]){1, 1, 1, 1}, 4);
    tu_expect_iota(ds, 4);
    sl_dataset_release(ds);

    ds = sl_batch(sl_range(0, 6, 1), 3, SL_DROP_REMAINDER); /* exact multiple */
    expect_batch_sizes(ds, (int64_t[]){3, 3}, 2);
    assert_int_equal(sl_dataset_cardinality(ds), 2);
    sl_dataset_release(ds);

    ds = sl_batch(sl_range(0, 3, 1), 5, 0); /* bigger than the input */
    expect_batch_sizes(ds, (int64_t[]){3}, 1);
    tu_expect_iota(ds, 3);
    assert_int_equal(sl_dataset_cardinality(ds), 1);
    sl_dataset_release(ds);

    ds = sl_batch(sl_range(0, 3, 1), 5, SL_DROP_REMAINDER);
    expect_batch_sizes(ds, NULL, 0);
    assert_int_equal(sl_dataset_cardinality(ds), 0);
    sl_dataset_release(ds);

    /* a huge size with a small input reserves only what the input holds */
    ds = sl_batch(sl_range(0, 5, 1), INT64_MAX, 0);
    expect_batch_sizes(ds, (int64_t[]){5}, 1);
    sl_dataset_release(ds);
    ds = sl_batch(sl_filter(sl_range(0, 5, 1), NULL, keep_all, NULL), (int64_t)1 << 40, 0);
    expect_batch_sizes(ds, (int64_t[]){5}, 1);
    sl_dataset_release(ds);
}

static void test_empty_input(void **state)
{
    (void)state;
    for (unsigned flags = 0; flags <= SL_DROP_REMAINDER; flags++) {
        sl_dataset *ds = sl_batch(sl_range(0, 0, 1), 4, flags);
        expect_batch_sizes(ds, NULL, 0);
        assert_int_equal(sl_dataset_cardinality(ds), 0);
        sl_dataset_release(ds);
    }
}

static void test_batch_of_batches(void **state)
{
    (void)state;
    sl_dataset *ds = sl_batch(sl_batch(sl_range(0, 12, 1), 2, 0), 3, 0);
    sl_iterator *it = sl_iterator_create(ds, NULL);
    sl_element *el;
    for (int b = 0; b < 2; b++) {
        assert_int_equal(sl_next(it, &el), 0);
        const sl_tensor *t = sl_element_tensor(el, 0);
        tu_check_shape(t, 2, (int64_t[]){3, 2});
        const int64_t *d = sl_tensor_data(t);
        for (int i = 0; i < 6; i++)
            assert_int_equal(d[i], b * 6 + i);
        sl_element_release(el);
    }
    assert_int_equal(sl_next(it, &el), SL_EOF);
    sl_iterator_free(it);
    sl_dataset_release(ds);
}

static void test_shape_mismatch(void **state)
{
    (void)state;
    /* [2], [2], [1]: the third element of the outer batch does not fit */
    sl_dataset *ds = sl_batch(sl_batch(sl_range(0, 5, 1), 2, 0), 3, 0);
    int64_t *got;
    size_t n;
    char msg[1024];
    assert_int_equal(tu_collect(ds, NULL, &got, &n, msg), SL_ESHAPE);
    free(got);
    assert_int_equal(n, 0);
    assert_non_null(strstr(msg, "batch"));
    assert_non_null(strstr(msg, "[1]"));
    assert_non_null(strstr(msg, "[2]"));
    assert_string_equal(msg, "batch: tensor 0: shape [1] does not match [2] of the batch's "
                             "first element");
    sl_dataset_release(ds);
}

static void test_dtype_and_count_mismatch(void **state)
{
    (void)state;
    sl_element *a = tu_el_i64(1), *b = sl_element_create(1);
    assert_int_equal(sl_element_add_float32(b, 2.0f), 0);
    sl_dataset *ds = sl_batch(tu_elements((sl_element *[]){a, b}, 2, -3), 2, 0);
    int64_t *got;
    size_t n;
    char msg[1024];
    assert_int_equal(tu_collect(ds, NULL, &got, &n, msg), SL_EDTYPE);
    free(got);
    assert_non_null(strstr(msg, "float32"));
    assert_non_null(strstr(msg, "int64"));
    sl_dataset_release(ds);

    a = tu_el_i64(1);
    b = sl_element_create(2);
    assert_int_equal(sl_element_add_int64(b, 2), 0);
    assert_int_equal(sl_element_add_int64(b, 3), 0);
    ds = sl_batch(tu_elements((sl_element *[]){a, b}, 2, -3), 2, 0);
    assert_int_equal(tu_collect(ds, NULL, &got, &n, msg), SL_ESHAPE);
    free(got);
    assert_non_null(strstr(msg, "2 tensors"));
    sl_dataset_release(ds);

    /* the first batch is fine; the mismatch is only within the second */
    sl_element *e[4] = {tu_el_i64(0), tu_el_i64(1), tu_el_i64(2), tu_el_str("x")};
    ds = sl_batch(tu_elements(e, 4, -3), 2, 0);
    assert_int_equal(tu_collect(ds, NULL, &got, &n, msg), SL_EDTYPE);
    assert_int_equal(n, 2);
    free(got);
    sl_dataset_release(ds);
}

static void test_rank_limit(void **state)
{
    (void)state;
    int64_t shape[SL_MAX_DIMS] = {1, 1, 1, 1, 1, 1, 1, 1};
    sl_element *a = sl_element_create(1);
    assert_non_null(sl_element_add_tensor(a, SL_UINT8, SL_MAX_DIMS, shape));
    sl_dataset *ds = sl_batch(tu_elements(&a, 1, -3), 2, 0);
    int64_t *got;
    size_t n;
    char msg[1024];
    assert_int_equal(tu_collect(ds, NULL, &got, &n, msg), SL_ESHAPE);
    free(got);
    assert_non_null(strstr(msg, "rank"));
    sl_dataset_release(ds);
}

static void test_strings(void **state)
{
    (void)state;
    const char *words[] = {"a", "bc", "", "def", "ghij"};
    sl_element *e[5];
    for (int i = 0; i < 5; i++)
        e[i] = tu_el_str(words[i]);
    sl_dataset *ds = sl_batch(tu_elements(e, 5, -3), 3, 0);
    sl_iterator *it = sl_iterator_create(ds, NULL);
    sl_element *el;
    assert_int_equal(sl_next(it, &el), 0);
    const sl_tensor *t = sl_element_tensor(el, 0);
    assert_int_equal(sl_tensor_dtype(t), SL_STRING);
    tu_check_shape(t, 1, (int64_t[]){3});
    for (int i = 0; i < 3; i++)
        tu_check_string(t, i, words[i]);
    assert_int_equal(sl_tensor_nbytes(t), 4 * 8 + 3);
    sl_element_release(el);
    assert_int_equal(sl_next(it, &el), 0);
    t = sl_element_tensor(el, 0);
    tu_check_shape(t, 1, (int64_t[]){2});
    tu_check_string(t, 0, "def");
    tu_check_string(t, 1, "ghij");
    sl_element_release(el);
    assert_int_equal(sl_next(it, &el), SL_EOF);
    sl_iterator_free(it);
    sl_dataset_release(ds);
}

/* (int64, string [2]) elements: both columns stack side by side. */
static void test_mixed_columns(void **state)
{
    (void)state;
    const char *strs[3][2] = {{"p", "qq"}, {"", "rrr"}, {"ssss", ""}};
    sl_element *e[3];
    for (int i = 0; i < 3; i++) {
        e[i] = sl_element_create(2);
        assert_int_equal(sl_element_add_int64(e[i], 10 + i), 0);
        tu_add_strings(e[i], 1, (int64_t[]){2}, strs[i]);
    }
    sl_dataset *ds = sl_batch(tu_elements(e, 3, -3), 4, 0);
    sl_iterator *it = sl_iterator_create(ds, NULL);
    sl_element *el;
    assert_int_equal(sl_next(it, &el), 0);
    assert_int_equal(sl_element_size(el), 2);
    const sl_tensor *nums = sl_element_tensor(el, 0), *s = sl_element_tensor(el, 1);
    tu_check_shape(nums, 1, (int64_t[]){3});
    for (int i = 0; i < 3; i++)
        assert_int_equal(((const int64_t *)sl_tensor_data(nums))[i], 10 + i);
    tu_check_shape(s, 2, (int64_t[]){3, 2});
    for (int i = 0; i < 6; i++)
        tu_check_string(s, i, strs[i / 2][i % 2]);
    sl_element_release(el);
    assert_int_equal(sl_next(it, &el), SL_EOF);
    sl_iterator_free(it);
    sl_dataset_release(ds);

    /* a different string shape in the same batch */
    sl_element *a = sl_element_create(1), *b = sl_element_create(1);
    tu_add_strings(a, 1, (int64_t[]){2}, strs[0]);
    tu_add_strings(b, 1, (int64_t[]){1}, strs[1]);
    ds = sl_batch(tu_elements((sl_element *[]){a, b}, 2, -3), 2, 0);
    it = sl_iterator_create(ds, NULL);
    assert_int_equal(sl_next(it, &el), SL_ESHAPE);
    assert_non_null(strstr(sl_iterator_errmsg(it), "shape [1] does not match [2]"));
    sl_iterator_free(it);
    sl_dataset_release(ds);
}

/* A cardinality that undercounts makes batch start small and grow; one that
 * overcounts just leaves room unused. */
static void test_buffer_growth(void **state)
{
    (void)state;
    for (int lie = 0; lie < 2; lie++) {
        sl_element *e[10];
        for (int i = 0; i < 10; i++) {
            e[i] = sl_element_create(1);
            int64_t *d = sl_element_add_tensor(e[i], SL_INT64, 1, (int64_t[]){100});
            for (int k = 0; k < 100; k++)
                d[k] = i * 100 + k;
        }
        sl_dataset *ds = sl_batch(tu_elements(e, 10, lie ? 1 : 1000), 8, 0);
        tu_expect_iota(ds, 1000);
        sl_dataset_release(ds);
    }
}

/* Input elements are released as soon as they are copied. */
static void test_inputs_released(void **state)
{
    (void)state;
    sl_element *e[4];
    for (int i = 0; i < 4; i++)
        e[i] = tu_el_i64(i);
    sl_dataset *ds = sl_batch(tu_elements(e, 4, -3), 4, 0);
    sl_iterator *it = sl_iterator_create(ds, NULL);
    sl_element *el;
    assert_int_equal(sl_next(it, &el), 0);
    for (int i = 0; i < 4; i++)
        assert_int_equal(atomic_load(&e[i]->refs), 1); /* only the source's */
    sl_element_release(el);
    sl_iterator_free(it);
    sl_dataset_release(ds);
}

static void test_degenerate_tensors(void **state)
{
    (void)state;
    /* elements without tensors batch into elements without tensors */
    sl_element *e[3] = {sl_element_create(0), sl_element_create(0), sl_element_create(0)};
    sl_dataset *ds = sl_batch(tu_elements(e, 3, -3), 2, 0);
    sl_iterator *it = sl_iterator_create(ds, NULL);
    sl_element *el;
    for (int k = 0; k < 2; k++) {
        assert_int_equal(sl_next(it, &el), 0);
        assert_int_equal(sl_element_size(el), 0);
        sl_element_release(el);
    }
    assert_int_equal(sl_next(it, &el), SL_EOF);
    sl_iterator_free(it);
    sl_dataset_release(ds);

    /* empty tensors: shape [0] becomes [n, 0] */
    sl_element *z[3];
    for (int i = 0; i < 3; i++) {
        z[i] = sl_element_create(1);
        assert_non_null(sl_element_add_tensor(z[i], SL_FLOAT32, 1, (int64_t[]){0}));
    }
    ds = sl_batch(tu_elements(z, 3, 1), 3, 0);
    it = sl_iterator_create(ds, NULL);
    assert_int_equal(sl_next(it, &el), 0);
    tu_check_shape(sl_element_tensor(el, 0), 2, (int64_t[]){3, 0});
    assert_int_equal(sl_tensor_nbytes(sl_element_tensor(el, 0)), 0);
    sl_element_release(el);
    assert_int_equal(sl_next(it, &el), SL_EOF);
    sl_iterator_free(it);
    sl_dataset_release(ds);
}

static void test_cardinality(void **state)
{
    (void)state;
    sl_dataset *inf = sl_repeat(sl_range(0, 3, 1), -1);
    sl_dataset *unk = sl_filter(sl_range(0, 3, 1), NULL, keep_all, NULL);
    sl_dataset *ds = sl_batch(sl_dataset_retain(inf), 4, 0);
    assert_int_equal(sl_dataset_cardinality(ds), SL_INFINITE);
    sl_dataset_release(ds);
    ds = sl_batch(sl_dataset_retain(unk), 4, SL_DROP_REMAINDER);
    assert_int_equal(sl_dataset_cardinality(ds), SL_UNKNOWN);
    sl_dataset_release(ds);
    for (int64_t n = 0; n < 10; n++)
        for (int64_t size = 1; size < 5; size++) {
            ds = sl_batch(sl_range(0, n, 1), size, 0);
            assert_int_equal(sl_dataset_cardinality(ds), (n + size - 1) / size);
            assert_int_equal(tu_count(ds, NULL), (n + size - 1) / size);
            sl_dataset_release(ds);
            ds = sl_batch(sl_range(0, n, 1), size, SL_DROP_REMAINDER);
            assert_int_equal(sl_dataset_cardinality(ds), n / size);
            assert_int_equal(tu_count(ds, NULL), n / size);
            sl_dataset_release(ds);
        }
    sl_dataset_release(inf);
    sl_dataset_release(unk);
}

static void test_bad_args_and_fingerprint(void **state)
{
    (void)state;
    sl_clear_error();
    assert_null(sl_batch(sl_range(0, 3, 1), 0, 0));
    assert_non_null(strstr(sl_last_error(), "batch"));
    sl_clear_error();
    assert_null(sl_batch(sl_range(0, 3, 1), 2, 0x10));
    assert_non_null(strstr(sl_last_error(), "batch"));
    sl_clear_error();
    assert_null(sl_batch(NULL, 2, 0));
    assert_string_equal(sl_last_error(), "");

    sl_dataset *a = sl_batch(sl_range(0, 3, 1), 2, 0), *b = sl_batch(sl_range(0, 3, 1), 2, 0);
    sl_dataset *c = sl_batch(sl_range(0, 3, 1), 2, SL_DROP_REMAINDER);
    sl_dataset *d = sl_batch(sl_range(0, 3, 1), 3, 0);
    assert_true(sl_dataset_fingerprint(a) == sl_dataset_fingerprint(b));
    assert_true(sl_dataset_fingerprint(a) != sl_dataset_fingerprint(c));
    assert_true(sl_dataset_fingerprint(a) != sl_dataset_fingerprint(d));
    sl_dataset_release(a);
    sl_dataset_release(b);
    sl_dataset_release(c);
    sl_dataset_release(d);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_remainder),
        cmocka_unit_test(test_sizes),
        cmocka_unit_test(test_empty_input),
        cmocka_unit_test(test_batch_of_batches),
        cmocka_unit_test(test_shape_mismatch),
        cmocka_unit_test(test_dtype_and_count_mismatch),
        cmocka_unit_test(test_rank_limit),
        cmocka_unit_test(test_strings),
        cmocka_unit_test(test_mixed_columns),
        cmocka_unit_test(test_buffer_growth),
        cmocka_unit_test(test_inputs_released),
        cmocka_unit_test(test_degenerate_tensors),
        cmocka_unit_test(test_cardinality),
        cmocka_unit_test(test_bad_args_and_fingerprint),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
