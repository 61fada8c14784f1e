/*
 * cache(path): keeps the first complete pass and serves later passes from it.
 *
 * In memory (path NULL) the elements live with the dataset, as tf.data's
 * memory cache does: the first complete pass of any iterator fills it, and
 * every later pass (a repeat's, or a later iterator's epoch) is served from
 * it until the dataset is freed. While one iterator fills it, others pass
 * through. Each iterator counts the cache's bytes as buffered while it uses
 * them. A pass that stops early leaves the cache incomplete and the next
 * pass starts over, as in tf.data: a partial cache would silently shorten
 * every later epoch.
 *
 * On disk the pass is written to "<path>.partial" under an exclusive flock
 * (a second writer gets SL_EBUSY) and renamed to path at the end, so path
 * only ever names a complete file. A file is served only after its header
 * and checksum prove it was built by this very pipeline; anything else is
 * rebuilt. The work starts at the first next, not at iterator creation, so
 * that checking a large file happens wherever the pipeline pulls (a prefetch
 * thread, say).
 *
 * File format, all integers little-endian:
 *
 *   header (48 bytes)
 *     0  char[8]  magic "SLCACHE1"
 *     8  u32      format version (1)
 *    12  u32      header size (48)
 *    16  u64      sl_dataset_fingerprint() of the cached input
 *    24  u64      element count
 *    32  u64      payload length in bytes
 *    40  u32      CRC-32 (zlib's crc32) of the payload
 *    44  u32      reserved (0)
 *   payload: one record per element
 *     u32 tensor count, then per tensor:
 *       u32 dtype, u32 ndim, i64 shape[ndim], u64 nbytes, nbytes of data
 *     The data is the tensor's memory as is: string tensors keep their
 *     offset table; numbers are in host order (little-endian everywhere
 *     sluice runs).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>
#include "../core/clock.h"
#include "../core/crc32c.h"
#include "../core/le.h"
#include "../core/log.h"
#include "../core/salts.h"
#include "../graph/node.h"

#define MAGIC "SLCACHE1"
#define VERSION 1u
#define HDR_SIZE 48
#define IO_BUF (1u << 20)
#define INLINE_BYTES 64
/* The epoch the cached pass of the input runs, whichever epoch fills the
 * cache: what it holds (a shuffle's order below it, crops) must not depend
 * on which iterator came first, or a resumed run would be served another
 * epoch's pass. */
#define INPUT_EPOCH 0

/* An in-memory cache, owned by its dataset. Only the filler touches els
 * until complete is set (under mu); after that they never change. */
typedef struct mem_cache {
    pthread_mutex_t mu;
    sl_element **els;
    int64_t n, cap, bytes;
    bool complete;
    bool filling; /* an iterator is writing it */
} mem_cache;

typedef struct cache_ds {
    sl_dataset base;
    char *path;      /* NULL: in memory (or automatic) */
    mem_cache *mem;  /* in memory and automatic: the cache */
    /* SL_CACHE_AUTO: the first complete pass measures and chooses; the
     * choice and the spill file are under mem->mu */
    bool automatic;
    bool keep; /* a memory cache (path NULL): never "nothing", but it spills */
    char *spill_dir;
    char *spill_path; /* the spilled pass's file, removed with the dataset */
    int placement;    /* sl_cache_placement */
    int64_t kept_bytes; /* tensor bytes of the pass it keeps */
} cache_ds;

/* A cache is worth keeping when producing its stream costs more per byte
 * than reading the bytes back would: about a page-cache read and a parse,
 * ~1 GB/s here. Below it (a folder already in the page cache, slices of an
 * array) the cache only takes memory or disk. */
#define CHEAP_NS_PER_BYTE 1.0

/* The file this tree already checked or wrote, so later epochs skip the
 * checksum pass over an unchanged file. */
typedef struct file_seen {
    bool valid;
    dev_t dev;
    ino_t ino;
    off_t size;
    struct timespec mtime;
} file_seen;

enum mode {
    START, PASS, MEM_FILL, MEM_SERVE, FILE_WRITE, FILE_READ, DONE, FAILED,
    AUTO_FILL,  /* automatic, first pass: in memory while it fits its share */
    AUTO_SPILL, /* ... then in the spill file */
};

typedef struct cache_iter {
    sl__iter base;
    enum mode mode;
    int failed_rc;
    sl__iter *input;
    mem_cache *mem;
    bool filler;  /* this iterator fills mem */
    int64_t held; /* mem's bytes this iterator counts as buffered */
    bool locked; /* this iterator owns "<path>.partial" */
    int64_t pos; /* MEM_SERVE: next element */
    /* file modes */
    const char *path;
    char *partial;
    int fd;
    unsigned char *buf;
    size_t buf_len, buf_pos;
    uint64_t fingerprint;
    uint64_t count;       /* elements written or still to read */
    uint64_t payload_len; /* written so far, or from the header */
    uint32_t crc;
    uint64_t off, load_off, end; /* reader: next byte, next byte to load, end */
    /* positions (state.h): elements returned this pass; when resuming, how
     * (a RESUME_ kind) and from where */
    int64_t served;
    int resume;
    int64_t resume_pos;
    int64_t to_replay; /* of those, still to pass again (replay) */
    uint64_t resume_off;
    /* automatic, filling: time inside the input's next, bytes it gave */
    int64_t produce_ns, produced_bytes;
} cache_iter;

/* What a saved cache position says. */
enum { RESUME_NONE, RESUME_INPUT, RESUME_MEM, RESUME_FILE, RESUME_DONE };

