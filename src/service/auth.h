/*
 * Peers of the service prove they hold the job's shared secret before any
 * other message (auth.c): each sends a fresh random nonce in its HELLO and
 * answers with AUTH, an HMAC-SHA256 under the secret of (a label, its own
 * role, the trainer's nonce, the worker's nonce). Neither the secret nor
 * anything derived from it but the MACs ever leaves the process, and a
 * recorded MAC is worth nothing later (the other side's fresh nonce is in
 * it). There is no channel binding: a party in the middle of a live
 * connection can relay both sides' messages and then the link, so the
 * service belongs on a network one trusts (as its batches, which are not
 * encrypted, do). Any thread may call these.
 */
#ifndef SL_SERVICE_AUTH_H
#define SL_SERVICE_AUTH_H

#include <stdbool.h>
#include <stdint.h>
#include "wire.h"

/* The key: SHA-256 of SLUICE_SERVICE_SECRET, or of the contents of the
 * file SLUICE_SERVICE_SECRET_FILE names (a Kubernetes secret mounted as a
 * file; trailing newlines dropped). 0, or SL_EACCES when neither is set or
 * the secret is empty, SL_EIO naming an unreadable file, SL_EUNSUPPORTED
 * in a build without libcrypto. */
int sl__service_key(uint8_t key[32]);
/* The MAC a peer of `role` sends (SL__ROLE_TRAINER / _WORKER). False when
 * libcrypto failed. */
bool sl__service_mac(const uint8_t key[32], int role, const uint8_t trainer_nonce[SL__WIRE_NONCE],
                     const uint8_t worker_nonce[SL__WIRE_NONCE], uint8_t mac[SL__WIRE_MAC]);
/* Whether mac is the one a peer of `role` holding key would send
 * (compared in constant time). */
bool sl__service_mac_ok(const uint8_t key[32], int role,
                        const uint8_t trainer_nonce[SL__WIRE_NONCE],
                        const uint8_t worker_nonce[SL__WIRE_NONCE],
                        const uint8_t mac[SL__WIRE_MAC]);

#endif
