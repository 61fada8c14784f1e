/* shuffle: buffer and whole-dataset modes, seeds, epochs, tf.data's window
 * property and random access through take/skip/shard. */
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include "testutil.h"

static int cmp_i64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

/* Runs ds (borrowed) with opts and returns the values; asserts SL_EOF. */
static int64_t *run(sl_dataset *ds, const sl_options *opts, size_t *n)
{
    int64_t *v;
    char msg[1024];
    int rc = tu_collect(ds, opts, &v, n, msg);
    if (rc != SL_EOF)
        print_error("iteration failed: %d %s\n", rc, msg);
    assert_int_equal(rc, SL_EOF);
    return v;
}

static int64_t *run2(sl_dataset *ds, size_t *n)
{
    sl_options *o = tu_opts(2, 0);
    int64_t *v = run(ds, o, n);
    sl_options_free(o);
    return v;
}

/* v[0..n) sorted equals expect[0..n) sorted. */
static void assert_same_multiset(const int64_t *v, const int64_t *expect, size_t n)
{
    int64_t *a = malloc(n * sizeof *a + 1), *b = malloc(n * sizeof *b + 1);
    memcpy(a, v, n * sizeof *a);
    memcpy(b, expect, n * sizeof *b);
    qsort(a, n, sizeof *a, cmp_i64);
    qsort(b, n, sizeof *b, cmp_i64);
    for (size_t i = 0; i < n; i++)
        assert_int_equal(a[i], b[i]);
    free(a);
    free(b);
}

static void assert_permutation_of_range(const int64_t *v, size_t n, int64_t start)
{
    int64_t *e = malloc(n * sizeof *e + 1);
    for (size_t i = 0; i < n; i++)
        e[i] = start + (int64_t)i;
    assert_same_multiset(v, e, n);
    free(e);
}

static size_t fixed_points(const int64_t *v, size_t n, int64_t start)
{
    size_t k = 0;
    for (size_t i = 0; i < n; i++)
        k += v[i] == start + (int64_t)i;
    return k;
}

/* Fails the k-th allocation for k = 1, 2, ... until a run needs fewer
 * allocations than k: every run must end in SL_EOF (with all `expect`
 * elements) or SL_ENOMEM, and leave nothing allocated. Runs before anything
 * creates the process default runtime, which would hold memory for good. */
static void with_failing_allocations(sl_dataset *(*build)(void *), void *arg, int64_t expect)
{
    tu_alloc_install();
    for (int64_t k = 1;; k++) {
        tu_alloc_fail_at(k);
        int64_t n = 0;
        int rc = SL_ENOMEM;
        sl_options *o = sl_options_create();
        if (o && sl_options_set(o, SL_OPT_THREADS, 1) == 0) {
            sl_dataset *ds = build(arg);
            sl_iterator *it = ds ? sl_iterator_create(ds, o) : NULL;
            sl_element *el;
            while (it && (rc = sl_next(it, &el)) == 0) {
                n++;
                sl_element_release(el);
            }
            sl_iterator_free(it);
            sl_dataset_release(ds);
        }
        sl_options_free(o);
        bool done = tu_alloc_calls() < k;
        tu_alloc_fail_at(0);
        sl_release_memory();
        assert_int_equal(tu_alloc_live_bytes(), 0);
        if (rc != SL_EOF)
            assert_int_equal(rc, SL_ENOMEM);
        else
            assert_int_equal(n, expect);
        if (done) {
            assert_int_equal(rc, SL_EOF);
            break;
        }
    }
    tu_alloc_uninstall();
}

static sl_dataset *build_buffer_shuffle(void *arg)
{
    (void)arg;
    return sl_repeat(sl_shuffle(sl_range(0, 300, 1), 50, 1, 0), 2);
}

static sl_dataset *build_full_shuffle(void *arg)
{
    (void)arg;
    return sl_repeat(sl_shuffle(sl_range(0, 300, 1), SL_SHUFFLE_ALL, 1, 0), 2);
}

static void test_allocation_failures(void **state)
{
    (void)state;
    with_failing_allocations(build_buffer_shuffle, NULL, 600);
    with_failing_allocations(build_full_shuffle, NULL, 600);
}

static void test_buffer_one_is_identity(void **state)
{
    (void)state;
    int64_t e[100];
    for (int i = 0; i < 100; i++)
        e[i] = i;
    sl_dataset *ds = sl_shuffle(sl_range(0, 100, 1), 1, 7, 0);
    assert_non_null(ds);
    tu_expect(ds, e, 100);
    sl_dataset_release(ds);
}

