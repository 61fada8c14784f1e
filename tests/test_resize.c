/* The resampler against a plain double-precision reference, and the fast
 * path (ROI decode with DCT scaling + resize) against the slow one (full
 * decode + reference resize) on the centre preset: within 2 levels. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "image/image.h"
#include "image/testing.h"
#include "jpegutil.h"
#include "testutil.h"

#define MAXPX 100000000

/* ---- the reference: the same filter, written plainly in double ---- */

/* Taps of one axis for output i: triangle of half-width max(1, scale)
 * around the sample's centre, over the pixels the window touches,
 * normalised. Returns the tap count; idx/wt hold them. */
static int ref_taps(double pos, double len, int size, int out, int i, int *idx, double *wt)
{
    int lo = (int)floor(pos + 1e-6), hi = (int)ceil(pos + len - 1e-6);
    if (lo < 0)
        lo = 0;
    if (lo > size - 1)
        lo = size - 1;
    if (hi > size)
        hi = size;
    if (hi < lo + 1)
        hi = lo + 1;
    double scale = len / out, fs = scale > 1 ? scale : 1;
    double c = pos + (i + 0.5) * scale - 0.5, sum = 0;
    int n = 0;
    for (int j = lo; j < hi; j++) {
        double v = 1 - fabs(j - c) / fs;
        if (v > 0) {
            idx[n] = j;
            wt[n++] = v;
            sum += v;
        }
    }
    if (n == 0) { /* the nearest pixel */
        int j = (int)lrint(c);
        idx[0] = j < lo ? lo : j > hi - 1 ? hi - 1 : j;
        wt[0] = 1;
        return 1;
    }
    for (int k = 0; k < n; k++)
        wt[k] /= sum;
    return n;
}

/* out: oh x ow x 3 doubles. */
static void ref_resize(const uint8_t *img, int W, int H, size_t stride, sl__window win, int ow,
                       int oh, double *out)
{
    int *ix = malloc((size_t)(W + 2) * sizeof *ix), *iy = malloc((size_t)(H + 2) * sizeof *iy);
    double *wx = malloc((size_t)(W + 2) * sizeof *wx), *wy = malloc((size_t)(H + 2) * sizeof *wy);
    for (int y = 0; y < oh; y++) {
        int ny = ref_taps(win.y, win.h, H, oh, y, iy, wy);
        for (int x = 0; x < ow; x++) {
            int nx = ref_taps(win.x, win.w, W, ow, x, ix, wx);
            for (int c = 0; c < 3; c++) {
                double s = 0;
                for (int a = 0; a < ny; a++)
                    for (int b = 0; b < nx; b++)
                        s += wy[a] * wx[b] * img[(size_t)iy[a] * stride + 3 * ix[b] + c];
                out[((size_t)y * ow + x) * 3 + c] = s;
            }
        }
    }
    free(ix), free(iy), free(wx), free(wy);
}

static sl__resize_out out_u8(uint8_t *data, int w, int h)
{
    sl__resize_out o;
    memset(&o, 0, sizeof o);
    o.data = data;
    o.width = w;
    o.height = h;
    o.layout = SL_LAYOUT_HWC;
    o.dtype = SL_UINT8;
    return o;
}

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
    s.flip_prob = 0;
    return s;
}

/* ---- fast path vs reference ---- */

/* Mean (and *maxerr the largest) absolute error of the ow x oh RGB image
 * fast against the reference resize of window win of full (W x H RGB). */
static double mae_vs_ref(const uint8_t *fast, const uint8_t *full, int W, int H, sl__window win,
                         int ow, int oh, double *maxerr)
{
    double *ref = malloc((size_t)ow * oh * 3 * sizeof *ref);
    ref_resize(full, W, H, (size_t)W * 3, win, ow, oh, ref);
    double s = 0, mx = 0;
    for (size_t i = 0; i < (size_t)ow * oh * 3; i++) {
        double e = fabs(fast[i] - ref[i]);
        s += e;
        mx = e > mx ? e : mx;
    }
    *maxerr = mx;
    free(ref);
    return s / ((double)ow * oh * 3);
}

/* Mean abs error of fast (ROI + DCT scale + sl__resize) vs slow (full
 * decode + reference) for one window; *d gets the DCT scale used. */
static double fast_vs_ref(sl__jpeg *dec, sl__resizer *rz, const uint8_t *jpg, size_t n,
                          const uint8_t *full, int W, int H, sl__window win, int ow, int oh,
                          int *d, double *maxerr)
{
    sl__jpeg_info info;
    sl__decoded dd;
    assert_int_equal(sl__jpeg_header(dec, jpg, n, MAXPX, &info), 0);
    assert_int_equal(sl__jpeg_decode(dec, jpg, n, &win, ow, oh, 0, &dd), 0);
    uint8_t *fast = malloc((size_t)ow * oh * 3);
    sl__resize_out o = out_u8(fast, ow, oh);
    assert_int_equal(sl__resize(rz, dd.rgb, dd.width, dd.height, dd.stride, &dd.win, &o), 0);
    *d = dd.scale_denom;
    double e = mae_vs_ref(fast, full, W, H, win, ow, oh, maxerr);
    free(fast);
    return e;
}

