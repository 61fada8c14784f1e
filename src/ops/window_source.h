/* A dataset over elements in hand: what group_by_window gives its reduce
 * function as a window. */
#ifndef SL_OPS_WINDOW_SOURCE_H
#define SL_OPS_WINDOW_SOURCE_H

#include "../graph/node.h"

/* The n elements (their references taken, also on failure), in order,
 * with `structure` (borrowed; NULL: not known). NULL on failure. */
sl_dataset *sl__window_source(sl_element **els, int64_t n, const sl_structure *structure);

#endif
