/* libcurl set up once per process (curl.h). */
#include <stdlib.h>
#include "curl.h"

const char *sl__curl_ca_bundle(void)
{
    const char *ca = getenv("SSL_CERT_FILE");
    if (!ca || !*ca)
        ca = getenv("CURL_CA_BUNDLE");
    return ca && *ca ? ca : NULL;
}

#ifdef SLUICE_NO_CURL

bool sl__curl_ready(void)
{
    return false;
}

#else

#include <pthread.h>

static pthread_once_t once = PTHREAD_ONCE_INIT;
static CURLSH *share;
static pthread_mutex_t share_mu[CURL_LOCK_DATA_LAST];
static bool global_ok;

static void share_lock(CURL *e, curl_lock_data d, curl_lock_access a, void *u)
{
    (void)e, (void)a, (void)u;
    pthread_mutex_lock(&share_mu[d]);
}

static void share_unlock(CURL *e, curl_lock_data d, void *u)
{
    (void)e, (void)u;
    pthread_mutex_unlock(&share_mu[d]);
}

static void global_init(void)
{
    if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK)
        return;
    global_ok = true;
    for (int i = 0; i < CURL_LOCK_DATA_LAST; i++)
        pthread_mutex_init(&share_mu[i], NULL);
    share = curl_share_init();
    if (share) {
        curl_share_setopt(share, CURLSHOPT_LOCKFUNC, share_lock);
        curl_share_setopt(share, CURLSHOPT_UNLOCKFUNC, share_unlock);
        curl_share_setopt(share, CURLSHOPT_SHARE, CURL_LOCK_DATA_DNS);
        curl_share_setopt(share, CURLSHOPT_SHARE, CURL_LOCK_DATA_SSL_SESSION);
    }
}

bool sl__curl_ready(void)
{
    pthread_once(&once, global_init);
    return global_ok;
}

CURLSH *sl__curl_share(void)
{
    return sl__curl_ready() ? share : NULL;
}

#endif
