/* Sources (range, from_tensors, from_files), the element API, options,
 * error strings, version, and dataset naming / cardinality / fingerprints. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <stdbool.h>
#include <string.h>
#include "testutil.h"

/* ---- range ---- */

static void expect_range(int64_t start, int64_t stop, int64_t step)
{
    int64_t want[64];
    size_t n = 0;
    for (int64_t v = start; step > 0 ? v < stop : v > stop; v += step) {
        assert_true(n < 64);
        want[n++] = v;
    }
    sl_dataset *ds = sl_range(start, stop, step);
    assert_non_null(ds);
    assert_int_equal(sl_dataset_cardinality(ds), (int64_t)n);
    tu_expect(ds, want, n);
    sl_dataset_release(ds);
}

static void test_range(void **state)
{
    (void)state;
    expect_range(0, 5, 1);
    expect_range(5, 0, -1);
    expect_range(0, 10, 3);
    expect_range(10, 0, -3);
    expect_range(-3, 3, 2);
    expect_range(-10, -20, -4);
    expect_range(0, 0, 1);   /* empty */
    expect_range(0, 0, -1);
    expect_range(5, 0, 1);   /* wrong direction: empty */
    expect_range(0, 5, -1);
    expect_range(0, 3, 10);  /* step beyond the span: just start */
    expect_range(3, 0, -10);
    expect_range(7, 8, 1);
    sl_clear_error();
    assert_int_equal(sl_last_error_code(), 0);
    assert_null(sl_range(0, 10, 0));
    assert_int_equal(sl_last_error_code(), SL_EINVAL);
    assert_non_null(strstr(sl_last_error(), "range"));
    sl_clear_error();
    assert_int_equal(sl_last_error_code(), 0);
    assert_string_equal(sl_last_error(), "");
    assert_string_equal(sl_dataset_name(NULL), "");
}

/* Spans near the int64 limits: the element count fits, the arithmetic on the
 * way must not overflow (UBSan traps signed overflow). */
static void test_range_extremes(void **state)
{
    (void)state;
    int64_t top[3] = {INT64_MAX - 10, INT64_MAX - 6, INT64_MAX - 2};
    sl_dataset *ds = sl_range(INT64_MAX - 10, INT64_MAX, 4);
    assert_int_equal(sl_dataset_cardinality(ds), 3);
    tu_expect(ds, top, 3);
    sl_dataset_release(ds);

    int64_t bottom[3] = {INT64_MIN + 10, INT64_MIN + 6, INT64_MIN + 2};
    ds = sl_range(INT64_MIN + 10, INT64_MIN, -4);
    assert_int_equal(sl_dataset_cardinality(ds), 3);
    tu_expect(ds, bottom, 3);
    sl_dataset_release(ds);

    /* a span wider than INT64_MAX */
    const int64_t e18 = 1000000000000000000ll;
    int64_t wide[10];
    for (int i = 0; i < 10; i++)
        wide[i] = -5 * e18 + i * e18;
    ds = sl_range(-5 * e18, 5 * e18, e18);
    assert_int_equal(sl_dataset_cardinality(ds), 10);
    tu_expect(ds, wide, 10);
    sl_dataset_release(ds);
}

/* ---- from_tensors ---- */

/* Slices of string tensors of any rank keep the inner shape. */
static void test_from_tensors_strings(void **state)
{
    (void)state;
    sl_element *src = sl_element_create(2);
    const char *grid[6] = {"a", "bb", "", "dddd", "e", "ff"};
    int64_t shape[2] = {3, 2}, flat[1] = {3};
    tu_add_strings(src, 2, shape, grid);
    tu_add_strings(src, 1, flat, grid);
    sl_dataset *ds = sl_from_tensor_slices(src);
    sl_options *o = tu_opts(1, 0);
    sl_iterator *it = sl_iterator_create(ds, o);
    sl_element *el;
    for (int i = 0; i < 3; i++) {
        assert_int_equal(sl_next(it, &el), 0);
        const sl_tensor *row = sl_element_tensor(el, 0), *one = sl_element_tensor(el, 1);
        tu_check_shape(row, 1, shape + 1);
        tu_check_string(row, 0, grid[2 * i]);
        tu_check_string(row, 1, grid[2 * i + 1]);
        tu_check_shape(one, 0, NULL);
        tu_check_string(one, 0, grid[i]);
        sl_element_release(el);
    }
    sl_iterator_free(it);
    sl_options_free(o);
    sl_dataset_release(ds);
}

