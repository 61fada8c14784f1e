/* All library memory comes from here: the user's hooks, byte accounting,
 * and size-class pools of reference-counted buffers that recycle pages
 * (faulting a fresh page in costs about as much as decoding a small
 * image). */
#ifndef SL_CORE_ALLOC_H
#define SL_CORE_ALLOC_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include "sluice.h"

#define SL__ALIGN 64

/* Raw allocation through the hooks. size 0 returns a unique non-NULL
 * pointer. Sets sl_last_error on failure. */
void *sl__alloc(size_t size);
void *sl__calloc(size_t n, size_t size);
void sl__free(void *p, size_t size);
void *sl__alloc_aligned(size_t size, size_t align);
void sl__free_aligned(void *p, size_t size, size_t align);
/* Copy of a NUL-terminated string (sl__free(p, strlen(p)+1)), NULL in NULL out. */
char *sl__strdup(const char *s);
void sl__strfree(char *s);

/* A reference-counted buffer from a size-class pool. data is 64-byte
 * aligned and `cap` bytes long. */
typedef struct sl__buf {
    atomic_int refs;
    uint16_t cls;       /* size class, or SL__BUF_HUGE */
    uint16_t flags;
    size_t cap;
    struct sl__buf *next; /* pool free-list link */
    unsigned char pad[SL__ALIGN - sizeof(atomic_int) - 4 - sizeof(size_t) - sizeof(void *)];
    unsigned char data[];
} sl__buf;

sl__buf *sl__buf_get(size_t size); /* refs = 1, or NULL (SL_ENOMEM set) */
static inline sl__buf *sl__buf_retain(sl__buf *b)
{
    atomic_fetch_add_explicit(&b->refs, 1, memory_order_relaxed);
    return b;
}
void sl__buf_release(sl__buf *b); /* NULL ok; back to the pool at zero */

/* Small fixed-size objects (elements, tasks) share the same pools. */
void *sl__obj_get(size_t size);
void sl__obj_put(void *p, size_t size);

/* Flushes this thread's cache into the shared pools. Called at thread exit
 * for library threads, and by sl_release_memory(). */
void sl__pool_flush_thread(void);
/* sl_set_allocator once the pools are emptied (runtime/pool.c does that
 * first, with the workers' help): SL_EBUSY while the library holds
 * memory, SL_EINVAL for hooks without alloc or free. */
int sl__alloc_set_hooks(const sl_allocator *a);
/* Returns the shared pools' blocks to the allocator. sl_release_memory()
 * (runtime/pool.c, which also has the pool workers flush) ends with it. */
void sl__pool_release_shared(void);

#endif