static int fail_state(cache_iter *it, int rc)
{
    it->mode = FAILED;
    it->failed_rc = rc;
    return rc;
}

/* ---- in memory ---- */

static void mem_discard(mem_cache *m)
{
    for (int64_t i = 0; i < m->n; i++)
        sl_element_release(m->els[i]);
    sl__free(m->els, (size_t)m->cap * sizeof *m->els);
    m->els = NULL;
    m->n = m->cap = m->bytes = 0;
    m->complete = false;
}

static void mem_hold(cache_iter *it, int64_t bytes)
{
    /* for statistics; the cache never waits for the budget, since waiting
     * would not make it any smaller */
    sl__tree_hold(it->base.tree, bytes);
    it->held += bytes;
}

static void mem_unhold(cache_iter *it)
{
    if (it->held)
        sl__tree_unhold(it->base.tree, it->held);
    it->held = 0;
}

static int mem_append(cache_iter *it, sl_element *el)
{
    mem_cache *m = it->mem;
    if (m->n == m->cap) {
        int64_t cap = m->cap ? m->cap * 2 : 256;
        sl_element **els = sl__alloc((size_t)cap * sizeof *els);
        if (!els)
            return SL_ENOMEM;
        if (m->n)
            memcpy(els, m->els, (size_t)m->n * sizeof *els);
        sl__free(m->els, (size_t)m->cap * sizeof *m->els);
        m->els = els;
        m->cap = cap;
    }
    int64_t b = (int64_t)sl__element_bytes(el);
    mem_hold(it, b);
    m->bytes += b;
    m->els[m->n++] = sl_element_retain(el);
    return 0;
}

static void mem_start(cache_iter *it)
{
    mem_cache *m = ((const cache_ds *)it->base.ds)->mem;
    pthread_mutex_lock(&m->mu);
    if (m->complete) {
        it->mode = MEM_SERVE;
        if (it->resume == RESUME_MEM && it->resume_pos <= m->n) {
            it->pos = it->resume_pos;
            it->resume_pos = 0; /* nothing to replay */
        }
    } else if (m->filling) {
        it->mode = PASS; /* another iterator is filling it: just pass through */
    } else {
        m->filling = true;
        it->filler = true;
        it->mode = MEM_FILL;
    }
    int64_t bytes = m->complete ? m->bytes : 0;
    pthread_mutex_unlock(&m->mu);
    it->mem = m;
    mem_hold(it, bytes);
}

static void mem_end_fill(cache_iter *it, bool complete)
{
    mem_cache *m = it->mem;
    if (!complete) {
        mem_discard(m);
        mem_unhold(it);
    }
    pthread_mutex_lock(&m->mu);
    m->complete = complete;
    m->filling = false;
    pthread_mutex_unlock(&m->mu);
    it->filler = false;
}

static int mem_fill_next(cache_iter *it, sl_element **out)
{
    int rc = sl__iter_next(it->input, out);
    if (rc == SL_EOF) {
        mem_end_fill(it, true);
        it->mode = DONE;
        return SL_EOF;
    }
    if (rc)
        return rc;
    rc = mem_append(it, *out);
    if (rc) { /* the element is lost to the cache: a retry would leave a gap */
        sl_element_release(*out);
        *out = NULL;
        sl__error_prefix("cache");
        return fail_state(it, rc);
    }
    return 0;
}

static int mem_serve_next(cache_iter *it, sl_element **out)
{
    if (it->pos >= it->mem->n) {
        it->mode = DONE;
        return SL_EOF;
    }
    *out = sl_element_retain(it->mem->els[it->pos++]);
    return 0;
}

/* ---- file: low-level I/O ---- */

static int io_error(cache_iter *it, const char *what, const char *file, int err)
{
    return sl__set_error(sl__errno_code(err), "cache(%s): %s %s: %s", it->path,
                         what, file, strerror(err));
}

static int write_all(cache_iter *it, const void *p, size_t n)
{
    const unsigned char *s = p;
    while (n) {
        ssize_t w = write(it->fd, s, n);
        if (w < 0 && errno == EINTR)
            continue;
        if (w < 0)
            return io_error(it, "writing", it->partial, errno);
        s += w;
        n -= (size_t)w;
    }
    return 0;
}

/* Reads up to n bytes at off; fewer only at the end of the file. */
static ssize_t pread_full(int fd, void *p, size_t n, uint64_t off)
{
    size_t got = 0;
    while (got < n) {
        ssize_t r = pread(fd, (unsigned char *)p + got, n - got, (off_t)(off + got));
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0)
            return -1;
        if (r == 0)
            break;
        got += (size_t)r;
    }
    return (ssize_t)got;
}

/* ---- file: writing ---- */

static int emit(cache_iter *it, const void *p, size_t n)
{
    int rc = write_all(it, p, n);
    if (rc)
        return rc;
    it->crc = sl__crc32(it->crc, p, n);
    it->payload_len += n;
    return 0;
}

static int flush(cache_iter *it)
{
    int rc = emit(it, it->buf, it->buf_len);
    it->buf_len = 0;
    return rc;
}

static int put(cache_iter *it, const void *p, size_t n)
{
    if (it->buf_len + n > IO_BUF) {
        int rc = flush(it);
        if (rc)
            return rc;
        if (n >= IO_BUF)
            return emit(it, p, n);
    }
    memcpy(it->buf + it->buf_len, p, n);
    it->buf_len += n;
    return 0;
}

/* A string tensor whose first string starts after a gap (a view, as
 * parse_example makes) is written without it: offsets from 0. */
