/* JPEG decode: colour spaces, progressive and restart files, odd sizes,
 * region-of-interest decode at each DCT scale against a full decode, and
 * bad inputs (truncated, bit flips, not JPEG, huge declared size). */
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include "image/image.h"
#include "jpegutil.h"
#include "testutil.h"

#define MAXPX 100000000

static double mae(const uint8_t *a, const uint8_t *b, size_t n)
{
    double s = 0;
    for (size_t i = 0; i < n; i++)
        s += abs((int)a[i] - (int)b[i]);
    return n ? s / n : 0;
}

/* Full decode, checked for shape; returns a malloc'd copy (w*h*3). */
static uint8_t *full(sl__jpeg *dec, const uint8_t *jpg, size_t n, int w, int h)
{
    sl__decoded d;
    int rc = sl__jpeg_decode_full(dec, jpg, n, MAXPX, 0, &d);
    if (rc)
        print_error("decode_full: %s\n", sl_last_error());
    assert_int_equal(rc, 0);
    assert_int_equal(d.width, w);
    assert_int_equal(d.height, h);
    assert_int_equal(d.scale_denom, 1);
    assert_true(d.stride >= (size_t)w * 3);
    uint8_t *p = malloc((size_t)w * h * 3);
    for (int y = 0; y < h; y++)
        memcpy(p + (size_t)y * w * 3, d.rgb + y * d.stride, (size_t)w * 3);
    return p;
}

static void check_rgb(int w, int h, const ju_opts *o, double tol)
{
    sl__jpeg *dec = sl__jpeg_new();
    uint8_t *src = ju_synth(w, h, (unsigned)(w * 31 + h));
    size_t n;
    uint8_t *jpg = ju_encode(src, w, h, 3, o, &n);
    sl__jpeg_info info;
    assert_int_equal(sl__jpeg_header(dec, jpg, n, MAXPX, &info), 0);
    assert_int_equal(info.width, w);
    assert_int_equal(info.height, h);
    assert_int_equal(info.components, 3);
    assert_int_equal(info.progressive, o && o->progressive);
    uint8_t *got = full(dec, jpg, n, w, h);
    int rw, rh; /* bit-exact with a plain libjpeg decode */
    uint8_t *ref = ju_decode(jpg, n, &rw, &rh);
    assert_memory_equal(got, ref, (size_t)w * h * 3);
    free(ref);
    double e = mae(got, src, (size_t)w * h * 3);
    print_message("%dx%d%s%s: mean abs error %.3f\n", w, h,
                  o && o->progressive ? " progressive" : "", o && o->restart ? " restart" : "",
                  e);
    assert_true(e < tol);
    free(got);
    free(jpg);
    free(src);
    sl__jpeg_free(dec);
}

static void test_rgb_sizes(void **state)
{
    (void)state;
    /* Against the source: a few levels at quality 95, except where 4:2:0
     * chroma meets hard colour edges over a few pixels (tiny images). */
    check_rgb(640, 480, NULL, 2.5);
    check_rgb(17, 9, NULL, 20); /* partial MCUs both ways */
    check_rgb(4000, 3, NULL, 20);
    check_rgb(3, 700, NULL, 20);
    ju_opts o444 = {95, 0, 0, 1};
    check_rgb(17, 9, &o444, 4.0);
    check_rgb(1, 1, &o444, 3.0);
    check_rgb(4000, 3, &o444, 4.0);
    check_rgb(333, 251, &o444, 2.0);
}

static void test_progressive_restart(void **state)
{
    (void)state;
    ju_opts prog = {95, 1, 0, 0}, rst = {95, 0, 3, 0}, both = {90, 1, 1, 0};
    check_rgb(640, 480, &prog, 2.5);
    check_rgb(101, 77, &prog, 4.0);
    check_rgb(640, 480, &rst, 2.5);
    check_rgb(640, 480, &both, 3.0);
}