static void test_center_preset_matches_reference(void **state)
{
    (void)state;
    static const int sizes[][2] = {{500, 375}, {375, 500}, {1024, 768}, {3000, 2000}, {200, 150}};
    sl_image_spec spec = spec_of(SL_CROP_CENTER, 224);
    sl__jpeg *dec = sl__jpeg_new();
    sl__resizer *rz = sl__resizer_new();
    for (size_t k = 0; k < sizeof sizes / sizeof sizes[0]; k++) {
        int W = sizes[k][0], H = sizes[k][1];
        ju_opts o = {90, 0, 0, 0};
        size_t n;
        uint8_t *jpg = ju_make(W, H, (unsigned)k + 40, &o, &n);
        sl__decoded fd;
        assert_int_equal(sl__jpeg_decode_full(dec, jpg, n, MAXPX, 0, &fd), 0);
        uint8_t *full = malloc((size_t)W * H * 3);
        for (int y = 0; y < H; y++)
            memcpy(full + (size_t)y * W * 3, fd.rgb + y * fd.stride, (size_t)W * 3);
        sl__rng rng = sl__rng_make(0, 0, 0, 0);
        sl__window win;
        bool flip;
        sl__crop_plan(&spec, W, H, &rng, &win, &flip);
        int d;
        double mx, e = fast_vs_ref(dec, rz, jpg, n, full, W, H, win, 224, 224, &d, &mx);
        print_message("centre %dx%d -> 224x224: DCT 1/%d, MAE %.3f (max %.1f) levels\n", W, H,
                      d, e, mx);
        assert_true(e < 2.0);
        free(full);
        free(jpg);
    }
    sl__resizer_free(rz);
    sl__jpeg_free(dec);
}

static void test_random_windows_match_reference(void **state)
{
    (void)state;
    int W = 1024, H = 768;
    size_t n;
    ju_opts o = {90, 0, 0, 0};
    uint8_t *jpg = ju_make(W, H, 50, &o, &n);
    sl__jpeg *dec = sl__jpeg_new();
    sl__resizer *rz = sl__resizer_new();
    sl__decoded fd;
    assert_int_equal(sl__jpeg_decode_full(dec, jpg, n, MAXPX, 0, &fd), 0);
    uint8_t *full = malloc((size_t)W * H * 3);
    for (int y = 0; y < H; y++)
        memcpy(full + (size_t)y * W * 3, fd.rgb + y * fd.stride, (size_t)W * 3);
    sl_image_spec spec = spec_of(SL_CROP_RANDOM_RESIZED, 224);
    double worst = 0, sum = 0;
    int count[9] = {0}, draws = 40;
    for (int i = 0; i < draws; i++) {
        sl__rng rng = sl__rng_make(3, 4, 0, i);
        sl__window win;
        bool flip;
        sl__crop_plan(&spec, W, H, &rng, &win, &flip);
        int d;
        double mx, e = fast_vs_ref(dec, rz, jpg, n, full, W, H, win, 224, 224, &d, &mx);
        count[d]++;
        sum += e;
        worst = e > worst ? e : worst;
        if (d == 1)
            assert_true(mx <= 1.0); /* same pixels: only fixed-point rounding */
    }
    print_message("random-resized: MAE mean %.3f, worst %.3f; scales 1:%d 2:%d 4:%d\n",
                  sum / draws, worst, count[1], count[2], count[4]);
    assert_true(worst < 2.0);
    free(full);
    free(jpg);
    sl__resizer_free(rz);
    sl__jpeg_free(dec);
}

/* ---- the resampler on its own ---- */

static uint8_t *noise(int w, int h, unsigned seed)
{
    uint8_t *p = malloc((size_t)w * h * 3);
    for (size_t i = 0; i < (size_t)w * h * 3; i++)
        p[i] = (uint8_t)ju_hash((uint32_t)i * 2654435761u + seed);
    return p;
}

static void test_fixed_point_vs_reference(void **state)
{
    (void)state;
    sl__resizer *rz = sl__resizer_new();
    uint32_t r = 99;
    double worst_mae = 0;
    int worst_max = 0;
    for (int t = 0; t < 300; t++) {
        int W = 1 + (int)((r = ju_hash(r)) % 300), H = 1 + (int)((r = ju_hash(r)) % 300);
        /* natural content most of the time, noise (worst case) else */
        uint8_t *img = t % 3 ? ju_synth(W, H, (unsigned)t) : noise(W, H, (unsigned)t);
        double x = (r = ju_hash(r)) % 1000 / 1000.0 * W * 0.5;
        double y = (r = ju_hash(r)) % 1000 / 1000.0 * H * 0.5;
        double w = (W - x) * (0.05 + 0.95 * ((r = ju_hash(r)) % 1000) / 1000.0);
        double h = (H - y) * (0.05 + 0.95 * ((r = ju_hash(r)) % 1000) / 1000.0);
        int ow = 1 + (int)((r = ju_hash(r)) % 260), oh = 1 + (int)((r = ju_hash(r)) % 260);
        sl__window win = {x, y, w, h};
        uint8_t *got = malloc((size_t)ow * oh * 3);
        double *ref = malloc((size_t)ow * oh * 3 * sizeof *ref);
        sl__resize_out o = out_u8(got, ow, oh);
        assert_int_equal(sl__resize(rz, img, W, H, (size_t)W * 3, &win, &o), 0);
        ref_resize(img, W, H, (size_t)W * 3, win, ow, oh, ref);
        double s = 0;
        int mx = 0;
        for (size_t i = 0; i < (size_t)ow * oh * 3; i++) {
            int e = abs(got[i] - (int)lrint(ref[i]));
            s += fabs(got[i] - ref[i]);
            mx = e > mx ? e : mx;
        }
        s /= (double)ow * oh * 3;
        worst_mae = s > worst_mae ? s : worst_mae;
        worst_max = mx > worst_max ? mx : worst_max;
        if (mx > 1)
            print_error("%dx%d (%.2f,%.2f %.2fx%.2f) -> %dx%d: max %d\n", W, H, x, y, w, h, ow,
                        oh, mx);
        assert_true(mx <= 1);
        free(ref);
        free(got);
        free(img);
    }
    print_message("fixed point vs double: worst MAE %.3f, worst max %d level\n", worst_mae,
                  worst_max);
    assert_true(worst_mae < 0.6);
    sl__resizer_free(rz);
}

