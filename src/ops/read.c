/*
 * read (sl_read_files): the contents of the file named by tensor 0 of each input
 * element, as (bytes: uint8 [n], the input's other tensors), with the path
 * last under SL_WITH_PATHS. Either way the output's origin is the input
 * element, so every message about the file names it.
 *
 * A producer thread of the node's own pulls the input, opens and sizes each
 * file, and hands the read to the I/O engine, keeping up to io_depth reads
 * in flight. Files finish in any order and come out in input order through
 * a ring of slots indexed by sequence number. Per-file errors travel in
 * their slot with their message and meet the error policy on the consumer
 * side, so what is skipped never depends on timing.
 *
 * The node is 1:1 and order-preserving, so take/skip/shard/shuffle-all
 * move below it (rebuild) and files they drop are never opened.
 *
 * A URL (http, https, s3, gs) goes to a second engine, libcurl's
 * (io_http.c), opened at the first URL: its first FIRST_PIECE bytes are
 * asked for before the size is known, which is all of most images in one
 * request; the answer tells the size, and the rest comes in a second.
 *
 * Ranged (sl__read_ranges, for the indexed record sources): tensors 1 and
 * 2 of the input are an offset and a length, and only those bytes are
 * read (a URL: one ranged GET), `lead` bytes into a buffer of the node's,
 * so that the format's node above can lay a tensor's header before them.
 * Where the input also gives a span (tensors 4 and 5: the byte range of
 * the block of records the record is in, under sl_shuffle_windowed), a
 * URL's span is fetched once, by one GET, and each of its records copied
 * out of it: a window of blocks costs a request per block, not per
 * record. Up to SPANS spans are kept, the least recently used dropped.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "../core/clock.h"
#include "../graph/node.h"
#include "read.h"
#include "../remote/remote.h"
#include "../runtime/io.h"

#define DEFAULT_DEPTH 32
#define MAX_AUTO_DEPTH 256 /* what the controller may raise io_depth to */
#define PATH_CAP 4096
#define FIRST_PIECE ((size_t)256 << 10)
#define SPANS SL__READ_SPANS
#define MAX_SPAN SL__READ_MAX_SPAN

typedef struct read_ds {
    sl_dataset base;
    unsigned flags;
    int64_t lead; /* ranged: bytes before the data in its buffer; -1: whole files */
} read_ds;

typedef struct slot {
    sl_element *el;      /* the output being filled; NULL after an error */
    unsigned char *data; /* where the file's bytes go */
    uint64_t size, got;
    uint64_t off;        /* ranged: where the bytes start in the file */
    int64_t bytes;       /* held against the RAM budget */
    int fd;
    /* a URL: its object in the remote engine, and until its size is known
     * the input element and the buffer of the first piece */
    bool remote;
    int obj;
    sl_element *in;
    unsigned char *first;
    int rc;              /* 0, or the element's error */
    char *msg;           /* its message (owned) */
    bool done;           /* under mu: the consumer may take it */
    struct slot *next_waiting; /* producer: the next slot waiting for its span */
} slot;

/* A block of records of a URL, fetched whole (ranged, with spans). */
typedef struct span {
    char *url;        /* NULL: free */
    uint64_t off, len, got;
    sl__buf *buf;     /* pooled: a window's next spans reuse mapped pages */
    unsigned char *data;
    int obj;          /* its object in the remote engine while in flight */
    bool done;
    int rc;           /* 0, or why it failed (msg) */
    char *msg;
    slot *waiting;    /* slots whose record it holds, not yet copied */
    uint64_t used;
} span;

typedef struct read_iter {
    sl__iter base;
    sl__iter *in;
    sl__io *io;
    sl__io *http;       /* opened at the first URL */
    int inflight_remote;
    sl__async a;
    atomic_int count; /* occupied slots: being read or ready */
    sl__knob *io_depth; /* reads in flight at most, read at each decision */
    int depth, nslots;  /* the knob's maximum (the engine's size), 2 × that */
    slot *slots;
    int ready;    /* under mu: finished slots not yet taken (statistics) */
    int64_t head; /* consumer: next sequence number to hand out */
    /* producer thread only */
    int64_t tail; /* next sequence number to start */
    int inflight;
    int64_t last_ns;    /* statistics: when inflight last changed hands */
    int last_inflight;  /* ... and what it was then */
    bool input_done, fd_starved;
    bool inline_reads;   /* the edge profile: no producer thread, take() runs rounds */
    sl_element *pending; /* pulled, waiting for a file descriptor */
    sl__io_cqe *cqes;
    slot **finished;
    int input_rc;
    char *input_msg;
    /* positions (state.h): the input's record after each slot's element
     * (by sequence number, like the slots), after the element pulled and
     * not started yet, and after the last element the consumer passed */
    sl__bytes *snaps, pulling, taken;
    sl__snapper snap;
    span spans[SPANS]; /* producer only */
    uint64_t span_clock;
} read_iter;

static bool stopped(read_iter *it)
{
    return atomic_load(&it->a.stop) || sl__tree_cancelled(it->base.tree);
}

/* Sets "read: <path>: <reason>" (path may be NULL) and returns code. */
static int path_error(read_iter *it, int code, const char *path, int plen, const char *fmt, ...)
    SL__PRINTF(5, 6);
