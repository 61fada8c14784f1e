/* Runtime internals: the worker pool's task queue and library threads. */
#ifndef SL_RUNTIME_RUNTIME_H
#define SL_RUNTIME_RUNTIME_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include "sluice.h"

/* A unit of work for the pool; embedded in the submitter's own struct. */
typedef struct sl__task {
    void (*run)(struct sl__task *task);
    struct sl__task *next;
    int64_t submitted_ns; /* set by submit: run may count its wait for a worker
                           * (a task run some other way sets 0) */
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
/* A runtime without workers: sl__runtime_submit runs each task at once on
 * the submitting thread (the edge profile). Free with sl_runtime_free. */
sl_runtime *sl__runtime_inline(void);

/* Bytes of memory this process may still use: MemAvailable from
 * <proc>/meminfo, lowered to the headroom under the limit of its memory
 * cgroup and every ancestor's (v1 or v2, mounted at cgroup_mount), where
 * one is set. -1 if nothing could be read. Production paths: "/proc",
 * "/sys/fs/cgroup"; tests pass a tree of their own. */
int64_t sl__available_memory(const char *proc, const char *cgroup_mount);

/* Library threads: pthread_create with the pool flush at exit. */
int sl__thread_start(pthread_t *th, void *(*fn)(void *), void *arg, const char *name);
/* Called by a library thread that the consumer's own calls wake (prefetch's
 * producer, woken by each take): its wake-ups stop preempting the thread
 * running on that CPU (SCHED_BATCH); its share of the CPU is the same.
 * Best effort. */
void sl__thread_no_wake_preempt(void);

/* Reads a map function makes itself and waits for (map_video and
 * map_audio through FFmpeg): the time the calling thread spent blocked in
 * them and the file bytes they returned. The function adds; the map node
 * (ops/map.c) takes the change over each task as the node's read_wait_ns
 * and bytes_read, and leaves that time out of its work time. */
typedef struct sl__blocked {
    int64_t ns, bytes;
} sl__blocked;
extern _Thread_local sl__blocked sl__thread_blocked;

#endif
