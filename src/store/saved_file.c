/* The files of a saved dataset: format, writer, reader (saved_file.h). */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#ifndef SLUICE_NO_ZLIB
#include <zlib.h>
#endif
#include "../core/alloc.h"
#include "../core/crc32c.h"
#include "../core/error.h"
#include "../core/fileio.h"
#include "../core/le.h"
#include "../core/log.h"
#include "../core/structure.h"
#include "../core/bytes.h"
#include "../runtime/runtime.h"
#include "record.h"
#include "saved_file.h"

#define MANIFEST "manifest"
#define MAGIC "SLSHARD1"
#define VERSION 1u
#define FILE_HDR 16
#define CHUNK_HDR 20
#define RECORD_HDR 12
/* A chunk is cut once its records pass this many bytes; an element
 * bigger than that has a chunk of its own. */
#define CHUNK_BYTES (1u << 20)
/* Elements (and their bytes) a writer thread may have queued. */
#define QUEUE_LEN 32
#define QUEUE_BYTES (64ll << 20)
/* deflate cannot shrink data by more than ~1032:1; a chunk header that
 * claims more is damaged (and would have us allocate for a bomb). */
#define MAX_RATIO 1032u

static const char *const compression_names[] = {"none", "zlib", "gzip"};

static void shard_name(char *buf, size_t n, const char *dir, int64_t index)
{
    snprintf(buf, n, "%s/shard-%08lld.sls", dir, (long long)index);
}

static int io_error(const char *op, const char *path, const char *what, int err)
{
    return sl__set_error(sl__errno_code(err), "%s(%s): %s: %s", op, path, what, strerror(err));
}

/* ---- one element as bytes (record.h) ---- */

static int append_cb(void *self, const void *p, size_t n)
{
    return sl__bytes_append(self, p, n);
}

typedef struct mem_src {
    const unsigned char *p;
} mem_src;

static int mem_read(void *self, void *dst, size_t n)
{
    mem_src *m = self;
    memcpy(dst, m->p, n);
    m->p += n;
    return 0;
}

/* The element that is exactly p[0..n): 0 and *out; SL_ECORRUPT with *why,
 * or SL_ENOMEM. */
static int decode_element(const unsigned char *p, size_t n, sl_element **out, const char **why)
{
    mem_src m = {p};
    sl__record_src src = {mem_read, &m, n};
    uint64_t where;
    int rc = sl__record_get(&src, out, why, &where);
    if (rc == 0 && src.left) {
        sl_element_release(*out);
        *why = "trailing bytes in a record";
        rc = SL_ECORRUPT;
    }
    return rc;
}

/* ---- compression ---- */

#ifndef SLUICE_NO_ZLIB
static int zbits(int compression)
{
    return compression == SL_COMPRESSION_GZIP ? 31 : 15;
}
#endif

#ifdef SLUICE_NO_ZLIB
static int no_zlib(const char *op, const char *dir)
{
    return sl__set_error(SL_EUNSUPPORTED, "%s(%s): compressed, but this build has no zlib "
                         "(SLUICE_WITH_ZLIB=OFF)", op, dir);
}
#endif

/* raw -> out, replacing out's contents. 0 or SL_ENOMEM / SL_EINTERNAL. */
static int deflate_chunk(int compression, const sl__bytes *raw, sl__bytes *out)
{
#ifdef SLUICE_NO_ZLIB
    (void)compression, (void)raw, (void)out;
    return SL_EUNSUPPORTED;
#else
    z_stream z = {0};
    if (deflateInit2(&z, Z_DEFAULT_COMPRESSION, Z_DEFLATED, zbits(compression), 8,
                     Z_DEFAULT_STRATEGY) != Z_OK)
        return SL_ENOMEM;
    uLong bound = deflateBound(&z, (uLong)raw->n) + 32;
    out->n = 0;
    int rc = sl__bytes_reserve(out, bound);
    if (!rc) {
        z.next_in = raw->p;
        z.avail_in = (uInt)raw->n;
        z.next_out = out->p;
        z.avail_out = (uInt)out->cap;
        rc = deflate(&z, Z_FINISH) == Z_STREAM_END ? 0 : SL_EINTERNAL;
        out->n = out->cap - z.avail_out;
    }
    deflateEnd(&z);
    return rc;
#endif
}

/* in[0..n) -> exactly raw_len bytes of out. NULL or what is wrong. */
static const char *inflate_chunk(int compression, const unsigned char *in, size_t n,
                                 sl__bytes *out, size_t raw_len, int *rc)
{
#ifdef SLUICE_NO_ZLIB
    (void)compression, (void)in, (void)n, (void)out, (void)raw_len;
    *rc = SL_EUNSUPPORTED;
    return "compressed, but this build has no zlib (SLUICE_WITH_ZLIB=OFF)";
#else
    out->n = 0;
    if (sl__bytes_reserve(out, raw_len ? raw_len : 1)) {
        *rc = SL_ENOMEM;
        return "out of memory";
    }
    z_stream z = {0};
    if (inflateInit2(&z, zbits(compression)) != Z_OK) {
        *rc = SL_ENOMEM;
        return "out of memory";
    }
    z.next_in = (unsigned char *)in;
    z.avail_in = (uInt)n;
    z.next_out = out->p;
    z.avail_out = (uInt)raw_len;
    int zr = inflate(&z, Z_FINISH);
    size_t got = raw_len - z.avail_out;
    bool whole = zr == Z_STREAM_END && z.avail_in == 0 && got == raw_len;
    inflateEnd(&z);
    if (!whole)
        return "chunk does not inflate to its length";
    out->n = raw_len;
    return NULL;
#endif
}

/* ---- writing ---- */

typedef struct shard_out {
    int64_t index;
    int fd; /* -1: not created yet */
    sl__bytes raw;
    uint32_t records; /* in raw */
    int64_t elements;
    uint64_t size; /* bytes written */
} shard_out;

typedef struct job {
    int64_t shard, index;
    sl_element *el;
} job;

typedef struct worker {
    sl__save_writer *w;
    pthread_t th;
    bool started;
    pthread_mutex_t mu;
    pthread_cond_t cv; /* the queue changed */
    job q[QUEUE_LEN];
    int head, count;
    int64_t queued_bytes;
    bool closing, stop;
    shard_out **shards; /* the shards this thread writes */
    int nshards, cap;
    shard_out *last; /* the shard of the last job */
    sl__bytes zbuf;
} worker;

struct sl__save_writer {
    char *op, *dir;
    int compression, nthreads;
    worker *workers;
    int64_t next_index;
    int nshards; /* over all workers; under err_mu */
    pthread_mutex_t err_mu;
    int err;
    char msg[512];
};

/* The first error of any thread wins; the calling thread's message. */
static void record_error(sl__save_writer *w, int rc)
{
    pthread_mutex_lock(&w->err_mu);
    if (!w->err) {
        w->err = rc;
        snprintf(w->msg, sizeof w->msg, "%s", sl__error_msg());
    }
    pthread_mutex_unlock(&w->err_mu);
}

static int first_error(sl__save_writer *w)
{
    pthread_mutex_lock(&w->err_mu);
    int rc = w->err;
    if (rc)
        sl__set_error_str(rc, w->msg);
    pthread_mutex_unlock(&w->err_mu);
    return rc;
}

