/*
 * sluice-bench: images per second through a real image pipeline, and how
 * that compares with the machine's decode limit.
 *
 *   image_folder(DIR) | file_list(--list)   files, read by the I/O engine
 *   take(--limit)                           the same N files every epoch
 *   shuffle(SL_SHUFFLE_ALL, seed)           train only
 *   repeat(epochs)                          one iterator for all epochs
 *   map_image(preset, size)                 not for --preset read
 *   batch(--batch)                          drop remainder for train
 *   prefetch(--prefetch)
 *
 * Presets: train (random-resized crop + flip), eval (resize shorter side,
 * centre crop), decode (whole image resized), read (files only, no decode,
 * no batching). Output is uint8 HWC size x size. The consumer checks each
 * batch's shape and releases it, so the number is what the pipeline can
 * feed, not what a model would take.
 *
 * --cold evicts every file from the page cache before each epoch, so each
 * epoch runs on its own iterator (epoch k shuffles with seed + k). Without
 * it one iterator runs all epochs, and per-epoch rates are cut where the
 * image count passes a multiple of the file count (interpolated inside the
 * batch that passes it).
 *
 * --ceiling measures the decode limit (see sluice_bench_ceiling.c) once
 * before and once after the pipeline epochs, on the same files and thread
 * count, and reports the better of the two. The files are listed by one
 * untimed read pass through the library, which is also what --cold needs.
 *
 * Summary table and one JSON object on stdout (JSON last); --json FILE
 * writes the same object. Exit status: 0, 1 on a pipeline or measurement
 * error, 2 on bad usage. `sluice-bench --make-sample DIR` writes a folder of
 * generated JPEGs to try it on (sluice_bench_sample.c).
 */
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include "sluice.h"
#include "sluice_bench.h"

#define PROGRESS_PERIOD_S 0.25
#define RATE_WINDOW_S 1.0 /* time constant of the live rates */
#define MAX_EPOCHS 10000

typedef enum preset { PRESET_TRAIN, PRESET_EVAL, PRESET_DECODE, PRESET_READ } preset;

static const char *const preset_names[] = {"train", "eval", "decode", "read"};

typedef struct config {
    const char *dir, *list, *json_path, *sample_dir;
    preset preset;
    int size, threads, epochs, sample_count;
    int64_t batch, limit, seed;
    int parallelism; /* SL_AUTOTUNE or >= 1 */
    int64_t prefetch;
    int io, policy;
    bool cold, ceiling;
} config;

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* ---- the file list (for --cold and --ceiling) ---- */

typedef struct path_list {
    char **paths;
    size_t n, cap;
    int64_t bytes;
} path_list;

static void path_list_free(path_list *pl)
{
    for (size_t i = 0; i < pl->n; i++)
        free(pl->paths[i]);
    free(pl->paths);
}

static int path_list_add(path_list *pl, const char *s, size_t len)
{
    if (pl->n == pl->cap) {
        size_t cap = pl->cap ? 2 * pl->cap : 1024;
        char **p = realloc(pl->paths, cap * sizeof *p);
        if (!p)
            return -1;
        pl->paths = p;
        pl->cap = cap;
    }
    char *copy = strndup(s, len);
    if (!copy)
        return -1;
    pl->paths[pl->n++] = copy;
    return 0;
}

static sl_options *make_options(const config *cfg, int64_t seed)
{
    sl_options *opts = sl_options_create();
    if (!opts || sl_options_set(opts, SL_OPT_THREADS, cfg->threads) < 0 ||
        sl_options_set(opts, SL_OPT_SEED, seed) < 0 ||
        sl_options_set(opts, SL_OPT_IO_BACKEND, cfg->io) < 0 ||
        sl_options_set(opts, SL_OPT_ERROR_POLICY, cfg->policy) < 0) {
        fprintf(stderr, "sluice-bench: options: %s\n", sl_last_error());
        sl_options_free(opts);
        return NULL;
    }
    return opts;
}

/* The paths the source yields, from its elements' path tensor (index 2). */
static int list_pass(sl_iterator *it, path_list *pl)
{
    sl_element *el;
    int rc;
    while ((rc = sl_next(it, &el)) == 0) {
        size_t len;
        const char *s = sl_tensor_string(sl_element_tensor(el, 2), 0, &len);
        pl->bytes += (int64_t)sl_tensor_nbytes(sl_element_tensor(el, 0));
        int bad = !s ? SL_EDTYPE : path_list_add(pl, s, len) < 0 ? SL_ENOMEM : 0;
        sl_element_release(el);
        if (bad) {
            fprintf(stderr, "sluice-bench: listing files: %s\n",
                    bad == SL_EDTYPE ? "element 2 is not a path" : "out of memory");
            return -1;
        }
    }
    if (rc < 0)
        fprintf(stderr, "sluice-bench: listing files: %s\n", sl_iterator_errmsg(it));
    return rc < 0 ? -1 : 0;
}

