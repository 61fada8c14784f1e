/*
 * Image augmentations: torchvision's transforms on the resized image.
 *
 * Drawing (sl__aug_draw) makes every random choice before decoding, in
 * one fixed order, so the element's stream and nothing else decides the
 * output. Carrying out (sl__aug_apply) works on uint8 RGB HWC at the
 * output size, in place, with one scratch image and one float plane per
 * thread (sl__augmenter) that are reused from image to image.
 *
 * Arithmetic follows torchvision's tensor ops on uint8: blends compute in
 * float32 and truncate (_blend), filters round (gaussian_blur, the
 * sharpness kernel, grid_sample), so that each op alone is within a level
 * of torchvision's on the same input (tests/python/test_augment.py).
 * Loops over pixels run in blocks of a constant count, which gcc -O2
 * vectorises.
 */
#include <math.h>
#include <pthread.h>
#include <string.h>
#include "../core/alloc.h"
#include "../core/error.h"
#include "augment.h"
#include "cpu.h"
#ifdef SL__IMAGE_HAVE_AVX
#include <immintrin.h>
#endif

#define BLOCK 16


static double uniform(sl__rng *rng, double a, double b)
{
    return a + sl__rng_uniform(rng) * (b - a);
}

/* RandomApply's test: drawn only when p > 0. */
static bool chance(sl__rng *rng, float p)
{
    return p > 0 && sl__rng_uniform(rng) < p;
}

static bool pair_on(const float v[2])
{
    return v[0] != 0 || v[1] != 0;
}

static bool affine_on(const sl_image_spec *s)
{
    return pair_on(s->rotate) || pair_on(s->translate) || pair_on(s->affine_scale) ||
           pair_on(s->shear) || pair_on(s->shear + 2);
}

bool sl__aug_any(const sl_image_spec *s)
{
    return s->auto_augment || s->color_jitter_prob > 0 || s->grayscale_prob > 0 ||
           s->blur_prob > 0 || s->solarize_prob > 0 || affine_on(s) || s->erasing_prob > 0;
}

bool sl__aug_pixels(const sl__aug *p)
{
    return p->affine || p->nops || p->colour.on || p->blur || p->solarize;
}

/* ---- geometry: torchvision's inverse affine map ---- */

/* _get_inverse_affine_matrix: output centred coordinates -> input
 * centred coordinates, for a rotation by angle (degrees, as F.affine
 * takes it), translate, scale and shear (degrees) about centre (cx, cy)
 * given relative to the image centre. */
static void inverse_affine(double cx, double cy, double angle, double tx, double ty,
                           double scale, double shx, double shy, float m[6])
{
    double rot = angle * M_PI / 180, sx = shx * M_PI / 180, sy = shy * M_PI / 180;
    double a = cos(rot - sy) / cos(sy);
    double b = -cos(rot - sy) * tan(sx) / cos(sy) - sin(rot);
    double c = sin(rot - sy) / cos(sy);
    double d = -sin(rot - sy) * tan(sx) / cos(sy) + cos(rot);
    double v[6] = {d / scale, -b / scale, 0, -c / scale, a / scale, 0};
    v[2] += v[0] * (-cx - tx) + v[1] * (-cy - ty) + cx;
    v[5] += v[3] * (-cx - tx) + v[4] * (-cy - ty) + cy;
    for (int i = 0; i < 6; i++)
        m[i] = (float)v[i];
}

/* RandomRotation / RandomAffine's draws: angle, translation, scale,
 * shear, each only when asked for. */
static void draw_affine(const sl_image_spec *s, sl__rng *rng, sl__aug *p)
{
    double angle = pair_on(s->rotate) ? uniform(rng, s->rotate[0], s->rotate[1]) : 0;
    double tx = 0, ty = 0, scale = 1, shx = 0, shy = 0;
    if (pair_on(s->translate)) {
        double mx = s->translate[0] * (double)s->width, my = s->translate[1] * (double)s->height;
        tx = nearbyint(uniform(rng, -mx, mx));
        ty = nearbyint(uniform(rng, -my, my));
    }
    if (pair_on(s->affine_scale))
        scale = uniform(rng, s->affine_scale[0], s->affine_scale[1]);
    if (pair_on(s->shear) || pair_on(s->shear + 2)) {
        shx = uniform(rng, s->shear[0], s->shear[1]);
        shy = uniform(rng, s->shear[2], s->shear[3]);
    }
    /* counter-clockwise, as RandomRotation (F.rotate negates for F.affine) */
    inverse_affine(0, 0, -angle, tx, ty, scale, shx, shy, p->m);
    p->affine = true;
}

/* ---- auto_augment: torchvision's op lists and magnitude tables ---- */

/* TrivialAugmentWide's and RandAugment's ops, in torchvision's order. */
static const int wide_ops[] = {SL__OP_IDENTITY,  SL__OP_SHEAR_X,     SL__OP_SHEAR_Y,
                               SL__OP_TRANSLATE_X, SL__OP_TRANSLATE_Y, SL__OP_ROTATE,
                               SL__OP_BRIGHTNESS, SL__OP_COLOR,       SL__OP_CONTRAST,
                               SL__OP_SHARPNESS,  SL__OP_POSTERIZE,   SL__OP_SOLARIZE,
                               SL__OP_AUTOCONTRAST, SL__OP_EQUALIZE};
#define N_WIDE_OPS ((int)(sizeof wide_ops / sizeof *wide_ops))

/* AutoAugment's ImageNet policy: (op, probability, magnitude bin or -1). */
typedef struct sub_op {
    int8_t kind;
    uint8_t prob10; /* tenths */
    int8_t bin;
} sub_op;

static const sub_op imagenet_policy[25][2] = {
    {{SL__OP_POSTERIZE, 4, 8}, {SL__OP_ROTATE, 6, 9}},
    {{SL__OP_SOLARIZE, 6, 5}, {SL__OP_AUTOCONTRAST, 6, -1}},
    {{SL__OP_EQUALIZE, 8, -1}, {SL__OP_EQUALIZE, 6, -1}},
    {{SL__OP_POSTERIZE, 6, 7}, {SL__OP_POSTERIZE, 6, 6}},
    {{SL__OP_EQUALIZE, 4, -1}, {SL__OP_SOLARIZE, 2, 4}},
    {{SL__OP_EQUALIZE, 4, -1}, {SL__OP_ROTATE, 8, 8}},
    {{SL__OP_SOLARIZE, 6, 3}, {SL__OP_EQUALIZE, 6, -1}},
    {{SL__OP_POSTERIZE, 8, 5}, {SL__OP_EQUALIZE, 10, -1}},
    {{SL__OP_ROTATE, 2, 3}, {SL__OP_SOLARIZE, 6, 8}},
    {{SL__OP_EQUALIZE, 6, -1}, {SL__OP_POSTERIZE, 4, 6}},
    {{SL__OP_ROTATE, 8, 8}, {SL__OP_COLOR, 4, 0}},
    {{SL__OP_ROTATE, 4, 9}, {SL__OP_EQUALIZE, 6, -1}},
    {{SL__OP_EQUALIZE, 0, -1}, {SL__OP_EQUALIZE, 8, -1}},
    {{SL__OP_INVERT, 6, -1}, {SL__OP_EQUALIZE, 10, -1}},
    {{SL__OP_COLOR, 6, 4}, {SL__OP_CONTRAST, 10, 8}},
    {{SL__OP_ROTATE, 8, 8}, {SL__OP_COLOR, 10, 2}},
    {{SL__OP_COLOR, 8, 8}, {SL__OP_SOLARIZE, 8, 7}},
    {{SL__OP_SHARPNESS, 4, 7}, {SL__OP_INVERT, 6, -1}},
    {{SL__OP_SHEAR_X, 6, 5}, {SL__OP_EQUALIZE, 10, -1}},
    {{SL__OP_COLOR, 4, 0}, {SL__OP_EQUALIZE, 6, -1}},
    {{SL__OP_EQUALIZE, 4, -1}, {SL__OP_SOLARIZE, 2, 4}},
    {{SL__OP_SOLARIZE, 6, 5}, {SL__OP_AUTOCONTRAST, 6, -1}},
    {{SL__OP_INVERT, 6, -1}, {SL__OP_EQUALIZE, 10, -1}},
    {{SL__OP_COLOR, 6, 4}, {SL__OP_CONTRAST, 10, 8}},
    {{SL__OP_EQUALIZE, 8, -1}, {SL__OP_EQUALIZE, 6, -1}},
};

