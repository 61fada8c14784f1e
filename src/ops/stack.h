/* Stacking elements along a new leading dimension: the column store behind
 * batch, shared with ops that assemble batches themselves (map_image). */
#ifndef SL_OPS_STACK_H
#define SL_OPS_STACK_H

#include "../graph/node.h"

typedef struct sl__column sl__column;

typedef struct sl__stack {
    sl__column *cols;
    int ncols;
    int64_t rows;
} sl__stack;

/* Appends el as the next row (copying it: el may be released at once).
 * The first row fixes the tensor count, dtypes and shapes; `expect` rows
 * are reserved then (capped at 64 MiB a column, doubling later up to
 * `max_rows`). A mismatch is SL_ESHAPE/SL_EDTYPE naming both shapes. */
int sl__stack_add(sl__stack *s, const sl_element *el, int64_t expect, int64_t max_rows);
/* Appends the stacked tensors ([rows, ...]) to out, which needs ncols free
 * tensor slots. The stack keeps its data; reset it next. */
int sl__stack_emit(const sl__stack *s, sl_element *out);
/* The same for columns [from, to) only. */
int sl__stack_emit_cols(const sl__stack *s, sl_element *out, int from, int to);
/* Frees the rows; ready for a new batch. */
void sl__stack_reset(sl__stack *s);

#endif
