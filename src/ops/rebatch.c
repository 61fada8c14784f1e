/* rebatch(size, flags): the input's batches cut again into batches of
 * `size` rows (tf.data's rebatch): unbatch then batch, which copy each row
 * once. Cardinality is known where the input's batches all have a known
 * size (unbatch's rule). */
#include "../graph/node.h"

SL_API sl_dataset *sl_rebatch(sl_dataset *in, int64_t size, unsigned flags)
{
    return sl_batch(sl_unbatch(in), size, flags);
}
