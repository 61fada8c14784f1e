/*
 * Separable resampler from a fractional window of an RGB image to the
 * output tensor: a triangle filter widened by the reduction factor (area-
 * like antialiasing when shrinking, bilinear when growing), like PIL's and
 * torchvision's antialiased bilinear resize.
 *
 * Vertical pass first, one output row at a time: it runs over contiguous
 * bytes with the same taps for the whole row, and its int16 result row
 * stays in L1 for the horizontal pass (per-pixel taps). Horizontal first
 * would run the per-pixel pass over every input row instead of every
 * output row. Flip, layout, dtype and normalisation are folded into
 * writing the output row.
 *
 * Both passes come in SSE2 (x86-64's baseline, always built), AVX2 and
 * AVX-512 (BW, VL, VNNI) versions; the widest the CPU has is chosen at run
 * time, once (SLUICE_NO_AVX512=1 / SLUICE_NO_AVX2=1 step down). They
 * multiply-add pairs of taps (pmaddwd, vpdpwssd), which gcc does not find
 * by itself in the portable loops, and all compute the same integers.
 * Build with -DSL__RESIZE_PORTABLE to test the portable code. What each
 * costs per image: bench/README.md, "JPEG decode settings".
 *
 * Taps reach only pixels the window touches (rounded outward), renormalised
 * at its edges: the crop-then-resize of torchvision's resized_crop, and
 * independent of how far the decoded region extends past the window.
 */
#include <math.h>
#include <string.h>
#include <stdlib.h>
#if defined(__SSE2__) && !defined(SL__RESIZE_PORTABLE)
#include <emmintrin.h>
#define SL__RESIZE_SSE2 1
#if defined(__GNUC__) && defined(__x86_64__)
#include <immintrin.h>
#define SL__RESIZE_AVX2 1
#endif
#endif
#include "../core/alloc.h"
#include "../core/error.h"
#include "../core/log.h"
#include "image.h"

#define WBITS 14 /* weights: fixed point, summing to exactly 1 << WBITS */
#define IBITS 6  /* fraction bits of the intermediate row (255 << 6 fits int16) */
#define VSHIFT (WBITS - IBITS)
#define HSHIFT (WBITS + IBITS)
#define ROW_PAD 64 /* int16 after the intermediate row that SIMD reads may touch */

/* Filter taps of one axis; rebuilt only when the geometry changes. */
typedef struct axis {
    double pos, len; /* key: window, source size and output size */
    int size, out;
    bool valid;
    int lo, hi;      /* source pixels used: [lo, hi) */
    int taps;        /* per output sample: the widest filter */
    int pitch;       /* weights per sample: taps rounded up to even (pairs) */
    int32_t *start;  /* first source pixel of each output sample */
    int16_t *w;      /* out x pitch, zero-padded */
    double *t;       /* taps: one sample's filter values, while building */
    size_t start_cap, w_cap, t_cap; /* bytes */
    /* AVX-512 horizontal pass, built on first use after the taps change:
     * per group of 4 samples, its first pixel and per pair of taps a word
     * permutation and the matching weights (see horizontal_avx512). */
    int g_state;     /* 0: not built, 1: built, -1: a group spans too far */
    int32_t *g_base;
    int16_t *g_tab;  /* groups x pitch/2 x (32 indices, 32 weights) */
    size_t g_base_cap, g_tab_cap;
    /* one-channel (plane) horizontal pass: the weights again with a pitch
     * of whole 8-word vectors, built on first use after the taps change */
    bool w8_valid;
    int p8;
    int16_t *w8;
    size_t w8_cap;
    /* and its AVX-512 form: groups of 16 samples, as g_* for RGB */
    int g1_state;
    int32_t *g1_base;
    int16_t *g1_tab;
    size_t g1_base_cap, g1_tab_cap;
} axis;

struct sl__resizer {
    axis ax, ay;
    axis cx, cy;     /* sl__resize_ycc: the chroma planes' (ax, ay: luma's) */
    int16_t *row;    /* vertical pass result: (hi - lo) RGB pixels */
    uint8_t *line;   /* one output row, RGB, before layout/dtype */
    size_t row_cap, line_cap;
    uint8_t *planes; /* sl__resize_ycc: one output row of Y, Cb, Cr */
    size_t planes_cap;
    bool lut_valid;
    float lut_mean[3], lut_std[3];
    float lut[3][256];
};

static int reserve(void **p, size_t *cap, size_t need)
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

sl__resizer *sl__resizer_new(void)
{
    return sl__calloc(1, sizeof(sl__resizer));
}

static void axis_free(axis *a)
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
static inline void tap_range(const axis *a, int i, double scale, double fs, double *c,
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
static void sample_weights(axis *a, int i, double scale, double fs, double inv_fs)
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

#ifdef SL__RESIZE_AVX2
static int simd_level(void);
static bool weights_avx512(axis *a, int i, double scale, double fs, double inv_fs);
#endif

static int axis_build(axis *a, double pos, double len, int size, int out)
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
    if (reserve((void **)&a->start, &a->start_cap, (size_t)out * sizeof *a->start) ||
        reserve((void **)&a->w, &a->w_cap, (size_t)out * a->pitch * sizeof *a->w) ||
        reserve((void **)&a->t, &a->t_cap, (size_t)a->taps * sizeof *a->t))
        return SL_ENOMEM;
    double inv_fs = 1 / fs; /* (divisions per axis, not per sample) */
    memset(a->w, 0, (size_t)out * a->pitch * sizeof *a->w);
    int i = 0;
#ifdef SL__RESIZE_AVX2
    if (a->taps <= 8 && simd_level() == 2)
        for (; i + 8 <= out; i += 8)
            if (!weights_avx512(a, i, scale, fs, inv_fs))
                for (int j = i; j < i + 8; j++)
                    sample_weights(a, j, scale, fs, inv_fs);
#endif
    for (; i < out; i++)
        sample_weights(a, i, scale, fs, inv_fs);
    a->valid = true;
    return 0;
}

/* ---- passes ---- */

/* dst[x] = sum_k w[k] * src[k * stride + x] for x in [x, n), keeping IBITS
 * of fraction. */
static void vertical_c(const uint8_t *src, size_t stride, const int16_t *w, int taps,
                       int16_t *dst, int x, int n)
{
    for (; x < n; x++) {
        int32_t acc = 1 << (VSHIFT - 1);
        for (int k = 0; k < taps; k++)
            acc += (int32_t)w[k] * src[(size_t)k * stride + x];
        dst[x] = (int16_t)(acc >> VSHIFT);
    }
}

#ifdef SL__RESIZE_SSE2
/* Taps k and k + 1 as one int32 for pmaddwd (w[k] low, w[k + 1] high);
 * an odd last tap pairs with 0. */
static inline int32_t tap_pair(const int16_t *w, int k, int taps)
{
    int32_t v;
    if (k + 1 < taps)
        memcpy(&v, w + k, sizeof v); /* little-endian */
    else
        v = (uint16_t)w[k];
    return v;
}

static inline __m128i weight_pairs(const int16_t *w)
{
    int32_t v;
    memcpy(&v, w, sizeof v); /* w[0] low, w[1] high: little-endian */
    return _mm_set1_epi32(v);
}

/* Two source rows at a time: bytes of rows k and k+1 interleaved, widened
 * to int16, and pmaddwd with (w[k], w[k+1]) gives both taps' sum in int32. */
