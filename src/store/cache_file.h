/*
 * The file a cache keeps its pass in: its format, the writer and the
 * reader (cache.c is the op that decides when to write and what to serve).
 *
 * A file is written as "<path>.partial" under an exclusive flock (a second
 * writer gets SL_EBUSY) and renamed to path once complete, so path only
 * ever names a complete file. A reader serves it only after its header,
 * size and checksum prove it holds the pass of the pipeline with the
 * expected fingerprint.
 *
 * Format, all integers little-endian:
 *
 *   header (48 bytes)
 *     0  char[8]  magic "SLCACHE1"
 *     8  u32      format version (1)
 *    12  u32      header size (48)
 *    16  u64      sl_dataset_fingerprint() of the cached input
 *    24  u64      element count
 *    32  u64      payload length in bytes
 *    40  u32      CRC-32 (zlib's crc32) of the payload
 *    44  u32      reserved (0)
 *   payload: one record per element (record.h)
 *
 * Errors name the file: "cache(<path>): <what> [at offset N]".
 */
#ifndef SL_OPS_CACHE_FILE_H
#define SL_OPS_CACHE_FILE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/stat.h>
#include "../core/element.h"

typedef struct sl__cache_file {
    const char *path;  /* not owned: outlives the struct */
    char *partial;     /* "<path>.partial" */
    int fd;            /* -1: closed */
    bool locked;       /* this writer holds partial's lock */
    uint64_t fingerprint;
    uint64_t count;       /* elements written, or still to read */
    uint64_t payload_len; /* written so far, or from the header */
    uint32_t crc;
    unsigned char *buf;
    size_t buf_len, buf_pos;
    uint64_t off, load_off, end; /* reader: next byte, next byte to load, end */
} sl__cache_file;

/* For the file at path of the pipeline with `fingerprint`: 0, or
 * SL_ENOMEM. sl__cache_file_fini closes it, and removes an unfinished
 * write (while it still holds the lock); also after a failed init, and
 * on a zeroed struct, which it leaves alone. */
int sl__cache_file_init(sl__cache_file *f, const char *path, uint64_t fingerprint);
void sl__cache_file_fini(sl__cache_file *f);

/* Writing: creates and locks "<path>.partial" with a placeholder header.
 * 0, SL_EBUSY (another writer has it), or an I/O error. */
int sl__cache_file_create(sl__cache_file *f);
int sl__cache_file_put(sl__cache_file *f, const sl_element *el);
/* Completes the header, makes the file durable and renames it to path,
 * keeping the lock until after, so no other writer slips in. *st: the
 * file as written, to recognise it unchanged later. */
int sl__cache_file_commit(sl__cache_file *f, struct stat *st);

/* Reading: opens path. 1 with *st filled, 0 when there is no such file,
 * or an I/O error. */
int sl__cache_file_open(sl__cache_file *f, struct stat *st);
/* Whether the opened file holds this pipeline's pass: header, size and
 * (with check_crc) the payload's checksum. True leaves the reader at the
 * first element; false closes the file and puts the reason into why. */
bool sl__cache_file_check(sl__cache_file *f, const struct stat *st, bool check_crc, char *why,
                          size_t n);
/* Moves the reader to element `index`, at byte `off` (a saved position):
 * 0, or SL_ECORRUPT when that is not a place in the file. */
int sl__cache_file_seek(sl__cache_file *f, int64_t index, uint64_t off);
/* The next element: 0, SL_EOF after the last, or SL_ECORRUPT or an I/O
 * error naming the offset. */
int sl__cache_file_get(sl__cache_file *f, sl_element **out);

#endif