static int path_error(read_iter *it, int code, const char *path, int plen, const char *fmt, ...)
{
    char reason[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(reason, sizeof reason, fmt, ap);
    va_end(ap);
    if (path)
        sl__set_error(code, "%.*s: %s", plen, path, reason);
    else
        sl__set_error_str(code, reason);
    sl__error_prefix(sl_dataset_name(it->base.ds));
    return code;
}

/* The path of an output element. */
static const char *out_path(const slot *s, int *len)
{
    size_t n = 0;
    const char *p = sl__element_origin(s->el, &n);
    *len = (int)n;
    return p;
}

/* Drops what the slot holds. Only for slots no read is writing into. */
static void slot_clear(read_iter *it, slot *s)
{
    if (s->fd >= 0 && !s->remote)
        close(s->fd);
    s->fd = -1;
    if (s->remote) {
        sl__http_drop(it->http, s->obj);
        sl_element_release(s->in);
        s->in = NULL;
        if (s->first)
            sl__obj_put(s->first, FIRST_PIECE);
        s->first = NULL;
        s->remote = false;
    }
    sl_element_release(s->el);
    s->el = NULL;
    if (s->bytes)
        sl__iter_unhold(&it->base, s->bytes);
    s->bytes = 0;
    sl__strfree(s->msg);
    s->msg = NULL;
}

/* Turns the slot into an element error carrying this thread's message. */
static void slot_fail(read_iter *it, slot *s, int rc)
{
    slot_clear(it, s);
    s->msg = sl__strdup(sl__error_msg());
    s->rc = s->msg ? rc : SL_ENOMEM;
}

static void publish(read_iter *it, slot **fin, int n)
{
    pthread_mutex_lock(&it->a.mu);
    for (int i = 0; i < n; i++)
        fin[i]->done = true;
    it->ready += n;
    pthread_cond_signal(&it->a.cv_consumer);
    pthread_mutex_unlock(&it->a.mu);
}

/* Copies tensor 0 of `in` into buf as a C string: the path. */
static int in_path(read_iter *it, const sl_element *in, char *buf)
{
    const sl_tensor *t = sl_element_tensor(in, 0);
    if (!t || sl_tensor_dtype(t) != SL_STRING)
        return path_error(it, SL_EDTYPE, NULL, 0, "tensor 0 must be a string (a path), not %s",
                          t ? sl_dtype_name(sl_tensor_dtype(t)) : "missing");
    if (sl_tensor_count(t) != 1)
        return path_error(it, SL_ESHAPE, NULL, 0, "tensor 0 must be one path, not %lld strings",
                          (long long)sl_tensor_count(t));
    size_t len;
    const char *p = sl_tensor_string(t, 0, &len);
    if (len == 0)
        return path_error(it, SL_EINVAL, NULL, 0, "empty path");
    if (len >= PATH_CAP)
        return path_error(it, SL_EINVAL, p, 64, "path too long (%zu bytes)", len);
    if (memchr(p, 0, len))
        return path_error(it, SL_EINVAL, p, (int)strlen(p), "path contains a NUL byte");
    memcpy(buf, p, len);
    buf[len] = '\0';
    return 0;
}

/* Opens and sizes the file. 1: out of file descriptors, try again once
 * reads in flight have closed theirs. */
static int open_file(read_iter *it, const char *path, slot *s)
{
    int plen = (int)strlen(path);
    /* O_NONBLOCK so that a FIFO named like an image cannot hang the open */
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0) {
        int e = errno;
        if ((e == EMFILE || e == ENFILE) && it->inflight > 0)
            return 1;
        return path_error(it, sl__errno_code(e), path, plen, "%s", strerror(e));
    }
    s->fd = fd;
    struct stat st;
    if (fstat(fd, &st) < 0)
        return path_error(it, SL_EIO, path, plen, "%s", strerror(errno));
    if (S_ISDIR(st.st_mode))
        return path_error(it, SL_EIO, path, plen, "is a directory");
    if (!S_ISREG(st.st_mode))
        return path_error(it, SL_EIO, path, plen, "not a regular file");
    if (st.st_size == 0)
        return path_error(it, SL_ECORRUPT, path, plen, "empty file");
    bool ranged = ((const read_ds *)it->base.ds)->lead >= 0;
    if (ranged && (s->off > (uint64_t)st.st_size || s->size > (uint64_t)st.st_size - s->off))
        return path_error(it, SL_ECORRUPT, path, plen, "%llu bytes at byte %llu run past its "
                          "end (%llu bytes): it changed since it was indexed",
                          (unsigned long long)s->size, (unsigned long long)s->off,
                          (unsigned long long)st.st_size);
    /* blocking again: io_uring answers EAGAIN on a non-blocking file rather
     * than waiting for the disk */
    if (fcntl(fd, F_SETFL, 0) < 0)
        return path_error(it, SL_EIO, path, plen, "%s", strerror(errno));
    if (!ranged)
        s->size = (uint64_t)st.st_size;
    return 0;
}

/* A URL: its object, and the read of its first piece (the element is
 * made when that says the size). */
static int open_remote(read_iter *it, const char *path, slot *s)
{
    int plen = (int)strlen(path);
    if (!it->http) {
        int rc = sl__http_open(it->depth, &it->base.tree->http, &it->http);
        if (rc < 0)
            return path_error(it, rc, path, plen, "%s", sl__error_msg());
    }
    s->remote = true;
    s->obj = sl__http_add(it->http, path);
    if (s->obj < 0) {
        s->remote = false; /* no object to drop */
        sl__error_prefix(sl_dataset_name(it->base.ds));
        return s->obj;
    }
    s->first = sl__obj_get(FIRST_PIECE);
    if (!s->first)
        return path_error(it, SL_ENOMEM, path, plen, "out of memory");
    int rc = sl__io_prep(it->http, s->obj, s->first, FIRST_PIECE, 0, s);
    if (rc < 0)
        return path_error(it, rc, path, plen, "%s", sl__error_msg());
    it->inflight++;
    it->inflight_remote++;
    return 0;
}

