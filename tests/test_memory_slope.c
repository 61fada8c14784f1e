/* What the library holds stays flat over hundreds of epochs, one iterator
 * per epoch on a runtime that outlives them (as the default runtime does
 * in a training loop): the slope over the second half of what sluice
 * holds (sl_memory_in_use, its own accounting) and of the heap's in-use
 * bytes (mallinfo2; not under the sanitizers, whose allocator it does not
 * see) is held under SLOPE_MAX bytes an epoch.
 *
 * It crept before: a pool worker frees the reader's file buffers, which a
 * new producer thread allocates each epoch, and kept them in its
 * per-thread cache, so each epoch allocated afresh the sizes no cache had
 * handed back yet. File sizes are spread so that most pool size classes
 * hold one or two files: a class that creeps fills slowest then. Eight
 * workers make it the same on any machine. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "jpegutil.h"
#include "testutil.h"

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__) || !defined(__GLIBC__) ||   \
    __GLIBC__ < 2 || (__GLIBC__ == 2 && __GLIBC_MINOR__ < 33)
#define HEAP_SEEN 0 /* mallinfo2 is glibc's, from 2.33 */
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define HEAP_SEEN 0
#endif
#endif
#ifndef HEAP_SEEN
#define HEAP_SEEN 1
#endif

#define EPOCHS 400
#define FILES 96
#define WORKERS 8
/* bytes an epoch over the second half: well under the creep it had, well
 * over the pools still reaching their high-water mark (their figures are
 * in the commit that added this test) */
#define SLOPE_MAX 1536.0

static char dir[256];

static int setup(void **state)
{
    (void)state;
    tu_tmpdir(dir);
    char sub[300];
    snprintf(sub, sizeof sub, "%s/c0", dir);
    assert_int_equal(mkdir(sub, 0755), 0);
    for (int i = 0; i < FILES; i++) {
        int w = 16 + (i * 37) % 112, h = 16 + (i * 53) % 112;
        ju_opts o = {.quality = 40 + (i * 29) % 56};
        size_t n;
        uint8_t *jpg = ju_make(w, h, (unsigned)i, &o, &n);
        char path[320];
        snprintf(path, sizeof path, "%s/%03d.jpg", sub, i);
        tu_write_file(path, jpg, n);
        free(jpg);
    }
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    tu_rmdir(dir);
    return 0;
}

/* Least-squares slope of y[from..to) against the epoch. */
static double slope(const int64_t *y, int from, int to)
{
    double n = to - from, sx = 0, sy = 0, sxx = 0, sxy = 0;
    for (int e = from; e < to; e++) {
        sx += e;
        sy += (double)y[e];
        sxx += (double)e * e;
        sxy += (double)e * (double)y[e];
    }
    return (n * sxy - sx * sy) / (n * sxx - sx * sx);
}

static void test_iterator_per_epoch(void **state)
{
    (void)state;
    sl_runtime *rt = sl_runtime_create(WORKERS);
    assert_non_null(rt);
    sl_options *opts = sl_options_create();
    assert_int_equal(sl_options_set_runtime(opts, rt), 0);
    sl_image_spec spec;
    assert_int_equal(SL_IMAGE_SPEC_INIT(&spec, SL_CROP_RANDOM_RESIZED, 32), 0);
    sl_dataset *ds = sl_image_folder(dir, NULL, 0);
    ds = sl_shuffle(ds, SL_SHUFFLE_ALL, 1, 0);
    ds = sl_map_image(ds, &spec, SL_AUTOTUNE);
    ds = sl_batch(ds, 16, 0);
    ds = sl_prefetch(ds, SL_AUTOTUNE);
    if (!ds)
        fail_msg("%s", sl_last_error());
    static int64_t held[EPOCHS], heap[EPOCHS];
    int64_t t0 = tu_now_ns();
    for (int e = 0; e < EPOCHS; e++) {
        sl_iterator *it = sl_iterator_create(ds, opts);
        if (!it)
            fail_msg("%s", sl_last_error());
        sl_element *el;
        int rc;
        while ((rc = sl_next(it, &el)) == 0)
            sl_element_release(el);
        if (rc != SL_EOF)
            fail_msg("epoch %d: %s", e, sl_iterator_errmsg(it));
        sl_iterator_free(it);
        held[e] = sl_memory_in_use();
#if HEAP_SEEN
        heap[e] = (int64_t)mallinfo2().uordblks;
#else
        heap[e] = 0;
#endif
    }
    double s_held = slope(held, EPOCHS / 2, EPOCHS), s_heap = slope(heap, EPOCHS / 2, EPOCHS);
    print_message("%d epochs in %.1f s; over the second half: sl_memory_in_use %lld -> %lld "
                  "(%.0f B/epoch), heap in use %lld -> %lld (%.0f B/epoch%s)\n",
                  EPOCHS, (double)(tu_now_ns() - t0) / 1e9, (long long)held[EPOCHS / 2],
                  (long long)held[EPOCHS - 1], s_held, (long long)heap[EPOCHS / 2],
                  (long long)heap[EPOCHS - 1], s_heap, HEAP_SEEN ? "" : ", not checked here");
    sl_dataset_release(ds);
    sl_options_free(opts);
    sl_runtime_free(rt);
    assert_true(s_held <= SLOPE_MAX);
    if (HEAP_SEEN)
        assert_true(s_heap <= SLOPE_MAX);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_iterator_per_epoch),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
