/*
 * sl_image_spec: its defaults (sl_image_spec_init), loading a caller's
 * layout (core/versioned.h), the checks map_image makes when the pipeline
 * is built (as torchvision checks its arguments), and its hash for the
 * fingerprint.
 */
#include <math.h>
#include <stddef.h>
#include <string.h>
#include "../core/hash.h"
#include "../core/versioned.h"
#include "map_image.h"

/* The smallest layout a caller may pass: the fields through allow_warnings
 * (every field after it defaults to 0). */
#define SPEC_V1_SIZE offsetof(sl_image_spec, fast_upsample)

SL_API int sl_image_spec_init(sl_image_spec *spec, size_t struct_size, int crop, int size)
{
    if (crop < SL_CROP_RANDOM_RESIZED || crop > SL_CROP_RESIZE || size < 1 || size > 65535)
        return sl__set_error(SL_EINVAL, "sl_image_spec_init: bad policy %d or size %d", crop,
                             size);
    sl_image_spec d = {.struct_size = struct_size, .crop = crop, .height = size, .width = size};
    d.resize_shorter = (int)lround(size * 256.0 / 224.0);
    d.scale_min = 0.08f;
    d.scale_max = 1.0f;
    d.ratio_min = 3.0f / 4.0f;
    d.ratio_max = 4.0f / 3.0f;
    d.flip_prob = crop == SL_CROP_RANDOM_RESIZED ? 0.5f : 0.0f;
    d.layout = SL_LAYOUT_HWC;
    d.dtype = SL_UINT8;
    const float mean[3] = {0.485f, 0.456f, 0.406f}, std[3] = {0.229f, 0.224f, 0.225f};
    memcpy(d.mean, mean, sizeof mean);
    memcpy(d.std, std, sizeof std);
    d.max_pixels = 100000000;
    /* the augmentations' parameters, for when one is turned on */
    d.rand_augment_num_ops = 2;
    d.rand_augment_magnitude = 9;
    d.num_magnitude_bins = 31;
    d.blur_kernel = 23;
    d.blur_sigma[0] = 0.1f;
    d.blur_sigma[1] = 2.0f;
    d.solarize_threshold = 128;
    d.erasing_scale[0] = 0.02f;
    d.erasing_scale[1] = 0.33f;
    d.erasing_ratio[0] = 0.3f;
    d.erasing_ratio[1] = 3.3f;
    return sl__struct_init(spec, struct_size, &d, sizeof d, SPEC_V1_SIZE, "sl_image_spec_init");
}

/* The caller's spec, of whatever layout, as this library's (versioned.h):
 * zeros for the fields an older caller lacks. */
int sl__image_spec_load(const sl_image_spec *in, sl_image_spec *out)
{
    return sl__struct_load(in, out, NULL, sizeof *out, SPEC_V1_SIZE, "map_image");
}

static bool range_ok(const float v[2], double lo, double hi)
{
    return v[0] >= lo && v[0] <= v[1] && v[1] <= hi;
}

static bool is_prob(float p)
{
    return p >= 0 && p <= 1;
}

