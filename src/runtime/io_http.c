/*
 * The remote I/O engine (io.h, sl__http_*): ranged GETs of remote objects
 * on one libcurl multi handle, driven from the calling thread in
 * sl__io_submit and sl__io_reap, never a thread per transfer. The easy
 * handles are reused, so a connection is kept alive across the requests
 * of an engine; DNS answers and TLS sessions are shared across engines.
 *
 * A request completes when its range has arrived whole, or the object
 * ended first. In between, faults are retried where retrying can help
 * (connection errors, resets, timeouts, 408, 429, 5xx) with exponential
 * backoff and jitter; the retry asks only for the bytes not yet received.
 * Every response must agree with the first one the object got (ETag, or
 * Last-Modified, and the size): an object replaced between two ranges is
 * an error, never a mix of two versions. 401/403 and 404 are not retried.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "../core/alloc.h"
#include "../core/clock.h"
#include "../core/error.h"
#include "../remote/curl.h"
#include "../remote/remote.h"
#include "io.h"

#ifdef SLUICE_NO_CURL

int sl__http_open(int depth, const sl__http_opts *o, sl__io **out)
{
    (void)depth, (void)o;
    *out = NULL;
    return sl__set_error(SL_EUNSUPPORTED, "reading a URL needs libcurl, and this build has "
                         "none (SLUICE_WITH_CURL=OFF)");
}
int sl__http_add(sl__io *io, const char *url)
{
    (void)io, (void)url;
    return SL_EUNSUPPORTED;
}
uint64_t sl__http_size(const sl__io *io, int obj)
{
    (void)io, (void)obj;
    return SL__HTTP_UNKNOWN;
}
const char *sl__http_shown(const sl__io *io, int obj)
{
    (void)io, (void)obj;
    return "";
}
void sl__http_drop(sl__io *io, int obj)
{
    (void)io, (void)obj;
}
const char *sl__http_validator(const sl__io *io, int obj)
{
    (void)io, (void)obj;
    return "";
}
void sl__http_poll(sl__io *io, int ms)
{
    (void)io, (void)ms;
}

#else

#include <pthread.h>
#include <curl/curl.h>

enum { FREE, QUEUED, ACTIVE, WAITING };

typedef struct hobj {
    bool used;
    sl__remote r;
    uint64_t size; /* SL__HTTP_UNKNOWN until a response says */
    char etag[128], lastmod[64];
} hobj;

typedef struct hreq {
    struct sl__http *h;
    CURL *easy;
    int state;
    int obj;
    unsigned char *buf;
    size_t len, got;
    uint64_t off;
    void *user;
    bool queued_new;      /* prepared, not yet started */
    int attempts;         /* since the last progress */
    int64_t since_ns;     /* the last progress (or the first attempt) */
    int64_t retry_at;
    struct curl_slist *hdrs;
    /* the response in progress */
    long status;
    bool checked, ok, enough;
    uint64_t pos;                  /* object offset of the next body byte */
    int64_t cr_start, cr_total;    /* Content-Range, -1 when absent */
    char etag[128], lastmod[64];
    char body[200];                /* an error response's start */
    size_t nbody;
    int code;                      /* a failure: its code and message */
    char why[1600];
    char errbuf[CURL_ERROR_SIZE];
} hreq;

typedef struct sl__http {
    sl__io base;
    CURLM *multi;
    hreq *q;
    hobj *obj;
    int nobj, capobj; /* entries made (used or dropped), room */
    sl__io_cqe *done;
    int ndone;
    sl__http_opts o;
    uint64_t rng;
    char cainfo[1024];
} sl__http;

static int64_t now_ns(void)
{
    return sl__now_ns();
}

/* ---- one response ---- */

static void reset_response(hreq *q)
{
    q->status = 0;
    q->checked = q->ok = false;
    q->cr_start = q->cr_total = -1;
    q->etag[0] = q->lastmod[0] = '\0';
    q->nbody = 0;
}

