/*
 * The skeleton every asynchronous node shares: a producer thread of its own,
 * a lock with a condition for each side, a stop flag for cancellation, and
 * how the producer's pass ended (SL_EOF or an error, with its message copied
 * across threads). The node keeps its buffer and its own wait conditions.
 */
#ifndef SL_GRAPH_ASYNC_H
#define SL_GRAPH_ASYNC_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

typedef struct sl__tree sl__tree;
typedef struct sl__iter sl__iter;

typedef struct sl__async {
    pthread_mutex_t mu;
    pthread_cond_t cv_consumer, cv_producer;
    atomic_bool stop; /* cancelled, or the node is going away */
    pthread_t thread;
    bool started;
    bool ended;       /* the producer finished: end_rc says how */
    int end_rc;
    char *end_msg;
    bool again; /* the consumer's last take returned SL__AGAIN, its empty take counted */
} sl__async;

void sl__async_init(sl__async *a);
/* Starts the producer thread, named after the node kind; 0 or a negative
 * code. */
int sl__async_start(sl__async *a, void *(*fn)(void *), void *arg, const char *kind);
/* Sets stop and wakes both sides; any thread (the node's cancel op). */
void sl__async_cancel(sl__async *a);
/* Cancels, wakes the tree's budget waits and joins the producer. */
void sl__async_join(sl__async *a, sl__tree *t);
/* Producer: its pass ended with rc (SL_EOF or an error). msg: the error's
 * message, owned (NULL: copy this thread's). Wakes the consumer. */
void sl__async_finish(sl__async *a, int rc, char *msg);
/* Consumer, under mu with ended set: the end code, its message restored on
 * this thread. */
int sl__async_end(const sl__async *a);
/* After join: frees what init and finish made. */
void sl__async_fini(sl__async *a);

/* What the consumer's take asks of an asynchronous node, all under the
 * node's a.mu but round: */
typedef struct sl__take_ops {
    /* takes the next output into *out (the node's own type): true, or
     * false when it is not ready */
    bool (*take)(void *node, void *out);
    /* outputs ready now, as the consumer finds the buffer (statistics) */
    int (*level)(void *node);
    /* work in flight that will still come out after the producer ended
     * (NULL: none) */
    bool (*busy)(void *node);
    /* the edge profile: one round of the producer's work on this thread,
     * without the lock and the deadline; 0 or an error that ends the take
     * (message set). NULL: a producer thread works, the take waits */
    int (*round)(void *node);
} sl__take_ops;

/* The consumer's take from an asynchronous node's buffer: until ops->take
 * gives an output, waits for the producer (or runs its rounds inline), or
 * ends with the pass's end (its code and message), SL_ECANCELED ("<node>:
 * canceled") or SL__AGAIN at this thread's deadline. Counts the take in
 * the node's statistics: the level it found, or an empty take when the
 * wait starts (once, across SL__AGAIN returns). 0 with the output taken.
 * The node's thread of sl_next only. */
int sl__async_take(sl__async *a, sl__iter *node, const sl__take_ops *ops, void *self,
                   void *out);

/* The deadline (CLOCK_MONOTONIC ns; 0: none) of the sl_next_timeout call
 * running on this thread. Consumer waits honour it: sl__consumer_cond_wait
 * returns SL__AGAIN (core/error.h) once it has passed, and the node that
 * waited returns SL__AGAIN with its state as it was (an empty take it
 * counted stays counted once), as do the synchronous nodes above it (a
 * node never keeps it as an error, nor loses what it had pulled), so the
 * next call goes on where this one stopped. Other threads (producers,
 * fetchers, workers) never see a deadline. */
extern _Thread_local int64_t sl__wait_deadline_ns;

/* A consumer's wait on cv under mu (cv made with sl__cond_init_monotonic,
 * as sl__async_init makes cv_consumer): 0 when woken (or spuriously),
 * SL__AGAIN when this thread's deadline has passed. */
int sl__consumer_cond_wait(pthread_cond_t *cv, pthread_mutex_t *mu);

/* Around a producer's work done on the consumer's thread (the edge
 * profile): no deadline inside, since it is this thread's own work and a
 * producer keeps no SL__AGAIN; the deadline comes back after. */
static inline int64_t sl__deadline_suspend(void)
{
    int64_t d = sl__wait_deadline_ns;
    sl__wait_deadline_ns = 0;
    return d;
}

static inline void sl__deadline_resume(int64_t d)
{
    sl__wait_deadline_ns = d;
}

#endif
