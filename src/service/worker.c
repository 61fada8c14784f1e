/*
 * sl_worker_run: a worker of the preprocessing service.
 *
 * The transport's progress thread answers heartbeats and files the splits
 * the trainer sends, lowest first; the calling thread computes them one
 * at a time (the split's own iterator runs the pipeline's parallelism)
 * and sends each batch without a copy, holding a few sends in flight.
 * A stopped process answers nothing, which is how the trainer tells it
 * from a slow one.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "../core/clock.h"
#include "../core/distenv.h"
#include "../core/log.h"
#include "../core/versioned.h"
#include "../graph/node.h"
#include "../remote/crypto.h"
#include "auth.h"
#include "handshake.h"
#include "net.h"
#include "split.h"

#define SPEC_V1_SIZE sizeof(sl_worker_spec)
/* batches handed to the transport and not yet sent */
#define IN_FLIGHT 4
#define PAIRED_FRAME (1ull << 34)

typedef struct job {
    struct job *next;
    sl__msg_split m;
} job;

typedef struct wk {
    sl_build_fn build;
    void *user;
    sl_worker_spec spec;
    sl__net *net;
    sl__peer *peer;
    sl__hs hs;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    bool paired, bye;
    int err;          /* the link's end or the handshake's failure */
    char errmsg[1200];
    job *jobs;        /* sorted by first batch */
    uint32_t newest;  /* the newest pass a split came from: older ones are dropped */
    int64_t last_heard; /* when the trainer last sent anything */
    int inflight;
    sl_dataset *ds;   /* the trainer rank's pipeline */
    sl__split_plan plan;
} wk;

/* The handshake's hook: the trainer said which rank it is. */
static int prepare(void *user, sl__hs *hs)
{
    wk *w = user;
    sl_dist_context ctx = {.rank = (int)hs->rank, .world_size = (int)hs->world,
                           .local_world_size = 1};
    snprintf(ctx.source, sizeof ctx.source, "service");
    sl__dist_override(&ctx);
    sl_clear_error();
    sl_dataset *ds = w->build(w->user);
    sl__dist_override(NULL);
    if (!ds)
        return sl__set_error(sl_last_error_code() ? sl_last_error_code() : SL_ECALLBACK,
                             "the worker's build function failed: %s",
                             sl_last_error()[0] ? sl_last_error() : "it returned NULL");
    int rc = sl__split_plan_make(ds, &w->plan);
    if (rc < 0) {
        sl_dataset_release(ds);
        return rc;
    }
    sl_dataset_release(w->ds);
    w->ds = ds;
    hs->fingerprint = sl_dataset_fingerprint(ds);
    return 0;
}

static void end_link(wk *w, int code, const char *why)
{
    if (!w->err && !w->bye) {
        w->err = code ? code : SL_EIO;
        snprintf(w->errmsg, sizeof w->errmsg, "%s", why && *why ? why : sl_strerror(w->err));
    }
    pthread_cond_broadcast(&w->cv);
}

/* Whether m belongs to a pass older than the newest seen: its batches
 * would be dropped by the trainer, so it is not worth computing. */
static bool stale(const wk *w, const sl__msg_split *m)
{
    return (uint32_t)(m->id >> 32) < w->newest;
}

static void add_job(wk *w, const sl__msg_split *m)
{
    uint32_t pass = (uint32_t)(m->id >> 32);
    if (pass > w->newest) {
        w->newest = pass;
        for (job **at = &w->jobs; *at;) { /* a new pass: the old one's splits go */
            if (stale(w, &(*at)->m)) {
                job *j = *at;
                *at = j->next;
                sl__free(j, sizeof *j);
            } else {
                at = &(*at)->next;
            }
        }
    }
    job *j = sl__alloc(sizeof *j);
    if (!j) {
        end_link(w, SL_ENOMEM, "worker: out of memory for a split");
        return;
    }
    j->m = *m;
    job **at = &w->jobs;
    while (*at && (*at)->m.first <= m->first)
        at = &(*at)->next;
    j->next = *at;
    *at = j;
    pthread_cond_broadcast(&w->cv);
}

