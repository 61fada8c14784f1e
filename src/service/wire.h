/*
 * The service's messages between a trainer and its workers: framing,
 * encoding and the parser (wire.c). Pure functions over bytes, so the
 * parser is fuzzed on its own (fuzz/fuzz_service_wire.c) and any transport
 * can carry the frames.
 *
 * A frame is a 32-byte header, then `length` bytes of payload, all
 * integers little-endian:
 *
 *    0 u32 magic "SLSV"      8 u64 payload length
 *    4 u8  protocol version 16 u64 sequence number on its link
 *    5 u8  message type     24 u32 CRC-32C of the payload (flag CRC)
 *    6 u16 flags            28 u32 CRC-32C of bytes 0..28
 *
 * The sequence number is the transport's: frames on one link are numbered
 * from 0 as sent and handed up in that order, whatever order UCX
 * completes them in (a large message by rendezvous finishes after the
 * small ones sent behind it; lanes change while a connection is set up).
 *
 * A peer speaking another version gets SL_EUNSUPPORTED naming both; a
 * header or payload that does not parse is SL_ECORRUPT naming the field.
 * Decoders read the fields they know and ignore bytes after them, so a
 * later minor change may append fields without a new version. Callers
 * prefix the message with the peer's name.
 */
#ifndef SL_SERVICE_WIRE_H
#define SL_SERVICE_WIRE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "../core/alloc.h"
#include "../core/bytes.h"
#include "sluice.h"

#define SL__WIRE_MAGIC 0x56534c53u /* "SLSV" read as little-endian */
#define SL__WIRE_VERSION 1
#define SL__WIRE_HDR 32
#define SL__WIRE_F_CRC 1u /* payload_crc is set and checked */
/* BATCH: payload_crc covers the payload's head only (up to its first
 * tensor's bytes, the head's length in the payload): the tensors travel on
 * transports that check what they carry (TCP's checksum, RDMA's CRC,
 * memory), and a CRC of 10 MB per batch would cost each side a pass over
 * it. A frame that does not parse is still refused. */
#define SL__WIRE_F_CRC_HEAD 2u
/* Longest string field (names, versions, error messages). */
#define SL__WIRE_STR_MAX 1024
#define SL__WIRE_NONCE 32
#define SL__WIRE_MAC 32
/* Most tensors in one element on the wire. */
#define SL__WIRE_MAX_TENSORS 1024
/* Tensor data in a BATCH payload starts on this boundary, so that the
 * views handed out (numpy, DLPack) are as aligned as local batches. */
#define SL__WIRE_ALIGN 64

typedef enum sl__msg_type {
    SL__MSG_HELLO = 1, /* role, nonce, name: both sides, first */
    SL__MSG_AUTH,      /* HMAC over both nonces: both sides, second */
    SL__MSG_PIPELINE,  /* worker: fingerprint, user version, threads */
    SL__MSG_READY,     /* trainer: accepted; worker id, heartbeat period */
    SL__MSG_SPLIT,     /* trainer: compute these batches */
    SL__MSG_BATCH,     /* worker: one batch of a split */
    SL__MSG_SPLIT_DONE,/* worker: every batch of a split was sent */
    SL__MSG_PING,      /* either: heartbeat */
    SL__MSG_PONG,      /* either: answer to a PING */
    SL__MSG_ERROR,     /* either: code and message; the link ends */
    SL__MSG_BYE,       /* either: orderly end */
    SL__MSG_NTYPES
} sl__msg_type;

/* The name of a type for messages ("HELLO"), "unknown" past the list. */
const char *sl__msg_name(int type);

typedef struct sl__wire_hdr {
    int version, type;
    unsigned flags;
    uint64_t length;
    uint64_t seq;
    uint32_t payload_crc;
} sl__wire_hdr;

/* Parses the n >= SL__WIRE_HDR bytes at p: magic, header CRC, version,
 * type, and a length no more than max_len. 0, or SL_ECORRUPT /
 * SL_EUNSUPPORTED with the message set. */
int sl__wire_hdr_read(const unsigned char *p, size_t n, uint64_t max_len, sl__wire_hdr *h);
/* Checks the payload against the header (length, CRC when flagged). */
int sl__wire_payload_check(const sl__wire_hdr *h, const void *payload, size_t n);
/* Writes a header for a payload of len bytes; crc is its CRC-32C, used
 * when flags has SL__WIRE_F_CRC. The sequence number is 0: the transport
 * numbers the frame as it sends it (sl__wire_hdr_set_seq). */
void sl__wire_hdr_write(unsigned char out[SL__WIRE_HDR], int type, unsigned flags, uint64_t len,
                        uint32_t crc);
void sl__wire_hdr_set_seq(unsigned char hdr[SL__WIRE_HDR], uint64_t seq);

