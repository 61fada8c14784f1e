/*
 * WebDataset tar shards (sl_tar_shards). A tar file is 512-byte headers,
 * each followed by its member's data padded to 512 bytes, ended by zero
 * blocks. Members are grouped into samples by key (the path up to the
 * first '.' of the base name; consecutive members with one key are one
 * sample), and each sample yields the members asked for. The headers
 * are walked by tar_format.c.
 *
 * The member read past the end of a sample is kept for the next one, so a
 * saved position is that member's first header.
 */
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include "shards.h"
#include "tar_format.h"

#define MAX_KEYS 64

typedef struct tar_shards_ds {
    sl_dataset base;
    int nkeys;
    char **keys;       /* alternatives separated by ';' */
    sl_dtype *types;
    unsigned flags;
} tar_shards_ds;

/* A member's data, read into a buffer laid out as a string tensor
 * (offsets, then the bytes) so that any type can view it. */
typedef struct value {
    sl__buf *buf;
    uint64_t size;
} value;

typedef struct member {
    bool have;          /* read ahead: the first member of the next sample */
    sl__tar_member t;   /* where it is, its name and key */
    int slot;           /* the key asked for that it is, or -1 */
    value v;
    int rc;             /* an error of its own (too large), with msg */
    char *msg;
} member;

typedef struct tar_shards_iter {
    sl__iter base;
    sl__shards sh;
    member m;
    bool file_over;     /* the current file has no member left */
    int file_rc;        /* the file failed after the last sample (message kept) */
    char *file_msg;
    value *vals;        /* per key, the current sample's */
    sl__tar_scratch scratch;
    sl__bytes key;
} tar_shards_iter;

static void value_drop(value *v)
{
    sl__buf_release(v->buf);
    *v = (value){0};
}

static void member_clear(member *m)
{
    value_drop(&m->v);
    sl__strfree(m->msg);
    m->msg = NULL;
    m->rc = 0;
    m->have = false;
}

static int corrupt(tar_shards_iter *it, const char *what, uint64_t at)
{
    return sl__set_error(SL_ECORRUPT, "%s: %s at byte %llu%s", sl__stream_path(it->sh.s), what,
                         (unsigned long long)at,
                         sl__stream_compressed(it->sh.s) ? " of the uncompressed stream" : "");
}

static int read_all(tar_shards_iter *it, void *dst, size_t n, uint64_t at, const char *what)
{
    size_t got;
    int rc = sl__stream_read(it->sh.s, dst, n, &got);
    if (rc == 0 && got < n)
        rc = corrupt(it, what, at);
    return rc;
}

static int skip_all(tar_shards_iter *it, uint64_t n, uint64_t at)
{
    uint64_t got;
    int rc = sl__stream_skip(it->sh.s, n, &got);
    if (rc == 0 && got < n)
        rc = corrupt(it, "a member runs past the end of the file", at);
    return rc;
}

/* Reads the next regular member into it->m: 0, 1 at the end of the file
 * (zero blocks or its end), or an error that loses the file. */
