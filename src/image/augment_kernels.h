/*
 * The augmentations' files share this header (nothing else includes it):
 *
 *   augment.c         the driver (sl__aug_apply: the plan's ops in their
 *                     order), the per-thread scratch, erasing, and the
 *                     kernels of the process's tier
 *   augment_plan.c    the plan (sl__aug_draw): every random choice, and
 *                     auto_augment's policies and magnitudes
 *   augment_colour.c  ColorJitter and RandomGrayscale as one transform:
 *                     the fold, its YCbCr stage (the resampler's fallback),
 *                     the gain, the matrix on RGB
 *   augment_tone.c    per-pixel ops of auto_augment: blends with a constant
 *                     or with gray, and the byte tables (posterize,
 *                     solarize, invert, autocontrast, equalize)
 *   augment_filter.c  neighbourhood filters: sharpness, Gaussian blur
 *   augment_warp.c    the geometric ops: torchvision's inverse affine map,
 *                     grid_sample's warp, whole-pixel shifts
 *   augment_c.c       portable kernels: the reference, and the tier below
 *                     AVX2 (x86-64's SSE2 vectorises them as they are)
 *   augment_avx2.c    AVX2 kernels
 *   augment_avx512.c  AVX-512 kernels (F, BW; the byte tables also VBMI)
 *
 * A tier is a table of kernels (sl__augment_kernels): the loops that pay
 * for vectors wider than x86-64's SSE2, which has no 32-bit multiply.
 * The colour loops and the blur's multiply-adds are the bodies below,
 * compiled again in each tier's file under its target attribute; the
 * bilinear warp and the byte tables have intrinsics of their own. Which
 * tier runs is image/'s one choice (cpu.h), looked up per call
 * (sl__aug_kernels), and every tier computes the portable integers.
 */
#ifndef SL_IMAGE_AUGMENT_KERNELS_H
#define SL_IMAGE_AUGMENT_KERNELS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "augment.h"
#include "cpu.h"

/* Loops over pixels run in blocks of a constant count, which gcc -O2
 * vectorises. */
#define BLOCK 16

struct sl__augmenter {
    uint8_t *img; /* sl__augmenter_image's */
    size_t img_cap;
    uint8_t *tmp; /* a second image */
    size_t tmp_cap;
    float *f;     /* blur's intermediate rows */
    size_t f_cap;
};

/* Grows a scratch buffer to at least need bytes (contents not kept).
 * 0 or SL_ENOMEM, with the message set. */
int sl__aug_reserve(void **p, size_t *cap, size_t need);

/* ---- one tier's kernels ---- */

typedef struct sl__augment_kernels {
    const char *name;
    /* The 16-bit blocks of a row of Y, Cb, Cr samples under a colour map
     * in fixed point (sl__colour_planes): the samples done. */
    int (*planes)(int16_t A, int16_t O, const int16_t K[4], uint8_t *y, uint8_t *cb,
                  uint8_t *cr, int n);
    /* p[i] -> clamp(a p[i] + o) with A = a in Q12, O = o in Q3. */
    void (*gain)(uint8_t *p, size_t n, int16_t A, int16_t O);
    /* acc[i] += w * p[i] for i in [0, n). */
    void (*axpy)(float *restrict acc, const float *restrict p, float w, size_t n);
    /* grid_sample, bilinear, of src through the inverse map m (src has 4
     * readable bytes past its end; offsets fit 32 bits). */
    void (*warp_bilinear)(const uint8_t *src, uint8_t *dst, int w, int h, const float m[6],
                          bool masked);
    /* The byte tables on RGB bytes [from, bytes): byte i through table
     * i % 3. */
    void (*lut)(const uint8_t lut[3][256], uint8_t *p, size_t from, size_t bytes);
} sl__augment_kernels;

/* A tier file's table: the static planes, gain, axpy and warp_bilinear
 * every tier's file defines under those names, and its byte-table kernel.
 *     SL__AUGMENT_TIER(avx2, sl__aug_lut_c);  // sl__augment_avx2 */
#define SL__AUGMENT_TIER(tier, lut_fn)                                              \
    const sl__augment_kernels sl__augment_##tier = {                                \
        .name = #tier, .planes = planes, .gain = gain, .axpy = axpy,                \
        .warp_bilinear = warp_bilinear, .lut = (lut_fn)}

/* The kernels of the process's tier (cpu.h). Any thread. */
const sl__augment_kernels *sl__aug_kernels(void);

extern const sl__augment_kernels sl__augment_c;
/* The portable byte tables, which the wider tiers lend. */
void sl__aug_lut_c(const uint8_t lut[3][256], uint8_t *p, size_t from, size_t bytes);
#ifdef SL__IMAGE_HAVE_AVX
extern const sl__augment_kernels sl__augment_avx2;
extern const sl__augment_kernels sl__augment_avx512; /* lut: VBMI's */
#endif

