/*
 * snapshot(path): tf.data's snapshot. The first pass of the input is
 * written, while it is served, as a saved dataset (saved_file.h) in
 * path/<fingerprint>/, where the fingerprint is the input pipeline's; every
 * later pass, in this process or another, reads it back instead of running
 * the input. A changed pipeline has another fingerprint and so writes a
 * snapshot of its own.
 *
 * The write goes to path/<fingerprint>.partial under an exclusive lock on
 * path/<fingerprint>.lock and is renamed into place when its pass
 * completes, so a partial snapshot is never read: a pass that stops early
 * (take, an error, a freed iterator) removes its partial files, and one
 * that finds the lock taken passes its input through without writing.
 * Failing to write (a full disk) is logged and the pass goes on unwritten.
 * The input runs epoch 0, whichever pass writes, so every pass serves the
 * same elements, as from a cache.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>
#include "../core/log.h"
#include "../graph/node.h"
#include "../store/saved_file.h"

#define INPUT_EPOCH 0
#define MAX_WRITERS 8

typedef struct snapshot_ds {
    sl_dataset base;
    char *path;
    int64_t compression;
} snapshot_ds;

enum { PASS, WRITE, READ };

/* The record: the mode and the count served, then (READ) each shard's
 * position in the saved files. */
#define SNAPSHOT_FIELDS(X) X(mode) X(served)
SL__STATE_FIELDS(SNAPSHOT_FIELDS);

typedef struct snapshot_iter {
    sl__iter base;
    int64_t mode, served;
    sl__iter *in;         /* PASS, WRITE */
    sl__save_writer *w;   /* WRITE */
    int nthreads;
    int lock_fd;          /* WRITE: holds the lock */
    sl__saved *saved;     /* READ */
    sl__saved_reader *r;  /* READ */
    int64_t *pos;         /* READ: the record, NFIELDS + nshards, reused */
    char dir[4096], partial[4112];
} snapshot_iter;

/* ---- writing ---- */

static void stop_writing(snapshot_iter *it)
{
    sl__save_writer_free(it->w);
    it->w = NULL;
    if (it->lock_fd >= 0) {
        sl__saved_remove(it->partial); /* while the lock is still ours */
        close(it->lock_fd);
        it->lock_fd = -1;
    }
    it->mode = PASS;
}

static void write_failed(snapshot_iter *it, const char *what)
{
    sl__log(SL_LOG_WARN, "snapshot(%s): %s: %s; this pass goes on without writing it",
            it->dir, what, sl__error_msg());
    stop_writing(it);
}

/* The pass completed: the snapshot goes into place. */
static void commit(snapshot_iter *it)
{
    const sl_dataset *in = it->base.ds->inputs[0];
    int rc = sl__save_writer_finish(it->w, sl_dataset_fingerprint(in),
                                    sl_dataset_structure(in));
    if (rc) {
        write_failed(it, "finishing");
        return;
    }
    sl__saved_remove(it->dir); /* a damaged one that was not served */
    if (rename(it->partial, it->dir) < 0) {
        sl__set_error(sl__errno_code(errno), "renaming %s: %s", it->partial, strerror(errno));
        write_failed(it, "putting it in place");
        return;
    }
    sl__log(SL_LOG_INFO, "snapshot(%s): wrote %lld elements; later passes read them",
            it->dir, (long long)it->served);
    sl__save_writer_free(it->w);
    it->w = NULL;
    close(it->lock_fd);
    it->lock_fd = -1;
    it->mode = PASS;
}

/* Takes the writer's lock: 1, 0 when another writer has it, or an error. */
static int lock_writer(snapshot_iter *it, const char *path, uint64_t fp)
{
    if (mkdir(path, 0755) < 0 && errno != EEXIST)
        return sl__set_error(sl__errno_code(errno), "snapshot(%s): cannot create it: %s", path,
                             strerror(errno));
    char lock[4200];
    snprintf(lock, sizeof lock, "%s/%016llx.lock", path, (unsigned long long)fp);
    int fd = open(lock, O_CREAT | O_RDWR | O_CLOEXEC, 0644);
    if (fd < 0)
        return sl__set_error(sl__errno_code(errno), "snapshot(%s): cannot open %s: %s", path,
                             lock, strerror(errno));
    if (flock(fd, LOCK_EX | LOCK_NB) < 0) {
        int e = errno;
        close(fd);
        if (e == EWOULDBLOCK)
            return 0;
        return sl__set_error(sl__errno_code(e), "snapshot(%s): cannot lock %s: %s", path, lock,
                             strerror(e));
    }
    it->lock_fd = fd;
    return 1;
}

/* ---- choosing what a pass does ---- */

/* A complete snapshot of this pipeline: 1 with it->saved, or 0. A
 * damaged one is logged and rebuilt. */
