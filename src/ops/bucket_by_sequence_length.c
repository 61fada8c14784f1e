/* bucket_by_sequence_length: tf.data's bucketing of variable-length
 * elements, built as tf.data builds it: group_by_window keyed by the
 * bucket of each element's length, each window padded_batch'ed (or batch'ed
 * with SL_NO_PADDING) to its bucket's batch size. Bucket i holds lengths
 * in [boundaries[i - 1], boundaries[i]), the last everything from the last
 * boundary on. Dimensions the padded shapes leave open pad to the batch's
 * longest, or with SL_PAD_TO_BUCKET_BOUNDARY to the bucket's boundary less
 * one (an element of the last bucket is then an error, as in tf.data). */
#include <string.h>
#include "../graph/sync.h"
#include "group_by_window.h"

typedef struct bucketing {
    sl_length_fn length_fn;
    void *user;
    int n; /* boundaries; n + 1 buckets */
    int64_t *boundaries, *batch_sizes;
    int ntensors;
    int64_t *shapes; /* ntensors x SL_MAX_DIMS, -1 open; NULL: all open */
    sl_element *values;
    unsigned flags;
} bucketing;

static void bucketing_free(void *p)
{
    bucketing *b = p;
    if (!b)
        return;
    sl__free(b->boundaries, (size_t)(b->n ? b->n : 1) * sizeof *b->boundaries);
    sl__free(b->batch_sizes, (size_t)(b->n + 1) * sizeof *b->batch_sizes);
    if (b->shapes)
        sl__free(b->shapes, (size_t)b->ntensors * SL_MAX_DIMS * sizeof *b->shapes);
    sl_element_release(b->values);
    sl__free(b, sizeof *b);
}

static int bucket_of(sl_map_ctx *ctx, const sl_element *el, int64_t *key, void *user)
{
    const bucketing *b = user;
    int64_t len = 0;
    int rc = b->length_fn(ctx, el, &len, b->user);
    if (rc < 0)
        return rc;
    int i = 0;
    while (i < b->n && len >= b->boundaries[i])
        i++;
    if (i == b->n && (b->flags & SL_PAD_TO_BUCKET_BOUNDARY))
        return sl__set_error(SL_EINVAL, "length %lld is not below the largest bucket boundary "
                             "%lld, which padding to bucket boundaries needs", (long long)len,
                             (long long)(b->n ? b->boundaries[b->n - 1] : 0));
    *key = i;
    return 0;
}

static int64_t batch_size_of(int64_t key, void *user)
{
    return ((const bucketing *)user)->batch_sizes[key];
}

static sl_dataset *batch_window(int64_t key, sl_dataset *window, void *user)
{
    const bucketing *b = user;
    unsigned drop = b->flags & SL_DROP_REMAINDER;
    if (b->flags & SL_NO_PADDING)
        return sl_batch(window, b->batch_sizes[key], drop);
    if (!(b->flags & SL_PAD_TO_BUCKET_BOUNDARY) && !b->shapes)
        return sl_padded_batch(window, b->batch_sizes[key], b->ntensors, NULL, b->values, drop);
    int n = b->ntensors;
    int64_t *shapes = sl__alloc((size_t)(n ? n : 1) * SL_MAX_DIMS * sizeof *shapes);
    if (!shapes) {
        sl_dataset_release(window);
        sl__set_error(SL_ENOMEM, "bucket_by_sequence_length: out of memory");
        return NULL;
    }
    for (int i = 0; i < n * SL_MAX_DIMS; i++) {
        int64_t s = b->shapes ? b->shapes[i] : -1;
        if (s < 0 && (b->flags & SL_PAD_TO_BUCKET_BOUNDARY))
            s = b->boundaries[key] - 1;
        shapes[i] = s;
    }
    sl_dataset *ds = sl_padded_batch(window, b->batch_sizes[key], n, shapes, b->values, drop);
    sl__free(shapes, (size_t)(n ? n : 1) * SL_MAX_DIMS * sizeof *shapes);
    return ds;
}

/* The padded shapes a caller did not give, where the input's structure
 * says: its known dimensions as they are, the others open. */
static int64_t *shapes_of(const sl_structure *s, int n)
{
    int64_t *shapes = sl__alloc((size_t)n * SL_MAX_DIMS * sizeof *shapes);
    for (int i = 0; shapes && i < n * SL_MAX_DIMS; i++)
        shapes[i] = -1;
    for (int j = 0; shapes && s && j < n; j++) {
        const sl_structure *leaf = s;
        /* the j-th leaf: walk down by leaf index */
        while (sl_structure_kind(leaf) != SL_STRUCTURE_LEAF) {
            int c = 0;
            while (c + 1 < sl_structure_size(leaf) &&
                   sl_structure_leaf_index(sl_structure_child(leaf, c + 1)) <= j)
                c++;
            leaf = sl_structure_child(leaf, c);
        }
        const int64_t *dims = sl_structure_shape(leaf);
        for (int k = 0; k < sl_structure_ndim(leaf); k++)
            shapes[j * SL_MAX_DIMS + k] = dims[k];
    }
    return shapes;
}

