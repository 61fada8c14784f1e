/* The autotune controller: one per iterator, reading the tree's counters
 * (src/graph/stats.h) and moving knobs that were left at SL_AUTOTUNE. */
#ifndef SL_AUTOTUNE_AUTOTUNE_H
#define SL_AUTOTUNE_AUTOTUNE_H

#include "../graph/node.h"

/* Starts the controller thread of tree t (if t->autotune); 0 or a negative
 * code. Knobs registered later (nodes made in later passes) are picked up
 * at the next tick. */
int sl__autotune_start(sl__tree *t);
/* Stops and joins it; NULL-safe, idempotent. Called before the node
 * iterators are freed. With `learned`, what the controller learned (its
 * knobs and estimates; graph/learned.h) goes there when it is worth
 * keeping: the controller moved a knob or ran a second; else NULL. */
void sl__autotune_stop(sl__tree *t, sl__learned **learned);

#endif
