/* Combining datasets: zip, concatenate, choose_from, sample_from, with
 * tf.data's semantics (its docstring examples, written in C). Resuming each
 * is test_checkpoint.c's. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "testutil.h"

/* Every element's int64 scalars, in order, one row per element, into
 * out[rows][cols]; returns the number of rows and asserts each has `cols`. */
static int rows_of(sl_dataset *ds, int cols, int64_t out[][8], int max, int *rc_out)
{
    sl_options *o = tu_opts(2, 7);
    sl_iterator *it = sl_iterator_create(ds, o);
    assert_non_null(it);
    sl_element *el;
    int n = 0, rc;
    while ((rc = sl_next(it, &el)) == 0) {
        assert_true(n < max);
        assert_int_equal(sl_element_size(el), cols);
        for (int j = 0; j < cols; j++)
            out[n][j] = sl_tensor_int64(sl_element_tensor(el, j));
        n++;
        sl_element_release(el);
    }
    if (rc_out)
        *rc_out = rc;
    else
        assert_int_equal(rc, SL_EOF);
    sl_iterator_free(it);
    sl_options_free(o);
    return n;
}

static const char *structure_text(const sl_dataset *ds)
{
    static char buf[512];
    sl_structure_format(sl_dataset_structure(ds), buf, sizeof buf);
    return buf;
}

static void test_zip(void **state)
{
    (void)state;
    /* a = range(1, 4), b = range(4, 7): (1, 4), (2, 5), (3, 6) */
    sl_dataset *ab[2] = {sl_range(1, 4, 1), sl_range(4, 7, 1)};
    sl_dataset *z = sl_zip(ab, 2, NULL);
    assert_string_equal(structure_text(z), "(int64[], int64[])");
    assert_int_equal(sl_dataset_cardinality(z), 3);
    int64_t got[16][8];
    assert_int_equal(rows_of(z, 2, got, 16, NULL), 3);
    for (int i = 0; i < 3; i++)
        assert_true(got[i][0] == i + 1 && got[i][1] == i + 4);
    sl_dataset_release(z);
    /* the shortest ends it: zip(a, c) with c = range(13, 15) */
    sl_dataset *ac[2] = {sl_range(1, 4, 1), sl_range(13, 15, 1)};
    z = sl_zip(ac, 2, NULL);
    assert_int_equal(sl_dataset_cardinality(z), 2);
    assert_int_equal(rows_of(z, 2, got, 16, NULL), 2);
    assert_true(got[1][0] == 2 && got[1][1] == 14);
    sl_dataset_release(z);
    /* nested and keyed: {"b": zip(x, y), "a": z} in key order a, b */
    sl_dataset *xy[2] = {sl_range(0, 5, 1), sl_batch(sl_range(10, 30, 1), 2, 0)};
    sl_dataset *inner = sl_zip(xy, 2, NULL);
    sl_dataset *kv[2] = {inner, sl_range(100, 103, 1)};
    const char *keys[2] = {"b", "a"};
    z = sl_zip(kv, 2, keys);
    assert_string_equal(structure_text(z), "{a: int64[], b: (int64[], int64[?])}");
    sl_options *o = tu_opts(1, 0);
    sl_iterator *it = sl_iterator_create(z, o);
    sl_element *el;
    assert_int_equal(sl_next(it, &el), 0);
    assert_int_equal(sl_element_size(el), 3);
    assert_int_equal(sl_tensor_int64(sl_element_tensor(el, 0)), 100); /* a */
    assert_int_equal(sl_tensor_int64(sl_element_tensor(el, 1)), 0);   /* b[0] */
    assert_int_equal(sl_tensor_count(sl_element_tensor(el, 2)), 2);   /* b[1]: [10, 11] */
    sl_element_release(el);
    sl_iterator_free(it);
    sl_options_free(o);
    assert_int_equal(sl_dataset_cardinality(z), 3);
    sl_dataset_release(z);
    /* an endless input leaves the others' size */
    sl_dataset *inf[2] = {sl_repeat(sl_range(0, 3, 1), -1), sl_range(0, 5, 1)};
    z = sl_zip(inf, 2, NULL);
    assert_int_equal(sl_dataset_cardinality(z), 5);
    sl_dataset_release(z);
    /* refusals: repeated keys, no inputs */
    sl_dataset *dup[2] = {sl_range(0, 1, 1), sl_range(0, 1, 1)};
    const char *same[2] = {"k", "k"};
    assert_null(sl_zip(dup, 2, same));
    assert_int_equal(sl_last_error_code(), SL_EINVAL);
    assert_non_null(strstr(sl_last_error(), "twice"));
    assert_null(sl_zip(dup, 0, NULL));
}

static void test_concatenate(void **state)
{
    (void)state;
    /* range(1, 4).concatenate(range(4, 8)): 1, 2, 3, 4, 5, 6, 7 */
    sl_dataset *c = sl_concatenate(sl_range(1, 4, 1), sl_range(4, 8, 1));
    assert_int_equal(sl_dataset_cardinality(c), 7);
    int64_t want[] = {1, 2, 3, 4, 5, 6, 7};
    tu_expect(c, want, 7);
    /* random access: a whole shuffle over it */
    sl_dataset *s = sl_shuffle(sl_dataset_retain(c), SL_SHUFFLE_ALL, 3, 0);
    int64_t *v;
    size_t n;
    assert_int_equal(tu_collect(s, NULL, &v, &n, NULL), SL_EOF);
    assert_int_equal(n, 7);
    int64_t sum = 0;
    for (size_t i = 0; i < n; i++)
        sum += v[i];
    assert_int_equal(sum, 28);
    free(v);
    sl_dataset_release(s);
    sl_dataset_release(c);
    /* elements that cannot be one dataset's: refused when built */
    sl_dataset *pairs[2] = {sl_range(0, 2, 1), sl_range(0, 2, 1)};
    assert_null(sl_concatenate(sl_range(0, 3, 1), sl_zip(pairs, 2, NULL)));
    assert_int_equal(sl_last_error_code(), SL_ESHAPE);
    /* dimensions that differ become unknown */
    c = sl_concatenate(sl_batch(sl_range(0, 6, 1), 2, SL_DROP_REMAINDER),
                       sl_batch(sl_range(0, 6, 1), 3, SL_DROP_REMAINDER));
    assert_string_equal(structure_text(c), "int64[?]");
    assert_int_equal(sl_dataset_cardinality(c), 5);
    sl_dataset_release(c);
}

