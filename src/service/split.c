/* A worker's part of an epoch (split.h). */
#include "split.h"
#include <string.h>
#include "../core/error.h"
#include "../graph/node.h"
#include "../graph/sync.h"
#include "../ops/distribute.h"
#include "../ops/shuffle.h"

/* Nodes with one input that make element i from input element i alone,
 * numbering their random draws by position. */
static bool one_to_one(const sl_dataset *ds)
{
    static const char *const kinds[] = {"map", "map_image", "map_video", "map_audio",
                                        "prefetch"};
    if (ds->ninputs != 1)
        return false;
    for (size_t i = 0; i < sizeof kinds / sizeof *kinds; i++)
        if (!strcmp(ds->ops->kind, kinds[i]))
            return true;
    return ds->ops->rebuild != NULL; /* the reading nodes: 1:1, no randomness */
}

static bool gives_positions(const sl_dataset *ds)
{
    return sl__distribute_by_position(ds) || sl__shuffle_by_position(ds) ||
           sl__dataset_indexed(ds);
}

int sl__split_plan_make(const sl_dataset *ds, sl__split_plan *plan)
{
    memset(plan, 0, sizeof *plan);
    const sl_dataset *top = ds;
    while (!strcmp(top->ops->kind, "prefetch"))
        top = top->inputs[0];
    if (!top->ops->batch_rows)
        return sl__set_error(SL_EUNSUPPORTED, "service: the pipeline must end in batch (only "
                             "prefetch after it), so that workers send whole batches; it ends "
                             "in %s", sl_dataset_name(top));
    plan->rows = top->ops->batch_rows(top, &plan->drop);
    plan->batches = sl_dataset_cardinality(top);
    const sl_dataset *e = top->inputs[0];
    int64_t per_element = sl_dataset_cardinality(e);
    while (!gives_positions(e)) {
        if (!one_to_one(e))
            return sl__set_error(SL_EUNSUPPORTED, "service: %s cannot run on a worker: a "
                                 "worker computes its batches from their positions alone, "
                                 "and %s keeps state across elements or has no position "
                                 "to start from (use shuffle(SL_SHUFFLE_ALL) over an "
                                 "indexed source, and run such ops on the trainer)",
                                 sl_dataset_name(e), e->ops->kind);
        e = e->inputs[0];
    }
    plan->node = e;
    plan->elements = sl_dataset_cardinality(e);
    if (plan->elements < 0 || per_element != plan->elements || plan->batches < 0)
        return sl__set_error(SL_EUNSUPPORTED, "service: %s must have a known size, the same "
                             "as the elements its batch stacks", sl_dataset_name(e));
    return 0;
}

sl_iterator *sl__split_iterator(sl_dataset *ds, const sl__split_plan *plan, int64_t seed,
                                int64_t epoch, int64_t first, int64_t count, int threads)
{
    sl_options *o = sl_options_create();
    if (!o)
        return NULL;
    sl_options_set(o, SL_OPT_SEED, seed);
    sl_options_set(o, SL_OPT_EPOCH, epoch);
    if (threads > 0)
        sl_options_set(o, SL_OPT_THREADS, threads);
    int64_t from = first * plan->rows, to = (first + count) * plan->rows;
    if (to > plan->elements || to < from)
        to = plan->elements;
    sl__options_set_split(o, plan->node, from, to);
    sl_iterator *it = sl_iterator_create(ds, o);
    sl_options_free(o);
    return it;
}
