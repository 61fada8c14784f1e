/* map: order under random delays, unordered modes, the per-element random
 * stream, index and epoch, element errors under each policy, scratch memory,
 * builder arguments, empty and huge inputs. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "testutil.h"

static int64_t in_value(const sl_element *in)
{
    return sl_tensor_int64(sl_element_tensor(in, 0));
}

static int out_scalar(sl_element **out, int64_t v)
{
    sl_element *el = sl_element_create(1);
    if (!el)
        return SL_ENOMEM;
    if (sl_element_add_int64(el, v) < 0) {
        sl_element_release(el);
        return SL_ENOMEM;
    }
    *out = el;
    return 0;
}

static int cmp_i64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

static sl_options *opts_with(int threads, int64_t seed, sl_option key, int64_t value)
{
    sl_options *o = tu_opts(threads, seed);
    assert_int_equal(sl_options_set(o, key, value), 0);
    return o;
}

/* 3v + 1 after 0..300 µs keyed by v, so that completion order scrambles. */
static int slow_affine(sl_map_ctx *ctx, const sl_element *in, sl_element **out, void *user)
{
    (void)ctx, (void)user;
    int64_t v = in_value(in);
    tu_sleep_us((long)(tu_mix((uint64_t)v) % 301));
    return out_scalar(out, 3 * v + 1);
}

static void test_ordered_equals_sequential(void **state)
{
    (void)state;
    enum { N = 300 };
    const int par[] = {1, 2, 4, SL_AUTOTUNE};
    const int thr[] = {1, 2, 8};
    for (size_t p = 0; p < sizeof par / sizeof *par; p++) {
        for (size_t t = 0; t < sizeof thr / sizeof *thr; t++) {
            sl_dataset *ds = sl_map(sl_range(0, N, 1), "affine", slow_affine, NULL, par[p], 0);
            assert_non_null(ds);
            sl_options *o = tu_opts(thr[t], 1);
            int64_t *got;
            size_t n;
            char msg[1024];
            int rc = tu_collect(ds, o, &got, &n, msg);
            if (rc != SL_EOF)
                print_error("parallelism %d threads %d: %d %s\n", par[p], thr[t], rc, msg);
            assert_int_equal(rc, SL_EOF);
            assert_int_equal(n, N);
            for (size_t i = 0; i < n; i++) {
                if (got[i] != 3 * (int64_t)i + 1)
                    print_error("parallelism %d threads %d: at %zu got %lld\n", par[p], thr[t],
                                i, (long long)got[i]);
                assert_int_equal(got[i], 3 * (int64_t)i + 1);
            }
            free(got);
            sl_options_free(o);
            sl_dataset_release(ds);
        }
    }
}

static void expect_multiset(sl_dataset *ds, const sl_options *o, size_t n_expect)
{
    int64_t *got;
    size_t n;
    char msg[1024];
    int rc = tu_collect(ds, o, &got, &n, msg);
    if (rc != SL_EOF)
        print_error("iteration failed: %d %s\n", rc, msg);
    assert_int_equal(rc, SL_EOF);
    assert_int_equal(n, n_expect);
    qsort(got, n, sizeof *got, cmp_i64);
    for (size_t i = 0; i < n; i++)
        assert_int_equal(got[i], 3 * (int64_t)i + 1);
    free(got);
}

static void test_unordered_same_multiset(void **state)
{
    (void)state;
    enum { N = 300 };
    const int thr[] = {1, 2, 8};
    for (size_t t = 0; t < 3; t++) {
        sl_dataset *ds = sl_map(sl_range(0, N, 1), "affine", slow_affine, NULL, 4,
                                SL_MAP_UNORDERED);
        assert_non_null(ds);
        sl_options *o = tu_opts(thr[t], 1);
        expect_multiset(ds, o, N);
        sl_options_free(o);
        /* the same through SL_OPT_DETERMINISTIC = 0 */
        sl_dataset_release(ds);
        ds = sl_map(sl_range(0, N, 1), "affine", slow_affine, NULL, SL_AUTOTUNE, 0);
        o = opts_with(thr[t], 1, SL_OPT_DETERMINISTIC, 0);
        expect_multiset(ds, o, N);
        sl_options_free(o);
        sl_dataset_release(ds);
    }
}

