/*
 * Saved positions: the record writer, the per-element snapshots of
 * asynchronous nodes, and the parser that turns a saved state back into a
 * table of records by node key (state.h has the format).
 */
#include <stdio.h>
#include <string.h>
#include "../core/crc32c.h"
#include "../core/le.h"
#include "node.h"

#define MAGIC "SLSTATE"  /* 7 bytes and a NUL */
#define VERSION 1u
#define HDR_SIZE 64
#define REC_HDR 32
#define MAX_FIELDS (64 + SL__MAX_INPUTS) /* a per-input flag each, and a few */
#define MAX_CHILDREN (1 + SL__MAX_INPUTS)
#define MAX_DEPTH 256
#define MAX_RECORDS 4096 /* nodes in one pipeline, far more than any has */

/* ---- writing ---- */

unsigned char *sl__state_record(sl__bytes *w, const sl__iter *it, int nfields, int nchildren)
{
    size_t need = REC_HDR + 8 * (size_t)nfields;
    if (w->cap - w->n < need && sl__bytes_reserve(w, need))
        return NULL;
    unsigned char *p = w->p + w->n;
    sl__put_le64(p, it->key);
    sl__put_le32(p + 8, (uint32_t)nfields);
    sl__put_le32(p + 12, (uint32_t)nchildren);
    sl__put_le64(p + 16, (uint64_t)it->ok_count);
    sl__put_le64(p + 24, (uint64_t)it->fail_count);
    w->n += need;
    return p + REC_HDR;
}

int sl__state_node(sl__bytes *w, const sl__iter *it, int nfields, const int64_t *fields,
                   int nchildren)
{
    unsigned char *p = sl__state_record(w, it, nfields, nchildren);
    if (!p)
        return SL_ENOMEM;
    for (int i = 0; i < nfields; i++)
        sl__put_le64(p + 8 * i, (uint64_t)fields[i]);
    return 0;
}

int sl__iter_save(sl__iter *it, sl__bytes *w)
{
    if (!it->ops->save)
        return sl__set_error(SL_EUNSUPPORTED, "%s: this op cannot save its position",
                             sl_dataset_name(it->ds));
    return it->ops->save(it, w);
}

int sl__snap(sl__snapper *s, sl__iter *input, sl__bytes *dst)
{
    int rc = atomic_load_explicit(&s->rc, memory_order_relaxed);
    if (rc)
        return rc;
    rc = sl__iter_save(input, dst);
    if (rc < 0) {
        s->msg = sl__strdup(sl__error_msg());
        atomic_store_explicit(&s->rc, s->msg ? rc : SL_ENOMEM, memory_order_release);
    }
    return rc;
}

int sl__snap_check(const sl__snapper *s, const char *node)
{
    int rc = atomic_load_explicit(&s->rc, memory_order_acquire);
    if (!rc)
        return 0;
    return sl__set_error(rc, "%s: cannot save: %s", node, s->msg ? s->msg : sl_strerror(rc));
}

int sl__save_async(sl__bytes *w, const sl__iter *it, const sl__snapper *s, int nfields,
                   const int64_t *fields, const void *p, size_t n)
{
    int rc = sl__snap_check(s, sl_dataset_name(it->ds));
    if (rc == 0)
        rc = sl__state_node(w, it, nfields, fields, 1);
    return rc ? rc : sl__bytes_append(w, p, n);
}

void sl__snap_fini(sl__snapper *s)
{
    sl__strfree(s->msg);
    s->msg = NULL;
}

int sl__state_write(sl__bytes *out, const sl__state_info *info, sl__iter *root)
{
    out->n = 0;
    int rc = sl__bytes_reserve(out, HDR_SIZE);
    if (rc)
        return rc;
    out->n = HDR_SIZE;
    rc = sl__iter_save(root, out);
    if (rc)
        return rc;
    unsigned char *h = out->p;
    memset(h, 0, HDR_SIZE);
    memcpy(h, MAGIC, sizeof MAGIC);
    sl__put_le32(h + 8, VERSION);
    sl__put_le32(h + 12, HDR_SIZE);
    sl__put_le64(h + 16, info->fingerprint);
    sl__put_le64(h + 24, (uint64_t)info->seed);
    sl__put_le64(h + 32, (uint64_t)info->epoch);
    sl__put_le64(h + 40, (uint64_t)info->elements);
    size_t body = out->n - HDR_SIZE;
    sl__put_le64(h + 48, body);
    sl__put_le32(h + 56, sl__crc32(0, out->p + HDR_SIZE, body));
    return 0;
}

