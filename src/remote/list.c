/* Listing a bucket for list_files (remote.h, sl__remote_glob): S3's
 * ListObjectsV2, page by page, over the pattern's fixed prefix. */
#include <fnmatch.h>
#include <stdlib.h>
#include <string.h>
#include "../core/alloc.h"
#include "../core/error.h"
#include "curl.h"
#include "remote.h"

#ifdef SLUICE_NO_CURL

int sl__remote_glob(const char *pattern, sl__remote_push push, void *user)
{
    (void)push, (void)user;
    return sl__set_error(SL_EUNSUPPORTED, "%.300s: listing a bucket needs libcurl, and this "
                         "build has none (SLUICE_WITH_CURL=OFF)", pattern);
}

int sl__remote_list(const char *url, sl__remote_push push, void *user)
{
    return sl__remote_glob(url, push, user);
}

#else

#include <curl/curl.h>
#include <time.h>
#include <unistd.h>

typedef struct body {
    char *p;
    size_t n, cap;
} body;

static size_t on_body(char *p, size_t size, size_t n, void *u)
{
    body *b = u;
    size_t len = size * n;
    if (b->n + len + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 65536;
        while (cap < b->n + len + 1)
            cap *= 2;
        char *q = realloc(b->p, cap);
        if (!q)
            return 0;
        b->p = q;
        b->cap = cap;
    }
    memcpy(b->p + b->n, p, len);
    b->n += len;
    b->p[b->n] = '\0';
    return len;
}

/* One page of the listing into b: 0, or a code with the message set. */
static int get_page(const sl__remote *r, body *b)
{
    char hbuf[6144];
    const char *lines[8];
    for (int attempt = 1;; attempt++) {
        b->n = 0;
        if (b->p)
            b->p[0] = '\0';
        CURL *e = curl_easy_init();
        struct curl_slist *h = NULL;
        int nh = e ? sl__remote_headers(r, NULL, time(NULL), hbuf, sizeof hbuf, lines) : -1;
        for (int i = 0; i < nh; i++)
            h = curl_slist_append(h, lines[i]);
        if (!e || nh < 0) {
            curl_easy_cleanup(e);
            if (nh == -2)
                return sl__set_error(SL_EINTERNAL, "%s: signing the request failed (libcrypto)",
                                     r->shown);
            return sl__set_error(SL_ENOMEM, "%s: out of memory", r->shown);
        }
        char err[CURL_ERROR_SIZE] = "";
        curl_easy_setopt(e, CURLOPT_URL, r->url);
        curl_easy_setopt(e, CURLOPT_HTTPHEADER, h);
        curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, on_body);
        curl_easy_setopt(e, CURLOPT_WRITEDATA, b);
        curl_easy_setopt(e, CURLOPT_ERRORBUFFER, err);
        curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
        curl_easy_setopt(e, CURLOPT_CONNECTTIMEOUT, 30L);
        curl_easy_setopt(e, CURLOPT_LOW_SPEED_LIMIT, 1L);
        curl_easy_setopt(e, CURLOPT_LOW_SPEED_TIME, 30L);
        curl_easy_setopt(e, CURLOPT_PROTOCOLS_STR, "http,https");
        const char *ca = sl__curl_ca_bundle();
        if (ca)
            curl_easy_setopt(e, CURLOPT_CAINFO, ca);
        if (sl__curl_share())
            curl_easy_setopt(e, CURLOPT_SHARE, sl__curl_share());
        CURLcode cc = curl_easy_perform(e);
        long st = 0;
        curl_easy_getinfo(e, CURLINFO_RESPONSE_CODE, &st);
        curl_slist_free_all(h);
        curl_easy_cleanup(e);
        if (cc == CURLE_OK && st == 200)
            return 0;
        bool again = cc != CURLE_OK || st == 408 || st == 429 || st >= 500;
        if (!again || attempt >= 8) {
            const char *a = b->p ? strstr(b->p, "<Code>") : NULL;
            const char *z = a ? strstr(a, "</Code>") : NULL;
            int code = cc != CURLE_OK ? SL_EIO : st == 401 || st == 403 ? SL_EACCES
                                              : st == 404 ? SL_ENOENT : SL_EIO;
            if (cc != CURLE_OK)
                return sl__set_error(code, "%s: %s", r->shown,
                                     err[0] ? err : curl_easy_strerror(cc));
            return sl__set_error(code, "%s: HTTP %ld%s%.*s", r->shown, st,
                                 a && z && z - a < 80 ? ", " : "",
                                 a && z && z - a < 80 ? (int)(z - a - 6) : 0, a ? a + 6 : "");
        }
        usleep((useconds_t)(50000u << (attempt < 7 ? attempt : 7)));
    }
}

