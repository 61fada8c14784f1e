/*
 * Image augmentations: torchvision's transforms on the resized image.
 * This file carries out a plan (sl__aug_apply: its ops in their order)
 * and erasing, holds the per-thread scratch, and picks the kernels of the
 * process's tier; augment_kernels.h lists the other files.
 *
 * Carrying out works on uint8 RGB HWC at the output size, in place, with
 * one scratch image and one float plane per thread (sl__augmenter) that
 * are reused from image to image. Arithmetic follows torchvision's tensor
 * ops on uint8: blends compute in float32 and truncate (_blend), filters
 * round (gaussian_blur, the sharpness kernel, grid_sample), so that each
 * op alone is within a level of torchvision's on the same input
 * (tests/python/test_augment.py).
 */
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <string.h>
#include "../core/alloc.h"
#include "../core/error.h"
#include "augment_kernels.h"

/* ---- the kernels of each tier ---- */

/* Filled once, read-only after: per tier (cpu.h) its table, the portable
 * one below AVX2, and the AVX-512 one with the portable byte tables where
 * the CPU lacks VBMI. `ready` spares the per-row callers (the colour
 * stage) a pthread_once once it is set. */
static sl__augment_kernels tiers[SL__IMAGE_TIERS];
static atomic_bool ready;
static pthread_once_t tiers_once = PTHREAD_ONCE_INIT;

static void tiers_init(void)
{
    for (int l = 0; l < SL__IMAGE_TIERS; l++)
        tiers[l] = sl__augment_c;
#ifdef SL__IMAGE_HAVE_AVX
    tiers[SL__IMAGE_AVX2] = sl__augment_avx2;
    tiers[SL__IMAGE_AVX512] = sl__augment_avx512;
    if (!sl__image_cpu_has(SL__IMAGE_VBMI))
        tiers[SL__IMAGE_AVX512].lut = sl__aug_lut_c;
#endif
    atomic_store_explicit(&ready, true, memory_order_release);
}

const sl__augment_kernels *sl__aug_kernels(void)
{
    if (!atomic_load_explicit(&ready, memory_order_acquire))
        pthread_once(&tiers_once, tiers_init);
    return &tiers[sl__image_tier()];
}

/* ---- scratch ---- */

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

int sl__aug_reserve(void **p, size_t *cap, size_t need)
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
    return sl__aug_reserve((void **)&a->img, &a->img_cap, 3 * (size_t)w * h) ? NULL : a->img;
}

/* ---- carrying out the plan ---- */

static int apply_op(sl__augmenter *a, const sl_image_spec *s, const sl__aug_op *op,
                    uint8_t *img, int w, int h)
{
    size_t n = (size_t)w * h;
    bool bilinear = s->interpolation == SL_INTERP_BILINEAR;
    float m[6], mag = op->magnitude;
    double deg = atan(mag) * 180 / M_PI;
    switch (op->kind) {
    case SL__OP_SHEAR_X: /* about the top-left corner */
        sl__aug_inverse_affine(-0.5 * w, -0.5 * h, 0, 0, 0, 1, deg, 0, m);
        return sl__aug_geometric(a, img, w, h, m, bilinear, false);
    case SL__OP_SHEAR_Y:
        sl__aug_inverse_affine(-0.5 * w, -0.5 * h, 0, 0, 0, 1, 0, deg, m);
        return sl__aug_geometric(a, img, w, h, m, bilinear, false);
    case SL__OP_TRANSLATE_X:
    case SL__OP_TRANSLATE_Y: { /* int(magnitude): towards zero */
        double t = trunc(mag);
        sl__aug_inverse_affine(0, 0, 0, op->kind == SL__OP_TRANSLATE_X ? t : 0,
                               op->kind == SL__OP_TRANSLATE_Y ? t : 0, 1, 0, 0, m);
        return sl__aug_geometric(a, img, w, h, m, bilinear, false);
    }
    case SL__OP_ROTATE:
        sl__aug_inverse_affine(0, 0, -mag, 0, 0, 1, 0, 0, m);
        return sl__aug_geometric(a, img, w, h, m, bilinear, false);
    case SL__OP_BRIGHTNESS:
        sl__aug_blend_const(img, n, 1 + mag, 0);
        return 0;
    case SL__OP_COLOR:
        sl__aug_blend_gray(img, n, 1 + mag);
        return 0;
    case SL__OP_CONTRAST:
        sl__aug_blend_const(img, n, 1 + mag, (float)sl__aug_mean_gray(img, n));
        return 0;
    case SL__OP_SHARPNESS:
        return sl__aug_sharpness(a, img, w, h, 1 + mag);
    case SL__OP_POSTERIZE:
    case SL__OP_SOLARIZE:
    case SL__OP_INVERT:
        sl__aug_point_op(img, n, op->kind, mag);
        return 0;
    case SL__OP_AUTOCONTRAST:
        sl__aug_autocontrast(img, n);
        return 0;
    case SL__OP_EQUALIZE:
        sl__aug_equalize(img, n);
        return 0;
    default:
        return 0;
    }
}

int sl__aug_apply(sl__augmenter *a, const sl_image_spec *s, const sl__aug *p,
                  bool colour_folded, uint8_t *img, int w, int h)
{
    size_t n = (size_t)w * h;
    int rc = 0;
    if (p->affine)
        rc = sl__aug_geometric(a, img, w, h, p->m, s->interpolation == SL_INTERP_BILINEAR, true);
    for (int i = 0; rc == 0 && i < p->nops; i++)
        rc = apply_op(a, s, &p->op[i], img, w, h);
    if (rc)
        return rc;
    if (p->colour.on && !colour_folded) {
        sl__colour_map m;
        sl__colour_fold(&p->colour, p->colour.jitter ? sl__aug_mean_gray(img, n) : 0, &m);
        /* a gray image has no chroma for the matrix to move: what is left
         * of it is the gain and offset on every byte */
        if (p->gray_source && !p->affine && !p->nops)
            sl__colour_gain(img, 3 * n, m.a, m.o);
        else
            sl__colour_rgb(&m, img, n);
    }
    if (p->blur)
        rc = sl__aug_blur(a, img, w, h, s->blur_kernel, p->sigma);
    if (rc == 0 && p->solarize)
        sl__aug_point_op(img, n, SL__OP_SOLARIZE, s->solarize_threshold);
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
        uint8_t fixed = (uint8_t)sl__aug_clamp(nearbyintf(s->erasing_value[c]));
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