static void test_from_tensors(void **state)
{
    (void)state;
    enum { N = 6 };
    sl_element *src = sl_element_create(2);
    int64_t s0[2] = {N, 3}, s1[1] = {N};
    int64_t *a = sl_element_add_tensor(src, SL_INT64, 2, s0);
    float *b = sl_element_add_tensor(src, SL_FLOAT32, 1, s1);
    assert_non_null(a);
    assert_non_null(b);
    for (int i = 0; i < N; i++) {
        for (int j = 0; j < 3; j++)
            a[i * 3 + j] = 10 * i + j;
        b[i] = (float)i + 0.5f;
    }
    sl_dataset *ds = sl_from_tensor_slices(src);
    assert_non_null(ds);
    assert_int_equal(sl_dataset_cardinality(ds), N);
    /* tf.data's name in reports; the kind hashed into the fingerprint is
     * still "from_tensors" (test_state_fixtures restores a state saved
     * under that name) */
    assert_string_equal(sl_dataset_name(ds), "from_tensor_slices");
    sl_options *o = tu_opts(1, 0);
    sl_iterator *it = sl_iterator_create(ds, o);
    sl_element *el;
    for (int i = 0; i < N; i++) {
        assert_int_equal(sl_next(it, &el), 0);
        assert_int_equal(sl_element_size(el), 2);
        const sl_tensor *t0 = sl_element_tensor(el, 0), *t1 = sl_element_tensor(el, 1);
        assert_int_equal(sl_tensor_dtype(t0), SL_INT64);
        assert_int_equal(sl_tensor_ndim(t0), 1);
        assert_int_equal(sl_tensor_shape(t0)[0], 3);
        assert_int_equal(sl_tensor_count(t0), 3);
        assert_int_equal(sl_tensor_nbytes(t0), 24);
        const int64_t *d0 = sl_tensor_data(t0);
        for (int j = 0; j < 3; j++)
            assert_int_equal(d0[j], 10 * i + j);
        assert_int_equal(sl_tensor_dtype(t1), SL_FLOAT32);
        assert_int_equal(sl_tensor_ndim(t1), 0);
        assert_int_equal(sl_tensor_count(t1), 1);
        assert_int_equal(sl_tensor_nbytes(t1), 4);
        assert_true(*(const float *)sl_tensor_data(t1) == (float)i + 0.5f);
        sl_element_release(el);
    }
    assert_int_equal(sl_next(it, &el), SL_EOF);
    sl_iterator_free(it);
    sl_options_free(o);
    sl_dataset_release(ds);
}

/* The deprecated name makes the same dataset: same fingerprint, same
 * elements. */
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
static sl_dataset *old_name(sl_element *el)
{
    return sl_from_tensors(el);
}
#pragma GCC diagnostic pop

static void test_from_tensors_alias(void **state)
{
    (void)state;
    int64_t shape[1] = {5};
    sl_element *a = sl_element_create(1), *b = sl_element_create(1);
    int64_t *pa = sl_element_add_tensor(a, SL_INT64, 1, shape);
    int64_t *pb = sl_element_add_tensor(b, SL_INT64, 1, shape);
    for (int i = 0; i < 5; i++)
        pa[i] = pb[i] = i * i;
    sl_dataset *x = sl_from_tensor_slices(a), *y = old_name(b);
    assert_non_null(x);
    assert_non_null(y);
    assert_true(sl_dataset_fingerprint(x) == sl_dataset_fingerprint(y));
    assert_string_equal(sl_dataset_name(y), "from_tensor_slices");
    int64_t *vx, *vy;
    size_t nx, ny;
    assert_int_equal(tu_collect(x, NULL, &vx, &nx, NULL), SL_EOF);
    assert_int_equal(tu_collect(y, NULL, &vy, &ny, NULL), SL_EOF);
    assert_int_equal(nx, 5);
    assert_int_equal(ny, 5);
    assert_memory_equal(vx, vy, 5 * sizeof *vx);
    free(vx);
    free(vy);
    sl_dataset_release(x);
    sl_dataset_release(y);
}

static void test_from_tensors_errors(void **state)
{
    (void)state;
    /* first dimensions disagree: both shapes in the message */
    sl_element *src = sl_element_create(2);
    int64_t s0[2] = {4, 3}, s1[1] = {5};
    assert_non_null(sl_element_add_tensor(src, SL_INT64, 2, s0));
    assert_non_null(sl_element_add_tensor(src, SL_FLOAT32, 1, s1));
    sl_clear_error();
    assert_null(sl_from_tensor_slices(src)); /* consumed */
    assert_int_equal(sl_last_error_code(), SL_ESHAPE);
    const char *msg = sl_last_error();
    assert_non_null(strstr(msg, "from_tensor_slices"));
    assert_non_null(strstr(msg, "[4, 3]"));
    assert_non_null(strstr(msg, "[5]"));

    /* a scalar has no dimension to slice */
    src = sl_element_create(1);
    assert_int_equal(sl_element_add_int64(src, 3), 0);
    sl_clear_error();
    assert_null(sl_from_tensor_slices(src));
    assert_true(sl_last_error_code() < 0);
    assert_non_null(strstr(sl_last_error(), "from_tensor_slices"));

    /* no tensors at all */
    src = sl_element_create(1);
    sl_clear_error();
    assert_null(sl_from_tensor_slices(src));
    assert_true(strlen(sl_last_error()) > 0);

    sl_clear_error();
    assert_null(sl_from_tensor_slices(NULL));
    assert_true(strlen(sl_last_error()) > 0);
}

