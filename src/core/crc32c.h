/* CRC-32C (Castagnoli): the checksum of TFRecord framing; and CRC-32. */
#ifndef SL_CORE_CRC32C_H
#define SL_CORE_CRC32C_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "sluice.h"

/* crc of data[0..n) continuing from crc (0 to start): the fastest way the
 * CPU has. */
uint32_t sl__crc32c(uint32_t crc, const void *data, size_t n);
/* The ways, for tests: tables (any CPU), SSE4.2 (x86 with it) and
 * folding with AVX-512 and VPCLMULQDQ (x86 with those and SSE4.2). */
uint32_t sl__crc32c_table(uint32_t crc, const void *data, size_t n);
uint32_t sl__crc32c_sse42(uint32_t crc, const void *data, size_t n);
uint32_t sl__crc32c_avx512(uint32_t crc, const void *data, size_t n);
bool sl__crc32c_has_sse42(void);
bool sl__crc32c_has_avx512(void);
/* Copies src to dst (n bytes, not overlapping) and returns the CRC of
 * them continuing from crc, in one pass where SSE4.2 allows. */
uint32_t sl__crc32c_copy(uint32_t crc, void *dst, const void *src, size_t n);

/* CRC-32 (zlib's crc32, the IEEE polynomial) of data[0..n) continuing
 * from crc (0 to start): the checksum of cache files and saved states.
 * zlib's where the build has it, a table of its own where not, with the
 * same values, so the files do not depend on the build. */
uint32_t sl__crc32(uint32_t crc, const void *data, size_t n);

/* TFRecord's masked form of a CRC, so that a CRC of data holding CRCs does
 * not come out trivially. */
static inline uint32_t sl__crc32c_mask(uint32_t crc)
{
    return ((crc >> 15) | (crc << 17)) + 0xa282ead8u;
}

#endif