static void on_frame(void *user, sl__peer *p, const sl__wire_hdr *h, sl__buf *buf,
                     const unsigned char *payload, size_t n)
{
    wk *w = user;
    sl__bytes out = {0};
    pthread_mutex_lock(&w->mu);
    w->last_heard = sl__now_ns();
    if (!w->paired) {
        int rc = sl__hs_step(&w->hs, h, payload, n, &out);
        if (out.n)
            sl__net_send(p, &out);
        if (rc < 0) {
            char why[1100];
            snprintf(why, sizeof why, "%s", sl_last_error());
            end_link(w, rc, why);
            sl__net_close(p, rc, why);
        } else if (rc == 1) {
            w->paired = true;
            sl__peer_set_max_frame(p, PAIRED_FRAME);
            pthread_cond_broadcast(&w->cv);
        }
        goto done;
    }
    switch (h->type) {
    case SL__MSG_SPLIT: {
        sl__msg_split m;
        if (sl__msg_split_read(payload, n, &m) == 0)
            add_job(w, &m);
        else
            sl__net_close(p, SL_ECORRUPT, sl_last_error());
        break;
    }
    case SL__MSG_PING: {
        uint64_t a, b;
        if (sl__msg_pair_read(h->type, payload, n, &a, &b) == 0 &&
            sl__msg_pair_write(&out, SL__MSG_PONG, a, b) == 0)
            sl__net_send(p, &out);
        break;
    }
    case SL__MSG_PONG:
        break;
    case SL__MSG_BYE:
        w->bye = true;
        pthread_cond_broadcast(&w->cv);
        break;
    case SL__MSG_ERROR: {
        sl__msg_error e;
        if (sl__msg_error_read(payload, n, &e) == 0) {
            char why[1200];
            snprintf(why, sizeof why, "the trainer ended the link: %s", e.text);
            end_link(w, e.code, why);
        }
        break;
    }
    default: {
        char why[128];
        snprintf(why, sizeof why, "the trainer sent %s, which a trainer does not send",
                 sl__msg_name(h->type));
        end_link(w, SL_ECORRUPT, why);
        sl__net_close(p, SL_ECORRUPT, why);
    }
    }
done:
    pthread_mutex_unlock(&w->mu);
    sl__bytes_free(&out);
    sl__buf_release(buf);
}

static void on_close(void *user, sl__peer *p, int code, const char *why)
{
    (void)p;
    wk *w = user;
    pthread_mutex_lock(&w->mu);
    end_link(w, code, why);
    pthread_mutex_unlock(&w->mu);
}

/* A trainer silent for ten heartbeats (at least 5 s) is gone: a stopped
 * or vanished host sends no reset. */
static void on_tick(void *user)
{
    wk *w = user;
    pthread_mutex_lock(&w->mu);
    int64_t beat = (int64_t)(w->hs.heartbeat_ms ? w->hs.heartbeat_ms : 500) * 1000000;
    int64_t limit = 10 * beat > 5000000000ll ? 10 * beat : 5000000000ll;
    if (w->paired && !w->bye && !w->err && sl__now_ns() - w->last_heard > limit) {
        char why[160];
        snprintf(why, sizeof why, "the trainer sent nothing for %lld ms (stopped, or its host "
                 "is gone)", (long long)((sl__now_ns() - w->last_heard) / 1000000));
        end_link(w, SL_EIO, why);
        if (w->peer)
            sl__net_close(w->peer, SL_EIO, why);
    }
    pthread_mutex_unlock(&w->mu);
}

static void sent(void *arg, int status)
{
    (void)status; /* a failed send ends the link, which on_close reports */
    wk *w = arg;
    pthread_mutex_lock(&w->mu);
    w->inflight--;
    pthread_cond_broadcast(&w->cv);
    pthread_mutex_unlock(&w->mu);
}

