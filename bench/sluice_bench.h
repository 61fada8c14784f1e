/*
 * sluice-bench's parts, one file each, and what they offer each other.
 * They depend one way: sluice_bench.c (the command line and a single run's
 * report) uses the sweep and the run; the sweep uses the run; the run uses
 * the shards and the series; the run and the shards keep their files in a
 * path list; everything uses the JSON writer. The sample writer and the
 * decode ceiling stand apart: neither calls sluice, so each makes data or
 * measures independently of the library under test (the ceiling shares
 * only the clock).
 */
#ifndef SLUICE_BENCH_H
#define SLUICE_BENCH_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
/* the bench reads statistics and writes traces: the experimental tier */
#define SLUICE_EXPERIMENTAL
#include "sluice.h"

/* ---- sluice_bench_json.c ---- */

/* A JSON string (quoted, escaped) and number (null for NaN or infinity). */
void json_string(FILE *f, const char *s);
void json_number(FILE *f, double v);

/* ---- sluice_bench_sample.c ---- */

#define SAMPLE_DEFAULT_COUNT 2048
#define SAMPLE_CLASSES 8

/* Writes an ImageFolder of `count` generated JPEGs to dir (created if
 * needed): dir/classNN/NNNN.jpg, then dir/files.txt ("relative/path label"
 * lines, the make_dataset.py format), last, so its presence means the folder
 * is complete. Deterministic. 0, or -1 after printing why to stderr. */
int sample_write_folder(const char *dir, int count);

/* ---- sluice_bench_ceiling.c ---- */

enum { CEILING_JPEG, CEILING_PNG, CEILING_WEBP, CEILING_FORMATS };

typedef struct ceiling_result {
    double images_per_s; /* decoded images / wall time */
    double seconds;      /* timed wall time, all passes */
    int64_t files;       /* files preloaded (may be fewer than asked: cap) */
    int64_t bytes;       /* their total size */
    int64_t failed;      /* files that did not decode (left out) */
    int64_t formats[CEILING_FORMATS]; /* files of each format (by signature) */
    int passes;
} ceiling_result;

/* Bytes of file data the ceiling preloads at most; later files are left out. */
#define CEILING_MAX_BYTES ((int64_t)1 << 30)

typedef struct crop_window crop_window; /* crop_window.h */

/* The hardware limit for decoding these files: in a child process (so that
 * neither its preloaded files nor its threads show in this process's peak
 * RSS), reads the files into memory untimed, then `threads` threads decode
 * them into reused buffers, as many whole passes as take at least a
 * second: at full size to RGB with each format's library and its default
 * settings (crop NULL: the ceiling), or only each image's window as the
 * crop plans it, at the DCT scale (JPEG) or whole factor (WebP) map_image
 * would take, or down to its last row (PNG), to RGB (the limit). 0, or -1 after
 * printing why to stderr. */
int ceiling_measure(char *const *paths, size_t n, int threads, const crop_window *crop,
                    ceiling_result *out);

/* ---- sluice_bench_series.c ---- */

#define SERIES_PERIOD_S 0.1
#define SERIES_MAX_KNOBS 16

/* Seconds on the monotonic clock the series and the runs share. */
double now_s(void);

typedef struct knob_track {
    char label[96]; /* "map_image.parallelism"; "#2" after a repeated node name */
    bool autotuned; /* the controller may move it */
    double *v;      /* per sample; NaN where the node had not registered it */
} knob_track;

/* Time is pipeline time in seconds: from the first iterator's creation,
 * not counting what happens between iterators (--cold evicting files). */
typedef struct series {
    /* The consumer's arrival curve: images so far at arr_t. */
    double *arr_t;
    int64_t *arr_images;
    size_t narr, arr_cap;
    /* The sampler's snapshots, one per SERIES_PERIOD_S and one at the end
     * of each iterator. */
    double *t;
    double *stall_s;  /* seconds spent inside sl_next so far (library count) */
    double *measured_stall_s; /* the same by the consumer's own clock */
    double *buffered; /* SL_STAT_BUFFERED_BYTES */
    size_t n, cap;
    knob_track knobs[SERIES_MAX_KNOBS];
    int nknobs;
    /* some points were lost (one flag per writing thread) */
    bool arrivals_lost, samples_lost;
} series;

