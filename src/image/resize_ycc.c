/*
 * The resampler from YCbCr planes (sl__resize_ycc): each plane is resampled
 * from its own window and resolution, so chroma upsampling and the resize
 * are one filter, and the three output rows then go through the colour
 * stage, which converts them to RGB once per output pixel. The filter taps
 * and the writing of the output are resize.c's.
 */
#include <math.h>
#include <string.h>
#include "../core/alloc.h"
#include "../core/error.h"
#include "augment.h"
#include "resize_kernels.h"

/* One plane's part of an output row: its source, taps and passes' rows. */
typedef struct plane_job {
    const sl__plane *src;
    const sl__axis *x, *y;
    sl__hpass horizontal;
    int16_t *row;  /* the vertical pass's result: n samples, then ROW_PAD zeros */
    int n;
    uint8_t *line; /* the horizontal pass's: one sample per output column */
} plane_job;

static void plane_row(sl__vpass vertical, const plane_job *p, int y, bool flip)
{
    const sl__axis *ax = p->x, *ay = p->y;
    const uint8_t *s = p->src->data + (size_t)ay->start[y] * p->src->stride + (size_t)ax->lo;
    vertical(s, p->src->stride, ay->w + (size_t)y * ay->pitch, ay->taps, p->row, p->n);
    p->horizontal(ax, p->row, p->line, flip);
}

/* ---- the colour stage ----
 *
 * An output row of Y, Cb and Cr, already resampled, flipped and in output
 * columns, becomes the RGB row that sl__resize_store writes out. A colour
 * augmentation (resize_colour) changes the samples first, so that the
 * conversion keeps its constants in the instructions. */
static void colour_row(const sl__resizer *r, const plane_job pj[3], uint8_t *rgb, int width)
{
    r->k->ycc_rgb(pj[0].line, pj[1].line, pj[2].line, rgb, width);
}

static inline uint8_t clamp8(int32_t v)
{
    return v < 0 ? 0 : v > 255 ? 255 : (uint8_t)v;
}

/* Another matrix or range than JFIF's (a video stream's), in Q16: per
 * output pixel, so the portable loop costs little beside the decode. */
static void matrix_row(const sl__ycc_matrix *m, const plane_job pj[3], uint8_t *rgb, int width)
{
    const uint8_t *yl = pj[0].line, *cbl = pj[1].line, *crl = pj[2].line;
    for (int x = 0; x < width; x++) {
        int32_t y = (yl[x] - m->y_off) * m->y_gain + (1 << 15);
        int32_t cb = cbl[x] - 128, cr = crl[x] - 128;
        rgb[3 * x] = clamp8((y + cr * m->cr_r) >> 16);
        rgb[3 * x + 1] = clamp8((y - cb * m->cb_g - cr * m->cr_g) >> 16);
        rgb[3 * x + 2] = clamp8((y + cb * m->cb_b) >> 16);
    }
}

void sl__ycc_matrix_make(double kr, double kb, bool full_range, sl__ycc_matrix *m)
{
    double kg = 1 - kr - kb;
    double yg = full_range ? 1 : 255.0 / 219, cg = (full_range ? 1 : 255.0 / 224) * 65536;
    *m = (sl__ycc_matrix){
        .y_off = full_range ? 0 : 16,
        .y_gain = (int32_t)lround(yg * 65536),
        .cr_r = (int32_t)lround(2 * (1 - kr) * cg),
        .cb_g = (int32_t)lround(2 * (1 - kb) * kb / kg * cg),
        .cr_g = (int32_t)lround(2 * (1 - kr) * kr / kg * cg),
        .cb_b = (int32_t)lround(2 * (1 - kb) * cg),
    };
}

static bool plane_ok(const sl__plane *p)
{
    return p->data && p->width > 0 && p->height > 0 && isfinite(p->win.x) &&
           isfinite(p->win.y) && isfinite(p->win.w) && isfinite(p->win.h);
}

/* The taps of luma (ax, ay) and chroma (cx, cy) and the horizontal passes
 * for them: 0 or SL_ENOMEM. */
