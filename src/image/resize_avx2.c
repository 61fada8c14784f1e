/*
 * AVX2 kernels, for CPUs that have it (resize.c checks): the arithmetic
 * of the SSE2 ones, twice as wide. One plane's horizontal pass is SSE2's;
 * the colour pass is SSSE3's.
 */
#include "resize_kernels.h"

#ifdef SL__IMAGE_HAVE_AVX
#include <immintrin.h>

/* 16 bytes of two rows widened in order (vpmovzxbw), interleaved and
 * pmaddwd'ed per pair of taps; the in-lane pack puts the 16 results back
 * in order. */
__attribute__((target("avx2"))) void
sl__vertical_avx2(const uint8_t *src, size_t stride, const int16_t *w, int taps, int16_t *dst,
                  int n)
{
    if (n < 16) {
        sl__vertical_c(src, stride, w, taps, dst, n);
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
            __m256i wv = _mm256_set1_epi32(sl__tap_pair(w, k, taps));
            lo = _mm256_add_epi32(lo, _mm256_madd_epi16(_mm256_unpacklo_epi16(r0, r1), wv));
            hi = _mm256_add_epi32(hi, _mm256_madd_epi16(_mm256_unpackhi_epi16(r0, r1), wv));
        }
        lo = _mm256_srai_epi32(lo, VSHIFT);
        hi = _mm256_srai_epi32(hi, VSHIFT);
        _mm256_storeu_si256((__m256i *)(dst + x), _mm256_packs_epi32(lo, hi));
    }
}

/* RGB: two output pixels at once, one per 128-bit lane, as SSE2 does one. */
__attribute__((target("avx2"))) static inline __attribute__((always_inline)) void
horizontal_n(const sl__axis *ax, const int16_t *row, uint8_t *line, bool flip, int pitch)
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
        sl__horizontal_sse2(ax, row, line, flip, o, out);
}

__attribute__((target("avx2"))) void
sl__horizontal_avx2(const sl__axis *ax, const int16_t *row, uint8_t *line, bool flip)
{
    switch (ax->pitch) {
    case 2: horizontal_n(ax, row, line, flip, 2); break;
    case 4: horizontal_n(ax, row, line, flip, 4); break;
    case 6: horizontal_n(ax, row, line, flip, 6); break;
    case 8: horizontal_n(ax, row, line, flip, 8); break;
    default: horizontal_n(ax, row, line, flip, ax->pitch); break;
    }
}

static sl__hpass horizontal_for(sl__axis *a)
{
    (void)a;
    return sl__horizontal_avx2;
}

const sl__resize_kernels sl__resize_avx2 = {
    .name = "avx2",
    .level = SL__IMAGE_AVX2,
    .vertical = sl__vertical_avx2,
    .horizontal_for = horizontal_for,
    .horizontal1_for = sl__horizontal1_sse2_for,
    .ycc_rgb = sl__ycc_rgb_ssse3,
    .ycc_rgb_colour = sl__ycc_rgb_colour_c,
};
#endif