static void test_identity_exact(void **state)
{
    (void)state;
    sl__resizer *rz = sl__resizer_new();
    int W = 131, H = 77;
    size_t stride = (size_t)W * 3 + 13; /* rows padded */
    uint8_t *img = malloc(stride * H);
    uint8_t *nz = noise(W, H, 1);
    for (int y = 0; y < H; y++)
        memcpy(img + y * stride, nz + (size_t)y * W * 3, (size_t)W * 3);
    uint8_t *got = malloc((size_t)W * H * 3);
    sl__window win = {0, 0, W, H};
    sl__resize_out o = out_u8(got, W, H);
    assert_int_equal(sl__resize(rz, img, W, H, stride, &win, &o), 0);
    assert_memory_equal(got, nz, (size_t)W * H * 3);
    /* An integer sub-window at its own size: a plain copy too. */
    sl__window sub = {10, 5, 50, 40};
    o = out_u8(got, 50, 40);
    assert_int_equal(sl__resize(rz, img, W, H, stride, &sub, &o), 0);
    for (int y = 0; y < 40; y++)
        assert_memory_equal(got + (size_t)y * 150, nz + ((size_t)(y + 5) * W + 10) * 3, 150);
    free(got);
    free(nz);
    free(img);
    sl__resizer_free(rz);
}

static void test_constant_exact(void **state)
{
    (void)state;
    /* Weights sum to exactly 1 in fixed point: a flat image stays flat at
     * every geometry, 0 and 255 included (rounding, no overflow). */
    sl__resizer *rz = sl__resizer_new();
    int W = 97, H = 61;
    uint8_t *img = malloc((size_t)W * H * 3);
    uint8_t *got = malloc(300 * 300 * 3);
    const int vals[] = {0, 1, 127, 128, 254, 255};
    uint32_t r = 5;
    for (int t = 0; t < 60; t++) {
        int v = vals[t % 6];
        memset(img, v, (size_t)W * H * 3);
        int ow = 1 + (int)((r = ju_hash(r)) % 300), oh = 1 + (int)((r = ju_hash(r)) % 300);
        sl__window win = {(r = ju_hash(r)) % 40 * 0.37, (r = ju_hash(r)) % 30 * 0.41,
                          1 + (r = ju_hash(r)) % 50 * 1.13, 1 + (r = ju_hash(r)) % 25 * 1.17};
        sl__resize_out o = out_u8(got, ow, oh);
        assert_int_equal(sl__resize(rz, img, W, H, (size_t)W * 3, &win, &o), 0);
        for (size_t i = 0; i < (size_t)ow * oh * 3; i++)
            assert_int_equal(got[i], v);
    }
    free(got);
    free(img);
    sl__resizer_free(rz);
}

static void test_flip_layout_float(void **state)
{
    (void)state;
    sl__resizer *rz = sl__resizer_new();
    int W = 320, H = 240, ow = 97, oh = 83;
    uint8_t *img = ju_synth(W, H, 7);
    sl__window win = {13.3, 7.9, 250.2, 201.7};
    uint8_t *a = malloc((size_t)ow * oh * 3), *b = malloc((size_t)ow * oh * 3);
    uint8_t *chw = malloc((size_t)ow * oh * 3);
    float *f = malloc((size_t)ow * oh * 3 * sizeof *f), *fc = malloc((size_t)ow * oh * 3 * sizeof *f);

    sl__resize_out o = out_u8(a, ow, oh);
    assert_int_equal(sl__resize(rz, img, W, H, (size_t)W * 3, &win, &o), 0);
    o.data = b;
    o.flip = true;
    assert_int_equal(sl__resize(rz, img, W, H, (size_t)W * 3, &win, &o), 0);
    for (int y = 0; y < oh; y++)
        for (int x = 0; x < ow; x++)
            assert_memory_equal(b + ((size_t)y * ow + x) * 3,
                                a + ((size_t)y * ow + ow - 1 - x) * 3, 3);

    o.data = chw;
    o.flip = false;
    o.layout = SL_LAYOUT_CHW;
    assert_int_equal(sl__resize(rz, img, W, H, (size_t)W * 3, &win, &o), 0);
    for (int c = 0; c < 3; c++)
        for (size_t i = 0; i < (size_t)ow * oh; i++)
            assert_int_equal(chw[c * ow * oh + i], a[3 * i + c]);

    const float mean[3] = {0.485f, 0.456f, 0.406f}, std[3] = {0.229f, 0.224f, 0.225f};
    o.dtype = SL_FLOAT32;
    memcpy(o.mean, mean, sizeof mean);
    memcpy(o.std, std, sizeof std);
    o.layout = SL_LAYOUT_HWC;
    o.data = f;
    assert_int_equal(sl__resize(rz, img, W, H, (size_t)W * 3, &win, &o), 0);
    o.layout = SL_LAYOUT_CHW;
    o.data = fc;
    o.flip = true;
    assert_int_equal(sl__resize(rz, img, W, H, (size_t)W * 3, &win, &o), 0);
    for (int y = 0; y < oh; y++)
        for (int x = 0; x < ow; x++)
            for (int c = 0; c < 3; c++) {
                size_t i = (size_t)y * ow + x;
                float want = ((float)a[3 * i + c] / 255.0f - mean[c]) / std[c];
                assert_true(f[3 * i + c] == want);
                assert_true(fc[c * ow * oh + (size_t)y * ow + ow - 1 - x] == want);
            }
    /* Another normalisation on the same resizer (its table is cached). */
    o.mean[0] = 0.5f, o.std[0] = 0.5f;
    o.layout = SL_LAYOUT_HWC;
    o.data = f;
    o.flip = false;
    assert_int_equal(sl__resize(rz, img, W, H, (size_t)W * 3, &win, &o), 0);
    assert_true(f[0] == ((float)a[0] / 255.0f - 0.5f) / 0.5f);
    assert_true(f[0] >= -1 && f[0] <= 1);

    free(fc), free(f), free(chw), free(b), free(a), free(img);
    sl__resizer_free(rz);
}