/* Element 0 finishes only after element 1 has (plus a margin): an unordered
 * map hands out 1 first, an ordered one still hands out 0 first. The first
 * chunks hold one element each (no cost measured yet), so 0 and 1 run on
 * different workers. */
static int hold_first(sl_map_ctx *ctx, const sl_element *in, sl_element **out, void *user)
{
    (void)ctx;
    atomic_int *one_done = user;
    int64_t v = in_value(in);
    if (v == 1)
        atomic_store(one_done, 1);
    if (v == 0) {
        for (int i = 0; i < 2000 && !atomic_load(one_done); i++)
            tu_sleep_us(1000);
        tu_sleep_us(50000);
    }
    return out_scalar(out, v);
}

/* The first value out of map(hold_first) under these flags and option. */
static int64_t first_out(unsigned flags, int deterministic)
{
    enum { N = 8 };
    atomic_int one_done = 0;
    sl_dataset *ds = sl_map(sl_range(0, N, 1), "hold", hold_first, &one_done, 4, flags);
    assert_non_null(ds);
    sl_options *o = opts_with(2, 1, SL_OPT_DETERMINISTIC, deterministic);
    int64_t *got;
    size_t n;
    assert_int_equal(tu_collect(ds, o, &got, &n, NULL), SL_EOF);
    assert_int_equal(n, N);
    int64_t first = got[0];
    qsort(got, n, sizeof *got, cmp_i64);
    for (size_t i = 0; i < n; i++)
        assert_int_equal(got[i], (int64_t)i);
    free(got);
    sl_options_free(o);
    sl_dataset_release(ds);
    return first;
}

static void test_order_modes(void **state)
{
    (void)state;
    assert_int_equal(first_out(0, 1), 0);
    assert_int_equal(first_out(SL_MAP_ORDERED, 1), 0);
    assert_int_equal(first_out(SL_MAP_UNORDERED, 1), 1);
    /* not deterministic: unordered unless the map asks for order */
    assert_int_equal(first_out(0, 0), 1);
    assert_int_equal(first_out(SL_MAP_UNORDERED, 0), 1);
    assert_int_equal(first_out(SL_MAP_ORDERED, 0), 0);
}

/* [value, index, epoch, random, uniform * 1e9 (or -1 when outside [0, 1))] */
enum { RNG_COLS = 5 };

static int rng_fn(sl_map_ctx *ctx, const sl_element *in, sl_element **out, void *user)
{
    (void)user;
    int64_t v = in_value(in);
    tu_sleep_us((long)(tu_mix((uint64_t)v) % 50));
    sl_element *el = sl_element_create(1);
    if (!el)
        return SL_ENOMEM;
    int64_t shape[1] = {RNG_COLS};
    int64_t *d = sl_element_add_tensor(el, SL_INT64, 1, shape);
    if (!d) {
        sl_element_release(el);
        return SL_ENOMEM;
    }
    d[0] = v;
    d[1] = sl_map_ctx_index(ctx);
    d[2] = sl_map_ctx_epoch(ctx);
    d[3] = (int64_t)sl_map_ctx_random(ctx);
    double u = sl_map_ctx_uniform(ctx);
    d[4] = u >= 0.0 && u < 1.0 ? (int64_t)(u * 1e9) : -1;
    *out = el;
    return 0;
}

/* Runs `ds` and returns its rows (RNG_COLS values each); *rows gets the count. */
static int64_t *run_rows(sl_dataset *ds, int threads, int64_t seed, size_t *rows)
{
    sl_options *o = tu_opts(threads, seed);
    int64_t *got;
    size_t n;
    char msg[1024];
    int rc = tu_collect(ds, o, &got, &n, msg);
    if (rc != SL_EOF)
        print_error("iteration failed: %d %s\n", rc, msg);
    assert_int_equal(rc, SL_EOF);
    assert_int_equal(n % RNG_COLS, 0);
    *rows = n / RNG_COLS;
    sl_options_free(o);
    return got;
}

