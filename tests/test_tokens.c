/* Token files with random access: Megatron-LM's indexed dataset (.idx +
 * .bin) and NumPy .npy arrays, memory-mapped; every count and offset is
 * checked before a read, and a bad file is refused naming it. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "recordutil.h"
#include "testutil.h"

static char dir[256];

/* Megatron files for sequences of the given lengths (uint16 tokens: 100 *
 * sequence + position), grouped into documents by doc_starts (ending with
 * the sequence count). */
static void write_megatron(const char *prefix, const int *lens, int S, const int64_t *docs,
                           int D)
{
    char path[600];
    ru_buf bin = {0}, idx = {0};
    for (int s = 0; s < S; s++)
        for (int t = 0; t < lens[s]; t++) {
            unsigned char v[2];
            ru_le(v, (uint64_t)(100 * s + t), 2);
            ru_put(&bin, v, 2);
        }
    unsigned char b[8];
    ru_put(&idx, "MMIDIDX\0\0", 9);
    ru_le(b, 1, 8), ru_put(&idx, b, 8);
    b[0] = 8, ru_put(&idx, b, 1); /* uint16 */
    ru_le(b, (uint64_t)S, 8), ru_put(&idx, b, 8);
    ru_le(b, (uint64_t)D, 8), ru_put(&idx, b, 8);
    for (int s = 0; s < S; s++)
        ru_le(b, (uint64_t)lens[s], 4), ru_put(&idx, b, 4);
    uint64_t at = 0;
    for (int s = 0; s < S; s++) {
        ru_le(b, at, 8), ru_put(&idx, b, 8);
        at += 2 * (uint64_t)lens[s];
    }
    for (int k = 0; k < D; k++)
        ru_le(b, (uint64_t)docs[k], 8), ru_put(&idx, b, 8);
    snprintf(path, sizeof path, "%s.bin", prefix);
    ru_write(path, bin.p, bin.n);
    snprintf(path, sizeof path, "%s.idx", prefix);
    ru_write(path, idx.p, idx.n);
    free(bin.p), free(idx.p);
}

static void expect_tokens(const sl_element *el, int first_seq, int nseq, const int *lens)
{
    const sl_tensor *t = sl_element_tensor(el, 0);
    assert_int_equal(sl_tensor_dtype(t), SL_UINT16);
    assert_int_equal(sl_tensor_ndim(t), 1);
    const uint16_t *v = sl_tensor_data(t);
    int64_t k = 0;
    for (int s = first_seq; s < first_seq + nseq; s++)
        for (int p = 0; p < lens[s]; p++)
            assert_int_equal(v[k++], 100 * s + p);
    assert_int_equal(sl_tensor_shape(t)[0], k);
}

static int first_dim(sl_map_ctx *ctx, const sl_element *in, sl_element **out, void *user)
{
    (void)ctx, (void)user;
    *out = sl_element_create(1);
    return sl_element_add_int64(*out, sl_tensor_shape(sl_element_tensor(in, 0))[0]);
}

static const int lens[5] = {3, 0, 7, 2, 5};
static const int64_t docs[4] = {0, 2, 3, 5};

static void test_megatron(void **state)
{
    (void)state;
    char prefix[400];
    snprintf(prefix, sizeof prefix, "%s/corpus_text_document", dir);
    write_megatron(prefix, lens, 5, docs, 4);
    sl_dataset *ds = sl_megatron(prefix, 0);
    if (!ds)
        fail_msg("%s", sl_last_error());
    assert_int_equal(sl_dataset_cardinality(ds), 5);
    sl_options *o = tu_opts(2, 1);
    sl_iterator *it = sl_iterator_create(ds, o);
    sl_element *el;
    for (int s = 0; s < 5; s++) {
        assert_int_equal(sl_next(it, &el), 0);
        expect_tokens(el, s, 1, lens);
        sl_element_release(el);
    }
    assert_int_equal(sl_next(it, &el), SL_EOF);
    sl_iterator_free(it);
    sl_dataset_release(ds);

    /* documents: sequences 0-1, 2, 3-4 */
    ds = sl_megatron(prefix, SL_TOKENS_DOCUMENTS);
    assert_non_null(ds);
    assert_int_equal(sl_dataset_cardinality(ds), 3);
    it = sl_iterator_create(ds, o);
    const int first[3] = {0, 2, 3}, count[3] = {2, 1, 2};
    for (int d = 0; d < 3; d++) {
        assert_int_equal(sl_next(it, &el), 0);
        expect_tokens(el, first[d], count[d], lens);
        sl_element_release(el);
    }
    sl_iterator_free(it);

    /* a whole-corpus shuffle and a resume in the middle of it */
    sl_dataset *sh = sl_shuffle(sl_dataset_retain(ds), SL_SHUFFLE_ALL, 3, 0);
    int64_t *v;
    size_t n;
    sl_dataset *sizes = sl_map(sl_dataset_retain(sh), "len", first_dim, NULL, 1, 0);
    assert_int_equal(tu_collect(sizes, o, &v, &n, NULL), SL_EOF);
    assert_int_equal(n, 3);
    int64_t total = v[0] + v[1] + v[2];
    assert_int_equal(total, 17);
    free(v);
    it = sl_iterator_create(sh, o);
    assert_int_equal(sl_next(it, &el), 0);
    sl_element_release(el);
    unsigned char st[256];
    int64_t len = sl_iterator_save(it, st, sizeof st);
    assert_true(len > 0);
    sl_element *second;
    assert_int_equal(sl_next(it, &second), 0);
    sl_iterator_free(it);
    it = sl_iterator_restore(sh, st, (size_t)len, o);
    assert_non_null(it);
    assert_int_equal(sl_next(it, &el), 0);
    assert_int_equal(sl_tensor_shape(sl_element_tensor(el, 0))[0],
                     sl_tensor_shape(sl_element_tensor(second, 0))[0]);
    sl_element_release(el);
    sl_element_release(second);
    sl_iterator_free(it);
    sl_dataset_release(sizes);
    sl_dataset_release(sh);
    sl_dataset_release(ds);
    sl_options_free(o);
}

