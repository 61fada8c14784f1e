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

/* How many elements a pool task gets: from the measured cost of one, about
 * target_ns of work, between 1 and max, and, with room >= 0, no more
 * output than room bytes. Maps (1 ms, up to 256: cheap callbacks amortise
 * the hand-off) and map_image (2 ms, up to 16: a batch spreads over every
 * worker and few encoded files are held) share it. Callers serialise. */
typedef struct sl__task_sizer {
    int64_t cost_ns;  /* per element, smoothed; 0 before the first task */
    int64_t el_bytes; /* output per element, smoothed */
} sl__task_sizer;
/* A task of n elements took ns and made `bytes` of output. */
void sl__task_sizer_note(sl__task_sizer *z, int n, int64_t ns, int64_t bytes);
int sl__task_sizer_size(const sl__task_sizer *z, int64_t target_ns, int max, int64_t room);

#endif