/* The augmentations' fields, as torchvision checks its arguments. */
static int check_augment(const sl_image_spec *s)
{
    const float probs[] = {s->color_jitter_prob, s->grayscale_prob, s->blur_prob,
                           s->solarize_prob, s->erasing_prob};
    const char *names[] = {"color_jitter_prob", "grayscale_prob", "blur_prob", "solarize_prob",
                           "erasing_prob"};
    for (int i = 0; i < 5; i++)
        if (!is_prob(probs[i]))
            return sl__set_error(SL_EINVAL, "map_image: %s %g is outside [0, 1]", names[i],
                                 probs[i]);
    if (s->auto_augment < 0 || s->auto_augment > SL_AUTO_AUGMENT_IMAGENET)
        return sl__set_error(SL_EINVAL, "map_image: bad auto_augment %d", s->auto_augment);
    if (s->auto_augment && (s->num_magnitude_bins < 1 || s->num_magnitude_bins > 1000))
        return sl__set_error(SL_EINVAL, "map_image: num_magnitude_bins %d is outside [1, 1000]",
                             s->num_magnitude_bins);
    if (s->auto_augment == SL_RAND_AUGMENT &&
        (s->rand_augment_num_ops < 0 || s->rand_augment_num_ops > SL__AUG_MAX_OPS ||
         s->rand_augment_magnitude < 0 || s->rand_augment_magnitude >= s->num_magnitude_bins))
        return sl__set_error(SL_EINVAL, "map_image: rand_augment_num_ops %d (0 to %d) or "
                             "rand_augment_magnitude %d (0 to num_magnitude_bins - 1 = %d)",
                             s->rand_augment_num_ops, SL__AUG_MAX_OPS,
                             s->rand_augment_magnitude, s->num_magnitude_bins - 1);
    const float *factors[] = {s->brightness, s->contrast, s->saturation};
    for (int i = 0; i < 3; i++)
        if ((factors[i][0] || factors[i][1]) && !range_ok(factors[i], 0, 100))
            return sl__set_error(SL_EINVAL, "map_image: colour jitter factor range [%g, %g] "
                                 "must be 0 <= lo <= hi <= 100", factors[i][0], factors[i][1]);
    if (!range_ok(s->hue, -0.5, 0.5))
        return sl__set_error(SL_EINVAL, "map_image: hue range [%g, %g] must be within "
                             "[-0.5, 0.5]", s->hue[0], s->hue[1]);
    if (s->blur_prob > 0 && (s->blur_kernel < 1 || s->blur_kernel > 255 ||
                             !(s->blur_kernel & 1) || !(s->blur_sigma[0] > 0) ||
                             !range_ok(s->blur_sigma, 0, 1e6)))
        return sl__set_error(SL_EINVAL, "map_image: blur kernel %d must be odd in [1, 255] and "
                             "sigma [%g, %g] positive", s->blur_kernel, s->blur_sigma[0],
                             s->blur_sigma[1]);
    if (!isfinite(s->solarize_threshold))
        return sl__set_error(SL_EINVAL, "map_image: bad solarize_threshold");
    if (!range_ok(s->rotate, -1e6, 1e6) || !range_ok(s->shear, -89, 89) ||
        !range_ok(s->shear + 2, -89, 89) || !(s->translate[0] >= 0 && s->translate[0] <= 1) ||
        !(s->translate[1] >= 0 && s->translate[1] <= 1) ||
        ((s->affine_scale[0] || s->affine_scale[1]) &&
         !(s->affine_scale[0] > 0 && range_ok(s->affine_scale, 0, 1e6))))
        return sl__set_error(SL_EINVAL, "map_image: bad rotate/affine: rotate and shear "
                             "ranges lo <= hi (shear within 89 degrees), translate fractions "
                             "in [0, 1], scale 0 < lo <= hi");
    if (s->interpolation != SL_INTERP_NEAREST && s->interpolation != SL_INTERP_BILINEAR)
        return sl__set_error(SL_EINVAL, "map_image: bad interpolation %d", s->interpolation);
    if (s->erasing_prob > 0 && (!range_ok(s->erasing_scale, 0, 1) ||
                                !(s->erasing_ratio[0] > 0) ||
                                !range_ok(s->erasing_ratio, 0, 1e6)))
        return sl__set_error(SL_EINVAL, "map_image: erasing scale [%g, %g] must be within "
                             "[0, 1] and ratio [%g, %g] positive, lo <= hi",
                             s->erasing_scale[0], s->erasing_scale[1], s->erasing_ratio[0],
                             s->erasing_ratio[1]);
    for (int c = 0; c < 3; c++)
        if (!isfinite(s->erasing_value[c]))
            return sl__set_error(SL_EINVAL, "map_image: bad erasing_value");
    return 0;
}

