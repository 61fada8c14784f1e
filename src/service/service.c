/*
 * sl_service: the trainer's side of the preprocessing service.
 *
 * The dataset node owns a hub made when it is built: the transport, its
 * listener, the workers that connect, and the pass being served. A pass
 * (one iterator) cuts its epoch into splits of split_batches batches and
 * the dispatcher hands them to paired workers, the lowest first, within a
 * window that bounds what the trainer holds (max_bytes). Batches land in
 * a table by index; next() hands them out in order. A worker that goes
 * (its link drops, or it misses heartbeats) gives its unfinished splits
 * back; they go to others, and a batch that comes twice is dropped.
 *
 * The hub's lock guards everything below it; the transport's hooks run
 * on its progress thread and take the lock; next() waits on the hub's
 * condition variable.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "../core/clock.h"
#include "../core/log.h"
#include "../core/versioned.h"
#include "../graph/node.h"
#include "../remote/crypto.h"
#include "auth.h"
#include "handshake.h"
#include "net.h"
#include "split.h"

#define SPEC_V1_SIZE sizeof(sl_service_spec)
#define DEFAULT_PORT 7780
/* what a peer may send before it has proved the secret */
#define UNPAIRED_FRAME (64u << 10)
#define PAIRED_FRAME (1ull << 34)
/* splits a worker holds at once: one computing, one queued behind it */
#define PER_WORKER 2
/* how long a worker may take to pair (it builds its pipeline meanwhile) */
#define HANDSHAKE_NS (120ll * 1000000000)
/* connections that have not paired yet, at most: what strangers can hold */
#define MAX_UNPAIRED 64

enum { W_HANDSHAKE, W_READY, W_GONE };

typedef struct worker {
    sl__peer *peer;
    sl__hs hs;
    int state;
    int64_t last_heard, last_ping, joined;
    int holding;             /* splits assigned, not done */
} worker;

typedef struct split {
    int64_t first, count;
    int worker;       /* index into hub.workers; -1: not assigned */
    int64_t received; /* its batches in the table or handed out */
    int attempts;     /* times assigned */
    bool lost;        /* at-most-once: its worker died; what did not come is skipped */
} split;

typedef struct pass {
    uint32_t id;
    int64_t epoch, seed, nbatches;
    int64_t start;     /* the first batch (after a restore) */
    int64_t next;      /* the next batch to hand out */
    int64_t nsplits;
    split *splits;
    sl_element **got;  /* by batch index - start; NULL: not here */
    int64_t batch_bytes; /* the first batch's size: the window's unit */
    int64_t held;        /* bytes of batches received, not handed out */
    int64_t in_flight;   /* splits with a worker */
    sl__node_stats *ns;  /* the node's counters */
    bool cancelled;
    int err;
    char errmsg[2048];
} pass;

typedef struct hub {
    sl__net *net;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    uint8_t key[32];
    uint64_t fingerprint;
    sl_dist_context dist;
    int port;
    worker *workers;
    int nworkers, capworkers;
    pass *active;
    uint32_t next_pass_id;
    bool closing; /* the dataset is being freed: workers leave quietly */
} hub;

typedef struct service_ds {
    sl_dataset base; /* input 0: the pipeline the workers run */
    sl_service_spec spec;
    char *address, *version;
    sl__split_plan plan;
    hub *hub;
} service_ds;

static int64_t now_ns(void)
{
    return sl__now_ns();
}

/* ---- the dispatcher (under hub.mu) ------------------------------------- */

static int64_t split_of(const pass *ps, int64_t batch, int64_t per)
{
    return (batch - ps->start) / per;
}

static void send_split(const hub *h, worker *w, const pass *ps, int64_t k)
{
    sl__msg_split m = {.id = (uint64_t)ps->id << 32 | (uint64_t)k, .epoch = ps->epoch,
                       .seed = (uint64_t)ps->seed, .rank = (uint32_t)h->dist.rank,
                       .world = (uint32_t)h->dist.world_size, .first = ps->splits[k].first,
                       .count = ps->splits[k].count};
    sl__bytes b = {0};
    if (sl__msg_split_write(&b, &m) == 0)
        sl__net_send(w->peer, &b);
    sl__bytes_free(&b);
}