static uint64_t settings_hash(const bucketing *b)
{
    uint64_t h = sl__hash_u64(sl__hash_u64(0, (uint64_t)b->n), b->flags);
    h = sl__hash_bytes(h, b->boundaries, (size_t)b->n * sizeof *b->boundaries);
    h = sl__hash_bytes(h, b->batch_sizes, (size_t)(b->n + 1) * sizeof *b->batch_sizes);
    if (b->shapes)
        h = sl__hash_bytes(h, b->shapes, (size_t)b->ntensors * SL_MAX_DIMS * sizeof *b->shapes);
    for (int j = 0; b->values && j < b->values->n; j++)
        h = sl__hash_bytes(h, b->values->t[j].data, b->values->t[j].nbytes);
    return h;
}

SL_API sl_dataset *sl_bucket_by_sequence_length(
    sl_dataset *in, const char *name, sl_length_fn length_fn, void *user,
    const int64_t *boundaries, int n, const int64_t *batch_sizes, int ntensors,
    const int64_t *padded_shapes, const sl_element *padding_values, unsigned flags)
{
    bucketing *b = in ? sl__calloc(1, sizeof *b) : NULL;
    const char *bad = !length_fn ? "NULL length function"
                      : n < 0 || n > 4096 || (n && !boundaries) || !batch_sizes
                          ? "bad boundaries or batch sizes"
                      : flags & ~(SL_DROP_REMAINDER | SL_PAD_TO_BUCKET_BOUNDARY | SL_NO_PADDING)
                          ? "unknown flags"
                          : NULL;
    for (int i = 0; !bad && i < n; i++)
        if (boundaries[i] < 1 || (i && boundaries[i] <= boundaries[i - 1]))
            bad = "boundaries must rise from 1";
    for (int i = 0; !bad && i <= n; i++)
        if (batch_sizes[i] < 1)
            bad = "batch sizes must be >= 1";
    if (!bad && padding_values && padding_values->n != ntensors)
        bad = "padding values for another number of tensors";
    if (!b || bad) {
        sl__free(b, sizeof *b);
        sl_dataset_release(in);
        if (in)
            sl__set_error(b ? SL_EINVAL : SL_ENOMEM, "bucket_by_sequence_length: %s",
                          bad ? bad : "out of memory");
        return NULL;
    }
    b->length_fn = length_fn;
    b->user = user;
    b->n = n;
    b->flags = flags;
    b->boundaries = sl__alloc((size_t)(n ? n : 1) * sizeof *b->boundaries);
    b->batch_sizes = sl__alloc((size_t)(n + 1) * sizeof *b->batch_sizes);
    const sl_structure *s = sl_dataset_structure(in);
    int leaves = s ? sl_structure_leaves(s) : ntensors;
    b->ntensors = ntensors ? ntensors : leaves;
    if (padded_shapes && b->ntensors) {
        b->shapes = sl__alloc((size_t)b->ntensors * SL_MAX_DIMS * sizeof *b->shapes);
        if (b->shapes)
            memcpy(b->shapes, padded_shapes, (size_t)b->ntensors * SL_MAX_DIMS * sizeof *b->shapes);
    } else if ((flags & SL_PAD_TO_BUCKET_BOUNDARY) && b->ntensors) {
        b->shapes = shapes_of(s, b->ntensors);
    }
    b->values = padding_values ? sl_element_retain((sl_element *)padding_values) : NULL;
    bool want_shapes = b->ntensors && (padded_shapes || (flags & SL_PAD_TO_BUCKET_BOUNDARY));
    if (!b->boundaries || !b->batch_sizes || (want_shapes && !b->shapes)) {
        bucketing_free(b);
        sl_dataset_release(in);
        sl__set_error(SL_ENOMEM, "bucket_by_sequence_length: out of memory");
        return NULL;
    }
    if (n)
        memcpy(b->boundaries, boundaries, (size_t)n * sizeof *boundaries);
    memcpy(b->batch_sizes, batch_sizes, (size_t)(n + 1) * sizeof *batch_sizes);
    sl_dataset *ds = sl__group_by_window(in, name ? name : "bucket_by_sequence_length",
                                         bucket_of, batch_window, 0, batch_size_of, b,
                                         bucketing_free);
    if (ds)
        ((sl__group_by_window_ds *)ds)->user_hash = settings_hash(b);
    return ds;
}
