#include "perm.h"
#include "hash.h"
#include "rng.h"

void sl__perm_init(sl__perm *p, uint64_t n, uint64_t key)
{
    p->n = n;
    p->bits = 2;
    while (p->bits < 63 && (1ull << p->bits) < n)
        p->bits++;
    for (int r = 0; r < SL__PERM_ROUNDS; r++)
        p->key[r] = sl__hash_u64(key, (uint64_t)r);
    if (n > SL__PERM_TABLE)
        return;
    sl__rng rng = {sl__mix64(key), 0};
    for (uint64_t i = 0; i < n; i++)
        p->table[i] = (uint16_t)i;
    for (uint64_t i = 0; i + 1 < n; i++) {
        uint64_t j = i + sl__rng_below(&rng, n - i);
        uint16_t t = p->table[i];
        p->table[i] = p->table[j];
        p->table[j] = t;
    }
}

/* One pass of the network over [0, 2^bits). x = (hi: the top bits - lo_bits
 * bits, lo: lo_bits bits); a round gives (lo, hi ^ F(lo)), the widths
 * trading places. */
static uint64_t encrypt(const sl__perm *p, uint64_t x)
{
    int lo_bits = p->bits / 2, hi_bits = p->bits - lo_bits;
    for (int r = 0; r < SL__PERM_ROUNDS; r++) {
        uint64_t lo = x & ((1ull << lo_bits) - 1);
        uint64_t hi = x >> lo_bits;
        uint64_t f = sl__mix64(lo ^ p->key[r]) ^ p->key[r];
        x = (lo << hi_bits) | ((hi ^ f) & ((1ull << hi_bits) - 1)); /* widths <= 32 */
        int t = lo_bits;
        lo_bits = hi_bits;
        hi_bits = t;
    }
    return x;
}

uint64_t sl__perm_at(const sl__perm *p, uint64_t i)
{
    if (p->n <= SL__PERM_TABLE)
        return p->table[i];
    uint64_t x = encrypt(p, i);
    while (x >= p->n)
        x = encrypt(p, x);
    return x;
}
