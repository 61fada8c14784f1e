/*
 * The geometric augmentations: torchvision's inverse affine map
 * (RandomRotation, RandomAffine, and auto_augment's shears, translations
 * and rotations), carried out as grid_sample does on the resized image,
 * corners black. The bilinear warp is a kernel of every tier; the
 * portable one is here.
 */
#include <math.h>
#include <string.h>
#include "../core/error.h"
#include "augment_kernels.h"

/* _get_inverse_affine_matrix: output centred coordinates -> input
 * centred coordinates, for a rotation by angle (degrees, as F.affine
 * takes it), translate, scale and shear (degrees) about centre (cx, cy)
 * given relative to the image centre. */
void sl__aug_inverse_affine(double cx, double cy, double angle, double tx, double ty,
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

/* grid_sample of src through the inverse map m, whose coordinates are
 * centred on the image. */
void sl__aug_warp(const uint8_t *src, uint8_t *dst, int w, int h, const float m[6],
                  bool bilinear, bool masked)
{
    size_t row = 3 * (size_t)w;
    float cx = 0.5f * (float)w, cy = 0.5f * (float)h;
    for (int y = 0; y < h; y++) {
        float yc = (float)y + 0.5f - cy;
        float bx = m[1] * yc + m[2] + cx - 0.5f, by = m[4] * yc + m[5] + cy - 0.5f;
        uint8_t *o = dst + y * row;
        for (int x = 0; x < w; x++, o += 3) {
            float xc = (float)x + 0.5f - cx;
            sl__aug_warp_pixel(src, o, w, h, row, m[0] * xc + bx, m[3] * xc + by, bilinear,
                               masked);
        }
    }
}

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
int sl__aug_geometric(sl__augmenter *a, uint8_t *img, int w, int h, const float m[6],
                      bool bilinear, bool masked)
{
    size_t bytes = 3 * (size_t)w * h;
    if (sl__aug_reserve((void **)&a->tmp, &a->tmp_cap, bytes + 4)) /* the gathers' 4 bytes */
        return SL_ENOMEM;
    memcpy(a->tmp, img, bytes);
    memset(a->tmp + bytes, 0, 4);
    /* a whole-pixel translation (TranslateX/Y, and RandomAffine's with no
     * rotation, scale or shear) is a copy: the same pixels either way */
    if (m[0] == 1 && m[1] == 0 && m[3] == 0 && m[4] == 1 && m[2] == nearbyintf(m[2]) &&
        m[5] == nearbyintf(m[5]))
        shift(a->tmp, img, w, h, (int)-m[2], (int)-m[5]);
    else if (bilinear && bytes + row_pad(w) < ((size_t)1 << 31)) /* 32-bit gather offsets */
        sl__aug_kernels()->warp_bilinear(a->tmp, img, w, h, m, masked);
    else
        sl__aug_warp(a->tmp, img, w, h, m, bilinear, masked);
    return 0;
}