static void vertical(const uint8_t *src, size_t stride, const int16_t *w, int taps,
                     int16_t *dst, int n)
{
    const __m128i zero = _mm_setzero_si128();
    if (n < 16) {
        vertical_c(src, stride, w, taps, dst, 0, n);
        return;
    }
    for (int x = 0; x < n; x += 16) {
        if (x > n - 16)
            x = n - 16; /* the last step overlaps the one before: same values */
        __m128i a0 = _mm_set1_epi32(1 << (VSHIFT - 1)), a1 = a0, a2 = a0, a3 = a0;
        for (int k = 0; k < taps; k += 2) {
            const uint8_t *p = src + (size_t)k * stride + x;
            __m128i r0 = _mm_loadu_si128((const __m128i *)p);
            /* An odd last tap pairs with itself at weight 0: no read past
             * the filter's rows. */
            bool pair = k + 1 < taps;
            __m128i r1 = pair ? _mm_loadu_si128((const __m128i *)(p + stride)) : r0;
            __m128i wv = _mm_set1_epi32(tap_pair(w, k, taps));
            __m128i lo = _mm_unpacklo_epi8(r0, r1), hi = _mm_unpackhi_epi8(r0, r1);
            a0 = _mm_add_epi32(a0, _mm_madd_epi16(_mm_unpacklo_epi8(lo, zero), wv));
            a1 = _mm_add_epi32(a1, _mm_madd_epi16(_mm_unpackhi_epi8(lo, zero), wv));
            a2 = _mm_add_epi32(a2, _mm_madd_epi16(_mm_unpacklo_epi8(hi, zero), wv));
            a3 = _mm_add_epi32(a3, _mm_madd_epi16(_mm_unpackhi_epi8(hi, zero), wv));
        }
        a0 = _mm_srai_epi32(a0, VSHIFT), a1 = _mm_srai_epi32(a1, VSHIFT);
        a2 = _mm_srai_epi32(a2, VSHIFT), a3 = _mm_srai_epi32(a3, VSHIFT);
        _mm_storeu_si128((__m128i *)(dst + x), _mm_packs_epi32(a0, a1));
        _mm_storeu_si128((__m128i *)(dst + x + 8), _mm_packs_epi32(a2, a3));
    }
}

/* Per output pixel, pairs of taps: 8 int16 from pixel k on are
 * R0 G0 B0 R1 G1 B1 R2 G2; unpacked with themselves shifted by one pixel
 * they become R0 R1 G0 G1 B0 B1 .., and pmaddwd with (w[k], w[k+1]) gives
 * R, G, B sums in lanes 0-2. Reads up to 2 int16 past the pair: the row has
 * ROW_PAD zeros at its end. Inlined per pair count so the tap loop
 * unrolls. Output columns [o0, o1) are written in ascending order so that
 * each 4-byte store only clobbers a pixel still to be written; the last
 * one is stored bytewise. */
static inline __attribute__((always_inline)) void
horizontal_n(const axis *ax, const int16_t *row, uint8_t *line, bool flip, int pitch, int o0,
             int o1)
{
    int out = ax->out;
    for (int o = o0; o < o1; o++) {
        int i = flip ? out - 1 - o : o;
        const int16_t *p = row + 3 * (ax->start[i] - ax->lo);
        const int16_t *w = ax->w + (size_t)i * pitch;
        __m128i acc = _mm_set1_epi32(1 << (HSHIFT - 1));
        for (int k = 0; k < pitch; k += 2) {
            __m128i v = _mm_loadu_si128((const __m128i *)(p + 3 * k));
            __m128i pr = _mm_unpacklo_epi16(v, _mm_srli_si128(v, 6));
            acc = _mm_add_epi32(acc, _mm_madd_epi16(pr, weight_pairs(w + k)));
        }
        acc = _mm_srai_epi32(acc, HSHIFT);
        acc = _mm_packus_epi16(_mm_packs_epi32(acc, acc), acc);
        uint32_t rgb = (uint32_t)_mm_cvtsi128_si32(acc);
        uint8_t *d = line + 3 * o;
        if (o + 1 < o1) {
            memcpy(d, &rgb, 4);
        } else {
            d[0] = (uint8_t)rgb, d[1] = (uint8_t)(rgb >> 8), d[2] = (uint8_t)(rgb >> 16);
        }
    }
}

static void horizontal_range(const axis *ax, const int16_t *row, uint8_t *line, bool flip,
                             int o0, int o1)
{
    switch (ax->pitch) {
    case 2: horizontal_n(ax, row, line, flip, 2, o0, o1); break;
    case 4: horizontal_n(ax, row, line, flip, 4, o0, o1); break;
    case 6: horizontal_n(ax, row, line, flip, 6, o0, o1); break;
    case 8: horizontal_n(ax, row, line, flip, 8, o0, o1); break;
    default: horizontal_n(ax, row, line, flip, ax->pitch, o0, o1); break;
    }
}

static void horizontal(const axis *ax, const int16_t *row, uint8_t *line, bool flip)
{
    horizontal_range(ax, row, line, flip, 0, ax->out);
}

#ifdef SL__RESIZE_AVX2
/* AVX2, chosen at run time where the CPU has it: the same arithmetic as the
 * SSE2 passes (identical results), twice as wide. Vertical: 16 bytes of two
 * rows widened in order (vpmovzxbw), interleaved and pmaddwd'ed per pair of
 * taps; the in-lane pack puts the 16 results back in order. */
__attribute__((target("avx2"))) static void
vertical_avx2(const uint8_t *src, size_t stride, const int16_t *w, int taps, int16_t *dst, int n)
{
    if (n < 16) {
        vertical_c(src, stride, w, taps, dst, 0, n);
        return;
    }
    for (int x = 0; x < n; x += 16) {
        if (x > n - 16)
            x = n - 16; /* the last step overlaps the one before: same values */
        __m256i lo = _mm256_set1_epi32(1 << (VSHIFT - 1)), hi = lo;
        for (int k = 0; k < taps; k += 2) {
            const uint8_t *p = src + (size_t)k * stride + x;
            bool pair = k + 1 < taps;
            __m256i r0 = _mm256_cvtepu8_epi16(_mm_loadu_si128((const __m128i *)p));
            __m256i r1 = pair ? _mm256_cvtepu8_epi16(_mm_loadu_si128((const __m128i *)(p + stride)))
                              : r0;
            __m256i wv = _mm256_set1_epi32(tap_pair(w, k, taps));
            lo = _mm256_add_epi32(lo, _mm256_madd_epi16(_mm256_unpacklo_epi16(r0, r1), wv));
            hi = _mm256_add_epi32(hi, _mm256_madd_epi16(_mm256_unpackhi_epi16(r0, r1), wv));
        }
        lo = _mm256_srai_epi32(lo, VSHIFT);
        hi = _mm256_srai_epi32(hi, VSHIFT);
        _mm256_storeu_si256((__m256i *)(dst + x), _mm256_packs_epi32(lo, hi));
    }
}

/* Horizontal: two output pixels at once, one per 128-bit lane. */
__attribute__((target("avx2"))) static inline __attribute__((always_inline)) void
horizontal_avx2_n(const axis *ax, const int16_t *row, uint8_t *line, bool flip, int pitch)
{
    int out = ax->out, o = 0;
    for (; o + 2 <= out; o += 2) {
        int i0 = flip ? out - 1 - o : o, i1 = flip ? out - 2 - o : o + 1;
        const int16_t *p0 = row + 3 * (ax->start[i0] - ax->lo);
        const int16_t *p1 = row + 3 * (ax->start[i1] - ax->lo);
        const int16_t *w0 = ax->w + (size_t)i0 * pitch, *w1 = ax->w + (size_t)i1 * pitch;
        __m256i acc = _mm256_set1_epi32(1 << (HSHIFT - 1));
        for (int k = 0; k < pitch; k += 2) {
            __m256i v = _mm256_loadu2_m128i((const __m128i *)(p1 + 3 * k),
                                            (const __m128i *)(p0 + 3 * k));
            __m256i pr = _mm256_unpacklo_epi16(v, _mm256_srli_si256(v, 6));
            int32_t a, b;
            memcpy(&a, w0 + k, sizeof a);
            memcpy(&b, w1 + k, sizeof b);
            __m256i wv = _mm256_setr_epi32(a, a, a, a, b, b, b, b);
            acc = _mm256_add_epi32(acc, _mm256_madd_epi16(pr, wv));
        }
        acc = _mm256_srai_epi32(acc, HSHIFT);
        acc = _mm256_packus_epi16(_mm256_packs_epi32(acc, acc), acc);
        uint32_t rgb0 = (uint32_t)_mm256_extract_epi32(acc, 0);
        uint32_t rgb1 = (uint32_t)_mm256_extract_epi32(acc, 4);
        uint8_t *d = line + 3 * o;
        memcpy(d, &rgb0, 4); /* clobbers a byte of pixel o + 1, written next */
        if (o + 2 < out) {
            memcpy(d + 3, &rgb1, 4);
        } else {
            d[3] = (uint8_t)rgb1, d[4] = (uint8_t)(rgb1 >> 8), d[5] = (uint8_t)(rgb1 >> 16);
        }
    }
    if (o < out) /* an odd last pixel */
        horizontal_range(ax, row, line, flip, o, out);
}