static void test_gray(void **state)
{
    (void)state;
    int w = 321, h = 203;
    uint8_t *rgb = ju_synth(w, h, 3);
    uint8_t *g = ju_gray(rgb, w, h);
    size_t n;
    uint8_t *jpg = ju_encode(g, w, h, 1, NULL, &n);
    sl__jpeg *dec = sl__jpeg_new();
    sl__jpeg_info info;
    assert_int_equal(sl__jpeg_header(dec, jpg, n, MAXPX, &info), 0);
    assert_int_equal(info.components, 1);
    uint8_t *got = full(dec, jpg, n, w, h);
    double s = 0;
    for (size_t i = 0; i < (size_t)w * h; i++) {
        assert_int_equal(got[3 * i], got[3 * i + 1]);
        assert_int_equal(got[3 * i], got[3 * i + 2]);
        s += abs(got[3 * i] - g[i]);
    }
    print_message("gray: mean abs error %.3f\n", s / (w * h));
    assert_true(s / (w * h) < 2.0);
    /* ROI decode of a gray file at 1/2. */
    sl__window win = {40, 30, 200, 150};
    sl__decoded d;
    assert_int_equal(sl__jpeg_header(dec, jpg, n, MAXPX, &info), 0);
    assert_int_equal(sl__jpeg_decode(dec, jpg, n, &win, 100, 75, 0, &d), 0);
    assert_int_equal(d.scale_denom, 2);
    assert_int_equal(d.rgb[0], d.rgb[1]);
    free(got);
    free(jpg);
    free(g);
    free(rgb);
    sl__jpeg_free(dec);
}

static void test_cmyk(void **state)
{
    (void)state;
    int w = 256, h = 160;
    uint8_t *rgb = ju_synth(w, h, 5);
    uint8_t *cmyk = ju_cmyk(rgb, w, h);
    size_t n;
    uint8_t *jpg = ju_encode(cmyk, w, h, 4, NULL, &n);
    sl__jpeg *dec = sl__jpeg_new();
    sl__jpeg_info info;
    assert_int_equal(sl__jpeg_header(dec, jpg, n, MAXPX, &info), 0);
    assert_int_equal(info.components, 4);
    uint8_t *got = full(dec, jpg, n, w, h);
    double e = mae(got, rgb, (size_t)w * h * 3);
    print_message("cmyk: mean abs error %.3f\n", e);
    assert_true(e < 4.0);
    /* ROI decode of a CMYK file (converted in place, narrower rows). */
    sl__window win = {33, 17, 180, 120};
    sl__decoded d;
    assert_int_equal(sl__jpeg_header(dec, jpg, n, MAXPX, &info), 0);
    assert_int_equal(sl__jpeg_decode(dec, jpg, n, &win, 90, 60, 0, &d), 0);
    assert_int_equal(d.scale_denom, 2);
    int x0 = (int)lrint(33 / 2.0 - d.win.x), y0 = (int)lrint(17 / 2.0 - d.win.y);
    double s = 0;
    int cnt = 0;
    for (int y = 10; y < 50; y++)
        for (int x = 20; x < 80; x++)
            for (int c = 0; c < 3; c++) {
                int gx = (x0 + x) * 2, gy = (y0 + y) * 2;
                int ref = 0;
                for (int k = 0; k < 4; k++)
                    ref += got[((size_t)(gy + k / 2) * w + gx + k % 2) * 3 + c];
                s += fabs(d.rgb[y * d.stride + 3 * x + c] - ref / 4.0);
                cnt++;
            }
    print_message("cmyk 1/2 ROI vs full: %.3f\n", s / cnt);
    assert_true(s / cnt < 3.0);
    free(got);
    free(jpg);
    free(cmyk);
    free(rgb);
    sl__jpeg_free(dec);
}

/* ROI decode of `win` forcing scale d through the output size, compared
 * with the full decode box-averaged d x d over the window. */
