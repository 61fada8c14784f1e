/*
 * Portable kernels: the integers every other tier must reproduce, the only
 * tier off x86 (or with -DSL__IMAGE_PORTABLE), and the short tails that
 * wider tiers hand over.
 */
#include "resize_kernels.h"

/* The same sums one byte at a time, from column x on. */
static void vertical_from(const uint8_t *src, size_t stride, const int16_t *w, int taps,
                          int16_t *dst, int x, int n)
{
    for (; x < n; x++) {
        int32_t acc = 1 << (VSHIFT - 1);
        for (int k = 0; k < taps; k++)
            acc += (int32_t)w[k] * src[(size_t)k * stride + x];
        dst[x] = (int16_t)(acc >> VSHIFT);
    }
}

/* Blocks of a constant 16 bytes, which gcc -O2 vectorises. */
void sl__vertical_c(const uint8_t *src, size_t stride, const int16_t *w, int taps,
                    int16_t *dst, int n)
{
    int x = 0;
    for (; x + 16 <= n; x += 16) {
        int32_t acc[16];
        for (int i = 0; i < 16; i++)
            acc[i] = 1 << (VSHIFT - 1);
        for (int k = 0; k < taps; k++) {
            const uint8_t *p = src + (size_t)k * stride + x;
            int16_t wk = w[k];
            for (int i = 0; i < 16; i++)
                acc[i] += (int32_t)wk * (int16_t)p[i];
        }
        for (int i = 0; i < 16; i++)
            dst[x + i] = (int16_t)(acc[i] >> VSHIFT);
    }
    vertical_from(src, stride, w, taps, dst, x, n);
}

static inline uint8_t to_u8(int32_t v)
{
    v >>= HSHIFT;
    return (uint8_t)(v > 255 ? 255 : v); /* weights are >= 0: never below 0 */
}

/* RGB: inlined per tap count so that the tap loop unrolls. */
static inline __attribute__((always_inline)) void
horizontal_n(const sl__axis *ax, const int16_t *row, uint8_t *line, bool flip, int taps)
{
    int out = ax->out;
    for (int i = 0; i < out; i++) {
        const int16_t *p = row + 3 * (ax->start[i] - ax->lo);
        const int16_t *w = ax->w + (size_t)i * ax->pitch;
        int32_t r = 1 << (HSHIFT - 1), g = r, b = r;
        for (int k = 0; k < taps; k++) {
            r += (int32_t)w[k] * p[3 * k];
            g += (int32_t)w[k] * p[3 * k + 1];
            b += (int32_t)w[k] * p[3 * k + 2];
        }
        uint8_t *o = line + 3 * (flip ? out - 1 - i : i);
        o[0] = to_u8(r);
        o[1] = to_u8(g);
        o[2] = to_u8(b);
    }
}

static void horizontal(const sl__axis *ax, const int16_t *row, uint8_t *line, bool flip)
{
    switch (ax->taps) {
    case 2: horizontal_n(ax, row, line, flip, 2); break;
    case 3: horizontal_n(ax, row, line, flip, 3); break;
    case 4: horizontal_n(ax, row, line, flip, 4); break;
    case 5: horizontal_n(ax, row, line, flip, 5); break;
    default: horizontal_n(ax, row, line, flip, ax->taps); break;
    }
}

static sl__hpass horizontal_for(sl__axis *a)
{
    (void)a;
    return horizontal;
}

void sl__horizontal1_c(const sl__axis *a, const int16_t *row, uint8_t *line, bool flip, int o0,
                       int o1)
{
    for (int o = o0; o < o1; o++) {
        int i = flip ? a->out - 1 - o : o;
        const int16_t *p = row + (a->start[i] - a->lo);
        const int16_t *w = a->w + (size_t)i * a->pitch;
        int32_t acc = 1 << (HSHIFT - 1);
        for (int k = 0; k < a->taps; k++)
            acc += (int32_t)w[k] * p[k];
        acc >>= HSHIFT;
        line[o] = (uint8_t)(acc > 255 ? 255 : acc < 0 ? 0 : acc);
    }
}

static void horizontal1(const sl__axis *a, const int16_t *row, uint8_t *line, bool flip)
{
    sl__horizontal1_c(a, row, line, flip, 0, a->out);
}

static sl__hpass horizontal1_for(sl__axis *a)
{
    (void)a;
    return horizontal1;
}

static inline int mulhrs(int a, int k)
{
    return (a * k + 0x4000) >> 15;
}

static inline uint8_t sat8(int v)
{
    return (uint8_t)(v < 0 ? 0 : v > 255 ? 255 : v);
}

void sl__ycc_rgb_c(const uint8_t *yl, const uint8_t *cbl, const uint8_t *crl, uint8_t *rgb, int n)
{
    for (int x = 0; x < n; x++) {
        int y = yl[x], cb = cbl[x] - 128, cr = crl[x] - 128;
        rgb[3 * x] = sat8(y + cr + mulhrs(cr, K_CR_R));
        rgb[3 * x + 1] = sat8(y - mulhrs(cb, K_CB_G) - mulhrs(cr, K_CR_G));
        rgb[3 * x + 2] = sat8(y + cb + mulhrs(cb, K_CB_B));
    }
}

static inline int mulhi16(int x, int c)
{
    return (int16_t)((x * c) >> 16);
}

void sl__ycc_rgb_colour_c(const uint8_t *yl, const uint8_t *cbl, const uint8_t *crl, uint8_t *rgb,
                          int n, const int16_t c[6])
{
    for (int x = 0; x < n; x++) {
        int ys = yl[x] * 128, us = (cbl[x] - 128) * 128, vs = (crl[x] - 128) * 128;
        int y = (mulhi16(ys, c[0]) + c[1] + 4) >> 3;
        int cb = (mulhi16(us, c[2]) + mulhi16(vs, c[3]) + 4) >> 3;
        int cr = (mulhi16(us, c[4]) + mulhi16(vs, c[5]) + 4) >> 3;
        rgb[3 * x] = sat8(y + cr + mulhrs(cr, K_CR_R));
        rgb[3 * x + 1] = sat8(y - mulhrs(cb, K_CB_G) - mulhrs(cr, K_CR_G));
        rgb[3 * x + 2] = sat8(y + cb + mulhrs(cb, K_CB_B));
    }
}

const sl__resize_kernels sl__resize_c = {
    .name = "c",
    .level = SL__IMAGE_C,
    .vertical = sl__vertical_c,
    .horizontal_for = horizontal_for,
    .horizontal1_for = horizontal1_for,
    .ycc_rgb = sl__ycc_rgb_c,
    .ycc_rgb_colour = sl__ycc_rgb_colour_c,
};