static void header_value(const char *p, size_t n, char *out, size_t cap)
{
    while (n && (*p == ' ' || *p == '\t'))
        p++, n--;
    while (n && (p[n - 1] == '\r' || p[n - 1] == '\n' || p[n - 1] == ' '))
        n--;
    snprintf(out, cap, "%.*s", (int)(n < cap ? n : cap - 1), p);
}

static bool header_is(const char *p, size_t n, const char *name)
{
    size_t k = strlen(name);
    return n > k && !strncasecmp(p, name, k) && p[k] == ':';
}

static size_t on_header(char *p, size_t size, size_t n, void *u)
{
    hreq *q = u;
    size_t len = size * n;
    char v[160];
    if (len > 5 && !strncmp(p, "HTTP/", 5)) {
        reset_response(q);
        const char *sp = memchr(p, ' ', len);
        q->status = sp ? strtol(sp + 1, NULL, 10) : 0;
    } else if (header_is(p, len, "ETag")) {
        header_value(p + 5, len - 5, q->etag, sizeof q->etag);
    } else if (header_is(p, len, "Last-Modified")) {
        header_value(p + 14, len - 14, q->lastmod, sizeof q->lastmod);
    } else if (header_is(p, len, "Content-Range")) {
        header_value(p + 14, len - 14, v, sizeof v);
        unsigned long long a, b, t;
        if (sscanf(v, "bytes %llu-%llu/%llu", &a, &b, &t) == 3)
            q->cr_start = (int64_t)a, q->cr_total = (int64_t)t;
        else if (sscanf(v, "bytes */%llu", &t) == 1)
            q->cr_total = (int64_t)t;
    }
    return len;
}

static void fail(hreq *q, int code, const char *fmt, const char *detail)
{
    const hobj *o = &q->h->obj[q->obj];
    q->code = code;
    char what[300];
    snprintf(what, sizeof what, fmt, detail);
    snprintf(q->why, sizeof q->why, "%s: %s (bytes %" PRIu64 "-%" PRIu64 ")", o->r.shown, what,
             q->off + q->got, q->off + q->len - 1);
}

/* The first body bytes of a 2xx response: is it the object we have been
 * reading? */
static bool check_response(hreq *q)
{
    hobj *o = &q->h->obj[q->obj];
    int64_t total = q->cr_total;
    if (q->status == 200) {
        curl_off_t cl = -1;
        curl_easy_getinfo(q->easy, CURLINFO_CONTENT_LENGTH_DOWNLOAD_T, &cl);
        total = cl;
        q->pos = 0; /* the whole object: Range ignored */
    } else {
        if (q->cr_start < 0) {
            fail(q, SL_EIO, "%s", "a 206 response without a Content-Range");
            return false;
        }
        q->pos = (uint64_t)q->cr_start;
    }
    char detail[300];
    if (o->etag[0] && q->etag[0] && strcmp(o->etag, q->etag)) {
        snprintf(detail, sizeof detail, "ETag %s, was %s", q->etag, o->etag);
        fail(q, SL_EIO, "the object changed while being read (%s)", detail);
        return false;
    }
    if (!o->etag[0] && o->lastmod[0] && q->lastmod[0] && strcmp(o->lastmod, q->lastmod)) {
        snprintf(detail, sizeof detail, "Last-Modified %s, was %s", q->lastmod, o->lastmod);
        fail(q, SL_EIO, "the object changed while being read (%s)", detail);
        return false;
    }
    if (total >= 0 && o->size != SL__HTTP_UNKNOWN && (uint64_t)total != o->size) {
        snprintf(detail, sizeof detail, "%" PRId64 " bytes, was %" PRIu64, total, o->size);
        fail(q, SL_EIO, "the object changed while being read (%s)", detail);
        return false;
    }
    if (!o->etag[0] && !o->lastmod[0]) {
        snprintf(o->etag, sizeof o->etag, "%s", q->etag);
        snprintf(o->lastmod, sizeof o->lastmod, "%s", q->lastmod);
    }
    if (total >= 0)
        o->size = (uint64_t)total;
    return true;
}

