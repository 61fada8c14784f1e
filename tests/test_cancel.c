/* Cancellation: freeing an iterator mid-epoch, with work in flight, returns
 * promptly and leaves nothing behind; elements handed out stay valid. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "testutil.h"

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

static int64_t value_of(const sl_element *el)
{
    return sl_tensor_int64(sl_element_tensor(el, 0));
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

/* 20 ms per element. */
static int slow(sl_map_ctx *ctx, const sl_element *in, sl_element **out, void *user)
{
    (void)ctx, (void)user;
    tu_sleep_us(20000);
    return out_scalar(out, value_of(in));
}

static int fast(sl_map_ctx *ctx, const sl_element *in, sl_element **out, void *user)
{
    (void)ctx, (void)user;
    return out_scalar(out, value_of(in));
}

/* 1 MiB per element, for the budget case. */
static int big(sl_map_ctx *ctx, const sl_element *in, sl_element **out, void *user)
{
    (void)ctx, (void)user;
    sl_element *el = sl_element_create(2);
    if (!el)
        return SL_ENOMEM;
    int64_t shape[1] = {1 << 20};
    void *d = NULL;
    if (sl_element_add_int64(el, value_of(in)) == 0)
        d = sl_element_add_tensor(el, SL_UINT8, 1, shape);
    if (!d) {
        sl_element_release(el);
        return SL_ENOMEM;
    }
    memset(d, 7, 1 << 20);
    *out = el;
    return 0;
}

static sl_dataset *slow_map(void)
{
    return sl_map(sl_range(0, 1000, 1), "slow", slow, NULL, 8, 0);
}

static sl_dataset *slow_map_prefetch(void)
{
    return sl_prefetch(slow_map(), 16);
}

static sl_dataset *forever_map_prefetch(void)
{
    sl_dataset *ds = sl_repeat(sl_range(0, 10, 1), -1);
    return sl_prefetch(sl_map(ds, "slow", slow, NULL, 8, 0), 8);
}

static sl_dataset *nested_maps(void)
{
    sl_dataset *ds = sl_map(sl_range(0, 1000, 1), "inner", slow, NULL, 4, 0);
    ds = sl_map(ds, "outer", slow, NULL, 8, 0);
    return sl_prefetch(ds, 4);
}

static sl_dataset *fast_unordered(void)
{
    sl_dataset *ds = sl_map(sl_range(0, 10000000, 1), "fast", fast, NULL, 4, SL_NONDETERMINISTIC);
    return sl_prefetch(ds, 64);
}

static sl_dataset *budget_bound(void)
{
    sl_dataset *ds = sl_map(sl_range(0, 1000, 1), "big", big, NULL, 4, 0);
    return sl_prefetch(ds, 64);
}

/* Builds, takes `take` elements (after `settle_us` for work to start), frees
 * the iterator and times that; checks the elements taken survive it and
 * that the library holds no memory afterwards. */
static void cancel_case(sl_dataset *(*build)(void), int threads, int take, long settle_us,
                        int64_t modulo, int64_t budget, const char *what)
{
    sl_release_memory();
    int64_t held_before = sl_memory_in_use();
    sl_dataset *ds = build();
    assert_non_null(ds);
    sl_options *o = tu_opts(threads, 0);
    if (budget)
        assert_int_equal(sl_options_set(o, SL_OPT_RAM_BUDGET, budget), 0);
    sl_iterator *it = sl_iterator_create(ds, o);
    assert_non_null(it);
    sl_element *kept[8];
    assert_true(take <= 8);
    for (int i = 0; i < take; i++) {
        int rc = sl_next(it, &kept[i]);
        if (rc)
            print_error("%s: sl_next %d: %s\n", what, rc, sl_iterator_errmsg(it));
        assert_int_equal(rc, 0);
        if (modulo)
            assert_int_equal(value_of(kept[i]), i % modulo);
    }
    if (settle_us)
        tu_sleep_us(settle_us);
    double t0 = now_s();
    sl_iterator_free(it);
    double dt = now_s() - t0;
    if (dt >= 2.0)
        print_error("%s: sl_iterator_free took %.3f s\n", what, dt);
    assert_true(dt < 2.0);
    for (int i = 0; i < take; i++) {
        if (modulo)
            assert_int_equal(value_of(kept[i]), i % modulo);
        sl_element_release(kept[i]);
    }
    sl_options_free(o);
    sl_dataset_release(ds);
    /* every thread is joined and every buffer back: with no default runtime
     * in this program, the library holds what it held before */
    sl_release_memory();
    int64_t lost = sl_memory_in_use() - held_before;
    if (lost != 0)
        print_error("%s: %lld bytes left behind\n", what, (long long)lost);
    assert_int_equal(lost, 0);
}