static int shard_write(sl__save_writer *w, shard_out *s, const void *p, size_t n)
{
    if (sl__write_all(s->fd, p, n) < 0) {
        char path[4096];
        shard_name(path, sizeof path, w->dir, s->index);
        return io_error(w->op, path, "writing", errno);
    }
    s->size += n;
    return 0;
}

static int flush_chunk(worker *k, shard_out *s)
{
    sl__save_writer *w = k->w;
    if (!s->records)
        return 0;
    if (s->raw.n > UINT32_MAX)
        return sl__set_error(SL_ERANGE, "%s(%s): an element of %zu bytes is larger than a "
                             "saved dataset holds (4 GiB)", w->op, w->dir, s->raw.n);
    const sl__bytes *stored = &s->raw;
    if (w->compression != SL_COMPRESSION_NONE) {
        int rc = deflate_chunk(w->compression, &s->raw, &k->zbuf);
        if (rc)
            return sl__set_error(rc, "%s(%s): compressing a chunk failed", w->op, w->dir);
        stored = &k->zbuf;
    }
    if (stored->n > UINT32_MAX)
        return sl__set_error(SL_ERANGE, "%s(%s): a chunk of %zu bytes is larger than a "
                             "saved dataset holds (4 GiB)", w->op, w->dir, stored->n);
    unsigned char h[CHUNK_HDR];
    sl__put_le32(h, (uint32_t)stored->n);
    sl__put_le32(h + 4, (uint32_t)s->raw.n);
    sl__put_le32(h + 8, s->records);
    sl__put_le32(h + 12, sl__crc32c(0, stored->p, stored->n));
    sl__put_le32(h + 16, sl__crc32c(0, h, 16));
    int rc = shard_write(w, s, h, CHUNK_HDR);
    if (!rc)
        rc = shard_write(w, s, stored->p, stored->n);
    s->raw.n = 0;
    s->records = 0;
    return rc;
}

static shard_out *shard_of(worker *k, int64_t index)
{
    if (k->last && k->last->index == index)
        return k->last;
    for (int i = 0; i < k->nshards; i++)
        if (k->shards[i]->index == index)
            return k->last = k->shards[i];
    sl__save_writer *w = k->w;
    pthread_mutex_lock(&w->err_mu);
    bool room = w->nshards < SL__SAVE_MAX_SHARDS;
    w->nshards += room;
    pthread_mutex_unlock(&w->err_mu);
    if (!room) {
        sl__set_error(SL_ERANGE, "%s(%s): the shard function used more than %d shards",
                      w->op, w->dir, SL__SAVE_MAX_SHARDS);
        return NULL;
    }
    if (k->nshards == k->cap) {
        int cap = k->cap ? 2 * k->cap : 8;
        shard_out **a = sl__alloc((size_t)cap * sizeof *a);
        if (!a) {
            sl__set_error(SL_ENOMEM, "%s(%s): out of memory", w->op, w->dir);
            return NULL;
        }
        if (k->nshards)
            memcpy(a, k->shards, (size_t)k->nshards * sizeof *a);
        sl__free(k->shards, (size_t)k->cap * sizeof *a);
        k->shards = a;
        k->cap = cap;
    }
    shard_out *s = sl__calloc(1, sizeof *s);
    if (!s) {
        sl__set_error(SL_ENOMEM, "%s(%s): out of memory", w->op, w->dir);
        return NULL;
    }
    s->index = index;
    s->fd = -1;
    k->shards[k->nshards++] = s;
    char path[4096];
    shard_name(path, sizeof path, w->dir, index);
    s->fd = open(path, O_CREAT | O_EXCL | O_WRONLY | O_CLOEXEC, 0644);
    if (s->fd < 0) {
        io_error(w->op, path, "cannot create", errno);
        return NULL;
    }
    unsigned char h[FILE_HDR];
    memcpy(h, MAGIC, 8);
    sl__put_le32(h + 8, VERSION);
    sl__put_le32(h + 12, (uint32_t)w->compression);
    return shard_write(w, s, h, FILE_HDR) ? NULL : (k->last = s);
}

static int write_job(worker *k, const job *j)
{
    shard_out *s = shard_of(k, j->shard);
    if (!s)
        return sl_last_error_code();
    size_t at = s->raw.n;
    unsigned char h[RECORD_HDR] = {0};
    int rc = sl__bytes_append(&s->raw, h, RECORD_HDR);
    if (!rc)
        rc = sl__record_put(j->el, append_cb, &s->raw);
    if (rc) {
        s->raw.n = at;
        return sl__set_error(SL_ENOMEM, "%s(%s): out of memory", k->w->op, k->w->dir);
    }
    size_t len = s->raw.n - at - RECORD_HDR;
    if (len > UINT32_MAX) {
        s->raw.n = at;
        return sl__set_error(SL_ERANGE, "%s(%s): element %lld is %zu bytes, over the 4 GiB "
                             "a record holds", k->w->op, k->w->dir, (long long)j->index, len);
    }
    sl__put_le64(s->raw.p + at, (uint64_t)j->index);
    sl__put_le32(s->raw.p + at + 8, (uint32_t)len);
    s->records++;
    s->elements++;
    return s->raw.n >= CHUNK_BYTES ? flush_chunk(k, s) : 0;
}

/* The end of the pass: the last chunks, then each file made durable. */
static int close_shards(worker *k)
{
    int rc = 0;
    for (int i = 0; i < k->nshards && !rc; i++) {
        shard_out *s = k->shards[i];
        rc = flush_chunk(k, s);
        if (!rc && fsync(s->fd) < 0) {
            char path[4096];
            shard_name(path, sizeof path, k->w->dir, s->index);
            rc = io_error(k->w->op, path, "syncing", errno);
        }
    }
    return rc;
}

static void *worker_main(void *arg)
{
    worker *k = arg;
    bool failed = false;
    pthread_mutex_lock(&k->mu);
    for (;;) {
        while (!k->count && !k->closing && !k->stop)
            pthread_cond_wait(&k->cv, &k->mu);
        if (k->stop || (!k->count && k->closing))
            break;
        job j = k->q[k->head];
        int64_t b = (int64_t)sl__element_bytes(j.el);
        pthread_mutex_unlock(&k->mu);
        int rc = failed ? 0 : write_job(k, &j);
        sl_element_release(j.el);
        if (rc) {
            record_error(k->w, rc);
            failed = true;
        }
        pthread_mutex_lock(&k->mu);
        k->head = (k->head + 1) % QUEUE_LEN;
        k->count--;
        k->queued_bytes -= b;
        pthread_cond_broadcast(&k->cv);
    }
    bool closing = k->closing && !k->stop;
    pthread_mutex_unlock(&k->mu);
    if (closing && !failed) {
        int rc = close_shards(k);
        if (rc)
            record_error(k->w, rc);
    }
    return NULL;
}

