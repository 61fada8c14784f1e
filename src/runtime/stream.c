/*
 * Sequential file streams (stream.h). Chunks form a ring: the reader is in
 * chunk `head`, the `queued` chunks from there cover consecutive offsets
 * and each has its read in flight or done. Consuming a chunk frees its
 * buffer for the next offset, so `ahead` reads stay in flight while the
 * reader works. A compressed file is inflated straight out of the chunk
 * buffers into the reader's destination: no copy of the compressed bytes.
 *
 * Chunks are small (128 KiB), so that the reader copies a chunk out while
 * its bytes are still in the CPU's cache from the read into it; a 1 MiB
 * chunk had left the cache by then. The kernel is asked to bring the file
 * into the page cache further ahead (WILLNEED, 4 MiB past the reads, a
 * MiB at a time), so a file not in memory still streams in large reads.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#ifndef SLUICE_NO_ZLIB
#include <zlib.h>
#endif
#include "../core/alloc.h"
#include "../core/crc32c.h"
#include "../core/error.h"
#include "../remote/cache.h"
#include "../remote/remote.h"
#include "io.h"
#include "stream.h"

#define DEFAULT_CHUNK ((size_t)128 << 10)
#define DEFAULT_AHEAD 4
#define REMOTE_CHUNK ((size_t)1 << 20)
#define REMOTE_AHEAD 8
#define ADVISE_AHEAD ((uint64_t)4 << 20)
#define ADVISE_STEP ((uint64_t)1 << 20)
#define SKIP_BUF 65536

typedef struct chunk {
    unsigned char *buf;
    uint64_t off; /* file offset of buf[0] */
    size_t want;  /* bytes asked for */
    size_t got;   /* bytes arrived */
} chunk;

struct sl__stream {
    char *path;
    int fd;            /* remote: the engine's object */
    bool remote;
    uint64_t size;     /* the file's, at open (remote: SL__HTTP_UNKNOWN until told) */
    sl__io *io;
    sl__io_cqe *cqes;
    chunk *c;
    int n;             /* chunks in the ring */
    size_t csize;
    int head, queued;
    size_t pos;        /* reader's position in c[head] */
    uint64_t next_off; /* file offset of the next chunk to ask for */
    uint64_t advised;  /* the page cache has been asked for the file up to here */
    int64_t file_bytes;
    uint64_t off;      /* offset of the next byte handed out (uncompressed) */
    /* compressed */
    bool zon, zend;
    int zbits;         /* inflateInit2's windowBits */
#ifndef SLUICE_NO_ZLIB
    z_stream z;
#endif
    unsigned char *skip; /* scratch for skipping compressed bytes */
    sl__rcache_writer *tee; /* filling the local cache's copy of a URL */
};

static int fail(const sl__stream *s, int code, const char *what, uint64_t at)
{
    return sl__set_error(code, "%s: %s at byte %llu%s", s->path, what, (unsigned long long)at,
                         s->zon ? " of the uncompressed stream" : "");
}

/* Asks the kernel to read the file into the page cache up to ADVISE_AHEAD
 * past the chunks asked for (a hint: its failure changes nothing). */
static void advise(sl__stream *s)
{
    if (s->remote)
        return;
    if (s->advised < s->next_off)
        s->advised = s->next_off;
    while (s->advised < s->size && s->advised < s->next_off + ADVISE_AHEAD) {
        uint64_t n = s->size - s->advised < ADVISE_STEP ? s->size - s->advised : ADVISE_STEP;
        (void)posix_fadvise(s->fd, (off_t)s->advised, (off_t)n, POSIX_FADV_WILLNEED);
        s->advised += n;
    }
}

/* Asks for the chunks the ring has room for, then for the page cache
 * past them (after, so that a cold file's chunks are read first). */
static int request(sl__stream *s)
{
    bool any = false;
    /* a remote object of unknown size: its first chunk alone */
    int room = s->size == SL__HTTP_UNKNOWN ? 1 : s->n;
    while (s->queued < room && s->next_off < s->size) {
        chunk *c = &s->c[(s->head + s->queued) % s->n];
        c->off = s->next_off;
        c->want = s->size - s->next_off < s->csize ? (size_t)(s->size - s->next_off) : s->csize;
        c->got = 0;
        int rc = sl__io_prep(s->io, s->fd, c->buf, c->want, c->off, c);
        if (rc < 0)
            return rc;
        s->next_off += c->want;
        s->queued++;
        any = true;
    }
    int rc = any ? sl__io_submit(s->io) : 0;
    advise(s);
    return rc;
}

