/* Pins what must change only on purpose (src/core/salts.h): fingerprints,
 * which cache files on disk carry in their header, and the random streams
 * a seed gives. A failure here after a change means every cache file will
 * be rebuilt, or every seeded run will give other orders and crops than
 * before: if that is intended, update the figures and say so in the
 * commit. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "testutil.h"

static sl_dataset *chain(void)
{
    sl_dataset *ds = sl_shuffle(sl_range(0, 100, 1), 16, 7, 0);
    ds = sl_map(ds, "id", tu_identity, NULL, 2, 0);
    return sl_batch(ds, 8, SL_DROP_REMAINDER);
}

static sl_dataset *images(void)
{
    const char *paths[2] = {"a/1.jpg", "b/2.jpg"};
    const int64_t labels[2] = {0, 1};
    sl_image_spec spec;
    assert_int_equal(SL_IMAGE_SPEC_INIT(&spec, SL_CROP_RANDOM_RESIZED, 224), 0);
    sl_dataset *ds = sl_read_files(sl_from_files(paths, labels, 2), 0);
    return sl_batch(sl_map_image(ds, &spec, SL_AUTOTUNE), 2, 0);
}

static void check(const char *what, uint64_t got, uint64_t want)
{
    if (got != want)
        print_error("%s: fingerprint %#018llx, pinned %#018llx\n", what,
                    (unsigned long long)got, (unsigned long long)want);
    assert_true(got == want);
}

static void test_fingerprints(void **state)
{
    (void)state;
    sl_dataset *r = sl_range(0, 10, 1), *c = chain(), *i = images();
    sl_dataset *m = sl_cache(sl_range(0, 10, 1), NULL);
    check("range", sl_dataset_fingerprint(r), 0x4248c3d629c1f22eull);
    check("shuffle-map-batch", sl_dataset_fingerprint(c), 0x9a2598cc3444dbb0ull);
    check("images", sl_dataset_fingerprint(i), 0xddccb72c01f0cb7eull);
    /* exact_pixels decodes what the default did before YCbCr planes: a
     * cache of those pixels still matches it, and only it */
    {
        const char *paths[2] = {"a/1.jpg", "b/2.jpg"};
        const int64_t labels[2] = {0, 1};
        sl_image_spec spec;
        assert_int_equal(SL_IMAGE_SPEC_INIT(&spec, SL_CROP_RANDOM_RESIZED, 224), 0);
        spec.exact_pixels = 1;
        sl_dataset *e = sl_batch(
            sl_map_image(sl_read_files(sl_from_files(paths, labels, 2), 0), &spec, SL_AUTOTUNE),
            2, 0);
        check("images, exact_pixels", sl_dataset_fingerprint(e), 0x380223df6b0e27d4ull);
        sl_dataset_release(e);
    }
    check("cache", sl_dataset_fingerprint(m), 0x9556cc8ccf98bdf6ull);
    sl_dataset_release(r);
    sl_dataset_release(c);
    sl_dataset_release(i);
    sl_dataset_release(m);
}

static int draw(sl_map_ctx *ctx, const sl_element *in, sl_element **out, void *user)
{
    (void)in, (void)user;
    sl_element *el = sl_element_create(1);
    assert_int_equal(sl_element_add_int64(el, (int64_t)(sl_map_ctx_random(ctx) >> 1)), 0);
    *out = el;
    return 0;
}

static void test_streams(void **state)
{
    (void)state;
    /* the order a whole-dataset shuffle gives for seed 3 in epoch 0, and
     * in epoch 1 (order version 1: a drawn table up to 1,024 elements) */
    static const int64_t order0[10] = {8, 3, 0, 9, 2, 5, 1, 7, 4, 6};
    static const int64_t order1[10] = {4, 7, 1, 8, 6, 0, 3, 5, 2, 9};
    sl_dataset *ds = sl_shuffle(sl_range(0, 10, 1), SL_SHUFFLE_ALL, 3, 0);
    int64_t *v;
    size_t n;
    for (int e = 0; e < 2; e++) {
        sl_options *o = tu_opts(1, 0);
        assert_int_equal(sl_options_set(o, SL_OPT_EPOCH, e), 0);
        assert_int_equal(tu_collect(ds, o, &v, &n, NULL), SL_EOF);
        assert_int_equal(n, 10);
        assert_memory_equal(v, e ? order1 : order0, sizeof order0);
        free(v);
        sl_options_free(o);
    }
    sl_dataset_release(ds);
    /* and the first of 5,000 (the Feistel network, core/perm.c) */
    static const int64_t big0[10] = {3067, 3963, 3091, 1496, 2049, 3147, 1045, 2884, 542, 3558};
    ds = sl_shuffle(sl_range(0, 5000, 1), SL_SHUFFLE_ALL, 3, 0);
    sl_options *ob = tu_opts(1, 0);
    assert_int_equal(tu_collect(ds, ob, &v, &n, NULL), SL_EOF);
    assert_int_equal(n, 5000);
    assert_memory_equal(v, big0, sizeof big0);
    free(v);
    sl_options_free(ob);
    sl_dataset_release(ds);
    /* a map's per-element stream for global seed 5 */
    static const int64_t first[3] = {0x145b9cb1f6cd24ca, 0x57062cdb69753313,
                                     0x3279372447d9c2d3};
    ds = sl_map(sl_range(0, 3, 1), "draw", draw, NULL, 1, 0);
    sl_options *o = tu_opts(1, 5);
    assert_int_equal(tu_collect(ds, o, &v, &n, NULL), SL_EOF);
    assert_memory_equal(v, first, sizeof first);
    free(v);
    sl_options_free(o);
    sl_dataset_release(ds);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fingerprints),
        cmocka_unit_test(test_streams),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