static void worker_fini(worker *k)
{
    if (k->started) {
        pthread_mutex_lock(&k->mu);
        k->stop = k->stop || !k->closing;
        pthread_cond_broadcast(&k->cv);
        pthread_mutex_unlock(&k->mu);
        pthread_join(k->th, NULL);
        k->started = false;
    }
    for (; k->count; k->count--, k->head = (k->head + 1) % QUEUE_LEN)
        sl_element_release(k->q[k->head].el);
    for (int i = 0; i < k->nshards; i++) {
        shard_out *s = k->shards[i];
        if (s->fd >= 0)
            close(s->fd);
        sl__bytes_free(&s->raw);
        sl__free(s, sizeof *s);
    }
    sl__free(k->shards, (size_t)k->cap * sizeof *k->shards);
    k->shards = NULL;
    k->nshards = k->cap = 0;
    sl__bytes_free(&k->zbuf);
    pthread_cond_destroy(&k->cv);
    pthread_mutex_destroy(&k->mu);
}

void sl__save_writer_free(sl__save_writer *w)
{
    if (!w)
        return;
    for (int i = 0; i < w->nthreads; i++)
        worker_fini(&w->workers[i]);
    sl__free(w->workers, (size_t)w->nthreads * sizeof *w->workers);
    pthread_mutex_destroy(&w->err_mu);
    sl__strfree(w->dir);
    sl__strfree(w->op);
    sl__free(w, sizeof *w);
}

int sl__save_writer_create(const char *op, const char *dir, int compression, int nthreads,
                           sl__save_writer **out)
{
    *out = NULL;
    if (compression < SL_COMPRESSION_NONE || compression > SL_COMPRESSION_GZIP)
        return sl__set_error(SL_EINVAL, "%s(%s): unknown compression %d", op, dir, compression);
#ifdef SLUICE_NO_ZLIB
    if (compression != SL_COMPRESSION_NONE)
        return no_zlib(op, dir);
#endif
    if (mkdir(dir, 0755) < 0)
        return io_error(op, dir, "cannot create the directory", errno);
    sl__save_writer *w = sl__calloc(1, sizeof *w);
    if (!w)
        return sl__set_error(SL_ENOMEM, "%s(%s): out of memory", op, dir);
    pthread_mutex_init(&w->err_mu, NULL);
    w->compression = compression;
    w->op = sl__strdup(op);
    w->dir = sl__strdup(dir);
    w->workers = sl__calloc((size_t)nthreads, sizeof *w->workers);
    if (!w->op || !w->dir || !w->workers) {
        sl__save_writer_free(w);
        return sl__set_error(SL_ENOMEM, "%s(%s): out of memory", op, dir);
    }
    w->nthreads = nthreads;
    for (int i = 0; i < nthreads; i++) {
        worker *k = &w->workers[i];
        k->w = w;
        pthread_mutex_init(&k->mu, NULL);
        pthread_cond_init(&k->cv, NULL);
    }
    for (int i = 0; i < nthreads; i++) {
        worker *k = &w->workers[i];
        int rc = sl__thread_start(&k->th, worker_main, k, "sluice-save");
        if (rc) {
            sl__save_writer_free(w);
            return sl__set_error(rc, "%s(%s): cannot start a writer thread", op, dir);
        }
        k->started = true;
    }
    *out = w;
    return 0;
}

int sl__save_writer_put(sl__save_writer *w, int64_t shard, sl_element *el)
{
    if (shard < 0 || shard >= SL__SAVE_MAX_INDEX)
        return sl__set_error(SL_ERANGE, "%s(%s): shard %lld of element %lld is outside "
                             "[0, %d)", w->op, w->dir, (long long)shard,
                             (long long)w->next_index, SL__SAVE_MAX_INDEX);
    int rc = first_error(w);
    if (rc)
        return rc;
    worker *k = &w->workers[shard % w->nthreads];
    int64_t b = (int64_t)sl__element_bytes(el);
    pthread_mutex_lock(&k->mu);
    while (k->count == QUEUE_LEN || (k->count && k->queued_bytes + b > QUEUE_BYTES))
        pthread_cond_wait(&k->cv, &k->mu);
    k->q[(k->head + k->count) % QUEUE_LEN] =
        (job){.shard = shard, .index = w->next_index++, .el = sl_element_retain(el)};
    k->count++;
    k->queued_bytes += b;
    pthread_cond_broadcast(&k->cv);
    pthread_mutex_unlock(&k->mu);
    return 0;
}

static int cmp_shard(const void *a, const void *b)
{
    const sl__saved_shard *x = a, *y = b;
    return (x->index > y->index) - (x->index < y->index);
}

/* The manifest's text into b (NUL-terminated). */
static int manifest_text(sl__save_writer *w, uint64_t fp, const sl_structure *st,
                         sl__saved_shard *sh, int n, sl__bytes *b)
{
    char line[256];
    int64_t total = 0;
    for (int i = 0; i < n; i++)
        total += sh[i].elements;
    int len = sl_structure_format(st, NULL, 0);
    if (len < 0)
        return len;
    char *stext = sl__alloc((size_t)len + 1);
    if (!stext)
        return SL_ENOMEM;
    sl_structure_format(st, stext, (size_t)len + 1);
    snprintf(line, sizeof line, "sluice-saved-dataset %u\nfingerprint %016" PRIx64
             "\ncompression %s\nstructure ", VERSION, fp, compression_names[w->compression]);
    int rc = sl__bytes_append(b, line, strlen(line));
    if (!rc)
        rc = sl__bytes_append(b, stext, (size_t)len);
    sl__free(stext, (size_t)len + 1);
    snprintf(line, sizeof line, "\nelements %lld\nshards %d\n", (long long)total, n);
    if (!rc)
        rc = sl__bytes_append(b, line, strlen(line));
    for (int i = 0; i < n && !rc; i++) {
        snprintf(line, sizeof line, "shard %lld %lld %" PRIu64 "\n", (long long)sh[i].index,
                 (long long)sh[i].elements, sh[i].size);
        rc = sl__bytes_append(b, line, strlen(line));
    }
    if (!rc) {
        snprintf(line, sizeof line, "crc32c %08x\n", sl__crc32c(0, b->p, b->n));
        rc = sl__bytes_append(b, line, strlen(line));
    }
    return rc;
}

static int write_manifest(sl__save_writer *w, const sl__bytes *text)
{
    char part[4096], path[4096];
    snprintf(part, sizeof part, "%s/" MANIFEST ".partial", w->dir);
    snprintf(path, sizeof path, "%s/" MANIFEST, w->dir);
    int fd = open(part, O_CREAT | O_TRUNC | O_WRONLY | O_CLOEXEC, 0644);
    if (fd < 0)
        return io_error(w->op, part, "cannot create", errno);
    int rc = 0;
    if (sl__write_all(fd, text->p, text->n) < 0 || fsync(fd) < 0)
        rc = io_error(w->op, part, "writing", errno);
    close(fd);
    if (!rc && rename(part, path) < 0)
        rc = io_error(w->op, part, "renaming", errno);
    if (!rc)
        sl__sync_parent(path);
    return rc;
}