static int list_files(const config *cfg, sl_dataset *src, path_list *pl)
{
    sl_dataset *ds = sl_prefetch(sl_dataset_retain(src), SL_AUTOTUNE);
    sl_options *opts = make_options(cfg, cfg->seed);
    sl_iterator *it = ds && opts ? sl_iterator_create(ds, opts) : NULL;
    int rc = -1;
    if (!it && opts)
        fprintf(stderr, "sluice-bench: listing files: %s\n", sl_last_error());
    else if (it)
        rc = list_pass(it, pl);
    sl_iterator_free(it);
    sl_options_free(opts);
    sl_dataset_free(ds);
    return rc;
}

/* ---- the page cache (--cold) ---- */

/* Dirty pages are not dropped, and a folder written just before the run
 * (a fresh --make-sample or copy) is still dirty: write it back first. */
static void evict(const path_list *pl)
{
    for (size_t i = 0; i < pl->n; i++) {
        int fd = open(pl->paths[i], O_RDONLY | O_CLOEXEC);
        if (fd < 0)
            continue; /* the pipeline will report it */
        fdatasync(fd);
        posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
        close(fd);
    }
}

/* Resident pages of one file, added to *resident and *total. */
static void count_resident(const char *path, size_t page, int64_t *resident, int64_t *total)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    struct stat st;
    if (fd < 0 || fstat(fd, &st) < 0 || st.st_size == 0) {
        if (fd >= 0)
            close(fd);
        return;
    }
    size_t len = (size_t)st.st_size, pages = (len + page - 1) / page;
    void *map = mmap(NULL, len, PROT_READ, MAP_SHARED, fd, 0);
    close(fd);
    unsigned char *vec = map == MAP_FAILED ? NULL : malloc(pages);
    if (vec && mincore(map, len, vec) == 0) {
        for (size_t i = 0; i < pages; i++)
            *resident += vec[i] & 1;
        *total += (int64_t)pages;
    }
    free(vec);
    if (map != MAP_FAILED)
        munmap(map, len);
}

/* Fraction of the files' pages still cached: eviction does nothing on
 * tmpfs, or for pages another process has mapped. */
static double resident_fraction(const path_list *pl)
{
    size_t page = (size_t)sysconf(_SC_PAGESIZE);
    int64_t resident = 0, total = 0;
    for (size_t i = 0; i < pl->n; i++)
        count_resident(pl->paths[i], page, &resident, &total);
    return total ? (double)resident / (double)total : 0;
}

/* ---- the pipeline ---- */

static sl_dataset *open_source(const config *cfg)
{
    sl_dataset *ds = cfg->list ? sl_file_list(cfg->list, cfg->dir)
                               : sl_image_folder(cfg->dir, NULL);
    if (cfg->limit >= 0)
        ds = sl_take(ds, cfg->limit);
    return ds;
}

static int crop_policy(preset p)
{
    return p == PRESET_TRAIN ? SL_CROP_RANDOM_RESIZED
         : p == PRESET_EVAL  ? SL_CROP_CENTER
                             : SL_CROP_RESIZE;
}

/* On failure NULL, with the reason in sl_last_error(). */
static sl_dataset *build_pipeline(const config *cfg, sl_dataset *src, int64_t repeat,
                                  int64_t shuffle_seed)
{
    sl_dataset *ds = sl_dataset_retain(src);
    if (cfg->preset == PRESET_TRAIN)
        ds = sl_shuffle(ds, SL_SHUFFLE_ALL, shuffle_seed, 0);
    if (repeat != 1)
        ds = sl_repeat(ds, repeat);
    if (cfg->preset != PRESET_READ) {
        sl_image_spec spec;
        if (sl_image_spec_init(&spec, crop_policy(cfg->preset), cfg->size) < 0) {
            sl_dataset_free(ds);
            return NULL;
        }
        ds = sl_map_image(ds, &spec, cfg->parallelism);
        ds = sl_batch(ds, cfg->batch, cfg->preset == PRESET_TRAIN ? SL_DROP_REMAINDER : 0);
    }
    return sl_prefetch(ds, cfg->prefetch);
}

/* ---- running and measuring ---- */

