/* Variable-length elements: padded_batch, window, group_by_window,
 * bucket_by_sequence_length, and ignore_errors, with tf.data's semantics
 * (its docstring examples, written in C), and pack. Resuming each is
 * test_checkpoint.c's. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "testutil.h"

static int64_t scalar(const sl_element *el, int i)
{
    return sl_tensor_int64(sl_element_tensor(el, i));
}

/* x -> [x] * x (tf.data's example: range(1, 5).map(lambda x: fill([x], x))) */
static int fill_x(sl_map_ctx *ctx, const sl_element *in, sl_element **out, void *user)
{
    (void)ctx, (void)user;
    int64_t x = scalar(in, 0);
    sl_element *el = sl_element_create(1);
    int64_t *v = sl_element_add_tensor(el, SL_INT64, 1, &x);
    for (int64_t i = 0; i < x; i++)
        v[i] = x;
    *out = el;
    return 0;
}

static sl_dataset *fills(int64_t from, int64_t to)
{
    sl_dataset *ds = sl_map(sl_range(from, to, 1), "fill", fill_x, NULL, 2, 0);
    sl_structure *s = sl_structure_parse("int64[?]");
    ds = sl_with_structure(ds, s);
    sl_structure_release(s);
    return ds;
}

/* Element i of ds, batch b's tensor t as int64s, flattened. */
static void expect_batch(sl_dataset *ds, int b, const int64_t *shape, int ndim,
                         const int64_t *want)
{
    sl_options *o = tu_opts(1, 0);
    sl_iterator *it = sl_iterator_create(ds, o);
    sl_element *el = NULL;
    for (int i = 0; i <= b; i++) {
        if (el)
            sl_element_release(el);
        assert_int_equal(sl_next(it, &el), 0);
    }
    const sl_tensor *t = sl_element_tensor(el, 0);
    tu_check_shape(t, ndim, shape);
    assert_memory_equal(sl_tensor_data(t), want, (size_t)sl_tensor_count(t) * sizeof *want);
    sl_element_release(el);
    sl_iterator_free(it);
    sl_options_free(o);
}

static void test_padded_batch(void **state)
{
    (void)state;
    /* A.padded_batch(2, padded_shapes=5): [[1 0 0 0 0] [2 2 0 0 0]], ... */
    int64_t five[SL_MAX_DIMS] = {5, -1, -1, -1, -1, -1, -1, -1};
    sl_dataset *b = sl_padded_batch(fills(1, 5), 2, 1, five, NULL, 0);
    char text[64];
    sl_structure_format(sl_dataset_structure(b), text, sizeof text);
    assert_string_equal(text, "int64[?,5]");
    const int64_t s25[2] = {2, 5};
    const int64_t b0[10] = {1, 0, 0, 0, 0, 2, 2, 0, 0, 0};
    const int64_t b1[10] = {3, 3, 3, 0, 0, 4, 4, 4, 4, 0};
    expect_batch(b, 0, s25, 2, b0);
    expect_batch(b, 1, s25, 2, b1);
    assert_int_equal(sl_dataset_cardinality(b), 2);
    sl_dataset_release(b);
    /* to the batch's longest, with a padding value of -1 */
    sl_element *pad = sl_element_create(1);
    sl_element_add_int64(pad, -1);
    b = sl_padded_batch(fills(1, 5), 2, 1, NULL, pad, 0);
    const int64_t s22[2] = {2, 2}, s24[2] = {2, 4};
    const int64_t c0[4] = {1, -1, 2, 2};
    const int64_t c1[8] = {3, 3, 3, -1, 4, 4, 4, 4};
    expect_batch(b, 0, s22, 2, c0);
    expect_batch(b, 1, s24, 2, c1);
    sl_dataset_release(b);
    sl_element_release(pad);
    /* a value longer than its padded shape is an error */
    int64_t two[SL_MAX_DIMS] = {2, -1, -1, -1, -1, -1, -1, -1};
    b = sl_padded_batch(fills(1, 5), 2, 1, two, NULL, 0);
    int64_t *v;
    size_t n;
    char msg[1024];
    assert_int_equal(tu_collect(b, NULL, &v, &n, msg), SL_ESHAPE);
    assert_non_null(strstr(msg, "more than its padded shape"));
    free(v);
    sl_dataset_release(b);
    /* strings pad with "": ["a"], ["bb", "c"] -> [["a", ""], ["bb", "c"]] */
    sl_element *els[2] = {sl_element_create(1), sl_element_create(1)};
    int64_t one = 1, two_ = 2;
    const char *w0[1] = {"a"}, *w1[2] = {"bb", "c"};
    tu_add_strings(els[0], 1, &one, w0);
    tu_add_strings(els[1], 1, &two_, w1);
    b = sl_padded_batch(tu_elements(els, 2, -3), 2, 0, NULL, NULL, 0);
    sl_options *o = tu_opts(1, 0);
    sl_iterator *it = sl_iterator_create(b, o);
    sl_element *el;
    assert_int_equal(sl_next(it, &el), 0);
    const sl_tensor *t = sl_element_tensor(el, 0);
    tu_check_shape(t, 2, s22);
    tu_check_string(t, 0, "a");
    tu_check_string(t, 1, "");
    tu_check_string(t, 2, "bb");
    tu_check_string(t, 3, "c");
    sl_element_release(el);
    sl_iterator_free(it);
    sl_options_free(o);
    sl_dataset_release(b);
}

