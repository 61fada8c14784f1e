/* The augmentations give the same bytes at every instruction-set tier
 * (image/cpu.h): each op alone and plans of several, on sizes that leave
 * the vector loops tails, with the tier of the whole image layer forced
 * (sl__image_tier_force). Tiers this build or this CPU lacks are
 * skipped; a build with the portable tier alone skips the comparisons. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "image/augment.h"
#include "image/testing.h"
#include "testutil.h"

/* Smooth gradients under hashed noise, every byte value likely. */
static uint8_t *synth(int w, int h, unsigned seed)
{
    uint8_t *p = malloc(3 * (size_t)w * h);
    assert_non_null(p);
    for (int y = 0; y < h; y++)
        for (int x = 0; x < w; x++)
            for (int c = 0; c < 3; c++) {
                uint32_t n = (uint32_t)(((y * w + x) * 3 + c) ^ seed) * 2654435761u;
                int v = (int)(255.0 * (x + (c + 1) * y) / (w + 3 * h)) + (int)(n >> 28) - 8;
                p[3 * ((size_t)y * w + x) + c] = (uint8_t)(v < 0 ? 0 : v > 255 ? 255 : v);
            }
    return p;
}

/* The tiers to compare, the portable one first; how many. */
static int tiers(int level[SL__IMAGE_TIERS])
{
    int n = 0;
    for (int l = 0; l < SL__IMAGE_TIERS; l++)
        if (sl__image_tier_usable(l))
            level[n++] = l;
    assert_true(n >= 1 && level[0] == SL__IMAGE_C);
    return n;
}

static void test_force(void **state)
{
    (void)state;
    int before = sl__image_tier();
    assert_true(sl__image_tier_usable(before));
    assert_false(sl__image_tier_force(SL__IMAGE_TIERS));
    assert_int_equal(sl__image_tier(), before);
    assert_true(sl__image_tier_force(SL__IMAGE_C));
    assert_int_equal(sl__image_tier(), SL__IMAGE_C);
    assert_true(sl__image_tier_force(-1));
    assert_int_equal(sl__image_tier(), before);
}

static sl__aug plan_op(int kind, float magnitude)
{
    sl__aug p;
    memset(&p, 0, sizeof p);
    p.nops = 1;
    p.op[0] = (sl__aug_op){kind, magnitude};
    return p;
}

/* Rotation by deg with a shear and a fractional shift, about the centre. */
static sl__aug plan_affine(double deg)
{
    sl__aug p;
    memset(&p, 0, sizeof p);
    double r = deg * M_PI / 180;
    float m[6] = {(float)cos(r), (float)(sin(r) + 0.1), 2.5f, (float)-sin(r), (float)cos(r),
                  -1.25f};
    p.affine = true;
    memcpy(p.m, m, sizeof m);
    return p;
}

static sl__aug plan_colour(bool gray, bool gray_source, float gain)
{
    sl__aug p;
    memset(&p, 0, sizeof p);
    p.colour = (sl__colour){true, true, gray, {2, 0, 3, 1}, {gain, 0.7f, 1.4f, 0.08f}};
    p.gray_source = gray_source;
    return p;
}

/* The plans: every op kind of auto_augment, the affine warp, colour
 * (the matrix, the gain on a gray image, a gain past the 16-bit lanes),
 * blur, solarize, and a plan of several. */
