/* sl_cache_auto: each placement forced by a measured situation (a costly
 * map: memory; a budget too small for it: a spill file; a stream that is
 * cheap to produce: nothing), later passes served from there (the map is
 * not called again), and the output the uncached pipeline's every time. */
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "graph/node.h"
#include "ops/testing.h"
#include "testutil.h"

typedef struct work {
    int64_t bytes;  /* of each output element */
    long spin_us;   /* CPU time per element */
    atomic_long calls;
} work;

static int produce(sl_map_ctx *ctx, const sl_element *in, sl_element **out, void *user)
{
    (void)ctx;
    work *w = user;
    atomic_fetch_add(&w->calls, 1);
    int64_t v = sl_tensor_int64(sl_element_tensor(in, 0));
    int64_t t0 = tu_now_ns();
    while (tu_now_ns() - t0 < w->spin_us * 1000) {
    }
    sl_element *el = sl_element_create(1);
    int64_t n = w->bytes / 8;
    int64_t *d = sl_element_add_tensor(el, SL_INT64, 1, &n);
    for (int64_t i = 0; i < n; i++)
        d[i] = v * 1000 + i;
    *out = el;
    return 0;
}

/* Runs a pass; returns the sum of every value (the output's signature)
 * and the placement the iterator saw. */
static int64_t pass(sl_dataset *ds, int64_t budget, int *placement, int64_t *bytes)
{
    sl_options *o = tu_opts(2, 0);
    if (budget)
        sl_options_set(o, SL_OPT_RAM_BUDGET, budget);
    sl_iterator *it = sl_iterator_create(ds, o);
    assert_non_null(it);
    sl_element *el;
    int64_t sum = 0, n = 0;
    int rc;
    while ((rc = sl_next(it, &el)) == 0) {
        const sl_tensor *t = sl_element_tensor(el, 0);
        const int64_t *d = sl_tensor_data(t);
        for (int64_t i = 0; i < sl_tensor_count(t); i++)
            sum += d[i] * (n + 1);
        sl_element_release(el);
        n++;
    }
    assert_int_equal(rc, SL_EOF);
    *placement = (int)sl_iterator_stat(it, SL_STAT_CACHE_PLACEMENT);
    *bytes = sl_iterator_stat(it, SL_STAT_CACHE_BYTES);
    sl_iterator_free(it);
    sl_options_free(o);
    return sum;
}

static sl_dataset *pipeline(work *w, int64_t n, const char *dir, bool cached)
{
    /* one worker: the cache's wait is most of the spin, whatever a slow
     * (sanitized, loaded) consumer does meanwhile */
    sl_dataset *ds = sl_map(sl_range(0, n, 1), "produce", produce, w, 1, 0);
    return cached ? sl_cache_auto(ds, dir) : ds;
}

static int files_in(const char *dir)
{
    char cmd[512];
    snprintf(cmd, sizeof cmd, "ls -A '%s' | wc -l", dir);
    FILE *p = popen(cmd, "r");
    int n = -1;
    if (p && fscanf(p, "%d", &n) != 1)
        n = -1;
    if (p)
        pclose(p);
    return n;
}

static void check_placement(int64_t n, int64_t el_bytes, long spin_us, int64_t budget,
                            int want)
{
    char dir[256];
    tu_tmpdir(dir);
    work w = {el_bytes, spin_us, 0}, plain_w = {el_bytes, spin_us, 0};
    sl_dataset *plain = pipeline(&plain_w, n, NULL, false);
    sl_dataset *ds = pipeline(&w, n, dir, true);
    int placement;
    int64_t bytes;
    int64_t expect = pass(plain, budget, &placement, &bytes);
    assert_int_equal(placement, SL_CACHE_UNDECIDED);
    for (int p = 0; p < 3; p++) {
        assert_true(pass(ds, budget, &placement, &bytes) == expect);
        assert_int_equal(placement, want);
        assert_int_equal(bytes, want == SL_CACHE_NONE ? 0 : n * el_bytes);
        /* served from the cache after the first pass, computed again without one */
        assert_int_equal(atomic_load(&w.calls), want == SL_CACHE_NONE ? (p + 1) * n : n);
        assert_int_equal(files_in(dir), want == SL_CACHE_FILE ? 1 : 0);
    }
    sl_dataset_release(ds);
    assert_int_equal(files_in(dir), 0); /* the spill file goes with its dataset */
    sl_dataset_release(plain);
    tu_rmdir(dir);
}

static void test_costly_stays_in_memory(void **state)
{
    (void)state;
    check_placement(100, 1024, 200, 0, SL_CACHE_MEMORY); /* ~200 ns per byte */
}

static void test_budget_too_small_spills(void **state)
{
    (void)state;
    /* 400 elements of 4 KiB under a 1 MiB budget: past the 512 KiB share;
     * ~50 ns per byte */
    check_placement(400, 4096, 200, 1 << 20, SL_CACHE_FILE);
}

/* A memory cache (path NULL) that outgrows its share of the budget moves
 * to a file under $TMPDIR rather than growing; a cheap stream stays. */