static int find_saved(snapshot_iter *it, uint64_t fp)
{
    int rc = sl__saved_open("snapshot", it->dir, &it->saved);
    if (rc < 0) {
        sl__log(SL_LOG_WARN, "snapshot(%s): not reading it: %s; rebuilding it", it->dir,
                sl__error_msg());
        return 0;
    }
    if (rc == 1 && it->saved->fingerprint != fp) {
        sl__log(SL_LOG_WARN, "snapshot(%s): written by another pipeline; rebuilding it",
                it->dir);
        sl__saved_free(it->saved);
        it->saved = NULL;
        return 0;
    }
    return rc;
}

static int start_read(snapshot_iter *it, const int64_t *pos)
{
    int n = it->saved->nshards;
    it->pos = sl__calloc((size_t)n + NFIELDS, sizeof *it->pos);
    if (!it->pos)
        return sl__set_error(SL_ENOMEM, "snapshot(%s): out of memory", it->dir);
    it->mode = READ;
    return sl__saved_reader_resume(it->saved, pos, &it->r);
}

/* A snapshot whose manifest reads but whose shards do not open (a shard
 * removed or cut short) is rebuilt like a damaged manifest. */
static void drop_read(snapshot_iter *it)
{
    sl__log(SL_LOG_WARN, "snapshot(%s): not reading it: %s; rebuilding it", it->dir,
            sl__error_msg());
    sl__free(it->pos, (size_t)(it->saved->nshards + NFIELDS) * sizeof *it->pos);
    it->pos = NULL;
    sl__saved_free(it->saved);
    it->saved = NULL;
    it->mode = PASS;
}

/* Reads a complete snapshot if there is one that opens: 1, 0 when there
 * is none to read, or an error. */
static int try_read(snapshot_iter *it, uint64_t fp)
{
    if (!find_saved(it, fp))
        return 0;
    int rc = start_read(it, NULL);
    if (rc != SL_ECORRUPT && rc != SL_ENOENT)
        return rc < 0 ? rc : 1;
    drop_read(it);
    return 0;
}

static int start_fresh(snapshot_iter *it, const snapshot_ds *d, uint64_t fp)
{
    int rc = try_read(it, fp);
    if (rc)
        return rc;
    rc = sl__iter_make_input(&it->base, 0, INPUT_EPOCH, &it->in);
    if (rc)
        return rc;
    it->mode = PASS;
    if ((rc = lock_writer(it, d->path, fp)) <= 0)
        return rc;
    if ((rc = try_read(it, fp)) != 0) { /* a writer finished while we looked */
        sl__iter_free(it->in);
        it->in = NULL;
        close(it->lock_fd);
        it->lock_fd = -1;
        return rc;
    }
    sl__saved_remove(it->partial); /* left by a writer that died */
    int cpus = sl_cpu_count();
    it->nthreads = cpus < 1 ? 1 : cpus > MAX_WRITERS ? MAX_WRITERS : cpus;
    rc = sl__save_writer_create("snapshot", it->partial, (int)d->compression, it->nthreads,
                                &it->w);
    if (rc == SL_EUNSUPPORTED || rc == SL_EINVAL)
        return rc; /* the caller's to fix, not a disk's */
    if (rc)
        write_failed(it, "starting to write");
    else
        it->mode = WRITE;
    return 0;
}

/* From a saved position: its mode says where the pass was. A pass saved
 * while writing resumes without writing (the partial files are gone). */
static int start_resumed(snapshot_iter *it, uint64_t fp, int n)
{
    if (n < NFIELDS)
        return sl__set_error(SL_ECORRUPT, "saved state: snapshot has %d fields", n);
    int64_t *f = sl__calloc((size_t)n, sizeof *f);
    if (!f)
        return SL_ENOMEM;
    int rc = sl__iter_restored(&it->base, n, f);
    if (rc >= 0)
        rc = sl__state_range(&it->base, field_names[F_mode], f[F_mode], PASS, READ);
    if (rc >= 0)
        rc = sl__state_range(&it->base, field_names[F_served], f[F_served], 0, INT64_MAX);
    if (rc < 0)
        goto out;
    it->served = f[F_served];
    if (f[F_mode] != READ) {
        rc = n == NFIELDS ? sl__iter_make_input(&it->base, 0, INPUT_EPOCH, &it->in)
                          : sl__set_error(SL_ECORRUPT, "saved state: snapshot has %d fields", n);
        it->mode = PASS;
        goto out;
    }
    if (!find_saved(it, fp)) {
        rc = sl__set_error(SL_ECORRUPT, "saved state: snapshot(%s) was read, and is gone",
                           it->dir);
        goto out;
    }
    rc = n == NFIELDS + it->saved->nshards
             ? start_read(it, f + NFIELDS)
             : sl__set_error(SL_ECORRUPT, "saved state: snapshot(%s) has %d shards, the state "
                             "%d", it->dir, it->saved->nshards, n - NFIELDS);
out:
    sl__free(f, (size_t)n * sizeof *f);
    return rc < 0 ? rc : 0;
}

/* ---- the node ---- */

