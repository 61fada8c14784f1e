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
    int64_t start, nskip;
    int64_t *skip;        /* consumed positions above start, sorted */
} sl__distribute_base;

/* The distribute node under ds (along every input), or NULL. */
const sl_dataset *sl__distribute_find(const sl_dataset *ds);
/* Merges n old ranks' records of node dist (recs[i]: nfields[i] fields)
 * into out: 0, SL_EMISMATCH (ranks missing or repeated, another input,
 * different bases) or SL_ECORRUPT, naming what. */
int sl__distribute_merge(const sl_dataset *dist, const int64_t *const *recs,
                         const int *nfields, int n, sl__distribute_base *out);
void sl__distribute_base_free(sl__distribute_base *b);
/* Sets the base the next distribute iterator this thread makes over
 * b->ds takes (NULL clears it); returns whether the last one set was
 * taken. */
bool sl__distribute_pending(const sl__distribute_base *b);

#endif
