/*
 * Allocation: user hooks, accounting, and pooled size classes.
 *
 * Pool blocks come in classes four per power of two from 64 B to 256 MiB,
 * so a recycled buffer wastes at most 25%. Each thread keeps a small cache
 * ("magazine") per class, touched without locks; it refills from and spills
 * to a shared free list per class in bulk, so the hot path takes a lock once
 * per many elements. Every MAG_GC_OPS operations a thread hands back what
 * its magazines held untouched since the last time (their low-water marks,
 * as jemalloc's tcache does), so that blocks one thread frees and another
 * allocates (file buffers: a producer reads, a worker decodes and frees)
 * travel back. Reused blocks keep their pages resident, which is the
 * point: faulting fresh pages in costs as much as decoding a small image.
 *
 * Blocks of 4 KiB to 256 KiB (records, tar members, I/O chunks) are carved
 * from 4 MiB slabs offered to transparent huge pages, so that the first
 * touch of many of them (a shuffle buffer of 1,024 records of 30 KB: 7,500
 * pages at ~14 us each here) costs a fault per 2 MiB instead. Their blocks
 * stay pooled (the shared lists' cap does not apply to them), and
 * sl_release_memory returns the slabs whose blocks are all back; the rest
 * keep their free blocks for reuse.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include "alloc.h"
#include "error.h"

#define NCLASSES 88           /* 64 B .. 256 MiB */
#define HUGE_CLASS 0xffff
#define MAG_BYTES (256u << 10) /* per class per thread */
#define MAG_MAX 64

/* ---- hooks and accounting ---- */

/* Buffers from this size on (batches of images: 38 MiB for 256 x 224 x
 * 224 x 3) are placed on 2 MiB boundaries and offered to transparent huge
 * pages: first touch then costs one fault per 2 MiB instead of one per
 * 4 KiB, which was most of a first epoch's extra time (sluice-bench's
 * per-epoch page faults show it). Where THP is off the advice is ignored. */
#define HUGE_ALLOC_MIN ((size_t)8 << 20)
#define HUGE_PAGE ((size_t)2 << 20)

static void *default_alloc(void *user, size_t size, size_t align)
{
    (void)user;
    if (size >= HUGE_ALLOC_MIN && align <= HUGE_PAGE) {
        size_t rounded = (size + HUGE_PAGE - 1) & ~(HUGE_PAGE - 1);
        void *p = aligned_alloc(HUGE_PAGE, rounded);
#ifdef MADV_HUGEPAGE
        if (p)
            madvise(p, rounded, MADV_HUGEPAGE);
#endif
        return p;
    }
    size_t rounded = (size + align - 1) & ~(align - 1);
    return aligned_alloc(align, rounded ? rounded : align);
}

static void default_free(void *user, void *p, size_t size, size_t align)
{
    (void)user, (void)size, (void)align;
    free(p);
}

static sl_allocator hooks = {default_alloc, default_free, NULL};
static atomic_llong live_bytes;

void *sl__alloc_aligned(size_t size, size_t align)
{
    void *p = hooks.alloc(hooks.user, size, align);
    if (!p) {
        sl__set_error(SL_ENOMEM, "out of memory (allocating %zu bytes)", size);
        return NULL;
    }
    atomic_fetch_add_explicit(&live_bytes, (long long)size, memory_order_relaxed);
    return p;
}

void sl__free_aligned(void *p, size_t size, size_t align)
{
    if (!p)
        return;
    atomic_fetch_sub_explicit(&live_bytes, (long long)size, memory_order_relaxed);
    hooks.free(hooks.user, p, size, align);
}

void *sl__alloc(size_t size)
{
    return sl__alloc_aligned(size, 16);
}

void *sl__calloc(size_t n, size_t size)
{
    if (size && n > SIZE_MAX / size) {
        sl__set_error(SL_ENOMEM, "out of memory (allocating %zu x %zu bytes)", n, size);
        return NULL;
    }
    void *p = sl__alloc(n * size);
    if (p)
        memset(p, 0, n * size);
    return p;
}

void sl__free(void *p, size_t size)
{
    sl__free_aligned(p, size, 16);
}

char *sl__strdup(const char *s)
{
    if (!s)
        return NULL;
    size_t n = strlen(s) + 1;
    char *d = sl__alloc(n);
    if (d)
        memcpy(d, s, n);
    return d;
}

void sl__strfree(char *s)
{
    if (s)
        sl__free(s, strlen(s) + 1);
}

SL_API int64_t sl_memory_in_use(void)
{
    return atomic_load(&live_bytes);
}

