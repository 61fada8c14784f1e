/* group_by_window's dataset, which bucket_by_sequence_length builds on
 * with functions of its own. */
#ifndef SL_OPS_GROUP_BY_WINDOW_H
#define SL_OPS_GROUP_BY_WINDOW_H

#include "../graph/node.h"

typedef struct sl__group_by_window_ds {
    sl_dataset base;
    sl_key_fn key_fn;
    sl_window_reduce_fn reduce_fn;
    int64_t window_size;
    sl_window_size_fn size_fn;
    void *user;
    void (*user_free)(void *user); /* with the dataset; NULL: the caller's */
    uint64_t user_hash; /* what the functions depend on besides the name */
} sl__group_by_window_ds;

/* sl_group_by_window with `user` owned: user_free(user) when the dataset
 * goes (also on failure). */
sl_dataset *sl__group_by_window(sl_dataset *in, const char *name, sl_key_fn key_fn,
                                sl_window_reduce_fn reduce_fn, int64_t window_size,
                                sl_window_size_fn size_fn, void *user, void (*user_free)(void *));

#endif
