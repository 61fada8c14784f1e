/* unbatch: the inverse of batch; zero-copy slices, strings, shape errors. */
#include <stdlib.h>
#include <string.h>
#include "graph/node.h"
#include "testutil.h"


static void test_inverse_of_batch(void **state)
{
    (void)state;
    sl_dataset *ds = sl_unbatch(sl_batch(sl_range(0, 10, 1), 3, 0));
    assert_non_null(ds);
    tu_expect_iota(ds, 10);
    assert_string_equal(sl_dataset_name(ds), "unbatch");
    assert_int_equal(sl_dataset_cardinality(ds), SL_UNKNOWN);
    /* elements come out as scalars again */
    sl_iterator *it = sl_iterator_create(ds, NULL);
    sl_element *el;
    assert_int_equal(sl_next(it, &el), 0);
    assert_int_equal(sl_tensor_ndim(sl_element_tensor(el, 0)), 0);
    sl_element_release(el);
    sl_iterator_free(it);
    sl_dataset_release(ds);

    ds = sl_unbatch(sl_batch(sl_range(0, 10, 1), 4, SL_DROP_REMAINDER));
    tu_expect_iota(ds, 8);
    sl_dataset_release(ds);

    ds = sl_unbatch(sl_unbatch(sl_batch(sl_batch(sl_range(0, 24, 1), 3, 0), 4, 0)));
    tu_expect_iota(ds, 24);
    sl_dataset_release(ds);
}

static void test_empty_input(void **state)
{
    (void)state;
    sl_dataset *ds = sl_unbatch(sl_batch(sl_range(0, 0, 1), 3, 0));
    tu_expect_iota(ds, 0);
    assert_int_equal(sl_dataset_cardinality(ds), 0);
    sl_dataset_release(ds);
}

static void test_scalars_fail(void **state)
{
    (void)state;
    sl_dataset *ds = sl_unbatch(sl_range(0, 3, 1));
    int64_t *got;
    size_t n;
    char msg[1024];
    assert_int_equal(tu_collect(ds, NULL, &got, &n, msg), SL_ESHAPE);
    free(got);
    assert_int_equal(n, 0);
    assert_string_equal(msg, "unbatch: tensor 0 is a scalar");
    sl_dataset_release(ds);

    sl_element *e = sl_element_create(0);
    ds = sl_unbatch(tu_elements(&e, 1, -3));
    assert_int_equal(tu_collect(ds, NULL, &got, &n, msg), SL_ESHAPE);
    free(got);
    assert_non_null(strstr(msg, "no tensors"));
    sl_dataset_release(ds);
}

static void test_first_dims_differ(void **state)
{
    (void)state;
    sl_element *e = sl_element_create(2);
    assert_non_null(sl_element_add_tensor(e, SL_INT64, 1, (int64_t[]){2}));
    assert_non_null(sl_element_add_tensor(e, SL_UINT8, 2, (int64_t[]){3, 4}));
    sl_dataset *ds = sl_unbatch(tu_elements(&e, 1, -3));
    int64_t *got;
    size_t n;
    char msg[1024];
    assert_int_equal(tu_collect(ds, NULL, &got, &n, msg), SL_ESHAPE);
    free(got);
    assert_non_null(strstr(msg, "unbatch"));
    assert_non_null(strstr(msg, "[3, 4]"));
    assert_non_null(strstr(msg, "[2]"));
    sl_dataset_release(ds);
}

/* Slices of pooled buffers are views; slices of inline data are copies. */
static void test_views(void **state)
{
    (void)state;
    sl_element *src = sl_element_create(2);
    int32_t *big = sl_element_add_tensor(src, SL_INT32, 2, (int64_t[]){4, 100});
    int64_t *small = sl_element_add_tensor(src, SL_INT64, 1, (int64_t[]){4});
    for (int i = 0; i < 400; i++)
        big[i] = i;
    for (int i = 0; i < 4; i++)
        small[i] = 10 * i;
    sl_element *slices[4];
    sl_dataset *ds = sl_unbatch(tu_elements((sl_element *[]){sl_element_retain(src)}, 1, -3));
    sl_iterator *it = sl_iterator_create(ds, NULL);
    for (int i = 0; i < 4; i++) {
        assert_int_equal(sl_next(it, &slices[i]), 0);
        const sl_tensor *a = sl_element_tensor(slices[i], 0), *b = sl_element_tensor(slices[i], 1);
        tu_check_shape(a, 1, (int64_t[]){100});
        assert_int_equal(sl_tensor_nbytes(a), 400);
        assert_ptr_equal(sl_tensor_data(a), big + 100 * i);
        assert_int_equal(sl_tensor_ndim(b), 0);
        assert_int_equal(sl_tensor_int64(b), 10 * i);
    }
    sl_element *el;
    assert_int_equal(sl_next(it, &el), SL_EOF);
    assert_int_equal(sl_next(it, &el), SL_EOF);
    sl_iterator_free(it);
    sl_dataset_release(ds);
    sl_element_release(src);
    /* the views keep the buffer alive on their own */
    for (int i = 0; i < 4; i++) {
        const int32_t *d = sl_tensor_data(sl_element_tensor(slices[i], 0));
        for (int k = 0; k < 100; k++)
            assert_int_equal(d[k], 100 * i + k);
        sl_element_release(slices[i]);
    }
}

