/* sl_save(ds, path): one pass of ds written as a saved dataset
 * (store/saved_file.h), by a writer thread per shard group while the
 * calling thread runs the pass, and put in place only once complete.
 * (An iterator's position is sl_iterator_save, in iterator.c.) */
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "../store/saved_file.h"
#include "iterator.h"

/* Writer threads: enough to keep compression off the pass's critical
 * path, few enough that a save does not crowd out its own pipeline. */
#define MAX_WRITERS 8

static bool empty_dir(const char *path)
{
    DIR *d = opendir(path);
    if (!d)
        return false;
    bool empty = true;
    for (struct dirent *e; empty && (e = readdir(d)) != NULL;)
        empty = !strcmp(e->d_name, ".") || !strcmp(e->d_name, "..");
    closedir(d);
    return empty;
}

/* Whether path may be replaced: it does not exist, is an empty directory,
 * or holds a saved dataset (finished or not). */
static int check_target(const char *path)
{
    struct stat st;
    if (stat(path, &st) < 0)
        return errno == ENOENT ? 0 : sl__set_error(sl__errno_code(errno), "save(%s): %s", path,
                                                   strerror(errno));
    if (!S_ISDIR(st.st_mode))
        return sl__set_error(SL_EINVAL, "save(%s): exists and is not a directory", path);
    if (empty_dir(path))
        return 0; /* the rename replaces it, and only once the save is complete */
    char m[4100];
    snprintf(m, sizeof m, "%s/manifest", path);
    if (access(m, F_OK) == 0)
        return 0;
    return sl__set_error(SL_EINVAL, "save(%s): the directory holds files and no saved dataset; "
                         "refusing to replace it", path);
}

/* The finished directory tmp becomes path; a dataset saved there before
 * goes only after, so path always names a complete one. */
static int put_in_place(const char *tmp, const char *path)
{
    char old[4100];
    snprintf(old, sizeof old, "%s.old-%ld", path, (long)getpid());
    bool had = rename(path, old) == 0;
    if (rename(tmp, path) < 0) {
        int e = errno;
        if (had)
            rename(old, path);
        return sl__set_error(sl__errno_code(e), "save(%s): renaming %s: %s", path, tmp,
                             strerror(e));
    }
    if (had)
        sl__saved_remove(old);
    return 0;
}

static int64_t shard_of(sl_dataset *ds, sl_key_fn fn, void *user, uint64_t seed,
                        const sl_element *el, int64_t index, int nthreads, int *rc)
{
    if (!fn)
        return index % nthreads;
    sl_map_ctx ctx;
    sl__map_ctx_begin(&ctx, NULL, seed, 0, 0, index);
    ctx.input = ds;
    sl_clear_error();
    int64_t shard = 0;
    *rc = fn(&ctx, el, &shard, user);
    sl__map_ctx_end(&ctx);
    if (*rc < 0 && !sl__error_msg()[0])
        sl__set_error(*rc, "save: the shard function failed: %s", sl_strerror(*rc));
    else if (*rc < 0)
        sl__error_prefix("save: the shard function");
    else if (*rc > 0)
        *rc = sl__set_error(SL_ECALLBACK, "save: the shard function returned %d", *rc);
    return shard;
}

static int run_pass(sl_dataset *ds, const sl_options *opts, sl__save_writer *w, sl_key_fn fn,
                    void *user, int nthreads)
{
    sl_iterator *it = sl_iterator_create(ds, opts);
    if (!it)
        return sl_last_error_code();
    uint64_t seed = (uint64_t)sl__options_get(opts, SL_OPT_SEED);
    sl_element *el;
    int rc;
    for (int64_t i = 0; (rc = sl_next(it, &el)) == 0; i++) {
        int64_t shard = shard_of(ds, fn, user, seed, el, i, nthreads, &rc);
        if (!rc)
            rc = sl__save_writer_put(w, shard, el);
        sl_element_release(el);
        if (rc)
            goto out; /* the message is set */
    }
    if (rc < 0)
        sl__set_error_str(rc, sl_iterator_errmsg(it));
out:
    sl_iterator_free(it);
    return rc == SL_EOF ? 0 : rc;
}

SL_API int sl_save(sl_dataset *ds, const char *path, const sl_options *opts, int compression,
                   sl_key_fn shard_fn, void *user)
{
    if (!ds || !path || !*path)
        return sl__set_error(SL_EINVAL, "save: NULL dataset or path");
    char target[4000];
    size_t len = strlen(path);
    while (len > 1 && path[len - 1] == '/') /* "dir/" names dir */
        len--;
    if (len >= sizeof target - 32)
        return sl__set_error(SL_EINVAL, "save(%s): path too long", path);
    memcpy(target, path, len);
    target[len] = '\0';
    path = target;
    int rc = check_target(path);
    if (rc)
        return rc;
    char tmp[4100];
    snprintf(tmp, sizeof tmp, "%s.saving-%ld", path, (long)getpid());
    sl__saved_remove(tmp); /* an earlier save by a process of this pid that died */
    int nthreads = sl_cpu_count();
    nthreads = nthreads < 1 ? 1 : nthreads > MAX_WRITERS ? MAX_WRITERS : nthreads;
    sl__save_writer *w;
    rc = sl__save_writer_create("save", tmp, compression, nthreads, &w);
    if (rc)
        return rc;
    rc = run_pass(ds, opts, w, shard_fn, user, nthreads);
    if (!rc)
        rc = sl__save_writer_finish(w, sl_dataset_fingerprint(ds), sl_dataset_structure(ds));
    sl__save_writer_free(w);
    if (!rc)
        rc = put_in_place(tmp, path);
    if (rc)
        sl__saved_remove(tmp);
    return rc;
}
