/*
 * The worker pool behind sl_runtime. Workers only ever run compute tasks
 * (map callbacks); nodes that may block on their input run on threads of
 * their own, so a pool worker never waits on another task and a small pool
 * cannot deadlock.
 */
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdbool.h>
#include <stdlib.h>
#include <time.h>
#include "../core/alloc.h"
#include "../core/clock.h"
#include "../core/error.h"
#include "runtime.h"

_Thread_local sl__blocked sl__thread_blocked;

struct sl_runtime {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    sl__task *head, *tail;
    bool stopping;
    bool inline_tasks; /* no workers: submit runs the task (the edge profile) */
    int nthreads;
    atomic_int cpu_claimed; /* worker units granted to autotune controllers */
    /* sl_release_memory asks the workers to flush their caches: it bumps
     * flush_gen, and each worker flushes when it next sees the queue (at
     * once if idle) and counts itself in flush_acks */
    unsigned flush_gen;
    int flush_acks;
    pthread_cond_t flush_cv;
    struct sl_runtime *reg_next; /* runtimes with workers, for that request */
    pthread_t threads[];
};

static pthread_mutex_t reg_mu = PTHREAD_MUTEX_INITIALIZER;
static sl_runtime *reg_head;
static pthread_mutex_t release_mu = PTHREAD_MUTEX_INITIALIZER;
static _Thread_local sl_runtime *worker_of; /* the pool this thread works for */

typedef struct thread_start {
    void *(*fn)(void *);
    void *arg;
} thread_start;

static void *thread_main(void *p)
{
    thread_start ts = *(thread_start *)p;
    sl__free(p, sizeof ts);
    void *r = ts.fn(ts.arg);
    sl__pool_flush_thread();
    return r;
}

/* name: what top -H, perf and gdb show, "sl-" + up to 12 characters. */
int sl__thread_start(pthread_t *th, void *(*fn)(void *), void *arg, const char *name)
{
    thread_start *ts = sl__alloc(sizeof *ts);
    if (!ts)
        return SL_ENOMEM;
    ts->fn = fn;
    ts->arg = arg;
    int rc = pthread_create(th, NULL, thread_main, ts);
    if (rc) {
        sl__free(ts, sizeof *ts);
        return sl__set_error(SL_ENOMEM, "cannot start a thread (error %d)", rc);
    }
    char buf[16];
    snprintf(buf, sizeof buf, "sl-%s", name);
    pthread_setname_np(*th, buf); /* best effort */
    return 0;
}

void sl__thread_no_wake_preempt(void)
{
#ifdef SCHED_BATCH
    struct sched_param sp = {0};
    (void)pthread_setschedparam(pthread_self(), SCHED_BATCH, &sp);
#endif
}

SL_API int sl_cpu_count(void)
{
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof set, &set) == 0) {
        int n = CPU_COUNT(&set);
        if (n > 0)
            return n;
    }
    return 1;
}

static void *worker(void *p)
{
    sl_runtime *rt = p;
    worker_of = rt;
    pthread_mutex_lock(&rt->mu);
    unsigned seen = rt->flush_gen;
    for (;;) {
        while (!rt->head && !rt->stopping && seen == rt->flush_gen)
            pthread_cond_wait(&rt->cv, &rt->mu);
        if (seen != rt->flush_gen) {
            seen = rt->flush_gen;
            pthread_mutex_unlock(&rt->mu);
            sl__pool_flush_thread();
            pthread_mutex_lock(&rt->mu);
            /* a flush for a request that timed out and was followed by
             * another does not answer the new one: flush again */
            if (seen == rt->flush_gen) {
                rt->flush_acks++;
                pthread_cond_broadcast(&rt->flush_cv);
            }
            continue;
        }
        if (!rt->head)
            break;
        sl__task *t = rt->head;
        rt->head = t->next;
        if (!rt->head)
            rt->tail = NULL;
        pthread_mutex_unlock(&rt->mu);
        t->run(t);
        pthread_mutex_lock(&rt->mu);
    }
    pthread_mutex_unlock(&rt->mu);
    return NULL;
}

void sl__runtime_submit(sl_runtime *rt, sl__task *t)
{
    t->submitted_ns = sl__now_ns();
    if (rt->inline_tasks) {
        t->run(t);
        return;
    }
    t->next = NULL;
    pthread_mutex_lock(&rt->mu);
    if (rt->tail)
        rt->tail->next = t;
    else
        rt->head = t;
    rt->tail = t;
    pthread_cond_signal(&rt->cv);
    pthread_mutex_unlock(&rt->mu);
}

int sl__runtime_cpu_claim(sl_runtime *rt, int want, int budget)
{
    int cur = atomic_load(&rt->cpu_claimed);
    for (;;) {
        int room = budget - cur;
        int n = want < room ? want : room;
        if (n <= 0)
            return 0;
        if (atomic_compare_exchange_weak(&rt->cpu_claimed, &cur, cur + n))
            return n;
    }
}