static int build_axes(sl__resizer *r, const sl__ycc *src, const sl__resize_out *out,
                      sl__hpass *hy, sl__hpass *hc)
{
    const sl__resize_kernels *k = r->k;
    const sl__plane *py = &src->plane[0], *pc = &src->plane[1];
    int rc = sl__axis_build(&r->ax, k, py->win.x, py->win.w, py->width, out->width);
    if (!rc)
        rc = sl__axis_build(&r->ay, k, py->win.y, py->win.h, py->height, out->height);
    if (!rc)
        rc = sl__axis_build(&r->cx, k, pc->win.x, pc->win.w, pc->width, out->width);
    if (!rc)
        rc = sl__axis_build(&r->cy, k, pc->win.y, pc->win.h, pc->height, out->height);
    if (rc)
        return rc;
    *hy = k->horizontal1_for(&r->ax);
    *hc = *hy ? k->horizontal1_for(&r->cx) : NULL;
    return *hc ? 0 : SL_ENOMEM;
}

/* Adds the row's samples to *sum and widens [*lo, *hi] over them: per
 * lane in blocks of a constant 32, which gcc -O2 vectorises. */
static void luma_stats(const uint8_t *restrict y, int n, uint64_t *sum, uint8_t *lo_out,
                       uint8_t *hi_out)
{
    uint8_t lo0 = *lo_out, hi0 = *hi_out, *lo = &lo0, *hi = &hi0; /* not aliasing y */
    uint16_t acc[32];
    uint8_t mn[32], mx[32];
    for (int i = 0; i < 32; i++)
        acc[i] = 0, mn[i] = lo0, mx[i] = hi0;
    uint64_t s = 0;
    int x = 0, blocks = 0;
    for (; x + 32 <= n; x += 32) {
        for (int i = 0; i < 32; i++) {
            acc[i] = (uint16_t)(acc[i] + y[x + i]);
            mn[i] = y[x + i] < mn[i] ? y[x + i] : mn[i];
            mx[i] = y[x + i] > mx[i] ? y[x + i] : mx[i];
        }
        if (++blocks == 256) { /* before 257 * 255 overflows a lane */
            for (int i = 0; i < 32; i++)
                s += acc[i], acc[i] = 0;
            blocks = 0;
        }
    }
    for (int i = 0; i < 32; i++) {
        s += acc[i];
        *lo = mn[i] < *lo ? mn[i] : *lo;
        *hi = mx[i] > *hi ? mx[i] : *hi;
    }
    for (; x < n; x++) {
        s += y[x];
        *lo = y[x] < *lo ? y[x] : *lo;
        *hi = y[x] > *hi ? y[x] : *hi;
    }
    *sum += s;
    *lo_out = lo0;
    *hi_out = hi0;
}

/* With a colour transform (augment.h): every row's Y, Cb and Cr first,
 * for the mean luma that contrast blends with, then the transform on the
 * samples and the plain conversion, row by row. */
/* The mean luma of the plane's window from every 4th of its rows: what
 * contrast blends with (torchvision: the output's mean gray), known
 * before the first output row so that each row is resampled and
 * converted in one go; a quarter of the window's samples. */
static double window_mean(const sl__plane *p)
{
    int x0 = (int)fmax(0, floor(p->win.x)), x1 = (int)fmin(p->width, ceil(p->win.x + p->win.w));
    int y0 = (int)fmax(0, floor(p->win.y)), y1 = (int)fmin(p->height, ceil(p->win.y + p->win.h));
    uint64_t sum = 0, count = 0;
    uint8_t lo = 255, hi = 0;
    for (int y = y0; x1 > x0 && y < y1; y += 4, count += (uint64_t)(x1 - x0))
        luma_stats(p->data + (size_t)y * p->stride + x0, x1 - x0, &sum, &lo, &hi);
    return count ? (double)sum / (double)count : 128;
}