/* ---- the arithmetic the tiers share ---- */

static inline float sl__aug_clamp(float v)
{
    return v < 0 ? 0 : v > 255 ? 255 : v;
}

/* 32 samples in 16-bit lanes: each product is a multiply-high of a
 * sample shifted up by 7 and a coefficient in Q12, keeping 3 bits of
 * fraction (coefficients and offset bounded by the caller). */
#define CBLOCK 32

static inline int16_t sl__aug_mulhi(int16_t x, int16_t c)
{
    return (int16_t)(((int32_t)x * c) >> 16);
}

/* Each step typed 16-bit, so that the vectoriser keeps 16-bit lanes. */
static inline uint8_t sl__aug_from_q3(int16_t v, int16_t round)
{
    int16_t t = (int16_t)(v + round);
    t = (int16_t)(t >> 3);
    t = t < 0 ? 0 : t;
    t = t > 255 ? 255 : t;
    return (uint8_t)t;
}

static inline __attribute__((always_inline)) void
sl__aug_colour_block(int16_t A, int16_t O, const int16_t K[4], uint8_t *restrict y,
                     uint8_t *restrict cb, uint8_t *restrict cr)
{
    int16_t yy[CBLOCK], p[CBLOCK], q[CBLOCK];
    for (int i = 0; i < CBLOCK; i++) {
        int16_t u = (int16_t)((cb[i] - 128) * 128), v = (int16_t)((cr[i] - 128) * 128);
        yy[i] = (int16_t)(sl__aug_mulhi((int16_t)(y[i] * 128), A) + O);
        p[i] = (int16_t)(sl__aug_mulhi(u, K[0]) + sl__aug_mulhi(v, K[1]) + 1024);
        q[i] = (int16_t)(sl__aug_mulhi(u, K[2]) + sl__aug_mulhi(v, K[3]) + 1024);
    }
    for (int i = 0; i < CBLOCK; i++) {
        y[i] = sl__aug_from_q3(yy[i], 4);
        cb[i] = sl__aug_from_q3(p[i], 4);
        cr[i] = sl__aug_from_q3(q[i], 4);
    }
}

/* The 16-bit blocks of a row: the samples done. */
static inline __attribute__((always_inline)) int
sl__aug_planes_body(int16_t A, int16_t O, const int16_t K[4], uint8_t *y, uint8_t *cb,
                    uint8_t *cr, int n)
{
    int x = 0;
    for (; x + CBLOCK <= n; x += CBLOCK)
        sl__aug_colour_block(A, O, K, y + x, cb + x, cr + x);
    return x;
}

/* p[i] -> clamp(a p[i] + o), truncated: 16-bit lanes, 3 bits of
 * fraction (A = a in Q12, O = o in Q3; 255 |a| + |o| under 4000 keeps the
 * sum in 16 bits). */
static inline __attribute__((always_inline)) void
sl__aug_gain_body(uint8_t *restrict p, size_t n, int16_t A, int16_t O)
{
    size_t i = 0;
    for (; i + CBLOCK <= n; i += CBLOCK)
        for (int j = 0; j < CBLOCK; j++)
            p[i + j] =
                sl__aug_from_q3((int16_t)(sl__aug_mulhi((int16_t)(p[i + j] * 128), A) + O), 0);
    for (; i < n; i++)
        p[i] = sl__aug_from_q3((int16_t)(sl__aug_mulhi((int16_t)(p[i] * 128), A) + O), 0);
}

/* acc[i] += w * p[i] for i in [0, n): both passes of the blur are made of
 * these, so this loop is where its time goes. */
static inline __attribute__((always_inline)) void
sl__aug_axpy_body(float *restrict acc, const float *restrict p, float w, size_t n)
{
    size_t i = 0;
    for (; i + BLOCK <= n; i += BLOCK)
        for (int j = 0; j < BLOCK; j++)
            acc[i + j] += w * p[i + j];
    for (; i < n; i++)
        acc[i] += w * p[i];
}

/* The tables on the bytes of RGB pixels from byte `from` to `bytes`:
 * byte i through table i % 3, its channel's. */
static inline void sl__aug_lut_bytes(const uint8_t lut[3][256], uint8_t *p, size_t from,
                                     size_t bytes)
{
    for (size_t i = from; i < bytes; i++)
        p[i] = lut[i % 3][p[i]];
}

/* rint() under the default rounding mode (half to even, as torch.round
 * and grid_sample's nearest), for |v| < 2^22, without a call into libm
 * where SSE4.1's roundss is not there to inline. */
static inline float sl__aug_round_even(float v)
{
    return (v + 12582912.0f) - 12582912.0f;
}

static inline uint8_t sl__aug_round_u8(float v)
{
    return (uint8_t)sl__aug_round_even(sl__aug_clamp(v));
}

