/* The per-index permutation behind shuffle(ALL) (core/perm.c): a bijection
 * of [0, n) for every n, fixed by its key, and as uniform as a drawn
 * Fisher-Yates by the statistics a shuffle's user cares about: where a
 * given element lands, and whether neighbours stay neighbours. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "core/perm.h"
#include "core/rng.h"
#include "testutil.h"

static void check_bijection(uint64_t n, uint64_t key)
{
    sl__perm p;
    sl__perm_init(&p, n, key);
    unsigned char *seen = calloc(n ? n : 1, 1);
    assert_non_null(seen);
    for (uint64_t i = 0; i < n; i++) {
        uint64_t v = sl__perm_at(&p, i);
        if (v >= n || seen[v])
            fail_msg("n %llu: position %llu gives %llu twice or out of range",
                     (unsigned long long)n, (unsigned long long)i, (unsigned long long)v);
        seen[v] = 1;
    }
    free(seen);
}

static void test_bijection(void **state)
{
    (void)state;
    const uint64_t sizes[] = {0, 1, 2, 3, 4, 5, 7, 8, 9, 31, 33, 100, 1000, 4095, 4096, 4097,
                              65537, 1000003};
    for (size_t s = 0; s < sizeof sizes / sizeof *sizes; s++)
        for (uint64_t key = 0; key < 3; key++)
            check_bijection(sizes[s], key * 0x9e3779b97f4a7c15ull + 1);
}

static void test_fixed_by_key(void **state)
{
    (void)state;
    sl__perm a, b, c;
    sl__perm_init(&a, 1000, 42);
    sl__perm_init(&b, 1000, 42);
    sl__perm_init(&c, 1000, 43);
    int same_as_other_key = 0, fixed_points = 0;
    for (uint64_t i = 0; i < 1000; i++) {
        assert_int_equal(sl__perm_at(&a, i), sl__perm_at(&b, i));
        same_as_other_key += sl__perm_at(&a, i) == sl__perm_at(&c, i);
        fixed_points += sl__perm_at(&a, i) == i;
    }
    /* another key, another order: about one agreement in n expected */
    assert_true(same_as_other_key < 10);
    assert_true(fixed_points < 10);
}

/* Far positions of a huge n cost what near ones do: no table, no replay. */
static void test_huge(void **state)
{
    (void)state;
    sl__perm p;
    const uint64_t n = 1000000007ull * 1000; /* 10^12 + 7000 */
    sl__perm_init(&p, n, 7);
    uint64_t prev = UINT64_MAX;
    for (uint64_t i = n - 1000; i < n; i++) {
        uint64_t v = sl__perm_at(&p, i);
        assert_true(v < n);
        assert_true(v != prev);
        prev = v;
    }
}

/* Pearson's chi-square over the n x n table of (element, position) counts
 * from `trials` keys; each cell expects trials / n. */
static double position_chi2(int n, int trials, int feistel)
{
    double *count = calloc((size_t)n * (size_t)n, sizeof *count);
    int *perm = malloc((size_t)n * sizeof *perm);
    for (int t = 0; t < trials; t++) {
        if (feistel) {
            sl__perm p;
            sl__perm_init(&p, (uint64_t)n, sl__mix64((uint64_t)t + 1));
            for (int i = 0; i < n; i++)
                perm[i] = (int)sl__perm_at(&p, (uint64_t)i);
        } else { /* Fisher-Yates, as shuffle(ALL) drew it before */
            sl__rng r = sl__rng_make(9, 0, t, 0);
            for (int i = 0; i < n; i++)
                perm[i] = i;
            for (int i = 0; i < n - 1; i++) {
                int j = i + (int)sl__rng_below(&r, (uint64_t)(n - i));
                int x = perm[i];
                perm[i] = perm[j];
                perm[j] = x;
            }
        }
        for (int i = 0; i < n; i++)
            count[(size_t)perm[i] * (size_t)n + (size_t)i] += 1;
    }
    double e = (double)trials / n, chi2 = 0;
    for (int c = 0; c < n * n; c++)
        chi2 += (count[c] - e) * (count[c] - e) / e;
    free(count);
    free(perm);
    return chi2;
}

/* The mean |Pearson r| of (perm(i), perm(i + 1)) over keys: neighbours in
 * the order must not be near in the input (cycle walking and a weak round
 * would show here first). */
static double neighbour_r(int n, int trials)
{
    double sum = 0;
    for (int t = 0; t < trials; t++) {
        sl__perm p;
        sl__perm_init(&p, (uint64_t)n, sl__mix64((uint64_t)t + 77));
        double sx = 0, sy = 0, sxx = 0, syy = 0, sxy = 0;
        for (int i = 0; i + 1 < n; i++) {
            double x = (double)sl__perm_at(&p, (uint64_t)i);
            double y = (double)sl__perm_at(&p, (uint64_t)i + 1);
            sx += x, sy += y, sxx += x * x, syy += y * y, sxy += x * y;
        }
        double m = n - 1;
        double r = (sxy - sx * sy / m) / sqrt((sxx - sx * sx / m) * (syy - sy * sy / m));
        sum += r;
    }
    return sum / trials;
}

