/*
 * Where each record of a shard starts and how long it is: what random
 * access over record files needs. The text form is DALI's tfrecord2idx
 * index, one "offset size" line per record (size: the whole record, its
 * framing included), which DALI's and other tools' users already have.
 */
#ifndef SL_SOURCES_RECORD_INDEX_H
#define SL_SOURCES_RECORD_INDEX_H

#include <stddef.h>
#include <stdint.h>
#include "../core/bytes.h"

typedef struct sl__record_index {
    int64_t count;
    sl__bytes offsets; /* uint64_t [count], increasing */
    sl__bytes sizes;   /* uint32_t [count] */
} sl__record_index;

static inline uint64_t sl__record_offset(const sl__record_index *x, int64_t i)
{
    return ((const uint64_t *)(const void *)x->offsets.p)[i];
}

static inline uint32_t sl__record_size(const sl__record_index *x, int64_t i)
{
    return ((const uint32_t *)(const void *)x->sizes.p)[i];
}

/* Parses index text (`name` in messages) for a shard of shard_size bytes:
 * every line "offset size", records in order, not overlapping, each at
 * least min_size bytes, the last ending at the shard's end. 0, or
 * SL_ECORRUPT naming the index, the line and the fault; SL_ENOMEM. */
int sl__record_index_parse(const char *text, size_t len, uint64_t shard_size, uint32_t min_size,
                           const char *name, sl__record_index *out);
/* Builds the index of a TFRecord shard (an open fd of `size` bytes,
 * `path` in messages) in one pass over its headers, each length CRC
 * checked. 0, SL_ECORRUPT naming the shard and the offset, SL_EIO. */
int sl__tfrecord_index_build(int fd, uint64_t size, const char *path, sl__record_index *out);
/* Writes idx as text to path, atomically (a temporary file renamed). */
int sl__record_index_write(const sl__record_index *idx, const char *path);
void sl__record_index_free(sl__record_index *idx);

#endif
