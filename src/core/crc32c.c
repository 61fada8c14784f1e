/*
 * CRC-32C (Castagnoli, reflected polynomial 0x82F63B78), as TFRecord
 * frames its records; zlib has only CRC-32.
 *
 * Three ways, the fastest the CPU has chosen once, at run time: with
 * AVX-512 and VPCLMULQDQ, long runs are folded 256 bytes a step by
 * carry-less multiplication (the rest by the crc32 instruction); with
 * SSE4.2, its crc32 instruction takes 8 bytes a step; elsewhere
 * slicing-by-8 tables take 8 bytes per step with eight lookups. All give
 * the same values (test_records' test_crc32c). SLUICE_NO_AVX512=1 steps
 * down to SSE4.2, as it does for the resampler.
 */
#include <stdbool.h>
#include <string.h>
#include "crc32c.h"
#include "log.h"
#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#include <nmmintrin.h>
#define SL__CRC_X86 1
#endif

#define POLY 0x82F63B78u

static uint32_t table[8][256];
static pthread_once_t table_once = PTHREAD_ONCE_INIT;

static void table_init(void)
{
    for (uint32_t i = 0; i < 256; i++) {
        uint32_t c = i;
        for (int k = 0; k < 8; k++)
            c = c & 1 ? (c >> 1) ^ POLY : c >> 1;
        table[0][i] = c;
    }
    for (uint32_t i = 0; i < 256; i++)
        for (int t = 1; t < 8; t++)
            table[t][i] = (table[t - 1][i] >> 8) ^ table[0][table[t - 1][i] & 0xff];
}

uint32_t sl__crc32c_table(uint32_t crc, const void *data, size_t n)
{
    pthread_once(&table_once, table_init);
    const unsigned char *p = data;
    uint32_t c = ~crc;
    for (; n && ((uintptr_t)p & 7); n--)
        c = (c >> 8) ^ table[0][(c ^ *p++) & 0xff];
    for (; n >= 8; n -= 8, p += 8) {
        uint64_t w;
        memcpy(&w, p, 8);
        if (!(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__))
            w = __builtin_bswap64(w);
        w ^= c;
        c = table[7][w & 0xff] ^ table[6][(w >> 8) & 0xff] ^ table[5][(w >> 16) & 0xff] ^
            table[4][(w >> 24) & 0xff] ^ table[3][(w >> 32) & 0xff] ^
            table[2][(w >> 40) & 0xff] ^ table[1][(w >> 48) & 0xff] ^ table[0][w >> 56];
    }
    for (; n; n--)
        c = (c >> 8) ^ table[0][(c ^ *p++) & 0xff];
    return ~c;
}

#ifdef SL__CRC_X86
/* The crc32 instruction has a latency of three cycles and a throughput of
 * one, so one chain of it runs at a third of its speed. Blocks of 3 *
 * LANE bytes are done as three chains side by side, then joined: the CRC
 * state is linear, so the state after A then B is the state after A
 * shifted over B's length of zeros, xor B's own from zero. `shift` holds
 * that shift over LANE zero bytes, one table per state byte. */
#define LANE 1024

static uint32_t shift[4][256];
static pthread_once_t shift_once = PTHREAD_ONCE_INIT;

/* The raw state (no inversions) after n zero bytes, by the tables. */
static uint32_t zeros(uint32_t c, size_t n)
{
    for (; n; n--)
        c = (c >> 8) ^ table[0][c & 0xff];
    return c;
}

static void shift_init(void)
{
    pthread_once(&table_once, table_init);
    for (int k = 0; k < 4; k++)
        for (uint32_t v = 0; v < 256; v++)
            shift[k][v] = zeros(v << (8 * k), LANE);
}

static inline uint32_t shifted(uint32_t c)
{
    return shift[0][c & 0xff] ^ shift[1][(c >> 8) & 0xff] ^ shift[2][(c >> 16) & 0xff] ^
           shift[3][c >> 24];
}