typedef struct run_state {
    const config *cfg;
    int64_t files;    /* per epoch; -1 unknown */
    int64_t expected; /* images over all epochs; -1 unknown */
    int64_t images;
    int64_t bytes_read; /* SL_STAT_BYTES_READ of finished iterators */
    int64_t bytes_seen; /* --preset read: file bytes the consumer got */
    int64_t errors_skipped, peak_buffered;
    int io_backend;
    double seconds; /* pipeline time of finished iterators */
    double *epoch_rate;
    int epoch;
    double epoch_t0;
    int64_t epoch_images0;
    double cold_resident; /* worst fraction left cached after eviction */
    /* live progress */
    bool tty;
    double shown_at, rate_images, rate_bytes;
    int64_t shown_images, shown_bytes;
} run_state;

static int64_t rss_bytes(void)
{
    long pages = 0, resident = 0;
    FILE *f = fopen("/proc/self/statm", "r");
    if (!f)
        return 0;
    if (fscanf(f, "%ld %ld", &pages, &resident) != 2)
        resident = 0;
    fclose(f);
    return (int64_t)resident * sysconf(_SC_PAGESIZE);
}

static int64_t peak_rss_bytes(void)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return (int64_t)ru.ru_maxrss * 1024;
}

/* A counter, or 0 from a library that does not keep it. */
static int64_t stat_of(const sl_iterator *it, sl_stat key)
{
    int64_t v = sl_iterator_stat(it, key);
    return v > 0 ? v : 0;
}

static void progress(run_state *st, const sl_iterator *it, double now)
{
    if (!st->tty || now - st->shown_at < PROGRESS_PERIOD_S)
        return;
    int64_t bytes = st->bytes_read + stat_of(it, SL_STAT_BYTES_READ);
    double dt = now - st->shown_at, a = 1 - exp(-dt / RATE_WINDOW_S);
    double ri = (double)(st->images - st->shown_images) / dt;
    double rb = (double)(bytes - st->shown_bytes) / dt;
    bool first = st->shown_images == 0 && st->shown_bytes == 0;
    st->rate_images = first ? ri : st->rate_images + a * (ri - st->rate_images);
    st->rate_bytes = first ? rb : st->rate_bytes + a * (rb - st->rate_bytes);
    st->shown_at = now;
    st->shown_images = st->images;
    st->shown_bytes = bytes;
    fprintf(stderr, "\r  epoch %d/%d", st->epoch + 1, st->cfg->epochs);
    if (st->expected > 0)
        fprintf(stderr, "  %5.1f%%", 100.0 * (double)st->images / (double)st->expected);
    fprintf(stderr, "  %9.1f images/s  %8.1f MB/s  RSS %.0f MiB\033[K", st->rate_images,
            st->rate_bytes / 1e6, (double)rss_bytes() / (1 << 20));
    fflush(stderr);
}

/* Ends the current epoch at time t, after `images` images in all. */
static void close_epoch(run_state *st, double t, int64_t images)
{
    double dt = t - st->epoch_t0;
    int64_t n = images - st->epoch_images0;
    st->epoch_rate[st->epoch] = dt > 0 ? (double)n / dt : 0;
    st->epoch++;
    st->epoch_t0 = t;
    st->epoch_images0 = images;
}

/* In one iterator running several epochs, an epoch ends where the image
 * count passes a multiple of the file count. A batch can straddle that (or
 * hold several epochs of a small folder), so the moment is interpolated
 * between the arrival of the previous element (t_prev, `before` images)
 * and this one's. */
static void close_epochs_passed(run_state *st, int last, double t_prev, int64_t before,
                                double now)
{
    while (st->files > 0 && st->epoch < last && st->images >= (st->epoch + 1) * st->files) {
        int64_t end = (st->epoch + 1) * st->files;
        double f = (double)(end - before) / (double)(st->images - before);
        close_epoch(st, t_prev + (now - t_prev) * f, end);
    }
}

/* Checks what the pipeline handed out and counts it; 0, or -1 after saying
 * what was wrong. */