/* Splits may be handed out up to this one (exclusive): the window that
 * max_bytes allows beyond the split being consumed. */
static int64_t window_end(const service_ds *d, const pass *ps)
{
    int64_t per = d->spec.split_batches;
    int64_t cur = split_of(ps, ps->next, per);
    int64_t ahead = 1; /* until a batch says how large they are */
    if (ps->batch_bytes > 0) {
        /* the largest batch seen so far: a short first one must not open
         * the window for full ones */
        int64_t split_bytes = ps->batch_bytes > INT64_MAX / per ? INT64_MAX
                                                                 : ps->batch_bytes * per;
        ahead = d->spec.max_bytes / split_bytes;
    }
    if (ahead < 1)
        ahead = 1;
    int64_t end = cur + 1 + (ahead < ps->nsplits ? ahead : ps->nsplits);
    return end < ps->nsplits ? end : ps->nsplits;
}

static void dispatch(hub *h, const service_ds *d)
{
    pass *ps = h->active;
    if (!ps || ps->err || ps->cancelled || ps->next >= ps->nbatches || ps->nsplits == 0)
        return; /* nothing (more) to hand out */
    int64_t end = window_end(d, ps);
    int64_t k = split_of(ps, ps->next, d->spec.split_batches);
    for (; k < end; k++) {
        split *s = &ps->splits[k];
        if (s->worker >= 0 || s->lost || s->received == s->count)
            continue;
        /* the paired worker holding the fewest */
        int best = -1;
        for (int i = 0; i < h->nworkers; i++) {
            worker *w = &h->workers[i];
            if (w->state == W_READY && w->holding < PER_WORKER &&
                (best < 0 || w->holding < h->workers[best].holding))
                best = i;
        }
        if (best < 0)
            return;
        s->worker = best;
        if (s->attempts++ > 0)
            sl__stat_add(&ps->ns->recomputed, 1);
        h->workers[best].holding++;
        ps->in_flight++;
        atomic_store(&ps->ns->in_flight, ps->in_flight);
        send_split(h, &h->workers[best], ps, k);
    }
}

/* Publishes how many workers are paired. */
static void count_workers(hub *h)
{
    int64_t ready = 0;
    for (int i = 0; i < h->nworkers; i++)
        ready += h->workers[i].state == W_READY;
    if (h->active)
        atomic_store(&h->active->ns->workers, ready);
}

/* A worker is gone: what it held goes back (or, at most once, is lost). */
static void worker_gone(hub *h, const service_ds *d, int wi, int code, const char *why)
{
    worker *w = &h->workers[wi];
    if (w->state == W_GONE)
        return;
    bool was_ready = w->state == W_READY;
    w->state = W_GONE;
    sl__hs_clear(&w->hs);
    if (was_ready && !h->closing)
        sl__log(code ? SL_LOG_WARN : SL_LOG_INFO, "service: worker %s (%s) left: %s",
                sl__peer_name(w->peer), w->hs.peer_name, why && *why ? why : "goodbye");
    pass *ps = h->active;
    for (int64_t k = 0; ps && k < ps->nsplits; k++) {
        split *s = &ps->splits[k];
        if (s->worker != wi)
            continue;
        s->worker = -1;
        ps->in_flight--;
        if (s->received < s->count && (d->spec.flags & SL_SERVICE_AT_MOST_ONCE))
            s->lost = true;
    }
    w->holding = 0;
    if (ps)
        atomic_store(&ps->ns->in_flight, ps->in_flight);
    count_workers(h);
    dispatch(h, d);
    pthread_cond_broadcast(&h->cv);
}

/* ---- the transport's hooks (progress thread) ---------------------------- */

static int worker_index(sl__peer *p)
{
    return (int)(intptr_t)sl__peer_user(p) - 1;
}

