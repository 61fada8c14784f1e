/*
 * tfrecord_indexed (sl_tfrecord_indexed): TFRecord shards read by record
 * index, so element i is fetched directly: shuffle(ALL) permutes the
 * records of every shard with no buffer, and a saved position seeks.
 *
 * Each shard's index comes, at build time, from the file the caller names
 * (DALI's tfrecord2idx text), else from "<shard>.idx" beside the shard when
 * it is no older than the shard and its records end where the shard does,
 * else from one pass over the shard's headers, written back beside it in
 * the same format (kept in memory only where the folder is read-only).
 *
 * A record is one preadv: header, data straight into the element's string
 * tensor, trailing CRC. Its length is checked against the index and its
 * CRCs as sl_tfrecord checks them; a bad record is an element error under
 * the error policy, naming the shard and the offset. Descriptors are
 * opened at a shard's first read and kept (up to MAX_KEPT_FDS; beyond
 * them a read opens and closes its own).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>
#include "../core/crc32c.h"
#include "../core/le.h"
#include "../core/log.h"
#include "../graph/sync.h"
#include "record_index.h"

#define MAX_KEPT_FDS 256
#define FRAMING 16

typedef struct shard {
    char *path;
    sl_element *path_el; /* the path as a scalar string: origin and SL_WITH_PATHS */
    sl__record_index idx;
    atomic_int fd;       /* -1 until first read */
} shard;

typedef struct tfri_ds {
    sl_dataset base;
    unsigned flags;
    int n;
    shard *shards;
    int64_t *first; /* n + 1: records before shard k */
    atomic_int kept; /* descriptors held open */
} tfri_ds;

/* The shard that holds record i: the last k with first[k] <= i. */
static int shard_of(const tfri_ds *d, int64_t i)
{
    int lo = 0, hi = d->n - 1;
    while (lo < hi) {
        int mid = lo + (hi - lo + 1) / 2;
        if (d->first[mid] <= i)
            lo = mid;
        else
            hi = mid - 1;
    }
    return lo;
}