/* Computes one split and sends its batches. 0, or the link's end. */
static int run_split(wk *w, const sl__msg_split *m)
{
    int64_t t0 = sl__now_ns(), blocked = 0; /* its time, less waits on the link */
    sl_iterator *it = sl__split_iterator(w->ds, &w->plan, (int64_t)m->seed, m->epoch, m->first,
                                         m->count, w->spec.threads);
    int rc = it ? 0 : sl_last_error_code();
    char msg[1024] = "";
    if (!it)
        snprintf(msg, sizeof msg, "%s", sl_last_error());
    int64_t k = m->first, sent_n = 0;
    sl_element *el;
    while (rc == 0 && (rc = sl_next(it, &el)) == 0) {
        pthread_mutex_lock(&w->mu);
        int64_t wait0 = sl__now_ns();
        while (w->inflight >= IN_FLIGHT && !w->err && !w->bye)
            pthread_cond_wait(&w->cv, &w->mu);
        blocked += sl__now_ns() - wait0;
        bool ended = w->err || w->bye;
        if (!ended)
            w->inflight++;
        pthread_mutex_unlock(&w->mu);
        if (ended) {
            sl_element_release(el);
            sl_iterator_free(it);
            return SL_ECANCELED;
        }
        int src = sl__net_send_batch(w->peer, m->id, k++, el, sent, w);
        sl_element_release(el);
        if (src < 0) {
            sent(w, src);
            sl_iterator_free(it);
            return src == SL_ESTATE ? SL_ECANCELED : src; /* the link's end */
        }
        sent_n++;
    }
    if (rc < 0 && it)
        snprintf(msg, sizeof msg, "%s", sl_iterator_errmsg(it));
    sl_iterator_free(it);
    sl__bytes b = {0};
    pthread_mutex_lock(&w->mu);
    bool old = stale(w, m);
    pthread_mutex_unlock(&w->mu);
    if (rc == SL_EOF || rc == 0)
        rc = sl__msg_done_write(&b, m->id, (uint64_t)sent_n,
                                (uint64_t)(sl__now_ns() - t0 - blocked));
    else if (old) /* a replaced pass's: nobody waits for it */
        rc = 0;
    else /* the pipeline failed (a bad file): the trainer's pass fails with it */
        rc = sl__msg_error_write(&b, rc, msg);
    if (rc == 0)
        rc = sl__net_send(w->peer, &b);
    sl__bytes_free(&b);
    return rc == SL_ESTATE ? SL_ECANCELED : rc; /* the link ended meanwhile */
}

/* Waits for the next split, the trainer's goodbye or the link's end. */
static job *next_job(wk *w)
{
    pthread_mutex_lock(&w->mu);
    while (!w->jobs && !w->err && !w->bye)
        pthread_cond_wait(&w->cv, &w->mu);
    job *j = NULL;
    if (!w->err && !w->bye && w->jobs) {
        j = w->jobs;
        w->jobs = j->next;
    }
    pthread_mutex_unlock(&w->mu);
    return j;
}

/* Connects and pairs, retrying a refused connection until the deadline. */
static int connect_pair(wk *w, const char *host, int port, int64_t deadline)
{
    for (;;) {
        char name[300];
        if (w->spec.name)
            snprintf(name, sizeof name, "%s", w->spec.name);
        else {
            char hn[256] = "?";
            gethostname(hn, sizeof hn - 1);
            snprintf(name, sizeof name, "%s:%d", hn, (int)getpid());
        }
        uint8_t key[32];
        int rc = sl__service_key(key);
        if (rc < 0)
            return rc;
        pthread_mutex_lock(&w->mu);
        w->err = 0;
        w->paired = false;
        pthread_mutex_unlock(&w->mu);
        rc = sl__hs_init(&w->hs, SL__ROLE_WORKER, key, name, 0, w->spec.version);
        sl__cleanse(key, sizeof key);
        if (rc < 0)
            return rc;
        w->hs.prepare = prepare;
        w->hs.user = w;
        w->hs.threads = (uint32_t)(w->spec.threads > 0 ? w->spec.threads : sl_cpu_count());
        rc = sl__net_connect(w->net, host, port, &w->peer);
        if (rc < 0)
            return rc;
        sl__bytes b = {0};
        pthread_mutex_lock(&w->mu);
        rc = sl__hs_begin(&w->hs, &b);
        pthread_mutex_unlock(&w->mu);
        if (rc == 0)
            rc = sl__net_send(w->peer, &b);
        sl__bytes_free(&b);
        pthread_mutex_lock(&w->mu);
        while (!w->paired && !w->err)
            pthread_cond_wait(&w->cv, &w->mu);
        bool paired = w->paired;
        rc = w->err;
        bool answered = w->hs.peer_name[0] != 0; /* the trainer's HELLO came */
        pthread_mutex_unlock(&w->mu);
        if (paired)
            return 0;
        /* a trainer not listening yet: try again; anything it said: stop */
        if (answered || sl__now_ns() >= deadline || rc != SL_EIO)
            return sl__set_error(rc, "%s", w->errmsg);
        sl__log(SL_LOG_DEBUG, "worker: %s: %s; retrying", host, w->errmsg);
        struct timespec ts = {0, 200000000};
        nanosleep(&ts, NULL);
    }
}