/* The control messages, decoded. Strings are NUL-terminated copies. */
typedef struct sl__msg_hello {
    int role; /* 1 trainer, 2 worker */
    uint8_t nonce[SL__WIRE_NONCE];
    char name[256];
    /* the trainer's rank among world trainers (a worker sends 0 of 0) */
    uint32_t rank, world;
} sl__msg_hello;
#define SL__ROLE_TRAINER 1
#define SL__ROLE_WORKER 2

typedef struct sl__msg_pipeline {
    uint64_t fingerprint;
    char version[SL__WIRE_STR_MAX + 1];
    uint32_t threads;
} sl__msg_pipeline;

typedef struct sl__msg_ready {
    uint32_t worker_id;
    uint32_t heartbeat_ms;
} sl__msg_ready;

/* Batches [first, first + count) of the per-rank stream of (epoch, rank of
 * world), for a pipeline made with seed. */
typedef struct sl__msg_split {
    uint64_t id;
    int64_t epoch;
    uint64_t seed;
    uint32_t rank, world;
    int64_t first, count;
} sl__msg_split;

typedef struct sl__msg_batch {
    uint64_t split;
    int64_t index;    /* the batch's position in the rank's stream */
    uint64_t head;    /* bytes before the first tensor's */
    size_t el_offset; /* where the element's encoding starts in the payload */
} sl__msg_batch;

typedef struct sl__msg_error {
    int code;
    char text[SL__WIRE_STR_MAX + 1];
} sl__msg_error;

/* Each _write appends one whole frame (header and payload, CRC set) to b:
 * 0 or SL_ENOMEM. Each _read decodes a payload of n bytes: 0 or
 * SL_ECORRUPT naming the message and field. */
int sl__msg_hello_write(sl__bytes *b, const sl__msg_hello *m);
int sl__msg_hello_read(const void *p, size_t n, sl__msg_hello *m);
int sl__msg_auth_write(sl__bytes *b, const uint8_t mac[SL__WIRE_MAC]);
int sl__msg_auth_read(const void *p, size_t n, uint8_t mac[SL__WIRE_MAC]);
int sl__msg_pipeline_write(sl__bytes *b, const sl__msg_pipeline *m);
int sl__msg_pipeline_read(const void *p, size_t n, sl__msg_pipeline *m);
int sl__msg_ready_write(sl__bytes *b, const sl__msg_ready *m);
int sl__msg_ready_read(const void *p, size_t n, sl__msg_ready *m);
int sl__msg_split_write(sl__bytes *b, const sl__msg_split *m);
int sl__msg_split_read(const void *p, size_t n, sl__msg_split *m);
/* PING and PONG (seq, time): two u64 each. */
int sl__msg_pair_write(sl__bytes *b, int type, uint64_t a, uint64_t c);
int sl__msg_pair_read(int type, const void *p, size_t n, uint64_t *a, uint64_t *c);
/* SPLIT_DONE: the split, the batches sent, the time the worker spent
 * computing them (ns, its own clock). */
int sl__msg_done_write(sl__bytes *b, uint64_t split, uint64_t count, uint64_t busy_ns);
int sl__msg_done_read(const void *p, size_t n, uint64_t *split, uint64_t *count,
                      uint64_t *busy_ns);
int sl__msg_error_write(sl__bytes *b, int code, const char *text);
int sl__msg_error_read(const void *p, size_t n, sl__msg_error *m);
/* BYE: an empty payload. */
int sl__msg_empty_write(sl__bytes *b, int type);

/* BATCH. The payload is (split, index, head length), the element's table (tensor
 * count; per tensor dtype, rank, shape, bytes), then each tensor's bytes
 * on an SL__WIRE_ALIGN boundary of the payload. _layout writes the
 * payload's head (everything but the tensors' bytes) into b (reset first)
 * and each tensor's offset in the payload into off[]; *total is the
 * payload's length. The tensors then go out as they are, with no copy
 * (the transport gathers them). 0, SL_EINVAL (more than
 * SL__WIRE_MAX_TENSORS) or SL_ENOMEM. */
int sl__msg_batch_layout(sl__bytes *b, uint64_t split, int64_t index, const sl_element *el,
                         uint64_t *off, uint64_t *total);
/* The whole BATCH frame in one buffer (tests, the fuzz target's seeds). */
int sl__msg_batch_write(sl__bytes *b, uint64_t split, int64_t index, const sl_element *el);
int sl__msg_batch_read(const void *p, size_t n, sl__msg_batch *m);
/* The element of a BATCH whose payload (n bytes at payload, on a 64-byte
 * boundary) lies inside buf: its tensors are views into buf (retained),
 * no copy. Every dtype, rank, shape, size, offset and string table is
 * checked first. 0 with *out, or SL_ECORRUPT naming the tensor and field. */
int sl__wire_element_read(sl__buf *buf, const unsigned char *payload, size_t n,
                          const sl__msg_batch *m, sl_element **out);

#endif
