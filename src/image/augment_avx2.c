/*
 * AVX2 kernels, for CPUs that have it (cpu.c checks): the portable colour
 * loops and the blur's multiply-adds compiled for 256-bit vectors, and
 * the bilinear warp with gathers. Byte tables stay portable.
 */
#include "augment_kernels.h"

#ifdef SL__IMAGE_HAVE_AVX
#include <immintrin.h>
#include <string.h>

__attribute__((target("avx2"))) static int planes(int16_t A, int16_t O, const int16_t K[4],
                                                  uint8_t *y, uint8_t *cb, uint8_t *cr, int n)
{
    return sl__aug_planes_body(A, O, K, y, cb, cr, n);
}

__attribute__((target("avx2"))) static void gain(uint8_t *p, size_t n, int16_t A, int16_t O)
{
    sl__aug_gain_body(p, n, A, O);
}

__attribute__((target("avx2"))) static void axpy(float *restrict acc, const float *restrict p,
                                                 float w, size_t n)
{
    sl__aug_axpy_body(acc, p, w, n);
}

/* The bilinear warp 8 pixels a step: coordinates as sl__aug_warp's (the
 * same float operations), the four neighbours of each gathered as 32-bit
 * words (src needs 4 readable bytes past its end), the integers of
 * sl__aug_warp_pixel per channel. Steps with a pixel outside or at the
 * border go to sl__aug_warp_pixel. */
