/*
 * --sweep: every tunable knob of the pipeline (the parallelism of each
 * parallel stage, the prefetch depth) over a grid of static values with
 * autotune off, each configuration once; then the two fastest of them and
 * the autotune controller, alternating, --sweep-rounds times, so the
 * comparison that matters is measured side by side under the same load.
 * Each run lasts the same time (or image count) on the dataset repeated.
 * What it found: the best static configuration (the better confirmed
 * candidate), the leanest one that comes close to it, and how the
 * autotune run compares with both, as a table, JSON and SVG.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "sluice_bench.h"

#define SWEEP_NEAR_BEST 0.97 /* "as good as the best" for the smallest static config */
#define SWEEP_MAX_ROWS 128
#define CANDIDATES 2 /* grid configurations re-measured beside autotune */

/* ---- the grid ---- */

/* The static values of knob k in this pipeline; their count. A pipeline
 * with one parallel stage gets the finer grid of earlier sweeps; with
 * several, each takes 1 to threads + 1 (the product grows fast). */
static int knob_values(const config *cfg, knob_id k, bool several, int64_t *v)
{
    static const int64_t one_stage[] = {1, 2, 3, 4, 6, 8};
    static const int64_t depths[] = {1, 2, 4, 8};
    int n = 0;
    if (k == KNOB_PREFETCH) {
        for (int i = 0; i < (several ? 3 : 4); i++)
            v[n++] = depths[i];
    } else if (k == KNOB_INTERLEAVE) {
        int64_t c[] = {1, 2, cfg->cycle};
        for (int i = 0; i < 3; i++)
            if (c[i] <= cfg->cycle && (n == 0 || c[i] > v[n - 1]))
                v[n++] = c[i];
    } else if (!several) {
        for (size_t i = 0; i < sizeof one_stage / sizeof *one_stage; i++)
            if (one_stage[i] <= 4 * cfg->threads)
                v[n++] = one_stage[i];
    } else {
        for (int64_t p = 1; p <= cfg->threads + 1 && n < 8; p++)
            v[n++] = p;
    }
    return n;
}

typedef struct grid {
    int nknobs;
    knob_id knob[NKNOBS];
    int nvalues[NKNOBS];
    int64_t values[NKNOBS][8];
    int size;
} grid;

static void grid_make(const config *cfg, grid *g)
{
    int parallel = 0;
    for (int k = 0; k < KNOB_PREFETCH; k++)
        parallel += k != KNOB_INTERLEAVE && knob_in_pipeline(cfg, (knob_id)k);
    g->nknobs = 0;
    g->size = 1;
    for (int k = 0; k < NKNOBS; k++) {
        if (!knob_in_pipeline(cfg, (knob_id)k))
            continue;
        int i = g->nknobs++;
        g->knob[i] = (knob_id)k;
        g->nvalues[i] = knob_values(cfg, (knob_id)k, parallel > 1, g->values[i]);
        g->size *= g->nvalues[i];
    }
}

/* Configuration j of the grid (the last knob varies fastest). */
static void grid_config(const grid *g, int j, config *c)
{
    for (int i = g->nknobs - 1; i >= 0; i--) {
        c->knob[g->knob[i]] = g->values[i][j % g->nvalues[i]];
        j /= g->nvalues[i];
    }
}

/* ---- running it ---- */

typedef struct sweep {
    grid g;
    sweep_row rows[SWEEP_MAX_ROWS]; /* the grid's runs, then autotune's */
    int n, rounds;
    int cand[CANDIDATES], ncand;
    /* the confirming rounds: autotune's and each candidate's runs */
    sweep_row confirm[CANDIDATES + 1][SWEEP_MAX_ROUNDS];
    config auto_cfg;
    run_state autotune[SWEEP_MAX_ROUNDS];
    int auto_median; /* the round whose autotune run is reported and drawn */
    char label[160];
} sweep;

static void row_knobs(const config *cfg, sweep_row *row)
{
    for (int k = 0; k < NKNOBS; k++)
        row->knob[k] = knob_in_pipeline(cfg, (knob_id)k) ? cfg->knob[k] : 0;
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
    /* the shards' source holds knobs of its own (interleave, parse) */
    sl_dataset *own = cfg->format != FORMAT_FOLDER ? open_source(cfg, 0) : NULL;
    sl_dataset *ds = build_pipeline(cfg, own ? own : src, -1, cfg->seed);
    sl_dataset_release(own);
    sl_options *opts = ds ? make_options(cfg, cfg->seed) : NULL;
    int rc = -1;
    if (!ds)
        fprintf(stderr, "sluice-bench: cannot build the pipeline: %s\n", sl_last_error());
    else if (opts && !st->epoch_rate)
        fprintf(stderr, "sluice-bench: out of memory\n");
    else if (opts)
        rc = run_live(st, ds, opts);
    sl_options_free(opts);
    sl_dataset_release(ds);
    convergence c = run_convergence(st);
    *row = (sweep_row){
        .images = st->images, .peak_buffered = st->peak_buffered, .seconds = st->seconds,
        .images_per_s = rate((double)st->images, st->seconds),
        .stall_fraction = stall_fraction(st), .stall_after_first = stall_after_first(st),
        .convergence_s = c.seconds, .steady = c.steady, .rounds = 1,
    };
    row_knobs(cfg, row);
    row->round_images_per_s[0] = row->images_per_s;
    return rc;
}

static int sweep_static(const config *cfg, sl_dataset *src, const char *label, sweep_row *row)
{
    config c = *cfg;
    c.autotune = 0;
    c.trace_path = NULL;
    c.report = false;
    run_state st = {.cfg = &c, .label = label, .first_wait_s = -1};
    int rc = sweep_run(&st, src, row);
    run_state_free(&st);
    return rc;
}