__attribute__((target("avx2"))) static void
horizontal_avx2(const axis *ax, const int16_t *row, uint8_t *line, bool flip)
{
    switch (ax->pitch) {
    case 2: horizontal_avx2_n(ax, row, line, flip, 2); break;
    case 4: horizontal_avx2_n(ax, row, line, flip, 4); break;
    case 6: horizontal_avx2_n(ax, row, line, flip, 6); break;
    case 8: horizontal_avx2_n(ax, row, line, flip, 8); break;
    default: horizontal_avx2_n(ax, row, line, flip, ax->pitch); break;
    }
}

#define AVX512 "avx512f,avx512bw,avx512vl,avx512vnni"

/* AVX-512 (BW, VL, VNNI), chosen at run time where the CPU has it; again
 * the same integers. Vertical: the AVX2 pass at 32 bytes a step, with
 * vpdpwssd doing the multiply and the add. */
__attribute__((target(AVX512))) static void
vertical_avx512(const uint8_t *src, size_t stride, const int16_t *w, int taps, int16_t *dst,
                int n)
{
    if (n < 32) {
        vertical_avx2(src, stride, w, taps, dst, n);
        return;
    }
    /* 64 bytes a step: four independent chains of vpdpwssd hide its
     * latency (one pair of chains waits on itself at every tap) */
    int x = 0;
    for (; x + 64 <= n; x += 64) {
        __m512i lo0 = _mm512_set1_epi32(1 << (VSHIFT - 1)), hi0 = lo0, lo1 = lo0, hi1 = lo0;
        for (int k = 0; k < taps; k += 2) {
            const uint8_t *p = src + (size_t)k * stride + x;
            const uint8_t *q = k + 1 < taps ? p + stride : p; /* odd last tap: weight 0 */
            __m512i a0 = _mm512_cvtepu8_epi16(_mm256_loadu_si256((const __m256i *)p));
            __m512i a1 = _mm512_cvtepu8_epi16(_mm256_loadu_si256((const __m256i *)(p + 32)));
            __m512i b0 = _mm512_cvtepu8_epi16(_mm256_loadu_si256((const __m256i *)q));
            __m512i b1 = _mm512_cvtepu8_epi16(_mm256_loadu_si256((const __m256i *)(q + 32)));
            __m512i wv = _mm512_set1_epi32(tap_pair(w, k, taps));
            lo0 = _mm512_dpwssd_epi32(lo0, _mm512_unpacklo_epi16(a0, b0), wv);
            hi0 = _mm512_dpwssd_epi32(hi0, _mm512_unpackhi_epi16(a0, b0), wv);
            lo1 = _mm512_dpwssd_epi32(lo1, _mm512_unpacklo_epi16(a1, b1), wv);
            hi1 = _mm512_dpwssd_epi32(hi1, _mm512_unpackhi_epi16(a1, b1), wv);
        }
        lo0 = _mm512_srai_epi32(lo0, VSHIFT), hi0 = _mm512_srai_epi32(hi0, VSHIFT);
        lo1 = _mm512_srai_epi32(lo1, VSHIFT), hi1 = _mm512_srai_epi32(hi1, VSHIFT);
        _mm512_storeu_si512(dst + x, _mm512_packs_epi32(lo0, hi0));
        _mm512_storeu_si512(dst + x + 32, _mm512_packs_epi32(lo1, hi1));
    }
    if (x == n)
        return;
    for (; x < n; x += 32) {
        if (x > n - 32)
            x = n - 32; /* the last step overlaps the one before: same values */
        __m512i lo = _mm512_set1_epi32(1 << (VSHIFT - 1)), hi = lo;
        for (int k = 0; k < taps; k += 2) {
            const uint8_t *p = src + (size_t)k * stride + x;
            bool pair = k + 1 < taps;
            __m512i r0 = _mm512_cvtepu8_epi16(_mm256_loadu_si256((const __m256i *)p));
            __m512i r1 = pair ? _mm512_cvtepu8_epi16(
                                    _mm256_loadu_si256((const __m256i *)(p + stride)))
                              : r0;
            __m512i wv = _mm512_set1_epi32(tap_pair(w, k, taps));
            lo = _mm512_dpwssd_epi32(lo, _mm512_unpacklo_epi16(r0, r1), wv);
            hi = _mm512_dpwssd_epi32(hi, _mm512_unpackhi_epi16(r0, r1), wv);
        }
        lo = _mm512_srai_epi32(lo, VSHIFT);
        hi = _mm512_srai_epi32(hi, VSHIFT);
        _mm512_storeu_si512(dst + x, _mm512_packs_epi32(lo, hi));
    }
}

/* Horizontal: four output pixels per step, one per 128-bit lane. The
 * group's source pixels lie within 21 pixels (63 words) of its first one,
 * so two loads of 32 words hold them all; per pair of taps one vpermt2w
 * gathers R_k R_k+1 G_k G_k+1 B_k B_k+1 - - in every lane and one vpdpwssd
 * adds them times (w_k, w_k+1) to the lane's R, G, B sums. The table of
 * word indices and weights is built once per geometry. */
#define GROUP 4
#define GROUP_SPAN 21 /* pixels: 3 * 21 = 63 words */

static int groups_build(axis *a)
{
    int groups = a->out / GROUP, pairs = a->pitch / 2;
    for (int g = 0; g < groups; g++)
        if (a->start[g * GROUP + GROUP - 1] - a->start[g * GROUP] + a->pitch > GROUP_SPAN)
        {
            a->g_state = -1; /* the AVX2 pass does this geometry */
            return 0;
        }
    if (reserve((void **)&a->g_base, &a->g_base_cap, (size_t)(groups + 1) * sizeof(int32_t)) ||
        reserve((void **)&a->g_tab, &a->g_tab_cap,
                (size_t)(groups * pairs + 1) * 64 * sizeof(int16_t)))
        return SL_ENOMEM;
    for (int g = 0; g < groups; g++) {
        int base = a->start[g * GROUP];
        a->g_base[g] = 3 * (base - a->lo);
        for (int k = 0; k < a->pitch; k += 2) {
            int16_t *idx = a->g_tab + ((size_t)g * pairs + k / 2) * 64, *wt = idx + 32;
            for (int j = 0; j < GROUP; j++) {
                int i = g * GROUP + j, rel = a->start[i] - base + k;
                const int16_t *w = a->w + (size_t)i * a->pitch + k;
                for (int c = 0; c < 3; c++) {
                    idx[8 * j + 2 * c] = (int16_t)(3 * rel + c);
                    idx[8 * j + 2 * c + 1] = (int16_t)(3 * (rel + 1) + c);
                    wt[8 * j + 2 * c] = w[0];
                    wt[8 * j + 2 * c + 1] = w[1];
                }
                idx[8 * j + 6] = idx[8 * j + 7] = 0;
                wt[8 * j + 6] = wt[8 * j + 7] = 0;
            }
        }
    }
    a->g_state = 1;
    return 0;
}

/* Two groups a step, two chains of vpdpwssd side by side; inlined per
 * pair count so that the pair loop unrolls. */
