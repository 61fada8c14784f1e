/* The shared-secret handshake's key and MACs (auth.h), on libcrypto. */
#include "auth.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "../core/error.h"
#include "../remote/crypto.h"

#define LABEL "sluice service v1"

static int key_of(const char *secret, size_t n, uint8_t key[32])
{
    while (n && (secret[n - 1] == '\n' || secret[n - 1] == '\r'))
        n--;
    if (!n)
        return sl__set_error(SL_EACCES, "the service's shared secret is empty");
    if (!sl__sha256(secret, n, key))
        return sl__set_error(SL_EUNSUPPORTED, "the service needs libcrypto: this sluice was "
                                              "built without it (SLUICE_WITH_CURL=OFF)");
    return 0;
}

int sl__service_key(uint8_t key[32])
{
    const char *v = getenv("SLUICE_SERVICE_SECRET");
    if (v && *v)
        return key_of(v, strlen(v), key);
    const char *path = getenv("SLUICE_SERVICE_SECRET_FILE");
    if (!path || !*path)
        return sl__set_error(SL_EACCES, "no shared secret for the service: set "
                                        "SLUICE_SERVICE_SECRET or SLUICE_SERVICE_SECRET_FILE "
                                        "the same on the trainers and the workers");
    FILE *f = fopen(path, "rb");
    if (!f)
        return sl__set_error(SL_EIO, "SLUICE_SERVICE_SECRET_FILE %s: cannot be read", path);
    char buf[4096];
    size_t n = fread(buf, 1, sizeof buf, f);
    bool whole = feof(f) && !ferror(f);
    fclose(f);
    int rc = whole ? key_of(buf, n, key)
                   : sl__set_error(SL_EIO, "SLUICE_SERVICE_SECRET_FILE %s: unreadable, or "
                                           "over 4 KiB", path);
    sl__cleanse(buf, sizeof buf);
    return rc;
}

bool sl__service_mac(const uint8_t key[32], int role, const uint8_t trainer_nonce[SL__WIRE_NONCE],
                     const uint8_t worker_nonce[SL__WIRE_NONCE], uint8_t mac[SL__WIRE_MAC])
{
    uint8_t msg[sizeof LABEL + 1 + 2 * SL__WIRE_NONCE];
    memcpy(msg, LABEL, sizeof LABEL); /* the NUL too: the role cannot extend it */
    msg[sizeof LABEL] = (uint8_t)role;
    memcpy(msg + sizeof LABEL + 1, trainer_nonce, SL__WIRE_NONCE);
    memcpy(msg + sizeof LABEL + 1 + SL__WIRE_NONCE, worker_nonce, SL__WIRE_NONCE);
    return sl__hmac_sha256(key, 32, msg, sizeof msg, mac);
}

bool sl__service_mac_ok(const uint8_t key[32], int role,
                        const uint8_t trainer_nonce[SL__WIRE_NONCE],
                        const uint8_t worker_nonce[SL__WIRE_NONCE],
                        const uint8_t mac[SL__WIRE_MAC])
{
    uint8_t want[SL__WIRE_MAC];
    bool ok = sl__service_mac(key, role, trainer_nonce, worker_nonce, want) &&
              sl__equal_secret(want, mac, SL__WIRE_MAC);
    sl__cleanse(want, sizeof want);
    return ok;
}
