/*
 * Separable resampler from a fractional window of an RGB image to the
 * output tensor: a triangle filter widened by the reduction factor (area-
 * like antialiasing when shrinking, bilinear when growing), like PIL's and
 * torchvision's antialiased bilinear resize. This file holds the filter
 * taps, the RGB driver, writing the output and the choice of kernels;
 * resize_kernels.h lists the other files.
 *
 * Vertical pass first, one output row at a time: it runs over contiguous
 * bytes with the same taps for the whole row, and its int16 result row
 * stays in L1 for the horizontal pass (per-pixel taps). Horizontal first
 * would run the per-pixel pass over every input row instead of every
 * output row. Flip, layout, dtype and normalisation are folded into
 * writing the output row.
 *
 * The passes come in tiers (portable C, SSE2, AVX2, AVX-512), all
 * computing the same integers; a resizer runs the tier image/ chose for
 * the process (cpu.h: the widest the CPU has, SLUICE_NO_AVX512=1 /
 * SLUICE_NO_AVX2=1 step down). What each
 * costs per image: bench/README.md, "JPEG decode settings".
 *
 * Taps reach only pixels the window touches (rounded outward), renormalised
 * at its edges: the crop-then-resize of torchvision's resized_crop, and
 * independent of how far the decoded region extends past the window.
 */
#include <math.h>
#include <pthread.h>
#include <string.h>
#include "../core/alloc.h"
#include "../core/error.h"
#include "resize_kernels.h"

int sl__resize_reserve(void **p, size_t *cap, size_t need)
{
    if (need <= *cap)
        return 0;
    size_t ncap = need + need / 4; /* geometry varies per image: grow ahead */
    void *q = sl__alloc_aligned(ncap, SL__ALIGN);
    if (!q)
        return SL_ENOMEM;
    sl__free_aligned(*p, *cap, SL__ALIGN);
    *p = q;
    *cap = ncap;
    return 0;
}

static const sl__resize_kernels *default_kernels(void);

sl__resizer *sl__resizer_new_with(const sl__resize_kernels *k)
{
    sl__resizer *r = sl__calloc(1, sizeof(sl__resizer));
    if (r)
        r->k = k;
    return r;
}

sl__resizer *sl__resizer_new(void)
{
    return sl__resizer_new_with(default_kernels());
}

static void axis_free(sl__axis *a)
{
    sl__free_aligned(a->start, a->start_cap, SL__ALIGN);
    sl__free_aligned(a->w, a->w_cap, SL__ALIGN);
    sl__free_aligned(a->t, a->t_cap, SL__ALIGN);
    sl__free_aligned(a->g_base, a->g_base_cap, SL__ALIGN);
    sl__free_aligned(a->g_tab, a->g_tab_cap, SL__ALIGN);
    sl__free_aligned(a->w8, a->w8_cap, SL__ALIGN);
    sl__free_aligned(a->g1_base, a->g1_base_cap, SL__ALIGN);
    sl__free_aligned(a->g1_tab, a->g1_tab_cap, SL__ALIGN);
}

void sl__resizer_free(sl__resizer *r)
{
    if (!r)
        return;
    axis_free(&r->ax);
    axis_free(&r->ay);
    axis_free(&r->cx);
    axis_free(&r->cy);
    sl__free_aligned(r->planes, r->planes_cap, SL__ALIGN);
    sl__free_aligned(r->row, r->row_cap, SL__ALIGN);
    sl__free_aligned(r->line, r->line_cap, SL__ALIGN);
    sl__free(r, sizeof *r);
}

/* ---- filter taps ---- */

/* Clamps before converting: a window far outside the image must not
 * overflow the conversion to int. */
static int clampd(double v, int lo, int hi)
{
    return v < lo ? lo : v > hi ? hi : (int)v;
}

/* floor and ceil without libm calls (x86-64's baseline has no roundsd);
 * the clamp keeps the conversion defined for any finite window. */
static inline int ifloor(double v)
{
    v = v < -1e9 ? -1e9 : v; /* (two steps: minsd and maxsd, no branches) */
    v = v > 1e9 ? 1e9 : v;
    int i = (int)v;
    return i - (i > v);
}

static inline int iceil(double v)
{
    return -ifloor(-v);
}