static void test_window(void **state)
{
    (void)state;
    /* range(7).window(3, 2, 1): [0 1 2] [2 3 4] [4 5 6] [6] */
    sl_dataset *w = sl_window(sl_range(0, 7, 1), 3, 2, 1, 0);
    assert_int_equal(sl_dataset_cardinality(w), 4);
    int64_t want[] = {0, 1, 2, 2, 3, 4, 4, 5, 6, 6};
    tu_expect(w, want, 10);
    sl_dataset_release(w);
    /* drop_remainder: the three full ones */
    w = sl_window(sl_range(0, 7, 1), 3, 2, 1, SL_DROP_REMAINDER);
    assert_int_equal(sl_dataset_cardinality(w), 3);
    tu_expect(w, want, 9);
    sl_dataset_release(w);
    /* range(7).window(3, 1, 2, drop): [0 2 4] [1 3 5] [2 4 6] */
    w = sl_window(sl_range(0, 7, 1), 3, 1, 2, SL_DROP_REMAINDER);
    int64_t strided[] = {0, 2, 4, 1, 3, 5, 2, 4, 6};
    tu_expect(w, strided, 9);
    assert_int_equal(sl_dataset_cardinality(w), 3);
    sl_dataset_release(w);
    /* shift beyond the span: range(10).window(2, 4): [0 1] [4 5] [8 9] */
    w = sl_window(sl_range(0, 10, 1), 2, 4, 1, 0);
    int64_t sparse[] = {0, 1, 4, 5, 8, 9};
    tu_expect(w, sparse, 6);
    sl_dataset_release(w);
}

static int mod2(sl_map_ctx *ctx, const sl_element *el, int64_t *key, void *user)
{
    (void)ctx, (void)user;
    *key = scalar(el, 0) % 2;
    return 0;
}

static sl_dataset *batch_of_window(int64_t key, sl_dataset *window, void *user)
{
    (void)key, (void)user;
    return sl_batch(window, 5, 0);
}

static int len_of(sl_map_ctx *ctx, const sl_element *el, int64_t *length, void *user)
{
    (void)ctx, (void)user;
    *length = sl_tensor_count(sl_element_tensor(el, 0));
    return 0;
}

