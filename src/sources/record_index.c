#include <errno.h>
#include <stdbool.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "../core/crc32c.h"
#include "../core/error.h"
#include "../core/fileio.h"
#include "../core/le.h"
#include "../core/log.h"
#include "../remote/cache.h"
#include "../remote/remote.h"
#include "../runtime/io.h"
#include "record_index.h"

#define TFRECORD_FRAMING 16 /* u64 length, u32 its CRC, ..., u32 the data's CRC */

int sl__record_index_push(sl__record_index *x, uint64_t offset, uint32_t size)
{
    if (sl__bytes_append(&x->offsets, &offset, sizeof offset) ||
        sl__bytes_append(&x->sizes, &size, sizeof size))
        return sl__set_error(SL_ENOMEM, "record index: out of memory");
    x->count++;
    return 0;
}

void sl__record_index_free(sl__record_index *x)
{
    sl__bytes_free(&x->offsets);
    sl__bytes_free(&x->sizes);
    x->count = 0;
}

/* A decimal number at *p (digits only, no sign, below 2^63). */
static bool number(const char **p, const char *end, uint64_t *v)
{
    const char *s = *p;
    uint64_t x = 0;
    while (s < end && *s >= '0' && *s <= '9') {
        if (x > (UINT64_C(1) << 62) / 5)
            return false;
        x = x * 10 + (uint64_t)(*s - '0');
        s++;
    }
    if (s == *p)
        return false;
    *p = s;
    *v = x;
    return true;
}

int sl__record_index_parse(const char *text, size_t len, uint64_t shard_size, uint32_t min_size,
                           unsigned flags, const char *name, sl__record_index *out)
{
    memset(out, 0, sizeof *out);
    const char *p = len ? text : "", *end = p + len; /* an empty file's text may be NULL */
    uint64_t next = 0; /* where the next record may start */
    int64_t line = 0;
    int rc = 0;
    while (p < end && rc == 0) {
        line++;
        uint64_t offset, size;
        const char *why = NULL;
        if (!number(&p, end, &offset))
            why = "expected \"offset size\"";
        else {
            const char *gap = p;
            while (p < end && (*p == ' ' || *p == '\t'))
                p++;
            if (p == gap || !number(&p, end, &size))
                why = "expected \"offset size\"";
            else {
                while (p < end && (*p == ' ' || *p == '\t' || *p == '\r'))
                    p++;
                if (p < end && *p != '\n')
                    why = "unexpected text after \"offset size\"";
                else if (p < end)
                    p++;
            }
        }
        if (!why && offset < next)
            why = "the record overlaps the one before (offsets must increase)";
        else if (!why && (size < min_size || size > UINT32_MAX))
            why = "a record size out of range";
        else if (!why && (offset > shard_size || size > shard_size - offset))
            why = "the record runs past the end of the shard";
        if (why) {
            rc = sl__set_error(SL_ECORRUPT, "%s: line %lld: %s", name, (long long)line, why);
            break;
        }
        rc = sl__record_index_push(out, offset, (uint32_t)size);
        next = offset + size;
    }
    if (rc == 0 && shard_size != UINT64_MAX &&
        ((flags & SL__INDEX_TO_END) ? next != shard_size : next > shard_size))
        rc = sl__set_error(SL_ECORRUPT, "%s: its records end at byte %llu, the shard has %llu "
                           "(an index of another file, or of an older version of it)",
                           name, (unsigned long long)next, (unsigned long long)shard_size);
    if (rc)
        sl__record_index_free(out);
    return rc;
}

static int64_t pread_read(void *ctx, uint64_t at, void *dst, size_t n)
{
    const sl__pread_ctx *c = ctx;
    ssize_t got = sl__pread_full(c->fd, dst, n, at);
    if (got < 0)
        return sl__set_error(SL_EIO, "%s: read at byte %llu: %s", c->path,
                             (unsigned long long)at, strerror(errno));
    return got;
}

static int pread_skip(void *ctx, uint64_t at, uint64_t n)
{
    const sl__pread_ctx *c = ctx;
    return at > c->size || n > c->size - at;
}

sl__reader sl__pread_reader(sl__pread_ctx *ctx)
{
    return (sl__reader){pread_read, pread_skip, ctx};
}

