/*
 * io_uring backend: reads are queued as SQEs and go to the kernel in one
 * io_uring_submit per batch; completions are taken in batches.
 *
 * Accounting: every read outstanding (the front's count, io.c) is, at any
 * moment, in exactly one of three places: queued in the SQ ring and not
 * yet consumed by the kernel (io_uring_sq_ready), in the kernel, or
 * finished in the CQ ring (io_uring_cq_ready). Knowing how many are in the
 * kernel tells whether waiting for a completion can ever return, and what
 * close must wait for. A completion lands whenever the kernel posts it (an
 * io-wq worker on another CPU, task work as this thread leaves the
 * kernel), not only inside our calls, so the CQ ring is read once per
 * decision (ring_view): counting a completion that landed between two
 * reads of it made a read in flight look like none, and its wait fail.
 *
 * Closed rings with nothing left in them go to a small cache that the next
 * open of the same depth takes: record readers open an engine per shard,
 * and a ring costs system calls and mappings to set up.
 */
#ifdef SLUICE_NO_URING
/* Built without liburing (SLUICE_WITH_IO_URING=OFF): reads use pread. */
#include <errno.h>
#include "../core/error.h"
#include "io.h"

int sl__io_uring_open(int depth, sl__io **out, int *sys_err)
{
    (void)depth;
    *out = NULL;
    *sys_err = ENOSYS;
    return SL_EUNSUPPORTED;
}
#else
#include <errno.h>
#include <liburing.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "../core/alloc.h"
#include "../core/error.h"
#include "io.h"

#define PEEK_BATCH 64
#define CACHE_MAX 16

typedef struct uring_io {
    sl__io base;
    struct io_uring ring;
    struct uring_io *next; /* in the cache */
} uring_io;

static pthread_mutex_t cache_mu = PTHREAD_MUTEX_INITIALIZER;
static uring_io *cache;
static int cached;

/* Where the reads outstanding are, from one reading of each ring. */
typedef struct ring_view {
    int queued, done, in_kernel;
} ring_view;

static ring_view look(uring_io *u)
{
    ring_view v;
    v.done = (int)io_uring_cq_ready(&u->ring);
    v.queued = (int)io_uring_sq_ready(&u->ring);
    v.in_kernel = u->base.outstanding - v.queued - v.done;
    return v;
}

static int uring_submit(sl__io *base)
{
    uring_io *u = (uring_io *)base;
    while (io_uring_sq_ready(&u->ring) > 0) {
        int r = io_uring_submit(&u->ring);
        if (r > 0 || r == -EINTR)
            continue;
        /* the kernel is short of resources (or took nothing): what is left
         * stays queued and goes with the next submit or reap */
        if (r == 0 || r == -EAGAIN || r == -EBUSY)
            return 0;
        return sl__set_error(SL_EIO, "io_uring_submit: %s", strerror(-r));
    }
    return 0;
}

static int uring_prep(sl__io *base, int fd, void *buf, size_t len, uint64_t off, void *user)
{
    uring_io *u = (uring_io *)base;
    struct io_uring_sqe *sqe = io_uring_get_sqe(&u->ring);
    if (!sqe) {
        int rc = uring_submit(base);
        if (rc < 0)
            return rc;
        sqe = io_uring_get_sqe(&u->ring);
        if (!sqe)
            return sl__set_error(SL_EBUSY, "io_uring: submission queue full");
    }
    io_uring_prep_read(sqe, fd, buf, (unsigned)len, off);
    io_uring_sqe_set_data(sqe, user);
    return 0;
}

static void nap(void)
{
    struct timespec ts = {0, 1000000};
    nanosleep(&ts, NULL);
}

/* Blocks until the CQ ring holds at least one completion (the front saw
 * reads outstanding). */
