/* The cache's file: format, writer, reader (cache_file.h). */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/file.h>
#include <unistd.h>
#include "../core/alloc.h"
#include "../core/crc32c.h"
#include "../core/error.h"
#include "../core/fileio.h"
#include "../core/le.h"
#include "../core/log.h"
#include "cache_file.h"
#include "record.h"

#define MAGIC "SLCACHE1"
#define VERSION 1u
#define HDR_SIZE 48
#define IO_BUF (1u << 20)

int sl__cache_file_init(sl__cache_file *f, const char *path, uint64_t fingerprint)
{
    size_t n = strlen(path) + sizeof ".partial";
    *f = (sl__cache_file){.path = path, .fd = -1, .fingerprint = fingerprint};
    if ((f->partial = sl__alloc(n)) != NULL)
        snprintf(f->partial, n, "%s.partial", path); /* (before it can be freed) */
    f->buf = sl__alloc(IO_BUF);
    if (!f->partial || !f->buf)
        return sl__set_error(SL_ENOMEM, "cache(%s): out of memory", path);
    return 0;
}

void sl__cache_file_fini(sl__cache_file *f)
{
    if (!f->path) /* never initialised: zeroed */
        return;
    if (f->locked) /* an unfinished write: remove it while still holding the lock */
        unlink(f->partial);
    if (f->fd >= 0)
        close(f->fd);
    sl__free(f->buf, f->buf ? IO_BUF : 0);
    sl__strfree(f->partial);
    *f = (sl__cache_file){.fd = -1};
}

/* ---- low-level I/O ---- */

static int io_error(sl__cache_file *f, const char *what, const char *file, int err)
{
    return sl__set_error(sl__errno_code(err), "cache(%s): %s %s: %s", f->path,
                         what, file, strerror(err));
}

static int write_all(sl__cache_file *f, const void *p, size_t n)
{
    return sl__write_all(f->fd, p, n) < 0 ? io_error(f, "writing", f->partial, errno) : 0;
}

/* ---- writing ---- */

static int emit(sl__cache_file *f, const void *p, size_t n)
{
    int rc = write_all(f, p, n);
    if (rc)
        return rc;
    f->crc = sl__crc32(f->crc, p, n);
    f->payload_len += n;
    return 0;
}

static int flush(sl__cache_file *f)
{
    int rc = emit(f, f->buf, f->buf_len);
    f->buf_len = 0;
    return rc;
}

static int put(sl__cache_file *f, const void *p, size_t n)
{
    if (f->buf_len + n > IO_BUF) {
        int rc = flush(f);
        if (rc)
            return rc;
        if (n >= IO_BUF)
            return emit(f, p, n);
    }
    memcpy(f->buf + f->buf_len, p, n);
    f->buf_len += n;
    return 0;
}

static int put_cb(void *self, const void *p, size_t n)
{
    return put(self, p, n);
}

int sl__cache_file_put(sl__cache_file *f, const sl_element *el)
{
    int rc = sl__record_put(el, put_cb, f);
    if (!rc)
        f->count++;
    return rc;
}

static void make_header(unsigned char *h, uint64_t fp, uint64_t count, uint64_t len,
                        uint32_t crc)
{
    memcpy(h, MAGIC, 8);
    sl__put_le32(h + 8, VERSION);
    sl__put_le32(h + 12, HDR_SIZE);
    sl__put_le64(h + 16, fp);
    sl__put_le64(h + 24, count);
    sl__put_le64(h + 32, len);
    sl__put_le32(h + 40, crc);
    sl__put_le32(h + 44, 0);
}

int sl__cache_file_commit(sl__cache_file *f, struct stat *st)
{
    unsigned char h[HDR_SIZE];
    int rc = flush(f);
    if (rc)
        return rc;
    make_header(h, f->fingerprint, f->count, f->payload_len, f->crc);
    errno = 0;
    if (pwrite(f->fd, h, HDR_SIZE, 0) != HDR_SIZE)
        return io_error(f, "writing the header of", f->partial, errno ? errno : EIO);
    if (fsync(f->fd) < 0)
        return io_error(f, "syncing", f->partial, errno);
    if (rename(f->partial, f->path) < 0)
        return io_error(f, "renaming", f->partial, errno);
    if (fstat(f->fd, st) < 0)
        memset(st, 0, sizeof *st); /* unrecognisable: checked in full next time */
    sl__sync_parent(f->path);
    close(f->fd);
    f->fd = -1;
    f->locked = false;
    return 0;
}