int sl__save_writer_finish(sl__save_writer *w, uint64_t fingerprint, const sl_structure *s)
{
    for (int i = 0; i < w->nthreads; i++) {
        worker *k = &w->workers[i];
        pthread_mutex_lock(&k->mu);
        k->closing = true;
        pthread_cond_broadcast(&k->cv);
        pthread_mutex_unlock(&k->mu);
    }
    for (int i = 0; i < w->nthreads; i++) {
        pthread_join(w->workers[i].th, NULL);
        w->workers[i].started = false;
    }
    int rc = first_error(w);
    if (rc)
        return rc;
    int n = 0;
    for (int i = 0; i < w->nthreads; i++)
        n += w->workers[i].nshards;
    sl__saved_shard *sh = sl__alloc((size_t)(n ? n : 1) * sizeof *sh);
    if (!sh)
        return sl__set_error(SL_ENOMEM, "%s(%s): out of memory", w->op, w->dir);
    n = 0;
    for (int i = 0; i < w->nthreads; i++)
        for (int j = 0; j < w->workers[i].nshards; j++) {
            const shard_out *o = w->workers[i].shards[j];
            sh[n++] = (sl__saved_shard){o->index, o->elements, o->size};
        }
    qsort(sh, (size_t)n, sizeof *sh, cmp_shard);
    sl__bytes text = {0};
    rc = manifest_text(w, fingerprint, s, sh, n, &text);
    sl__free(sh, (size_t)(n ? n : 1) * sizeof *sh);
    if (rc)
        rc = sl__set_error(rc, "%s(%s): out of memory", w->op, w->dir);
    else
        rc = write_manifest(w, &text);
    sl__bytes_free(&text);
    return rc;
}

/* ---- the manifest ---- */

void sl__saved_free(sl__saved *s)
{
    if (!s)
        return;
    sl__strfree(s->dir);
    sl__strfree(s->op);
    sl_structure_release(s->structure);
    sl__free(s->shards, (size_t)(s->nshards ? s->nshards : 1) * sizeof *s->shards);
    sl__free(s, sizeof *s);
}

typedef struct cursor {
    const char *p, *end;
    int line;
} cursor;

/* The next line's value after "key ", NUL-terminated into buf (n bytes):
 * true, or false when the line is not that key or too long. */
static bool take_line(cursor *c, const char *key, char *buf, size_t n)
{
    const char *nl = memchr(c->p, '\n', (size_t)(c->end - c->p));
    size_t klen = strlen(key);
    if (!nl || (size_t)(nl - c->p) < klen + 1 || memcmp(c->p, key, klen) != 0 ||
        c->p[klen] != ' ')
        return false;
    const char *v = c->p + klen + 1;
    size_t len = (size_t)(nl - v);
    if (len >= n || memchr(v, '\0', len))
        return false;
    memcpy(buf, v, len);
    buf[len] = '\0';
    c->p = nl + 1;
    c->line++;
    return true;
}

/* A decimal in [lo, hi] that is the whole of text (or up to *end). */
static bool parse_i64(const char *text, int64_t lo, int64_t hi, int64_t *v, const char **end)
{
    if (*text < '0' || *text > '9')
        return false;
    errno = 0;
    char *e;
    long long x = strtoll(text, &e, 10);
    if (errno || x < lo || x > hi || (end ? (*e != ' ' && *e != '\0') : *e != '\0'))
        return false;
    *v = x;
    if (end)
        *end = *e ? e + 1 : e;
    return true;
}

static int bad_manifest(const char *op, const char *dir, const cursor *c, const char *what)
{
    return sl__set_error(SL_ECORRUPT, "%s(%s/" MANIFEST "): %s (line %d)", op, dir, what,
                         c->line);
}

static int parse_shards(const char *op, const char *dir, cursor *c, sl__saved *s)
{
    char buf[128];
    int64_t total = 0;
    for (int i = 0; i < s->nshards; i++) {
        int64_t idx, els, size;
        const char *p;
        if (!take_line(c, "shard", buf, sizeof buf) ||
            !parse_i64(buf, 0, SL__SAVE_MAX_INDEX - 1, &idx, &p) ||
            !parse_i64(p, 0, INT64_MAX, &els, &p) ||
            !parse_i64(p, FILE_HDR, INT64_MAX, &size, NULL))
            return bad_manifest(op, dir, c, "bad shard line");
        if (i && idx <= s->shards[i - 1].index)
            return bad_manifest(op, dir, c, "shard indices do not rise");
        if (__builtin_add_overflow(total, els, &total))
            return bad_manifest(op, dir, c, "element counts overflow");
        s->shards[i] = (sl__saved_shard){idx, els, (uint64_t)size};
    }
    if (total != s->elements)
        return bad_manifest(op, dir, c, "the shards' elements do not add up to the total");
    return 0;
}

static int parse_body(const char *op, const char *dir, cursor *c, sl__saved *s)
{
    char buf[128];
    int64_t v;
    if (!take_line(c, "fingerprint", buf, sizeof buf) || strlen(buf) != 16 ||
        strspn(buf, "0123456789abcdef") != 16)
        return bad_manifest(op, dir, c, "bad fingerprint");
    s->fingerprint = strtoull(buf, NULL, 16);
    if (!take_line(c, "compression", buf, sizeof buf))
        return bad_manifest(op, dir, c, "no compression line");
    s->compression = -1;
    for (int i = 0; i < 3; i++)
        if (strcmp(buf, compression_names[i]) == 0)
            s->compression = i;
    if (s->compression < 0)
        return bad_manifest(op, dir, c, "unknown compression");
    const char *nl = memchr(c->p, '\n', (size_t)(c->end - c->p));
    if (!nl || (size_t)(nl - c->p) < 10 || memcmp(c->p, "structure ", 10) != 0)
        return bad_manifest(op, dir, c, "no structure line");
    size_t len = (size_t)(nl - c->p) - 10;
    char *text = sl__alloc(len + 1);
    if (!text)
        return SL_ENOMEM;
    memcpy(text, c->p + 10, len);
    text[len] = '\0';
    bool unknown = strcmp(text, "?") == 0;
    s->structure = unknown || memchr(text, '\0', len) ? NULL : sl_structure_parse(text);
    sl__free(text, len + 1);
    if (!unknown && !s->structure)
        return bad_manifest(op, dir, c, "bad structure");
    c->p = nl + 1;
    c->line++;
    if (!take_line(c, "elements", buf, sizeof buf) ||
        !parse_i64(buf, 0, INT64_MAX, &s->elements, NULL))
        return bad_manifest(op, dir, c, "bad element count");
    if (!take_line(c, "shards", buf, sizeof buf) ||
        !parse_i64(buf, 0, SL__SAVE_MAX_SHARDS, &v, NULL))
        return bad_manifest(op, dir, c, "bad shard count");
    s->shards = sl__calloc((size_t)(v ? v : 1), sizeof *s->shards);
    if (!s->shards)
        return SL_ENOMEM;
    s->nshards = (int)v;
    return parse_shards(op, dir, c, s);
}