static void test_random_stream(void **state)
{
    (void)state;
    enum { N = 200 };
    /* map under repeat: one map iterator per pass, epochs 0 and 1 */
    sl_dataset *ds = sl_repeat(sl_map(sl_range(0, N, 1), "rng", rng_fn, NULL, SL_AUTOTUNE, 0), 2);
    assert_non_null(ds);
    size_t rows;
    int64_t *ref = run_rows(ds, 1, 7, &rows);
    assert_int_equal(rows, 2 * N);
    for (size_t j = 0; j < rows; j++) {
        const int64_t *r = ref + j * RNG_COLS;
        assert_int_equal(r[0], (int64_t)(j % N));
        assert_int_equal(r[1], (int64_t)(j % N));
        assert_int_equal(r[2], (int64_t)(j / N));
        assert_true(r[4] >= 0);
    }
    /* the same (seed, element) gives the same stream whatever the threads */
    const int thr[] = {2, 8};
    for (int t = 0; t < 2; t++) {
        size_t r2;
        int64_t *got = run_rows(ds, thr[t], 7, &r2);
        assert_int_equal(r2, rows);
        assert_memory_equal(got, ref, rows * RNG_COLS * sizeof *got);
        free(got);
    }
    /* draws differ between elements, between epochs and between seeds */
    size_t r3;
    int64_t *other = run_rows(ds, 2, 8, &r3);
    assert_int_equal(r3, rows);
    int64_t *draws = malloc(rows * sizeof *draws);
    for (size_t j = 0; j < rows; j++) {
        draws[j] = ref[j * RNG_COLS + 3];
        assert_int_not_equal(draws[j], other[j * RNG_COLS + 3]);
        assert_int_not_equal(ref[j * RNG_COLS + 4], other[j * RNG_COLS + 4]);
    }
    for (size_t j = 0; j < N; j++)
        assert_int_not_equal(draws[j], draws[j + N]);
    qsort(draws, rows, sizeof *draws, cmp_i64);
    for (size_t j = 1; j < rows; j++)
        assert_int_not_equal(draws[j - 1], draws[j]);
    free(draws);
    free(other);
    free(ref);
    sl_dataset_release(ds);

    /* map over repeat: one pass of the map, indices run on */
    ds = sl_map(sl_repeat(sl_range(0, N, 1), 2), "rng", rng_fn, NULL, 4, 0);
    ref = run_rows(ds, 2, 7, &rows);
    assert_int_equal(rows, 2 * N);
    for (size_t j = 0; j < rows; j++) {
        const int64_t *r = ref + j * RNG_COLS;
        assert_int_equal(r[0], (int64_t)(j % N));
        assert_int_equal(r[1], (int64_t)j);
        assert_int_equal(r[2], 0);
    }
    free(ref);
    sl_dataset_release(ds);
}

/* Fails the elements v with v % mod == rem, with `code` and a message (none
 * when msg is NULL). */
typedef struct fail_spec {
    int64_t mod, rem;
    int code;
    const char *msg;
} fail_spec;

static int failing_fn(sl_map_ctx *ctx, const sl_element *in, sl_element **out, void *user)
{
    const fail_spec *f = user;
    int64_t v = in_value(in);
    tu_sleep_us((long)(tu_mix((uint64_t)v) % 100));
    if (v % f->mod == f->rem) {
        if (!f->msg)
            return f->code;
        char buf[128];
        snprintf(buf, sizeof buf, "%s %lld", f->msg, (long long)v);
        return sl_map_ctx_error(ctx, f->code, buf);
    }
    return out_scalar(out, v);
}

/* Iterates until the end or an error, checking that the values come out as
 * 0, 1, 2, ...; returns the code, the count and (a copy of) the message. */
static int run_until_error(sl_iterator *it, int64_t *count, char *msg)
{
    sl_element *el;
    int rc;
    int64_t n = 0;
    while ((rc = sl_next(it, &el)) == 0) {
        assert_int_equal(in_value(el), n);
        n++;
        sl_element_release(el);
    }
    *count = n;
    snprintf(msg, 1024, "%s", sl_iterator_errmsg(it));
    return rc;
}