static int resize_colour(sl__resizer *r, plane_job pj[3], const sl__resize_out *out)
{
    int W = out->width, H = out->height;
    size_t row = 3 * (size_t)W;
    bool direct = out->dtype == SL_UINT8 && out->layout != SL_LAYOUT_CHW;
    /* The transform inside the conversion: samples changed in 16-bit
     * lanes and kept unclamped, so only R, G and B clip, as torchvision's
     * do; every tier has the pass (the portable one where it lacks its
     * own). The rows' lines are sl__resize_ycc's. */
    sl__colour_map m;
    int16_t coef[6];
    sl__colour_fold(out->colour, window_mean(pj[0].src), &m);
    if (sl__colour_coef(&m, coef)) {
        for (int y = 0; y < H; y++) {
            for (int c = 0; c < 3; c++)
                plane_row(r->k->vertical, &pj[c], y, out->flip);
            uint8_t *line = direct ? (uint8_t *)out->data + (size_t)y * row : r->line;
            r->k->ycc_rgb_colour(pj[0].line, pj[1].line, pj[2].line, line, W, coef);
            if (!direct)
                sl__resize_store(r, out, y, line);
        }
        return 0;
    }
    /* Coefficients too large for 16 bits (gains past 7.9): the samples in
     * 32 bits, clamped to bytes for the plain conversion, after every row
     * is resampled, for the output's own mean and each row's range (the
     * rows' Y, Cb and Cr, then the ranges). */
    if (sl__resize_reserve((void **)&r->planes, &r->planes_cap, row * H + 2 * (size_t)H))
        return SL_ENOMEM;
    uint8_t *lo = r->planes + row * H, *hi = lo + H;
    uint64_t sum = 0;
    for (int y = 0; y < H; y++) {
        uint8_t *at = r->planes + y * row;
        for (int c = 0; c < 3; c++) {
            pj[c].line = at + (size_t)c * W;
            plane_row(r->k->vertical, &pj[c], y, out->flip);
        }
        lo[y] = 255, hi[y] = 0;
        luma_stats(at, W, &sum, &lo[y], &hi[y]);
    }
    sl__colour_fold(out->colour, (double)sum / ((double)W * H), &m);
    /* Luma pushed past 255 (or below 0) would be clipped before the
     * conversion, where RGB clips each channel after it: a brightened
     * saturated colour would lose its hue. A row where that can happen
     * gives the planes only the chroma part (the matrix over a), and the
     * gain a and offset o, which act on R, G and B alike, follow on its
     * RGB bytes; the two ways differ by rounding alone elsewhere. */
    sl__colour_map chroma = m;
    bool split = direct && m.a > 1e-3f;
    if (split) {
        chroma.a = 1, chroma.o = 0, chroma.ready = false;
        for (int i = 0; i < 4; i++)
            chroma.k[i / 2][i % 2] /= m.a;
    }
    for (int y = 0; y < H; y++) {
        uint8_t *at = r->planes + y * row;
        for (int c = 0; c < 3; c++)
            pj[c].line = at + (size_t)c * W;
        bool gain = split && (m.a * hi[y] + m.o > 255.5f || m.a * lo[y] + m.o < -0.5f);
        sl__colour_planes(gain ? &chroma : &m, pj[0].line, pj[1].line, pj[2].line, W);
        uint8_t *line = direct ? (uint8_t *)out->data + (size_t)y * row : r->line;
        colour_row(r, pj, line, W);
        if (gain) /* the row while it is in cache */
            sl__colour_gain(line, row, m.a, m.o);
        if (!direct)
            sl__resize_store(r, out, y, line);
    }
    return 0;
}

int sl__resize_ycc(sl__resizer *r, const sl__ycc *src, const sl__resize_out *out)
{
    const sl__plane *py = &src->plane[0], *pc = &src->plane[1];
    if (!plane_ok(py) || !plane_ok(pc) || !plane_ok(&src->plane[2]) ||
        src->plane[2].width != pc->width || src->plane[2].height != pc->height ||
        out->width <= 0 || out->height <= 0 ||
        (out->dtype != SL_UINT8 && out->dtype != SL_FLOAT32))
        return sl__set_error(SL_EINVAL, "resize: bad planes %dx%d / %dx%d -> %dx%d", py->width,
                             py->height, pc->width, pc->height, out->width, out->height);
    sl__hpass hy, hc;
    int rc = build_axes(r, src, out, &hy, &hc);
    if (rc)
        return rc;
    int ny = r->ax.hi - r->ax.lo, nc = r->cx.hi - r->cx.lo, W = out->width;
    size_t rows = (size_t)ny + 2 * (size_t)nc + 3 * ROW_PAD;
    if (sl__resize_reserve((void **)&r->row, &r->row_cap, rows * sizeof *r->row) ||
        sl__resize_reserve((void **)&r->planes, &r->planes_cap, 3 * (size_t)W) ||
        sl__resize_reserve((void **)&r->line, &r->line_cap, (size_t)W * 3))
        return SL_ENOMEM;
    plane_job pj[3];
    int16_t *row = r->row;
    for (int c = 0; c < 3; c++) {
        pj[c] = (plane_job){&src->plane[c], c ? &r->cx : &r->ax, c ? &r->cy : &r->ay,
                            c ? hc : hy, row, c ? nc : ny, r->planes + (size_t)c * W};
        memset(row + pj[c].n, 0, ROW_PAD * sizeof *row);
        row += pj[c].n + ROW_PAD;
    }
    if (out->dtype == SL_FLOAT32)
        sl__resize_lut(r, out);
    if (out->colour && out->colour->on && !src->matrix)
        return resize_colour(r, pj, out);
    sl__vpass vertical = r->k->vertical;
    bool direct = out->dtype == SL_UINT8 && out->layout != SL_LAYOUT_CHW;
    for (int y = 0; y < out->height; y++) {
        for (int c = 0; c < 3; c++)
            plane_row(vertical, &pj[c], y, out->flip);
        uint8_t *line = direct ? (uint8_t *)out->data + (size_t)y * W * 3 : r->line;
        if (src->matrix)
            matrix_row(src->matrix, pj, line, W);
        else
            colour_row(r, pj, line, W);
        if (!direct)
            sl__resize_store(r, out, y, line);
    }
    return 0;
}