/* Waits for at least one read and files what arrived. */
static int reap(sl__stream *s)
{
    int k = sl__io_reap(s->io, s->cqes, s->n, true);
    if (k < 0)
        return k;
    bool resubmit = false;
    for (int i = 0; i < k; i++) {
        chunk *c = s->cqes[i].user;
        int64_t res = s->cqes[i].res;
        if (s->cqes[i].code)
            return sl__set_error(s->cqes[i].code, "%s", s->cqes[i].msg);
        if (s->remote) { /* whole, or cut by the object's end */
            c->got += (size_t)res;
            s->file_bytes += res;
            s->size = sl__http_size(s->io, s->fd);
            if (s->size == SL__HTTP_UNKNOWN) /* no size said: it ends here */
                s->size = c->off + c->got;
            if (c->got < c->want) {
                c->want = c->got;
                s->next_off = c->off + c->got;
            }
            continue;
        }
        if (res == -EINTR || res == -EAGAIN) {
            res = 0;
        } else if (res < 0) {
            return sl__set_error(SL_EIO, "%s: read failed at byte %llu: %s", s->path,
                                 (unsigned long long)(c->off + c->got), strerror((int)-res));
        } else if (res == 0) {
            return sl__set_error(SL_EIO, "%s: the file shrank while being read (%llu bytes at "
                                 "open, ends at %llu)", s->path, (unsigned long long)s->size,
                                 (unsigned long long)(c->off + c->got));
        }
        c->got += (size_t)res;
        s->file_bytes += res;
        if (c->got < c->want) { /* a short read: ask for the rest */
            int rc = sl__io_prep(s->io, s->fd, c->buf + c->got, c->want - c->got,
                                 c->off + c->got, c);
            if (rc < 0)
                return rc;
            resubmit = true;
        }
    }
    return resubmit ? sl__io_submit(s->io) : 0;
}

/* The raw bytes at the reader's position: *p and *len (0 at the end). */
static int raw(sl__stream *s, const unsigned char **p, size_t *len)
{
    for (;;) {
        if (s->queued == 0) {
            if (s->tee) { /* the whole object came: keep its copy */
                sl__rcache_commit(s->tee, s->size, sl__http_validator(s->io, s->fd));
                s->tee = NULL;
            }
            *len = 0;
            return 0;
        }
        chunk *c = &s->c[s->head];
        if (s->pos < c->got) {
            *p = c->buf + s->pos;
            *len = c->got - s->pos;
            return 0;
        }
        if (s->pos == c->want) { /* used up: its buffer takes the next offset */
            if (s->tee && !sl__rcache_write(s->tee, c->buf, c->got)) {
                sl__rcache_abort(s->tee);
                s->tee = NULL;
            }
            s->head = (s->head + 1) % s->n;
            s->queued--;
            s->pos = 0;
            int rc = request(s);
            if (rc < 0)
                return rc;
            continue;
        }
        int rc = reap(s);
        if (rc < 0)
            return rc;
    }
}

static int raw_read(sl__stream *s, void *dst, size_t n, size_t *got, uint32_t *crc)
{
    size_t done = 0;
    while (done < n) {
        const unsigned char *p;
        size_t len;
        int rc = raw(s, &p, &len);
        if (rc < 0)
            return rc;
        if (len == 0)
            break;
        size_t k = len < n - done ? len : n - done;
        if (crc)
            *crc = sl__crc32c_copy(*crc, (unsigned char *)dst + done, p, k);
        else if (dst)
            memcpy((unsigned char *)dst + done, p, k);
        s->pos += k;
        done += k;
    }
    s->off += done;
    *got = done;
    return 0;
}

#ifndef SLUICE_NO_ZLIB
/* gzip members may follow one another; anything else after the end of
 * the stream is ignored, as gzip(1) does. */
static int next_member(sl__stream *s)
{
    const unsigned char *p;
    size_t len;
    int rc = raw(s, &p, &len);
    if (rc < 0)
        return rc;
    if (len == 0 || s->zbits != 31 || p[0] != 0x1f) {
        s->zend = true;
        return 0;
    }
    return inflateReset(&s->z) == Z_OK ? 0 : fail(s, SL_EINTERNAL, "inflateReset", s->off);
}

