/* The service's frames and messages (wire.h). Every read is bounds-checked
 * against the payload: a peer controls every byte here. */
#include "wire.h"
#include <string.h>
#include "../core/crc32c.h"
#include "../core/element.h"
#include "../core/error.h"
#include "../core/le.h"

static const char *const msg_names[SL__MSG_NTYPES] = {
    [SL__MSG_HELLO] = "HELLO",   [SL__MSG_AUTH] = "AUTH",
    [SL__MSG_PIPELINE] = "PIPELINE", [SL__MSG_READY] = "READY",
    [SL__MSG_SPLIT] = "SPLIT",   [SL__MSG_BATCH] = "BATCH",
    [SL__MSG_SPLIT_DONE] = "SPLIT_DONE",
    [SL__MSG_PING] = "PING",     [SL__MSG_PONG] = "PONG",
    [SL__MSG_ERROR] = "ERROR",   [SL__MSG_BYE] = "BYE",
};

const char *sl__msg_name(int type)
{
    return type > 0 && type < SL__MSG_NTYPES ? msg_names[type] : "unknown";
}

void sl__wire_hdr_write(unsigned char out[SL__WIRE_HDR], int type, unsigned flags, uint64_t len,
                        uint32_t crc)
{
    sl__put_le32(out, SL__WIRE_MAGIC);
    out[4] = SL__WIRE_VERSION;
    out[5] = (unsigned char)type;
    out[6] = (unsigned char)flags;
    out[7] = (unsigned char)(flags >> 8);
    sl__put_le64(out + 8, len);
    sl__put_le64(out + 16, 0);
    sl__put_le32(out + 24, flags & (SL__WIRE_F_CRC | SL__WIRE_F_CRC_HEAD) ? crc : 0);
    sl__put_le32(out + 28, sl__crc32c(0, out, 28));
}

void sl__wire_hdr_set_seq(unsigned char hdr[SL__WIRE_HDR], uint64_t seq)
{
    sl__put_le64(hdr + 16, seq);
    sl__put_le32(hdr + 28, sl__crc32c(0, hdr, 28));
}

int sl__wire_hdr_read(const unsigned char *p, size_t n, uint64_t max_len, sl__wire_hdr *h)
{
    if (n < SL__WIRE_HDR)
        return sl__set_error(SL_ECORRUPT, "message of %zu bytes, shorter than a header", n);
    if (sl__get_le32(p) != SL__WIRE_MAGIC)
        return sl__set_error(SL_ECORRUPT, "not a sluice message (magic %08x)",
                             (unsigned)sl__get_le32(p));
    if (sl__get_le32(p + 28) != sl__crc32c(0, p, 28))
        return sl__set_error(SL_ECORRUPT, "message header fails its CRC");
    h->version = p[4];
    h->type = p[5];
    h->flags = (unsigned)p[6] | (unsigned)p[7] << 8;
    h->length = sl__get_le64(p + 8);
    h->seq = sl__get_le64(p + 16);
    h->payload_crc = sl__get_le32(p + 24);
    if (h->version != SL__WIRE_VERSION)
        return sl__set_error(SL_EUNSUPPORTED, "peer speaks service protocol %d, this sluice %d",
                             h->version, SL__WIRE_VERSION);
    if (h->type <= 0 || h->type >= SL__MSG_NTYPES)
        return sl__set_error(SL_ECORRUPT, "unknown message type %d", h->type);
    if ((h->flags & ~(SL__WIRE_F_CRC | SL__WIRE_F_CRC_HEAD)) ||
        ((h->flags & SL__WIRE_F_CRC_HEAD) && (h->type != SL__MSG_BATCH || (h->flags & SL__WIRE_F_CRC))))
        return sl__set_error(SL_ECORRUPT, "%s with unknown flags %#x", sl__msg_name(h->type),
                             h->flags);
    if (h->length > max_len)
        return sl__set_error(SL_ECORRUPT, "%s of %llu bytes, over the limit of %llu",
                             sl__msg_name(h->type), (unsigned long long)h->length,
                             (unsigned long long)max_len);
    return 0;
}

