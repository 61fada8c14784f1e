/*
 * The tar format as the tar readers walk it (tar_shards.c in a stream,
 * tar_indexed.c by offset): 512-byte headers, each followed by its
 * member's data padded to 512 bytes, ended by zero blocks.
 *
 * Headers: POSIX ustar (name and prefix), GNU ('L' long names before the
 * member they name, base-256 sizes) and pax ('x' records path= and size=
 * for the next member; 'g' global records are skipped). Only regular
 * members are returned; directories, links and the like are passed over.
 *
 * The walker reads through a reader of the caller's: a stream, a file by
 * offset, or a buffer already in memory. It reads headers (and the long
 * names and pax records they carry) and never a member's data: the caller
 * reads or skips that, and asks for the next member where it ends.
 */
#ifndef SL_SOURCES_TAR_FORMAT_H
#define SL_SOURCES_TAR_FORMAT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "../core/bytes.h"
#include "record_index.h"

#define SL__TAR_BLOCK 512

typedef struct sl__tar_member {
    uint64_t start; /* its first header (a long name's or pax record's included) */
    uint64_t data;  /* where its data begins */
    uint64_t size;  /* of the data; the next header is at sl__tar_next_header() */
    sl__bytes name; /* NUL-terminated */
    size_t klen;    /* sample key: name[0..klen), the path up to its base name's
                       first '.'; 0 when the base name has no extension */
    size_t ext;     /* the extension: name + ext (when klen > 0) */
} sl__tar_member;

/* Reused between calls: the long name and pax path of the member ahead. */
typedef struct sl__tar_scratch {
    sl__bytes pax_path, long_name;
} sl__tar_scratch;

/* Where a fault found by the walker is: a fixed description and the
 * offset of the header it is in. */
typedef struct sl__tar_fault {
    const char *what;
    uint64_t at;
} sl__tar_fault;

/* The next regular member whose headers start at `at`: 0 with *m set,
 * 1 at the end of the archive (zero blocks, or the file's end at a header
 * boundary), SL__TAR_FAULT with *f set (no message: the caller names its
 * file), or the reader's negative code (its message set). */
#define SL__TAR_FAULT 2
int sl__tar_next(const sl__reader *r, uint64_t at, sl__tar_member *m, sl__tar_scratch *s,
                 sl__tar_fault *f);
/* The data's padding to the block size. */
static inline uint64_t sl__tar_padding(uint64_t size)
{
    return (SL__TAR_BLOCK - size % SL__TAR_BLOCK) % SL__TAR_BLOCK;
}
/* The offset of the header after member m. */
static inline uint64_t sl__tar_next_header(const sl__tar_member *m)
{
    return m->data + m->size + sl__tar_padding(m->size);
}
void sl__tar_member_free(sl__tar_member *m);
/* The key asked for (keys[i]: alternatives separated by ';') that
 * extension ext is, case aside, or -1. */
int sl__tar_key_slot(char *const *keys, int nkeys, const char *ext);
/* Appends a member's value (size bytes at data, in buf) to el as `type`:
 * SL_UINT8 a view [size]; SL_STRING a view, its offsets written into the
 * 16 bytes before data (the caller's to give); SL_INT64 the text parsed.
 * 0, 1 when the text is not an integer, or SL_ENOMEM. */
struct sl_element;
struct sl__buf;
int sl__tar_push_value(struct sl_element *el, int type, unsigned char *data, uint64_t size,
                       struct sl__buf *buf);
/* The index of a tar shard (an sl__index_builder): one record per sample,
 * from its first member's first header to the end of its last member's
 * padded data, a sample being the consecutive members that share a key
 * (members without an extension, and what is not a file, inside it). */
int sl__tar_index_build(const sl__reader *r, const char *path, sl__record_index *out);
void sl__tar_scratch_free(sl__tar_scratch *s);

#endif
