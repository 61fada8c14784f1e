/*
 * One element as bytes: the record a cache file and a saved dataset's
 * chunks hold for each element (cache_file.h and saved_file.h put it in
 * their files), written and read by this one codec.
 *
 *   u32 tensor count, then per tensor:
 *     u32 dtype, u32 ndim, i64 shape[ndim], u64 nbytes, nbytes of data
 *
 * The data is the tensor's memory as is: a string tensor's offset table
 * (starting at 0: a view whose strings start after a gap is written from
 * 0) and its bytes; numbers in host order (little-endian everywhere
 * sluice runs). All header integers are little-endian.
 */
#ifndef SL_STORE_RECORD_H
#define SL_STORE_RECORD_H

#include <stddef.h>
#include <stdint.h>
#include "../core/element.h"

/* Writes el's record through write (exactly n bytes, or a negative code
 * with the message set). 0 or write's code. */
int sl__record_put(const sl_element *el, int (*write)(void *self, const void *p, size_t n),
                   void *self);

/* Where a record is read from: read gives exactly n bytes into dst (0, or
 * a negative code with the message set: an I/O error); the codec asks for
 * no more than `left`, which it lowers as it reads. */
typedef struct sl__record_src {
    int (*read)(void *self, void *dst, size_t n);
    void *self;
    uint64_t left;
} sl__record_src;

/* Reads one element: 0 and *out; SL_ECORRUPT with *why ("bad dtype",
 * "truncated record", ...) and *where (its offset from the record's
 * start); SL_ENOMEM; or read's code. */
int sl__record_get(sl__record_src *src, sl_element **out, const char **why, uint64_t *where);

#endif
