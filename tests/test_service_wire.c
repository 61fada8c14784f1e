/* The service's messages and opening handshake (src/service/wire.c,
 * handshake.c), without a network: frames round-trip; every cut, flipped
 * byte, out-of-range field and message out of turn is a named error; a
 * wrong secret and another pipeline are refused. */
#include <stdlib.h>
#include <string.h>
#include "core/crc32c.h"
#include "core/element.h"
#include "core/le.h"
#include "service/auth.h"
#include "service/handshake.h"
#include "service/wire.h"
#include "testutil.h"

#define MAX_LEN (1ull << 30)

/* Splits the frame at p into header and payload and checks both. */
static int parse(const unsigned char *p, size_t n, sl__wire_hdr *h, const unsigned char **payload)
{
    int rc = sl__wire_hdr_read(p, n, MAX_LEN, h);
    if (rc)
        return rc;
    *payload = p + SL__WIRE_HDR;
    return sl__wire_payload_check(h, *payload, n - SL__WIRE_HDR);
}

static void test_control_round_trip(void **state)
{
    (void)state;
    sl__bytes b = {0};
    sl__msg_split s = {.id = 7, .epoch = 3, .seed = 99, .rank = 2, .world = 4, .first = 40,
                       .count = 8};
    assert_int_equal(sl__msg_split_write(&b, &s), 0);
    sl__wire_hdr h;
    const unsigned char *p = NULL;
    assert_int_equal(parse(b.p, b.n, &h, &p), 0);
    assert_int_equal(h.type, SL__MSG_SPLIT);
    sl__msg_split t;
    assert_int_equal(sl__msg_split_read(p, h.length, &t), 0);
    assert_memory_equal(&s, &t, sizeof s);

    b.n = 0;
    assert_int_equal(sl__msg_error_write(&b, SL_EMISMATCH, "another pipeline"), 0);
    assert_int_equal(parse(b.p, b.n, &h, &p), 0);
    sl__msg_error e;
    assert_int_equal(sl__msg_error_read(p, h.length, &e), 0);
    assert_int_equal(e.code, SL_EMISMATCH);
    assert_string_equal(e.text, "another pipeline");

    /* a code that is not one of sluice's reads as internal */
    b.n = 0;
    assert_int_equal(sl__msg_error_write(&b, -9999, "x"), 0);
    assert_int_equal(parse(b.p, b.n, &h, &p), 0);
    assert_int_equal(sl__msg_error_read(p, h.length, &e), 0);
    assert_int_equal(e.code, SL_EINTERNAL);

    b.n = 0;
    assert_int_equal(sl__msg_pair_write(&b, SL__MSG_PONG, 1 << 20, 0), 0);
    assert_int_equal(parse(b.p, b.n, &h, &p), 0);
    uint64_t a, c, busy;
    assert_int_equal(sl__msg_pair_read(h.type, p, h.length, &a, &c), 0);
    assert_int_equal(a, 1 << 20);
    b.n = 0;
    assert_int_equal(sl__msg_done_write(&b, 9, 2, 12345), 0);
    assert_int_equal(parse(b.p, b.n, &h, &p), 0);
    assert_int_equal(h.type, SL__MSG_SPLIT_DONE);
    assert_int_equal(sl__msg_done_read(p, h.length, &a, &c, &busy), 0);
    assert_true(a == 9 && c == 2 && busy == 12345);
    sl__bytes_free(&b);
}