static bool op_signed(int kind)
{
    return kind >= SL__OP_SHEAR_X && kind <= SL__OP_SHARPNESS;
}

static bool op_has_magnitude(int kind)
{
    return kind != SL__OP_IDENTITY && kind < SL__OP_AUTOCONTRAST;
}

/* torch.linspace(lo, hi, n)[i] */
static double linspace(double lo, double hi, int n, int i)
{
    return n > 1 ? lo + (hi - lo) * i / (n - 1) : lo;
}

/* Bin i of n of op kind's magnitudes: TrivialAugmentWide's table (wide)
 * or RandAugment's and AutoAugment's; translations in pixels of w x h. */
static double magnitude(int kind, bool wide, int i, int n, int w, int h)
{
    switch (kind) {
    case SL__OP_SHEAR_X:
    case SL__OP_SHEAR_Y:
        return linspace(0, wide ? 0.99 : 0.3, n, i);
    case SL__OP_TRANSLATE_X:
        return linspace(0, wide ? 32.0 : 150.0 / 331.0 * w, n, i);
    case SL__OP_TRANSLATE_Y:
        return linspace(0, wide ? 32.0 : 150.0 / 331.0 * h, n, i);
    case SL__OP_ROTATE:
        return linspace(0, wide ? 135.0 : 30.0, n, i);
    case SL__OP_BRIGHTNESS:
    case SL__OP_COLOR:
    case SL__OP_CONTRAST:
    case SL__OP_SHARPNESS:
        return linspace(0, wide ? 0.99 : 0.9, n, i);
    case SL__OP_POSTERIZE: /* 8 - round(i / ((n - 1) / levels)) */
        return 8 - (n > 1 ? nearbyint(i / ((n - 1) / (wide ? 6.0 : 4.0))) : 0);
    case SL__OP_SOLARIZE:
        return linspace(255, 0, n, i);
    default:
        return 0;
    }
}

static void add_op(sl__aug *p, int kind, double mag, bool negate)
{
    if (negate && op_signed(kind))
        mag = -mag;
    p->op[p->nops++] = (sl__aug_op){kind, (float)mag};
}

static void draw_auto_augment(const sl_image_spec *s, sl__rng *rng, sl__aug *p)
{
    int w = s->width, h = s->height, bins = s->num_magnitude_bins;
    if (s->auto_augment == SL_TRIVIAL_AUGMENT_WIDE) {
        int kind = wide_ops[sl__rng_below(rng, N_WIDE_OPS)];
        double mag = 0;
        if (op_has_magnitude(kind))
            mag = magnitude(kind, true, (int)sl__rng_below(rng, (uint64_t)bins), bins, w, h);
        add_op(p, kind, mag, op_signed(kind) && sl__rng_below(rng, 2));
    } else if (s->auto_augment == SL_RAND_AUGMENT) {
        for (int i = 0; i < s->rand_augment_num_ops; i++) {
            int kind = wide_ops[sl__rng_below(rng, N_WIDE_OPS)];
            double mag = magnitude(kind, false, s->rand_augment_magnitude, bins, w, h);
            add_op(p, kind, mag, op_signed(kind) && sl__rng_below(rng, 2));
        }
    } else if (s->auto_augment == SL_AUTO_AUGMENT_IMAGENET) {
        const sub_op *sub = imagenet_policy[sl__rng_below(rng, 25)];
        double u[2] = {sl__rng_uniform(rng), sl__rng_uniform(rng)};
        bool neg[2] = {sl__rng_below(rng, 2) == 0, sl__rng_below(rng, 2) == 0};
        for (int i = 0; i < 2; i++)
            if (u[i] <= sub[i].prob10 / 10.0)
                add_op(p, sub[i].kind,
                       sub[i].bin < 0 ? 0 : magnitude(sub[i].kind, false, sub[i].bin, 10, w, h),
                       neg[i]);
    }
}

/* ---- the plan ---- */

static void draw_colour(const sl_image_spec *s, sl__rng *rng, sl__colour *c)
{
    memset(c, 0, sizeof *c);
    const float *range[4] = {s->brightness, s->contrast, s->saturation, s->hue};
    if (chance(rng, s->color_jitter_prob)) {
        c->jitter = true;
        for (int i = 0; i < 4; i++)
            c->order[i] = i;
        for (int i = 3; i > 0; i--) { /* a random permutation (torch.randperm's role) */
            int j = (int)sl__rng_below(rng, (uint64_t)i + 1), t = c->order[i];
            c->order[i] = c->order[j];
            c->order[j] = t;
        }
        for (int i = 0; i < 4; i++)
            c->factor[i] = pair_on(range[i]) ? (float)uniform(rng, range[i][0], range[i][1])
                                             : (i == 3 ? 0.0f : 1.0f);
    }
    c->gray = chance(rng, s->grayscale_prob);
    c->on = c->jitter || c->gray;
}

/* RandomErasing.get_params: 10 tries at a box of the area fraction and
 * log-uniform aspect asked for that fits inside the image. */
static void draw_erase(const sl_image_spec *s, sl__rng *rng, sl__aug *p)
{
    int W = s->width, H = s->height;
    double area = (double)W * H;
    double lo = log(s->erasing_ratio[0]), hi = log(s->erasing_ratio[1]);
    for (int attempt = 0; attempt < 10; attempt++) {
        double target = area * uniform(rng, s->erasing_scale[0], s->erasing_scale[1]);
        double aspect = exp(uniform(rng, lo, hi));
        double fh = sqrt(target * aspect), fw = sqrt(target / aspect);
        if (!(fh < H && fw < W)) /* also false for NaN */
            continue;
        int h = (int)nearbyint(fh), w = (int)nearbyint(fw);
        if (!(h < H && w < W))
            continue;
        p->ei = (int)sl__rng_below(rng, (uint64_t)(H - h) + 1);
        p->ej = (int)sl__rng_below(rng, (uint64_t)(W - w) + 1);
        p->eh = h;
        p->ew = w;
        p->erase_seed = sl__rng_next(rng);
        p->erase = true;
        return;
    }
}

void sl__aug_draw(const sl_image_spec *s, sl__rng *rng, sl__aug *p)
{
    memset(p, 0, sizeof *p);
    if (affine_on(s))
        draw_affine(s, rng, p);
    if (s->auto_augment)
        draw_auto_augment(s, rng, p);
    draw_colour(s, rng, &p->colour);
    if (chance(rng, s->blur_prob)) {
        p->blur = true;
        p->sigma = (float)uniform(rng, s->blur_sigma[0], s->blur_sigma[1]);
    }
    p->solarize = chance(rng, s->solarize_prob);
    if (chance(rng, s->erasing_prob))
        draw_erase(s, rng, p);
}

/* ---- colour: ColorJitter and RandomGrayscale as one transform ---- */