static void test_error_fail(void **state)
{
    (void)state;
    fail_spec f = {1000, 37, SL_ECORRUPT, "element is bad:"};
    const int par[] = {4, SL_AUTOTUNE, 1};
    const int thr[] = {2, 8, 1};
    for (int k = 0; k < 3; k++) {
        sl_dataset *ds = sl_map(sl_range(0, 100, 1), "checker", failing_fn, &f, par[k], 0);
        sl_options *o = tu_opts(thr[k], 0);
        sl_iterator *it = sl_iterator_create(ds, o);
        assert_non_null(it);
        int64_t n;
        char msg[1024];
        assert_int_equal(run_until_error(it, &n, msg), SL_ECORRUPT);
        assert_int_equal(n, 37);
        assert_string_equal(msg, "map(checker): element is bad: 37");
        assert_int_equal(sl_iterator_stat(it, SL_STAT_ELEMENTS), 37);
        /* the iterator keeps returning the error, and no element */
        sl_element *stale = sl_element_create(0);
        for (int i = 0; i < 3; i++) {
            sl_element *el = stale;
            assert_int_equal(sl_next(it, &el), SL_ECORRUPT);
            assert_null(el);
            assert_string_equal(sl_iterator_errmsg(it), "map(checker): element is bad: 37");
        }
        sl_element_release(stale);
        sl_iterator_free(it);
        sl_options_free(o);
        sl_dataset_release(ds);
    }
}

static void expect_first_error(sl_map_fn fn, void *user, const char *name, int code,
                               const char *want_msg, int64_t want_before)
{
    sl_dataset *ds = sl_map(sl_range(0, 50, 1), name, fn, user, 4, 0);
    assert_non_null(ds);
    sl_options *o = tu_opts(2, 0);
    sl_iterator *it = sl_iterator_create(ds, o);
    assert_non_null(it);
    int64_t n;
    char msg[1024];
    assert_int_equal(run_until_error(it, &n, msg), code);
    assert_int_equal(n, want_before);
    assert_string_equal(msg, want_msg);
    sl_iterator_free(it);
    sl_options_free(o);
    sl_dataset_release(ds);
}

static int returns_nothing(sl_map_ctx *ctx, const sl_element *in, sl_element **out, void *user)
{
    (void)ctx, (void)user;
    if (in_value(in) == 5)
        return 0; /* *out left NULL */
    return out_scalar(out, in_value(in));
}

static void test_error_messages(void **state)
{
    (void)state;
    /* a failure without a message gets the code's text */
    fail_spec quiet = {1000, 3, SL_EIO, NULL};
    expect_first_error(failing_fn, &quiet, "quiet", SL_EIO, "map(quiet): input/output error", 3);
    /* sl_map_ctx_error with a non-negative code reports SL_ECALLBACK */
    fail_spec zero = {1000, 4, 0, "zero code"};
    expect_first_error(failing_fn, &zero, "zero", SL_ECALLBACK, "map(zero): zero code 4", 4);
    /* an unnamed map is "map" */
    fail_spec plain = {1000, 2, SL_ERANGE, "out of range"};
    expect_first_error(failing_fn, &plain, NULL, SL_ERANGE, "map: out of range 2", 2);
    /* returning 0 without an element is an error, not a silent drop */
    sl_dataset *ds = sl_map(sl_range(0, 50, 1), "nothing", returns_nothing, NULL, 4, 0);
    sl_options *o = tu_opts(2, 0);
    sl_iterator *it = sl_iterator_create(ds, o);
    int64_t n;
    char msg[1024];
    assert_int_equal(run_until_error(it, &n, msg), SL_ECALLBACK);
    assert_int_equal(n, 5);
    assert_true(strncmp(msg, "map(nothing): ", 14) == 0);
    assert_true(strlen(msg) > 14);
    sl_iterator_free(it);
    sl_options_free(o);
    sl_dataset_release(ds);
}

static atomic_int logged;

static void count_log(void *user, sl_log_level level, const char *msg)
{
    (void)user;
    if (level == SL_LOG_WARN && strstr(msg, "map(checker)"))
        atomic_fetch_add(&logged, 1);
}

