/*
 * SSE2 kernels: x86-64's baseline, so built without target attributes and
 * used with no check of the CPU. They multiply-add pairs of taps
 * (pmaddwd), which gcc does not find by itself in the portable loops.
 * YCbCr to RGB stays portable here: SSSE3's pmulhrsw is not baseline.
 */
#include "resize_kernels.h"

#ifdef SL__IMAGE_HAVE_SSE2
#include <emmintrin.h>

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
        sl__vertical_c(src, stride, w, taps, dst, n);
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
            __m128i wv = _mm_set1_epi32(sl__tap_pair(w, k, taps));
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
horizontal_n(const sl__axis *ax, const int16_t *row, uint8_t *line, bool flip, int pitch,
             int o0, int o1)
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

void sl__horizontal_sse2(const sl__axis *ax, const int16_t *row, uint8_t *line, bool flip,
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

static void horizontal(const sl__axis *ax, const int16_t *row, uint8_t *line, bool flip)
{
    sl__horizontal_sse2(ax, row, line, flip, 0, ax->out);
}

static sl__hpass horizontal_for(sl__axis *a)
{
    (void)a;
    return horizontal;
}

/* ---- one plane ---- */

static int w8_build(sl__axis *a)
{
    if (a->w8_valid)
        return 0;
    a->p8 = (a->taps + 7) & ~7;
    if (sl__resize_reserve((void **)&a->w8, &a->w8_cap, (size_t)a->out * a->p8 * sizeof *a->w8))
        return SL_ENOMEM;
    for (int i = 0; i < a->out; i++) {
        int16_t *q = a->w8 + (size_t)i * a->p8;
        memset(q, 0, (size_t)a->p8 * sizeof *q);
        memcpy(q, a->w + (size_t)i * a->pitch, (size_t)a->taps * sizeof *q);
    }
    a->w8_valid = true;
    return 0;
}

/* Four output samples a step: each one's taps times its weights padded to
 * whole vectors (pmaddwd), the four partial sums transposed and added. */
static void horizontal1(const sl__axis *a, const int16_t *row, uint8_t *line, bool flip)
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
    sl__horizontal1_c(a, row, line, flip, o, out);
}

sl__hpass sl__horizontal1_sse2_for(sl__axis *a)
{
    return w8_build(a) ? NULL : horizontal1;
}

const sl__resize_kernels sl__resize_sse2 = {
    .name = "sse2",
    .level = SL__IMAGE_SSE2,
    .vertical = vertical,
    .horizontal_for = horizontal_for,
    .horizontal1_for = sl__horizontal1_sse2_for,
    .ycc_rgb = sl__ycc_rgb_c,
    .ycc_rgb_colour = sl__ycc_rgb_colour_c,
};
#endif
