/*
 * SHA-256 and HMAC-SHA256 for Signature V4 and the shard cache's names
 * (crypto.c), from OpenSSL's libcrypto, never written here (STYLE 18).
 * libcrypto comes with libcurl: a build without libcurl has no digest, and
 * these return false there (nothing in it can send a request).
 * Any thread may call them.
 */
#ifndef SL_REMOTE_CRYPTO_H
#define SL_REMOTE_CRYPTO_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* out = SHA-256 of n bytes; false when libcrypto failed (out undefined). */
bool sl__sha256(const void *data, size_t n, uint8_t out[32]);
/* out = HMAC-SHA256 of n bytes under a klen-byte key; out may be the key.
 * False when libcrypto failed (out undefined). */
bool sl__hmac_sha256(const void *key, size_t klen, const void *msg, size_t n, uint8_t out[32]);
/* n bytes from libcrypto's CSPRNG (nonces); false when it failed or the
 * build has no libcrypto. */
bool sl__random_bytes(void *out, size_t n);
/* a[0..n) == b[0..n) in time independent of where they differ (MACs);
 * false without libcrypto. */
bool sl__equal_secret(const void *a, const void *b, size_t n);
/* Zeroes n bytes in a way the compiler keeps (secrets, derived keys). */
void sl__cleanse(void *p, size_t n);
/* n bytes as 2n lowercase hex digits and a NUL. */
void sl__hex(const uint8_t *p, size_t n, char *out);

#endif
