#ifndef SL_CORE_CLOCK_H
#define SL_CORE_CLOCK_H

#include <pthread.h>
#include <stdint.h>
#include <time.h>

static inline int64_t sl__now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* CPU time of the calling thread (a system call, not vDSO: per task, not
 * per element). */
static inline int64_t sl__thread_cpu_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* A condition variable whose timed waits run on CLOCK_MONOTONIC (a wall
 * clock step does not stretch them), and the deadline `ns` from now on
 * that clock. */
static inline void sl__cond_init_monotonic(pthread_cond_t *cv)
{
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(cv, &ca);
    pthread_condattr_destroy(&ca);
}

static inline void sl__deadline(struct timespec *ts, int64_t ns)
{
    int64_t at = sl__now_ns() + ns;
    ts->tv_sec = (time_t)(at / 1000000000);
    ts->tv_nsec = (long)(at % 1000000000);
}

#endif
