/* SHA-256 and HMAC-SHA256 (sha256.c): what AWS Signature V4 needs. */
#ifndef SL_REMOTE_SHA256_H
#define SL_REMOTE_SHA256_H

#include <stddef.h>
#include <stdint.h>

typedef struct sl__sha256 {
    uint32_t h[8];
    uint64_t len;
    uint8_t buf[64];
    size_t n;
} sl__sha256_ctx;

void sl__sha256_init(sl__sha256_ctx *s);
void sl__sha256_update(sl__sha256_ctx *s, const void *data, size_t n);
void sl__sha256_final(sl__sha256_ctx *s, uint8_t out[32]);
void sl__sha256(const void *data, size_t n, uint8_t out[32]);
void sl__hmac_sha256(const void *key, size_t klen, const void *msg, size_t n, uint8_t out[32]);
/* n bytes as 2n lowercase hex digits and a NUL. */
void sl__hex(const uint8_t *p, size_t n, char *out);

#endif