static void on_accept(void *user, sl__peer *p)
{
    service_ds *d = user;
    hub *h = d->hub;
    pthread_mutex_lock(&h->mu);
    int unpaired = 0;
    for (int i = 0; i < h->nworkers; i++)
        unpaired += h->workers[i].state == W_HANDSHAKE;
    if (unpaired >= MAX_UNPAIRED) {
        pthread_mutex_unlock(&h->mu);
        sl__log(SL_LOG_WARN, "service: %s refused: %d connections are already pairing",
                sl__peer_name(p), unpaired);
        sl__net_close(p, SL_EBUSY, "too many connections pairing");
        return;
    }
    if (h->nworkers == h->capworkers) {
        int cap = h->capworkers ? 2 * h->capworkers : 8;
        worker *nw = sl__alloc((size_t)cap * sizeof *nw);
        if (!nw) {
            pthread_mutex_unlock(&h->mu);
            sl__net_close(p, SL_ENOMEM, "service: out of memory for a new worker");
            return;
        }
        if (h->nworkers)
            memcpy(nw, h->workers, (size_t)h->nworkers * sizeof *nw);
        sl__free(h->workers, (size_t)h->capworkers * sizeof *nw);
        h->workers = nw;
        h->capworkers = cap;
    }
    worker *w = &h->workers[h->nworkers];
    memset(w, 0, sizeof *w);
    w->peer = p;
    w->state = W_HANDSHAKE;
    w->joined = w->last_heard = now_ns();
    char name[64];
    snprintf(name, sizeof name, "trainer rank %d of %d", h->dist.rank, h->dist.world_size);
    int rc = sl__hs_init(&w->hs, SL__ROLE_TRAINER, h->key, name, h->fingerprint, d->version);
    w->hs.worker_id = (uint32_t)h->nworkers;
    w->hs.heartbeat_ms = (uint32_t)d->spec.heartbeat_ms;
    w->hs.rank = (uint32_t)h->dist.rank;
    w->hs.world = (uint32_t)h->dist.world_size;
    h->nworkers++;
    sl__peer_set_user(p, (void *)(intptr_t)h->nworkers);
    pthread_mutex_unlock(&h->mu);
    if (rc < 0)
        sl__net_close(p, rc, sl_last_error());
}

/* A batch from worker wi: into the table if it is one the pass awaits. */
/* A paired worker broke the protocol: its link ends now, and nothing more
 * it sent is taken (frames already queued behind this one included). */
static void drop_worker(hub *h, const service_ds *d, int wi, const char *why)
{
    char copy[600];
    snprintf(copy, sizeof copy, "%s", why);
    sl__log(SL_LOG_WARN, "service: dropping worker %s: %s", sl__peer_name(h->workers[wi].peer),
            copy);
    worker_gone(h, d, wi, SL_ECORRUPT, copy);
    sl__net_close(h->workers[wi].peer, SL_ECORRUPT, copy);
}

static void take_batch(hub *h, const service_ds *d, int wi, sl__buf *buf,
                       const unsigned char *payload, size_t n)
{
    sl__msg_batch m;
    pass *ps = h->active;
    worker *w = &h->workers[wi];
    if (sl__msg_batch_read(payload, n, &m) < 0) {
        drop_worker(h, d, wi, sl_last_error());
        return;
    }
    uint32_t pid = (uint32_t)(m.split >> 32);
    int64_t k = (int64_t)(m.split & 0xffffffffu);
    if (!ps || pid != ps->id)
        return; /* an earlier pass's */
    if (k >= ps->nsplits || m.index < ps->splits[k].first ||
        m.index >= ps->splits[k].first + ps->splits[k].count) {
        char why[160];
        snprintf(why, sizeof why, "BATCH %lld outside split %lld", (long long)m.index,
                 (long long)k);
        drop_worker(h, d, wi, why);
        return;
    }
    int64_t slot = m.index - ps->start;
    if (m.index < ps->next || ps->got[slot]) {
        return; /* a duplicate */
    }
    sl_element *el;
    if (sl__wire_element_read(buf, payload, n, &m, &el) < 0) {
        char why[600];
        snprintf(why, sizeof why, "worker %s: %s", sl__peer_name(w->peer), sl_last_error());
        drop_worker(h, d, wi, why);
        return;
    }
    ps->got[slot] = el;
    ps->splits[k].received++;
    ps->held += (int64_t)sl__element_bytes(el);
    sl__stat_add(&ps->ns->net_bytes, (int64_t)n + SL__WIRE_HDR);
    atomic_store(&ps->ns->bytes_held, ps->held);
    if ((int64_t)n > ps->batch_bytes) {
        ps->batch_bytes = (int64_t)n;
        dispatch(h, d); /* the window is known now, or narrower */
    }
    pthread_cond_broadcast(&h->cv);
}