__attribute__((target("avx2"))) static void
warp_bilinear(const uint8_t *src, uint8_t *dst, int w, int h, const float m[6], bool masked)
{
    size_t row = 3 * (size_t)w;
    float cx = 0.5f * (float)w, cy = 0.5f * (float)h;
    const __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7), one = _mm256_set1_epi32(1);
    const __m256i k2048 = _mm256_set1_epi32(2048), bytes = _mm256_set1_epi32(255);
    const __m256i wlim = _mm256_set1_epi32(w - 1), hlim = _mm256_set1_epi32(h - 1);
    /* per 128-bit lane: pixels' R, G, B bytes together, the 4 spare last */
    const __m256i pack = _mm256_setr_epi8(0, 1, 2, 4, 5, 6, 8, 9, 10, 12, 13, 14, -1, -1, -1, -1,
                                          0, 1, 2, 4, 5, 6, 8, 9, 10, 12, 13, 14, -1, -1, -1, -1);
    for (int y = 0; y < h; y++) {
        float yc = (float)y + 0.5f - cy;
        float bx = m[1] * yc + m[2] + cx - 0.5f, by = m[4] * yc + m[5] + cy - 0.5f;
        uint8_t *o = dst + y * row;
        int x = 0;
        for (; x + 8 <= w; x += 8) {
            __m256 xc = _mm256_sub_ps(
                _mm256_add_ps(_mm256_cvtepi32_ps(_mm256_add_epi32(_mm256_set1_epi32(x), lane)),
                              _mm256_set1_ps(0.5f)),
                _mm256_set1_ps(cx));
            __m256 sx = _mm256_add_ps(_mm256_mul_ps(_mm256_set1_ps(m[0]), xc), _mm256_set1_ps(bx));
            __m256 sy = _mm256_add_ps(_mm256_mul_ps(_mm256_set1_ps(m[3]), xc), _mm256_set1_ps(by));
            /* floor for sx > -1; NaN and far values fail the range test */
            __m256i x0 = _mm256_sub_epi32(_mm256_cvttps_epi32(_mm256_add_ps(sx, _mm256_set1_ps(1))), one);
            __m256i y0 = _mm256_sub_epi32(_mm256_cvttps_epi32(_mm256_add_ps(sy, _mm256_set1_ps(1))), one);
            __m256i out = _mm256_or_si256(
                _mm256_or_si256(_mm256_cmpgt_epi32(_mm256_setzero_si256(), x0),
                                _mm256_cmpgt_epi32(_mm256_add_epi32(x0, one), wlim)),
                _mm256_or_si256(_mm256_cmpgt_epi32(_mm256_setzero_si256(), y0),
                                _mm256_cmpgt_epi32(_mm256_add_epi32(y0, one), hlim)));
            __m256 inrange = _mm256_and_ps(
                _mm256_and_ps(_mm256_cmp_ps(sx, _mm256_set1_ps(-1), _CMP_GT_OQ),
                              _mm256_cmp_ps(sx, _mm256_set1_ps((float)w), _CMP_LT_OQ)),
                _mm256_and_ps(_mm256_cmp_ps(sy, _mm256_set1_ps(-1), _CMP_GT_OQ),
                              _mm256_cmp_ps(sy, _mm256_set1_ps((float)h), _CMP_LT_OQ)));
            if (!_mm256_testz_si256(out, out) || _mm256_movemask_ps(inrange) != 0xff) {
                float fx[8], fy[8];
                _mm256_storeu_ps(fx, sx);
                _mm256_storeu_ps(fy, sy);
                for (int i = 0; i < 8; i++)
                    sl__aug_warp_pixel(src, o + 3 * (size_t)(x + i), w, h, row, fx[i], fy[i], true,
                               masked);
                continue;
            }
            __m256 ax = _mm256_sub_ps(sx, _mm256_cvtepi32_ps(x0));
            __m256 ay = _mm256_sub_ps(sy, _mm256_cvtepi32_ps(y0));
            __m256i wx = _mm256_cvttps_epi32(_mm256_add_ps(_mm256_mul_ps(ax, _mm256_set1_ps(2048)),
                                                           _mm256_set1_ps(0.5f)));
            __m256i wy = _mm256_cvttps_epi32(_mm256_add_ps(_mm256_mul_ps(ay, _mm256_set1_ps(2048)),
                                                           _mm256_set1_ps(0.5f)));
            __m256i off = _mm256_add_epi32(_mm256_mullo_epi32(y0, _mm256_set1_epi32((int)row)),
                                           _mm256_mullo_epi32(x0, _mm256_set1_epi32(3)));
            const int *base = (const int *)(const void *)src;
            __m256i p0 = _mm256_i32gather_epi32(base, off, 1);
            __m256i p1 = _mm256_i32gather_epi32(base, _mm256_add_epi32(off, _mm256_set1_epi32(3)), 1);
            __m256i q0 = _mm256_i32gather_epi32(base, _mm256_add_epi32(off, _mm256_set1_epi32((int)row)), 1);
            __m256i q1 = _mm256_i32gather_epi32(base, _mm256_add_epi32(off, _mm256_set1_epi32((int)row + 3)), 1);
            __m256i rgb = _mm256_setzero_si256();
            for (int c = 0; c < 3; c++) {
                __m256i a = _mm256_and_si256(_mm256_srli_epi32(p0, 8 * c), bytes);
                __m256i b = _mm256_and_si256(_mm256_srli_epi32(p1, 8 * c), bytes);
                __m256i e = _mm256_and_si256(_mm256_srli_epi32(q0, 8 * c), bytes);
                __m256i f = _mm256_and_si256(_mm256_srli_epi32(q1, 8 * c), bytes);
                __m256i top = _mm256_add_epi32(_mm256_mullo_epi32(a, k2048),
                                               _mm256_mullo_epi32(_mm256_sub_epi32(b, a), wx));
                __m256i bot = _mm256_add_epi32(_mm256_mullo_epi32(e, k2048),
                                               _mm256_mullo_epi32(_mm256_sub_epi32(f, e), wx));
                __m256i v = _mm256_add_epi32(_mm256_slli_epi32(top, 11),
                                             _mm256_mullo_epi32(_mm256_sub_epi32(bot, top), wy));
                v = _mm256_srai_epi32(_mm256_add_epi32(v, _mm256_set1_epi32(1 << 21)), 22);
                rgb = _mm256_or_si256(rgb, _mm256_slli_epi32(v, 8 * c));
            }
            __m256i packed = _mm256_shuffle_epi8(rgb, pack);
            uint8_t *at = o + 3 * (size_t)x;
            if (x + 8 + 2 <= w) { /* the 4 spare bytes land on pixels still to come */
                _mm_storeu_si128((__m128i *)(void *)at, _mm256_castsi256_si128(packed));
                _mm_storeu_si128((__m128i *)(void *)(at + 12), _mm256_extracti128_si256(packed, 1));
            } else {
                uint8_t tmp[32];
                _mm256_storeu_si256((__m256i *)(void *)tmp, packed);
                memcpy(at, tmp, 12);
                memcpy(at + 12, tmp + 16, 12);
            }
        }
        for (; x < w; x++) {
            float xc = (float)x + 0.5f - cx;
            sl__aug_warp_pixel(src, o + 3 * (size_t)x, w, h, row, m[0] * xc + bx, m[3] * xc + by, true,
                       masked);
        }
    }
}

SL__AUGMENT_TIER(avx2, sl__aug_lut_c);
#endif
