/*
 * auto_augment's per-pixel ops on uint8 RGB, torchvision's on tensors:
 * blends with a constant (brightness, contrast) or with the gray image
 * (color), computed in float32 and truncated as _blend; and the ops that
 * are a byte table per channel (posterize, solarize, invert,
 * autocontrast, equalize, and the constant blends), which run through
 * the tier's table kernel.
 */
#include <string.h>
#include "augment_kernels.h"

/* torchvision's rgb_to_grayscale on uint8: float32 weights, truncated. */
static inline uint8_t gray_u8(const uint8_t *p)
{
    return (uint8_t)(0.2989f * p[0] + 0.587f * p[1] + 0.114f * p[2]);
}

/* rgb_to_grayscale of BLOCK pixels: the channels into float lanes, then
 * torchvision's float32 weights and truncation in vector blocks. */
static inline void gray_block(const uint8_t *p, int32_t *g)
{
    float r[BLOCK], gg[BLOCK], b[BLOCK];
    for (int j = 0; j < BLOCK; j++) {
        r[j] = p[3 * j];
        gg[j] = p[3 * j + 1];
        b[j] = p[3 * j + 2];
    }
    for (int j = 0; j < BLOCK; j++)
        g[j] = (int32_t)(0.2989f * r[j] + 0.587f * gg[j] + 0.114f * b[j]);
}

double sl__aug_mean_gray(const uint8_t *img, size_t n)
{
    uint64_t sum = 0;
    size_t i = 0;
    for (; i + BLOCK <= n; i += BLOCK) {
        int32_t g[BLOCK];
        gray_block(img + 3 * i, g);
        for (int j = 0; j < BLOCK; j++)
            sum += (uint64_t)g[j];
    }
    for (; i < n; i++)
        sum += gray_u8(img + 3 * i);
    return n ? (double)sum / (double)n : 0;
}

static void apply_lut(const uint8_t lut[3][256], uint8_t *img, size_t n)
{
    sl__aug_kernels()->lut(lut, img, 0, 3 * n);
}

/* _blend(img, other, f) where other is a constant: one table. */
void sl__aug_blend_const(uint8_t *img, size_t n, float f, float other)
{
    uint8_t lut[3][256];
    for (int v = 0; v < 256; v++)
        lut[0][v] = lut[1][v] = lut[2][v] = (uint8_t)sl__aug_clamp(f * v + (1 - f) * other);
    apply_lut(lut, img, n);
}

/* adjust_saturation: _blend(img, grayscale(img), f). */
void sl__aug_blend_gray(uint8_t *img, size_t n, float f)
{
    size_t i = 0;
    for (; i + BLOCK <= n; i += BLOCK) { /* gray of BLOCK pixels, then their bytes */
        uint8_t *p = img + 3 * i;
        int32_t gi[BLOCK];
        float g[3 * BLOCK], out[3 * BLOCK];
        gray_block(p, gi);
        for (int j = 0; j < BLOCK; j++) /* each pixel's gray under its 3 bytes */
            g[3 * j] = g[3 * j + 1] = g[3 * j + 2] = (1 - f) * (float)gi[j];
        for (int j = 0; j < 3 * BLOCK; j++)
            out[j] = sl__aug_clamp(f * p[j] + g[j]);
        for (int j = 0; j < 3 * BLOCK; j++)
            p[j] = (uint8_t)out[j];
    }
    for (; i < n; i++) {
        uint8_t *p = img + 3 * i;
        float g = (1 - f) * gray_u8(p);
        p[0] = (uint8_t)sl__aug_clamp(f * p[0] + g);
        p[1] = (uint8_t)sl__aug_clamp(f * p[1] + g);
        p[2] = (uint8_t)sl__aug_clamp(f * p[2] + g);
    }
}

void sl__aug_autocontrast(uint8_t *img, size_t n)
{
    /* per lane over blocks of 48 bytes (16 pixels), lane j channel j % 3 */
    uint8_t mn[48], mx[48], lo[3] = {255, 255, 255}, hi[3] = {0, 0, 0};
    memset(mn, 255, sizeof mn);
    memset(mx, 0, sizeof mx);
    size_t i = 0, bytes = 3 * n;
    for (; i + 48 <= bytes; i += 48)
        for (int j = 0; j < 48; j++) {
            mn[j] = img[i + j] < mn[j] ? img[i + j] : mn[j];
            mx[j] = img[i + j] > mx[j] ? img[i + j] : mx[j];
        }
    for (int j = 0; j < 48; j++) {
        lo[j % 3] = mn[j] < lo[j % 3] ? mn[j] : lo[j % 3];
        hi[j % 3] = mx[j] > hi[j % 3] ? mx[j] : hi[j % 3];
    }
    for (; i < bytes; i++) {
        lo[i % 3] = img[i] < lo[i % 3] ? img[i] : lo[i % 3];
        hi[i % 3] = img[i] > hi[i % 3] ? img[i] : hi[i % 3];
    }
    uint8_t lut[3][256];
    for (int c = 0; c < 3; c++) {
        float mn = lo[c], scale = 255.0f / (float)(hi[c] - lo[c]);
        if (hi[c] == lo[c])
            mn = 0, scale = 1;
        for (int v = 0; v < 256; v++)
            lut[c][v] = (uint8_t)sl__aug_clamp(((float)v - mn) * scale);
    }
    apply_lut(lut, img, n);
}

/* equalize: torchvision's _scale_channel per channel. */
void sl__aug_equalize(uint8_t *img, size_t n)
{
    uint32_t hist[3][256];
    memset(hist, 0, sizeof hist);
    for (size_t i = 0; i < n; i++)
        for (int c = 0; c < 3; c++)
            hist[c][img[3 * i + c]]++;
    uint8_t lut[3][256];
    for (int c = 0; c < 3; c++) {
        int last = 255;
        while (last > 0 && !hist[c][last])
            last--;
        uint64_t total = 0; /* all but the last non-zero bin */
        for (int v = 0; v < last; v++)
            total += hist[c][v];
        uint64_t step = total / 255, cum = 0;
        for (int v = 0; v < 256; v++) {
            if (step == 0) {
                lut[c][v] = (uint8_t)v;
                continue;
            }
            uint64_t l = (cum + step / 2) / step; /* cumsum shifted by one */
            lut[c][v] = (uint8_t)(l > 255 ? 255 : l);
            cum += hist[c][v];
        }
    }
    apply_lut(lut, img, n);
}

void sl__aug_point_op(uint8_t *img, size_t n, int kind, float mag)
{
    uint8_t lut[3][256];
    for (int v = 0; v < 256; v++) {
        uint8_t r = (uint8_t)v;
        if (kind == SL__OP_POSTERIZE)
            r = (uint8_t)(v & ~((1 << (8 - (int)mag)) - 1));
        else if (kind == SL__OP_SOLARIZE)
            r = (float)v >= mag ? (uint8_t)(255 - v) : (uint8_t)v;
        else if (kind == SL__OP_INVERT)
            r = (uint8_t)(255 - v);
        lut[0][v] = lut[1][v] = lut[2][v] = r;
    }
    apply_lut(lut, img, n);
}
