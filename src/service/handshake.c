/* The connection's opening exchange (handshake.h). */
#include "handshake.h"
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include "../core/error.h"
#include "../remote/crypto.h"
#include "auth.h"

enum { HS_HELLO, HS_AUTH, HS_PIPELINE, HS_READY, HS_DONE, HS_FAILED };

int sl__hs_init(sl__hs *hs, int role, const uint8_t key[32], const char *name,
                uint64_t fingerprint, const char *version)
{
    memset(hs, 0, sizeof *hs);
    hs->role = role;
    hs->state = HS_HELLO;
    memcpy(hs->key, key, 32);
    snprintf(hs->name, sizeof hs->name, "%s", name ? name : "");
    hs->fingerprint = fingerprint;
    snprintf(hs->version, sizeof hs->version, "%s", version ? version : "");
    if (!sl__random_bytes(role == SL__ROLE_TRAINER ? hs->nonce_t : hs->nonce_w, SL__WIRE_NONCE))
        return sl__set_error(SL_EUNSUPPORTED, "the service needs libcrypto: this sluice was "
                                              "built without it (SLUICE_WITH_CURL=OFF)");
    return 0;
}

static int hello(sl__hs *hs, sl__bytes *out)
{
    sl__msg_hello m = {.role = hs->role};
    if (hs->role == SL__ROLE_TRAINER)
        m.rank = hs->rank, m.world = hs->world ? hs->world : 1;
    memcpy(m.nonce, hs->role == SL__ROLE_TRAINER ? hs->nonce_t : hs->nonce_w, SL__WIRE_NONCE);
    snprintf(m.name, sizeof m.name, "%s", hs->name);
    return sl__msg_hello_write(out, &m);
}

static int auth(sl__hs *hs, sl__bytes *out)
{
    uint8_t mac[SL__WIRE_MAC];
    if (!sl__service_mac(hs->key, hs->role, hs->nonce_t, hs->nonce_w, mac))
        return sl__set_error(SL_EINTERNAL, "service: HMAC-SHA256 failed in libcrypto");
    int rc = sl__msg_auth_write(out, mac);
    sl__cleanse(mac, sizeof mac);
    return rc;
}

int sl__hs_begin(sl__hs *hs, sl__bytes *out)
{
    return hello(hs, out);
}

/* Ends the handshake: msg for this side's error, to_peer (NULL: nothing)
 * for the ERROR frame the peer gets. */
static int fail(sl__hs *hs, sl__bytes *out, int code, const char *to_peer, const char *msg)
{
    hs->state = HS_FAILED;
    if (to_peer)
        sl__msg_error_write(out, code, to_peer);
    return sl__set_error(code, "handshake: %s", msg);
}

static int out_of_turn(sl__hs *hs, sl__bytes *out, const sl__wire_hdr *h)
{
    static const char *const wants[] = {"HELLO", "AUTH", "PIPELINE", "READY"};
    char msg[128];
    snprintf(msg, sizeof msg, "%s where %s was due", sl__msg_name(h->type),
             hs->state < HS_DONE ? wants[hs->state] : "nothing");
    return fail(hs, out, SL_ECORRUPT, "handshake: message out of turn", msg);
}

/* The trainer's side: HELLO, then AUTH, then PIPELINE. */
static int trainer_step(sl__hs *hs, const sl__wire_hdr *h, const void *p, size_t n, sl__bytes *out)
{
    int rc;
    if (h->type == SL__MSG_ERROR) { /* the worker refused this trainer */
        sl__msg_error e;
        if ((rc = sl__msg_error_read(p, n, &e)) < 0)
            return hs->state = HS_FAILED, rc;
        hs->state = HS_FAILED;
        return sl__set_error(e.code, "handshake: the worker \"%s\" refused this trainer: %s",
                             hs->peer_name, e.text);
    }
    if (hs->state == HS_HELLO && h->type == SL__MSG_HELLO) {
        sl__msg_hello m;
        if ((rc = sl__msg_hello_read(p, n, &m)) < 0)
            return hs->state = HS_FAILED, rc;
        if (m.role != SL__ROLE_WORKER)
            return fail(hs, out, SL_ECORRUPT, "handshake: expected a worker",
                        "a trainer connected where a worker was due");
        memcpy(hs->nonce_w, m.nonce, SL__WIRE_NONCE);
        snprintf(hs->peer_name, sizeof hs->peer_name, "%s", m.name);
        hs->state = HS_AUTH;
        if ((rc = hello(hs, out)) < 0 || (rc = auth(hs, out)) < 0)
            return hs->state = HS_FAILED, rc;
        return 0;
    }
    if (hs->state == HS_AUTH && h->type == SL__MSG_AUTH) {
        uint8_t mac[SL__WIRE_MAC];
        if ((rc = sl__msg_auth_read(p, n, mac)) < 0)
            return hs->state = HS_FAILED, rc;
        if (!sl__service_mac_ok(hs->key, SL__ROLE_WORKER, hs->nonce_t, hs->nonce_w, mac)) {
            char msg[400];
            snprintf(msg, sizeof msg, "worker \"%s\" does not hold the service's shared "
                     "secret: refused", hs->peer_name);
            return fail(hs, out, SL_EACCES, "refused", msg);
        }
        hs->state = HS_PIPELINE;
        return 0;
    }
    if (hs->state == HS_PIPELINE && h->type == SL__MSG_PIPELINE) {
        sl__msg_pipeline m;
        if ((rc = sl__msg_pipeline_read(p, n, &m)) < 0)
            return hs->state = HS_FAILED, rc;
        char why[2 * SL__WIRE_STR_MAX + 128];
        if (m.fingerprint != hs->fingerprint) {
            snprintf(why, sizeof why, "another pipeline: the worker's fingerprint %016" PRIx64
                     ", the trainer's %016" PRIx64, m.fingerprint, hs->fingerprint);
            return fail(hs, out, SL_EMISMATCH, why, why);
        }
        if (strcmp(m.version, hs->version) != 0) {
            snprintf(why, sizeof why, "another version of the pipeline's code: the worker's "
                     "\"%s\", the trainer's \"%s\"", m.version, hs->version);
            return fail(hs, out, SL_EMISMATCH, why, why);
        }
        hs->threads = m.threads;
        sl__msg_ready r = {.worker_id = hs->worker_id, .heartbeat_ms = hs->heartbeat_ms};
        if ((rc = sl__msg_ready_write(out, &r)) < 0)
            return hs->state = HS_FAILED, rc;
        hs->state = HS_DONE;
        return 1;
    }
    return out_of_turn(hs, out, h);
}