int sl__wire_payload_check(const sl__wire_hdr *h, const void *payload, size_t n)
{
    if (n != h->length)
        return sl__set_error(SL_ECORRUPT, "%s payload of %zu bytes, header says %llu",
                             sl__msg_name(h->type), n, (unsigned long long)h->length);
    if ((h->flags & SL__WIRE_F_CRC) && sl__crc32c(0, payload, n) != h->payload_crc)
        return sl__set_error(SL_ECORRUPT, "%s payload fails its CRC", sl__msg_name(h->type));
    if (h->flags & SL__WIRE_F_CRC_HEAD) {
        uint64_t head = n >= 24 ? sl__get_le64((const unsigned char *)payload + 16) : UINT64_MAX;
        if (head > n)
            return sl__set_error(SL_ECORRUPT, "BATCH head of %llu bytes in a payload of %zu",
                                 (unsigned long long)head, n);
        if (sl__crc32c(0, payload, head) != h->payload_crc)
            return sl__set_error(SL_ECORRUPT, "BATCH head fails its CRC");
    }
    return 0;
}

/* ---- writing ---------------------------------------------------------- */

/* Starts a frame: room for the header, filled in by end_frame. */
static int begin_frame(sl__bytes *b, size_t *start)
{
    *start = b->n;
    unsigned char z[SL__WIRE_HDR] = {0};
    return sl__bytes_append(b, z, sizeof z);
}

static void end_frame(sl__bytes *b, size_t start, int type)
{
    size_t len = b->n - start - SL__WIRE_HDR;
    const unsigned char *payload = b->p + start + SL__WIRE_HDR;
    sl__wire_hdr_write(b->p + start, type, SL__WIRE_F_CRC, len, sl__crc32c(0, payload, len));
}

static int put64(sl__bytes *b, uint64_t v)
{
    unsigned char t[8];
    sl__put_le64(t, v);
    return sl__bytes_append(b, t, 8);
}

static int put32(sl__bytes *b, uint32_t v)
{
    unsigned char t[4];
    sl__put_le32(t, v);
    return sl__bytes_append(b, t, 4);
}

static int putstr(sl__bytes *b, const char *s)
{
    size_t n = strnlen(s, SL__WIRE_STR_MAX);
    int rc = put32(b, (uint32_t)n);
    return rc ? rc : sl__bytes_append(b, s, n);
}

int sl__msg_hello_write(sl__bytes *b, const sl__msg_hello *m)
{
    size_t s;
    int rc = begin_frame(b, &s);
    if (!rc)
        rc = put32(b, (uint32_t)m->role);
    if (!rc)
        rc = sl__bytes_append(b, m->nonce, SL__WIRE_NONCE);
    if (!rc)
        rc = putstr(b, m->name);
    if (!rc)
        rc = put32(b, m->rank);
    if (!rc)
        rc = put32(b, m->world);
    if (!rc)
        end_frame(b, s, SL__MSG_HELLO);
    return rc;
}

int sl__msg_auth_write(sl__bytes *b, const uint8_t mac[SL__WIRE_MAC])
{
    size_t s;
    int rc = begin_frame(b, &s);
    if (!rc)
        rc = sl__bytes_append(b, mac, SL__WIRE_MAC);
    if (!rc)
        end_frame(b, s, SL__MSG_AUTH);
    return rc;
}

int sl__msg_pipeline_write(sl__bytes *b, const sl__msg_pipeline *m)
{
    size_t s;
    int rc = begin_frame(b, &s);
    if (!rc)
        rc = put64(b, m->fingerprint);
    if (!rc)
        rc = putstr(b, m->version);
    if (!rc)
        rc = put32(b, m->threads);
    if (!rc)
        end_frame(b, s, SL__MSG_PIPELINE);
    return rc;
}

int sl__msg_ready_write(sl__bytes *b, const sl__msg_ready *m)
{
    size_t s;
    int rc = begin_frame(b, &s);
    if (!rc)
        rc = put32(b, m->worker_id);
    if (!rc)
        rc = put32(b, m->heartbeat_ms);
    if (!rc)
        end_frame(b, s, SL__MSG_READY);
    return rc;
}

