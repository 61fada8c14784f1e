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
 * A consumer can stand in for a training step: --consumer-ms sleeps that
 * long after each batch, --consumer-schedule changes the sleep at given
 * seconds. A sampler thread snapshots the iterator's statistics every
 * 100 ms (sluice_bench_series.c), so every run also reports the consumer's
 * stall, peak buffered bytes, every knob over time and how long throughput
 * took to settle (convergence). --sweep runs a grid of static
 * configurations (map parallelism x prefetch depth, autotune off) and then
 * the autotune controller, each for the same time on the dataset repeated,
 * and compares them (sluice_bench_sweep.c); --sweep-rounds repeats the
 * whole sequence and keeps each configuration's median run, so that load
 * from other processes drifting over the minutes lands on all of them
 * alike. --plot draws that as SVG (sluice_bench_plot.c).
 *
 * Summary table and one JSON object on stdout (JSON last); --json FILE
 * writes the same object plus the time series. Exit status: 0, 1 on a pipeline or measurement
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
#include "sluice_bench.h"

#define PROGRESS_PERIOD_S 0.25
#define RATE_WINDOW_S 1.0 /* time constant of the live rates */
#define MAX_EPOCHS 10000
#define MAX_SCHEDULE 32
#define SWEEP_SECONDS 4.0
#define SWEEP_NEAR_BEST 0.97 /* "as good as the best" for the smallest static config */
#define TRACE_EVENTS (1 << 20)

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
    bool cold, ceiling, fast_upsample;
    /* the consumer: a step of consumer_ms, then sched_ms[i] from second
     * sched_t[i] on */
    double consumer_ms;
    double sched_t[MAX_SCHEDULE], sched_ms[MAX_SCHEDULE];
    int nsched;
    /* the controller and observation */
    int autotune; /* SL_OPT_AUTOTUNE */
    int64_t cpu_budget, ram_budget; /* 0: the library's default */
    const char *trace_path, *plot_path;
    bool report;
    /* --sweep: each run stops after sweep_seconds, or sweep_images if > 0;
     * the grid and autotune run sweep_rounds times */
    bool sweep;
    double sweep_seconds;
    int64_t sweep_images;
    int sweep_rounds;
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
        sl_options_set(opts, SL_OPT_ERROR_POLICY, cfg->policy) < 0 ||
        sl_options_set(opts, SL_OPT_AUTOTUNE, cfg->autotune) < 0 ||
        sl_options_set(opts, SL_OPT_CPU_BUDGET, cfg->cpu_budget) < 0 ||
        sl_options_set(opts, SL_OPT_RAM_BUDGET, cfg->ram_budget) < 0 ||
        sl_options_set(opts, SL_OPT_TRACE_EVENTS, cfg->trace_path ? TRACE_EVENTS : 0) < 0) {
        fprintf(stderr, "sluice-bench: options: %s\n", sl_last_error());
        sl_options_free(opts);
        return NULL;
    }
    return opts;
}

/* The paths the source yields, from its elements' path tensor (the last,
 * with SL_WITH_PATHS). */
static int list_pass(sl_iterator *it, path_list *pl)
{
    sl_element *el;
    int rc;
    while ((rc = sl_next(it, &el)) == 0) {
        size_t len;
        const char *s = sl_tensor_string(sl_element_tensor(el, sl_element_size(el) - 1), 0, &len);
        pl->bytes += (int64_t)sl_tensor_nbytes(sl_element_tensor(el, 0));
        int bad = !s ? SL_EDTYPE : path_list_add(pl, s, len) < 0 ? SL_ENOMEM : 0;
        sl_element_release(el);
        if (bad) {
            fprintf(stderr, "sluice-bench: listing files: %s\n",
                    bad == SL_EDTYPE ? "the last tensor is not a path" : "out of memory");
            return -1;
        }
    }
    if (rc < 0)
        fprintf(stderr, "sluice-bench: listing files: %s\n", sl_iterator_errmsg(it));
    return rc < 0 ? -1 : 0;
}

static sl_dataset *open_source(const config *cfg, unsigned flags);

/* Reads the files once through a source that yields their paths (the
 * pipeline's does not). */