static void test_group_and_bucket(void **state)
{
    (void)state;
    /* range(10).group_by_window(key=x % 2, batch(5), window 5):
     * [0 2 4 6 8], [1 3 5 7 9] */
    sl_dataset *g = sl_group_by_window(sl_range(0, 10, 1), "mod2", mod2, batch_of_window, 5,
                                       NULL, NULL);
    int64_t want[] = {0, 2, 4, 6, 8, 1, 3, 5, 7, 9};
    tu_expect(g, want, 10);
    char text[64];
    sl_structure_format(sl_dataset_structure(g), text, sizeof text);
    assert_string_equal(text, "int64[?]"); /* learned from the first window */
    sl_dataset_release(g);
    /* the groups left at the end come in key order: window 4 of range(7):
     * [0 2 4 6], then [1 3 5], then nothing */
    g = sl_group_by_window(sl_range(0, 7, 1), "mod2", mod2, batch_of_window, 4, NULL, NULL);
    int64_t left[] = {0, 2, 4, 6, 1, 3, 5};
    tu_expect(g, left, 7);
    sl_dataset_release(g);
    /* bucket_by_sequence_length: lengths 1..8 into buckets [0, 3), [3, 6),
     * [6, inf) of batch 2, padded to the batch's longest */
    const int64_t bounds[2] = {3, 6}, sizes[3] = {2, 2, 2};
    sl_dataset *bk = sl_bucket_by_sequence_length(fills(1, 9), "len", len_of, NULL, bounds, 2,
                                                  sizes, 1, NULL, NULL, 0);
    sl_options *o = tu_opts(1, 0);
    sl_iterator *it = sl_iterator_create(bk, o);
    sl_element *el;
    int64_t widths[8], rows[8];
    int nb = 0;
    int rc;
    while ((rc = sl_next(it, &el)) == 0) {
        const sl_tensor *t = sl_element_tensor(el, 0);
        rows[nb] = sl_tensor_shape(t)[0];
        widths[nb++] = sl_tensor_shape(t)[1];
        sl_element_release(el);
    }
    if (rc != SL_EOF)
        print_error("%s\n", sl_iterator_errmsg(it));
    assert_int_equal(rc, SL_EOF);
    sl_iterator_free(it);
    /* full batches as they fill: lengths (1, 2), (3, 4), (6, 7); then the
     * groups left, in bucket order: (5), (8) */
    assert_int_equal(nb, 5);
    int64_t want_w[5] = {2, 4, 7, 5, 8}, want_r[5] = {2, 2, 2, 1, 1};
    assert_memory_equal(widths, want_w, sizeof want_w);
    assert_memory_equal(rows, want_r, sizeof want_r);
    sl_dataset_release(bk);
    /* padded to the boundary less one; the last bucket is then an error */
    bk = sl_bucket_by_sequence_length(fills(1, 6), "len", len_of, NULL, bounds, 2, sizes, 1,
                                      NULL, NULL, SL_PAD_TO_BUCKET_BOUNDARY);
    it = sl_iterator_create(bk, o);
    assert_int_equal(sl_next(it, &el), 0);
    assert_int_equal(sl_tensor_shape(sl_element_tensor(el, 0))[1], 2);
    sl_element_release(el);
    assert_int_equal(sl_next(it, &el), 0);
    assert_int_equal(sl_tensor_shape(sl_element_tensor(el, 0))[1], 5);
    sl_element_release(el);
    sl_iterator_free(it);
    sl_dataset_release(bk);
    bk = sl_bucket_by_sequence_length(fills(5, 8), "len", len_of, NULL, bounds, 2, sizes, 1,
                                      NULL, NULL, SL_PAD_TO_BUCKET_BOUNDARY);
    int64_t *v;
    size_t n;
    char msg[1024];
    assert_int_equal(tu_collect(bk, o, &v, &n, msg), SL_EINVAL);
    assert_non_null(strstr(msg, "largest bucket boundary"));
    free(v);
    sl_dataset_release(bk);
    sl_options_free(o);
}

static int fail_odd(sl_map_ctx *ctx, const sl_element *in, sl_element **out, void *user)
{
    (void)user;
    if (scalar(in, 0) % 2)
        return sl_map_ctx_error(ctx, SL_EINVAL, "odd");
    *out = sl_element_retain((sl_element *)in);
    return 0;
}

static void test_ignore_errors(void **state)
{
    (void)state;
    /* the errors below are dropped under the fail policy */
    sl_dataset *d = sl_ignore_errors(sl_map(sl_range(0, 10, 1), "odd", fail_odd, NULL, 2, 0), 0);
    int64_t evens[] = {0, 2, 4, 6, 8};
    tu_expect(d, evens, 5);
    sl_options *o = tu_opts(2, 0);
    sl_iterator *it = sl_iterator_create(d, o);
    sl_element *el;
    while (sl_next(it, &el) == 0)
        sl_element_release(el);
    assert_int_equal(sl_iterator_stat(it, SL_STAT_ERRORS_SKIPPED), 5);
    sl_iterator_free(it);
    sl_options_free(o);
    sl_dataset_release(d);
    /* above it, the policy holds as it was */
    d = sl_map(sl_ignore_errors(sl_range(0, 4, 1), SL_LOG_ERRORS), "odd", fail_odd, NULL, 1, 0);
    int64_t *v;
    size_t n;
    assert_int_equal(tu_collect(d, NULL, &v, &n, NULL), SL_EINVAL);
    free(v);
    sl_dataset_release(d);
}

/* An element of one int64 sequence: len items, each v */
static sl_element *seq(int64_t len, int64_t v)
{
    sl_element *el = sl_element_create(1);
    int64_t *p = sl_element_add_tensor(el, SL_INT64, 1, &len);
    for (int64_t i = 0; i < len; i++)
        p[i] = v;
    return el;
}

/* The rows of pack(length, bins) over sequences of lens[i] items valued
 * i + 1, as text: "values|segment ids|positions" per row, rows by "/". */
