/*
 * A random permutation of [0, n) computed one index at a time: O(1) memory,
 * any position in O(1), the same order for a key on every thread and host.
 *
 * An unbalanced Feistel network on the smallest power of two >= n, walked
 * along its cycles until it lands below n (cycle walking: each step stays a
 * bijection, and the walk ends at worst back at the start, so the result is
 * a permutation of [0, n); on average fewer than two steps, as the domain is
 * under 2n). Each round swaps the two halves and mixes the old high half
 * with a keyed 64-bit hash of the old low half, so halves of different
 * widths alternate and every bit width works.
 *
 * A Feistel network on a few bits is measurably far from uniform (where
 * element k lands, over many keys, drifts by several standard deviations
 * on 8 elements), so up to SL__PERM_TABLE elements the permutation is a
 * table drawn by Fisher-Yates from the same key instead: 2 KB, exact.
 *
 * Versioned: a saved position means something only under the same network,
 * so states record SL__PERM_VERSION and refuse another.
 */
#ifndef SL_CORE_PERM_H
#define SL_CORE_PERM_H

#include <stdint.h>

#define SL__PERM_VERSION 1
#define SL__PERM_ROUNDS 6
#define SL__PERM_TABLE 1024

typedef struct sl__perm {
    uint64_t n;
    int bits;                      /* the domain is [0, 2^bits), 2 <= bits <= 63 */
    uint64_t key[SL__PERM_ROUNDS]; /* one per round, from the key */
    uint16_t table[SL__PERM_TABLE]; /* n <= SL__PERM_TABLE: the permutation */
} sl__perm;

/* The permutation of [0, n) that `key` names (n <= 2^63). */
void sl__perm_init(sl__perm *p, uint64_t n, uint64_t key);
/* The value at position i < n. */
uint64_t sl__perm_at(const sl__perm *p, uint64_t i);

#endif