static int make_output(read_iter *it, sl_element *in, const char *path, slot *s);
static int queue_piece(read_iter *it, slot *s);

/* Ranged: the offset and length in tensors 1 and 2 of `in`. */
static int in_range(read_iter *it, const sl_element *in, const char *path, slot *s)
{
    const sl_tensor *o = sl_element_tensor(in, 1), *n = sl_element_tensor(in, 2);
    if (!o || !n || sl_tensor_dtype(o) != SL_INT64 || sl_tensor_dtype(n) != SL_INT64 ||
        sl_tensor_count(o) != 1 || sl_tensor_count(n) != 1)
        return path_error(it, SL_EDTYPE, path, (int)strlen(path),
                          "a ranged read needs int64 scalars (offset, length) after the path");
    int64_t off = sl_tensor_int64(o), len = sl_tensor_int64(n);
    if (off < 0 || len < 1)
        return path_error(it, SL_EINVAL, path, (int)strlen(path), "bad range: %lld bytes at "
                          "byte %lld", (long long)len, (long long)off);
    /* an index's word only: allocated before any byte of it is read */
    if (len > it->base.tree->max_record)
        return path_error(it, SL_ECORRUPT, path, (int)strlen(path), "a record of %lld bytes "
                          "at byte %lld is over the limit of %lld (SL_OPT_MAX_RECORD_BYTES)",
                          (long long)len, (long long)off, (long long)it->base.tree->max_record);
    s->off = (uint64_t)off;
    s->size = (uint64_t)len;
    return 0;
}

/* Ranged, a URL: its object, the element made now (the size is known)
 * and its one GET queued. */
static int open_remote_range(read_iter *it, const char *path, sl_element *in, slot *s)
{
    int plen = (int)strlen(path);
    if (!it->http) {
        int rc = sl__http_open(it->depth, &it->base.tree->http, &it->http);
        if (rc < 0)
            return path_error(it, rc, path, plen, "%s", sl__error_msg());
    }
    s->obj = sl__http_add(it->http, path);
    if (s->obj < 0) {
        sl__error_prefix(sl_dataset_name(it->base.ds));
        return s->obj;
    }
    s->remote = true;
    int rc = make_output(it, in, path, s);
    return rc ? rc : queue_piece(it, s);
}

/* (bytes, the input's other tensors[, path]): the bytes in a pooled buffer
 * of the file's size, the input's tensors shared with it. */
static int make_output(read_iter *it, sl_element *in, const char *path, slot *s)
{
    bool with_paths = ((const read_ds *)it->base.ds)->flags & SL_WITH_PATHS;
    int kept = with_paths ? in->n : in->n - 1;
    size_t inline_bytes = 0;
    for (int i = with_paths ? 0 : 1; i < in->n; i++)
        if (!in->t[i].buf)
            inline_bytes += (in->t[i].nbytes + 63) & ~(size_t)63;
    size_t lead = ((const read_ds *)it->base.ds)->lead > 0
                      ? (size_t)((const read_ds *)it->base.ds)->lead : 0;
    sl_element *el = sl__element_new(kept + 1, inline_bytes);
    sl__buf *buf = el ? sl__buf_get(lead + s->size) : NULL;
    int64_t shape[1] = {(int64_t)s->size};
    bool ok = buf &&
              sl__element_push_view(el, SL_UINT8, 1, shape, buf->data + lead, s->size, buf);
    sl__buf_release(buf);
    for (int k = 1; ok && k <= kept; k++) {
        const struct sl_tensor *t = &in->t[k % in->n]; /* the path, if kept, last */
        ok = sl__element_push_view(el, t->dtype, t->ndim, t->shape, t->data, t->nbytes, t->buf);
    }
    if (ok)
        sl__element_set_origin(el, in);
    if (!ok) {
        sl_element_release(el);
        return path_error(it, SL_ENOMEM, path, (int)strlen(path),
                          "out of memory for %llu bytes", (unsigned long long)s->size);
    }
    s->el = el;
    s->data = buf->data + lead;
    s->bytes = (int64_t)sl__element_bytes(el);
    sl__iter_hold(&it->base, s->bytes);
    return 0;
}

/* Queues the read of the next piece of the file (all of it up to 1 GiB). */
static int queue_piece(read_iter *it, slot *s)
{
    uint64_t left = s->size - s->got;
    size_t len = left > SL__IO_MAX_READ ? SL__IO_MAX_READ : (size_t)left;
    uint64_t at = s->off + s->got;
    int rc = s->remote ? sl__io_prep(it->http, s->obj, s->data + s->got, len, at, s)
                       : sl__io_prep(it->io, s->fd, s->data + s->got, len, at, s);
    if (rc < 0) {
        int plen;
        const char *p = out_path(s, &plen);
        return path_error(it, rc, p, plen, "%s", sl__error_msg());
    }
    it->inflight++;
    it->inflight_remote += s->remote;
    return 0;
}

static void input_end(read_iter *it, int rc)
{
    it->input_done = true;
    if (rc < 0) {
        it->input_rc = rc;
        it->input_msg = sl__strdup(sl__error_msg());
    }
}

/* ---- spans (ranged reads of URLs under a windowed order) ---- */

static void span_free(read_iter *it, span *p)
{
    if (p->buf) {
        sl__buf_release(p->buf);
        sl__iter_unhold(&it->base, (int64_t)p->len);
    }
    sl__strfree(p->url);
    sl__strfree(p->msg);
    *p = (span){0};
}