void series_free(series *s);
/* The consumer has `images` images at time t (non-decreasing). */
void series_arrival(series *s, double t, int64_t images);
/* Images by time t, interpolated between arrivals. */
double series_images_at(const series *s, double t);
/* Images per second over [a, b]; NaN if b <= a. */
double series_rate(const series *s, double a, double b);
/* The first and last arrival times. */
double series_start(const series *s);
double series_end(const series *s);
/* Images/s and stall fraction (library count, and the consumer's clock)
 * over the interval that ends at sample i. */
double series_sample_rate(const series *s, size_t i);
double series_sample_stall(const series *s, size_t i);
double series_sample_measured_stall(const series *s, size_t i);

typedef struct convergence {
    double steady;  /* median rate of the whole 1-s windows in the second half */
    double seconds; /* from `from`: every 1-s window starting then or later
                     * stays within 5% of steady; NaN if even the last does not */
} convergence;
/* Convergence of the throughput over [from, to]; both NaN for less than 2 s. */
convergence series_convergence(const series *s, double from, double to);

/* The consumer's time inside sl_next, readable from another thread while
 * a call is in progress (a library counter that moves only when a call
 * returns shows 0% stall in an interval spent inside one long call).
 * Non-negative: the total so far, no call in progress; negative: in a call
 * that started when the total was T, at monotonic time S: -(S - T) - 1. */
typedef struct stall_clock {
    atomic_llong v;
} stall_clock;

void stall_clock_enter(stall_clock *c);
void stall_clock_leave(stall_clock *c);
/* Seconds inside sl_next so far, the call in progress included. */
double stall_clock_read(const stall_clock *c);

typedef struct sampler sampler;
/* Snapshots `it` into s every SERIES_PERIOD_S on a thread of its own: the
 * iterator was created at now_s() = t0, which is pipeline time t_base, and
 * earlier iterators spent stall_base seconds stalled; clock is the
 * consumer's. NULL if the thread cannot start. Stop it before freeing the
 * iterator. */
sampler *sampler_start(const sl_iterator *it, series *s, stall_clock *clock, double t_base,
                       double t0, double stall_base);
/* Joins the thread, then takes one last snapshot. NULL ok. */
void sampler_stop(sampler *sp);
/* ,"series":{...}: the samples' times, images/s, stall, buffered bytes and
 * knob values. */
void series_json(FILE *f, const series *s);

/* ---- sluice_bench_run.c ---- */

#define MAX_SCHEDULE 32

typedef enum preset { PRESET_TRAIN, PRESET_EVAL, PRESET_DECODE, PRESET_READ } preset;
extern const char *const preset_names[4];

enum { CACHE_UNSET = 0, CACHE_NONE, CACHE_AUTO };
/* Records a shuffled training pass over shards mixes at once. */
#define SHARD_SHUFFLE_BUFFER 1024

/* What DIR holds: an image folder, or shards (sluice_bench_shards.c). */
typedef enum format { FORMAT_FOLDER, FORMAT_TFRECORD, FORMAT_TAR } format;
extern const char *const format_names[3];

/* The pipeline's knobs a run sets, or leaves to the controller
 * (SL_AUTOTUNE): the parallelism of each parallel stage and the prefetch
 * depth. --sweep varies those the pipeline has (knob_in_pipeline). */
typedef enum knob_id {
    KNOB_INTERLEAVE, /* shards: interleave's fetchers */
    KNOB_PARSE,      /* TFRecord: parse_example */
    KNOB_MAP,        /* --map-us: the C map before map_image */
    KNOB_IMAGE,      /* map_image */
    KNOB_PREFETCH,   /* prefetch depth */
    NKNOBS
} knob_id;
/* Their names in the JSON ("parallelism" and "prefetch" for map_image's
 * and the prefetch's, as before there were others) and in tables. */
