/*
 * Portable kernels: the integers every other tier must reproduce, and all
 * there is below AVX2 (x86-64's baseline SSE2 vectorises the blocks as
 * they are: there is no SSE2 tier of its own) and with
 * -DSL__IMAGE_PORTABLE.
 */
#include "augment_kernels.h"

static int planes(int16_t A, int16_t O, const int16_t K[4], uint8_t *y, uint8_t *cb,
                  uint8_t *cr, int n)
{
    return sl__aug_planes_body(A, O, K, y, cb, cr, n);
}

static void gain(uint8_t *p, size_t n, int16_t A, int16_t O)
{
    sl__aug_gain_body(p, n, A, O);
}

static void axpy(float *restrict acc, const float *restrict p, float w, size_t n)
{
    sl__aug_axpy_body(acc, p, w, n);
}

static void warp_bilinear(const uint8_t *src, uint8_t *dst, int w, int h, const float m[6],
                          bool masked)
{
    sl__aug_warp(src, dst, w, h, m, true, masked);
}

void sl__aug_lut_c(const uint8_t lut[3][256], uint8_t *p, size_t from, size_t bytes)
{
    sl__aug_lut_bytes(lut, p, from, bytes);
}

SL__AUGMENT_TIER(c, sl__aug_lut_c);