static void spans_free(read_iter *it)
{
    for (int i = 0; i < SPANS; i++)
        span_free(it, &it->spans[i]);
}

/* The span (tensors 4 and 5) of a ranged element, or false. */
static bool in_span(const sl_element *in, const slot *s, uint64_t *off, uint64_t *len)
{
    const sl_tensor *o = sl_element_tensor(in, 4), *n = sl_element_tensor(in, 5);
    if (!o || !n || sl_tensor_dtype(o) != SL_INT64 || sl_tensor_dtype(n) != SL_INT64 ||
        sl_tensor_count(o) != 1 || sl_tensor_count(n) != 1)
        return false;
    int64_t a = sl_tensor_int64(o), b = sl_tensor_int64(n);
    /* a span that does not hold the record, or too big to keep: the
     * record alone */
    if (a < 0 || b < 1 || (uint64_t)b > MAX_SPAN || s->off < (uint64_t)a ||
        s->off + s->size > (uint64_t)a + (uint64_t)b)
        return false;
    *off = (uint64_t)a;
    *len = (uint64_t)b;
    return true;
}

/* Copies slot s's record out of its span, or fails it with the span's
 * error. */
static void span_deliver(read_iter *it, const span *p, slot *s)
{
    if (p->rc) {
        sl__set_error_str(p->rc, p->msg);
        slot_fail(it, s, p->rc);
    } else {
        memcpy(s->data, p->data + (s->off - p->off), (size_t)s->size);
    }
}

/* The span of (url, off, len), found or started: NULL when every span is
 * in flight (try again after a reap), or on an error (*rc). */
static span *span_get(read_iter *it, const char *url, uint64_t off, uint64_t len, int *rc)
{
    span *victim = NULL; /* a free one, else the least recently used idle one */
    for (int i = 0; i < SPANS; i++) {
        span *p = &it->spans[i];
        if (p->url && p->off == off && p->len == len && !strcmp(p->url, url)) {
            p->used = ++it->span_clock;
            return p;
        }
        if (!p->url) {
            if (!victim || victim->url)
                victim = p;
        } else if (p->done && !p->waiting && (!victim || (victim->url && p->used < victim->used))) {
            victim = p;
        }
    }
    if (!victim)
        return NULL;
    span_free(it, victim);
    span *p = victim;
    p->buf = sl__buf_get((size_t)len);
    p->data = p->buf ? p->buf->data : NULL;
    p->url = sl__strdup(url);
    if (!p->buf || !p->url) {
        sl__buf_release(p->buf);
        p->buf = NULL;
        span_free(it, p);
        *rc = path_error(it, SL_ENOMEM, url, (int)strlen(url), "out of memory for a span of "
                         "%llu bytes", (unsigned long long)len);
        return NULL;
    }
    p->off = off;
    p->len = len;
    p->used = ++it->span_clock;
    sl__iter_hold(&it->base, (int64_t)len);
    if (!it->http && (*rc = sl__http_open(it->depth, &it->base.tree->http, &it->http)) < 0)
        *rc = path_error(it, *rc, url, (int)strlen(url), "%s", sl__error_msg());
    if (*rc == 0 && (p->obj = sl__http_add(it->http, url)) < 0) {
        *rc = p->obj;
        sl__error_prefix(sl_dataset_name(it->base.ds));
    }
    if (*rc == 0 && (*rc = sl__io_prep(it->http, p->obj, p->data, (size_t)len, off, p)) < 0) {
        sl__http_drop(it->http, p->obj);
        *rc = path_error(it, *rc, url, (int)strlen(url), "%s", sl__error_msg());
    }
    if (*rc) {
        span_free(it, p);
        return NULL;
    }
    it->inflight++;
    it->inflight_remote++;
    return p;
}

static bool is_span(const read_iter *it, const void *user)
{
    return (const char *)user >= (const char *)it->spans &&
           (const char *)user < (const char *)(it->spans + SPANS);
}

/* A span's read finished: more of it asked for, or every slot waiting
 * for it delivered (published here). */
static void complete_span(read_iter *it, const sl__io_cqe *c)
{
    span *p = c->user;
    it->inflight_remote--;
    int rc = 0;
    if (c->code) {
        rc = sl__set_error_str(c->code, c->msg);
        sl__error_prefix(sl_dataset_name(it->base.ds));
    } else {
        atomic_fetch_add(&it->base.tree->bytes_read, c->res);
        sl__stat_add(&it->base.stats->bytes_read, c->res);
        p->got += (uint64_t)c->res;
        if (p->got < p->len && c->res > 0) {
            rc = sl__io_prep(it->http, p->obj, p->data + p->got, (size_t)(p->len - p->got),
                             p->off + p->got, p);
            if (rc == 0) {
                it->inflight++;
                it->inflight_remote++;
                return;
            }
        } else if (p->got < p->len) {
            rc = path_error(it, SL_ECORRUPT, p->url, (int)strlen(p->url),
                            "the object ends inside bytes %llu-%llu (it changed since it "
                            "was indexed)", (unsigned long long)p->off,
                            (unsigned long long)(p->off + p->len - 1));
        }
    }
    sl__http_drop(it->http, p->obj);
    p->done = true;
    if (rc) {
        p->rc = rc;
        p->msg = sl__strdup(sl__error_msg());
    }
    while (p->waiting) {
        slot *s = p->waiting;
        p->waiting = s->next_waiting;
        s->next_waiting = NULL;
        span_deliver(it, p, s);
        publish(it, &s, 1);
    }
}

/* A ranged element of a URL with a span: its slot waits for the span (or
 * takes its record at once). 0, 1 when no span can start now (the element
 * waits), or an error for the slot. */
