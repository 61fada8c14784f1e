/* The pipeline of tests/test_service.c, built the same way by the trainer
 * (compiled into the test) and by sluice-worker (this file as a shared
 * library): numbers in a whole-epoch order, split between the trainer
 * ranks, a random draw and some work per element, batches of 8.
 * build("other") names its map differently: another pipeline. */
#include <string.h>
#include <time.h>
#ifndef SLUICE_EXPERIMENTAL
#define SLUICE_EXPERIMENTAL
#endif
#include "sluice.h"

#define ELEMENTS 960
#define BATCH 8

static int draw(sl_map_ctx *ctx, const sl_element *in, sl_element **out, void *user)
{
    (void)user;
    /* about 0.3 ms of work, so that a pass takes long enough to kill a
     * worker in the middle of it */
    struct timespec t0, t;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    volatile uint64_t x = 1;
    do {
        for (int i = 0; i < 1000; i++)
            x = x * 6364136223846793005ull + 1;
        clock_gettime(CLOCK_MONOTONIC, &t);
    } while ((t.tv_sec - t0.tv_sec) * 1000000000L + (t.tv_nsec - t0.tv_nsec) < 300000);
    sl_element *el = sl_element_create(2);
    if (!el)
        return SL_ENOMEM;
    sl_element_add_int64(el, sl_tensor_int64(sl_element_tensor(in, 0)));
    sl_element_add_int64(el, (int64_t)(sl_map_ctx_random(ctx) & 0xffffff));
    *out = el;
    return 0;
}

sl_dataset *service_pipeline_build(void *arg);

sl_dataset *service_pipeline_build(void *arg)
{
    const char *a = arg ? arg : "";
    sl_dataset *ds = sl_range(0, ELEMENTS, 1);
    ds = sl_shuffle(ds, SL_SHUFFLE_ALL, -1, 0);
    ds = sl_distribute(ds, NULL, 0);
    ds = sl_map(ds, strcmp(a, "other") ? "draw" : "draw2", draw, NULL, SL_AUTOTUNE, 0);
    ds = sl_batch(ds, BATCH, 0);
    return sl_prefetch(ds, 2);
}
