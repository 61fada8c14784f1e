/* What other ops need to know of a shuffle. */
#ifndef SL_OPS_SHUFFLE_H
#define SL_OPS_SHUFFLE_H

#include <stdbool.h>
#include "../graph/node.h"

/* Whether ds is a whole-dataset shuffle (SL_SHUFFLE_ALL, windowed): its
 * iterators give any position of the pass (sl__iter_ops.get). */
bool sl__shuffle_by_position(const sl_dataset *ds);

#endif
