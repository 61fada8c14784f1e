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

#endif
