/*
 * Raw record throughput: how close sl_tfrecord comes to the hardware's
 * limit for the same bytes, no decoding.
 *
 *   bench_records DIR [--rounds R] [--cycle N]
 *
 * DIR holds TFRecord shards (sluice-bench DIR0 --make-shards DIR --format
 * tfrecord, optionally --compression gzip: *.tfrecord or *.tfrecord.gz).
 * Each round, alternating, with the files in the page cache:
 *   plain:    read(2) of every file, 1 MiB at a time, one thread (the
 *             limit for a sequential reader; for .gz files, zlib's own
 *             inflate of them into a 1 MiB buffer: the limit for a reader
 *             that must inflate)
 *   tfrecord: list_files -> tfrecord, one file after another, both CRCs
 *             checked (all records counted, each element released)
 *   interleave: list_files -> interleave(tfrecord, cycle N)
 * A mode repeats its pass for at least MIN_S seconds per round. One JSON
 * object per mode: medians of MB/s (of the files' uncompressed bytes) and
 * the ratio to plain.
 */
#ifndef _POSIX_C_SOURCE
#define _POSIX_C_SOURCE 200809L
#endif
#include <fcntl.h>
#include <glob.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <zlib.h>
#include "sluice.h"

#define MAX_ROUNDS 31
#define BUF (1 << 20)
#define MIN_S 0.5

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, cmp);
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

/* Plain read, or inflate for gzip files: uncompressed bytes. */
static int64_t plain(char **paths, size_t n, bool gz, unsigned char *buf, unsigned char *out)
{
    int64_t total = 0;
    for (size_t i = 0; i < n; i++) {
        int fd = open(paths[i], O_RDONLY);
        if (fd < 0)
            return -1;
        z_stream z;
        memset(&z, 0, sizeof z);
        if (gz)
            inflateInit2(&z, 31);
        ssize_t r;
        while ((r = read(fd, buf, BUF)) > 0) {
            if (!gz) {
                total += r;
                continue;
            }
            z.next_in = buf;
            z.avail_in = (uInt)r;
            while (z.avail_in) {
                z.next_out = out;
                z.avail_out = BUF;
                int zr = inflate(&z, Z_NO_FLUSH);
                total += BUF - z.avail_out;
                if (zr == Z_STREAM_END)
                    inflateReset(&z);
                else if (zr != Z_OK && zr != Z_BUF_ERROR)
                    break;
            }
        }
        if (gz)
            inflateEnd(&z);
        close(fd);
    }
    return total;
}

/* Records through sl_tfrecord (cycle 0: one file after another): the
 * bytes of the stream they come from (records plus 16 bytes of framing). */
static int64_t records(const char *pattern, bool gz, int cycle, int64_t *count)
{
    const char *pats[] = {pattern};
    sl_dataset *ds = sl_list_files(pats, 1, 0, -1);
    int comp = gz ? SL_COMPRESSION_GZIP : SL_COMPRESSION_NONE;
    ds = cycle ? sl_interleave(ds, sl_tfrecord_fn, &comp, cycle, 1, SL_AUTOTUNE, 0)
               : sl_tfrecord(ds, comp, 0);
    sl_iterator *it = ds ? sl_iterator_create(ds, NULL) : NULL;
    if (!it) {
        fprintf(stderr, "bench_records: %s\n", sl_last_error());
        sl_dataset_release(ds);
        return -1;
    }
    int64_t total = 0, n = 0;
    sl_element *el;
    int rc;
    while ((rc = sl_next(it, &el)) == 0) {
        size_t len;
        sl_tensor_string(sl_element_tensor(el, 0), 0, &len);
        total += (int64_t)len + 16;
        n++;
        sl_element_release(el);
    }
    if (rc != SL_EOF) {
        fprintf(stderr, "bench_records: %s\n", sl_iterator_errmsg(it));
        total = -1;
    }
    sl_iterator_free(it);
    sl_dataset_release(ds);
    *count = n;
    return total;
}

int main(int argc, char **argv)
{
    const char *dir = NULL;
    int rounds = 5, cycle = 4;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--rounds") && i + 1 < argc)
            rounds = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--cycle") && i + 1 < argc)
            cycle = atoi(argv[++i]);
        else
            dir = argv[i];
    }
    if (!dir || rounds < 1 || rounds > MAX_ROUNDS || cycle < 1) {
        fprintf(stderr, "usage: bench_records DIR [--rounds 1-%d] [--cycle N]\n", MAX_ROUNDS);
        return 2;
    }
    char pattern[4096];
    glob_t g;
    bool gz = false;
    snprintf(pattern, sizeof pattern, "%s/*.tfrecord", dir);
    if (glob(pattern, 0, NULL, &g) != 0) {
        snprintf(pattern, sizeof pattern, "%s/*.tfrecord.gz", dir);
        gz = true;
        if (glob(pattern, 0, NULL, &g) != 0) {
            fprintf(stderr, "bench_records: no *.tfrecord or *.tfrecord.gz in %s\n", dir);
            return 1;
        }
    }
    unsigned char *buf = malloc(BUF), *out = malloc(BUF);
    double mb[3][MAX_ROUNDS];
    int64_t bytes[3] = {0}, n = 0;
    records(pattern, gz, 0, &n); /* warm the page cache and the pools */
    for (int r = 0; r < rounds; r++)
        for (int m = 0; m < 3; m++) {
            double t0 = now_s(), s;
            int64_t b, sum = 0;
            do {
                b = m == 0 ? plain(g.gl_pathv, g.gl_pathc, gz, buf, out)
                           : records(pattern, gz, m == 1 ? 0 : cycle, &n);
                if (b < 0)
                    return 1;
                sum += b;
            } while ((s = now_s() - t0) < MIN_S);
            bytes[m] = b;
            mb[m][r] = (double)sum / 1e6 / s;
        }
    static const char *names[3] = {"plain", "tfrecord", "interleave"};
    double base = median(mb[0], rounds);
    for (int m = 0; m < 3; m++) {
        double v = m == 0 ? base : median(mb[m], rounds);
        printf("{\"bench\":\"records\",\"dir\":\"%s\",\"mode\":\"%s\",\"compression\":\"%s\","
               "\"files\":%zu,\"records\":%lld,\"bytes\":%lld,\"rounds\":%d,\"cycle\":%d,"
               "\"mb_per_s\":%.1f,\"ratio_to_plain\":%.3f}\n",
               dir, names[m], gz ? "gzip" : "none", g.gl_pathc, (long long)n,
               (long long)bytes[m], rounds, m == 2 ? cycle : 0, v, v / base);
    }
    globfree(&g);
    free(buf);
    free(out);
    return 0;
}