static void check_roi(sl__jpeg *dec, const uint8_t *jpg, size_t n, const uint8_t *ref, int W,
                      int H, sl__window win, int out_w, int out_h, int want_d)
{
    sl__jpeg_info info;
    sl__decoded d;
    assert_int_equal(sl__jpeg_header(dec, jpg, n, MAXPX, &info), 0);
    assert_int_equal(sl__jpeg_decode(dec, jpg, n, &win, out_w, out_h, 0, &d), 0);
    assert_int_equal(d.scale_denom, want_d);
    /* The region holds the window. */
    assert_true(d.win.x >= -1e-9 && d.win.y >= -1e-9);
    assert_true(d.win.x + d.win.w <= d.width + 1e-9 && d.win.y + d.win.h <= d.height + 1e-9);
    assert_true(fabs(d.win.w - win.w / want_d) < 1e-9 && fabs(d.win.h - win.h / want_d) < 1e-9);
    /* Rows below the window are not decoded, nor far columns. */
    assert_true(d.height <= (int)ceil(win.h / want_d) + 2);
    assert_true(d.width <= (int)ceil(win.w / want_d) + 2 + 32);
    int xoff = (int)lrint(win.x / want_d - d.win.x), yoff = (int)lrint(win.y / want_d - d.win.y);
    int xa = (int)ceil(win.x / want_d), xb = (int)floor((win.x + win.w) / want_d);
    int ya = (int)ceil(win.y / want_d), yb = (int)floor((win.y + win.h) / want_d);
    double s = 0;
    long cnt = 0;
    for (int Y = ya; Y < yb; Y++)
        for (int X = xa; X < xb; X++) {
            if ((X + 1) * want_d > W || (Y + 1) * want_d > H)
                continue; /* a partial block at the image edge */
            for (int c = 0; c < 3; c++) {
                double r = 0;
                for (int dy = 0; dy < want_d; dy++)
                    for (int dx = 0; dx < want_d; dx++)
                        r += ref[((size_t)(Y * want_d + dy) * W + X * want_d + dx) * 3 + c];
                r /= want_d * want_d;
                s += fabs(d.rgb[(size_t)(Y - yoff) * d.stride + 3 * (X - xoff) + c] - r);
                cnt++;
            }
        }
    double e = cnt ? s / cnt : 0;
    print_message("ROI %dx%d image, window (%.1f,%.1f %.1fx%.1f), 1/%d: region %dx%d, mae %.3f\n",
                  W, H, win.x, win.y, win.w, win.h, want_d, d.width, d.height, e);
    assert_true(cnt > 0);
    if (want_d == 1) /* the same pixels as a full decode, edges included */
        assert_true(e == 0);
    /* Tolerance: the DCT-domain reduction is not a box filter (it keeps
     * the low frequencies of each block) and chroma is upsampled before
     * averaging in the reference, so about 1-2 levels apart on average. */
    assert_true(e < 3.0);
}

/* SL__JPEG_FAST_UPSAMPLE: a region decoded with merged (replicating)
 * upsampling holds exactly the pixels of a full decode with it, rows
 * skipped above and columns cropped or not, also at odd image sizes; and
 * it stays close to the fancy decode. */