/* ---- restoring ---- */

typedef struct sl__restore_entry {
    uint64_t key;
    int64_t ok, fail;
    int nfields;
    int64_t *fields; /* into the restore's field array */
    bool used;
} entry;

struct sl__restore {
    entry *e;
    int n, cap;
    int64_t *fields;
    size_t nf, fcap;
};

void sl__restore_free(sl__restore *r)
{
    if (!r)
        return;
    sl__free(r->e, (size_t)r->cap * sizeof *r->e);
    sl__free(r->fields, r->fcap * sizeof *r->fields);
    sl__free(r, sizeof *r);
}

static int corrupt(const char *what, size_t off)
{
    return sl__set_error(SL_ECORRUPT, "saved state: %s at byte %zu", what, off);
}

/* One record and its children, from body[*pos]. */
static int parse_record(sl__restore *r, const unsigned char *body, size_t len, size_t *pos,
                        int depth)
{
    size_t at = *pos + HDR_SIZE; /* offsets in messages count from the state's start */
    if (depth > MAX_DEPTH)
        return corrupt("records nested too deep", at);
    if (len - *pos < REC_HDR)
        return corrupt("truncated record", at);
    const unsigned char *p = body + *pos;
    uint64_t key = sl__get_le64(p);
    uint32_t nfields = sl__get_le32(p + 8), nchildren = sl__get_le32(p + 12);
    int64_t ok = (int64_t)sl__get_le64(p + 16), fail = (int64_t)sl__get_le64(p + 24);
    if (nfields > MAX_FIELDS || nchildren > MAX_CHILDREN || ok < 0 || fail < 0)
        return corrupt("bad record header", at);
    if ((len - *pos - REC_HDR) / 8 < nfields)
        return corrupt("truncated record", at);
    if (r->n == MAX_RECORDS)
        return corrupt("too many records", at);
    for (int i = 0; i < r->n; i++)
        if (r->e[i].key == key)
            return corrupt("two records for one node", at);
    if (r->n == r->cap) {
        int cap = r->cap ? 2 * r->cap : 16;
        entry *e = sl__calloc((size_t)cap, sizeof *e);
        if (!e)
            return SL_ENOMEM;
        if (r->n)
            memcpy(e, r->e, (size_t)r->n * sizeof *e);
        sl__free(r->e, (size_t)r->cap * sizeof *r->e);
        r->e = e;
        r->cap = cap;
    }
    entry *e = &r->e[r->n++];
    *e = (entry){.key = key, .ok = ok, .fail = fail, .nfields = (int)nfields};
    /* fields go into one array, indexed until parsing ends (it may move) */
    e->fields = (int64_t *)(uintptr_t)r->nf;
    for (uint32_t i = 0; i < nfields; i++)
        r->fields[r->nf++] = (int64_t)sl__get_le64(p + REC_HDR + 8 * i);
    *pos += REC_HDR + 8 * (size_t)nfields;
    for (uint32_t c = 0; c < nchildren; c++) {
        int rc = parse_record(r, body, len, pos, depth + 1);
        if (rc)
            return rc;
    }
    return 0;
}