static int start_spanned(read_iter *it, const char *path, sl_element *in, slot *s,
                         uint64_t off, uint64_t len, bool *now)
{
    int rc = 0;
    span *p = span_get(it, path, off, len, &rc);
    if (!p)
        return rc ? rc : 1;
    if ((rc = make_output(it, in, path, s)) < 0)
        return rc;
    *now = p->done;
    if (p->done) {
        span_deliver(it, p, s);
    } else {
        s->next_waiting = p->waiting;
        p->waiting = s;
    }
    return 0;
}

/* The slot at the tail is the pulled element's now: its position goes
 * with it, and the consumer may wait for it. */
static void claim_slot(read_iter *it)
{
    sl__bytes_swap(&it->snaps[it->tail % it->nslots], &it->pulling);
    it->tail++;
    atomic_fetch_add(&it->count, 1);
}

/* Pulls one input element and starts reading its file; a file that fails
 * before its read starts fills its slot with the error at once. */
static void start_one(read_iter *it)
{
    sl_element *in = it->pending;
    it->pending = NULL;
    if (!in) {
        int64_t t0 = sl__now_ns();
        int rc = sl__iter_next(it->in, &in);
        sl__stat_add(&it->base.stats->wait_ns, sl__now_ns() - t0);
        if (rc) {
            input_end(it, rc);
            return;
        }
        it->pulling.n = 0;
        sl__snap(&it->snap, it->in, &it->pulling);
    }
    slot *s = &it->slots[it->tail % it->nslots];
    *s = (slot){.fd = -1};
    char path[PATH_CAP];
    int rc = in_path(it, in, path);
    bool url = rc == 0 && sl__is_url(path);
    bool ranged = ((const read_ds *)it->base.ds)->lead >= 0;
    if (ranged && rc == 0)
        rc = in_range(it, in, path, s);
    uint64_t span_off, span_len;
    if (ranged && rc == 0 && url && in_span(in, s, &span_off, &span_len)) {
        bool now = false;
        rc = start_spanned(it, path, in, s, span_off, span_len, &now);
        if (rc > 0) { /* every span in flight: after a reap */
            it->pending = in;
            it->fd_starved = true;
            return;
        }
        claim_slot(it);
        sl_element_release(in);
        if (rc < 0)
            slot_fail(it, s, rc);
        if (rc < 0 || now)
            publish(it, &s, 1);
        return;
    }
    if (ranged && rc == 0 && url) {
        claim_slot(it);
        rc = open_remote_range(it, path, in, s);
        sl_element_release(in);
        if (rc < 0) {
            slot_fail(it, s, rc);
            publish(it, &s, 1);
        }
        return;
    }
    if (url && rc == 0) {
        rc = open_remote(it, path, s);
        if (rc == 0) { /* the element comes with the size */
            s->in = in;
            claim_slot(it);
            return;
        }
    } else if (rc == 0) {
        rc = open_file(it, path, s);
    }
    if (rc > 0) {
        it->pending = in;
        it->fd_starved = true;
        return;
    }
    claim_slot(it);
    if (rc == 0)
        rc = make_output(it, in, path, s);
    sl_element_release(in);
    if (rc == 0)
        rc = queue_piece(it, s);
    if (rc < 0) {
        slot_fail(it, s, rc);
        publish(it, &s, 1);
    }
}

/* Handles one finished read; true when the slot is complete (its file
 * read, or failed). */
/* The same for a URL's read. */
static bool complete_remote(read_iter *it, const sl__io_cqe *c)
{
    slot *s = c->user;
    int rc = 0;
    it->inflight_remote--;
    if (c->code) {
        rc = sl__set_error_str(c->code, c->msg);
        sl__error_prefix(sl_dataset_name(it->base.ds));
    } else if (!s->el) { /* the first piece: now the size is known */
        uint64_t size = sl__http_size(it->http, s->obj);
        if (size == SL__HTTP_UNKNOWN || (uint64_t)c->res < FIRST_PIECE)
            size = (uint64_t)c->res; /* it ended there */
        const char *shown = sl__http_shown(it->http, s->obj);
        s->size = size;
        if (size == 0) {
            rc = path_error(it, SL_ECORRUPT, shown, (int)strlen(shown), "empty file");
        } else {
            char path[PATH_CAP];
            rc = in_path(it, s->in, path);
            if (rc == 0)
                rc = make_output(it, s->in, path, s);
        }
        if (rc == 0) {
            memcpy(s->data, s->first, (size_t)c->res);
            s->got = (uint64_t)c->res;
        }
        sl_element_release(s->in);
        s->in = NULL;
        sl__obj_put(s->first, FIRST_PIECE);
        s->first = NULL;
    } else {
        s->got += (uint64_t)c->res;
        if (s->got < s->size) {
            int plen;
            const char *p = out_path(s, &plen);
            rc = path_error(it, SL_EIO, p, plen, "the object ended at %llu bytes of %llu",
                            (unsigned long long)s->got, (unsigned long long)s->size);
        }
    }
    if (rc == 0) {
        atomic_fetch_add(&it->base.tree->bytes_read, c->res);
        sl__stat_add(&it->base.stats->bytes_read, c->res);
        if (s->got < s->size) {
            rc = queue_piece(it, s);
            if (rc == 0)
                return false;
        } else {
            sl__http_drop(it->http, s->obj);
            s->remote = false;
            return true;
        }
    }
    slot_fail(it, s, rc);
    return true;
}