static void test_error_skip(void **state)
{
    (void)state;
    enum { N = 200 };
    fail_spec f = {10, 3, SL_ECORRUPT, "bad"};
    const int thr[] = {1, 2, 8};
    sl_set_log_callback(count_log, NULL);
    for (int t = 0; t < 3; t++) {
        atomic_store(&logged, 0);
        sl_dataset *ds = sl_map(sl_range(0, N, 1), "checker", failing_fn, &f, SL_AUTOTUNE, 0);
        sl_options *o = opts_with(thr[t], 0, SL_OPT_ERROR_POLICY, SL_ERRORS_SKIP);
        assert_int_equal(sl_options_set(o, SL_OPT_ERROR_LOG_LIMIT, 3), 0);
        sl_iterator *it = sl_iterator_create(ds, o);
        assert_non_null(it);
        sl_element *el;
        int rc;
        int64_t want = 0, n = 0;
        while ((rc = sl_next(it, &el)) == 0) {
            if (want % 10 == 3)
                want++;
            assert_int_equal(in_value(el), want);
            want++;
            n++;
            sl_element_release(el);
        }
        assert_int_equal(rc, SL_EOF);
        assert_int_equal(n, N - N / 10);
        assert_int_equal(sl_iterator_stat(it, SL_STAT_ERRORS_SKIPPED), N / 10);
        assert_int_equal(sl_iterator_stat(it, SL_STAT_ELEMENTS), N - N / 10);
        /* the first SL_OPT_ERROR_LOG_LIMIT skips are logged, then counted */
        assert_int_equal(atomic_load(&logged), 3);
        sl_iterator_free(it);
        sl_options_free(o);
        sl_dataset_release(ds);
    }
    sl_set_log_callback(NULL, NULL);
}

static void test_error_skip_rate(void **state)
{
    (void)state;
    enum { N = 400 };
    /* 5% failing under a 10% limit passes */
    fail_spec few = {20, 7, SL_ECORRUPT, "bad"};
    sl_dataset *ds = sl_map(sl_range(0, N, 1), "checker", failing_fn, &few, 4, 0);
    sl_options *o = opts_with(2, 0, SL_OPT_ERROR_POLICY, SL_ERRORS_SKIP_RATE);
    assert_int_equal(sl_options_set(o, SL_OPT_ERROR_MAX_PPM, 100000), 0);
    assert_int_equal(sl_options_set(o, SL_OPT_ERROR_LOG_LIMIT, 0), 0);
    sl_iterator *it = sl_iterator_create(ds, o);
    sl_element *el;
    int rc;
    int64_t n = 0;
    while ((rc = sl_next(it, &el)) == 0) {
        assert_int_not_equal(in_value(el) % 20, 7);
        n++;
        sl_element_release(el);
    }
    assert_int_equal(rc, SL_EOF);
    assert_int_equal(n, N - N / 20);
    assert_int_equal(sl_iterator_stat(it, SL_STAT_ERRORS_SKIPPED), N / 20);
    sl_iterator_free(it);
    sl_dataset_release(ds);

    /* 50% failing: 0 out, 1 skipped (1 <= max(1, 0.1 * 2)), 2 out, 3 fails
     * (2 > max(1, 0.1 * 4)) */
    fail_spec half = {2, 1, SL_ECORRUPT, "bad"};
    ds = sl_map(sl_range(0, N, 1), "checker", failing_fn, &half, 4, 0);
    it = sl_iterator_create(ds, o);
    int64_t got[4];
    n = 0;
    while ((rc = sl_next(it, &el)) == 0) {
        if (n < 4)
            got[n] = in_value(el);
        n++;
        sl_element_release(el);
    }
    assert_int_equal(rc, SL_ETOO_MANY_ERRORS);
    assert_int_equal(n, 2);
    assert_int_equal(got[0], 0);
    assert_int_equal(got[1], 2);
    assert_non_null(strstr(sl_iterator_errmsg(it), "map(checker): bad 3"));
    assert_int_equal(sl_next(it, &el), SL_ETOO_MANY_ERRORS);
    sl_iterator_free(it);
    sl_options_free(o);
    sl_dataset_release(ds);
}

