/*
 * YCbCr to RGB with SSSE3 (pmulhrsw, pshufb): the colour pass of the AVX2
 * tier, of the AVX-512 tier on CPUs without VBMI, and of AVX-512's rows
 * under 64 pixels. Every CPU with AVX2 has SSSE3; there is no SSSE3 tier.
 */
#include "resize_kernels.h"

#ifdef SL__IMAGE_HAVE_AVX
#include <immintrin.h>

/* Byte k of the 48 that 16 RGB pixels fill, taken from channel c: its
 * pixel, or -1 (zero) where another channel's byte goes. */
#define PICK(c, j, k) ((16 * (j) + (k)) % 3 == (c) ? (16 * (j) + (k)) / 3 : -1)
#define PICKS(c, j)                                                                        \
    _mm_setr_epi8(PICK(c, j, 0), PICK(c, j, 1), PICK(c, j, 2), PICK(c, j, 3), PICK(c, j, 4),  \
                  PICK(c, j, 5), PICK(c, j, 6), PICK(c, j, 7), PICK(c, j, 8), PICK(c, j, 9),  \
                  PICK(c, j, 10), PICK(c, j, 11), PICK(c, j, 12), PICK(c, j, 13),           \
                  PICK(c, j, 14), PICK(c, j, 15))

/* 16 pixels a step in int16 (pmulhrsw: the integers of sl__ycc_rgb_c),
 * then interleaved into RGB with pshufb. */
__attribute__((target("ssse3"))) void
sl__ycc_rgb_ssse3(const uint8_t *yl, const uint8_t *cbl, const uint8_t *crl, uint8_t *rgb, int n)
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
    sl__ycc_rgb_c(yl + x, cbl + x, crl + x, rgb + 3 * x, n - x);
}
#endif