static void test_header_errors(void **state)
{
    (void)state;
    sl__bytes b = {0};
    assert_int_equal(sl__msg_pair_write(&b, SL__MSG_PING, 1, 2), 0);
    sl__wire_hdr h;
    const unsigned char *p = NULL;
    /* every cut of the frame is refused */
    for (size_t n = 0; n < b.n; n++)
        assert_int_equal(parse(b.p, n, &h, &p), SL_ECORRUPT);
    /* every flipped bit is refused (header CRC or payload CRC) */
    for (size_t i = 0; i < b.n; i++)
        for (int bit = 0; bit < 8; bit++) {
            b.p[i] ^= (unsigned char)(1 << bit);
            int rc = parse(b.p, b.n, &h, &p);
            assert_true(rc == SL_ECORRUPT || rc == SL_EUNSUPPORTED);
            b.p[i] ^= (unsigned char)(1 << bit);
        }
    /* a newer protocol is named as such */
    unsigned char hdr[SL__WIRE_HDR];
    memcpy(hdr, b.p, sizeof hdr);
    sl__wire_hdr_write(hdr, SL__MSG_PING, 0, 16, 0);
    hdr[4] = 9;
    sl__put_le32(hdr + 28, sl__crc32c(0, hdr, 28));
    assert_int_equal(sl__wire_hdr_read(hdr, sizeof hdr, MAX_LEN, &h), SL_EUNSUPPORTED);
    assert_non_null(strstr(sl_last_error(), "protocol 9"));
    /* a length over the limit, before any payload is taken */
    sl__wire_hdr_write(hdr, SL__MSG_BATCH, 0, MAX_LEN + 1, 0);
    assert_int_equal(sl__wire_hdr_read(hdr, sizeof hdr, MAX_LEN, &h), SL_ECORRUPT);
    assert_non_null(strstr(sl_last_error(), "over the limit"));
    sl__bytes_free(&b);
}

static sl_element *sample_batch(void)
{
    sl_element *el = sl__element_new(3, 256);
    int64_t shape[4] = {2, 3, 5, 3};
    struct sl_tensor *t = sl__element_push(el, SL_UINT8, 4, shape, 90);
    for (int i = 0; i < 90; i++)
        ((unsigned char *)t->data)[i] = (unsigned char)(i * 7);
    int64_t ls[1] = {2};
    t = sl__element_push(el, SL_INT64, 1, ls, 16);
    ((int64_t *)t->data)[0] = 5;
    ((int64_t *)t->data)[1] = -1;
    /* two strings: "ab", "cde" */
    t = sl__element_push(el, SL_STRING, 1, ls, 3 * 8 + 5);
    uint64_t off[3] = {0, 2, 5};
    memcpy(t->data, off, sizeof off);
    memcpy((char *)t->data + 24, "abcde", 5);
    return el;
}

static sl__buf *payload_buf(const sl__bytes *frame)
{
    sl__buf *buf = sl__buf_get(frame->n);
    memcpy(buf->data, frame->p + SL__WIRE_HDR, frame->n - SL__WIRE_HDR);
    return buf;
}

static void test_batch_round_trip(void **state)
{
    (void)state;
    sl_element *el = sample_batch();
    sl__bytes b = {0};
    assert_int_equal(sl__msg_batch_write(&b, 12, 34, el), 0);
    sl__wire_hdr h;
    const unsigned char *p = NULL;
    assert_int_equal(parse(b.p, b.n, &h, &p), 0);
    sl__msg_batch m;
    assert_int_equal(sl__msg_batch_read(p, h.length, &m), 0);
    assert_int_equal(m.split, 12);
    assert_int_equal(m.index, 34);
    sl__buf *buf = payload_buf(&b);
    sl_element *got;
    assert_int_equal(sl__wire_element_read(buf, buf->data, h.length, &m, &got), 0);
    assert_int_equal(sl_element_size(got), 3);
    for (int i = 0; i < 3; i++) {
        const sl_tensor *a = sl_element_tensor(el, i), *c = sl_element_tensor(got, i);
        assert_int_equal(sl_tensor_dtype(a), sl_tensor_dtype(c));
        assert_int_equal(sl_tensor_ndim(a), sl_tensor_ndim(c));
        assert_int_equal(sl_tensor_nbytes(a), sl_tensor_nbytes(c));
        assert_memory_equal(sl_tensor_data(a), sl_tensor_data(c), sl_tensor_nbytes(a));
        /* a view into the received buffer, aligned as local batches are */
        assert_int_equal((uintptr_t)sl_tensor_data(c) % SL__WIRE_ALIGN, 0);
    }
    size_t len;
    const char *s = sl_tensor_string(sl_element_tensor(got, 2), 1, &len);
    assert_int_equal(len, 3);
    assert_memory_equal(s, "cde", 3);
    sl_element_release(got);

    /* every cut of the payload is refused, never read past */
    for (size_t n = 0; n < h.length; n++) {
        sl__msg_batch mm;
        if (sl__msg_batch_read(buf->data, n, &mm) == 0)
            assert_int_equal(sl__wire_element_read(buf, buf->data, n, &mm, &got), SL_ECORRUPT);
    }
    /* a shape that disagrees with the size, a string offset past its end */
    unsigned char *table = buf->data + m.el_offset + 4;
    table[8] ^= 1; /* first tensor's first dimension: 2 -> 3 */
    assert_int_equal(sl__wire_element_read(buf, buf->data, h.length, &m, &got), SL_ECORRUPT);
    assert_non_null(strstr(sl_last_error(), "tensor 0"));
    table[8] ^= 1;
    assert_int_equal(sl__wire_element_read(buf, buf->data, h.length, &m, &got), 0);
    sl_element_release(got);
    const sl_tensor *st = sl_element_tensor(el, 2);
    (void)st;
    sl__buf_release(buf);
    sl_element_release(el);
    sl__bytes_free(&b);
}