int sl__msg_split_write(sl__bytes *b, const sl__msg_split *m)
{
    size_t s;
    int rc = begin_frame(b, &s);
    uint64_t v[7] = {m->id,   (uint64_t)m->epoch, m->seed, m->rank, m->world,
                     (uint64_t)m->first, (uint64_t)m->count};
    for (int i = 0; i < 7 && !rc; i++)
        rc = put64(b, v[i]);
    if (!rc)
        end_frame(b, s, SL__MSG_SPLIT);
    return rc;
}

int sl__msg_pair_write(sl__bytes *b, int type, uint64_t a, uint64_t c)
{
    size_t s;
    int rc = begin_frame(b, &s);
    if (!rc)
        rc = put64(b, a);
    if (!rc)
        rc = put64(b, c);
    if (!rc)
        end_frame(b, s, type);
    return rc;
}

int sl__msg_done_write(sl__bytes *b, uint64_t split, uint64_t count, uint64_t busy_ns)
{
    size_t s;
    int rc = begin_frame(b, &s);
    uint64_t v[3] = {split, count, busy_ns};
    for (int i = 0; i < 3 && !rc; i++)
        rc = put64(b, v[i]);
    if (!rc)
        end_frame(b, s, SL__MSG_SPLIT_DONE);
    return rc;
}

int sl__msg_error_write(sl__bytes *b, int code, const char *text)
{
    size_t s;
    int rc = begin_frame(b, &s);
    if (!rc)
        rc = put32(b, (uint32_t)code);
    if (!rc)
        rc = putstr(b, text ? text : "");
    if (!rc)
        end_frame(b, s, SL__MSG_ERROR);
    return rc;
}

int sl__msg_empty_write(sl__bytes *b, int type)
{
    size_t s;
    int rc = begin_frame(b, &s);
    if (!rc)
        end_frame(b, s, type);
    return rc;
}

/* ---- reading ---------------------------------------------------------- */

typedef struct rd {
    const unsigned char *p;
    size_t n, off;
    const char *msg; /* for errors */
    int rc;
} rd;

static bool take(rd *r, size_t k, const char *field)
{
    if (r->rc)
        return false;
    if (r->off > r->n || k > r->n - r->off) {
        r->rc = sl__set_error(SL_ECORRUPT, "%s message ends inside %s (byte %zu of %zu)", r->msg,
                              field, r->off, r->n);
        return false;
    }
    return true;
}

static uint64_t get64(rd *r, const char *field)
{
    if (!take(r, 8, field))
        return 0;
    uint64_t v = sl__get_le64(r->p + r->off);
    r->off += 8;
    return v;
}

static uint32_t get32(rd *r, const char *field)
{
    if (!take(r, 4, field))
        return 0;
    uint32_t v = sl__get_le32(r->p + r->off);
    r->off += 4;
    return v;
}

static void getbytes(rd *r, void *dst, size_t k, const char *field)
{
    if (take(r, k, field)) {
        memcpy(dst, r->p + r->off, k);
        r->off += k;
    }
}

/* A string of at most cap - 1 bytes with no NUL inside, copied and ended. */
static void getstr(rd *r, char *dst, size_t cap, const char *field)
{
    dst[0] = 0;
    uint32_t len = get32(r, field);
    if (r->rc)
        return;
    if (len >= cap) {
        r->rc = sl__set_error(SL_ECORRUPT, "%s message: %s of %u bytes, over %zu", r->msg, field,
                              len, cap - 1);
        return;
    }
    if (!take(r, len, field))
        return;
    if (memchr(r->p + r->off, 0, len)) {
        r->rc = sl__set_error(SL_ECORRUPT, "%s message: %s holds a NUL byte", r->msg, field);
        return;
    }
    memcpy(dst, r->p + r->off, len);
    dst[len] = 0;
    r->off += len;
}

static rd reader(const void *p, size_t n, int type)
{
    return (rd){.p = p, .n = n, .msg = sl__msg_name(type)};
}

int sl__msg_hello_read(const void *p, size_t n, sl__msg_hello *m)
{
    rd r = reader(p, n, SL__MSG_HELLO);
    m->role = (int)get32(&r, "role");
    getbytes(&r, m->nonce, SL__WIRE_NONCE, "nonce");
    getstr(&r, m->name, sizeof m->name, "name");
    m->rank = get32(&r, "rank");
    m->world = get32(&r, "world");
    if (!r.rc && m->role != SL__ROLE_TRAINER && m->role != SL__ROLE_WORKER)
        r.rc = sl__set_error(SL_ECORRUPT, "HELLO message: unknown role %d", m->role);
    if (!r.rc && m->role == SL__ROLE_TRAINER && (m->world == 0 || m->rank >= m->world))
        r.rc = sl__set_error(SL_ECORRUPT, "HELLO message: trainer rank %u of %u", m->rank,
                             m->world);
    return r.rc;
}

