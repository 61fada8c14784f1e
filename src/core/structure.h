/*
 * Element structures (sl_structure, public in sluice.h): a tree of tuples
 * and dicts whose leaves are an element's tensors in order, kept as one
 * immutable, reference-counted allocation. Ops derive their output's
 * structure from their input's when a dataset is built; nothing here runs
 * per element.
 */
#ifndef SL_CORE_STRUCTURE_H
#define SL_CORE_STRUCTURE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "sluice.h"

/* What a leaf says of its tensor: dtype and shape, -1 where unknown
 * (ndim -1: the rank too). */
typedef struct sl__leaf_spec {
    int dtype;
    int ndim;
    int64_t shape[SL_MAX_DIMS];
} sl__leaf_spec;

#define SL__LEAF_UNKNOWN ((sl__leaf_spec){.dtype = -1, .ndim = -1})

/* A growable string that structures are written into (their text form,
 * which is also how ops build new ones). On allocation failure it keeps
 * a flag and sl__stext_finish fails. */
typedef struct sl__stext {
    char *p;
    size_t n, cap;
    bool failed;
} sl__stext;

void sl__stext_puts(sl__stext *t, const char *s);
void sl__stext_key(sl__stext *t, const char *key); /* a dict key, quoted if needed */
void sl__stext_leaf(sl__stext *t, const sl__leaf_spec *spec);
/* Writes s; where hook is not NULL it is called for each leaf (its flat
 * index, its spec) and writes that leaf's text itself: the same spec, a
 * changed one, or a subtree. */
typedef void (*sl__leaf_hook)(sl__stext *t, int leaf, const sl__leaf_spec *spec, void *arg);
void sl__stext_structure(sl__stext *t, const sl_structure *s, sl__leaf_hook hook, void *arg);
/* The structure written so far (frees the text), or NULL with the error
 * set: out of memory, or text that does not parse (a bug in the writer). */
sl_structure *sl__stext_finish(sl__stext *t);

/* The dtype of s's leaf number `leaf` (flat index), -1 if not known. */
int sl__leaf_dtype(const sl_structure *s, int leaf);
/* The spec of leaf node s. */
sl__leaf_spec sl__structure_spec(const sl_structure *s);
/* A copy of s with each leaf's text written by hook (as above). */
sl_structure *sl__structure_rewrite(const sl_structure *s, sl__leaf_hook hook, void *arg);
/* The same with one more leaf, `extra` (text), after the last: the root
 * tuple's last item, or with the root a tuple of (root, extra) when it is
 * not a tuple (the path tensor SL_WITH_PATHS appends). */
sl_structure *sl__structure_rewrite_append(const sl_structure *s, sl__leaf_hook hook, void *arg,
                                           const char *extra);
/* n leaves as a structure: one leaf for n == 1 (a single tensor is not a
 * one-tuple), a tuple otherwise; specs NULL: all unknown. */
sl_structure *sl__structure_flat(int n, const sl__leaf_spec *specs);
/* The flat structure of el's tensors, each described by its dtype and its
 * shape without the first `drop` dimensions (1: the slices of
 * from_tensors). */
sl_structure *sl__structure_of_element(const sl_element *el, int drop);
/* n structures as the items of a tuple (keys NULL) or a dict (keys[i]
 * for items[i]): zip's. NULL items make NULL (not known). */
sl_structure *sl__structure_compose(int n, const sl_structure *const *items,
                                    const char *const *keys);
/* The structure both a and b fit (concatenate's, choose_from's): the same
 * tree, and per leaf what they agree on (a dtype both have, dimensions
 * both have; the rest not known). NULL with SL_ESHAPE or SL_EDTYPE, naming
 * both, when they cannot be one dataset's elements; a NULL argument
 * (not known) gives the other. */
sl_structure *sl__structure_unify(const sl_structure *a, const sl_structure *b);
/* Whether a and b have the same tree (kinds, sizes, keys); leaf specs
 * are not compared. */
bool sl__structure_same_tree(const sl_structure *a, const sl_structure *b);

#endif
