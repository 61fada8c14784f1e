/*
 * Element structures: parsing and writing their text form, and the
 * immutable trees datasets share (structure.h).
 *
 * A structure is one allocation: a header with the reference count, then
 * its nodes, laid out so that each node's children are contiguous (node 0
 * is the root), then the leaves' dimensions and the dict keys. Every node
 * is itself an sl_structure handle onto the whole tree: retaining or
 * releasing any of them counts on the tree.
 */
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "alloc.h"
#include "element.h"
#include "error.h"
#include "structure.h"

#define MAX_DEPTH 64
#define MAX_NODES 65536
#define MAX_KEY 4096

typedef struct tree tree;

struct sl_structure {
    tree *tree;
    uint8_t kind;
    int8_t dtype, ndim; /* leaves: -1 unknown */
    int nchildren, nleaves, first_leaf;
    const sl_structure *children;
    const char *key;      /* in its parent dict, else NULL */
    const int64_t *shape; /* ndim > 0 */
};

struct tree {
    atomic_int refs;
    size_t size;
    int nnodes;
    sl_structure nodes[];
};

/* ---- parsing into a temporary tree ---- */

typedef struct pnode {
    uint8_t kind;
    sl__leaf_spec spec;
    char *key;
    struct pnode **kids;
    int n, cap;
} pnode;

typedef struct parser {
    const char *s, *p;
    int nodes;
    size_t dims, keybytes;
} parser;

static void pnode_free(pnode *n)
{
    if (!n)
        return;
    for (int i = 0; i < n->n; i++)
        pnode_free(n->kids[i]);
    sl__free(n->kids, (size_t)n->cap * sizeof *n->kids);
    sl__strfree(n->key);
    sl__free(n, sizeof *n);
}

static int bad(parser *ps, const char *what)
{
    return sl__set_error(SL_EINVAL, "structure: %s at offset %d of \"%.200s\"", what,
                         (int)(ps->p - ps->s), ps->s);
}

static void skip_space(parser *ps)
{
    while (*ps->p == ' ' || *ps->p == '\t' || *ps->p == '\n' || *ps->p == '\r')
        ps->p++;
}

static bool bare_char(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
           c == '_' || c == '.' || c == '-';
}

static pnode *pnode_new(parser *ps, uint8_t kind)
{
    if (++ps->nodes > MAX_NODES) {
        bad(ps, "too many nodes");
        return NULL;
    }
    pnode *n = sl__calloc(1, sizeof *n);
    if (!n)
        sl__set_error(SL_ENOMEM, "structure: out of memory");
    else
        n->kind = kind;
    return n;
}

static int add_kid(pnode *n, pnode *kid)
{
    if (n->n == n->cap) {
        int cap = n->cap ? 2 * n->cap : 4;
        pnode **k = sl__alloc((size_t)cap * sizeof *k);
        if (!k)
            return sl__set_error(SL_ENOMEM, "structure: out of memory");
        if (n->n)
            memcpy(k, n->kids, (size_t)n->n * sizeof *k);
        sl__free(n->kids, (size_t)n->cap * sizeof *n->kids);
        n->kids = k;
        n->cap = cap;
    }
    n->kids[n->n++] = kid;
    return 0;
}

static int parse_dims(parser *ps, sl__leaf_spec *spec)
{
    ps->p++; /* '[' */
    spec->ndim = 0;
    skip_space(ps);
    if (*ps->p == ']') {
        ps->p++;
        return 0;
    }
    for (;;) {
        skip_space(ps);
        if (spec->ndim == SL_MAX_DIMS)
            return bad(ps, "more than SL_MAX_DIMS dimensions");
        int64_t d = -1;
        if (*ps->p == '?') {
            ps->p++;
        } else if (*ps->p >= '0' && *ps->p <= '9') {
            char *end;
            long long v = strtoll(ps->p, &end, 10);
            if (v < 0 || v > INT64_MAX / 2)
                return bad(ps, "bad dimension");
            d = v;
            ps->p = end;
        } else {
            return bad(ps, "a dimension (a count or ?) expected");
        }
        spec->shape[spec->ndim++] = d;
        skip_space(ps);
        if (*ps->p == ']') {
            ps->p++;
            ps->dims += (size_t)spec->ndim;
            return 0;
        }
        if (*ps->p != ',')
            return bad(ps, "',' or ']' expected");
        ps->p++;
    }
}