/* The index's fields, one damaged at a time: each refused, naming the file. */
static void test_megatron_damaged(void **state)
{
    (void)state;
    char prefix[400], idx[420];
    snprintf(prefix, sizeof prefix, "%s/bad", dir);
    snprintf(idx, sizeof idx, "%s.idx", prefix);
    struct {
        size_t at;
        uint64_t value;
        int width;
    } faults[] = {
        {0, 'X', 1},                       /* magic */
        {9, 2, 8},                         /* version */
        {17, 9, 1},                        /* dtype code */
        {18, UINT64_C(1) << 60, 8},        /* sequence count */
        {26, 0, 8},                        /* no document entries */
        {34 + 4 * 2, 0x7fffffff, 4},       /* a size past the .bin */
        {34 + 20 + 8 * 4, 1000, 8},        /* a pointer past the .bin */
        {34 + 60 + 8 * 1, 4, 8},           /* document indices going back */
        {34 + 60 + 8 * 3, 4, 8},           /* the last one is not the count */
    };
    for (size_t f = 0; f < sizeof faults / sizeof *faults; f++) {
        write_megatron(prefix, lens, 5, docs, 4);
        unsigned char *p;
        size_t n;
        tu_read_file(idx, &p, &n);
        ru_le(p + faults[f].at, faults[f].value, faults[f].width);
        ru_write(idx, p, n);
        free(p);
        sl_dataset *ds = sl_megatron(prefix, 0);
        if (ds)
            fail_msg("fault %zu: accepted", f);
        assert_int_equal(sl_last_error_code(), SL_ECORRUPT);
        if (!strstr(sl_last_error(), idx))
            fail_msg("fault %zu: %s", f, sl_last_error());
    }
    /* trailing bytes that are not one mode per sequence; a truncated index */
    write_megatron(prefix, lens, 5, docs, 4);
    unsigned char *p;
    size_t n;
    tu_read_file(idx, &p, &n);
    ru_buf more = {0};
    ru_put(&more, p, n);
    ru_put(&more, "xyz", 3);
    ru_write(idx, more.p, more.n);
    assert_null(sl_megatron(prefix, 0));
    assert_int_equal(sl_last_error_code(), SL_ECORRUPT);
    ru_put(&more, "ab", 2); /* now 5 bytes: one mode per sequence */
    ru_write(idx, more.p, more.n);
    sl_dataset *ds = sl_megatron(prefix, 0);
    assert_non_null(ds);
    sl_dataset_release(ds);
    ru_write(idx, p, 20);
    assert_null(sl_megatron(prefix, 0));
    assert_int_equal(sl_last_error_code(), SL_ECORRUPT);
    free(p), free(more.p);
    assert_null(sl_megatron("/nonexistent/prefix", 0));
    assert_int_equal(sl_last_error_code(), SL_EIO);
}

static void write_npy(const char *path, int version, const char *dict, const void *data,
                      size_t n)
{
    ru_buf b = {0};
    ru_put(&b, "\x93NUMPY", 6);
    unsigned char v[4] = {(unsigned char)version, 0};
    ru_put(&b, v, 2);
    size_t hl = strlen(dict) + 1;
    size_t pre = version == 1 ? 10 : 12;
    size_t pad = (64 - (pre + hl) % 64) % 64;
    ru_le(v, hl + pad, version == 1 ? 2 : 4);
    ru_put(&b, v, version == 1 ? 2 : 4);
    ru_put(&b, dict, strlen(dict));
    for (size_t i = 0; i < pad; i++)
        ru_put(&b, " ", 1);
    ru_put(&b, "\n", 1);
    ru_put(&b, data, n);
    ru_write(path, b.p, b.n);
    free(b.p);
}