static size_t on_body(char *p, size_t size, size_t n, void *u)
{
    hreq *q = u;
    size_t len = size * n;
    if (!q->checked) {
        q->checked = true;
        q->ok = (q->status == 200 || q->status == 206) && check_response(q);
        if (!q->ok && q->code)
            return 0; /* the object changed: stop */
    }
    if (!q->ok) { /* keep the start of an error's body for the message */
        size_t k = len < sizeof q->body - 1 - q->nbody ? len : sizeof q->body - 1 - q->nbody;
        memcpy(q->body + q->nbody, p, k);
        q->nbody += k;
        q->body[q->nbody] = '\0';
        return len;
    }
    uint64_t from = q->off + q->got, to = q->off + q->len;
    uint64_t a = q->pos > from ? q->pos : from, b = q->pos + len < to ? q->pos + len : to;
    if (a == from && b > a) { /* the bytes we are missing, in order */
        memcpy(q->buf + q->got, p + (a - q->pos), (size_t)(b - a));
        q->got += (size_t)(b - a);
        q->attempts = 0;
        q->since_ns = now_ns();
    }
    q->pos += len;
    if (q->got == q->len) {
        q->enough = true;
        if (q->pos > to)
            return 0; /* the rest of a whole-object answer: not wanted */
    }
    return len;
}

/* ---- requests ---- */

static int start(hreq *q)
{
    sl__http *h = q->h;
    const hobj *o = &h->obj[q->obj];
    char range[64], hbuf[6144];
    const char *lines[8];
    snprintf(range, sizeof range, "bytes=%" PRIu64 "-%" PRIu64, q->off + q->got,
             q->off + q->len - 1);
    int nh = sl__remote_headers(&o->r, range, time(NULL), hbuf, sizeof hbuf, lines);
    curl_slist_free_all(q->hdrs);
    q->hdrs = NULL;
    for (int i = 0; i < nh; i++) {
        struct curl_slist *l = curl_slist_append(q->hdrs, lines[i]);
        if (!l)
            return SL_ENOMEM;
        q->hdrs = l;
    }
    if (nh == -2) {
        fail(q, SL_EINTERNAL, "%s", "signing the request failed (libcrypto)");
        return SL_EINTERNAL;
    }
    if (nh < 0) {
        fail(q, SL_EINVAL, "%s", "request headers too long");
        return SL_EINVAL;
    }
    CURL *e = q->easy;
    reset_response(q);
    q->enough = false;
    q->errbuf[0] = '\0';
    curl_easy_setopt(e, CURLOPT_URL, o->r.url);
    curl_easy_setopt(e, CURLOPT_HTTPHEADER, q->hdrs);
    if (curl_multi_add_handle(h->multi, e) != CURLM_OK)
        return sl__set_error(SL_EIO, "%s: could not start a request", o->r.shown);
    q->state = ACTIVE;
    return 0;
}

static void complete(hreq *q, int64_t res)
{
    sl__http *h = q->h;
    h->done[h->ndone++] = (sl__io_cqe){q->user, res, q->code, q->code ? q->why : NULL};
    q->state = FREE;
}

static uint64_t next_rand(sl__http *h)
{
    h->rng ^= h->rng << 13, h->rng ^= h->rng >> 7, h->rng ^= h->rng << 17;
    return h->rng;
}