static void on_frame(void *user, sl__peer *p, const sl__wire_hdr *hd, sl__buf *buf,
                     const unsigned char *payload, size_t n)
{
    service_ds *d = user;
    hub *h = d->hub;
    sl__bytes out = {0};
    pthread_mutex_lock(&h->mu);
    int wi = worker_index(p);
    worker *w = wi >= 0 && wi < h->nworkers ? &h->workers[wi] : NULL;
    if (!w || w->state == W_GONE)
        goto done;
    w->last_heard = now_ns();
    if (w->state == W_HANDSHAKE) {
        int rc = sl__hs_step(&w->hs, hd, payload, n, &out);
        if (out.n)
            sl__net_send(p, &out);
        if (rc < 0) {
            char why[1200];
            snprintf(why, sizeof why, "service: %s refused: %s", sl__peer_name(p),
                     sl_last_error());
            sl__log(SL_LOG_WARN, "%s", why);
            sl__net_close(p, rc, why); /* after the ERROR frame: a flushed close */
        } else if (rc == 1) {
            w->state = W_READY;
            sl__peer_set_max_frame(p, PAIRED_FRAME);
            sl__log(SL_LOG_INFO, "service: worker %s (%s) joined", sl__peer_name(p),
                    w->hs.peer_name);
            count_workers(h);
            dispatch(h, d);
        }
        goto done;
    }
    switch (hd->type) {
    case SL__MSG_BATCH:
        take_batch(h, d, wi, buf, payload, n);
        break;
    case SL__MSG_SPLIT_DONE: {
        uint64_t id, count, busy;
        if (sl__msg_done_read(payload, n, &id, &count, &busy) < 0) {
            worker_gone(h, d, wi, SL_ECORRUPT, sl_last_error());
            sl__net_close(p, SL_ECORRUPT, sl_last_error());
            break;
        }
        pass *ps = h->active;
        int64_t k = (int64_t)(id & 0xffffffffu);
        if (!ps || (uint32_t)(id >> 32) != ps->id || k >= ps->nsplits ||
            ps->splits[k].worker != wi)
            break; /* an earlier pass's, or a split taken back */
        split *sp = &ps->splits[k];
        if ((int64_t)count != sp->count || sp->received < sp->count) {
            /* it made another number of batches than the trainer's own
             * pipeline would: another pipeline after all, which no
             * recomputation mends */
            if (!ps->err) {
                ps->err = SL_EMISMATCH;
                snprintf(ps->errmsg, sizeof ps->errmsg, "service: worker %s (%s) made %llu "
                         "batches of split %lld, where the pipeline has %lld: its data or "
                         "code differs from the trainer's", sl__peer_name(p), w->hs.peer_name,
                         (unsigned long long)count, (long long)k, (long long)sp->count);
                pthread_cond_broadcast(&h->cv);
            }
            break;
        }
        sp->worker = -1;
        ps->in_flight--;
        atomic_store(&ps->ns->in_flight, ps->in_flight);
        sl__stat_add(&ps->ns->remote_busy_ns, (int64_t)busy);
        if (w->holding > 0)
            w->holding--;
        dispatch(h, d);
        break;
    }
    case SL__MSG_PING: {
        uint64_t a, b;
        if (sl__msg_pair_read(hd->type, payload, n, &a, &b) == 0 &&
            sl__msg_pair_write(&out, SL__MSG_PONG, a, b) == 0)
            sl__net_send(p, &out);
        break;
    }
    case SL__MSG_PONG:
        break;
    case SL__MSG_ERROR: {
        sl__msg_error e;
        pass *ps = h->active;
        if (sl__msg_error_read(payload, n, &e) == 0 && ps && !ps->err) {
            ps->err = e.code;
            snprintf(ps->errmsg, sizeof ps->errmsg, "service: worker %s (%s): %s",
                     sl__peer_name(p), w->hs.peer_name, e.text);
            pthread_cond_broadcast(&h->cv);
        }
        break;
    }
    case SL__MSG_BYE:
        worker_gone(h, d, wi, 0, "goodbye");
        sl__net_close(p, 0, NULL);
        break;
    default: {
        char why[200];
        snprintf(why, sizeof why, "it sent %s, which a worker does not send",
                 sl__msg_name(hd->type));
        drop_worker(h, d, wi, why);
    }
    }
done:
    pthread_mutex_unlock(&h->mu);
    sl__bytes_free(&out);
    sl__buf_release(buf);
}