__attribute__((target(AVX512))) static inline __attribute__((always_inline)) __m512i
group_sum(const int16_t *p, const int16_t *tab, int pairs)
{
    __m512i a = _mm512_loadu_si512(p), b = _mm512_loadu_si512(p + 32);
    __m512i acc = _mm512_set1_epi32(1 << (HSHIFT - 1));
    for (int k = 0; k < pairs; k++, tab += 64) {
        __m512i v = _mm512_permutex2var_epi16(a, _mm512_load_si512(tab), b);
        acc = _mm512_dpwssd_epi32(acc, v, _mm512_load_si512(tab + 32));
    }
    return _mm512_srai_epi32(acc, HSHIFT);
}

__attribute__((target(AVX512))) static inline __attribute__((always_inline)) void
horizontal_avx512_n(const axis *ax, const int16_t *row, uint8_t *line, bool flip, int pairs)
{
    int out = ax->out, groups = out / GROUP;
    /* dword results R G B - per pixel: bytes 0-2 of each, in order or with
     * the pixels reversed for a flip */
    const __m128i keep = _mm_setr_epi8(0, 1, 2, 4, 5, 6, 8, 9, 10, 12, 13, 14, -1, -1, -1, -1);
    const __m128i rev = _mm_setr_epi8(12, 13, 14, 8, 9, 10, 4, 5, 6, 0, 1, 2, -1, -1, -1, -1);
    const __m128i order = flip ? rev : keep;
    const int16_t *tab = ax->g_tab;
    size_t step = (size_t)pairs * 64;
    int g = 0;
    for (; g + 2 <= groups; g += 2, tab += 2 * step) {
        __m512i s0 = group_sum(row + ax->g_base[g], tab, pairs);
        __m512i s1 = group_sum(row + ax->g_base[g + 1], tab + step, pairs);
        __m128i px0 = _mm_shuffle_epi8(_mm512_cvtusepi32_epi8(s0), order);
        __m128i px1 = _mm_shuffle_epi8(_mm512_cvtusepi32_epi8(s1), order);
        int o0 = flip ? out - GROUP * (g + 1) : GROUP * g;
        int o1 = flip ? o0 - GROUP : o0 + GROUP;
        _mm_mask_storeu_epi8(line + 3 * o0, 0x0fff, px0);
        _mm_mask_storeu_epi8(line + 3 * o1, 0x0fff, px1);
    }
    if (g < groups) {
        __m128i px = _mm_shuffle_epi8(
            _mm512_cvtusepi32_epi8(group_sum(row + ax->g_base[g], tab, pairs)), order);
        _mm_mask_storeu_epi8(line + 3 * (flip ? out - GROUP * (g + 1) : GROUP * g), 0x0fff, px);
    }
    if (groups * GROUP < out) { /* the last out % 4 pixels */
        int lo = groups * GROUP;
        if (flip)
            horizontal_range(ax, row, line, flip, 0, out - lo);
        else
            horizontal_range(ax, row, line, flip, lo, out);
    }
}

__attribute__((target(AVX512))) static void
horizontal_avx512(const axis *ax, const int16_t *row, uint8_t *line, bool flip)
{
    switch (ax->pitch / 2) {
    case 1: horizontal_avx512_n(ax, row, line, flip, 1); break;
    case 2: horizontal_avx512_n(ax, row, line, flip, 2); break;
    case 3: horizontal_avx512_n(ax, row, line, flip, 3); break;
    case 4: horizontal_avx512_n(ax, row, line, flip, 4); break;
    default: horizontal_avx512_n(ax, row, line, flip, ax->pitch / 2); break;
    }
}

/* 0: SSE2, 1: AVX2, 2: AVX-512 (BW, VL, VNNI); -1 until decided. */
static int simd_mode = -1;


static bool has_avx512(void)
{
    return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
           __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512vnni");
}

/* The widest the CPU has, less what SLUICE_NO_AVX512 / SLUICE_NO_AVX2 turn
 * off or a test chose with sl__resize_simd. */
static int simd_level(void)
{
    int v = __atomic_load_n(&simd_mode, __ATOMIC_RELAXED);
    if (v < 0) {
        v = 0;
        if (__builtin_cpu_supports("avx2") && !sl__env_on("SLUICE_NO_AVX2"))
            v = has_avx512() && !sl__env_on("SLUICE_NO_AVX512") ? 2 : 1;
        __atomic_store_n(&simd_mode, v, __ATOMIC_RELAXED);
    }
    return v;
}

/* ifloor of 8 values (the same clamp, truncation and correction). */
__attribute__((target(AVX512))) static inline __m256i ifloor8(__m512d v)
{
    v = _mm512_max_pd(v, _mm512_set1_pd(-1e9));
    v = _mm512_min_pd(v, _mm512_set1_pd(1e9));
    __m256i i = _mm512_cvttpd_epi32(v);
    __mmask8 over = _mm512_cmp_pd_mask(_mm512_cvtepi32_pd(i), v, _CMP_GT_OQ);
    return _mm256_mask_sub_epi32(i, over, i, _mm256_set1_epi32(1));
}

/* sample_weights for samples i .. i + 7 side by side, with the same double
 * operations in the same order, so the same weights. (The _round_ forms,
 * at the default rounding, are plain IEEE operations that gcc will not
 * fuse into a multiply-add, which would round once instead of twice.)
 * False, with nothing written, when a sample's centre lies outside the
 * pixels or its taps sum to 0: sample_weights does those. taps <= 8. */
__attribute__((target(AVX512))) static bool weights_avx512(axis *a, int i, double scale,
                                                           double fs, double inv_fs)
{
    enum { R = _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC };
    const __m512d zero = _mm512_setzero_pd(), half = _mm512_set1_pd(0.5);
    __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
    __m512d idx = _mm512_cvtepi32_pd(_mm256_add_epi32(_mm256_set1_epi32(i), lane));
    __m512d c = _mm512_mul_round_pd(_mm512_add_round_pd(idx, half, R), _mm512_set1_pd(scale), R);
    c = _mm512_sub_round_pd(_mm512_add_round_pd(_mm512_set1_pd(a->pos), c, R), half, R);
    __m512d vfs = _mm512_set1_pd(fs);
    __m256i one = _mm256_set1_epi32(1), lo = _mm256_set1_epi32(a->lo),
            top = _mm256_set1_epi32(a->hi - 1);
    __m256i f = _mm256_add_epi32(ifloor8(_mm512_sub_round_pd(c, vfs, R)), one);
    __m512d neg = _mm512_sub_round_pd(zero, _mm512_add_round_pd(c, vfs, R), R);
    __m256i l = _mm256_sub_epi32(_mm256_sub_epi32(_mm256_setzero_si256(), ifloor8(neg)), one);
    __m256i first = _mm256_max_epi32(lo, _mm256_min_epi32(f, top));
    __m256i last = _mm256_max_epi32(lo, _mm256_min_epi32(l, top));
    if (_mm256_movemask_epi8(_mm256_cmpgt_epi32(first, last)))
        return false;
    __m256i n = _mm256_add_epi32(_mm256_sub_epi32(last, first), one);
    __m512d t[8], sum = zero;
    const __m512d vone = _mm512_set1_pd(1), vinv = _mm512_set1_pd(inv_fs);
    for (int k = 0; k < a->taps; k++) {
        __m256i vk = _mm256_set1_epi32(k);
        __m512d j = _mm512_cvtepi32_pd(_mm256_add_epi32(first, vk));
        __m512d d = _mm512_abs_pd(_mm512_sub_round_pd(j, c, R));
        __m512d v = _mm512_sub_round_pd(vone, _mm512_mul_round_pd(d, vinv, R), R);
        v = _mm512_max_pd(v, zero); /* v > 0 ? v : 0 */
        __mmask8 in = _mm256_cmpgt_epi32_mask(n, vk);
        t[k] = _mm512_maskz_mov_pd(in, v);
        sum = _mm512_add_round_pd(sum, t[k], R); /* + 0 past a sample's taps: exact */
    }
    if (_mm512_cmp_pd_mask(sum, zero, _CMP_GT_OQ) != 0xff)
        return false;
    __m512d norm = _mm512_div_round_pd(_mm512_set1_pd(1 << WBITS), sum, R), run = zero;
    __m256i prev = _mm256_setzero_si256(), full = _mm256_set1_epi32(1 << WBITS);
    __m256i nm1 = _mm256_sub_epi32(n, one);
    int32_t wk[8][8];
    for (int k = 0; k < a->taps; k++) {
        __m256i vk = _mm256_set1_epi32(k);
        __mmask8 mid = _mm256_cmpgt_epi32_mask(nm1, vk), end = _mm256_cmpeq_epi32_mask(nm1, vk);
        run = _mm512_mask_add_round_pd(run, mid, run, t[k], R);
        __m256i cur = _mm512_cvttpd_epi32(
            _mm512_add_round_pd(_mm512_mul_round_pd(run, norm, R), half, R));
        __m256i w = _mm256_maskz_sub_epi32(mid, cur, prev);
        w = _mm256_mask_sub_epi32(w, end, full, prev);
        prev = _mm256_mask_mov_epi32(prev, mid, cur);
        _mm256_storeu_si256((__m256i *)wk[k], w);
    }
    __m256i s = _mm256_min_epi32(first, _mm256_set1_epi32(a->hi - a->taps));
    _mm256_storeu_si256((__m256i *)(a->start + i), s);
    int32_t fs8[8], n8[8];
    _mm256_storeu_si256((__m256i *)fs8, _mm256_sub_epi32(first, s));
    _mm256_storeu_si256((__m256i *)n8, n);
    for (int j = 0; j < 8; j++) {
        int16_t *q = a->w + (size_t)(i + j) * a->pitch + fs8[j];
        for (int k = 0; k < n8[j]; k++)
            q[k] = (int16_t)wk[k][j];
    }
    return true;
}
#endif
#else
/* Blocks of a constant 16 bytes, which gcc -O2 vectorises. */
static void vertical(const uint8_t *src, size_t stride, const int16_t *w, int taps,
                     int16_t *dst, int n)
{
    int x = 0;
    for (; x + 16 <= n; x += 16) {
        int32_t acc[16];
        for (int i = 0; i < 16; i++)
            acc[i] = 1 << (VSHIFT - 1);
        for (int k = 0; k < taps; k++) {
            const uint8_t *p = src + (size_t)k * stride + x;
            int16_t wk = w[k];
            for (int i = 0; i < 16; i++)
                acc[i] += (int32_t)wk * (int16_t)p[i];
        }
        for (int i = 0; i < 16; i++)
            dst[x + i] = (int16_t)(acc[i] >> VSHIFT);
    }
    vertical_c(src, stride, w, taps, dst, x, n);
}