static int put_strings(cache_iter *it, const struct sl_tensor *t, unsigned char *h, size_t at)
{
    int64_t n = sl__shape_count(t->ndim, t->shape);
    const uint64_t *off = sl__str_offsets(t);
    uint64_t gap = off[0];
    sl__put_le64(h + at, t->nbytes - gap);
    int rc = put(it, h, at + 8);
    for (int64_t i = 0; i <= n && !rc; i++) { /* in memory's order, as the data */
        uint64_t o = off[i] - gap;
        rc = put(it, &o, sizeof o);
    }
    if (!rc && off[n] > gap)
        rc = put(it, (const char *)(off + n + 1) + gap, off[n] - gap);
    return rc;
}

static int put_element(cache_iter *it, const sl_element *el)
{
    unsigned char h[8 + 8 * SL_MAX_DIMS + 8];
    sl__put_le32(h, el->n);
    int rc = put(it, h, 4);
    for (int i = 0; i < el->n && !rc; i++) {
        const struct sl_tensor *t = &el->t[i];
        sl__put_le32(h, (uint32_t)t->dtype);
        sl__put_le32(h + 4, (uint32_t)t->ndim);
        size_t at = 8;
        for (int d = 0; d < t->ndim; d++, at += 8)
            sl__put_le64(h + at, (uint64_t)t->shape[d]);
        if (t->dtype == SL_STRING && sl__str_offsets(t)[0] != 0) {
            rc = put_strings(it, t, h, at);
            continue;
        }
        sl__put_le64(h + at, t->nbytes);
        rc = put(it, h, at + 8);
        if (!rc && t->nbytes)
            rc = put(it, t->data, t->nbytes);
    }
    if (!rc)
        it->count++;
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

static void remember(cache_iter *it, const struct stat *st)
{
    file_seen *s = sl__tree_slot(it->base.tree, sl__hash_u64(it->base.key, SL__SALT_CACHE_SEEN),
                                 sizeof *s, NULL);
    if (!s)
        return; /* only costs a re-check next epoch */
    s->valid = true;
    s->dev = st->st_dev;
    s->ino = st->st_ino;
    s->size = st->st_size;
    s->mtime = st->st_mtim;
}

static bool seen_before(cache_iter *it, const struct stat *st)
{
    file_seen *s = sl__tree_slot(it->base.tree, sl__hash_u64(it->base.key, SL__SALT_CACHE_SEEN),
                                 sizeof *s, NULL);
    return s && s->valid && s->dev == st->st_dev && s->ino == st->st_ino &&
           s->size == st->st_size && s->mtime.tv_sec == st->st_mtim.tv_sec &&
           s->mtime.tv_nsec == st->st_mtim.tv_nsec;
}

static void sync_dir(const char *path)
{
    char dir[4096];
    const char *slash = strrchr(path, '/');
    if (!slash)
        snprintf(dir, sizeof dir, ".");
    else
        snprintf(dir, sizeof dir, "%.*s", slash == path ? 1 : (int)(slash - path), path);
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd >= 0) {
        fsync(fd); /* best effort: the rename is already visible */
        close(fd);
    }
}

/* Completes the header, makes the file durable and gives it its name. The
 * lock is held until after the rename so no other writer can slip in. */
static int finish_write(cache_iter *it)
{
    unsigned char h[HDR_SIZE];
    int rc = flush(it);
    if (rc)
        return rc;
    make_header(h, it->fingerprint, it->count, it->payload_len, it->crc);
    errno = 0;
    if (pwrite(it->fd, h, HDR_SIZE, 0) != HDR_SIZE)
        return io_error(it, "writing the header of", it->partial, errno ? errno : EIO);
    if (fsync(it->fd) < 0)
        return io_error(it, "syncing", it->partial, errno);
    if (rename(it->partial, it->path) < 0)
        return io_error(it, "renaming", it->partial, errno);
    struct stat st;
    if (fstat(it->fd, &st) == 0)
        remember(it, &st);
    sync_dir(it->path);
    close(it->fd);
    it->fd = -1;
    it->locked = false;
    return 0;
}

/* Opens and locks "<path>.partial". The name is re-checked after locking: a
 * writer that just finished may have renamed or unlinked the file we opened,
 * and locking that inode would not exclude anyone. */
static int open_partial(cache_iter *it)
{
    for (int tries = 0; tries < 16; tries++) {
        int fd = open(it->partial, O_CREAT | O_RDWR | O_CLOEXEC, 0644);
        if (fd < 0)
            return io_error(it, "cannot create", it->partial, errno);
        if (flock(fd, LOCK_EX | LOCK_NB) < 0) {
            int e = errno;
            close(fd);
            if (e == EWOULDBLOCK)
                return sl__set_error(SL_EBUSY, "cache(%s): another writer holds %s", it->path,
                                     it->partial);
            return io_error(it, "cannot lock", it->partial, e);
        }
        struct stat a, b;
        if (fstat(fd, &a) == 0 && stat(it->partial, &b) == 0 && a.st_dev == b.st_dev &&
            a.st_ino == b.st_ino) {
            it->fd = fd;
            it->locked = true;
            if (a.st_size > 0) {
                sl__log(SL_LOG_WARN, "cache(%s): discarding the abandoned partial cache %s "
                        "(%lld bytes)", it->path, it->partial, (long long)a.st_size);
                if (ftruncate(fd, 0) < 0)
                    return io_error(it, "cannot truncate", it->partial, errno);
            }
            return 0;
        }
        close(fd);
    }
    return sl__set_error(SL_EBUSY, "cache(%s): %s keeps changing under us", it->path,
                         it->partial);
}