static int consume(run_state *st, const sl_element *el)
{
    const config *cfg = st->cfg;
    const sl_tensor *t = sl_element_tensor(el, 0);
    if (cfg->preset == PRESET_READ) {
        if (!t || sl_tensor_dtype(t) != SL_UINT8 || sl_tensor_ndim(t) != 1) {
            fprintf(stderr, "sluice-bench: element 0 is not uint8 [n] file bytes\n");
            return -1;
        }
        st->images++;
        st->bytes_seen += (int64_t)sl_tensor_nbytes(t);
        return 0;
    }
    const sl_tensor *labels = sl_element_tensor(el, 1);
    const int64_t *s = t ? sl_tensor_shape(t) : NULL;
    bool ok = t && labels && sl_tensor_dtype(t) == SL_UINT8 && sl_tensor_ndim(t) == 4 &&
              s[0] >= 1 && s[0] <= cfg->batch && s[1] == cfg->size && s[2] == cfg->size &&
              s[3] == 3 && (cfg->preset != PRESET_TRAIN || s[0] == cfg->batch) &&
              sl_tensor_dtype(labels) == SL_INT64 && sl_tensor_ndim(labels) == 1 &&
              sl_tensor_shape(labels)[0] == s[0];
    if (!ok) {
        fprintf(stderr, "sluice-bench: unexpected batch (want uint8 [%s%lld, %d, %d, 3] "
                "and int64 labels)\n", cfg->preset == PRESET_TRAIN ? "" : "<=",
                (long long)cfg->batch, cfg->size, cfg->size);
        return -1;
    }
    st->images += s[0];
    return 0;
}

static void collect_stats(run_state *st, const sl_iterator *it)
{
    int64_t peak = stat_of(it, SL_STAT_PEAK_BUFFERED_BYTES);
    int64_t backend = stat_of(it, SL_STAT_IO_BACKEND);
    st->bytes_read += stat_of(it, SL_STAT_BYTES_READ);
    st->errors_skipped += stat_of(it, SL_STAT_ERRORS_SKIPPED);
    if (peak > st->peak_buffered)
        st->peak_buffered = peak;
    if (backend != SL_IO_AUTO)
        st->io_backend = (int)backend;
}

/* Drains one iterator running `epochs` epochs. 0, or -1 after printing why. */
static int run_iterator(run_state *st, sl_dataset *ds, const sl_options *opts, int epochs)
{
    double t0 = now_s();
    sl_iterator *it = sl_iterator_create(ds, opts);
    if (!it) {
        fprintf(stderr, "sluice-bench: cannot start the pipeline: %s\n", sl_last_error());
        return -1;
    }
    int last = st->epoch + epochs - 1;
    st->epoch_t0 = t0;
    st->epoch_images0 = st->images;
    sl_element *el;
    int rc;
    bool bad = false;
    double t_prev = t0;
    while (!bad && (rc = sl_next(it, &el)) == 0) {
        int64_t before = st->images;
        bad = consume(st, el) < 0;
        sl_element_release(el);
        double now = now_s();
        close_epochs_passed(st, last, t_prev, before, now);
        progress(st, it, now);
        t_prev = now;
    }
    double t1 = now_s();
    st->seconds += t1 - t0;
    if (!bad && rc < 0)
        fprintf(stderr, "%ssluice-bench: pipeline failed: %s\n", st->tty ? "\n" : "",
                sl_iterator_errmsg(it));
    else if (!bad)
        while (st->epoch <= last)
            close_epoch(st, t1, st->images);
    collect_stats(st, it);
    sl_iterator_free(it);
    return bad || rc < 0 ? -1 : 0;
}

static int64_t expected_images(const config *cfg, int64_t files)
{
    if (files < 0)
        return -1;
    if (cfg->preset != PRESET_TRAIN)
        return files * cfg->epochs;
    if (cfg->cold)
        return files / cfg->batch * cfg->batch * cfg->epochs;
    return files * cfg->epochs / cfg->batch * cfg->batch;
}

/* One epoch per iterator, each after emptying the page cache. */
static int run_cold(run_state *st, sl_dataset *src, const path_list *pl)
{
    const config *cfg = st->cfg;
    for (int e = 0; e < cfg->epochs; e++) {
        evict(pl);
        double left = resident_fraction(pl);
        if (left > st->cold_resident)
            st->cold_resident = left;
        sl_dataset *ds = build_pipeline(cfg, src, 1, cfg->seed + e);
        sl_options *opts = ds ? make_options(cfg, cfg->seed + e) : NULL;
        int rc = -1;
        if (!ds)
            fprintf(stderr, "sluice-bench: cannot build the pipeline: %s\n", sl_last_error());
        else if (opts)
            rc = run_iterator(st, ds, opts, 1);
        sl_options_free(opts);
        sl_dataset_free(ds);
        if (rc < 0)
            return -1;
    }
    return 0;
}

static int run_warm(run_state *st, sl_dataset *src)
{
    const config *cfg = st->cfg;
    sl_dataset *ds = build_pipeline(cfg, src, cfg->epochs, cfg->seed);
    if (!ds) {
        fprintf(stderr, "sluice-bench: cannot build the pipeline: %s\n", sl_last_error());
        return -1;
    }
    sl_options *opts = make_options(cfg, cfg->seed);
    int rc = opts ? run_iterator(st, ds, opts, cfg->epochs) : -1;
    sl_options_free(opts);
    sl_dataset_free(ds);
    return rc;
}

