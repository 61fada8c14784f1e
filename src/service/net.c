/* The service's transport over UCX's ucp active messages (net.h). */
#include "net.h"
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "../core/error.h"

#ifdef SLUICE_NO_UCX

static int no_ucx(void)
{
    return sl__set_error(SL_EUNSUPPORTED, "the preprocessing service needs UCX: this sluice "
                                          "was built without it (SLUICE_WITH_UCX=OFF, or "
                                          "libucx-dev missing)");
}

int sl__net_create(const sl__net_hooks *hooks, sl__net **out)
{
    (void)hooks;
    *out = NULL;
    return no_ucx();
}
int sl__net_listen(sl__net *n, const char *host, int port, int *bound)
{
    (void)n, (void)host, (void)port, (void)bound;
    return no_ucx();
}
int sl__net_connect(sl__net *n, const char *host, int port, sl__peer **out)
{
    (void)n, (void)host, (void)port;
    *out = NULL;
    return no_ucx();
}
int sl__net_send(sl__peer *p, const sl__bytes *b)
{
    (void)p, (void)b;
    return no_ucx();
}
int sl__net_send_batch(sl__peer *p, uint64_t split, int64_t index, sl_element *el,
                       void (*done)(void *arg, int status), void *arg)
{
    (void)p, (void)split, (void)index, (void)el, (void)done, (void)arg;
    return no_ucx();
}
void sl__net_close(sl__peer *p, int code, const char *why)
{
    (void)p, (void)code, (void)why;
}
const char *sl__peer_name(const sl__peer *p)
{
    (void)p;
    return "";
}
void *sl__peer_user(const sl__peer *p)
{
    (void)p;
    return NULL;
}
void sl__peer_set_user(sl__peer *p, void *user)
{
    (void)p, (void)user;
}
int sl__peer_transports(sl__peer *p, char *am, char *rma, size_t cap)
{
    (void)p, (void)am, (void)rma, (void)cap;
    return no_ucx();
}
void sl__net_bytes(const sl__net *n, uint64_t *sent, uint64_t *received)
{
    (void)n;
    *sent = *received = 0;
}
void sl__peer_set_max_frame(sl__peer *p, uint64_t bytes)
{
    (void)p, (void)bytes;
}
bool sl__net_drain(sl__net *n, int timeout_ms)
{
    (void)n, (void)timeout_ms;
    return true;
}
void sl__net_free(sl__net *n)
{
    (void)n;
}

#else
#include <arpa/inet.h>
#include <dlfcn.h>
#include <netdb.h>
#include <poll.h>
#include <time.h>
#include <pthread.h>
#include <ucp/api/ucp.h>
#include "../core/clock.h"
#include "../core/crc32c.h"
#include "../core/element.h"
#include "../core/log.h"


/* UCX is loaded when the service is first used, not linked: a process
 * that links sluice and never serves batches does not get UCX's memory
 * hooks (libucm replaces mmap and friends in every process that links it,
 * which sanitizers and some allocators do not survive), and libsluice
 * runs where UCX is not installed. */
#define UCX_FUNCS(X)                                                                \
    X(ucp_am_recv_data_nbx) \
    X(ucp_am_send_nbx) \
    X(ucp_cleanup) \
    X(ucp_config_modify) \
    X(ucp_config_read) \
    X(ucp_config_release) \
    X(ucp_conn_request_query) \
    X(ucp_ep_close_nbx) \
    X(ucp_ep_create) \
    X(ucp_ep_flush_nbx) \
    X(ucp_ep_print_info) \
    X(ucp_init_version) \
    X(ucp_listener_create) \
    X(ucp_listener_destroy) \
    X(ucp_listener_query) \
    X(ucp_listener_reject) \
    X(ucp_request_check_status) \
    X(ucp_request_free) \
    X(ucp_worker_arm) \
    X(ucp_worker_create) \
    X(ucp_worker_destroy) \
    X(ucp_worker_get_efd) \
    X(ucp_worker_progress) \
    X(ucp_worker_set_am_recv_handler) \
    X(ucp_worker_signal) \
    X(ucs_status_string)

static struct ucx_api {
#define UCX_MEMBER(f) __typeof__(&f) f;
    UCX_FUNCS(UCX_MEMBER)
#undef UCX_MEMBER
} U;
static int ucx_loaded; /* 1 loaded, < 0 the error */
static char ucx_why[512];