/* Opens and locks "<path>.partial". The name is re-checked after locking: a
 * writer that just finished may have renamed or unlinked the file we opened,
 * and locking that inode would not exclude anyone. */
static int open_partial(sl__cache_file *f)
{
    for (int tries = 0; tries < 16; tries++) {
        int fd = open(f->partial, O_CREAT | O_RDWR | O_CLOEXEC, 0644);
        if (fd < 0)
            return io_error(f, "cannot create", f->partial, errno);
        if (flock(fd, LOCK_EX | LOCK_NB) < 0) {
            int e = errno;
            close(fd);
            if (e == EWOULDBLOCK)
                return sl__set_error(SL_EBUSY, "cache(%s): another writer holds %s", f->path,
                                     f->partial);
            return io_error(f, "cannot lock", f->partial, e);
        }
        struct stat a, b;
        if (fstat(fd, &a) == 0 && stat(f->partial, &b) == 0 && a.st_dev == b.st_dev &&
            a.st_ino == b.st_ino) {
            f->fd = fd;
            f->locked = true;
            if (a.st_size > 0) {
                sl__log(SL_LOG_WARN, "cache(%s): discarding the abandoned partial cache %s "
                        "(%lld bytes)", f->path, f->partial, (long long)a.st_size);
                if (ftruncate(fd, 0) < 0)
                    return io_error(f, "cannot truncate", f->partial, errno);
            }
            return 0;
        }
        close(fd);
    }
    return sl__set_error(SL_EBUSY, "cache(%s): %s keeps changing under us", f->path,
                         f->partial);
}

int sl__cache_file_create(sl__cache_file *f)
{
    int rc = open_partial(f);
    if (rc)
        return rc;
    f->count = f->payload_len = 0;
    f->crc = 0;
    f->buf_len = 0;
    unsigned char h[HDR_SIZE] = {0};
    return write_all(f, h, HDR_SIZE); /* placeholder until the pass completes */
}

/* ---- reading ---- */

static bool validate(sl__cache_file *f, const struct stat *st, bool check_crc, char *why,
                     size_t n)
{
    unsigned char h[HDR_SIZE];
    if (st->st_size < HDR_SIZE || sl__pread_full(f->fd, h, HDR_SIZE, 0) != HDR_SIZE) {
        snprintf(why, n, "truncated header (%lld bytes)", (long long)st->st_size);
        return false;
    }
    if (memcmp(h, MAGIC, 8) != 0) {
        snprintf(why, n, "not a sluice cache file (bad magic)");
        return false;
    }
    if (sl__get_le32(h + 8) != VERSION || sl__get_le32(h + 12) != HDR_SIZE) {
        snprintf(why, n, "unsupported format version %u", sl__get_le32(h + 8));
        return false;
    }
    uint64_t fp = sl__get_le64(h + 16);
    if (fp != f->fingerprint) {
        snprintf(why, n, "built by a different pipeline (fingerprint %016llx, expected %016llx)",
                 (unsigned long long)fp, (unsigned long long)f->fingerprint);
        return false;
    }
    f->count = sl__get_le64(h + 24);
    f->payload_len = sl__get_le64(h + 32);
    if (f->payload_len != (uint64_t)st->st_size - HDR_SIZE) {
        snprintf(why, n, "payload is %lld bytes, the header says %llu (truncated?)",
                 (long long)st->st_size - HDR_SIZE, (unsigned long long)f->payload_len);
        return false;
    }
    if (!check_crc)
        return true;
    uint32_t crc = 0;
    for (uint64_t off = HDR_SIZE; off < (uint64_t)st->st_size;) {
        size_t k = (uint64_t)st->st_size - off < IO_BUF ? (size_t)((uint64_t)st->st_size - off)
                                                        : IO_BUF;
        ssize_t r = sl__pread_full(f->fd, f->buf, k, off);
        if (r != (ssize_t)k) {
            snprintf(why, n, "read failed at offset %llu: %s", (unsigned long long)off,
                     r < 0 ? strerror(errno) : "file shrank");
            return false;
        }
        crc = sl__crc32(crc, f->buf, k);
        off += k;
    }
    if (crc != sl__get_le32(h + 40)) {
        snprintf(why, n, "checksum mismatch (payload crc32 %08x, header says %08x)", crc,
                 sl__get_le32(h + 40));
        return false;
    }
    return true;
}