static void on_close(void *user, sl__peer *p, int code, const char *why)
{
    service_ds *d = user;
    hub *h = d->hub;
    pthread_mutex_lock(&h->mu);
    int wi = worker_index(p);
    if (wi >= 0 && wi < h->nworkers)
        worker_gone(h, d, wi, code, why);
    pthread_mutex_unlock(&h->mu);
}

static void on_tick(void *user)
{
    service_ds *d = user;
    hub *h = d->hub;
    int64_t now = now_ns(), beat = (int64_t)d->spec.heartbeat_ms * 1000000;
    int64_t timeout = (int64_t)d->spec.timeout_ms * 1000000;
    pthread_mutex_lock(&h->mu);
    for (int i = 0; i < h->nworkers; i++) {
        worker *w = &h->workers[i];
        if (w->state == W_GONE)
            continue;
        if (w->state == W_HANDSHAKE) {
            /* a worker builds its pipeline inside the handshake (a listing,
             * Python imports): it gets longer than the heartbeat's timeout,
             * but not forever */
            if (now - w->joined > (timeout > HANDSHAKE_NS ? timeout : HANDSHAKE_NS)) {
                char why[96];
                snprintf(why, sizeof why, "no pairing in %lld s", (long long)((now - w->joined)
                                                                            / 1000000000));
                worker_gone(h, d, i, SL_EIO, why);
                sl__net_close(w->peer, SL_EIO, why);
            }
            continue;
        }
        if (now - w->last_heard > timeout) {
            char why[160];
            snprintf(why, sizeof why, "no answer for %lld ms (stopped, or its host is gone)",
                     (long long)((now - w->last_heard) / 1000000));
            worker_gone(h, d, i, SL_EIO, why);
            sl__net_close(w->peer, SL_EIO, why);
            continue;
        }
        if (w->state == W_READY && now - w->last_ping >= beat) {
            sl__bytes b = {0};
            if (sl__msg_pair_write(&b, SL__MSG_PING, (uint64_t)now, 0) == 0)
                sl__net_send(w->peer, &b);
            sl__bytes_free(&b);
            w->last_ping = now;
        }
    }
    pthread_mutex_unlock(&h->mu);
}

/* ---- the hub ------------------------------------------------------------ */

/* "host:port", "[v6]:port" or ":port" into host (NULL: any) and port. */
static int parse_address(const char *a, char *host, size_t cap, int *port, bool *any)
{
    const char *colon = strrchr(a, ':');
    if (!colon)
        return sl__set_error(SL_EINVAL, "service: address \"%s\" is not host:port", a);
    char *end;
    long p = strtol(colon + 1, &end, 10);
    if (*end || p < 0 || p > 65535 || end == colon + 1)
        return sl__set_error(SL_EINVAL, "service: address \"%s\": bad port", a);
    size_t n = (size_t)(colon - a);
    if (n >= 2 && a[0] == '[' && a[n - 1] == ']')
        a++, n -= 2;
    if (n >= cap)
        return sl__set_error(SL_EINVAL, "service: address \"%s\": host too long", a);
    memcpy(host, a, n);
    host[n] = 0;
    *any = n == 0;
    *port = (int)p;
    return 0;
}