static void test_uniform_positions(void **state)
{
    (void)state;
    /* A sound shuffle's statistic averages n (n - 1) (each cell's variance
     * is e (1 - 1/n)); its tail is heavier than a chi-square's (40 runs of
     * Fisher-Yates at n = 5 reached 2.4 times the mean), so the bound is
     * eight of sqrt(2 n (n - 1)) above it. The Feistel network alone gave
     * 446 at n = 5 (mean 20), which is why small n get a table. */
    /* below SL__PERM_TABLE a drawn table, above it the network */
    const int sizes[] = {5, 10, 64, SL__PERM_TABLE + 1, 1500};
    for (size_t s = 0; s < sizeof sizes / sizeof *sizes; s++) {
        int n = sizes[s], trials = n > 100 ? 4000 : 20000;
        double df = (double)n * (n - 1);
        double bound = df + 8 * sqrt(2 * df);
        double feistel = position_chi2(n, trials, 1);
        double fy = position_chi2(n, trials, 0);
        print_message("n %d: chi-square of positions %.0f (Fisher-Yates %.0f), mean %.0f\n", n,
                      feistel, fy, df);
        assert_true(fy < bound); /* the test itself is sound */
        assert_true(feistel < bound);
    }
}

static void test_neighbours_uncorrelated(void **state)
{
    (void)state;
    /* mean r over 200 keys of 1000 positions: sd ~ 1/sqrt(200 * 999) */
    const int sizes[] = {1000, 1025, 5000};
    for (size_t s = 0; s < 3; s++) {
        double r = neighbour_r(sizes[s], 200);
        print_message("n %d: mean neighbour correlation %.5f\n", sizes[s], r);
        assert_true(fabs(r) < 6 / sqrt(200.0 * sizes[s]));
    }
}

/* sl_shuffle_windowed: a permutation whose every window of block * window
 * positions holds whole blocks, at most `window` of them, the short last
 * block last; the same at any thread count; resumes anywhere. */
static void test_windowed(void **state)
{
    (void)state;
    const int64_t n = 1003, block = 10, window = 4;
    sl_dataset *ds = sl_shuffle_windowed(sl_range(0, n, 1), block, window, 3, 0);
    if (!ds)
        fail_msg("%s", sl_last_error());
    int64_t *a, *b;
    size_t na, nb;
    sl_options *o1 = tu_opts(1, 0), *o3 = tu_opts(3, 0);
    assert_int_equal(tu_collect(ds, o1, &a, &na, NULL), SL_EOF);
    assert_int_equal(tu_collect(ds, o3, &b, &nb, NULL), SL_EOF);
    assert_int_equal(na, (size_t)n);
    assert_memory_equal(a, b, (size_t)n * sizeof *a);
    char *seen = calloc((size_t)n, 1);
    int64_t in_place = 0;
    for (int64_t i = 0; i < n; i++) {
        assert_false(seen[a[i]]);
        seen[a[i]] = 1;
        in_place += a[i] == i;
    }
    assert_true(in_place < 20);
    for (int64_t w = 0; w * block * window < 1000; w++) {
        int blocks[64], nblocks = 0;
        for (int64_t i = w * block * window; i < (w + 1) * block * window && i < 1000; i++) {
            int blk = (int)(a[i] / block), k = 0;
            assert_true(a[i] < 1000);
            while (k < nblocks && blocks[k] != blk)
                k++;
            if (k == nblocks)
                blocks[nblocks++] = blk;
        }
        assert_true(nblocks <= window);
    }
    for (int64_t i = 1000; i < n; i++) /* the short block, last */
        assert_true(a[i] >= 1000);
    /* resumed anywhere, the rest is the same */
    const int64_t at[] = {0, 7, 40, 399, 1000, 1002};
    for (size_t k = 0; k < sizeof at / sizeof *at; k++) {
        sl_iterator *it = sl_iterator_create(ds, o1);
        sl_element *el;
        for (int64_t i = 0; i < at[k]; i++) {
            assert_int_equal(sl_next(it, &el), 0);
            sl_element_release(el);
        }
        unsigned char st[256];
        int64_t len = sl_iterator_save(it, st, sizeof st);
        assert_true(len > 0);
        sl_iterator_free(it);
        it = sl_iterator_restore(ds, st, (size_t)len, o1);
        assert_non_null(it);
        for (int64_t i = at[k]; i < n; i++) {
            assert_int_equal(sl_next(it, &el), 0);
            assert_int_equal(*(const int64_t *)sl_tensor_data(sl_element_tensor(el, 0)), a[i]);
            sl_element_release(el);
        }
        assert_int_equal(sl_next(it, &el), SL_EOF);
        sl_iterator_free(it);
    }
    free(seen);
    free(a);
    free(b);
    sl_dataset_release(ds);
    /* fewer elements than a block; bad arguments */
    ds = sl_shuffle_windowed(sl_range(0, 7, 1), 10, 4, 3, 0);
    assert_int_equal(tu_collect(ds, o1, &a, &na, NULL), SL_EOF);
    assert_int_equal(na, 7);
    free(a);
    sl_dataset_release(ds);
    assert_null(sl_shuffle_windowed(sl_range(0, 7, 1), 0, 4, 3, 0));
    assert_int_equal(sl_last_error_code(), SL_EINVAL);
    sl_options_free(o1);
    sl_options_free(o3);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_bijection),
        cmocka_unit_test(test_fixed_by_key),
        cmocka_unit_test(test_huge),
        cmocka_unit_test(test_uniform_positions),
        cmocka_unit_test(test_neighbours_uncorrelated),
        cmocka_unit_test(test_windowed),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