static int parse_leaf(parser *ps, pnode **out)
{
    sl__leaf_spec spec = SL__LEAF_UNKNOWN;
    if (*ps->p == '?') {
        ps->p++;
    } else {
        const char *start = ps->p;
        while (bare_char(*ps->p))
            ps->p++;
        size_t len = (size_t)(ps->p - start);
        for (int d = 0; d < SL_DTYPE_COUNT && spec.dtype < 0; d++) {
            const char *name = sl_dtype_name((sl_dtype)d);
            if (strlen(name) == len && memcmp(name, start, len) == 0)
                spec.dtype = d;
        }
        if (spec.dtype < 0) {
            ps->p = start;
            return bad(ps, "a dtype name, ?, ( or { expected");
        }
    }
    if (*ps->p == '[') {
        int rc = parse_dims(ps, &spec);
        if (rc)
            return rc;
    }
    pnode *n = pnode_new(ps, SL_STRUCTURE_LEAF);
    if (!n)
        return sl_last_error_code();
    n->spec = spec;
    *out = n;
    return 0;
}

static int parse_key(parser *ps, char **out)
{
    char buf[MAX_KEY];
    size_t len = 0;
    if (*ps->p == '"') {
        ps->p++;
        while (*ps->p != '"') {
            char c = *ps->p;
            if (!c)
                return bad(ps, "unterminated key");
            if (c == '\\') {
                c = *++ps->p;
                if (c != '"' && c != '\\')
                    return bad(ps, "bad escape in a key (\\\" and \\\\ only)");
            }
            if (len == MAX_KEY - 1)
                return bad(ps, "key too long");
            buf[len++] = c;
            ps->p++;
        }
        ps->p++;
    } else {
        while (bare_char(*ps->p)) {
            if (len == MAX_KEY - 1)
                return bad(ps, "key too long");
            buf[len++] = *ps->p++;
        }
        if (!len)
            return bad(ps, "a key expected");
    }
    buf[len] = 0;
    if (!(*out = sl__strdup(buf)))
        return sl__set_error(SL_ENOMEM, "structure: out of memory");
    ps->keybytes += len + 1;
    return 0;
}

static int by_key(const void *a, const void *b)
{
    return strcmp((*(pnode *const *)a)->key, (*(pnode *const *)b)->key);
}

static int parse_value(parser *ps, int depth, pnode **out);

/* A tuple or dict's items, up to `close`. */
static int parse_items(parser *ps, pnode *n, char close, int depth)
{
    ps->p++;
    for (;;) {
        skip_space(ps);
        if (*ps->p == close) {
            ps->p++;
            break;
        }
        char *key = NULL;
        if (n->kind == SL_STRUCTURE_DICT) {
            int rc = parse_key(ps, &key);
            skip_space(ps);
            if (rc == 0 && *ps->p != ':')
                rc = bad(ps, "':' expected after a key");
            if (rc) {
                sl__strfree(key);
                return rc;
            }
            ps->p++;
        }
        pnode *kid = NULL;
        int rc = parse_value(ps, depth + 1, &kid);
        if (rc == 0 && (rc = add_kid(n, kid)) != 0)
            pnode_free(kid);
        if (rc) {
            sl__strfree(key);
            return rc;
        }
        kid->key = key;
        skip_space(ps);
        if (*ps->p == ',')
            ps->p++;
        else if (*ps->p != close)
            return bad(ps, close == ')' ? "',' or ')' expected" : "',' or '}' expected");
    }
    if (n->kind == SL_STRUCTURE_DICT && n->n > 1) {
        qsort(n->kids, (size_t)n->n, sizeof *n->kids, by_key);
        for (int i = 1; i < n->n; i++)
            if (!strcmp(n->kids[i - 1]->key, n->kids[i]->key))
                return sl__set_error(SL_EINVAL, "structure: key \"%s\" twice in a dict",
                                     n->kids[i]->key);
    }
    return 0;
}