static void test_random_windows_in_bounds(void **state)
{
    (void)state;
    /* Exact-size regions as the decoder returns them, random-resized
     * windows of all shapes, outputs from 1x1 up: ASan checks every read. */
    sl__jpeg *dec = sl__jpeg_new();
    sl__resizer *rz = sl__resizer_new();
    sl_image_spec spec = spec_of(SL_CROP_RANDOM_RESIZED, 224);
    static const int sizes[][2] = {{640, 480}, {33, 1000}, {1000, 21}, {17, 9}, {1, 1}};
    static const int outs[] = {224, 1, 7, 64, 500};
    uint8_t *dst = malloc(500 * 500 * 3);
    for (size_t k = 0; k < 5; k++) {
        int W = sizes[k][0], H = sizes[k][1];
        size_t n;
        uint8_t *jpg = ju_make(W, H, (unsigned)k, NULL, &n);
        for (int i = 0; i < 30; i++) {
            int os = outs[i % 5];
            spec.width = spec.height = os;
            sl__rng rng = sl__rng_make(8, k, 0, i);
            sl__window win;
            bool flip;
            sl__crop_plan(&spec, W, H, &rng, &win, &flip);
            sl__jpeg_info info;
            sl__decoded d;
            assert_int_equal(sl__jpeg_header(dec, jpg, n, MAXPX, &info), 0);
            assert_int_equal(sl__jpeg_decode(dec, jpg, n, &win, os, os, 0, &d), 0);
            uint8_t *region = malloc((size_t)d.width * d.height * 3);
            for (int y = 0; y < d.height; y++)
                memcpy(region + (size_t)y * d.width * 3, d.rgb + y * d.stride,
                       (size_t)d.width * 3);
            sl__resize_out o = out_u8(dst, os, os);
            o.flip = flip;
            assert_int_equal(sl__resize(rz, region, d.width, d.height, (size_t)d.width * 3,
                                        &d.win, &o),
                             0);
            free(region);
        }
        free(jpg);
    }
    free(dst);
    sl__resizer_free(rz);
    sl__jpeg_free(dec);
}

/* A resizer per tier this build and CPU have, [0] the portable one;
 * returns how many. */
static int tier_resizers(sl__resizer *rz[SL__IMAGE_TIERS])
{
    int n = 0;
    for (int level = 0; level < SL__IMAGE_TIERS; level++) {
        const sl__resize_kernels *k = sl__resize_kernels_for(level);
        if (k) {
            rz[n] = sl__resizer_new_with(k);
            assert_non_null(rz[n]);
            n++;
        }
    }
    assert_true(n >= 1 && rz[0] != NULL);
    return n;
}

static void tier_resizers_free(sl__resizer *rz[SL__IMAGE_TIERS], int n)
{
    for (int t = 0; t < n; t++)
        sl__resizer_free(rz[t]);
}

/* Every tier (AVX-512, AVX2, SSE2) computes the portable integers:
 * bit-identical output over random geometries (narrow and wide scale
 * factors, so the AVX-512 pass also falls back where a group of pixels
 * spans too far), both flips, odd and even widths. Tiers the CPU lacks
 * are skipped. */
static void test_simd_levels_match(void **state)
{
    (void)state;
    sl__resizer *rz[SL__IMAGE_TIERS];
    int tiers = tier_resizers(rz);
    if (tiers == 1) {
        tier_resizers_free(rz, tiers);
        skip();
    }
    static const int outs[] = {224, 1, 7, 64, 131, 2, 225, 30};
    uint8_t *a = malloc(300 * 300 * 3), *b = malloc(300 * 300 * 3);
    int W = 357, H = 263;
    uint8_t *src = ju_synth(W, H, 5);
    for (int i = 0; i < 80; i++) {
        int os = outs[i % 8];
        sl__rng rng = sl__rng_make(3, 4, 0, i);
        double x = sl__rng_uniform(&rng) * W * 0.5, y = sl__rng_uniform(&rng) * H * 0.5;
        sl__window win = {x, y, 1 + sl__rng_uniform(&rng) * (W - x - 1),
                          1 + sl__rng_uniform(&rng) * (H - y - 1)};
        sl__resize_out o = out_u8(a, os, os + i % 3);
        o.flip = i % 2;
        assert_int_equal(sl__resize(rz[0], src, W, H, (size_t)W * 3, &win, &o), 0);
        o.data = b;
        for (int t = 1; t < tiers; t++) {
            assert_int_equal(sl__resize(rz[t], src, W, H, (size_t)W * 3, &win, &o), 0);
            assert_memory_equal(a, b, (size_t)os * (os + i % 3) * 3);
        }
    }
    free(src);
    free(a);
    free(b);
    tier_resizers_free(rz, tiers);
}


/* ---- YCbCr planes ---- */

/* Full decode (fancy upsampling) of jpg into a packed W x H RGB copy. */
static uint8_t *full_decode(sl__jpeg *dec, const uint8_t *jpg, size_t n, int *W, int *H)
{
    sl__decoded fd;
    if (sl__jpeg_decode_full(dec, jpg, n, MAXPX, SL__JPEG_ALLOW_WARNINGS, &fd) != 0)
        return NULL;
    *W = fd.width, *H = fd.height;
    uint8_t *full = malloc((size_t)fd.width * fd.height * 3);
    for (int y = 0; y < fd.height; y++)
        memcpy(full + (size_t)y * fd.width * 3, fd.rgb + y * fd.stride, (size_t)fd.width * 3);
    return full;
}

/* Mean abs error against the float reference of map_image's default
 * decode (YCbCr planes where they apply, else the RGB window) or, with
 * exact, the RGB window with fancy upsampling; *planar: which ran. */