int sl__image_spec_check(const sl_image_spec *s)
{
    if (s->crop < SL_CROP_RANDOM_RESIZED || s->crop > SL_CROP_RESIZE)
        return sl__set_error(SL_EINVAL, "map_image: bad crop policy %d", s->crop);
    if (s->height < 1 || s->width < 1 || s->height > 65535 || s->width > 65535)
        return sl__set_error(SL_EINVAL, "map_image: bad output size %dx%d", s->width, s->height);
    if (s->crop == SL_CROP_CENTER && s->resize_shorter < 1)
        return sl__set_error(SL_EINVAL, "map_image: resize_shorter must be >= 1");
    if (!(s->scale_min > 0 && s->scale_min <= s->scale_max && s->scale_max <= 1) ||
        !(s->ratio_min > 0 && s->ratio_min <= s->ratio_max))
        return sl__set_error(SL_EINVAL, "map_image: bad scale [%g, %g] or ratio [%g, %g]",
                             s->scale_min, s->scale_max, s->ratio_min, s->ratio_max);
    if (!(s->flip_prob >= 0 && s->flip_prob <= 1))
        return sl__set_error(SL_EINVAL, "map_image: flip_prob %g is outside [0, 1]", s->flip_prob);
    if (s->layout != SL_LAYOUT_HWC && s->layout != SL_LAYOUT_CHW)
        return sl__set_error(SL_EINVAL, "map_image: bad layout %d", s->layout);
    if (s->decode != SL_DECODE_RGB && s->decode != SL_DECODE_RAW)
        return sl__set_error(SL_EINVAL, "map_image: bad decode %d", s->decode);
    if (s->decode == SL_DECODE_RAW) {
        if (s->channels < 1 || s->channels > 4)
            return sl__set_error(SL_EINVAL, "map_image: decode=raw needs channels 1 to 4, not "
                                 "%d (the output's shape is fixed before any file is read)",
                                 s->channels);
        if (s->dtype != SL_UINT8 && s->dtype != SL_UINT16)
            return sl__set_error(SL_EINVAL, "map_image: decode=raw gives uint8 or uint16");
        if (sl__aug_any(s) || s->blend_alpha)
            return sl__set_error(SL_EINVAL, "map_image: decode=raw keeps the file's samples: "
                                 "no augmentations and no alpha blending (crop and flip only)");
    } else if (s->dtype != SL_UINT8 && s->dtype != SL_FLOAT32) {
        return sl__set_error(SL_EINVAL, "map_image: dtype must be uint8 or float32 (uint16: "
                             "decode=raw)");
    }
    if (s->blend_alpha != 0 && s->blend_alpha != 1)
        return sl__set_error(SL_EINVAL, "map_image: blend_alpha must be 0 or 1");
    for (int c = 0; c < 3; c++)
        if (s->background[c] < 0 || s->background[c] > 255)
            return sl__set_error(SL_EINVAL, "map_image: background[%d] = %d is outside 0 to 255",
                                 c, s->background[c]);
    for (int c = 0; c < 3; c++)
        if (!(s->std[c] > 0))
            return sl__set_error(SL_EINVAL, "map_image: std[%d] must be > 0", c);
    if (s->max_pixels < 1)
        return sl__set_error(SL_EINVAL, "map_image: max_pixels must be >= 1");
    if (s->image_index < 0 || s->image_index >= 65536)
        return sl__set_error(SL_EINVAL, "map_image: bad image_index %d", s->image_index);
    if (s->with_mask && (s->with_mask != 1 || s->mask_index < 0 || s->mask_index >= 65536 ||
                         s->mask_index == s->image_index || s->mask_channels < 1 ||
                         s->mask_channels > 4 ||
                         (s->mask_dtype != SL_UINT8 && s->mask_dtype != SL_UINT16)))
        return sl__set_error(SL_EINVAL, "map_image: a mask needs its own tensor (mask_index "
                             "%d, the image's %d), mask_channels 1 to 4 (%d) and mask_dtype "
                             "uint8 or uint16 (%s)", s->mask_index, s->image_index,
                             s->mask_channels, sl_dtype_name((sl_dtype)s->mask_dtype));
    return check_augment(s);
}