static int parse_value(parser *ps, int depth, pnode **out)
{
    if (depth > MAX_DEPTH)
        return bad(ps, "nested too deep");
    skip_space(ps);
    char c = *ps->p;
    if (c != '(' && c != '{')
        return parse_leaf(ps, out);
    pnode *n = pnode_new(ps, c == '(' ? SL_STRUCTURE_TUPLE : SL_STRUCTURE_DICT);
    if (!n)
        return sl_last_error_code();
    int rc = parse_items(ps, n, c == '(' ? ')' : '}', depth);
    if (rc) {
        pnode_free(n);
        return rc;
    }
    *out = n;
    return 0;
}

/* ---- laying a parsed tree out ---- */

typedef struct layout {
    tree *t;
    int next_node;
    int64_t *dims;
    char *keys;
    int leaves;
} layout;

/* Fills node `at` from p; its children go to the next free block, so each
 * node's children are contiguous. Leaves are numbered depth first. */
static void place(layout *l, sl_structure *at, const pnode *p)
{
    at->tree = l->t;
    at->kind = p->kind;
    at->dtype = (int8_t)p->spec.dtype;
    at->ndim = (int8_t)p->spec.ndim;
    if (p->key) {
        size_t len = strlen(p->key) + 1;
        memcpy(l->keys, p->key, len);
        at->key = l->keys;
        l->keys += len;
    }
    if (p->kind == SL_STRUCTURE_LEAF) {
        if (p->spec.ndim > 0) {
            memcpy(l->dims, p->spec.shape, (size_t)p->spec.ndim * sizeof *l->dims);
            at->shape = l->dims;
            l->dims += p->spec.ndim;
        }
        at->first_leaf = l->leaves++;
        at->nleaves = 1;
        return;
    }
    sl_structure *kids = &l->t->nodes[l->next_node];
    l->next_node += p->n;
    at->children = kids;
    at->nchildren = p->n;
    at->first_leaf = l->leaves;
    for (int i = 0; i < p->n; i++)
        place(l, &kids[i], p->kids[i]);
    at->nleaves = l->leaves - at->first_leaf;
}

static sl_structure *lay_out(const parser *ps, const pnode *root)
{
    size_t size = sizeof(tree) + (size_t)ps->nodes * sizeof(sl_structure) +
                  ps->dims * sizeof(int64_t) + ps->keybytes;
    tree *t = sl__calloc(1, size);
    if (!t) {
        sl__set_error(SL_ENOMEM, "structure: out of memory");
        return NULL;
    }
    atomic_init(&t->refs, 1);
    t->size = size;
    t->nnodes = ps->nodes;
    layout l = {t, 1, (int64_t *)(t->nodes + ps->nodes), NULL, 0};
    l.keys = (char *)(l.dims + ps->dims);
    place(&l, &t->nodes[0], root);
    return &t->nodes[0];
}

SL_API sl_structure *sl_structure_parse(const char *text)
{
    if (!text) {
        sl__set_error(SL_EINVAL, "structure: NULL text");
        return NULL;
    }
    parser ps = {text, text, 0, 0, 0};
    pnode *root = NULL;
    int rc = parse_value(&ps, 0, &root);
    skip_space(&ps);
    if (rc == 0 && *ps.p)
        rc = bad(&ps, "text after the structure");
    sl_structure *s = rc == 0 ? lay_out(&ps, root) : NULL;
    pnode_free(root);
    return s;
}

SL_API sl_structure *sl_structure_retain(sl_structure *s)
{
    if (s)
        atomic_fetch_add_explicit(&s->tree->refs, 1, memory_order_relaxed);
    return s;
}

SL_API void sl_structure_release(sl_structure *s)
{
    if (s && atomic_fetch_sub_explicit(&s->tree->refs, 1, memory_order_acq_rel) == 1)
        sl__free(s->tree, s->tree->size);
}

/* ---- reading ---- */

SL_API int sl_structure_kind(const sl_structure *s)
{
    return s ? s->kind : SL_EINVAL;
}