int sl__resize_ycc_rgb_agree(const sl__resize_kernels *k)
{
    enum { N = 4096 };
    uint8_t *in = sl__alloc(3 * N), *want = sl__alloc(3 * N), *got = sl__alloc(3 * N + 1);
    int rc = in && want && got ? 1 : SL_ENOMEM;
    /* every (Y, Cb, Cr), N pixels a row; rows of odd lengths too */
    for (uint32_t v = 0; rc == 1 && v < (1u << 24); v += N) {
        for (int i = 0; i < N; i++) {
            uint32_t u = v + (uint32_t)i;
            in[i] = (uint8_t)u, in[N + i] = (uint8_t)(u >> 8), in[2 * N + i] = (uint8_t)(u >> 16);
        }
        int n = N - (int)(v / N % 61);
        sl__ycc_rgb_c(in, in + N, in + 2 * N, want, n);
        got[3 * n] = 0x5a;
        k->ycc_rgb(in, in + N, in + 2 * N, got, n);
        if (memcmp(want, got, 3 * (size_t)n) || got[3 * n] != 0x5a)
            rc = 0;
    }
    sl__free(in, 3 * N);
    sl__free(want, 3 * N);
    sl__free(got, 3 * N + 1);
    return rc;
}

int sl__resize_ycc_colour_agree(const sl__resize_kernels *k)
{
    enum { N = 4096 };
    uint8_t *in = sl__alloc(3 * N), *want = sl__alloc(3 * N), *got = sl__alloc(3 * N + 1);
    int rc = in && want && got ? 1 : SL_ENOMEM;
    /* coefficient sets at and inside the fast bounds: identity, gains,
     * offsets, turns, gray; each over every (Y, Cb, Cr) step of a row */
    static const int16_t sets[][6] = {
        {4096, 0, 4096, 0, 0, 4096},          {5734, -900, 5734, 0, 0, 5734},
        {2048, 1020, 2458, -1100, 1100, 2458}, {32358, -15990, 32358, -32358, 32358, 32358},
        {32358, 15990, -32358, 32358, -32358, -32358}, {4096, 0, 0, 0, 0, 0},
        {1, 3, -7, 11, -13, 17}};
    for (size_t c = 0; rc == 1 && c < sizeof sets / sizeof *sets; c++)
        for (uint32_t v = 0; rc == 1 && v < (1u << 24); v += 16 * N) {
            for (int i = 0; i < N; i++) {
                uint32_t u = v + (uint32_t)i * 16 + (uint32_t)c;
                in[i] = (uint8_t)u, in[N + i] = (uint8_t)(u >> 8),
                in[2 * N + i] = (uint8_t)(u >> 16);
            }
            int n = N - (int)(v / N % 61);
            sl__ycc_rgb_colour_c(in, in + N, in + 2 * N, want, n, sets[c]);
            got[3 * n] = 0x5a;
            k->ycc_rgb_colour(in, in + N, in + 2 * N, got, n, sets[c]);
            if (memcmp(want, got, 3 * (size_t)n) || got[3 * n] != 0x5a)
                rc = 0;
        }
    sl__free(in, 3 * N);
    sl__free(want, 3 * N);
    sl__free(got, 3 * N + 1);
    return rc;
}