static void test_choose_from(void **state)
{
    (void)state;
    /* tf.data's example: choose 0, 1, 2, 0, 1, 2 ... from three constant
     * datasets ("foo", "bar", "baz"), here 10, 20, 30 */
    sl_dataset *in[3] = {sl_repeat(sl_range(10, 11, 1), -1), sl_repeat(sl_range(20, 21, 1), -1),
                         sl_repeat(sl_range(30, 31, 1), -1)};
    sl_dataset *choice = sl_take(sl_repeat(sl_range(0, 3, 1), -1), 9);
    sl_dataset *c = sl_choose_from(choice, in, 3, SL_STOP_ON_EMPTY);
    int64_t want[] = {10, 20, 30, 10, 20, 30, 10, 20, 30};
    tu_expect(c, want, 9);
    assert_int_equal(sl_dataset_cardinality(c), 9);
    sl_dataset_release(c);
    /* an input that ends: passed over, or the end with SL_STOP_ON_EMPTY */
    for (int stop = 0; stop < 2; stop++) {
        sl_dataset *two[2] = {sl_range(0, 2, 1), sl_range(100, 110, 1)};
        c = sl_choose_from(sl_take(sl_repeat(sl_range(0, 2, 1), -1), 10), two, 2,
                           stop ? SL_STOP_ON_EMPTY : 0);
        int64_t a[] = {0, 100, 1, 101, 102, 103, 104};
        int64_t b[] = {0, 100, 1, 101};
        if (stop)
            tu_expect(c, b, 4);
        else
            tu_expect(c, a, 7);
        sl_dataset_release(c);
    }
    /* a choice out of range is an error */
    sl_dataset *one[1] = {sl_range(0, 5, 1)};
    c = sl_choose_from(sl_range(0, 3, 1), one, 1, 0);
    int64_t *v;
    size_t n;
    char msg[1024];
    assert_int_equal(tu_collect(c, NULL, &v, &n, msg), SL_EINVAL);
    assert_non_null(strstr(msg, "choice 1 is outside [0, 1)"));
    free(v);
    sl_dataset_release(c);
}

static void test_sample_from(void **state)
{
    (void)state;
    /* weights 0.3 / 0.7 over two endless streams of 0s and 1s */
    sl_dataset *in[2] = {sl_repeat(sl_range(0, 1, 1), -1), sl_repeat(sl_range(1, 2, 1), -1)};
    const double w[2] = {0.3, 0.7};
    sl_dataset *s = sl_take(sl_sample_from(in, 2, w, 11, 0), 20000);
    assert_int_equal(sl_dataset_cardinality(s), 20000);
    int64_t *v, *again;
    size_t n, m;
    sl_options *o1 = tu_opts(1, 0);
    assert_int_equal(tu_collect(s, o1, &v, &n, NULL), SL_EOF);
    sl_options_free(o1);
    int64_t ones = 0;
    for (size_t i = 0; i < n; i++)
        ones += v[i];
    assert_true(fabs((double)ones / (double)n - 0.7) < 0.02);
    /* the same draw on any thread count; another the next epoch */
    sl_options *o8 = tu_opts(8, 0);
    assert_int_equal(tu_collect(s, o8, &again, &m, NULL), SL_EOF);
    assert_memory_equal(v, again, n * sizeof *v);
    free(again);
    sl_options_set(o8, SL_OPT_EPOCH, 1);
    assert_int_equal(tu_collect(s, o8, &again, &m, NULL), SL_EOF);
    assert_true(memcmp(v, again, n * sizeof *v) != 0);
    free(again);
    free(v);
    sl_options_free(o8);
    sl_dataset_release(s);
    /* finite inputs: every element of each, in a mixed order */
    sl_dataset *fin[2] = {sl_range(0, 50, 1), sl_range(1000, 1030, 1)};
    s = sl_sample_from(fin, 2, NULL, 4, 0);
    assert_int_equal(tu_collect(s, NULL, &v, &n, NULL), SL_EOF);
    assert_int_equal(n, 80);
    int64_t sum = 0;
    for (size_t i = 0; i < n; i++)
        sum += v[i];
    assert_int_equal(sum, 49 * 50 / 2 + 30 * 1000 + 29 * 30 / 2);
    free(v);
    sl_dataset_release(s);
    /* bad weights */
    sl_dataset *two[2] = {sl_range(0, 1, 1), sl_range(0, 1, 1)};
    const double neg[2] = {1, -1};
    assert_null(sl_sample_from(two, 2, neg, 0, 0));
    assert_int_equal(sl_last_error_code(), SL_EINVAL);
    assert_non_null(strstr(sl_last_error(), "weight 1"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_zip),
        cmocka_unit_test(test_concatenate),
        cmocka_unit_test(test_choose_from),
        cmocka_unit_test(test_sample_from),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