/* Another attempt later, or the failure when the limits are reached. */
static void retry(hreq *q, const char *what)
{
    sl__http *h = q->h;
    int64_t t = now_ns();
    q->attempts++;
    double waited = (double)(t - q->since_ns) / 1e9;
    if (q->attempts >= h->o.max_attempts || waited >= h->o.max_seconds) {
        char detail[300];
        snprintf(detail, sizeof detail, "%s; gave up after %d attempts over %.1f s", what,
                 q->attempts, waited);
        fail(q, SL_EIO, "%s", detail);
        complete(q, q->got);
        return;
    }
    /* 2^attempts x 50 ms up to 5 s, half of it random */
    double d = 0.05 * (double)(1u << (q->attempts < 7 ? q->attempts : 7));
    if (d > 5)
        d = 5;
    d *= 0.5 + 0.5 * (double)(next_rand(h) >> 11) / 9007199254740992.0;
    q->retry_at = t + (int64_t)(d * 1e9);
    q->state = WAITING;
}

static bool retryable_curl(CURLcode c)
{
    switch (c) {
    case CURLE_UNSUPPORTED_PROTOCOL:
    case CURLE_URL_MALFORMAT:
    case CURLE_PEER_FAILED_VERIFICATION:
    case CURLE_SSL_CACERT_BADFILE:
    case CURLE_SSL_CERTPROBLEM:
    case CURLE_SSL_ENGINE_NOTFOUND:
    case CURLE_OUT_OF_MEMORY:
    case CURLE_TOO_MANY_REDIRECTS:
    case CURLE_LOGIN_DENIED:
        return false;
    default:
        return true;
    }
}

/* The store's error code from an S3-style XML body (<Code>...</Code>). */
static void body_code(const hreq *q, char *out, size_t cap)
{
    const char *a = strstr(q->body, "<Code>"), *b = a ? strstr(a, "</Code>") : NULL;
    if (a && b && b - a - 6 < 80)
        snprintf(out, cap, ", %.*s", (int)(b - a - 6), a + 6);
    else
        out[0] = '\0';
}

static void finished(hreq *q, CURLcode cc)
{
    sl__http *h = q->h;
    hobj *o = &h->obj[q->obj];
    curl_multi_remove_handle(h->multi, q->easy);
    q->state = QUEUED; /* until decided */
    char what[400], code[100];
    if (q->code) { /* the object changed */
        complete(q, q->got);
        return;
    }
    if (q->got == q->len) {
        complete(q, (int64_t)q->got);
        return;
    }
    if (cc != CURLE_OK && !(cc == CURLE_WRITE_ERROR && q->enough)) {
        snprintf(what, sizeof what, "%s", q->errbuf[0] ? q->errbuf : curl_easy_strerror(cc));
        if (!retryable_curl(cc)) {
            fail(q, SL_EIO, "%s", what);
            complete(q, q->got);
        } else {
            retry(q, what);
        }
        return;
    }
    long st = q->status;
    if ((st == 200 || st == 206) && !q->checked) { /* an empty body */
        q->checked = true;
        if (!check_response(q)) {
            complete(q, q->got);
            return;
        }
    }
    if (st == 200 || st == 206) {
        if (o->size != SL__HTTP_UNKNOWN && q->off + q->got >= o->size) {
            complete(q, (int64_t)q->got); /* the object ended first */
            return;
        }
        retry(q, "the response ended early");
        return;
    }
    body_code(q, code, sizeof code);
    if (st == 416) {
        if (q->cr_total >= 0) {
            if (o->size != SL__HTTP_UNKNOWN && (uint64_t)q->cr_total != o->size) {
                fail(q, SL_EIO, "%s", "the object changed while being read (its size)");
            } else {
                o->size = (uint64_t)q->cr_total;
            }
            complete(q, (int64_t)q->got);
            return;
        }
        /* no size: a range past the end of an object of unknown size */
        complete(q, (int64_t)q->got);
        return;
    }
    snprintf(what, sizeof what, "HTTP %ld%s", st, code);
    if (st == 401 || st == 403) {
        fail(q, SL_EACCES, "permission denied (%s)", what);
        complete(q, q->got);
    } else if (st == 404) {
        fail(q, SL_ENOENT, "not found (%s)", what);
        complete(q, q->got);
    } else if (st == 408 || st == 429 || st == 500 || st == 502 || st == 503 || st == 504) {
        retry(q, what);
    } else {
        fail(q, SL_EIO, "%s", what);
        complete(q, q->got);
    }
}

