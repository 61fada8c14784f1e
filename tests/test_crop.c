/* Crop planning: torchvision's RandomResizedCrop.get_params, Resize +
 * CenterCrop in source pixels, and the whole image for resize. */
#include <math.h>
#include <string.h>
#include "image/image.h"
#include "testutil.h"

static sl_image_spec spec_of(int crop, int size)
{
    sl_image_spec s;
    memset(&s, 0, sizeof s);
    s.struct_size = sizeof s;
    s.crop = crop;
    s.width = s.height = size;
    s.resize_shorter = size * 256 / 224;
    s.scale_min = 0.08f, s.scale_max = 1.0f;
    s.ratio_min = 3.0f / 4, s.ratio_max = 4.0f / 3;
    s.flip_prob = crop == SL_CROP_RANDOM_RESIZED ? 0.5f : 0;
    s.layout = SL_LAYOUT_HWC;
    s.dtype = SL_UINT8;
    return s;
}

static bool is_int(double v)
{
    return v == floor(v);
}

/* torchvision's fallback window for a W x H image. */
static void fallback(const sl_image_spec *s, int W, int H, sl__window *win)
{
    double in_ratio = (double)W / H;
    int w = W, h = H;
    if (in_ratio < s->ratio_min)
        h = (int)nearbyint(W / (double)s->ratio_min);
    else if (in_ratio > s->ratio_max)
        w = (int)nearbyint(H * (double)s->ratio_max);
    *win = (sl__window){(W - w) / 2, (H - h) / 2, w, h};
}

static void check_random(const sl_image_spec *s, int W, int H, int draws, int *fallbacks)
{
    for (int i = 0; i < draws; i++) {
        sl__rng rng = sl__rng_make(7, 3, 0, i);
        sl__window win;
        bool flip;
        sl__crop_plan(s, W, H, &rng, &win, &flip);
        assert_true(is_int(win.x) && is_int(win.y) && is_int(win.w) && is_int(win.h));
        assert_true(win.w >= 1 && win.h >= 1);
        assert_true(win.x >= 0 && win.y >= 0);
        assert_true(win.x + win.w <= W && win.y + win.h <= H);
        sl__window fb;
        fallback(s, W, H, &fb);
        if (memcmp(&win, &fb, sizeof win) == 0) {
            (*fallbacks)++;
            continue;
        }
        /* Not the fallback: area and aspect within range up to the
         * rounding of w and h to integers (half a pixel each). */
        double area = (double)W * H;
        double amax = (win.w + 0.5) * (win.h + 0.5) / area;
        double amin = (win.w - 0.5) * (win.h - 0.5) / area;
        assert_true(amax >= s->scale_min - 1e-9 && amin <= s->scale_max + 1e-9);
        double rmax = (win.w + 0.5) / (win.h - 0.5), rmin = (win.w - 0.5) / (win.h + 0.5);
        assert_true(rmax >= s->ratio_min - 1e-9 && rmin <= s->ratio_max + 1e-9);
    }
}

static void test_random_resized_rules(void **state)
{
    (void)state;
    sl_image_spec s = spec_of(SL_CROP_RANDOM_RESIZED, 224);
    static const int sizes[][2] = {{500, 375}, {375, 500}, {1000, 10}, {10, 1000}, {1, 1},
                                   {3, 2},     {2, 3},     {4000, 3000}, {64, 64}, {7, 300}};
    for (size_t k = 0; k < sizeof sizes / sizeof sizes[0]; k++) {
        int fb = 0;
        check_random(&s, sizes[k][0], sizes[k][1], 2000, &fb);
        if (sizes[k][0] == 500)
            assert_true(fb < 20); /* a normal image almost never falls back */
    }
}

static void test_fallback_extreme(void **state)
{
    (void)state;
    sl_image_spec s = spec_of(SL_CROP_RANDOM_RESIZED, 224);
    /* 1000x10: every aspect in [3/4, 4/3] with >= 8% of the area needs
     * h >= 24 > 10, so all attempts fail: h = 10, w = round(10 * 4/3) = 13,
     * centred. */
    for (int i = 0; i < 100; i++) {
        sl__rng rng = sl__rng_make(1, 2, 3, i);
        sl__window win;
        bool flip;
        sl__crop_plan(&s, 1000, 10, &rng, &win, &flip);
        assert_true(win.w == 13 && win.h == 10 && win.x == (1000 - 13) / 2 && win.y == 0);
        sl__crop_plan(&s, 10, 1000, &rng, &win, &flip);
        /* w = 10, h = round(10 / (3/4)) = 13 */
        assert_true(win.w == 10 && win.h == 13 && win.x == 0 && win.y == (1000 - 13) / 2);
    }
    /* In range: the whole image. A scale range above 1 always fails the
     * attempts. */
    s.scale_min = s.scale_max = 1.5f;
    sl__rng rng = sl__rng_make(1, 2, 3, 4);
    sl__window win;
    bool flip;
    sl__crop_plan(&s, 500, 400, &rng, &win, &flip);
    assert_true(win.x == 0 && win.y == 0 && win.w == 500 && win.h == 400);
    /* 1x1: only w = h = 1 fits, and a 100% area with ratio 1 may pass. */
    s = spec_of(SL_CROP_RANDOM_RESIZED, 224);
    sl__crop_plan(&s, 1, 1, &rng, &win, &flip);
    assert_true(win.x == 0 && win.y == 0 && win.w == 1 && win.h == 1);
}

