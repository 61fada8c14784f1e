/* The token file readers (sl_megatron, sl_npy): an index or an array
 * header is input from disk, and whatever it says must be checked against
 * the files before any read, so every element lies inside the mapping,
 * or the file is refused naming it; never a crash or a leak.
 *
 * Input: byte 0 picks the mode. Bit 0 clear: the rest is a Megatron .idx
 * beside a fixed .bin of 64 uint16 tokens (bit 1: read documents). Set:
 * the rest is a .npy file, read with seq_len 0 (bit 1 clear) or 3. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "../tests/recordutil.h"
#include "fuzz.h"
#include "sluice.h"

static char prefix[64], idx[72], bin[72], npy[72];

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    if (!prefix[0]) {
        snprintf(prefix, sizeof prefix, "/tmp/sluice-fuzz-tokens-%d", (int)getpid());
        snprintf(idx, sizeof idx, "%s.idx", prefix);
        snprintf(bin, sizeof bin, "%s.bin", prefix);
        snprintf(npy, sizeof npy, "%s.npy", prefix);
    }
    if (data[0] & 1) {
        ru_write(npy, data + 1, size - 1);
        fuzz_drain(sl_npy(npy, data[0] & 2 ? 3 : 0, 0), SL_ERRORS_FAIL);
        unlink(npy);
        return 0;
    }
    unsigned char tokens[128];
    for (int i = 0; i < 128; i++)
        tokens[i] = (unsigned char)i;
    ru_write(bin, tokens, sizeof tokens);
    ru_write(idx, data + 1, size - 1);
    fuzz_drain(sl_megatron(prefix, data[0] & 2 ? SL_TOKENS_DOCUMENTS : 0), SL_ERRORS_FAIL);
    unlink(idx);
    unlink(bin);
    return 0;
}

void fuzz_seeds(void (*add)(const uint8_t *data, size_t size))
{
    /* an index of 3 sequences (10, 20, 34 tokens) in 2 documents */
    const uint64_t lens[3] = {10, 20, 34}, docs[3] = {0, 2, 3};
    ru_buf b = {0};
    unsigned char v[8] = {0};
    ru_put(&b, v, 1);
    ru_put(&b, "MMIDIDX\0\0", 9);
    ru_le(v, 1, 8), ru_put(&b, v, 8);
    v[0] = 8, ru_put(&b, v, 1);
    ru_le(v, 3, 8), ru_put(&b, v, 8);
    ru_le(v, 3, 8), ru_put(&b, v, 8);
    for (int s = 0; s < 3; s++)
        ru_le(v, lens[s], 4), ru_put(&b, v, 4);
    uint64_t at = 0;
    for (int s = 0; s < 3; s++)
        ru_le(v, at, 8), ru_put(&b, v, 8), at += 2 * lens[s];
    for (int k = 0; k < 3; k++)
        ru_le(v, docs[k], 8), ru_put(&b, v, 8);
    add(b.p, b.n);
    b.p[0] = 2;
    add(b.p, b.n);
    free(b.p);
    /* a .npy of 2 x 4 int32 */
    ru_buf n = {0};
    v[0] = 1, ru_put(&n, v, 1);
    const char *dict = "{'descr': '<i4', 'fortran_order': False, 'shape': (2, 4), }";
    ru_put(&n, "\x93NUMPY\x01\x00", 8);
    size_t hl = strlen(dict) + 1;
    ru_le(v, hl, 2), ru_put(&n, v, 2);
    ru_put(&n, dict, strlen(dict));
    ru_put(&n, "\n", 1);
    for (int i = 0; i < 8; i++)
        ru_le(v, (uint64_t)i, 4), ru_put(&n, v, 4);
    add(n.p, n.n);
    n.p[0] = 3;
    add(n.p, n.n);
    free(n.p);
}