static void test_memory_cache_spills(void **state)
{
    (void)state;
    char dir[256];
    tu_tmpdir(dir);
    const char *old = getenv("TMPDIR");
    char *saved = old ? strdup(old) : NULL;
    setenv("TMPDIR", dir, 1);
    work w = {4096, 0, 0}, plain_w = {4096, 0, 0};
    sl_dataset *ds = sl_cache(sl_map(sl_range(0, 400, 1), "produce", produce, &w, 2, 0), NULL);
    sl_dataset *plain = pipeline(&plain_w, 400, NULL, false);
    if (saved) {
        setenv("TMPDIR", saved, 1);
        free(saved);
    } else {
        unsetenv("TMPDIR");
    }
    int placement;
    int64_t bytes;
    int64_t expect = pass(plain, 1 << 20, &placement, &bytes);
    for (int p = 0; p < 2; p++) {
        assert_true(pass(ds, 1 << 20, &placement, &bytes) == expect);
        assert_int_equal(placement, SL_CACHE_FILE); /* (never "nothing": it was asked for) */
        assert_int_equal(atomic_load(&w.calls), 400);
        assert_int_equal(files_in(dir), 1);
    }
    sl_dataset_release(ds);
    assert_int_equal(files_in(dir), 0);
    sl_dataset_release(plain);
    tu_rmdir(dir);
}

static void test_cheap_keeps_nothing(void **state)
{
    (void)state;
    /* rows of 8 MiB sliced out of one array, synchronously (no copy, no
     * thread hand-off): a slow row of a millisecond is still 0.0001 ns
     * per byte, so even a sanitizer build on a loaded machine stays far
     * below 1 ns/byte (the rule itself: test_choice_rule) */
    const int64_t rows = 4, cols = 1 << 20; /* 8 MiB rows */
    sl_element *t = sl_element_create(1);
    int64_t shape[2] = {rows, cols};
    int64_t *d = sl_element_add_tensor(t, SL_INT64, 2, shape);
    for (int64_t i = 0; i < rows * cols; i++)
        d[i] = i;
    sl_dataset *ds = sl_cache_auto(sl_from_tensor_slices(t), NULL);
    assert_non_null(ds);
    int64_t first = 0;
    for (int p = 0; p < 3; p++) {
        int placement;
        int64_t bytes;
        int64_t sum = pass(ds, 0, &placement, &bytes);
        if (p == 0)
            first = sum;
        assert_true(sum == first);
        assert_int_equal(placement, SL_CACHE_NONE); /* later passes recompute */
        assert_int_equal(bytes, 0);
    }
    sl_dataset_release(ds);
}

/* The rule on exact figures, no clock. */
static void test_choice_rule(void **state)
{
    (void)state;
    assert_int_equal(sl__cache_choose(1 << 20, 100000, false, false), SL_CACHE_NONE);
    assert_int_equal(sl__cache_choose(1 << 20, 2 << 20, false, false), SL_CACHE_MEMORY);
    assert_int_equal(sl__cache_choose(1 << 20, 2 << 20, true, false), SL_CACHE_FILE);
    assert_int_equal(sl__cache_choose(0, 0, false, false), SL_CACHE_NONE);
    /* a memory cache keeps its pass, however cheap */
    assert_int_equal(sl__cache_choose(1 << 20, 10, false, true), SL_CACHE_MEMORY);
    assert_int_equal(sl__cache_choose(1 << 20, 10, true, true), SL_CACHE_FILE);
    /* the line: 1 ns per byte */
    assert_int_equal(sl__cache_choose(1000, 999, false, false), SL_CACHE_NONE);
    assert_int_equal(sl__cache_choose(1000, 1000, false, false), SL_CACHE_MEMORY);
}

static void test_cut_pass_decides_nothing(void **state)
{
    (void)state;
    work w = {1024, 100, 0};
    sl_dataset *ds = pipeline(&w, 50, NULL, true);
    sl_dataset *cut = sl_take(sl_dataset_retain(ds), 10);
    int placement;
    int64_t bytes;
    pass(cut, 0, &placement, &bytes);
    assert_int_equal(placement, SL_CACHE_UNDECIDED);
    pass(ds, 0, &placement, &bytes);
    assert_int_equal(placement, SL_CACHE_MEMORY);
    assert_null(sl_cache_auto(NULL, NULL));
    sl_dataset *same = sl_cache(sl_range(0, 3, 1), SL_CACHE_AUTO);
    assert_non_null(same);
    tu_expect_iota(same, 3);
    sl_dataset_release(same);
    sl_dataset_release(cut);
    sl_dataset_release(ds);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_costly_stays_in_memory),
        cmocka_unit_test(test_budget_too_small_spills),
        cmocka_unit_test(test_memory_cache_spills),
        cmocka_unit_test(test_cheap_keeps_nothing),
        cmocka_unit_test(test_choice_rule),
        cmocka_unit_test(test_cut_pass_decides_nothing),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