static double decode_vs_ref(sl__jpeg *dec, sl__resizer *rz, const uint8_t *jpg, size_t n,
                            const uint8_t *full, int W, int H, sl__window win, int ow, int oh,
                            bool exact, bool *planar, double *maxerr)
{
    sl__jpeg_info info;
    assert_int_equal(sl__jpeg_header(dec, jpg, n, MAXPX, &info), 0);
    uint8_t *fast = malloc((size_t)ow * oh * 3);
    sl__resize_out o = out_u8(fast, ow, oh);
    int rc = SL__JPEG_NOT_YCC;
    if (!exact) {
        sl__ycc y;
        rc = sl__jpeg_decode_ycc(dec, jpg, n, &win, ow, oh, 0, &y);
        if (rc == 0)
            assert_int_equal(sl__resize_ycc(rz, &y, &o), 0);
    }
    *planar = rc == 0;
    if (rc == SL__JPEG_NOT_YCC) {
        sl__decoded dd;
        assert_int_equal(sl__jpeg_decode(dec, jpg, n, &win, ow, oh, 0, &dd), 0);
        assert_int_equal(sl__resize(rz, dd.rgb, dd.width, dd.height, dd.stride, &dd.win, &o),
                         0);
    } else {
        assert_int_equal(rc, 0);
    }
    double e = mae_vs_ref(fast, full, W, H, win, ow, oh, maxerr);
    free(fast);
    return e;
}

/* The planes of a cropped decode are the samples of the full-width
 * decode at the same DCT scale, wherever the window lies: the crop lent
 * to raw mode (jpeg_crop_scanline) moves nothing. 4:2:0, 4:2:2,
 * progressive and with restart markers; 4:4:4 and gray are not read as
 * planes. */
static void test_ycc_crop_matches_full_width(void **state)
{
    (void)state;
    sl__jpeg *dec = sl__jpeg_new();
    static const ju_opts kinds[] = {{90, 0, 0, 0}, {90, 0, 0, 2}, {90, 1, 0, 0}, {85, 0, 3, 2}};
    static const int dims[][2] = {{613, 419}, {57, 41}, {100, 75}};
    int checked = 0;
    for (size_t k = 0; k < 3 * sizeof kinds / sizeof kinds[0]; k++) {
        int W = dims[k / 4][0], H = dims[k / 4][1];
        size_t n;
        uint8_t *jpg = ju_make(W, H, (unsigned)k + 3, &kinds[k % 4], &n);
        for (int i = 0; i < 24; i++) {
            int d = 1 << (i % 4);
            while (16 * d >= W - 1 || 8 * d >= H - 1)
                d /= 2;
            sl__rng rng = sl__rng_make(11, k, (uint64_t)i, 0);
            double w = 16.0 * d + sl__rng_uniform(&rng) * (W - 16.0 * d - 1);
            double h = 8.0 * d + sl__rng_uniform(&rng) * (H - 8.0 * d - 1);
            sl__window win = {sl__rng_uniform(&rng) * (W - w), sl__rng_uniform(&rng) * (H - h),
                              w, h};
            sl__window all = {0, 0, W, H};
            sl__jpeg_info info;
            sl__ycc a, b;
            /* both at scale 1/d: the output sizes ask for it */
            assert_int_equal(sl__jpeg_header(dec, jpg, n, MAXPX, &info), 0);
            int rc = sl__jpeg_decode_ycc(dec, jpg, n, &all, W / d, H / d, 0, &a);
            if (rc == SL__JPEG_NOT_YCC) { /* chroma at luma's resolution at this scale */
                assert_true(d > 1 && kinds[k % 4].subsample == 0);
                continue;
            }
            assert_int_equal(rc, 0);
            assert_int_equal(a.scale_denom, d);
            size_t cap = 0;
            for (int c = 0; c < 3; c++)
                cap += a.plane[c].stride * (size_t)a.plane[c].height;
            uint8_t *copy = malloc(cap), *at[3];
            for (int c = 0, off = 0; c < 3; off += (int)(a.plane[c].stride * a.plane[c].height), c++) {
                at[c] = copy + off;
                memcpy(at[c], a.plane[c].data, a.plane[c].stride * (size_t)a.plane[c].height);
            }
            assert_int_equal(sl__jpeg_header(dec, jpg, n, MAXPX, &info), 0);
            assert_int_equal(sl__jpeg_decode_ycc(dec, jpg, n, &win, (int)(w / d), (int)(h / d),
                                                 0, &b), 0);
            assert_int_equal(b.scale_denom, d);
            for (int c = 0; c < 3; c++) {
                const sl__plane *pa = &a.plane[c], *pb = &b.plane[c];
                double sx = pa->win.w / W * d; /* samples per scaled pixel */
                double ox = win.x / d * sx - pb->win.x, oy = win.y / d * (pa->win.h / H * d) - pb->win.y;
                int dx = (int)lround(ox), dy = (int)lround(oy);
                assert_true(fabs(ox - dx) < 1e-6 && fabs(oy - dy) < 1e-6);
                assert_true(dx >= 0 && dy >= 0 && dx + pb->width <= pa->width &&
                            dy + pb->height <= pa->height);
                /* the window lies inside the plane */
                assert_true(pb->win.x >= -1e-9 && pb->win.x + pb->win.w <= pb->width + 1e-6);
                assert_true(pb->win.y >= -1e-9 && pb->win.y + pb->win.h <= pb->height + 1e-6);
                for (int y = 0; y < pb->height; y++)
                    assert_memory_equal(pb->data + (size_t)y * pb->stride,
                                        at[c] + (size_t)(y + dy) * pa->stride + dx,
                                        (size_t)pb->width);
            }
            checked++;
            free(copy);
        }
        free(jpg);
    }
    assert_true(checked >= 150);
    /* files that keep the RGB path */
    static const ju_opts full444 = {90, 0, 0, 1};
    size_t n;
    uint8_t *jpg = ju_make(200, 150, 1, &full444, &n);
    sl__jpeg_info info;
    sl__ycc y;
    sl__window win = {10, 10, 150, 100};
    assert_int_equal(sl__jpeg_header(dec, jpg, n, MAXPX, &info), 0);
    assert_int_equal(sl__jpeg_decode_ycc(dec, jpg, n, &win, 100, 100, 0, &y), SL__JPEG_NOT_YCC);
    sl__decoded dd; /* the header is still good for the RGB decode */
    assert_int_equal(sl__jpeg_decode(dec, jpg, n, &win, 100, 100, 0, &dd), 0);
    free(jpg);
    uint8_t *rgb = ju_synth(200, 150, 2), *gray = ju_gray(rgb, 200, 150);
    jpg = ju_encode(gray, 200, 150, 1, NULL, &n);
    assert_int_equal(sl__jpeg_header(dec, jpg, n, MAXPX, &info), 0);
    assert_int_equal(sl__jpeg_decode_ycc(dec, jpg, n, &win, 100, 100, 0, &y), SL__JPEG_NOT_YCC);
    free(jpg);
    free(gray);
    free(rgb);
    sl__jpeg_free(dec);
}