static int read_member(tar_shards_iter *it)
{
    const tar_shards_ds *d = (const tar_shards_ds *)it->base.ds;
    member *m = &it->m;
    member_clear(m);
    sl__reader r = sl__stream_reader(it->sh.s);
    for (;;) {
        sl__tar_fault f;
        int rc = sl__tar_next(&r, sl__stream_offset(it->sh.s), &m->t, &it->scratch, &f);
        if (rc == SL__TAR_FAULT)
            return corrupt(it, f.what, f.at);
        if (rc)
            return rc;
        const char *name = (const char *)m->t.name.p;
        uint64_t size = m->t.size, at = m->t.start;
        m->slot = m->t.klen ? sl__tar_key_slot(d->keys, d->nkeys, name + m->t.ext) : -1;
        if (m->slot >= 0 && size > (uint64_t)it->sh.max_record) {
            char what[160];
            snprintf(what, sizeof what, "member %.64s of %llu bytes is over the limit of %lld "
                     "(SL_OPT_MAX_RECORD_BYTES)", name, (unsigned long long)size,
                     (long long)it->sh.max_record);
            corrupt(it, what, at);
            m->msg = sl__strdup(sl__error_msg());
            m->rc = m->msg ? SL_ECORRUPT : SL_ENOMEM;
            m->slot = -1;
        }
        if (m->slot >= 0) {
            m->v.buf = sl__buf_get(16 + (size_t)size);
            if (!m->v.buf)
                return SL_ENOMEM;
            m->v.size = size;
            rc = read_all(it, (unsigned char *)m->v.buf->data + 16, (size_t)size, at,
                          "a member runs past the end of the file");
            if (rc == 0)
                rc = skip_all(it, sl__tar_padding(size), at);
        } else {
            rc = skip_all(it, size + sl__tar_padding(size), at);
        }
        if (rc < 0)
            return rc;
        if (m->t.klen == 0) { /* no extension: not part of a sample */
            member_clear(m);
            continue;
        }
        m->have = true;
        return 0;
    }
}

static bool same_key(const tar_shards_iter *it)
{
    return it->key.n == it->m.t.klen && !memcmp(it->key.p, it->m.t.name.p, it->m.t.klen);
}

/* The sample in it->vals as an element, or an element error. */
static int emit(tar_shards_iter *it, uint64_t at, int err, char *msg, sl_element **out)
{
    const tar_shards_ds *d = (const tar_shards_ds *)it->base.ds;
    bool paths = d->flags & SL_WITH_PATHS;
    int rc = 0, missing = -1;
    for (int i = 0; i < d->nkeys && missing < 0; i++)
        if (!it->vals[i].buf)
            missing = i;
    if (err)
        sl__set_error_str(err, msg);
    else if (missing >= 0)
        err = sl__set_error(SL_ECORRUPT, "%s: sample %.*s (at byte %llu) has no '%s'",
                            sl__stream_path(it->sh.s), (int)it->key.n, (const char *)it->key.p,
                            (unsigned long long)at, d->keys[missing]);
    sl_element *el = NULL;
    if (!err) {
        el = sl__element_new(d->nkeys + paths, paths ? 16 + it->key.n + 16 : 0);
        if (!el)
            return SL_ENOMEM;
    }
    for (int i = 0; !err && i < d->nkeys; i++) {
        value *v = &it->vals[i];
        rc = sl__tar_push_value(el, d->types[i], v->buf->data + 16, v->size, v->buf);
        if (rc == 1) {
            err = sl__set_error(SL_ECORRUPT, "%s: sample %.*s (at byte %llu): '%s' is not "
                                "an integer", sl__stream_path(it->sh.s), (int)it->key.n,
                                (const char *)it->key.p, (unsigned long long)at, d->keys[i]);
            rc = 0;
            break;
        }
        if (rc < 0) {
            sl_element_release(el);
            return rc;
        }
    }
    if (!err && paths)
        rc = sl_element_add_string(el, it->key.p, it->key.n);
    for (int i = 0; i < d->nkeys; i++)
        value_drop(&it->vals[i]);
    if (err) {
        sl_element_release(el);
        sl__error_prefix(sl_dataset_name(it->base.ds));
        int prc = sl__policy(&it->base, err);
        return prc ? prc : 2;
    }
    if (rc < 0) {
        sl_element_release(el);
        return rc;
    }
    sl__element_set_origin(el, it->sh.path);
    it->base.ok_count++;
    *out = el;
    return 0;
}

/* One sample of the current file: 0 with *out, 1 to go on with the next
 * file, 2 to try again (a sample skipped), or an error. */
