/*
 * Token files with random access, memory-mapped: Megatron-LM's indexed
 * dataset (sl_megatron: PREFIX.idx and PREFIX.bin) and NumPy arrays
 * (sl_npy). Element i is a 1-D tensor of tokens in the file's dtype,
 * copied out of the mapping (pages the kernel reads on first touch and
 * may drop again: a corpus larger than memory costs no heap).
 *
 * Megatron's index, little-endian:
 *
 *   "MMIDIDX\0\0", u64 version (1), u8 dtype code,
 *   u64 sequence count S, u64 document count D (+1: it ends with S),
 *   i32 sizes[S] (tokens), i64 pointers[S] (bytes into .bin),
 *   i64 document_indices[D] (0, ..., S: where each document's sequences
 *   start), then optionally i8 modes[S] (multimodal).
 *
 * Every count, size and pointer is checked against both files' lengths
 * when the dataset is made, so a read can never leave the mappings; a bad
 * index is SL_ECORRUPT naming the file and the offset.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include "../core/le.h"
#include "../graph/sync.h"

typedef struct mapping {
    const unsigned char *p;
    size_t n;
} mapping;

typedef struct tokens_ds {
    sl_dataset base;
    char *path;          /* the data file, for messages */
    sl_element *path_el; /* its path, the elements' origin */
    mapping idx, data;
    sl_dtype dtype;
    size_t item;
    int64_t count;
    /* Megatron: the index's arrays (unaligned little-endian reads) */
    const unsigned char *sizes, *pointers, *docs;
    bool documents;
    /* npy: where the array starts, and tokens per element */
    uint64_t start, total, per;
} tokens_ds;

static int map_file(const char *path, mapping *m)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    struct stat st;
    if (fd < 0 || fstat(fd, &st) != 0) {
        int rc = sl__set_error(SL_EIO, "%s: %s", path, strerror(errno));
        if (fd >= 0)
            close(fd);
        return rc;
    }
    m->n = (size_t)st.st_size;
    m->p = NULL;
    if (m->n) {
        void *p = mmap(NULL, m->n, PROT_READ, MAP_SHARED, fd, 0);
        if (p == MAP_FAILED) {
            int rc = sl__set_error(SL_EIO, "%s: mmap: %s", path, strerror(errno));
            close(fd);
            return rc;
        }
        m->p = p;
    }
    close(fd);
    return 0;
}

static void unmap(mapping *m)
{
    if (m->p)
        munmap((void *)m->p, m->n);
    m->p = NULL;
}

/* The tokens of element i: where they start in the data and how many. */
static void locate(const tokens_ds *d, int64_t i, uint64_t *at, uint64_t *n)
{
    if (!d->sizes) { /* npy */
        *at = d->start + (uint64_t)i * d->per * d->item;
        uint64_t left = d->total - (uint64_t)i * d->per;
        *n = left < d->per ? left : d->per;
        return;
    }
    int64_t first = i, end = i + 1;
    if (d->documents) {
        first = (int64_t)sl__get_le64(d->docs + 8 * (size_t)i);
        end = (int64_t)sl__get_le64(d->docs + 8 * (size_t)i + 8);
    }
    *at = first < end ? sl__get_le64(d->pointers + 8 * (size_t)first) : 0;
    *n = 0;
    for (int64_t s = first; s < end; s++) /* a document's sequences are contiguous */
        *n += sl__get_le32(d->sizes + 4 * (size_t)s);
}

static int tokens_get(const sl_dataset *ds, int64_t i, sl_element **out)
{
    const tokens_ds *d = (const tokens_ds *)ds;
    uint64_t at, n;
    locate(d, i, &at, &n);
    int64_t shape[1] = {(int64_t)n};
    sl_element *el = sl__element_new(1, 0);
    struct sl_tensor *t = el ? sl__element_push(el, d->dtype, 1, shape, n * d->item) : NULL;
    if (!t) {
        sl_element_release(el);
        return sl__set_error(SL_ENOMEM, "%s: no memory for %llu tokens", d->path,
                             (unsigned long long)n);
    }
    if (n)
        memcpy(t->data, d->data.p + at, n * d->item);
    sl__element_set_origin(el, d->path_el);
    *out = el;
    return 0;
}

static int64_t tokens_cardinality(const sl_dataset *ds)
{
    return ((const tokens_ds *)ds)->count;
}

static uint64_t tokens_fingerprint(const sl_dataset *ds, uint64_t h)
{
    const tokens_ds *d = (const tokens_ds *)ds;
    h = sl__hash_str(h, d->path);
    h = sl__hash_u64(h, (uint64_t)d->count);
    h = sl__hash_u64(h, d->documents);
    return sl__hash_u64(h, d->per);
}