static int wait_one(uring_io *u)
{
    for (;;) {
        ring_view v = look(u);
        if (v.done)
            return 0;
        if (v.in_kernel < 0 || (v.in_kernel == 0 && !v.queued))
            return sl__set_error(SL_EINTERNAL,
                                 "io_uring: %d reads outstanding, the ring holds %d",
                                 u->base.outstanding, v.queued + v.done);
        if (v.in_kernel == 0) {
            nap(); /* the kernel refused the queued reads for now */
            int rc = uring_submit(&u->base);
            if (rc < 0)
                return rc;
            continue;
        }
        struct io_uring_cqe *cqe;
        int r = io_uring_wait_cqe(&u->ring, &cqe);
        if (r < 0 && r != -EINTR && r != -EAGAIN)
            return sl__set_error(SL_EIO, "io_uring_wait_cqe: %s", strerror(-r));
    }
}

static int uring_reap(sl__io *base, sl__io_cqe *out, int max, bool wait)
{
    uring_io *u = (uring_io *)base;
    int rc = uring_submit(base);
    if (rc == 0 && wait)
        rc = wait_one(u);
    if (rc < 0)
        return rc;
    struct io_uring_cqe *cqes[PEEK_BATCH];
    int n = 0;
    while (n < max) {
        unsigned want = (unsigned)(max - n < PEEK_BATCH ? max - n : PEEK_BATCH);
        unsigned k = io_uring_peek_batch_cqe(&u->ring, cqes, want);
        for (unsigned i = 0; i < k; i++) {
            out[n].user = io_uring_cqe_get_data(cqes[i]);
            out[n].res = cqes[i]->res;
            out[n].code = 0;
            out[n].msg = NULL;
            n++;
        }
        /* io_uring_cqe_seen for the whole batch at once */
        io_uring_cq_advance(&u->ring, k);
        if (k < want)
            break;
    }
    return n;
}

static void uring_close(sl__io *base)
{
    uring_io *u = (uring_io *)base;
    /* Queued reads never reach the kernel once the ring is gone, but those
     * in flight write into the caller's buffers until they end. */
    for (;;) {
        ring_view v = look(u);
        io_uring_cq_advance(&u->ring, (unsigned)v.done);
        base->outstanding -= v.done;
        if (v.in_kernel <= 0)
            break;
        struct io_uring_cqe *cqe;
        int r = io_uring_wait_cqe(&u->ring, &cqe);
        if (r < 0 && r != -EINTR && r != -EAGAIN)
            break;
    }
    if (base->outstanding == 0 && !io_uring_sq_ready(&u->ring)) {
        pthread_mutex_lock(&cache_mu);
        bool keep = cached < CACHE_MAX;
        if (keep) {
            u->next = cache;
            cache = u;
            cached++;
        }
        pthread_mutex_unlock(&cache_mu);
        if (keep)
            return;
    }
    io_uring_queue_exit(&u->ring);
    free(u);
}

/* A cached ring of this depth, or NULL. */
static uring_io *from_cache(int depth)
{
    pthread_mutex_lock(&cache_mu);
    uring_io **p = &cache;
    while (*p && (*p)->base.depth != depth)
        p = &(*p)->next;
    uring_io *u = *p;
    if (u) {
        *p = u->next;
        cached--;
    }
    pthread_mutex_unlock(&cache_mu);
    return u;
}

static const sl__io_ops uring_ops = {"io_uring", uring_prep, uring_submit, uring_reap,
                                     uring_close};

int sl__io_uring_open(int depth, sl__io **out, int *sys_err)
{
    *out = NULL;
    uring_io *u = from_cache(depth);
    if (u) {
        u->next = NULL;
        *out = &u->base;
        return 0;
    }
    u = calloc(1, sizeof *u); /* libc: a cached ring outlives every iterator */
    if (!u)
        return SL_ENOMEM;
    int r = io_uring_queue_init((unsigned)depth, &u->ring, 0);
    if (r < 0) {
        free(u);
        *sys_err = -r;
        return SL_EUNSUPPORTED;
    }
    u->base.ops = &uring_ops;
    u->base.backend = SL_IO_URING;
    u->base.depth = depth;
    *out = &u->base;
    return 0;
}
#endif /* SLUICE_NO_URING */