static inline uint8_t to_u8(int32_t v)
{
    v >>= HSHIFT;
    return (uint8_t)(v > 255 ? 255 : v); /* weights are >= 0: never below 0 */
}

/* One output row from the intermediate row (RGB, first pixel = ax->lo),
 * columns reversed when flipping. Inlined per tap count so that the tap
 * loop unrolls. */
static inline __attribute__((always_inline)) void
horizontal_n(const axis *ax, const int16_t *row, uint8_t *line, bool flip, int taps)
{
    int out = ax->out;
    for (int i = 0; i < out; i++) {
        const int16_t *p = row + 3 * (ax->start[i] - ax->lo);
        const int16_t *w = ax->w + (size_t)i * ax->pitch;
        int32_t r = 1 << (HSHIFT - 1), g = r, b = r;
        for (int k = 0; k < taps; k++) {
            r += (int32_t)w[k] * p[3 * k];
            g += (int32_t)w[k] * p[3 * k + 1];
            b += (int32_t)w[k] * p[3 * k + 2];
        }
        uint8_t *o = line + 3 * (flip ? out - 1 - i : i);
        o[0] = to_u8(r);
        o[1] = to_u8(g);
        o[2] = to_u8(b);
    }
}

static void horizontal(const axis *ax, const int16_t *row, uint8_t *line, bool flip)
{
    switch (ax->taps) {
    case 2: horizontal_n(ax, row, line, flip, 2); break;
    case 3: horizontal_n(ax, row, line, flip, 3); break;
    case 4: horizontal_n(ax, row, line, flip, 4); break;
    case 5: horizontal_n(ax, row, line, flip, 5); break;
    default: horizontal_n(ax, row, line, flip, ax->taps); break;
    }
}
#endif

/* ---- output ---- */

static void build_lut(sl__resizer *r, const sl__resize_out *out)
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
static void store(const sl__resizer *r, const sl__resize_out *out, int y, const uint8_t *line)
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

int sl__resize(sl__resizer *r, const uint8_t *src, int w, int h, size_t stride,
               const sl__window *win, const sl__resize_out *out)
{
    if (w <= 0 || h <= 0 || out->width <= 0 || out->height <= 0 ||
        (out->dtype != SL_UINT8 && out->dtype != SL_FLOAT32) || !isfinite(win->x) ||
        !isfinite(win->y) || !isfinite(win->w) || !isfinite(win->h))
        return sl__set_error(SL_EINVAL, "resize: bad geometry %dx%d (%g,%g %gx%g) -> %dx%d", w,
                             h, win->x, win->y, win->w, win->h, out->width, out->height);
    int rc = axis_build(&r->ax, win->x, win->w, w, out->width);
    if (!rc)
        rc = axis_build(&r->ay, win->y, win->h, h, out->height);
    if (rc)
        return rc;
    const axis *ax = &r->ax, *ay = &r->ay;
    int n = 3 * (ax->hi - ax->lo);
    if (reserve((void **)&r->row, &r->row_cap, (size_t)(n + ROW_PAD) * sizeof *r->row) ||
        reserve((void **)&r->line, &r->line_cap, (size_t)out->width * 3))
        return SL_ENOMEM;
    if (out->dtype == SL_FLOAT32)
        build_lut(r, out);
    memset(r->row + n, 0, ROW_PAD * sizeof *r->row);
    bool direct = out->dtype == SL_UINT8 && out->layout != SL_LAYOUT_CHW;
#ifdef SL__RESIZE_AVX2
    int level = simd_level();
    if (level == 2 && ax->g_state == 0 && groups_build(&r->ax))
        return SL_ENOMEM;
    bool h512 = level == 2 && ax->g_state == 1;
#endif
    for (int y = 0; y < out->height; y++) {
        const uint8_t *s = src + (size_t)ay->start[y] * stride + 3 * (size_t)ax->lo;
        const int16_t *wy = ay->w + (size_t)y * ay->pitch;
        uint8_t *line = direct ? (uint8_t *)out->data + (size_t)y * out->width * 3 : r->line;
#ifdef SL__RESIZE_AVX2
        if (level == 2) {
            vertical_avx512(s, stride, wy, ay->taps, r->row, n);
            if (h512)
                horizontal_avx512(ax, r->row, line, out->flip);
            else
                horizontal_avx2(ax, r->row, line, out->flip);
        } else if (level == 1) {
            vertical_avx2(s, stride, wy, ay->taps, r->row, n);
            horizontal_avx2(ax, r->row, line, out->flip);
        } else
#endif
        {
            vertical(s, stride, wy, ay->taps, r->row, n);
            horizontal(ax, r->row, line, out->flip);
        }
        if (!direct)
            store(r, out, y, line);
    }
    return 0;
}

int sl__resize_simd(int level)
{
#ifdef SL__RESIZE_AVX2
    if ((level >= 1 && !__builtin_cpu_supports("avx2")) || (level >= 2 && !has_avx512()))
        return -1;
    __atomic_store_n(&simd_mode, level, __ATOMIC_RELAXED);
    return level;
#else
    return level == 0 ? 0 : -1;
#endif
}