int sl__saved_parse(const char *op, const char *dir, const char *text, size_t n,
                    sl__saved **out)
{
    *out = NULL;
    cursor c = {text, text + n, 1};
    char buf[64];
    int64_t version;
    if (!take_line(&c, "sluice-saved-dataset", buf, sizeof buf) ||
        !parse_i64(buf, 1, INT32_MAX, &version, NULL))
        return bad_manifest(op, dir, &c, "not a sluice saved dataset (bad first line)");
    if (version > VERSION)
        return sl__set_error(SL_EUNSUPPORTED, "%s(%s/" MANIFEST "): format version %lld is "
                             "newer than this library reads (%u)", op, dir, (long long)version,
                             VERSION);
    /* the checksum first: nothing else of a damaged manifest is believed */
    const char *last = n >= 2 ? text + n - 2 : text;
    while (last > text && *last != '\n')
        last--;
    cursor tail = {last == text ? text : last + 1, text + n, 0};
    if (last == text || !take_line(&tail, "crc32c", buf, sizeof buf) || tail.p != c.end ||
        strlen(buf) != 8 || strspn(buf, "0123456789abcdef") != 8)
        return bad_manifest(op, dir, &c, "no checksum line at its end (truncated?)");
    uint32_t crc = sl__crc32c(0, text, (size_t)(last + 1 - text));
    if (crc != (uint32_t)strtoul(buf, NULL, 16))
        return bad_manifest(op, dir, &c, "checksum mismatch");
    sl__saved *s = sl__calloc(1, sizeof *s);
    if (!s)
        return SL_ENOMEM;
    s->dir = sl__strdup(dir);
    s->op = sl__strdup(op);
    c.end = last + 1;
    int rc = s->dir && s->op ? parse_body(op, dir, &c, s) : SL_ENOMEM;
    if (!rc && c.p != c.end)
        rc = bad_manifest(op, dir, &c, "unexpected lines before the checksum");
    if (rc == SL_ENOMEM)
        sl__set_error(rc, "%s(%s): out of memory", op, dir);
    if (rc) {
        sl__saved_free(s);
        return rc;
    }
    *out = s;
    return 0;
}

#define MAX_MANIFEST (64u << 20)

int sl__saved_open(const char *op, const char *dir, sl__saved **out)
{
    *out = NULL;
    char path[4096];
    snprintf(path, sizeof path, "%s/" MANIFEST, dir);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return errno == ENOENT || errno == ENOTDIR ? 0 : io_error(op, path, "cannot open", errno);
    struct stat st;
    if (fstat(fd, &st) < 0 || st.st_size > MAX_MANIFEST) {
        int e = errno;
        close(fd);
        return st.st_size > MAX_MANIFEST
                   ? sl__set_error(SL_ECORRUPT, "%s(%s): the manifest is too large", op, path)
                   : io_error(op, path, "cannot stat", e);
    }
    size_t n = (size_t)st.st_size;
    char *text = sl__alloc(n ? n : 1);
    if (!text) {
        close(fd);
        return sl__set_error(SL_ENOMEM, "%s(%s): out of memory", op, path);
    }
    ssize_t r = sl__pread_full(fd, text, n, 0);
    int e = errno;
    close(fd);
    int rc = r != (ssize_t)n ? io_error(op, path, "reading", r < 0 ? e : EIO)
                             : sl__saved_parse(op, dir, text, n, out);
    sl__free(text, n ? n : 1);
    return rc < 0 ? rc : 1;
}

/* ---- reading ---- */

typedef struct shard_in {
    const sl__saved_shard *m;
    char path[4096];
    int fd;
    uint64_t next_off; /* the next chunk's header */
    sl__bytes raw, stored;
    size_t pos;             /* the next record in raw */
    uint32_t left;          /* records left in raw */
    uint64_t chunk_off;     /* raw's chunk, for messages */
    uint32_t chunk_crc;     /* ... and its stored bytes' CRC-32C */
    int64_t consumed;       /* records taken (the head not among them) */
    sl_element *head;       /* the next element, read ahead; NULL: none */
    int64_t head_index;
    bool ended;
} shard_in;

struct sl__saved_reader {
    const sl__saved *s;
    shard_in *sh;
    int64_t last_index; /* of the element returned last, -1: none */
};

static int shard_corrupt(const sl__saved *s, const shard_in *h, const char *what, uint64_t off)
{
    return sl__set_error(SL_ECORRUPT, "%s(%s): %s at offset %" PRIu64, s->op, h->path, what,
                         off);
}

/* Reads the chunk header at h->next_off into hdr: NULL or what is wrong. */
static const char *chunk_header(const sl__saved *s, shard_in *h, uint32_t hdr[4], int *rc)
{
    unsigned char b[CHUNK_HDR];
    uint64_t off = h->next_off, size = h->m->size;
    if (size - off < CHUNK_HDR)
        return "truncated chunk header";
    ssize_t r = sl__pread_full(h->fd, b, CHUNK_HDR, off);
    if (r != CHUNK_HDR) {
        *rc = r < 0 ? sl__errno_code(errno) : SL_ECORRUPT;
        return r < 0 ? strerror(errno) : "file shrank";
    }
    if (sl__crc32c(0, b, 16) != sl__get_le32(b + 16))
        return "chunk header checksum mismatch";
    for (int i = 0; i < 4; i++)
        hdr[i] = sl__get_le32(b + 4 * i);
    if (hdr[0] > size - off - CHUNK_HDR)
        return "chunk runs past the end of the file";
    if (hdr[2] == 0 || hdr[2] > hdr[1] / (RECORD_HDR + 4))
        return "bad record count";
    if (s->compression == SL_COMPRESSION_NONE ? hdr[0] != hdr[1]
                                              : hdr[1] / MAX_RATIO > hdr[0])
        return "bad chunk length";
    return NULL;
}

/* The chunk at h->next_off into h->raw. 0, SL_EOF at the shard's end, or
 * an error; after SL_ECORRUPT, h moves past what it could not read. */
static int load_chunk(const sl__saved *s, shard_in *h)
{
    if (h->next_off == h->m->size) {
        h->ended = true;
        return SL_EOF;
    }
    int rc = SL_ECORRUPT;
    uint32_t hdr[4];
    uint64_t off = h->chunk_off = h->next_off;
    const char *why = chunk_header(s, h, hdr, &rc);
    if (why) {
        h->ended = true; /* nothing after a bad header can be found */
        h->consumed = h->m->elements;
        return rc == SL_ECORRUPT ? shard_corrupt(s, h, why, off)
                                 : sl__set_error(rc, "%s(%s): reading: %s", s->op, h->path, why);
    }
    h->next_off = off + CHUNK_HDR + hdr[0];
    bool plain = s->compression == SL_COMPRESSION_NONE;
    sl__bytes *into = plain ? &h->raw : &h->stored;
    into->n = 0;
    if (sl__bytes_reserve(into, hdr[0] ? hdr[0] : 1))
        return sl__set_error(SL_ENOMEM, "%s(%s): out of memory", s->op, h->path);
    ssize_t r = sl__pread_full(h->fd, into->p, hdr[0], off + CHUNK_HDR);
    if (r != (ssize_t)hdr[0])
        why = r < 0 ? strerror(errno) : "file shrank";
    else if (sl__crc32c(0, into->p, hdr[0]) != hdr[3])
        why = "chunk checksum mismatch";
    else if (!plain)
        why = inflate_chunk(s->compression, h->stored.p, hdr[0], &h->raw, hdr[1], &rc);
    if (why) {
        h->consumed += hdr[2]; /* the chunk's records are lost */
        if (h->consumed > h->m->elements)
            h->consumed = h->m->elements;
        return rc == SL_ECORRUPT ? shard_corrupt(s, h, why, off)
                                 : sl__set_error(rc, "%s(%s): %s", s->op, h->path, why);
    }
    h->raw.n = hdr[1];
    h->pos = 0;
    h->left = hdr[2];
    h->chunk_crc = hdr[3];
    return 0;
}