static void test_fast_upsample(void **state)
{
    (void)state;
    static const int sizes[][2] = {{1024, 768}, {1023, 767}};
    for (int k = 0; k < 2; k++) {
        int W = sizes[k][0], H = sizes[k][1];
        size_t n;
        uint8_t *jpg = ju_make(W, H, 13 + k, NULL, &n);
        sl__jpeg *dec = sl__jpeg_new();
        uint8_t *fancy = full(dec, jpg, n, W, H);
        sl__decoded d;
        assert_int_equal(sl__jpeg_decode_full(dec, jpg, n, MAXPX, SL__JPEG_FAST_UPSAMPLE, &d), 0);
        assert_int_equal(d.width, W);
        assert_int_equal(d.height, H);
        uint8_t *fast = malloc((size_t)W * H * 3);
        for (int y = 0; y < H; y++)
            memcpy(fast + (size_t)y * W * 3, d.rgb + y * d.stride, (size_t)W * 3);
        double e = mae(fast, fancy, (size_t)W * H * 3);
        print_message("fast vs fancy upsampling, %dx%d: mae %.3f\n", W, H, e);
        assert_true(e > 0 && e < 2.0);
        const sl__window wins[] = {{85.04, 23.44, 328.45, 328.13},
                                   {W - 300.5, H - 200.25, 300.5, 200.25},
                                   {96, 48, 320, 160},
                                   {1, 1, 17, 9}};
        for (int i = 0; i < 4; i++) {
            sl__jpeg_info info;
            sl__window w = wins[i];
            assert_int_equal(sl__jpeg_header(dec, jpg, n, MAXPX, &info), 0);
            assert_int_equal(sl__jpeg_decode(dec, jpg, n, &w, (int)w.w, (int)w.h,
                                             SL__JPEG_FAST_UPSAMPLE, &d),
                             0);
            assert_int_equal(d.scale_denom, 1);
            int x0 = (int)lrint(w.x - d.win.x), y0 = (int)lrint(w.y - d.win.y);
            assert_true(x0 >= 0 && y0 >= 0 && x0 + d.width <= W && y0 + d.height <= H);
            for (int y = 0; y < d.height; y++)
                assert_memory_equal(d.rgb + y * d.stride,
                                    fast + ((size_t)(y0 + y) * W + x0) * 3, (size_t)d.width * 3);
        }
        free(fast);
        free(fancy);
        free(jpg);
        sl__jpeg_free(dec);
    }
}

static void test_roi_scales(void **state)
{
    (void)state;
    int W = 1024, H = 768;
    size_t n;
    uint8_t *jpg = ju_make(W, H, 11, NULL, &n);
    sl__jpeg *dec = sl__jpeg_new();
    uint8_t *ref = full(dec, jpg, n, W, H);
    sl__window win = {100, 50, 800, 600};
    check_roi(dec, jpg, n, ref, W, H, win, 100, 75, 8);
    check_roi(dec, jpg, n, ref, W, H, win, 200, 150, 4);
    check_roi(dec, jpg, n, ref, W, H, win, 400, 300, 2);
    check_roi(dec, jpg, n, ref, W, H, win, 401, 300, 1);
    check_roi(dec, jpg, n, ref, W, H, win, 224, 224, 2);
    /* Fractional windows, and windows at the far edges. */
    sl__window frac = {85.04, 23.44, 328.45, 328.13};
    check_roi(dec, jpg, n, ref, W, H, frac, 224, 224, 1);
    check_roi(dec, jpg, n, ref, W, H, frac, 80, 80, 4);
    sl__window corner = {W - 300.5, H - 200.25, 300.5, 200.25};
    check_roi(dec, jpg, n, ref, W, H, corner, 30, 20, 8);
    check_roi(dec, jpg, n, ref, W, H, corner, 150, 100, 2);
    check_roi(dec, jpg, n, ref, W, H, corner, 224, 150, 1);
    sl__window all = {0, 0, W, H};
    check_roi(dec, jpg, n, ref, W, H, all, 128, 96, 8);
    sl__window tiny = {511, 383, 1, 1};
    check_roi(dec, jpg, n, ref, W, H, tiny, 1, 1, 1);
    /* Edges on iMCU boundaries (16 here), where the cropped upsampler
     * would see an edge. */
    sl__window aligned = {96, 48, 320, 160};
    check_roi(dec, jpg, n, ref, W, H, aligned, 320, 160, 1);
    check_roi(dec, jpg, n, ref, W, H, aligned, 160, 80, 2);
    sl__window aligned2 = {32, 16, 32, 16};
    check_roi(dec, jpg, n, ref, W, H, aligned2, 32, 16, 1);
    free(ref);
    free(jpg);

    /* Progressive and restart files take the same paths. */
    ju_opts prog = {95, 1, 0, 0}, rst = {95, 0, 2, 1};
    for (int k = 0; k < 2; k++) {
        jpg = ju_make(W, H, 12, k ? &rst : &prog, &n);
        ref = full(dec, jpg, n, W, H);
        check_roi(dec, jpg, n, ref, W, H, win, 100, 75, 8);
        check_roi(dec, jpg, n, ref, W, H, win, 300, 200, 2);
        check_roi(dec, jpg, n, ref, W, H, corner, 224, 150, 1);
        free(ref);
        free(jpg);
    }
    /* An odd size whose last iMCU row and column are partial. */
    W = 4000, H = 3;
    jpg = ju_make(W, H, 13, NULL, &n);
    ref = full(dec, jpg, n, W, H);
    sl__window strip = {1000.5, 0, 2000, 3};
    check_roi(dec, jpg, n, ref, W, H, strip, 2, 3, 1);
    free(ref);
    free(jpg);
    sl__jpeg_free(dec);
}

