/* Counter-based random numbers: a stream is a pure function of its key
 * (seed, node, epoch, index), so results never depend on which thread
 * draws them or when. */
#ifndef SL_CORE_RNG_H
#define SL_CORE_RNG_H

#include <stdint.h>
#include "hash.h"

typedef struct sl__rng {
    uint64_t key;
    uint64_t ctr;
} sl__rng;

static inline sl__rng sl__rng_make(uint64_t seed, uint64_t node, int64_t epoch, int64_t index)
{
    uint64_t k = sl__hash_u64(sl__hash_u64(sl__hash_u64(sl__mix64(seed), node),
                                           (uint64_t)epoch), (uint64_t)index);
    return (sl__rng){k, 0};
}

static inline uint64_t sl__rng_next(sl__rng *r)
{
    return sl__mix64(r->key + 0x9e3779b97f4a7c15ull * ++r->ctr);
}

/* Uniform in [0, n) without modulo bias (Lemire's method). n > 0. */
static inline uint64_t sl__rng_below(sl__rng *r, uint64_t n)
{
    uint64_t x = sl__rng_next(r);
    __uint128_t m = (__uint128_t)x * n;
    uint64_t lo = (uint64_t)m;
    if (lo < n) {
        uint64_t t = -n % n;
        while (lo < t) {
            x = sl__rng_next(r);
            m = (__uint128_t)x * n;
            lo = (uint64_t)m;
        }
    }
    return (uint64_t)(m >> 64);
}

static inline double sl__rng_uniform(sl__rng *r)
{
    return (double)(sl__rng_next(r) >> 11) * 0x1.0p-53;
}

/* Draws from distributions, each a few uniforms of r (rng.c). */
double sl__rng_normal(sl__rng *r);             /* N(0, 1), Box-Muller */
double sl__rng_gamma(sl__rng *r, double shape); /* Gamma(shape, 1), shape > 0 */
double sl__rng_beta(sl__rng *r, double a, double b); /* Beta(a, b), a, b > 0 */

#endif
