/*
 * Sequential streams over one file, for the record readers (TFRecord, tar):
 * large chunk-sized reads through an I/O engine of the stream's own, a few
 * in flight ahead of the reader, inflated as they are read when the file
 * is compressed (zlib or gzip). The thread reading waits only when the
 * chunk it needs has not arrived; no file is ever held whole in memory.
 *
 * Offsets are positions in the uncompressed stream. Every error message
 * names the file and the offset.
 */
#ifndef SL_RUNTIME_STREAM_H
#define SL_RUNTIME_STREAM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "io.h"

typedef struct sl__stream sl__stream;

#define SL__STREAM_DETECT (-1) /* compression: gzip if the file starts with its magic */

typedef struct sl__stream_opts {
    int backend;     /* sl_io_backend */
    int compression; /* sl_compression, or SL__STREAM_DETECT */
    size_t chunk;    /* bytes per read, 0: 128 KiB */
    int ahead;       /* reads in flight, 0: 4 */
    uint64_t start;  /* offset to start at (uncompressed: a seek; compressed: inflated past) */
    const sl__http_opts *http; /* for URLs (sl__is_url); NULL: the defaults */
    const struct sl__rcache_opts *cache; /* URLs read whole are kept there; NULL: not */
} sl__stream_opts;

/* The compression n bytes from a file's start look like: SL_COMPRESSION_GZIP
 * (gzip's magic), SL_COMPRESSION_ZLIB (a valid zlib header: two bytes that
 * plain data also matches about once in 500), else SL_COMPRESSION_NONE. */
int sl__stream_sniff(const unsigned char *p, size_t n);
/* 0 and *out, or a negative code with the message set (naming path).
 * A URL (http, https, s3, gs) streams through ranged GETs (io_http.c): 1 MiB
 * chunks unless o->chunk says, the first alone (it tells the size), and
 * messages name the URL without credentials or query. With o->cache, a
 * URL with a copy in the cache is read from it, and one streamed from its
 * start is copied into it as it goes (remote/cache.h). */
int sl__stream_open(const char *path, const sl__stream_opts *o, sl__stream **out);
/* Copies up to n bytes into dst; *got is less than n only at the end of the
 * stream. 0, or a code with the message set (the file, the offset). */
int sl__stream_read(sl__stream *s, void *dst, size_t n, size_t *got);
/* The same, also folding the bytes into *crc (CRC-32C), in the copy's pass
 * when the stream is not compressed. */
int sl__stream_read_crc(sl__stream *s, void *dst, size_t n, size_t *got, uint32_t *crc);
/* Drops n bytes (read, not copied); *skipped as *got above. */
int sl__stream_skip(sl__stream *s, uint64_t n, uint64_t *skipped);
/* The offset of the next byte, and whether the stream is compressed. */
uint64_t sl__stream_offset(const sl__stream *s);
bool sl__stream_compressed(const sl__stream *s);
/* The file's size (a URL's, as its first answer told it), and a URL's
 * validator (ETag, else Last-Modified; "" for a file or none). */
uint64_t sl__stream_size(const sl__stream *s);
const char *sl__stream_validator(const sl__stream *s);
const char *sl__stream_path(const sl__stream *s);
/* File bytes read so far (compressed bytes when compressed), and the I/O
 * backend it uses (SL_IO_URING / SL_IO_PREAD). */
int64_t sl__stream_file_bytes(const sl__stream *s);
int sl__stream_backend(const sl__stream *s);
/* Waits for its reads in flight and frees it. NULL ok. A URL streamed
 * into the cache and read to within 4 MiB of its end (a tar's padding, a
 * gzip's trailer) has the rest fetched so that its copy is kept. */
void sl__stream_close(sl__stream *s);

#endif