static int run_epochs(run_state *st, sl_dataset *src, const path_list *pl)
{
    st->tty = isatty(STDERR_FILENO);
    st->shown_at = now_s();
    int rc = st->cfg->cold ? run_cold(st, src, pl) : run_warm(st, src);
    if (st->tty)
        fprintf(stderr, "\r\033[K");
    return rc;
}

/* ---- the report ---- */

typedef struct ceilings {
    ceiling_result before, after;
    double best;
} ceilings;

static const char *io_name(int backend)
{
    return backend == SL_IO_URING ? "io_uring" : backend == SL_IO_PREAD ? "pread" : "none";
}

static double rate(double n, double seconds)
{
    return seconds > 0 ? n / seconds : 0;
}

static void json_string(FILE *f, const char *s)
{
    fputc('"', f);
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\')
            fprintf(f, "\\%c", c);
        else if (c < 0x20)
            fprintf(f, "\\u%04x", c);
        else
            fputc(c, f);
    }
    fputc('"', f);
}

/* JSON has no NaN or infinity. */
static void json_number(FILE *f, double v)
{
    if (isfinite(v))
        fprintf(f, "%.3f", v);
    else
        fputs("null", f);
}

static void json_knob(FILE *f, int64_t v)
{
    if (v == SL_AUTOTUNE)
        fputs("\"auto\"", f);
    else
        fprintf(f, "%lld", (long long)v);
}

static void json_config(FILE *f, const config *cfg)
{
    fprintf(f, "{\"bench\":\"sluice-bench\",\"version\":");
    json_string(f, sl_version_string());
    fprintf(f, ",\"dir\":");
    if (cfg->dir)
        json_string(f, cfg->dir);
    else
        fputs("null", f);
    if (cfg->list) {
        fprintf(f, ",\"list\":");
        json_string(f, cfg->list);
    }
    fprintf(f, ",\"preset\":\"%s\",\"size\":%d,\"batch\":%lld,\"epochs\":%d,\"threads\":%d,"
            "\"cpus\":%d,\"parallelism\":", preset_names[cfg->preset], cfg->size,
            (long long)cfg->batch, cfg->epochs, cfg->threads, sl_cpu_count());
    json_knob(f, cfg->parallelism);
    fprintf(f, ",\"prefetch\":");
    json_knob(f, cfg->prefetch);
    fprintf(f, ",\"seed\":%lld,\"cold\":%s,\"on_error\":\"%s\"", (long long)cfg->seed,
            cfg->cold ? "true" : "false", cfg->policy == SL_ERRORS_SKIP ? "skip" : "fail");
}

static void json_results(FILE *f, const run_state *st, const path_list *pl)
{
    const config *cfg = st->cfg;
    fprintf(f, ",\"io_backend\":\"%s\",\"files\":%lld,\"images\":%lld,\"seconds\":",
            io_name(st->io_backend), (long long)st->files, (long long)st->images);
    json_number(f, st->seconds);
    fprintf(f, ",\"images_per_s\":");
    json_number(f, rate((double)st->images, st->seconds));
    fprintf(f, ",\"bytes_read\":%lld,\"mb_per_s\":", (long long)st->bytes_read);
    json_number(f, rate((double)st->bytes_read / 1e6, st->seconds));
    fprintf(f, ",\"per_epoch_images_per_s\":[");
    for (int e = 0; e < cfg->epochs; e++) {
        fputs(e ? "," : "", f);
        json_number(f, st->epoch_rate[e]);
    }
    fprintf(f, "],\"peak_rss_bytes\":%lld,\"peak_buffered_bytes\":%lld,\"errors_skipped\":%lld",
            (long long)peak_rss_bytes(), (long long)st->peak_buffered,
            (long long)st->errors_skipped);
    if (cfg->preset == PRESET_READ)
        fprintf(f, ",\"bytes_delivered\":%lld", (long long)st->bytes_seen);
    if (pl->n)
        fprintf(f, ",\"dataset_bytes\":%lld", (long long)pl->bytes);
    if (cfg->cold) {
        fprintf(f, ",\"cold_resident_fraction\":");
        json_number(f, st->cold_resident);
    }
}

