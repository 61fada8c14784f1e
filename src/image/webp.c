/*
 * WebP through libwebp (image.h, sl__webp_*), lossy and lossless: only the
 * window is decoded (use_cropping), and scaled down by libwebp's own
 * rescaler by a whole factor while the result still covers the output
 * (use_scaling), as the JPEG path picks a DCT scale; sluice's resampler
 * does the rest. Alpha is dropped, as PIL's convert("RGB") drops it, or
 * blended over a background; raw mode keeps it.
 */
#include <math.h>
#include <string.h>
#include "../core/alloc.h"
#include "../core/error.h"
#include "image.h"

#ifdef SLUICE_NO_WEBP

sl__webp *sl__webp_new(void)
{
    return NULL;
}
void sl__webp_free(sl__webp *dec)
{
    (void)dec;
}
int sl__webp_header(sl__webp *dec, const uint8_t *data, size_t n, int64_t max_pixels,
                    sl__jpeg_info *info)
{
    (void)dec, (void)data, (void)n, (void)max_pixels, (void)info;
    return sl__set_error(SL_EUNSUPPORTED, "a WebP, and this build has no WebP decoder "
                         "(SLUICE_WITH_WEBP=OFF)");
}
int sl__webp_decode(sl__webp *dec, const uint8_t *data, size_t n, const sl__window *win,
                    int out_w, int out_h, const int *background, sl__decoded *out)
{
    (void)dec, (void)data, (void)n, (void)win, (void)out_w, (void)out_h, (void)background;
    (void)out;
    return SL_EUNSUPPORTED;
}
int sl__webp_decode_raw(sl__webp *dec, const uint8_t *data, size_t n, const sl__window *win,
                        sl__raw *out)
{
    (void)dec, (void)data, (void)n, (void)win, (void)out;
    return SL_EUNSUPPORTED;
}

#else

#include <webp/decode.h>

struct sl__webp {
    uint8_t *buf;
    size_t cap;
    int width, height;
    bool alpha; /* the file has an alpha channel */
};

sl__webp *sl__webp_new(void)
{
    return sl__calloc(1, sizeof(sl__webp));
}

void sl__webp_free(sl__webp *dec)
{
    if (!dec)
        return;
    sl__free(dec->buf, dec->cap);
    sl__free(dec, sizeof *dec);
}

static const char *status_name(VP8StatusCode s)
{
    switch (s) {
    case VP8_STATUS_OUT_OF_MEMORY: return "out of memory";
    case VP8_STATUS_INVALID_PARAM: return "invalid parameter";
    case VP8_STATUS_BITSTREAM_ERROR: return "bitstream error";
    case VP8_STATUS_UNSUPPORTED_FEATURE: return "unsupported feature";
    case VP8_STATUS_SUSPENDED: return "suspended";
    case VP8_STATUS_USER_ABORT: return "aborted";
    case VP8_STATUS_NOT_ENOUGH_DATA: return "truncated (not enough data)";
    default: return "error";
    }
}

static int webp_fail(VP8StatusCode s, const char *what)
{
    return sl__set_error(s == VP8_STATUS_OUT_OF_MEMORY ? SL_ENOMEM : SL_ECORRUPT, "WebP %s: %s",
                         what, status_name(s));
}

int sl__webp_header(sl__webp *dec, const uint8_t *data, size_t n, int64_t max_pixels,
                    sl__jpeg_info *info)
{
    if (!dec)
        return sl__set_error(SL_ENOMEM, "out of memory (WebP decoder)");
    WebPBitstreamFeatures f;
    VP8StatusCode s = WebPGetFeatures(data, n, &f);
    if (s != VP8_STATUS_OK)
        return webp_fail(s, "header");
    if (f.has_animation)
        return sl__set_error(SL_EUNSUPPORTED, "an animated WebP (only still images decode)");
    int64_t px = (int64_t)f.width * f.height;
    if (max_pixels > 0 && px > max_pixels)
        return sl__set_error(SL_ERANGE, "WebP of %dx%d = %lld pixels, over max_pixels %lld",
                             f.width, f.height, (long long)px, (long long)max_pixels);
    dec->width = f.width;
    dec->height = f.height;
    dec->alpha = f.has_alpha;
    *info = (sl__jpeg_info){f.width, f.height, 3, false};
    return 0;
}

