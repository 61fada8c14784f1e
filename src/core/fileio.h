/* Whole reads and writes on a descriptor, retried through EINTR and short
 * counts, and making a rename durable: what the file formats (the cache's,
 * a saved dataset's) share. */
#ifndef SL_CORE_FILEIO_H
#define SL_CORE_FILEIO_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* Writes all n bytes: 0, or -1 with errno set. */
int sl__write_all(int fd, const void *p, size_t n);
/* Reads up to n bytes at off, fewer only at the end of the file: the
 * count, or -1 with errno set. */
ssize_t sl__pread_full(int fd, void *p, size_t n, uint64_t off);
/* Syncs the directory that holds path, so a rename into it is durable.
 * Best effort: the rename is visible already. */
void sl__sync_parent(const char *path);

#endif