static int plans(sl__aug *p)
{
    static const struct {
        int kind;
        float mag;
    } ops[] = {{SL__OP_SHEAR_X, 0.3f},     {SL__OP_SHEAR_Y, -0.2f},   {SL__OP_TRANSLATE_X, 13},
               {SL__OP_TRANSLATE_Y, -7},   {SL__OP_ROTATE, 25},       {SL__OP_BRIGHTNESS, 0.4f},
               {SL__OP_COLOR, -0.5f},      {SL__OP_CONTRAST, 0.3f},   {SL__OP_SHARPNESS, 0.6f},
               {SL__OP_POSTERIZE, 4},      {SL__OP_SOLARIZE, 128},    {SL__OP_AUTOCONTRAST, 0},
               {SL__OP_EQUALIZE, 0},       {SL__OP_INVERT, 0}};
    int n = 0;
    for (size_t i = 0; i < sizeof ops / sizeof *ops; i++)
        p[n++] = plan_op(ops[i].kind, ops[i].mag);
    p[n++] = plan_affine(17);
    p[n++] = plan_affine(-140);
    p[n++] = plan_colour(false, false, 1.3f);
    p[n++] = plan_colour(true, false, 0.6f);
    p[n++] = plan_colour(false, true, 1.3f);
    p[n++] = plan_colour(false, true, 30);
    sl__aug b;
    memset(&b, 0, sizeof b);
    b.blur = true, b.sigma = 1.7f;
    p[n++] = b;
    sl__aug all = plan_affine(33);
    all.nops = 3;
    all.op[0] = (sl__aug_op){SL__OP_EQUALIZE, 0};
    all.op[1] = (sl__aug_op){SL__OP_SHARPNESS, -0.4f};
    all.op[2] = (sl__aug_op){SL__OP_ROTATE, -12};
    all.colour = plan_colour(false, false, 0.8f).colour;
    all.blur = true, all.sigma = 0.6f;
    all.solarize = true;
    p[n++] = all;
    return n;
}

static void test_ops_agree(void **state)
{
    (void)state;
    int level[SL__IMAGE_TIERS], nt = tiers(level);
    if (nt == 1)
        skip();
    static const int sizes[][2] = {{224, 224}, {131, 97}, {17, 5}};
    sl__aug p[32];
    int np = plans(p);
    sl__augmenter *a = sl__augmenter_new();
    assert_non_null(a);
    for (size_t z = 0; z < sizeof sizes / sizeof *sizes; z++) {
        int w = sizes[z][0], h = sizes[z][1];
        size_t bytes = 3 * (size_t)w * h;
        uint8_t *src = synth(w, h, (unsigned)z), *ref = malloc(bytes), *got = malloc(bytes);
        for (int i = 0; i < np; i++)
            for (int interp = 0; interp < 2; interp++) {
                sl_image_spec s;
                memset(&s, 0, sizeof s);
                s.width = w, s.height = h;
                s.interpolation = interp ? SL_INTERP_BILINEAR : SL_INTERP_NEAREST;
                s.blur_kernel = i % 2 ? 9 : 23;
                s.solarize_threshold = 100;
                for (int t = 0; t < nt; t++) {
                    uint8_t *out = t ? got : ref;
                    memcpy(out, src, bytes);
                    assert_true(sl__image_tier_force(level[t]));
                    assert_int_equal(sl__aug_apply(a, &s, &p[i], false, out, w, h), 0);
                    if (t && memcmp(ref, got, bytes))
                        fail_msg("plan %d (%dx%d, interpolation %d): %s differs from c", i, w,
                                 h, interp, sl__image_tier_name(level[t]));
                }
            }
        free(src);
        free(ref);
        free(got);
    }
    assert_true(sl__image_tier_force(-1));
    sl__augmenter_free(a);
}

/* The colour stage the resampler falls back to, on rows of every length
 * up to a few vectors: the planes in 16-bit lanes, and the gain. */
static void test_colour_rows_agree(void **state)
{
    (void)state;
    int level[SL__IMAGE_TIERS], nt = tiers(level);
    if (nt == 1)
        skip();
    enum { N = 300 };
    uint8_t *src = synth(N, 1, 9), ref[3 * N], got[3 * N];
    sl__colour c = {true, true, false, {3, 1, 0, 2}, {1.3f, 0.6f, 1.7f, -0.2f}};
    sl__colour_map m;
    sl__colour_fold(&c, 117, &m);
    for (int n = 0; n <= N; n += n < 80 ? 1 : 37)
        for (int t = 0; t < nt; t++) {
            uint8_t *out = t ? got : ref;
            memcpy(out, src, sizeof ref);
            assert_true(sl__image_tier_force(level[t]));
            sl__colour_planes(&m, out, out + N, out + 2 * N, n);
            sl__colour_gain(out + n, (size_t)(2 * N), 1.4f, -20.5f);
            if (t && memcmp(ref, got, sizeof ref))
                fail_msg("colour rows of %d: %s differs from c", n,
                         sl__image_tier_name(level[t]));
        }
    assert_true(sl__image_tier_force(-1));
    free(src);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_force),
        cmocka_unit_test(test_ops_agree),
        cmocka_unit_test(test_colour_rows_agree),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
