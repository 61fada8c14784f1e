#define _GNU_SOURCE
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include "core/crc32c.h"
#include "graph/node.h"
#include "testutil.h"

sl_options *tu_opts(int threads, int64_t seed)
{
    sl_options *o = sl_options_create();
    assert_non_null(o);
    assert_int_equal(sl_options_set(o, SL_OPT_THREADS, threads), 0);
    assert_int_equal(sl_options_set(o, SL_OPT_SEED, seed), 0);
    assert_int_equal(sl_options_set(o, SL_OPT_EPOCH, 0), 0);
    return o;
}

int tu_collect(sl_dataset *ds, const sl_options *opts, int64_t **out, size_t *n, char *errmsg)
{
    sl_iterator *it = sl_iterator_create(ds, opts);
    if (!it) {
        if (errmsg)
            snprintf(errmsg, 1024, "%s", sl_last_error());
        *out = NULL;
        *n = 0;
        return SL_EINVAL;
    }
    size_t cap = 64, len = 0;
    int64_t *v = malloc(cap * sizeof *v);
    sl_element *el;
    int rc;
    while ((rc = sl_next(it, &el)) == 0) {
        const sl_tensor *t = sl_element_tensor(el, 0);
        assert_non_null(t);
        assert_int_equal(sl_tensor_dtype(t), SL_INT64);
        int64_t cnt = sl_tensor_count(t);
        const int64_t *d = sl_tensor_data(t);
        for (int64_t i = 0; i < cnt; i++) {
            if (len == cap)
                v = realloc(v, (cap *= 2) * sizeof *v);
            v[len++] = d[i];
        }
        sl_element_release(el);
    }
    if (errmsg)
        snprintf(errmsg, 1024, "%s", sl_iterator_errmsg(it));
    sl_iterator_free(it);
    *out = v;
    *n = len;
    return rc;
}

void tu_expect(sl_dataset *ds, const int64_t *expect, size_t n)
{
    sl_options *o = tu_opts(2, 0);
    int64_t *got;
    size_t len;
    char msg[1024];
    int rc = tu_collect(ds, o, &got, &len, msg);
    if (rc != SL_EOF)
        print_error("iteration failed: %d %s\n", rc, msg);
    assert_int_equal(rc, SL_EOF);
    if (len != n)
        print_error("expected %zu values, got %zu\n", n, len);
    assert_int_equal(len, n);
    for (size_t i = 0; i < n; i++) {
        if (got[i] != expect[i])
            print_error("at %zu: expected %lld, got %lld\n", i, (long long)expect[i],
                        (long long)got[i]);
        assert_int_equal(got[i], expect[i]);
    }
    free(got);
    sl_options_free(o);
}

void tu_expect_iota(sl_dataset *ds, int64_t n)
{
    int64_t *want = malloc((size_t)(n ? n : 1) * sizeof *want);
    for (int64_t i = 0; i < n; i++)
        want[i] = i;
    tu_expect(ds, want, (size_t)n);
    free(want);
}

int64_t tu_count(sl_dataset *ds, const sl_options *opts)
{
    sl_iterator *it = sl_iterator_create(ds, opts);
    assert_non_null(it);
    sl_element *el;
    int rc;
    int64_t n = 0;
    while ((rc = sl_next(it, &el)) == 0) {
        n++;
        sl_element_release(el);
    }
    if (rc != SL_EOF)
        print_error("iteration failed: %d %s\n", rc, sl_iterator_errmsg(it));
    assert_int_equal(rc, SL_EOF);
    sl_iterator_free(it);
    return n;
}

/* ---- counting allocator ---- */

static atomic_llong calls, live, fail_at;

static void *tu_alloc(void *user, size_t size, size_t align)
{
    (void)user;
    long long k = atomic_fetch_add(&calls, 1) + 1;
    long long f = atomic_load(&fail_at);
    if (f && k == f)
        return NULL;
    size_t rounded = (size + align - 1) & ~(align - 1);
    void *p = aligned_alloc(align, rounded ? rounded : align);
    if (p)
        atomic_fetch_add(&live, (long long)size);
    return p;
}