/* Where the input's structure is known, its image leaf must be there and
 * hold bytes (encoded, or decoded pixels). */
int sl__image_check_input(const sl_image_spec *s, const sl_dataset *in)
{
    const sl_structure *st = sl_dataset_structure(in);
    if (!st)
        return 0;
    int n = sl_structure_leaves(st);
    char text[256];
    sl_structure_format(st, text, sizeof text);
    for (int i = 0; i < 1 + s->with_mask; i++) {
        int k = i ? s->mask_index : s->image_index;
        if (k >= n)
            return sl__set_error(SL_EINVAL, "map_image: %s %d, but the input's elements %s "
                                 "have %d tensors", i ? "mask_index" : "image_index", k, text, n);
        int dtype = sl__leaf_dtype(st, k);
        if (dtype >= 0 && dtype != SL_UINT8 && dtype != SL_STRING)
            return sl__set_error(SL_EDTYPE, "map_image: tensor %d of the input's elements %s is "
                                 "%s, not bytes (encoded, or decoded uint8 pixels)", k, text,
                                 sl_dtype_name((sl_dtype)dtype));
    }
    return 0;
}

/* The mask's own spec: the image's geometry, decoded raw. */
void sl__image_mask_spec(const sl_image_spec *s, sl_image_spec *m)
{
    SL_IMAGE_SPEC_INIT(m, s->crop, s->width);
    m->height = s->height;
    m->layout = s->layout;
    m->max_pixels = s->max_pixels;
    m->allow_warnings = s->allow_warnings;
    m->image_index = s->mask_index;
    m->decode = SL_DECODE_RAW;
    m->channels = s->mask_channels;
    m->dtype = s->mask_dtype;
}

uint64_t sl__image_spec_hash(uint64_t h, const sl_image_spec *s)
{
    h = sl__hash_u64(h, (uint64_t)s->crop);
    h = sl__hash_u64(h, ((uint64_t)s->height << 32) | (uint32_t)s->width);
    h = sl__hash_u64(h, (uint64_t)s->resize_shorter);
    float f[] = {s->scale_min, s->scale_max, s->ratio_min, s->ratio_max, s->flip_prob,
                 s->mean[0], s->mean[1], s->mean[2], s->std[0], s->std[1], s->std[2]};
    h = sl__hash_bytes(h, f, sizeof f);
    h = sl__hash_u64(h, ((uint64_t)s->layout << 8) | (uint64_t)s->dtype);
    h = sl__hash_u64(h, (uint64_t)s->max_pixels ^ ((uint64_t)s->allow_warnings << 63));
    /* the decode path: 0 fancy RGB, 1 merged RGB, 2 YCbCr planes */
    h = sl__hash_u64(h, s->fast_upsample ? 1u : s->exact_pixels ? 0u : 2u);
    /* the augmentations, when on (a pipeline without them keeps the
     * fingerprint it had before they existed): every field from
     * auto_augment on, ints and floats with no padding between them */
    if (sl__aug_any(s)) {
        size_t from = offsetof(sl_image_spec, auto_augment);
        size_t to = offsetof(sl_image_spec, erasing_random) + sizeof s->erasing_random;
        h = sl__hash_bytes(h, (const char *)s + from, to - from);
    }
    if (s->decode || s->blend_alpha || s->with_mask) { /* likewise */
        size_t from = offsetof(sl_image_spec, decode);
        size_t to = offsetof(sl_image_spec, mask_dtype) + sizeof s->mask_dtype;
        h = sl__hash_bytes(h, (const char *)s + from, to - from);
    }
    return h;
}