static void hub_free(hub *h)
{
    if (!h)
        return;
    if (h->net) {
        /* tell the workers, then stop (no hook runs after sl__net_free) */
        sl__bytes b = {0};
        sl__msg_empty_write(&b, SL__MSG_BYE);
        pthread_mutex_lock(&h->mu);
        h->closing = true;
        for (int i = 0; i < h->nworkers; i++)
            if (h->workers[i].state == W_READY) {
                sl__net_send(h->workers[i].peer, &b);
                sl__net_close(h->workers[i].peer, 0, NULL); /* flushed: BYE gets there */
            }
        pthread_mutex_unlock(&h->mu);
        sl__bytes_free(&b);
        sl__net_drain(h->net, 1000);
        sl__net_free(h->net);
    }
    for (int i = 0; i < h->nworkers; i++)
        sl__hs_clear(&h->workers[i].hs);
    sl__free(h->workers, (size_t)h->capworkers * sizeof *h->workers);
    sl__cleanse(h->key, sizeof h->key);
    pthread_mutex_destroy(&h->mu);
    pthread_cond_destroy(&h->cv);
    sl__free(h, sizeof *h);
}

static int hub_start(service_ds *d)
{
    hub *h = sl__calloc(1, sizeof *h);
    if (!h)
        return SL_ENOMEM;
    pthread_mutex_init(&h->mu, NULL);
    pthread_cond_init(&h->cv, NULL);
    d->hub = h;
    h->fingerprint = sl_dataset_fingerprint(d->base.inputs[0]);
    int rc = sl_distributed_context(&h->dist);
    char host[256];
    int port = 0;
    bool any = false;
    if (rc == 0)
        rc = parse_address(d->address, host, sizeof host, &port, &any);
    if (rc == 0 && port)
        port += h->dist.local_rank;
    sl__net_hooks hk = {.user = d, .on_frame = on_frame, .on_accept = on_accept,
                        .on_close = on_close, .on_tick = on_tick,
                        .tick_ms = d->spec.heartbeat_ms / 2 > 0 ? d->spec.heartbeat_ms / 2 : 1,
                        .max_frame = UNPAIRED_FRAME};
    if (rc == 0) /* first: a build without UCX says so, whatever else is amiss */
        rc = sl__net_create(&hk, &h->net);
    if (rc == 0)
        rc = sl__service_key(h->key);
    if (rc == 0)
        rc = sl__net_listen(h->net, any ? NULL : host, port, &h->port);
    return rc;
}

/* ---- the node ----------------------------------------------------------- */

typedef struct service_iter {
    sl__iter base;
    pass *ps;
} service_iter;

/* The tables' lengths as allocated (at least one entry each). */
static size_t got_len(const pass *ps)
{
    int64_t left = ps->nbatches - ps->start;
    return left > 0 ? (size_t)left : 1;
}

static size_t splits_len(const pass *ps)
{
    return ps->nsplits > 0 ? (size_t)ps->nsplits : 1;
}

static void pass_free(pass *ps)
{
    if (!ps)
        return;
    if (ps->got) {
        for (size_t i = 0; i < got_len(ps); i++)
            sl_element_release(ps->got[i]);
        sl__free(ps->got, got_len(ps) * sizeof *ps->got);
    }
    if (ps->splits)
        sl__free(ps->splits, splits_len(ps) * sizeof *ps->splits);
    sl__free(ps, sizeof *ps);
}

