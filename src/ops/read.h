/* Internal flags of sl_read_files, for the sources that build it. */
#ifndef SL_OPS_READ_H
#define SL_OPS_READ_H

#include "sluice.h"
#include <stddef.h>

/* A missing file (SL_ENOENT) is skipped with a warning whatever the error
 * policy: a rescanning folder's files may go between the scan and the
 * read. */
#define SL__READ_GONE_OK (1u << 31)

/* read over (path, int64 offset, int64 length, ...) elements: those bytes
 * of each file or URL, as (uint8 [length], the input's tensors after the
 * path[, path]), placed `lead` bytes into their buffer (the bytes before
 * are the reader's to write: a string tensor's offsets). */
sl_dataset *sl__read_ranges(sl_dataset *in, size_t lead, unsigned flags);
/* Spans (tensors 4 and 5 of a ranged element, sl_shuffle_windowed's
 * blocks of a URL): how many read keeps, and the largest it fetches whole. */
#define SL__READ_SPANS 32
#define SL__READ_MAX_SPAN ((uint64_t)16 << 20)

#endif
