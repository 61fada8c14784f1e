/*
 * AVX-512 kernels (F and BW; the byte tables also VBMI), for CPUs that
 * have them (cpu.c checks; augment.c puts the portable byte tables in
 * the tier's place without VBMI): the portable colour loops and the
 * blur's multiply-adds compiled for 512-bit vectors, the bilinear warp
 * with gathers and mask registers, the byte tables with vpermt2b.
 */
#include "augment_kernels.h"

#ifdef SL__IMAGE_HAVE_AVX
#include <immintrin.h>
#include <string.h>

#define AVX512 "avx512f,avx512bw"

__attribute__((target(AVX512))) static int planes(int16_t A, int16_t O, const int16_t K[4],
                                                  uint8_t *y, uint8_t *cb, uint8_t *cr, int n)
{
    return sl__aug_planes_body(A, O, K, y, cb, cr, n);
}

__attribute__((target(AVX512))) static void gain(uint8_t *p, size_t n, int16_t A, int16_t O)
{
    sl__aug_gain_body(p, n, A, O);
}

__attribute__((target(AVX512))) static void axpy(float *restrict acc, const float *restrict p,
                                                 float w, size_t n)
{
    sl__aug_axpy_body(acc, p, w, n);
}

/* The bilinear warp 16 pixels a step: AVX2's (augment_avx2.c) with
 * gathers of 16 words and mask registers for the tests. */
__attribute__((target(AVX512))) static void
warp_bilinear(const uint8_t *src, uint8_t *dst, int w, int h, const float m[6], bool masked)
{
    size_t row = 3 * (size_t)w;
    float cx = 0.5f * (float)w, cy = 0.5f * (float)h;
    const __m512i lane = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
    const __m512i one = _mm512_set1_epi32(1), k2048 = _mm512_set1_epi32(2048);
    const __m512i bytes = _mm512_set1_epi32(255), zero = _mm512_setzero_si512();
    const __m512i wlim = _mm512_set1_epi32(w - 1), hlim = _mm512_set1_epi32(h - 1);
    const __m512i pack = _mm512_broadcast_i32x4(
        _mm_setr_epi8(0, 1, 2, 4, 5, 6, 8, 9, 10, 12, 13, 14, -1, -1, -1, -1));
    for (int y = 0; y < h; y++) {
        float yc = (float)y + 0.5f - cy;
        float bx = m[1] * yc + m[2] + cx - 0.5f, by = m[4] * yc + m[5] + cy - 0.5f;
        uint8_t *o = dst + y * row;
        int x = 0;
        for (; x + 16 <= w; x += 16) {
            __m512 xc = _mm512_sub_ps(
                _mm512_add_ps(_mm512_cvtepi32_ps(_mm512_add_epi32(_mm512_set1_epi32(x), lane)),
                              _mm512_set1_ps(0.5f)),
                _mm512_set1_ps(cx));
            __m512 sx = _mm512_add_ps(_mm512_mul_ps(_mm512_set1_ps(m[0]), xc), _mm512_set1_ps(bx));
            __m512 sy = _mm512_add_ps(_mm512_mul_ps(_mm512_set1_ps(m[3]), xc), _mm512_set1_ps(by));
            __m512i x0 = _mm512_sub_epi32(_mm512_cvttps_epi32(_mm512_add_ps(sx, _mm512_set1_ps(1))), one);
            __m512i y0 = _mm512_sub_epi32(_mm512_cvttps_epi32(_mm512_add_ps(sy, _mm512_set1_ps(1))), one);
            __mmask16 in = _mm512_cmp_epi32_mask(x0, zero, _MM_CMPINT_NLT) &
                           _mm512_cmp_epi32_mask(_mm512_add_epi32(x0, one), wlim, _MM_CMPINT_LE) &
                           _mm512_cmp_epi32_mask(y0, zero, _MM_CMPINT_NLT) &
                           _mm512_cmp_epi32_mask(_mm512_add_epi32(y0, one), hlim, _MM_CMPINT_LE) &
                           _mm512_cmp_ps_mask(sx, _mm512_set1_ps(-1), _CMP_GT_OQ) &
                           _mm512_cmp_ps_mask(sx, _mm512_set1_ps((float)w), _CMP_LT_OQ) &
                           _mm512_cmp_ps_mask(sy, _mm512_set1_ps(-1), _CMP_GT_OQ) &
                           _mm512_cmp_ps_mask(sy, _mm512_set1_ps((float)h), _CMP_LT_OQ);
            if (in != 0xffff) {
                float fx[16], fy[16];
                _mm512_storeu_ps(fx, sx);
                _mm512_storeu_ps(fy, sy);
                for (int i = 0; i < 16; i++)
                    sl__aug_warp_pixel(src, o + 3 * (size_t)(x + i), w, h, row, fx[i], fy[i], true,
                               masked);
                continue;
            }
            __m512 ax = _mm512_sub_ps(sx, _mm512_cvtepi32_ps(x0));
            __m512 ay = _mm512_sub_ps(sy, _mm512_cvtepi32_ps(y0));
            __m512i wx = _mm512_cvttps_epi32(_mm512_add_ps(_mm512_mul_ps(ax, _mm512_set1_ps(2048)),
                                                           _mm512_set1_ps(0.5f)));
            __m512i wy = _mm512_cvttps_epi32(_mm512_add_ps(_mm512_mul_ps(ay, _mm512_set1_ps(2048)),
                                                           _mm512_set1_ps(0.5f)));
            __m512i off = _mm512_add_epi32(_mm512_mullo_epi32(y0, _mm512_set1_epi32((int)row)),
                                           _mm512_mullo_epi32(x0, _mm512_set1_epi32(3)));
            __m512i p0 = _mm512_i32gather_epi32(off, src, 1);
            __m512i p1 = _mm512_i32gather_epi32(_mm512_add_epi32(off, _mm512_set1_epi32(3)), src, 1);
            __m512i q0 = _mm512_i32gather_epi32(_mm512_add_epi32(off, _mm512_set1_epi32((int)row)), src, 1);
            __m512i q1 = _mm512_i32gather_epi32(_mm512_add_epi32(off, _mm512_set1_epi32((int)row + 3)), src, 1);
            __m512i rgb = zero;
            for (int c = 0; c < 3; c++) {
                __m512i a = _mm512_and_si512(_mm512_srli_epi32(p0, 8 * c), bytes);
                __m512i b = _mm512_and_si512(_mm512_srli_epi32(p1, 8 * c), bytes);
                __m512i e = _mm512_and_si512(_mm512_srli_epi32(q0, 8 * c), bytes);
                __m512i f = _mm512_and_si512(_mm512_srli_epi32(q1, 8 * c), bytes);
                __m512i top = _mm512_add_epi32(_mm512_mullo_epi32(a, k2048),
                                               _mm512_mullo_epi32(_mm512_sub_epi32(b, a), wx));
                __m512i bot = _mm512_add_epi32(_mm512_mullo_epi32(e, k2048),
                                               _mm512_mullo_epi32(_mm512_sub_epi32(f, e), wx));
                __m512i v = _mm512_add_epi32(_mm512_slli_epi32(top, 11),
                                             _mm512_mullo_epi32(_mm512_sub_epi32(bot, top), wy));
                v = _mm512_srai_epi32(_mm512_add_epi32(v, _mm512_set1_epi32(1 << 21)), 22);
                rgb = _mm512_or_si512(rgb, _mm512_slli_epi32(v, 8 * c));
            }
            __m512i packed = _mm512_shuffle_epi8(rgb, pack);
            uint8_t *at = o + 3 * (size_t)x;
            if (x + 16 + 2 <= w) { /* the 4 spare bytes land on pixels still to come */
                _mm_storeu_si128((__m128i *)(void *)at, _mm512_castsi512_si128(packed));
                _mm_storeu_si128((__m128i *)(void *)(at + 12), _mm512_extracti32x4_epi32(packed, 1));
                _mm_storeu_si128((__m128i *)(void *)(at + 24), _mm512_extracti32x4_epi32(packed, 2));
                _mm_storeu_si128((__m128i *)(void *)(at + 36), _mm512_extracti32x4_epi32(packed, 3));
            } else {
                uint8_t tmp[64];
                _mm512_storeu_si512(tmp, packed);
                for (int k = 0; k < 4; k++)
                    memcpy(at + 12 * k, tmp + 16 * k, 12);
            }
        }
        for (; x < w; x++) {
            float xc = (float)x + 0.5f - cx;
            sl__aug_warp_pixel(src, o + 3 * (size_t)x, w, h, row, m[0] * xc + bx, m[3] * xc + by, true,
                       masked);
        }
    }
}

