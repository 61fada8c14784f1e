/*
 * The files of a saved dataset (sl_save, sl_load, sl_snapshot): their
 * format, the writer and the reader. iterator/save_dataset.c, ops/load.c and
 * ops/snapshot.c decide when to write and what to serve.
 *
 * A saved dataset is a directory:
 *
 *   manifest           written last (renamed from manifest.partial): a
 *                      directory without one is not a saved dataset
 *   shard-00000000.sls one file per shard index the shard function used
 *
 * The manifest is text, one "key value" line each, in this order:
 *
 *   sluice-saved-dataset 1      the format version
 *   fingerprint 0123abcd...     sl_dataset_fingerprint of what was saved (hex)
 *   compression none            none, zlib or gzip
 *   structure {a: int64[]}      sl_structure_format of its elements ("?": unknown)
 *   elements 1000
 *   shards 4
 *   shard 0 250 123456          per shard: its index, elements, file size
 *   crc32c 89abcdef             CRC-32C of every byte before this line
 *
 * A shard file: magic "SLSHARD1", u32 version (1), u32 compression (as
 * sl_compression); then chunks, each
 *
 *   u32 stored length, u32 raw length, u32 records, u32 CRC-32C of the
 *   stored bytes, u32 CRC-32C of the 16 bytes before it; the stored
 *   bytes (the raw bytes, or one zlib stream or gzip member of them).
 *
 * A chunk's raw bytes are its records, each: u64 the element's index
 * (its position in the saved pass), u32 length, then the element's record
 * (record.h). Indices rise within a shard, so the
 * reader merges the shards back into the saved order whatever the shard
 * function did. All integers are little-endian.
 *
 * Errors name the file: "load(<dir>/shard-00000002.sls): <what> at offset N".
 */
#ifndef SL_OPS_SAVED_FILE_H
#define SL_OPS_SAVED_FILE_H

#include <stdbool.h>
#include <stdint.h>
#include "../core/element.h"

/* At most this many shard files, with indices below SL__SAVE_MAX_INDEX. */
#define SL__SAVE_MAX_SHARDS 4096
#define SL__SAVE_MAX_INDEX 100000000

/* ---- writing ---- */

typedef struct sl__save_writer sl__save_writer;

/* Creates the directory dir (which must not exist) and starts nthreads
 * writer threads: shard s is written by thread s % nthreads, which
 * encodes, compresses (compression: an sl_compression) and writes its
 * chunks. op names the caller in messages. 0 or a negative code. */
int sl__save_writer_create(const char *op, const char *dir, int compression, int nthreads,
                           sl__save_writer **out);
/* Queues el (borrowed; retained until written) as the next element of
 * the pass, for shard `shard`. Blocks while that thread's queue is full.
 * 0, or the first error of any writer thread (message set). One thread. */
int sl__save_writer_put(sl__save_writer *w, int64_t shard, sl_element *el);
/* Writes what is queued, makes the shards durable, then the manifest
 * (structure may be NULL: not known). 0 or a negative code. */
int sl__save_writer_finish(sl__save_writer *w, uint64_t fingerprint, const sl_structure *s);
/* Stops and joins the threads (what is queued is dropped) and frees w;
 * the files stay. NULL ok. */
void sl__save_writer_free(sl__save_writer *w);

/* ---- reading ---- */

typedef struct sl__saved_shard {
    int64_t index, elements;
    uint64_t size;
} sl__saved_shard;

/* A manifest, read and checked. */
typedef struct sl__saved {
    char *dir;
    char *op; /* the caller's name, for messages */
    uint64_t fingerprint;
    int compression;
    sl_structure *structure; /* NULL: not known */
    int64_t elements;
    int nshards;
    sl__saved_shard *shards; /* by index, rising */
} sl__saved;

/* Reads dir's manifest: 1 with *out, 0 when there is none (not a saved
 * dataset, or an unfinished one), or a negative code: SL_ECORRUPT for a
 * damaged manifest, SL_EUNSUPPORTED for a newer format, each naming the
 * file. */
int sl__saved_open(const char *op, const char *dir, sl__saved **out);
/* The same from the manifest's text (n bytes), for the fuzzer. */
int sl__saved_parse(const char *op, const char *dir, const char *text, size_t n,
                    sl__saved **out);
void sl__saved_free(sl__saved *s);

typedef struct sl__saved_reader sl__saved_reader;

/* Opens s's shard files (their headers and sizes checked against the
 * manifest) to read the elements in saved order, from the position where
 * consumed[i] records of shard i are taken (NULL: the start). s must
 * outlive the reader. 0 or a negative code naming the file. */
int sl__saved_reader_create(const sl__saved *s, const int64_t *consumed, sl__saved_reader **out);
/* The next element in saved order: 0, SL_EOF, or SL_ECORRUPT / an I/O
 * error naming the file and offset. After SL_ECORRUPT the damaged chunk's
 * records are dropped and the next call goes on after them (an error
 * policy may skip them). */
int sl__saved_reader_next(sl__saved_reader *r, sl_element **out);
/* The records taken from each shard so far (returned or dropped), its
 * s->nshards values into f: the position an op saves. */
void sl__saved_reader_position(const sl__saved_reader *r, int64_t *f);
/* A reader from such fields (NULL: the start), each checked against its
 * shard's size first: a bad one is SL_ECORRUPT naming the saved state. */
int sl__saved_reader_resume(const sl__saved *s, const int64_t *f, sl__saved_reader **out);
void sl__saved_reader_free(sl__saved_reader *r);

/* ---- random access ---- */

/* Where every element of a saved dataset lies (its chunk, its record's
 * place in the chunk's raw bytes), from one pass over every chunk of every
 * shard, each chunk's checksum checked and its records walked (not
 * decoded). Element indices must be 0 .. elements-1, each once. */
typedef struct sl__saved_index sl__saved_index;
/* 0 and *out, or a negative code naming the file and the offset. */
int sl__saved_index_build(const sl__saved *s, sl__saved_index **out);
/* Element i, read and decoded: one read for an uncompressed dataset; a
 * compressed one inflates the record's chunk (the last few are kept).
 * Any thread, concurrently. 0, or an error naming the file: SL_ECORRUPT
 * for a record that no longer decodes (the file changed since). */
int sl__saved_index_get(sl__saved_index *x, int64_t i, sl_element **out);
void sl__saved_index_free(sl__saved_index *x);

/* Removes a saved dataset's directory (its manifest first, so it is never
 * read half-removed), or a partial one. Best effort. */
void sl__saved_remove(const char *dir);

#endif