/* One output pixel o of grid_sample (align_corners=False, zeros outside)
 * at source position (sx, sy) of src (w x h, rows of `row` bytes). */
static inline __attribute__((always_inline)) void
sl__aug_warp_pixel(const uint8_t *src, uint8_t *o, int w, int h, size_t row, float sx, float sy,
                   bool bilinear, bool masked)
{
    if (!(sx > -1 && sx < w && sy > -1 && sy < h)) { /* NaN too */
        o[0] = o[1] = o[2] = 0;
        return;
    }
    if (!bilinear) {
        int rx = (int)sl__aug_round_even(sx), ry = (int)sl__aug_round_even(sy);
        if (rx >= 0 && rx < w && ry >= 0 && ry < h) {
            const uint8_t *p = src + (size_t)ry * row + 3 * (size_t)rx;
            o[0] = p[0], o[1] = p[1], o[2] = p[2];
        } else {
            o[0] = o[1] = o[2] = 0;
        }
        return;
    }
    int x0 = (int)(sx + 1) - 1, y0 = (int)(sy + 1) - 1; /* floor: sx, sy > -1 */
    float ax = sx - (float)x0, ay = sy - (float)y0;
    if (x0 >= 0 && x0 + 1 < w && y0 >= 0 && y0 + 1 < h) {
        /* inside: weights in 11 bits, integer sums (a level's rounding from
         * torchvision's float at most); the vector kernel computes these
         * very integers */
        const uint8_t *p = src + (size_t)y0 * row + 3 * (size_t)x0, *q = p + row;
        int32_t bx = (int32_t)(ax * 2048 + 0.5f), by = (int32_t)(ay * 2048 + 0.5f);
        for (int c = 0; c < 3; c++) {
            int32_t top = p[c] * 2048 + (p[c + 3] - p[c]) * bx;
            int32_t bot = q[c] * 2048 + (q[c + 3] - q[c]) * bx;
            o[c] = (uint8_t)((top * 2048 + (bot - top) * by + (1 << 21)) >> 22);
        }
        return;
    }
    float wt[4] = {(1 - ax) * (1 - ay), ax * (1 - ay), (1 - ax) * ay, ax * ay};
    float acc[3] = {0, 0, 0}, cover = 0; /* at the border: zeros outside */
    for (int t = 0; t < 4; t++) {
        int xx = x0 + (t & 1), yy = y0 + (t >> 1);
        if (xx < 0 || xx >= w || yy < 0 || yy >= h)
            continue;
        const uint8_t *p = src + (size_t)yy * row + 3 * (size_t)xx;
        for (int c = 0; c < 3; c++)
            acc[c] += wt[t] * p[c];
        cover += wt[t];
    }
    /* with a fill colour (RandomRotation's and RandomAffine's 0, not the
     * auto_augment ops' None) torchvision also samples a mask of ones the
     * same way and blends: the sample times its coverage */
    for (int c = 0; c < 3; c++)
        o[c] = sl__aug_round_u8(masked ? acc[c] * cover : acc[c]);
}

/* ---- what the files lend each other ---- */

/* augment_colour.c: the colour map as a matrix on n RGB pixels. */
void sl__colour_rgb(const sl__colour_map *m, uint8_t *rgb, size_t n);

/* augment_tone.c: the ops on n RGB pixels, torchvision's on uint8. */
double sl__aug_mean_gray(const uint8_t *img, size_t n);
void sl__aug_blend_const(uint8_t *img, size_t n, float f, float other);
void sl__aug_blend_gray(uint8_t *img, size_t n, float f);
void sl__aug_autocontrast(uint8_t *img, size_t n);
void sl__aug_equalize(uint8_t *img, size_t n);
/* posterize, solarize and invert (kind) at magnitude mag */
void sl__aug_point_op(uint8_t *img, size_t n, int kind, float mag);

/* augment_filter.c: on a w x h image; 0 or SL_ENOMEM. */
int sl__aug_sharpness(sl__augmenter *a, uint8_t *img, int w, int h, float f);
int sl__aug_blur(sl__augmenter *a, uint8_t *img, int w, int h, int ksize, float sigma);

/* augment_warp.c */
void sl__aug_inverse_affine(double cx, double cy, double angle, double tx, double ty,
                            double scale, double shx, double shy, float m[6]);
/* grid_sample of src (w x h) into dst through the inverse map m, one
 * pixel at a time: the portable warp. */
void sl__aug_warp(const uint8_t *src, uint8_t *dst, int w, int h, const float m[6],
                  bool bilinear, bool masked);
/* img through the inverse map m in place; masked: with torchvision's
 * fill of 0 (RandomRotation, RandomAffine) rather than none
 * (auto_augment's ops). 0 or SL_ENOMEM. */
int sl__aug_geometric(sl__augmenter *a, uint8_t *img, int w, int h, const float m[6],
                      bool bilinear, bool masked);

#endif
