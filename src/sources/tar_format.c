#include <ctype.h>
#include <errno.h>
#include <stdlib.h>
#include <strings.h>
#include <string.h>
#include "../core/alloc.h"
#include "../core/element.h"
#include "../core/error.h"
#include "tar_format.h"

#define MAX_NAME 65536
#define MAX_PAX (1 << 20)

/* An octal field (spaces and NULs around it), or GNU base-256. */
static bool number(const unsigned char *f, size_t n, uint64_t *out)
{
    uint64_t v = 0;
    if (f[0] & 0x80) {
        if (f[0] != 0x80) /* negative, or wider than 64 bits */
            return false;
        for (size_t i = 1; i < n; i++) {
            if (v >> 56)
                return false;
            v = v << 8 | f[i];
        }
        *out = v;
        return true;
    }
    size_t i = 0;
    while (i < n && (f[i] == ' ' || f[i] == 0))
        i++;
    bool any = false;
    for (; i < n && f[i] >= '0' && f[i] <= '7'; i++) {
        if (v >> 61)
            return false;
        v = v << 3 | (uint64_t)(f[i] - '0');
        any = true;
    }
    for (; i < n; i++)
        if (f[i] != ' ' && f[i] != 0)
            return false;
    *out = v;
    return any || n == 0;
}

static bool checksum_ok(const unsigned char *h)
{
    uint64_t want;
    if (!number(h + 148, 8, &want))
        return false;
    /* every byte, the checksum field's 8 counted as spaces; some old tars
     * summed signed chars: each byte from 128 up then counts 256 less */
    uint32_t u = 0, high = 0;
    for (int i = 0; i < SL__TAR_BLOCK; i++) { /* two plain sums: vectorized */
        u += h[i];
        high += h[i] >> 7;
    }
    for (int i = 148; i < 156; i++) {
        u -= h[i];
        high -= h[i] >> 7;
    }
    u += 8 * ' ';
    int64_t s = (int64_t)u - 256 * (int64_t)high;
    return u == want || (uint64_t)s == want;
}

static bool all_zero(const unsigned char *h)
{
    for (int i = 0; i < SL__TAR_BLOCK; i++)
        if (h[i])
            return false;
    return true;
}

static int set_str(sl__bytes *b, const void *p, size_t n)
{
    int rc = sl__bytes_assign(b, p, n);
    return rc ? rc : sl__bytes_append(b, "", 1);
}

static int fault(sl__tar_fault *f, const char *what, uint64_t at)
{
    f->what = what;
    f->at = at;
    return SL__TAR_FAULT;
}

/* A pax extended header's records ("<len> key=value\n", len counting the
 * whole record): path and size. NULL, or what is malformed. */
static const char *parse_pax(char *p, size_t size, sl__bytes *path, int64_t *pax_size, int *rc)
{
    for (size_t i = 0; i < size;) {
        size_t len = 0, k = i;
        while (k < size && p[k] >= '0' && p[k] <= '9' && len <= size)
            len = len * 10 + (size_t)(p[k++] - '0');
        /* digits, a space, "key=value", a newline: all inside the record */
        if (k == i || k >= size || p[k] != ' ' || len < 5 || len > size - i ||
            k + 1 > i + len - 1 || p[i + len - 1] != '\n')
            return "malformed pax record";
        char *kv = p + k + 1, *end = p + i + len - 1; /* [kv, end): key=value */
        char *eq = memchr(kv, '=', (size_t)(end - kv));
        if (eq) {
            size_t klen = (size_t)(eq - kv), vlen = (size_t)(end - (eq + 1));
            if (klen == 4 && !memcmp(kv, "path", 4)) {
                if ((*rc = set_str(path, eq + 1, vlen)) < 0)
                    return NULL;
            } else if (klen == 4 && !memcmp(kv, "size", 4)) {
                char num[32];
                if (vlen == 0 || vlen >= sizeof num)
                    return "malformed pax size";
                memcpy(num, eq + 1, vlen);
                num[vlen] = '\0';
                char *e;
                errno = 0;
                long long v = strtoll(num, &e, 10);
                if (*e || v < 0 || errno || num[0] < '0' || num[0] > '9')
                    return "malformed pax size";
                *pax_size = v;
            }
        }
        i += len;
    }
    return NULL;
}

/* The data of an 'L' or 'x' member (size bytes at `at`), NUL-terminated,
 * into b. */