SL_API int sl_worker_spec_init(sl_worker_spec *spec, size_t struct_size)
{
    sl_worker_spec d = {.struct_size = struct_size, .connect_timeout_ms = 60000};
    return sl__struct_init(spec, struct_size, &d, sizeof d, SPEC_V1_SIZE, "sl_worker_spec_init");
}

SL_API int sl_worker_run(sl_build_fn build, void *user, const sl_worker_spec *spec)
{
    if (!build || !spec)
        return sl__set_error(SL_EINVAL, "sl_worker_run: NULL build or spec");
    wk *w = sl__calloc(1, sizeof *w);
    if (!w)
        return SL_ENOMEM;
    int rc = sl__struct_load(spec, &w->spec, NULL, sizeof w->spec, SPEC_V1_SIZE, "worker");
    w->build = build;
    w->user = user;
    pthread_mutex_init(&w->mu, NULL);
    pthread_cond_init(&w->cv, NULL);
    const char *addr = w->spec.address ? w->spec.address : getenv("SLUICE_SERVICE_ADDRESS");
    char host[256];
    int port = 0;
    if (rc == 0 && (!addr || !*addr))
        rc = sl__set_error(SL_EINVAL, "worker: no trainer address: give one, or set "
                           "SLUICE_SERVICE_ADDRESS (host:port)");
    if (rc == 0) {
        const char *colon = strrchr(addr, ':');
        size_t hn = colon ? (size_t)(colon - addr) : 0;
        if (hn >= 2 && addr[0] == '[' && addr[hn - 1] == ']')
            addr++, hn -= 2;
        port = colon ? atoi(colon + 1) : 0;
        if (!colon || hn == 0 || hn >= sizeof host || port <= 0 || port > 65535)
            rc = sl__set_error(SL_EINVAL, "worker: address \"%s\" is not host:port", addr);
        else
            memcpy(host, addr, hn), host[hn] = 0;
    }
    sl__net_hooks hk = {.user = w, .on_frame = on_frame, .on_close = on_close,
                        .on_tick = on_tick, .tick_ms = 500, .max_frame = 64u << 10};
    if (rc == 0)
        rc = sl__net_create(&hk, &w->net);
    int64_t timeout = w->spec.connect_timeout_ms > 0 ? w->spec.connect_timeout_ms : 60000;
    if (rc == 0)
        rc = connect_pair(w, host, port, sl__now_ns() + timeout * 1000000);
    if (rc == 0)
        sl__log(SL_LOG_INFO, "worker: serving %s (trainer rank %u of %u)", addr, w->hs.rank,
                w->hs.world);
    job *j;
    while (rc == 0 && (j = next_job(w))) {
        rc = run_split(w, &j->m);
        sl__free(j, sizeof *j);
        if (rc == SL_ECANCELED)
            rc = 0; /* the link's end: goodbye or an error, said below */
    }
    char msg[1300] = "";
    if (rc == 0) {
        pthread_mutex_lock(&w->mu);
        while (w->inflight > 0 && !w->err)
            pthread_cond_wait(&w->cv, &w->mu);
        if (!w->bye && w->err) {
            rc = w->err;
            snprintf(msg, sizeof msg, "worker: %s", w->errmsg);
        }
        pthread_mutex_unlock(&w->mu);
    } else {
        snprintf(msg, sizeof msg, "%s", sl_last_error());
    }
    sl__net_free(w->net);
    while ((j = w->jobs)) {
        w->jobs = j->next;
        sl__free(j, sizeof *j);
    }
    sl__hs_clear(&w->hs);
    sl_dataset_release(w->ds);
    pthread_mutex_destroy(&w->mu);
    pthread_cond_destroy(&w->cv);
    sl__free(w, sizeof *w);
    if (rc < 0)
        sl__set_error(rc, "%s", msg);
    return rc;
}