static bool complete(read_iter *it, const sl__io_cqe *c)
{
    slot *s = c->user;
    it->inflight--;
    if (is_span(it, c->user)) {
        complete_span(it, c);
        return false;
    }
    if (s->remote)
        return complete_remote(it, c);
    int plen, rc;
    const char *p = out_path(s, &plen);
    if (c->res == -EINTR || c->res == -EAGAIN) {
        rc = queue_piece(it, s);
    } else if (c->res < 0) {
        rc = path_error(it, SL_EIO, p, plen, "read failed: %s", strerror((int)-c->res));
    } else if (c->res == 0) {
        rc = path_error(it, SL_EIO, p, plen,
                        "file changed size while reading (expected %llu bytes, got %llu)",
                        (unsigned long long)s->size, (unsigned long long)s->got);
    } else {
        atomic_fetch_add(&it->base.tree->bytes_read, c->res);
        sl__stat_add(&it->base.stats->bytes_read, c->res);
        s->got += (uint64_t)c->res;
        if (s->got < s->size) {
            rc = queue_piece(it, s);
        } else {
            close(s->fd);
            s->fd = -1;
            return true;
        }
    }
    if (rc == 0)
        return false;
    slot_fail(it, s, rc);
    return true;
}

/* Finished reads from the engine that has reads in flight; from both,
 * taking turns, when both have. */
static int reap_any(read_iter *it)
{
    if (it->inflight_remote == 0)
        return sl__io_reap(it->io, it->cqes, it->depth, true);
    if (it->inflight_remote == it->inflight)
        return sl__io_reap(it->http, it->cqes, it->depth, true);
    for (;;) {
        int n = sl__io_reap(it->io, it->cqes, it->depth, false);
        if (n == 0)
            n = sl__io_reap(it->http, it->cqes, it->depth, false);
        if (n != 0)
            return n;
        sl__http_poll(it->http, 1);
    }
}

static int reap(read_iter *it)
{
    int n = reap_any(it);
    if (n < 0)
        return n;
    int nfin = 0;
    for (int i = 0; i < n; i++)
        if (complete(it, &it->cqes[i]))
            it->finished[nfin++] = it->cqes[i].user;
    if (nfin)
        publish(it, it->finished, nfin);
    return 0;
}

/* Reads in flight allowed now (the knob), within the engine's size. */
static int depth_now(const read_iter *it)
{
    int64_t d = sl__knob_get(it->io_depth);
    return d < 1 ? 1 : d > it->depth ? it->depth : (int)d;
}

/* Slots in use allowed now: a depth of reads beside a depth of finished
 * files waiting for the consumer. */
static int room(const read_iter *it)
{
    return 2 * depth_now(it);
}

/* Starts reads while the depth, the ring and the RAM budget allow. */
static void fill(read_iter *it)
{
    sl__tree *t = it->base.tree;
    int depth = depth_now(it);
    atomic_store_explicit(&it->base.stats->capacity, 2 * depth, memory_order_relaxed);
    it->fd_starved = false;
    if (atomic_load(&t->held) >= t->ram_budget) /* kept spans give way first */
        for (int i = 0; i < SPANS; i++)
            if (it->spans[i].url && it->spans[i].done && !it->spans[i].waiting)
                span_free(it, &it->spans[i]);
    while (!it->input_done && !it->fd_starved && it->inflight < depth && !stopped(it)) {
        int c = atomic_load(&it->count);
        if (c >= 2 * depth || (c > 0 && atomic_load(&t->held) >= t->ram_budget))
            break;
        start_one(it);
    }
}

/* Statistics after the reads in flight changed: their number, and busy
 * time summed over reads (read-nanoseconds: mean reads in flight is
 * busy_ns / wall). Called after each fill and each reap, so between two
 * calls the count is the one of the earlier call (the reap's wait, where
 * the time goes, changes it only at its end). */
static void account(read_iter *it)
{
    sl__node_stats *ns = it->base.stats;
    atomic_store_explicit(&ns->in_flight, it->inflight, memory_order_relaxed);
    if (!it->last_inflight && !it->inflight)
        return;
    int64_t now = sl__now_ns();
    if (it->last_inflight)
        sl__stat_add(&ns->busy_ns, (int64_t)it->last_inflight * (now - it->last_ns));
    it->last_ns = now;
    it->last_inflight = it->inflight;
}

/* Slots in use at or below which a producer waiting for room is woken:
 * half the ring free, so that it wakes once per many files and starts
 * their reads in one submission. */
static int refill_mark(const read_iter *it)
{
    return room(it) / 2;
}

/* With nothing in flight: waits for the consumer to free half the ring,
 * or for the budget. False when stopping. */
static bool wait_room(read_iter *it)
{
    pthread_mutex_lock(&it->a.mu);
    if (atomic_load(&it->count) >= room(it))
        while (!stopped(it) && atomic_load(&it->count) > refill_mark(it))
            pthread_cond_wait(&it->a.cv_producer, &it->a.mu);
    pthread_mutex_unlock(&it->a.mu);
    return sl__tree_wait_budget(it->base.tree, &it->count, &it->a.stop);
}

static void producer_finish(read_iter *it, int rc)
{
    char *msg = NULL;
    if (rc < 0) {
        msg = NULL; /* the engine failed (reads may be in flight): this thread's message */
    } else {
        rc = it->input_rc < 0 ? it->input_rc : SL_EOF;
        msg = it->input_msg;
        it->input_msg = NULL;
        /* nothing in flight: the engine's threads or ring go now, not at
         * destroy */
        sl__io_close(it->io);
        it->io = NULL;
        spans_free(it);
        sl__io_close(it->http);
        it->http = NULL;
    }
    sl__async_finish(&it->a, rc, msg);
}

