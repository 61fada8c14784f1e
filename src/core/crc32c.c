/*
 * CRC-32C (Castagnoli, reflected polynomial 0x82F63B78), as TFRecord
 * frames its records; zlib has only CRC-32.
 *
 * Where the CPU has SSE4.2, its crc32 instruction takes 8 bytes a step
 * (chosen once, at run time); elsewhere slicing-by-8 tables take 8 bytes
 * per step with eight lookups. Both give the same values (tests/test_crc32c).
 */
#include <stdbool.h>
#include <string.h>
#include "crc32c.h"
#if defined(__x86_64__) || defined(__i386__)
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

uint32_t sl__crc32c_copy(uint32_t crc, void *dst, const void *src, size_t n)
{
#ifdef SL__CRC_X86
    if (sl__crc32c_has_sse42())
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

static uint32_t (*impl)(uint32_t, const void *, size_t);

uint32_t sl__crc32c(uint32_t crc, const void *data, size_t n)
{
    uint32_t (*f)(uint32_t, const void *, size_t) = __atomic_load_n(&impl, __ATOMIC_RELAXED);
    if (!f) {
        f = sl__crc32c_table;
#ifdef SL__CRC_X86
        if (sl__crc32c_has_sse42())
            f = sl__crc32c_sse42;
#endif
        __atomic_store_n(&impl, f, __ATOMIC_RELAXED);
    }
    return f(crc, data, n);
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
