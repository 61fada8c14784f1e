/*
 * AVX-512 kernels (F, BW, VL, VNNI; the colour pass also VBMI), for CPUs
 * that have them (resize.c checks): vpdpwssd multiplies and adds pairs of
 * taps, vpermt2w gathers the taps of several output pixels at once. Rows
 * too short for them, and geometries whose filters reach too far, go to
 * the AVX2 and SSE2 kernels.
 */
#include "resize_kernels.h"

#ifdef SL__IMAGE_HAVE_AVX
#include <immintrin.h>

#define AVX512 "avx512f,avx512bw,avx512vl,avx512vnni"
#define AVX512_VBMI "avx512f,avx512bw,avx512vbmi"

/* The AVX2 pass at 32 bytes a step, with vpdpwssd doing the multiply and
 * the add. */
__attribute__((target(AVX512))) static void
vertical(const uint8_t *src, size_t stride, const int16_t *w, int taps, int16_t *dst, int n)
{
    if (n < 32) {
        sl__vertical_avx2(src, stride, w, taps, dst, n);
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
            __m512i wv = _mm512_set1_epi32(sl__tap_pair(w, k, taps));
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
            __m512i wv = _mm512_set1_epi32(sl__tap_pair(w, k, taps));
            lo = _mm512_dpwssd_epi32(lo, _mm512_unpacklo_epi16(r0, r1), wv);
            hi = _mm512_dpwssd_epi32(hi, _mm512_unpackhi_epi16(r0, r1), wv);
        }
        lo = _mm512_srai_epi32(lo, VSHIFT);
        hi = _mm512_srai_epi32(hi, VSHIFT);
        _mm512_storeu_si512(dst + x, _mm512_packs_epi32(lo, hi));
    }
}

/* RGB: four output pixels per step, one per 128-bit lane. The
 * group's source pixels lie within 21 pixels (63 words) of its first one,
 * so two loads of 32 words hold them all; per pair of taps one vpermt2w
 * gathers R_k R_k+1 G_k G_k+1 B_k B_k+1 - - in every lane and one vpdpwssd
 * adds them times (w_k, w_k+1) to the lane's R, G, B sums. The table of
 * word indices and weights is built once per geometry. */
#define GROUP 4
#define GROUP_SPAN 21 /* pixels: 3 * 21 = 63 words */