static void tokens_destroy(sl_dataset *ds)
{
    tokens_ds *d = (tokens_ds *)ds;
    unmap(&d->idx);
    unmap(&d->data);
    sl_element_release(d->path_el);
    sl__strfree(d->path);
}

static bool tokens_can_get(const sl_dataset *ds)
{
    (void)ds;
    return true;
}

static const sl__sync_def megatron_def = {
    .node = {.kind = "megatron", .make_iter = sl__sync_make,
             .cardinality = tokens_cardinality, .fingerprint = tokens_fingerprint,
             .destroy = tokens_destroy, .can_get = tokens_can_get, .get = tokens_get},
    SL__INDEXED_SOURCE(sl__indexed_start),
};

static const sl__sync_def npy_def = {
    .node = {.kind = "npy", .make_iter = sl__sync_make,
             .cardinality = tokens_cardinality, .fingerprint = tokens_fingerprint,
             .destroy = tokens_destroy, .can_get = tokens_can_get, .get = tokens_get},
    SL__INDEXED_SOURCE(sl__indexed_start),
};

static tokens_ds *make(const sl__sync_def *def, const char *data_path)
{
    tokens_ds *d = (tokens_ds *)sl__dataset_new_source(&def->node, sizeof *d);
    if (!d)
        return NULL;
    d->path = sl__strdup(data_path);
    d->path_el = sl_element_create(1);
    if (!d->path || !d->path_el ||
        sl_element_add_string(d->path_el, data_path, strlen(data_path)) != 0) {
        sl__dataset_fail(&d->base, SL_ENOMEM, "%s: out of memory", def->node.kind);
        return NULL;
    }
    return d;
}

static sl_dataset *done(tokens_ds *d)
{
    char text[32];
    snprintf(text, sizeof text, "%s[?]", sl_dtype_name(d->dtype));
    return sl__dataset_structured(&d->base, sl_structure_parse(text));
}

/* ---- Megatron ---- */

static int megatron_dtype(unsigned code, sl_dtype *dt, size_t *item)
{
    static const struct {
        sl_dtype dt;
        size_t item;
    } codes[9] = {{SL_DTYPE_COUNT, 0}, {SL_UINT8, 1}, {SL_INT8, 1}, {SL_INT16, 2},
                  {SL_INT32, 4},       {SL_INT64, 8}, {SL_FLOAT64, 8}, {SL_FLOAT32, 4},
                  {SL_UINT16, 2}};
    if (code < 1 || code > 8)
        return -1;
    *dt = codes[code].dt;
    *item = codes[code].item;
    return 0;
}