int sl__alloc_set_hooks(const sl_allocator *a)
{
    if (atomic_load(&live_bytes) != 0)
        return sl__set_error(SL_EBUSY, "sl_set_allocator: the library still holds %lld bytes",
                             (long long)atomic_load(&live_bytes));
    if (a && (!a->alloc || !a->free))
        return sl__set_error(SL_EINVAL, "sl_set_allocator: alloc and free are required");
    hooks = a ? *a : (sl_allocator){default_alloc, default_free, NULL};
    return 0;
}

/* ---- size classes ---- */

static inline size_t class_size(unsigned c)
{
    return (size_t)(4 + c % 4) << (c / 4 + 4);
}

static inline unsigned class_of(size_t s)
{
    if (s <= 64)
        return 0;
    unsigned e = 63 - (unsigned)__builtin_clzll((unsigned long long)(s - 1));
    size_t step = (size_t)1 << (e - 2);
    return 4 * (e - 6) + (unsigned)((s - ((size_t)1 << e) + step - 1) / step);
}

typedef struct block {
    struct block *next;
} block;

typedef struct shared_class {
    pthread_mutex_t mu;
    block *head;
    size_t count;
} shared_class;

static shared_class shared[NCLASSES];
static pthread_once_t shared_once = PTHREAD_ONCE_INIT;
static pthread_key_t flush_key;
/* Bytes parked in shared lists; above the cap, frees go to the allocator. */
static atomic_llong shared_bytes;
#define SHARED_CAP ((long long)1 << 30)

typedef struct magazine {
    void *items[MAG_MAX];
    unsigned n;
    unsigned low; /* the fewest items held since the last collection */
} magazine;

static _Thread_local magazine mags[NCLASSES];
static _Thread_local int mags_registered;
/* Pool operations on this thread since its magazines were last collected. */
static _Thread_local unsigned mag_ops;
/* Without collection, a thread that frees a class it never allocates (a
 * pool worker freeing the reader's file buffers, the consumer freeing
 * batches) kept those blocks while the allocating thread (a new producer
 * each epoch) found the shared list empty and allocated afresh: the pools
 * crept towards threads x classes x MAG_BYTES (tests/test_memory_slope.c). */
#define MAG_GC_OPS 256u

static void flush_destructor(void *arg)
{
    (void)arg;
    sl__pool_flush_thread();
    /* a later destructor (another library's, at thread exit) may still free
     * into this thread's magazines: the next put registers again, and
     * glibc runs the destructor once more */
    mags_registered = 0;
}

static void shared_init(void)
{
    for (unsigned i = 0; i < NCLASSES; i++)
        pthread_mutex_init(&shared[i].mu, NULL);
    pthread_key_create(&flush_key, flush_destructor);
}

static inline unsigned mag_limit(unsigned c)
{
    size_t per = MAG_BYTES / class_size(c);
    return per > MAG_MAX ? MAG_MAX : (unsigned)per;
}

static bool slab_class(unsigned c);

static void shared_push(unsigned c, void **items, unsigned n)
{
    shared_class *sc = &shared[c];
    size_t sz = class_size(c);
    bool capped = !slab_class(c); /* a slab's block is kept: see slabs_release */
    unsigned kept = 0;
    pthread_mutex_lock(&sc->mu);
    for (unsigned i = 0; i < n; i++) {
        if (capped && atomic_load_explicit(&shared_bytes, memory_order_relaxed) +
                              (long long)sz > SHARED_CAP)
            break;
        block *b = items[i];
        b->next = sc->head;
        sc->head = b;
        sc->count++;
        atomic_fetch_add_explicit(&shared_bytes, (long long)sz, memory_order_relaxed);
        kept++;
    }
    pthread_mutex_unlock(&sc->mu);
    for (unsigned i = kept; i < n; i++)
        sl__free_aligned(items[i], sz, SL__ALIGN);
}

static unsigned shared_pop(unsigned c, void **items, unsigned want)
{
    shared_class *sc = &shared[c];
    unsigned n = 0;
    pthread_mutex_lock(&sc->mu);
    while (n < want && sc->head) {
        block *b = sc->head;
        sc->head = b->next;
        sc->count--;
        items[n++] = b;
    }
    pthread_mutex_unlock(&sc->mu);
    atomic_fetch_sub_explicit(&shared_bytes, (long long)(n * class_size(c)),
                              memory_order_relaxed);
    return n;
}

/* ---- slabs ---- */

#define SLAB_BYTES ((size_t)4 << 20)
#define SLAB_MIN ((size_t)4 << 10)
#define SLAB_MAX ((size_t)256 << 10)

typedef struct slab {
    atomic_long live; /* blocks carved and not yet freed, +1 while carving */
    long parked;      /* slabs_release's count of its blocks in the pool */
} slab;
#define SLAB_HEAD SL__ALIGN /* the header's room at the slab's start */