/* Two scratch blocks per element, filled and summed: v + sizes. */
static int scratch_fn(sl_map_ctx *ctx, const sl_element *in, sl_element **out, void *user)
{
    (void)user;
    int64_t v = in_value(in);
    size_t a = 1 + (size_t)(tu_mix((uint64_t)v) % 5000), b = 64 << 10;
    unsigned char *p = sl_map_ctx_scratch(ctx, a);
    unsigned char *q = sl_map_ctx_scratch(ctx, b);
    if (!p || !q)
        return sl_map_ctx_error(ctx, SL_ENOMEM, "no scratch");
    memset(p, 1, a);
    memset(q, 2, b);
    int64_t sum = 0;
    for (size_t i = 0; i < a; i++)
        sum += p[i];
    for (size_t i = 0; i < b; i += 4096)
        sum += q[i];
    return out_scalar(out, v + sum);
}

static void test_scratch(void **state)
{
    (void)state;
    enum { N = 500 };
    sl_dataset *ds = sl_map(sl_range(0, N, 1), "scratch", scratch_fn, NULL, 4, 0);
    int64_t want[N];
    for (int i = 0; i < N; i++)
        want[i] = i + 1 + (int64_t)(tu_mix((uint64_t)i) % 5000) + 2 * 16;
    sl_options *o = tu_opts(2, 0);
    int64_t *got;
    size_t n;
    assert_int_equal(tu_collect(ds, o, &got, &n, NULL), SL_EOF);
    assert_int_equal(n, N);
    assert_memory_equal(got, want, sizeof want);
    free(got);
    sl_options_free(o);
    sl_dataset_release(ds);
    /* scratch blocks went back: with every object freed and no default
     * runtime in this program, the library holds nothing */
    sl_release_memory();
    assert_int_equal(sl_memory_in_use(), 0);
}

static void expect_bad_map(sl_map_fn fn, int parallelism, unsigned flags)
{
    sl_clear_error();
    sl_dataset *ds = sl_map(sl_range(0, 10, 1), "bad", fn, NULL, parallelism, flags);
    assert_null(ds);
    assert_int_equal(sl_last_error_code(), SL_EINVAL);
    assert_true(strlen(sl_last_error()) > 0);
    assert_non_null(strstr(sl_last_error(), "map"));
}

static void test_bad_arguments(void **state)
{
    (void)state;
    expect_bad_map(NULL, 4, 0);
    expect_bad_map(slow_affine, 0, 0);
    expect_bad_map(slow_affine, -2, 0);
    expect_bad_map(slow_affine, 4097, 0);
    expect_bad_map(slow_affine, 4, 4u);
    expect_bad_map(slow_affine, 4, SL_MAP_ORDERED | SL_MAP_UNORDERED);
    /* the limits themselves are fine */
    const int ok[] = {1, 4096, SL_AUTOTUNE};
    for (int i = 0; i < 3; i++) {
        sl_dataset *ds = sl_map(sl_range(0, 10, 1), NULL, slow_affine, NULL, ok[i], 0);
        assert_non_null(ds);
        assert_string_equal(sl_dataset_name(ds), "map");
        sl_dataset_release(ds);
    }
}

static void test_null_propagation(void **state)
{
    (void)state;
    sl_clear_error();
    sl_dataset *ds = sl_range(0, 10, 0);
    assert_null(ds);
    char first[1024];
    snprintf(first, sizeof first, "%s", sl_last_error());
    assert_true(strlen(first) > 0);
    ds = sl_map(ds, "m", slow_affine, NULL, 2, 0);
    assert_null(ds);
    assert_string_equal(sl_last_error(), first);
    assert_int_equal(sl_last_error_code(), SL_EINVAL);
    /* bad arguments of a later builder do not replace the first error */
    ds = sl_map(NULL, "m", NULL, NULL, 0, 7u);
    assert_null(ds);
    assert_string_equal(sl_last_error(), first);
    sl_options *o = tu_opts(1, 0);
    assert_null(sl_iterator_create(NULL, o));
    assert_string_equal(sl_last_error(), first);
    sl_options_free(o);
}

