/* Request signing and URL resolution for remote reads (src/remote): the
 * hashes (libcrypto's, as sluice calls them) against FIPS 180-4 and
 * RFC 4231 vectors, Signature V4 against the worked example of Amazon's S3
 * documentation (GET Object with a Range), and how s3:// and gs:// URLs
 * become requests. Built in every configuration; without libcurl there is
 * no libcrypto, and the hashes and signing are checked to refuse. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "remote/cache.h"
#include "remote/remote.h"
#include "remote/crypto.h"
#include "testutil.h"

/* Without libcurl a build has no libcrypto: there the hashes and signing
 * refuse (test_no_crypto), and the tests of what they compute skip. */
#ifdef SLUICE_NO_CURL
enum { HAVE_CRYPTO = 0 };
#else
enum { HAVE_CRYPTO = 1 };
#endif

static void hex_of(const void *p, size_t n, char *out)
{
    uint8_t d[32];
    assert_true(sl__sha256(p, n, d));
    sl__hex(d, 32, out);
}

static void test_sha256_vectors(void **state)
{
    (void)state;
    if (!HAVE_CRYPTO)
        skip();
    char h[65];
    hex_of("", 0, h);
    assert_string_equal(h, "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
    hex_of("abc", 3, h);
    assert_string_equal(h, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
    const char *two = "abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq";
    hex_of(two, strlen(two), h);
    assert_string_equal(h, "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
    /* a million 'a' */
    char *a = malloc(1000000);
    assert_non_null(a);
    memset(a, 'a', 1000000);
    hex_of(a, 1000000, h);
    free(a);
    assert_string_equal(h, "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
}

static void test_hmac_vectors(void **state)
{
    (void)state;
    if (!HAVE_CRYPTO)
        skip();
    uint8_t d[32];
    char h[65];
    const char *msg = "what do ya want for nothing?";
    assert_true(sl__hmac_sha256("Jefe", 4, msg, strlen(msg), d)); /* RFC 4231, case 2 */
    sl__hex(d, 32, h);
    assert_string_equal(h, "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843");
    uint8_t key[131];
    memset(key, 0xaa, sizeof key); /* case 6: a key longer than a block */
    const char *m6 = "Test Using Larger Than Block-Size Key - Hash Key First";
    assert_true(sl__hmac_sha256(key, sizeof key, m6, strlen(m6), d));
    sl__hex(d, 32, h);
    assert_string_equal(h, "60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f0ee37f54");
    /* the output over the key, as Signature V4 chains them (case 2 again) */
    memcpy(key, "Jefe", 4);
    assert_true(sl__hmac_sha256(key, 4, msg, strlen(msg), key));
    sl__hex(key, 32, h);
    assert_string_equal(h, "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843");
}

static const char *find(const char **lines, int n, const char *name)
{
    for (int i = 0; i < n; i++)
        if (!strncmp(lines[i], name, strlen(name)))
            return lines[i] + strlen(name);
    return NULL;
}

static void test_sigv4_example(void **state)
{
    (void)state;
    if (!HAVE_CRYPTO)
        skip();
    /* Amazon's example: GET /test.txt from examplebucket, Range bytes=0-9,
     * 2013-05-24T00:00:00Z, us-east-1 */
    sl__remote r = {.kind = SL__REMOTE_S3};
    strcpy(r.host, "examplebucket.s3.amazonaws.com");
    strcpy(r.path, "/test.txt");
    strcpy(r.akid, "AKIAIOSFODNN7EXAMPLE");
    strcpy(r.secret, "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY");
    strcpy(r.region, "us-east-1");
    char buf[4096];
    const char *lines[8];
    int n = sl__remote_headers(&r, "bytes=0-9", 1369353600, buf, sizeof buf, lines);
    assert_int_equal(n, 5);
    assert_string_equal(find(lines, n, "Range: "), "bytes=0-9");
    assert_string_equal(find(lines, n, "x-amz-date: "), "20130524T000000Z");
    assert_string_equal(find(lines, n, "Authorization: "),
                        "AWS4-HMAC-SHA256 Credential=AKIAIOSFODNN7EXAMPLE/20130524/us-east-1/"
                        "s3/aws4_request, SignedHeaders=host;range;x-amz-content-sha256;"
                        "x-amz-date, Signature=f0e8bdb87c964420e857bd35b5d6ed310bd44f0170aba4"
                        "8dd91039c6036bdb41");
    /* too small a buffer: refused, not cut */
    assert_int_equal(sl__remote_headers(&r, "bytes=0-9", 1369353600, buf, 100, lines), -1);
}

static void test_no_crypto(void **state)
{
    (void)state;
    if (HAVE_CRYPTO)
        skip();
    uint8_t d[32];
    assert_false(sl__sha256("abc", 3, d));
    assert_false(sl__hmac_sha256("Jefe", 4, "x", 1, d));
    /* a request that must be signed is refused, never sent unsigned */
    sl__remote r = {.kind = SL__REMOTE_S3};
    strcpy(r.host, "examplebucket.s3.amazonaws.com");
    strcpy(r.path, "/test.txt");
    strcpy(r.akid, "AKIAIOSFODNN7EXAMPLE");
    strcpy(r.secret, "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY");
    strcpy(r.region, "us-east-1");
    char buf[4096];
    const char *lines[8];
    assert_int_equal(sl__remote_headers(&r, "bytes=0-9", 1369353600, buf, sizeof buf, lines), -2);
    char key[65], shown[1024];
    assert_false(sl__rcache_key("s3://b/k", key, shown, sizeof shown));
}

static void clear_env(void)
{
    const char *vars[] = {"AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN",
                          "AWS_REGION", "AWS_DEFAULT_REGION", "AWS_PROFILE", "AWS_ENDPOINT_URL",
                          "AWS_ENDPOINT_URL_S3", "GCS_HMAC_KEY_ID", "GCS_HMAC_SECRET",
                          "GOOGLE_OAUTH_ACCESS_TOKEN", "GCS_ENDPOINT_URL"};
    for (size_t i = 0; i < sizeof vars / sizeof *vars; i++)
        unsetenv(vars[i]);
    setenv("AWS_SHARED_CREDENTIALS_FILE", "/nonexistent/credentials", 1);
    setenv("AWS_CONFIG_FILE", "/nonexistent/config", 1);
}

static void test_resolve(void **state)
{
    (void)state;
    clear_env();
    sl__remote r;
    /* virtual-hosted AWS, the key encoded once, '/' kept */
    setenv("AWS_REGION", "eu-west-3", 1);
    assert_int_equal(sl__remote_resolve("s3://my-bucket/a dir/x+y.tar", NULL, &r), 0);
    assert_string_equal(r.url, "https://my-bucket.s3.eu-west-3.amazonaws.com/a%20dir/x%2By.tar");
    assert_string_equal(r.path, "/a%20dir/x%2By.tar");
    assert_string_equal(r.shown, "s3://my-bucket/a dir/x+y.tar");
    assert_string_equal(r.akid, ""); /* no keys anywhere: unsigned */
    char buf[4096];
    const char *lines[8];
    assert_int_equal(sl__remote_headers(&r, NULL, 0, buf, sizeof buf, lines), 0);
    /* a custom endpoint: path-style; a listing's query sorted and encoded */
    setenv("AWS_ENDPOINT_URL", "http://127.0.0.1:9000/base/", 1);
    setenv("AWS_ACCESS_KEY_ID", "AK", 1);
    setenv("AWS_SECRET_ACCESS_KEY", "SK", 1);
    assert_int_equal(sl__remote_resolve("s3://b/", "prefix=train/x&list-type=2", &r), 0);
    assert_string_equal(r.url, "http://127.0.0.1:9000/base/b/?list-type=2&prefix=train%2Fx");
    assert_string_equal(r.host, "127.0.0.1:9000");
    assert_string_equal(r.akid, "AK");
    int n = sl__remote_headers(&r, NULL, 0, buf, sizeof buf, lines);
    if (HAVE_CRYPTO) {
        assert_int_equal(n, 4);
        assert_non_null(strstr(find(lines, n, "Authorization: "), "SignedHeaders=host;x-amz-"));
    } else {
        assert_int_equal(n, -2);
    }
    /* gs:// through the XML API, a bearer token */
    clear_env();
    setenv("GOOGLE_OAUTH_ACCESS_TOKEN", "ya29.tok", 1);
    assert_int_equal(sl__remote_resolve("gs://data/shard-0.tar", NULL, &r), 0);
    assert_string_equal(r.url, "https://storage.googleapis.com/data/shard-0.tar");
    n = sl__remote_headers(&r, "bytes=0-1", 0, buf, sizeof buf, lines);
    assert_int_equal(n, 2);
    assert_string_equal(find(lines, n, "Authorization: "), "Bearer ya29.tok");
    /* http: user information and query never shown */
    assert_int_equal(sl__remote_resolve("https://u:pw@h.example:8443/p/q.tar?sig=1", NULL, &r),
                     0);
    assert_string_equal(r.shown, "https://h.example:8443/p/q.tar?...");
    assert_string_equal(r.url, "https://u:pw@h.example:8443/p/q.tar?sig=1");
    /* bad ones */
    assert_int_equal(sl__remote_resolve("s3:///key", NULL, &r), SL_EINVAL);
    assert_non_null(strstr(sl_last_error(), "no bucket"));
    assert_int_equal(sl__remote_resolve("s3://Bad_Bucket!/k", NULL, &r), SL_EINVAL);
    assert_int_equal(sl__remote_resolve("http:///x", NULL, &r), SL_EINVAL);
    assert_true(sl__is_url("gs://a/b") && sl__is_url("https://x") && !sl__is_url("/data/x"));
    assert_false(sl__is_url("s3:/x") || sl__is_url("file:///x"));
}

static void test_url_in_a_pipeline(void **state)
{
    (void)state;
    /* a URL where a shard path goes: without libcurl a clear refusal naming
     * the option; with it, a bad URL is an error naming the URL */
    const char *p = "s3:///no-bucket.tfrecord";
    sl_dataset *ds = sl_tfrecord(sl_from_files(&p, NULL, 1), SL_COMPRESSION_NONE, 0);
    assert_non_null(ds);
    sl_options *o = tu_opts(1, 0);
    int64_t *out = NULL;
    size_t n = 0;
    char msg[1024];
    int rc = tu_collect(ds, o, &out, &n, msg);
    free(out);
#ifdef SLUICE_NO_CURL
    assert_int_equal(rc, SL_EUNSUPPORTED);
    assert_non_null(strstr(msg, "SLUICE_WITH_CURL=OFF"));
#else
    assert_int_equal(rc, SL_EINVAL);
    assert_non_null(strstr(msg, "s3:///no-bucket.tfrecord"));
#endif
    sl_options_free(o);
    sl_dataset_release(ds);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_sha256_vectors),
        cmocka_unit_test(test_hmac_vectors),
        cmocka_unit_test(test_sigv4_example),
        cmocka_unit_test(test_no_crypto),
        cmocka_unit_test(test_resolve),
        cmocka_unit_test(test_url_in_a_pipeline),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