/* The record at h->pos: its bounds in raw. NULL or what is wrong. */
static const char *record_at(shard_in *h, int64_t *index, size_t *len)
{
    if (h->raw.n - h->pos < RECORD_HDR)
        return "truncated record";
    *index = (int64_t)sl__get_le64(h->raw.p + h->pos);
    *len = sl__get_le32(h->raw.p + h->pos + 8);
    if (*len > h->raw.n - h->pos - RECORD_HDR)
        return "record runs past its chunk";
    if (*index < 0)
        return "bad element index";
    return NULL;
}

/* Reads h's next element into h->head. 0, SL_EOF, or an error (after
 * which the rest of the chunk is dropped). */
static int read_head(const sl__saved *s, shard_in *h)
{
    while (!h->left) {
        int rc = load_chunk(s, h);
        if (rc == SL_EOF && h->consumed != h->m->elements)
            return sl__set_error(SL_ECORRUPT, "%s(%s): holds %lld elements, the manifest says "
                                 "%lld", s->op, h->path, (long long)h->consumed,
                                 (long long)h->m->elements);
        if (rc)
            return rc;
    }
    int64_t index;
    size_t len;
    const char *why = record_at(h, &index, &len);
    int rc = SL_ECORRUPT;
    if (!why && h->head_index >= 0 && index <= h->head_index)
        why = "element indices do not rise";
    if (!why)
        rc = decode_element(h->raw.p + h->pos + RECORD_HDR, len, &h->head, &why);
    if (rc) {
        uint64_t at = h->chunk_off;
        h->consumed += h->left;
        h->left = 0;
        return rc == SL_ENOMEM ? sl__set_error(rc, "%s(%s): out of memory", s->op, h->path)
                               : shard_corrupt(s, h, why, at);
    }
    h->head_index = index;
    h->pos += RECORD_HDR + len;
    h->left--;
    return 0;
}

/* Moves h past its first `skip` records, by their chunks' headers. */
static int skip_records(const sl__saved *s, shard_in *h, int64_t skip)
{
    while (skip > 0) {
        uint32_t hdr[4];
        int rc = SL_ECORRUPT;
        const char *why = chunk_header(s, h, hdr, &rc);
        if (why)
            return rc == SL_ECORRUPT ? shard_corrupt(s, h, why, h->next_off)
                                     : sl__set_error(rc, "%s(%s): %s", s->op, h->path, why);
        if (skip < hdr[2])
            break;
        skip -= hdr[2];
        h->next_off += CHUNK_HDR + hdr[0];
    }
    if (skip == 0)
        return 0;
    int rc = load_chunk(s, h);
    for (; !rc && skip > 0; skip--) {
        int64_t index;
        size_t len;
        const char *why = record_at(h, &index, &len);
        if (why)
            return shard_corrupt(s, h, why, h->chunk_off);
        h->head_index = index;
        h->pos += RECORD_HDR + len;
        h->left--;
    }
    return rc;
}

static int open_shard(const sl__saved *s, shard_in *h, int64_t consumed)
{
    shard_name(h->path, sizeof h->path, s->dir, h->m->index);
    h->fd = open(h->path, O_RDONLY | O_CLOEXEC);
    if (h->fd < 0)
        return io_error(s->op, h->path, "cannot open", errno);
    struct stat st;
    if (fstat(h->fd, &st) < 0)
        return io_error(s->op, h->path, "cannot stat", errno);
    if ((uint64_t)st.st_size != h->m->size)
        return sl__set_error(SL_ECORRUPT, "%s(%s): %lld bytes, the manifest says %" PRIu64
                             " (truncated or replaced?)", s->op, h->path,
                             (long long)st.st_size, h->m->size);
    unsigned char b[FILE_HDR];
    if (sl__pread_full(h->fd, b, FILE_HDR, 0) != FILE_HDR)
        return io_error(s->op, h->path, "reading", errno ? errno : EIO);
    if (memcmp(b, MAGIC, 8) != 0)
        return shard_corrupt(s, h, "not a sluice shard file (bad magic)", 0);
    if (sl__get_le32(b + 8) != VERSION)
        return sl__set_error(SL_EUNSUPPORTED, "%s(%s): shard format version %u is not %u",
                             s->op, h->path, sl__get_le32(b + 8), VERSION);
    if (sl__get_le32(b + 12) != (uint32_t)s->compression)
        return shard_corrupt(s, h, "compression differs from the manifest's", 12);
#ifdef SLUICE_NO_ZLIB
    if (s->compression != SL_COMPRESSION_NONE)
        return no_zlib(s->op, s->dir);
#endif
    h->next_off = FILE_HDR;
    h->head_index = -1;
    h->consumed = consumed;
    if (consumed == h->m->elements) {
        h->ended = true;
        return 0;
    }
    int rc = skip_records(s, h, consumed);
    return rc == SL_EOF ? shard_corrupt(s, h, "fewer records than the manifest says",
                                        h->next_off)
                        : rc;
}

void sl__saved_reader_free(sl__saved_reader *r)
{
    if (!r)
        return;
    for (int i = 0; i < r->s->nshards; i++) {
        shard_in *h = &r->sh[i];
        if (h->fd >= 0)
            close(h->fd);
        sl_element_release(h->head);
        sl__bytes_free(&h->raw);
        sl__bytes_free(&h->stored);
    }
    sl__free(r->sh, (size_t)(r->s->nshards ? r->s->nshards : 1) * sizeof *r->sh);
    sl__free(r, sizeof *r);
}

int sl__saved_reader_create(const sl__saved *s, const int64_t *consumed, sl__saved_reader **out)
{
    *out = NULL;
    sl__saved_reader *r = sl__calloc(1, sizeof *r);
    if (r)
        r->sh = sl__calloc((size_t)(s->nshards ? s->nshards : 1), sizeof *r->sh);
    if (!r || !r->sh) {
        sl__free(r, r ? sizeof *r : 0);
        return sl__set_error(SL_ENOMEM, "%s(%s): out of memory", s->op, s->dir);
    }
    r->s = s;
    r->last_index = -1;
    for (int i = 0; i < s->nshards; i++) {
        r->sh[i].fd = -1;
        r->sh[i].m = &s->shards[i];
    }
    for (int i = 0; i < s->nshards; i++) {
        int rc = open_shard(s, &r->sh[i], consumed ? consumed[i] : 0);
        if (rc) {
            sl__saved_reader_free(r);
            return rc;
        }
    }
    *out = r;
    return 0;
}

int sl__saved_reader_next(sl__saved_reader *r, sl_element **out)
{
    const sl__saved *s = r->s;
    shard_in *best = NULL;
    for (int i = 0; i < s->nshards; i++) {
        shard_in *h = &r->sh[i];
        if (!h->head && !h->ended) {
            int rc = read_head(s, h);
            if (rc && rc != SL_EOF)
                return rc;
        }
        if (h->head && (!best || h->head_index < best->head_index))
            best = h;
    }
    if (!best)
        return SL_EOF;
    if (best->head_index <= r->last_index) {
        best->consumed++;
        sl_element_release(best->head);
        best->head = NULL;
        return shard_corrupt(s, best, "an element index repeats another shard's",
                             best->chunk_off);
    }
    r->last_index = best->head_index;
    *out = best->head;
    best->head = NULL;
    best->consumed++;
    return 0;
}