int sl__resize_weights_agree(double pos, double len, int size, int out)
{
#ifdef SL__RESIZE_AVX2
    if (!has_avx512())
        return -1;
    axis a, b;
    memset(&a, 0, sizeof a);
    memset(&b, 0, sizeof b);
    int level = simd_level(), rc;
    __atomic_store_n(&simd_mode, 0, __ATOMIC_RELAXED);
    rc = axis_build(&a, pos, len, size, out);
    __atomic_store_n(&simd_mode, 2, __ATOMIC_RELAXED);
    if (rc == 0)
        rc = axis_build(&b, pos, len, size, out);
    __atomic_store_n(&simd_mode, level, __ATOMIC_RELAXED);
    if (rc == 0)
        rc = !memcmp(a.start, b.start, (size_t)out * sizeof *a.start) &&
             !memcmp(a.w, b.w, (size_t)out * a.pitch * sizeof *a.w);
    axis_free(&a);
    axis_free(&b);
    return rc;
#else
    (void)pos, (void)len, (void)size, (void)out;
    return -1;
#endif
}

/* ---- YCbCr planes ---- */

static int w8_build(axis *a)
{
    if (a->w8_valid)
        return 0;
    a->p8 = (a->taps + 7) & ~7;
    if (reserve((void **)&a->w8, &a->w8_cap, (size_t)a->out * a->p8 * sizeof *a->w8))
        return SL_ENOMEM;
    for (int i = 0; i < a->out; i++) {
        int16_t *q = a->w8 + (size_t)i * a->p8;
        memset(q, 0, (size_t)a->p8 * sizeof *q);
        memcpy(q, a->w + (size_t)i * a->pitch, (size_t)a->taps * sizeof *q);
    }
    a->w8_valid = true;
    return 0;
}

/* One plane's output row, columns [o0, o1), from its intermediate row. */
static void horizontal1_c(const axis *a, const int16_t *row, uint8_t *line, bool flip, int o0,
                          int o1)
{
    for (int o = o0; o < o1; o++) {
        int i = flip ? a->out - 1 - o : o;
        const int16_t *p = row + (a->start[i] - a->lo);
        const int16_t *w = a->w + (size_t)i * a->pitch;
        int32_t acc = 1 << (HSHIFT - 1);
        for (int k = 0; k < a->taps; k++)
            acc += (int32_t)w[k] * p[k];
        acc >>= HSHIFT;
        line[o] = (uint8_t)(acc > 255 ? 255 : acc < 0 ? 0 : acc);
    }
}

/* BT.601 full range (JFIF) in Q15, applied as pmulhrsw does:
 * R = Y + Cr + 0.402 Cr, G = Y - 0.34414 Cb - 0.71414 Cr,
 * B = Y + Cb + 0.772 Cb, with Cb and Cr centred on 0. */
#define K_CR_R 13173
#define K_CB_G 11277
#define K_CR_G 23401
#define K_CB_B 25297

static inline int mulhrs(int a, int k)
{
    return (a * k + 0x4000) >> 15;
}

static inline uint8_t sat8(int v)
{
    return (uint8_t)(v < 0 ? 0 : v > 255 ? 255 : v);
}

static void ycc_rgb_c(const uint8_t *yl, const uint8_t *cbl, const uint8_t *crl, uint8_t *rgb,
                      int x0, int n)
{
    for (int x = x0; x < n; x++) {
        int y = yl[x], cb = cbl[x] - 128, cr = crl[x] - 128;
        rgb[3 * x] = sat8(y + cr + mulhrs(cr, K_CR_R));
        rgb[3 * x + 1] = sat8(y - mulhrs(cb, K_CB_G) - mulhrs(cr, K_CR_G));
        rgb[3 * x + 2] = sat8(y + cb + mulhrs(cb, K_CB_B));
    }
}

#ifdef SL__RESIZE_SSE2
/* Four output samples a step: each one's taps times its weights padded to
 * whole vectors (pmaddwd), the four partial sums transposed and added. */
static void horizontal1(const axis *a, const int16_t *row, uint8_t *line, bool flip)
{
    int out = a->out, p8 = a->p8, o = 0;
    const __m128i rnd = _mm_set1_epi32(1 << (HSHIFT - 1));
    for (; o + 4 <= out; o += 4) {
        __m128i s[4];
        for (int j = 0; j < 4; j++) {
            int i = flip ? out - 1 - (o + j) : o + j;
            const int16_t *p = row + (a->start[i] - a->lo);
            const int16_t *w = a->w8 + (size_t)i * p8;
            __m128i acc = _mm_madd_epi16(_mm_loadu_si128((const __m128i *)p),
                                         _mm_load_si128((const __m128i *)w));
            for (int k = 8; k < p8; k += 8)
                acc = _mm_add_epi32(acc, _mm_madd_epi16(_mm_loadu_si128((const __m128i *)(p + k)),
                                                        _mm_load_si128((const __m128i *)(w + k))));
            s[j] = acc;
        }
        __m128i t0 = _mm_add_epi32(_mm_unpacklo_epi32(s[0], s[1]), _mm_unpackhi_epi32(s[0], s[1]));
        __m128i t1 = _mm_add_epi32(_mm_unpacklo_epi32(s[2], s[3]), _mm_unpackhi_epi32(s[2], s[3]));
        __m128i v = _mm_add_epi32(_mm_unpacklo_epi64(t0, t1), _mm_unpackhi_epi64(t0, t1));
        v = _mm_srai_epi32(_mm_add_epi32(v, rnd), HSHIFT);
        v = _mm_packus_epi16(_mm_packs_epi32(v, v), v);
        uint32_t px = (uint32_t)_mm_cvtsi128_si32(v);
        memcpy(line + o, &px, 4);
    }
    horizontal1_c(a, row, line, flip, o, out);
}

#ifdef SL__RESIZE_AVX2
/* AVX-512: 16 samples of a plane per step, one per dword lane. Their
 * source pixels lie within 64 words of the group's first one (two
 * registers); per pair of taps one vpermt2w gathers each lane's two pixels
 * and one vpdpwssd adds them times its two weights. */
#define GROUP1 16
#define GROUP1_SPAN 64

static int groups1_build(axis *a)
{
    int groups = a->out / GROUP1, pairs = a->pitch / 2;
    for (int g = 0; g < groups; g++)
        if (a->start[g * GROUP1 + GROUP1 - 1] - a->start[g * GROUP1] + a->pitch > GROUP1_SPAN) {
            a->g1_state = -1; /* the SSE2 pass does this geometry */
            return 0;
        }
    if (reserve((void **)&a->g1_base, &a->g1_base_cap, (size_t)(groups + 1) * sizeof(int32_t)) ||
        reserve((void **)&a->g1_tab, &a->g1_tab_cap,
                (size_t)(groups * pairs + 1) * 64 * sizeof(int16_t)))
        return SL_ENOMEM;
    for (int g = 0; g < groups; g++) {
        int base = a->start[g * GROUP1];
        a->g1_base[g] = base - a->lo;
        for (int k = 0; k < a->pitch; k += 2) {
            int16_t *idx = a->g1_tab + ((size_t)g * pairs + k / 2) * 64, *wt = idx + 32;
            for (int j = 0; j < GROUP1; j++) {
                int i = g * GROUP1 + j, rel = a->start[i] - base + k;
                const int16_t *w = a->w + (size_t)i * a->pitch + k;
                idx[2 * j] = (int16_t)rel;
                idx[2 * j + 1] = (int16_t)(rel + 1);
                wt[2 * j] = w[0];
                wt[2 * j + 1] = w[1];
            }
        }
    }
    a->g1_state = 1;
    return 0;
}