static int z_read(sl__stream *s, void *dst, size_t n, size_t *got)
{
    s->z.next_out = dst;
    s->z.avail_out = (uInt)n;
    while (s->z.avail_out > 0 && !s->zend) {
        const unsigned char *p;
        size_t len;
        int rc = raw(s, &p, &len);
        if (rc < 0)
            return rc;
        if (len == 0)
            return fail(s, SL_ECORRUPT, "compressed stream cut short (no end of stream)",
                        s->off + (n - s->z.avail_out));
        s->z.next_in = (unsigned char *)p;
        s->z.avail_in = len > UINT32_MAX ? UINT32_MAX : (uInt)len;
        uInt in0 = s->z.avail_in;
        int zr = inflate(&s->z, Z_NO_FLUSH);
        s->pos += in0 - s->z.avail_in;
        if (zr == Z_STREAM_END) {
            rc = next_member(s);
            if (rc < 0)
                return rc;
        } else if (zr != Z_OK && zr != Z_BUF_ERROR) {
            char what[160];
            snprintf(what, sizeof what, "corrupt compressed stream (%s)",
                     s->z.msg ? s->z.msg : zError(zr));
            return fail(s, SL_ECORRUPT, what, s->off + (n - s->z.avail_out));
        }
    }
    size_t done = n - s->z.avail_out;
    s->off += done;
    *got = done;
    return 0;
}
#else
static int z_read(sl__stream *s, void *dst, size_t n, size_t *got)
{
    (void)dst, (void)n; /* zon is never set without zlib */
    *got = 0;
    return fail(s, SL_EUNSUPPORTED, "no zlib in this build", s->off);
}
#endif

int sl__stream_read(sl__stream *s, void *dst, size_t n, size_t *got)
{
    if (!s->zon)
        return raw_read(s, dst, n, got, NULL);
    size_t done = 0; /* zlib counts in 32 bits */
    while (done < n) {
        size_t piece = n - done > ((size_t)1 << 30) ? (size_t)1 << 30 : n - done, k;
        int rc = z_read(s, (unsigned char *)dst + done, piece, &k);
        if (rc < 0)
            return rc;
        done += k;
        if (k < piece)
            break;
    }
    *got = done;
    return 0;
}

int sl__stream_read_crc(sl__stream *s, void *dst, size_t n, size_t *got, uint32_t *crc)
{
    if (!s->zon)
        return raw_read(s, dst, n, got, crc);
    int rc = sl__stream_read(s, dst, n, got);
    if (rc == 0)
        *crc = sl__crc32c(*crc, dst, *got);
    return rc;
}

int sl__stream_skip(sl__stream *s, uint64_t n, uint64_t *skipped)
{
    uint64_t done = 0;
    while (done < n) {
        size_t want = n - done > SIZE_MAX ? SIZE_MAX : (size_t)(n - done), got;
        int rc;
        if (s->zon) {
            if (!s->skip && !(s->skip = sl__alloc(SKIP_BUF)))
                return SL_ENOMEM;
            rc = z_read(s, s->skip, want < SKIP_BUF ? want : SKIP_BUF, &got);
        } else {
            rc = raw_read(s, NULL, want, &got, NULL);
        }
        if (rc < 0)
            return rc;
        if (got == 0)
            break;
        done += got;
    }
    *skipped = done;
    return 0;
}

/* A URL: the engine that fetches it, and the object in it. */
static int open_remote(sl__stream *s, const sl__stream_opts *o)
{
    static const sl__http_opts defaults = {8, 120, 30};
    s->remote = true;
    s->size = SL__HTTP_UNKNOWN;
    int rc = sl__http_open(s->n, o->http ? o->http : &defaults, &s->io);
    if (rc < 0) {
        sl__error_prefix(s->path);
        return rc;
    }
    s->fd = sl__http_add(s->io, s->path);
    if (s->fd < 0)
        return s->fd;
    char *shown = sl__strdup(sl__http_shown(s->io, s->fd)); /* no secrets in messages */
    if (!shown)
        return SL_ENOMEM;
    sl__strfree(s->path);
    s->path = shown;
    return 0;
}