static int64_t stream_read(void *ctx, uint64_t at, void *dst, size_t n)
{
    sl__stream *st = ctx;
    uint64_t now = sl__stream_offset(st), skipped;
    size_t got;
    int rc = at > now ? sl__stream_skip(st, at - now, &skipped) : 0;
    if (rc == 0 && at > now && skipped < at - now)
        return 0;
    rc = rc ? rc : sl__stream_read(st, dst, n, &got);
    return rc < 0 ? rc : (int64_t)got;
}

static int stream_skip(void *ctx, uint64_t at, uint64_t n)
{
    sl__stream *st = ctx;
    uint64_t now = sl__stream_offset(st), skipped;
    n += at - now;
    int rc = sl__stream_skip(st, n, &skipped);
    return rc < 0 ? rc : skipped < n;
}

sl__reader sl__stream_reader(sl__stream *s)
{
    return (sl__reader){stream_read, stream_skip, s};
}

int sl__tfrecord_index_build(const sl__reader *r, const char *path, sl__record_index *out)
{
    memset(out, 0, sizeof *out);
    uint64_t at = 0;
    int rc = 0;
    for (;;) {
        unsigned char hdr[12];
        int64_t got = r->read(r->ctx, at, hdr, sizeof hdr);
        if (got <= 0) {
            rc = (int)got;
            break;
        }
        uint64_t len = sl__get_le64(hdr);
        const char *why = NULL;
        if ((size_t)got < sizeof hdr)
            why = "the file ends inside a record's header";
        else if (sl__crc32c_mask(sl__crc32c(0, hdr, 8)) != sl__get_le32(hdr + 8))
            why = "bad length CRC (not a TFRecord file, or a compressed one: random access "
                  "needs an uncompressed shard)";
        else if (len > UINT32_MAX - TFRECORD_FRAMING ||
                 (rc = r->skip(r->ctx, at + sizeof hdr, len + 4)) > 0)
            why = "a record runs past the end of the file";
        if (rc < 0)
            break;
        if (why) {
            rc = sl__set_error(SL_ECORRUPT, "%s: %s at byte %llu", path, why,
                               (unsigned long long)at);
            break;
        }
        if ((rc = sl__record_index_push(out, at, (uint32_t)(len + TFRECORD_FRAMING))) != 0)
            break;
        at += len + TFRECORD_FRAMING;
    }
    if (rc)
        sl__record_index_free(out);
    return rc;
}

static int read_text(const char *path, sl__bytes *out)
{
    sl__stream_opts o = {.backend = SL_IO_AUTO, .compression = SL_COMPRESSION_NONE};
    sl__stream *st;
    int rc = sl__stream_open(path, &o, &st);
    if (rc < 0)
        return rc;
    size_t got = 65536;
    while (rc == 0 && got == 65536 && (rc = sl__bytes_reserve(out, 65536)) == 0) {
        rc = sl__stream_read(st, out->p + out->n, 65536, &got);
        out->n += rc == 0 ? got : 0;
    }
    sl__stream_close(st);
    return rc;
}

/* The index text at `name` parsed: 0, or a code with the message set. */
static int load_text(const char *name, uint64_t size, const sl__index_format *f,
                     sl__record_index *out)
{
    sl__bytes text = {0};
    int rc = read_text(name, &text);
    if (rc == 0)
        rc = sl__record_index_parse((const char *)text.p, text.n, size, f->min_size, f->flags,
                                    name, out);
    sl__bytes_free(&text);
    return rc;
}

static bool newer(const struct stat *a, const struct stat *b)
{
    return a->st_mtim.tv_sec > b->st_mtim.tv_sec ||
           (a->st_mtim.tv_sec == b->st_mtim.tv_sec && a->st_mtim.tv_nsec >= b->st_mtim.tv_nsec);
}

/* ---- indexes of URL shards kept on local disk ---- */

/* The folder for them: SLUICE_INDEX_CACHE ("" or "off": none), else
 * $XDG_CACHE_HOME/sluice/indexes, else ~/.cache/sluice/indexes. */
