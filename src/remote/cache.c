/* The local shard cache (cache.h). */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <signal.h>
#include <unistd.h>
#include "../core/alloc.h"
#include "../core/log.h"
#include "remote.h"
#include "crypto.h"
#include "cache.h"

#define WBUF ((size_t)1 << 20)

struct sl__rcache_writer {
    char dir[1024], key[65], tmp[1200];
    int fd;
    uint64_t written;
    bool failed;
    int64_t max_bytes;
    unsigned char *buf; /* writes gathered to 1 MiB */
    size_t nbuf;
};

bool sl__rcache_key(const char *url, char key[65], char *shown, size_t cap)
{
    sl__remote *r = malloc(sizeof *r);
    if (!r)
        return false;
    bool ok = sl__remote_resolve(url, NULL, r) == 0;
    if (ok) {
        /* where it comes from and what it is; never a secret */
        char what[sizeof r->host + 1 + sizeof r->shown];
        int w = snprintf(what, sizeof what, "%s\n%s", r->host, r->shown);
        uint8_t d[32];
        ok = w > 0 && (size_t)w < sizeof what && sl__sha256(what, (size_t)w, d);
        if (ok) {
            sl__hex(d, 32, key);
            snprintf(shown, cap, "%s", r->shown);
        }
    }
    free(r);
    return ok;
}

static void path_of(char *out, size_t cap, const char *dir, const char *key, const char *suffix)
{
    snprintf(out, cap, "%s/%s%s", dir, key, suffix);
}