static void test_from_tensors_zero_copy(void **state)
{
    (void)state;
    enum { N = 1000, W = 256 };
    sl_element *src = sl_element_create(1);
    int64_t shape[2] = {N, W};
    unsigned char *base = sl_element_add_tensor(src, SL_UINT8, 2, shape);
    assert_non_null(base);
    for (int i = 0; i < N; i++)
        memset(base + (size_t)i * W, i & 0xff, W);
    sl_dataset *ds = sl_from_tensor_slices(src);
    sl_options *o = tu_opts(1, 0);
    sl_iterator *it = sl_iterator_create(ds, o);
    sl_element *kept = NULL;
    for (int i = 0; i < N; i++) {
        sl_element *el;
        assert_int_equal(sl_next(it, &el), 0);
        const sl_tensor *t = sl_element_tensor(el, 0);
        assert_int_equal(sl_tensor_shape(t)[0], W);
        assert_int_equal(sl_tensor_nbytes(t), W);
        /* a view into the source buffer, not a copy */
        assert_ptr_equal(sl_tensor_data(t), base + (size_t)i * W);
        assert_int_equal(((const unsigned char *)sl_tensor_data(t))[W - 1], i & 0xff);
        if (i == N - 1)
            kept = el;
        else
            sl_element_release(el);
    }
    sl_iterator_free(it);
    sl_options_free(o);
    sl_dataset_release(ds);
    /* the slice keeps the source memory alive */
    const unsigned char *d = sl_tensor_data(sl_element_tensor(kept, 0));
    for (int j = 0; j < W; j++)
        assert_int_equal(d[j], (N - 1) & 0xff);
    sl_element_release(kept);
}

/* ---- from_files ---- */

static void test_from_files(void **state)
{
    (void)state;
    char p0[32] = "/data/a.jpg", p1[32] = "/data/bb.png", p2[32] = "";
    const char *paths[3] = {p0, p1, p2};
    const int64_t labels[3] = {7, -1, 123456789012ll};
    sl_dataset *plain = sl_from_files(paths, NULL, 3);
    sl_dataset *lab = sl_from_files(paths, labels, 3);
    assert_non_null(plain);
    assert_non_null(lab);
    /* the arrays were copied */
    strcpy(p0, "/elsewhere");
    strcpy(p1, "/x");
    assert_int_equal(sl_dataset_cardinality(plain), 3);
    assert_int_equal(sl_dataset_cardinality(lab), 3);
    assert_string_equal(sl_dataset_name(plain), "from_files");
    const char *want[3] = {"/data/a.jpg", "/data/bb.png", ""};
    sl_options *o = tu_opts(1, 0);
    for (int pass = 0; pass < 2; pass++) {
        sl_iterator *it = sl_iterator_create(pass ? lab : plain, o);
        assert_non_null(it);
        for (int i = 0; i < 3; i++) {
            sl_element *el;
            assert_int_equal(sl_next(it, &el), 0);
            assert_int_equal(sl_element_size(el), pass ? 2 : 1);
            const sl_tensor *t = sl_element_tensor(el, 0);
            assert_int_equal(sl_tensor_dtype(t), SL_STRING);
            assert_int_equal(sl_tensor_ndim(t), 0);
            size_t len = 99;
            const char *s = sl_tensor_string(t, 0, &len);
            assert_non_null(s);
            assert_int_equal(len, strlen(want[i]));
            assert_memory_equal(s, want[i], len);
            assert_null(sl_tensor_string(t, 1, &len));
            assert_null(sl_tensor_string(t, -1, &len));
            if (pass) {
                const sl_tensor *l = sl_element_tensor(el, 1);
                assert_int_equal(sl_tensor_dtype(l), SL_INT64);
                assert_int_equal(sl_tensor_int64(l), labels[i]);
            }
            sl_element_release(el);
        }
        sl_element *el;
        assert_int_equal(sl_next(it, &el), SL_EOF);
        sl_iterator_free(it);
    }
    sl_options_free(o);
    sl_dataset_release(plain);
    sl_dataset_release(lab);

    /* none */
    sl_dataset *empty = sl_from_files(NULL, NULL, 0);
    assert_non_null(empty);
    assert_int_equal(sl_dataset_cardinality(empty), 0);
    tu_expect(empty, NULL, 0);
    sl_dataset_release(empty);

    /* a NULL path, NULL paths */
    const char *holes[2] = {"/a", NULL};
    sl_clear_error();
    assert_null(sl_from_files(holes, NULL, 2));
    assert_non_null(strstr(sl_last_error(), "from_files"));
    sl_clear_error();
    assert_null(sl_from_files(NULL, NULL, 2));
    assert_true(strlen(sl_last_error()) > 0);
}