static void json_ceiling(FILE *f, const run_state *st, const ceilings *c)
{
    fprintf(f, ",\"ceiling_images_per_s\":");
    json_number(f, c->best);
    fprintf(f, ",\"ratio_to_ceiling\":");
    json_number(f, c->best > 0 ? rate((double)st->images, st->seconds) / c->best : NAN);
    fprintf(f, ",\"ceiling_before_images_per_s\":");
    json_number(f, c->before.images_per_s);
    fprintf(f, ",\"ceiling_after_images_per_s\":");
    json_number(f, c->after.images_per_s);
    fprintf(f, ",\"ceiling_files\":%lld,\"ceiling_failed\":%lld",
            (long long)c->before.files, (long long)c->before.failed);
}

/* The whole object, in a malloc'd string (NULL when out of memory). */
static char *make_json(const run_state *st, const path_list *pl, const ceilings *c)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    if (!f)
        return NULL;
    json_config(f, st->cfg);
    json_results(f, st, pl);
    if (st->cfg->ceiling)
        json_ceiling(f, st, c);
    fputc('}', f);
    if (fclose(f) != 0) {
        free(buf);
        return NULL;
    }
    return buf;
}

static void print_knob(const char *name, int64_t v)
{
    if (v == SL_AUTOTUNE)
        printf("  %-20s auto\n", name);
    else
        printf("  %-20s %lld\n", name, (long long)v);
}

static void print_summary(const run_state *st, const path_list *pl, const ceilings *c)
{
    const config *cfg = st->cfg;
    double ips = rate((double)st->images, st->seconds);
    printf("sluice-bench %s: %s on %s", sl_version_string(), preset_names[cfg->preset],
           cfg->list ? cfg->list : cfg->dir);
    if (cfg->preset != PRESET_READ)
        printf(", %dx%d uint8 HWC, batch %lld", cfg->size, cfg->size, (long long)cfg->batch);
    if (st->files >= 0)
        printf("\n  %-20s %lld", "files", (long long)st->files);
    else
        printf("\n  %-20s unknown", "files");
    if (pl->n)
        printf(" (%.1f MB)", (double)pl->bytes / 1e6);
    printf("\n  %-20s %d%s\n", "epochs", cfg->epochs,
           cfg->cold ? " (page cache emptied before each)" : "");
    printf("  %-20s %lld\n", "images", (long long)st->images);
    printf("  %-20s %.3f\n", "seconds", st->seconds);
    printf("  %-20s %.1f\n", "images/s", ips);
    printf("  %-20s", "per epoch images/s");
    for (int e = 0; e < cfg->epochs; e++)
        printf(" %.1f", st->epoch_rate[e]);
    printf("\n  %-20s %.1f (%.1f MB read)\n", "MB/s", rate((double)st->bytes_read / 1e6,
           st->seconds), (double)st->bytes_read / 1e6);
    if (cfg->preset == PRESET_READ)
        printf("  %-20s %.1f MB\n", "file bytes delivered", (double)st->bytes_seen / 1e6);
    printf("  %-20s %d\n", "threads", cfg->threads);
    print_knob("map parallelism", cfg->parallelism);
    print_knob("prefetch", cfg->prefetch);
    printf("  %-20s %s\n", "io backend", io_name(st->io_backend));
    if (cfg->cold)
        printf("  %-20s %.1f%% of file pages%s\n", "left cached (cold)",
               100 * st->cold_resident,
               st->cold_resident > 0.05 ? " (eviction failed: tmpfs? mapped elsewhere?)" : "");
    printf("  %-20s %.1f MiB\n", "peak RSS", (double)peak_rss_bytes() / (1 << 20));
    printf("  %-20s %.1f MiB\n", "peak buffered", (double)st->peak_buffered / (1 << 20));
    printf("  %-20s %lld\n", "errors skipped", (long long)st->errors_skipped);
    if (!cfg->ceiling)
        return;
    printf("  %-20s %.1f (full-size libjpeg decode of %lld preloaded files, %d threads; "
           "before %.1f, after %.1f)\n", "ceiling images/s", c->best,
           (long long)c->before.files, cfg->threads, c->before.images_per_s,
           c->after.images_per_s);
    if (c->best > 0)
        printf("  %-20s %.2f%s\n", "ratio to ceiling", ips / c->best,
               cfg->preset == PRESET_READ ? " (this preset does not decode)" : "");
}

static int write_file(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    if (!f || fprintf(f, "%s\n", text) < 0 || fclose(f) != 0) {
        fprintf(stderr, "sluice-bench: %s: %s\n", path, strerror(errno));
        return -1;
    }
    return 0;
}

static int report(const run_state *st, const path_list *pl, const ceilings *c)
{
    char *json = make_json(st, pl, c);
    if (!json) {
        fprintf(stderr, "sluice-bench: out of memory\n");
        return -1;
    }
    print_summary(st, pl, c);
    printf("%s\n", json);
    fflush(stdout);
    int rc = st->cfg->json_path ? write_file(st->cfg->json_path, json) : 0;
    free(json);
    return rc;
}