/* A descriptor for shard s, and whether the caller must close it. */
static int shard_fd(tfri_ds *d, shard *s, bool *own)
{
    *own = false;
    int fd = atomic_load_explicit(&s->fd, memory_order_acquire);
    if (fd >= 0)
        return fd;
    fd = open(s->path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return sl__set_error(SL_EIO, "%s: %s", s->path, strerror(errno));
    if (atomic_fetch_add(&d->kept, 1) >= MAX_KEPT_FDS) {
        atomic_fetch_sub(&d->kept, 1);
        *own = true;
        return fd;
    }
    int none = -1;
    if (!atomic_compare_exchange_strong(&s->fd, &none, fd)) { /* another thread won */
        close(fd);
        atomic_fetch_sub(&d->kept, 1);
        return none;
    }
    return fd;
}

static int tfri_get(const sl_dataset *ds, int64_t i, sl_element **out)
{
    tfri_ds *d = (tfri_ds *)ds; /* descriptors are opened lazily */
    int k = shard_of(d, i);
    shard *s = &d->shards[k];
    int64_t r = i - d->first[k];
    uint64_t at = sl__record_offset(&s->idx, r);
    size_t len = sl__record_size(&s->idx, r) - FRAMING;
    bool paths = d->flags & SL_WITH_PATHS;
    sl_element *el = sl__element_new(paths ? 2 : 1, 0);
    struct sl_tensor *t = el ? sl__element_push(el, SL_STRING, 0, NULL, 16 + len) : NULL;
    if (!t) {
        sl_element_release(el);
        return sl__set_error(SL_ENOMEM, "%s: no memory for a record of %zu bytes", s->path, len);
    }
    uint64_t *off = t->data;
    off[0] = 0;
    off[1] = len;
    unsigned char hdr[12], crc[4];
    struct iovec iov[3] = {{hdr, sizeof hdr}, {off + 2, len}, {crc, sizeof crc}};
    bool own;
    int fd = shard_fd(d, s, &own);
    ssize_t got = fd < 0 ? -1 : preadv(fd, iov, 3, (off_t)at);
    int err = errno;
    if (own)
        close(fd);
    const char *why = NULL;
    if (fd < 0)
        why = "";
    else if (got < 0)
        sl__set_error(SL_EIO, "%s: read at byte %llu: %s", s->path, (unsigned long long)at,
                      strerror(err));
    else if ((size_t)got < len + FRAMING)
        why = "the shard ends inside the record (it changed since it was indexed)";
    else if (sl__crc32c_mask(sl__crc32c(0, hdr, 8)) != sl__get_le32(hdr + 8))
        why = "bad length CRC";
    else if (sl__get_le64(hdr) != len)
        why = "the record's length is not the index's (an index of another file?)";
    else if (!(d->flags & SL_TFRECORD_NO_DATA_CRC) &&
             sl__crc32c_mask(sl__crc32c(0, off + 2, len)) != sl__get_le32(crc))
        why = "bad data CRC in the record";
    if (why && *why)
        sl__set_error(SL_ECORRUPT, "%s: %s at byte %llu (record %lld of the shard)", s->path,
                      why, (unsigned long long)at, (long long)r);
    if (fd < 0 || got < 0 || why) {
        sl_element_release(el);
        int code = sl_last_error_code();
        sl__error_prefix(sl_dataset_name(ds));
        return code;
    }
    if (paths && sl_element_add_shared(el, s->path_el, 0) < 0) {
        sl_element_release(el);
        return sl__set_error(SL_ENOMEM, "tfrecord_indexed: out of memory");
    }
    sl__element_set_origin(el, s->path_el);
    *out = el;
    return 0;
}

/* The indexed source's next, with the error policy: a record that cannot
 * be read is consumed all the same, so a skip moves on. */
static int tfri_next(sl__iter *base, sl_element **out)
{
    sl__indexed_iter *it = (sl__indexed_iter *)base;
    while (it->position < it->n) {
        int rc = base->ds->ops->get(base->ds, it->position, out);
        it->position++;
        if (rc == 0) {
            base->ok_count++;
            return 0;
        }
        if ((rc = sl__policy(base, rc)))
            return rc;
    }
    return SL_EOF;
}

static int64_t tfri_cardinality(const sl_dataset *ds)
{
    const tfri_ds *d = (const tfri_ds *)ds;
    return d->first[d->n];
}

/* The shards' paths and record counts: an index rebuilt for a changed
 * shard changes the dataset's identity. */
static uint64_t tfri_fingerprint(const sl_dataset *ds, uint64_t h)
{
    const tfri_ds *d = (const tfri_ds *)ds;
    h = sl__hash_u64(h, d->flags);
    for (int k = 0; k < d->n; k++) {
        h = sl__hash_str(h, d->shards[k].path);
        h = sl__hash_u64(h, (uint64_t)d->shards[k].idx.count);
    }
    return h;
}

static void tfri_destroy(sl_dataset *ds)
{
    tfri_ds *d = (tfri_ds *)ds;
    for (int k = 0; d->shards && k < d->n; k++) {
        shard *s = &d->shards[k];
        int fd = atomic_load(&s->fd);
        if (fd >= 0)
            close(fd);
        sl__record_index_free(&s->idx);
        sl_element_release(s->path_el);
        sl__strfree(s->path);
    }
    if (d->shards)
        sl__free(d->shards, (size_t)d->n * sizeof *d->shards);
    if (d->first)
        sl__free(d->first, (size_t)(d->n + 1) * sizeof *d->first);
}

static bool tfri_can_get(const sl_dataset *ds)
{
    (void)ds;
    return true;
}

static const sl__sync_def tfri_def = {
    .node = {.kind = "tfrecord_indexed", .make_iter = sl__sync_make,
             .cardinality = tfri_cardinality, .fingerprint = tfri_fingerprint,
             .destroy = tfri_destroy, .can_get = tfri_can_get, .get = tfri_get},
    .iter = {.next = tfri_next, .destroy = sl__sync_destroy, .save = sl__indexed_save,
             .get = sl__indexed_get},
    .iter_size = sizeof(sl__indexed_iter), SL__SYNC_STATE(sl__indexed_state),
    .start = sl__indexed_start,
};

static int read_text(const char *path, sl__bytes *out)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return sl__set_error(SL_EIO, "%s: %s", path, strerror(errno));
    char buf[65536];
    ssize_t n;
    int rc = 0;
    while (rc == 0 && (n = read(fd, buf, sizeof buf)) != 0) {
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            rc = sl__set_error(SL_EIO, "%s: %s", path, strerror(errno));
        else if (sl__bytes_append(out, buf, (size_t)n))
            rc = sl__set_error(SL_ENOMEM, "%s: out of memory", path);
    }
    close(fd);
    return rc;
}