SL_API int sl_structure_size(const sl_structure *s)
{
    return s ? s->nchildren : 0;
}

SL_API const sl_structure *sl_structure_child(const sl_structure *s, int i)
{
    return s && i >= 0 && i < s->nchildren ? &s->children[i] : NULL;
}

SL_API const char *sl_structure_key(const sl_structure *s, int i)
{
    return s && s->kind == SL_STRUCTURE_DICT && i >= 0 && i < s->nchildren ? s->children[i].key
                                                                         : NULL;
}

SL_API const sl_structure *sl_structure_get(const sl_structure *s, const char *key)
{
    if (!s || !key || s->kind != SL_STRUCTURE_DICT)
        return NULL;
    int lo = 0, hi = s->nchildren - 1;
    while (lo <= hi) { /* keys are sorted */
        int mid = (lo + hi) / 2, c = strcmp(key, s->children[mid].key);
        if (c == 0)
            return &s->children[mid];
        if (c < 0)
            hi = mid - 1;
        else
            lo = mid + 1;
    }
    return NULL;
}

SL_API int sl_structure_leaves(const sl_structure *s)
{
    return s ? s->nleaves : 0;
}

SL_API int sl_structure_leaf_index(const sl_structure *s)
{
    return s ? s->first_leaf : SL_EINVAL;
}

SL_API int sl_structure_dtype(const sl_structure *s)
{
    return s && s->kind == SL_STRUCTURE_LEAF ? s->dtype : -1;
}

SL_API int sl_structure_ndim(const sl_structure *s)
{
    return s && s->kind == SL_STRUCTURE_LEAF ? s->ndim : -1;
}

SL_API const int64_t *sl_structure_shape(const sl_structure *s)
{
    return s && s->kind == SL_STRUCTURE_LEAF ? s->shape : NULL;
}

/* The leaf node of flat index `leaf` under s, or NULL. */
static const sl_structure *leaf_node(const sl_structure *s, int leaf)
{
    while (s->kind != SL_STRUCTURE_LEAF) {
        if (!s->nchildren)
            return NULL;
        int i = 0;
        while (i + 1 < s->nchildren && s->children[i + 1].first_leaf <= leaf)
            i++;
        s = &s->children[i];
    }
    return s->first_leaf == leaf ? s : NULL;
}

int sl__leaf_dtype(const sl_structure *s, int leaf)
{
    const sl_structure *n = leaf_node(s, leaf);
    return n ? n->dtype : -1;
}

sl__leaf_spec sl__structure_spec(const sl_structure *s)
{
    sl__leaf_spec spec = {.dtype = s->dtype, .ndim = s->ndim};
    for (int d = 0; d < s->ndim; d++)
        spec.shape[d] = s->shape[d];
    return spec;
}

bool sl__structure_same_tree(const sl_structure *a, const sl_structure *b)
{
    if (a->kind != b->kind || a->nchildren != b->nchildren)
        return false;
    for (int i = 0; i < a->nchildren; i++) {
        const sl_structure *x = &a->children[i], *y = &b->children[i];
        if ((x->key || y->key) && (!x->key || !y->key || strcmp(x->key, y->key)))
            return false;
        if (!sl__structure_same_tree(x, y))
            return false;
    }
    return true;
}

/* ---- writing ---- */

static void put(sl__stext *t, const char *s, size_t n)
{
    if (t->failed)
        return;
    if (t->cap - t->n < n + 1) {
        size_t cap = t->cap ? t->cap : 64;
        while (cap - t->n < n + 1)
            cap *= 2;
        char *p = sl__alloc(cap);
        if (!p) {
            t->failed = true;
            return;
        }
        if (t->n)
            memcpy(p, t->p, t->n);
        sl__free(t->p, t->cap);
        t->p = p;
        t->cap = cap;
    }
    memcpy(t->p + t->n, s, n);
    t->n += n;
    t->p[t->n] = 0;
}

void sl__stext_puts(sl__stext *t, const char *s)
{
    put(t, s, strlen(s));
}

