/* libcurl, set up once per process (curl.c); with libcurl only. */
#ifndef SL_REMOTE_CURL_H
#define SL_REMOTE_CURL_H

#include <stdbool.h>

/* curl_global_init done (once, any thread); false when it failed. */
bool sl__curl_ready(void);
/* The CA bundle the environment names (SSL_CERT_FILE, else
 * CURL_CA_BUNDLE), or NULL for libcurl's own. */
const char *sl__curl_ca_bundle(void);

#ifndef SLUICE_NO_CURL
#include <curl/curl.h>
/* What every handle shares: DNS answers and TLS sessions (not connections,
 * which libcurl does not share safely between threads). NULL if none. */
CURLSH *sl__curl_share(void);
#endif

#endif