static void tu_free(void *user, void *p, size_t size, size_t align)
{
    (void)user, (void)align;
    atomic_fetch_sub(&live, (long long)size);
    free(p);
}

void tu_alloc_install(void)
{
    static const sl_allocator a = {tu_alloc, tu_free, NULL};
    atomic_store(&calls, 0);
    atomic_store(&fail_at, 0);
    int rc = sl_set_allocator(&a);
    if (rc)
        print_error("sl_set_allocator: %s\n", sl_last_error());
    assert_int_equal(rc, 0);
}

void tu_alloc_uninstall(void)
{
    assert_int_equal(sl_set_allocator(NULL), 0);
}

void tu_alloc_fail_at(int64_t k)
{
    atomic_store(&calls, 0);
    atomic_store(&fail_at, k);
}

int64_t tu_alloc_calls(void)
{
    return atomic_load(&calls);
}

int64_t tu_alloc_live_bytes(void)
{
    return atomic_load(&live);
}

/* ---- files ---- */

void tu_tmpdir(char *buf)
{
    const char *base = getenv("TMPDIR");
    snprintf(buf, 256, "%s/sluice-test-XXXXXX", base && *base ? base : "/tmp");
    assert_non_null(mkdtemp(buf));
}

uint32_t tu_crc32_bitwise(uint32_t poly, const void *p, size_t n)
{
    const unsigned char *b = p;
    uint32_t c = 0xffffffffu;
    for (size_t i = 0; i < n; i++) {
        c ^= b[i];
        for (int k = 0; k < 8; k++)
            c = (c >> 1) ^ (poly & (0u - (c & 1)));
    }
    return ~c;
}

void tu_read_file(const char *path, unsigned char **p, size_t *n)
{
    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    assert_int_equal(fseek(f, 0, SEEK_END), 0);
    long len = ftell(f);
    assert_true(len >= 0);
    assert_int_equal(fseek(f, 0, SEEK_SET), 0);
    *n = (size_t)len;
    *p = malloc(*n + 1);
    assert_non_null(*p);
    assert_int_equal(fread(*p, 1, *n, f), *n);
    fclose(f);
}

void tu_write_file(const char *path, const void *p, size_t n)
{
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(p, 1, n, f), n);
    fclose(f);
}

void tu_rmdir(const char *path)
{
    char cmd[512];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", path);
    assert_int_equal(system(cmd), 0);
}

int64_t tu_rss_bytes(void)
{
    FILE *f = fopen("/proc/self/statm", "r");
    long long size = 0, res = 0;
    if (f) {
        if (fscanf(f, "%lld %lld", &size, &res) != 2)
            res = 0;
        fclose(f);
    }
    return res * sysconf(_SC_PAGESIZE);
}

/* ---- a source of prebuilt elements ---- */
typedef struct elems_ds {
    sl_dataset base;
    sl_element **els;
    int n;
    int64_t card;
} elems_ds;

typedef struct elems_iter {
    sl__iter base;
    int pos;
} elems_iter;

static int elems_next(sl__iter *base, sl_element **out)
{
    elems_iter *it = (elems_iter *)base;
    const elems_ds *e = (const elems_ds *)base->ds;
    if (it->pos >= e->n)
        return SL_EOF;
    *out = sl_element_retain(e->els[it->pos++]);
    return 0;
}

static const sl__iter_ops elems_iter_ops = {.next = elems_next}; /* cannot save */

static int elems_make(const sl_dataset *ds, sl__tree *tree, uint64_t key, int64_t epoch,
                      sl__iter **out)
{
    elems_iter *it = sl__iter_alloc(&elems_iter_ops, sizeof *it, ds, tree, key, epoch);
    if (!it)
        return SL_ENOMEM;
    *out = &it->base;
    return 0;
}