/* Drives the transfers once; files what finished, starts due retries. */
static int drive(sl__http *h, int64_t *next_retry)
{
    int running, left;
    CURLMcode mc = curl_multi_perform(h->multi, &running);
    if (mc != CURLM_OK)
        return sl__set_error(SL_EIO, "remote reads: %s", curl_multi_strerror(mc));
    CURLMsg *m;
    while ((m = curl_multi_info_read(h->multi, &left))) {
        if (m->msg != CURLMSG_DONE)
            continue;
        hreq *q = NULL;
        curl_easy_getinfo(m->easy_handle, CURLINFO_PRIVATE, (char **)&q);
        finished(q, m->data.result);
    }
    int64_t t = now_ns();
    *next_retry = INT64_MAX;
    bool started = false;
    for (int i = 0; i < h->base.depth; i++) {
        hreq *q = &h->q[i];
        if (q->state != WAITING)
            continue;
        if (q->retry_at <= t) {
            if (start(q) < 0) {
                if (!q->code)
                    fail(q, SL_EIO, "%s", sl__error_msg());
                complete(q, q->got);
            }
            started = true;
        } else if (q->retry_at < *next_retry) {
            *next_retry = q->retry_at;
        }
    }
    if (started)
        curl_multi_perform(h->multi, &running);
    return 0;
}

static int http_prep(sl__io *io, int obj, void *buf, size_t len, uint64_t off, void *user)
{
    sl__http *h = (sl__http *)io;
    for (int i = 0; i < io->depth; i++) {
        hreq *q = &h->q[i];
        if (q->state != FREE)
            continue;
        q->state = QUEUED;
        q->obj = obj;
        q->buf = buf;
        q->len = len;
        q->got = 0;
        q->off = off;
        q->user = user;
        q->attempts = 0;
        q->since_ns = now_ns();
        q->code = 0;
        q->queued_new = true;
        return 0;
    }
    return SL_EBUSY;
}

static int http_submit(sl__io *io)
{
    sl__http *h = (sl__http *)io;
    for (int i = 0; i < io->depth; i++) {
        hreq *q = &h->q[i];
        if (q->state == QUEUED && q->queued_new) {
            q->queued_new = false;
            int rc = start(q);
            if (rc < 0) {
                if (!q->code)
                    fail(q, rc, "%s", sl__error_msg());
                complete(q, 0);
            }
        }
    }
    int64_t next;
    return drive(h, &next);
}

static int http_reap(sl__io *io, sl__io_cqe *out, int max, bool wait)
{
    sl__http *h = (sl__http *)io;
    for (;;) {
        int64_t next;
        int rc = drive(h, &next);
        if (rc < 0)
            return rc;
        if (h->ndone > 0 || !wait)
            break;
        int64_t t = now_ns();
        int ms = next == INT64_MAX ? 1000 : (int)((next - t) / 1000000 + 1);
        if (ms > 1000)
            ms = 1000;
        if (ms > 0)
            curl_multi_poll(h->multi, NULL, 0, ms, NULL);
    }
    int k = h->ndone < max ? h->ndone : max;
    memcpy(out, h->done, (size_t)k * sizeof *out);
    memmove(h->done, h->done + k, (size_t)(h->ndone - k) * sizeof *out);
    h->ndone -= k;
    return k;
}

/* Engines closed are kept for the next open of the same depth, with their
 * easy handles (and buffers) and their multi handle's connection cache:
 * the next shard of a host goes over a connection already open (no TCP or
 * TLS handshake) into memory already faulted in. */
#define POOL_MAX 16
static pthread_mutex_t pool_mu = PTHREAD_MUTEX_INITIALIZER;
static sl__http *pool[POOL_MAX];
static int npool;