static int groups_build(sl__axis *a)
{
    int groups = a->out / GROUP, pairs = a->pitch / 2;
    for (int g = 0; g < groups; g++)
        if (a->start[g * GROUP + GROUP - 1] - a->start[g * GROUP] + a->pitch > GROUP_SPAN)
        {
            a->g_state = -1; /* AVX2's pass does this geometry */
            return 0;
        }
    if (sl__resize_reserve((void **)&a->g_base, &a->g_base_cap,
                           (size_t)(groups + 1) * sizeof(int32_t)) ||
        sl__resize_reserve((void **)&a->g_tab, &a->g_tab_cap,
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
horizontal_n(const sl__axis *ax, const int16_t *row, uint8_t *line, bool flip, int pairs)
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
            sl__horizontal_sse2(ax, row, line, flip, 0, out - lo);
        else
            sl__horizontal_sse2(ax, row, line, flip, lo, out);
    }
}

__attribute__((target(AVX512))) static void
horizontal(const sl__axis *ax, const int16_t *row, uint8_t *line, bool flip)
{
    switch (ax->pitch / 2) {
    case 1: horizontal_n(ax, row, line, flip, 1); break;
    case 2: horizontal_n(ax, row, line, flip, 2); break;
    case 3: horizontal_n(ax, row, line, flip, 3); break;
    case 4: horizontal_n(ax, row, line, flip, 4); break;
    default: horizontal_n(ax, row, line, flip, ax->pitch / 2); break;
    }
}

static sl__hpass horizontal_for(sl__axis *a)
{
    if (a->g_state == 0 && groups_build(a))
        return NULL;
    return a->g_state == 1 ? horizontal : sl__horizontal_avx2;
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

/* sl__axis_sample for samples i .. i + 7 side by side, with the same double
 * operations in the same order, so the same weights. (The _round_ forms,
 * at the default rounding, are plain IEEE operations that gcc will not
 * fuse into a multiply-add, which would round once instead of twice.)
 * False, with nothing written, when a sample's centre lies outside the
 * pixels or its taps sum to 0: sl__axis_sample does those. taps <= 8. */
__attribute__((target(AVX512))) static bool weights8(sl__axis *a, int i, double scale,
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

/* One plane: 16 samples per step, one per dword lane. Their
 * source pixels lie within 64 words of the group's first one (two
 * registers); per pair of taps one vpermt2w gathers each lane's two pixels
 * and one vpdpwssd adds them times its two weights. */
#define GROUP1 16
#define GROUP1_SPAN 64

static int groups1_build(sl__axis *a)
{
    int groups = a->out / GROUP1, pairs = a->pitch / 2;
    for (int g = 0; g < groups; g++)
        if (a->start[g * GROUP1 + GROUP1 - 1] - a->start[g * GROUP1] + a->pitch > GROUP1_SPAN) {
            a->g1_state = -1; /* SSE2's pass does this geometry */
            return 0;
        }
    if (sl__resize_reserve((void **)&a->g1_base, &a->g1_base_cap,
                           (size_t)(groups + 1) * sizeof(int32_t)) ||
        sl__resize_reserve((void **)&a->g1_tab, &a->g1_tab_cap,
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
horizontal1_n(const sl__axis *a, const int16_t *row, uint8_t *line, bool flip, int pairs)
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
            sl__horizontal1_c(a, row, line, flip, 0, out - done);
        else
            sl__horizontal1_c(a, row, line, flip, done, out);
    }
}

__attribute__((target(AVX512))) static void
horizontal1(const sl__axis *a, const int16_t *row, uint8_t *line, bool flip)
{
    switch (a->pitch / 2) {
    case 1: horizontal1_n(a, row, line, flip, 1); break;
    case 2: horizontal1_n(a, row, line, flip, 2); break;
    case 3: horizontal1_n(a, row, line, flip, 3); break;
    case 4: horizontal1_n(a, row, line, flip, 4); break;
    default: horizontal1_n(a, row, line, flip, a->pitch / 2); break;
    }
}

static sl__hpass horizontal1_for(sl__axis *a)
{
    if (a->g1_state == 0 && groups1_build(a))
        return NULL;
    return a->g1_state == 1 ? horizontal1 : sl__horizontal1_sse2_for(a);
}
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

/* One half's R, G and B words from Y and centred Cb, Cr (16-bit lanes):
 * the SSSE3 pass's integers (pmulhrsw). */
__attribute__((target(AVX512_VBMI))) static inline __attribute__((always_inline)) void
rgb_words(__m512i y, __m512i cb, __m512i cr, __m512i out[3])
{
    out[0] = _mm512_add_epi16(_mm512_add_epi16(y, cr),
                              _mm512_mulhrs_epi16(cr, _mm512_set1_epi16(K_CR_R)));
    out[1] = _mm512_sub_epi16(
        _mm512_sub_epi16(y, _mm512_mulhrs_epi16(cb, _mm512_set1_epi16(K_CB_G))),
        _mm512_mulhrs_epi16(cr, _mm512_set1_epi16(K_CR_G)));
    out[2] = _mm512_add_epi16(_mm512_add_epi16(y, cb),
                              _mm512_mulhrs_epi16(cb, _mm512_set1_epi16(K_CB_B)));
}

/* 64 pixels' words (two halves) packed to bytes with saturation and
 * interleaved into rgb by byte permutes. */
__attribute__((target(AVX512_VBMI))) static inline __attribute__((always_inline)) void
store_rgb(__m512i ch[2][3], uint8_t *rgb)
{
    __m512i R = _mm512_packus_epi16(ch[0][0], ch[1][0]),
            G = _mm512_packus_epi16(ch[0][1], ch[1][1]),
            B = _mm512_packus_epi16(ch[0][2], ch[1][2]);
    for (int j = 0; j < 3; j++) {
        __m512i v = _mm512_permutex2var_epi8(R, _mm512_loadu_si512(rgb_rg_idx + 64 * j), G);
        v = _mm512_mask_permutexvar_epi8(v, rgb_b_mask[j],
                                         _mm512_loadu_si512(rgb_b_idx + 64 * j), B);
        _mm512_storeu_si512(rgb + 64 * j, v);
    }
}

/* YCbCr to RGB bytes at 64 pixels a step: the SSSE3 pass's integers
 * (pmulhrsw), widened, then interleaved by byte permutes (VBMI). Rows
 * under 64 pixels go to the SSSE3 pass. */
__attribute__((target(AVX512_VBMI))) static void
ycc_rgb(const uint8_t *yl, const uint8_t *cbl, const uint8_t *crl, uint8_t *rgb, int n)
{
    const __m512i zero = _mm512_setzero_si512(), c128 = _mm512_set1_epi16(128);
    if (n < 64) {
        sl__ycc_rgb_ssse3(yl, cbl, crl, rgb, n);
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
            rgb_words(y, cb, cr, ch[h]);
        }
        store_rgb(ch, rgb + 3 * x);
    }
}

/* The same with the colour transform of sl__ycc_rgb_colour_c on each
 * 32-sample half before the conversion. */
__attribute__((target(AVX512_VBMI))) static void
ycc_rgb_colour(const uint8_t *yl, const uint8_t *cbl, const uint8_t *crl, uint8_t *rgb, int n,
               const int16_t c[6])
{
    const __m512i zero = _mm512_setzero_si512(), c128 = _mm512_set1_epi16(128);
    const __m512i four = _mm512_set1_epi16(4);
    const __m512i ka = _mm512_set1_epi16(c[0]), ko = _mm512_set1_epi16(c[1]);
    const __m512i k00 = _mm512_set1_epi16(c[2]), k01 = _mm512_set1_epi16(c[3]);
    const __m512i k10 = _mm512_set1_epi16(c[4]), k11 = _mm512_set1_epi16(c[5]);
    if (n < 64) {
        sl__ycc_rgb_colour_c(yl, cbl, crl, rgb, n, c);
        return;
    }
    for (int x = 0; x < n; x += 64) {
        if (x > n - 64)
            x = n - 64; /* the last step overlaps the one before: same bytes */
        __m512i y8 = _mm512_loadu_si512(yl + x), b8 = _mm512_loadu_si512(cbl + x),
                r8 = _mm512_loadu_si512(crl + x);
        __m512i ch[2][3];
        for (int h = 0; h < 2; h++) {
            __m512i ys = _mm512_slli_epi16(
                h ? _mm512_unpackhi_epi8(y8, zero) : _mm512_unpacklo_epi8(y8, zero), 7);
            __m512i us = _mm512_slli_epi16(_mm512_sub_epi16(
                h ? _mm512_unpackhi_epi8(b8, zero) : _mm512_unpacklo_epi8(b8, zero), c128), 7);
            __m512i vs = _mm512_slli_epi16(_mm512_sub_epi16(
                h ? _mm512_unpackhi_epi8(r8, zero) : _mm512_unpacklo_epi8(r8, zero), c128), 7);
            __m512i y = _mm512_srai_epi16(
                _mm512_add_epi16(_mm512_add_epi16(_mm512_mulhi_epi16(ys, ka), ko), four), 3);
            __m512i cb = _mm512_srai_epi16(
                _mm512_add_epi16(_mm512_add_epi16(_mm512_mulhi_epi16(us, k00),
                                                  _mm512_mulhi_epi16(vs, k01)), four), 3);
            __m512i cr = _mm512_srai_epi16(
                _mm512_add_epi16(_mm512_add_epi16(_mm512_mulhi_epi16(us, k10),
                                                  _mm512_mulhi_epi16(vs, k11)), four), 3);
            rgb_words(y, cb, cr, ch[h]);
        }
        store_rgb(ch, rgb + 3 * x);
    }
}

/* Without VBMI, resize.c puts SSSE3's colour pass in the tier's place. */
const sl__resize_kernels sl__resize_avx512 = {
    .name = "avx512",
    .level = SL__IMAGE_AVX512,
    .vertical = vertical,
    .horizontal_for = horizontal_for,
    .horizontal1_for = horizontal1_for,
    .ycc_rgb = ycc_rgb,
    .ycc_rgb_colour = ycc_rgb_colour,
    .weights8 = weights8,
    .planes_pay = true,
};
#endif