static void load_ucx(void)
{
    static const char *const names[] = {"libucp.so.0", "libucp.so"};
    void *h = NULL;
    for (size_t i = 0; !h && i < sizeof names / sizeof *names; i++)
        h = dlopen(names[i], RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        snprintf(ucx_why, sizeof ucx_why, "cannot load UCX (libucp.so.0; Debian: apt-get "
                 "install libucx0): %s", dlerror());
        ucx_loaded = SL_EUNSUPPORTED;
        return;
    }
#define UCX_LOOKUP(f)                                                               \
    if (!(*(void **)&U.f = dlsym(h, #f))) {                                          \
        snprintf(ucx_why, sizeof ucx_why, "UCX's library lacks %s: too old", #f);   \
        ucx_loaded = SL_EUNSUPPORTED;                                                \
        return;                                                                      \
    }
    UCX_FUNCS(UCX_LOOKUP)
#undef UCX_LOOKUP
    ucx_loaded = 1; /* h stays loaded for the process's life */
}

/* 0 once UCX is loaded, or SL_EUNSUPPORTED saying why not. */
static int ucx_load(void)
{
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    pthread_once(&once, load_ucx);
    return ucx_loaded == 1 ? 0 : sl__set_error(ucx_loaded, "service: %s", ucx_why);
}

#define AM_ID 0x51u
/* A batch this small goes out as one contiguous copy. */
#define SMALL_BATCH (16u << 10)

/* A frame that came ahead of its turn (progress thread only). */
typedef struct pend {
    struct pend *next;
    sl__wire_hdr h;
    sl__buf *buf;
    const unsigned char *payload; /* inside buf */
    size_t n;
} pend;

/* Frames a peer may send ahead of the one awaited: few until it has
 * proved the secret (what a stranger can make this side hold), many once
 * the layer above raises its frame limit. */
#define MAX_AHEAD 1024
#define MAX_AHEAD_UNPAIRED 4

struct sl__peer {
    sl__net *net;
    ucp_ep_h ep;
    char name[128];
    void *user;
    atomic_bool closed;
    sl__peer *next;
    /* progress thread: the next sequence numbers out and in, and what came
     * early, sorted by sequence */
    uint64_t send_seq, recv_next;
    pend *pending;
    _Atomic uint64_t max_frame; /* longest payload taken from it now */
    atomic_int max_ahead;       /* frames it may send ahead of the one awaited */
    /* progress thread: whether the connection is set up (its first flush
     * done); sends made before wait in parked, in order */
    bool up;
    struct cmd *parked, **parked_tail;
};

enum { CMD_SEND, CMD_BATCH, CMD_CLOSE, CMD_CALL };

typedef struct cmd {
    struct cmd *next;
    int kind;
    sl__peer *peer;
    unsigned char hdr[SL__WIRE_HDR];
    /* CMD_SEND: the payload */
    sl__buf *payload;
    size_t n;
    /* CMD_BATCH: the element, its table, the gather list */
    sl_element *el;
    sl__bytes head;
    ucp_dt_iov_t *iov;
    int niov, iovcap;
    void (*done)(void *arg, int status);
    void *arg;
    /* CMD_CLOSE */
    int code;
    char why[256];
    /* CMD_CALL: fn on the progress thread, the caller waiting */
    void (*fn)(void *arg);
    bool finished;
} cmd;

typedef struct rx {
    sl__peer *peer;
    sl__buf *buf;
    size_t n; /* the frame's bytes, header included */
} rx;

struct sl__net {
    sl__net_hooks hooks;
    ucp_context_h ctx;
    ucp_worker_h worker;
    ucp_listener_h listener;
    int efd;
    pthread_t thread;
    bool started;
    atomic_bool stop;
    pthread_mutex_t mu;
    pthread_cond_t cv; /* CMD_CALL completions */
    cmd *head, **tail; /* queued commands, under mu */
    sl__peer *peers;   /* every peer ever made, under mu */
    void **closing;    /* ep close requests in flight (progress thread) */
    int nclosing, capclosing;
    _Atomic uint64_t sent, received;
    atomic_int inflight; /* sends queued or in UCX's hands */
};

static int ucx_error(const char *what, ucs_status_t st)
{
    return sl__set_error(SL_EIO, "UCX: %s: %s", what, U.ucs_status_string(st));
}

/* ---- peers and closing ------------------------------------------------ */

static sl__peer *peer_new(sl__net *n, const char *name)
{
    sl__peer *p = sl__alloc(sizeof *p);
    if (!p)
        return NULL;
    memset(p, 0, sizeof *p);
    p->net = n;
    atomic_store(&p->max_frame, n->hooks.max_frame);
    atomic_store(&p->max_ahead, MAX_AHEAD_UNPAIRED);
    p->parked_tail = &p->parked;
    snprintf(p->name, sizeof p->name, "%s", name);
    pthread_mutex_lock(&n->mu);
    p->next = n->peers;
    n->peers = p;
    pthread_mutex_unlock(&n->mu);
    return p;
}

static sl__peer *peer_of(sl__net *n, ucp_ep_h ep)
{
    pthread_mutex_lock(&n->mu);
    sl__peer *p = n->peers;
    while (p && p->ep != ep)
        p = p->next;
    pthread_mutex_unlock(&n->mu);
    return p;
}

static void pend_free_all(sl__peer *p);
static void fail_parked(sl__peer *p);

/* Progress thread: forgets the ep (its requests end with errors) and tells
 * the hook once. */
static void close_peer(sl__peer *p, int code, const char *why, bool notify, bool force)
{
    if (atomic_exchange(&p->closed, true))
        return;
    sl__net *n = p->net;
    pend_free_all(p);
    fail_parked(p);
    if (p->ep) {
        /* flushed, so that a last ERROR or BYE gets out; forced where the
         * link is broken or the peer hostile */
        ucp_request_param_t prm = {.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS,
                                   .flags = force ? UCP_EP_CLOSE_FLAG_FORCE : 0};
        void *req = U.ucp_ep_close_nbx(p->ep, &prm);
        if (UCS_PTR_IS_PTR(req)) {
            if (n->nclosing == n->capclosing) {
                int cap = n->capclosing ? 2 * n->capclosing : 8;
                void **c = sl__alloc((size_t)cap * sizeof *c);
                if (c) {
                    if (n->nclosing)
                        memcpy(c, n->closing, (size_t)n->nclosing * sizeof *c);
                    sl__free(n->closing, (size_t)n->capclosing * sizeof *c);
                    n->closing = c, n->capclosing = cap;
                }
            }
            if (n->nclosing < n->capclosing)
                n->closing[n->nclosing++] = req;
            else
                U.ucp_request_free(req); /* UCX finishes it on its own */
        }
    }
    if (notify && n->hooks.on_close)
        n->hooks.on_close(n->hooks.user, p, code, why);
}

static void reap_closing(sl__net *n)
{
    for (int i = 0; i < n->nclosing;) {
        if (U.ucp_request_check_status(n->closing[i]) != UCS_INPROGRESS) {
            U.ucp_request_free(n->closing[i]);
            n->closing[i] = n->closing[--n->nclosing];
        } else {
            i++;
        }
    }
}

static void ep_error(void *arg, ucp_ep_h ep, ucs_status_t st)
{
    (void)ep;
    sl__peer *p = arg;
    char why[256];
    snprintf(why, sizeof why, "peer %s: connection lost (%s)", p->name, U.ucs_status_string(st));
    close_peer(p, SL_EIO, why, true, true);
}

/* A frame that does not parse ends its peer's link. */
static void bad_frame(sl__peer *p)
{
    char why[512];
    snprintf(why, sizeof why, "peer %s: %s", p->name, sl_last_error());
    close_peer(p, sl_last_error_code() ? sl_last_error_code() : SL_ECORRUPT, why, true, true);
}

/* ---- receiving -------------------------------------------------------- */

static void deliver(sl__net *n, sl__peer *p, const pend *q)
{
    atomic_fetch_add(&n->received, SL__WIRE_HDR + q->n);
    if (atomic_load(&p->closed) || !n->hooks.on_frame) {
        sl__buf_release(q->buf);
        return;
    }
    n->hooks.on_frame(n->hooks.user, p, &q->h, q->buf, q->payload, q->n);
}

static void pend_free_all(sl__peer *p)
{
    for (pend *q = p->pending, *next; q; q = next) {
        next = q->next;
        sl__buf_release(q->buf);
        sl__free(q, sizeof *q);
    }
    p->pending = NULL;
}

/* Hands up every frame whose turn has come. */
static void flush(sl__net *n, sl__peer *p)
{
    while (p->pending && p->pending->h.seq == p->recv_next) {
        pend *q = p->pending;
        p->pending = q->next;
        p->recv_next++;
        deliver(n, p, q);
        sl__free(q, sizeof *q);
        if (atomic_load(&p->closed)) {
            pend_free_all(p);
            return;
        }
    }
}

/* Files frame h (its payload of len bytes at payload, in buf) to be
 * handed up in its turn. NULL, the error set, for a number already seen
 * or too far ahead. */
static pend *file_frame(sl__peer *p, const sl__wire_hdr *h, sl__buf *buf,
                        const unsigned char *payload, size_t len)
{
    if (h->seq < p->recv_next || h->seq - p->recv_next >= (uint64_t)atomic_load(&p->max_ahead)) {
        sl__set_error(SL_ECORRUPT, "%s numbered %llu where %llu was due",
                      sl__msg_name(h->type), (unsigned long long)h->seq,
                      (unsigned long long)p->recv_next);
        return NULL;
    }
    pend **at = &p->pending;
    while (*at && (*at)->h.seq < h->seq)
        at = &(*at)->next;
    if (*at && (*at)->h.seq == h->seq) {
        sl__set_error(SL_ECORRUPT, "%s numbered %llu twice", sl__msg_name(h->type),
                      (unsigned long long)h->seq);
        return NULL;
    }
    pend *q = sl__alloc(sizeof *q);
    if (!q)
        return NULL;
    *q = (pend){.next = *at, .h = *h, .buf = buf, .payload = payload, .n = len};
    *at = q;
    return q;
}

/* Where a rendezvous lands the frame in its buffer: the payload then
 * starts on a 64-byte boundary, as the views of its tensors want. */
#define RNDV_AT (SL__WIRE_ALIGN - SL__WIRE_HDR)

/* Checks a whole frame's header (at f, len bytes in all): 0 and *h, or
 * the error set. */
static int frame_header(sl__peer *p, const unsigned char *f, size_t len, sl__wire_hdr *h)
{
    if (len < SL__WIRE_HDR)
        return sl__set_error(SL_ECORRUPT, "a message of %zu bytes, shorter than a header", len);
    int rc = sl__wire_hdr_read(f, len, atomic_load(&p->max_frame), h);
    if (rc == 0 && len - SL__WIRE_HDR != h->length)
        rc = sl__set_error(SL_ECORRUPT, "%s payload of %zu bytes, header says %llu",
                           sl__msg_name(h->type), len - SL__WIRE_HDR,
                           (unsigned long long)h->length);
    return rc;
}

static void rndv_done(void *request, ucs_status_t st, size_t length, void *user_data)
{
    rx *r = user_data;
    sl__peer *p = r->peer;
    sl__wire_hdr h;
    const unsigned char *f = r->buf->data + RNDV_AT;
    if (atomic_load(&p->closed)) {
        /* the pending list went with the link: the buffer is ours */
    } else if (st != UCS_OK) {
        ucx_error("receiving a message", st);
        bad_frame(p);
    } else if (length != r->n || frame_header(p, f, length, &h) ||
               sl__wire_payload_check(&h, f + SL__WIRE_HDR, length - SL__WIRE_HDR)) {
        if (length != r->n)
            sl__set_error(SL_ECORRUPT, "a message of %zu bytes, %zu announced", length, r->n);
        bad_frame(p);
    } else if (!file_frame(p, &h, r->buf, f + SL__WIRE_HDR, length - SL__WIRE_HDR)) {
        bad_frame(p);
    } else {
        r->buf = NULL; /* the pending list's now */
        flush(p->net, p);
    }
    sl__buf_release(r->buf);
    sl__free(r, sizeof *r);
    if (request)
        U.ucp_request_free(request);
}

/* Every frame travels whole in the message's data, with no user header
 * (a header UCX keeps apart would have to be copied out first anyway). */
static ucs_status_t am_recv(void *arg, const void *header, size_t hlen, void *data, size_t length,
                            const ucp_am_recv_param_t *prm)
{
    (void)header;
    sl__net *n = arg;
    sl__peer *p = (prm->recv_attr & UCP_AM_RECV_ATTR_FIELD_REPLY_EP)
                      ? peer_of(n, prm->reply_ep) : NULL;
    if (!p || atomic_load(&p->closed))
        return UCS_OK; /* a peer closed (or never made): drop */
    if (hlen != 0 || length < SL__WIRE_HDR ||
        length - SL__WIRE_HDR > atomic_load(&p->max_frame)) {
        sl__set_error(SL_ECORRUPT, "a message of %zu bytes (%zu of header), where a frame of "
                      "%d to %llu was due", length, hlen, SL__WIRE_HDR,
                      (unsigned long long)(atomic_load(&p->max_frame) + SL__WIRE_HDR));
        bad_frame(p);
        return UCS_OK;
    }
    if (prm->recv_attr & UCP_AM_RECV_ATTR_FLAG_RNDV) {
        /* the header is read once the whole frame has landed */
        rx *r = sl__alloc(sizeof *r);
        sl__buf *buf = r ? sl__buf_get(length + RNDV_AT) : NULL;
        if (!buf) {
            if (r)
                sl__free(r, sizeof *r);
            bad_frame(p);
            return UCS_OK;
        }
        *r = (rx){.peer = p, .buf = buf, .n = length};
        ucp_request_param_t rp = {.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK |
                                                  UCP_OP_ATTR_FIELD_USER_DATA,
                                  .cb.recv_am = rndv_done, .user_data = r};
        void *req = U.ucp_am_recv_data_nbx(n->worker, data, buf->data + RNDV_AT, length, &rp);
        if (UCS_PTR_IS_ERR(req))
            rndv_done(NULL, UCS_PTR_STATUS(req), 0, r);
        else if (!req)
            rndv_done(NULL, UCS_OK, length, r);
        return UCS_INPROGRESS;
    }
    /* eager: the payload copied out of UCX's buffer, its CRC computed on
     * the way */
    sl__wire_hdr h;
    if (frame_header(p, data, length, &h)) {
        bad_frame(p);
        return UCS_OK;
    }
    size_t plen = length - SL__WIRE_HDR;
    sl__buf *buf = sl__buf_get(plen ? plen : 1);
    if (!buf) {
        bad_frame(p);
        return UCS_OK;
    }
    const unsigned char *src = (const unsigned char *)data + SL__WIRE_HDR;
    int bad = 0;
    if (h.flags & SL__WIRE_F_CRC) { /* checked as it is copied */
        if (sl__crc32c_copy(0, buf->data, src, plen) != h.payload_crc)
            bad = sl__set_error(SL_ECORRUPT, "%s payload fails its CRC", sl__msg_name(h.type));
    } else {
        memcpy(buf->data, src, plen);
        bad = sl__wire_payload_check(&h, buf->data, plen);
    }
    if (bad) {
        sl__buf_release(buf);
        bad_frame(p);
        return UCS_OK;
    }
    if (!file_frame(p, &h, buf, buf->data, plen)) {
        sl__buf_release(buf);
        bad_frame(p);
        return UCS_OK;
    }
    flush(n, p);
    return UCS_OK;
}

/* ---- sending ---------------------------------------------------------- */

static void cmd_free(cmd *c)
{
    sl__buf_release(c->payload);
    sl_element_release(c->el);
    sl__bytes_free(&c->head);
    sl__free(c->iov, (size_t)c->iovcap * sizeof *c->iov);
    sl__free(c, sizeof *c);
}

static void send_finished(cmd *c, int status)
{
    sl__net *n = c->peer->net;
    if (c->done)
        c->done(c->arg, status);
    cmd_free(c);
    atomic_fetch_sub(&n->inflight, 1);
}

static void fail_parked(sl__peer *p)
{
    cmd *c = p->parked;
    p->parked = NULL;
    p->parked_tail = &p->parked;
    while (c) {
        cmd *next = c->next;
        send_finished(c, SL_ECANCELED);
        c = next;
    }
}

static void send_cb(void *request, ucs_status_t st, void *user_data)
{
    send_finished(user_data, st == UCS_OK ? 0 : SL_EIO);
    U.ucp_request_free(request);
}

static void issue_send(sl__net *n, cmd *c)
{
    sl__peer *p = c->peer;
    if (atomic_load(&p->closed)) {
        send_finished(c, SL_ESTATE);
        return;
    }
    if (!p->up) { /* UCX 1.13 may send a message over a lane that the
                   * connection's set-up then replaces, and over shared
                   * memory such a message is dropped ("Invalid
                   * am_short_iov length"): hold sends until it is up */
        c->next = NULL;
        *p->parked_tail = c;
        p->parked_tail = &c->next;
        return;
    }
    ucp_request_param_t rp = {.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK |
                                              UCP_OP_ATTR_FIELD_USER_DATA |
                                              UCP_OP_ATTR_FIELD_FLAGS,
                              .cb.send = send_cb, .user_data = c,
                              .flags = UCP_AM_SEND_FLAG_REPLY};
    const void *data;
    size_t count, bytes;
    if (c->kind == CMD_BATCH) {
        rp.op_attr_mask |= UCP_OP_ATTR_FIELD_DATATYPE;
        rp.datatype = ucp_dt_make_iov();
        data = c->iov;
        count = (size_t)c->niov;
        bytes = 0;
        for (int i = 0; i < c->niov; i++)
            bytes += c->iov[i].length;
        sl__wire_hdr_set_seq(c->hdr, p->send_seq++);
    } else { /* the whole frame in one buffer */
        data = c->payload->data;
        count = bytes = c->n;
        sl__wire_hdr_set_seq(c->payload->data, p->send_seq++);
    }
    void *req = U.ucp_am_send_nbx(p->ep, AM_ID, NULL, 0, data, count, &rp);
    atomic_fetch_add(&n->sent, bytes);
    if (UCS_PTR_IS_ERR(req)) {
        ucx_error("sending", UCS_PTR_STATUS(req));
        send_finished(c, SL_EIO);
        bad_frame(p);
    } else if (!req) {
        send_finished(c, 0);
    }
}

/* The connection's first flush is done: it is up; the parked sends go. */
static void flushed(void *request, ucs_status_t st, void *user_data)
{
    sl__peer *p = user_data;
    p->up = true;
    cmd *c = p->parked;
    p->parked = NULL;
    p->parked_tail = &p->parked;
    while (c) {
        cmd *next = c->next;
        if (st != UCS_OK)
            send_finished(c, SL_EIO);
        else
            issue_send(p->net, c);
        c = next;
    }
    if (request)
        U.ucp_request_free(request);
}

/* Flushes a new endpoint: done once its connection is set up. */
static void start_flush(sl__peer *p)
{
    p->parked_tail = &p->parked;
    ucp_request_param_t rp = {.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK |
                                              UCP_OP_ATTR_FIELD_USER_DATA,
                              .cb.send = flushed, .user_data = p};
    void *req = U.ucp_ep_flush_nbx(p->ep, &rp);
    if (!UCS_PTR_IS_PTR(req))
        flushed(NULL, UCS_PTR_STATUS(req), p);
}

static void run_cmd(sl__net *n, cmd *c)
{
    switch (c->kind) {
    case CMD_SEND:
    case CMD_BATCH:
        issue_send(n, c);
        return;
    case CMD_CLOSE:
        close_peer(c->peer, c->code, c->why, true, false);
        cmd_free(c);
        return;
    case CMD_CALL:
        c->fn(c->arg);
        pthread_mutex_lock(&n->mu);
        c->finished = true;
        pthread_cond_broadcast(&n->cv);
        pthread_mutex_unlock(&n->mu);
        return; /* the caller frees it */
    }
}

static void enqueue(sl__net *n, cmd *c)
{
    if (c->kind == CMD_SEND || c->kind == CMD_BATCH)
        atomic_fetch_add(&n->inflight, 1);
    pthread_mutex_lock(&n->mu);
    c->next = NULL;
    *n->tail = c;
    n->tail = &c->next;
    pthread_mutex_unlock(&n->mu);
    U.ucp_worker_signal(n->worker);
}

static cmd *cmd_new(sl__peer *p, int kind)
{
    cmd *c = sl__alloc(sizeof *c);
    if (!c)
        return NULL;
    memset(c, 0, sizeof *c);
    c->peer = p;
    c->kind = kind;
    return c;
}

int sl__net_send(sl__peer *p, const sl__bytes *b)
{
    if (atomic_load(&p->closed))
        return sl__set_error(SL_ESTATE, "peer %s: link closed", p->name);
    for (size_t off = 0; off < b->n;) {
        sl__wire_hdr h;
        if (sl__wire_hdr_read(b->p + off, b->n - off, UINT64_MAX, &h) ||
            h.length > b->n - off - SL__WIRE_HDR)
            return sl__set_error(SL_EINTERNAL, "service: a malformed frame to send");
        cmd *c = cmd_new(p, CMD_SEND);
        size_t whole = SL__WIRE_HDR + h.length;
        if (!c || !(c->payload = sl__buf_get(whole))) {
            if (c)
                sl__free(c, sizeof *c);
            return SL_ENOMEM;
        }
        memcpy(c->payload->data, b->p + off, whole);
        c->n = whole;
        enqueue(p->net, c);
        off += SL__WIRE_HDR + h.length;
    }
    return 0;
}

int sl__net_send_batch(sl__peer *p, uint64_t split, int64_t index, sl_element *el,
                       void (*done)(void *arg, int status), void *arg)
{
    if (atomic_load(&p->closed))
        return sl__set_error(SL_ESTATE, "peer %s: link closed", p->name);
    cmd *c = cmd_new(p, CMD_BATCH);
    if (!c)
        return SL_ENOMEM;
    uint64_t off[SL__WIRE_MAX_TENSORS], total;
    int rc = sl__msg_batch_layout(&c->head, split, index, el, off, &total);
    /* the head, then per tensor its padding and its bytes */
    if (!rc) {
        c->iovcap = 2 * el->n + 2;
        if (!(c->iov = sl__alloc((size_t)c->iovcap * sizeof *c->iov)))
            rc = SL_ENOMEM, c->iovcap = 0;
    }
    static const unsigned char zeros[SL__WIRE_ALIGN];
    uint32_t crc = 0; /* of the head only (SL__WIRE_F_CRC_HEAD) */
    if (!rc) {
        c->iov[c->niov++] = (ucp_dt_iov_t){c->hdr, SL__WIRE_HDR}; /* written below */
        c->iov[c->niov++] = (ucp_dt_iov_t){c->head.p, c->head.n};
        crc = sl__crc32c(crc, c->head.p, c->head.n);
        uint64_t at = c->head.n;
        for (int i = 0; i < el->n; i++) {
            if (off[i] > at) {
                c->iov[c->niov++] = (ucp_dt_iov_t){(void *)zeros, off[i] - at};
                if (i == 0)
                    crc = sl__crc32c(crc, zeros, off[i] - at);
            }
            if (el->t[i].nbytes)
                c->iov[c->niov++] = (ucp_dt_iov_t){el->t[i].data, el->t[i].nbytes};
            at = off[i] + el->t[i].nbytes;
        }
    }
    if (rc) {
        cmd_free(c);
        return rc;
    }
    sl__wire_hdr_write(c->hdr, SL__MSG_BATCH, SL__WIRE_F_CRC_HEAD, total, crc);
    if (total + SL__WIRE_HDR <= SMALL_BATCH) {
        /* small: one contiguous copy, which costs less than a gather */
        if (!(c->payload = sl__buf_get(SL__WIRE_HDR + total))) {
            cmd_free(c);
            return SL_ENOMEM;
        }
        size_t at = 0;
        for (int i = 0; i < c->niov; i++) {
            memcpy(c->payload->data + at, c->iov[i].buffer, c->iov[i].length);
            at += c->iov[i].length;
        }
        c->n = SL__WIRE_HDR + total;
        c->kind = CMD_SEND;
    } else {
        c->el = sl_element_retain(el);
    }
    c->done = done;
    c->arg = arg;
    enqueue(p->net, c);
    return 0;
}

void sl__net_close(sl__peer *p, int code, const char *why)
{
    cmd *c = cmd_new(p, CMD_CLOSE);
    if (!c) { /* out of memory: mark it; the thread reaps it at free */
        atomic_store(&p->closed, true);
        return;
    }
    c->code = code;
    snprintf(c->why, sizeof c->why, "%s", why ? why : "");
    enqueue(p->net, c);
}

/* Runs fn(arg) on the progress thread and waits for it. */
static int call(sl__net *n, void (*fn)(void *), void *arg)
{
    cmd *c = cmd_new(NULL, CMD_CALL);
    if (!c)
        return SL_ENOMEM;
    c->fn = fn;
    c->arg = arg;
    enqueue(n, c);
    pthread_mutex_lock(&n->mu);
    while (!c->finished)
        pthread_cond_wait(&n->cv, &n->mu);
    pthread_mutex_unlock(&n->mu);
    sl__free(c, sizeof *c);
    return 0;
}

/* ---- the progress thread ---------------------------------------------- */

static void drain(sl__net *n)
{
    pthread_mutex_lock(&n->mu);
    cmd *c = n->head;
    n->head = NULL;
    n->tail = &n->head;
    pthread_mutex_unlock(&n->mu);
    while (c) {
        cmd *next = c->next;
        run_cmd(n, c);
        c = next;
    }
}

static void *progress_main(void *arg)
{
    sl__net *n = arg;
    int64_t tick = (int64_t)(n->hooks.tick_ms > 0 ? n->hooks.tick_ms : 100) * 1000000;
    int64_t next_tick = sl__now_ns() + tick;
    while (!atomic_load(&n->stop)) {
        drain(n);
        while (U.ucp_worker_progress(n->worker))
            ;
        reap_closing(n);
        int64_t now = sl__now_ns();
        if (now >= next_tick) {
            if (n->hooks.on_tick)
                n->hooks.on_tick(n->hooks.user);
            next_tick = now + tick;
            continue;
        }
        pthread_mutex_lock(&n->mu);
        bool queued = n->head != NULL;
        pthread_mutex_unlock(&n->mu);
        if (queued || atomic_load(&n->stop))
            continue;
        if (U.ucp_worker_arm(n->worker) == UCS_ERR_BUSY)
            continue;
        struct pollfd pfd = {.fd = n->efd, .events = POLLIN};
        int ms = (int)((next_tick - now) / 1000000) + 1;
        poll(&pfd, 1, ms);
    }
    return NULL;
}

/* ---- set-up ----------------------------------------------------------- */

/* Whether UCX_TLS lets UCX use a shared-memory transport. */
static bool shm_allowed(void)
{
    const char *tls = getenv("UCX_TLS");
    if (!tls || !*tls || tls[0] == '^')
        return true; /* all, or all but some */
    static const char *const shm[] = {"all", "sm", "shm", "mm", "posix", "sysv"};
    char buf[256];
    snprintf(buf, sizeof buf, "%s", tls);
    for (char *save, *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save))
        for (size_t i = 0; i < sizeof shm / sizeof *shm; i++)
            if (!strcmp(t, shm[i]))
                return true;
    return false;
}

int sl__net_create(const sl__net_hooks *hooks, sl__net **out)
{
    *out = NULL;
    int lrc = ucx_load();
    if (lrc < 0)
        return lrc;
    sl__net *n = sl__alloc(sizeof *n);
    if (!n)
        return SL_ENOMEM;
    memset(n, 0, sizeof *n);
    n->hooks = *hooks;
    if (!n->hooks.max_frame)
        n->hooks.max_frame = 1ull << 31;
    n->tail = &n->head;
    n->efd = -1;
    pthread_mutex_init(&n->mu, NULL);
    pthread_cond_init(&n->cv, NULL);
    int rc = 0;
    ucp_config_t *cfg = NULL;
    ucs_status_t st = U.ucp_config_read(NULL, NULL, &cfg);
    if (st != UCS_OK) {
        rc = ucx_error("reading its configuration", st);
        goto fail;
    }
    /* UCX leaves its shared-memory transports out of connections that
     * report peer failure unless asked: ask, unless the user said (and only
     * where they may be used: UCX warns of a setting nothing takes) */
    if (!getenv("UCX_MM_ERROR_HANDLING") && shm_allowed())
        U.ucp_config_modify(cfg, "MM_ERROR_HANDLING", "y");
    ucp_params_t prm = {.field_mask = UCP_PARAM_FIELD_FEATURES | UCP_PARAM_FIELD_NAME,
                        .features = UCP_FEATURE_AM | UCP_FEATURE_WAKEUP,
                        .name = "sluice"};
    st = U.ucp_init_version(UCP_API_MAJOR, UCP_API_MINOR, &prm, cfg, &n->ctx);
    U.ucp_config_release(cfg);
    if (st != UCS_OK) {
        rc = ucx_error("starting", st);
        goto fail;
    }
    ucp_worker_params_t wp = {.field_mask = UCP_WORKER_PARAM_FIELD_THREAD_MODE,
                              .thread_mode = UCS_THREAD_MODE_SINGLE};
    if ((st = U.ucp_worker_create(n->ctx, &wp, &n->worker)) != UCS_OK) {
        rc = ucx_error("creating a worker", st);
        goto fail;
    }
    if ((st = U.ucp_worker_get_efd(n->worker, &n->efd)) != UCS_OK) {
        rc = ucx_error("getting the worker's event descriptor", st);
        goto fail;
    }
    ucp_am_handler_param_t hp = {.field_mask = UCP_AM_HANDLER_PARAM_FIELD_ID |
                                               UCP_AM_HANDLER_PARAM_FIELD_CB |
                                               UCP_AM_HANDLER_PARAM_FIELD_ARG |
                                               UCP_AM_HANDLER_PARAM_FIELD_FLAGS,
                                 .id = AM_ID, .cb = am_recv, .arg = n,
                                 .flags = UCP_AM_FLAG_WHOLE_MSG};
    if ((st = U.ucp_worker_set_am_recv_handler(n->worker, &hp)) != UCS_OK) {
        rc = ucx_error("setting the message handler", st);
        goto fail;
    }
    if (pthread_create(&n->thread, NULL, progress_main, n) != 0) {
        rc = sl__set_error(SL_ENOMEM, "service: cannot start the transport's thread");
        goto fail;
    }
    n->started = true;
    *out = n;
    return 0;
fail:
    sl__net_free(n);
    return rc;
}

static void conn_request(ucp_conn_request_h req, void *arg)
{
    sl__net *n = arg;
    char name[128] = "unknown peer";
    ucp_conn_request_attr_t attr = {.field_mask = UCP_CONN_REQUEST_ATTR_FIELD_CLIENT_ADDR};
    if (U.ucp_conn_request_query(req, &attr) == UCS_OK) {
        char host[64] = "?";
        int port = 0;
        const struct sockaddr *sa = (const struct sockaddr *)&attr.client_address;
        if (sa->sa_family == AF_INET) {
            const struct sockaddr_in *in = (const void *)sa;
            inet_ntop(AF_INET, &in->sin_addr, host, sizeof host);
            port = ntohs(in->sin_port);
        } else if (sa->sa_family == AF_INET6) {
            const struct sockaddr_in6 *in = (const void *)sa;
            inet_ntop(AF_INET6, &in->sin6_addr, host, sizeof host);
            port = ntohs(in->sin6_port);
        }
        snprintf(name, sizeof name, "%s:%d", host, port);
    }
    sl__peer *p = peer_new(n, name);
    if (!p) {
        U.ucp_listener_reject(n->listener, req);
        return;
    }
    ucp_ep_params_t ep = {.field_mask = UCP_EP_PARAM_FIELD_CONN_REQUEST |
                                        UCP_EP_PARAM_FIELD_ERR_HANDLER |
                                        UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE,
                          .conn_request = req,
                          .err_mode = UCP_ERR_HANDLING_MODE_PEER,
                          .err_handler = {.cb = ep_error, .arg = p}};
    ucp_ep_h h;
    ucs_status_t st = U.ucp_ep_create(n->worker, &ep, &h);
    if (st != UCS_OK) {
        sl__log(SL_LOG_WARN, "service: cannot accept %s: %s", name, U.ucs_status_string(st));
        atomic_store(&p->closed, true);
        return;
    }
    pthread_mutex_lock(&n->mu);
    p->ep = h;
    pthread_mutex_unlock(&n->mu);
    start_flush(p);
    if (n->hooks.on_accept)
        n->hooks.on_accept(n->hooks.user, p);
}

static int resolve(const char *host, int port, struct sockaddr_storage *ss, socklen_t *len)
{
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM,
                             .ai_flags = host ? 0 : AI_PASSIVE};
    struct addrinfo *ai = NULL;
    char ps[16];
    snprintf(ps, sizeof ps, "%d", port);
    int e = getaddrinfo(host, ps, &hints, &ai);
    if (e || !ai)
        return sl__set_error(SL_EINVAL, "service: address %s:%d: %s", host ? host : "*", port,
                             e ? gai_strerror(e) : "no address");
    memcpy(ss, ai->ai_addr, ai->ai_addrlen);
    *len = ai->ai_addrlen;
    freeaddrinfo(ai);
    return 0;
}

typedef struct listen_call {
    sl__net *n;
    struct sockaddr_storage ss;
    socklen_t len;
    int rc, bound;
    const char *host;
    int port;
    char msg[256]; /* the error is set on the progress thread: copied here */
} listen_call;

static void do_listen(void *arg)
{
    listen_call *l = arg;
    sl__net *n = l->n;
    ucp_listener_params_t lp = {.field_mask = UCP_LISTENER_PARAM_FIELD_SOCK_ADDR |
                                              UCP_LISTENER_PARAM_FIELD_CONN_HANDLER,
                                .sockaddr = {.addr = (const struct sockaddr *)&l->ss,
                                             .addrlen = l->len},
                                .conn_handler = {.cb = conn_request, .arg = n}};
    ucs_status_t st = U.ucp_listener_create(n->worker, &lp, &n->listener);
    if (st != UCS_OK) {
        l->rc = SL_EIO;
        snprintf(l->msg, sizeof l->msg, "service: cannot listen on %s:%d: %s",
                 l->host ? l->host : "*", l->port, U.ucs_status_string(st));
        return;
    }
    ucp_listener_attr_t a = {.field_mask = UCP_LISTENER_ATTR_FIELD_SOCKADDR};
    if (U.ucp_listener_query(n->listener, &a) == UCS_OK) {
        const struct sockaddr *sa = (const struct sockaddr *)&a.sockaddr;
        l->bound = sa->sa_family == AF_INET6
                       ? ntohs(((const struct sockaddr_in6 *)(const void *)sa)->sin6_port)
                       : ntohs(((const struct sockaddr_in *)(const void *)sa)->sin_port);
    }
}

int sl__net_listen(sl__net *n, const char *host, int port, int *bound)
{
    if (n->listener)
        return sl__set_error(SL_ESTATE, "service: already listening");
    listen_call l = {.n = n, .host = host, .port = port, .bound = port};
    int rc = resolve(host, port, &l.ss, &l.len);
    if (rc)
        return rc;
    call(n, do_listen, &l);
    if (l.rc)
        return sl__set_error(l.rc, "%s", l.msg);
    if (bound)
        *bound = l.bound;
    return 0;
}

typedef struct connect_call {
    sl__net *n;
    sl__peer *p;
    struct sockaddr_storage ss;
    socklen_t len;
    int rc;
    char msg[256];
} connect_call;

static void do_connect(void *arg)
{
    connect_call *c = arg;
    ucp_ep_params_t ep = {.field_mask = UCP_EP_PARAM_FIELD_FLAGS | UCP_EP_PARAM_FIELD_SOCK_ADDR |
                                        UCP_EP_PARAM_FIELD_ERR_HANDLER |
                                        UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE,
                          .flags = UCP_EP_PARAMS_FLAGS_CLIENT_SERVER,
                          .sockaddr = {.addr = (const struct sockaddr *)&c->ss, .addrlen = c->len},
                          .err_mode = UCP_ERR_HANDLING_MODE_PEER,
                          .err_handler = {.cb = ep_error, .arg = c->p}};
    ucp_ep_h h;
    ucs_status_t st = U.ucp_ep_create(c->n->worker, &ep, &h);
    if (st != UCS_OK) {
        c->rc = SL_EIO;
        snprintf(c->msg, sizeof c->msg, "service: cannot connect to %s: %s", c->p->name,
                 U.ucs_status_string(st));
        atomic_store(&c->p->closed, true);
        return;
    }
    pthread_mutex_lock(&c->n->mu);
    c->p->ep = h;
    pthread_mutex_unlock(&c->n->mu);
    start_flush(c->p);
}

int sl__net_connect(sl__net *n, const char *host, int port, sl__peer **out)
{
    *out = NULL;
    connect_call c = {.n = n};
    int rc = resolve(host, port, &c.ss, &c.len);
    if (rc)
        return rc;
    char name[128];
    snprintf(name, sizeof name, "%s:%d", host, port);
    if (!(c.p = peer_new(n, name)))
        return SL_ENOMEM;
    call(n, do_connect, &c);
    if (c.rc)
        return sl__set_error(c.rc, "%s", c.msg);
    *out = c.p;
    return 0;
}

const char *sl__peer_name(const sl__peer *p)
{
    return p->name;
}

void *sl__peer_user(const sl__peer *p)
{
    return p->user;
}

void sl__peer_set_user(sl__peer *p, void *user)
{
    p->user = user;
}

typedef struct info_call {
    sl__peer *p;
    char *text;
    size_t len;
} info_call;

static void do_info(void *arg)
{
    info_call *c = arg;
    if (atomic_load(&c->p->closed) || !c->p->ep)
        return;
    FILE *f = open_memstream(&c->text, &c->len);
    if (!f)
        return;
    U.ucp_ep_print_info(c->p->ep, f);
    fclose(f);
}

/* Adds name to the sorted, space-separated set in buf. */
static void set_add(char *buf, size_t cap, const char *name)
{
    char copy[256];
    snprintf(copy, sizeof copy, "%s", buf);
    char *words[16];
    int nw = 0;
    for (char *save, *t = strtok_r(copy, " ", &save); t && nw < 15; t = strtok_r(NULL, " ", &save)) {
        if (!strcmp(t, name))
            return;
        words[nw++] = t;
    }
    words[nw++] = (char *)name;
    for (int i = 1; i < nw; i++)
        for (int j = i; j > 0 && strcmp(words[j - 1], words[j]) > 0; j--) {
            char *t = words[j];
            words[j] = words[j - 1];
            words[j - 1] = t;
        }
    char out[256] = "";
    for (int i = 0; i < nw; i++)
        snprintf(out + strlen(out), sizeof out - strlen(out), "%s%s", i ? " " : "", words[i]);
    snprintf(buf, cap, "%s", out);
}

/* The lanes of ucp_ep_print_info's text, which read
 *   lane[1]:  2:sysv/memory.0 md[1]  -> md[1]/sysv/sysdev[255] am am_bw#0 keepalive
 * (resource index, transport/device, the peer's side, then the lane's
 * uses): the transports of lanes that carry active messages, and of those
 * that carry rendezvous reads and writes. Connection-manager lanes
 * ("cm rdmacm") carry no data. */
static void lane_names(const char *text, char *am, char *rma, size_t cap)
{
    am[0] = rma[0] = 0;
    for (const char *s = strstr(text, "lane["); s; s = strstr(s + 1, "lane[")) {
        const char *eol = strchr(s, '\n');
        size_t len = eol ? (size_t)(eol - s) : strlen(s);
        char line[512];
        snprintf(line, sizeof line, "%.*s", (int)(len < sizeof line ? len : sizeof line - 1), s);
        const char *q = strchr(line, ':');
        if (!q)
            continue;
        q++;
        while (*q == ' ')
            q++;
        const char *d = q;
        while (*d >= '0' && *d <= '9')
            d++;
        if (d == q || *d != ':')
            continue; /* "cm rdmacm" */
        d++;
        char name[32];
        size_t k = strcspn(d, "/ ");
        if (!k || k >= sizeof name)
            continue;
        memcpy(name, d, k);
        name[k] = 0;
        const char *uses = strstr(d, "->");
        if (!uses)
            continue;
        uses = strchr(uses + 3, ' '); /* past the peer's md/transport/sysdev */
        char words[256];
        snprintf(words, sizeof words, "%s", uses ? uses : "");
        for (char *save, *w = strtok_r(words, " ", &save); w; w = strtok_r(NULL, " ", &save)) {
            if (!strcmp(w, "am") || !strncmp(w, "am_bw", 5))
                set_add(am, cap, name);
            else if (!strncmp(w, "rma_bw", 6))
                set_add(rma, cap, name);
        }
    }
}

int sl__peer_transports(sl__peer *p, char *am, char *rma, size_t cap)
{
    info_call c = {.p = p};
    int rc = call(p->net, do_info, &c);
    if (rc)
        return rc;
    if (!c.text)
        return sl__set_error(SL_ESTATE, "peer %s: link closed", p->name);
    lane_names(c.text, am, rma, cap);
    free(c.text); /* open_memstream's, from libc */
    return 0;
}

void sl__net_bytes(const sl__net *n, uint64_t *sent, uint64_t *received)
{
    *sent = atomic_load(&n->sent);
    *received = atomic_load(&n->received);
}

void sl__peer_set_max_frame(sl__peer *p, uint64_t bytes)
{
    atomic_store(&p->max_frame, bytes);
    atomic_store(&p->max_ahead, MAX_AHEAD); /* a peer trusted with large frames */
}

bool sl__net_drain(sl__net *n, int timeout_ms)
{
    int64_t until = sl__now_ns() + (int64_t)timeout_ms * 1000000;
    while (atomic_load(&n->inflight) > 0) {
        if (sl__now_ns() >= until)
            return false;
        struct timespec ts = {0, 1000000};
        nanosleep(&ts, NULL);
    }
    return true;
}

void sl__net_free(sl__net *n)
{
    if (!n)
        return;
    if (n->started) {
        atomic_store(&n->stop, true);
        U.ucp_worker_signal(n->worker);
        pthread_join(n->thread, NULL);
    }
    /* on this thread now: what is queued fails, links close, UCX drains */
    for (cmd *c = n->head, *next; c; c = next) {
        next = c->next;
        if (c->kind == CMD_SEND || c->kind == CMD_BATCH) {
            send_finished(c, SL_ECANCELED);
        } else if (c->kind == CMD_CALL) { /* its caller waits: it never ran */
            pthread_mutex_lock(&n->mu);
            c->finished = true;
            pthread_cond_broadcast(&n->cv);
            pthread_mutex_unlock(&n->mu);
        } else {
            cmd_free(c);
        }
    }
    n->head = NULL;
    for (sl__peer *p = n->peers; p; p = p->next)
        close_peer(p, 0, NULL, false, true);
    if (n->listener)
        U.ucp_listener_destroy(n->listener);
    /* links closed by this side flush what they had queued: up to 2 s */
    int64_t until = sl__now_ns() + 2000000000;
    while (n->worker && n->nclosing && sl__now_ns() < until) {
        U.ucp_worker_progress(n->worker);
        reap_closing(n);
    }
    for (int i = 0; i < n->nclosing; i++)
        U.ucp_request_free(n->closing[i]);
    sl__free(n->closing, (size_t)n->capclosing * sizeof *n->closing);
    if (n->worker)
        U.ucp_worker_destroy(n->worker);
    if (n->ctx)
        U.ucp_cleanup(n->ctx);
    for (sl__peer *p = n->peers, *next; p; p = next) {
        next = p->next;
        sl__free(p, sizeof *p);
    }
    pthread_mutex_destroy(&n->mu);
    pthread_cond_destroy(&n->cv);
    sl__free(n, sizeof *n);
}

#endif