void sl__stext_key(sl__stext *t, const char *key)
{
    bool bare = *key != 0;
    for (const char *c = key; *c && bare; c++)
        bare = bare_char(*c);
    if (bare) {
        sl__stext_puts(t, key);
        return;
    }
    put(t, "\"", 1);
    for (const char *c = key; *c; c++) {
        if (*c == '"' || *c == '\\')
            put(t, "\\", 1);
        put(t, c, 1);
    }
    put(t, "\"", 1);
}

void sl__stext_leaf(sl__stext *t, const sl__leaf_spec *spec)
{
    sl__stext_puts(t, spec->dtype >= 0 ? sl_dtype_name((sl_dtype)spec->dtype) : "?");
    if (spec->ndim < 0)
        return;
    put(t, "[", 1);
    for (int d = 0; d < spec->ndim; d++) {
        char num[24];
        if (spec->shape[d] < 0)
            snprintf(num, sizeof num, "%s?", d ? "," : "");
        else
            snprintf(num, sizeof num, "%s%lld", d ? "," : "", (long long)spec->shape[d]);
        sl__stext_puts(t, num);
    }
    put(t, "]", 1);
}

void sl__stext_structure(sl__stext *t, const sl_structure *s, sl__leaf_hook hook, void *arg)
{
    if (s->kind == SL_STRUCTURE_LEAF) {
        sl__leaf_spec spec = sl__structure_spec(s);
        if (hook)
            hook(t, s->first_leaf, &spec, arg);
        else
            sl__stext_leaf(t, &spec);
        return;
    }
    bool dict = s->kind == SL_STRUCTURE_DICT;
    put(t, dict ? "{" : "(", 1);
    for (int i = 0; i < s->nchildren; i++) {
        if (i)
            sl__stext_puts(t, ", ");
        if (dict) {
            sl__stext_key(t, s->children[i].key);
            sl__stext_puts(t, ": ");
        }
        sl__stext_structure(t, &s->children[i], hook, arg);
    }
    if (!dict && s->nchildren == 1)
        put(t, ",", 1);
    put(t, dict ? "}" : ")", 1);
}

sl_structure *sl__stext_finish(sl__stext *t)
{
    sl_structure *s = NULL;
    if (t->failed)
        sl__set_error(SL_ENOMEM, "structure: out of memory");
    else
        s = sl_structure_parse(t->p ? t->p : "");
    sl__free(t->p, t->cap);
    *t = (sl__stext){0};
    return s;
}

SL_API int sl_structure_format(const sl_structure *s, char *buf, size_t n)
{
    if (!s)
        return snprintf(buf, n, "?");
    sl__stext t = {0};
    sl__stext_structure(&t, s, NULL, NULL);
    if (t.failed) {
        sl__free(t.p, t.cap);
        return sl__set_error(SL_ENOMEM, "structure: out of memory");
    }
    int len = snprintf(buf, n, "%s", t.p);
    sl__free(t.p, t.cap);
    return len;
}

sl_structure *sl__structure_rewrite(const sl_structure *s, sl__leaf_hook hook, void *arg)
{
    sl__stext t = {0};
    sl__stext_structure(&t, s, hook, arg);
    return sl__stext_finish(&t);
}

sl_structure *sl__structure_rewrite_append(const sl_structure *s, sl__leaf_hook hook, void *arg,
                                           const char *extra)
{
    if (!extra)
        return sl__structure_rewrite(s, hook, arg);
    sl__stext t = {0};
    sl__stext_puts(&t, "(");
    if (s->kind == SL_STRUCTURE_TUPLE) {
        for (int i = 0; i < s->nchildren; i++) {
            sl__stext_structure(&t, &s->children[i], hook, arg);
            sl__stext_puts(&t, ", ");
        }
    } else {
        sl__stext_structure(&t, s, hook, arg);
        sl__stext_puts(&t, ", ");
    }
    sl__stext_puts(&t, extra);
    sl__stext_puts(&t, ")");
    return sl__stext_finish(&t);
}

