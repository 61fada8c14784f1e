/*
 * The plan of an image's augmentations (augment.h): every random choice,
 * made before decoding in one fixed order (affine, auto_augment, colour
 * jitter, grayscale, blur, solarize, erasing), each only when its feature
 * is on, so that the element's stream and nothing else decides the
 * output. torchvision's draws, op lists and magnitude tables.
 */
#include <math.h>
#include <string.h>
#include "augment_kernels.h"

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
    sl__aug_inverse_affine(0, 0, -angle, tx, ty, scale, shx, shy, p->m);
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