extern const char *const knob_json[NKNOBS];
extern const char *const knob_label[NKNOBS];

typedef struct config config;
bool knob_in_pipeline(const config *cfg, knob_id k);

struct config {
    const char *dir, *list, *json_path, *sample_dir;
    /* shards: DIR's format, and --make-shards' output and layout */
    format format;
    const char *shards_out;
    bool compression;   /* gzip */
    int64_t shard_size; /* images per shard */
    int cycle;          /* interleave's cycle_length */
    int64_t cardinality; /* images the shards hold, when told (-1: not) */
    preset preset;
    int size, threads, epochs, sample_count;
    int64_t batch, limit, seed;
    int64_t knob[NKNOBS]; /* SL_AUTOTUNE or >= 1 */
    /* --map-us: a C map before map_image that burns this much thread CPU
     * time per element (0: none), a stand-in for a user's own map */
    double map_us;
    int io, policy;
    bool cold, ceiling, decode_limit, fast_upsample, exact_pixels;
    bool per_epoch; /* one iterator per epoch over one dataset (--cold implies one each too) */
    /* --cache: 0 not asked; CACHE_NONE or CACHE_AUTO (sl_cache_auto on the
     * read files), both with a buffered shuffle, which works over a cache */
    int cache;
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
     * the grid runs once, then autotune and its fastest configurations
     * sweep_rounds times */
    bool sweep;
    double sweep_seconds;
    int64_t sweep_images;
    int sweep_rounds;
};

typedef struct path_list {
    char **paths;
    size_t n, cap;
    int64_t bytes;
} path_list;

/* ---- sluice_bench_paths.c ---- */

int path_list_add(path_list *pl, const char *s, size_t len);
void path_list_free(path_list *pl);

/* ---- sluice_bench_shards.c ---- */

/* --make-shards: DIR's images into cfg->shards_out as cfg->format. 0, or
 * -1 after saying why. */
int shards_write(const config *cfg);
/* The source over DIR's shards: list_files -> interleave(cycle) -> the
 * reader (and parse_example for TFRecord): (encoded image, label). */
sl_dataset *shards_source(const config *cfg, unsigned flags);
/* The shard files (for --cold), with their sizes. */
int shards_paths(const config *cfg, path_list *pl);
/* Samples in the shards (an untimed pass that only reads them), or -1. */
int64_t shards_count(const config *cfg);

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

/* Options for cfg with `seed`, or NULL after printing why. Their runtime
 * (--threads workers) serves every iterator of the run. */
sl_options *make_options(const config *cfg, int64_t seed);
/* Joins that runtime's workers, once every iterator is freed. */
void bench_runtime_free(void);
/* The files the source yields (read once, untimed, through the library):
 * for --cold and --ceiling. 0, or -1 after printing why. */
int list_files(const config *cfg, path_list *pl);
/* image_folder or file_list from cfg, then take(--limit); flags for the
 * source (SL_WITH_PATHS). */
sl_dataset *open_source(const config *cfg, unsigned flags);
/* The pipeline over src (borrowed): shuffle for train, repeat, map_image +
 * batch, prefetch. NULL with the reason in sl_last_error(). */
sl_dataset *build_pipeline(const config *cfg, sl_dataset *src, int64_t repeat,
                           int64_t shuffle_seed);
/* Images the consumer will see over all epochs; -1 unknown. */
int64_t expected_images(const config *cfg, int64_t files);
/* Runs cfg's epochs over src: one iterator for all, or one per epoch
 * with --cold. 0, or -1 after printing why. */
