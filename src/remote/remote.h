/*
 * Remote objects (remote.c): what a URL names and how a request for it is
 * made and signed. http:// and https:// are fetched as they are; s3:// and
 * gs:// become requests to the store's endpoint, signed with AWS Signature
 * V4 (GCS through its S3-compatible XML API with HMAC keys, or a bearer
 * token).
 *
 * Where the settings come from (read when an object is resolved):
 *   s3://  AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_SESSION_TOKEN, else
 *          the profile (AWS_PROFILE, default "default") of
 *          AWS_SHARED_CREDENTIALS_FILE or ~/.aws/credentials; region from
 *          AWS_REGION, AWS_DEFAULT_REGION, the profile in AWS_CONFIG_FILE or
 *          ~/.aws/config, else us-east-1; endpoint AWS_ENDPOINT_URL_S3 or
 *          AWS_ENDPOINT_URL (path-style: ENDPOINT/bucket/key), else
 *          https://bucket.s3.REGION.amazonaws.com/key. No keys at all:
 *          unsigned requests (a public bucket).
 *   gs://  GCS_HMAC_KEY_ID and GCS_HMAC_SECRET (signed as S3, region
 *          "auto"), else GOOGLE_OAUTH_ACCESS_TOKEN as a bearer token;
 *          endpoint GCS_ENDPOINT_URL, else https://storage.googleapis.com
 *          (path-style).
 *
 * Secrets stay in the sl__remote it was resolved into: `shown`, the only
 * form of the URL that messages, traces and logs use, has no user
 * information and no query string.
 */
#ifndef SL_REMOTE_REMOTE_H
#define SL_REMOTE_REMOTE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

enum { SL__REMOTE_HTTP, SL__REMOTE_S3, SL__REMOTE_GS };

typedef struct sl__remote {
    int kind;
    char url[4096];   /* what is requested: scheme://host[:port]/path[?query] */
    char shown[1024]; /* for messages */
    char host[256];   /* the Host header's value */
    char path[2048];  /* the request's path, percent-encoded as sent */
    char query[1024]; /* canonical query string (sorted), "" for none */
    /* signing: akid[0] == 0 when requests go unsigned */
    char akid[128], secret[128], region[64];
    char token[2048]; /* AWS_SESSION_TOKEN or the bearer token */
    bool bearer;
} sl__remote;

/* Whether path is a URL sluice fetches (http, https, s3, gs). */
bool sl__is_url(const char *path);
/* Resolves url; for s3:// and gs:// a query (`extra`, unencoded
 * key=value pairs joined by '&', NULL for none) is added, for listings.
 * 0, or SL_EINVAL with a message (a bad URL) naming the shown URL. */
int sl__remote_resolve(const char *url, const char *extra, sl__remote *r);
/* The request headers for a GET of r (range: "bytes=a-b", or NULL), at
 * time now: up to 6 NUL-terminated "Name: value" lines written one after
 * another into buf (cap bytes), their count returned (-1: buf too small;
 * -2: signing failed in libcrypto, or the build has none: no libcurl). */
int sl__remote_headers(const sl__remote *r, const char *range, time_t now, char *buf,
                       size_t cap, const char **lines);
/* Called with each URL a listing finds (n bytes, not NUL-terminated):
 * 0, or a negative code that stops the listing. */
typedef int (*sl__remote_push)(void *user, const char *url, size_t n);
/* list_files over a bucket: the objects of s3:// or gs:// pattern's bucket
 * whose keys match it (fnmatch, '*' not crossing '/'), given to push as
 * URLs (scheme://bucket/key) in the store's order. 0 (none may have
 * matched) or a code with the message set. */
int sl__remote_glob(const char *pattern, sl__remote_push push, void *user);
/* The same for every object under the "folder" url (s3:// or gs://, with
 * or without its trailing '/'), whatever the depth. */
int sl__remote_list(const char *url, sl__remote_push push, void *user);
/* Percent-encodes s (n bytes) as SigV4 wants: unreserved characters kept,
 * and '/' too when keep_slash. Returns the length written, or -1 when it
 * does not fit cap (NUL included). */
int sl__uri_encode(const char *s, size_t n, bool keep_slash, char *out, size_t cap);

#endif