static pthread_mutex_t slab_mu = PTHREAD_MUTEX_INITIALIZER;
static slab *slab_cur; /* carving from here, under slab_mu */
static size_t slab_used;

/* Whether blocks of this class come from slabs: with the library's own
 * allocator only (a user's allocator sees every block, as before; it can
 * change only while nothing is allocated, so a block's answer holds for
 * its life), and not under AddressSanitizer, which would not see
 * neighbouring blocks overrun each other. */
#if defined(__SANITIZE_ADDRESS__)
#define SL__ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) /* clang's way of saying it */
#define SL__ASAN 1
#endif
#endif

static bool slab_class(unsigned c)
{
#ifdef SL__ASAN
    (void)c;
    return false;
#else
    size_t sz = class_size(c);
    return sz >= SLAB_MIN && sz <= SLAB_MAX && hooks.alloc == default_alloc;
#endif
}

static void slab_unref(slab *sb)
{
    if (atomic_fetch_sub_explicit(&sb->live, 1, memory_order_acq_rel) == 1)
        sl__free_aligned(sb, SLAB_BYTES, SLAB_BYTES);
}

static void *slab_get(size_t size)
{
    pthread_mutex_lock(&slab_mu);
    if (!slab_cur || slab_used + size > SLAB_BYTES) {
        slab *sb = sl__alloc_aligned(SLAB_BYTES, SLAB_BYTES);
        if (!sb) {
            pthread_mutex_unlock(&slab_mu);
            return NULL;
        }
#ifdef MADV_HUGEPAGE
        madvise(sb, SLAB_BYTES, MADV_HUGEPAGE);
#endif
        atomic_init(&sb->live, 1);
        if (slab_cur)
            slab_unref(slab_cur); /* full: freed with its last block */
        slab_cur = sb;
        slab_used = SLAB_HEAD;
    }
    void *p = (unsigned char *)slab_cur + slab_used;
    slab_used += size; /* a multiple of 1 KiB from 4 KiB on */
    atomic_fetch_add_explicit(&slab_cur->live, 1, memory_order_relaxed);
    pthread_mutex_unlock(&slab_mu);
    return p;
}

static slab *slab_of(void *p)
{
    return (slab *)((uintptr_t)p & ~(uintptr_t)(SLAB_BYTES - 1));
}

/* Takes every block of class c out of the shared list, as a chain. */
static block *shared_take_all(unsigned c)
{
    shared_class *sc = &shared[c];
    pthread_mutex_lock(&sc->mu);
    block *b = sc->head;
    size_t n = sc->count;
    sc->head = NULL;
    sc->count = 0;
    pthread_mutex_unlock(&sc->mu);
    atomic_fetch_sub_explicit(&shared_bytes, (long long)(n * class_size(c)),
                              memory_order_relaxed);
    return b;
}

/* Returns the slabs whose blocks are all in the shared lists: a block
 * freed on its own would only pin its slab, its room lost until the
 * slab's last block came back, so the others stay pooled for reuse. */
static void slabs_release(void)
{
    static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER; /* one at a time */
    pthread_mutex_lock(&mu);
    block *all[NCLASSES] = {0};
    for (unsigned c = 0; c < NCLASSES; c++)
        if (slab_class(c))
            all[c] = shared_take_all(c);
    for (unsigned c = 0; c < NCLASSES; c++)
        for (block *b = all[c]; b; b = b->next)
            slab_of(b)->parked++;
    /* the slab being carved holds a reference of its own: never all
     * parked, so it is retired first when nothing of it is out */
    pthread_mutex_lock(&slab_mu);
    if (slab_cur && atomic_load(&slab_cur->live) == slab_cur->parked + 1) {
        slab_unref(slab_cur);
        slab_cur = NULL;
    }
    pthread_mutex_unlock(&slab_mu);
    /* decide every slab before any is freed: all parked, or kept */
    for (unsigned c = 0; c < NCLASSES; c++)
        for (block *b = all[c]; b; b = b->next) {
            slab *sb = slab_of(b);
            if (sb->parked > 0 && sb->parked == atomic_load(&sb->live))
                sb->parked = -1;
        }
    for (unsigned c = 0; c < NCLASSES; c++) {
        void *keep[64];
        unsigned n = 0;
        for (block *b = all[c], *next; b; b = next) {
            next = b->next;
            slab *sb = slab_of(b);
            if (sb->parked < 0) {
                slab_unref(sb); /* its last block here frees it */
                continue;
            }
            sb->parked = 0; /* counted afresh next time */
            keep[n++] = b;
            if (n == 64) {
                shared_push(c, keep, n);
                n = 0;
            }
        }
        if (n)
            shared_push(c, keep, n);
    }
    pthread_mutex_unlock(&mu);
}

