/*
 * What only tests use of the ops: pure functions an op keeps static in
 * spirit, declared here so a test can check a rule without a clock or a
 * pipeline. In the library only the files that define them include it.
 */
#ifndef SL_OPS_TESTING_H
#define SL_OPS_TESTING_H

#include <stdbool.h>
#include <stdint.h>

/* An automatic cache's choice (sl_cache_placement) for a first pass of
 * `bytes` that took `produce_ns` of its consumer's time: nothing when that
 * is under about a page-cache read of the bytes (unless `keep`: a memory
 * cache), else where the pass went (memory, or the spill file). A pure
 * function, so tests can check the rule without a clock (ops/cache.c). */
int sl__cache_choose(int64_t bytes, int64_t produce_ns, bool spilled, bool keep);


#endif