static int read_data(const sl__reader *r, uint64_t at, uint64_t size, sl__bytes *b,
                     const char *runs_past, uint64_t hdr, sl__tar_fault *f)
{
    b->n = 0;
    int rc = sl__bytes_reserve(b, (size_t)size + 1);
    if (rc < 0)
        return rc;
    int64_t got = r->read(r->ctx, at, b->p, (size_t)size);
    if (got < 0)
        return (int)got;
    if ((uint64_t)got < size)
        return fault(f, runs_past, hdr);
    b->p[size] = '\0';
    b->n = (size_t)size;
    return 0;
}

static void split_key(sl__tar_member *m)
{
    const char *name = (const char *)m->name.p;
    const char *base = strrchr(name, '/');
    base = base ? base + 1 : name;
    const char *dot = base[0] != '.' ? strchr(base, '.') : NULL;
    m->klen = dot && dot[1] ? (size_t)(dot - name) : 0;
    m->ext = m->klen ? m->klen + 1 : 0;
}

/* The name of the member whose header is h: the pax path, the GNU long
 * name, or ustar's prefix/name. */
static int set_name(sl__tar_member *m, const sl__tar_scratch *s, const unsigned char *h)
{
    if (s->pax_path.n)
        return set_str(&m->name, s->pax_path.p, s->pax_path.n - 1);
    if (s->long_name.n)
        return set_str(&m->name, s->long_name.p, s->long_name.n - 1);
    char full[155 + 1 + 100];
    size_t pl = !memcmp(h + 257, "ustar", 5) ? strnlen((const char *)h + 345, 155) : 0;
    size_t nl = strnlen((const char *)h, 100);
    memcpy(full, h + 345, pl);
    if (pl)
        full[pl++] = '/';
    memcpy(full + pl, h, nl);
    return set_str(&m->name, full, pl + nl);
}

int sl__tar_next(const sl__reader *r, uint64_t at, sl__tar_member *m, sl__tar_scratch *s,
                 sl__tar_fault *f)
{
    s->pax_path.n = s->long_name.n = 0;
    int64_t pax_size = -1;
    m->start = at;
    for (;;) {
        unsigned char h[SL__TAR_BLOCK];
        int64_t got = r->read(r->ctx, at, h, SL__TAR_BLOCK);
        if (got < 0)
            return (int)got;
        if (got == 0 || (got == SL__TAR_BLOCK && all_zero(h)))
            return 1; /* the end: zero blocks, or a file without them */
        if (got < SL__TAR_BLOCK)
            return fault(f, "the file ends inside a header", at);
        if (!checksum_ok(h))
            return fault(f, "bad header checksum (not a tar file, or damaged)", at);
        uint64_t size;
        if (!number(h + 124, 12, &size) || size > UINT64_MAX / 4)
            return fault(f, "bad size field in a header", at);
        char type = (char)h[156];
        uint64_t data = at + SL__TAR_BLOCK, next;
        int rc;
        if (type == 'L') { /* GNU: the next member's long name */
            if (size > MAX_NAME)
                return fault(f, "long name too large", at);
            rc = read_data(r, data, size, &s->long_name, "a long name runs past the end", at, f);
            if (rc)
                return rc;
            s->long_name.n = strlen((char *)s->long_name.p) + 1;
        } else if (type == 'x') {
            if (size > MAX_PAX)
                return fault(f, "pax header too large", at);
            sl__bytes pax = {0};
            rc = read_data(r, data, size, &pax, "a pax header runs past the end of the file", at,
                           f);
            const char *why = rc ? NULL : parse_pax((char *)pax.p, (size_t)size, &s->pax_path,
                                                    &pax_size, &rc);
            sl__bytes_free(&pax);
            if (why)
                return fault(f, why, at);
            if (rc)
                return rc;
        } else {
            if (pax_size >= 0)
                size = (uint64_t)pax_size;
            if (type == '0' || type == '\0' || type == '7') {
                if ((rc = set_name(m, s, h)) < 0)
                    return rc;
                m->data = data;
                m->size = size;
                split_key(m);
                return 0;
            }
        }
        /* a long name, a pax record, or not a file (passed over: the
         * member after it names itself afresh) */
        uint64_t skipped = type == 'L' || type == 'x' ? size : 0;
        next = data + size + sl__tar_padding(size);
        if ((rc = r->skip(r->ctx, data + skipped, next - data - skipped)) != 0)
            return rc < 0 ? rc : fault(f, "a member runs past the end of the file", at);
        if (type != 'L' && type != 'x') {
            s->pax_path.n = s->long_name.n = 0;
            pax_size = -1;
            m->start = next;
        }
        at = next;
    }
}