void sl__colour_fold(const sl__colour *c, double mean_y, sl__colour_map *m)
{
    memset(m, 0, sizeof *m);
    double a = 1, o = 0, k[2][2] = {{1, 0}, {0, 1}}, mean = mean_y;
    for (int i = 0; c->jitter && i < 4; i++) {
        double f = c->factor[c->order[i]], t[2][2];
        switch (c->order[i]) {
        case 0: /* brightness: everything scales, the mean with it */
            a *= f, o *= f, mean *= f;
            for (int r = 0; r < 2; r++)
                k[r][0] *= f, k[r][1] *= f;
            break;
        case 1: /* contrast: blend with the mean gray */
            a *= f, o = f * o + (1 - f) * mean;
            for (int r = 0; r < 2; r++)
                k[r][0] *= f, k[r][1] *= f;
            break;
        case 2: /* saturation: blend with gray, which is Y */
            for (int r = 0; r < 2; r++)
                k[r][0] *= f, k[r][1] *= f;
            break;
        case 3: { /* hue: turn (Cb, Cr) by f of a turn; red -> green -> blue
                   * runs counter-clockwise there as it does in HSV */
            double cs = cos(2 * M_PI * f), sn = sin(2 * M_PI * f);
            for (int col = 0; col < 2; col++) {
                t[0][col] = cs * k[0][col] - sn * k[1][col];
                t[1][col] = sn * k[0][col] + cs * k[1][col];
            }
            memcpy(k, t, sizeof k);
            break;
        }
        }
    }
    if (c->gray)
        memset(k, 0, sizeof k);
    m->a = (float)a;
    m->o = (float)o;
    for (int r = 0; r < 2; r++)
        for (int col = 0; col < 2; col++)
            m->k[r][col] = (float)k[r][col];
}

static inline float clampf(float v)
{
    return v < 0 ? 0 : v > 255 ? 255 : v;
}

/* Samples [x, n) of the map in float: coefficients too large for the
 * 16-bit blocks (rounded, clamped to bytes). */
static void colour_planes_float(const sl__colour_map *m, uint8_t *y, uint8_t *cb, uint8_t *cr,
                                int x, int n)
{
    for (; x < n; x++) {
        float u = (float)cb[x] - 128, v = (float)cr[x] - 128;
        y[x] = (uint8_t)clampf(m->a * y[x] + m->o + 0.5f);
        cb[x] = (uint8_t)clampf(m->k[0][0] * u + m->k[0][1] * v + 128.5f);
        cr[x] = (uint8_t)clampf(m->k[1][0] * u + m->k[1][1] * v + 128.5f);
    }
}

/* 32 samples in 16-bit lanes: each product is a multiply-high of a
 * sample shifted up by 7 and a coefficient in Q12, keeping 3 bits of
 * fraction (coefficients and offset bounded by the caller). */
#define CBLOCK 32

static inline int16_t mulhi(int16_t x, int16_t c)
{
    return (int16_t)(((int32_t)x * c) >> 16);
}

/* Each step typed 16-bit, so that the vectoriser keeps 16-bit lanes. */
static inline uint8_t from_q3(int16_t v, int16_t round)
{
    int16_t t = (int16_t)(v + round);
    t = (int16_t)(t >> 3);
    t = t < 0 ? 0 : t;
    t = t > 255 ? 255 : t;
    return (uint8_t)t;
}

/* One sample of colour_block, for the samples after the last block. */
static inline void colour_one(int16_t A, int16_t O, const int16_t K[4], uint8_t *y, uint8_t *cb,
                              uint8_t *cr)
{
    int16_t u = (int16_t)((*cb - 128) * 128), v = (int16_t)((*cr - 128) * 128);
    *y = from_q3((int16_t)(mulhi((int16_t)(*y * 128), A) + O), 4);
    *cb = from_q3((int16_t)(mulhi(u, K[0]) + mulhi(v, K[1]) + 1024), 4);
    *cr = from_q3((int16_t)(mulhi(u, K[2]) + mulhi(v, K[3]) + 1024), 4);
}

static inline __attribute__((always_inline)) void
colour_block(int16_t A, int16_t O, const int16_t K[4], uint8_t *restrict y, uint8_t *restrict cb,
             uint8_t *restrict cr)
{
    int16_t yy[CBLOCK], p[CBLOCK], q[CBLOCK];
    for (int i = 0; i < CBLOCK; i++) {
        int16_t u = (int16_t)((cb[i] - 128) * 128), v = (int16_t)((cr[i] - 128) * 128);
        yy[i] = (int16_t)(mulhi((int16_t)(y[i] * 128), A) + O);
        p[i] = (int16_t)(mulhi(u, K[0]) + mulhi(v, K[1]) + 1024);
        q[i] = (int16_t)(mulhi(u, K[2]) + mulhi(v, K[3]) + 1024);
    }
    for (int i = 0; i < CBLOCK; i++) {
        y[i] = from_q3(yy[i], 4);
        cb[i] = from_q3(p[i], 4);
        cr[i] = from_q3(q[i], 4);
    }
}

/* The 16-bit blocks of a row: the samples done. */
static inline __attribute__((always_inline)) int
planes_body(int16_t A, int16_t O, const int16_t K[4], uint8_t *y, uint8_t *cb, uint8_t *cr, int n)
{
    int x = 0;
    for (; x + CBLOCK <= n; x += CBLOCK)
        colour_block(A, O, K, y + x, cb + x, cr + x);
    return x;
}

/* p[i] -> clamp(a p[i] + o), truncated: 16-bit lanes, 3 bits of
 * fraction (A = a in Q12, O = o in Q3; 255 |a| + |o| under 4000 keeps the
 * sum in 16 bits). */
static inline __attribute__((always_inline)) void gain_body(uint8_t *restrict p, size_t n,
                                                            int16_t A, int16_t O)
{
    size_t i = 0;
    for (; i + CBLOCK <= n; i += CBLOCK)
        for (int j = 0; j < CBLOCK; j++)
            p[i + j] = from_q3((int16_t)(mulhi((int16_t)(p[i + j] * 128), A) + O), 0);
    for (; i < n; i++)
        p[i] = from_q3((int16_t)(mulhi((int16_t)(p[i] * 128), A) + O), 0);
}

/* acc[i] += w * p[i] for i in [0, n): both passes of the blur are made of
 * these, so this loop is where its time goes. */
static inline __attribute__((always_inline)) void axpy_body(float *restrict acc,
                                                            const float *restrict p, float w,
                                                            size_t n)
{
    size_t i = 0;
    for (; i + BLOCK <= n; i += BLOCK)
        for (int j = 0; j < BLOCK; j++)
            acc[i + j] += w * p[i + j];
    for (; i < n; i++)
        acc[i] += w * p[i];
}

/* The loops that pay for vectors wider than x86-64's SSE2 (which has no
 * 32-bit multiply), compiled again for AVX2 and AVX-512 and run at
 * image/'s tier, the resampler's (cpu.h). Plain functions with target
 * attributes, not gcc's target_clones: an ifunc resolver runs before the
 * sanitizers' runtimes are up. */
typedef struct aug_kernels {
    int (*planes)(int16_t A, int16_t O, const int16_t K[4], uint8_t *y, uint8_t *cb,
                  uint8_t *cr, int n);
    void (*gain)(uint8_t *p, size_t n, int16_t A, int16_t O);
    void (*axpy)(float *restrict acc, const float *restrict p, float w, size_t n);
    void (*warp_bilinear)(const uint8_t *src, uint8_t *dst, int w, int h, const float m[6],
                          bool masked);
} aug_kernels;