static void test_strings(void **state)
{
    (void)state;
    const char *words[] = {"alpha", "", "gamma", "de"};
    sl_element *a = sl_element_create(1), *b = sl_element_create(1);
    tu_add_strings(a, 1, (int64_t[]){4}, words);         /* 4 scalars */
    tu_add_strings(b, 2, (int64_t[]){2, 2}, words);      /* 2 rows of 2 */
    sl_dataset *ds = sl_unbatch(tu_elements((sl_element *[]){a, b}, 2, -3));
    sl_iterator *it = sl_iterator_create(ds, NULL);
    sl_element *el;
    for (int i = 0; i < 4; i++) {
        assert_int_equal(sl_next(it, &el), 0);
        const sl_tensor *t = sl_element_tensor(el, 0);
        assert_int_equal(sl_tensor_dtype(t), SL_STRING);
        assert_int_equal(sl_tensor_ndim(t), 0);
        tu_check_string(t, 0, words[i]);
        assert_int_equal(sl_tensor_nbytes(t), 16 + strlen(words[i]));
        sl_element_release(el);
    }
    for (int r = 0; r < 2; r++) {
        assert_int_equal(sl_next(it, &el), 0);
        const sl_tensor *t = sl_element_tensor(el, 0);
        tu_check_shape(t, 1, (int64_t[]){2});
        tu_check_string(t, 0, words[2 * r]);
        tu_check_string(t, 1, words[2 * r + 1]);
        sl_element_release(el);
    }
    assert_int_equal(sl_next(it, &el), SL_EOF);
    sl_iterator_free(it);
    sl_dataset_release(ds);
}

static void test_strings_round_trip(void **state)
{
    (void)state;
    const char *words[] = {"x", "yy", "", "zzz", "a long string that is not inline at all"};
    sl_element *e[5];
    for (int i = 0; i < 5; i++)
        e[i] = tu_el_str(words[i]);
    sl_dataset *ds = sl_unbatch(sl_batch(tu_elements(e, 5, -3), 2, 0));
    sl_iterator *it = sl_iterator_create(ds, NULL);
    sl_element *el;
    for (int i = 0; i < 5; i++) {
        assert_int_equal(sl_next(it, &el), 0);
        tu_check_string(sl_element_tensor(el, 0), 0, words[i]);
        sl_element_release(el);
    }
    assert_int_equal(sl_next(it, &el), SL_EOF);
    sl_iterator_free(it);
    sl_dataset_release(ds);
}

/* Elements with a first dimension of 0 yield nothing; iteration goes on. */
static void test_zero_rows(void **state)
{
    (void)state;
    sl_element *e[3];
    for (int i = 0; i < 3; i++) {
        e[i] = sl_element_create(1);
        int64_t rows = i == 1 ? 2 : 0;
        int64_t *d = sl_element_add_tensor(e[i], SL_INT64, 1, &rows);
        for (int64_t k = 0; k < rows; k++)
            d[k] = k;
    }
    sl_dataset *ds = sl_unbatch(tu_elements(e, 3, -3));
    tu_expect_iota(ds, 2);
    sl_dataset_release(ds);
}

static void test_cardinality(void **state)
{
    (void)state;
    sl_dataset *ds = sl_unbatch(sl_repeat(sl_batch(sl_range(0, 4, 1), 2, 0), -1));
    assert_int_equal(sl_dataset_cardinality(ds), SL_UNKNOWN);
    sl_dataset_release(ds);
    assert_null(sl_unbatch(NULL));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_inverse_of_batch),
        cmocka_unit_test(test_empty_input),
        cmocka_unit_test(test_scalars_fail),
        cmocka_unit_test(test_first_dims_differ),
        cmocka_unit_test(test_views),
        cmocka_unit_test(test_strings),
        cmocka_unit_test(test_strings_round_trip),
        cmocka_unit_test(test_zero_rows),
        cmocka_unit_test(test_cardinality),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
