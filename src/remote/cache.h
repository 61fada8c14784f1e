/*
 * The local shard cache (cache.c): remote objects read whole are kept in a
 * folder and read from there next time, as MosaicML Streaming's `local` +
 * `cache_limit`.
 *
 * An object's copy is named by a hash of its endpoint and its URL as shown
 * (no credentials, no query): `<hash>` holds the bytes and `<hash>.meta`
 * the size and the ETag (or Last-Modified) they were read with. A writer
 * fills `.tmp-<hash>-<pid>-<n>` and renames it when the object has come
 * whole, size and validator checked, so a reader never sees a partial
 * copy, and a writer killed midway leaves only its temporary file, which
 * the next eviction removes once its process is gone. Renames and
 * evictions hold an flock on `<dir>/.lock`, so the processes of a host
 * share the folder. Past max_bytes (0: no limit), the copies used least
 * recently (by mtime, refreshed at each use) go first.
 */
#ifndef SL_REMOTE_CACHE_H
#define SL_REMOTE_CACHE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct sl__rcache_opts {
    const char *dir; /* NULL or "": no cache */
    int64_t max_bytes;
} sl__rcache_opts;

typedef struct sl__rcache_writer sl__rcache_writer;

/* The cache's name for url (hex, 64 digits and a NUL), and the URL as
 * messages show it (shown: cap bytes); false for a bad URL, or when
 * there is no SHA-256 (libcrypto failed, or a build without libcurl). */
bool sl__rcache_key(const char *url, char key[65], char *shown, size_t cap);
/* A copy of key: its open file (O_RDONLY) and size, its use recorded;
 * -1 when there is none (or it does not check out). */
int sl__rcache_open(const sl__rcache_opts *o, const char *key, uint64_t *size);
/* A writer for key, or NULL (no room for a file: the read goes on
 * without caching). */
sl__rcache_writer *sl__rcache_begin(const sl__rcache_opts *o, const char *key);
/* Appends n bytes; false when the copy had to be given up (it is then
 * dropped by the commit). */
bool sl__rcache_write(sl__rcache_writer *w, const void *p, size_t n);
/* Publishes the copy when size bytes came, with this validator (ETag or
 * Last-Modified), then evicts past the limit; drops it otherwise. Frees w.
 * NULL ok. */
void sl__rcache_commit(sl__rcache_writer *w, uint64_t size, const char *validator);
/* Drops the copy being written. NULL ok. */
void sl__rcache_abort(sl__rcache_writer *w);

#endif