/* map_image's default decode against the float reference (full decode
 * with fancy upsampling, double resize): mean absolute error at most 1
 * level on 4:2:0, 4:2:2 and 4:4:4 files, centre and random crops; and the
 * planes did run on the subsampled files. */
static void test_default_decode_accuracy(void **state)
{
    (void)state;
    static const int sizes[][2] = {{500, 375}, {375, 500}, {1024, 768}};
    static const char *const sub_names[] = {"4:2:0", "4:4:4", "4:2:2"};
    sl__jpeg *dec = sl__jpeg_new();
    sl__resizer *rz = sl__resizer_new();
    int planar_runs = 0;
    for (int sub = 0; sub < 3; sub++)
        for (size_t k = 0; k < sizeof sizes / sizeof sizes[0]; k++) {
            int W = sizes[k][0], H = sizes[k][1], w2, h2;
            ju_opts o = {85, 0, 0, sub};
            size_t n;
            uint8_t *jpg = ju_make(W, H, (unsigned)(k + 7 * sub), &o, &n);
            uint8_t *full = full_decode(dec, jpg, n, &w2, &h2);
            assert_non_null(full);
            double sum[2] = {0}, mx[2] = {0};
            int draws = W > 2000 ? 4 : 9, planes = 0;
            for (int i = 0; i < draws; i++) {
                sl_image_spec spec = spec_of(i ? SL_CROP_RANDOM_RESIZED : SL_CROP_CENTER, 224);
                sl__rng rng = sl__rng_make(5, (uint64_t)k, (uint64_t)sub, (uint64_t)i);
                sl__window win;
                bool flip, planar;
                sl__crop_plan(&spec, W, H, &rng, &win, &flip);
                for (int m = 0; m < 2; m++) {
                    double x, e = decode_vs_ref(dec, rz, jpg, n, full, W, H, win, 224, 224, m,
                                                &planar, &x);
                    sum[m] += e;
                    mx[m] = x > mx[m] ? x : mx[m];
                    assert_true(e <= 1.0);
                    planes += !m && planar;
                }
            }
            print_message("%s %dx%d: MAE exact %.3f (max %.0f), default %.3f (max %.0f), "
                          "%d of %d as planes\n", sub_names[sub], W, H, sum[1] / draws, mx[1],
                          sum[0] / draws, mx[0], planes, draws);
            if (sub == 1)
                assert_int_equal(planes, 0);
            planar_runs += planes;
            free(full);
            free(jpg);
        }
    assert_true(planar_runs >= 20);
    sl__resizer_free(rz);
    sl__jpeg_free(dec);
}

/* The plane passes compute the same integers in every tier, with flips,
 * odd sizes and every output layout and dtype. */
static void test_ycc_simd_levels_match(void **state)
{
    (void)state;
    sl__resizer *rz[SL__IMAGE_TIERS];
    int tiers = tier_resizers(rz);
    sl__jpeg *dec = sl__jpeg_new();
    static const int outs[] = {224, 1, 7, 64, 131, 2, 225, 30};
    float *a = malloc(300 * 300 * 3 * sizeof *a), *b = malloc(300 * 300 * 3 * sizeof *b);
    int W = 357, H = 263;
    for (int sub = 0; sub < 3; sub += 2) {
        ju_opts o = {90, 0, 0, sub};
        size_t n;
        uint8_t *jpg = ju_make(W, H, 9 + (unsigned)sub, &o, &n);
        for (int i = 0; i < 64; i++) {
            int os = outs[i % 8];
            sl__rng rng = sl__rng_make(3, 5, (uint64_t)sub, i);
            double x = sl__rng_uniform(&rng) * W * 0.5, y = sl__rng_uniform(&rng) * H * 0.5;
            sl__window win = {x, y, 1 + sl__rng_uniform(&rng) * (W - x - 1),
                              1 + sl__rng_uniform(&rng) * (H - y - 1)};
            sl__jpeg_info info;
            sl__ycc planes;
            assert_int_equal(sl__jpeg_header(dec, jpg, n, MAXPX, &info), 0);
            /* at scale 1, where 4:2:0's chroma is at half resolution */
            assert_int_equal(sl__jpeg_decode_ycc(dec, jpg, n, &win, (int)win.w, (int)win.h, 0,
                                                 &planes), 0);
            sl__resize_out out = out_u8((uint8_t *)a, os, os + i % 3);
            out.flip = i % 2;
            out.layout = i % 4 < 2 ? SL_LAYOUT_HWC : SL_LAYOUT_CHW;
            out.dtype = i % 3 == 2 ? SL_FLOAT32 : SL_UINT8;
            for (int c = 0; c < 3; c++)
                out.mean[c] = 0.5f, out.std[c] = 0.25f;
            size_t bytes = (size_t)os * (os + i % 3) * 3 * (out.dtype == SL_FLOAT32 ? 4 : 1);
            assert_int_equal(sl__resize_ycc(rz[0], &planes, &out), 0);
            out.data = b;
            for (int t = 1; t < tiers; t++) {
                assert_int_equal(sl__resize_ycc(rz[t], &planes, &out), 0);
                assert_memory_equal(a, b, bytes);
            }
        }
        free(jpg);
    }
    free(a);
    free(b);
    sl__jpeg_free(dec);
    tier_resizers_free(rz, tiers);
}

/* The AVX-512 filter weights (eight samples at a time) are the scalar
 * ones, bit for bit, over crops, whole images, upscales, sub-pixel
 * windows and windows that run off the image. (Tiers without a weight
 * builder of their own have nothing to compare.) */