void sl__saved_reader_position(const sl__saved_reader *r, int64_t *f)
{
    for (int i = 0; i < r->s->nshards; i++)
        f[i] = r->sh[i].consumed;
}

int sl__saved_reader_resume(const sl__saved *s, const int64_t *f, sl__saved_reader **out)
{
    for (int i = 0; f && i < s->nshards; i++)
        if (f[i] < 0 || f[i] > s->shards[i].elements)
            return sl__set_error(SL_ECORRUPT, "saved state: %s(%s): shard %lld: position %lld "
                                 "is outside [0, %lld]", s->op, s->dir,
                                 (long long)s->shards[i].index, (long long)f[i],
                                 (long long)s->shards[i].elements);
    return sl__saved_reader_create(s, f, out);
}

/* ---- removing ---- */

/* ---- random access ---- */

#define KEPT_CHUNKS 4 /* inflated chunks kept for the next gets */

typedef struct saved_chunk {
    uint64_t off; /* its header's offset in the shard file */
    uint32_t stored, raw, crc;
    int shard; /* position in s->shards */
} saved_chunk;

typedef struct kept_chunk {
    int64_t chunk; /* -1: empty */
    uint64_t used;
    sl__bytes raw;
} kept_chunk;

struct sl__saved_index {
    const sl__saved *s;
    int *fds;              /* per shard, open for the index's life */
    char (*paths)[4096];   /* per shard, for messages */
    saved_chunk *chunks;
    int64_t nchunks, capchunks;
    uint32_t *where;       /* per element: chunk, record offset in raw, record length */
    pthread_mutex_t mu;    /* the kept chunks */
    kept_chunk kept[KEPT_CHUNKS];
    uint64_t clock;
    char *damage;          /* the first damage the pass met: its elements are lost */
};

void sl__saved_index_free(sl__saved_index *x)
{
    if (!x)
        return;
    const sl__saved *s = x->s;
    int n = s->nshards ? s->nshards : 1;
    for (int i = 0; x->fds && i < s->nshards; i++)
        if (x->fds[i] >= 0)
            close(x->fds[i]);
    sl__free(x->fds, (size_t)n * sizeof *x->fds);
    sl__free(x->paths, (size_t)n * sizeof *x->paths);
    sl__free(x->chunks, (size_t)x->capchunks * sizeof *x->chunks);
    sl__free(x->where, (size_t)(s->elements ? s->elements : 1) * 3 * sizeof *x->where);
    for (int k = 0; k < KEPT_CHUNKS; k++)
        sl__bytes_free(&x->kept[k].raw);
    sl__strfree(x->damage);
    pthread_mutex_destroy(&x->mu);
    sl__free(x, sizeof *x);
}

static int add_chunk(sl__saved_index *x, const saved_chunk *c)
{
    if (x->nchunks == x->capchunks) {
        int64_t cap = x->capchunks ? 2 * x->capchunks : 64;
        saved_chunk *n = sl__alloc((size_t)cap * sizeof *n);
        if (!n)
            return SL_ENOMEM;
        if (x->nchunks)
            memcpy(n, x->chunks, (size_t)x->nchunks * sizeof *n);
        sl__free(x->chunks, (size_t)x->capchunks * sizeof *x->chunks);
        x->chunks = n;
        x->capchunks = cap;
    }
    x->chunks[x->nchunks++] = *c;
    return 0;
}

/* Notes the first damage the index's pass met (this thread's message):
 * the elements it hides are lost, as the sequential reader loses them. */
static void damaged(sl__saved_index *x)
{
    if (!x->damage)
        x->damage = sl__strdup(sl__error_msg());
}

/* Every chunk of shard k, its records placed in x->where. Damage (a bad
 * chunk, a bad record, a count that is off) is noted and passed over as
 * the sequential reader passes over it; a read that fails ends it. */
static int index_shard(sl__saved_index *x, int k, shard_in *h)
{
    const sl__saved *s = x->s;
    int64_t seen = 0;
    while (!h->ended) {
        uint64_t off = h->next_off;
        int rc = load_chunk(s, h);
        if (rc == SL_EOF)
            break;
        if (rc == SL_ECORRUPT) { /* its records are lost; after a bad header, the rest */
            damaged(x);
            continue;
        }
        if (rc)
            return rc;
        uint32_t stored = (uint32_t)(h->next_off - off - CHUNK_HDR);
        saved_chunk c = {off, stored, (uint32_t)h->raw.n, h->chunk_crc, k};
        if ((rc = add_chunk(x, &c)) < 0)
            return sl__set_error(rc, "%s(%s): out of memory", s->op, h->path);
        for (; h->left; h->left--) {
            int64_t index;
            size_t len;
            const char *why = record_at(h, &index, &len);
            if (!why && index >= s->elements)
                why = "an element index past the manifest's count";
            else if (!why && x->where[3 * index] != UINT32_MAX)
                why = "an element index repeats";
            if (why) { /* the rest of the chunk is lost */
                shard_corrupt(s, h, why, off);
                damaged(x);
                break;
            }
            uint32_t *w = &x->where[3 * index];
            w[0] = (uint32_t)(x->nchunks - 1);
            w[1] = (uint32_t)h->pos;
            w[2] = (uint32_t)len;
            h->pos += RECORD_HDR + len;
            seen++;
        }
    }
    if (seen != h->m->elements && !x->damage) {
        sl__set_error(SL_ECORRUPT, "%s(%s): holds %lld elements, the manifest says %lld", s->op,
                      h->path, (long long)seen, (long long)h->m->elements);
        damaged(x);
    }
    return 0;
}

