/*
 * Image augmentations (augment*.c; augment_kernels.h says which file holds
 * what): what sl_image_spec asks for besides the crop, flip and
 * normalisation, as torchvision's transforms define them.
 *
 * A plan is drawn per image before decoding (sl__aug_draw: every random
 * choice, from the element's stream, in a fixed order), then carried out
 * on the resized image, uint8 RGB HWC at the output size:
 *
 *   resize -> [colour folded into the YCbCr conversion, when it is first]
 *          -> affine warp -> auto_augment ops -> colour -> blur -> solarize
 *          -> store (layout, dtype, normalise) -> erasing on the output
 */
#ifndef SL_IMAGE_AUGMENT_H
#define SL_IMAGE_AUGMENT_H

#include <stdbool.h>
#include <stdint.h>
#include "../core/rng.h"
#include "sluice.h"

/* One pixel op of an auto_augment policy. */
enum {
    SL__OP_IDENTITY,
    SL__OP_SHEAR_X,
    SL__OP_SHEAR_Y,
    SL__OP_TRANSLATE_X,
    SL__OP_TRANSLATE_Y,
    SL__OP_ROTATE,
    SL__OP_BRIGHTNESS,
    SL__OP_COLOR,
    SL__OP_CONTRAST,
    SL__OP_SHARPNESS,
    SL__OP_POSTERIZE,
    SL__OP_SOLARIZE,
    SL__OP_AUTOCONTRAST,
    SL__OP_EQUALIZE,
    SL__OP_INVERT,
};

/* The most ops one image gets (RandAugment's num_ops is checked
 * against it). */
#define SL__AUG_MAX_OPS 16

typedef struct sl__aug_op {
    int kind;        /* SL__OP_* */
    float magnitude; /* torchvision's, signed */
} sl__aug_op;

/* ColorJitter (with RandomGrayscale after it): in the order drawn,
 * brightness, contrast, saturation and hue factors (1, 1, 1, 0 when left
 * out), folded into Y' = a Y + o and (Cb', Cr') = K (Cb, Cr) about 128
 * once the image's mean luma is known (sl__colour_fold). */
typedef struct sl__colour {
    bool on;
    bool jitter;
    bool gray;
    int order[4];      /* 0 brightness, 1 contrast, 2 saturation, 3 hue */
    float factor[4];
} sl__colour;

/* The fold: luma gain and offset, and the chroma matrix; then the same
 * in fixed point, made by the first sl__colour_planes (ready). */
typedef struct sl__colour_map {
    float a, o;
    float k[2][2];
    bool ready, fast;   /* fast: coefficients fit the 16-bit kernel */
    int16_t a16, o16, k16[4];
} sl__colour_map;

void sl__colour_fold(const sl__colour *c, double mean_y, sl__colour_map *m);

typedef struct sl__aug {
    bool affine;          /* rotate/affine drawn: torchvision's inverse map */
    float m[6];
    int nops;             /* auto_augment's ops, in order */
    sl__aug_op op[SL__AUG_MAX_OPS];
    sl__colour colour;
    bool blur;
    float sigma;
    bool solarize;
    bool erase;
    int ei, ej, eh, ew;   /* the erased box: top row, left column, size */
    uint64_t erase_seed;  /* erasing_random's values' own stream */
    bool gray_source;     /* set by the caller: the file is grayscale */
} sl__aug;

/* Whether spec asks for any augmentation. */
bool sl__aug_any(const sl_image_spec *spec);
/* Draws the plan for one output image (spec->width x spec->height). */
void sl__aug_draw(const sl_image_spec *spec, sl__rng *rng, sl__aug *plan);
/* Whether the plan has pixel ops after the resize (erasing aside, which
 * writes the finished output). */
bool sl__aug_pixels(const sl__aug *plan);

typedef struct sl__augmenter sl__augmenter; /* scratch; one per thread */
sl__augmenter *sl__augmenter_new(void);
void sl__augmenter_free(sl__augmenter *a);
/* A w x h uint8 RGB image of a's own to resize into when the output is
 * not one (reused; contents undefined). NULL: out of memory. */
uint8_t *sl__augmenter_image(sl__augmenter *a, int w, int h);

/* Carries out the plan's pixel ops on img (uint8 RGB HWC, w x h) in
 * place; colour_folded: the resize already applied plan->colour.
 * 0 or SL_ENOMEM. */
int sl__aug_apply(sl__augmenter *a, const sl_image_spec *spec, const sl__aug *plan,
                  bool colour_folded, uint8_t *img, int w, int h);
/* Erases the plan's box of the output image out (spec's size, layout and
 * dtype). */
void sl__aug_erase(const sl_image_spec *spec, const sl__aug *plan, void *out);

/* The map's 16-bit coefficients for the resampler's fused colour pass
 * (resize_kernels.h, ycc_rgb_colour): A, O, K00, K01, K10, K11; false
 * where they do not fit (gains of 7.9 and more, offsets past 2000). */
bool sl__colour_coef(sl__colour_map *m, int16_t c[6]);
/* v -> clamp(a v + o), truncated, on n bytes. */
void sl__colour_gain(uint8_t *p, size_t n, float a, float o);
/* The same on one output row of Y, Cb, Cr samples, before conversion. */
void sl__colour_planes(sl__colour_map *m, uint8_t *y, uint8_t *cb, uint8_t *cr, int n);

#endif
