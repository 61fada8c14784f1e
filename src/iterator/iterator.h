/* What the iterator layer offers inside the library and to tests. */
#ifndef SL_ITERATOR_ITERATOR_H
#define SL_ITERATOR_ITERATOR_H

#include "../graph/node.h"

/* The tree an iterator runs on. */
sl__tree *sl__iterator_tree(const sl_iterator *it);

#endif
