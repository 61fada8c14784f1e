/*
 * cache(path): keeps the first complete pass and serves later passes from it.
 *
 * With a path, the pass goes to that file (cache_file.h: its format, the
 * partial file and its lock, the checks before it is served), and every
 * later pass, in this process or another, reads it back while it holds
 * this very pipeline's pass; anything else is rebuilt. The work starts at
 * the first next, not at iterator creation, so that checking a large file
 * happens wherever the pipeline pulls (a prefetch thread, say).
 *
 * Without one (sl_cache(ds, NULL), sl_cache_auto), the first complete pass
 * of any iterator is kept with the dataset, as tf.data's memory cache is,
 * and serves every later pass (a repeat's, or a later iterator's epoch)
 * until the dataset is freed; while one iterator fills it, others pass
 * through. The pass is measured as it fills: one that outgrows half the
 * RAM budget moves to a spill file, and an automatic cache keeps nothing
 * when producing the pass costs less than reading it back would
 * (sl__cache_choose); sl_cache(ds, NULL) always keeps it. Each iterator
 * counts the kept bytes as buffered while it uses them. A pass that stops
 * early leaves the cache undecided and the next pass starts over, as in
 * tf.data: a partial cache would silently shorten every later epoch.
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
#include "../store/cache_file.h"
#include "testing.h"

/* The epoch the cached pass of the input runs, whichever epoch fills the
 * cache: what it holds (a shuffle's order below it, crops) must not depend
 * on which iterator came first, or a resumed run would be served another
 * epoch's pass. */
#define INPUT_EPOCH 0

/* An in-memory cache, owned by its dataset. Only the filler touches els
 * until it decides to keep them in memory (the placement, under mu);
 * after that they never change. */
typedef struct mem_cache {
    pthread_mutex_t mu;
    sl_element **els;
    int64_t n, cap, bytes;
    bool filling; /* an iterator is writing it */
} mem_cache;

typedef struct cache_ds {
    sl_dataset base;
    char *path;      /* NULL: kept with the dataset */
    /* without a path: the cache; the first complete pass measures and
     * chooses where it stays. The choice and the spill file are under
     * mem->mu */
    mem_cache *mem;
    bool keep; /* sl_cache(ds, NULL): never "nothing", but it spills */
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
    START, PASS, MEM_SERVE, FILE_WRITE, FILE_READ, DONE, FAILED,
    AUTO_FILL,  /* without a path, first pass: in memory while it fits its share */
    AUTO_SPILL, /* ... then in the spill file */
};