/* A URL with a copy in the cache: that file, the URL kept for messages.
 * 1 when there is one; 0 when not, with a writer set up for a read from
 * the start. */
static int open_cached(sl__stream *s, const sl__stream_opts *o)
{
    char key[65], shown[1024];
    if (!sl__rcache_key(s->path, key, shown, sizeof shown))
        return 0; /* open_remote says what is wrong, or reads it uncached */
    uint64_t size;
    int fd = sl__rcache_open(o->cache, key, &size);
    if (fd < 0) {
        if (o->start == 0)
            s->tee = sl__rcache_begin(o->cache, key);
        return 0;
    }
    char *p = sl__strdup(shown);
    if (!p) {
        close(fd);
        return SL_ENOMEM;
    }
    sl__strfree(s->path);
    s->path = p;
    s->fd = fd;
    s->size = size;
    return 1;
}

static int open_file(sl__stream *s)
{
    /* O_NONBLOCK so that a FIFO named like a shard cannot hang the open */
    s->fd = open(s->path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (s->fd < 0)
        return sl__set_error(sl__errno_code(errno), "%s: %s", s->path, strerror(errno));
    struct stat st;
    if (fstat(s->fd, &st) < 0)
        return sl__set_error(SL_EIO, "%s: %s", s->path, strerror(errno));
    if (!S_ISREG(st.st_mode))
        return sl__set_error(SL_EIO, "%s: %s", s->path,
                             S_ISDIR(st.st_mode) ? "is a directory" : "not a regular file");
    if (fcntl(s->fd, F_SETFL, 0) < 0)
        return sl__set_error(SL_EIO, "%s: %s", s->path, strerror(errno));
    s->size = (uint64_t)st.st_size;
    return 0;
}

int sl__stream_sniff(const unsigned char *p, size_t n)
{
    if (n >= 2 && p[0] == 0x1f && p[1] == 0x8b)
        return SL_COMPRESSION_GZIP;
    if (n >= 2 && (p[0] & 0x0f) == 8 && (p[0] >> 4) <= 7 && (p[0] << 8 | p[1]) % 31 == 0)
        return SL_COMPRESSION_ZLIB;
    return SL_COMPRESSION_NONE;
}

static int start_inflate(sl__stream *s, int compression)
{
    if (compression == SL__STREAM_DETECT) {
        const unsigned char *p;
        size_t len;
        int rc = raw(s, &p, &len);
        if (rc < 0)
            return rc;
        /* gzip only: a zlib header is two bytes a tar member's name can
         * begin with */
        compression = sl__stream_sniff(p, len) == SL_COMPRESSION_GZIP ? SL_COMPRESSION_GZIP
                                                                      : SL_COMPRESSION_NONE;
    }
    if (compression == SL_COMPRESSION_NONE)
        return 0;
#ifdef SLUICE_NO_ZLIB
    return sl__set_error(SL_EUNSUPPORTED, "%s: compressed (%s), but this build has no zlib "
                         "(SLUICE_WITH_ZLIB=OFF)", s->path,
                         compression == SL_COMPRESSION_GZIP ? "gzip" : "zlib");
#else
    s->zbits = compression == SL_COMPRESSION_GZIP ? 31 : 15;
    if (inflateInit2(&s->z, s->zbits) != Z_OK)
        return sl__set_error(SL_ENOMEM, "%s: out of memory (inflate)", s->path);
    s->zon = true;
    return 0;
#endif
}

int sl__stream_open(const char *path, const sl__stream_opts *o, sl__stream **out)
{
    *out = NULL;
    if (o->compression < SL__STREAM_DETECT || o->compression > SL_COMPRESSION_GZIP)
        return sl__set_error(SL_EINVAL, "%s: unknown compression %d", path, o->compression);
    sl__stream *s = sl__calloc(1, sizeof *s);
    if (!s)
        return SL_ENOMEM;
    s->fd = -1;
    bool url = sl__is_url(path);
    s->csize = o->chunk ? o->chunk : url ? REMOTE_CHUNK : DEFAULT_CHUNK;
    s->n = o->ahead > 0 ? o->ahead : url ? REMOTE_AHEAD : DEFAULT_AHEAD;
    s->path = sl__strdup(path);
    s->c = sl__calloc((size_t)s->n, sizeof *s->c);
    s->cqes = sl__calloc((size_t)s->n, sizeof *s->cqes);
    int rc = s->path && s->c && s->cqes ? 0 : SL_ENOMEM;
    if (rc == 0 && url && o->cache && o->cache->dir && o->cache->dir[0]) {
        rc = open_cached(s, o);
        if (rc == 1) { /* a local file now, read in local chunks */
            url = false;
            rc = 0;
            s->csize = o->chunk ? o->chunk : DEFAULT_CHUNK;
        } else if (rc == 0) {
            rc = open_remote(s, o);
        }
    } else if (rc == 0) {
        rc = url ? open_remote(s, o) : open_file(s);
    }
    for (int i = 0; rc == 0 && i < s->n; i++)
        if (!(s->c[i].buf = sl__obj_get(s->csize))) /* pooled: pages stay mapped */
            rc = SL_ENOMEM;
    if (rc == 0 && !url)
        rc = sl__io_open(o->backend, s->n, path, &s->io);
    bool seek = rc == 0 && o->compression == SL_COMPRESSION_NONE && o->start;
    if (seek)
        s->next_off = s->off = o->start;
    if (rc == 0)
        rc = request(s);
    /* a URL's first chunk tells its size; then the rest of the ring */
    while (rc == 0 && s->size == SL__HTTP_UNKNOWN)
        rc = reap(s);
    if (rc == 0 && url)
        rc = request(s);
    if (rc == 0 && seek && o->start > s->size)
        rc = sl__set_error(SL_ECORRUPT, "%s: position %llu is past the end (%llu bytes)",
                           s->path, (unsigned long long)o->start, (unsigned long long)s->size);
    if (rc == 0)
        rc = start_inflate(s, o->compression);
    uint64_t skipped;
    if (rc == 0 && o->start && !seek) {
        rc = sl__stream_skip(s, o->start, &skipped);
        if (rc == 0 && skipped < o->start)
            rc = sl__set_error(SL_ECORRUPT, "%s: position %llu is past the end", s->path,
                               (unsigned long long)o->start);
    }
    if (rc < 0) {
        sl__stream_close(s);
        return rc;
    }
    *out = s;
    return 0;
}

uint64_t sl__stream_offset(const sl__stream *s)
{
    return s->off;
}

uint64_t sl__stream_size(const sl__stream *s)
{
    return s->size;
}

const char *sl__stream_validator(const sl__stream *s)
{
    return s->remote && s->io ? sl__http_validator(s->io, s->fd) : "";
}

bool sl__stream_compressed(const sl__stream *s)
{
    return s->zon;
}

const char *sl__stream_path(const sl__stream *s)
{
    return s->path;
}

int64_t sl__stream_file_bytes(const sl__stream *s)
{
    return s->file_bytes;
}

int sl__stream_backend(const sl__stream *s)
{
    return sl__io_backend(s->io);
}

/* Reads what is left of a URL being copied into the cache, when that is
 * little; else drops the copy. */
static void finish_tee(sl__stream *s)
{
    const uint64_t most = (uint64_t)4 << 20;
    uint64_t at = s->queued ? s->c[s->head].off : s->next_off;
    if (s->size == SL__HTTP_UNKNOWN || s->size - at > most) {
        sl__rcache_abort(s->tee);
        s->tee = NULL;
        return;
    }
    const unsigned char *p;
    size_t len;
    while (s->tee && raw(s, &p, &len) == 0 && len > 0)
        s->pos += len;
    sl__rcache_abort(s->tee); /* NULL when raw() committed it */
    s->tee = NULL;
}

void sl__stream_close(sl__stream *s)
{
    if (!s)
        return;
    if (s->tee)
        finish_tee(s);
    sl__io_close(s->io); /* reads in flight write into the chunks until they end */
    if (s->fd >= 0 && !s->remote)
        close(s->fd);
#ifndef SLUICE_NO_ZLIB
    if (s->zon)
        inflateEnd(&s->z);
#endif
    for (int i = 0; s->c && i < s->n; i++)
        sl__obj_put(s->c[i].buf, s->csize);
    sl__free(s->c, (size_t)s->n * sizeof *s->c);
    sl__free(s->cqes, (size_t)s->n * sizeof *s->cqes);
    sl__free(s->skip, s->skip ? SKIP_BUF : 0);
    sl__strfree(s->path);
    sl__free(s, sizeof *s);
}