static bool index_cache_dir(char *dir, size_t cap)
{
    const char *env = getenv("SLUICE_INDEX_CACHE");
    if (env)
        return *env && strcmp(env, "off") != 0 && (size_t)snprintf(dir, cap, "%s", env) < cap;
    const char *xdg = getenv("XDG_CACHE_HOME"), *home = getenv("HOME");
    int n = xdg && *xdg ? snprintf(dir, cap, "%s/sluice/indexes", xdg)
            : home && *home ? snprintf(dir, cap, "%s/.cache/sluice/indexes", home) : -1;
    return n > 0 && (size_t)n < cap;
}

static void mkdirs(char *path)
{
    for (char *p = path + 1; *p; p++)
        if (*p == '/') {
            *p = '\0';
            mkdir(path, 0755);
            *p = '/';
        }
    mkdir(path, 0755);
}

/* What a URL is now: its size and validator, from a one-byte ranged GET.
 * false when it cannot be told (then nothing cached is trusted). */
static bool probe(const char *url, uint64_t *size, char *validator, size_t cap)
{
    static const sl__http_opts o = {3, 30, 30};
    sl__io *io;
    if (sl__http_open(1, &o, &io) < 0)
        return false;
    unsigned char b;
    sl__io_cqe c;
    int obj = sl__http_add(io, url);
    bool ok = obj >= 0 && sl__io_prep(io, obj, &b, 1, 0, NULL) == 0 && sl__io_submit(io) == 0 &&
              sl__io_reap(io, &c, 1, true) == 1 && c.code == 0;
    if (ok) {
        *size = sl__http_size(io, obj);
        ok = *size != SL__HTTP_UNKNOWN && (size_t)snprintf(validator, cap, "%s",
                                                          sl__http_validator(io, obj)) < cap;
        ok = ok && validator[0];
    }
    if (obj >= 0)
        sl__http_drop(io, obj);
    sl__io_close(io);
    return ok;
}

/* The cached index of url, when one was made from the object as it is now
 * (its size and validator, asked for only when there is one): 0 with *out,
 * else nonzero. */
static int cached_index(const char *dir, const char *key, const char *url,
                        const sl__index_format *f, sl__record_index *out)
{
    char path[1200], line[1200], now[512];
    snprintf(path, sizeof path, "%s/%s.idx.meta", dir, key);
    FILE *m = fopen(path, "r");
    if (!m)
        return 1;
    unsigned long long was = 0;
    int at = 0;
    bool read = fgets(line, sizeof line, m) != NULL;
    fclose(m);
    size_t n = read ? strlen(line) : 0;
    if (n && line[n - 1] == '\n')
        line[--n] = '\0';
    uint64_t size;
    if (!n || sscanf(line, "%llu %n", &was, &at) != 1 || at == 0 ||
        !probe(url, &size, now, sizeof now) || size != was || strcmp(line + at, now) != 0)
        return 1;
    snprintf(path, sizeof path, "%s/%s.idx", dir, key);
    return load_text(path, size, f, out);
}

/* Keeps idx of the object (size, validator) under dir, atomically. */
static void cache_index(const char *dir, const char *key, uint64_t size, const char *validator,
                        const sl__record_index *idx)
{
    char path[1200], tmp[1300];
    char d[1024];
    snprintf(d, sizeof d, "%s", dir);
    mkdirs(d);
    snprintf(path, sizeof path, "%s/%s.idx", dir, key);
    if (sl__record_index_write(idx, path) != 0)
        return;
    snprintf(path, sizeof path, "%s/%s.idx.meta", dir, key);
    snprintf(tmp, sizeof tmp, "%s.%d.tmp", path, (int)getpid());
    FILE *m = fopen(tmp, "w");
    if (!m)
        return;
    bool ok = fprintf(m, "%llu %s\n", (unsigned long long)size, validator) > 0;
    if (fclose(m) == 0 && ok)
        rename(tmp, path);
    else
        unlink(tmp);
}

/* A URL's index: given, or beside it ("<url>.idx"), else built by
 * streaming the shard once. An index fetched is not checked against the
 * object's size (that would cost a request per shard): each ranged read
 * checks its record. */