/* ---- the whole run ---- */

static int measure_ceiling(const config *cfg, const path_list *pl, ceiling_result *r)
{
    if (isatty(STDERR_FILENO))
        fprintf(stderr, "\r  measuring the decode ceiling...\033[K");
    int rc = ceiling_measure(pl->paths, pl->n, cfg->threads, r);
    if (isatty(STDERR_FILENO))
        fprintf(stderr, "\r\033[K");
    return rc;
}

static int bench(const config *cfg)
{
    sl_dataset *src = open_source(cfg);
    if (!src) {
        fprintf(stderr, "sluice-bench: %s\n", sl_last_error());
        return 1;
    }
    run_state st = {.cfg = cfg, .files = sl_dataset_cardinality(src)};
    path_list pl = {0};
    ceilings c = {0};
    st.epoch_rate = calloc((size_t)cfg->epochs, sizeof *st.epoch_rate);
    int rc = 0;
    if (!st.epoch_rate) {
        fprintf(stderr, "sluice-bench: out of memory\n");
        rc = -1;
    }
    if (rc == 0 && (cfg->cold || cfg->ceiling))
        rc = list_files(cfg, src, &pl);
    if (rc == 0 && st.files < 0 && pl.n)
        st.files = (int64_t)pl.n;
    st.expected = expected_images(cfg, st.files);
    if (rc == 0 && cfg->ceiling)
        rc = measure_ceiling(cfg, &pl, &c.before);
    if (rc == 0)
        rc = run_epochs(&st, src, &pl);
    if (rc == 0 && cfg->ceiling)
        rc = measure_ceiling(cfg, &pl, &c.after);
    c.best = fmax(c.before.images_per_s, c.after.images_per_s);
    if (rc == 0)
        rc = report(&st, &pl, &c);
    path_list_free(&pl);
    free(st.epoch_rate);
    sl_dataset_free(src);
    return rc < 0 ? 1 : 0;
}

/* ---- command line ---- */

static void usage(FILE *f)
{
    fprintf(f,
        "usage: sluice-bench DIR [options]\n"
        "       sluice-bench --list FILE [DIR] [options]\n"
        "       sluice-bench --make-sample DIR [--count N]\n"
        "  DIR                  an ImageFolder (DIR/class/image.jpg); with --list, the\n"
        "                       root its paths are relative to (default: the list's folder)\n"
        "  --list FILE          read 'relative/path label' lines instead of scanning DIR\n"
        "  --preset P           train (random-resized crop, flip), eval (centre crop),\n"
        "                       decode (whole image resized), read (files only); default train\n"
        "  --size S             output images are S x S x 3 uint8 (default 224)\n"
        "  --batch B            images per batch (default 256)\n"
        "  --threads N          worker threads (default: one per CPU)\n"
        "  --epochs E           passes over the files (default 1)\n"
        "  --limit N            only the first N files\n"
        "  --parallelism P|auto decodes in flight (default auto)\n"
        "  --prefetch D|auto    batches ready ahead (default auto)\n"
        "  --io uring|pread     file reading backend (default: io_uring where available)\n"
        "  --cold               empty the page cache of the files before each epoch\n"
        "  --ceiling            also measure full-size libjpeg decode of the same files\n"
        "  --on-error fail|skip stop at a bad file (default) or skip it\n"
        "  --json FILE          write the result object to FILE\n"
        "  --seed S             shuffle and crop seed (default 0)\n"
        "  --count N            --make-sample: images to write (default %d)\n",
        SAMPLE_DEFAULT_COUNT);
}

static int parse_int(const char *flag, const char *v, int64_t lo, int64_t hi, int64_t *out)
{
    char *end;
    errno = 0;
    long long x = v ? strtoll(v, &end, 10) : 0;
    if (!v || !*v || *end || errno || x < lo || x > hi) {
        fprintf(stderr, "sluice-bench: %s needs an integer in [%lld, %lld]\n", flag,
                (long long)lo, (long long)hi);
        return -1;
    }
    *out = x;
    return 0;
}

static int parse_knob(const char *flag, const char *v, int64_t *out)
{
    if (v && !strcmp(v, "auto")) {
        *out = SL_AUTOTUNE;
        return 0;
    }
    return parse_int(flag, v, 1, 1 << 20, out);
}