#define AUG_KERNELS(isa, attr)                                                                \
    attr static int planes_##isa(int16_t A, int16_t O, const int16_t K[4], uint8_t *y,        \
                                 uint8_t *cb, uint8_t *cr, int n)                             \
    {                                                                                         \
        return planes_body(A, O, K, y, cb, cr, n);                                            \
    }                                                                                         \
    attr static void gain_##isa(uint8_t *p, size_t n, int16_t A, int16_t O)                   \
    {                                                                                         \
        gain_body(p, n, A, O);                                                                \
    }                                                                                         \
    attr static void axpy_##isa(float *restrict acc, const float *restrict p, float w,        \
                                size_t n)                                                     \
    {                                                                                         \
        axpy_body(acc, p, w, n);                                                              \
    }                                                                                         \
    static const aug_kernels kernels_##isa = {planes_##isa, gain_##isa, axpy_##isa, warp_##isa};

static void warp_bilinear_base(const uint8_t *src, uint8_t *dst, int w, int h, const float m[6],
                               bool masked);
#define warp_base warp_bilinear_base
AUG_KERNELS(base, )
#ifdef SL__IMAGE_HAVE_AVX
#define AUG_X86 1
static void warp_bilinear_avx2(const uint8_t *src, uint8_t *dst, int w, int h, const float m[6],
                               bool masked);
#define warp_avx2 warp_bilinear_avx2
static void warp_bilinear_avx512(const uint8_t *src, uint8_t *dst, int w, int h,
                                 const float m[6], bool masked);
#define warp_avx512 warp_bilinear_avx512
AUG_KERNELS(avx2, __attribute__((target("avx2"))))
AUG_KERNELS(avx512, __attribute__((target("avx512f,avx512bw"))))
#endif

/* Byte tables (the point ops, autocontrast, equalize): VBMI's byte
 * permutes where the CPU has them, chosen with the rest. */
typedef void (*lut_fn)(const uint8_t lut[3][256], uint8_t *p, size_t from, size_t bytes);
static void lut_base(const uint8_t lut[3][256], uint8_t *p, size_t from, size_t bytes);
#ifdef AUG_X86
static void lut_vbmi(const uint8_t lut[3][256], uint8_t *p, size_t from, size_t bytes);
#endif

/* Per tier (cpu.h), filled once: the portable loops below AVX2. */
static const aug_kernels *tiers[SL__IMAGE_TIERS];
static lut_fn luts[SL__IMAGE_TIERS];
static pthread_once_t tiers_once = PTHREAD_ONCE_INIT;

static void tiers_init(void)
{
    for (int l = 0; l < SL__IMAGE_TIERS; l++) {
        tiers[l] = &kernels_base;
        luts[l] = lut_base;
    }
#ifdef AUG_X86
    tiers[SL__IMAGE_AVX2] = &kernels_avx2;
    tiers[SL__IMAGE_AVX512] = &kernels_avx512;
    if (sl__image_cpu_has(SL__IMAGE_VBMI))
        luts[SL__IMAGE_AVX512] = lut_vbmi;
#endif
}

static const aug_kernels *kernels(void)
{
    pthread_once(&tiers_once, tiers_init);
    return tiers[sl__image_tier()];
}

static void colour_ints(sl__colour_map *m)
{
    float kmax = fabsf(m->a);
    for (int i = 0; i < 4; i++)
        kmax = fmaxf(kmax, fabsf(m->k[i / 2][i % 2]));
    /* the 16-bit blocks while coefficients stay under 7.9 and the offset
     * under 2000 levels (any ColorJitter short of extreme ranges) */
    m->fast = kmax < 7.9f && fabsf(m->o) < 2000;
    if (m->fast) {
        m->a16 = (int16_t)lrintf(m->a * 4096);
        m->o16 = (int16_t)lrintf(m->o * 8);
        for (int i = 0; i < 4; i++)
            m->k16[i] = (int16_t)lrintf(m->k[i / 2][i % 2] * 4096);
    }
    m->ready = true;
}

bool sl__colour_coef(sl__colour_map *m, int16_t c[6])
{
    if (!m->ready)
        colour_ints(m);
    c[0] = m->a16, c[1] = m->o16;
    memcpy(c + 2, m->k16, sizeof m->k16);
    return m->fast;
}

void sl__colour_planes(sl__colour_map *m, uint8_t *y, uint8_t *cb, uint8_t *cr, int n)
{
    if (!m->ready)
        colour_ints(m);
    if (!m->fast) {
        colour_planes_float(m, y, cb, cr, 0, n);
        return;
    }
    int x = kernels()->planes(m->a16, m->o16, m->k16, y, cb, cr, n);
    for (; x < n; x++)
        colour_one(m->a16, m->o16, m->k16, y + x, cb + x, cr + x);
}

/* v -> clamp(a v + o), truncated, on n bytes: brightness and contrast,
 * which act on each channel alike. */
void sl__colour_gain(uint8_t *p, size_t n, float a, float o)
{
    if (!(255 * fabsf(a) + fabsf(o) < 4000)) { /* past the 16-bit lanes: float */
        for (size_t i = 0; i < n; i++)
            p[i] = (uint8_t)clampf(a * p[i] + o);
        return;
    }
    kernels()->gain(p, n, (int16_t)lrintf(a * 4096), (int16_t)floorf(o * 8));
}

/* The fold as a matrix on RGB: RGB -> (Y, Cb, Cr) (JFIF), the map, and
 * back; the offset lands on Y, which every channel carries. */
static void rgb_matrix(const sl__colour_map *m, float M[3][3])
{
    static const double T[3][3] = {{0.299, 0.587, 0.114},
                                   {-0.168735892, -0.331264108, 0.5},
                                   {0.5, -0.418687589, -0.081312411}};
    static const double Ti[3][3] = {{1, 0, 1.402}, {1, -0.344136286, -0.714136286},
                                    {1, 1.772, 0}};
    double J[3][3] = {{m->a, 0, 0}, {0, m->k[0][0], m->k[0][1]}, {0, m->k[1][0], m->k[1][1]}};
    double JT[3][3];
    for (int r = 0; r < 3; r++)
        for (int c = 0; c < 3; c++) {
            JT[r][c] = 0;
            for (int k = 0; k < 3; k++)
                JT[r][c] += J[r][k] * T[k][c];
        }
    for (int r = 0; r < 3; r++)
        for (int c = 0; c < 3; c++) {
            double v = 0;
            for (int k = 0; k < 3; k++)
                v += Ti[r][k] * JT[k][c];
            M[r][c] = (float)v;
        }
}


/* The matrix on BLOCK pixels: channels into float lanes, nine
 * multiply-adds a pixel in vector blocks, truncated as _blend. */
static inline void matrix_block(const float M[3][3], float o, uint8_t *p)
{
    float r[BLOCK], g[BLOCK], b[BLOCK], out[3][BLOCK];
    for (int j = 0; j < BLOCK; j++) {
        r[j] = p[3 * j];
        g[j] = p[3 * j + 1];
        b[j] = p[3 * j + 2];
    }
    for (int ch = 0; ch < 3; ch++) {
        float m0 = M[ch][0], m1 = M[ch][1], m2 = M[ch][2];
        for (int j = 0; j < BLOCK; j++)
            out[ch][j] = clampf(m0 * r[j] + m1 * g[j] + m2 * b[j] + o);
    }
    for (int j = 0; j < BLOCK; j++) {
        p[3 * j] = (uint8_t)out[0][j];
        p[3 * j + 1] = (uint8_t)out[1][j];
        p[3 * j + 2] = (uint8_t)out[2][j];
    }
}

static void colour_rgb(const sl__colour_map *m, uint8_t *rgb, size_t n)
{
    float M[3][3], o = m->o;
    rgb_matrix(m, M);
    size_t i = 0;
    for (; i + BLOCK <= n; i += BLOCK)
        matrix_block(M, o, rgb + 3 * i);
    for (; i < n; i++) {
        uint8_t *p = rgb + 3 * i;
        float r = p[0], g = p[1], b = p[2];
        for (int ch = 0; ch < 3; ch++)
            p[ch] = (uint8_t)clampf(M[ch][0] * r + M[ch][1] * g + M[ch][2] * b + o);
    }
}