/* Checks d's index against both files; 0 or SL_ECORRUPT. */
static int megatron_check(tokens_ds *d, const char *idx_path)
{
    const unsigned char *p = d->idx.p;
    size_t n = d->idx.n;
    if (n < 34 || memcmp(p, "MMIDIDX\0\0", 9) != 0)
        return sl__set_error(SL_ECORRUPT, "%s: not a Megatron index (no \"MMIDIDX\" header)",
                             idx_path);
    if (sl__get_le64(p + 9) != 1)
        return sl__set_error(SL_ECORRUPT, "%s: byte 9: index version %llu (only 1 is known)",
                             idx_path, (unsigned long long)sl__get_le64(p + 9));
    if (megatron_dtype(p[17], &d->dtype, &d->item) < 0)
        return sl__set_error(SL_ECORRUPT, "%s: byte 17: unknown dtype code %u", idx_path, p[17]);
    uint64_t S = sl__get_le64(p + 18), D = sl__get_le64(p + 26);
    uint64_t room = (n - 34);
    if (S > room / 12 || D < 1 || D > (room - 12 * S) / 8)
        return sl__set_error(SL_ECORRUPT, "%s: byte 18: %llu sequences and %llu document "
                             "entries do not fit an index of %zu bytes", idx_path,
                             (unsigned long long)S, (unsigned long long)D, n);
    uint64_t left = room - 12 * S - 8 * D;
    if (left != 0 && left != S)
        return sl__set_error(SL_ECORRUPT, "%s: %llu bytes after the document indices (none, "
                             "or one mode byte per sequence, expected)", idx_path,
                             (unsigned long long)left);
    d->sizes = p + 34;
    d->pointers = d->sizes + 4 * S;
    d->docs = d->pointers + 8 * S;
    for (uint64_t s = 0; s < S; s++) {
        int32_t size = (int32_t)sl__get_le32(d->sizes + 4 * s);
        uint64_t ptr = sl__get_le64(d->pointers + 8 * s);
        if (size < 0 || ptr > d->data.n || (uint64_t)size > (d->data.n - ptr) / d->item)
            return sl__set_error(SL_ECORRUPT, "%s: sequence %llu (%d tokens at byte %llu) "
                                 "runs past the end of %s (%zu bytes)", idx_path,
                                 (unsigned long long)s, size, (unsigned long long)ptr, d->path,
                                 d->data.n);
    }
    uint64_t prev = 0;
    for (uint64_t k = 0; k < D; k++) {
        uint64_t v = sl__get_le64(d->docs + 8 * k);
        if ((k == 0 && v != 0) || v < prev || v > S || (k == D - 1 && v != S))
            return sl__set_error(SL_ECORRUPT, "%s: document index %llu is %llu (they go from 0 "
                                 "up to the sequence count, %llu)", idx_path,
                                 (unsigned long long)k, (unsigned long long)v,
                                 (unsigned long long)S);
        prev = v;
    }
    /* a document is read as one run: its sequences must follow each other */
    if (d->documents)
        for (uint64_t s = 1; s < S; s++) {
            uint64_t end = sl__get_le64(d->pointers + 8 * (s - 1)) +
                           (uint64_t)sl__get_le32(d->sizes + 4 * (s - 1)) * d->item;
            if (sl__get_le64(d->pointers + 8 * s) != end)
                return sl__set_error(SL_ECORRUPT, "%s: sequence %llu does not follow the one "
                                     "before it in %s", idx_path, (unsigned long long)s,
                                     d->path);
        }
    d->count = d->documents ? (int64_t)D - 1 : (int64_t)S;
    return 0;
}

SL_API sl_dataset *sl_megatron(const char *prefix, unsigned flags)
{
    if (!prefix || (flags & ~SL_TOKENS_DOCUMENTS)) {
        sl__set_error(SL_EINVAL, "megatron: %s", prefix ? "unknown flags" : "NULL prefix");
        return NULL;
    }
    char idx[4096], bin[4096];
    if (snprintf(idx, sizeof idx, "%s.idx", prefix) >= (int)sizeof idx ||
        snprintf(bin, sizeof bin, "%s.bin", prefix) >= (int)sizeof bin) {
        sl__set_error(SL_EINVAL, "megatron: prefix too long");
        return NULL;
    }
    tokens_ds *d = make(&megatron_def, bin);
    if (!d)
        return NULL;
    d->documents = flags & SL_TOKENS_DOCUMENTS;
    int rc = map_file(idx, &d->idx);
    if (rc == 0)
        rc = map_file(bin, &d->data);
    if (rc == 0)
        rc = megatron_check(d, idx);
    if (rc)
        return sl__dataset_fail(&d->base, rc, "megatron: %s", sl_last_error());
    return done(d);
}

/* ---- npy ---- */

/* The value of 'key' in a .npy header dict: the text after "'key':". */
static const char *dict_value(const char *h, size_t n, const char *key)
{
    size_t k = strlen(key);
    for (size_t i = 0; i + k + 3 <= n; i++)
        if (h[i] == '\'' && !memcmp(h + i + 1, key, k) && h[i + 1 + k] == '\'') {
            const char *v = h + i + k + 2;
            while (v < h + n && (*v == ':' || *v == ' '))
                v++;
            return v;
        }
    return NULL;
}