int sl__msg_auth_read(const void *p, size_t n, uint8_t mac[SL__WIRE_MAC])
{
    rd r = reader(p, n, SL__MSG_AUTH);
    getbytes(&r, mac, SL__WIRE_MAC, "mac");
    return r.rc;
}

int sl__msg_pipeline_read(const void *p, size_t n, sl__msg_pipeline *m)
{
    rd r = reader(p, n, SL__MSG_PIPELINE);
    m->fingerprint = get64(&r, "fingerprint");
    getstr(&r, m->version, sizeof m->version, "version");
    m->threads = get32(&r, "threads");
    return r.rc;
}

int sl__msg_ready_read(const void *p, size_t n, sl__msg_ready *m)
{
    rd r = reader(p, n, SL__MSG_READY);
    m->worker_id = get32(&r, "worker id");
    m->heartbeat_ms = get32(&r, "heartbeat");
    return r.rc;
}

int sl__msg_split_read(const void *p, size_t n, sl__msg_split *m)
{
    rd r = reader(p, n, SL__MSG_SPLIT);
    m->id = get64(&r, "id");
    m->epoch = (int64_t)get64(&r, "epoch");
    m->seed = get64(&r, "seed");
    uint64_t rank = get64(&r, "rank"), world = get64(&r, "world");
    m->first = (int64_t)get64(&r, "first");
    m->count = (int64_t)get64(&r, "count");
    if (r.rc)
        return r.rc;
    if (world == 0 || world > INT32_MAX || rank >= world)
        return sl__set_error(SL_ECORRUPT, "SPLIT message: rank %llu of %llu",
                             (unsigned long long)rank, (unsigned long long)world);
    if (m->epoch < 0 || m->first < 0 || m->count <= 0 || m->count > INT64_MAX - m->first)
        return sl__set_error(SL_ECORRUPT, "SPLIT message: epoch %lld, batches %lld + %lld",
                             (long long)m->epoch, (long long)m->first, (long long)m->count);
    m->rank = (uint32_t)rank;
    m->world = (uint32_t)world;
    return 0;
}

int sl__msg_pair_read(int type, const void *p, size_t n, uint64_t *a, uint64_t *c)
{
    rd r = reader(p, n, type);
    *a = get64(&r, "first field");
    *c = get64(&r, "second field");
    return r.rc;
}

static bool known_code(int code)
{
    switch (code) {
#define SL__ERR_CASE(name, c, text) case c:
        SL_ERRNO_MAP(SL__ERR_CASE)
#undef SL__ERR_CASE
        return true;
    }
    return false;
}

int sl__msg_done_read(const void *p, size_t n, uint64_t *split, uint64_t *count,
                      uint64_t *busy_ns)
{
    rd r = reader(p, n, SL__MSG_SPLIT_DONE);
    *split = get64(&r, "split");
    *count = get64(&r, "count");
    *busy_ns = get64(&r, "time");
    return r.rc;
}

int sl__msg_error_read(const void *p, size_t n, sl__msg_error *m)
{
    rd r = reader(p, n, SL__MSG_ERROR);
    m->code = (int)get32(&r, "code");
    getstr(&r, m->text, sizeof m->text, "text");
    /* a code is only ever one of ours: anything else reads as internal */
    if (!r.rc && !known_code(m->code))
        m->code = SL_EINTERNAL;
    return r.rc;
}

/* ---- batches ---------------------------------------------------------- */

static uint64_t align_up(uint64_t v)
{
    return (v + SL__WIRE_ALIGN - 1) & ~(uint64_t)(SL__WIRE_ALIGN - 1);
}

/* Bytes of one tensor's table entry. */
#define ENTRY_FIXED 8 /* dtype u8, rank u8, 6 zero */
static size_t entry_bytes(int ndim)
{
    return ENTRY_FIXED + 8 * (size_t)ndim + 8 + 8; /* shape, nbytes, offset */
}