/* ---- elements ---- */

static void test_element_api(void **state)
{
    (void)state;
    sl_element *el = sl_element_create(5);
    assert_non_null(el);
    assert_int_equal(sl_element_size(el), 0);
    int64_t shape[2] = {2, 3};
    float *f = sl_element_add_tensor(el, SL_FLOAT32, 2, shape);
    assert_non_null(f);
    for (int i = 0; i < 6; i++)
        f[i] = (float)i;
    assert_int_equal(sl_element_add_string(el, "hello\0world", 11), 0);
    assert_int_equal(sl_element_add_int64(el, -42), 0);
    assert_int_equal(sl_element_add_float32(el, 2.5f), 0);
    int64_t big[1] = {10000};
    uint16_t *u = sl_element_add_tensor(el, SL_UINT16, 1, big);
    assert_non_null(u);
    u[9999] = 0xbeef;
    assert_int_equal(sl_element_size(el), 5);

    const sl_tensor *t = sl_element_tensor(el, 0);
    assert_int_equal(sl_tensor_dtype(t), SL_FLOAT32);
    assert_int_equal(sl_tensor_ndim(t), 2);
    assert_int_equal(sl_tensor_shape(t)[0], 2);
    assert_int_equal(sl_tensor_shape(t)[1], 3);
    assert_int_equal(sl_tensor_count(t), 6);
    assert_int_equal(sl_tensor_nbytes(t), 24);
    assert_ptr_equal(sl_tensor_data(t), f);
    assert_true(sl_tensor_int64(t) == INT64_MIN); /* float32: not an integer */
    assert_int_equal(sl_last_error_code(), SL_EDTYPE);
    assert_null(sl_tensor_string(t, 0, NULL));

    t = sl_element_tensor(el, 1);
    assert_int_equal(sl_tensor_dtype(t), SL_STRING);
    assert_int_equal(sl_tensor_count(t), 1);
    size_t len;
    const char *s = sl_tensor_string(t, 0, &len);
    assert_int_equal(len, 11);
    assert_memory_equal(s, "hello\0world", 11);

    t = sl_element_tensor(el, 2);
    assert_int_equal(sl_tensor_dtype(t), SL_INT64);
    assert_int_equal(sl_tensor_ndim(t), 0);
    assert_int_equal(sl_tensor_int64(t), -42);
    t = sl_element_tensor(el, 3);
    assert_int_equal(sl_tensor_dtype(t), SL_FLOAT32);
    assert_true(*(const float *)sl_tensor_data(t) == 2.5f);
    t = sl_element_tensor(el, 4);
    assert_int_equal(sl_tensor_nbytes(t), 20000);
    assert_int_equal(((const uint16_t *)sl_tensor_data(t))[9999], 0xbeef);

    assert_null(sl_element_tensor(el, 5));
    assert_null(sl_element_tensor(el, -1));

    /* full: every add fails with SL_EINVAL and a message */
    sl_clear_error();
    assert_int_equal(sl_element_add_int64(el, 1), SL_EINVAL);
    assert_true(strlen(sl_last_error()) > 0);
    assert_int_equal(sl_element_add_float32(el, 1), SL_EINVAL);
    assert_int_equal(sl_element_add_string(el, "x", 1), SL_EINVAL);
    assert_null(sl_element_add_tensor(el, SL_UINT8, 1, big));
    assert_int_equal(sl_element_add_shared(el, el, 0), SL_EINVAL);
    assert_int_equal(sl_element_size(el), 5);

    /* retain / release */
    assert_ptr_equal(sl_element_retain(el), el);
    sl_element_release(el);
    assert_int_equal(sl_tensor_int64(sl_element_tensor(el, 2)), -42);
    sl_element_release(el);
}

static void test_element_alignment(void **state)
{
    (void)state;
    /* "64-byte aligned" holds for small (inline) and big tensors, whatever
     * the element's tensor count */
    for (int cap = 1; cap <= 4; cap++) {
        sl_element *el = sl_element_create(cap);
        int64_t small[1] = {2}, large[1] = {5000};
        void *a = sl_element_add_tensor(el, SL_FLOAT32, 1, small);
        void *b = cap > 1 ? sl_element_add_tensor(el, SL_FLOAT64, 1, large) : a;
        sl_element_release(el); /* before asserting, so a failure leaks nothing */
        assert_non_null(a);
        assert_non_null(b);
        if (((uintptr_t)a & 63) != 0)
            print_error("ntensors %d: small tensor data at %p is not 64-byte aligned\n", cap, a);
        assert_int_equal((uintptr_t)a & 63, 0);
        assert_int_equal((uintptr_t)b & 63, 0);
    }
}