static int run_grid(const config *cfg, sl_dataset *src, sweep *sw)
{
    for (int j = 0; j < sw->g.size; j++) {
        config c = *cfg;
        grid_config(&sw->g, j, &c);
        sweep_row name = {0};
        row_knobs(&c, &name);
        char what[128];
        sweep_row_name(what, sizeof what, &name);
        snprintf(sw->label, sizeof sw->label, "[%d/%d] %s", j + 1, sw->g.size, what);
        if (sweep_static(&c, src, sw->label, &sw->rows[j]) < 0)
            return -1;
    }
    sw->n = sw->g.size;
    return 0;
}

/* The fastest grid rows, fastest first. */
static void pick_candidates(sweep *sw)
{
    sw->ncand = 0;
    for (int c = 0; c < CANDIDATES && c < sw->n; c++) {
        int best = -1;
        for (int i = 0; i < sw->n; i++) {
            bool taken = false;
            for (int q = 0; q < sw->ncand; q++)
                taken |= sw->cand[q] == i;
            if (!taken && (best < 0 || sw->rows[i].images_per_s > sw->rows[best].images_per_s))
                best = i;
        }
        sw->cand[sw->ncand++] = best;
    }
}

/* One confirming round: autotune and the candidates, in an order that
 * rotates from round to round. */
static int confirm_round(const config *cfg, sl_dataset *src, sweep *sw, int round)
{
    int runs = sw->ncand + 1;
    for (int q = 0; q < runs; q++) {
        int who = (q + round) % runs; /* 0: autotune, else candidate who - 1 */
        int rc;
        if (who == 0) {
            snprintf(sw->label, sizeof sw->label, "[round %d/%d] autotune", round + 1,
                     sw->rounds);
            sw->autotune[round] = (run_state){.cfg = &sw->auto_cfg, .label = sw->label,
                                              .first_wait_s = -1};
            rc = sweep_run(&sw->autotune[round], src, &sw->confirm[0][round]);
        } else {
            config c = *cfg;
            const sweep_row *r = &sw->rows[sw->cand[who - 1]];
            for (int k = 0; k < NKNOBS; k++)
                if (r->knob[k])
                    c.knob[k] = r->knob[k];
            char what[128];
            sweep_row_name(what, sizeof what, r);
            snprintf(sw->label, sizeof sw->label, "[round %d/%d] %s", round + 1, sw->rounds,
                     what);
            rc = sweep_static(&c, src, sw->label, &sw->confirm[who][round]);
        }
        if (rc < 0)
            return -1;
    }
    return 0;
}

/* The round whose run has the median images/s (the lower one of an even
 * count), so a row stays one real run. */
static int median_round(const sweep_row *runs, int rounds)
{
    int best = 0;
    for (int r = 0; r < rounds; r++) {
        int below = 0, equal_before = 0;
        for (int q = 0; q < rounds; q++) {
            double a = runs[q].images_per_s, b = runs[r].images_per_s;
            below += a < b;
            equal_before += a == b && q < r;
        }
        if (below + equal_before == (rounds - 1) / 2)
            best = r;
    }
    return best;
}

static sweep_row median_row(const sweep_row *runs, int rounds, int *which)
{
    int r = median_round(runs, rounds);
    sweep_row row = runs[r];
    row.rounds = rounds;
    row.confirmed = true;
    for (int q = 0; q < rounds; q++)
        row.round_images_per_s[q] = runs[q].images_per_s;
    if (which)
        *which = r;
    return row;
}

static int run_sweep(const config *cfg, sl_dataset *src, sweep *sw)
{
    sw->rounds = cfg->sweep_rounds;
    sw->auto_cfg = *cfg;
    for (int k = 0; k < NKNOBS; k++)
        sw->auto_cfg.knob[k] = SL_AUTOTUNE;
    sw->auto_cfg.autotune = 1;
    grid_make(cfg, &sw->g);
    if (sw->g.size + 1 > SWEEP_MAX_ROWS) {
        fprintf(stderr, "sluice-bench: the sweep's grid has %d configurations, more than %d\n",
                sw->g.size, SWEEP_MAX_ROWS - 1);
        return -1;
    }
    if (run_grid(cfg, src, sw) < 0)
        return -1;
    pick_candidates(sw);
    for (int r = 0; r < sw->rounds; r++)
        if (confirm_round(cfg, src, sw, r) < 0)
            return -1;
    for (int c = 0; c < sw->ncand; c++)
        sw->rows[sw->cand[c]] = median_row(sw->confirm[c + 1], sw->rounds, NULL);
    sw->rows[sw->n++] = median_row(sw->confirm[0], sw->rounds, &sw->auto_median);
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
    fprintf(f, ",\"sweep_images\":%lld,\"sweep_rounds\":%d,\"sweep_knobs\":[",
            (long long)sw->auto_cfg.sweep_images, sw->rounds);
    for (int i = 0; i < sw->g.nknobs; i++)
        fprintf(f, "%s\"%s\"", i ? "," : "", knob_json[sw->g.knob[i]]);
    fputc(']', f);
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
    printf("  the grid once, then autotune and the %d fastest of it alternately, %d round%s "
           "(those rows: the median run, rounds: the range)\n", sw->ncand, sw->rounds,
           sw->rounds > 1 ? "s" : "");
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
int bench_sweep(const config *cfg, sl_dataset *src)
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
    sl_dataset_release(src);
    return rc < 0 ? 1 : 0;
}