int sl__restore_parse(const void *state, size_t len, sl__state_info *info, sl__restore **out)
{
    *out = NULL;
    const unsigned char *h = state;
    if (!state || len < HDR_SIZE)
        return sl__set_error(SL_ECORRUPT, "saved state: %zu bytes, shorter than its %d-byte "
                             "header (truncated, or not a state)", state ? len : 0, HDR_SIZE);
    if (memcmp(h, MAGIC, sizeof MAGIC) != 0)
        return sl__set_error(SL_ECORRUPT, "saved state: bad magic (not a sluice iterator state)");
    uint32_t version = sl__get_le32(h + 8), hsize = sl__get_le32(h + 12);
    if (version > VERSION)
        return sl__set_error(SL_EUNSUPPORTED, "saved state: format version %u is newer than "
                             "this library's (%u, sluice %s): restore it with a newer libsluice",
                             version, VERSION, sl_version_string());
    if (version == 0 || hsize != HDR_SIZE)
        return sl__set_error(SL_ECORRUPT, "saved state: bad header (version %u, size %u)",
                             version, hsize);
    uint64_t body = sl__get_le64(h + 48);
    if (body != len - HDR_SIZE)
        return sl__set_error(SL_ECORRUPT, "saved state: %zu bytes, the header says %llu%s", len,
                             (unsigned long long)(body + HDR_SIZE),
                             len < body + HDR_SIZE ? " (truncated)" : "");
    const unsigned char *b = h + HDR_SIZE;
    if (sl__crc32(0, b, body) != sl__get_le32(h + 56))
        return sl__set_error(SL_ECORRUPT, "saved state: checksum mismatch (damaged)");
    info->fingerprint = sl__get_le64(h + 16);
    info->seed = (int64_t)sl__get_le64(h + 24);
    info->epoch = (int64_t)sl__get_le64(h + 32);
    info->elements = (int64_t)sl__get_le64(h + 40);
    if (info->epoch < 0 || info->elements < 0)
        return sl__set_error(SL_ECORRUPT, "saved state: negative epoch or count");
    sl__restore *r = sl__calloc(1, sizeof *r);
    if (!r)
        return SL_ENOMEM;
    /* at most one field per 8 bytes of body */
    r->fcap = body / 8 + 1;
    r->fields = sl__alloc(r->fcap * sizeof *r->fields);
    size_t pos = 0;
    int rc = r->fields ? parse_record(r, b, body, &pos, 0) : SL_ENOMEM;
    if (rc == 0 && pos != body)
        rc = corrupt("trailing bytes after the records", pos + HDR_SIZE);
    if (rc) {
        sl__restore_free(r);
        return rc;
    }
    for (int i = 0; i < r->n; i++)
        r->e[i].fields = r->fields + (uintptr_t)r->e[i].fields;
    *out = r;
    return 0;
}

const int64_t *sl__restore_record(const sl__restore *r, uint64_t key, int *nfields)
{
    for (int i = 0; i < r->n; i++)
        if (r->e[i].key == key) {
            *nfields = r->e[i].nfields;
            return r->e[i].fields;
        }
    return NULL;
}

static _Thread_local sl__tree *restoring;

void sl__restore_begin(sl__tree *t)
{
    restoring = t;
}

void sl__restore_end(void)
{
    restoring = NULL;
}

void sl__restore_attach(sl__tree *t, sl__iter *it)
{
    if (restoring != t)
        return;
    sl__restore *r = t->restore;
    if (!r)
        return;
    for (int i = 0; i < r->n; i++) {
        entry *e = &r->e[i];
        if (e->key == it->key && !e->used) {
            e->used = true;
            it->restored = e;
            it->ok_count = e->ok;
            it->fail_count = e->fail;
            atomic_fetch_add(&t->skipped, e->fail);
            return;
        }
    }
}

int sl__restore_has(const sl__tree *t, uint64_t key)
{
    const sl__restore *r = restoring == t ? t->restore : NULL;
    if (!r)
        return -1;
    for (int i = 0; i < r->n; i++)
        if (r->e[i].key == key && !r->e[i].used)
            return 1;
    return 0;
}

int sl__restore_check(const sl__tree *t)
{
    const sl__restore *r = t->restore;
    for (int i = 0; r && i < r->n; i++)
        if (!r->e[i].used)
            return sl__set_error(SL_EMISMATCH, "saved state: a record (node key %016llx) "
                                 "matches no node of this pipeline",
                                 (unsigned long long)r->e[i].key);
    return 0;
}

int sl__iter_restored(const sl__iter *it, int n, int64_t *f)
{
    const entry *e = it->restored;
    if (!e)
        return 0;
    if (e->nfields != n)
        return sl__set_error(SL_ECORRUPT, "saved state: %s has %d fields, this library "
                             "writes %d", sl_dataset_name(it->ds), e->nfields, n);
    memcpy(f, e->fields, (size_t)n * sizeof *f);
    return 1;
}

int sl__iter_restored_count(const sl__iter *it)
{
    const entry *e = it->restored;
    return e ? e->nfields : -1;
}

int sl__state_range(const sl__iter *it, const char *field, int64_t v, int64_t lo, int64_t hi)
{
    if (v >= lo && v <= hi)
        return 0;
    return sl__set_error(SL_ECORRUPT, "saved state: %s: %s = %lld is outside [%lld, %lld]",
                         sl_dataset_name(it->ds), field, (long long)v, (long long)lo,
                         (long long)hi);
}

int sl__save_sync(sl__bytes *w, const sl__iter *it, int nfields, const int64_t *fields,
                  sl__iter *input)
{
    int rc = sl__state_node(w, it, nfields, fields, input != NULL);
    return rc || !input ? rc : sl__iter_save(input, w);
}