/* Spills each magazine's untouched bottom (its low-water mark of items)
 * to the shared lists; the items above it, the ones in use, stay. */
static void mags_collect(void)
{
    mag_ops = 0;
    for (unsigned c = 0; c < NCLASSES; c++) {
        magazine *m = &mags[c];
        unsigned k = m->low < m->n ? m->low : m->n;
        if (k) {
            shared_push(c, m->items, k);
            memmove(m->items, m->items + k, (m->n - k) * sizeof m->items[0]);
            m->n -= k;
        }
        m->low = m->n;
    }
}

static void *class_get(unsigned c)
{
    pthread_once(&shared_once, shared_init);
    magazine *m = &mags[c];
    if (++mag_ops >= MAG_GC_OPS)
        mags_collect();
    if (m->n) {
        if (--m->n < m->low)
            m->low = m->n;
        return m->items[m->n];
    }
    unsigned lim = mag_limit(c);
    if (lim) {
        if (!mags_registered) {
            mags_registered = 1;
            pthread_setspecific(flush_key, (void *)1);
        }
        m->n = shared_pop(c, m->items, (lim + 1) / 2);
        if (m->n)
            return m->items[--m->n];
    } else {
        void *one;
        if (shared_pop(c, &one, 1))
            return one;
    }
    return slab_class(c) ? slab_get(class_size(c)) : sl__alloc_aligned(class_size(c), SL__ALIGN);
}

static void class_put(unsigned c, void *p)
{
    magazine *m = &mags[c];
    if (++mag_ops >= MAG_GC_OPS)
        mags_collect();
    unsigned lim = mag_limit(c);
    if (m->n < lim) {
        if (!mags_registered) {
            mags_registered = 1;
            pthread_setspecific(flush_key, (void *)1);
        }
        m->items[m->n++] = p;
        return;
    }
    if (lim > 1) {
        /* spill half so the next frees and gets both stay lock-free */
        unsigned half = lim / 2;
        shared_push(c, m->items + m->n - half, half);
        m->n -= half;
        if (m->low > m->n)
            m->low = m->n;
        m->items[m->n++] = p;
        return;
    }
    shared_push(c, &p, 1);
}

void sl__pool_flush_thread(void)
{
    pthread_once(&shared_once, shared_init);
    for (unsigned c = 0; c < NCLASSES; c++) {
        if (mags[c].n)
            shared_push(c, mags[c].items, mags[c].n);
        mags[c].n = 0;
        mags[c].low = 0;
    }
}

void sl__pool_release_shared(void)
{
    pthread_once(&shared_once, shared_init);
    for (unsigned c = 0; c < NCLASSES; c++) {
        void *items[64];
        unsigned n;
        while (!slab_class(c) && (n = shared_pop(c, items, 64)) > 0)
            for (unsigned i = 0; i < n; i++)
                sl__free_aligned(items[i], class_size(c), SL__ALIGN);
    }
    slabs_release();
}

void *sl__obj_get(size_t size)
{
    if (size > class_size(NCLASSES - 1))
        return sl__alloc_aligned(size, SL__ALIGN);
    return class_get(class_of(size));
}

void sl__obj_put(void *p, size_t size)
{
    if (!p)
        return;
    if (size > class_size(NCLASSES - 1)) {
        sl__free_aligned(p, size, SL__ALIGN);
        return;
    }
    class_put(class_of(size), p);
}

/* ---- buffers ---- */

sl__buf *sl__buf_get(size_t size)
{
    size_t total = sizeof(sl__buf) + size;
    if (total < size) {
        sl__set_error(SL_ENOMEM, "buffer size overflow");
        return NULL;
    }
    sl__buf *b;
    uint16_t cls;
    size_t cap;
    if (total > class_size(NCLASSES - 1)) {
        b = sl__alloc_aligned(total, 4096);
        cls = HUGE_CLASS;
        cap = size;
    } else {
        cls = (uint16_t)class_of(total);
        b = class_get(cls);
        cap = class_size(cls) - sizeof(sl__buf);
    }
    if (!b)
        return NULL;
    atomic_init(&b->refs, 1);
    b->cls = cls;
    b->flags = 0;
    b->cap = cap;
    b->next = NULL;
    return b;
}

void sl__buf_release(sl__buf *b)
{
    if (!b || atomic_fetch_sub_explicit(&b->refs, 1, memory_order_acq_rel) != 1)
        return;
    if (b->cls == HUGE_CLASS)
        sl__free_aligned(b, sizeof(sl__buf) + b->cap, 4096);
    else
        class_put(b->cls, b);
}
