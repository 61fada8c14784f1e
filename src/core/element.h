/* Elements and tensors: the library's unit of data. */
#ifndef SL_CORE_ELEMENT_H
#define SL_CORE_ELEMENT_H

#include <stdatomic.h>
#include <stdbool.h>
#include "alloc.h"
#include "sluice.h"

struct sl_tensor {
    sl_dtype dtype;
    int ndim;
    int64_t shape[SL_MAX_DIMS];
    void *data;
    size_t nbytes;
    sl__buf *buf; /* owner of data (shared), or NULL when data is inline */
};

struct sl_element {
    atomic_int refs;
    uint16_t n, cap;
    uint32_t inline_used; /* bytes used of the inline area */
    uint32_t inline_cap;
    uint32_t alloc_size;
    /* where the data came from, for messages: tensor 0 of origin is a
     * scalar string (a path); a reference, or NULL */
    struct sl_element *origin;
    struct sl_tensor t[]; /* cap tensors, then the inline data area */
};

/* A new element with room for ntensors and `inline_bytes` of inline data for
 * small tensors (scalars, short strings). Sets sl_last_error on failure. */
sl_element *sl__element_new(int ntensors, size_t inline_bytes);
/* A new element holding one int64 scalar (range, counter, enumerate's
 * index), or NULL with SL_ENOMEM. */
sl_element *sl__element_i64(int64_t v);
/* The same scalar followed by el's tensors, shared (enumerate's index,
 * rejection_resample's class), or NULL with SL_ENOMEM, the message
 * naming op. */
sl_element *sl__element_i64_then(int64_t v, const sl_element *el, const char *op);
/* Appends a tensor of nbytes for dtype/shape; inline if it fits, else from a
 * pooled buffer. Returns the tensor (data uninitialised) or NULL. */
struct sl_tensor *sl__element_push(sl_element *el, sl_dtype dtype, int ndim,
                                   const int64_t *shape, size_t nbytes);
/* Appends a view of `nbytes` at `data` owned by `buf` (retained). */
struct sl_tensor *sl__element_push_view(sl_element *el, sl_dtype dtype, int ndim,
                                        const int64_t *shape, void *data, size_t nbytes,
                                        sl__buf *buf);
/* Records that el's data came from the path in tensor 0 of src (a scalar
 * string), so that messages about el can name it whether or not el holds
 * the path itself. Retains src; replaces an earlier origin. */
void sl__element_set_origin(sl_element *el, sl_element *src);
/* The path el came from (not NUL-terminated, *len bytes), or NULL. */
const char *sl__element_origin(const sl_element *el, size_t *len);
/* Prefixes this thread's error message with "<origin path>: " when el has
 * an origin and the message does not begin with it already. */
void sl__element_error_prefix(const sl_element *el);
/* Row `row` of string tensor t (its items along the first dimension):
 * the bytes a copy takes, and the copy appended to el as a string tensor
 * of shape t->shape[1..]. Push returns 0 or SL_ENOMEM. */
size_t sl__string_row_bytes(const struct sl_tensor *t, int64_t row);
int sl__element_push_string_row(sl_element *el, const struct sl_tensor *t, int64_t row);
/* Total tensor bytes (what buffers account for). */
size_t sl__element_bytes(const sl_element *el);
int64_t sl__shape_count(int ndim, const int64_t *shape);
/* Whether a string tensor's offset table (read from a file) starts at 0,
 * never decreases and ends at its bytes' end, so sl_tensor_string stays
 * inside them. */
bool sl__strings_valid(const struct sl_tensor *t);
/* Writes "[2, 3]" etc. into buf. */
void sl__shape_str(char *buf, size_t n, int ndim, const int64_t *shape);

/* String tensors: offsets (count+1 uint64) then bytes. */
static inline const uint64_t *sl__str_offsets(const struct sl_tensor *t)
{
    return (const uint64_t *)t->data;
}

#endif