static void test_permutation_for_buffer_sizes(void **state)
{
    (void)state;
    const int64_t sizes[] = {2, 3, 10, 100, 999, 1000, 5000, (int64_t)1 << 40};
    for (size_t s = 0; s < sizeof sizes / sizeof *sizes; s++) {
        sl_dataset *ds = sl_shuffle(sl_range(0, 1000, 1), sizes[s], 11, 0);
        assert_non_null(ds);
        assert_int_equal(sl_dataset_cardinality(ds), 1000);
        size_t n;
        int64_t *v = run2(ds, &n);
        assert_int_equal(n, 1000);
        assert_permutation_of_range(v, n, 0);
        assert_true(fixed_points(v, n, 0) < 1000);
        free(v);
        sl_dataset_release(ds);
    }
}

static void test_shuffle_all_permutation(void **state)
{
    (void)state;
    sl_dataset *ds = sl_shuffle(sl_range(0, 1000, 1), SL_SHUFFLE_ALL, 5, 0);
    assert_non_null(ds);
    assert_int_equal(sl_dataset_cardinality(ds), 1000);
    size_t n;
    int64_t *v = run2(ds, &n);
    assert_int_equal(n, 1000);
    assert_permutation_of_range(v, n, 0);
    assert_true(fixed_points(v, n, 0) < 100);
    free(v);
    sl_dataset_release(ds);

    /* a negative step: get() must map indices the way next() does */
    ds = sl_shuffle(sl_range(100, 0, -3), SL_SHUFFLE_ALL, 5, 0);
    v = run2(ds, &n);
    assert_int_equal(n, 34);
    int64_t e[34];
    for (int i = 0; i < 34; i++)
        e[i] = 100 - 3 * i;
    assert_same_multiset(v, e, n);
    free(v);
    sl_dataset_release(ds);

    ds = sl_shuffle(sl_range(0, 0, 1), SL_SHUFFLE_ALL, 5, 0);
    assert_non_null(ds);
    assert_int_equal(tu_count(ds, NULL), 0);
    sl_dataset_release(ds);
}

static void test_empty_and_short_inputs(void **state)
{
    (void)state;
    sl_dataset *ds = sl_shuffle(sl_range(0, 0, 1), 10, 1, 0);
    assert_int_equal(tu_count(ds, NULL), 0);
    sl_dataset_release(ds);

    /* fewer elements than the buffer */
    ds = sl_shuffle(sl_range(0, 5, 1), 1000, 1, 0);
    size_t n;
    int64_t *v = run2(ds, &n);
    assert_int_equal(n, 5);
    assert_permutation_of_range(v, n, 0);
    free(v);
    sl_dataset_release(ds);
}

/* Buffer and whole-dataset shuffles give the same order for the same seed
 * whatever the thread count, and a different one for another seed. */
static void check_seeds(int64_t buffer)
{
    int64_t *first = NULL;
    size_t n0 = 0;
    const int threads[] = {1, 2, 8};
    for (int t = 0; t < 3; t++) {
        sl_dataset *ds = sl_shuffle(sl_range(0, 500, 1), buffer, 42, 0);
        sl_options *o = tu_opts(threads[t], 1234 + t); /* global seed unused */
        size_t n;
        int64_t *v = run(ds, o, &n);
        assert_int_equal(n, 500);
        if (!first) {
            first = v;
            n0 = n;
        } else {
            assert_memory_equal(first, v, n0 * sizeof *v);
            free(v);
        }
        sl_options_free(o);
        sl_dataset_release(ds);
    }
    sl_dataset *ds = sl_shuffle(sl_range(0, 500, 1), buffer, 43, 0);
    size_t n;
    int64_t *v = run2(ds, &n);
    assert_int_equal(n, n0);
    assert_true(memcmp(first, v, n * sizeof *v) != 0);
    assert_permutation_of_range(v, n, 0);
    free(v);
    free(first);
    sl_dataset_release(ds);
}

static void test_same_seed_same_order(void **state)
{
    (void)state;
    check_seeds(64);
    check_seeds(SL_SHUFFLE_ALL);
}