/* ---- per-pixel ops on uint8 RGB ---- */

struct sl__augmenter {
    uint8_t *img; /* sl__augmenter_image's */
    size_t img_cap;
    uint8_t *tmp; /* a second image */
    size_t tmp_cap;
    float *f;     /* blur's intermediate rows */
    size_t f_cap;
};

sl__augmenter *sl__augmenter_new(void)
{
    return sl__calloc(1, sizeof(sl__augmenter));
}

void sl__augmenter_free(sl__augmenter *a)
{
    if (!a)
        return;
    sl__free(a->img, a->img_cap);
    sl__free(a->tmp, a->tmp_cap);
    sl__free(a->f, a->f_cap);
    sl__free(a, sizeof *a);
}

static int reserve(void **p, size_t *cap, size_t need)
{
    if (*cap >= need)
        return 0;
    void *q = sl__alloc(need);
    if (!q)
        return sl__set_error(SL_ENOMEM, "out of memory (augmentation scratch)");
    sl__free(*p, *cap);
    *p = q;
    *cap = need;
    return 0;
}

uint8_t *sl__augmenter_image(sl__augmenter *a, int w, int h)
{
    return reserve((void **)&a->img, &a->img_cap, 3 * (size_t)w * h) ? NULL : a->img;
}

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

static double mean_gray(const uint8_t *img, size_t n)
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

/* The tables on the bytes of RGB pixels from byte `from` to `bytes`:
 * byte i through table i % 3, its channel's. */
static void lut_base(const uint8_t lut[3][256], uint8_t *p, size_t from, size_t bytes)
{
    for (size_t i = from; i < bytes; i++)
        p[i] = lut[i % 3][p[i]];
}

#ifdef AUG_X86
/* Tables of 256 bytes applied 64 bytes a step with VBMI's two-table byte
 * permutes (each covers 128 entries; the index's top bit picks the pair):
 * one table for all channels where they are the same, else one per
 * channel and blends by each byte's channel. */
__attribute__((target("avx512f,avx512bw,avx512vbmi"))) static void
lut_vbmi(const uint8_t lut[3][256], uint8_t *p, size_t from, size_t bytes)
{
    (void)from;
    bool same = !memcmp(lut[0], lut[1], 256) && !memcmp(lut[0], lut[2], 256);
    __m512i t[3][4];
    for (int c = 0; c < (same ? 1 : 3); c++)
        for (int k = 0; k < 4; k++)
            t[c][k] = _mm512_loadu_si512(lut[c] + 64 * k);
    /* byte k of step s is channel (s + k) % 3 (64 = 1 mod 3) */
    static const uint64_t ch1[3] = {0x2492492492492492u, 0x9249249249249249u,
                                    0x4924924924924924u};
    static const uint64_t ch2[3] = {0x4924924924924924u, 0x2492492492492492u,
                                    0x9249249249249249u};
    size_t i = 0;
    for (size_t s = 0; i + 64 <= bytes; i += 64, s++) {
        __m512i v = _mm512_loadu_si512(p + i);
        __mmask64 top = _mm512_movepi8_mask(v);
        __m512i r[3];
        for (int c = 0; c < (same ? 1 : 3); c++)
            r[c] = _mm512_mask_blend_epi8(top, _mm512_permutex2var_epi8(t[c][0], v, t[c][1]),
                                          _mm512_permutex2var_epi8(t[c][2], v, t[c][3]));
        if (!same) {
            r[0] = _mm512_mask_blend_epi8(ch1[s % 3], r[0], r[1]);
            r[0] = _mm512_mask_blend_epi8(ch2[s % 3], r[0], r[2]);
        }
        _mm512_storeu_si512(p + i, r[0]);
    }
    lut_base(lut, p, i, bytes);
}
#endif

static void apply_lut(const uint8_t lut[3][256], uint8_t *img, size_t n)
{
    pthread_once(&tiers_once, tiers_init);
    luts[sl__image_tier()](lut, img, 0, 3 * n);
}

/* _blend(img, other, f) where other is a constant: one table. */
static void blend_const(uint8_t *img, size_t n, float f, float other)
{
    uint8_t lut[3][256];
    for (int v = 0; v < 256; v++)
        lut[0][v] = lut[1][v] = lut[2][v] = (uint8_t)clampf(f * v + (1 - f) * other);
    apply_lut(lut, img, n);
}

/* adjust_saturation: _blend(img, grayscale(img), f). */
static void blend_gray(uint8_t *img, size_t n, float f)
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
            out[j] = clampf(f * p[j] + g[j]);
        for (int j = 0; j < 3 * BLOCK; j++)
            p[j] = (uint8_t)out[j];
    }
    for (; i < n; i++) {
        uint8_t *p = img + 3 * i;
        float g = (1 - f) * gray_u8(p);
        p[0] = (uint8_t)clampf(f * p[0] + g);
        p[1] = (uint8_t)clampf(f * p[1] + g);
        p[2] = (uint8_t)clampf(f * p[2] + g);
    }
}

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
        o[i] = (uint8_t)clampf(f * c[i] + (1 - f) * (float)deg);
    }
}

/* adjust_sharpness: blend with the image smoothed by [1 1 1; 1 5 1; 1 1 1]
 * / 13 (rounded), whose border rows and columns are the image's. */
static int sharpness(sl__augmenter *a, uint8_t *img, int w, int h, float f)
{
    if (w <= 2 || h <= 2)
        return 0;
    size_t row = 3 * (size_t)w;
    if (reserve((void **)&a->tmp, &a->tmp_cap, row * h))
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
                out[j] = clampf(f * c[i + j] + (1 - f) * (float)deg[j]);
            for (int j = 0; j < BLOCK; j++)
                o[i + j] = (uint8_t)out[j];
        }
        sharpen_bytes(u, c, d, o, f, i, row - 3);
    }
    return 0;
}

static void autocontrast(uint8_t *img, size_t n)
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
            lut[c][v] = (uint8_t)clampf(((float)v - mn) * scale);
    }
    apply_lut(lut, img, n);
}

/* equalize: torchvision's _scale_channel per channel. */
static void equalize(uint8_t *img, size_t n)
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

static void point_op(uint8_t *img, size_t n, int kind, float mag)
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

/* rint() under the default rounding mode (half to even, as torch.round
 * and grid_sample's nearest), for |v| < 2^22, without a call into libm
 * where SSE4.1's roundss is not there to inline. */
static inline float round_even(float v)
{
    return (v + 12582912.0f) - 12582912.0f;
}

static inline uint8_t round_u8(float v)
{
    return (uint8_t)round_even(clampf(v));
}

/* One output pixel o of grid_sample (align_corners=False, zeros outside)
 * at source position (sx, sy) of src (w x h, rows of `row` bytes). */