static int sample(tar_shards_iter *it, sl_element **out)
{
    if (it->file_rc) { /* found while finishing the last sample */
        int rc = it->file_rc;
        sl__set_error_str(rc, it->file_msg);
        sl__strfree(it->file_msg);
        it->file_msg = NULL;
        it->file_rc = 0;
        return (rc = sl__shards_lose_file(&it->base, &it->sh, rc)) ? rc : 1;
    }
    if (!it->m.have) {
        if (it->file_over) {
            it->file_over = false;
            sl__shards_end_file(&it->base, &it->sh);
            return 1;
        }
        int rc = read_member(it);
        if (rc == 1) {
            sl__shards_end_file(&it->base, &it->sh);
            return 1;
        }
        if (rc < 0) {
            member_clear(&it->m);
            return (rc = sl__shards_lose_file(&it->base, &it->sh, rc)) ? rc : 1;
        }
    }
    uint64_t at = it->m.t.start;
    int rc = sl__bytes_assign(&it->key, it->m.t.name.p, it->m.t.klen);
    if (rc < 0)
        return rc;
    int err = 0;
    char *msg = NULL;
    do {
        member *m = &it->m;
        if (m->rc && !err) {
            err = m->rc;
            msg = m->msg;
            m->msg = NULL;
        }
        if (m->slot >= 0) {
            value_drop(&it->vals[m->slot]); /* a repeated extension: the last one */
            it->vals[m->slot] = m->v;
            m->v = (value){0};
        }
        rc = read_member(it);
        if (rc == 1) {
            member_clear(m);
            it->file_over = true;
        } else if (rc < 0) {
            /* the sample so far is whole (its members were read): it goes
             * out, and the next call loses the rest of the file */
            member_clear(m);
            it->file_rc = rc;
            it->file_msg = sl__strdup(sl__error_msg());
            if (!it->file_msg)
                return SL_ENOMEM;
        }
    } while (it->m.have && same_key(it));
    rc = emit(it, at, err, msg, out);
    sl__strfree(msg);
    return rc;
}

static int tar_shards_next(sl__iter *base, sl_element **out)
{
    tar_shards_iter *it = (tar_shards_iter *)base;
    for (;;) {
        int rc = sl__shards_stream(base, &it->sh);
        if (rc)
            return rc;
        rc = sample(it, out);
        if (rc <= 0)
            return rc;
    }
}

static void tar_shards_destroy(sl__iter *base)
{
    tar_shards_iter *it = (tar_shards_iter *)base;
    const tar_shards_ds *d = (const tar_shards_ds *)base->ds;
    member_clear(&it->m);
    sl__tar_member_free(&it->m.t);
    for (int i = 0; it->vals && i < d->nkeys; i++)
        value_drop(&it->vals[i]);
    sl__free(it->vals, (size_t)d->nkeys * sizeof *it->vals);
    sl__tar_scratch_free(&it->scratch);
    sl__bytes_free(&it->key);
    sl__strfree(it->file_msg);
    sl__shards_fini(&it->sh);
}

/* Inside a file, the next sample starts at the member read ahead (or
 * where the stream is, when there is none). */
static int tar_shards_save(sl__iter *base, sl__bytes *w)
{
    tar_shards_iter *it = (tar_shards_iter *)base;
    int64_t at = -1;
    if (it->sh.s)
        at = (int64_t)(it->m.have ? it->m.t.start : sl__stream_offset(it->sh.s));
    return sl__shards_save(base, &it->sh, w, at);
}

static const sl__iter_ops tar_shards_iter_ops = {
    .next = tar_shards_next,
    .destroy = tar_shards_destroy,
    .save = tar_shards_save,
};

static int tar_shards_make(const sl_dataset *ds, sl__tree *tree, uint64_t key, int64_t epoch,
                    sl__iter **out)
{
    const tar_shards_ds *d = (const tar_shards_ds *)ds;
    tar_shards_iter *it = sl__iter_alloc(&tar_shards_iter_ops, sizeof *it, ds, tree, key, epoch);
    if (!it)
        return SL_ENOMEM;
    it->vals = sl__calloc((size_t)d->nkeys, sizeof *it->vals);
    int rc = it->vals ? sl__shards_init(&it->base, &it->sh, SL__STREAM_DETECT, epoch) : SL_ENOMEM;
    if (rc < 0) {
        sl__iter_free(&it->base);
        return rc;
    }
    *out = &it->base;
    return 0;
}