static int count_calls(sl_map_ctx *ctx, const sl_element *in, sl_element **out, void *user)
{
    (void)ctx;
    atomic_fetch_add((atomic_int *)user, 1);
    *out = sl_element_retain((sl_element *)in);
    return 0;
}

static void test_empty_input(void **state)
{
    (void)state;
    atomic_int calls = 0;
    sl_dataset *ds = sl_map(sl_range(0, 0, 1), "e", count_calls, &calls, 4, 0);
    assert_int_equal(sl_dataset_cardinality(ds), 0);
    sl_options *o = tu_opts(2, 0);
    sl_iterator *it = sl_iterator_create(ds, o);
    assert_non_null(it);
    for (int i = 0; i < 3; i++) {
        sl_element *el;
        assert_int_equal(sl_next(it, &el), SL_EOF);
        assert_null(el);
    }
    sl_iterator_free(it);
    assert_int_equal(atomic_load(&calls), 0);
    sl_options_free(o);
    sl_dataset_release(ds);
}

static void test_passthrough_and_eof(void **state)
{
    (void)state;
    /* returning the input itself; EOF repeats after the end */
    atomic_int calls = 0;
    sl_dataset *ds = sl_map(sl_range(5, 25, 1), "id", count_calls, &calls, 3, 0);
    assert_int_equal(sl_dataset_cardinality(ds), 20);
    assert_string_equal(sl_dataset_name(ds), "map(id)");
    sl_options *o = tu_opts(2, 0);
    sl_iterator *it = sl_iterator_create(ds, o);
    sl_element *el;
    for (int64_t i = 5; i < 25; i++) {
        assert_int_equal(sl_next(it, &el), 0);
        assert_int_equal(in_value(el), i);
        sl_element_release(el);
    }
    for (int i = 0; i < 3; i++)
        assert_int_equal(sl_next(it, &el), SL_EOF);
    assert_int_equal(atomic_load(&calls), 20);
    sl_iterator_free(it);
    sl_options_free(o);
    sl_dataset_release(ds);
}

static int twice(sl_map_ctx *ctx, const sl_element *in, sl_element **out, void *user)
{
    (void)ctx, (void)user;
    return out_scalar(out, 2 * in_value(in));
}

static void test_huge(void **state)
{
    (void)state;
    enum { N = 100000 };
    sl_dataset *ds = sl_map(sl_range(0, N, 1), "twice", twice, NULL, SL_AUTOTUNE, 0);
    sl_options *o = tu_opts(2, 0);
    int64_t *got;
    size_t n;
    assert_int_equal(tu_collect(ds, o, &got, &n, NULL), SL_EOF);
    assert_int_equal(n, N);
    for (size_t i = 0; i < n; i++)
        if (got[i] != 2 * (int64_t)i)
            assert_int_equal(got[i], 2 * (int64_t)i);
    free(got);
    sl_dataset_release(ds);

    /* unordered: every value exactly once */
    ds = sl_map(sl_range(0, N, 1), "twice", twice, NULL, 8, SL_MAP_UNORDERED);
    assert_int_equal(tu_collect(ds, o, &got, &n, NULL), SL_EOF);
    assert_int_equal(n, N);
    unsigned char *seen = calloc(N, 1);
    for (size_t i = 0; i < n; i++) {
        assert_true(got[i] >= 0 && got[i] < 2 * N && got[i] % 2 == 0);
        assert_int_equal(seen[got[i] / 2], 0);
        seen[got[i] / 2] = 1;
    }
    free(seen);
    free(got);
    sl_options_free(o);
    sl_dataset_release(ds);
}

