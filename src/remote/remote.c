/* Remote objects' addresses and request signing (remote.h). */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "../core/error.h"
#include "remote.h"
#include "crypto.h"

#define EMPTY_SHA256 "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"

bool sl__is_url(const char *p)
{
    return !strncmp(p, "http://", 7) || !strncmp(p, "https://", 8) || !strncmp(p, "s3://", 5) ||
           !strncmp(p, "gs://", 5);
}

static bool unreserved(unsigned char c)
{
    return isalnum(c) || c == '-' || c == '_' || c == '.' || c == '~';
}

int sl__uri_encode(const char *s, size_t n, bool keep_slash, char *out, size_t cap)
{
    static const char hex[] = "0123456789ABCDEF";
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (unreserved(c) || (keep_slash && c == '/')) {
            if (k + 1 >= cap)
                return -1;
            out[k++] = (char)c;
        } else {
            if (k + 3 >= cap)
                return -1;
            out[k++] = '%';
            out[k++] = hex[c >> 4];
            out[k++] = hex[c & 15];
        }
    }
    if (k >= cap)
        return -1;
    out[k] = '\0';
    return (int)k;
}

/* ---- settings from the environment and ~/.aws ---- */

static const char *env(const char *name)
{
    const char *v = getenv(name);
    return v && *v ? v : NULL;
}

static void copy(char *dst, size_t cap, const char *src)
{
    snprintf(dst, cap, "%s", src ? src : "");
}

static char *trim(char *s)
{
    while (isspace((unsigned char)*s))
        s++;
    char *e = s + strlen(s);
    while (e > s && isspace((unsigned char)e[-1]))
        *--e = '\0';
    return s;
}

/* Key `key` of section `section` of an INI file (~/.aws style) into out;
 * false where the file, the section or the key is missing. */
static bool ini_get(const char *file, const char *section, const char *key, char *out,
                    size_t cap)
{
    FILE *f = file ? fopen(file, "r") : NULL;
    if (!f)
        return false;
    char line[4096];
    bool in = false, found = false;
    while (!found && fgets(line, sizeof line, f)) {
        char *s = trim(line);
        if (*s == '[') {
            char *e = strchr(s, ']');
            if (e)
                *e = '\0';
            in = !strcmp(trim(s + 1), section);
        } else if (in && *s != '#' && *s != ';') {
            char *eq = strchr(s, '=');
            if (!eq)
                continue;
            *eq = '\0';
            if (!strcmp(trim(s), key)) {
                copy(out, cap, trim(eq + 1));
                found = true;
            }
        }
    }
    fclose(f);
    return found;
}

static void home_file(const char *var, const char *rel, char *out, size_t cap)
{
    const char *v = env(var), *home = env("HOME");
    if (v)
        copy(out, cap, v);
    else if (home)
        snprintf(out, cap, "%s/%s", home, rel);
    else
        out[0] = '\0';
}

static void aws_settings(sl__remote *r)
{
    const char *profile = env("AWS_PROFILE") ? env("AWS_PROFILE") : "default";
    char creds[1024], config[1024], section[300];
    home_file("AWS_SHARED_CREDENTIALS_FILE", ".aws/credentials", creds, sizeof creds);
    home_file("AWS_CONFIG_FILE", ".aws/config", config, sizeof config);
    if (env("AWS_ACCESS_KEY_ID") && env("AWS_SECRET_ACCESS_KEY")) {
        copy(r->akid, sizeof r->akid, env("AWS_ACCESS_KEY_ID"));
        copy(r->secret, sizeof r->secret, env("AWS_SECRET_ACCESS_KEY"));
        copy(r->token, sizeof r->token, env("AWS_SESSION_TOKEN"));
    } else if (ini_get(creds, profile, "aws_access_key_id", r->akid, sizeof r->akid) &&
               ini_get(creds, profile, "aws_secret_access_key", r->secret, sizeof r->secret)) {
        ini_get(creds, profile, "aws_session_token", r->token, sizeof r->token);
    } else {
        r->akid[0] = r->secret[0] = '\0';
    }
    /* the config file names profiles "profile NAME", except the default */
    snprintf(section, sizeof section, strcmp(profile, "default") ? "profile %s" : "%s", profile);
    if (env("AWS_REGION"))
        copy(r->region, sizeof r->region, env("AWS_REGION"));
    else if (env("AWS_DEFAULT_REGION"))
        copy(r->region, sizeof r->region, env("AWS_DEFAULT_REGION"));
    else if (!ini_get(config, section, "region", r->region, sizeof r->region))
        copy(r->region, sizeof r->region, "us-east-1");
}

