/* Resident memory stays flat over many epochs: pooled buffers are reused,
 * whether the epochs come from one iterator over repeat(20) or from 20
 * successive iterators (each with its own threads).
 *
 * The pools grow to the pipeline's high-water mark, and that mark is only
 * reached once the scheduler has produced its busiest moment (autotune
 * deepening buffers, workers finishing together): measured here, library
 * memory after epoch 2 is 15-25 MiB and settles at 30.5 or 35.5 MiB (a batch
 * is 4.6 MiB) anywhere between epoch 3 and epoch 11. So the early sample is
 * taken after a warm-up of WARM epochs, and the total is also held to the
 * RAM budget plus the batches that live outside it (the one being built,
 * the one the consumer holds): a leak grows with the epoch count and fails
 * both, a pool converges and passes both. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "testutil.h"

#define MIB ((int64_t)1 << 20)

/* Under TSan the RSS is mostly shadow memory (several bytes per byte the
 * program touches, plus per-thread state for every thread ever started), so
 * there only the library's own bytes (sl_memory_in_use) are held to the
 * limit; they are what pooling keeps flat. */
#if defined(__SANITIZE_THREAD__)
#define RSS_MEANINGFUL 0
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define RSS_MEANINGFUL 0
#endif
#endif
#ifndef RSS_MEANINGFUL
#define RSS_MEANINGFUL 1
#endif

enum {
    N = 128,          /* elements per epoch */
    ROW = 150 * 1000, /* bytes per element: a decoded thumbnail, say */
    BATCH = 32,
    EPOCHS = 20,
    BATCHES = N / BATCH, /* per epoch */
    WARM = 10,           /* epochs before the early sample */
};

#define BUDGET (32 * MIB)

static int thumbnail(sl_map_ctx *ctx, const sl_element *in, sl_element **out, void *user)
{
    (void)ctx, (void)user;
    int64_t v = sl_tensor_int64(sl_element_tensor(in, 0));
    sl_element *el = sl_element_create(2);
    if (!el)
        return SL_ENOMEM;
    int64_t shape[1] = {ROW};
    unsigned char *d = NULL;
    if (sl_element_add_int64(el, v) == 0)
        d = sl_element_add_tensor(el, SL_UINT8, 1, shape);
    if (!d) {
        sl_element_release(el);
        return SL_ENOMEM;
    }
    memset(d, (int)(v & 0xff), ROW);
    *out = el;
    return 0;
}

/* One epoch: range -> map -> batch(32) -> prefetch(2). */
static sl_dataset *epoch(void)
{
    sl_dataset *ds = sl_map(sl_range(0, N, 1), "thumbnail", thumbnail, NULL, SL_AUTOTUNE, 0);
    return sl_prefetch(sl_batch(ds, BATCH, 0), 2);
}

/* Two private threads and a realistic RAM budget: the budget bounds what
 * the pipeline buffers at its busiest moment, which is the high-water mark
 * the pools grow to; without it (half the machine's memory by default) that
 * mark would follow the scheduler's luck rather than the pipeline. */
static sl_options *opts(void)
{
    sl_options *o = tu_opts(2, 0);
    assert_int_equal(sl_options_set(o, SL_OPT_RAM_BUDGET, BUDGET), 0);
    return o;
}

/* Checks batch b of an epoch. */
static void check_batch(const sl_element *el, int64_t b)
{
    const sl_tensor *v = sl_element_tensor(el, 0), *rows = sl_element_tensor(el, 1);
    assert_int_equal(sl_tensor_count(v), BATCH);
    assert_int_equal(sl_tensor_nbytes(rows), (size_t)BATCH * ROW);
    const int64_t *vals = sl_tensor_data(v);
    const unsigned char *d = sl_tensor_data(rows);
    for (int i = 0; i < BATCH; i++) {
        int64_t want = b * BATCH + i;
        assert_int_equal(vals[i], want);
        assert_int_equal(d[(size_t)i * ROW], want & 0xff);
        assert_int_equal(d[(size_t)i * ROW + ROW - 1], want & 0xff);
    }
}

typedef struct sample {
    int64_t rss, lib;
} sample;

static sample measure(void)
{
    return (sample){tu_rss_bytes(), sl_memory_in_use()};
}

static void report(const char *what, sample early, sample late)
{
    print_message("%s: RSS after epoch %d: %.1f MiB, after epoch %d: %.1f MiB (%+.1f MiB); "
                  "library memory %.1f -> %.1f MiB\n",
                  what, WARM, (double)early.rss / MIB, EPOCHS, (double)late.rss / MIB,
                  (double)(late.rss - early.rss) / MIB, (double)early.lib / MIB,
                  (double)late.lib / MIB);
    assert_true(early.rss > 0);
    assert_true(early.lib > 0);
    if (late.lib - early.lib >= 16 * MIB)
        print_error("%s: library memory grew by %.1f MiB\n", what,
                    (double)(late.lib - early.lib) / MIB);
    assert_true(late.lib - early.lib < 16 * MIB);
    int64_t cap = BUDGET + 2 * (int64_t)BATCH * ROW;
    if (late.lib >= cap)
        print_error("%s: library memory %.1f MiB is over the budget plus two batches\n", what,
                    (double)late.lib / MIB);
    assert_true(late.lib < cap);
    if (!RSS_MEANINGFUL)
        return;
    if (late.rss - early.rss >= 16 * MIB)
        print_error("%s: RSS grew by %.1f MiB\n", what, (double)(late.rss - early.rss) / MIB);
    assert_true(late.rss - early.rss < 16 * MIB);
}

static void test_one_iterator_over_repeat(void **state)
{
    (void)state;
    sl_dataset *ds = sl_repeat(epoch(), EPOCHS);
    assert_int_equal(sl_dataset_cardinality(ds), EPOCHS * BATCHES);
    sl_options *o = opts();
    sl_iterator *it = sl_iterator_create(ds, o);
    assert_non_null(it);
    sample early = {0}, late;
    for (int64_t k = 0; k < EPOCHS * BATCHES; k++) {
        sl_element *el;
        assert_int_equal(sl_next(it, &el), 0);
        check_batch(el, k % BATCHES);
        sl_element_release(el);
        if (k == WARM * BATCHES - 1)
            early = measure();
    }
    sl_element *el;
    assert_int_equal(sl_next(it, &el), SL_EOF);
    late = measure();
    sl_iterator_free(it);
    sl_options_free(o);
    sl_dataset_release(ds);
    report("repeat(20)", early, late);
}

static void test_successive_iterators(void **state)
{
    (void)state;
    sl_dataset *ds = epoch();
    sl_options *o = opts();
    sample early = {0}, late;
    for (int e = 0; e < EPOCHS; e++) {
        sl_iterator *it = sl_iterator_create(ds, o);
        assert_non_null(it);
        sl_element *el;
        for (int64_t b = 0; b < BATCHES; b++) {
            assert_int_equal(sl_next(it, &el), 0);
            check_batch(el, b);
            sl_element_release(el);
        }
        assert_int_equal(sl_next(it, &el), SL_EOF);
        sl_iterator_free(it);
        if (e == WARM - 1)
            early = measure();
    }
    late = measure();
    sl_options_free(o);
    sl_dataset_release(ds);
    report("20 iterators", early, late);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_one_iterator_over_repeat),
        cmocka_unit_test(test_successive_iterators),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