int sl__msg_batch_layout(sl__bytes *b, uint64_t split, int64_t index, const sl_element *el,
                         uint64_t *off, uint64_t *total)
{
    b->n = 0;
    int nt = el->n;
    if (nt > SL__WIRE_MAX_TENSORS)
        return sl__set_error(SL_EINVAL, "an element of %d tensors: the service sends at most %d",
                             nt, SL__WIRE_MAX_TENSORS);
    size_t head = 8 + 8 + 8 + 4;
    for (int i = 0; i < nt; i++)
        head += entry_bytes(el->t[i].ndim);
    uint64_t pos = align_up(head);
    uint64_t head_len = nt ? pos : head; /* what the head CRC covers */
    for (int i = 0; i < nt; i++) {
        off[i] = pos;
        pos = align_up(pos + el->t[i].nbytes);
    }
    *total = nt ? off[nt - 1] + el->t[nt - 1].nbytes : head;
    int rc = put64(b, split);
    if (!rc)
        rc = put64(b, (uint64_t)index);
    if (!rc)
        rc = put64(b, head_len);
    if (!rc)
        rc = put32(b, (uint32_t)nt);
    for (int i = 0; i < nt && !rc; i++) {
        const struct sl_tensor *t = &el->t[i];
        unsigned char e[ENTRY_FIXED] = {(unsigned char)t->dtype, (unsigned char)t->ndim};
        rc = sl__bytes_append(b, e, sizeof e);
        for (int d = 0; d < t->ndim && !rc; d++)
            rc = put64(b, (uint64_t)t->shape[d]);
        if (!rc)
            rc = put64(b, t->nbytes);
        if (!rc)
            rc = put64(b, off[i]);
    }
    return rc;
}

int sl__msg_batch_write(sl__bytes *b, uint64_t split, int64_t index, const sl_element *el)
{
    uint64_t off[SL__WIRE_MAX_TENSORS], total;
    sl__bytes head = {0};
    int rc = sl__msg_batch_layout(&head, split, index, el, off, &total);
    size_t start = b->n;
    if (!rc)
        rc = sl__bytes_reserve(b, SL__WIRE_HDR + total);
    if (!rc) {
        memset(b->p + start, 0, SL__WIRE_HDR + total);
        memcpy(b->p + start + SL__WIRE_HDR, head.p, head.n);
        for (int i = 0; i < el->n; i++)
            if (el->t[i].nbytes)
                memcpy(b->p + start + SL__WIRE_HDR + off[i], el->t[i].data, el->t[i].nbytes);
        b->n = start + SL__WIRE_HDR + total;
        const unsigned char *pl = b->p + start + SL__WIRE_HDR;
        uint64_t hl = sl__get_le64(pl + 16);
        sl__wire_hdr_write(b->p + start, SL__MSG_BATCH, SL__WIRE_F_CRC_HEAD, total,
                           sl__crc32c(0, pl, hl));
    }
    sl__bytes_free(&head);
    return rc;
}

int sl__msg_batch_read(const void *p, size_t n, sl__msg_batch *m)
{
    rd r = reader(p, n, SL__MSG_BATCH);
    m->split = get64(&r, "split");
    m->index = (int64_t)get64(&r, "index");
    m->head = get64(&r, "head length");
    m->el_offset = r.off;
    if (!r.rc && m->index < 0)
        r.rc = sl__set_error(SL_ECORRUPT, "BATCH message: index %lld", (long long)m->index);
    if (!r.rc && (m->head > n || m->head < r.off))
        r.rc = sl__set_error(SL_ECORRUPT, "BATCH message: head of %llu bytes in %zu",
                             (unsigned long long)m->head, n);
    return r.rc;
}

/* A string tensor's offsets: within its bytes and in order (the first may
 * be up to 7, as a view of a record's is). */
static bool strings_ok(const unsigned char *data, uint64_t nbytes, int64_t count)
{
    if ((uint64_t)count >= nbytes / 8)
        return false;
    uint64_t room = nbytes - ((uint64_t)count + 1) * 8, prev = 0;
    for (int64_t i = 0; i <= count; i++) {
        uint64_t o = sl__get_le64(data + 8 * i);
        if ((i == 0 && o > 7) || o < prev || o > room)
            return false;
        prev = o;
    }
    return true;
}