static int snapshot_next(sl__iter *base, sl_element **out)
{
    snapshot_iter *it = (snapshot_iter *)base;
    int rc;
    if (it->mode == READ) {
        while ((rc = sl__saved_reader_next(it->r, out)) == SL_ECORRUPT)
            if ((rc = sl__policy(base, rc)) != 0)
                return rc;
    } else {
        rc = sl__iter_next(it->in, out);
        if (rc == 0 && it->mode == WRITE &&
            sl__save_writer_put(it->w, it->served % it->nthreads, *out) != 0)
            write_failed(it, "writing");
        if (rc == SL_EOF && it->mode == WRITE)
            commit(it);
    }
    if (rc == 0)
        it->served++;
    return rc;
}

static int snapshot_save(sl__iter *base, sl__bytes *w)
{
    snapshot_iter *it = (snapshot_iter *)base;
    if (it->mode != READ) {
        int64_t f[NFIELDS] = {[F_mode] = it->mode, [F_served] = it->served};
        return sl__save_sync(w, base, NFIELDS, f, it->in);
    }
    it->pos[F_mode] = READ;
    it->pos[F_served] = it->served;
    sl__saved_reader_position(it->r, it->pos + NFIELDS);
    return sl__state_node(w, base, NFIELDS + it->saved->nshards, it->pos, 0);
}

static void snapshot_destroy(sl__iter *base)
{
    snapshot_iter *it = (snapshot_iter *)base;
    stop_writing(it); /* an unfinished write goes */
    sl__iter_free(it->in);
    sl__saved_reader_free(it->r);
    if (it->pos)
        sl__free(it->pos, (size_t)(it->saved->nshards + NFIELDS) * sizeof *it->pos);
    sl__saved_free(it->saved);
}

static const sl__iter_ops snapshot_iter_ops = {
    .next = snapshot_next,
    .destroy = snapshot_destroy,
    .save = snapshot_save,
};

static int snapshot_make(const sl_dataset *ds, sl__tree *tree, uint64_t key, int64_t epoch,
                         sl__iter **out)
{
    const snapshot_ds *d = (const snapshot_ds *)ds;
    snapshot_iter *it = sl__iter_alloc(&snapshot_iter_ops, sizeof *it, ds, tree, key, epoch);
    if (!it)
        return SL_ENOMEM;
    it->lock_fd = -1;
    uint64_t fp = sl_dataset_fingerprint(ds->inputs[0]);
    snprintf(it->dir, sizeof it->dir, "%s/%016llx", d->path, (unsigned long long)fp);
    snprintf(it->partial, sizeof it->partial, "%s.partial", it->dir);
    int n = sl__iter_restored_count(&it->base);
    int rc = n >= 0 ? start_resumed(it, fp, n) : start_fresh(it, d, fp);
    if (rc < 0) {
        sl__iter_free(&it->base);
        return rc;
    }
    *out = &it->base;
    return 0;
}

static int64_t snapshot_cardinality(const sl_dataset *ds)
{
    return sl_dataset_cardinality(ds->inputs[0]);
}

static uint64_t snapshot_fingerprint(const sl_dataset *ds, uint64_t h)
{
    const snapshot_ds *d = (const snapshot_ds *)ds;
    return sl__hash_u64(sl__hash_str(h, d->path), (uint64_t)d->compression);
}

static void snapshot_ds_destroy(sl_dataset *ds)
{
    sl__strfree(((snapshot_ds *)ds)->path);
}

static const sl__node_ops snapshot_ops = {
    .kind = "snapshot",
    .make_iter = snapshot_make,
    .cardinality = snapshot_cardinality,
    .fingerprint = snapshot_fingerprint,
    .destroy = snapshot_ds_destroy,
    .structure = sl__structure_of_input,
};

SL_API sl_dataset *sl_snapshot(sl_dataset *in, const char *path, int compression)
{
    snapshot_ds *d = (snapshot_ds *)sl__dataset_new(&snapshot_ops, sizeof *d, in);
    if (!d)
        return NULL;
    if (!path || !*path || strlen(path) > 4000)
        return sl__dataset_fail(&d->base, SL_EINVAL, "snapshot: NULL, empty or too long path");
    if (compression < SL_COMPRESSION_NONE || compression > SL_COMPRESSION_GZIP)
        return sl__dataset_fail(&d->base, SL_EINVAL, "snapshot(%s): unknown compression %d",
                                path, compression);
#ifdef SLUICE_NO_ZLIB
    if (compression != SL_COMPRESSION_NONE)
        return sl__dataset_fail(&d->base, SL_EUNSUPPORTED, "snapshot(%s): compressed, but this "
                                "build has no zlib (SLUICE_WITH_ZLIB=OFF)", path);
#endif
    d->compression = compression;
    if (!(d->path = sl__strdup(path)))
        return sl__dataset_fail(&d->base, SL_ENOMEM, "snapshot: out of memory");
    return &d->base;
}