static void test_slow_map(void **state)
{
    (void)state;
    cancel_case(slow_map, 2, 0, 0, 0, 0, "slow map, at once");
    cancel_case(slow_map, 2, 0, 30000, 0, 0, "slow map, nothing taken");
    cancel_case(slow_map, 2, 3, 0, 1000, 0, "slow map, 3 taken");
    cancel_case(slow_map, 8, 5, 10000, 1000, 0, "slow map, 8 threads");
}

static void test_map_prefetch(void **state)
{
    (void)state;
    cancel_case(slow_map_prefetch, 2, 0, 0, 0, 0, "map-prefetch, at once");
    cancel_case(slow_map_prefetch, 2, 0, 50000, 0, 0, "map-prefetch, nothing taken");
    cancel_case(slow_map_prefetch, 2, 4, 0, 1000, 0, "map-prefetch, 4 taken");
}

static void test_forever(void **state)
{
    (void)state;
    cancel_case(forever_map_prefetch, 2, 0, 0, 0, 0, "forever, at once");
    cancel_case(forever_map_prefetch, 2, 0, 40000, 0, 0, "forever, nothing taken");
    cancel_case(forever_map_prefetch, 2, 8, 0, 10, 0, "forever, 8 taken");
}

static void test_nested_maps(void **state)
{
    (void)state;
    cancel_case(nested_maps, 2, 0, 0, 0, 0, "nested, at once");
    cancel_case(nested_maps, 2, 0, 50000, 0, 0, "nested, nothing taken");
    cancel_case(nested_maps, 2, 2, 0, 1000, 0, "nested, 2 taken");
    cancel_case(nested_maps, 1, 1, 20000, 1000, 0, "nested, 1 thread");
}

static void test_busy_pipelines(void **state)
{
    (void)state;
    /* lots of cheap work queued */
    cancel_case(fast_unordered, 2, 0, 20000, 0, 0, "fast unordered, nothing taken");
    cancel_case(fast_unordered, 2, 8, 5000, 0, 0, "fast unordered, 8 taken");
    /* producers parked on an exhausted RAM budget */
    cancel_case(budget_bound, 2, 0, 50000, 0, 4 << 20, "budget, nothing taken");
    cancel_case(budget_bound, 2, 2, 20000, 1000, 4 << 20, "budget, 2 taken");
}

/* Many short lives, freed at every stage of start-up and of the first
 * elements: a buffer lost on any cancellation path shows in the count. */
static void test_many_cancellations(void **state)
{
    (void)state;
    sl_dataset *pipes[3];
    pipes[0] = sl_map(sl_range(0, 1000000, 1), "fast", fast, NULL, 1, 0);
    pipes[1] = sl_prefetch(sl_map(sl_range(0, 1000000, 1), "fast", fast, NULL, 2, 0), 2);
    pipes[2] = sl_map(sl_map(sl_range(0, 1000000, 1), "a", fast, NULL, 2, SL_NONDETERMINISTIC),
                      "b", fast, NULL, 3, 0);
    sl_release_memory();
    int64_t prev = sl_memory_in_use(); /* the datasets themselves */
    int lost = 0, first = -1;
    for (int i = 0; i < 1500; i++) {
        sl_options *o = tu_opts(1 + i % 2, 0);
        sl_iterator *it = sl_iterator_create(pipes[i % 3], o);
        assert_non_null(it);
        for (int j = 0; j < i % 5; j++) {
            sl_element *el;
            assert_int_equal(sl_next(it, &el), 0);
            sl_element_release(el);
        }
        sl_iterator_free(it);
        sl_options_free(o);
        sl_release_memory();
        int64_t held = sl_memory_in_use();
        if (held != prev) {
            lost++;
            if (first < 0)
                first = i;
        }
        prev = held;
    }
    for (int p = 0; p < 3; p++)
        sl_dataset_release(pipes[p]);
    if (lost)
        print_error("%d of 1500 cancellations left memory behind (first at %d)\n", lost, first);
    assert_int_equal(lost, 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_slow_map),
        cmocka_unit_test(test_map_prefetch),
        cmocka_unit_test(test_forever),
        cmocka_unit_test(test_nested_maps),
        cmocka_unit_test(test_busy_pipelines),
        cmocka_unit_test(test_many_cancellations),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