static int service_next(sl__iter *base, sl_element **out)
{
    service_iter *it = (service_iter *)base;
    const service_ds *d = (const service_ds *)base->ds;
    hub *h = d->hub;
    pass *ps = it->ps;
    pthread_mutex_lock(&h->mu);
    int rc = 0;
    bool waited = false;
    for (;;) {
        if (ps->err) {
            rc = sl__set_error(ps->err, "%s", ps->errmsg);
            break;
        }
        if (ps->cancelled) {
            rc = sl__set_error(SL_ECANCELED, "service: canceled");
            break;
        }
        if (h->active != ps) {
            rc = sl__set_error(SL_ESTATE, "service: a newer pass over the dataset replaced "
                               "this one (one pass at a time)");
            break;
        }
        if (ps->next >= ps->nbatches) {
            rc = SL_EOF;
            break;
        }
        int64_t slot = ps->next - ps->start;
        int64_t k = split_of(ps, ps->next, d->spec.split_batches);
        if (ps->got[slot]) {
            int ready = 0; /* what was there to take, up to a bound */
            for (int64_t j = slot; j < ps->nbatches - ps->start && ps->got[j] && ready < 64; j++)
                ready++;
            sl__stat_take(ps->ns, waited ? 0 : ready);
            *out = ps->got[slot];
            ps->got[slot] = NULL;
            ps->held -= (int64_t)sl__element_bytes(*out);
            if (ps->held < 0)
                ps->held = 0;
            atomic_store(&ps->ns->bytes_held, ps->held);
            ps->next++;
            dispatch(h, d); /* the window moved */
            break;
        }
        if (ps->splits[k].lost) {
            ps->next++;
            dispatch(h, d); /* the window moved */
            continue;
        }
        struct timespec until;
        clock_gettime(CLOCK_REALTIME, &until);
        until.tv_nsec += 100000000;
        if (until.tv_nsec >= 1000000000)
            until.tv_sec++, until.tv_nsec -= 1000000000;
        waited = true;
        pthread_cond_timedwait(&h->cv, &h->mu, &until);
    }
    pthread_mutex_unlock(&h->mu);
    return rc;
}

static void service_cancel(sl__iter *base)
{
    service_iter *it = (service_iter *)base;
    hub *h = ((const service_ds *)base->ds)->hub;
    pthread_mutex_lock(&h->mu);
    it->ps->cancelled = true;
    pthread_cond_broadcast(&h->cv);
    pthread_mutex_unlock(&h->mu);
}

static void service_destroy(sl__iter *base)
{
    service_iter *it = (service_iter *)base;
    sl__iter_unregister(base);
    hub *h = ((const service_ds *)base->ds)->hub;
    pthread_mutex_lock(&h->mu);
    if (h->active == it->ps)
        h->active = NULL;
    pthread_mutex_unlock(&h->mu);
    pass_free(it->ps);
}

static int service_save(sl__iter *base, sl__bytes *w)
{
    const service_iter *it = (const service_iter *)base;
    int64_t f[1] = {it->ps->next};
    return sl__state_node(w, base, 1, f, 0);
}

static const sl__iter_ops service_iter_ops = {
    .next = service_next,
    .cancel = service_cancel,
    .destroy = service_destroy,
    .save = service_save,
};

static int service_make(const sl_dataset *ds, sl__tree *tree, uint64_t key, int64_t epoch,
                        sl__iter **out)
{
    const service_ds *d = (const service_ds *)ds;
    hub *h = d->hub;
    service_iter *it = sl__iter_alloc(&service_iter_ops, sizeof *it, ds, tree, key, epoch);
    if (!it)
        return SL_ENOMEM;
    pass *ps = sl__calloc(1, sizeof *ps);
    int rc = ps ? 0 : SL_ENOMEM;
    int64_t f[1] = {0};
    if (rc == 0 && (rc = sl__iter_restored(&it->base, 1, f)) > 0)
        rc = sl__state_range(&it->base, "next", f[0], 0, d->plan.batches);
    if (rc == 0) {
        it->ps = ps;
        ps->ns = it->base.stats;
        it->base.stats->kind = SL__NODE_SERVICE;
        ps->epoch = epoch;
        ps->seed = tree->seed_option;
        ps->nbatches = d->plan.batches;
        ps->start = ps->next = f[0];
        int64_t left = ps->nbatches - ps->start, per = d->spec.split_batches;
        ps->nsplits = (left + per - 1) / per;
        ps->splits = sl__calloc(splits_len(ps), sizeof *ps->splits);
        ps->got = sl__calloc(got_len(ps), sizeof *ps->got);
        if (!ps->splits || !ps->got)
            rc = SL_ENOMEM;
        for (int64_t k = 0; rc == 0 && k < ps->nsplits; k++) {
            split *s = &ps->splits[k];
            s->first = ps->start + k * per;
            s->count = s->first + per <= ps->nbatches ? per : ps->nbatches - s->first;
            s->worker = -1;
        }
    }
    if (rc < 0) {
        if (ps && !it->ps)
            sl__free(ps, sizeof *ps);
        sl__iter_free(&it->base);
        return rc;
    }
    pthread_mutex_lock(&h->mu);
    ps->id = ++h->next_pass_id;
    h->active = ps; /* an older pass's iterator now fails its next call */
    for (int i = 0; i < h->nworkers; i++)
        h->workers[i].holding = 0; /* workers drop an older pass's splits (worker.c) */
    count_workers(h);
    dispatch(h, d);
    pthread_cond_broadcast(&h->cv);
    pthread_mutex_unlock(&h->mu);
    sl__iter_register(&it->base);
    *out = &it->base;
    return 0;
}