static inline __attribute__((always_inline)) void
warp_pixel(const uint8_t *src, uint8_t *o, int w, int h, size_t row, float sx, float sy,
           bool bilinear, bool masked)
{
    if (!(sx > -1 && sx < w && sy > -1 && sy < h)) { /* NaN too */
        o[0] = o[1] = o[2] = 0;
        return;
    }
    if (!bilinear) {
        int rx = (int)round_even(sx), ry = (int)round_even(sy);
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
        o[c] = round_u8(masked ? acc[c] * cover : acc[c]);
}

/* grid_sample of src through the inverse map m, whose coordinates are
 * centred on the image. */
static void warp(const uint8_t *src, uint8_t *dst, int w, int h, const float m[6], bool bilinear,
                 bool masked)
{
    size_t row = 3 * (size_t)w;
    float cx = 0.5f * (float)w, cy = 0.5f * (float)h;
    for (int y = 0; y < h; y++) {
        float yc = (float)y + 0.5f - cy;
        float bx = m[1] * yc + m[2] + cx - 0.5f, by = m[4] * yc + m[5] + cy - 0.5f;
        uint8_t *o = dst + y * row;
        for (int x = 0; x < w; x++, o += 3) {
            float xc = (float)x + 0.5f - cx;
            warp_pixel(src, o, w, h, row, m[0] * xc + bx, m[3] * xc + by, bilinear, masked);
        }
    }
}

static void warp_bilinear_base(const uint8_t *src, uint8_t *dst, int w, int h, const float m[6],
                               bool masked)
{
    warp(src, dst, w, h, m, true, masked);
}

#ifdef AUG_X86
/* The bilinear warp 8 pixels a step: coordinates as warp's (the same
 * float operations), the four neighbours of each gathered as 32-bit
 * words (src needs 4 readable bytes past its end), the integers of
 * warp_pixel per channel. Steps with a pixel outside or at the border go
 * to warp_pixel. */
__attribute__((target("avx2"))) static void warp_bilinear_avx2(const uint8_t *src, uint8_t *dst,
                                                                int w, int h, const float m[6],
                                                                bool masked)
{
    size_t row = 3 * (size_t)w;
    float cx = 0.5f * (float)w, cy = 0.5f * (float)h;
    const __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7), one = _mm256_set1_epi32(1);
    const __m256i k2048 = _mm256_set1_epi32(2048), bytes = _mm256_set1_epi32(255);
    const __m256i wlim = _mm256_set1_epi32(w - 1), hlim = _mm256_set1_epi32(h - 1);
    /* per 128-bit lane: pixels' R, G, B bytes together, the 4 spare last */
    const __m256i pack = _mm256_setr_epi8(0, 1, 2, 4, 5, 6, 8, 9, 10, 12, 13, 14, -1, -1, -1, -1,
                                          0, 1, 2, 4, 5, 6, 8, 9, 10, 12, 13, 14, -1, -1, -1, -1);
    for (int y = 0; y < h; y++) {
        float yc = (float)y + 0.5f - cy;
        float bx = m[1] * yc + m[2] + cx - 0.5f, by = m[4] * yc + m[5] + cy - 0.5f;
        uint8_t *o = dst + y * row;
        int x = 0;
        for (; x + 8 <= w; x += 8) {
            __m256 xc = _mm256_sub_ps(
                _mm256_add_ps(_mm256_cvtepi32_ps(_mm256_add_epi32(_mm256_set1_epi32(x), lane)),
                              _mm256_set1_ps(0.5f)),
                _mm256_set1_ps(cx));
            __m256 sx = _mm256_add_ps(_mm256_mul_ps(_mm256_set1_ps(m[0]), xc), _mm256_set1_ps(bx));
            __m256 sy = _mm256_add_ps(_mm256_mul_ps(_mm256_set1_ps(m[3]), xc), _mm256_set1_ps(by));
            /* floor for sx > -1; NaN and far values fail the range test */
            __m256i x0 = _mm256_sub_epi32(_mm256_cvttps_epi32(_mm256_add_ps(sx, _mm256_set1_ps(1))), one);
            __m256i y0 = _mm256_sub_epi32(_mm256_cvttps_epi32(_mm256_add_ps(sy, _mm256_set1_ps(1))), one);
            __m256i out = _mm256_or_si256(
                _mm256_or_si256(_mm256_cmpgt_epi32(_mm256_setzero_si256(), x0),
                                _mm256_cmpgt_epi32(_mm256_add_epi32(x0, one), wlim)),
                _mm256_or_si256(_mm256_cmpgt_epi32(_mm256_setzero_si256(), y0),
                                _mm256_cmpgt_epi32(_mm256_add_epi32(y0, one), hlim)));
            __m256 inrange = _mm256_and_ps(
                _mm256_and_ps(_mm256_cmp_ps(sx, _mm256_set1_ps(-1), _CMP_GT_OQ),
                              _mm256_cmp_ps(sx, _mm256_set1_ps((float)w), _CMP_LT_OQ)),
                _mm256_and_ps(_mm256_cmp_ps(sy, _mm256_set1_ps(-1), _CMP_GT_OQ),
                              _mm256_cmp_ps(sy, _mm256_set1_ps((float)h), _CMP_LT_OQ)));
            if (!_mm256_testz_si256(out, out) || _mm256_movemask_ps(inrange) != 0xff) {
                float fx[8], fy[8];
                _mm256_storeu_ps(fx, sx);
                _mm256_storeu_ps(fy, sy);
                for (int i = 0; i < 8; i++)
                    warp_pixel(src, o + 3 * (size_t)(x + i), w, h, row, fx[i], fy[i], true,
                               masked);
                continue;
            }
            __m256 ax = _mm256_sub_ps(sx, _mm256_cvtepi32_ps(x0));
            __m256 ay = _mm256_sub_ps(sy, _mm256_cvtepi32_ps(y0));
            __m256i wx = _mm256_cvttps_epi32(_mm256_add_ps(_mm256_mul_ps(ax, _mm256_set1_ps(2048)),
                                                           _mm256_set1_ps(0.5f)));
            __m256i wy = _mm256_cvttps_epi32(_mm256_add_ps(_mm256_mul_ps(ay, _mm256_set1_ps(2048)),
                                                           _mm256_set1_ps(0.5f)));
            __m256i off = _mm256_add_epi32(_mm256_mullo_epi32(y0, _mm256_set1_epi32((int)row)),
                                           _mm256_mullo_epi32(x0, _mm256_set1_epi32(3)));
            const int *base = (const int *)(const void *)src;
            __m256i p0 = _mm256_i32gather_epi32(base, off, 1);
            __m256i p1 = _mm256_i32gather_epi32(base, _mm256_add_epi32(off, _mm256_set1_epi32(3)), 1);
            __m256i q0 = _mm256_i32gather_epi32(base, _mm256_add_epi32(off, _mm256_set1_epi32((int)row)), 1);
            __m256i q1 = _mm256_i32gather_epi32(base, _mm256_add_epi32(off, _mm256_set1_epi32((int)row + 3)), 1);
            __m256i rgb = _mm256_setzero_si256();
            for (int c = 0; c < 3; c++) {
                __m256i a = _mm256_and_si256(_mm256_srli_epi32(p0, 8 * c), bytes);
                __m256i b = _mm256_and_si256(_mm256_srli_epi32(p1, 8 * c), bytes);
                __m256i e = _mm256_and_si256(_mm256_srli_epi32(q0, 8 * c), bytes);
                __m256i f = _mm256_and_si256(_mm256_srli_epi32(q1, 8 * c), bytes);
                __m256i top = _mm256_add_epi32(_mm256_mullo_epi32(a, k2048),
                                               _mm256_mullo_epi32(_mm256_sub_epi32(b, a), wx));
                __m256i bot = _mm256_add_epi32(_mm256_mullo_epi32(e, k2048),
                                               _mm256_mullo_epi32(_mm256_sub_epi32(f, e), wx));
                __m256i v = _mm256_add_epi32(_mm256_slli_epi32(top, 11),
                                             _mm256_mullo_epi32(_mm256_sub_epi32(bot, top), wy));
                v = _mm256_srai_epi32(_mm256_add_epi32(v, _mm256_set1_epi32(1 << 21)), 22);
                rgb = _mm256_or_si256(rgb, _mm256_slli_epi32(v, 8 * c));
            }
            __m256i packed = _mm256_shuffle_epi8(rgb, pack);
            uint8_t *at = o + 3 * (size_t)x;
            if (x + 8 + 2 <= w) { /* the 4 spare bytes land on pixels still to come */
                _mm_storeu_si128((__m128i *)(void *)at, _mm256_castsi256_si128(packed));
                _mm_storeu_si128((__m128i *)(void *)(at + 12), _mm256_extracti128_si256(packed, 1));
            } else {
                uint8_t tmp[32];
                _mm256_storeu_si256((__m256i *)(void *)tmp, packed);
                memcpy(at, tmp, 12);
                memcpy(at + 12, tmp + 16, 12);
            }
        }
        for (; x < w; x++) {
            float xc = (float)x + 0.5f - cx;
            warp_pixel(src, o + 3 * (size_t)x, w, h, row, m[0] * xc + bx, m[3] * xc + by, true,
                       masked);
        }
    }
}