__attribute__((target("sse4.2"))) uint32_t sl__crc32c_sse42(uint32_t crc, const void *data,
                                                           size_t n)
{
    const unsigned char *p = data;
    uint64_t c = ~crc;
    for (; n && ((uintptr_t)p & 7); n--)
        c = _mm_crc32_u8((uint32_t)c, *p++);
    if (n >= 3 * LANE)
        pthread_once(&shift_once, shift_init);
    for (; n >= 3 * LANE; n -= 3 * LANE, p += 3 * LANE) {
        uint64_t c1 = 0, c2 = 0;
        for (size_t i = 0; i < LANE; i += 8) {
            uint64_t a, b, d;
            memcpy(&a, p + i, 8);
            memcpy(&b, p + LANE + i, 8);
            memcpy(&d, p + 2 * LANE + i, 8);
            c = _mm_crc32_u64(c, a);
            c1 = _mm_crc32_u64(c1, b);
            c2 = _mm_crc32_u64(c2, d);
        }
        c = shifted(shifted((uint32_t)c) ^ (uint32_t)c1) ^ (uint32_t)c2;
    }
    for (; n >= 8; n -= 8, p += 8) {
        uint64_t w;
        memcpy(&w, p, 8);
        c = _mm_crc32_u64(c, w);
    }
    for (; n; n--)
        c = _mm_crc32_u8((uint32_t)c, *p++);
    return ~(uint32_t)c;
}
#endif

#ifdef SL__CRC_X86
/* The same, storing the words into dst as they are read: a copy the CRC
 * pass makes anyway, for readers that copy out of an I/O buffer. */
__attribute__((target("sse4.2"))) static uint32_t copy_sse42(uint32_t crc, void *dst,
                                                            const void *src, size_t n)
{
    const unsigned char *p = src;
    unsigned char *q = dst;
    uint64_t c = ~crc;
    for (; n && ((uintptr_t)p & 7); n--, q++)
        c = _mm_crc32_u8((uint32_t)c, *q = *p++);
    if (n >= 3 * LANE)
        pthread_once(&shift_once, shift_init);
    for (; n >= 3 * LANE; n -= 3 * LANE, p += 3 * LANE, q += 3 * LANE) {
        uint64_t c1 = 0, c2 = 0;
        for (size_t i = 0; i < LANE; i += 8) {
            uint64_t a, b, d;
            memcpy(&a, p + i, 8);
            memcpy(&b, p + LANE + i, 8);
            memcpy(&d, p + 2 * LANE + i, 8);
            memcpy(q + i, &a, 8);
            memcpy(q + LANE + i, &b, 8);
            memcpy(q + 2 * LANE + i, &d, 8);
            c = _mm_crc32_u64(c, a);
            c1 = _mm_crc32_u64(c1, b);
            c2 = _mm_crc32_u64(c2, d);
        }
        c = shifted(shifted((uint32_t)c) ^ (uint32_t)c1) ^ (uint32_t)c2;
    }
    for (; n >= 8; n -= 8, p += 8, q += 8) {
        uint64_t w;
        memcpy(&w, p, 8);
        memcpy(q, &w, 8);
        c = _mm_crc32_u64(c, w);
    }
    for (; n; n--)
        c = _mm_crc32_u8((uint32_t)c, *q++ = *p++);
    return ~(uint32_t)c;
}
#endif

#ifdef SL__CRC_X86
/* Folding. Take bit order as the CRC does: the first bit of the message
 * is its highest power of x, and a 64-bit word w read from memory stands
 * for w(x) = sum of w_i x^(63-i). The state after a message M is M x^32
 * mod P; M mod P is all it needs. Keep M's residue as a 128-bit value V
 * = H x^64 + L (H: the low word in memory): appending D more bits makes
 * it V x^D, and V x^D = H x^(D+64) + L x^D. A carry-less multiply of two
 * such words gives their product times x (its top bit is always clear),
 * so H times the word for x^(D+63) mod P, xor L times the one for
 * x^(D-1) mod P, is a 128-bit value with V x^D's residue: the fold.
 *
 * Four 512-bit accumulators hold 16 such values for the 16-byte pieces
 * of a 256-byte block; each step folds all 16 over 256 bytes (D = 2048)
 * onto the next block. At the end they fold onto one another and onto
 * the last piece, and two crc32 instructions reduce the 128 bits left:
 * crc32(crc32(0, H), L) = (H x^64 + L) x^32 mod P. The starting state
 * enters as the first 32 bits of the message, xored in: s x^|M| + M x^32
 * = (s x^(|M|-32) + M) x^32. */
#define FOLD_MIN 512 /* below this, the crc32 instruction's setup is cheaper */

static uint64_t fold_k[5][2]; /* 64-bit words of x^(D+63), x^(D-1) mod P */
static pthread_once_t fold_once = PTHREAD_ONCE_INIT;

