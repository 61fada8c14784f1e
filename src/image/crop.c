/* Crop planning: which window of the source image becomes the output, as
 * torchvision's RandomResizedCrop / Resize + CenterCrop would choose it. */
#include <math.h>
#include "image.h"

/* Python's round(): half to even (nearbyint under the default mode). */
static int pyround(double v)
{
    return (int)nearbyint(v);
}

static double uniform(sl__rng *rng, double a, double b)
{
    return a + sl__rng_uniform(rng) * (b - a);
}

static void set_window(sl__window *win, int x, int y, int w, int h)
{
    *win = (sl__window){x, y, w, h};
}

/* torchvision's fallback: the centred crop with the ratio clamped into
 * [ratio_min, ratio_max]. */
static void random_resized_fallback(const sl_image_spec *spec, int W, int H, sl__window *win)
{
    double rmin = fmin(spec->ratio_min, spec->ratio_max);
    double rmax = fmax(spec->ratio_min, spec->ratio_max);
    double in_ratio = (double)W / H;
    int w = W, h = H;
    if (in_ratio < rmin)
        h = pyround(w / rmin);
    else if (in_ratio > rmax)
        w = pyround(h * rmax);
    /* Only reachable with a degenerate ratio range (0 or NaN). */
    if (w < 1 || w > W)
        w = W;
    if (h < 1 || h > H)
        h = H;
    set_window(win, (W - w) / 2, (H - h) / 2, w, h);
}

static void random_resized(const sl_image_spec *spec, int W, int H, sl__rng *rng,
                           sl__window *win)
{
    double area = (double)W * H;
    double lo = log(spec->ratio_min), hi = log(spec->ratio_max);
    for (int attempt = 0; attempt < 10; attempt++) {
        double target = area * uniform(rng, spec->scale_min, spec->scale_max);
        double aspect = exp(uniform(rng, lo, hi));
        double fw = sqrt(target * aspect), fh = sqrt(target / aspect);
        /* A NaN or huge value fails the range check below, never the cast. */
        if (!(fw >= 0.5 && fw <= W + 0.5 && fh >= 0.5 && fh <= H + 0.5))
            continue;
        int w = pyround(fw), h = pyround(fh);
        if (0 < w && w <= W && 0 < h && h <= H) {
            int i = (int)sl__rng_below(rng, (uint64_t)(H - h) + 1);
            int j = (int)sl__rng_below(rng, (uint64_t)(W - w) + 1);
            set_window(win, j, i, w, h);
            return;
        }
    }
    random_resized_fallback(spec, W, H, win);
}

/* One axis of Resize(shorter -> S) then CenterCrop(out), mapped back to the
 * source: torchvision's integer resized size and rounded crop offset, so the
 * window covers exactly the area that "resize the whole image, then crop"
 * keeps. An
 * output larger than the resized image (torchvision would pad) takes the
 * whole axis instead. */
static void center_axis(int src, int resized, int out, double *pos, double *len)
{
    if (out >= resized || resized <= 0) {
        *pos = 0;
        *len = src;
        return;
    }
    int off = pyround((resized - out) / 2.0);
    double s = (double)src / resized;
    *pos = off * s;
    *len = out * s;
}

static void center(const sl_image_spec *spec, int W, int H, sl__window *win)
{
    int S = spec->resize_shorter > 0 ? spec->resize_shorter : (W < H ? W : H);
    int rw, rh;
    if (W <= H) {
        rw = S;
        rh = (int)((double)S * H / W);
    } else {
        rh = S;
        rw = (int)((double)S * W / H);
    }
    center_axis(W, rw, spec->width, &win->x, &win->w);
    center_axis(H, rh, spec->height, &win->y, &win->h);
}

void sl__crop_plan(const sl_image_spec *spec, int w, int h, sl__rng *rng, sl__window *win,
                   bool *flip)
{
    *flip = false;
    set_window(win, 0, 0, w, h);
    if (w <= 0 || h <= 0)
        return;
    if (spec->crop == SL_CROP_RANDOM_RESIZED)
        random_resized(spec, w, h, rng, win);
    else if (spec->crop == SL_CROP_CENTER)
        center(spec, w, h, win);
    if (spec->flip_prob > 0)
        *flip = sl__rng_uniform(rng) < spec->flip_prob;
}