static int bad_tensor(rd *r, int i, const char *what)
{
    return r->rc = sl__set_error(SL_ECORRUPT, "BATCH message: tensor %d: %s", i, what);
}

/* Reads tensor i's entry and pushes its view onto el. */
static int read_tensor(rd *r, int i, sl__buf *buf, uint64_t *end, sl_element *el)
{
    unsigned char e[ENTRY_FIXED];
    getbytes(r, e, sizeof e, "a tensor entry");
    if (r->rc)
        return r->rc;
    int dtype = e[0], ndim = e[1];
    if (dtype >= SL_DTYPE_COUNT)
        return bad_tensor(r, i, "unknown dtype");
    if (ndim > SL_MAX_DIMS)
        return bad_tensor(r, i, "too many dimensions");
    int64_t shape[SL_MAX_DIMS];
    uint64_t count = 1;
    bool over = false;
    for (int d = 0; d < ndim; d++) {
        uint64_t s = get64(r, "a shape");
        if (s > INT64_MAX)
            return r->rc ? r->rc : bad_tensor(r, i, "negative dimension");
        shape[d] = (int64_t)s;
        if (s && count > UINT64_MAX / s)
            over = true;
        count *= s;
    }
    uint64_t nbytes = get64(r, "a size"), off = get64(r, "an offset");
    if (r->rc)
        return r->rc;
    size_t item = sl_dtype_size((sl_dtype)dtype);
    if (over || count > INT64_MAX / 8)
        return bad_tensor(r, i, "shape too large");
    if (item && nbytes != count * item)
        return bad_tensor(r, i, "size does not match its shape");
    if (off % SL__WIRE_ALIGN || off < *end || off > r->n || nbytes > r->n - off)
        return bad_tensor(r, i, "data outside the message");
    unsigned char *data = (unsigned char *)r->p + off; /* inside buf */
    if (dtype == SL_STRING && !strings_ok(data, nbytes, (int64_t)count))
        return bad_tensor(r, i, "string offsets out of order or out of range");
    *end = off + nbytes;
    if (!sl__element_push_view(el, (sl_dtype)dtype, ndim, shape, data, nbytes, buf))
        return r->rc = SL_ENOMEM;
    return 0;
}

int sl__wire_element_read(sl__buf *buf, const unsigned char *payload, size_t n,
                          const sl__msg_batch *m, sl_element **out)
{
    *out = NULL;
    rd r = reader(payload, n, SL__MSG_BATCH);
    r.off = m->el_offset;
    uint32_t nt = get32(&r, "tensor count");
    if (r.rc)
        return r.rc;
    if (nt > SL__WIRE_MAX_TENSORS)
        return sl__set_error(SL_ECORRUPT, "BATCH message: %u tensors, over %d", nt,
                             SL__WIRE_MAX_TENSORS);
    sl_element *el = sl__element_new((int)nt, 0);
    if (!el)
        return SL_ENOMEM;
    /* the data begins after the whole table: no entry may point into it */
    size_t table = r.off;
    for (uint32_t i = 0; i < nt; i++) {
        if (!take(&r, ENTRY_FIXED, "a tensor entry"))
            break;
        int nd = r.p[r.off + 1];
        table += entry_bytes(nd > SL_MAX_DIMS ? 0 : nd);
        r.off += entry_bytes(nd > SL_MAX_DIMS ? 0 : nd);
        if (nd > SL_MAX_DIMS) {
            bad_tensor(&r, (int)i, "too many dimensions");
            break;
        }
    }
    if (!r.rc && table > m->head)
        r.rc = sl__set_error(SL_ECORRUPT, "BATCH message: a table of %zu bytes past its head "
                             "of %llu", table, (unsigned long long)m->head);
    uint64_t end = table > m->head ? table : m->head; /* tensors lie past the head */
    r.off = m->el_offset + 4;
    for (uint32_t i = 0; i < nt && !r.rc; i++)
        read_tensor(&r, (int)i, buf, &end, el);
    if (r.rc) {
        sl_element_release(el);
        return r.rc;
    }
    *out = el;
    return 0;
}
