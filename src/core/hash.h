/* Small non-cryptographic hashing for fingerprints and RNG keys. */
#ifndef SL_CORE_HASH_H
#define SL_CORE_HASH_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

static inline uint64_t sl__mix64(uint64_t x)
{
    /* splitmix64 finaliser: a bijection with good avalanche */
    x ^= x >> 30;
    x *= 0xbf58476d1ce4e5b9ull;
    x ^= x >> 27;
    x *= 0x94d049bb133111ebull;
    x ^= x >> 31;
    return x;
}

static inline uint64_t sl__hash_u64(uint64_t h, uint64_t v)
{
    return sl__mix64(h ^ (v + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2)));
}

static inline uint64_t sl__hash_bytes(uint64_t h, const void *p, size_t n)
{
    const unsigned char *s = p;
    uint64_t acc = 0xcbf29ce484222325ull ^ n;
    for (size_t i = 0; i < n; i++)
        acc = (acc ^ s[i]) * 0x100000001b3ull;
    return sl__hash_u64(h, acc);
}

static inline uint64_t sl__hash_str(uint64_t h, const char *s)
{
    return sl__hash_bytes(h, s ? s : "", s ? strlen(s) : 0);
}

#endif