/* seed -1 follows the iterator's SL_OPT_SEED. */
static void test_global_seed(void **state)
{
    (void)state;
    sl_dataset *ds = sl_shuffle(sl_range(0, 300, 1), 50, -1, 0);
    sl_options *a = tu_opts(1, 9), *b = tu_opts(8, 9), *c = tu_opts(1, 10);
    size_t na, nb, nc;
    int64_t *va = run(ds, a, &na), *vb = run(ds, b, &nb), *vc = run(ds, c, &nc);
    assert_int_equal(na, 300);
    assert_int_equal(nb, 300);
    assert_int_equal(nc, 300);
    assert_memory_equal(va, vb, na * sizeof *va);
    assert_true(memcmp(va, vc, na * sizeof *va) != 0);
    free(va);
    free(vb);
    free(vc);
    sl_options_free(a);
    sl_options_free(b);
    sl_options_free(c);
    sl_dataset_release(ds);
}

/* repeat(3) after shuffle: each epoch a permutation; reshuffled unless
 * SL_SHUFFLE_NO_RESHUFFLE. */
static void check_epochs(int64_t buffer, unsigned flags)
{
    const size_t per = 64;
    sl_dataset *ds = sl_repeat(sl_shuffle(sl_range(0, (int64_t)per, 1), buffer, 3, flags), 3);
    assert_non_null(ds);
    size_t n;
    int64_t *v = run2(ds, &n);
    assert_int_equal(n, 3 * per);
    for (int e = 0; e < 3; e++)
        assert_permutation_of_range(v + e * per, per, 0);
    for (int e = 1; e < 3; e++) {
        bool same = memcmp(v, v + e * per, per * sizeof *v) == 0;
        if (flags & SL_SHUFFLE_NO_RESHUFFLE)
            assert_true(same);
        else
            assert_false(same);
    }
    if (!(flags & SL_SHUFFLE_NO_RESHUFFLE))
        assert_true(memcmp(v + per, v + 2 * per, per * sizeof *v) != 0);
    free(v);
    sl_dataset_release(ds);
}

static void test_reshuffle_each_epoch(void **state)
{
    (void)state;
    check_epochs(16, 0);
    check_epochs(SL_SHUFFLE_ALL, 0);
}

static void test_no_reshuffle(void **state)
{
    (void)state;
    check_epochs(16, SL_SHUFFLE_NO_RESHUFFLE);
    check_epochs(SL_SHUFFLE_ALL, SL_SHUFFLE_NO_RESHUFFLE);
}

static int keep_all(sl_map_ctx *ctx, const sl_element *el, void *user)
{
    (void)ctx, (void)el, (void)user;
    return 1;
}

static void test_shuffle_all_needs_random_access(void **state)
{
    (void)state;
    sl_clear_error();
    sl_dataset *ds = sl_shuffle(sl_filter(sl_range(0, 10, 1), "all", keep_all, NULL),
                                SL_SHUFFLE_ALL, 1, 0);
    assert_null(ds);
    assert_non_null(strstr(sl_last_error(), "shuffle"));
    assert_non_null(strstr(sl_last_error(), "random access"));

    /* infinite: no known size */
    ds = sl_shuffle(sl_repeat(sl_range(0, 10, 1), -1), SL_SHUFFLE_ALL, 1, 0);
    assert_null(ds);
    assert_non_null(strstr(sl_last_error(), "SL_SHUFFLE_ALL"));

    /* a buffer shuffle is fine on either */
    ds = sl_take(sl_shuffle(sl_repeat(sl_range(0, 10, 1), -1), 7, 1, 0), 35);
    size_t n;
    int64_t *v = run2(ds, &n);
    assert_int_equal(n, 35);
    for (size_t i = 0; i < n; i++)
        assert_true(v[i] >= 0 && v[i] < 10);
    free(v);
    sl_dataset_release(ds);
}

/* The code is what a chain's last builder reports: check it through
 * sl_iterator_create, which rejects the NULL dataset with the kept message. */
static void test_invalid_arguments(void **state)
{
    (void)state;
    const int64_t bad[] = {0, -2, -100, INT64_MIN};
    for (int i = 0; i < 4; i++) {
        sl_clear_error();
        assert_null(sl_shuffle(sl_range(0, 10, 1), bad[i], 1, 0));
        assert_non_null(strstr(sl_last_error(), "shuffle: buffer"));
    }
    sl_clear_error();
    assert_null(sl_shuffle(sl_range(0, 10, 1), 4, -2, 0));
    assert_non_null(strstr(sl_last_error(), "seed"));
    sl_clear_error();
    assert_null(sl_shuffle(sl_range(0, 10, 1), 4, 1, 0x80));
    assert_non_null(strstr(sl_last_error(), "flags"));

    /* a NULL input keeps the earlier error */
    sl_clear_error();
    assert_null(sl_range(0, 1, 0));
    char before[1024];
    strcpy(before, sl_last_error());
    assert_null(sl_shuffle(NULL, 4, 1, 0));
    assert_string_equal(sl_last_error(), before);
}

