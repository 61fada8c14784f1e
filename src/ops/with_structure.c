/* with_structure(s): the input's elements as they are, read as structure
 * s (how their tensors nest, what they hold). No work per element: the
 * structure is the dataset's, not the elements'. */
#include <stdio.h>
#include "../graph/sync.h"

static int with_structure_next(sl__iter *base, sl_element **out)
{
    return sl__iter_next(((sl__sync_iter *)base)->in, out);
}

static int64_t with_structure_cardinality(const sl_dataset *ds)
{
    return sl_dataset_cardinality(ds->inputs[0]);
}

/* The structure is mixed into the fingerprint through its text: a cache
 * of a pipeline read another way is another cache. */
static uint64_t with_structure_fingerprint(const sl_dataset *ds, uint64_t h)
{
    char text[4096];
    sl_structure_format(sl_dataset_structure(ds), text, sizeof text);
    return sl__hash_str(h, text);
}

static const sl__sync_def with_structure_def = {
    .node = {.kind = "with_structure", .make_iter = sl__sync_make,
             .fingerprint = with_structure_fingerprint,
             .cardinality = with_structure_cardinality},
    .iter = {SL__SYNC_ITER(with_structure_next)},
    .iter_size = sizeof(sl__sync_iter),
};

SL_API sl_dataset *sl_with_structure(sl_dataset *in, const sl_structure *structure)
{
    sl_dataset *ds = sl__dataset_new(&with_structure_def.node, sizeof(sl_dataset), in);
    if (!ds)
        return NULL;
    if (!structure)
        return sl__dataset_fail(ds, SL_EINVAL, "with_structure: NULL structure");
    const sl_structure *was = sl_dataset_structure(ds->inputs[0]);
    if (was && sl_structure_leaves(was) != sl_structure_leaves(structure)) {
        char a[256], b[256];
        sl_structure_format(structure, a, sizeof a);
        sl_structure_format(was, b, sizeof b);
        return sl__dataset_fail(ds, SL_ESHAPE, "with_structure: %s has %d tensors, the "
                                "input's elements %d (%s)", a, sl_structure_leaves(structure),
                                sl_structure_leaves(was), b);
    }
    return sl__dataset_structured(ds, sl_structure_retain((sl_structure *)structure));
}