static void expect_pack(const int64_t *lens, int n, int64_t length, int64_t bins,
                        const char *want)
{
    sl_element *els[16];
    for (int i = 0; i < n; i++)
        els[i] = seq(lens[i], i + 1);
    sl_dataset *ds = sl_pack(tu_elements(els, n, n), length, bins); /* takes els */
    assert_non_null(ds);
    sl_options *o = tu_opts(1, 0);
    sl_iterator *it = sl_iterator_create(ds, o);
    char got[1024] = "";
    size_t at = 0;
    sl_element *el;
    while (sl_next(it, &el) == 0) {
        assert_int_equal(sl_element_size(el), 3);
        for (int part = 0; part < 3; part++) {
            const sl_tensor *t = sl_element_tensor(el, part);
            assert_int_equal(sl_tensor_ndim(t), 1);
            assert_int_equal(sl_tensor_shape(t)[0], length);
            for (int64_t i = 0; i < length; i++) {
                int64_t v = part ? ((const int32_t *)sl_tensor_data(t))[i]
                                 : ((const int64_t *)sl_tensor_data(t))[i];
                at += (size_t)snprintf(got + at, sizeof got - at, "%lld", (long long)v);
            }
            at += (size_t)snprintf(got + at, sizeof got - at, part < 2 ? "|" : "/");
        }
        sl_element_release(el);
    }
    assert_string_equal(sl_iterator_errmsg(it), "");
    assert_string_equal(got, want);
    sl_iterator_free(it);
    sl_options_free(o);
    sl_dataset_release(ds);
}

static void test_pack(void **state)
{
    (void)state;
    /* [1], [2 2], [3 3 3] fill a row of 6; [4 x4] and [5 x5] get one each */
    const int64_t a[] = {1, 2, 3, 4, 5};
    expect_pack(a, 5, 6, 2, "122333|122333|001012/"
                            "444400|111100|012300/"
                            "555550|111110|012340/");
    /* first fit: one open row gives the 4 out before the second 4 ... */
    const int64_t b[] = {4, 4, 2, 2};
    expect_pack(b, 4, 6, 1, "111100|111100|012300/"
                            "222233|111122|012301/"
                            "440000|110000|010000/");
    /* ... two keep it open for a 2 */
    expect_pack(b, 4, 6, 2, "111133|111122|012301/"
                            "222244|111122|012301/");
    /* longer than a row: cut; empty: a segment of nothing */
    const int64_t c[] = {8, 0, 3};
    expect_pack(c, 3, 4, 2, "1111|1111|0123/"
                            "3330|2220|0120/");
    /* structure: each of the three parts nested as the input */
    sl_element *els[2];
    for (int i = 0; i < 2; i++) {
        int64_t len = 2 + i, rows[2] = {2 + i, 3};
        els[i] = sl_element_create(2); /* a dict's leaves in key order */
        memset(sl_element_add_tensor(els[i], SL_FLOAT32, 2, rows), 0, (size_t)rows[0] * 12);
        memset(sl_element_add_tensor(els[i], SL_INT32, 1, &len), 0, (size_t)len * 4);
    }
    sl_structure *s = sl_structure_parse("{ids: int32[?], emb: float32[?, 3]}");
    sl_dataset *d = sl_pack(sl_with_structure(tu_elements(els, 2, 2), s), 8, 4);
    char text[256];
    sl_structure_format(sl_dataset_structure(d), text, sizeof text);
    assert_string_equal(text, "({emb: float32[8,3], ids: int32[8]}, "
                              "{emb: int32[8], ids: int32[8]}, {emb: int32[8], ids: int32[8]})");
    assert_int_equal(sl_dataset_cardinality(d), SL_UNKNOWN);
    assert_int_equal(tu_count(d, NULL), 1);
    sl_dataset_release(d);
    sl_structure_release(s);
    /* what cannot be packed: scalars, strings, a changed inner shape */
    int64_t *v;
    size_t n;
    char msg[1024];
    d = sl_pack(sl_range(0, 3, 1), 4, 1);
    assert_int_equal(tu_collect(d, NULL, &v, &n, msg), SL_ESHAPE);
    assert_non_null(strstr(msg, "pack: tensor 0 is int64 of rank 0"));
    free(v);
    sl_dataset_release(d);
    els[0] = tu_el_str("abc");
    d = sl_pack(tu_elements(els, 1, 1), 4, 1);
    assert_int_equal(tu_collect(d, NULL, &v, &n, msg), SL_EDTYPE);
    free(v);
    sl_dataset_release(d);
    for (int i = 0; i < 2; i++) {
        int64_t shape[2] = {2, 3 + i};
        els[i] = sl_element_create(1);
        memset(sl_element_add_tensor(els[i], SL_UINT8, 2, shape), 0, (size_t)(6 + 2 * i));
    }
    d = sl_pack(tu_elements(els, 2, 2), 4, 1);
    assert_int_equal(tu_collect(d, NULL, &v, &n, msg), SL_ESHAPE);
    assert_non_null(strstr(msg, "uint8[2, 4] where the first element's was uint8[2, 3]"));
    free(v);
    sl_dataset_release(d);
    assert_null(sl_pack(sl_range(0, 3, 1), 0, 1));
    assert_null(sl_pack(sl_range(0, 3, 1), 4, 0));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_padded_batch),
        cmocka_unit_test(test_window),
        cmocka_unit_test(test_group_and_bucket),
        cmocka_unit_test(test_ignore_errors),
        cmocka_unit_test(test_pack),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