static void test_shared_runtime(void **state)
{
    (void)state;
    enum { N = 200 };
    sl_runtime *rt = sl_runtime_create(2);
    assert_non_null(rt);
    assert_int_equal(sl_runtime_threads(rt), 2);
    sl_options *o = sl_options_create();
    assert_int_equal(sl_options_set_runtime(o, rt), 0);
    sl_dataset *ds = sl_map(sl_range(0, N, 1), "affine", slow_affine, NULL, 4, 0);
    sl_iterator *a = sl_iterator_create(ds, o), *b = sl_iterator_create(ds, o);
    assert_non_null(a);
    assert_non_null(b);
    /* two iterators interleaved on one pool each see the whole sequence */
    for (int64_t i = 0; i < N; i++) {
        sl_element *x, *y;
        assert_int_equal(sl_next(a, &x), 0);
        assert_int_equal(sl_next(b, &y), 0);
        assert_int_equal(in_value(x), 3 * i + 1);
        assert_int_equal(in_value(y), 3 * i + 1);
        sl_element_release(x);
        sl_element_release(y);
    }
    sl_element *el;
    assert_int_equal(sl_next(a, &el), SL_EOF);
    assert_int_equal(sl_next(b, &el), SL_EOF);
    sl_iterator_free(a);
    sl_iterator_free(b);
    sl_options_free(o);
    sl_dataset_release(ds);
    sl_runtime_free(rt);
}

/* scratch_fn, and every 16th element also returns the caches from inside
 * the task, on a pool worker */
static int releasing_fn(sl_map_ctx *ctx, const sl_element *in, sl_element **out, void *user)
{
    if (in_value(in) % 16 == 0)
        sl_release_memory();
    return scratch_fn(ctx, in, out, user);
}

static void test_release_reaches_workers(void **state)
{
    (void)state;
    sl_runtime *rt = sl_runtime_create(2);
    assert_non_null(rt);
    sl_release_memory();
    int64_t base = sl_memory_in_use();
    for (int round = 0; round < 4; round++) {
        /* the workers free elements and scratch into their own caches */
        sl_options *o = sl_options_create();
        assert_int_equal(sl_options_set_runtime(o, rt), 0);
        sl_dataset *ds = sl_map(sl_range(0, 64, 1), NULL, round % 2 ? releasing_fn : scratch_fn,
                                NULL, 4, 0);
        int64_t *got;
        size_t n;
        assert_int_equal(tu_collect(ds, o, &got, &n, NULL), SL_EOF);
        assert_int_equal(n, 64);
        free(got);
        sl_options_free(o);
        sl_dataset_release(ds);
        /* with the pool still running, its workers' caches come back too */
        sl_release_memory();
        assert_int_equal(sl_memory_in_use(), base);
    }
    sl_runtime_free(rt);
}

/* The names 0.3 replaced still work for 0.x: SL_MAP_UNORDERED is
 * SL_NONDETERMINISTIC, and sl_dataset_free drops one reference as
 * sl_dataset_release does. */
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
static void test_deprecated_names(void **state)
{
    (void)state;
    assert_int_equal(SL_MAP_UNORDERED, SL_NONDETERMINISTIC);
    int64_t before = sl_memory_in_use();
    sl_dataset *ds = sl_map(sl_range(0, 8, 1), "id", tu_identity, NULL, 2, SL_MAP_UNORDERED);
    assert_non_null(ds);
    assert_ptr_equal(sl_dataset_retain(ds), ds);
    sl_dataset_free(ds); /* one reference left */
    assert_int_equal(sl_dataset_cardinality(ds), 8);
    sl_dataset_free(ds);
    assert_int_equal(sl_memory_in_use(), before);
}
#pragma GCC diagnostic pop

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_ordered_equals_sequential),
        cmocka_unit_test(test_unordered_same_multiset),
        cmocka_unit_test(test_order_modes),
        cmocka_unit_test(test_random_stream),
        cmocka_unit_test(test_error_fail),
        cmocka_unit_test(test_error_messages),
        cmocka_unit_test(test_error_skip),
        cmocka_unit_test(test_error_skip_rate),
        cmocka_unit_test(test_scratch),
        cmocka_unit_test(test_bad_arguments),
        cmocka_unit_test(test_null_propagation),
        cmocka_unit_test(test_empty_input),
        cmocka_unit_test(test_passthrough_and_eof),
        cmocka_unit_test(test_huge),
        cmocka_unit_test(test_shared_runtime),
        cmocka_unit_test(test_release_reaches_workers),
        cmocka_unit_test(test_deprecated_names),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