/* The worker's side: HELLO and AUTH, then READY (or an ERROR). */
static int worker_step(sl__hs *hs, const sl__wire_hdr *h, const void *p, size_t n, sl__bytes *out)
{
    int rc;
    if (h->type == SL__MSG_ERROR && hs->state != HS_FAILED) {
        sl__msg_error e;
        if ((rc = sl__msg_error_read(p, n, &e)) < 0)
            return hs->state = HS_FAILED, rc;
        hs->state = HS_FAILED;
        return sl__set_error(e.code, "the trainer refused this worker: %s", e.text);
    }
    if (hs->state == HS_HELLO && h->type == SL__MSG_HELLO) {
        sl__msg_hello m;
        if ((rc = sl__msg_hello_read(p, n, &m)) < 0)
            return hs->state = HS_FAILED, rc;
        if (m.role != SL__ROLE_TRAINER)
            return fail(hs, out, SL_ECORRUPT, "handshake: expected a trainer",
                        "a worker answered where the trainer was due");
        memcpy(hs->nonce_t, m.nonce, SL__WIRE_NONCE);
        snprintf(hs->peer_name, sizeof hs->peer_name, "%s", m.name);
        hs->rank = m.rank;
        hs->world = m.world;
        hs->state = HS_AUTH;
        return 0;
    }
    if (hs->state == HS_AUTH && h->type == SL__MSG_AUTH) {
        uint8_t mac[SL__WIRE_MAC];
        if ((rc = sl__msg_auth_read(p, n, mac)) < 0)
            return hs->state = HS_FAILED, rc;
        if (!sl__service_mac_ok(hs->key, SL__ROLE_TRAINER, hs->nonce_t, hs->nonce_w, mac)) {
            char msg[400];
            snprintf(msg, sizeof msg, "trainer \"%s\" does not hold the service's shared "
                     "secret: refused", hs->peer_name);
            return fail(hs, out, SL_EACCES, "refused", msg);
        }
        if (hs->prepare && (rc = hs->prepare(hs->user, hs)) < 0) {
            char msg[SL__WIRE_STR_MAX];
            snprintf(msg, sizeof msg, "%s", sl_last_error());
            return fail(hs, out, rc, msg, msg);
        }
        sl__msg_pipeline m = {.fingerprint = hs->fingerprint, .threads = hs->threads};
        snprintf(m.version, sizeof m.version, "%s", hs->version);
        if ((rc = auth(hs, out)) < 0 || (rc = sl__msg_pipeline_write(out, &m)) < 0)
            return hs->state = HS_FAILED, rc;
        hs->state = HS_READY;
        return 0;
    }
    if (hs->state == HS_READY && h->type == SL__MSG_READY) {
        sl__msg_ready m;
        if ((rc = sl__msg_ready_read(p, n, &m)) < 0)
            return hs->state = HS_FAILED, rc;
        hs->worker_id = m.worker_id;
        hs->heartbeat_ms = m.heartbeat_ms;
        hs->state = HS_DONE;
        return 1;
    }
    return out_of_turn(hs, out, h);
}

int sl__hs_step(sl__hs *hs, const sl__wire_hdr *h, const void *payload, size_t n, sl__bytes *out)
{
    if (hs->state == HS_FAILED || hs->state == HS_DONE)
        return sl__set_error(SL_ESTATE, "handshake: already %s",
                             hs->state == HS_DONE ? "done" : "failed");
    return hs->role == SL__ROLE_TRAINER ? trainer_step(hs, h, payload, n, out)
                                        : worker_step(hs, h, payload, n, out);
}

void sl__hs_clear(sl__hs *hs)
{
    sl__cleanse(hs->key, sizeof hs->key);
}