static void test_element_edge_cases(void **state)
{
    (void)state;
    sl_element *el = sl_element_create(4);
    /* empty tensors are fine and still have a data pointer */
    int64_t zero[2] = {0, 5};
    void *z = sl_element_add_tensor(el, SL_INT32, 2, zero);
    assert_non_null(z);
    assert_int_equal(sl_tensor_nbytes(sl_element_tensor(el, 0)), 0);
    assert_int_equal(sl_tensor_count(sl_element_tensor(el, 0)), 0);
    assert_int_equal(sl_element_add_string(el, NULL, 0), 0);
    size_t len = 7;
    assert_non_null(sl_tensor_string(sl_element_tensor(el, 1), 0, &len));
    assert_int_equal(len, 0);

    /* rejected: string dtype, bad dtype, negative dim, too many dims, NULL shape */
    int64_t neg[1] = {-1}, nine[9] = {1, 1, 1, 1, 1, 1, 1, 1, 1};
    sl_clear_error();
    assert_null(sl_element_add_tensor(el, SL_STRING, 1, zero));
    assert_true(strlen(sl_last_error()) > 0);
    assert_null(sl_element_add_tensor(el, SL_DTYPE_COUNT, 1, zero));
    assert_null(sl_element_add_tensor(el, (sl_dtype)-1, 1, zero));
    assert_null(sl_element_add_tensor(el, SL_UINT8, 1, neg));
    assert_null(sl_element_add_tensor(el, SL_UINT8, 9, nine));
    assert_null(sl_element_add_tensor(el, SL_UINT8, -1, nine));
    assert_null(sl_element_add_tensor(el, SL_UINT8, 1, NULL));
    int64_t huge[2] = {INT64_MAX / 2, 4};
    assert_null(sl_element_add_tensor(el, SL_FLOAT64, 2, huge));
    assert_int_equal(sl_element_add_string(el, NULL, 3), SL_EINVAL);
    assert_int_equal(sl_element_add_shared(el, el, 7), SL_EINVAL);
    assert_int_equal(sl_element_add_shared(el, el, -1), SL_EINVAL);
    assert_int_equal(sl_element_add_shared(el, NULL, 0), SL_EINVAL);
    assert_int_equal(sl_element_size(el), 2);
    sl_element_release(el);

    /* NULL safety */
    sl_clear_error();
    assert_null(sl_element_create(-1));
    assert_true(strlen(sl_last_error()) > 0);
    assert_null(sl_element_retain(NULL));
    sl_element_release(NULL);
    assert_int_equal(sl_element_size(NULL), 0);
    assert_null(sl_element_tensor(NULL, 0));
    assert_null(sl_tensor_string(NULL, 0, &len));
    assert_true(sl_tensor_int64(NULL) == INT64_MIN);
    assert_int_equal(sl_last_error_code(), SL_EINVAL);
    int64_t one[1] = {1};
    assert_null(sl_element_add_tensor(NULL, SL_UINT8, 1, one));
    assert_int_equal(sl_element_add_string(NULL, "a", 1), SL_EINVAL);
    assert_true(sl_element_add_int64(NULL, 1) < 0);
    assert_true(sl_element_add_float32(NULL, 1) < 0);

    /* an element of no tensors */
    el = sl_element_create(0);
    assert_non_null(el);
    assert_int_equal(sl_element_add_int64(el, 1), SL_EINVAL);
    sl_element_release(el);
}

static void test_element_shared(void **state)
{
    (void)state;
    sl_element *src = sl_element_create(2);
    int64_t shape[1] = {4096};
    int32_t *big = sl_element_add_tensor(src, SL_INT32, 1, shape);
    for (int i = 0; i < 4096; i++)
        big[i] = i * 3;
    assert_int_equal(sl_element_add_int64(src, 99), 0); /* small: inline */
    sl_element *dst = sl_element_create(2);
    assert_int_equal(sl_element_add_shared(dst, src, 0), 0);
    assert_int_equal(sl_element_add_shared(dst, src, 1), 0);
    const sl_tensor *t = sl_element_tensor(dst, 0);
    assert_ptr_equal(sl_tensor_data(t), big); /* shared, not copied */
    assert_int_equal(sl_tensor_dtype(t), SL_INT32);
    assert_int_equal(sl_tensor_shape(t)[0], 4096);
    sl_element_release(src);
    /* still alive through dst */
    const int32_t *d = sl_tensor_data(t);
    for (int i = 0; i < 4096; i++)
        assert_int_equal(d[i], i * 3);
    assert_int_equal(sl_tensor_int64(sl_element_tensor(dst, 1)), 99);
    sl_element_release(dst);
}