/* Runs a handshake between two state machines, frames going both ways
 * through their parsers. Returns the trainer's result; *wrc the worker's. */
static int pair(sl__hs *t, sl__hs *w, int *wrc)
{
    sl__bytes to_t = {0}, to_w = {0};
    int trc = 0;
    *wrc = 0;
    assert_int_equal(sl__hs_begin(w, &to_t), 0);
    for (int round = 0; round < 10 && (to_t.n || to_w.n); round++) {
        sl__bytes in = to_t;
        to_t = (sl__bytes){0};
        for (size_t o = 0; o < in.n && trc == 0 && *wrc == 0;) {
            sl__wire_hdr h;
            assert_int_equal(sl__wire_hdr_read(in.p + o, in.n - o, MAX_LEN, &h), 0);
            trc = sl__hs_step(t, &h, in.p + o + SL__WIRE_HDR, h.length, &to_w);
            o += SL__WIRE_HDR + h.length;
        }
        sl__bytes_free(&in);
        in = to_w;
        to_w = (sl__bytes){0};
        for (size_t o = 0; o < in.n && *wrc == 0;) {
            sl__wire_hdr h;
            assert_int_equal(sl__wire_hdr_read(in.p + o, in.n - o, MAX_LEN, &h), 0);
            *wrc = sl__hs_step(w, &h, in.p + o + SL__WIRE_HDR, h.length, &to_t);
            o += SL__WIRE_HDR + h.length;
        }
        sl__bytes_free(&in);
    }
    sl__bytes_free(&to_t);
    sl__bytes_free(&to_w);
    return trc;
}

static void keys(uint8_t kt[32], uint8_t kw[32], const char *st, const char *sw)
{
    setenv("SLUICE_SERVICE_SECRET", st, 1);
    assert_int_equal(sl__service_key(kt), 0);
    setenv("SLUICE_SERVICE_SECRET", sw, 1);
    assert_int_equal(sl__service_key(kw), 0);
}