/* Tables of 256 bytes applied 64 bytes a step with VBMI's two-table byte
 * permutes (each covers 128 entries; the index's top bit picks the pair):
 * one table for all channels where they are the same, else one per
 * channel and blends by each byte's channel. */
__attribute__((target("avx512f,avx512bw,avx512vbmi"))) static void
lut_vbmi(const uint8_t lut[3][256], uint8_t *p, size_t from, size_t bytes)
{
    (void)from;
    bool same = !memcmp(lut[0], lut[1], 256) && !memcmp(lut[0], lut[2], 256);
    __m512i t[3][4];
    for (int c = 0; c < (same ? 1 : 3); c++)
        for (int k = 0; k < 4; k++)
            t[c][k] = _mm512_loadu_si512(lut[c] + 64 * k);
    /* byte k of step s is channel (s + k) % 3 (64 = 1 mod 3) */
    static const uint64_t ch1[3] = {0x2492492492492492u, 0x9249249249249249u,
                                    0x4924924924924924u};
    static const uint64_t ch2[3] = {0x4924924924924924u, 0x2492492492492492u,
                                    0x9249249249249249u};
    size_t i = 0;
    for (size_t s = 0; i + 64 <= bytes; i += 64, s++) {
        __m512i v = _mm512_loadu_si512(p + i);
        __mmask64 top = _mm512_movepi8_mask(v);
        __m512i r[3];
        for (int c = 0; c < (same ? 1 : 3); c++)
            r[c] = _mm512_mask_blend_epi8(top, _mm512_permutex2var_epi8(t[c][0], v, t[c][1]),
                                          _mm512_permutex2var_epi8(t[c][2], v, t[c][3]));
        if (!same) {
            r[0] = _mm512_mask_blend_epi8(ch1[s % 3], r[0], r[1]);
            r[0] = _mm512_mask_blend_epi8(ch2[s % 3], r[0], r[2]);
        }
        _mm512_storeu_si512(p + i, r[0]);
    }
    sl__aug_lut_bytes(lut, p, i, bytes);
}

SL__AUGMENT_TIER(avx512, lut_vbmi);
#endif
