/* SHA-256 and HMAC-SHA256 through libcrypto's EVP interface (crypto.h). */
#include <string.h>
#include "crypto.h"

#ifdef SLUICE_NO_CURL

bool sl__sha256(const void *data, size_t n, uint8_t out[32])
{
    (void)data, (void)n, (void)out;
    return false;
}

bool sl__hmac_sha256(const void *key, size_t klen, const void *msg, size_t n, uint8_t out[32])
{
    (void)key, (void)klen, (void)msg, (void)n, (void)out;
    return false;
}

bool sl__random_bytes(void *out, size_t n)
{
    (void)out, (void)n;
    return false;
}

bool sl__equal_secret(const void *a, const void *b, size_t n)
{
    (void)a, (void)b, (void)n;
    return false;
}

void sl__cleanse(void *p, size_t n)
{
    volatile unsigned char *v = p;
    while (n--)
        *v++ = 0;
}

#else
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/rand.h>

bool sl__random_bytes(void *out, size_t n)
{
    return n <= INT32_MAX && RAND_bytes(out, (int)n) == 1;
}

bool sl__equal_secret(const void *a, const void *b, size_t n)
{
    return CRYPTO_memcmp(a, b, n) == 0;
}

void sl__cleanse(void *p, size_t n)
{
    OPENSSL_cleanse(p, n);
}

bool sl__sha256(const void *data, size_t n, uint8_t out[32])
{
    size_t len = 0;
    return EVP_Q_digest(NULL, "SHA256", NULL, data, n, out, &len) == 1 && len == 32;
}

bool sl__hmac_sha256(const void *key, size_t klen, const void *msg, size_t n, uint8_t out[32])
{
    /* into a copy, so that out may be the key whatever libcrypto does */
    uint8_t d[EVP_MAX_MD_SIZE];
    size_t len = 0;
    bool ok = EVP_Q_mac(NULL, "HMAC", NULL, "SHA256", NULL, key, klen, msg, n, d, sizeof d,
                        &len) != NULL &&
              len == 32;
    if (ok)
        memcpy(out, d, 32);
    OPENSSL_cleanse(d, sizeof d);
    return ok;
}

#endif

void sl__hex(const uint8_t *p, size_t n, char *out)
{
    static const char digits[] = "0123456789abcdef";
    for (size_t i = 0; i < n; i++) {
        out[2 * i] = digits[p[i] >> 4];
        out[2 * i + 1] = digits[p[i] & 15];
    }
    out[2 * n] = '\0';
}