int sl__rcache_open(const sl__rcache_opts *o, const char *key, uint64_t *size)
{
    char data[1200], meta[1200], line[512];
    path_of(data, sizeof data, o->dir, key, "");
    path_of(meta, sizeof meta, o->dir, key, ".meta");
    int fd = open(data, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    struct stat st;
    FILE *f = fopen(meta, "r");
    unsigned long long want = 0;
    bool ok = f && fgets(line, sizeof line, f) && sscanf(line, "%llu", &want) == 1 &&
              fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && (uint64_t)st.st_size == want;
    if (f)
        fclose(f);
    if (!ok) {
        close(fd);
        return -1;
    }
    futimens(fd, NULL); /* used now: last to be evicted */
    *size = want;
    return fd;
}

sl__rcache_writer *sl__rcache_begin(const sl__rcache_opts *o, const char *key)
{
    static atomic_uint serial;
    sl__rcache_writer *w = calloc(1, sizeof *w);
    if (!w)
        return NULL;
    snprintf(w->dir, sizeof w->dir, "%s", o->dir);
    snprintf(w->key, sizeof w->key, "%s", key);
    snprintf(w->tmp, sizeof w->tmp, "%s/.tmp-%s-%d-%u", o->dir, key, (int)getpid(),
             atomic_fetch_add(&serial, 1));
    w->max_bytes = o->max_bytes;
    mkdir(o->dir, 0755); /* (there already, mostly) */
    w->fd = open(w->tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    w->buf = malloc(WBUF);
    if (w->fd < 0 || !w->buf) {
        static atomic_int warned;
        if (!atomic_exchange(&warned, 1))
            sl__log(SL_LOG_WARN, "remote cache: cannot write in %s (%s): reading on without "
                    "it", o->dir, w->fd < 0 ? strerror(errno) : "out of memory");
        if (w->fd >= 0) {
            close(w->fd);
            unlink(w->tmp);
        }
        free(w->buf);
        free(w);
        return NULL;
    }
    return w;
}

static bool flush(sl__rcache_writer *w)
{
    size_t done = 0;
    while (!w->failed && done < w->nbuf) {
        ssize_t k = write(w->fd, w->buf + done, w->nbuf - done);
        if (k < 0 && errno == EINTR)
            continue;
        if (k <= 0)
            w->failed = true;
        else
            done += (size_t)k;
    }
    w->nbuf = 0;
    return !w->failed;
}

bool sl__rcache_write(sl__rcache_writer *w, const void *p, size_t n)
{
    const unsigned char *b = p;
    while (!w->failed && n) {
        size_t k = WBUF - w->nbuf < n ? WBUF - w->nbuf : n;
        memcpy(w->buf + w->nbuf, b, k);
        w->nbuf += k, b += k, n -= k;
        w->written += k;
        if (w->nbuf == WBUF)
            flush(w);
    }
    return !w->failed;
}

static void drop(sl__rcache_writer *w)
{
    if (w->fd >= 0)
        close(w->fd);
    unlink(w->tmp);
    free(w->buf);
    free(w);
}

void sl__rcache_abort(sl__rcache_writer *w)
{
    if (w)
        drop(w);
}

typedef struct entry {
    char name[80];
    int64_t mtime_ns;
    uint64_t size;
} entry;

static int by_age(const void *a, const void *b)
{
    const entry *x = a, *y = b;
    return (x->mtime_ns > y->mtime_ns) - (x->mtime_ns < y->mtime_ns);
}

/* A temporary file of a writer that is gone: ".tmp-<key>-<pid>-<n>". */
static bool orphan(const char *name)
{
    const char *p = name + 5 + 64 + 1;
    if (strlen(name) < 5 + 64 + 2)
        return false;
    int pid = atoi(p);
    return pid > 0 && kill(pid, 0) < 0 && errno == ESRCH;
}

/* Under the lock: copies past max_bytes, oldest use first, and what dead
 * writers left. */
static void evict(const char *dirpath, int64_t max_bytes)
{
    DIR *d = opendir(dirpath);
    if (!d)
        return;
    entry *e = NULL;
    size_t n = 0, cap = 0;
    uint64_t total = 0;
    struct dirent *de;
    char p[1400];
    while ((de = readdir(d))) {
        const char *nm = de->d_name;
        snprintf(p, sizeof p, "%s/%s", dirpath, nm);
        if (!strncmp(nm, ".tmp-", 5)) {
            if (orphan(nm))
                unlink(p);
            continue;
        }
        struct stat st;
        if (strlen(nm) != 64 || stat(p, &st) < 0)
            continue;
        if (n == cap) {
            size_t c = cap ? 2 * cap : 64;
            entry *m = realloc(e, c * sizeof *e);
            if (!m)
                break;
            e = m, cap = c;
        }
        snprintf(e[n].name, sizeof e[n].name, "%s", nm);
        e[n].mtime_ns = (int64_t)st.st_mtim.tv_sec * 1000000000 + st.st_mtim.tv_nsec;
        e[n].size = (uint64_t)st.st_size;
        total += e[n].size;
        n++;
    }
    closedir(d);
    if (max_bytes > 0 && total > (uint64_t)max_bytes) {
        qsort(e, n, sizeof *e, by_age);
        for (size_t i = 0; i < n && total > (uint64_t)max_bytes; i++) {
            snprintf(p, sizeof p, "%s/%s", dirpath, e[i].name);
            if (unlink(p) == 0)
                total -= e[i].size;
            snprintf(p, sizeof p, "%s/%s.meta", dirpath, e[i].name);
            unlink(p);
        }
    }
    free(e);
}

void sl__rcache_commit(sl__rcache_writer *w, uint64_t size, const char *validator)
{
    if (!w)
        return;
    flush(w);
    if (w->failed || w->written != size || close(w->fd) < 0) {
        w->fd = -1;
        drop(w);
        return;
    }
    w->fd = -1;
    char lock[1100], data[1100], meta[1100], mtmp[1300];
    snprintf(lock, sizeof lock, "%s/.lock", w->dir);
    path_of(data, sizeof data, w->dir, w->key, "");
    path_of(meta, sizeof meta, w->dir, w->key, ".meta");
    snprintf(mtmp, sizeof mtmp, "%s.meta", w->tmp);
    int lfd = open(lock, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (lfd >= 0)
        flock(lfd, LOCK_EX);
    /* the size and validator first, then the bytes under their final name */
    FILE *f = fopen(mtmp, "w");
    bool ok = f && fprintf(f, "%" PRIu64 " %s\n", size, validator ? validator : "") > 0;
    if (f && fclose(f) != 0)
        ok = false;
    ok = ok && rename(mtmp, meta) == 0 && rename(w->tmp, data) == 0;
    if (!ok)
        unlink(mtmp);
    else
        evict(w->dir, w->max_bytes);
    if (lfd >= 0) {
        flock(lfd, LOCK_UN);
        close(lfd);
    }
    drop(w); /* the temporary name is gone when the rename worked */
}
