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
#include "../runtime/stream.h"

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

/* A file read forward by offset, for the index builders: a local one by
 * pread (headers only), or a stream (a URL, read through once). */
typedef struct sl__reader {
    /* n bytes at offset `at` into dst: the count read (short only at the
     * end of the file), or a negative code with the message set. Offsets
     * only increase. */
    int64_t (*read)(void *ctx, uint64_t at, void *dst, size_t n);
    /* Whether the n bytes at `at` exist (a stream moves past them): 0,
     * 1 when the file ends first, or a negative code. */
    int (*skip)(void *ctx, uint64_t at, uint64_t n);
    void *ctx;
} sl__reader;

typedef struct sl__pread_ctx {
    int fd;
    uint64_t size;
    const char *path; /* in messages */
} sl__pread_ctx;

/* A reader over fd (ctx lives as long as it), or over stream s. */
sl__reader sl__pread_reader(sl__pread_ctx *ctx);
sl__reader sl__stream_reader(sl__stream *s);

/* Which end the records of a shard must reach: exactly its end (TFRecord),
 * or anywhere up to it (tar: the zero blocks after the last sample). */
enum { SL__INDEX_TO_END = 1u << 0 };

/* Parses index text (`name` in messages) for a shard of shard_size bytes
 * (UINT64_MAX: not known; the reads check): every line "offset size",
 * records in order, not overlapping, each at least min_size bytes, the
 * last ending as flags say. 0, or SL_ECORRUPT naming the index, the line
 * and the fault; SL_ENOMEM. */
int sl__record_index_parse(const char *text, size_t len, uint64_t shard_size, uint32_t min_size,
                           unsigned flags, const char *name, sl__record_index *out);

/* Builds a shard's index (`path` in messages) in one pass: 0, SL_ECORRUPT
 * naming the shard and the offset, or the reader's code. */
typedef int (*sl__index_builder)(const sl__reader *r, const char *path, sl__record_index *out);
/* TFRecord: over its records' headers, each length CRC checked. */
int sl__tfrecord_index_build(const sl__reader *r, const char *path, sl__record_index *out);

/* What an indexed format is, for sl__record_index_load. */
typedef struct sl__index_format {
    const char *who;   /* the source, in messages */
    uint32_t min_size; /* of a record */
    unsigned flags;    /* SL__INDEX_* */
    sl__index_builder build;
} sl__index_format;

/* The index of shard `path` (a file or a URL): from `given` (a file or a
 * URL) when not NULL; else "<path>.idx" when it is current (a file no
 * older than the shard; for a URL, one that exists and fits); else built
 * in one pass, and for a file written to "<path>.idx" (kept in memory
 * where that fails). 0 or a code with the message set. */
int sl__record_index_load(const char *path, const char *given, const sl__index_format *f,
                          sl__record_index *out);
/* Writes idx as text to path, atomically (a temporary file renamed). */
int sl__record_index_write(const sl__record_index *idx, const char *path);
void sl__record_index_free(sl__record_index *idx);
/* Appends a record: 0 or SL_ENOMEM (message set). */
int sl__record_index_push(sl__record_index *x, uint64_t offset, uint32_t size);

#endif