static int64_t service_cardinality(const sl_dataset *ds)
{
    return sl_dataset_cardinality(ds->inputs[0]);
}

static uint64_t service_fingerprint(const sl_dataset *ds, uint64_t h)
{
    const service_ds *d = (const service_ds *)ds;
    return sl__hash_str(h, d->version);
}

static void service_destroy_ds(sl_dataset *ds)
{
    service_ds *d = (service_ds *)ds;
    hub_free(d->hub);
    sl__strfree(d->address);
    sl__strfree(d->version);
}

static const sl__node_ops service_ops = {
    .kind = "service",
    .make_iter = service_make,
    .cardinality = service_cardinality,
    .fingerprint = service_fingerprint,
    .destroy = service_destroy_ds,
    .structure = sl__structure_of_input,
};

SL_API int sl_service_spec_init(sl_service_spec *spec, size_t struct_size)
{
    sl_service_spec d = {.struct_size = struct_size, .split_batches = 2,
                         .max_bytes = 256ll << 20, .heartbeat_ms = 500, .timeout_ms = 5000};
    return sl__struct_init(spec, struct_size, &d, sizeof d, SPEC_V1_SIZE,
                           "sl_service_spec_init");
}

SL_API sl_dataset *sl_service(sl_dataset *in, const sl_service_spec *spec)
{
    service_ds *d = (service_ds *)sl__dataset_new(&service_ops, sizeof *d, in);
    if (!d)
        return NULL;
    if (!spec)
        return sl__dataset_fail(&d->base, SL_EINVAL, "service: NULL spec");
    int rc = sl__struct_load(spec, &d->spec, NULL, sizeof d->spec, SPEC_V1_SIZE, "service");
    if (rc < 0) {
        sl_dataset_release(&d->base);
        return NULL;
    }
    sl_service_spec *s = &d->spec;
    if (s->split_batches < 1 || s->max_bytes < 0 || s->heartbeat_ms < 1 ||
        s->timeout_ms < s->heartbeat_ms || (s->flags & ~SL_SERVICE_AT_MOST_ONCE))
        return sl__dataset_fail(&d->base, SL_EINVAL, "service: split_batches %lld, max_bytes "
                                "%lld, heartbeat %d ms, timeout %d ms (at least the heartbeat) "
                                "or flags %#x", (long long)s->split_batches,
                                (long long)s->max_bytes, s->heartbeat_ms, s->timeout_ms,
                                s->flags);
    if (!s->max_bytes)
        s->max_bytes = 256ll << 20;
    const char *env = getenv("SLUICE_SERVICE_ADDRESS");
    char def[32];
    snprintf(def, sizeof def, "0.0.0.0:%d", DEFAULT_PORT);
    d->address = sl__strdup(s->address ? s->address : env && *env ? env : def);
    d->version = sl__strdup(s->version ? s->version : "");
    s->address = s->version = NULL; /* the caller's: not kept */
    if (!d->address || !d->version)
        return sl__dataset_fail(&d->base, SL_ENOMEM, "service: out of memory");
    if ((rc = sl__split_plan_make(d->base.inputs[0], &d->plan)) < 0 || (rc = hub_start(d)) < 0) {
        sl_dataset_release(&d->base);
        return NULL;
    }
    return &d->base;
}

SL_API int sl_service_port(const sl_dataset *ds)
{
    if (!ds || ds->ops != &service_ops)
        return sl__set_error(SL_EINVAL, "sl_service_port: not an sl_service dataset");
    return ((const service_ds *)ds)->hub->port;
}