enum { ROUND_ON, ROUND_IDLE, ROUND_ENDED, ROUND_STOPPED };

/* One round of the producer's work: start what the ring and the budget
 * allow, submit, take what finished. ROUND_IDLE: nothing in flight and
 * no room to start more; ROUND_ENDED: the pass is over (finished). */
static int producer_round(read_iter *it)
{
    fill(it);
    account(it);
    int rc = sl__io_submit(it->io);
    if (rc == 0 && it->http)
        rc = sl__io_submit(it->http);
    if (rc == 0 && it->inflight == 0) {
        if (!it->input_done)
            return stopped(it) ? ROUND_STOPPED : ROUND_IDLE;
    } else if (rc == 0) {
        rc = reap(it);
        account(it);
        if (rc == 0)
            return stopped(it) ? ROUND_STOPPED : ROUND_ON; /* destroy waits for reads */
    }
    producer_finish(it, rc);
    return ROUND_ENDED;
}

static void *producer_main(void *arg)
{
    read_iter *it = arg;
    for (;;) {
        int r = producer_round(it);
        if (r == ROUND_ENDED || r == ROUND_STOPPED || (r == ROUND_IDLE && !wait_room(it)))
            return NULL;
    }
}

static int read_level(void *self)
{
    return ((read_iter *)self)->ready;
}

/* Under mu: the next slot in input order, once its file is in. Every slot
 * is complete at a normal end; after an engine failure the reads left in
 * flight never will be (nothing is busy then). */
static bool read_take(void *self, void *out)
{
    read_iter *it = self;
    slot *s = &it->slots[it->head % it->nslots];
    if (atomic_load(&it->count) == 0 || !s->done)
        return false;
    *(slot *)out = *s;
    *s = (slot){.fd = -1};
    sl__bytes_swap(&it->taken, &it->snaps[it->head % it->nslots]);
    it->head++;
    if (atomic_fetch_sub(&it->count, 1) - 1 <= refill_mark(it))
        pthread_cond_signal(&it->a.cv_producer);
    it->ready--;
    return true;
}

/* The edge profile: this thread does the producer's work (the slot it
 * needs is in flight, or not started for lack of room the finished slots
 * ahead of it will give back). */
static int read_round(void *self)
{
    read_iter *it = self;
    const slot *s = &it->slots[it->head % it->nslots];
    if (producer_round(it) == ROUND_IDLE && !(s->done && atomic_load(&it->count) > 0))
        return sl__set_error(SL_EINTERNAL, "%s: no read to wait for",
                             sl_dataset_name(it->base.ds));
    return 0;
}

static const sl__take_ops read_take_ops = {.take = read_take, .level = read_level};
static const sl__take_ops read_inline_take_ops = {
    .take = read_take, .level = read_level, .round = read_round};

/* Takes the next slot in input order; 0, or the end code. */
static int take(read_iter *it, slot *out)
{
    return sl__async_take(&it->a, &it->base,
                          it->inline_reads ? &read_inline_take_ops : &read_take_ops, it, out);
}

static int read_next(sl__iter *base, sl_element **out)
{
    read_iter *it = (read_iter *)base;
    for (;;) {
        slot s = {.fd = -1};
        int rc = take(it, &s);
        if (rc)
            return rc;
        if (s.bytes)
            sl__iter_unhold(base, s.bytes);
        if (s.rc == 0) {
            base->ok_count++;
            *out = s.el;
            return 0;
        }
        sl__set_error_str(s.rc, s.msg);
        sl__strfree(s.msg);
        if (s.rc == SL_ENOENT && (((const read_ds *)base->ds)->flags & SL__READ_GONE_OK)) {
            sl__skip_logged(base); /* gone since the folder was listed */
            continue;
        }
        rc = sl__policy(base, s.rc);
        if (rc)
            return rc;
    }
}

static void read_cancel(sl__iter *base)
{
    sl__async_cancel(&((read_iter *)base)->a);
}

static void read_destroy(sl__iter *base)
{
    read_iter *it = (read_iter *)base;
    sl__iter_unregister(base);
    sl__async_join(&it->a, base->tree);
    /* reads in flight write into the slots' buffers until they end */
    sl__io_close(it->io);
    sl__io_close(it->http); /* (after: slot_clear drops objects) */
    it->http = NULL;
    atomic_store(&base->stats->in_flight, 0);
    for (int64_t q = it->head; it->slots && q < it->tail; q++)
        slot_clear(it, &it->slots[q % it->nslots]);
    spans_free(it);
    sl_element_release(it->pending);
    sl__free(it->slots, (size_t)it->nslots * sizeof *it->slots);
    sl__free(it->cqes, (size_t)it->depth * sizeof *it->cqes);
    sl__free(it->finished, (size_t)it->depth * sizeof *it->finished);
    sl__strfree(it->input_msg);
    sl__iter_free(it->in);
    for (int i = 0; it->snaps && i < it->nslots; i++)
        sl__bytes_free(&it->snaps[i]);
    sl__free(it->snaps, (size_t)it->nslots * sizeof *it->snaps);
    sl__bytes_free(&it->pulling);
    sl__bytes_free(&it->taken);
    sl__snap_fini(&it->snap);
    sl__async_fini(&it->a);
}

/* No fields: the input's record after the last file passed. */
static int read_save(sl__iter *base, sl__bytes *w)
{
    read_iter *it = (read_iter *)base;
    return sl__save_async(w, base, &it->snap, 0, NULL, it->taken.p, it->taken.n);
}

static const sl__iter_ops read_iter_ops = {
    .next = read_next,
    .cancel = read_cancel,
    .destroy = read_destroy,
    .save = read_save,
};