static void destroy(sl__http *h);

static void current_cainfo(char *out, size_t cap)
{
    const char *ca = sl__curl_ca_bundle();
    snprintf(out, cap, "%s", ca ? ca : "");
}

/* An engine from the pool (the same depth and CA bundle), or NULL. */
static sl__http *pool_take(int depth)
{
    char ca[1024];
    current_cainfo(ca, sizeof ca);
    sl__http *h = NULL;
    pthread_mutex_lock(&pool_mu);
    for (int i = npool - 1; i >= 0 && !h; i--)
        if (pool[i]->base.depth == depth && !strcmp(pool[i]->cainfo, ca)) {
            h = pool[i];
            pool[i] = pool[--npool];
        }
    pthread_mutex_unlock(&pool_mu);
    return h;
}

static void http_close(sl__io *io)
{
    sl__http *h = (sl__http *)io;
    /* transfers still going (a stream closed early) are dropped, and with
     * them their connections */
    for (int i = 0; i < io->depth; i++) {
        hreq *q = &h->q[i];
        if (q->state == ACTIVE)
            curl_multi_remove_handle(h->multi, q->easy);
        q->state = FREE;
    }
    h->ndone = 0;
    io->outstanding = 0;
    for (int k = 0; k < h->nobj; k++)
        h->obj[k].used = false;
    pthread_mutex_lock(&pool_mu);
    bool kept = npool < POOL_MAX;
    if (kept)
        pool[npool++] = h;
    pthread_mutex_unlock(&pool_mu);
    if (!kept)
        destroy(h);
}

static void destroy(sl__http *h)
{
    sl__io *io = &h->base;
    for (int i = 0; h->q && i < io->depth; i++) {
        hreq *q = &h->q[i];
        if (q->easy) {
            if (q->state == ACTIVE)
                curl_multi_remove_handle(h->multi, q->easy);
            curl_easy_cleanup(q->easy);
        }
        curl_slist_free_all(q->hdrs);
    }
    if (h->multi)
        curl_multi_cleanup(h->multi);
    sl__free(h->q, (size_t)io->depth * sizeof *h->q);
    sl__free(h->done, (size_t)io->depth * sizeof *h->done);
    sl__free(h->obj, (size_t)h->capobj * sizeof *h->obj);
    sl__free(h, sizeof *h);
}

static const sl__io_ops http_ops = {"http", http_prep, http_submit, http_reap, http_close};

static int setup_easy(sl__http *h, hreq *q)
{
    CURL *e = q->easy = curl_easy_init();
    if (!e)
        return SL_ENOMEM;
    q->h = h;
    curl_easy_setopt(e, CURLOPT_PRIVATE, (char *)q);
    curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(e, CURLOPT_WRITEDATA, q);
    curl_easy_setopt(e, CURLOPT_HEADERFUNCTION, on_header);
    curl_easy_setopt(e, CURLOPT_HEADERDATA, q);
    curl_easy_setopt(e, CURLOPT_ERRORBUFFER, q->errbuf);
    curl_easy_setopt(e, CURLOPT_FOLLOWLOCATION, 1L);
    curl_easy_setopt(e, CURLOPT_MAXREDIRS, 5L);
    curl_easy_setopt(e, CURLOPT_PROTOCOLS_STR, "http,https");
    curl_easy_setopt(e, CURLOPT_REDIR_PROTOCOLS_STR, "http,https");
    curl_easy_setopt(e, CURLOPT_CONNECTTIMEOUT_MS, (long)(h->o.timeout_seconds * 1000));
    /* a transfer that stalls (under a byte a second for the timeout) is cut
     * and retried from where it got to */
    curl_easy_setopt(e, CURLOPT_LOW_SPEED_LIMIT, 1L);
    curl_easy_setopt(e, CURLOPT_LOW_SPEED_TIME, (long)(h->o.timeout_seconds + 0.999));
    curl_easy_setopt(e, CURLOPT_TCP_KEEPALIVE, 1L);
    curl_easy_setopt(e, CURLOPT_BUFFERSIZE, 64L << 10);
    if (h->cainfo[0])
        curl_easy_setopt(e, CURLOPT_CAINFO, h->cainfo);
    CURLSH *share = sl__curl_share();
    if (share)
        curl_easy_setopt(e, CURLOPT_SHARE, share);
    return 0;
}

