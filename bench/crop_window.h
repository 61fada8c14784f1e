/*
 * The windows of the source image that map_image's crops decode, planned
 * as src/image/crop.c plans them (torchvision's RandomResizedCrop, and
 * Resize(shorter) + CenterCrop), and the DCT scale src/image/jpeg.c picks
 * for them: for the benches that decode exactly those windows with
 * libjpeg directly (bench_decode's roi_ rows, sluice-bench --decode-limit).
 * The random windows come from a generator of the bench's own, so they are
 * drawn from the same distribution as the library's, not the same draws.
 */
#ifndef SLUICE_BENCH_CROP_WINDOW_H
#define SLUICE_BENCH_CROP_WINDOW_H

#include <math.h>
#include <stdint.h>

typedef enum crop_kind { CROP_WHOLE, CROP_RANDOM, CROP_CENTER } crop_kind;

typedef struct crop_window {
    crop_kind kind;
    int width, height; /* the output */
    double scale_min, scale_max, ratio_min, ratio_max; /* CROP_RANDOM */
    int resize_shorter;                                /* CROP_CENTER */
} crop_window;

/* A uniform double in [0, 1) from a splitmix64 state. */
static inline double cw_uniform(uint64_t *s)
{
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return (double)((z ^ (z >> 31)) >> 11) * 0x1.0p-53;
}

/* One centred axis: the resized size's crop mapped back to the source. */
static inline void cw_center_axis(int src, int resized, int out, double *pos, double *len)
{
    if (out >= resized || resized <= 0) {
        *pos = 0, *len = src;
        return;
    }
    double s = (double)src / resized;
    *pos = nearbyint((resized - out) / 2.0) * s;
    *len = out * s;
}

/* The window {x, y, w, h} in source pixels of a W x H image. */
static inline void cw_plan(const crop_window *c, int W, int H, uint64_t *rng, double win[4])
{
    win[0] = win[1] = 0, win[2] = W, win[3] = H;
    if (c->kind == CROP_CENTER) {
        int S = c->resize_shorter > 0 ? c->resize_shorter : (W < H ? W : H);
        int rw = W <= H ? S : (int)((double)S * W / H);
        int rh = W <= H ? (int)((double)S * H / W) : S;
        cw_center_axis(W, rw, c->width, &win[0], &win[2]);
        cw_center_axis(H, rh, c->height, &win[1], &win[3]);
        return;
    }
    if (c->kind != CROP_RANDOM)
        return;
    double lo = log(c->ratio_min), hi = log(c->ratio_max);
    for (int attempt = 0; attempt < 10; attempt++) {
        double area = (double)W * H * (c->scale_min + (c->scale_max - c->scale_min) *
                                                          cw_uniform(rng));
        double ar = exp(lo + (hi - lo) * cw_uniform(rng));
        int w = (int)nearbyint(sqrt(area * ar)), h = (int)nearbyint(sqrt(area / ar));
        if (w > 0 && w <= W && h > 0 && h <= H) {
            win[0] = floor(cw_uniform(rng) * (W - w + 1));
            win[1] = floor(cw_uniform(rng) * (H - h + 1));
            win[2] = w, win[3] = h;
            return;
        }
    }
    /* torchvision's fallback: centred, the ratio clamped */
    double r = (double)W / H;
    int w = W, h = H;
    if (r < c->ratio_min)
        h = (int)nearbyint(w / c->ratio_min);
    else if (r > c->ratio_max)
        w = (int)nearbyint(h * c->ratio_max);
    win[0] = (W - w) / 2, win[1] = (H - h) / 2, win[2] = w, win[3] = h;
}

/* The largest DCT reduction 1/d (d in 8, 4, 2) that leaves the window at
 * least the output size; 1 if none does. */
static inline int cw_scale(const double win[4], int out_w, int out_h)
{
    for (int d = 8; d > 1; d /= 2)
        if (floor(win[2] / d) >= out_w && floor(win[3] / d) >= out_h)
            return d;
    return 1;
}

#endif
