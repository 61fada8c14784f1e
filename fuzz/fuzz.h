/* Fuzz targets: each defines LLVMFuzzerTestOneInput (libFuzzer's entry)
 * and fuzz_seeds (starting inputs for driver.c, which mutates them
 * deterministically when the target is built as a plain test). */
#ifndef SLUICE_FUZZ_H
#define SLUICE_FUZZ_H

#include <stddef.h>
#include <stdint.h>
#include "sluice.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
/* Calls add() once per seed input. */
void fuzz_seeds(void (*add)(const uint8_t *data, size_t size));

/* Reads every byte of every tensor of el, and every string through the
 * accessor, so a sanitizer sees any that lies out of bounds. */
static inline unsigned fuzz_touch(const sl_element *el)
{
    unsigned s = 0;
    for (int i = 0; i < sl_element_size(el); i++) {
        const sl_tensor *t = sl_element_tensor(el, i);
        const unsigned char *p = sl_tensor_data(t);
        for (size_t k = 0; k < sl_tensor_nbytes(t); k++)
            s += p[k];
        if (sl_tensor_dtype(t) == SL_STRING)
            for (int64_t k = 0; k < sl_tensor_count(t); k++) {
                size_t len;
                const char *str = sl_tensor_string(t, k, &len);
                for (size_t j = 0; str && j < len; j++)
                    s += (unsigned char)str[j];
            }
    }
    return s;
}

/* Iterates ds (consumed; NULL allowed: a refused input) to its end on one
 * thread under the given error policy, touching every element. */
static inline void fuzz_drain(sl_dataset *ds, int policy)
{
    sl_options *o = sl_options_create();
    sl_options_set(o, SL_OPT_THREADS, 1);
    sl_options_set(o, SL_OPT_ERROR_POLICY, policy);
    sl_options_set(o, SL_OPT_ERROR_LOG_LIMIT, 0);
    sl_iterator *it = ds ? sl_iterator_create(ds, o) : NULL;
    sl_element *el;
    volatile unsigned sink = 0;
    while (it && sl_next(it, &el) == 0) {
        sink += fuzz_touch(el);
        sl_element_release(el);
    }
    (void)sink;
    sl_iterator_free(it);
    sl_options_free(o);
    sl_dataset_release(ds);
}

#endif