static void test_weights_simd_match_scalar(void **state)
{
    (void)state;
    int compared = 0;
    for (int level = 0; level < SL__IMAGE_TIERS; level++) {
        const sl__resize_kernels *k = sl__resize_kernels_for(level);
        if (!k || sl__resize_weights_agree(k, 0, 10, 10, 8) < 0)
            continue;
        sl__rng rng = sl__rng_make(11, 13, 0, 0);
        for (int i = 0; i < 20000; i++) {
            int size = 1 + (int)sl__rng_below(&rng, i % 4 ? 600 : 5000);
            int out = 1 + (int)sl__rng_below(&rng, i % 5 ? 300 : 40);
            double pos = sl__rng_uniform(&rng) * size, len = sl__rng_uniform(&rng) * (size - pos);
            if (i % 7 == 0)
                len += sl__rng_uniform(&rng) * 3; /* past the last pixel */
            if (i % 11 == 0)
                len = sl__rng_uniform(&rng) * 0.9 + 1e-3; /* under a pixel */
            if (i % 13 == 0)
                pos = 0, len = size; /* the whole axis */
            int rc = sl__resize_weights_agree(k, pos, len > 0 ? len : 1e-3, size, out);
            if (rc != 1)
                fail_msg("%s weights differ: pos %.17g len %.17g size %d out %d (%d)",
                         sl__resize_kernels_name(k), pos, len, size, out, rc);
        }
        compared++;
    }
    if (!compared)
        skip();
}

/* The colour passes of every tier (SSSE3, AVX-512 VBMI) give the portable
 * integers for every (Y, Cb, Cr), and write nothing past the row. */
static void test_ycc_rgb_every_value(void **state)
{
    (void)state;
    for (int level = 1; level < SL__IMAGE_TIERS; level++) { /* (0 is the reference) */
        const sl__resize_kernels *k = sl__resize_kernels_for(level);
        if (k && sl__resize_ycc_rgb_agree(k) != 1)
            fail_msg("%s: colour pass differs", sl__resize_kernels_name(k));
        if (k && sl__resize_ycc_colour_agree(k) != 1)
            fail_msg("%s: colour pass with a transform differs", sl__resize_kernels_name(k));
    }
}

static void test_steady_state_and_errors(void **state)
{
    (void)state;
    sl__resizer *rz = sl__resizer_new();
    uint8_t *img = ju_synth(500, 375, 1);
    uint8_t *dst = malloc(224 * 224 * 3);
    sl__resize_out o = out_u8(dst, 224, 224);
    sl__window w1 = {85.04, 23.44, 328.45, 328.13}, w2 = {10, 20, 400, 300};
    int64_t steady = 0;
    for (int i = 0; i < 10; i++) {
        assert_int_equal(sl__resize(rz, img, 500, 375, 1500, i % 2 ? &w1 : &w2, &o), 0);
        if (i == 1)
            steady = sl_memory_in_use();
        if (i > 1)
            assert_int_equal(sl_memory_in_use(), steady);
    }
    o.width = 0;
    assert_int_equal(sl__resize(rz, img, 500, 375, 1500, &w1, &o), SL_EINVAL);
    o.width = 224;
    o.dtype = SL_INT16;
    assert_int_equal(sl__resize(rz, img, 500, 375, 1500, &w1, &o), SL_EINVAL);
    o.dtype = SL_UINT8;
    sl__window nan = {NAN, 0, 10, 10};
    assert_int_equal(sl__resize(rz, img, 500, 375, 1500, &nan, &o), SL_EINVAL);
    /* Windows far outside the image or degenerate: clamped to its pixels,
     * never read outside (ASan) nor overflow (UBSan). */
    const sl__window odd[] = {{1e12, -1e12, 5, 5}, {-50, -50, 1e15, 1e15}, {10, 10, 0, 0},
                              {499.9, 374.9, 1e-9, 1e-9}, {20, 20, -5, -5}};
    for (size_t k = 0; k < sizeof odd / sizeof odd[0]; k++)
        assert_int_equal(sl__resize(rz, img, 500, 375, 1500, &odd[k], &o), 0);
    free(dst);
    free(img);
    sl__resizer_free(rz);
}

/* test_resize --accuracy DIR [N]: the accuracy figures on a real folder
 * (make_dataset.py's layout: DIR/files.txt lists "relative/path label"),
 * its first N files (default 300): per decode (exact: the RGB window with
 * fancy upsampling; default: map_image's, YCbCr planes where they apply)
 * and crop (centre; one random-resized crop per file), the mean over files
 * of the mean absolute error against the float reference, the largest
 * single error, and how many files the planes decoded. One JSON line. */
static int accuracy(const char *dir, int limit)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/files.txt", dir);
    FILE *list = fopen(path, "r");
    if (!list) {
        fprintf(stderr, "test_resize: cannot open %s\n", path);
        return 1;
    }
    sl__jpeg *dec = sl__jpeg_new();
    sl__resizer *rz = sl__resizer_new();
    double sum[2][2] = {{0}}, mx[2][2] = {{0}};
    int files = 0, planar[2] = {0};
    char rel[2048];
    int label;
    while (files < limit && fscanf(list, "%2047s %d", rel, &label) == 2) {
        snprintf(path, sizeof path, "%s/%s", dir, rel);
        FILE *f = fopen(path, "rb");
        if (!f)
            continue;
        fseek(f, 0, SEEK_END);
        size_t n = (size_t)ftell(f);
        rewind(f);
        uint8_t *jpg = malloc(n);
        size_t got = fread(jpg, 1, n, f);
        fclose(f);
        int W, H;
        uint8_t *full = got == n ? full_decode(dec, jpg, n, &W, &H) : NULL;
        for (int c = 0; full && c < 2; c++) {
            sl_image_spec spec = spec_of(c ? SL_CROP_RANDOM_RESIZED : SL_CROP_CENTER, 224);
            sl__rng rng = sl__rng_make(7, (uint64_t)files, 0, 0);
            sl__window win;
            bool flip, pl;
            sl__crop_plan(&spec, W, H, &rng, &win, &flip);
            for (int m = 0; m < 2; m++) {
                double x, e = decode_vs_ref(dec, rz, jpg, n, full, W, H, win, 224, 224, m == 0,
                                            &pl, &x);
                sum[c][m] += e;
                mx[c][m] = x > mx[c][m] ? x : mx[c][m];
                planar[c] += m == 1 && pl;
            }
        }
        files += full != NULL;
        free(full);
        free(jpg);
    }
    fclose(list);
    printf("{\"bench\":\"accuracy\",\"dir\":\"%s\",\"files\":%d", dir, files);
    static const char *const crops[] = {"center", "random"}, *const modes[] = {"exact", "default"};
    for (int c = 0; c < 2; c++) {
        for (int m = 0; m < 2; m++)
            printf(",\"%s_%s_mae\":%.3f,\"%s_%s_max\":%.0f", crops[c], modes[m],
                   files ? sum[c][m] / files : 0.0, crops[c], modes[m], mx[c][m]);
        printf(",\"%s_planes\":%d", crops[c], planar[c]);
    }
    printf("}\n");
    sl__resizer_free(rz);
    sl__jpeg_free(dec);
    return files ? 0 : 1;
}