/* Header + decode of the whole image at full scale. */
static int try_decode(sl__jpeg *dec, const uint8_t *p, size_t n, bool allow_warnings)
{
    sl__jpeg_info info;
    int rc = sl__jpeg_header(dec, p, n, MAXPX, &info);
    if (rc)
        return rc;
    sl__window win = {0, 0, info.width, info.height};
    sl__decoded d;
    rc = sl__jpeg_decode(dec, p, n, &win, info.width, info.height, allow_warnings, &d);
    if (rc == 0) { /* touch every byte: ASan checks the region */
        unsigned s = 0;
        for (int y = 0; y < d.height; y++)
            for (int x = 0; x < d.width * 3; x++)
                s += d.rgb[y * d.stride + x];
        (void)s;
    }
    return rc;
}

static void test_truncated(void **state)
{
    (void)state;
    size_t n;
    uint8_t *jpg = ju_make(300, 200, 21, NULL, &n);
    sl__jpeg *dec = sl__jpeg_new();
    assert_int_equal(try_decode(dec, jpg, n, false), 0);
    size_t cuts[] = {2, 3, 10, 100, 400, n / 2, n - 40};
    for (size_t k = 0; k < sizeof cuts / sizeof cuts[0]; k++) {
        uint8_t *p = malloc(cuts[k]); /* exact size: ASan catches overreads */
        memcpy(p, jpg, cuts[k]);
        int rc = try_decode(dec, p, cuts[k], false);
        print_message("truncated at %zu: %d %s\n", cuts[k], rc, sl_last_error());
        assert_int_equal(rc, SL_ECORRUPT);
        assert_int_equal(sl_last_error_code(), SL_ECORRUPT);
        if (cuts[k] >= 1000) /* past the headers: the EOI check finds it */
            assert_string_equal(sl_last_error(), "truncated (no end-of-image marker)");
        /* Tolerated when asked: rows after the cut are filled in. */
        if (cuts[k] >= 1000)
            assert_int_equal(try_decode(dec, p, cuts[k], true), 0);
        free(p);
    }
    /* Without its EOI marker the file counts as truncated, though here only
     * the marker is missing: telling that apart would mean decoding rows a
     * crop does not need. Tolerated with allow_warnings. */
    assert_int_equal(try_decode(dec, jpg, n - 2, false), SL_ECORRUPT);
    assert_int_equal(try_decode(dec, jpg, n - 2, true), 0);
    /* Garbage after the EOI is fine, an FF D9 inside it too. */
    uint8_t *tail = malloc(n + 300);
    memcpy(tail, jpg, n);
    for (int i = 0; i < 300; i++)
        tail[n + i] = (uint8_t)(i * 37 % 251);
    tail[n + 100] = 0xFF, tail[n + 101] = 0xD9;
    assert_int_equal(try_decode(dec, tail, n + 300, false), 0);
    tail[n + 101] = 0x00;
    assert_int_equal(try_decode(dec, tail, n + 300, false), 0);
    free(tail);
    /* The same decoder still works afterwards. */
    assert_int_equal(try_decode(dec, jpg, n, false), 0);
    free(jpg);
    sl__jpeg_free(dec);
}