static void test_deterministic(void **state)
{
    (void)state;
    sl_image_spec s = spec_of(SL_CROP_RANDOM_RESIZED, 224);
    int differ = 0;
    sl__window prev = {0};
    for (int i = 0; i < 100; i++) {
        sl__rng a = sl__rng_make(42, 9, 1, i), b = sl__rng_make(42, 9, 1, i);
        sl__window wa, wb;
        bool fa, fb;
        sl__crop_plan(&s, 640, 480, &a, &wa, &fa);
        sl__crop_plan(&s, 640, 480, &b, &wb, &fb);
        assert_memory_equal(&wa, &wb, sizeof wa);
        assert_int_equal(fa, fb);
        differ += memcmp(&wa, &prev, sizeof wa) != 0;
        prev = wa;
    }
    assert_true(differ > 95); /* and other keys give other windows */
}

static void test_flip_frequency(void **state)
{
    (void)state;
    sl_image_spec s = spec_of(SL_CROP_RANDOM_RESIZED, 224);
    const float probs[] = {0.5f, 0.1f, 0.9f, 1.0f};
    for (size_t p = 0; p < 4; p++) {
        s.flip_prob = probs[p];
        int flips = 0, n = 10000;
        for (int i = 0; i < n; i++) {
            sl__rng rng = sl__rng_make(5, 1, 0, i);
            sl__window win;
            bool flip;
            sl__crop_plan(&s, 300, 200, &rng, &win, &flip);
            flips += flip;
        }
        double f = (double)flips / n;
        print_message("flip_prob %.2f: %.4f\n", probs[p], f);
        assert_true(fabs(f - probs[p]) < 0.03);
    }
    s.flip_prob = 0; /* never, and then no draw at all */
    sl__rng a = sl__rng_make(5, 1, 0, 0), b = a;
    sl__window win;
    bool flip = true;
    sl_image_spec c = spec_of(SL_CROP_CENTER, 224);
    sl__crop_plan(&c, 300, 200, &a, &win, &flip);
    assert_false(flip);
    assert_int_equal(a.ctr, b.ctr);
}

static void test_center(void **state)
{
    (void)state;
    sl_image_spec s = spec_of(SL_CROP_CENTER, 224);
    assert_int_equal(s.resize_shorter, 256);
    sl__rng rng = sl__rng_make(0, 0, 0, 0);
    sl__window win;
    bool flip;
    /* 500x375 -> Resize(256) = 341x256 (int(256 * 500 / 375) = 341);
     * CenterCrop(224): left = round((341 - 224) / 2) = round(58.5) = 58
     * (half to even), top = round(16.0) = 16. In source pixels:
     * x = 58 * 500/341, w = 224 * 500/341, y = 16 * 375/256,
     * h = 224 * 375/256. */
    sl__crop_plan(&s, 500, 375, &rng, &win, &flip);
    assert_true(fabs(win.x - 85.043988269794724) < 1e-9);
    assert_true(fabs(win.w - 328.44574780058650) < 1e-9);
    assert_true(fabs(win.y - 23.4375) < 1e-12);
    assert_true(fabs(win.h - 328.125) < 1e-12);
    assert_false(flip);
    /* Portrait: the same numbers transposed. */
    sl__crop_plan(&s, 375, 500, &rng, &win, &flip);
    assert_true(fabs(win.y - 85.043988269794724) < 1e-9);
    assert_true(fabs(win.h - 328.44574780058650) < 1e-9);
    assert_true(fabs(win.x - 23.4375) < 1e-12 && fabs(win.w - 328.125) < 1e-12);
    /* Square 256x256 at S = 256: crop 16..240 exactly. */
    sl__crop_plan(&s, 256, 256, &rng, &win, &flip);
    assert_true(win.x == 16 && win.y == 16 && win.w == 224 && win.h == 224);
    /* 1024x768 -> 341x256 as well (int(256 * 4/3) = 341): scale 3. */
    sl__crop_plan(&s, 1024, 768, &rng, &win, &flip);
    assert_true(fabs(win.x - 58 * 1024 / 341.0) < 1e-9 && fabs(win.y - 48) < 1e-9);
    assert_true(fabs(win.w - 224 * 1024 / 341.0) < 1e-9 && fabs(win.h - 672) < 1e-9);
    /* Output larger than the resized image: clamped to the whole axis.
     * 1000x10 -> Resize(256) = 25600x256: width fits, height 224 < 256. */
    s.width = 300;
    s.height = 300;
    sl__crop_plan(&s, 1000, 10, &rng, &win, &flip);
    assert_true(win.y == 0 && win.h == 10);
    assert_true(win.w > 0 && win.x + win.w <= 1000 + 1e-9);
    /* 100x100 -> 256x256 (upscale): the crop is inside it. */
    s.width = s.height = 224;
    sl__crop_plan(&s, 100, 100, &rng, &win, &flip);
    assert_true(fabs(win.x - 16 * 100 / 256.0) < 1e-12 && fabs(win.w - 87.5) < 1e-12);
}

static void test_resize_whole(void **state)
{
    (void)state;
    sl_image_spec s = spec_of(SL_CROP_RESIZE, 224);
    sl__rng rng = sl__rng_make(0, 0, 0, 0), before = rng;
    sl__window win;
    bool flip;
    sl__crop_plan(&s, 640, 427, &rng, &win, &flip);
    assert_true(win.x == 0 && win.y == 0 && win.w == 640 && win.h == 427);
    assert_false(flip);
    assert_int_equal(rng.ctr, before.ctr); /* no draws */
    s.flip_prob = 1;
    sl__crop_plan(&s, 640, 427, &rng, &win, &flip);
    assert_true(flip);
    assert_int_equal(rng.ctr, before.ctr + 1); /* only the flip */
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_random_resized_rules),
        cmocka_unit_test(test_fallback_extreme),
        cmocka_unit_test(test_deterministic),
        cmocka_unit_test(test_flip_frequency),
        cmocka_unit_test(test_center),
        cmocka_unit_test(test_resize_whole),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
