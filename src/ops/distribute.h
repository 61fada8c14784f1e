/* What sl_iterator_restore_ranks needs of distribute: finding the node,
 * merging every old rank's record into what the epoch has left, and
 * handing that to the node the new iterator makes. */
#ifndef SL_OPS_DISTRIBUTE_H
#define SL_OPS_DISTRIBUTE_H

#include <stdbool.h>
#include <stdint.h>
#include "../graph/node.h"

typedef struct sl__distribute_base {
    const sl_dataset *ds; /* the distribute node it is for */
    int64_t epoch;        /* the pass of the node's iterators it belongs to (-1: any) */
    int64_t start, nskip;
    int64_t *skip;        /* consumed positions above start, sorted */
    bool taken;           /* by the node's iterator */
} sl__distribute_base;

/* Whether distribute node ds fetches its input by position (over a
 * whole-dataset shuffle or an indexed source), so a pass may start at any
 * of its positions. */
bool sl__distribute_by_position(const sl_dataset *ds);
/* The distribute nodes under ds (along every input; a mixture of sources
 * distributed one by one has several), at most max of them into out: how
 * many there are, or -1 with SL_EUNSUPPORTED set when one splits whole
 * files. */
int sl__distribute_find(const sl_dataset *ds, const sl_dataset **out, int max);
/* Merges n old ranks' records of node dist (recs[i]: nfields[i] fields;
 * NULL for a rank whose mixture let the input go when it ended there,
 * which took its whole share; all NULL: nothing is left) into out: 0,
 * SL_EMISMATCH (ranks missing or repeated, another input, different
 * bases) or SL_ECORRUPT, naming what. */
int sl__distribute_merge(const sl_dataset *dist, const int64_t *const *recs,
                         const int *nfields, int n, sl__distribute_base *out);
void sl__distribute_base_free(sl__distribute_base *b);
/* Sets the bases the distribute iterators this thread makes next take,
 * each the one for its node (b[i].ds; NULL, 0 clears them); returns
 * whether every one set before was taken. */
bool sl__distribute_pending(sl__distribute_base *b, int n);

#endif