static void test_bitflips(void **state)
{
    (void)state;
    size_t n;
    uint8_t *jpg = ju_make(160, 120, 22, NULL, &n);
    uint8_t *p = malloc(n);
    sl__jpeg *dec = sl__jpeg_new();
    /* The entropy-coded data starts after the SOS header. */
    size_t sos = 0;
    for (size_t i = 2; i + 1 < n; i++)
        if (jpg[i] == 0xFF && jpg[i + 1] == 0xDA) {
            sos = i;
            break;
        }
    assert_true(sos > 0);
    int errors = 0, trials = 0;
    uint32_t r = 1;
    for (int t = 0; t < 600; t++) {
        memcpy(p, jpg, n);
        r = ju_hash(r + (uint32_t)t);
        /* Flips anywhere for the first third (markers, tables), else in
         * the entropy data. */
        size_t at = t < 200 ? 2 + r % (n - 2) : sos + 14 + r % (n - sos - 16);
        p[at] ^= (uint8_t)(1u << (r >> 29));
        int rc = try_decode(dec, p, n, false);
        assert_true(rc == 0 || rc == SL_ECORRUPT || rc == SL_ERANGE);
        if (rc)
            assert_true(strlen(sl_last_error()) > 0);
        errors += rc != 0;
        trials++;
    }
    /* libjpeg cannot notice most flips (any bit string decodes to
     * something); what matters is that none crashes or reads outside the
     * data (ASan), and that the ones it notices are errors. */
    print_message("bit flips: %d of %d detected\n", errors, trials);
    assert_true(errors > 0);
    free(p);
    free(jpg);
    sl__jpeg_free(dec);
}

static void test_not_jpeg(void **state)
{
    (void)state;
    sl__jpeg *dec = sl__jpeg_new();
    sl__jpeg_info info;
    uint8_t zero[1] = {0};
    assert_int_equal(sl__jpeg_header(dec, zero, 0, MAXPX, &info), SL_ECORRUPT);
    assert_string_equal(sl_last_error(), "not a JPEG (0 bytes)");
    uint8_t soi[2] = {0xFF, 0xD8};
    assert_int_equal(sl__jpeg_header(dec, soi, 2, MAXPX, &info), SL_ECORRUPT);
    uint8_t zeros[64] = {0};
    assert_int_equal(sl__jpeg_header(dec, zeros, sizeof zeros, MAXPX, &info), SL_ECORRUPT);
    assert_string_equal(sl_last_error(), "not a JPEG (starts with 00 00 00 00)");
    static const uint8_t png[] = {0x89, 'P',  'N',  'G',  0x0D, 0x0A, 0x1A, 0x0A,
                                  0,    0,    0,    13,   'I',  'H',  'D',  'R'};
    assert_int_equal(sl__jpeg_header(dec, png, sizeof png, MAXPX, &info), SL_ECORRUPT);
    assert_string_equal(sl_last_error(), "not a JPEG (starts with 89 50 4E 47, a PNG)");
    static const uint8_t gif[] = "GIF89a\x01\x00\x01\x00";
    assert_int_equal(sl__jpeg_header(dec, gif, sizeof gif, MAXPX, &info), SL_ECORRUPT);
    assert_non_null(strstr(sl_last_error(), "a GIF"));
    static const uint8_t webp[] = "RIFF\x10\x00\x00\x00WEBPVP8 ";
    assert_int_equal(sl__jpeg_header(dec, webp, sizeof webp, MAXPX, &info), SL_ECORRUPT);
    assert_non_null(strstr(sl_last_error(), "a WebP"));
    /* Garbage after a valid SOI. */
    uint8_t junk[4096];
    uint32_t r = 7;
    for (int t = 0; t < 50; t++) {
        for (size_t i = 0; i < sizeof junk; i++)
            junk[i] = (uint8_t)(r = ju_hash(r + (uint32_t)i));
        junk[0] = 0xFF, junk[1] = 0xD8;
        int rc = try_decode(dec, junk, sizeof junk, false);
        assert_true(rc == SL_ECORRUPT || rc == SL_ERANGE);
    }
    /* Decoding without a header for the data is a usage error. */
    sl__window win = {0, 0, 1, 1};
    sl__decoded d;
    assert_int_equal(sl__jpeg_decode(dec, junk, sizeof junk, &win, 1, 1, 0, &d), SL_ESTATE);
    sl__jpeg_free(dec);
}

