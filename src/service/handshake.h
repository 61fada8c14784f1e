/*
 * The start of every service connection, as a state machine over frames
 * (handshake.c) with no I/O of its own, so tests and the fuzz target drive
 * it directly and any transport carries it:
 *
 *   worker  -> HELLO(worker, nonce_w, name)
 *   trainer -> HELLO(trainer, nonce_t, name), AUTH(mac_t)
 *   worker  -> AUTH(mac_w), PIPELINE(fingerprint, version, threads)
 *   trainer -> READY(worker id, heartbeat)        or ERROR, and the end
 *
 * Each side checks the other's MAC before it reads anything else from it,
 * so a peer without the secret learns nothing of the pipeline. The trainer
 * compares fingerprint and version only after the worker has proved the
 * secret, and refuses a mismatch naming both values.
 */
#ifndef SL_SERVICE_HANDSHAKE_H
#define SL_SERVICE_HANDSHAKE_H

#include <stdbool.h>
#include "wire.h"

typedef struct sl__hs {
    int role; /* this side's */
    int state;
    uint8_t key[32];
    uint8_t nonce_t[SL__WIRE_NONCE], nonce_w[SL__WIRE_NONCE];
    char name[256];      /* this side's, sent in HELLO */
    char peer_name[256]; /* the peer's, from its HELLO */
    /* the pipeline: the worker's own; on the trainer what it requires */
    uint64_t fingerprint;
    char version[SL__WIRE_STR_MAX + 1];
    uint32_t threads;      /* worker: its threads; trainer: the worker's */
    uint32_t worker_id;    /* trainer: to assign; worker: assigned */
    uint32_t heartbeat_ms; /* trainer: to ask; worker: asked */
    uint32_t rank, world;  /* the trainer's: its own; the worker: told */
    /* Worker: called once the trainer has proved the secret, with its rank
     * and world size, to build that rank's pipeline and set
     * hs->fingerprint. 0, or a negative code (the handshake fails with
     * it). NULL: fingerprint as given to sl__hs_init. */
    int (*prepare)(void *user, struct sl__hs *hs);
    void *user;
} sl__hs;

/* Sets hs up for role with the secret's key (auth.h), this side's name,
 * and the pipeline; draws this side's nonce. 0, or SL_EUNSUPPORTED (no
 * libcrypto). */
int sl__hs_init(sl__hs *hs, int role, const uint8_t key[32], const char *name,
                uint64_t fingerprint, const char *version);
/* The worker's first frames, appended to out. 0 or SL_ENOMEM. */
int sl__hs_begin(sl__hs *hs, sl__bytes *out);
/* Takes the peer's next frame (header and checked payload); appends any
 * answer to out. Returns 0 (go on), 1 (done: the link is paired), or a
 * negative code with the message set: SL_EACCES (the peer does not hold
 * the secret), SL_EMISMATCH (another pipeline or version, naming both),
 * SL_ECORRUPT (a message out of turn or malformed). After a failure out
 * may hold an ERROR frame for the peer; the trainer's refusal of a bad
 * MAC says only that it was refused. */
int sl__hs_step(sl__hs *hs, const sl__wire_hdr *h, const void *payload, size_t n, sl__bytes *out);
/* Forgets the key. */
void sl__hs_clear(sl__hs *hs);

#endif