static int npy_header(tokens_ds *d, const char *path, uint64_t shape[2], int *ndim)
{
    const unsigned char *p = d->data.p;
    size_t n = d->data.n;
    if (n < 10 || memcmp(p, "\x93NUMPY", 6) != 0)
        return sl__set_error(SL_ECORRUPT, "%s: not a .npy file (no \\x93NUMPY magic)", path);
    size_t hlen, hstart;
    if (p[6] == 1) {
        hlen = (size_t)p[8] | (size_t)p[9] << 8;
        hstart = 10;
    } else if ((p[6] == 2 || p[6] == 3) && n >= 12) {
        hlen = sl__get_le32(p + 8);
        hstart = 12;
    } else {
        return sl__set_error(SL_ECORRUPT, "%s: byte 6: .npy version %u (1, 2 and 3 are known)",
                             path, p[6]);
    }
    if (hlen > n - hstart || hlen > 65536)
        return sl__set_error(SL_ECORRUPT, "%s: a header of %zu bytes in a file of %zu", path,
                             hlen, n);
    char h[65537];
    memcpy(h, p + hstart, hlen);
    h[hlen] = 0;
    const char *descr = dict_value(h, hlen, "descr"), *fortran = dict_value(h, hlen,
                                                                           "fortran_order");
    const char *sh = dict_value(h, hlen, "shape");
    if (!descr || !fortran || !sh || *sh != '(')
        return sl__set_error(SL_ECORRUPT, "%s: the header lacks descr, fortran_order or shape",
                             path);
    static const struct {
        const char *name;
        sl_dtype dt;
        size_t item;
    } types[] = {{"'|u1'", SL_UINT8, 1}, {"'<u1'", SL_UINT8, 1}, {"'|i1'", SL_INT8, 1},
                 {"'<i1'", SL_INT8, 1},  {"'<u2'", SL_UINT16, 2}, {"'<i2'", SL_INT16, 2},
                 {"'<i4'", SL_INT32, 4}, {"'<i8'", SL_INT64, 8},  {"'<f4'", SL_FLOAT32, 4},
                 {"'<f8'", SL_FLOAT64, 8}};
    size_t t = 0;
    while (t < sizeof types / sizeof *types && strncmp(descr, types[t].name,
                                                       strlen(types[t].name)) != 0)
        t++;
    if (t == sizeof types / sizeof *types)
        return sl__set_error(SL_EUNSUPPORTED, "%s: dtype %.12s (little-endian u1, i1, u2, i2, "
                             "i4, i8, f4, f8 are read)", path, descr);
    d->dtype = types[t].dt;
    d->item = types[t].item;
    *ndim = 0;
    const char *s = sh + 1;
    while (*ndim < 3) {
        while (*s == ' ' || *s == ',')
            s++;
        if (*s == ')')
            break;
        uint64_t v = 0;
        const char *digits = s;
        while (*s >= '0' && *s <= '9' && v < (UINT64_C(1) << 58))
            v = v * 10 + (uint64_t)(*s++ - '0');
        if (s == digits || *ndim == 2)
            return sl__set_error(SL_EUNSUPPORTED, "%s: shape %.40s (1-D and 2-D arrays are "
                                 "read)", path, sh);
        shape[(*ndim)++] = v;
    }
    if (*ndim == 0)
        return sl__set_error(SL_EUNSUPPORTED, "%s: a 0-D array", path);
    if (*ndim == 2 && strncmp(fortran, "False", 5) != 0)
        return sl__set_error(SL_EUNSUPPORTED, "%s: a Fortran-order 2-D array (rows are not "
                             "contiguous)", path);
    d->start = hstart + hlen;
    uint64_t items = *ndim == 2 ? shape[0] * shape[1] : shape[0];
    if ((*ndim == 2 && shape[1] && shape[0] > UINT64_MAX / shape[1]) ||
        items > (n - d->start) / d->item)
        return sl__set_error(SL_ECORRUPT, "%s: the shape asks for %llu items, the file holds "
                             "%zu bytes after its header", path, (unsigned long long)items,
                             n - d->start);
    d->total = items;
    return 0;
}

SL_API sl_dataset *sl_npy(const char *path, int64_t seq_len, unsigned flags)
{
    if (!path || flags || seq_len < 0) {
        sl__set_error(SL_EINVAL, "npy: %s", !path ? "NULL path" : flags ? "unknown flags"
                                                                       : "seq_len < 0");
        return NULL;
    }
    tokens_ds *d = make(&npy_def, path);
    if (!d)
        return NULL;
    uint64_t shape[2];
    int ndim = 0;
    int rc = map_file(path, &d->data);
    if (rc == 0)
        rc = npy_header(d, path, shape, &ndim);
    if (rc == 0 && ndim == 2 && seq_len && (uint64_t)seq_len != shape[1])
        rc = sl__set_error(SL_EINVAL, "%s: rows of %llu tokens, seq_len %lld (0 takes the "
                           "rows as they are)", path, (unsigned long long)shape[1],
                           (long long)seq_len);
    if (rc == 0 && ndim == 1 && seq_len == 0)
        rc = sl__set_error(SL_EINVAL, "%s: a 1-D array is cut into elements of seq_len "
                           "tokens; give seq_len", path);
    if (rc)
        return sl__dataset_fail(&d->base, rc, "npy: %s", sl_last_error());
    d->per = ndim == 2 ? shape[1] : (uint64_t)seq_len;
    d->count = ndim == 2 ? (int64_t)shape[0]
                         : (int64_t)((d->total + d->per - 1) / d->per);
    return done(d);
}