/* The same 16 pixels a step with AVX-512 (gathers of 16 words, mask
 * registers for the tests). */
__attribute__((target("avx512f,avx512bw"))) static void
warp_bilinear_avx512(const uint8_t *src, uint8_t *dst, int w, int h, const float m[6],
                     bool masked)
{
    size_t row = 3 * (size_t)w;
    float cx = 0.5f * (float)w, cy = 0.5f * (float)h;
    const __m512i lane = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
    const __m512i one = _mm512_set1_epi32(1), k2048 = _mm512_set1_epi32(2048);
    const __m512i bytes = _mm512_set1_epi32(255), zero = _mm512_setzero_si512();
    const __m512i wlim = _mm512_set1_epi32(w - 1), hlim = _mm512_set1_epi32(h - 1);
    const __m512i pack = _mm512_broadcast_i32x4(
        _mm_setr_epi8(0, 1, 2, 4, 5, 6, 8, 9, 10, 12, 13, 14, -1, -1, -1, -1));
    for (int y = 0; y < h; y++) {
        float yc = (float)y + 0.5f - cy;
        float bx = m[1] * yc + m[2] + cx - 0.5f, by = m[4] * yc + m[5] + cy - 0.5f;
        uint8_t *o = dst + y * row;
        int x = 0;
        for (; x + 16 <= w; x += 16) {
            __m512 xc = _mm512_sub_ps(
                _mm512_add_ps(_mm512_cvtepi32_ps(_mm512_add_epi32(_mm512_set1_epi32(x), lane)),
                              _mm512_set1_ps(0.5f)),
                _mm512_set1_ps(cx));
            __m512 sx = _mm512_add_ps(_mm512_mul_ps(_mm512_set1_ps(m[0]), xc), _mm512_set1_ps(bx));
            __m512 sy = _mm512_add_ps(_mm512_mul_ps(_mm512_set1_ps(m[3]), xc), _mm512_set1_ps(by));
            __m512i x0 = _mm512_sub_epi32(_mm512_cvttps_epi32(_mm512_add_ps(sx, _mm512_set1_ps(1))), one);
            __m512i y0 = _mm512_sub_epi32(_mm512_cvttps_epi32(_mm512_add_ps(sy, _mm512_set1_ps(1))), one);
            __mmask16 in = _mm512_cmp_epi32_mask(x0, zero, _MM_CMPINT_NLT) &
                           _mm512_cmp_epi32_mask(_mm512_add_epi32(x0, one), wlim, _MM_CMPINT_LE) &
                           _mm512_cmp_epi32_mask(y0, zero, _MM_CMPINT_NLT) &
                           _mm512_cmp_epi32_mask(_mm512_add_epi32(y0, one), hlim, _MM_CMPINT_LE) &
                           _mm512_cmp_ps_mask(sx, _mm512_set1_ps(-1), _CMP_GT_OQ) &
                           _mm512_cmp_ps_mask(sx, _mm512_set1_ps((float)w), _CMP_LT_OQ) &
                           _mm512_cmp_ps_mask(sy, _mm512_set1_ps(-1), _CMP_GT_OQ) &
                           _mm512_cmp_ps_mask(sy, _mm512_set1_ps((float)h), _CMP_LT_OQ);
            if (in != 0xffff) {
                float fx[16], fy[16];
                _mm512_storeu_ps(fx, sx);
                _mm512_storeu_ps(fy, sy);
                for (int i = 0; i < 16; i++)
                    warp_pixel(src, o + 3 * (size_t)(x + i), w, h, row, fx[i], fy[i], true,
                               masked);
                continue;
            }
            __m512 ax = _mm512_sub_ps(sx, _mm512_cvtepi32_ps(x0));
            __m512 ay = _mm512_sub_ps(sy, _mm512_cvtepi32_ps(y0));
            __m512i wx = _mm512_cvttps_epi32(_mm512_add_ps(_mm512_mul_ps(ax, _mm512_set1_ps(2048)),
                                                           _mm512_set1_ps(0.5f)));
            __m512i wy = _mm512_cvttps_epi32(_mm512_add_ps(_mm512_mul_ps(ay, _mm512_set1_ps(2048)),
                                                           _mm512_set1_ps(0.5f)));
            __m512i off = _mm512_add_epi32(_mm512_mullo_epi32(y0, _mm512_set1_epi32((int)row)),
                                           _mm512_mullo_epi32(x0, _mm512_set1_epi32(3)));
            __m512i p0 = _mm512_i32gather_epi32(off, src, 1);
            __m512i p1 = _mm512_i32gather_epi32(_mm512_add_epi32(off, _mm512_set1_epi32(3)), src, 1);
            __m512i q0 = _mm512_i32gather_epi32(_mm512_add_epi32(off, _mm512_set1_epi32((int)row)), src, 1);
            __m512i q1 = _mm512_i32gather_epi32(_mm512_add_epi32(off, _mm512_set1_epi32((int)row + 3)), src, 1);
            __m512i rgb = zero;
            for (int c = 0; c < 3; c++) {
                __m512i a = _mm512_and_si512(_mm512_srli_epi32(p0, 8 * c), bytes);
                __m512i b = _mm512_and_si512(_mm512_srli_epi32(p1, 8 * c), bytes);
                __m512i e = _mm512_and_si512(_mm512_srli_epi32(q0, 8 * c), bytes);
                __m512i f = _mm512_and_si512(_mm512_srli_epi32(q1, 8 * c), bytes);
                __m512i top = _mm512_add_epi32(_mm512_mullo_epi32(a, k2048),
                                               _mm512_mullo_epi32(_mm512_sub_epi32(b, a), wx));
                __m512i bot = _mm512_add_epi32(_mm512_mullo_epi32(e, k2048),
                                               _mm512_mullo_epi32(_mm512_sub_epi32(f, e), wx));
                __m512i v = _mm512_add_epi32(_mm512_slli_epi32(top, 11),
                                             _mm512_mullo_epi32(_mm512_sub_epi32(bot, top), wy));
                v = _mm512_srai_epi32(_mm512_add_epi32(v, _mm512_set1_epi32(1 << 21)), 22);
                rgb = _mm512_or_si512(rgb, _mm512_slli_epi32(v, 8 * c));
            }
            __m512i packed = _mm512_shuffle_epi8(rgb, pack);
            uint8_t *at = o + 3 * (size_t)x;
            if (x + 16 + 2 <= w) { /* the 4 spare bytes land on pixels still to come */
                _mm_storeu_si128((__m128i *)(void *)at, _mm512_castsi512_si128(packed));
                _mm_storeu_si128((__m128i *)(void *)(at + 12), _mm512_extracti32x4_epi32(packed, 1));
                _mm_storeu_si128((__m128i *)(void *)(at + 24), _mm512_extracti32x4_epi32(packed, 2));
                _mm_storeu_si128((__m128i *)(void *)(at + 36), _mm512_extracti32x4_epi32(packed, 3));
            } else {
                uint8_t tmp[64];
                _mm512_storeu_si512(tmp, packed);
                for (int k = 0; k < 4; k++)
                    memcpy(at + 12 * k, tmp + 16 * k, 12);
            }
        }
        for (; x < w; x++) {
            float xc = (float)x + 0.5f - cx;
            warp_pixel(src, o + 3 * (size_t)x, w, h, row, m[0] * xc + bx, m[3] * xc + by, true,
                       masked);
        }
    }
}
#endif