static int corrupt(sl__cache_file *f, const char *what, uint64_t off)
{
    return sl__set_error(SL_ECORRUPT, "cache(%s): %s at offset %llu", f->path, what,
                         (unsigned long long)off);
}

static int get_bytes(sl__cache_file *f, void *dst, size_t n)
{
    unsigned char *d = dst;
    if (n > f->end - f->off)
        return corrupt(f, "truncated record", f->off);
    while (n) {
        if (f->buf_pos == f->buf_len) {
            size_t k = f->end - f->load_off < IO_BUF ? (size_t)(f->end - f->load_off)
                                                       : IO_BUF;
            void *into = n >= IO_BUF ? (void *)d : (void *)f->buf;
            if (n >= IO_BUF)
                k = n; /* big tensors go straight into place */
            ssize_t r = sl__pread_full(f->fd, into, k, f->load_off);
            if (r != (ssize_t)k)
                return r < 0 ? io_error(f, "reading", f->path, errno)
                             : corrupt(f, "truncated record", f->load_off);
            f->load_off += k;
            if (into == d) {
                f->off += k;
                return 0;
            }
            f->buf_pos = 0;
            f->buf_len = k;
        }
        size_t k = f->buf_len - f->buf_pos < n ? f->buf_len - f->buf_pos : n;
        memcpy(d, f->buf + f->buf_pos, k);
        f->buf_pos += k;
        f->off += k;
        d += k;
        n -= k;
    }
    return 0;
}

static int get_cb(void *self, void *dst, size_t n)
{
    return get_bytes(self, dst, n);
}

int sl__cache_file_open(sl__cache_file *f, struct stat *st)
{
    f->fd = open(f->path, O_RDONLY | O_CLOEXEC);
    if (f->fd < 0)
        return errno == ENOENT ? 0 : io_error(f, "cannot open", f->path, errno);
    if (fstat(f->fd, st) < 0)
        return io_error(f, "cannot stat", f->path, errno);
    return 1;
}

bool sl__cache_file_check(sl__cache_file *f, const struct stat *st, bool check_crc, char *why,
                          size_t n)
{
    if (!validate(f, st, check_crc, why, n)) {
        close(f->fd);
        f->fd = -1;
        f->count = f->payload_len = 0;
        return false;
    }
    f->off = f->load_off = HDR_SIZE;
    f->end = HDR_SIZE + f->payload_len;
    f->buf_len = f->buf_pos = 0;
    return true;
}

int sl__cache_file_seek(sl__cache_file *f, int64_t index, uint64_t off)
{
    /* the file holds this pipeline's pass, so a saved offset is a record
     * boundary in it; a bad one is a bad state */
    if (index < 0 || (uint64_t)index > f->count || off < HDR_SIZE || off > f->end)
        return sl__set_error(SL_ECORRUPT, "saved state: cache(%s): element %lld at "
                             "offset %llu is not in the file (%llu elements, %llu bytes)",
                             f->path, (long long)index, (unsigned long long)off,
                             (unsigned long long)f->count, (unsigned long long)f->end);
    f->off = f->load_off = off;
    f->buf_len = f->buf_pos = 0;
    f->count -= (uint64_t)index;
    return 0;
}

int sl__cache_file_get(sl__cache_file *f, sl_element **out)
{
    if (f->count == 0)
        return f->off == f->end ? SL_EOF
                                : corrupt(f, "trailing bytes after the last element", f->off);
    uint64_t at = f->off, where;
    const char *why;
    sl__record_src src = {get_cb, f, f->end - f->off};
    int rc = sl__record_get(&src, out, &why, &where);
    if (rc == SL_ECORRUPT)
        return corrupt(f, why, at + where);
    if (rc == 0)
        f->count--;
    return rc;
}