void sl__runtime_cpu_release(sl_runtime *rt, int n)
{
    atomic_fetch_sub(&rt->cpu_claimed, n);
}

static size_t rt_size(int n)
{
    return sizeof(sl_runtime) + (size_t)n * sizeof(pthread_t);
}

static void rt_stop(sl_runtime *rt, int started)
{
    if (!rt->inline_tasks) {
        pthread_mutex_lock(&reg_mu);
        sl_runtime **pp = &reg_head;
        while (*pp && *pp != rt)
            pp = &(*pp)->reg_next;
        if (*pp)
            *pp = rt->reg_next;
        pthread_mutex_unlock(&reg_mu);
    }
    pthread_mutex_lock(&rt->mu);
    rt->stopping = true;
    pthread_cond_broadcast(&rt->cv);
    pthread_mutex_unlock(&rt->mu);
    for (int i = 0; i < started && !rt->inline_tasks; i++)
        pthread_join(rt->threads[i], NULL);
    pthread_cond_destroy(&rt->cv);
    pthread_cond_destroy(&rt->flush_cv);
    pthread_mutex_destroy(&rt->mu);
    sl__free(rt, rt_size(rt->inline_tasks ? 0 : rt->nthreads));
}

SL_API sl_runtime *sl_runtime_create(int threads)
{
    if (threads < 0 || threads > 1024) {
        sl__set_error(SL_EINVAL, "sl_runtime_create: bad thread count %d", threads);
        return NULL;
    }
    if (threads == 0)
        threads = sl_cpu_count();
    sl_runtime *rt = sl__calloc(1, rt_size(threads));
    if (!rt)
        return NULL;
    rt->nthreads = threads;
    pthread_mutex_init(&rt->mu, NULL);
    pthread_cond_init(&rt->cv, NULL);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&rt->flush_cv, &ca);
    pthread_condattr_destroy(&ca);
    for (int i = 0; i < threads; i++)
        if (sl__thread_start(&rt->threads[i], worker, rt, "worker")) {
            rt_stop(rt, i);
            return NULL;
        }
    pthread_mutex_lock(&reg_mu);
    rt->reg_next = reg_head;
    reg_head = rt;
    pthread_mutex_unlock(&reg_mu);
    return rt;
}

sl_runtime *sl__runtime_inline(void)
{
    sl_runtime *rt = sl__calloc(1, rt_size(0));
    if (!rt)
        return NULL;
    rt->nthreads = 1; /* one unit of work at a time: the caller's */
    rt->inline_tasks = true;
    pthread_mutex_init(&rt->mu, NULL);
    pthread_cond_init(&rt->cv, NULL);
    pthread_cond_init(&rt->flush_cv, NULL);
    return rt;
}

SL_API void sl_runtime_free(sl_runtime *rt)
{
    if (rt)
        rt_stop(rt, rt->nthreads);
}

SL_API int sl_runtime_threads(const sl_runtime *rt)
{
    return rt ? rt->nthreads : 0;
}

static sl_runtime *default_rt;
static pthread_once_t default_once = PTHREAD_ONCE_INIT;

static void default_init(void)
{
    default_rt = sl_runtime_create(0);
}

sl_runtime *sl__runtime_default(void)
{
    pthread_once(&default_once, default_init);
    if (!default_rt)
        sl__set_error(SL_ENOMEM, "cannot create the default runtime");
    return default_rt;
}

/* A worker running a long task acknowledges late; the caller waits at most
 * this long in all, so it can never hang on one (or on a task that waits
 * for the caller). */
#define FLUSH_WAIT_NS 100000000LL

SL_API void sl_release_memory(void)
{
    pthread_mutex_lock(&release_mu);
    struct timespec deadline;
    clock_gettime(CLOCK_MONOTONIC, &deadline);
    deadline.tv_nsec += FLUSH_WAIT_NS;
    deadline.tv_sec += deadline.tv_nsec / 1000000000L;
    deadline.tv_nsec %= 1000000000L;
    pthread_mutex_lock(&reg_mu); /* held: no runtime is freed meanwhile */
    for (sl_runtime *rt = reg_head; rt; rt = rt->reg_next) {
        pthread_mutex_lock(&rt->mu);
        rt->flush_gen++;
        rt->flush_acks = 0;
        pthread_cond_broadcast(&rt->cv);
        int want = rt->nthreads - (worker_of == rt); /* the caller flushes itself */
        while (rt->flush_acks < want &&
               pthread_cond_timedwait(&rt->flush_cv, &rt->mu, &deadline) == 0)
            ;
        pthread_mutex_unlock(&rt->mu);
    }
    pthread_mutex_unlock(&reg_mu);
    sl__pool_flush_thread();
    sl__pool_release_shared();
    pthread_mutex_unlock(&release_mu);
}

/* Here, not in core/, since the pools empty only once the workers have
 * flushed their caches into them. */
SL_API int sl_set_allocator(const sl_allocator *a)
{
    sl_release_memory();
    return sl__alloc_set_hooks(a);
}