static void test_huge_dimensions(void **state)
{
    (void)state;
    size_t n;
    uint8_t *jpg = ju_make(64, 48, 23, NULL, &n);
    /* SOF0: FF C0, length (2), precision (1), height (2), width (2). */
    size_t sof = 0;
    for (size_t i = 2; i + 1 < n; i++)
        if (jpg[i] == 0xFF && jpg[i + 1] == 0xC0) {
            sof = i;
            break;
        }
    assert_true(sof > 0);
    jpg[sof + 5] = 60000 >> 8, jpg[sof + 6] = 60000 & 255;
    jpg[sof + 7] = 60000 >> 8, jpg[sof + 8] = 60000 & 255;
    sl__jpeg *dec = sl__jpeg_new();
    int64_t before = sl_memory_in_use();
    sl__jpeg_info info;
    assert_int_equal(sl__jpeg_header(dec, jpg, n, MAXPX, &info), SL_ERANGE);
    assert_string_equal(sl_last_error(),
                        "image is 60000x60000 (3600000000 pixels), over max_pixels 100000000");
    sl__decoded d;
    assert_int_equal(sl__jpeg_decode_full(dec, jpg, n, MAXPX, 0, &d), SL_ERANGE);
    assert_true(sl_memory_in_use() - before < 1 << 20);
    /* Under the limit the header is fine (and the data then runs out). */
    assert_int_equal(sl__jpeg_header(dec, jpg, n, 4000000000LL, &info), 0);
    assert_int_equal(info.width, 60000);
    sl__jpeg_free(dec);
    free(jpg);
}

static void test_reuse_allocates_nothing(void **state)
{
    (void)state;
    size_t n1, n2;
    uint8_t *a = ju_make(500, 375, 31, NULL, &n1);
    uint8_t *b = ju_make(375, 500, 32, NULL, &n2);
    sl__jpeg *dec = sl__jpeg_new();
    sl__window wa = {20, 10, 400, 300}, wb = {5, 50, 300, 400};
    sl__decoded d;
    sl__jpeg_info info;
    int64_t steady = 0;
    for (int i = 0; i < 20; i++) {
        assert_int_equal(sl__jpeg_header(dec, a, n1, MAXPX, &info), 0);
        assert_int_equal(sl__jpeg_decode(dec, a, n1, &wa, 224, 224, 0, &d), 0);
        assert_int_equal(sl__jpeg_header(dec, b, n2, MAXPX, &info), 0);
        assert_int_equal(sl__jpeg_decode(dec, b, n2, &wb, 224, 224, 0, &d), 0);
        if (i == 1)
            steady = sl_memory_in_use();
        if (i > 1)
            assert_int_equal(sl_memory_in_use(), steady);
    }
    /* A header that is never decoded, then another image: fine. */
    assert_int_equal(sl__jpeg_header(dec, a, n1, MAXPX, &info), 0);
    assert_int_equal(sl__jpeg_decode_full(dec, b, n2, MAXPX, 0, &d), 0);
    assert_int_equal(d.width, 375);
    sl__jpeg_free(dec);
    free(a);
    free(b);
}