__attribute__((target(AVX512))) static inline __attribute__((always_inline)) void
horizontal1_avx512_n(const axis *a, const int16_t *row, uint8_t *line, bool flip, int pairs)
{
    int out = a->out, groups = out / GROUP1;
    const __m128i rev = _mm_setr_epi8(15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0);
    const int16_t *tab = a->g1_tab;
    for (int g = 0; g < groups; g++, tab += (size_t)pairs * 64) {
        const int16_t *p = row + a->g1_base[g];
        __m512i lo = _mm512_loadu_si512(p), hi = _mm512_loadu_si512(p + 32);
        __m512i acc = _mm512_set1_epi32(1 << (HSHIFT - 1));
        for (int k = 0; k < pairs; k++) {
            __m512i v = _mm512_permutex2var_epi16(lo, _mm512_load_si512(tab + 64 * k), hi);
            acc = _mm512_dpwssd_epi32(acc, v, _mm512_load_si512(tab + 64 * k + 32));
        }
        __m128i px = _mm512_cvtusepi32_epi8(_mm512_srai_epi32(acc, HSHIFT));
        if (flip)
            _mm_storeu_si128((__m128i *)(line + out - GROUP1 * (g + 1)), _mm_shuffle_epi8(px, rev));
        else
            _mm_storeu_si128((__m128i *)(line + GROUP1 * g), px);
    }
    int done = groups * GROUP1;
    if (done < out) {
        if (flip)
            horizontal1_c(a, row, line, flip, 0, out - done);
        else
            horizontal1_c(a, row, line, flip, done, out);
    }
}

__attribute__((target(AVX512))) static void
horizontal1_avx512(const axis *a, const int16_t *row, uint8_t *line, bool flip)
{
    switch (a->pitch / 2) {
    case 1: horizontal1_avx512_n(a, row, line, flip, 1); break;
    case 2: horizontal1_avx512_n(a, row, line, flip, 2); break;
    case 3: horizontal1_avx512_n(a, row, line, flip, 3); break;
    case 4: horizontal1_avx512_n(a, row, line, flip, 4); break;
    default: horizontal1_avx512_n(a, row, line, flip, a->pitch / 2); break;
    }
}
#endif
#else
static void horizontal1(const axis *a, const int16_t *row, uint8_t *line, bool flip)
{
    horizontal1_c(a, row, line, flip, 0, a->out);
}
#endif

#ifdef SL__RESIZE_AVX2
/* Byte k of the 48 that 16 RGB pixels fill, taken from channel c: its
 * pixel, or -1 (zero) where another channel's byte goes. */
#define PICK(c, j, k) ((16 * (j) + (k)) % 3 == (c) ? (16 * (j) + (k)) / 3 : -1)
#define PICKS(c, j)                                                                        \
    _mm_setr_epi8(PICK(c, j, 0), PICK(c, j, 1), PICK(c, j, 2), PICK(c, j, 3), PICK(c, j, 4),  \
                  PICK(c, j, 5), PICK(c, j, 6), PICK(c, j, 7), PICK(c, j, 8), PICK(c, j, 9),  \
                  PICK(c, j, 10), PICK(c, j, 11), PICK(c, j, 12), PICK(c, j, 13),           \
                  PICK(c, j, 14), PICK(c, j, 15))

/* 16 pixels a step in int16 (pmulhrsw: the integers of ycc_rgb_c), then
 * interleaved into RGB with pshufb. SSSE3: every CPU with AVX2 has it. */
__attribute__((target("ssse3"))) static void
ycc_rgb_ssse3(const uint8_t *yl, const uint8_t *cbl, const uint8_t *crl, uint8_t *rgb, int n)
{
    const __m128i zero = _mm_setzero_si128(), c128 = _mm_set1_epi16(128);
    const __m128i kcrr = _mm_set1_epi16(K_CR_R), kcbg = _mm_set1_epi16(K_CB_G);
    const __m128i kcrg = _mm_set1_epi16(K_CR_G), kcbb = _mm_set1_epi16(K_CB_B);
    const __m128i m[3][3] = {{PICKS(0, 0), PICKS(0, 1), PICKS(0, 2)},
                             {PICKS(1, 0), PICKS(1, 1), PICKS(1, 2)},
                             {PICKS(2, 0), PICKS(2, 1), PICKS(2, 2)}};
    int x = 0;
    for (; x + 16 <= n; x += 16) {
        __m128i y8 = _mm_loadu_si128((const __m128i *)(yl + x));
        __m128i b8 = _mm_loadu_si128((const __m128i *)(cbl + x));
        __m128i r8 = _mm_loadu_si128((const __m128i *)(crl + x));
        __m128i ch[3];
        for (int h = 0; h < 2; h++) {
            __m128i y = h ? _mm_unpackhi_epi8(y8, zero) : _mm_unpacklo_epi8(y8, zero);
            __m128i cb = _mm_sub_epi16(h ? _mm_unpackhi_epi8(b8, zero) : _mm_unpacklo_epi8(b8, zero), c128);
            __m128i cr = _mm_sub_epi16(h ? _mm_unpackhi_epi8(r8, zero) : _mm_unpacklo_epi8(r8, zero), c128);
            __m128i R = _mm_add_epi16(_mm_add_epi16(y, cr), _mm_mulhrs_epi16(cr, kcrr));
            __m128i G = _mm_sub_epi16(_mm_sub_epi16(y, _mm_mulhrs_epi16(cb, kcbg)),
                                      _mm_mulhrs_epi16(cr, kcrg));
            __m128i B = _mm_add_epi16(_mm_add_epi16(y, cb), _mm_mulhrs_epi16(cb, kcbb));
            if (h == 0) {
                ch[0] = R, ch[1] = G, ch[2] = B;
            } else {
                ch[0] = _mm_packus_epi16(ch[0], R);
                ch[1] = _mm_packus_epi16(ch[1], G);
                ch[2] = _mm_packus_epi16(ch[2], B);
            }
        }
        for (int j = 0; j < 3; j++) {
            __m128i v = _mm_or_si128(_mm_or_si128(_mm_shuffle_epi8(ch[0], m[0][j]),
                                                  _mm_shuffle_epi8(ch[1], m[1][j])),
                                     _mm_shuffle_epi8(ch[2], m[2][j]));
            _mm_storeu_si128((__m128i *)(rgb + 3 * x + 16 * j), v);
        }
    }
    ycc_rgb_c(yl, cbl, crl, rgb, x, n);
}
#endif

#ifdef SL__RESIZE_AVX2
/* The bytes of 64 RGB pixels, three vectors of 64: byte p is channel p % 3
 * of pixel p / 3. First R and G bytes from a two-table permute (G's
 * indices offset by 64), then B's put in over them under a mask. */
#define RG_AT(p) ((p) % 3 == 0 ? (p) / 3 : (p) % 3 == 1 ? 64 + (p) / 3 : 0)
#define B_AT(p) ((p) % 3 == 2 ? (p) / 3 : 0)
#define X4(m, p) m(p), m((p) + 1), m((p) + 2), m((p) + 3)
#define X16(m, p) X4(m, p), X4(m, (p) + 4), X4(m, (p) + 8), X4(m, (p) + 12)
#define X64(m, p) X16(m, p), X16(m, (p) + 16), X16(m, (p) + 32), X16(m, (p) + 48)
static const uint8_t rgb_rg_idx[192] = {X64(RG_AT, 0), X64(RG_AT, 64), X64(RG_AT, 128)};
static const uint8_t rgb_b_idx[192] = {X64(B_AT, 0), X64(B_AT, 64), X64(B_AT, 128)};
/* bit k of vector j: byte 64 j + k is a B byte, (64 j + k) % 3 == 2 */
static const uint64_t rgb_b_mask[3] = {0x4924924924924924u, 0x2492492492492492u,
                                       0x9249249249249249u};

#define AVX512_VBMI "avx512f,avx512bw,avx512vbmi"

static bool has_vbmi(void)
{
    static int v = -1;
    int r = __atomic_load_n(&v, __ATOMIC_RELAXED);
    if (r < 0) {
        r = __builtin_cpu_supports("avx512vbmi") && __builtin_cpu_supports("avx512bw");
        __atomic_store_n(&v, r, __ATOMIC_RELAXED);
    }
    return r;
}

/* YCbCr to RGB bytes at 64 pixels a step: the SSSE3 pass's integers
 * (pmulhrsw), widened, then interleaved by byte permutes (VBMI). Rows
 * under 64 pixels go to the SSSE3 pass. */