/* Statistical sanity: a buffer of 100 over 1000 elements moves almost
 * everything (a stuck shuffle would leave most in place). */
static void test_buffer_moves_elements(void **state)
{
    (void)state;
    for (int64_t seed = 0; seed < 5; seed++) {
        sl_dataset *ds = sl_shuffle(sl_range(0, 1000, 1), 100, seed, 0);
        size_t n;
        int64_t *v = run2(ds, &n);
        assert_int_equal(n, 1000);
        assert_true(fixed_points(v, n, 0) < 100);
        free(v);
        sl_dataset_release(ds);
    }
}

/* tf.data's property: output i is one of the first i + B inputs, so the
 * first element comes from the first B. */
static void test_window_property(void **state)
{
    (void)state;
    const int64_t B = 10;
    int64_t first_hits[10] = {0};
    for (int64_t seed = 0; seed < 200; seed++) {
        sl_dataset *ds = sl_shuffle(sl_range(0, 200, 1), B, seed, 0);
        size_t n;
        int64_t *v = run(ds, NULL, &n);
        assert_int_equal(n, 200);
        assert_true(v[0] < B);
        first_hits[v[0]]++;
        for (size_t i = 0; i < n; i++)
            assert_true(v[i] < (int64_t)i + B);
        free(v);
        sl_dataset_release(ds);
    }
    /* every slot of the first window gets picked now and then */
    for (int i = 0; i < B; i++)
        assert_true(first_hits[i] > 0);
}

/* Small inputs reach every permutation with both modes. */
static void test_all_orders_reachable(void **state)
{
    (void)state;
    const int64_t modes[] = {3, SL_SHUFFLE_ALL};
    for (int m = 0; m < 2; m++) {
        int seen[6] = {0};
        for (int64_t seed = 0; seed < 300; seed++) {
            sl_dataset *ds = sl_shuffle(sl_range(0, 3, 1), modes[m], seed, 0);
            size_t n;
            int64_t *v = run(ds, NULL, &n);
            assert_int_equal(n, 3);
            assert_permutation_of_range(v, n, 0);
            int code = (int)(v[0] * 2 + (v[1] > v[2]));
            seen[code]++;
            free(v);
            sl_dataset_release(ds);
        }
        for (int k = 0; k < 6; k++)
            assert_true(seen[k] > 10);
    }
}

static void test_random_access_through_selection(void **state)
{
    (void)state;
    size_t n;
    int64_t *v;

    sl_dataset *ds = sl_shuffle(sl_take(sl_skip(sl_range(0, 100, 1), 10), 50), SL_SHUFFLE_ALL,
                                2, 0);
    assert_non_null(ds);
    assert_int_equal(sl_dataset_cardinality(ds), 50);
    v = run2(ds, &n);
    assert_int_equal(n, 50);
    assert_permutation_of_range(v, n, 10);
    assert_true(fixed_points(v, n, 10) < 50);
    free(v);
    sl_dataset_release(ds);

    ds = sl_shuffle(sl_shard(sl_range(0, 100, 1), 4, 1), SL_SHUFFLE_ALL, 2, 0);
    assert_non_null(ds);
    v = run2(ds, &n);
    assert_int_equal(n, 25);
    int64_t e[25];
    for (int i = 0; i < 25; i++)
        e[i] = 1 + 4 * i;
    assert_same_multiset(v, e, n);
    free(v);
    sl_dataset_release(ds);
}