static int64_t elems_card(const sl_dataset *ds)
{
    return ((const elems_ds *)ds)->card;
}

static void elems_destroy(sl_dataset *ds)
{
    elems_ds *e = (elems_ds *)ds;
    for (int i = 0; i < e->n; i++)
        sl_element_release(e->els[i]);
    free(e->els);
}

static const sl__node_ops elems_ops = {
    .kind = "elems",
    .make_iter = elems_make,
    .cardinality = elems_card,
    .destroy = elems_destroy,
};

sl_dataset *tu_elements(sl_element **els, int n, int64_t card)
{
    elems_ds *e = (elems_ds *)sl__dataset_new_source(&elems_ops, sizeof *e);
    assert_non_null(e);
    e->els = malloc((size_t)(n ? n : 1) * sizeof *els);
    memcpy(e->els, els, (size_t)n * sizeof *els);
    e->n = n;
    e->card = card < -2 ? n : card;
    return &e->base;
}


/* ---- tensor helpers ---- */

/* Appends a string tensor of the given shape holding strs (row-major). */
void tu_add_strings(sl_element *el, int ndim, const int64_t *shape, const char *const *strs)
{
    assert_int_equal(sl_element_add_strings(el, ndim, shape, strs, NULL), 0);
}

sl_element *tu_el_i64(int64_t v)
{
    sl_element *el = sl_element_create(1);
    assert_int_equal(sl_element_add_int64(el, v), 0);
    return el;
}

sl_element *tu_el_str(const char *s)
{
    sl_element *el = sl_element_create(1);
    assert_int_equal(sl_element_add_string(el, s, strlen(s)), 0);
    return el;
}

void tu_check_string(const sl_tensor *t, int64_t i, const char *want)
{
    size_t len;
    const char *s = sl_tensor_string(t, i, &len);
    assert_non_null(s);
    assert_int_equal(len, strlen(want));
    assert_memory_equal(s, want, len);
}

void tu_check_shape(const sl_tensor *t, int ndim, const int64_t *shape)
{
    assert_int_equal(sl_tensor_ndim(t), ndim);
    for (int i = 0; i < ndim; i++)
        assert_int_equal(sl_tensor_shape(t)[i], shape[i]);
}


/* ---- timing and callbacks ---- */

void tu_sleep_us(long us)
{
    struct timespec ts = {us / 1000000, (us % 1000000) * 1000};
    nanosleep(&ts, NULL);
}

uint64_t tu_mix(uint64_t x)
{
    x += 0x9e3779b97f4a7c15ull;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

uint64_t tu_digest(const sl_element *el)
{
    uint64_t h = 0;
    for (int i = 0; i < sl_element_size(el); i++) {
        const sl_tensor *t = sl_element_tensor(el, i);
        h = h * 1000003u ^ sl__crc32c(0, sl_tensor_data(t), sl_tensor_nbytes(t));
        h = h * 1000003u ^ (uint64_t)sl_tensor_dtype(t);
        for (int d = 0; d < sl_tensor_ndim(t); d++)
            h = h * 1000003u ^ (uint64_t)sl_tensor_shape(t)[d];
    }
    return h;
}

int64_t tu_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

int tu_identity(sl_map_ctx *ctx, const sl_element *in, sl_element **out, void *user)
{
    (void)ctx, (void)user;
    *out = sl_element_retain((sl_element *)in);
    return 0;
}

/* Keeps the CPU busy for *user microseconds. */
int tu_spin(sl_map_ctx *ctx, const sl_element *in, sl_element **out, void *user)
{
    (void)ctx;
    int64_t end = tu_now_ns() + 1000 * *(const int *)user;
    while (tu_now_ns() < end) {
    }
    *out = sl_element_retain((sl_element *)in);
    return 0;
}
