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

typedef struct sl__tree sl__tree;

typedef struct sl__async {
    pthread_mutex_t mu;
    pthread_cond_t cv_consumer, cv_producer;
    atomic_bool stop; /* cancelled, or the node is going away */
    pthread_t thread;
    bool started;
    bool ended;       /* the producer finished: end_rc says how */
    int end_rc;
    char *end_msg;
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

#endif
