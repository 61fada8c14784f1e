/*
 * sluice-bench's parts that stand apart from the pipeline run: the sample
 * image folder writer and the decode ceiling. Neither calls sluice, so each
 * measures or makes data independently of the library under test.
 */
#ifndef SLUICE_BENCH_H
#define SLUICE_BENCH_H

#include <stddef.h>
#include <stdint.h>

/* ---- sluice_bench_sample.c ---- */

#define SAMPLE_DEFAULT_COUNT 512
#define SAMPLE_CLASSES 8

/* Writes an ImageFolder of `count` generated JPEGs to dir (created if
 * needed): dir/classNN/NNNN.jpg, then dir/files.txt ("relative/path label"
 * lines, the make_dataset.py format), last, so its presence means the folder
 * is complete. Deterministic. 0, or -1 after printing why to stderr. */
int sample_write_folder(const char *dir, int count);

/* ---- sluice_bench_ceiling.c ---- */

typedef struct ceiling_result {
    double images_per_s; /* decoded images / wall time */
    double seconds;      /* timed wall time, all passes */
    int64_t files;       /* files preloaded (may be fewer than asked: cap) */
    int64_t bytes;       /* their total size */
    int64_t failed;      /* files libjpeg could not decode (left out) */
    int passes;
} ceiling_result;

/* Bytes of file data the ceiling preloads at most; later files are left out. */
#define CEILING_MAX_BYTES ((int64_t)1 << 30)

/* The hardware limit for decoding these files: in a child process (so that
 * neither its preloaded files nor its threads show in this process's peak
 * RSS), reads the files into memory untimed, then `threads` threads decode
 * them at full size to RGB with libjpeg's default settings into reused
 * buffers, as many whole passes as take at least a second. 0, or -1 after
 * printing why to stderr. */
int ceiling_measure(char *const *paths, size_t n, int threads, ceiling_result *out);

#endif /* SLUICE_BENCH_H */
