/*
 * Samples in the file's own terms (image.h): nearest-neighbour resampling
 * for SL_DECODE_RAW, which must hand back only values the file holds (a
 * label map's classes, a depth map's millimetres), and the alpha
 * compositing of SL_DECODE_RGB's blend_alpha.
 */
#include <math.h>
#include <string.h>
#include "../core/error.h"
#include "image.h"

/* The output channel each source channel feeds, as sl_image_decode says:
 * map[c] is the source sample of output channel c, -1 the opaque alpha.
 * 0, or an error for colour into gray. */
static int channel_map(int in, int out, int map[4])
{
    static const int gray[4] = {0, 0, 0, -1};
    for (int c = 0; c < out; c++)
        map[c] = c;
    if (in == out)
        return 0;
    if (in <= 2 && out >= 3) { /* gray replicated, its alpha kept where there is room */
        for (int c = 0; c < out; c++)
            map[c] = gray[c];
        if (in == 2 && out == 4)
            map[3] = 1;
        return 0;
    }
    if (out == in + 1 && (in == 1 || in == 3)) { /* an opaque alpha added */
        map[in] = -1;
        return 0;
    }
    if (out == in - 1 && (in == 2 || in == 4)) /* the alpha dropped */
        return 0;
    return sl__set_error(SL_EUNSUPPORTED, "decode=raw: a file of %d channels (%s) into %d "
                         "channels would need a colour conversion, which raw mode does not do",
                         in, in >= 3 ? "colour" : "gray", out);
}

/* The source index under each output pixel's centre, clamped. */
static inline int nearest(double origin, double scale, int i, int limit)
{
    int k = (int)floor(origin + (i + 0.5) * scale);
    return k < 0 ? 0 : k >= limit ? limit - 1 : k;
}

/* The common case, the file's pixels unchanged (a mask into its own
 * channels and depth, HWC or one channel): bpp bytes copied per output
 * pixel, the width a constant where it is a usual one. */
static int copy_pixels(const sl__raw *src, double sy, double y0, void *dst, int out_w, int out_h,
                       size_t bpp, const int *cols)
{
    for (int y = 0; y < out_h; y++) {
        const uint8_t *row = src->data + (size_t)nearest(y0, sy, y, src->height) * src->stride;
        uint8_t *o = (uint8_t *)dst + (size_t)y * out_w * bpp;
        switch (bpp) {
        case 1:
            for (int x = 0; x < out_w; x++)
                o[x] = row[cols[x]];
            break;
        case 2:
            for (int x = 0; x < out_w; x++)
                memcpy(o + 2 * x, row + cols[x], 2);
            break;
        case 3:
            for (int x = 0; x < out_w; x++)
                memcpy(o + 3 * x, row + cols[x], 3);
            break;
        case 4:
            for (int x = 0; x < out_w; x++)
                memcpy(o + 4 * x, row + cols[x], 4);
            break;
        default:
            for (int x = 0; x < out_w; x++)
                memcpy(o + bpp * x, row + cols[x], bpp);
        }
    }
    return 0;
}

int sl__raw_resample(const sl__raw *src, const sl__window *win, void *dst, int out_w, int out_h,
                     int channels, int dtype, int layout, bool flip, int *cols)
{
    int map[4];
    int rc = channel_map(src->channels, channels, map);
    if (rc)
        return rc;
    if (src->bytes == 2 && dtype != SL_UINT16)
        return sl__set_error(SL_ERANGE, "decode=raw: a 16-bit file into uint8 would lose its "
                             "values (ask for dtype uint16)");
    double sx = win->w / out_w, sy = win->h / out_h;
    for (int x = 0; x < out_w; x++)
        cols[flip ? out_w - 1 - x : x] = nearest(win->x, sx, x, src->width) * src->step;
    uint16_t opaque = src->bytes == 2 ? 65535 : 255;
    size_t plane = (size_t)out_w * out_h;
    bool chw = layout == SL_LAYOUT_CHW;
    bool same = src->channels == channels && (src->bytes == 2) == (dtype == SL_UINT16);
    if (same && (!chw || channels == 1)) /* each pixel's bytes as they are */
        return copy_pixels(src, sy, win->y, dst, out_w, out_h, (size_t)channels * src->bytes,
                           cols);
    for (int y = 0; y < out_h; y++) {
        const uint8_t *row = src->data + (size_t)nearest(win->y, sy, y, src->height) * src->stride;
        size_t at = (size_t)y * out_w;
        for (int x = 0; x < out_w; x++, at++) {
            const uint8_t *px = row + cols[x];
            for (int c = 0; c < channels; c++) {
                uint16_t v;
                if (map[c] < 0)
                    v = opaque;
                else if (src->bytes == 2)
                    v = ((const uint16_t *)(const void *)px)[map[c]];
                else
                    v = px[map[c]];
                size_t i = chw ? c * plane + at : at * channels + c;
                if (dtype == SL_UINT16)
                    ((uint16_t *)dst)[i] = v;
                else
                    ((uint8_t *)dst)[i] = (uint8_t)v;
            }
        }
    }
    return 0;
}

void sl__blend_rows(uint8_t *rows, int w, int h, size_t stride, const int *background)
{
    for (int y = 0; y < h; y++) {
        uint8_t *p = rows + (size_t)y * stride;
        /* forward in place: pixel x's RGB lands at or before its RGBA */
        for (int x = 0; x < w; x++) {
            unsigned a = p[4 * x + 3];
            for (int c = 0; c < 3; c++) {
                unsigned v = p[4 * x + c] * a + (unsigned)background[c] * (255 - a) + 128;
                p[3 * x + c] = (uint8_t)((v + (v >> 8)) >> 8); /* v / 255, rounded */
            }
        }
    }
}