static void test_handshake(void **state)
{
    (void)state;
    uint8_t kt[32], kw[32];
    keys(kt, kw, "s3cret", "s3cret");
    sl__hs t, w;
    assert_int_equal(sl__hs_init(&t, SL__ROLE_TRAINER, kt, "trainer0", 0xabc, "v1"), 0);
    assert_int_equal(sl__hs_init(&w, SL__ROLE_WORKER, kw, "worker-a", 0xabc, "v1"), 0);
    t.worker_id = 5;
    t.heartbeat_ms = 250;
    w.threads = 3;
    int wrc, trc = pair(&t, &w, &wrc);
    assert_int_equal(trc, 1);
    assert_int_equal(wrc, 1);
    assert_int_equal(w.worker_id, 5);
    assert_int_equal(w.heartbeat_ms, 250);
    assert_int_equal(t.threads, 3);
    assert_string_equal(t.peer_name, "worker-a");
    assert_string_equal(w.peer_name, "trainer0");

    /* a wrong secret: the trainer refuses, naming the worker, and tells it
     * only "refused" */
    keys(kt, kw, "s3cret", "guess");
    sl__hs_init(&t, SL__ROLE_TRAINER, kt, "trainer0", 0xabc, "v1");
    sl__hs_init(&w, SL__ROLE_WORKER, kw, "worker-b", 0xabc, "v1");
    trc = pair(&t, &w, &wrc);
    /* the worker checks the trainer's MAC first, and refuses it */
    assert_int_equal(wrc, SL_EACCES);
    assert_non_null(strstr(sl_last_error(), "trainer0"));

    /* the other way: a worker without the secret cannot pass by skipping
     * the trainer's check, since its own AUTH is wrong */
    sl__hs_init(&t, SL__ROLE_TRAINER, kt, "trainer0", 0xabc, "v1");
    sl__hs_init(&w, SL__ROLE_WORKER, kw, "worker-b", 0xabc, "v1");
    sl__bytes to_t = {0}, to_w = {0};
    sl__hs_begin(&w, &to_t);
    sl__wire_hdr h;
    sl__wire_hdr_read(to_t.p, to_t.n, MAX_LEN, &h);
    assert_int_equal(sl__hs_step(&t, &h, to_t.p + SL__WIRE_HDR, h.length, &to_w), 0);
    /* forge the worker's AUTH from its own (wrong) key */
    uint8_t mac[32];
    memcpy(w.nonce_t, to_w.p + SL__WIRE_HDR + 4, 32);
    sl__service_mac(kw, SL__ROLE_WORKER, w.nonce_t, w.nonce_w, mac);
    to_t.n = 0;
    sl__msg_auth_write(&to_t, mac);
    to_w.n = 0;
    sl__wire_hdr_read(to_t.p, to_t.n, MAX_LEN, &h);
    assert_int_equal(sl__hs_step(&t, &h, to_t.p + SL__WIRE_HDR, h.length, &to_w), SL_EACCES);
    assert_non_null(strstr(sl_last_error(), "worker-b"));
    /* what goes back says nothing but that it was refused */
    sl__wire_hdr_read(to_w.p, to_w.n, MAX_LEN, &h);
    sl__msg_error e;
    assert_int_equal(sl__msg_error_read(to_w.p + SL__WIRE_HDR, h.length, &e), 0);
    assert_string_equal(e.text, "refused");
    sl__bytes_free(&to_t);
    sl__bytes_free(&to_w);

    /* another pipeline, then another version: named on both sides */
    keys(kt, kw, "s3cret", "s3cret");
    sl__hs_init(&t, SL__ROLE_TRAINER, kt, "trainer0", 0xabc, "v1");
    sl__hs_init(&w, SL__ROLE_WORKER, kw, "w", 0xabd, "v1");
    trc = pair(&t, &w, &wrc);
    assert_int_equal(trc, SL_EMISMATCH);
    assert_int_equal(wrc, SL_EMISMATCH);
    assert_non_null(strstr(sl_last_error(), "0000000000000abd"));
    sl__hs_init(&t, SL__ROLE_TRAINER, kt, "trainer0", 0xabc, "v1");
    sl__hs_init(&w, SL__ROLE_WORKER, kw, "w", 0xabc, "v2");
    trc = pair(&t, &w, &wrc);
    assert_int_equal(trc, SL_EMISMATCH);
    assert_non_null(strstr(sl_last_error(), "\"v2\""));
    sl__hs_clear(&t);
    sl__hs_clear(&w);
    unsetenv("SLUICE_SERVICE_SECRET");
}

static void test_out_of_turn(void **state)
{
    (void)state;
    uint8_t k[32];
    setenv("SLUICE_SERVICE_SECRET", "x", 1);
    assert_int_equal(sl__service_key(k), 0);
    sl__hs t;
    sl__hs_init(&t, SL__ROLE_TRAINER, k, "t", 1, "");
    /* a PIPELINE before proving the secret is refused */
    sl__bytes b = {0}, out = {0};
    sl__msg_pipeline p = {.fingerprint = 1};
    sl__msg_pipeline_write(&b, &p);
    sl__wire_hdr h;
    sl__wire_hdr_read(b.p, b.n, MAX_LEN, &h);
    assert_int_equal(sl__hs_step(&t, &h, b.p + SL__WIRE_HDR, h.length, &out), SL_ECORRUPT);
    assert_non_null(strstr(sl_last_error(), "PIPELINE where HELLO was due"));
    sl__bytes_free(&b);
    sl__bytes_free(&out);
    unsetenv("SLUICE_SERVICE_SECRET");
    /* no secret at all */
    assert_int_equal(sl__service_key(k), SL_EACCES);
    assert_non_null(strstr(sl_last_error(), "SLUICE_SERVICE_SECRET"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_control_round_trip), cmocka_unit_test(test_header_errors),
        cmocka_unit_test(test_batch_round_trip),   cmocka_unit_test(test_handshake),
        cmocka_unit_test(test_out_of_turn),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