/* The taps of output sample i: pixels strictly inside the triangle's
 * support (half-width fs) around its centre c, clipped to [lo, hi). */
static inline void tap_range(const sl__axis *a, int i, double scale, double fs, double *c,
                             int *first, int *last)
{
    *c = a->pos + (i + 0.5) * scale - 0.5;
    int f = ifloor(*c - fs) + 1, l = iceil(*c + fs) - 1;
    *first = f < a->lo ? a->lo : f > a->hi - 1 ? a->hi - 1 : f;
    *last = l > a->hi - 1 ? a->hi - 1 : l < a->lo ? a->lo : l;
    if (*first > *last) /* centre outside the pixels (a degenerate window) */
        *first = *last = clampd(nearbyint(*c), a->lo, a->hi - 1);
}

static double triangle(double d, double inv_fs)
{
    double v = 1 - fabs(d) * inv_fs;
    return v > 0 ? v : 0;
}

/* One sample's weights in fixed point, placed at their offset from the
 * sample's start in its row of taps (zeroed before). Rounding the running sum
 * rather than each weight makes them add up to exactly 1 << WBITS, keeps
 * each within one unit of its exact value and never makes one negative.
 * (Per image, a train crop builds four axes of 224 samples: this runs
 * about a thousand times an image, so it keeps to straight loops.) */
void sl__axis_sample(sl__axis *a, int i, double scale, double fs, double inv_fs)
{
    double c, sum = 0;
    int first, last;
    tap_range(a, i, scale, fs, &c, &first, &last);
    int s = first < a->hi - a->taps ? first : a->hi - a->taps;
    int n = last - first + 1, o = first - s;
    int16_t *q = a->w + (size_t)i * a->pitch;
    double *t = a->t; /* the taps' values, for the second loop */
    a->start[i] = s;
    for (int k = 0; k < n; k++) {
        t[k] = triangle(first + k - c, inv_fs);
        sum += t[k];
    }
    if (!(sum > 0)) {
        q[clampd(nearbyint(c), a->lo, a->hi - 1) - s] = 1 << WBITS;
        return;
    }
    /* the same additions as sum; run * norm >= 0, so (int) is floor */
    double run = 0, norm = (1 << WBITS) / sum;
    int prev = 0;
    for (int k = 0; k < n - 1; k++) {
        run += t[k];
        int cur = (int)(run * norm + 0.5);
        q[o + k] = (int16_t)(cur - prev);
        prev = cur;
    }
    q[o + n - 1] = (int16_t)((1 << WBITS) - prev);
}

int sl__axis_build(sl__axis *a, const sl__resize_kernels *k, double pos, double len, int size,
                   int out)
{
    if (a->valid && a->pos == pos && a->len == len && a->size == size && a->out == out)
        return 0;
    a->valid = false;
    a->g_state = 0;
    a->w8_valid = false;
    a->g1_state = 0;
    a->pos = pos, a->len = len, a->size = size, a->out = out;
    /* The pixels the window touches; the slack absorbs the rounding of
     * window coordinates that were divided by the DCT scale. */
    a->lo = clampd(floor(pos + 1e-6), 0, size - 1);
    a->hi = clampd(ceil(pos + len - 1e-6), a->lo + 1, size);
    /* At most ceil(2 fs) pixels lie strictly inside a support of width
     * 2 fs, and no more than the window has. */
    double scale = len / out, fs = scale > 1 ? scale : 1;
    a->taps = iceil(2 * fs);
    if (a->taps > a->hi - a->lo)
        a->taps = a->hi - a->lo;
    if (a->taps < 1)
        a->taps = 1;
    a->pitch = (a->taps + 1) & ~1;
    if (sl__resize_reserve((void **)&a->start, &a->start_cap, (size_t)out * sizeof *a->start) ||
        sl__resize_reserve((void **)&a->w, &a->w_cap, (size_t)out * a->pitch * sizeof *a->w) ||
        sl__resize_reserve((void **)&a->t, &a->t_cap, (size_t)a->taps * sizeof *a->t))
        return SL_ENOMEM;
    double inv_fs = 1 / fs; /* (divisions per axis, not per sample) */
    memset(a->w, 0, (size_t)out * a->pitch * sizeof *a->w);
    int i = 0;
    if (k->weights8 && a->taps <= 8)
        for (; i + 8 <= out; i += 8)
            if (!k->weights8(a, i, scale, fs, inv_fs))
                for (int j = i; j < i + 8; j++)
                    sl__axis_sample(a, j, scale, fs, inv_fs);
    for (; i < out; i++)
        sl__axis_sample(a, i, scale, fs, inv_fs);
    a->valid = true;
    return 0;
}