sl_structure *sl__structure_flat(int n, const sl__leaf_spec *specs)
{
    sl__stext t = {0};
    sl__leaf_spec unknown = SL__LEAF_UNKNOWN;
    if (n != 1)
        sl__stext_puts(&t, "(");
    for (int i = 0; i < n; i++) {
        if (i)
            sl__stext_puts(&t, ", ");
        sl__stext_leaf(&t, specs ? &specs[i] : &unknown);
    }
    if (n != 1)
        sl__stext_puts(&t, ")");
    return sl__stext_finish(&t);
}

sl_structure *sl__structure_of_element(const sl_element *el, int drop)
{
    sl__leaf_spec specs[64] = {{0}};
    sl__leaf_spec *v = el->n <= 64 ? specs : sl__alloc((size_t)el->n * sizeof *v);
    if (!v) {
        sl__set_error(SL_ENOMEM, "structure: out of memory");
        return NULL;
    }
    for (int j = 0; j < el->n; j++) {
        const struct sl_tensor *t = &el->t[j];
        int nd = t->ndim > drop ? t->ndim - drop : 0;
        v[j] = (sl__leaf_spec){.dtype = t->dtype, .ndim = nd};
        memcpy(v[j].shape, t->shape + (t->ndim - nd), (size_t)nd * sizeof *v[j].shape);
    }
    sl_structure *s = sl__structure_flat(el->n, v);
    if (v != specs)
        sl__free(v, (size_t)el->n * sizeof *v);
    return s;
}

sl_structure *sl__structure_compose(int n, const sl_structure *const *items,
                                    const char *const *keys)
{
    for (int i = 0; i < n; i++)
        if (!items[i])
            return NULL;
    sl__stext t = {0};
    sl__stext_puts(&t, keys ? "{" : "(");
    for (int i = 0; i < n; i++) {
        sl__stext_puts(&t, i ? ", " : "");
        if (keys) {
            sl__stext_key(&t, keys[i]);
            sl__stext_puts(&t, ": ");
        }
        sl__stext_structure(&t, items[i], NULL, NULL);
    }
    sl__stext_puts(&t, keys ? "}" : n == 1 ? ",)" : ")");
    return sl__stext_finish(&t);
}

/* The leaves of `other`, in order, for the hook below. */
typedef struct unify_arg {
    const sl_structure *other;
    int bad_dtype; /* a leaf whose dtypes differ, or -1 */
} unify_arg;

static void unify_leaf(sl__stext *t, int leaf, const sl__leaf_spec *a, void *arg)
{
    unify_arg *u = arg;
    sl__leaf_spec b = sl__structure_spec(leaf_node(u->other, leaf)), out = *a;
    if (a->dtype >= 0 && b.dtype >= 0 && a->dtype != b.dtype && u->bad_dtype < 0)
        u->bad_dtype = leaf;
    if (a->dtype != b.dtype)
        out.dtype = a->dtype < 0 ? b.dtype : b.dtype < 0 ? a->dtype : -1;
    if (a->ndim != b.ndim)
        out.ndim = -1;
    for (int d = 0; d < out.ndim; d++)
        if (a->shape[d] != b.shape[d])
            out.shape[d] = -1;
    sl__stext_leaf(t, &out);
}

sl_structure *sl__structure_unify(const sl_structure *a, const sl_structure *b)
{
    if (!a || !b) {
        const sl_structure *known = a ? a : b;
        return known ? sl_structure_retain((sl_structure *)known) : NULL;
    }
    char x[256], y[256];
    if (!sl__structure_same_tree(a, b)) {
        sl_structure_format(a, x, sizeof x);
        sl_structure_format(b, y, sizeof y);
        sl__set_error(SL_ESHAPE, "elements of structure %s and %s cannot be one dataset's", x, y);
        return NULL;
    }
    unify_arg u = {b, -1};
    sl_structure *s = sl__structure_rewrite(a, unify_leaf, &u);
    if (s && u.bad_dtype >= 0) {
        sl_structure_release(s);
        sl_structure_format(a, x, sizeof x);
        sl_structure_format(b, y, sizeof y);
        sl__set_error(SL_EDTYPE, "tensor %d has another dtype in %s than in %s", u.bad_dtype, x,
                      y);
        return NULL;
    }
    return s;
}
