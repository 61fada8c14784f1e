/* Fuzz targets: each defines LLVMFuzzerTestOneInput (libFuzzer's entry)
 * and fuzz_seeds (starting inputs for driver.c, which mutates them
 * deterministically when the target is built as a plain test). */
#ifndef SLUICE_FUZZ_H
#define SLUICE_FUZZ_H

#include <stddef.h>
#include <stdint.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
/* Calls add() once per seed input. */
void fuzz_seeds(void (*add)(const uint8_t *data, size_t size));

#endif
