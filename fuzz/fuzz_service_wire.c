/* The service's message parser (src/service/wire.c) and the handshake
 * (handshake.c): whatever a peer sends, each frame is decoded or refused
 * with a message, never a read out of bounds, a crash or a leak; a
 * handshake fed garbage fails, and never reports a pairing without the
 * secret.
 *
 * Input: byte 0's bit 0 set: the rest is a stream of frames as a peer
 * would send them. Clear: the rest is a stream of (type byte, u16 length,
 * payload) that this harness frames with valid headers and CRCs, so the
 * fuzzer reaches each message's decoder and the element parser instead of
 * stopping at a checksum. Bit 1 picks the handshake's role. */
#include <stdlib.h>
#include <string.h>
#include "core/crc32c.h"
#include "core/element.h"
#include "fuzz.h"
#include "service/auth.h"
#include "service/handshake.h"
#include "service/wire.h"

#define MAX_LEN (1u << 20)

static unsigned decode(const sl__wire_hdr *h, const unsigned char *p, size_t n)
{
    unsigned s = 0;
    union {
        sl__msg_hello hello;
        sl__msg_pipeline pipeline;
        sl__msg_ready ready;
        sl__msg_split split;
        sl__msg_error error;
        sl__msg_batch batch;
        uint8_t mac[SL__WIRE_MAC];
    } m;
    uint64_t a, c;
    switch (h->type) {
    case SL__MSG_HELLO:
        return sl__msg_hello_read(p, n, &m.hello) == 0 ? (unsigned)strlen(m.hello.name) : 0;
    case SL__MSG_AUTH:
        return sl__msg_auth_read(p, n, m.mac) == 0 ? m.mac[0] : 0;
    case SL__MSG_PIPELINE:
        return sl__msg_pipeline_read(p, n, &m.pipeline) == 0 ? (unsigned)strlen(m.pipeline.version)
                                                              : 0;
    case SL__MSG_READY:
        return sl__msg_ready_read(p, n, &m.ready) == 0 ? m.ready.worker_id : 0;
    case SL__MSG_SPLIT:
        return sl__msg_split_read(p, n, &m.split) == 0 ? (unsigned)m.split.count : 0;
    case SL__MSG_ERROR:
        return sl__msg_error_read(p, n, &m.error) == 0 ? (unsigned)strlen(m.error.text) : 0;
    case SL__MSG_BATCH: {
        if (sl__msg_batch_read(p, n, &m.batch))
            return 0;
        /* as the transport hands it over: the payload in a pooled buffer */
        sl__buf *buf = sl__buf_get(n ? n : 1);
        if (!buf)
            return 0;
        memcpy(buf->data, p, n);
        sl_element *el;
        if (sl__wire_element_read(buf, buf->data, n, &m.batch, &el) == 0) {
            s = fuzz_touch(el);
            sl_element_release(el);
        }
        sl__buf_release(buf);
        return s;
    }
    case SL__MSG_SPLIT_DONE: {
        uint64_t t;
        return sl__msg_done_read(p, n, &a, &c, &t) == 0 ? (unsigned)(a + c + t) : 0;
    }
    default:
        return sl__msg_pair_read(h->type, p, n, &a, &c) == 0 ? (unsigned)(a + c) : 0;
    }
}