/* Raw mode's nearest neighbour: the pixel under each output pixel's
 * centre, channels filled or dropped as sl_image_decode says, flip and
 * CHW, and the two refusals. Then the alpha blend. */
static void test_raw_nearest(void **state)
{
    (void)state;
    enum { W = 9, H = 7 };
    uint16_t src[H][W][2]; /* gray + alpha, 16-bit */
    for (int y = 0; y < H; y++)
        for (int x = 0; x < W; x++)
            src[y][x][0] = (uint16_t)(1000 * y + x), src[y][x][1] = (uint16_t)(50000 + x);
    sl__raw r = {(const uint8_t *)src, W, H, sizeof src[0], 2, 2, 4, {0, 0, W, H}};
    int cols[W];
    uint16_t out[H * W * 4];
    /* identity, 2 -> 4: gray replicated, alpha kept */
    assert_int_equal(sl__raw_resample(&r, &r.win, out, W, H, 4, SL_UINT16, SL_LAYOUT_HWC, false,
                                      cols), 0);
    for (int y = 0; y < H; y++)
        for (int x = 0; x < W; x++) {
            const uint16_t *px = out + (y * W + x) * 4;
            assert_int_equal(px[0], src[y][x][0]);
            assert_int_equal(px[2], src[y][x][0]);
            assert_int_equal(px[3], src[y][x][1]);
        }
    /* halved (window 8 x 6 -> 4 x 3), flipped, CHW, alpha dropped: output
     * x takes source 2x + 1 (the centre of its pair), mirrored */
    sl__window half = {0, 0, 8, 6};
    assert_int_equal(sl__raw_resample(&r, &half, out, 4, 3, 1, SL_UINT16, SL_LAYOUT_CHW, true,
                                      cols), 0);
    for (int y = 0; y < 3; y++)
        for (int x = 0; x < 4; x++)
            assert_int_equal(out[y * 4 + x], src[2 * y + 1][2 * (3 - x) + 1][0]);
    /* 8-bit gray -> RGB + opaque alpha, into uint16: values kept */
    uint8_t g[2][3] = {{0, 7, 255}, {1, 2, 3}};
    sl__raw gr = {&g[0][0], 3, 2, 3, 1, 1, 1, {0, 0, 3, 2}};
    assert_int_equal(sl__raw_resample(&gr, &gr.win, out, 3, 2, 4, SL_UINT16, SL_LAYOUT_HWC, false,
                                      cols), 0);
    assert_int_equal(out[4 * 2 + 1], 255);
    assert_int_equal(out[4 * 2 + 3], 255);
    assert_int_equal(out[4 * 1 + 0], 7);
    /* refused: colour into gray, 16 bits into uint8 */
    uint8_t rgb[3] = {1, 2, 3};
    sl__raw c = {rgb, 1, 1, 3, 3, 1, 3, {0, 0, 1, 1}};
    assert_int_equal(sl__raw_resample(&c, &c.win, out, 1, 1, 1, SL_UINT8, SL_LAYOUT_HWC, false,
                                      cols), SL_EUNSUPPORTED);
    assert_int_equal(sl__raw_resample(&r, &r.win, out, W, H, 2, SL_UINT8, SL_LAYOUT_HWC, false,
                                      cols), SL_ERANGE);
    /* the blend: over white, half alpha, exact rounding of v / 255 */
    uint8_t px[2][4] = {{0, 100, 255, 128}, {10, 20, 30, 255}};
    const int white[3] = {255, 255, 255};
    sl__blend_rows(&px[0][0], 2, 1, 8, white);
    const uint8_t want[6] = {127, 177, 255, 10, 20, 30};
    assert_memory_equal(&px[0][0], want, 6);
}

int main(int argc, char **argv)
{
    if (argc >= 3 && strcmp(argv[1], "--accuracy") == 0)
        return accuracy(argv[2], argc > 3 ? atoi(argv[3]) : 300);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_center_preset_matches_reference),
        cmocka_unit_test(test_random_windows_match_reference),
        cmocka_unit_test(test_fixed_point_vs_reference),
        cmocka_unit_test(test_identity_exact),
        cmocka_unit_test(test_constant_exact),
        cmocka_unit_test(test_flip_layout_float),
        cmocka_unit_test(test_random_windows_in_bounds),
        cmocka_unit_test(test_simd_levels_match),
        cmocka_unit_test(test_steady_state_and_errors),
        cmocka_unit_test(test_ycc_crop_matches_full_width),
        cmocka_unit_test(test_default_decode_accuracy),
        cmocka_unit_test(test_ycc_simd_levels_match),
        cmocka_unit_test(test_weights_simd_match_scalar),
        cmocka_unit_test(test_ycc_rgb_every_value),
        cmocka_unit_test(test_raw_nearest),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
