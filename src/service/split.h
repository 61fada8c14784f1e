/*
 * What a worker computes (split.c): batches [first, first + count) of one
 * epoch of a pipeline, byte for byte as the whole pass gives them. The
 * pipeline must be a pure function of position from its order's source
 * up to its batch: (prefetch*) batch, then 1:1 nodes (maps, reads,
 * decodes, prefetch) down to the node whose positions split (distribute
 * over a whole-dataset shuffle or an indexed source, such a shuffle, or
 * an indexed source). Anything that keeps state across elements (a
 * buffered shuffle, filter, scan, unique, cache, interleave, repeat) is
 * refused there, naming it.
 */
#ifndef SL_SERVICE_SPLIT_H
#define SL_SERVICE_SPLIT_H

#include <stdbool.h>
#include <stdint.h>
#include "sluice.h"

typedef struct sl__split_plan {
    const sl_dataset *node; /* whose positions split */
    int64_t rows;           /* elements per batch */
    bool drop;              /* a short last batch dropped */
    int64_t elements;       /* node's positions per epoch */
    int64_t batches;        /* the pipeline's batches per epoch */
} sl__split_plan;

/* The plan for ds, or SL_EUNSUPPORTED naming the op that cannot run on a
 * worker (and why). */
int sl__split_plan_make(const sl_dataset *ds, sl__split_plan *plan);
/* An iterator over batches [first, first + count) of epoch `epoch` of ds
 * made with SL_OPT_SEED seed (as the trainer's), on `threads` threads (0:
 * the default). NULL with the error set. */
sl_iterator *sl__split_iterator(sl_dataset *ds, const sl__split_plan *plan, int64_t seed,
                                int64_t epoch, int64_t first, int64_t count, int threads);

#endif
