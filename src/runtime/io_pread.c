/*
 * pread backend, for where io_uring cannot be set up: a few threads of the
 * engine's own take reads from a queue and post completions, so the
 * caller's thread never blocks on one read (or none, for the edge profile:
 * submit reads in place). Reads prepared between two
 * submits enter the queue under one lock.
 *
 * Queue and completion list are rings of `depth` entries: the caller keeps
 * at most depth reads outstanding, so neither can overflow.
 */
#include <errno.h>
#include <unistd.h>
#include "../core/alloc.h"
#include "../core/error.h"
#include "runtime.h"
#include "io.h"

#define MAX_THREADS 4

typedef struct preq {
    int fd;
    void *buf;
    size_t len;
    uint64_t off;
    void *user;
} preq;

typedef struct pread_io {
    sl__io base;
    size_t size;
    /* caller's thread only */
    int nstaged;
    preq *staged;
    /* under mu */
    pthread_mutex_t mu;
    pthread_cond_t cv_work, cv_done;
    bool stop;
    preq *queue;
    int qhead, qlen;
    sl__io_cqe *done;
    int dhead, dlen;
    int nthreads;
    pthread_t threads[];
} pread_io;

/* The whole request, short only at end of file. */
static int64_t read_fully(const preq *r)
{
    size_t got = 0;
    while (got < r->len) {
        ssize_t n = pread(r->fd, (char *)r->buf + got, r->len - got, (off_t)(r->off + got));
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            return -errno;
        if (n == 0)
            break;
        got += (size_t)n;
    }
    return (int64_t)got;
}

static void *worker_main(void *arg)
{
    pread_io *p = arg;
    int depth = p->base.depth;
    pthread_mutex_lock(&p->mu);
    for (;;) {
        while (!p->stop && p->qlen == 0)
            pthread_cond_wait(&p->cv_work, &p->mu);
        if (p->stop)
            break;
        preq r = p->queue[p->qhead];
        p->qhead = (p->qhead + 1) % depth;
        p->qlen--;
        pthread_mutex_unlock(&p->mu);
        int64_t res = read_fully(&r);
        pthread_mutex_lock(&p->mu);
        p->done[(p->dhead + p->dlen) % depth] = (sl__io_cqe){r.user, res, 0, NULL};
        p->dlen++;
        pthread_cond_signal(&p->cv_done);
    }
    pthread_mutex_unlock(&p->mu);
    return NULL;
}

static int pread_prep(sl__io *base, int fd, void *buf, size_t len, uint64_t off, void *user)
{
    pread_io *p = (pread_io *)base;
    p->staged[p->nstaged++] = (preq){fd, buf, len, off, user};
    return 0;
}

static int pread_submit(sl__io *base)
{
    pread_io *p = (pread_io *)base;
    if (!p->nstaged)
        return 0;
    int depth = base->depth;
    if (p->nthreads == 0) { /* inline: read now, on this thread */
        for (int i = 0; i < p->nstaged; i++)
            p->done[(p->dhead + p->dlen++) % depth] =
                (sl__io_cqe){p->staged[i].user, read_fully(&p->staged[i]), 0, NULL};
        p->nstaged = 0;
        return 0;
    }
    pthread_mutex_lock(&p->mu);
    for (int i = 0; i < p->nstaged; i++)
        p->queue[(p->qhead + p->qlen + i) % depth] = p->staged[i];
    p->qlen += p->nstaged;
    if (p->nstaged > 1)
        pthread_cond_broadcast(&p->cv_work);
    else
        pthread_cond_signal(&p->cv_work);
    pthread_mutex_unlock(&p->mu);
    p->nstaged = 0;
    return 0;
}

static int pread_reap(sl__io *base, sl__io_cqe *out, int max, bool wait)
{
    pread_io *p = (pread_io *)base;
    pread_submit(base);
    int depth = base->depth, n = 0;
    pthread_mutex_lock(&p->mu);
    while (wait && p->dlen == 0)
        pthread_cond_wait(&p->cv_done, &p->mu);
    while (n < max && p->dlen > 0) {
        out[n++] = p->done[p->dhead];
        p->dhead = (p->dhead + 1) % depth;
        p->dlen--;
    }
    pthread_mutex_unlock(&p->mu);
    return n;
}

static void pread_free(pread_io *p)
{
    size_t depth = (size_t)p->base.depth;
    sl__free(p->staged, depth * sizeof *p->staged);
    sl__free(p->queue, depth * sizeof *p->queue);
    sl__free(p->done, depth * sizeof *p->done);
    pthread_cond_destroy(&p->cv_work);
    pthread_cond_destroy(&p->cv_done);
    pthread_mutex_destroy(&p->mu);
    sl__free(p, p->size);
}

/* Queued reads are dropped; reads a worker has started end before the
 * worker exits, so after the joins nothing writes into caller buffers. */
static void pread_close(sl__io *base)
{
    pread_io *p = (pread_io *)base;
    pthread_mutex_lock(&p->mu);
    p->stop = true;
    p->qlen = 0;
    pthread_cond_broadcast(&p->cv_work);
    pthread_mutex_unlock(&p->mu);
    for (int i = 0; i < p->nthreads; i++)
        pthread_join(p->threads[i], NULL);
    pread_free(p);
}

static const sl__io_ops pread_ops = {"pread", pread_prep, pread_submit, pread_reap, pread_close};

int sl__io_pread_open(int depth, int threads, sl__io **out)
{
    *out = NULL;
    int nthreads = threads >= 0 ? threads : depth < MAX_THREADS ? depth : MAX_THREADS;
    size_t size = sizeof(pread_io) + (size_t)nthreads * sizeof(pthread_t);
    pread_io *p = sl__calloc(1, size);
    if (!p)
        return SL_ENOMEM;
    p->size = size;
    p->base.ops = &pread_ops;
    p->base.backend = SL_IO_PREAD;
    p->base.depth = depth;
    pthread_mutex_init(&p->mu, NULL);
    pthread_cond_init(&p->cv_work, NULL);
    pthread_cond_init(&p->cv_done, NULL);
    p->staged = sl__calloc((size_t)depth, sizeof *p->staged);
    p->queue = sl__calloc((size_t)depth, sizeof *p->queue);
    p->done = sl__calloc((size_t)depth, sizeof *p->done);
    int rc = p->staged && p->queue && p->done ? 0 : SL_ENOMEM;
    while (rc == 0 && p->nthreads < nthreads) {
        rc = sl__thread_start(&p->threads[p->nthreads], worker_main, p, "pread");
        if (rc == 0)
            p->nthreads++;
    }
    if (rc < 0) {
        pread_close(&p->base);
        return rc;
    }
    *out = &p->base;
    return 0;
}