__attribute__((target(AVX512_VBMI))) static void
ycc_rgb_avx512(const uint8_t *yl, const uint8_t *cbl, const uint8_t *crl, uint8_t *rgb, int n)
{
    const __m512i zero = _mm512_setzero_si512(), c128 = _mm512_set1_epi16(128);
    const __m512i kcrr = _mm512_set1_epi16(K_CR_R), kcbg = _mm512_set1_epi16(K_CB_G);
    const __m512i kcrg = _mm512_set1_epi16(K_CR_G), kcbb = _mm512_set1_epi16(K_CB_B);
    if (n < 64) {
        ycc_rgb_ssse3(yl, cbl, crl, rgb, n);
        return;
    }
    for (int x = 0; x < n; x += 64) {
        if (x > n - 64)
            x = n - 64; /* the last step overlaps the one before: same bytes */
        __m512i y8 = _mm512_loadu_si512(yl + x), b8 = _mm512_loadu_si512(cbl + x),
                r8 = _mm512_loadu_si512(crl + x);
        __m512i ch[2][3];
        for (int h = 0; h < 2; h++) { /* (unpack and pack both work per 128 bits) */
            __m512i y = h ? _mm512_unpackhi_epi8(y8, zero) : _mm512_unpacklo_epi8(y8, zero);
            __m512i cb = _mm512_sub_epi16(
                h ? _mm512_unpackhi_epi8(b8, zero) : _mm512_unpacklo_epi8(b8, zero), c128);
            __m512i cr = _mm512_sub_epi16(
                h ? _mm512_unpackhi_epi8(r8, zero) : _mm512_unpacklo_epi8(r8, zero), c128);
            ch[h][0] = _mm512_add_epi16(_mm512_add_epi16(y, cr), _mm512_mulhrs_epi16(cr, kcrr));
            ch[h][1] = _mm512_sub_epi16(_mm512_sub_epi16(y, _mm512_mulhrs_epi16(cb, kcbg)),
                                        _mm512_mulhrs_epi16(cr, kcrg));
            ch[h][2] = _mm512_add_epi16(_mm512_add_epi16(y, cb), _mm512_mulhrs_epi16(cb, kcbb));
        }
        __m512i R = _mm512_packus_epi16(ch[0][0], ch[1][0]),
                G = _mm512_packus_epi16(ch[0][1], ch[1][1]),
                B = _mm512_packus_epi16(ch[0][2], ch[1][2]);
        for (int j = 0; j < 3; j++) {
            __m512i v = _mm512_permutex2var_epi8(R, _mm512_loadu_si512(rgb_rg_idx + 64 * j), G);
            v = _mm512_mask_permutexvar_epi8(v, rgb_b_mask[j],
                                             _mm512_loadu_si512(rgb_b_idx + 64 * j), B);
            _mm512_storeu_si512(rgb + 3 * x + 64 * j, v);
        }
    }
}
#endif

static void ycc_rgb(int level, const uint8_t *yl, const uint8_t *cbl, const uint8_t *crl,
                    uint8_t *rgb, int n)
{
#ifdef SL__RESIZE_AVX2
    if (level == 2 && has_vbmi()) {
        ycc_rgb_avx512(yl, cbl, crl, rgb, n);
        return;
    }
    if (level >= 1) {
        ycc_rgb_ssse3(yl, cbl, crl, rgb, n);
        return;
    }
#endif
    (void)level;
    ycc_rgb_c(yl, cbl, crl, rgb, 0, n);
}

static void vertical_at(int level, const uint8_t *src, size_t stride, const int16_t *w,
                        int taps, int16_t *dst, int n)
{
#ifdef SL__RESIZE_AVX2
    if (level == 2) {
        vertical_avx512(src, stride, w, taps, dst, n);
        return;
    }
    if (level == 1) {
        vertical_avx2(src, stride, w, taps, dst, n);
        return;
    }
#endif
    (void)level;
    vertical(src, stride, w, taps, dst, n);
}

static bool plane_ok(const sl__plane *p)
{
    return p->data && p->width > 0 && p->height > 0 && isfinite(p->win.x) &&
           isfinite(p->win.y) && isfinite(p->win.w) && isfinite(p->win.h);
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
    int rc = axis_build(&r->ax, py->win.x, py->win.w, py->width, out->width);
    if (!rc)
        rc = axis_build(&r->ay, py->win.y, py->win.h, py->height, out->height);
    if (!rc)
        rc = axis_build(&r->cx, pc->win.x, pc->win.w, pc->width, out->width);
    if (!rc)
        rc = axis_build(&r->cy, pc->win.y, pc->win.h, pc->height, out->height);
#ifdef SL__RESIZE_AVX2
    int level = simd_level();
    if (!rc && level == 2 && r->ax.g1_state == 0)
        rc = groups1_build(&r->ax);
    if (!rc && level == 2 && r->cx.g1_state == 0)
        rc = groups1_build(&r->cx);
#else
    int level = 0;
#endif
    /* the padded weights of the SSE2 pass, where the AVX-512 one cannot run */
    if (!rc && !(level == 2 && r->ax.g1_state == 1))
        rc = w8_build(&r->ax);
    if (!rc && !(level == 2 && r->cx.g1_state == 1))
        rc = w8_build(&r->cx);
    if (rc)
        return rc;
    const axis *ax = &r->ax, *ay = &r->ay, *cx = &r->cx, *cy = &r->cy;
    int ny = ax->hi - ax->lo, nc = cx->hi - cx->lo, W = out->width;
    size_t rows = (size_t)ny + 2 * (size_t)nc + 3 * ROW_PAD;
    if (reserve((void **)&r->row, &r->row_cap, rows * sizeof *r->row) ||
        reserve((void **)&r->planes, &r->planes_cap, 3 * (size_t)W) ||
        reserve((void **)&r->line, &r->line_cap, (size_t)W * 3))
        return SL_ENOMEM;
    int16_t *row[3] = {r->row, r->row + ny + ROW_PAD, r->row + ny + nc + 2 * ROW_PAD};
    uint8_t *pl[3] = {r->planes, r->planes + W, r->planes + 2 * W};
    for (int c = 0; c < 3; c++)
        memset(row[c] + (c ? nc : ny), 0, ROW_PAD * sizeof(int16_t));
    if (out->dtype == SL_FLOAT32)
        build_lut(r, out);
    bool direct = out->dtype == SL_UINT8 && out->layout != SL_LAYOUT_CHW;
    for (int y = 0; y < out->height; y++) {
        for (int c = 0; c < 3; c++) {
            const sl__plane *p = &src->plane[c];
            const axis *hx = c ? cx : ax, *vy = c ? cy : ay;
            const uint8_t *s = p->data + (size_t)vy->start[y] * p->stride + (size_t)hx->lo;
            vertical_at(level, s, p->stride, vy->w + (size_t)y * vy->pitch, vy->taps, row[c],
                        c ? nc : ny);
#ifdef SL__RESIZE_AVX2
            if (level == 2 && hx->g1_state == 1)
                horizontal1_avx512(hx, row[c], pl[c], out->flip);
            else
#endif
                horizontal1(hx, row[c], pl[c], out->flip);
        }
        uint8_t *line = direct ? (uint8_t *)out->data + (size_t)y * W * 3 : r->line;
        ycc_rgb(level, pl[0], pl[1], pl[2], line, W);
        if (!direct)
            store(r, out, y, line);
    }
    return 0;
}

bool sl__resize_ycc_pays(void)
{
#ifdef SL__RESIZE_AVX2
    return simd_level() == 2;
#else
    return false;
#endif
}

int sl__resize_ycc_rgb_agree(int level)
{
    if (sl__resize_simd(level) < 0)
        return -1;
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
        ycc_rgb_c(in, in + N, in + 2 * N, want, 0, n);
        got[3 * n] = 0x5a;
        ycc_rgb(level, in, in + N, in + 2 * N, got, n);
        if (memcmp(want, got, 3 * (size_t)n) || got[3 * n] != 0x5a)
            rc = 0;
    }
    sl__free(in, 3 * N);
    sl__free(want, 3 * N);
    sl__free(got, 3 * N + 1);
    return rc;
}