/* The text between <tag> and </tag> from *p on, entities decoded, into out
 * (cap bytes); advances *p past it. false when there is none. */
static bool next_tag(const char **p, const char *end, const char *tag, char *out, size_t cap)
{
    char open[40], close[40];
    snprintf(open, sizeof open, "<%s>", tag);
    snprintf(close, sizeof close, "</%s>", tag);
    const char *a = strstr(*p, open);
    if (!a || a >= end)
        return false;
    a += strlen(open);
    const char *z = strstr(a, close);
    if (!z || z > end)
        return false;
    size_t k = 0;
    static const struct {
        const char *ent;
        char c;
    } ents[] = {{"&amp;", '&'}, {"&lt;", '<'}, {"&gt;", '>'}, {"&quot;", '"'}, {"&apos;", '\''}};
    while (a < z && k + 1 < cap) {
        bool done = false;
        for (size_t i = 0; *a == '&' && i < sizeof ents / sizeof *ents; i++) {
            size_t l = strlen(ents[i].ent);
            if ((size_t)(z - a) >= l && !strncmp(a, ents[i].ent, l)) {
                out[k++] = ents[i].c;
                a += l;
                done = true;
                break;
            }
        }
        if (!done)
            out[k++] = *a++;
    }
    out[k] = '\0';
    *p = z + strlen(close);
    return true;
}

/* Lists pattern's bucket under its fixed prefix; every key when all,
 * else those matching the pattern. */
static int list(const char *pattern, bool all, sl__remote_push push, void *user)
{
    if (strncmp(pattern, "s3://", 5) && strncmp(pattern, "gs://", 5))
        return sl__set_error(SL_EUNSUPPORTED, "%.300s: only s3:// and gs:// buckets can be "
                             "listed (HTTP has no listing)", pattern);
    if (!sl__curl_ready())
        return sl__set_error(SL_EIO, "libcurl could not be initialised");
    const char *bucket = pattern + 5, *slash = strchr(bucket, '/');
    const char *key = slash ? slash + 1 : "";
    size_t blen = slash ? (size_t)(slash - bucket) : strlen(bucket);
    size_t plen = all ? strlen(key) : strcspn(key, "*?[\\");
    char base[128], prefix[1024], token[1024] = "", extra[3200], k[1100], url[1300];
    snprintf(base, sizeof base, "%.5s%.*s/", pattern, (int)(blen < 100 ? blen : 100), bucket);
    if (plen >= sizeof prefix)
        return sl__set_error(SL_EINVAL, "%.300s: pattern too long", pattern);
    snprintf(prefix, sizeof prefix, "%.*s", (int)plen, key);
    body b = {0};
    sl__remote *r = malloc(sizeof *r);
    int rc = r ? 0 : SL_ENOMEM;
    bool more = true;
    while (rc == 0 && more) {
        snprintf(extra, sizeof extra, "list-type=2&prefix=%s%s%s", prefix,
                 token[0] ? "&continuation-token=" : "", token);
        rc = sl__remote_resolve(base, extra, r);
        if (rc == 0)
            rc = get_page(r, &b);
        if (rc < 0)
            break;
        const char *p = b.p ? b.p : "", *end = p + b.n;
        char trunc[16] = "";
        const char *q = p;
        more = next_tag(&q, end, "IsTruncated", trunc, sizeof trunc) && !strcmp(trunc, "true");
        q = p;
        if (more && !next_tag(&q, end, "NextContinuationToken", token, sizeof token))
            rc = sl__set_error(SL_EIO, "%s: a truncated listing without a "
                               "continuation token", r->shown);
        const char *c = p;
        while (rc == 0 && (c = strstr(c, "<Contents>")) != NULL) {
            const char *ce = strstr(c, "</Contents>");
            if (!ce)
                break;
            const char *kp = c;
            if (next_tag(&kp, ce, "Key", k, sizeof k) &&
                (all || fnmatch(key, k, FNM_PATHNAME) == 0)) {
                int n = snprintf(url, sizeof url, "%s%s", base, k);
                rc = push(user, url, (size_t)n);
            }
            c = ce;
        }
    }
    free(b.p);
    free(r);
    return rc;
}

int sl__remote_glob(const char *pattern, sl__remote_push push, void *user)
{
    return list(pattern, false, push, user);
}

int sl__remote_list(const char *url, sl__remote_push push, void *user)
{
    char prefix[2048];
    size_t n = strlen(url);
    if (n + 2 > sizeof prefix)
        return sl__set_error(SL_EINVAL, "%.300s: URL too long", url);
    snprintf(prefix, sizeof prefix, "%s%s", url, n && url[n - 1] == '/' ? "" : "/");
    return list(prefix, true, push, user);
}

#endif