/* ---- output ---- */

void sl__resize_lut(sl__resizer *r, const sl__resize_out *out)
{
    if (r->lut_valid && memcmp(r->lut_mean, out->mean, sizeof r->lut_mean) == 0 &&
        memcmp(r->lut_std, out->std, sizeof r->lut_std) == 0)
        return;
    /* float32 arithmetic, in torchvision's order (ToTensor, Normalize). */
    for (int c = 0; c < 3; c++)
        for (int v = 0; v < 256; v++)
            r->lut[c][v] = ((float)v / 255.0f - out->mean[c]) / out->std[c];
    memcpy(r->lut_mean, out->mean, sizeof r->lut_mean);
    memcpy(r->lut_std, out->std, sizeof r->lut_std);
    r->lut_valid = true;
}

/* Writes output row y from line (RGB) in the output's layout and dtype;
 * HWC uint8 is written in place by the horizontal pass instead. */
void sl__resize_store(const sl__resizer *r, const sl__resize_out *out, int y,
                      const uint8_t *line)
{
    size_t W = (size_t)out->width, plane = W * (size_t)out->height;
    bool chw = out->layout == SL_LAYOUT_CHW;
    if (out->dtype == SL_UINT8) {
        uint8_t *d = out->data;
        for (int c = 0; c < 3; c++) {
            uint8_t *p = d + c * plane + (size_t)y * W;
            for (size_t x = 0; x < W; x++)
                p[x] = line[3 * x + c];
        }
        return;
    }
    float *f = out->data;
    if (!chw) {
        float *p = f + (size_t)y * W * 3;
        for (size_t x = 0; x < W; x++)
            for (int c = 0; c < 3; c++)
                p[3 * x + c] = r->lut[c][line[3 * x + c]];
        return;
    }
    for (int c = 0; c < 3; c++) {
        float *p = f + c * plane + (size_t)y * W;
        for (size_t x = 0; x < W; x++)
            p[x] = r->lut[c][line[3 * x + c]];
    }
}

void sl__resize_store_image(sl__resizer *r, const uint8_t *rgb, const sl__resize_out *out)
{
    if (out->dtype == SL_UINT8 && out->layout != SL_LAYOUT_CHW) {
        memcpy(out->data, rgb, (size_t)out->width * out->height * 3);
        return;
    }
    if (out->dtype == SL_FLOAT32)
        sl__resize_lut(r, out);
    for (int y = 0; y < out->height; y++)
        sl__resize_store(r, out, y, rgb + (size_t)y * out->width * 3);
}

int sl__resize(sl__resizer *r, const uint8_t *src, int w, int h, size_t stride,
               const sl__window *win, const sl__resize_out *out)
{
    if (w <= 0 || h <= 0 || out->width <= 0 || out->height <= 0 ||
        (out->dtype != SL_UINT8 && out->dtype != SL_FLOAT32) || !isfinite(win->x) ||
        !isfinite(win->y) || !isfinite(win->w) || !isfinite(win->h))
        return sl__set_error(SL_EINVAL, "resize: bad geometry %dx%d (%g,%g %gx%g) -> %dx%d", w,
                             h, win->x, win->y, win->w, win->h, out->width, out->height);
    const sl__resize_kernels *k = r->k;
    int rc = sl__axis_build(&r->ax, k, win->x, win->w, w, out->width);
    if (!rc)
        rc = sl__axis_build(&r->ay, k, win->y, win->h, h, out->height);
    if (rc)
        return rc;
    const sl__axis *ax = &r->ax, *ay = &r->ay;
    int n = 3 * (ax->hi - ax->lo);
    if (sl__resize_reserve((void **)&r->row, &r->row_cap, (size_t)(n + ROW_PAD) * sizeof *r->row) ||
        sl__resize_reserve((void **)&r->line, &r->line_cap, (size_t)out->width * 3))
        return SL_ENOMEM;
    if (out->dtype == SL_FLOAT32)
        sl__resize_lut(r, out);
    memset(r->row + n, 0, ROW_PAD * sizeof *r->row);
    sl__vpass vertical = k->vertical;
    sl__hpass horizontal = k->horizontal_for(&r->ax);
    if (!horizontal)
        return SL_ENOMEM;
    bool direct = out->dtype == SL_UINT8 && out->layout != SL_LAYOUT_CHW;
    for (int y = 0; y < out->height; y++) {
        const uint8_t *s = src + (size_t)ay->start[y] * stride + 3 * (size_t)ax->lo;
        const int16_t *wy = ay->w + (size_t)y * ay->pitch;
        uint8_t *line = direct ? (uint8_t *)out->data + (size_t)y * out->width * 3 : r->line;
        vertical(s, stride, wy, ay->taps, r->row, n);
        horizontal(ax, r->row, line, out->flip);
        if (!direct)
            sl__resize_store(r, out, y, line);
    }
    return 0;
}

