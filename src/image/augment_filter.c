/*
 * The neighbourhood filters: adjust_sharpness (a 3 x 3 smoothing kernel,
 * rounded, then a blend) and gaussian_blur (separable, reflect padding,
 * float, rounded), whose multiply-adds are a kernel of every tier.
 */
#include <math.h>
#include <string.h>
#include "../core/error.h"
#include "augment_kernels.h"

/* One row of adjust_sharpness from i0 to i1 (bytes): the smoothed value
 * round(s / 13) as (2 s + 13) * 10083 >> 18, exact for every s up to
 * 13 * 255, then the blend. */
static void sharpen_bytes(const uint8_t *restrict u, const uint8_t *restrict c,
                          const uint8_t *restrict d, uint8_t *restrict o, float f, size_t i0,
                          size_t i1)
{
    for (size_t i = i0; i < i1; i++) {
        int32_t s = u[i - 3] + u[i] + u[i + 3] + c[i - 3] + 5 * c[i] + c[i + 3] + d[i - 3] +
                    d[i] + d[i + 3];
        int32_t deg = ((2 * s + 13) * 10083) >> 18;
        o[i] = (uint8_t)sl__aug_clamp(f * c[i] + (1 - f) * (float)deg);
    }
}

/* adjust_sharpness: blend with the image smoothed by [1 1 1; 1 5 1; 1 1 1]
 * / 13 (rounded), whose border rows and columns are the image's. */
int sl__aug_sharpness(sl__augmenter *a, uint8_t *img, int w, int h, float f)
{
    if (w <= 2 || h <= 2)
        return 0;
    size_t row = 3 * (size_t)w;
    if (sl__aug_reserve((void **)&a->tmp, &a->tmp_cap, row * h))
        return SL_ENOMEM;
    uint8_t *src = a->tmp;
    memcpy(src, img, row * h);
    for (int y = 1; y < h - 1; y++) {
        const uint8_t *u = src + (y - 1) * row, *c = u + row, *d = c + row;
        uint8_t *o = img + y * row;
        size_t i = 3;
        for (; i + BLOCK <= row - 3; i += BLOCK) {
            int32_t deg[BLOCK];
            float out[BLOCK];
            for (int j = 0; j < BLOCK; j++) {
                size_t k = i + j;
                int32_t sum = u[k - 3] + u[k] + u[k + 3] + c[k - 3] + 5 * c[k] + c[k + 3] +
                              d[k - 3] + d[k] + d[k + 3];
                deg[j] = ((2 * sum + 13) * 10083) >> 18;
            }
            for (int j = 0; j < BLOCK; j++)
                out[j] = sl__aug_clamp(f * c[i + j] + (1 - f) * (float)deg[j]);
            for (int j = 0; j < BLOCK; j++)
                o[i + j] = (uint8_t)out[j];
        }
        sharpen_bytes(u, c, d, o, f, i, row - 3);
    }
    return 0;
}

/* Reflection of i into [0, n) without repeating the edge ("reflect"). */
static int reflect(int i, int n)
{
    if (n == 1)
        return 0;
    int period = 2 * (n - 1);
    i %= period;
    if (i < 0)
        i += period;
    return i < n ? i : period - i;
}

/* gaussian_blur: separable, reflect padding, float, rounded. */
int sl__aug_blur(sl__augmenter *a, uint8_t *img, int w, int h, int ksize, float sigma)
{
    enum { KMAX = 255 };
    if (ksize > KMAX)
        ksize = KMAX;
    float wk[KMAX];
    double sum = 0, half = (ksize - 1) * 0.5;
    for (int t = 0; t < ksize; t++) {
        double x = -half + t, v = exp(-0.5 * (x / sigma) * (x / sigma));
        wk[t] = (float)v;
        sum += v;
    }
    for (int t = 0; t < ksize; t++)
        wk[t] = (float)(wk[t] / sum);
    int r = ksize / 2;
    size_t row = 3 * (size_t)w, padded = 3 * ((size_t)w + 2 * r);
    /* h rows after the horizontal pass, then one padded row, one output row */
    if (sl__aug_reserve((void **)&a->f, &a->f_cap, (row * h + padded + row) * sizeof(float)))
        return SL_ENOMEM;
    float *rows = a->f, *pad = rows + row * h, *out = pad + padded;
    const sl__augment_kernels *k = sl__aug_kernels();
    for (int y = 0; y < h; y++) {
        const uint8_t *s = img + y * row;
        for (int x = -r; x < w + r; x++) {
            const uint8_t *p = s + 3 * (size_t)reflect(x, w);
            float *q = pad + 3 * (size_t)(x + r);
            q[0] = p[0], q[1] = p[1], q[2] = p[2];
        }
        float *acc = rows + y * row;
        memset(acc, 0, row * sizeof *acc);
        for (int t = 0; t < ksize; t++)
            k->axpy(acc, pad + 3 * (size_t)t, wk[t], row);
    }
    for (int y = 0; y < h; y++) {
        memset(out, 0, row * sizeof *out);
        for (int t = 0; t < ksize; t++)
            k->axpy(out, rows + (size_t)reflect(y + t - r, h) * row, wk[t], row);
        uint8_t *o = img + y * row;
        for (size_t j = 0; j < row; j++)
            o[j] = sl__aug_round_u8(out[j]);
    }
    return 0;
}