/* The pixels around window win, scaled down by the whole factor k, in
 * libwebp's colour mode (bpp bytes a pixel) into dec->buf: their size in
 * *w x *h and the window in them in *in. */
static int decode_window(sl__webp *dec, const uint8_t *data, size_t n, const sl__window *win,
                         int k, WEBP_CSP_MODE mode, int bpp, int *w, int *h, sl__window *in)
{
    /* whole pixels around the window, the corner on even coordinates (the
     * lossy decoder's chroma grid) */
    int x0 = (int)floor(win->x) & ~1, y0 = (int)floor(win->y) & ~1;
    int x1 = (int)ceil(win->x + win->w), y1 = (int)ceil(win->y + win->h);
    x1 = x1 > dec->width ? dec->width : x1;
    y1 = y1 > dec->height ? dec->height : y1;
    int cw = x1 - x0 > 0 ? x1 - x0 : 1, ch = y1 - y0 > 0 ? y1 - y0 : 1;
    int sw = (cw + k - 1) / k, sh = (ch + k - 1) / k;
    size_t stride = (size_t)sw * bpp, need = stride * (size_t)sh;
    if (need > dec->cap) {
        sl__free(dec->buf, dec->cap);
        dec->cap = 0;
        dec->buf = sl__alloc(need);
        if (!dec->buf)
            return sl__set_error(SL_ENOMEM, "WebP: out of memory for %zu bytes", need);
        dec->cap = need;
    }
    WebPDecoderConfig cfg;
    if (!WebPInitDecoderConfig(&cfg))
        return sl__set_error(SL_EINTERNAL, "WebP: libwebp version mismatch");
    cfg.options.use_cropping = 1;
    cfg.options.crop_left = x0;
    cfg.options.crop_top = y0;
    cfg.options.crop_width = cw;
    cfg.options.crop_height = ch;
    if (k > 1) {
        cfg.options.use_scaling = 1;
        cfg.options.scaled_width = sw;
        cfg.options.scaled_height = sh;
    }
    cfg.output.colorspace = mode;
    cfg.output.is_external_memory = 1;
    cfg.output.u.RGBA.rgba = dec->buf;
    cfg.output.u.RGBA.stride = (int)stride;
    cfg.output.u.RGBA.size = need;
    VP8StatusCode s = WebPDecode(data, n, &cfg);
    WebPFreeDecBuffer(&cfg.output);
    if (s != VP8_STATUS_OK)
        return webp_fail(s, "data");
    double fx = (double)sw / cw, fy = (double)sh / ch;
    *w = sw, *h = sh;
    *in = (sl__window){(win->x - x0) * fx, (win->y - y0) * fy, win->w * fx, win->h * fy};
    return 0;
}

int sl__webp_decode(sl__webp *dec, const uint8_t *data, size_t n, const sl__window *win,
                    int out_w, int out_h, const int *background, sl__decoded *out)
{
    /* the largest whole factor that keeps the window at least the output */
    int k = 1;
    while (win->w / (k + 1) >= out_w && win->h / (k + 1) >= out_h)
        k++;
    bool blend = background && dec->alpha;
    int w, h, bpp = blend ? 4 : 3;
    sl__window in;
    int rc = decode_window(dec, data, n, win, k, blend ? MODE_RGBA : MODE_RGB, bpp, &w, &h, &in);
    if (rc)
        return rc;
    if (blend)
        sl__blend_rows(dec->buf, w, h, (size_t)w * 4, background);
    *out = (sl__decoded){dec->buf, w, h, (size_t)w * bpp, in, k};
    return 0;
}

int sl__webp_decode_raw(sl__webp *dec, const uint8_t *data, size_t n, const sl__window *win,
                        sl__raw *out)
{
    int w, h, ch = dec->alpha ? 4 : 3;
    sl__window in;
    int rc = decode_window(dec, data, n, win, 1, dec->alpha ? MODE_RGBA : MODE_RGB, ch, &w, &h,
                           &in);
    if (rc)
        return rc;
    *out = (sl__raw){dec->buf, w, h, (size_t)w * ch, ch, 1, ch, in};
    return 0;
}

#endif