void sl__tar_member_free(sl__tar_member *m)
{
    sl__bytes_free(&m->name);
}

void sl__tar_scratch_free(sl__tar_scratch *s)
{
    sl__bytes_free(&s->pax_path);
    sl__bytes_free(&s->long_name);
}

int sl__tar_index_build(const sl__reader *r, const char *path, sl__record_index *out)
{
    memset(out, 0, sizeof *out);
    sl__tar_member m = {0};
    sl__tar_scratch s = {0};
    sl__bytes key = {0};
    uint64_t at = 0, start = 0, end = 0;
    int rc;
    for (;;) {
        sl__tar_fault f;
        rc = sl__tar_next(r, at, &m, &s, &f);
        if (rc == SL__TAR_FAULT)
            rc = sl__set_error(SL_ECORRUPT, "%s: %s at byte %llu", path, f.what,
                               (unsigned long long)f.at);
        if (rc)
            break;
        at = sl__tar_next_header(&m);
        if ((rc = r->skip(r->ctx, m.data, at - m.data)) != 0) { /* an error, or the end */
            if (rc > 0)
                rc = sl__set_error(SL_ECORRUPT, "%s: a member runs past the end of the file "
                                   "at byte %llu", path, (unsigned long long)m.start);
            break;
        }
        if (m.klen == 0)
            continue; /* inside the sample, or between two */
        if (key.n && (key.n != m.klen || memcmp(key.p, m.name.p, m.klen))) {
            if (end - start > UINT32_MAX) {
                rc = sl__set_error(SL_ECORRUPT, "%s: the sample at byte %llu is over 4 GiB",
                                   path, (unsigned long long)start);
                break;
            }
            if ((rc = sl__record_index_push(out, start, (uint32_t)(end - start))) != 0)
                break;
            key.n = 0;
        }
        if (!key.n) {
            if ((rc = sl__bytes_assign(&key, m.name.p, m.klen)) != 0)
                break;
            start = m.start;
        }
        end = at;
    }
    if (rc == 1) {
        rc = 0;
        if (key.n && end - start > UINT32_MAX)
            rc = sl__set_error(SL_ECORRUPT, "%s: the sample at byte %llu is over 4 GiB", path,
                               (unsigned long long)start);
        else if (key.n)
            rc = sl__record_index_push(out, start, (uint32_t)(end - start));
    }
    sl__bytes_free(&key);
    sl__tar_member_free(&m);
    sl__tar_scratch_free(&s);
    if (rc)
        sl__record_index_free(out);
    return rc;
}

int sl__tar_push_value(sl_element *el, int type, unsigned char *data, uint64_t size,
                       sl__buf *buf)
{
    if (type == SL_INT64) {
        const char *text = (const char *)data;
        char num[32];
        size_t n = (size_t)size, s0 = 0;
        while (n && isspace((unsigned char)text[n - 1]))
            n--;
        while (s0 < n && isspace((unsigned char)text[s0]))
            s0++;
        char *end = num;
        long long x = 0;
        if (n - s0 > 0 && n - s0 < sizeof num) {
            memcpy(num, text + s0, n - s0);
            num[n - s0] = '\0';
            errno = 0;
            x = strtoll(num, &end, 10);
        }
        if (end == num || *end || errno)
            return 1;
        return sl_element_add_int64(el, (int64_t)x);
    }
    if (type == SL_STRING) {
        uint64_t off[2] = {0, size};
        memcpy(data - 16, off, 16);
        return sl__element_push_view(el, SL_STRING, 0, NULL, data - 16, 16 + (size_t)size, buf)
                   ? 0 : SL_ENOMEM;
    }
    int64_t shape[1] = {(int64_t)size};
    return sl__element_push_view(el, SL_UINT8, 1, shape, data, (size_t)size, buf) ? 0 : SL_ENOMEM;
}

int sl__tar_key_slot(char *const *keys, int nkeys, const char *ext)
{
    size_t elen = strlen(ext);
    for (int i = 0; i < nkeys; i++) {
        const char *k = keys[i];
        while (*k) {
            const char *e = strchr(k, ';');
            size_t n = e ? (size_t)(e - k) : strlen(k);
            if (n == elen && strncasecmp(k, ext, n) == 0)
                return i;
            k += n + (e != NULL);
        }
    }
    return -1;
}