static void test_npy(void **state)
{
    (void)state;
    char path[400];
    snprintf(path, sizeof path, "%s/tokens.npy", dir);
    int32_t rows[3][4];
    for (int r = 0; r < 3; r++)
        for (int c = 0; c < 4; c++)
            rows[r][c] = 10 * r + c;
    write_npy(path, 1, "{'descr': '<i4', 'fortran_order': False, 'shape': (3, 4), }", rows,
              sizeof rows);
    sl_dataset *ds = sl_npy(path, 0, 0);
    if (!ds)
        fail_msg("%s", sl_last_error());
    assert_int_equal(sl_dataset_cardinality(ds), 3);
    sl_options *o = tu_opts(1, 1);
    sl_iterator *it = sl_iterator_create(ds, o);
    sl_element *el;
    for (int r = 0; r < 3; r++) {
        assert_int_equal(sl_next(it, &el), 0);
        const sl_tensor *t = sl_element_tensor(el, 0);
        assert_int_equal(sl_tensor_dtype(t), SL_INT32);
        assert_int_equal(sl_tensor_shape(t)[0], 4);
        assert_memory_equal(sl_tensor_data(t), rows[r], sizeof rows[r]);
        sl_element_release(el);
    }
    sl_iterator_free(it);
    sl_dataset_release(ds);
    assert_null(sl_npy(path, 5, 0)); /* rows of 4 */
    assert_int_equal(sl_last_error_code(), SL_EINVAL);

    /* 1-D, version 2, cut into 4s: 10 tokens give 4, 4, 2 */
    uint16_t flat[10];
    for (int i = 0; i < 10; i++)
        flat[i] = (uint16_t)(1000 + i);
    write_npy(path, 2, "{'descr': '<u2', 'fortran_order': False, 'shape': (10,), }", flat,
              sizeof flat);
    ds = sl_npy(path, 4, 0);
    if (!ds)
        fail_msg("%s", sl_last_error());
    assert_int_equal(sl_dataset_cardinality(ds), 3);
    it = sl_iterator_create(ds, o);
    const int64_t want[3] = {4, 4, 2};
    for (int e = 0; e < 3; e++) {
        assert_int_equal(sl_next(it, &el), 0);
        const sl_tensor *t = sl_element_tensor(el, 0);
        assert_int_equal(sl_tensor_shape(t)[0], want[e]);
        assert_int_equal(((const uint16_t *)sl_tensor_data(t))[0], 1000 + 4 * e);
        sl_element_release(el);
    }
    sl_iterator_free(it);
    sl_dataset_release(ds);
    assert_null(sl_npy(path, 0, 0)); /* 1-D needs seq_len */

    /* refused: big-endian, Fortran order, more items than bytes, 3-D, junk */
    struct {
        const char *dict;
        int code;
    } bad[] = {
        {"{'descr': '>i4', 'fortran_order': False, 'shape': (3, 4), }", SL_EUNSUPPORTED},
        {"{'descr': '<i4', 'fortran_order': True, 'shape': (3, 4), }", SL_EUNSUPPORTED},
        {"{'descr': '<i4', 'fortran_order': False, 'shape': (30, 4), }", SL_ECORRUPT},
        {"{'descr': '<i4', 'fortran_order': False, 'shape': (3, 2, 2), }", SL_EUNSUPPORTED},
        {"{'descr': '<i4', 'fortran_order': False, 'shape': (99999999999999999999, 4), }",
         SL_EUNSUPPORTED},
        {"{'descr': '<i4', 'shape': (3, 4), }", SL_ECORRUPT},
    };
    for (size_t b = 0; b < sizeof bad / sizeof *bad; b++) {
        write_npy(path, 1, bad[b].dict, rows, sizeof rows);
        if (sl_npy(path, 0, 0))
            fail_msg("%s: accepted", bad[b].dict);
        assert_int_equal(sl_last_error_code(), bad[b].code);
        assert_non_null(strstr(sl_last_error(), path));
    }
    ru_write(path, "\x93NUMPY\x01\x00\xff\xff", 10); /* a header longer than the file */
    assert_null(sl_npy(path, 0, 0));
    assert_int_equal(sl_last_error_code(), SL_ECORRUPT);
    ru_write(path, "PK\x03\x04 not npy", 12);
    assert_null(sl_npy(path, 0, 0));
    assert_int_equal(sl_last_error_code(), SL_ECORRUPT);
    sl_options_free(o);
}

int main(void)
{
    tu_tmpdir(dir);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_megatron),
        cmocka_unit_test(test_megatron_damaged),
        cmocka_unit_test(test_npy),
    };
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    tu_rmdir(dir);
    return rc;
}
