/*
 * One configuration of sluice-bench, run and measured: the pipeline built
 * from the command line, the iterators that run its epochs (warm, or
 * --cold with the page cache emptied before each), the consumer's loop
 * with its stand-in training step, the counters collected from the
 * library, and the JSON of the configuration and its results. The single
 * run (sluice_bench.c) and the sweep (sluice_bench_sweep.c) both use it.
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
#define TRACE_EVENTS (1 << 20)

const char *const preset_names[4] = {"train", "eval", "decode", "read"};
const char *const knob_json[NKNOBS] = {"interleave_parallelism", "parse_parallelism",
                                       "map_parallelism", "parallelism", "prefetch"};
const char *const knob_label[NKNOBS] = {"interleave", "parse", "map", "map_image", "prefetch"};

bool knob_in_pipeline(const config *cfg, knob_id k)
{
    switch (k) {
    case KNOB_INTERLEAVE:
        return cfg->format != FORMAT_FOLDER;
    case KNOB_PARSE:
        return cfg->format == FORMAT_TFRECORD;
    case KNOB_MAP:
        return cfg->map_us > 0;
    case KNOB_IMAGE:
        return cfg->preset != PRESET_READ;
    default:
        return true;
    }
}

/* ---- the file list (for --cold and --ceiling) ---- */

/* One pool of --threads workers for every iterator of the run, as the
 * default runtime is for a training loop: with an iterator per epoch
 * (--per-epoch, --cold) the run then sees what such a loop sees, not new
 * threads (their stacks, caches and decoders faulted in again) each epoch. */
static sl_runtime *runtime;

void bench_runtime_free(void)
{
    sl_runtime_free(runtime);
    runtime = NULL;
}