/* F.affine with an integer translation only: a shift, zeros let in. */
static void shift(const uint8_t *src, uint8_t *dst, int w, int h, int tx, int ty)
{
    size_t row = 3 * (size_t)w;
    memset(dst, 0, row * h);
    int x0 = tx > 0 ? tx : 0, x1 = tx < 0 ? w + tx : w;
    if (x1 <= x0)
        return;
    for (int y = 0; y < h; y++) {
        int sy = y - ty;
        if (sy < 0 || sy >= h)
            continue;
        memcpy(dst + y * row + 3 * (size_t)x0, src + sy * row + 3 * (size_t)(x0 - tx),
               3 * (size_t)(x1 - x0));
    }
}

static size_t row_pad(int w)
{
    return 3 * (size_t)w + 8; /* the last gathers: one row and a pixel on */
}

/* img through the inverse map m; masked: with torchvision's fill of 0
 * (RandomRotation, RandomAffine) rather than none (auto_augment's ops). */
static int geometric(sl__augmenter *a, uint8_t *img, int w, int h, const float m[6],
                     bool bilinear, bool masked)
{
    size_t bytes = 3 * (size_t)w * h;
    if (reserve((void **)&a->tmp, &a->tmp_cap, bytes + 4)) /* the gathers' 4 bytes */
        return SL_ENOMEM;
    memcpy(a->tmp, img, bytes);
    memset(a->tmp + bytes, 0, 4);
    /* a whole-pixel translation (TranslateX/Y, and RandomAffine's with no
     * rotation, scale or shear) is a copy: the same pixels either way */
    if (m[0] == 1 && m[1] == 0 && m[3] == 0 && m[4] == 1 && m[2] == nearbyintf(m[2]) &&
        m[5] == nearbyintf(m[5]))
        shift(a->tmp, img, w, h, (int)-m[2], (int)-m[5]);
    else if (bilinear && bytes + row_pad(w) < ((size_t)1 << 31)) /* 32-bit gather offsets */
        kernels()->warp_bilinear(a->tmp, img, w, h, m, masked);
    else
        warp(a->tmp, img, w, h, m, bilinear, masked);
    return 0;
}

static int apply_op(sl__augmenter *a, const sl_image_spec *s, const sl__aug_op *op,
                    uint8_t *img, int w, int h)
{
    size_t n = (size_t)w * h;
    bool bilinear = s->interpolation == SL_INTERP_BILINEAR;
    float m[6], mag = op->magnitude;
    double deg = atan(mag) * 180 / M_PI;
    switch (op->kind) {
    case SL__OP_SHEAR_X: /* about the top-left corner */
        inverse_affine(-0.5 * w, -0.5 * h, 0, 0, 0, 1, deg, 0, m);
        return geometric(a, img, w, h, m, bilinear, false);
    case SL__OP_SHEAR_Y:
        inverse_affine(-0.5 * w, -0.5 * h, 0, 0, 0, 1, 0, deg, m);
        return geometric(a, img, w, h, m, bilinear, false);
    case SL__OP_TRANSLATE_X:
    case SL__OP_TRANSLATE_Y: { /* int(magnitude): towards zero */
        double t = trunc(mag);
        inverse_affine(0, 0, 0, op->kind == SL__OP_TRANSLATE_X ? t : 0,
                       op->kind == SL__OP_TRANSLATE_Y ? t : 0, 1, 0, 0, m);
        return geometric(a, img, w, h, m, bilinear, false);
    }
    case SL__OP_ROTATE:
        inverse_affine(0, 0, -mag, 0, 0, 1, 0, 0, m);
        return geometric(a, img, w, h, m, bilinear, false);
    case SL__OP_BRIGHTNESS:
        blend_const(img, n, 1 + mag, 0);
        return 0;
    case SL__OP_COLOR:
        blend_gray(img, n, 1 + mag);
        return 0;
    case SL__OP_CONTRAST:
        blend_const(img, n, 1 + mag, (float)mean_gray(img, n));
        return 0;
    case SL__OP_SHARPNESS:
        return sharpness(a, img, w, h, 1 + mag);
    case SL__OP_POSTERIZE:
    case SL__OP_SOLARIZE:
    case SL__OP_INVERT:
        point_op(img, n, op->kind, mag);
        return 0;
    case SL__OP_AUTOCONTRAST:
        autocontrast(img, n);
        return 0;
    case SL__OP_EQUALIZE:
        equalize(img, n);
        return 0;
    default:
        return 0;
    }
}

/* ---- Gaussian blur: separable, reflect padding, float, rounded ---- */

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

static int blur(sl__augmenter *a, uint8_t *img, int w, int h, int ksize, float sigma)
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
    if (reserve((void **)&a->f, &a->f_cap, (row * h + padded + row) * sizeof(float)))
        return SL_ENOMEM;
    float *rows = a->f, *pad = rows + row * h, *out = pad + padded;
    const aug_kernels *k = kernels();
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
            o[j] = round_u8(out[j]);
    }
    return 0;
}

int sl__aug_apply(sl__augmenter *a, const sl_image_spec *s, const sl__aug *p,
                  bool colour_folded, uint8_t *img, int w, int h)
{
    size_t n = (size_t)w * h;
    int rc = 0;
    if (p->affine)
        rc = geometric(a, img, w, h, p->m, s->interpolation == SL_INTERP_BILINEAR, true);
    for (int i = 0; rc == 0 && i < p->nops; i++)
        rc = apply_op(a, s, &p->op[i], img, w, h);
    if (rc)
        return rc;
    if (p->colour.on && !colour_folded) {
        sl__colour_map m;
        sl__colour_fold(&p->colour, p->colour.jitter ? mean_gray(img, n) : 0, &m);
        /* a gray image has no chroma for the matrix to move: what is left
         * of it is the gain and offset on every byte */
        if (p->gray_source && !p->affine && !p->nops)
            sl__colour_gain(img, 3 * n, m.a, m.o);
        else
            colour_rgb(&m, img, n);
    }
    if (p->blur)
        rc = blur(a, img, w, h, s->blur_kernel, p->sigma);
    if (rc == 0 && p->solarize)
        point_op(img, n, SL__OP_SOLARIZE, s->solarize_threshold);
    return rc;
}

/* ---- erasing, on the output ---- */

void sl__aug_erase(const sl_image_spec *s, const sl__aug *p, void *out)
{
    if (!p->erase || p->eh <= 0 || p->ew <= 0)
        return;
    sl__rng vr = {p->erase_seed, 0};
    size_t W = (size_t)s->width, plane = W * (size_t)s->height;
    bool chw = s->layout == SL_LAYOUT_CHW, f32 = s->dtype == SL_FLOAT32;
    /* torchvision draws its values as a [C, h, w] tensor: channel-major */
    for (int c = 0; c < 3; c++) {
        uint8_t fixed = (uint8_t)clampf(nearbyintf(s->erasing_value[c]));
        for (int y = p->ei; y < p->ei + p->eh; y++)
            for (int x = p->ej; x < p->ej + p->ew; x++) {
                size_t at = chw ? c * plane + y * W + x : (y * W + x) * 3 + c;
                if (f32)
                    ((float *)out)[at] = s->erasing_random ? (float)sl__rng_normal(&vr)
                                                           : s->erasing_value[c];
                else
                    ((uint8_t *)out)[at] = s->erasing_random ? (uint8_t)sl__rng_next(&vr)
                                                             : fixed;
            }
    }
}