int run_epochs(run_state *st, sl_dataset *src, const path_list *pl);
/* One iterator over ds with the live progress line (the sweep's runs). */
int run_live(run_state *st, sl_dataset *ds, const sl_options *opts);
void run_state_free(run_state *st);
int64_t peak_rss_bytes(void);
/* The consumer's step in ms at pipeline time t (--consumer-schedule). */
double step_ms(const config *cfg, double t);
const char *io_name(int backend);
double rate(double n, double seconds);
/* The consumer's stall over the run, and from the first batch on. */
double stall_fraction(const run_state *st);
double stall_after_first(const run_state *st);
convergence run_convergence(const run_state *st);
/* Where the consumer's step changes within the run, from the start on:
 * the segments' starts into at[] (at most MAX_SCHEDULE + 1); their count. */
int segments(const run_state *st, double *at);
/* Convergence within segment k of n. */
convergence segment_convergence(const run_state *st, const double *at, int n, int k);
/* The configuration's members of the result object, then the run's. */
void json_config(FILE *f, const config *cfg);
void json_results(FILE *f, const run_state *st, const path_list *pl);
void print_consumer(const config *cfg);
void print_final_knobs(const series *s);
/* text and a newline into path; 0, or -1 after printing why. */
int write_file(const char *path, const char *text);

/* ---- sluice_bench_results.c: a sweep's rows and what they show ---- */

#define SWEEP_MAX_ROUNDS 9

/* One run of a sweep: a static configuration, or the autotune run (every
 * knob of the pipeline SL_AUTOTUNE; the knobs it lacks are 0). */
typedef struct sweep_row {
    int64_t knob[NKNOBS];
    int64_t images, peak_buffered;
    double seconds, images_per_s, stall_fraction;
    double stall_after_first; /* the consumer's stall from the first batch on */
    double convergence_s, steady; /* see series_convergence */
    /* measured again beside autotune, in every round: this is the median
     * run, and every round's rate */
    bool confirmed;
    int rounds;
    double round_images_per_s[SWEEP_MAX_ROUNDS];
} sweep_row;

/* "parse 1, map_image 2, prefetch 4": the knobs a row sets. */
void sweep_row_name(char *buf, size_t size, const sweep_row *r);

typedef struct sweep_summary {
    int best;     /* the confirmed static row with the most images/s (any
                   * static row when none is confirmed); -1: none */
    int smallest; /* the static row with the least peak buffered bytes among
                   * those reaching near x best (ties: less parallelism, then
                   * less depth); -1: none */
    int autotune; /* -1: none */
    double near;
} sweep_summary;

sweep_summary sweep_summarize(const sweep_row *rows, int n, double near);
/* Autotune's images/s over the best static's; NaN without either. */
double sweep_autotune_vs_best(const sweep_row *rows, const sweep_summary *sum);
/* Autotune's peak buffered bytes over the smallest near-best config's. */
double sweep_memory_ratio(const sweep_row *rows, const sweep_summary *sum);
void sweep_print_table(FILE *out, const sweep_row *rows, int n, const sweep_summary *sum);
/* The sweep's members of the result object (each preceded by a comma). */
void sweep_json(FILE *f, const sweep_row *rows, int n, const sweep_summary *sum);

/* ---- sluice_bench_plot.c ---- */

typedef struct plot_input {
    const char *title, *subtitle;
    const sweep_row *rows; /* the bars; nrows 0 for a single run's series only */
    int nrows;
    double best_static;     /* images/s; NaN: no reference line */
    const series *s;        /* drawn over time */
    const char *run_name;   /* "autotune run", "run" */
    const double *changes;   /* consumer schedule: change times (vertical lines) */
    const double *change_ms; /* and the step time from each on */
    int nchanges;
    double convergence_s;   /* NaN: no marker */
} plot_input;

/* Writes a self-contained SVG; 0, or -1 after printing why to stderr. */
int plot_write(const char *path, const plot_input *in);

/* ---- sluice_bench_sweep.c (the runner) ---- */

/* --sweep over src (consumed): 0, or 1 after printing why. */
int bench_sweep(const config *cfg, sl_dataset *src);

#endif /* SLUICE_BENCH_H */
