/* The record readers' file walk (shards.h). */
#include <string.h>
#include "shards.h"

/* The files finished (or begun, when inside one), the offset reached in
 * the one being read (-1: none). */
#define SHARDS_FIELDS(X) X(files) X(offset)
SL__STATE_FIELDS(SHARDS_FIELDS);

int sl__shards_init(sl__iter *it, sl__shards *sh, int compression, int64_t epoch)
{
    sh->compression = compression;
    sh->max_record = it->tree->max_record;
    sh->resume_off = -1;
    int64_t f[NFIELDS];
    int rc = sl__iter_restored(it, NFIELDS, f);
    if (rc > 0) {
        rc = sl__state_range(it, field_names[F_files], f[F_files], 0, INT64_MAX);
        if (rc == 0)
            rc = sl__state_range(it, field_names[F_offset], f[F_offset], -1, INT64_MAX);
        sh->file = f[F_files];
        /* resuming inside a file: the paths come back to just before it */
        if (rc == 0 && f[F_offset] >= 0) {
            sh->resume_off = f[F_offset];
            sh->file--;
        }
    }
    if (rc >= 0)
        rc = sl__iter_make_input(it, 0, epoch, &sh->in);
    return rc < 0 ? rc : 0;
}

void sl__shards_fini(sl__shards *sh)
{
    sl__stream_close(sh->s);
    sh->s = NULL;
    sl_element_release(sh->path);
    sh->path = NULL;
    sl__iter_free(sh->in);
    sh->in = NULL;
    sl__bytes_free(&sh->before);
    sl__snap_fini(&sh->snap);
}

void sl__shards_stream_opts(const sl__iter *it, const sl__shards *sh, sl__stream_opts *o)
{
    *o = (sl__stream_opts){.backend = it->tree->io_backend, .compression = sh->compression,
                           .http = &it->tree->http, .cache = &it->tree->rcache};
}

/* File bytes read since the last call, into the statistics. */
static void count_bytes(sl__iter *it, sl__shards *sh)
{
    if (!sh->s)
        return;
    int64_t now = sl__stream_file_bytes(sh->s), d = now - sh->counted;
    if (d > 0) {
        atomic_fetch_add(&it->tree->bytes_read, d);
        sl__stat_add(&it->stats->bytes_read, d);
    }
    sh->counted = now;
}

void sl__shards_end_file(sl__iter *it, sl__shards *sh)
{
    count_bytes(it, sh);
    sl__stream_close(sh->s);
    sh->s = NULL;
    sh->counted = 0;
    sl_element_release(sh->path);
    sh->path = NULL;
}

int sl__shards_lose_file(sl__iter *it, sl__shards *sh, int code)
{
    sl__error_prefix(sl_dataset_name(it->ds));
    sl__shards_end_file(it, sh);
    return sl__policy(it, code);
}

/* Tensor 0 of a paths element as a C string in buf. */
static int path_of(const sl__iter *it, const sl_element *el, char *buf, size_t cap)
{
    const sl_tensor *t = sl_element_tensor(el, 0);
    size_t len = 0;
    const char *p = t && sl_tensor_dtype(t) == SL_STRING && sl_tensor_count(t) == 1
                        ? sl_tensor_string(t, 0, &len) : NULL;
    if (!p)
        return sl__set_error(SL_EDTYPE, "%s: tensor 0 must be a path (a scalar string)",
                             sl_dataset_name(it->ds));
    if (len == 0 || len >= cap || memchr(p, 0, len))
        return sl__set_error(SL_EINVAL, "%s: bad path (%zu bytes)", sl_dataset_name(it->ds),
                             len);
    memcpy(buf, p, len);
    buf[len] = '\0';
    return 0;
}

int sl__shards_stream(sl__iter *it, sl__shards *sh)
{
    while (!sh->s) {
        if (sh->done)
            return SL_EOF;
        sh->before.n = 0;
        sl__snap(&sh->snap, sh->in, &sh->before);
        sl_element *el;
        int rc = sl__iter_next(sh->in, &el);
        if (rc == SL_EOF) {
            sh->done = true;
            return SL_EOF;
        }
        if (rc)
            return rc;
        sh->file++;
        char path[4096];
        rc = path_of(it, el, path, sizeof path);
        if (rc == 0) {
            sl__stream_opts o;
            sl__shards_stream_opts(it, sh, &o);
            if (sh->resume_off >= 0)
                o.start = (uint64_t)sh->resume_off;
            sh->resume_off = -1;
            rc = sl__stream_open(path, &o, &sh->s);
        }
        if (rc < 0) {
            sl_element_release(el);
            sl__error_prefix(sl_dataset_name(it->ds));
            if ((rc = sl__policy(it, rc)) != 0)
                return rc;
            continue;
        }
        sh->path = el;
        sh->counted = 0;
        atomic_store(&it->tree->io_backend_used, sl__stream_backend(sh->s));
        count_bytes(it, sh);
    }
    count_bytes(it, sh);
    return 0;
}

int sl__shards_save(sl__iter *it, sl__shards *sh, sl__bytes *w, int64_t offset)
{
    bool in_file = sh->s != NULL;
    int64_t f[NFIELDS] = {[F_files] = sh->file, [F_offset] = in_file ? offset : -1};
    int rc = in_file ? sl__snap_check(&sh->snap, sl_dataset_name(it->ds)) : 0;
    if (rc == 0)
        rc = sl__state_node(w, it, NFIELDS, f, 1);
    if (rc)
        return rc;
    return in_file ? sl__bytes_append(w, sh->before.p, sh->before.n) : sl__iter_save(sh->in, w);
}