static void test_odd_windows(void **state)
{
    (void)state;
    size_t n;
    uint8_t *jpg = ju_make(200, 100, 42, NULL, &n);
    sl__jpeg *dec = sl__jpeg_new();
    /* Outside, empty, negative, NaN: a valid (at least 1x1) region inside
     * the image, never a crash. */
    const sl__window odd[] = {{1e12, -1e12, 5, 5}, {-50, -50, 1e15, 1e15}, {10, 10, 0, 0},
                              {199.9, 99.9, 1e-9, 1e-9}, {20, 20, -5, -5}, {NAN, NAN, NAN, NAN}};
    for (size_t k = 0; k < sizeof odd / sizeof odd[0]; k++) {
        sl__jpeg_info info;
        sl__decoded d;
        assert_int_equal(sl__jpeg_header(dec, jpg, n, MAXPX, &info), 0);
        assert_int_equal(sl__jpeg_decode(dec, jpg, n, &odd[k], 8, 8, 0, &d), 0);
        assert_true(d.width >= 1 && d.width <= 200 && d.height >= 1 && d.height <= 100);
    }
    free(jpg);
    sl__jpeg_free(dec);
}

/* One decoder per thread, as map workers use them: nothing shared but
 * the allocator and the input bytes (TSan checks). */
typedef struct worker {
    const uint8_t *jpg;
    size_t n;
    uint64_t sum;
    int rc;
} worker;

static void *decode_worker(void *arg)
{
    worker *wk = arg;
    sl__jpeg *dec = sl__jpeg_new();
    for (int i = 0; i < 20 && wk->rc == 0; i++) {
        sl__jpeg_info info;
        sl__decoded d;
        sl__window win = {i * 7.5, i * 3.25, 200, 150};
        wk->rc = sl__jpeg_header(dec, wk->jpg, wk->n, MAXPX, &info);
        if (!wk->rc)
            wk->rc = sl__jpeg_decode(dec, wk->jpg, wk->n, &win, 100 - i, 75, 0, &d);
        for (int y = 0; !wk->rc && y < d.height; y++)
            for (int x = 0; x < d.width * 3; x++)
                wk->sum += d.rgb[y * d.stride + x];
    }
    sl__jpeg_free(dec);
    return NULL;
}

static void test_threads(void **state)
{
    (void)state;
    size_t n;
    uint8_t *jpg = ju_make(400, 300, 41, NULL, &n);
    worker one = {jpg, n, 0, 0};
    decode_worker(&one);
    assert_int_equal(one.rc, 0);
    worker wk[4];
    pthread_t th[4];
    for (int i = 0; i < 4; i++) {
        wk[i] = (worker){jpg, n, 0, 0};
        assert_int_equal(pthread_create(&th[i], NULL, decode_worker, &wk[i]), 0);
    }
    for (int i = 0; i < 4; i++) {
        pthread_join(th[i], NULL);
        assert_int_equal(wk[i].rc, 0);
        assert_true(wk[i].sum == one.sum);
    }
    free(jpg);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_rgb_sizes),
        cmocka_unit_test(test_progressive_restart),
        cmocka_unit_test(test_gray),
        cmocka_unit_test(test_cmyk),
        cmocka_unit_test(test_roi_scales),
        cmocka_unit_test(test_fast_upsample),
        cmocka_unit_test(test_truncated),
        cmocka_unit_test(test_bitflips),
        cmocka_unit_test(test_not_jpeg),
        cmocka_unit_test(test_huge_dimensions),
        cmocka_unit_test(test_reuse_allocates_nothing),
        cmocka_unit_test(test_odd_windows),
        cmocka_unit_test(test_threads),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