static int list_files(const config *cfg, path_list *pl)
{
    sl_dataset *ds = sl_prefetch(open_source(cfg, SL_WITH_PATHS), SL_AUTOTUNE);
    sl_options *opts = make_options(cfg, cfg->seed);
    sl_iterator *it = ds && opts ? sl_iterator_create(ds, opts) : NULL;
    int rc = -1;
    if (!it)
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

static sl_dataset *open_source(const config *cfg, unsigned flags)
{
    sl_dataset *ds = cfg->list ? sl_file_list(cfg->list, cfg->dir, flags)
                               : sl_image_folder(cfg->dir, NULL, flags);
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
        if (SL_IMAGE_SPEC_INIT(&spec, crop_policy(cfg->preset), cfg->size) < 0) {
            sl_dataset_free(ds);
            return NULL;
        }
        spec.fast_upsample = cfg->fast_upsample;
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
    int64_t knob_changes; /* the controller's, over the run's iterators */
    int io_backend;
    double seconds; /* pipeline time of finished iterators */
    double *epoch_rate;
    int64_t *epoch_faults; /* minor page faults of the process in each epoch */
    long faults_mark;      /* ru_minflt when the current epoch began */
    int epoch;
    double epoch_t0;
    int64_t epoch_images0;
    double cold_resident; /* worst fraction left cached after eviction */
    /* over time, and the consumer's stall */
    series series;
    double stall_s, stall_wall; /* library: inside sl_next, and wall, of finished iterators */
    stall_clock clock;          /* the same by this program's clock */
    double first_wait_s;        /* ... when the first batch arrived (-1: not yet) */
    char *report_text;          /* --report: the last iterator's */
    /* --sweep: stop after this long or this many images (0: at the end) */
    double stop_seconds;
    int64_t stop_images;
    /* live progress */
    const char *label; /* instead of the epoch */
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
    if (st->label)
        fprintf(stderr, "\r  %s", st->label);
    else
        fprintf(stderr, "\r  epoch %d/%d", st->epoch + 1, st->cfg->epochs);
    if (st->expected > 0)
        fprintf(stderr, "  %5.1f%%", 100.0 * (double)st->images / (double)st->expected);
    fprintf(stderr, "  %9.1f images/s  %8.1f MB/s  RSS %.0f MiB\033[K", st->rate_images,
            st->rate_bytes / 1e6, (double)rss_bytes() / (1 << 20));
    fflush(stderr);
}

static long minor_faults(void)
{
    struct rusage ru;
    return getrusage(RUSAGE_SELF, &ru) == 0 ? ru.ru_minflt : 0;
}

/* Ends the current epoch at time t, after `images` images in all. */
static void close_epoch(run_state *st, double t, int64_t images)
{
    double dt = t - st->epoch_t0;
    int64_t n = images - st->epoch_images0;
    st->epoch_rate[st->epoch] = dt > 0 ? (double)n / dt : 0;
    long faults = minor_faults();
    if (st->epoch_faults)
        st->epoch_faults[st->epoch] = faults - st->faults_mark;
    st->faults_mark = faults;
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

/* The consumer's stall and peak memory from the iterator's statistics. */
static void collect_global(run_state *st, const sl_iterator *it)
{
    sl_stats *s = sl_iterator_stats(it);
    if (!s)
        return;
    double wall = sl_stats_global(s, SL_GLOBAL_WALL_SECONDS);
    double stall = sl_stats_global(s, SL_GLOBAL_STALL_FRACTION);
    double changes = sl_stats_global(s, SL_GLOBAL_KNOB_CHANGES);
    if (isfinite(changes))
        st->knob_changes += (int64_t)changes;
    if (isfinite(wall) && isfinite(stall)) {
        st->stall_s += stall * wall;
        st->stall_wall += wall;
    }
    sl_stats_free(s);
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
    collect_global(st, it);
}

/* sl_iterator_report's text in a malloc'd string (NULL when out of memory). */
static char *report_text(const sl_iterator *it)
{
    size_t size = 16384;
    for (int attempt = 0; attempt < 2; attempt++) {
        char *buf = malloc(size);
        if (!buf)
            return NULL;
        int n = sl_iterator_report_buf(it, buf, size);
        if (n < 0)
            snprintf(buf, size, "(no report: %s)\n", sl_strerror(n));
        if (n < 0 || (size_t)n < size)
            return buf;
        free(buf);
        size = (size_t)n + 1;
    }
    return NULL;
}

/* --trace and --report, from the iterator about to be freed (so with
 * --cold, the last epoch's). 0, or -1 after printing why. */
static int save_observations(run_state *st, const sl_iterator *it)
{
    const config *cfg = st->cfg;
    int rc = cfg->trace_path ? sl_iterator_trace(it, cfg->trace_path) : 0;
    if (rc < 0)
        fprintf(stderr, "sluice-bench: --trace %s: %s\n", cfg->trace_path, sl_strerror(rc));
    if (cfg->report) {
        free(st->report_text);
        st->report_text = report_text(it);
    }
    return rc < 0 ? -1 : 0;
}

/* The consumer's step time at pipeline time t. */
static double step_ms(const config *cfg, double t)
{
    double ms = cfg->consumer_ms;
    for (int i = 0; i < cfg->nsched && cfg->sched_t[i] <= t; i++)
        ms = cfg->sched_ms[i];
    return ms;
}

/* What a training step would take, slept off so the cores stay free for
 * the pipeline, as they would be while a GPU trains. */
static void train_step(double ms)
{
    if (ms <= 0)
        return;
    struct timespec ts = {.tv_sec = (time_t)(ms / 1000),
                          .tv_nsec = (long)(fmod(ms, 1000) * 1e6)};
    while (clock_nanosleep(CLOCK_MONOTONIC, 0, &ts, &ts) == EINTR)
        ;
}

static bool time_is_up(const run_state *st, double seconds)
{
    return (st->stop_seconds > 0 && seconds >= st->stop_seconds) ||
           (st->stop_images > 0 && st->images >= st->stop_images);
}

/* Pulls from an iterator created at t0 until it ends, fails, a batch is
 * bad (*bad) or a sweep run's time is up (SL_EOF); returns sl_next's code. */
static int drain(run_state *st, sl_iterator *it, double t0, int last, bool *bad)
{
    double t_prev = t0;
    for (;;) {
        sl_element *el;
        stall_clock_enter(&st->clock);
        int rc = sl_next(it, &el);
        stall_clock_leave(&st->clock);
        double now = now_s();
        if (rc != 0)
            return rc;
        if (st->first_wait_s < 0)
            st->first_wait_s = stall_clock_read(&st->clock);
        int64_t before = st->images;
        *bad = consume(st, el) < 0;
        sl_element_release(el);
        if (*bad)
            return 0;
        close_epochs_passed(st, last, t_prev, before, now);
        double t = st->seconds + (now - t0);
        series_arrival(&st->series, t, st->images);
        progress(st, it, now);
        if (time_is_up(st, now - t0))
            return SL_EOF;
        train_step(step_ms(st->cfg, t));
        t_prev = now;
    }
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
    series_arrival(&st->series, st->seconds, st->images);
    sampler *sp = sampler_start(it, &st->series, &st->clock, st->seconds, t0, st->stall_s);
    if (!sp)
        fprintf(stderr, "sluice-bench: no sampler thread: the run has no time series\n");
    bool bad = false;
    int rc = drain(st, it, t0, last, &bad);
    double t1 = now_s();
    st->seconds += t1 - t0;
    if (!bad && rc < 0)
        fprintf(stderr, "%ssluice-bench: pipeline failed: %s\n", st->tty ? "\n" : "",
                sl_iterator_errmsg(it));
    else if (!bad)
        while (st->epoch <= last)
            close_epoch(st, t1, st->images);
    sampler_stop(sp);
    collect_stats(st, it);
    int saved = save_observations(st, it);
    sl_iterator_free(it);
    return bad || rc < 0 || saved < 0 ? -1 : 0;
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
    st->faults_mark = minor_faults();
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

void json_string(FILE *f, const char *s)
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
void json_number(FILE *f, double v)
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
    fprintf(f, ",\"seed\":%lld,\"cold\":%s,\"on_error\":\"%s\",\"fast_upsample\":%s",
            (long long)cfg->seed, cfg->cold ? "true" : "false",
            cfg->policy == SL_ERRORS_SKIP ? "skip" : "fail", cfg->fast_upsample ? "true" : "false");
    fprintf(f, ",\"autotune\":%d,\"cpu_budget\":%lld,\"ram_budget_bytes\":%lld,"
            "\"consumer_ms\":", cfg->autotune, (long long)cfg->cpu_budget,
            (long long)cfg->ram_budget);
    json_number(f, cfg->consumer_ms);
    fputs(",\"consumer_schedule\":[", f);
    for (int i = 0; i < cfg->nsched; i++)
        fprintf(f, "%s[%g,%g]", i ? "," : "", cfg->sched_t[i], cfg->sched_ms[i]);
    fputc(']', f);
}

static double stall_fraction(const run_state *st)
{
    return st->stall_wall > 0 ? st->stall_s / st->stall_wall : NAN;
}

/* The consumer's stall from the first batch on (by its own clock): the
 * wait for the first batch is the pipeline filling, the same for any
 * configuration that starts its workers at once. */
static double stall_after_first(const run_state *st)
{
    double w = stall_clock_read(&st->clock) - st->first_wait_s;
    double wall = st->seconds - st->first_wait_s;
    return st->first_wait_s >= 0 && wall > 0 ? w / wall : NAN;
}

static convergence run_convergence(const run_state *st)
{
    const series *s = &st->series;
    return series_convergence(s, series_start(s), series_end(s));
}

/* Where the consumer's step changes within the run, from the start on:
 * the segments' starts into at[] (at most MAX_SCHEDULE + 1). */
static int segments(const run_state *st, double *at)
{
    const config *cfg = st->cfg;
    double start = series_start(&st->series), end = series_end(&st->series);
    int n = 0;
    at[n++] = start;
    for (int i = 0; i < cfg->nsched; i++)
        if (cfg->sched_t[i] > start && cfg->sched_t[i] < end)
            at[n++] = cfg->sched_t[i];
    return n;
}

/* Convergence from the start of segment k of n to the next. */
static convergence segment_convergence(const run_state *st, const double *at, int n, int k)
{
    double to = k + 1 < n ? at[k + 1] : series_end(&st->series);
    return series_convergence(&st->series, at[k], to);
}

static void json_schedule_convergence(FILE *f, const run_state *st)
{
    double at[MAX_SCHEDULE + 1];
    int n = segments(st, at);
    fputs(",\"convergence_after_change\":[", f);
    for (int k = 0; k < n; k++) {
        convergence c = segment_convergence(st, at, n, k);
        fprintf(f, "%s{\"at\":", k ? "," : "");
        json_number(f, at[k]);
        fputs(",\"step_ms\":", f);
        json_number(f, step_ms(st->cfg, at[k]));
        fputs(",\"seconds\":", f);
        json_number(f, c.seconds);
        fputs(",\"steady_images_per_s\":", f);
        json_number(f, c.steady);
        fputc('}', f);
    }
    fputc(']', f);
}

/* The knobs' values at the end of the run (the last sample). */
static void json_final_knobs(FILE *f, const series *s)
{
    fputs(",\"final_knobs\":{", f);
    for (int k = 0; s->n && k < s->nknobs; k++) {
        fputs(k ? "," : "", f);
        json_string(f, s->knobs[k].label);
        fputc(':', f);
        json_number(f, s->knobs[k].v[s->n - 1]);
    }
    fputc('}', f);
}

static void json_observations(FILE *f, const run_state *st)
{
    convergence c = run_convergence(st);
    fputs(",\"stall_fraction\":", f);
    json_number(f, stall_fraction(st));
    fputs(",\"measured_stall_fraction\":", f);
    json_number(f, st->seconds > 0 ? stall_clock_read(&st->clock) / st->seconds
                                   : NAN);
    fputs(",\"stall_fraction_after_first_batch\":", f);
    json_number(f, stall_after_first(st));
    fputs(",\"first_batch_seconds\":", f);
    json_number(f, st->first_wait_s >= 0 ? st->first_wait_s : NAN);
    fputs(",\"steady_images_per_s\":", f);
    json_number(f, c.steady);
    fputs(",\"convergence_seconds\":", f);
    json_number(f, c.seconds);
    if (st->cfg->nsched)
        json_schedule_convergence(f, st);
    json_final_knobs(f, &st->series);
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
    if (st->epoch_faults) {
        fprintf(f, "],\"per_epoch_page_faults\":[");
        for (int e = 0; e < cfg->epochs; e++)
            fprintf(f, "%s%lld", e ? "," : "", (long long)st->epoch_faults[e]);
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
    json_observations(f, st);
}

static void json_ceiling(FILE *f, const run_state *st, const ceilings *c)
{
    fprintf(f, ",\"ceiling_images_per_s\":");
    json_number(f, c->best);
    fprintf(f, ",\"ratio_to_ceiling\":");
    json_number(f, c->best > 0 ? rate((double)st->images, st->seconds) / c->best : NAN);
    fprintf(f, ",\"steady_ratio_to_ceiling\":");
    json_number(f, c->best > 0 ? run_convergence(st).steady / c->best : NAN);
    fprintf(f, ",\"ceiling_before_images_per_s\":");
    json_number(f, c->before.images_per_s);
    fprintf(f, ",\"ceiling_after_images_per_s\":");
    json_number(f, c->after.images_per_s);
    fprintf(f, ",\"ceiling_files\":%lld,\"ceiling_failed\":%lld",
            (long long)c->before.files, (long long)c->before.failed);
}

/* The whole object, in a malloc'd string (NULL when out of memory); with
 * the time series for the --json file. */
static char *make_json(const run_state *st, const path_list *pl, const ceilings *c,
                       bool with_series)
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
    if (with_series)
        series_json(f, &st->series);
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

static void print_consumer(const config *cfg)
{
    if (cfg->consumer_ms <= 0 && !cfg->nsched) {
        printf("  %-20s none (batches released at once)\n", "consumer step");
        return;
    }
    printf("  %-20s", "consumer step");
    if (!cfg->nsched || cfg->sched_t[0] > 0)
        printf(" %g ms per batch%s", cfg->consumer_ms, cfg->nsched ? "," : "");
    for (int i = 0; i < cfg->nsched; i++)
        printf("%s %g ms from %g s", i ? "," : "", cfg->sched_ms[i], cfg->sched_t[i]);
    printf("\n");
}

/* The controller's moves as the samples saw them: how many samples show an
 * autotuned knob changed since the one before, and when the last did (s
 * after the run's first arrival; NaN if none). */
static double knobs_settled(const series *s, int *moves)
{
    double last = NAN;
    *moves = 0;
    for (size_t i = 1; i < s->n; i++)
        for (int k = 0; k < s->nknobs; k++) {
            double a = s->knobs[k].v[i - 1], b = s->knobs[k].v[i];
            if (s->knobs[k].autotuned && isfinite(a) && isfinite(b) && a != b) {
                ++*moves;
                last = s->t[i] - series_start(s);
                break;
            }
        }
    return last;
}

/* The slowest and fastest 1-s throughput after the first second. */
static void rate_range(const series *s, double *lo, double *hi)
{
    *lo = INFINITY;
    *hi = -INFINITY;
    for (double a = series_start(s) + 1; a + 1 <= series_end(s); a += 0.1) {
        double r = series_rate(s, a, a + 1);
        *lo = fmin(*lo, r);
        *hi = fmax(*hi, r);
    }
}

static void print_convergence(const run_state *st)
{
    convergence c = run_convergence(st);
    double lo, hi;
    rate_range(&st->series, &lo, &hi);
    if (isfinite(c.seconds))
        printf("  %-20s %.1f s (1-s throughput within 5%% of %.1f images/s from then on)\n",
               "converged after", c.seconds, c.steady);
    else if (isfinite(c.steady) && lo <= hi)
        printf("  %-20s no: 1-s throughput kept moving more than 5%% around %.1f "
               "(%.0f to %.0f images/s)\n", "converged after", c.steady, lo, hi);
    else
        printf("  %-20s not measured: the run is too short\n", "converged after");
    int moves;
    double settled = knobs_settled(&st->series, &moves);
    if (!st->cfg->autotune)
        ;
    else if (st->knob_changes == 0)
        printf("  %-20s kept its starting knobs\n", "controller");
    else if (moves == 0)
        printf("  %-20s %lld knob change%s, all in the first %.1f s\n", "controller",
               (long long)st->knob_changes, st->knob_changes > 1 ? "s" : "", SERIES_PERIOD_S);
    else
        printf("  %-20s %lld knob change%s, the last %.1f s after the first batch\n",
               "controller", (long long)st->knob_changes, st->knob_changes > 1 ? "s" : "",
               settled);
    if (!st->cfg->nsched)
        return;
    double at[MAX_SCHEDULE + 1];
    int n = segments(st, at);
    for (int k = 1; k < n; k++) {
        convergence ck = segment_convergence(st, at, n, k);
        printf("  %-20s ", "");
        if (isfinite(ck.seconds))
            printf("%.1f s", ck.seconds);
        else
            printf("not settled");
        printf(" after the change at %.1f s to %g ms", at[k], step_ms(st->cfg, at[k]));
        if (isfinite(ck.steady))
            printf(" (steady %.1f images/s)", ck.steady);
        printf("\n");
    }
}

static void print_final_knobs(const series *s)
{
    if (!s->n || !s->nknobs)
        return;
    printf("  %-20s", "knobs at the end");
    for (int k = 0; k < s->nknobs; k++)
        printf("%s %s %.0f%s", k ? "," : "", s->knobs[k].label, s->knobs[k].v[s->n - 1],
               s->knobs[k].autotuned ? "" : " (fixed)");
    printf("\n");
}

static void print_observations(const run_state *st)
{
    print_consumer(st->cfg);
    printf("  %-20s %.1f%% of wall time inside sl_next (%.1f%% by this program's clock)\n",
           "consumer stall", 100 * stall_fraction(st),
           st->seconds > 0 ? 100 * stall_clock_read(&st->clock) / st->seconds
                           : NAN);
    print_convergence(st);
    print_final_knobs(&st->series);
}

static int cmp_rate(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* What the first epoch cost against the others, and the reasons this run
 * can show: the wait for the first batch (nothing comes out before a whole
 * batch is decoded, and the controller starts small) and the page faults
 * of buffers that later epochs reuse. */
static void print_first_epoch(const run_state *st)
{
    int n = st->cfg->epochs;
    if (n < 2 || !st->epoch_faults)
        return;
    int m = n - 1;
    double later[m];
    memcpy(later, st->epoch_rate + 1, (size_t)m * sizeof *later);
    qsort(later, (size_t)m, sizeof *later, cmp_rate);
    double med = m % 2 ? later[m / 2] : (later[m / 2 - 1] + later[m / 2]) / 2;
    int64_t faults_later = 0;
    for (int e = 1; e < n; e++)
        faults_later += st->epoch_faults[e];
    faults_later /= m;
    printf("\n  %-20s %.1f images/s, %.2fx the later epochs' median (%.1f)", "first epoch",
           st->epoch_rate[0], med > 0 ? st->epoch_rate[0] / med : NAN, med);
    bool ramp = st->cfg->autotune && st->cfg->parallelism == SL_AUTOTUNE;
    printf("\n  %-20s %.3f s waiting for the first batch (a whole batch is read and decoded\n"
           "  %-20s before one comes out%s);\n"
           "  %-20s %lld page faults for new buffers that later epochs reuse (%lld each after)",
           "  why", st->first_wait_s, "",
           ramp ? ", and the controller starts from parallelism 1" : "", "",
           (long long)st->epoch_faults[0], (long long)faults_later);
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
    printf("  %-20s %.1f (the whole run, its start included)\n", "images/s", ips);
    double steady = run_convergence(st).steady;
    if (isfinite(steady))
        printf("  %-20s %.1f (median 1-s throughput over the run's second half)\n",
               "steady images/s", steady);
    else
        printf("  %-20s not measured: the run is too short (it takes 2 s; add --epochs)\n",
               "steady images/s");
    printf("  %-20s", "per epoch images/s");
    for (int e = 0; e < cfg->epochs; e++)
        printf(" %.1f", st->epoch_rate[e]);
    print_first_epoch(st);
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
    print_observations(st);
    if (!cfg->ceiling)
        return;
    printf("  %-20s %.1f (full-size libjpeg decode of %lld preloaded files, %d threads; "
           "before %.1f, after %.1f)\n", "ceiling images/s", c->best,
           (long long)c->before.files, cfg->threads, c->before.images_per_s,
           c->after.images_per_s);
    if (c->best > 0 && isfinite(steady))
        printf("  %-20s %.2f whole run, %.2f steady%s\n", "ratio to ceiling", ips / c->best,
               steady / c->best, cfg->preset == PRESET_READ ? " (this preset does not decode)" : "");
    else if (c->best > 0)
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

/* The SVG of a single run: its series only. */
static int plot_run(const run_state *st)
{
    const config *cfg = st->cfg;
    char title[256], subtitle[256];
    double at[MAX_SCHEDULE + 1], ms[MAX_SCHEDULE + 1];
    int n = segments(st, at);
    for (int k = 0; k < n; k++)
        ms[k] = step_ms(cfg, at[k]);
    snprintf(title, sizeof title, "sluice-bench %s: %s on %s", sl_version_string(),
             preset_names[cfg->preset], cfg->list ? cfg->list : cfg->dir);
    snprintf(subtitle, sizeof subtitle, "%d threads, batch %lld, %.0f images/s, stall %.1f%%, "
             "peak buffered %.1f MiB", cfg->threads, (long long)cfg->batch,
             rate((double)st->images, st->seconds), 100 * stall_fraction(st),
             (double)st->peak_buffered / (1 << 20));
    plot_input in = {.title = title, .subtitle = subtitle, .best_static = NAN,
                     .s = &st->series, .run_name = "the run", .changes = at + 1,
                     .change_ms = ms + 1, .nchanges = n - 1,
                     .convergence_s = run_convergence(st).seconds};
    return plot_write(cfg->plot_path, &in);
}

static int report(const run_state *st, const path_list *pl, const ceilings *c)
{
    const config *cfg = st->cfg;
    char *json = make_json(st, pl, c, false);
    char *full = cfg->json_path ? make_json(st, pl, c, true) : NULL;
    if (!json || (cfg->json_path && !full)) {
        fprintf(stderr, "sluice-bench: out of memory\n");
        free(json);
        free(full);
        return -1;
    }
    if (st->report_text)
        printf("%s\n", st->report_text);
    print_summary(st, pl, c);
    printf("%s\n", json);
    fflush(stdout);
    int rc = full ? write_file(cfg->json_path, full) : 0;
    if (rc == 0 && cfg->plot_path)
        rc = plot_run(st);
    free(json);
    free(full);
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

/* ---- the sweep ---- */

static const int64_t sweep_parallelism[] = {1, 2, 3, 4, 6, 8};
static const int64_t sweep_depth[] = {1, 2, 4, 8};
#define NPAR (sizeof sweep_parallelism / sizeof *sweep_parallelism)
#define NDEPTH (sizeof sweep_depth / sizeof *sweep_depth)

typedef struct sweep {
    sweep_row runs[SWEEP_MAX_ROUNDS][NPAR * NDEPTH + 1]; /* each round's */
    sweep_row rows[NPAR * NDEPTH + 1];                   /* each one's median run */
    int n, rounds;
    config auto_cfg;
    run_state autotune[SWEEP_MAX_ROUNDS];
    int auto_median; /* the round whose autotune run is reported and drawn */
    char label[64];
} sweep;

static void run_state_free(run_state *st)
{
    series_free(&st->series);
    free(st->epoch_rate);
    free(st->epoch_faults);
    free(st->report_text);
}

/* One iterator, with the progress line. */
static int run_live(run_state *st, sl_dataset *ds, const sl_options *opts)
{
    st->tty = isatty(STDERR_FILENO);
    st->shown_at = now_s();
    int rc = run_iterator(st, ds, opts, 1);
    if (st->tty)
        fprintf(stderr, "\r\033[K");
    return rc;
}

/* One configuration for the sweep's time (or image count), on the files
 * repeated for as long as that takes. 0, or -1 after printing why. */
static int sweep_run(run_state *st, sl_dataset *src, sweep_row *row)
{
    const config *cfg = st->cfg;
    st->files = st->expected = -1;
    st->stop_seconds = cfg->sweep_images > 0 ? 0 : cfg->sweep_seconds;
    st->stop_images = cfg->sweep_images;
    st->epoch_rate = calloc(1, sizeof *st->epoch_rate);
    sl_dataset *ds = build_pipeline(cfg, src, -1, cfg->seed);
    sl_options *opts = ds ? make_options(cfg, cfg->seed) : NULL;
    int rc = -1;
    if (!ds)
        fprintf(stderr, "sluice-bench: cannot build the pipeline: %s\n", sl_last_error());
    else if (opts && !st->epoch_rate)
        fprintf(stderr, "sluice-bench: out of memory\n");
    else if (opts)
        rc = run_live(st, ds, opts);
    sl_options_free(opts);
    sl_dataset_free(ds);
    convergence c = run_convergence(st);
    *row = (sweep_row){
        .parallelism = cfg->parallelism, .depth = cfg->prefetch, .images = st->images,
        .peak_buffered = st->peak_buffered, .seconds = st->seconds,
        .images_per_s = rate((double)st->images, st->seconds),
        .stall_fraction = stall_fraction(st), .stall_after_first = stall_after_first(st),
        .convergence_s = c.seconds, .steady = c.steady,
    };
    return rc;
}

static int sweep_static(const config *cfg, sl_dataset *src, sweep *sw, int round, int j,
                        int total, int64_t p, int64_t d)
{
    config c = *cfg;
    c.parallelism = (int)p;
    c.prefetch = d;
    c.autotune = 0;
    c.trace_path = NULL;
    c.report = false;
    char label[64];
    snprintf(label, sizeof label, "[%d/%d] parallelism %lld, depth %lld",
             round * total + j + 1, sw->rounds * total, (long long)p, (long long)d);
    run_state st = {.cfg = &c, .label = label, .first_wait_s = -1};
    int rc = sweep_run(&st, src, &sw->runs[round][j]);
    run_state_free(&st);
    return rc;
}

/* One round: the static grid, then the autotune run, each for the same
 * time. */
static int sweep_round(const config *cfg, sl_dataset *src, sweep *sw, int round)
{
    size_t npar = 0;
    while (npar < NPAR && sweep_parallelism[npar] <= 4 * cfg->threads)
        npar++;
    int j = 0, total = (int)(npar * NDEPTH) + 1;
    for (size_t i = 0; i < npar; i++)
        for (size_t k = 0; k < NDEPTH; k++, j++)
            if (sweep_static(cfg, src, sw, round, j, total, sweep_parallelism[i],
                             sweep_depth[k]) < 0)
                return -1;
    snprintf(sw->label, sizeof sw->label, "[%d/%d] autotune", (round + 1) * total,
             sw->rounds * total);
    sw->autotune[round] = (run_state){.cfg = &sw->auto_cfg, .label = sw->label, .first_wait_s = -1};
    sw->n = total;
    return sweep_run(&sw->autotune[round], src, &sw->runs[round][j]);
}

/* The round whose run of configuration j has the median images/s (the
 * lower one of an even count), so a row stays one real run. */
static int median_round(const sweep *sw, int j)
{
    int best = 0;
    for (int r = 0; r < sw->rounds; r++) {
        int below = 0, equal_before = 0;
        for (int q = 0; q < sw->rounds; q++) {
            double a = sw->runs[q][j].images_per_s, b = sw->runs[r][j].images_per_s;
            below += a < b;
            equal_before += a == b && q < r;
        }
        if (below + equal_before == (sw->rounds - 1) / 2)
            best = r;
    }
    return best;
}

static void sweep_medians(sweep *sw)
{
    for (int j = 0; j < sw->n; j++) {
        int r = median_round(sw, j);
        sw->rows[j] = sw->runs[r][j];
        sw->rows[j].rounds = sw->rounds;
        for (int q = 0; q < sw->rounds; q++)
            sw->rows[j].round_images_per_s[q] = sw->runs[q][j].images_per_s;
        if (j == sw->n - 1)
            sw->auto_median = r;
    }
}

static int run_sweep(const config *cfg, sl_dataset *src, sweep *sw)
{
    sw->rounds = cfg->sweep_rounds;
    sw->auto_cfg = *cfg;
    sw->auto_cfg.parallelism = SL_AUTOTUNE;
    sw->auto_cfg.prefetch = SL_AUTOTUNE;
    sw->auto_cfg.autotune = 1;
    for (int r = 0; r < sw->rounds; r++)
        if (sweep_round(cfg, src, sw, r) < 0)
            return -1;
    sweep_medians(sw);
    return 0;
}

/* The autotune run that stands for all rounds. */
static run_state *auto_run(sweep *sw)
{
    return &sw->autotune[sw->auto_median];
}

static char *make_sweep_json(sweep *sw, const path_list *pl, const sweep_summary *sum,
                             bool with_series)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    if (!f)
        return NULL;
    json_config(f, &sw->auto_cfg);
    fputs(",\"mode\":\"sweep\",\"sweep_seconds\":", f);
    json_number(f, sw->auto_cfg.sweep_images > 0 ? NAN : sw->auto_cfg.sweep_seconds);
    fprintf(f, ",\"sweep_images\":%lld,\"sweep_rounds\":%d", (long long)sw->auto_cfg.sweep_images,
            sw->rounds);
    json_results(f, auto_run(sw), pl);
    sweep_json(f, sw->rows, sw->n, sum);
    if (with_series)
        series_json(f, &auto_run(sw)->series);
    fputc('}', f);
    if (fclose(f) != 0) {
        free(buf);
        return NULL;
    }
    return buf;
}

static int plot_sweep(sweep *sw, const sweep_summary *sum)
{
    const config *cfg = &sw->auto_cfg;
    char title[256], subtitle[256];
    const run_state *a = auto_run(sw);
    double at[MAX_SCHEDULE + 1], ms[MAX_SCHEDULE + 1];
    int n = segments(a, at);
    for (int k = 0; k < n; k++)
        ms[k] = step_ms(cfg, at[k]);
    snprintf(title, sizeof title, "sluice-bench %s sweep: %s on %s", sl_version_string(),
             preset_names[cfg->preset], cfg->list ? cfg->list : cfg->dir);
    char each[32];
    if (cfg->sweep_images > 0)
        snprintf(each, sizeof each, "%lld images", (long long)cfg->sweep_images);
    else
        snprintf(each, sizeof each, "%g s", cfg->sweep_seconds);
    snprintf(subtitle, sizeof subtitle, "%dx%d uint8, batch %lld, %d threads, %s per "
             "configuration, consumer step %g ms; autotune = %.3fx best static, "
             "%.2fx the leanest near-best config's memory", cfg->size, cfg->size,
             (long long)cfg->batch, cfg->threads, each, cfg->consumer_ms,
             sweep_autotune_vs_best(sw->rows, sum), sweep_memory_ratio(sw->rows, sum));
    plot_input in = {
        .title = title, .subtitle = subtitle, .rows = sw->rows, .nrows = sw->n,
        .best_static = sum->best >= 0 ? sw->rows[sum->best].images_per_s : NAN,
        .s = &a->series, .run_name = "autotune run", .changes = at + 1, .change_ms = ms + 1,
        .nchanges = n - 1, .convergence_s = run_convergence(a).seconds,
    };
    return plot_write(cfg->plot_path, &in);
}

static void print_sweep(sweep *sw, const path_list *pl, const sweep_summary *sum)
{
    const config *cfg = &sw->auto_cfg;
    if (auto_run(sw)->report_text)
        printf("%s\n", auto_run(sw)->report_text);
    printf("sluice-bench %s sweep: %s on %s, %dx%d uint8 HWC, batch %lld, %d threads\n",
           sl_version_string(), preset_names[cfg->preset], cfg->list ? cfg->list : cfg->dir,
           cfg->size, cfg->size, (long long)cfg->batch, cfg->threads);
    if (cfg->sweep_images > 0)
        printf("  each configuration for %lld images", (long long)cfg->sweep_images);
    else
        printf("  each configuration for %g s", cfg->sweep_seconds);
    printf(" of the %lld files (%.1f MB) repeated; the io backend was %s\n",
           (long long)pl->n, (double)pl->bytes / 1e6, io_name(auto_run(sw)->io_backend));
    if (sw->rounds > 1)
        printf("  %d rounds; each row is its configuration's median run (range: all rounds)\n",
               sw->rounds);
    print_consumer(cfg);
    sweep_print_table(stdout, sw->rows, sw->n, sum);
    print_final_knobs(&auto_run(sw)->series);
}

static int report_sweep(sweep *sw, const path_list *pl)
{
    const config *cfg = &sw->auto_cfg;
    sweep_summary sum = sweep_summarize(sw->rows, sw->n, SWEEP_NEAR_BEST);
    char *json = make_sweep_json(sw, pl, &sum, false);
    char *full = cfg->json_path ? make_sweep_json(sw, pl, &sum, true) : NULL;
    if (!json || (cfg->json_path && !full)) {
        fprintf(stderr, "sluice-bench: out of memory\n");
        free(json);
        free(full);
        return -1;
    }
    print_sweep(sw, pl, &sum);
    printf("%s\n", json);
    fflush(stdout);
    int rc = full ? write_file(cfg->json_path, full) : 0;
    if (rc == 0 && cfg->plot_path)
        rc = plot_sweep(sw, &sum);
    free(json);
    free(full);
    return rc;
}

/* The files are read once, untimed, first: the first configuration should
 * not be the one that pays for a cold page cache. */
static int bench_sweep(const config *cfg, sl_dataset *src)
{
    path_list pl = {0};
    sweep *sw = calloc(1, sizeof *sw);
    int rc = sw ? list_files(cfg, &pl) : -1;
    if (!sw)
        fprintf(stderr, "sluice-bench: out of memory\n");
    if (rc == 0)
        rc = run_sweep(cfg, src, sw);
    if (rc == 0)
        auto_run(sw)->files = (int64_t)pl.n;
    if (rc == 0)
        rc = report_sweep(sw, &pl);
    for (int r = 0; sw && r < sw->rounds; r++)
        run_state_free(&sw->autotune[r]);
    free(sw);
    path_list_free(&pl);
    sl_dataset_free(src);
    return rc < 0 ? 1 : 0;
}

static int bench(const config *cfg)
{
    sl_dataset *src = open_source(cfg, 0);
    if (!src) {
        fprintf(stderr, "sluice-bench: %s\n", sl_last_error());
        return 1;
    }
    if (cfg->sweep)
        return bench_sweep(cfg, src);
    run_state st = {.cfg = cfg, .files = sl_dataset_cardinality(src), .first_wait_s = -1};
    path_list pl = {0};
    ceilings c = {0};
    st.epoch_rate = calloc((size_t)cfg->epochs, sizeof *st.epoch_rate);
    st.epoch_faults = calloc((size_t)cfg->epochs, sizeof *st.epoch_faults);
    int rc = 0;
    if (!st.epoch_rate || !st.epoch_faults) {
        fprintf(stderr, "sluice-bench: out of memory\n");
        rc = -1;
    }
    if (rc == 0 && (cfg->cold || cfg->ceiling))
        rc = list_files(cfg, &pl);
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
    run_state_free(&st);
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
        "  --fast-upsample      replicate chroma instead of interpolating it (faster;\n"
        "                       pixels differ slightly from PIL's)\n"
        "  --ceiling            also measure full-size libjpeg decode of the same files\n"
        "  --on-error fail|skip stop at a bad file (default) or skip it\n"
        "  --json FILE          write the result object to FILE\n"
        "  --seed S             shuffle and crop seed (default 0)\n"
        "  --count N            --make-sample: images to write (default %d)\n"
        "the consumer (a stand-in for a training step):\n"
        "  --consumer-ms X      sleep X ms after each batch (default 0)\n"
        "  --consumer-schedule T:X,T:X...  from second T on, sleep X ms (e.g. 0:40,15:10)\n"
        "the controller and what it saw:\n"
        "  --autotune on|off    SL_OPT_AUTOTUNE (default on)\n"
        "  --cpu-budget N       worker threads the controller may keep busy (default: CPUs)\n"
        "  --ram-budget MIB     cap on buffered data (default: half of available memory)\n"
        "  --report             print sl_iterator_report at the end\n"
        "  --trace FILE         record events and write a Chrome/Perfetto trace to FILE\n"
        "  --plot FILE.svg      draw the run over time (with --sweep, the sweep too)\n"
        "  --sweep              static parallelism x prefetch depth grid, then autotune\n"
        "  --sweep-seconds X    each for X seconds (default %g) of the files repeated\n"
        "  --sweep-images N     or each for N images\n"
        "  --sweep-rounds R     run the whole sweep R times, report median runs (default 1)\n",
        SAMPLE_DEFAULT_COUNT, SWEEP_SECONDS);
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

static int parse_double(const char *flag, const char *v, double lo, double hi, double *out)
{
    char *end;
    errno = 0;
    double x = v ? strtod(v, &end) : 0;
    if (!v || !*v || *end || errno || !(x >= lo && x <= hi)) {
        fprintf(stderr, "sluice-bench: %s needs a number in [%g, %g]\n", flag, lo, hi);
        return -1;
    }
    *out = x;
    return 0;
}

/* "T:X,T:X...": seconds increasing, milliseconds >= 0. */
static int parse_schedule(config *cfg, const char *v)
{
    const char *p = v;
    cfg->nsched = 0;
    while (p && *p) {
        char *end;
        double t = strtod(p, &end), ms = *end == ':' ? strtod(end + 1, &end) : -1;
        bool ok = cfg->nsched < MAX_SCHEDULE && (*end == ',' || !*end) && t >= 0 && ms >= 0 &&
                  isfinite(t) && isfinite(ms) &&
                  (cfg->nsched == 0 || t > cfg->sched_t[cfg->nsched - 1]);
        if (!ok) {
            fprintf(stderr, "sluice-bench: --consumer-schedule wants up to %d SECONDS:MS pairs "
                    "with increasing seconds, like 0:40,15:10: %s\n", MAX_SCHEDULE, v);
            return -1;
        }
        cfg->sched_t[cfg->nsched] = t;
        cfg->sched_ms[cfg->nsched++] = ms;
        p = *end ? end + 1 : end;
    }
    if (!v || !cfg->nsched) {
        fprintf(stderr, "sluice-bench: --consumer-schedule: empty\n");
        return -1;
    }
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
    static const char *const switches[] = {"off", "on"};
    int64_t x = 0;
    int rc = 0;
    if (!strcmp(a, "--list") || !strcmp(a, "--json") || !strcmp(a, "--make-sample") ||
        !strcmp(a, "--trace") || !strcmp(a, "--plot")) {
        const char **dst = a[2] == 'l'   ? &cfg->list
                         : a[2] == 'j'   ? &cfg->json_path
                         : a[2] == 'm'   ? &cfg->sample_dir
                         : a[2] == 't'   ? &cfg->trace_path
                                         : &cfg->plot_path;
        *dst = v;
        rc = v ? 0 : -1;
    } else if (!strcmp(a, "--consumer-ms")) {
        rc = parse_double(a, v, 0, 3.6e6, &cfg->consumer_ms);
    } else if (!strcmp(a, "--consumer-schedule")) {
        rc = parse_schedule(cfg, v);
    } else if (!strcmp(a, "--sweep-seconds")) {
        rc = parse_double(a, v, 0.5, 86400, &cfg->sweep_seconds);
    } else if (!strcmp(a, "--sweep-rounds")) {
        rc = parse_int(a, v, 1, SWEEP_MAX_ROUNDS, &x);
        cfg->sweep_rounds = (int)x;
    } else if (!strcmp(a, "--sweep-images")) {
        rc = parse_int(a, v, 1, INT64_MAX, &cfg->sweep_images);
    } else if (!strcmp(a, "--autotune")) {
        rc = parse_choice(a, v, switches, 2);
        cfg->autotune = rc;
    } else if (!strcmp(a, "--cpu-budget")) {
        rc = parse_int(a, v, 1, 4096, &cfg->cpu_budget);
    } else if (!strcmp(a, "--ram-budget")) {
        rc = parse_int(a, v, 1, INT64_MAX >> 20, &cfg->ram_budget);
        cfg->ram_budget <<= 20;
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
        } else if (!strcmp(a, "--fast-upsample")) {
            cfg->fast_upsample = true;
        } else if (!strcmp(a, "--ceiling")) {
            cfg->ceiling = true;
        } else if (!strcmp(a, "--sweep")) {
            cfg->sweep = true;
        } else if (!strcmp(a, "--report")) {
            cfg->report = true;
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
    if (cfg->sweep && (cfg->cold || cfg->ceiling || cfg->preset == PRESET_READ)) {
        fprintf(stderr, "sluice-bench: --sweep runs a decoding preset, warm, without "
                "--cold or --ceiling\n");
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
        .autotune = 1, .sweep_seconds = SWEEP_SECONDS, .sweep_rounds = 1,
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
