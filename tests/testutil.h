/* Helpers shared by the test programs (linked into each of them). */
#ifndef SLUICE_TESTUTIL_H
#define SLUICE_TESTUTIL_H

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include "sluice.h"

/* Exit code CTest treats as "skipped". */
#define TU_SKIP 77

/* Options with `threads` private workers, `seed` and epoch 0, so that runs
 * over the same dataset compare (free with sl_options_free). */
sl_options *tu_opts(int threads, int64_t seed);

/* Runs ds to the end (ds is borrowed). Flattens tensor 0 of every element
 * (int64 scalars or int64 arrays of any shape) into a malloc'd array, stored
 * in *out (free() it) with its length in *n. Returns the final sl_next code
 * (SL_EOF on success) and copies the iterator's error message into errmsg
 * (if not NULL, size 1024). */
int tu_collect(sl_dataset *ds, const sl_options *opts, int64_t **out, size_t *n, char *errmsg);
/* Asserts that ds yields exactly expect[0..n) (via tu_collect, default
 * options with 2 threads). */
void tu_expect(sl_dataset *ds, const int64_t *expect, size_t n);
/* Asserts that ds yields 0, 1, ..., n - 1. */
void tu_expect_iota(sl_dataset *ds, int64_t n);
/* Number of elements ds yields (asserts it ends with SL_EOF). */
int64_t tu_count(sl_dataset *ds, const sl_options *opts);

/* A source of prebuilt elements (takes the n references), for what no
 * public op produces (strings of any shape, mixed dtypes). card < -2 means
 * "n"; another value declares a (possibly wrong) cardinality. */
sl_dataset *tu_elements(sl_element **els, int n, int64_t card);

/* Tensor helpers: a string tensor of the given shape holding strs
 * (row-major); one-tensor elements; asserts on a string item and a shape. */
void tu_add_strings(sl_element *el, int ndim, const int64_t *shape, const char *const *strs);
sl_element *tu_el_i64(int64_t v);
sl_element *tu_el_str(const char *s);
void tu_check_string(const sl_tensor *t, int64_t i, const char *want);
void tu_check_shape(const sl_tensor *t, int ndim, const int64_t *shape);

/* Timing and callbacks many tests share: a sleep, the monotonic clock, a
 * map that passes elements through, and one that keeps the CPU busy for
 * *(const int *)user microseconds before passing them through. */
void tu_sleep_us(long us);
int64_t tu_now_ns(void);
/* A fixed 64-bit mix (splitmix64's finaliser): per-element pseudo-random
 * values that depend on nothing but the input. */
uint64_t tu_mix(uint64_t x);
/* A hash of an element's tensors: bytes (CRC-32C), dtypes and shapes, for
 * comparing two streams batch by batch. */
uint64_t tu_digest(const sl_element *el);
int tu_identity(sl_map_ctx *ctx, const sl_element *in, sl_element **out, void *user);
int tu_spin(sl_map_ctx *ctx, const sl_element *in, sl_element **out, void *user);

/* A counting allocator that can fail the k-th allocation (k >= 1; 0 = never).
 * tu_alloc_install() installs it (asserts sl_set_allocator succeeds). */
void tu_alloc_install(void);
void tu_alloc_uninstall(void);
void tu_alloc_fail_at(int64_t k);
int64_t tu_alloc_calls(void);
int64_t tu_alloc_live_bytes(void); /* bytes allocated through the hooks, not freed */

/* Creates a fresh temporary directory and writes its path into buf (size
 * >= 256). tu_rmdir removes it recursively. */
void tu_tmpdir(char *buf);
void tu_rmdir(const char *path);

/* A file's whole contents (malloc'd, one spare byte after them) and
 * length; and a file written with exactly p[0..n). Both assert. */
void tu_read_file(const char *path, unsigned char **p, size_t *n);
void tu_write_file(const char *path, const void *p, size_t n);

/* A reflected CRC-32 of p[0..n), bit by bit, so a test checks a file
 * format's checksum with nothing of the library's: poly 0xedb88320 is
 * zlib's crc32, 0x82f63b78 CRC-32C. */
#define TU_CRC32 0xedb88320u
#define TU_CRC32C 0x82f63b78u
uint32_t tu_crc32_bitwise(uint32_t poly, const void *p, size_t n);

/* Resident set size of this process, bytes. */
int64_t tu_rss_bytes(void);

#endif
