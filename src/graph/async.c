#include "async.h"
#include "../core/clock.h"
#include "node.h"

_Thread_local int64_t sl__wait_deadline_ns;

int sl__consumer_cond_wait(pthread_cond_t *cv, pthread_mutex_t *mu)
{
    int64_t at = sl__wait_deadline_ns;
    if (!at) {
        pthread_cond_wait(cv, mu);
        return 0;
    }
    if (sl__now_ns() >= at)
        return SL__AGAIN;
    /* at the deadline the caller looks once more, then waits again: here */
    struct timespec ts = {(time_t)(at / 1000000000), (long)(at % 1000000000)};
    pthread_cond_timedwait(cv, mu, &ts);
    return 0;
}

void sl__async_init(sl__async *a)
{
    pthread_mutex_init(&a->mu, NULL);
    sl__cond_init_monotonic(&a->cv_consumer);
    pthread_cond_init(&a->cv_producer, NULL);
    atomic_init(&a->stop, false);
}

int sl__async_start(sl__async *a, void *(*fn)(void *), void *arg, const char *kind)
{
    int rc = sl__thread_start(&a->thread, fn, arg, kind);
    a->started = rc == 0;
    return rc;
}

void sl__async_cancel(sl__async *a)
{
    pthread_mutex_lock(&a->mu);
    atomic_store(&a->stop, true);
    pthread_cond_broadcast(&a->cv_consumer);
    pthread_cond_broadcast(&a->cv_producer);
    pthread_mutex_unlock(&a->mu);
}

void sl__async_join(sl__async *a, sl__tree *t)
{
    sl__async_cancel(a);
    sl__tree_wake(t);
    if (a->started)
        pthread_join(a->thread, NULL);
    a->started = false;
}

void sl__async_finish(sl__async *a, int rc, char *msg)
{
    if (rc < 0 && !msg && !(msg = sl__strdup(sl__error_msg())))
        rc = SL_ENOMEM;
    pthread_mutex_lock(&a->mu);
    a->ended = true;
    a->end_rc = rc;
    a->end_msg = msg;
    pthread_cond_broadcast(&a->cv_consumer);
    pthread_mutex_unlock(&a->mu);
}

int sl__async_end(const sl__async *a)
{
    if (a->end_rc < 0)
        sl__set_error_str(a->end_rc, a->end_msg);
    return a->end_rc;
}

void sl__async_fini(sl__async *a)
{
    sl__strfree(a->end_msg);
    a->end_msg = NULL;
    pthread_cond_destroy(&a->cv_consumer);
    pthread_cond_destroy(&a->cv_producer);
    pthread_mutex_destroy(&a->mu);
}

int sl__async_take(sl__async *a, sl__iter *node, const sl__take_ops *ops, void *self,
                   void *out)
{
    int rc = 0, level = a->again ? -2 : -1; /* -2: counted */
    a->again = false;
    pthread_mutex_lock(&a->mu);
    for (;;) {
        if (level == -1)
            level = ops->level(self);
        if (ops->take(self, out))
            break;
        if (a->ended && !(ops->busy && ops->busy(self))) {
            rc = sl__async_end(a);
            break;
        }
        if (sl__tree_cancelled(node->tree) || atomic_load(&a->stop)) {
            rc = sl__set_error(SL_ECANCELED, "%s: canceled", sl_dataset_name(node->ds));
            break;
        }
        if (level >= 0) { /* an empty take counts when the wait starts, so the
                           * controller sees a long one while it lasts */
            sl__stat_take(node->stats, 0);
            level = -2;
        }
        if (ops->round) {
            pthread_mutex_unlock(&a->mu);
            int64_t d = sl__deadline_suspend();
            rc = ops->round(self);
            sl__deadline_resume(d);
            pthread_mutex_lock(&a->mu);
            if (rc < 0)
                break;
            continue;
        }
        if (sl__consumer_cond_wait(&a->cv_consumer, &a->mu) == SL__AGAIN) {
            a->again = true;
            rc = SL__AGAIN;
            break;
        }
    }
    pthread_mutex_unlock(&a->mu);
    if (rc == 0 && level >= 0)
        sl__stat_take(node->stats, level);
    return rc;
}
