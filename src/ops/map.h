/* The parallel map's iterator, for ops that are maps with a built-in
 * function (map_image). */
#ifndef SL_OPS_MAP_H
#define SL_OPS_MAP_H

#include "../graph/node.h"

/* A map node iterator over ds's input 0, calling fn(user) per element. */
int sl__map_iter_make(const sl_dataset *ds, sl__tree *tree, uint64_t key, int64_t epoch,
                      sl_map_fn fn, void *user, int parallelism, unsigned flags, sl__iter **out);

/* Registers node `it` as a map with its "parallelism" knob: SL_AUTOTUNE
 * under the controller starts at 1 and may grow to 4 tasks per worker;
 * without it, it is the documented 2 per worker; a number is fixed. NULL
 * (error set) on failure. */
sl__knob *sl__map_parallelism_knob(sl__iter *it, int parallelism);

#endif