/* Frames the harness-mode input: each (type, u16 length, payload). */
static size_t frame_all(const uint8_t *d, size_t n, unsigned char *out)
{
    size_t w = 0;
    while (n >= 3) {
        int type = d[0] % (SL__MSG_NTYPES - 1) + 1;
        size_t len = (size_t)d[1] | (size_t)d[2] << 8;
        d += 3, n -= 3;
        if (len > n)
            len = n;
        sl__wire_hdr_write(out + w, type, SL__WIRE_F_CRC, len, sl__crc32c(0, d, len));
        memcpy(out + w + SL__WIRE_HDR, d, len);
        w += SL__WIRE_HDR + len;
        d += len, n -= len;
    }
    return w;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    unsigned mode = data[0];
    const unsigned char *s = data + 1;
    size_t n = size - 1;
    unsigned char *framed = NULL;
    if (!(mode & 1)) {
        /* each 3 bytes of input become at most 24 of header */
        framed = malloc(n / 3 * SL__WIRE_HDR + n + 1);
        if (!framed)
            return 0;
        n = frame_all(s, n, framed);
        s = framed;
    }
    static const uint8_t key[32] = {1, 2, 3};
    sl__hs hs;
    int role = mode & 2 ? SL__ROLE_WORKER : SL__ROLE_TRAINER;
    bool hs_ok = sl__hs_init(&hs, role, key, "fuzz", 42, "v") == 0;
    sl__bytes out = {0};
    if (hs_ok && role == SL__ROLE_WORKER)
        sl__hs_begin(&hs, &out);
    volatile unsigned sink = 0;
    int hrc = 0;
    for (size_t off = 0; off + SL__WIRE_HDR <= n;) {
        sl__wire_hdr h;
        if (sl__wire_hdr_read(s + off, n - off, MAX_LEN, &h))
            break;
        size_t len = (size_t)h.length < n - off - SL__WIRE_HDR ? (size_t)h.length
                                                              : n - off - SL__WIRE_HDR;
        const unsigned char *p = s + off + SL__WIRE_HDR;
        if (sl__wire_payload_check(&h, p, len))
            break;
        sink += decode(&h, p, len);
        if (hs_ok && hrc == 0) {
            out.n = 0;
            hrc = sl__hs_step(&hs, &h, p, len, &out);
            /* pairing needs the peer's MAC under the key: the fuzzer cannot
             * make one, so a pairing here is a bug */
            if (hrc == 1)
                abort();
        }
        off += SL__WIRE_HDR + len;
    }
    (void)sink;
    if (hs_ok)
        sl__hs_clear(&hs);
    sl__bytes_free(&out);
    free(framed);
    return 0;
}

static void add_frames(void (*add)(const uint8_t *, size_t), const sl__bytes *b)
{
    unsigned char *p = malloc(b->n + 1);
    p[0] = 1;
    memcpy(p + 1, b->p, b->n);
    add(p, b->n + 1);
    free(p);
}

void fuzz_seeds(void (*add)(const uint8_t *data, size_t size))
{
    sl__bytes b = {0};
    sl__msg_hello h = {.role = SL__ROLE_WORKER, .name = "w"};
    sl__msg_hello_write(&b, &h);
    uint8_t mac[SL__WIRE_MAC] = {0};
    sl__msg_auth_write(&b, mac);
    sl__msg_pipeline pl = {.fingerprint = 42, .version = "v", .threads = 2};
    sl__msg_pipeline_write(&b, &pl);
    add_frames(add, &b);
    b.n = 0;
    sl__msg_split sp = {.id = 1, .epoch = 0, .seed = 3, .rank = 0, .world = 2, .first = 4,
                        .count = 2};
    sl__msg_split_write(&b, &sp);
    sl__msg_done_write(&b, 1, 2, 3000);
    sl__msg_pair_write(&b, SL__MSG_PING, 1, 2);
    sl__msg_error_write(&b, SL_EIO, "a worker's error");
    sl__msg_empty_write(&b, SL__MSG_BYE);
    add_frames(add, &b);
    /* a batch: image, labels, strings */
    b.n = 0;
    sl_element *el = sl__element_new(3, 256);
    int64_t shape[3] = {2, 4, 3}, ls[1] = {2};
    struct sl_tensor *t = sl__element_push(el, SL_UINT8, 3, shape, 24);
    memset(t->data, 7, 24);
    t = sl__element_push(el, SL_INT64, 1, ls, 16);
    memset(t->data, 0, 16);
    t = sl__element_push(el, SL_STRING, 1, ls, 24 + 3);
    uint64_t off[3] = {0, 1, 3};
    memcpy(t->data, off, sizeof off);
    memcpy((char *)t->data + 24, "abc", 3);
    sl__msg_batch_write(&b, 9, 1, el);
    sl_element_release(el);
    add_frames(add, &b);
    /* the same as harness-mode input: (type, length, payload) */
    size_t len = b.n - SL__WIRE_HDR;
    unsigned char *p = malloc(len + 4);
    p[0] = 0;
    p[1] = SL__MSG_BATCH - 1;
    p[2] = (unsigned char)len;
    p[3] = (unsigned char)(len >> 8);
    memcpy(p + 4, b.p + SL__WIRE_HDR, len);
    add(p, len + 4);
    free(p);
    sl__bytes_free(&b);
}