static int parse_choice(const char *flag, const char *v, const char *const *names, int n)
{
    for (int i = 0; v && i < n; i++)
        if (!strcmp(v, names[i]))
            return i;
    fprintf(stderr, "sluice-bench: %s: not one of the choices: %s\n", flag, v ? v : "(none)");
    return -1;
}

/* An option taking a value; 0, or -1 when it is bad (after saying why,
 * unless the option itself is unknown). */
static int parse_option(config *cfg, const char *a, const char *v)
{
    static const char *const io_names[] = {"uring", "pread"};
    static const char *const policies[] = {"fail", "skip"};
    int64_t x = 0;
    int rc = 0;
    if (!strcmp(a, "--list") || !strcmp(a, "--json") || !strcmp(a, "--make-sample")) {
        const char **dst = a[2] == 'l' ? &cfg->list : a[2] == 'j' ? &cfg->json_path
                                                                  : &cfg->sample_dir;
        *dst = v;
        rc = v ? 0 : -1;
    } else if (!strcmp(a, "--preset")) {
        rc = parse_choice(a, v, preset_names, 4);
        cfg->preset = (preset)rc;
    } else if (!strcmp(a, "--io")) {
        rc = parse_choice(a, v, io_names, 2);
        cfg->io = rc == 0 ? SL_IO_URING : SL_IO_PREAD;
    } else if (!strcmp(a, "--on-error")) {
        rc = parse_choice(a, v, policies, 2);
        cfg->policy = rc == 0 ? SL_ERRORS_FAIL : SL_ERRORS_SKIP;
    } else if (!strcmp(a, "--size")) {
        rc = parse_int(a, v, 1, 16384, &x);
        cfg->size = (int)x;
    } else if (!strcmp(a, "--batch")) {
        rc = parse_int(a, v, 1, 1 << 20, &cfg->batch);
    } else if (!strcmp(a, "--threads")) {
        rc = parse_int(a, v, 1, 1024, &x);
        cfg->threads = (int)x;
    } else if (!strcmp(a, "--epochs")) {
        rc = parse_int(a, v, 1, MAX_EPOCHS, &x);
        cfg->epochs = (int)x;
    } else if (!strcmp(a, "--limit")) {
        rc = parse_int(a, v, 0, INT64_MAX, &cfg->limit);
    } else if (!strcmp(a, "--seed")) {
        rc = parse_int(a, v, 0, INT64_MAX, &cfg->seed);
    } else if (!strcmp(a, "--count")) {
        rc = parse_int(a, v, 1, 1000000, &x);
        cfg->sample_count = (int)x;
    } else if (!strcmp(a, "--parallelism")) {
        rc = parse_knob(a, v, &x);
        cfg->parallelism = (int)x;
    } else if (!strcmp(a, "--prefetch")) {
        rc = parse_knob(a, v, &cfg->prefetch);
    } else {
        fprintf(stderr, "sluice-bench: unknown option: %s\n", a);
        return -1;
    }
    return rc < 0 ? -1 : 0;
}

/* 0 to run, 1 after --help, -1 on bad usage. */
static int parse_args(int argc, char **argv, config *cfg)
{
    int positional = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            usage(stdout);
            return 1;
        } else if (!strcmp(a, "--cold")) {
            cfg->cold = true;
        } else if (!strcmp(a, "--ceiling")) {
            cfg->ceiling = true;
        } else if (a[0] == '-' && a[1] == '-') {
            if (parse_option(cfg, a, i + 1 < argc ? argv[i + 1] : NULL) < 0)
                return -1;
            i++;
        } else if (positional++ == 0) {
            cfg->dir = a;
        } else {
            fprintf(stderr, "sluice-bench: one folder only: %s\n", a);
            return -1;
        }
    }
    if (!cfg->sample_dir && !cfg->dir && !cfg->list) {
        fprintf(stderr, "sluice-bench: which folder?\n");
        return -1;
    }
    return 0;
}

int main(int argc, char **argv)
{
    config cfg = {
        .preset = PRESET_TRAIN, .size = 224, .batch = 256, .threads = sl_cpu_count(),
        .epochs = 1, .limit = -1, .parallelism = SL_AUTOTUNE, .prefetch = SL_AUTOTUNE,
        .io = SL_IO_AUTO, .policy = SL_ERRORS_FAIL, .sample_count = SAMPLE_DEFAULT_COUNT,
    };
    int rc = parse_args(argc, argv, &cfg);
    if (rc != 0) {
        if (rc < 0)
            usage(stderr);
        return rc < 0 ? 2 : 0;
    }
    if (cfg.sample_dir)
        return sample_write_folder(cfg.sample_dir, cfg.sample_count) < 0 ? 1 : 0;
    return bench(&cfg);
}