int sl__saved_index_build(const sl__saved *s, sl__saved_index **out)
{
    *out = NULL;
    int n = s->nshards ? s->nshards : 1;
    /* a record takes at least 16 raw bytes, and raw bytes are at most
     * MAX_RATIO times the stored ones: a manifest that claims more
     * elements than its shards can hold is damaged (and its count is not
     * allocated for) */
    uint64_t room = 0;
    for (int k = 0; k < s->nshards; k++)
        room += s->shards[k].size / (RECORD_HDR + 4) *
                (s->compression == SL_COMPRESSION_NONE ? 1 : MAX_RATIO);
    if ((uint64_t)s->elements > room || (uint64_t)s->elements > SIZE_MAX / 12 - 1)
        return sl__set_error(SL_ECORRUPT, "%s(%s): the manifest's %lld elements are more than "
                             "its shards can hold", s->op, s->dir, (long long)s->elements);
    sl__saved_index *x = sl__calloc(1, sizeof *x);
    if (x) {
        x->s = s;
        x->fds = sl__alloc((size_t)n * sizeof *x->fds);
        x->paths = sl__alloc((size_t)n * sizeof *x->paths);
        x->where = sl__alloc((size_t)(s->elements ? s->elements : 1) * 3 * sizeof *x->where);
        pthread_mutex_init(&x->mu, NULL);
    }
    if (!x || !x->fds || !x->paths || !x->where) {
        if (x) {
            if (x->fds)
                for (int i = 0; i < n; i++)
                    x->fds[i] = -1;
            sl__saved_index_free(x);
        }
        return sl__set_error(SL_ENOMEM, "%s(%s): out of memory for its index", s->op, s->dir);
    }
    for (int i = 0; i < n; i++)
        x->fds[i] = -1;
    for (int k = 0; k < KEPT_CHUNKS; k++)
        x->kept[k].chunk = -1;
    memset(x->where, 0xff, (size_t)s->elements * 3 * sizeof *x->where);
    int rc = 0;
    for (int k = 0; rc == 0 && k < s->nshards; k++) {
        shard_in h = {.m = &s->shards[k], .fd = -1};
        rc = open_shard(s, &h, 0);
        if (rc == 0)
            rc = index_shard(x, k, &h);
        memcpy(x->paths[k], h.path, sizeof h.path);
        x->fds[k] = h.fd;
        sl__bytes_free(&h.raw);
        sl__bytes_free(&h.stored);
    }
    for (int64_t i = 0; rc == 0 && !x->damage && i < s->elements; i++)
        if (x->where[3 * i] == UINT32_MAX) {
            sl__set_error(SL_ECORRUPT, "%s(%s): no shard holds element %lld", s->op, s->dir,
                          (long long)i);
            damaged(x);
        }
    if (rc == 0 && x->damage)
        sl__log(SL_LOG_WARN, "%s: some elements are lost: %s", s->op, x->damage);
    if (rc) {
        sl__saved_index_free(x);
        return rc;
    }
    *out = x;
    return 0;
}

/* Chunk c inflated into raw (the caller's buffer). */
static int inflate_at(sl__saved_index *x, int64_t c, sl__bytes *stored, sl__bytes *raw)
{
    const sl__saved *s = x->s;
    const saved_chunk *ch = &x->chunks[c];
    const char *path = x->paths[ch->shard];
    int rc = SL_ECORRUPT;
    const char *why = NULL;
    stored->n = 0;
    if (sl__bytes_reserve(stored, ch->stored ? ch->stored : 1))
        return sl__set_error(SL_ENOMEM, "%s(%s): out of memory", s->op, path);
    ssize_t r = sl__pread_full(x->fds[ch->shard], stored->p, ch->stored, ch->off + CHUNK_HDR);
    if (r != (ssize_t)ch->stored)
        why = r < 0 ? strerror(errno) : "file shrank";
    else if (sl__crc32c(0, stored->p, ch->stored) != ch->crc)
        why = "chunk checksum mismatch (the file changed since it was indexed)";
    else
        why = inflate_chunk(s->compression, stored->p, ch->stored, raw, ch->raw, &rc);
    if (why)
        return rc == SL_ECORRUPT ? sl__set_error(rc, "%s(%s): %s at offset %" PRIu64, s->op,
                                                 path, why, ch->off)
                                 : sl__set_error(rc, "%s(%s): %s", s->op, path, why);
    return 0;
}

/* The record (12-byte header, then len bytes) of element i into rec. */
static int record_bytes(sl__saved_index *x, int64_t i, sl__bytes *rec)
{
    const uint32_t *w = &x->where[3 * i];
    const saved_chunk *ch = &x->chunks[w[0]];
    size_t n = RECORD_HDR + (size_t)w[2];
    rec->n = 0;
    if (sl__bytes_reserve(rec, n))
        return SL_ENOMEM;
    if (x->s->compression == SL_COMPRESSION_NONE) {
        ssize_t r = sl__pread_full(x->fds[ch->shard], rec->p, n, ch->off + CHUNK_HDR + w[1]);
        if (r != (ssize_t)n)
            return sl__set_error(r < 0 ? sl__errno_code(errno) : SL_ECORRUPT,
                                 "%s(%s): reading element %lld: %s", x->s->op,
                                 x->paths[ch->shard], (long long)i,
                                 r < 0 ? strerror(errno) : "file shrank");
        rec->n = n;
        return 0;
    }
    pthread_mutex_lock(&x->mu);
    kept_chunk *k = NULL;
    for (int j = 0; j < KEPT_CHUNKS && !k; j++)
        if (x->kept[j].chunk == (int64_t)w[0])
            k = &x->kept[j];
    if (k) {
        k->used = ++x->clock;
        memcpy(rec->p, k->raw.p + w[1], n);
        rec->n = n;
    }
    pthread_mutex_unlock(&x->mu);
    if (k)
        return 0;
    /* inflated outside the lock (other threads' hits go on), then kept */
    sl__bytes stored = {0}, raw = {0};
    int rc = inflate_at(x, w[0], &stored, &raw);
    sl__bytes_free(&stored);
    if (rc) {
        sl__bytes_free(&raw);
        return rc;
    }
    memcpy(rec->p, raw.p + w[1], n);
    rec->n = n;
    pthread_mutex_lock(&x->mu);
    k = &x->kept[0];
    for (int j = 1; j < KEPT_CHUNKS; j++)
        if (x->kept[j].used < k->used)
            k = &x->kept[j];
    sl__bytes_swap(&k->raw, &raw);
    k->chunk = w[0];
    k->used = ++x->clock;
    pthread_mutex_unlock(&x->mu);
    sl__bytes_free(&raw);
    return 0;
}

int sl__saved_index_get(sl__saved_index *x, int64_t i, sl_element **out)
{
    const sl__saved *s = x->s;
    if (i < 0 || i >= s->elements)
        return sl__set_error(SL_EINVAL, "%s(%s): element %lld of %lld", s->op, s->dir,
                             (long long)i, (long long)s->elements);
    if (x->where[3 * i] == UINT32_MAX)
        return sl__set_error(SL_ECORRUPT, "%s(%s): element %lld is lost to damage its index "
                             "met (%s)", s->op, s->dir, (long long)i,
                             x->damage ? x->damage : "?");
    sl__bytes rec = {0};
    int rc = record_bytes(x, i, &rec);
    const char *why = NULL;
    if (rc == 0 && sl__get_le64(rec.p) != (uint64_t)i)
        why = "the record is another element's (the file changed since it was indexed)";
    else if (rc == 0)
        rc = decode_element(rec.p + RECORD_HDR, rec.n - RECORD_HDR, out, &why);
    sl__bytes_free(&rec);
    const saved_chunk *ch = &x->chunks[x->where[3 * i]];
    if (why)
        return sl__set_error(SL_ECORRUPT, "%s(%s): element %lld: %s (its chunk at offset %"
                             PRIu64 ")", s->op, x->paths[ch->shard], (long long)i, why, ch->off);
    if (rc == SL_ENOMEM)
        return sl__set_error(rc, "%s(%s): out of memory", s->op, x->paths[ch->shard]);
    return rc;
}

void sl__saved_remove(const char *dir)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/" MANIFEST, dir);
    unlink(path);
    DIR *d = opendir(dir);
    if (!d)
        return;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        size_t n = strlen(e->d_name);
        bool ours = (n > 10 && strncmp(e->d_name, "shard-", 6) == 0 &&
                     strcmp(e->d_name + n - 4, ".sls") == 0) ||
                    strcmp(e->d_name, MANIFEST ".partial") == 0;
        if (ours) {
            snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
            unlink(path);
        }
    }
    closedir(d);
    rmdir(dir);
}