static void test_fingerprint_and_name(void **state)
{
    (void)state;
    sl_dataset *a = sl_shuffle(sl_range(0, 10, 1), 4, 1, 0);
    sl_dataset *b = sl_shuffle(sl_range(0, 10, 1), 4, 1, 0);
    sl_dataset *c = sl_shuffle(sl_range(0, 10, 1), 5, 1, 0);
    sl_dataset *d = sl_shuffle(sl_range(0, 10, 1), 4, 2, 0);
    sl_dataset *e = sl_shuffle(sl_range(0, 10, 1), 4, 1, SL_SHUFFLE_NO_RESHUFFLE);
    assert_string_equal(sl_dataset_name(a), "shuffle");
    assert_true(sl_dataset_fingerprint(a) == sl_dataset_fingerprint(b));
    assert_true(sl_dataset_fingerprint(a) != sl_dataset_fingerprint(c));
    assert_true(sl_dataset_fingerprint(a) != sl_dataset_fingerprint(d));
    assert_true(sl_dataset_fingerprint(a) != sl_dataset_fingerprint(e));
    sl_dataset_release(a);
    sl_dataset_release(b);
    sl_dataset_release(c);
    sl_dataset_release(d);
    sl_dataset_release(e);

    a = sl_shuffle(sl_repeat(sl_range(0, 10, 1), -1), 4, 1, 0);
    assert_int_equal(sl_dataset_cardinality(a), SL_INFINITE);
    sl_dataset_release(a);
}

/* The buffer shows in the iterator's statistics while it is full, and
 * nothing stays accounted once it drains or the iterator goes. */
static void test_buffer_accounting(void **state)
{
    (void)state;
    sl_dataset *ds = sl_shuffle(sl_range(0, 1000, 1), 100, 1, 0);
    sl_iterator *it = sl_iterator_create(ds, NULL);
    assert_non_null(it);
    sl_element *el;
    assert_int_equal(sl_next(it, &el), 0);
    sl_element_release(el);
    /* 99 int64 scalars wait in the buffer */
    assert_int_equal(sl_iterator_stat(it, SL_STAT_BUFFERED_BYTES), 99 * 8);
    assert_true(sl_iterator_stat(it, SL_STAT_PEAK_BUFFERED_BYTES) >= 100 * 8);
    int rc;
    while ((rc = sl_next(it, &el)) == 0)
        sl_element_release(el);
    assert_int_equal(rc, SL_EOF);
    assert_int_equal(sl_iterator_stat(it, SL_STAT_BUFFERED_BYTES), 0);
    /* after the end it stays at the end */
    assert_int_equal(sl_next(it, &el), SL_EOF);
    assert_null(el);
    assert_int_equal(sl_next(it, &el), SL_EOF);
    sl_iterator_free(it);

    /* freed mid-pass: the remaining buffer is released (ASan checks) */
    it = sl_iterator_create(ds, NULL);
    assert_int_equal(sl_next(it, &el), 0);
    sl_element_release(el);
    sl_iterator_free(it);
    sl_dataset_release(ds);
}

static void test_shuffle_all_eof_is_sticky(void **state)
{
    (void)state;
    sl_dataset *ds = sl_shuffle(sl_range(0, 3, 1), SL_SHUFFLE_ALL, 1, 0);
    sl_iterator *it = sl_iterator_create(ds, NULL);
    sl_element *el;
    for (int i = 0; i < 3; i++) {
        assert_int_equal(sl_next(it, &el), 0);
        sl_element_release(el);
    }
    assert_int_equal(sl_next(it, &el), SL_EOF);
    assert_int_equal(sl_next(it, &el), SL_EOF);
    assert_int_equal(sl_iterator_stat(it, SL_STAT_BUFFERED_BYTES), 0);
    sl_iterator_free(it);
    sl_dataset_release(ds);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_allocation_failures), /* first: see the helper */
        cmocka_unit_test(test_buffer_one_is_identity),
        cmocka_unit_test(test_permutation_for_buffer_sizes),
        cmocka_unit_test(test_shuffle_all_permutation),
        cmocka_unit_test(test_empty_and_short_inputs),
        cmocka_unit_test(test_same_seed_same_order),
        cmocka_unit_test(test_global_seed),
        cmocka_unit_test(test_reshuffle_each_epoch),
        cmocka_unit_test(test_no_reshuffle),
        cmocka_unit_test(test_shuffle_all_needs_random_access),
        cmocka_unit_test(test_invalid_arguments),
        cmocka_unit_test(test_buffer_moves_elements),
        cmocka_unit_test(test_window_property),
        cmocka_unit_test(test_all_orders_reachable),
        cmocka_unit_test(test_random_access_through_selection),
        cmocka_unit_test(test_fingerprint_and_name),
        cmocka_unit_test(test_buffer_accounting),
        cmocka_unit_test(test_shuffle_all_eof_is_sticky),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