static void test_dtypes(void **state)
{
    (void)state;
    static const struct {
        sl_dtype d;
        const char *name;
        size_t size;
    } want[] = {
        {SL_UINT8, "uint8", 1},     {SL_INT8, "int8", 1},       {SL_UINT16, "uint16", 2},
        {SL_INT16, "int16", 2},     {SL_INT32, "int32", 4},     {SL_INT64, "int64", 8},
        {SL_FLOAT32, "float32", 4}, {SL_FLOAT64, "float64", 8}, {SL_STRING, "string", 0},
    };
    assert_int_equal(sizeof want / sizeof *want, SL_DTYPE_COUNT);
    for (size_t i = 0; i < SL_DTYPE_COUNT; i++) {
        assert_string_equal(sl_dtype_name(want[i].d), want[i].name);
        assert_int_equal(sl_dtype_size(want[i].d), want[i].size);
    }
    assert_int_equal(sl_dtype_size(SL_DTYPE_COUNT), 0);
    assert_int_equal(sl_dtype_size((sl_dtype)-1), 0);
    assert_non_null(sl_dtype_name(SL_DTYPE_COUNT));
    assert_non_null(sl_dtype_name((sl_dtype)1000));
}

/* ---- options ---- */

static void test_options(void **state)
{
    (void)state;
    sl_options *o = sl_options_create();
    assert_non_null(o);
    /* documented defaults */
    assert_int_equal(sl_options_get(o, SL_OPT_THREADS), 0);
    assert_int_equal(sl_options_get(o, SL_OPT_RAM_BUDGET), 0);
    assert_int_equal(sl_options_get(o, SL_OPT_ERROR_POLICY), SL_ERRORS_FAIL);
    assert_int_equal(sl_options_get(o, SL_OPT_DETERMINISTIC), 1);
    for (int k = 0; k < SL_OPT_COUNT; k++) {
        int64_t lo = 1, hi = 0;
        assert_int_equal(sl_option_bounds((sl_option)k, &lo, &hi), 0);
        assert_true(lo <= hi);
        int64_t def = sl_options_get(o, (sl_option)k);
        assert_true(lo <= def && def <= hi);
        /* NULL options read as defaults */
        assert_int_equal(sl_options_get(NULL, (sl_option)k), def);
        /* the bounds are accepted, one beyond them is not */
        assert_int_equal(sl_options_set(o, (sl_option)k, lo), 0);
        assert_int_equal(sl_options_get(o, (sl_option)k), lo);
        assert_int_equal(sl_options_set(o, (sl_option)k, hi), 0);
        assert_int_equal(sl_options_get(o, (sl_option)k), hi);
        if (lo > INT64_MIN) {
            sl_clear_error();
            assert_int_equal(sl_options_set(o, (sl_option)k, lo - 1), SL_EINVAL);
            assert_true(strlen(sl_last_error()) > 0);
            assert_int_equal(sl_options_get(o, (sl_option)k), hi); /* unchanged */
        }
        if (hi < INT64_MAX)
            assert_int_equal(sl_options_set(o, (sl_option)k, hi + 1), SL_EINVAL);
        assert_int_equal(sl_options_set(o, (sl_option)k, def), 0);
    }
    /* specific limits the header names */
    assert_int_equal(sl_options_set(o, SL_OPT_THREADS, -1), SL_EINVAL);
    assert_int_equal(sl_options_set(o, SL_OPT_ERROR_POLICY, SL_ERRORS_SKIP_RATE + 1), SL_EINVAL);
    assert_int_equal(sl_options_set(o, SL_OPT_ERROR_MAX_PPM, 1000001), SL_EINVAL);
    assert_int_equal(sl_options_set(o, SL_OPT_DETERMINISTIC, 2), SL_EINVAL);
    assert_int_equal(sl_options_set(o, SL_OPT_SEED, INT64_MIN), 0);
    assert_int_equal(sl_options_set(o, SL_OPT_SEED, -5), 0);
    assert_int_equal(sl_options_get(o, SL_OPT_SEED), -5);
    /* unknown keys */
    int64_t lo, hi;
    sl_clear_error();
    assert_int_equal(sl_option_bounds(SL_OPT_COUNT, &lo, &hi), SL_EINVAL);
    assert_true(strlen(sl_last_error()) > 0);
    assert_int_equal(sl_option_bounds((sl_option)-1, &lo, &hi), SL_EINVAL);
    assert_int_equal(sl_options_set(o, SL_OPT_COUNT, 0), SL_EINVAL);
    assert_int_equal(sl_options_set(o, (sl_option)-1, 0), SL_EINVAL);
    assert_int_equal(sl_options_set(NULL, SL_OPT_THREADS, 1), SL_EINVAL);
    assert_int_equal(sl_options_set_runtime(NULL, NULL), SL_EINVAL);
    assert_int_equal(sl_options_set_runtime(o, NULL), 0);
    sl_options_free(o);
    sl_options_free(NULL);
}