bool sl__resize_ycc_pays(const sl__resizer *r)
{
    return r->k->planes_pay;
}

/* ---- the kernels of each tier ---- */

/* Filled once, read-only after: the tables (a tier's copy can differ
 * from its file's where the CPU lacks what one kernel needs), and the
 * tiers this build and this CPU have (NULL where not; AVX-512 also wants
 * VL and VNNI here, else the resampler runs AVX2 under it). */
static sl__resize_kernels tiers[SL__IMAGE_TIERS];
static const sl__resize_kernels *usable[SL__IMAGE_TIERS];
static pthread_once_t tiers_once = PTHREAD_ONCE_INIT;

static void tiers_init(void)
{
    tiers[SL__IMAGE_C] = sl__resize_c;
#ifdef SL__IMAGE_HAVE_SSE2
    tiers[SL__IMAGE_SSE2] = sl__resize_sse2;
#endif
#ifdef SL__IMAGE_HAVE_AVX
    tiers[SL__IMAGE_AVX2] = sl__resize_avx2;
    tiers[SL__IMAGE_AVX512] = sl__resize_avx512;
    /* the colour pass alone needs VBMI (Skylake-X and Cascade Lake lack
     * it) */
    if (!sl__image_cpu_has(SL__IMAGE_VBMI)) {
        tiers[SL__IMAGE_AVX512].ycc_rgb = sl__ycc_rgb_ssse3;
        tiers[SL__IMAGE_AVX512].ycc_rgb_colour = sl__ycc_rgb_colour_c;
    }
#endif
    for (int l = 0; l < SL__IMAGE_TIERS; l++)
        if (tiers[l].name && sl__image_tier_usable(l) &&
            (l != SL__IMAGE_AVX512 || sl__image_cpu_has(SL__IMAGE_VNNI)))
            usable[l] = &tiers[l];
}

/* The process's tier's kernels, or the widest below it that the
 * resampler has. */
static const sl__resize_kernels *default_kernels(void)
{
    pthread_once(&tiers_once, tiers_init);
    int level = sl__image_tier();
    while (!usable[level])
        level--;
    return usable[level];
}

const sl__resize_kernels *sl__resize_kernels_for(int level)
{
    pthread_once(&tiers_once, tiers_init);
    return level >= 0 && level < SL__IMAGE_TIERS ? usable[level] : NULL;
}

const char *sl__resize_kernels_name(const sl__resize_kernels *k)
{
    return k->name;
}

int sl__resize_weights_agree(const sl__resize_kernels *k, double pos, double len, int size,
                             int out)
{
    if (!k->weights8)
        return -1;
    sl__axis a, b;
    memset(&a, 0, sizeof a);
    memset(&b, 0, sizeof b);
    int rc = sl__axis_build(&a, &sl__resize_c, pos, len, size, out);
    if (rc == 0)
        rc = sl__axis_build(&b, k, pos, len, size, out);
    if (rc == 0)
        rc = !memcmp(a.start, b.start, (size_t)out * sizeof *a.start) &&
             !memcmp(a.w, b.w, (size_t)out * a.pitch * sizeof *a.w);
    axis_free(&a);
    axis_free(&b);
    return rc;
}