typedef struct cache_iter {
    sl__iter base;
    enum mode mode;
    int failed_rc;
    sl__iter *in;
    mem_cache *mem;
    bool filler;  /* this iterator fills mem */
    int64_t held; /* mem's bytes this iterator counts as buffered */
    int64_t pos; /* MEM_SERVE: next element */
    sl__cache_file file; /* FILE_ modes and AUTO_SPILL */
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

/* The cache's name in messages: its file's path, or "memory". */
static const char *name(const cache_iter *it)
{
    return it->file.path ? it->file.path : "memory";
}

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

/* The filling pass stops before its end: what it kept goes, the cache
 * stays undecided, and the next pass fills it. */
static void mem_abandon(cache_iter *it)
{
    mem_cache *m = it->mem;
    mem_discard(m);
    mem_unhold(it);
    pthread_mutex_lock(&m->mu);
    m->filling = false;
    pthread_mutex_unlock(&m->mu);
    it->filler = false;
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

/* ---- file ---- */

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

/* The pass is complete: the file takes its name. */
static int commit(cache_iter *it)
{
    struct stat st;
    int rc = sl__cache_file_commit(&it->file, &st);
    if (rc == 0)
        remember(it, &st);
    return rc;
}

static int file_write_next(cache_iter *it, sl_element **out)
{
    int rc = sl__iter_next(it->in, out);
    if (rc == SL_EOF) {
        rc = commit(it);
        if (rc)
            return fail_state(it, rc);
        it->mode = DONE;
        return SL_EOF;
    }
    if (rc)
        return rc;
    rc = sl__cache_file_put(&it->file, *out);
    if (rc) {
        sl_element_release(*out);
        *out = NULL;
        return fail_state(it, rc);
    }
    return 0;
}

/* Serves the file if it holds this pipeline's pass: 1 to serve it, 0 to
 * rebuild, or an error. A file this tree wrote or checked and that has not
 * changed since is not read through for its checksum again. */
static int read_start(cache_iter *it)
{
    struct stat st;
    char why[256];
    int rc = sl__cache_file_open(&it->file, &st);
    if (rc <= 0)
        return rc;
    if (!sl__cache_file_check(&it->file, &st, !seen_before(it, &st), why, sizeof why)) {
        sl__log(SL_LOG_WARN, "cache(%s): not serving %s: %s; rebuilding it", it->file.path,
                it->file.path, why);
        return 0;
    }
    remember(it, &st);
    it->mode = FILE_READ;
    if (it->resume == RESUME_FILE) {
        rc = sl__cache_file_seek(&it->file, it->resume_pos, it->resume_off);
        if (rc)
            return rc;
        it->resume_pos = 0; /* nothing to replay */
    }
    return 1;
}

static int file_read_next(cache_iter *it, sl_element **out)
{
    int rc = sl__cache_file_get(&it->file, out);
    if (rc == SL_EOF)
        it->mode = DONE;
    else if (rc)
        fail_state(it, rc);
    return rc;
}

/* A cache file: served when it holds this pipeline's pass, else written
 * from the input. */
static int file_start(cache_iter *it)
{
    const cache_ds *c = (const cache_ds *)it->base.ds;
    int rc = sl__cache_file_init(&it->file, c->path, sl_dataset_fingerprint(c->base.inputs[0]));
    if (rc == 0)
        rc = read_start(it);
    if (rc)
        return rc < 0 ? rc : 0;
    rc = sl__cache_file_create(&it->file);
    if (rc == 0)
        rc = sl__iter_make_input(&it->base, 0, INPUT_EPOCH, &it->in);
    if (rc == 0)
        it->mode = FILE_WRITE;
    return rc;
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
    int rc = sl__cache_file_init(&it->file, c->spill_path,
                                 sl_dataset_fingerprint(c->base.inputs[0]));
    if (rc == 0)
        rc = sl__cache_file_create(&it->file);
    for (int64_t i = 0; rc == 0 && i < m->n; i++)
        rc = sl__cache_file_put(&it->file, m->els[i]);
    if (rc)
        return rc;
    sl__log(SL_LOG_INFO, "cache(%s): %.1f MiB in %lld elements passed the memory share "
            "(%.1f MiB, half the RAM budget); spilling to %s", c->keep ? "memory" : "auto",
            (double)m->bytes / 1048576,
            (long long)m->n, (double)mem_share(it) / 1048576, c->spill_path);
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
        int rc = commit(it);
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
    int rc = sl__iter_next(it->in, out);
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
        rc = sl__cache_file_put(&it->file, *out);
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

/* Where a pass of a cache without a path comes from. */
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
        int rc = sl__cache_file_init(&it->file, c->spill_path,
                                     sl_dataset_fingerprint(c->base.inputs[0]));
        if (rc == 0)
            rc = read_start(it);
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
    return sl__iter_make_input(&it->base, 0, INPUT_EPOCH, &it->in);
}

static int step(cache_iter *it, sl_element **out);

/* A position the cache cannot serve from (an empty memory cache in a new
 * process, a cache file that is gone): the pass starts over, filling the
 * cache, and passes again the elements a restored pass had returned, which
 * fill the cache as they did: 0, or the input's code (SL__AGAIN leaves the
 * rest for the next call). */
static int replay(cache_iter *it)
{
    for (; it->to_replay > 0; it->to_replay--) {
        sl_element *el;
        int rc = step(it, &el);
        if (rc == SL_EOF)
            return sl__set_error(SL_EMISMATCH, "saved state: cache(%s) had returned %lld "
                                 "elements, its input has only %lld", name(it),
                                 (long long)it->resume_pos,
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
    rc = c->path ? file_start(it) : auto_start(it);
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
        return sl__iter_next(it->in, out);
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
                             name(it));
    default:
        return SL_EOF;
    }
}

static void cache_destroy(sl__iter *base)
{
    cache_iter *it = (cache_iter *)base;
    if (it->filler)
        mem_abandon(it);
    mem_unhold(it);
    sl__cache_file_fini(&it->file);
    sl__iter_free(it->in);
}

/* Where the pass comes from (a RESUME_ kind), elements returned, the
 * file offset of the next; then the input's record while the pass comes
 * from the input. */
#define CACHE_FIELDS(X) X(kind) X(returned) X(offset)
SL__STATE_FIELDS(CACHE_FIELDS);

static int cache_save(sl__iter *base, sl__bytes *w)
{
    cache_iter *it = (cache_iter *)base;
    int64_t f[NFIELDS] = {[F_kind] = RESUME_NONE, [F_returned] = it->served, [F_offset] = 0};
    switch (it->mode) {
    case START:
        f[F_kind] = it->resume; /* not started: what it would resume */
        f[F_returned] = it->resume_pos;
        f[F_offset] = (int64_t)it->resume_off;
        return sl__state_node(w, base, NFIELDS, f, 0);
    case PASS:
    case FILE_WRITE:
    case AUTO_FILL:
    case AUTO_SPILL:
        f[F_kind] = RESUME_INPUT;
        return sl__save_sync(w, base, NFIELDS, f, it->in);
    case MEM_SERVE:
        f[F_kind] = RESUME_MEM;
        break;
    case FILE_READ:
        f[F_kind] = RESUME_FILE;
        f[F_offset] = (int64_t)it->file.off;
        break;
    case DONE:
        f[F_kind] = RESUME_DONE;
        break;
    default:
        return sl__set_error(SL_ESTATE, "cache(%s): failed earlier; there is no position to "
                             "save", name(it));
    }
    return sl__state_node(w, base, NFIELDS, f, 0);
}

static const sl__iter_ops cache_iter_ops = {
    .next = cache_next,
    .destroy = cache_destroy,
    .save = cache_save,
};

static int cache_make(const sl_dataset *ds, sl__tree *tree, uint64_t key, int64_t epoch,
                      sl__iter **out)
{
    cache_iter *it = sl__iter_alloc(&cache_iter_ops, sizeof *it, ds, tree, key, epoch);
    if (!it)
        return SL_ENOMEM;
    int64_t f[NFIELDS];
    int rc = sl__iter_restored(&it->base, NFIELDS, f);
    if (rc > 0) {
        it->resume = (int)f[F_kind];
        it->resume_pos = f[F_returned];
        it->resume_off = (uint64_t)f[F_offset];
        rc = sl__state_range(&it->base, field_names[F_kind], f[F_kind], RESUME_NONE,
                             RESUME_DONE);
        if (rc == 0)
            rc = sl__state_range(&it->base, field_names[F_returned], f[F_returned], 0,
                                 INT64_MAX);
        if (rc == 0 && it->resume == RESUME_INPUT) {
            /* the input resumes where it was, past what the cache has: this
             * pass only passes through, a later one fills the cache */
            rc = sl__iter_make_input(&it->base, 0, INPUT_EPOCH, &it->in);
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

static int64_t cache_cardinality(const sl_dataset *ds)
{
    return sl_dataset_cardinality(ds->inputs[0]);
}

static uint64_t cache_fingerprint(const sl_dataset *ds, uint64_t h)
{
    const cache_ds *c = (const cache_ds *)ds;
    /* 1: a file; 0: kept with the dataset; 2: automatic */
    return sl__hash_str(sl__hash_u64(h, c->path ? 1 : c->keep ? 0 : 2), c->path);
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
    .cardinality = cache_cardinality,
    .structure = sl__structure_of_input,
    .fingerprint = cache_fingerprint,
    .destroy = cache_ds_destroy,
};

static sl_dataset *cache_new(sl_dataset *in, const char *path);

SL_API sl_dataset *sl_cache_auto(sl_dataset *in, const char *spill_dir)
{
    cache_ds *c = (cache_ds *)cache_new(in, NULL);
    if (!c)
        return NULL;
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