static int load_remote(const char *url, const char *given, const sl__index_format *f,
                       sl__record_index *out)
{
    char beside[4096 + 8];
    int rc = SL_ENOENT;
    if (given || strlen(url) < 4096) {
        snprintf(beside, sizeof beside, "%s.idx", url);
        rc = load_text(given ? given : beside, UINT64_MAX, f, out);
        if (rc == 0 || given)
            return rc;
        if (rc != SL_ENOENT)
            sl__log(SL_LOG_WARN, "%s: %s; indexing the shard again", f->who, sl_last_error());
    }
    /* one kept on local disk, made from the object as it is now */
    char dir[1024], key[65], shown[1024];
    bool cache = index_cache_dir(dir, sizeof dir) && sl__rcache_key(url, key, shown, sizeof shown);
    if (cache && cached_index(dir, key, url, f, out) == 0)
        return 0;
    sl__stream_opts o = {.backend = SL_IO_AUTO, .compression = SL_COMPRESSION_NONE};
    sl__stream *st;
    if ((rc = sl__stream_open(url, &o, &st)) < 0)
        return rc;
    sl__reader r = sl__stream_reader(st);
    rc = f->build(&r, sl__stream_path(st), out);
    if (rc == 0)
        sl__log(SL_LOG_INFO, "%s: indexed %s in one pass (%lld records); an index beside it "
                "(%s.idx) would spare that", f->who, sl__stream_path(st),
                (long long)out->count, sl__stream_path(st));
    if (rc == 0 && cache && sl__stream_validator(st)[0])
        cache_index(dir, key, sl__stream_size(st), sl__stream_validator(st), out);
    sl__stream_close(st);
    return rc;
}

int sl__record_index_load(const char *path, const char *given, const sl__index_format *f,
                          sl__record_index *out)
{
    if (sl__is_url(path))
        return load_remote(path, given, f, out);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    struct stat st, ist;
    if (fd < 0 || fstat(fd, &st) != 0) {
        int rc = sl__set_error(SL_EIO, "%s: %s", path, strerror(errno));
        if (fd >= 0)
            close(fd);
        return rc;
    }
    char beside[4096];
    snprintf(beside, sizeof beside, "%s.idx", path);
    bool current = !given && stat(beside, &ist) == 0 && newer(&ist, &st);
    int rc;
    if (given || current) {
        rc = load_text(given ? given : beside, (uint64_t)st.st_size, f, out);
        if (rc == 0 || given) {
            close(fd);
            return rc;
        }
        /* a stale or damaged index of our own making: build it again */
        sl__log(SL_LOG_WARN, "%s: %s; indexing %s again", f->who, sl_last_error(), path);
    }
    sl__pread_ctx ctx = {fd, (uint64_t)st.st_size, path};
    sl__reader r = sl__pread_reader(&ctx);
    rc = f->build(&r, path, out);
    close(fd);
    if (rc == 0 && sl__record_index_write(out, beside) != 0)
        sl__log(SL_LOG_INFO, "%s: keeping the index of %s in memory (%s)", f->who, path,
                sl_last_error());
    return rc;
}

int sl__record_index_write(const sl__record_index *x, const char *path)
{
    char tmp[4096];
    if (snprintf(tmp, sizeof tmp, "%s.%d.tmp", path, (int)getpid()) >= (int)sizeof tmp)
        return sl__set_error(SL_EINVAL, "%s: path too long", path);
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0)
        return sl__set_error(SL_EIO, "%s: %s", tmp, strerror(errno));
    char line[48];
    sl__bytes text = {0};
    int rc = 0;
    for (int64_t i = 0; i < x->count && rc == 0; i++) {
        int n = snprintf(line, sizeof line, "%llu %u\n",
                         (unsigned long long)sl__record_offset(x, i), sl__record_size(x, i));
        rc = sl__bytes_append(&text, line, (size_t)n) ? SL_ENOMEM : 0;
    }
    if (rc == 0 && sl__write_all(fd, text.p, text.n) != 0)
        rc = sl__set_error(SL_EIO, "%s: %s", tmp, strerror(errno));
    sl__bytes_free(&text);
    if (close(fd) != 0 && rc == 0)
        rc = sl__set_error(SL_EIO, "%s: %s", tmp, strerror(errno));
    if (rc == 0 && rename(tmp, path) != 0)
        rc = sl__set_error(SL_EIO, "%s: %s", path, strerror(errno));
    if (rc)
        unlink(tmp);
    return rc;
}