/* ---- URLs ---- */

/* Splits an endpoint URL: scheme://authority[/base]; authority without
 * user information. */
static int endpoint(const char *ep, char *scheme, size_t scap, char *host, size_t hcap,
                    char *base, size_t bcap)
{
    const char *s = strstr(ep, "://");
    if (!s || (size_t)(s - ep) >= scap)
        return -1;
    snprintf(scheme, scap, "%.*s", (int)(s - ep), ep);
    s += 3;
    const char *slash = strchr(s, '/');
    size_t alen = slash ? (size_t)(slash - s) : strlen(s);
    if (alen == 0 || alen >= hcap || memchr(s, '@', alen))
        return -1;
    snprintf(host, hcap, "%.*s", (int)alen, s);
    snprintf(base, bcap, "%s", slash ? slash : "");
    size_t bl = strlen(base);
    while (bl && base[bl - 1] == '/')
        base[--bl] = '\0';
    return 0;
}

static int query_cmp(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* `extra` (key=value&...) encoded and sorted into r->query. */
static int canonical_query(const char *extra, sl__remote *r)
{
    char enc[16][512], *sorted[16];
    int n = 0;
    r->query[0] = '\0';
    while (extra && *extra) {
        const char *amp = strchr(extra, '&'), *end = amp ? amp : extra + strlen(extra);
        const char *eq = memchr(extra, '=', (size_t)(end - extra));
        if (n == 16 || !eq)
            return -1;
        int k = sl__uri_encode(extra, (size_t)(eq - extra), false, enc[n], sizeof enc[n]);
        if (k < 0 || (size_t)k + 2 >= sizeof enc[n])
            return -1;
        enc[n][k] = '=';
        if (sl__uri_encode(eq + 1, (size_t)(end - eq - 1), false, enc[n] + k + 1,
                           sizeof enc[n] - (size_t)k - 1) < 0)
            return -1;
        sorted[n] = enc[n];
        n++;
        extra = amp ? amp + 1 : end;
    }
    qsort(sorted, (size_t)n, sizeof *sorted, query_cmp);
    size_t len = 0;
    for (int i = 0; i < n; i++) {
        int w = snprintf(r->query + len, sizeof r->query - len, "%s%s", i ? "&" : "", sorted[i]);
        if (w < 0 || (size_t)w >= sizeof r->query - len)
            return -1;
        len += (size_t)w;
    }
    return 0;
}

static int bad(const char *shown, const char *why)
{
    return sl__set_error(SL_EINVAL, "%s: %s", shown, why);
}

/* http(s)://[user@]host[:port]/path[?query], kept as given. */
static int resolve_http(const char *url, sl__remote *r)
{
    const char *s = strstr(url, "://") + 3;
    size_t alen = strcspn(s, "/?#");
    const char *at = memchr(s, '@', alen);
    const char *host = at ? at + 1 : s;
    size_t hlen = alen - (size_t)(host - s);
    const char *path = s + alen;
    size_t plen = strcspn(path, "?#");
    snprintf(r->shown, sizeof r->shown, "%.*s%.*s%.*s%s", (int)(s - url), url, (int)hlen, host,
             (int)plen, path, path[plen] == '?' ? "?..." : "");
    if (hlen == 0 || hlen >= sizeof r->host)
        return bad(r->shown, "no host in the URL");
    if (strlen(url) >= sizeof r->url)
        return bad(r->shown, "URL too long");
    copy(r->url, sizeof r->url, url);
    snprintf(r->host, sizeof r->host, "%.*s", (int)hlen, host);
    return 0;
}

int sl__remote_resolve(const char *url, const char *extra, sl__remote *r)
{
    memset(r, 0, sizeof *r);
    if (!strncmp(url, "http://", 7) || !strncmp(url, "https://", 8)) {
        r->kind = SL__REMOTE_HTTP;
        return resolve_http(url, r);
    }
    bool s3 = !strncmp(url, "s3://", 5);
    if (!s3 && strncmp(url, "gs://", 5))
        return sl__set_error(SL_EINVAL, "%.200s: not a URL sluice reads (http, https, s3, gs)",
                             url);
    r->kind = s3 ? SL__REMOTE_S3 : SL__REMOTE_GS;
    const char *b = url + 5, *slash = strchr(b, '/');
    size_t blen = slash ? (size_t)(slash - b) : strlen(b);
    const char *key = slash ? slash + 1 : "";
    snprintf(r->shown, sizeof r->shown, "%s", url);
    if (blen == 0 || blen > 63)
        return bad(r->shown, "no bucket name (s3://bucket/key)");
    for (size_t i = 0; i < blen; i++)
        if (!islower((unsigned char)b[i]) && !isdigit((unsigned char)b[i]) && b[i] != '-' &&
            b[i] != '.' && b[i] != '_')
            return bad(r->shown, "bad bucket name");
    char ekey[1536], scheme[16], host[256], base[512];
    if (sl__uri_encode(key, strlen(key), true, ekey, sizeof ekey) < 0)
        return bad(r->shown, "key too long");
    if (canonical_query(extra, r) < 0)
        return bad(r->shown, "query too long");
    const char *ep;
    if (s3) {
        aws_settings(r);
        ep = env("AWS_ENDPOINT_URL_S3") ? env("AWS_ENDPOINT_URL_S3") : env("AWS_ENDPOINT_URL");
    } else {
        copy(r->region, sizeof r->region, "auto");
        if (env("GCS_HMAC_KEY_ID") && env("GCS_HMAC_SECRET")) {
            copy(r->akid, sizeof r->akid, env("GCS_HMAC_KEY_ID"));
            copy(r->secret, sizeof r->secret, env("GCS_HMAC_SECRET"));
        } else if (env("GOOGLE_OAUTH_ACCESS_TOKEN")) {
            copy(r->token, sizeof r->token, env("GOOGLE_OAUTH_ACCESS_TOKEN"));
            r->bearer = true;
        }
        ep = env("GCS_ENDPOINT_URL") ? env("GCS_ENDPOINT_URL") : "https://storage.googleapis.com";
    }
    int w;
    if (ep) { /* path-style */
        if (endpoint(ep, scheme, sizeof scheme, host, sizeof host, base, sizeof base) < 0)
            return sl__set_error(SL_EINVAL, "%s: bad endpoint URL %.200s (scheme://host[:port])",
                                 r->shown, ep);
        w = snprintf(r->path, sizeof r->path, "%s/%.*s/%s", base, (int)blen, b, ekey);
    } else {
        copy(scheme, sizeof scheme, "https");
        snprintf(host, sizeof host, "%.*s.s3.%s.amazonaws.com", (int)blen, b, r->region);
        w = snprintf(r->path, sizeof r->path, "/%s", ekey);
    }
    if (w < 0 || (size_t)w >= sizeof r->path)
        return bad(r->shown, "key too long");
    copy(r->host, sizeof r->host, host);
    w = snprintf(r->url, sizeof r->url, "%s://%s%s%s%s", scheme, host, r->path,
                 r->query[0] ? "?" : "", r->query);
    if (w < 0 || (size_t)w >= sizeof r->url)
        return bad(r->shown, "URL too long");
    return 0;
}

/* ---- Signature V4 ---- */

static bool hmac(const uint8_t *key, size_t klen, const char *msg, uint8_t out[32])
{
    return sl__hmac_sha256(key, klen, msg, strlen(msg), out);
}

int sl__remote_headers(const sl__remote *r, const char *range, time_t now, char *buf,
                       size_t cap, const char **lines)
{
    int n = 0;
    size_t used = 0;
#define ADD(...)                                                                  \
    do {                                                                          \
        int w_ = snprintf(buf + used, cap - used, __VA_ARGS__);                   \
        if (w_ < 0 || (size_t)w_ >= cap - used)                                   \
            return -1;                                                            \
        lines[n++] = buf + used;                                                  \
        used += (size_t)w_ + 1;                                                   \
    } while (0)
    if (range)
        ADD("Range: %s", range);
    if (r->bearer && r->token[0])
        ADD("Authorization: Bearer %s", r->token);
    if (r->kind == SL__REMOTE_HTTP || r->bearer || !r->akid[0])
        return n;
    struct tm tm;
    gmtime_r(&now, &tm);
    char date[9], stamp[17];
    strftime(date, sizeof date, "%Y%m%d", &tm);
    strftime(stamp, sizeof stamp, "%Y%m%dT%H%M%SZ", &tm);
    /* the canonical request: headers in name order, each signed */
    char creq[8192], scope[128], sts[512];
    int w = snprintf(creq, sizeof creq, "GET\n%s\n%s\nhost:%s\n", r->path, r->query, r->host);
    if (range && w > 0 && (size_t)w < sizeof creq)
        w += snprintf(creq + w, sizeof creq - (size_t)w, "range:%s\n", range);
    if (w > 0 && (size_t)w < sizeof creq)
        w += snprintf(creq + w, sizeof creq - (size_t)w,
                      "x-amz-content-sha256:%s\nx-amz-date:%s\n", EMPTY_SHA256, stamp);
    if (r->token[0] && w > 0 && (size_t)w < sizeof creq)
        w += snprintf(creq + w, sizeof creq - (size_t)w, "x-amz-security-token:%s\n", r->token);
    const char *signed_headers =
        range ? (r->token[0] ? "host;range;x-amz-content-sha256;x-amz-date;x-amz-security-token"
                             : "host;range;x-amz-content-sha256;x-amz-date")
              : (r->token[0] ? "host;x-amz-content-sha256;x-amz-date;x-amz-security-token"
                             : "host;x-amz-content-sha256;x-amz-date");
    if (w > 0 && (size_t)w < sizeof creq)
        w += snprintf(creq + w, sizeof creq - (size_t)w, "\n%s\n%s", signed_headers,
                      EMPTY_SHA256);
    if (w < 0 || (size_t)w >= sizeof creq)
        return -1;
    uint8_t d[32], k[32];
    char hex[65], sig[65];
    if (!sl__sha256(creq, (size_t)w, d))
        return -2;
    sl__hex(d, 32, hex);
    snprintf(scope, sizeof scope, "%s/%s/s3/aws4_request", date, r->region);
    snprintf(sts, sizeof sts, "AWS4-HMAC-SHA256\n%s\n%s\n%s", stamp, scope, hex);
    char key0[160];
    int kl = snprintf(key0, sizeof key0, "AWS4%s", r->secret);
    if (!hmac((const uint8_t *)key0, (size_t)kl, date, k) || !hmac(k, 32, r->region, k) ||
        !hmac(k, 32, "s3", k) || !hmac(k, 32, "aws4_request", k) || !hmac(k, 32, sts, d))
        return -2;
    sl__hex(d, 32, sig);
    ADD("Host: %s", r->host);
    ADD("x-amz-content-sha256: %s", EMPTY_SHA256);
    ADD("x-amz-date: %s", stamp);
    if (r->token[0])
        ADD("x-amz-security-token: %s", r->token);
    ADD("Authorization: AWS4-HMAC-SHA256 Credential=%s/%s, SignedHeaders=%s, Signature=%s",
        r->akid, scope, signed_headers, sig);
#undef ADD
    return n;
}