/* Shard s's index: from `given`, from "<shard>.idx" when it is current,
 * or built and written there. */
static int load_index(shard *s, const char *given)
{
    int fd = open(s->path, O_RDONLY | O_CLOEXEC);
    struct stat st;
    if (fd < 0 || fstat(fd, &st) != 0) {
        int rc = sl__set_error(SL_EIO, "%s: %s", s->path, strerror(errno));
        if (fd >= 0)
            close(fd);
        return rc;
    }
    char beside[4096];
    snprintf(beside, sizeof beside, "%s.idx", s->path);
    struct stat ist;
    bool current = !given && stat(beside, &ist) == 0 &&
                   (ist.st_mtim.tv_sec > st.st_mtim.tv_sec ||
                    (ist.st_mtim.tv_sec == st.st_mtim.tv_sec &&
                     ist.st_mtim.tv_nsec >= st.st_mtim.tv_nsec));
    int rc;
    if (given || current) {
        sl__bytes text = {0};
        rc = read_text(given ? given : beside, &text);
        if (rc == 0)
            rc = sl__record_index_parse((const char *)text.p, text.n, (uint64_t)st.st_size,
                                        FRAMING, given ? given : beside, &s->idx);
        sl__bytes_free(&text);
        if (rc == 0 || given) {
            close(fd);
            return rc;
        }
        /* a stale or damaged index of our own making: build it again */
        sl__log(SL_LOG_WARN, "tfrecord_indexed: %s; indexing %s again", sl_last_error(),
                s->path);
    }
    rc = sl__tfrecord_index_build(fd, (uint64_t)st.st_size, s->path, &s->idx);
    close(fd);
    if (rc == 0 && sl__record_index_write(&s->idx, beside) != 0)
        sl__log(SL_LOG_INFO, "tfrecord_indexed: keeping the index of %s in memory (%s)",
                s->path, sl_last_error());
    return rc;
}

SL_API sl_dataset *sl_tfrecord_indexed(const char *const *paths, int n,
                                       const char *const *index_paths, unsigned flags)
{
    if (!paths || n < 1 || (flags & ~(SL_WITH_PATHS | SL_TFRECORD_NO_DATA_CRC))) {
        sl__set_error(SL_EINVAL, "tfrecord_indexed: %s",
                      !paths || n < 1 ? "no shards" : "unknown flags");
        return NULL;
    }
    tfri_ds *d = (tfri_ds *)sl__dataset_new_source(&tfri_def.node, sizeof *d);
    if (!d)
        return NULL;
    d->flags = flags;
    d->shards = sl__calloc((size_t)n, sizeof *d->shards);
    d->first = sl__calloc((size_t)n + 1, sizeof *d->first);
    if (!d->shards || !d->first) {
        sl__free(d->shards, (size_t)n * sizeof *d->shards);
        sl__free(d->first, ((size_t)n + 1) * sizeof *d->first);
        d->shards = NULL, d->first = NULL;
        return sl__dataset_fail(&d->base, SL_ENOMEM, "tfrecord_indexed: out of memory");
    }
    d->n = n;
    for (int k = 0; k < n; k++)
        atomic_init(&d->shards[k].fd, -1);
    for (int k = 0; k < n; k++) {
        shard *s = &d->shards[k];
        if (!paths[k])
            return sl__dataset_fail(&d->base, SL_EINVAL, "tfrecord_indexed: path %d is NULL", k);
        s->path = sl__strdup(paths[k]);
        s->path_el = sl_element_create(1);
        if (!s->path || !s->path_el || sl_element_add_string(s->path_el, paths[k],
                                                             strlen(paths[k])) != 0)
            return sl__dataset_fail(&d->base, SL_ENOMEM, "tfrecord_indexed: out of memory");
        int rc = load_index(s, index_paths ? index_paths[k] : NULL);
        if (rc)
            return sl__dataset_fail(&d->base, rc, "tfrecord_indexed: %s", sl_last_error());
        d->first[k + 1] = d->first[k] + s->idx.count;
    }
    return sl__dataset_structured(&d->base, sl_structure_parse(flags & SL_WITH_PATHS
                                                                   ? "(string[], string[])"
                                                                   : "string[]"));
}