static void test_iterator_stats(void **state)
{
    (void)state;
    sl_dataset *ds = sl_range(0, 10, 1);
    sl_options *o = tu_opts(1, 0);
    assert_int_equal(sl_options_set(o, SL_OPT_RAM_BUDGET, 12345), 0);
    sl_iterator *it = sl_iterator_create(ds, o);
    assert_int_equal(sl_iterator_stat(it, SL_STAT_RAM_BUDGET), 12345);
    assert_string_equal(sl_iterator_errmsg(it), "");
    sl_element *el;
    for (int i = 0; i < 4; i++) {
        assert_int_equal(sl_next(it, &el), 0);
        sl_element_release(el);
    }
    assert_int_equal(sl_iterator_stat(it, SL_STAT_ELEMENTS), 4);
    assert_int_equal(sl_iterator_stat(it, SL_STAT_ERRORS_SKIPPED), 0);
    assert_int_equal(sl_iterator_stat(it, SL_STAT_COUNT), -1);
    assert_int_equal(sl_iterator_stat(it, (sl_stat)-1), -1);
    assert_int_equal(sl_iterator_stat(NULL, SL_STAT_ELEMENTS), -1);
    assert_string_equal(sl_iterator_errmsg(NULL), "");
    assert_true(sl_next(NULL, &el) < 0);
    sl_iterator_free(it);
    sl_iterator_free(NULL);
    sl_options_free(o);
    sl_dataset_release(ds);
    sl_dataset_release(NULL);
    assert_null(sl_dataset_retain(NULL));
}

/* ---- errors, version ---- */

static void test_strerror(void **state)
{
    (void)state;
    static const struct {
        int code;
        const char *text;
    } codes[] = {
#define X(name, code, text) {SL_E##name, text},
        SL_ERRNO_MAP(X)
#undef X
    };
    size_t n = sizeof codes / sizeof *codes;
    for (size_t i = 0; i < n; i++) {
        const char *s = sl_strerror(codes[i].code);
        assert_non_null(s);
        assert_true(strlen(s) > 0);
        assert_string_equal(s, codes[i].text);
        assert_true(codes[i].code < 0);
        for (size_t j = 0; j < i; j++) {
            assert_int_not_equal(codes[i].code, codes[j].code);
            assert_string_not_equal(s, sl_strerror(codes[j].code));
        }
    }
    /* codes are consecutive from -1: "only ever appended" */
    for (size_t i = 0; i < n; i++)
        assert_int_equal(codes[i].code, -(int)i - 1);
    assert_non_null(sl_strerror(0));
    assert_non_null(sl_strerror(SL_EOF));
    assert_non_null(sl_strerror(-1000));
    assert_non_null(sl_strerror(12345));
    sl_clear_error();
    assert_string_equal(sl_last_error(), "");
}

static void test_version(void **state)
{
    (void)state;
    assert_int_equal(sl_version_number(), SL_VERSION_NUMBER);
    char want[32];
    snprintf(want, sizeof want, "%d.%d.%d", SL_VERSION_MAJOR, SL_VERSION_MINOR, SL_VERSION_PATCH);
    assert_string_equal(sl_version_string(), want);
    assert_int_equal(SL_VERSION_NUMBER,
                     SL_VERSION_MAJOR * 10000 + SL_VERSION_MINOR * 100 + SL_VERSION_PATCH);
}

/* The library reports the options it was compiled with; the tests are
 * compiled with the same SLUICE_NO_* definitions, so they must agree. */
static void test_build_options(void **state)
{
    (void)state;
    const char *have = sl_build_options();
    const struct {
        const char *name;
        bool on;
    } want[] = {
#ifdef SLUICE_NO_URING
        {"io_uring", false},
#else
        {"io_uring", true},
#endif
#ifdef SLUICE_NO_JPEG
        {"jpeg", false},
#else
        {"jpeg", true},
#endif
#ifdef SLUICE_NO_PNG
        {"png", false},
#else
        {"png", true},
#endif
#ifdef SLUICE_NO_WEBP
        {"webp", false},
#else
        {"webp", true},
#endif
#ifdef SLUICE_NO_ZLIB
        {"zlib", false},
#else
        {"zlib", true},
#endif
#ifdef SLUICE_NO_CURL
        {"curl", false},
#else
        {"curl", true},
#endif
#ifdef SLUICE_NO_FFMPEG
        {"ffmpeg", false},
#else
        {"ffmpeg", true},
#endif
#ifdef SLUICE_NO_UCX
        {"ucx", false},
#else
        {"ucx", true},
#endif
    };
    char expect[256] = "";
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++)
        snprintf(expect + strlen(expect), sizeof expect - strlen(expect), "%s%s=%s",
                 i ? " " : "", want[i].name, want[i].on ? "on" : "off");
    assert_string_equal(have, expect);
}

/* ---- dataset identity ---- */

static int ident(sl_map_ctx *ctx, const sl_element *in, sl_element **out, void *user)
{
    (void)ctx, (void)user;
    *out = sl_element_retain((sl_element *)in);
    return 0;
}

