/* A service worker's part of an epoch (src/service/split.c): batches
 * [first, first + count) of an epoch, computed alone, equal byte for byte
 * to the same batches of the whole pass, for every way of cutting the
 * epoch, through random maps, distribute and the fused image batch; and
 * pipelines that a worker cannot split refused, naming the op. */
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include "jpegutil.h"
#include "service/split.h"
#include "testutil.h"

#define SEED 1234

/* A random draw per element, from its map's stream (position-keyed). */
static int draw(sl_map_ctx *ctx, const sl_element *in, sl_element **out, void *user)
{
    (void)user;
    sl_element *el = sl_element_create(2);
    if (!el)
        return SL_ENOMEM;
    sl_element_add_int64(el, sl_tensor_int64(sl_element_tensor(in, 0)));
    sl_element_add_int64(el, (int64_t)(sl_map_ctx_random(ctx) & 0xffffff));
    *out = el;
    return 0;
}

static int odd(sl_map_ctx *ctx, const sl_element *el, void *user)
{
    (void)ctx, (void)user;
    return sl_tensor_int64(sl_element_tensor(el, 0)) % 2;
}

/* Every batch of epoch `epoch`'s whole pass. */
static uint64_t *whole(sl_dataset *ds, int64_t epoch, int64_t *n)
{
    sl_options *o = tu_opts(2, SEED);
    sl_options_set(o, SL_OPT_EPOCH, epoch);
    sl_iterator *it = sl_iterator_create(ds, o);
    sl_options_free(o);
    assert_non_null(it);
    uint64_t *d = NULL;
    int64_t k = 0;
    sl_element *el;
    int rc;
    while ((rc = sl_next(it, &el)) == 0) {
        d = realloc(d, (size_t)(k + 1) * sizeof *d);
        d[k++] = tu_digest(el);
        sl_element_release(el);
    }
    assert_int_equal(rc, SL_EOF);
    sl_iterator_free(it);
    *n = k;
    return d;
}

/* Cuts the epoch into parts of `per` batches, computes each alone (last
 * first, to show no part depends on another) and compares. */
static void check_parts(sl_dataset *ds, int64_t epoch, int64_t per)
{
    sl__split_plan plan;
    if (sl__split_plan_make(ds, &plan))
        fail_msg("plan: %s", sl_last_error());
    int64_t n;
    uint64_t *want = whole(ds, epoch, &n);
    assert_int_equal(n, plan.batches);
    int64_t parts = (n + per - 1) / per;
    for (int64_t p = parts - 1; p >= 0; p--) {
        int64_t first = p * per, count = first + per <= n ? per : n - first;
        sl_iterator *it = sl__split_iterator(ds, &plan, SEED, epoch, first, count, 2);
        if (!it)
            fail_msg("split iterator: %s", sl_last_error());
        sl_element *el;
        int64_t k = first;
        int rc;
        while ((rc = sl_next(it, &el)) == 0) {
            assert_true(k < first + count);
            if (tu_digest(el) != want[k])
                fail_msg("epoch %lld, parts of %lld: batch %lld differs", (long long)epoch,
                         (long long)per, (long long)k);
            sl_element_release(el);
            k++;
        }
        assert_int_equal(rc, SL_EOF);
        assert_int_equal(k, first + count);
        sl_iterator_free(it);
    }
    free(want);
}

static sl_dataset *numbers(int64_t n, const sl_dist_context *ctx, unsigned batch_flags)
{
    sl_dataset *ds = sl_range(0, n, 1);
    ds = sl_shuffle(ds, SL_SHUFFLE_ALL, -1, 0);
    if (ctx)
        ds = sl_distribute(ds, ctx, 0);
    ds = sl_map(ds, "draw", draw, NULL, 3, 0);
    ds = sl_batch(ds, 8, batch_flags);
    return sl_prefetch(ds, 2);
}

static void test_numbers(void **state)
{
    (void)state;
    sl_dataset *ds = numbers(203, NULL, 0); /* a short last batch */
    for (int64_t per = 1; per <= 9; per += 4)
        for (int64_t epoch = 0; epoch < 2; epoch++)
            check_parts(ds, epoch, per);
    sl_dataset_release(ds);
    ds = numbers(203, NULL, SL_DROP_REMAINDER);
    check_parts(ds, 1, 3);
    sl_dataset_release(ds);
}

static void test_distributed(void **state)
{
    (void)state;
    for (int rank = 0; rank < 3; rank++) {
        sl_dist_context ctx = {.rank = rank, .world_size = 3, .local_world_size = 1};
        sl_dataset *ds = numbers(500, &ctx, 0);
        check_parts(ds, 2, 5);
        sl_dataset_release(ds);
    }
}

static void test_images(void **state)
{
    (void)state;
    if (strstr(sl_build_options(), "jpeg=off"))
        skip(); /* a build without the JPEG decoder */
    char dir[256];
    tu_tmpdir(dir);
    assert_int_equal(ju_write_folder(dir, 3, 11), 0);
    sl_image_spec spec;
    SL_IMAGE_SPEC_INIT(&spec, SL_CROP_RANDOM_RESIZED, 32);
    sl_dataset *ds = sl_image_folder(dir, NULL, 0);
    ds = sl_shuffle(ds, SL_SHUFFLE_ALL, -1, 0);
    ds = sl_map_image(ds, &spec, 2);
    ds = sl_batch(ds, 4, 0); /* fused with map_image */
    check_parts(ds, 0, 2);
    check_parts(ds, 3, 3);
    sl_dataset_release(ds);
    tu_rmdir(dir);
}

static void refused(sl_dataset *ds, const char *op)
{
    sl__split_plan plan;
    assert_int_equal(sl__split_plan_make(ds, &plan), SL_EUNSUPPORTED);
    if (!strstr(sl_last_error(), op))
        fail_msg("expected the message to name %s: %s", op, sl_last_error());
    sl_dataset_release(ds);
}

static void test_refused(void **state)
{
    (void)state;
    refused(sl_shuffle(sl_range(0, 10, 1), SL_SHUFFLE_ALL, -1, 0), "batch");
    refused(sl_batch(sl_filter(sl_range(0, 10, 1), "odd", odd, NULL), 2, 0), "filter");
    refused(sl_batch(sl_shuffle(sl_range(0, 10, 1), 4, -1, 0), 2, 0), "shuffle");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_numbers), cmocka_unit_test(test_distributed),
        cmocka_unit_test(test_images), cmocka_unit_test(test_refused),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