/* Registers the node and its io_depth knob: SL_OPT_IO_DEPTH is where it
 * starts; under the controller it may grow to MAX_AUTO_DEPTH. The engine
 * and the slots are sized for the maximum. */
static int depth_knob(read_iter *it)
{
    /* no parameter of the op's own: the controller always may move it */
    int64_t start = it->base.tree->io_depth > 0 ? it->base.tree->io_depth : DEFAULT_DEPTH;
    it->io_depth = sl__iter_knob(&it->base, SL__NODE_READ, SL__KNOB_IO_DEPTH, SL_AUTOTUNE, start,
                                 MAX_AUTO_DEPTH, start);
    if (!it->io_depth)
        return SL_EINTERNAL;
    it->depth = (int)it->io_depth->max;
    it->nslots = 2 * it->depth;
    return 0;
}

static int read_setup(read_iter *it, int64_t epoch)
{
    sl__tree *t = it->base.tree;
    int rc = sl__io_open(t->io_backend, it->depth, sl_dataset_name(it->base.ds), &it->io);
    if (rc < 0)
        return rc;
    atomic_store(&t->io_backend_used, sl__io_backend(it->io));
    int64_t none[1];
    if ((rc = sl__iter_restored(&it->base, 0, none)) < 0)
        return rc;
    rc = sl__iter_make_input(&it->base, 0, epoch, &it->in);
    if (rc < 0)
        return rc;
    it->slots = sl__calloc((size_t)it->nslots, sizeof *it->slots);
    it->snaps = sl__calloc((size_t)it->nslots, sizeof *it->snaps);
    it->cqes = sl__calloc((size_t)it->depth, sizeof *it->cqes);
    it->finished = sl__calloc((size_t)it->depth, sizeof *it->finished);
    if (!it->slots || !it->snaps || !it->cqes || !it->finished)
        return SL_ENOMEM;
    for (int i = 0; i < it->nslots; i++)
        it->slots[i].fd = -1;
    sl__snap(&it->snap, it->in, &it->taken); /* nothing passed yet */
    it->inline_reads = t->inline_nodes;
    return it->inline_reads ? 0 : sl__async_start(&it->a, producer_main, it, "read");
}

static int read_make(const sl_dataset *ds, sl__tree *tree, uint64_t key, int64_t epoch,
                     sl__iter **out)
{
    read_iter *it = sl__iter_alloc(&read_iter_ops, sizeof *it, ds, tree, key, epoch);
    if (!it)
        return SL_ENOMEM;
    sl__async_init(&it->a);
    int rc = depth_knob(it);
    if (rc == 0)
        rc = read_setup(it, epoch);
    if (rc < 0) {
        sl__iter_free(&it->base);
        return rc;
    }
    sl__iter_register(&it->base);
    *out = &it->base;
    return 0;
}

static int64_t read_cardinality(const sl_dataset *ds)
{
    return sl_dataset_cardinality(ds->inputs[0]);
}

static sl_dataset *read_rebuild(const sl_dataset *ds, sl_dataset *new_input)
{
    const read_ds *d = (const read_ds *)ds;
    sl_dataset *r = d->lead >= 0 ? sl__read_ranges(new_input, (size_t)d->lead, d->flags)
                                 : sl_read_files(new_input, d->flags);
    if (r && ds->name) {
        r->name = sl__strdup(ds->name);
        if (!r->name) {
            sl_dataset_release(r);
            return NULL;
        }
    }
    return r;
}

static uint64_t read_fingerprint(const sl_dataset *ds, uint64_t h)
{
    const read_ds *d = (const read_ds *)ds;
    h = sl__hash_u64(h, d->flags);
    return d->lead < 0 ? h : sl__hash_u64(h, (uint64_t)d->lead); /* whole files: as before */
}

/* The path (tensor 0) becomes the file's bytes; with SL_WITH_PATHS the
 * path comes again last. */
static void read_leaf(sl__stext *t, int leaf, const sl__leaf_spec *spec, void *arg)
{
    (void)arg;
    if (leaf == 0)
        sl__stext_puts(t, "uint8[?]");
    else
        sl__stext_leaf(t, spec);
}

static sl_structure *read_structure(const sl_dataset *ds)
{
    const sl_structure *in = sl_dataset_structure(ds->inputs[0]);
    bool paths = ((const read_ds *)ds)->flags & SL_WITH_PATHS;
    return in ? sl__structure_rewrite_append(in, read_leaf, NULL, paths ? "string[]" : NULL)
              : NULL;
}

static const sl__node_ops read_ops = {
    .kind = "read",
    .make_iter = read_make,
    .cardinality = read_cardinality,
    .fingerprint = read_fingerprint,
    .rebuild = read_rebuild,
    .structure = read_structure,
};

static sl_dataset *make_read(sl_dataset *in, int64_t lead, unsigned flags)
{
    read_ds *r = (read_ds *)sl__dataset_new(&read_ops, sizeof *r, in);
    if (!r)
        return NULL;
    r->flags = flags;
    r->lead = lead;
    if (flags & ~(SL_WITH_PATHS | SL__READ_GONE_OK))
        return sl__dataset_fail(&r->base, SL_EINVAL, "read: unknown flags 0x%x", flags);
    return &r->base;
}

SL_API sl_dataset *sl_read_files(sl_dataset *in, unsigned flags)
{
    return make_read(in, -1, flags);
}

sl_dataset *sl__read_ranges(sl_dataset *in, size_t lead, unsigned flags)
{
    return make_read(in, (int64_t)lead, flags);
}