static sl_dataset *pipeline(int64_t stop, const char *map_name, int64_t depth)
{
    return sl_prefetch(sl_map(sl_range(0, stop, 2), map_name, ident, NULL, 2, 0), depth);
}

static sl_dataset *tensors_of(int64_t first)
{
    sl_element *el = sl_element_create(1);
    int64_t shape[1] = {3};
    int64_t *d = sl_element_add_tensor(el, SL_INT64, 1, shape);
    d[0] = first, d[1] = 2, d[2] = 3;
    return sl_from_tensor_slices(el);
}

static void test_dataset_identity(void **state)
{
    (void)state;
    sl_dataset *a = pipeline(100, "f", 4), *b = pipeline(100, "f", 4);
    assert_int_equal(sl_dataset_cardinality(a), 50);
    assert_string_equal(sl_dataset_name(a), "prefetch");
    assert_string_equal(sl_dataset_name(a), sl_dataset_name(b));
    assert_true(sl_dataset_fingerprint(a) == sl_dataset_fingerprint(b));
    assert_true(sl_dataset_fingerprint(a) != 0);
    /* a different range bound or map name changes it */
    sl_dataset *c = pipeline(101, "f", 4), *d = pipeline(100, "g", 4);
    assert_true(sl_dataset_fingerprint(a) != sl_dataset_fingerprint(c));
    assert_true(sl_dataset_fingerprint(a) != sl_dataset_fingerprint(d));
    assert_true(sl_dataset_fingerprint(c) != sl_dataset_fingerprint(d));
    /* so do different ops over the same input */
    sl_dataset *r = sl_range(0, 100, 2);
    assert_true(sl_dataset_fingerprint(r) != sl_dataset_fingerprint(a));
    sl_dataset *s = sl_range(0, 100, 1), *t = sl_range(1, 100, 2);
    assert_true(sl_dataset_fingerprint(r) != sl_dataset_fingerprint(s));
    assert_true(sl_dataset_fingerprint(r) != sl_dataset_fingerprint(t));
    /* data sources hash their content */
    sl_dataset *x = tensors_of(1), *y = tensors_of(1), *z = tensors_of(9);
    assert_true(sl_dataset_fingerprint(x) == sl_dataset_fingerprint(y));
    assert_true(sl_dataset_fingerprint(x) != sl_dataset_fingerprint(z));
    const char *paths[2] = {"/a", "/b"};
    const int64_t l1[2] = {0, 1}, l2[2] = {0, 2};
    sl_dataset *f1 = sl_from_files(paths, l1, 2), *f2 = sl_from_files(paths, l2, 2),
               *f3 = sl_from_files(paths, l1, 2), *f4 = sl_from_files(paths, NULL, 2);
    assert_true(sl_dataset_fingerprint(f1) == sl_dataset_fingerprint(f3));
    assert_true(sl_dataset_fingerprint(f1) != sl_dataset_fingerprint(f2));
    assert_true(sl_dataset_fingerprint(f1) != sl_dataset_fingerprint(f4));
    assert_int_equal(sl_dataset_fingerprint(NULL), 0);
    assert_int_equal(sl_dataset_cardinality(NULL), SL_UNKNOWN);
    /* names */
    sl_dataset *m = sl_map(sl_range(0, 1, 1), "decode", ident, NULL, 1, 0);
    assert_string_equal(sl_dataset_name(m), "map(decode)");
    assert_int_equal(sl_dataset_cardinality(m), 1);
    /* a retained dataset is the same one, freed once per reference */
    assert_ptr_equal(sl_dataset_retain(m), m);
    sl_dataset_release(m);
    assert_string_equal(sl_dataset_name(m), "map(decode)");
    sl_dataset *all[] = {a, b, c, d, r, s, t, x, y, z, f1, f2, f3, f4, m};
    for (size_t i = 0; i < sizeof all / sizeof *all; i++)
        sl_dataset_release(all[i]);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_range),
        cmocka_unit_test(test_range_extremes),
        cmocka_unit_test(test_from_tensors),
        cmocka_unit_test(test_from_tensors_strings),
        cmocka_unit_test(test_from_tensors_errors),
        cmocka_unit_test(test_from_tensors_alias),
        cmocka_unit_test(test_from_tensors_zero_copy),
        cmocka_unit_test(test_from_files),
        cmocka_unit_test(test_element_api),
        cmocka_unit_test(test_element_alignment),
        cmocka_unit_test(test_element_edge_cases),
        cmocka_unit_test(test_element_shared),
        cmocka_unit_test(test_dtypes),
        cmocka_unit_test(test_options),
        cmocka_unit_test(test_iterator_stats),
        cmocka_unit_test(test_strerror),
        cmocka_unit_test(test_version),
        cmocka_unit_test(test_build_options),
        cmocka_unit_test(test_dataset_identity),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