int sl__http_open(int depth, const sl__http_opts *o, sl__io **out)
{
    *out = NULL;
    if (!sl__curl_ready())
        return sl__set_error(SL_EIO, "libcurl could not be initialised");
    sl__http *h = pool_take(depth);
    if (h) {
        h->o = *o; /* the options may differ; the timeouts set on the handles stay */
        if (h->o.max_attempts < 1)
            h->o.max_attempts = 1;
        *out = &h->base;
        return 0;
    }
    h = sl__calloc(1, sizeof *h);
    if (!h)
        return SL_ENOMEM;
    h->base = (sl__io){&http_ops, SL_IO_HTTP, depth, 0};
    h->o = *o;
    if (h->o.max_attempts < 1)
        h->o.max_attempts = 1;
    if (h->o.timeout_seconds <= 0)
        h->o.timeout_seconds = 30;
    h->rng = (uint64_t)now_ns() ^ (uint64_t)(uintptr_t)h ^ 0x9e3779b97f4a7c15u;
    current_cainfo(h->cainfo, sizeof h->cainfo);
    h->q = sl__calloc((size_t)depth, sizeof *h->q);
    h->done = sl__calloc((size_t)depth, sizeof *h->done);
    h->multi = curl_multi_init();
    int rc = h->q && h->done && h->multi ? 0 : SL_ENOMEM;
    for (int i = 0; rc == 0 && i < depth; i++)
        rc = setup_easy(h, &h->q[i]);
    if (rc < 0) {
        destroy(h);
        return rc;
    }
    *out = &h->base;
    return 0;
}

int sl__http_add(sl__io *io, const char *url)
{
    sl__http *h = (sl__http *)io;
    int k = 0;
    while (k < h->nobj && h->obj[k].used)
        k++;
    if (k == h->capobj) {
        int cap = h->capobj ? 2 * h->capobj : 1;
        hobj *n = sl__calloc((size_t)cap, sizeof *n);
        if (!n)
            return SL_ENOMEM;
        if (h->nobj)
            memcpy(n, h->obj, (size_t)h->nobj * sizeof *n);
        sl__free(h->obj, (size_t)h->capobj * sizeof *h->obj);
        h->obj = n;
        h->capobj = cap;
    }
    hobj *o = &h->obj[k];
    memset(o, 0, sizeof *o);
    int rc = sl__remote_resolve(url, NULL, &o->r);
    if (rc < 0)
        return rc;
    o->size = SL__HTTP_UNKNOWN;
    o->used = true;
    if (k == h->nobj)
        h->nobj++;
    return k;
}

const char *sl__http_validator(const sl__io *io, int obj)
{
    const hobj *o = &((const sl__http *)io)->obj[obj];
    return o->etag[0] ? o->etag : o->lastmod;
}

void sl__http_drop(sl__io *io, int obj)
{
    if (io && obj >= 0)
        ((sl__http *)io)->obj[obj].used = false;
}

void sl__http_poll(sl__io *io, int ms)
{
    curl_multi_poll(((sl__http *)io)->multi, NULL, 0, ms, NULL);
}

uint64_t sl__http_size(const sl__io *io, int obj)
{
    return ((const sl__http *)io)->obj[obj].size;
}

const char *sl__http_shown(const sl__io *io, int obj)
{
    return ((const sl__http *)io)->obj[obj].r.shown;
}

#endif