sl_options *make_options(const config *cfg, int64_t seed)
{
    if (!runtime && !(runtime = sl_runtime_create(cfg->threads))) {
        fprintf(stderr, "sluice-bench: runtime: %s\n", sl_last_error());
        return NULL;
    }
    sl_options *opts = sl_options_create();
    if (!opts || sl_options_set_runtime(opts, runtime) < 0 ||
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

/* Reads the files once through a source that yields their paths (the
 * pipeline's does not). */
int list_files(const config *cfg, path_list *pl)
{
    if (cfg->format != FORMAT_FOLDER)
        return shards_paths(cfg, pl);
    config plain = *cfg; /* (without the cache the run's own source has) */
    plain.cache = CACHE_UNSET;
    sl_dataset *ds = sl_prefetch(open_source(&plain, SL_WITH_PATHS), SL_AUTOTUNE);
    sl_options *opts = make_options(cfg, cfg->seed);
    sl_iterator *it = ds && opts ? sl_iterator_create(ds, opts) : NULL;
    int rc = -1;
    if (!it)
        fprintf(stderr, "sluice-bench: listing files: %s\n", sl_last_error());
    else if (it)
        rc = list_pass(it, pl);
    sl_iterator_free(it);
    sl_options_free(opts);
    sl_dataset_release(ds);
    return rc;
}

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

sl_dataset *open_source(const config *cfg, unsigned flags)
{
    if (cfg->format != FORMAT_FOLDER)
        return shards_source(cfg, flags);
    sl_dataset *ds = cfg->list ? sl_file_list(cfg->list, cfg->dir, flags)
                               : sl_image_folder(cfg->dir, NULL, flags);
    if (cfg->limit >= 0)
        ds = sl_take(ds, cfg->limit);
    /* the source lives across epochs (a cold run rebuilds the rest) */
    return cfg->cache == CACHE_AUTO ? sl_cache_auto(ds, NULL) : ds;
}

/* --map-us: a user's own map, as far as the CPU sees it: that much thread
 * CPU time per element, then the element unchanged. */
static int burn(sl_map_ctx *ctx, const sl_element *in, sl_element **out, void *user)
{
    (void)ctx;
    const config *cfg = user;
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    double end = (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec / 1e3 + cfg->map_us;
    do
        clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    while ((double)ts.tv_sec * 1e6 + (double)ts.tv_nsec / 1e3 < end);
    *out = sl_element_retain((sl_element *)in);
    return 0;
}

static int crop_policy(preset p)
{
    return p == PRESET_TRAIN ? SL_CROP_RANDOM_RESIZED
         : p == PRESET_EVAL  ? SL_CROP_CENTER
                             : SL_CROP_RESIZE;
}

/* Which tensor of src's elements holds the encoded image: tensor 0, or
 * image/encoded of a parsed tf.train.Example (a dict, in key order). */
static int image_index(const sl_dataset *src)
{
    const sl_structure *s = sl_dataset_structure(src);
    const sl_structure *img = sl_structure_get(s, "image/encoded");
    return img ? sl_structure_leaf_index(img) : 0;
}

/* On failure NULL, with the reason in sl_last_error(). */
sl_dataset *build_pipeline(const config *cfg, sl_dataset *src, int64_t repeat,
                                  int64_t shuffle_seed)
{
    sl_dataset *ds = sl_dataset_retain(src);
    /* shards have no random access: their order is shuffled per epoch and
     * their records through a buffer, as tf.data pipelines do */
    if (cfg->preset == PRESET_TRAIN)
        ds = cfg->format == FORMAT_FOLDER && cfg->cache == CACHE_UNSET
                 ? sl_shuffle(ds, SL_SHUFFLE_ALL, shuffle_seed, 0)
                 : sl_shuffle(ds, SHARD_SHUFFLE_BUFFER, shuffle_seed, 0);
    if (repeat != 1)
        ds = sl_repeat(ds, repeat);
    if (cfg->map_us > 0)
        ds = sl_map(ds, "work", burn, (void *)cfg, (int)cfg->knob[KNOB_MAP], 0);
    if (cfg->preset != PRESET_READ) {
        sl_image_spec spec;
        if (SL_IMAGE_SPEC_INIT(&spec, crop_policy(cfg->preset), cfg->size) < 0) {
            sl_dataset_release(ds);
            return NULL;
        }
        spec.fast_upsample = cfg->fast_upsample;
        spec.exact_pixels = cfg->exact_pixels;
        spec.image_index = image_index(src);
        ds = sl_map_image(ds, &spec, (int)cfg->knob[KNOB_IMAGE]);
        ds = sl_batch(ds, cfg->batch, cfg->preset == PRESET_TRAIN ? SL_DROP_REMAINDER : 0);
    }
    return sl_prefetch(ds, cfg->knob[KNOB_PREFETCH]);
}

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

int64_t peak_rss_bytes(void)
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
 * what was wrong. The image comes where its bytes were in the source's
 * elements: first from a folder or a tar, after the label from TFRecord
 * (parse_example's dict is in key order). */
static int consume(run_state *st, const sl_element *el)
{
    const config *cfg = st->cfg;
    int at = sl_element_size(el) > 1 &&
             sl_tensor_dtype(sl_element_tensor(el, 0)) == SL_INT64;
    const sl_tensor *t = sl_element_tensor(el, at);
    if (cfg->preset == PRESET_READ) {
        /* a file's bytes (folder, tar), or a parsed record's encoded
         * image (TFRecord: a scalar string) */
        size_t len = 0;
        if (t && sl_tensor_dtype(t) == SL_UINT8 && sl_tensor_ndim(t) == 1)
            len = sl_tensor_nbytes(t);
        else if (!t || sl_tensor_dtype(t) != SL_STRING || sl_tensor_ndim(t) != 0 ||
                 !sl_tensor_string(t, 0, &len)) {
            fprintf(stderr, "sluice-bench: element 0 is neither uint8 [n] file bytes nor "
                    "a string\n");
            return -1;
        }
        st->images++;
        st->bytes_seen += (int64_t)len;
        return 0;
    }
    const sl_tensor *labels = sl_element_tensor(el, at ? 0 : 1);
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
double step_ms(const config *cfg, double t)
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

int64_t expected_images(const config *cfg, int64_t files)
{
    if (files < 0)
        return -1;
    if (cfg->preset != PRESET_TRAIN)
        return files * cfg->epochs;
    if (cfg->cold || cfg->per_epoch)
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
        sl_dataset_release(ds);
        if (rc < 0)
            return -1;
    }
    return 0;
}

/* One iterator per epoch over the same dataset, as a training loop that
 * iterates it once per epoch does (each iterator is the dataset's next
 * epoch: a new order and new crops). */
static int run_per_epoch(run_state *st, sl_dataset *src)
{
    const config *cfg = st->cfg;
    sl_dataset *ds = build_pipeline(cfg, src, 1, cfg->seed);
    sl_options *opts = ds ? make_options(cfg, cfg->seed) : NULL;
    int rc = ds && opts ? 0 : -1;
    if (!ds)
        fprintf(stderr, "sluice-bench: cannot build the pipeline: %s\n", sl_last_error());
    for (int e = 0; rc == 0 && e < cfg->epochs; e++)
        rc = run_iterator(st, ds, opts, 1);
    sl_options_free(opts);
    sl_dataset_release(ds);
    return rc;
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
    sl_dataset_release(ds);
    return rc;
}

int run_epochs(run_state *st, sl_dataset *src, const path_list *pl)
{
    st->tty = isatty(STDERR_FILENO);
    st->shown_at = now_s();
    st->faults_mark = minor_faults();
    int rc = st->cfg->cold        ? run_cold(st, src, pl)
             : st->cfg->per_epoch ? run_per_epoch(st, src)
                                  : run_warm(st, src);
    if (st->tty)
        fprintf(stderr, "\r\033[K");
    return rc;
}

const char *io_name(int backend)
{
    return backend == SL_IO_URING   ? "io_uring"
           : backend == SL_IO_PREAD ? "pread"
           : backend == SL_IO_HTTP  ? "http"
                                    : "none";
}

double rate(double n, double seconds)
{
    return seconds > 0 ? n / seconds : 0;
}

static void json_knob(FILE *f, int64_t v)
{
    if (v == SL_AUTOTUNE)
        fputs("\"auto\"", f);
    else
        fprintf(f, "%lld", (long long)v);
}

void json_config(FILE *f, const config *cfg)
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
            "\"cpus\":%d", preset_names[cfg->preset], cfg->size,
            (long long)cfg->batch, cfg->epochs, cfg->threads, sl_cpu_count());
    for (int k = 0; k < NKNOBS; k++)
        if (knob_in_pipeline(cfg, (knob_id)k) || k == KNOB_IMAGE) {
            fprintf(f, ",\"%s\":", knob_json[k]);
            json_knob(f, cfg->knob[k]);
        }
    if (cfg->map_us > 0) {
        fputs(",\"map_us\":", f);
        json_number(f, cfg->map_us);
    }
    fprintf(f, ",\"seed\":%lld,\"cold\":%s,\"per_epoch\":%s,\"on_error\":\"%s\","
            "\"fast_upsample\":%s", (long long)cfg->seed, cfg->cold ? "true" : "false",
            cfg->cold || cfg->per_epoch ? "true" : "false",
            cfg->policy == SL_ERRORS_SKIP ? "skip" : "fail", cfg->fast_upsample ? "true" : "false");
    fprintf(f, ",\"exact_pixels\":%s", cfg->exact_pixels ? "true" : "false");
    if (cfg->cache)
        fprintf(f, ",\"cache\":\"%s\"", cfg->cache == CACHE_AUTO ? "auto" : "none");
    fprintf(f, ",\"autotune\":%d,\"cpu_budget\":%lld,\"ram_budget_bytes\":%lld,"
            "\"consumer_ms\":", cfg->autotune, (long long)cfg->cpu_budget,
            (long long)cfg->ram_budget);
    json_number(f, cfg->consumer_ms);
    fputs(",\"consumer_schedule\":[", f);
    for (int i = 0; i < cfg->nsched; i++)
        fprintf(f, "%s[%g,%g]", i ? "," : "", cfg->sched_t[i], cfg->sched_ms[i]);
    fputc(']', f);
}

double stall_fraction(const run_state *st)
{
    return st->stall_wall > 0 ? st->stall_s / st->stall_wall : NAN;
}

/* The consumer's stall from the first batch on (by its own clock): the
 * wait for the first batch is the pipeline filling, the same for any
 * configuration that starts its workers at once. */
double stall_after_first(const run_state *st)
{
    double w = stall_clock_read(&st->clock) - st->first_wait_s;
    double wall = st->seconds - st->first_wait_s;
    return st->first_wait_s >= 0 && wall > 0 ? w / wall : NAN;
}

convergence run_convergence(const run_state *st)
{
    const series *s = &st->series;
    return series_convergence(s, series_start(s), series_end(s));
}

/* Where the consumer's step changes within the run, from the start on:
 * the segments' starts into at[] (at most MAX_SCHEDULE + 1). */
int segments(const run_state *st, double *at)
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
convergence segment_convergence(const run_state *st, const double *at, int n, int k)
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

void json_results(FILE *f, const run_state *st, const path_list *pl)
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

void print_consumer(const config *cfg)
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

void print_final_knobs(const series *s)
{
    if (!s->n || !s->nknobs)
        return;
    printf("  %-20s", "knobs at the end");
    for (int k = 0; k < s->nknobs; k++)
        printf("%s %s %.0f%s", k ? "," : "", s->knobs[k].label, s->knobs[k].v[s->n - 1],
               s->knobs[k].autotuned ? "" : " (fixed)");
    printf("\n");
}

int write_file(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    if (!f || fprintf(f, "%s\n", text) < 0 || fclose(f) != 0) {
        fprintf(stderr, "sluice-bench: %s: %s\n", path, strerror(errno));
        return -1;
    }
    return 0;
}

void run_state_free(run_state *st)
{
    series_free(&st->series);
    free(st->epoch_rate);
    free(st->epoch_faults);
    free(st->report_text);
}

/* One iterator, with the progress line. */
int run_live(run_state *st, sl_dataset *ds, const sl_options *opts)
{
    st->tty = isatty(STDERR_FILENO);
    st->shown_at = now_s();
    int rc = run_iterator(st, ds, opts, 1);
    if (st->tty)
        fprintf(stderr, "\r\033[K");
    return rc;
}