static int write_start(cache_iter *it)
{
    int rc = open_partial(it);
    if (rc)
        return rc;
    unsigned char h[HDR_SIZE] = {0};
    rc = write_all(it, h, HDR_SIZE); /* placeholder until the pass completes */
    if (rc)
        return rc;
    rc = sl__iter_make_input(&it->base, 0, INPUT_EPOCH, &it->input);
    if (rc)
        return rc;
    it->mode = FILE_WRITE;
    return 0;
}

static int file_write_next(cache_iter *it, sl_element **out)
{
    int rc = sl__iter_next(it->input, out);
    if (rc == SL_EOF) {
        rc = finish_write(it);
        if (rc)
            return fail_state(it, rc);
        it->mode = DONE;
        return SL_EOF;
    }
    if (rc)
        return rc;
    rc = put_element(it, *out);
    if (rc) {
        sl_element_release(*out);
        *out = NULL;
        return fail_state(it, rc);
    }
    return 0;
}

/* ---- file: reading ---- */

/* Checks header and checksum; on failure writes the reason into why. */
static bool validate(cache_iter *it, const struct stat *st, bool check_crc, char *why,
                     size_t n)
{
    unsigned char h[HDR_SIZE];
    if (st->st_size < HDR_SIZE || pread_full(it->fd, h, HDR_SIZE, 0) != HDR_SIZE) {
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
    if (fp != it->fingerprint) {
        snprintf(why, n, "built by a different pipeline (fingerprint %016llx, expected %016llx)",
                 (unsigned long long)fp, (unsigned long long)it->fingerprint);
        return false;
    }
    it->count = sl__get_le64(h + 24);
    it->payload_len = sl__get_le64(h + 32);
    if (it->payload_len != (uint64_t)st->st_size - HDR_SIZE) {
        snprintf(why, n, "payload is %lld bytes, the header says %llu (truncated?)",
                 (long long)st->st_size - HDR_SIZE, (unsigned long long)it->payload_len);
        return false;
    }
    if (!check_crc)
        return true;
    uint32_t crc = 0;
    for (uint64_t off = HDR_SIZE; off < (uint64_t)st->st_size;) {
        size_t k = (uint64_t)st->st_size - off < IO_BUF ? (size_t)((uint64_t)st->st_size - off)
                                                        : IO_BUF;
        ssize_t r = pread_full(it->fd, it->buf, k, off);
        if (r != (ssize_t)k) {
            snprintf(why, n, "read failed at offset %llu: %s", (unsigned long long)off,
                     r < 0 ? strerror(errno) : "file shrank");
            return false;
        }
        crc = sl__crc32(crc, it->buf, k);
        off += k;
    }
    if (crc != sl__get_le32(h + 40)) {
        snprintf(why, n, "checksum mismatch (payload crc32 %08x, header says %08x)", crc,
                 sl__get_le32(h + 40));
        return false;
    }
    return true;
}

/* Opens path if it holds a valid cache of this pipeline. Returns 1 to serve
 * it, 0 to rebuild, or an error. */
static int read_start(cache_iter *it)
{
    it->fd = open(it->path, O_RDONLY | O_CLOEXEC);
    if (it->fd < 0) {
        if (errno == ENOENT)
            return 0;
        return io_error(it, "cannot open", it->path, errno);
    }
    struct stat st;
    char why[256];
    if (fstat(it->fd, &st) < 0)
        return io_error(it, "cannot stat", it->path, errno);
    if (!validate(it, &st, !seen_before(it, &st), why, sizeof why)) {
        sl__log(SL_LOG_WARN, "cache(%s): not serving %s: %s; rebuilding it", it->path,
                it->path, why);
        close(it->fd);
        it->fd = -1;
        it->count = it->payload_len = 0;
        return 0;
    }
    remember(it, &st);
    it->off = it->load_off = HDR_SIZE;
    it->end = HDR_SIZE + it->payload_len;
    it->buf_len = it->buf_pos = 0;
    it->mode = FILE_READ;
    if (it->resume == RESUME_FILE) {
        /* the file holds this pipeline's pass, so the saved offset is a
         * record boundary in it; a bad one is a bad state */
        if ((uint64_t)it->resume_pos > it->count || it->resume_off < HDR_SIZE ||
            it->resume_off > it->end)
            return sl__set_error(SL_ECORRUPT, "saved state: cache(%s): element %lld at "
                                 "offset %llu is not in the file (%llu elements, %llu bytes)",
                                 it->path, (long long)it->resume_pos,
                                 (unsigned long long)it->resume_off,
                                 (unsigned long long)it->count, (unsigned long long)it->end);
        it->off = it->load_off = it->resume_off;
        it->count -= (uint64_t)it->resume_pos;
        it->resume_pos = 0; /* nothing to replay */
    }
    return 1;
}

static int corrupt(cache_iter *it, const char *what, uint64_t off)
{
    return sl__set_error(SL_ECORRUPT, "cache(%s): %s at offset %llu", it->path, what,
                         (unsigned long long)off);
}

static int get_bytes(cache_iter *it, void *dst, size_t n)
{
    unsigned char *d = dst;
    if (n > it->end - it->off)
        return corrupt(it, "truncated record", it->off);
    while (n) {
        if (it->buf_pos == it->buf_len) {
            size_t k = it->end - it->load_off < IO_BUF ? (size_t)(it->end - it->load_off)
                                                       : IO_BUF;
            void *into = n >= IO_BUF ? (void *)d : (void *)it->buf;
            if (n >= IO_BUF)
                k = n; /* big tensors go straight into place */
            ssize_t r = pread_full(it->fd, into, k, it->load_off);
            if (r != (ssize_t)k)
                return r < 0 ? io_error(it, "reading", it->path, errno)
                             : corrupt(it, "truncated record", it->load_off);
            it->load_off += k;
            if (into == d) {
                it->off += k;
                return 0;
            }
            it->buf_pos = 0;
            it->buf_len = k;
        }
        size_t k = it->buf_len - it->buf_pos < n ? it->buf_len - it->buf_pos : n;
        memcpy(d, it->buf + it->buf_pos, k);
        it->buf_pos += k;
        it->off += k;
        d += k;
        n -= k;
    }
    return 0;
}

static int get_field(cache_iter *it, size_t n, uint64_t *v)
{
    unsigned char b[8];
    int rc = get_bytes(it, b, n);
    if (rc)
        return rc;
    *v = n == 4 ? sl__get_le32(b) : sl__get_le64(b);
    return 0;
}

/* A string tensor's offset table must stay inside its bytes, or
 * sl_tensor_string would read past them. */
static bool strings_ok(const struct sl_tensor *t)
{
    int64_t n = sl__shape_count(t->ndim, t->shape);
    if ((uint64_t)n >= t->nbytes / 8)
        return false;
    const uint64_t *off = sl__str_offsets(t);
    uint64_t room = t->nbytes - ((uint64_t)n + 1) * 8;
    if (off[0] != 0 || off[n] != room)
        return false;
    for (int64_t i = 0; i < n; i++)
        if (off[i] > off[i + 1])
            return false;
    return true;
}

static int get_tensor(cache_iter *it, sl_element *el)
{
    uint64_t at = it->off, dtype, ndim, nbytes, dim;
    int64_t shape[SL_MAX_DIMS];
    int rc = get_field(it, 4, &dtype);
    if (!rc && dtype >= SL_DTYPE_COUNT)
        return corrupt(it, "bad dtype", at);
    if (!rc)
        rc = get_field(it, 4, &ndim);
    if (!rc && ndim > SL_MAX_DIMS)
        return corrupt(it, "bad rank", at + 4);
    int64_t count = 1;
    for (uint64_t d = 0; d < ndim && !rc; d++) {
        rc = get_field(it, 8, &dim);
        if (!rc && (dim > INT64_MAX || __builtin_mul_overflow(count, (int64_t)dim, &count)))
            return corrupt(it, "bad dimension", it->off - 8);
        shape[d] = (int64_t)dim;
    }
    if (!rc)
        rc = get_field(it, 8, &nbytes);
    if (rc)
        return rc;
    size_t item = sl_dtype_size((sl_dtype)dtype);
    if (nbytes > it->end - it->off ||
        (item && (count > INT64_MAX / (int64_t)item || nbytes != (uint64_t)count * item)))
        return corrupt(it, "bad tensor size", it->off - 8);
    struct sl_tensor *t = sl__element_push(el, (sl_dtype)dtype, (int)ndim, shape, nbytes);
    if (!t)
        return SL_ENOMEM;
    rc = get_bytes(it, t->data, nbytes);
    if (!rc && dtype == SL_STRING && !strings_ok(t))
        return corrupt(it, "bad string offsets", at);
    return rc;
}

static int file_read_next(cache_iter *it, sl_element **out)
{
    if (it->count == 0) {
        if (it->off != it->end)
            return fail_state(it, corrupt(it, "trailing bytes after the last element",
                                          it->off));
        it->mode = DONE;
        return SL_EOF;
    }
    uint64_t at = it->off, nt;
    int rc = get_field(it, 4, &nt);
    if (rc)
        return fail_state(it, rc);
    if (nt > 0xffff)
        return fail_state(it, corrupt(it, "bad tensor count", at));
    sl_element *el = sl__element_new((int)nt, INLINE_BYTES);
    if (!el)
        return fail_state(it, SL_ENOMEM); /* the record is half read */
    for (uint64_t i = 0; i < nt && !rc; i++)
        rc = get_tensor(it, el);
    if (rc) {
        sl_element_release(el);
        return fail_state(it, rc);
    }
    it->count--;
    *out = el;
    return 0;
}

/* ---- node iterator ---- */

static int file_start(cache_iter *it)
{
    it->buf = sl__alloc(IO_BUF);
    if (!it->buf)
        return SL_ENOMEM;
    it->fingerprint = sl_dataset_fingerprint(it->base.ds->inputs[0]);
    int rc = read_start(it);
    if (rc)
        return rc < 0 ? rc : 0;
    it->crc = 0;
    return write_start(it);
}

/* ---- automatic placement ---- */

static const char *const placement_names[] = {"undecided", "nothing", "memory", "file"};

static void publish_placement(cache_iter *it, int placement, int64_t bytes)
{
    atomic_store(&it->base.tree->cache_placement, placement);
    atomic_store(&it->base.tree->cache_bytes, bytes);
}

/* The memory a cache may take: half the RAM budget. */
static int64_t mem_share(const cache_iter *it)
{
    return it->base.tree->ram_budget / 2;
}

/* The pass no longer fits its share of memory: what it holds goes into
 * the spill file, and the rest of the pass follows it there. */
static int auto_spill(cache_iter *it)
{
    cache_ds *c = (cache_ds *)it->base.ds; /* (its mutable part, by the filler only) */
    mem_cache *m = it->mem;
    if (!c->spill_path) {
        char name[4096];
        snprintf(name, sizeof name, "%s/sluice-cache-%016llx-%d-%p", c->spill_dir,
                 (unsigned long long)sl_dataset_fingerprint(c->base.inputs[0]), (int)getpid(),
                 (void *)c);
        if (!(c->spill_path = sl__strdup(name)))
            return SL_ENOMEM;
    }
    it->path = c->spill_path;
    size_t n = strlen(it->path) + sizeof ".partial";
    if (!(it->partial = sl__alloc(n)) || !(it->buf = sl__alloc(IO_BUF)))
        return SL_ENOMEM;
    snprintf(it->partial, n, "%s.partial", it->path);
    it->fingerprint = sl_dataset_fingerprint(c->base.inputs[0]);
    it->crc = 0;
    int rc = open_partial(it);
    unsigned char h[HDR_SIZE] = {0};
    if (rc == 0)
        rc = write_all(it, h, HDR_SIZE);
    for (int64_t i = 0; rc == 0 && i < m->n; i++)
        rc = put_element(it, m->els[i]);
    if (rc)
        return rc;
    sl__log(SL_LOG_INFO, "cache(%s): %.1f MiB in %lld elements passed the memory share "
            "(%.1f MiB, half the RAM budget); spilling to %s", c->keep ? "memory" : "auto",
            (double)m->bytes / 1048576,
            (long long)m->n, (double)mem_share(it) / 1048576, it->path);
    mem_discard(m);
    mem_unhold(it);
    it->mode = AUTO_SPILL;
    return 0;
}

int sl__cache_choose(int64_t bytes, int64_t produce_ns, bool spilled, bool keep)
{
    bool cheap = bytes == 0 || (double)produce_ns < CHEAP_NS_PER_BYTE * (double)bytes;
    if (cheap && !keep)
        return SL_CACHE_NONE;
    return spilled ? SL_CACHE_FILE : SL_CACHE_MEMORY;
}

/* The first pass is complete: keep it where it pays, or not at all. */
static int auto_decide(cache_iter *it, bool spilled)
{
    cache_ds *c = (cache_ds *)it->base.ds;
    mem_cache *m = it->mem;
    double ns_per_byte = it->produced_bytes > 0 ? (double)it->produce_ns /
                                                      (double)it->produced_bytes : 0;
    int placement = sl__cache_choose(it->produced_bytes, it->produce_ns, spilled, c->keep);
    if (spilled) {
        int rc = finish_write(it);
        if (rc)
            return fail_state(it, rc);
        if (placement == SL_CACHE_NONE)
            unlink(c->spill_path);
    } else if (placement == SL_CACHE_NONE) {
        mem_discard(m);
        mem_unhold(it);
    }
    sl__log(SL_LOG_INFO, "cache(%s): %.1f MiB in %lld elements, produced at %.3f ns/byte "
            "(%.1f ms): keeping %s%s", c->keep ? "memory" : "auto",
            (double)it->produced_bytes / 1048576,
            (long long)it->served, ns_per_byte, (double)it->produce_ns / 1e6,
            placement == SL_CACHE_NONE ? "nothing" : placement_names[placement],
            placement == SL_CACHE_NONE ? " (producing is cheaper than reading back)"
            : placement == SL_CACHE_FILE ? " (over the memory share)" : "");
    pthread_mutex_lock(&m->mu);
    c->placement = placement;
    c->kept_bytes = placement == SL_CACHE_NONE ? 0 : it->produced_bytes;
    m->complete = placement == SL_CACHE_MEMORY;
    m->filling = false;
    pthread_mutex_unlock(&m->mu);
    it->filler = false;
    publish_placement(it, placement, c->kept_bytes);
    it->mode = DONE;
    return SL_EOF;
}

/* Next of an automatic first pass, in memory or spilled. */
static int auto_fill_next(cache_iter *it, sl_element **out)
{
    int64_t t0 = sl__now_ns();
    int rc = sl__iter_next(it->input, out);
    it->produce_ns += sl__now_ns() - t0;
    if (rc == SL_EOF)
        return auto_decide(it, it->mode == AUTO_SPILL);
    if (rc)
        return rc;
    it->produced_bytes += (int64_t)sl__element_bytes(*out);
    if (it->mode == AUTO_FILL) {
        rc = mem_append(it, *out);
        if (rc == 0 && it->mem->bytes > mem_share(it))
            rc = auto_spill(it);
    } else {
        rc = put_element(it, *out);
    }
    if (rc) { /* the element is lost to the cache: a retry would leave a gap */
        sl_element_release(*out);
        *out = NULL;
        if (rc == SL_ENOMEM)
            sl__set_error(rc, "cache(auto): out of memory");
        return fail_state(it, rc);
    }
    return 0;
}

/* Where a pass of an automatic cache comes from. */
static int auto_start(cache_iter *it)
{
    cache_ds *c = (cache_ds *)it->base.ds;
    mem_cache *m = c->mem;
    it->mem = m;
    pthread_mutex_lock(&m->mu);
    int placement = c->placement;
    bool fill = placement == SL_CACHE_UNDECIDED && !m->filling;
    if (fill)
        m->filling = it->filler = true;
    int64_t bytes = m->bytes, kept = c->kept_bytes;
    pthread_mutex_unlock(&m->mu);
    if (placement == SL_CACHE_MEMORY) {
        it->mode = MEM_SERVE;
        if (it->resume == RESUME_MEM && it->resume_pos <= m->n) {
            it->pos = it->resume_pos;
            it->resume_pos = 0;
        }
        mem_hold(it, bytes);
        publish_placement(it, placement, kept);
        return 0;
    }
    if (placement == SL_CACHE_FILE) {
        it->path = c->spill_path;
        it->fingerprint = sl_dataset_fingerprint(c->base.inputs[0]);
        if (!(it->buf = sl__alloc(IO_BUF)))
            return SL_ENOMEM;
        int rc = read_start(it);
        if (rc < 0)
            return rc;
        if (rc == 1) {
            publish_placement(it, placement, kept);
            return 0;
        }
        /* the spill file went (a tmp cleaner): serve from the input, and
         * let the next pass choose again */
        pthread_mutex_lock(&m->mu);
        c->placement = SL_CACHE_UNDECIDED;
        pthread_mutex_unlock(&m->mu);
        placement = SL_CACHE_UNDECIDED;
    }
    it->mode = fill ? AUTO_FILL : PASS;
    publish_placement(it, placement, 0);
    return sl__iter_make_input(&it->base, 0, INPUT_EPOCH, &it->input);
}

static int step(cache_iter *it, sl_element **out);

/* A position the cache cannot serve from (an empty memory cache in a new
 * process, a cache file that is gone): the pass starts over, filling the
 * cache, and drops the elements already returned. */
/* Passes again the elements a restored pass had returned, which fill
 * the cache as they did: 0, or the input's code (SL__AGAIN leaves the
 * rest for the next call). */
static int replay(cache_iter *it)
{
    for (; it->to_replay > 0; it->to_replay--) {
        sl_element *el;
        int rc = step(it, &el);
        if (rc == SL_EOF)
            return sl__set_error(SL_EMISMATCH, "saved state: cache(%s) had returned %lld "
                                 "elements, its input has only %lld", it->path ? it->path :
                                 "memory", (long long)it->resume_pos,
                                 (long long)(it->resume_pos - it->to_replay));
        if (rc)
            return rc;
        sl_element_release(el);
    }
    return 0;
}

static int start(cache_iter *it)
{
    const cache_ds *c = (const cache_ds *)it->base.ds;
    int64_t returned = it->resume_pos;
    int rc;
    if (it->resume == RESUME_DONE) {
        it->mode = DONE;
        return 0;
    }
    if (c->automatic) {
        rc = auto_start(it);
    } else if (c->path) {
        rc = file_start(it);
    } else {
        mem_start(it);
        rc = it->mode == MEM_SERVE ? 0
                                   : sl__iter_make_input(&it->base, 0, INPUT_EPOCH, &it->input);
    }
    if (rc == 0 && it->mode != FILE_READ && it->mode != MEM_SERVE)
        it->to_replay = it->resume_pos; /* cache_next replays them */
    else if (rc == 0 && it->mode == MEM_SERVE && it->resume_pos > it->mem->n)
        rc = sl__set_error(SL_EMISMATCH, "saved state: cache(memory) had returned %lld "
                           "elements, it holds %lld", (long long)it->resume_pos,
                           (long long)it->mem->n);
    it->served = returned;
    return rc ? fail_state(it, rc) : 0;
}

static int cache_next(sl__iter *base, sl_element **out)
{
    cache_iter *it = (cache_iter *)base;
    if (it->mode == START) {
        int rc = start(it);
        if (rc)
            return rc;
    }
    if (it->to_replay > 0) {
        int rc = replay(it);
        if (rc)
            return rc == SL__AGAIN ? rc : fail_state(it, rc);
    }
    int rc = step(it, out);
    if (rc == 0)
        it->served++;
    return rc;
}

static int step(cache_iter *it, sl_element **out)
{
    switch (it->mode) {
    case PASS:
        return sl__iter_next(it->input, out);
    case MEM_FILL:
        return mem_fill_next(it, out);
    case MEM_SERVE:
        return mem_serve_next(it, out);
    case FILE_WRITE:
        return file_write_next(it, out);
    case FILE_READ:
        return file_read_next(it, out);
    case AUTO_FILL:
    case AUTO_SPILL:
        return auto_fill_next(it, out);
    case FAILED:
        return sl__set_error(it->failed_rc, "cache(%s): stopped after an earlier error",
                             it->path ? it->path : "memory");
    default:
        return SL_EOF;
    }
}

static void cache_destroy(sl__iter *base)
{
    cache_iter *it = (cache_iter *)base;
    if (it->filler)
        mem_end_fill(it, false); /* (an automatic one stays undecided) */
    mem_unhold(it);
    if (it->locked) /* an unfinished pass: remove it while still holding the lock */
        unlink(it->partial);
    if (it->fd >= 0)
        close(it->fd);
    sl__free(it->buf, it->buf ? IO_BUF : 0);
    sl__strfree(it->partial);
    sl__iter_free(it->input);
}

/* Kind, elements returned, file offset; then the input's record while the
 * pass comes from the input. */
static int cache_save(sl__iter *base, sl__bytes *w)
{
    cache_iter *it = (cache_iter *)base;
    int64_t f[3] = {RESUME_NONE, it->served, 0};
    switch (it->mode) {
    case START:
        f[0] = it->resume; /* not started: what it would resume */
        f[1] = it->resume_pos;
        f[2] = (int64_t)it->resume_off;
        return sl__state_node(w, base, 3, f, 0);
    case PASS:
    case MEM_FILL:
    case FILE_WRITE:
    case AUTO_FILL:
    case AUTO_SPILL:
        f[0] = RESUME_INPUT;
        return sl__save_sync(w, base, 3, f, it->input);
    case MEM_SERVE:
        f[0] = RESUME_MEM;
        break;
    case FILE_READ:
        f[0] = RESUME_FILE;
        f[2] = (int64_t)it->off;
        break;
    case DONE:
        f[0] = RESUME_DONE;
        break;
    default:
        return sl__set_error(SL_ESTATE, "cache(%s): failed earlier; there is no position to "
                             "save", it->path ? it->path : "memory");
    }
    return sl__state_node(w, base, 3, f, 0);
}

static const sl__iter_ops cache_iter_ops = {
    .next = cache_next,
    .destroy = cache_destroy,
    .save = cache_save,
};

static int cache_make(const sl_dataset *ds, sl__tree *tree, uint64_t key, int64_t epoch,
                      sl__iter **out)
{
    const cache_ds *c = (const cache_ds *)ds;
    cache_iter *it = sl__iter_alloc(&cache_iter_ops, sizeof *it, ds, tree, key, epoch);
    if (!it)
        return SL_ENOMEM;
    it->fd = -1;
    it->path = c->path;
    if (c->path) {
        size_t n = strlen(c->path) + sizeof ".partial";
        it->partial = sl__alloc(n);
        if (!it->partial) {
            sl__iter_free(&it->base);
            return SL_ENOMEM;
        }
        snprintf(it->partial, n, "%s.partial", c->path);
    }
    int64_t f[3];
    int rc = sl__iter_restored(&it->base, 3, f);
    if (rc > 0) {
        it->resume = (int)f[0];
        it->resume_pos = f[1];
        it->resume_off = (uint64_t)f[2];
        rc = sl__state_range(&it->base, "kind", f[0], RESUME_NONE, RESUME_DONE);
        if (rc == 0)
            rc = sl__state_range(&it->base, "returned", f[1], 0, INT64_MAX);
        if (rc == 0 && it->resume == RESUME_INPUT) {
            /* the input resumes where it was, past what the cache has: this
             * pass only passes through, a later one fills the cache */
            rc = sl__iter_make_input(&it->base, 0, INPUT_EPOCH, &it->input);
            it->mode = PASS;
            it->served = it->resume_pos;
        }
    }
    if (rc < 0) {
        sl__iter_free(&it->base);
        return rc;
    }
    *out = &it->base;
    return 0;
}

static int64_t cache_card(const sl_dataset *ds)
{
    return sl_dataset_cardinality(ds->inputs[0]);
}

static uint64_t cache_fp(const sl_dataset *ds, uint64_t h)
{
    const cache_ds *c = (const cache_ds *)ds;
    return sl__hash_str(sl__hash_u64(h, c->automatic && !c->keep ? 2 : c->path != NULL), c->path);
}

static void cache_ds_destroy(sl_dataset *ds)
{
    cache_ds *c = (cache_ds *)ds;
    sl__strfree(c->path);
    if (c->spill_path) {
        unlink(c->spill_path); /* a spilled pass is this dataset's alone */
        sl__strfree(c->spill_path);
    }
    sl__strfree(c->spill_dir);
    if (c->mem) {
        mem_discard(c->mem);
        pthread_mutex_destroy(&c->mem->mu);
        sl__free(c->mem, sizeof *c->mem);
    }
}

static const sl__node_ops cache_ops = {
    .kind = "cache",
    .make_iter = cache_make,
    .cardinality = cache_card,
    .fingerprint = cache_fp,
    .destroy = cache_ds_destroy,
};

static sl_dataset *cache_new(sl_dataset *in, const char *path);

SL_API sl_dataset *sl_cache_auto(sl_dataset *in, const char *spill_dir)
{
    cache_ds *c = (cache_ds *)cache_new(in, NULL);
    if (!c)
        return NULL;
    c->automatic = true;
    const char *dir = spill_dir && *spill_dir ? spill_dir : getenv("TMPDIR");
    c->spill_dir = sl__strdup(dir && *dir ? dir : "/tmp");
    if (!c->spill_dir)
        return sl__dataset_fail(&c->base, SL_ENOMEM, "cache(auto): out of memory");
    return &c->base;
}

SL_API sl_dataset *sl_cache(sl_dataset *in, const char *path)
{
    if (path == SL_CACHE_AUTO)
        return sl_cache_auto(in, NULL);
    if (path)
        return cache_new(in, path);
    /* in memory: the automatic cache that always keeps its pass, so one
     * that outgrows its share of the RAM budget spills to a file rather
     * than growing without end */
    cache_ds *c = (cache_ds *)sl_cache_auto(in, NULL);
    if (!c)
        return NULL;
    c->keep = true;
    return &c->base;
}

static sl_dataset *cache_new(sl_dataset *in, const char *path)
{
    cache_ds *c = (cache_ds *)sl__dataset_new(&cache_ops, sizeof *c, in);
    if (!c)
        return NULL;
    if (path && !*path)
        return sl__dataset_fail(&c->base, SL_EINVAL, "cache: empty path (NULL caches in memory)");
    if (path) {
        c->path = sl__strdup(path);
        if (!c->path)
            return sl__dataset_fail(&c->base, SL_ENOMEM, "cache(%s): out of memory", path);
        return &c->base;
    }
    c->mem = sl__calloc(1, sizeof *c->mem);
    if (!c->mem)
        return sl__dataset_fail(&c->base, SL_ENOMEM, "cache: out of memory");
    pthread_mutex_init(&c->mem->mu, NULL);
    return &c->base;
}