/* x^n mod P as a 64-bit word (the form above: x^d is bit 63 - d). */
static uint64_t xpow(unsigned n)
{
    uint32_t c = 0x80000000u; /* x^0, a state's form: x^d is bit 31 - d */
    while (n--)
        c = c & 1 ? (c >> 1) ^ POLY : c >> 1;
    return (uint64_t)c << 32;
}

static void fold_init(void)
{
    static const unsigned dist[5] = {2048, 512, 384, 256, 128}; /* bits */
    for (int i = 0; i < 5; i++) {
        fold_k[i][0] = xpow(dist[i] + 63);
        fold_k[i][1] = xpow(dist[i] - 1);
    }
}

#define FOLD_TARGET __attribute__((target("avx512f,avx512bw,vpclmulqdq,sse4.2")))

FOLD_TARGET static inline __m512i fold_k4(int i)
{
    return _mm512_broadcast_i32x4(
        _mm_set_epi64x((long long)fold_k[i][1], (long long)fold_k[i][0]));
}

/* x folded over the distance in k, xor y. */
FOLD_TARGET static inline __m512i fold(__m512i x, __m512i k, __m512i y)
{
    return _mm512_ternarylogic_epi64(_mm512_clmulepi64_epi128(x, k, 0x00),
                                     _mm512_clmulepi64_epi128(x, k, 0x11), y, 0x96);
}

/* The raw state after n >= 256 bytes (a multiple of 256) of p, from raw
 * state c; with copy, the bytes are stored to q as they are read. */
FOLD_TARGET static inline uint64_t fold_blocks(uint64_t c, unsigned char *q,
                                               const unsigned char *p, size_t n, bool copy)
{
    __m512i x0 = _mm512_loadu_si512(p), x1 = _mm512_loadu_si512(p + 64),
            x2 = _mm512_loadu_si512(p + 128), x3 = _mm512_loadu_si512(p + 192);
    if (copy) {
        _mm512_storeu_si512(q, x0);
        _mm512_storeu_si512(q + 64, x1);
        _mm512_storeu_si512(q + 128, x2);
        _mm512_storeu_si512(q + 192, x3);
    }
    x0 = _mm512_xor_si512(x0, _mm512_castsi128_si512(_mm_cvtsi32_si128((int)(uint32_t)c)));
    __m512i k = fold_k4(0);
    for (size_t i = 256; i < n; i += 256) {
        __m512i y0 = _mm512_loadu_si512(p + i), y1 = _mm512_loadu_si512(p + i + 64),
                y2 = _mm512_loadu_si512(p + i + 128), y3 = _mm512_loadu_si512(p + i + 192);
        if (copy) {
            _mm512_storeu_si512(q + i, y0);
            _mm512_storeu_si512(q + i + 64, y1);
            _mm512_storeu_si512(q + i + 128, y2);
            _mm512_storeu_si512(q + i + 192, y3);
        }
        x0 = fold(x0, k, y0);
        x1 = fold(x1, k, y1);
        x2 = fold(x2, k, y2);
        x3 = fold(x3, k, y3);
    }
    k = fold_k4(1); /* 64 bytes: each accumulator onto the next */
    x1 = fold(x0, k, x1);
    x2 = fold(x1, k, x2);
    x3 = fold(x2, k, x3);
    /* x3's four pieces onto its last: 48, 32 and 16 bytes on */
    __m512i kl = _mm512_set_epi64(0, 0, (long long)fold_k[4][1], (long long)fold_k[4][0],
                                  (long long)fold_k[3][1], (long long)fold_k[3][0],
                                  (long long)fold_k[2][1], (long long)fold_k[2][0]);
    __m512i t = fold(x3, kl, _mm512_setzero_si512());
    __m128i v = _mm512_extracti32x4_epi32(x3, 3);
    v = _mm_xor_si128(v, _mm512_castsi512_si128(t));
    v = _mm_xor_si128(v, _mm512_extracti32x4_epi32(t, 1));
    v = _mm_xor_si128(v, _mm512_extracti32x4_epi32(t, 2));
    c = _mm_crc32_u64(0, (uint64_t)_mm_cvtsi128_si64(v));
    return _mm_crc32_u64(c, (uint64_t)_mm_extract_epi64(v, 1));
}