static uint64_t tar_shards_fingerprint(const sl_dataset *ds, uint64_t h)
{
    const tar_shards_ds *d = (const tar_shards_ds *)ds;
    for (int i = 0; i < d->nkeys; i++)
        h = sl__hash_u64(sl__hash_str(h, d->keys[i]), (uint64_t)d->types[i]);
    return sl__hash_u64(h, d->flags);
}

static void tar_shards_ds_destroy(sl_dataset *ds)
{
    tar_shards_ds *d = (tar_shards_ds *)ds;
    for (int i = 0; d->keys && i < d->nkeys; i++)
        sl__strfree(d->keys[i]);
    sl__free(d->keys, (size_t)d->nkeys * sizeof *d->keys);
    sl__free(d->types, (size_t)d->nkeys * sizeof *d->types);
}

static sl_dataset *tar_shards_rebuild_files(const sl_dataset *ds, sl_dataset *files)
{
    const tar_shards_ds *d = (const tar_shards_ds *)ds;
    return sl_tar_shards(files, (const char *const *)d->keys, d->types, d->nkeys, d->flags);
}

static const sl__node_ops tar_shards_ops = {
    .kind = "tar_shards",
    .make_iter = tar_shards_make,
    .fingerprint = tar_shards_fingerprint,
    .destroy = tar_shards_ds_destroy,
    .rebuild_files = tar_shards_rebuild_files,
};

SL_API sl_dataset *sl_tar_shards(sl_dataset *paths, const char *const *keys,
                                 const sl_dtype *types, int nkeys, unsigned flags)
{
    tar_shards_ds *d = (tar_shards_ds *)sl__dataset_new(&tar_shards_ops, sizeof *d, paths);
    if (!d)
        return NULL;
    if (!keys || nkeys < 1 || nkeys > MAX_KEYS || (flags & ~SL_WITH_PATHS))
        return sl__dataset_fail(&d->base, SL_EINVAL, "tar_shards: bad arguments (%d keys, "
                                "flags 0x%x)", nkeys, flags);
    d->keys = sl__calloc((size_t)nkeys, sizeof *d->keys);
    d->types = sl__calloc((size_t)nkeys, sizeof *d->types);
    if (!d->keys || !d->types)
        return sl__dataset_fail(&d->base, SL_ENOMEM, "tar_shards: out of memory");
    d->nkeys = nkeys;
    d->flags = flags;
    for (int i = 0; i < nkeys; i++) {
        sl_dtype t = types ? types[i] : SL_UINT8;
        if (!keys[i] || !keys[i][0] || (t != SL_UINT8 && t != SL_STRING && t != SL_INT64))
            return sl__dataset_fail(&d->base, SL_EINVAL, "tar_shards: key %d is %s", i,
                                    !keys[i] || !keys[i][0] ? "empty"
                                    : "of a type other than uint8, string or int64");
        if (!(d->keys[i] = sl__strdup(keys[i])))
            return sl__dataset_fail(&d->base, SL_ENOMEM, "tar_shards: out of memory");
        d->types[i] = t;
    }
    sl__leaf_spec specs[MAX_KEYS + 1];
    int n = 0;
    for (int i = 0; i < nkeys; i++)
        specs[n++] = d->types[i] == SL_UINT8 ? (sl__leaf_spec){SL_UINT8, 1, {-1}}
                                             : (sl__leaf_spec){d->types[i], 0, {0}};
    if (flags & SL_WITH_PATHS)
        specs[n++] = (sl__leaf_spec){SL_STRING, 0, {0}};
    return sl__dataset_structured(&d->base, sl__structure_flat(n, specs));
}
