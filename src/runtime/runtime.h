/* Runtime internals: the worker pool's task queue and library threads. */
#ifndef SL_RUNTIME_RUNTIME_H
#define SL_RUNTIME_RUNTIME_H

#include <pthread.h>
#include "sluice.h"

/* A unit of work for the pool; embedded in the submitter's own struct. */
typedef struct sl__task {
    void (*run)(struct sl__task *task);
    struct sl__task *next;
} sl__task;
void sl__runtime_submit(sl_runtime *rt, sl__task *task);
/* The CPU budget the autotune controllers of the iterators on rt share:
 * claims up to `want` worker units, as many as keep the runtime-wide total
 * at or below `budget` (INT_MAX: all of them, for units already in use),
 * and returns how many it got. Release gives units back. Any thread. */
int sl__runtime_cpu_claim(sl_runtime *rt, int want, int budget);
void sl__runtime_cpu_release(sl_runtime *rt, int n);
/* The process default runtime (created on first use), or NULL. */
sl_runtime *sl__runtime_default(void);

/* Library threads: pthread_create with the pool flush at exit. */
int sl__thread_start(pthread_t *th, void *(*fn)(void *), void *arg, const char *name);

#endif