FOLD_TARGET static inline uint32_t fold_any(uint32_t crc, void *dst, const void *src, size_t n,
                                            bool copy)
{
    pthread_once(&fold_once, fold_init);
    const unsigned char *p = src;
    unsigned char *q = dst;
    size_t body = n & ~(size_t)255, i = body;
    uint64_t c = fold_blocks(~crc, q, p, body, copy);
    /* offsets, not pointers: q is NULL when not copying */
    for (; n - i >= 8; i += 8) {
        uint64_t w;
        memcpy(&w, p + i, 8);
        if (copy)
            memcpy(q + i, &w, 8);
        c = _mm_crc32_u64(c, w);
    }
    for (; i < n; i++) {
        if (copy)
            q[i] = p[i];
        c = _mm_crc32_u8((uint32_t)c, p[i]);
    }
    return ~(uint32_t)c;
}

FOLD_TARGET uint32_t sl__crc32c_avx512(uint32_t crc, const void *data, size_t n)
{
    return n < FOLD_MIN ? sl__crc32c_sse42(crc, data, n) : fold_any(crc, NULL, data, n, false);
}

FOLD_TARGET static uint32_t copy_avx512(uint32_t crc, void *dst, const void *src, size_t n)
{
    return n < FOLD_MIN ? copy_sse42(crc, dst, src, n) : fold_any(crc, dst, src, n, true);
}
#endif

bool sl__crc32c_has_avx512(void)
{
#ifdef SL__CRC_X86
    return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
           __builtin_cpu_supports("vpclmulqdq") && __builtin_cpu_supports("sse4.2");
#else
    return false;
#endif
}

/* 2: folding, 1: SSE4.2, 0: tables (chosen once). */
static int level(void)
{
    static int v = -1;
    int l = __atomic_load_n(&v, __ATOMIC_RELAXED);
    if (l < 0) {
        l = 0;
#ifdef SL__CRC_X86
        if (sl__crc32c_has_sse42())
            l = sl__crc32c_has_avx512() && !sl__env_on("SLUICE_NO_AVX512") ? 2 : 1;
#endif
        __atomic_store_n(&v, l, __ATOMIC_RELAXED);
    }
    return l;
}

uint32_t sl__crc32c_copy(uint32_t crc, void *dst, const void *src, size_t n)
{
#ifdef SL__CRC_X86
    int l = level();
    if (l == 2)
        return copy_avx512(crc, dst, src, n);
    if (l == 1)
        return copy_sse42(crc, dst, src, n);
#endif
    memcpy(dst, src, n);
    return sl__crc32c_table(crc, dst, n);
}

bool sl__crc32c_has_sse42(void)
{
#ifdef SL__CRC_X86
    return __builtin_cpu_supports("sse4.2");
#else
    return false;
#endif
}

uint32_t sl__crc32c(uint32_t crc, const void *data, size_t n)
{
#ifdef SL__CRC_X86
    int l = level();
    if (l == 2)
        return sl__crc32c_avx512(crc, data, n);
    if (l == 1)
        return sl__crc32c_sse42(crc, data, n);
#endif
    return sl__crc32c_table(crc, data, n);
}

SL_API uint32_t sl_crc32c(uint32_t crc, const void *data, size_t n)
{
    return data || !n ? sl__crc32c(crc, data, n) : crc;
}

/* ---- CRC-32 (IEEE) ---- */

#ifndef SLUICE_NO_ZLIB
#include <zlib.h>

uint32_t sl__crc32(uint32_t crc, const void *data, size_t n)
{
    const unsigned char *p = data;
    while (n > 0) { /* zlib counts in 32 bits */
        uInt k = n > UINT32_MAX ? UINT32_MAX : (uInt)n;
        crc = (uint32_t)crc32(crc, p, k);
        p += k;
        n -= k;
    }
    return crc;
}
#else
static uint32_t crc32_table[256];
static pthread_once_t crc32_once = PTHREAD_ONCE_INIT;

static void crc32_init(void)
{
    for (uint32_t i = 0; i < 256; i++) {
        uint32_t c = i;
        for (int k = 0; k < 8; k++)
            c = c & 1 ? 0xedb88320u ^ (c >> 1) : c >> 1;
        crc32_table[i] = c;
    }
}

uint32_t sl__crc32(uint32_t crc, const void *data, size_t n)
{
    pthread_once(&crc32_once, crc32_init);
    const unsigned char *p = data;
    crc = ~crc;
    while (n--)
        crc = crc32_table[(crc ^ *p++) & 0xff] ^ (crc >> 8);
    return ~crc;
}
#endif
