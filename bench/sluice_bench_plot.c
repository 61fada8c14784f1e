/*
 * The sweep as one picture, written by hand as SVG so that the benchmark
 * needs nothing to draw it: on the left a bar per static configuration
 * (images/s, stall % above each bar) and the autotune run; on the right the
 * autotune run over time, four charts on one time axis (throughput, stall,
 * buffered MiB, every knob). A single run draws only the right side.
 */
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "sluice_bench.h"

#define FONT "DejaVu Sans, Helvetica, Arial, sans-serif"
#define TOP 96.0     /* below the title */
#define BOTTOM 800.0 /* the lowest x axis */
#define HEIGHT 880.0
#define BARS_X0 84.0
#define BARS_X1 640.0
#define LINES_W 660.0
#define CHARTS 4
#define PLOT_MAX_ROWS 128
#define CHART_GAP 30.0
#define AXIS_GREY "#555"
#define GRID_GREY "#e4e4e4"
#define AUTOTUNE_COLOUR "#e6550d"

static const char *const depth_colours[] = {"#c6dbef", "#6baed6", "#2171b5", "#08306b"};
static const char *const knob_colours[] = {"#1b9e77", "#d95f02", "#7570b3", "#e7298a",
                                           "#66a61e", "#e6ab02", "#a6761d", "#666666"};

/* A plot area: data ranges mapped onto a pixel box. */
typedef struct frame {
    double x0, y0, x1, y1;       /* pixels; y0 is the top */
    double xmin, xmax, ymin, ymax;
    bool ylog2;                  /* y in log2 (knobs: 1, 2, 4 ... 64) */
    double ystep;                /* between y ticks (linear y) */
} frame;

static double px(const frame *f, double x)
{
    return f->x0 + (x - f->xmin) / (f->xmax - f->xmin) * (f->x1 - f->x0);
}

static double py(const frame *f, double y)
{
    if (f->ylog2)
        y = y > 0 ? log2(y) : f->ymin;
    return f->y1 - (y - f->ymin) / (f->ymax - f->ymin) * (f->y1 - f->y0);
}

/* ---- text ---- */

static void escaped(FILE *out, const char *s)
{
    for (; *s; s++) {
        if (*s == '<')
            fputs("&lt;", out);
        else if (*s == '>')
            fputs("&gt;", out);
        else if (*s == '&')
            fputs("&amp;", out);
        else
            fputc(*s, out);
    }
}

/* attrs: extra attributes ("font-weight=\"bold\""), or "". */
static void text(FILE *out, double x, double y, const char *anchor, double size,
                 const char *fill, const char *attrs, const char *fmt, ...)
{
    char buf[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    fprintf(out, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"%s\" font-size=\"%.1f\" "
            "fill=\"%s\" %s>", x, y, anchor, size, fill, attrs);
    escaped(out, buf);
    fputs("</text>\n", out);
}

/* ---- axes ---- */

/* A 1, 2 or 5 times a power of ten that cuts `range` into about n steps. */
static double nice_step(double range, int n)
{
    if (!(range > 0))
        return 1;
    double raw = range / n, p = pow(10, floor(log10(raw))), m = raw / p;
    return p * (m < 1.5 ? 1 : m < 3.5 ? 2 : m < 7.5 ? 5 : 10);
}

/* y from 0 to v rounded up to a whole tick, at most cap (0: no cap). */
static void y_range(frame *f, double v, int n, double cap)
{
    f->ymin = 0;
    f->ystep = nice_step(v > 0 ? v : 1, n);
    f->ymax = v > 0 ? ceil(v / f->ystep) * f->ystep : f->ystep;
    if (cap > 0 && f->ymax > cap) {
        f->ymax = cap;
        f->ystep = nice_step(cap, n);
    }
}

static void tick_label(char *buf, size_t size, double v, double step)
{
    int decimals = step >= 1 ? 0 : (int)ceil(-log10(step) - 1e-9);
    if (fabs(v) >= 10000 && step >= 1000)
        snprintf(buf, size, "%gk", v / 1000);
    else
        snprintf(buf, size, "%.*f", decimals, v);
}

static void y_axis(FILE *out, const frame *f, const char *title)
{
    if (f->ylog2) {
        for (double e = ceil(f->ymin); e <= f->ymax + 1e-9; e++) {
            double y = py(f, pow(2, e));
            fprintf(out, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"%s\"/>\n",
                    f->x0, y, f->x1, y, GRID_GREY);
            text(out, f->x0 - 6, y + 4, "end", 11, AXIS_GREY, "", "%.0f", pow(2, e));
        }
    } else {
        double step = f->ystep;
        for (double v = ceil(f->ymin / step) * step; v <= f->ymax + step * 1e-6; v += step) {
            char label[32];
            double y = py(f, v);
            tick_label(label, sizeof label, v, step);
            fprintf(out, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"%s\"/>\n",
                    f->x0, y, f->x1, y, GRID_GREY);
            text(out, f->x0 - 6, y + 4, "end", 11, AXIS_GREY, "", "%s", label);
        }
    }
    fprintf(out, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"%s\"/>\n",
            f->x0, f->y0, f->x0, f->y1, AXIS_GREY);
    if (*title)
        text(out, f->x0 + 4, f->y0 - 7, "start", 12.5, "#222", "font-weight=\"bold\"", "%s",
             title);
}

static void x_axis(FILE *out, const frame *f, bool labels)
{
    fprintf(out, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"%s\"/>\n",
            f->x0, f->y1, f->x1, f->y1, AXIS_GREY);
    double step = nice_step(f->xmax - f->xmin, 8);
    for (double v = ceil(f->xmin / step) * step; v <= f->xmax + step * 1e-6; v += step) {
        char label[32];
        double x = px(f, v);
        fprintf(out, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"%s\"/>\n",
                x, f->y1, x, f->y1 + 4, AXIS_GREY);
        if (labels) {
            tick_label(label, sizeof label, v, step);
            text(out, x, f->y1 + 17, "middle", 11, AXIS_GREY, "", "%s", label);
        }
    }
}

/* A dashed level across the frame, labelled at its right end unless
 * label is "". */
static void hline(FILE *out, const frame *f, double v, const char *colour, const char *label)
{
    double y = py(f, v);
    fprintf(out, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"%s\" "
            "stroke-width=\"1.3\" stroke-dasharray=\"6 4\"/>\n", f->x0, y, f->x1, y, colour);
    if (*label)
        text(out, f->x1 - 4, y - 5, "end", 11, colour, "", "%s", label);
}

/* ---- the bars ---- */

static const char *depth_colour(int64_t depth)
{
    int i = depth <= 1 ? 0 : depth <= 2 ? 1 : depth <= 4 ? 2 : 3;
    return depth_colours[i];
}

static bool is_auto(const sweep_row *r)
{
    return r->knob[KNOB_IMAGE] == SL_AUTOTUNE;
}

/* Rows of one group: the same knobs but the prefetch depth. */
static bool same_group(const sweep_row *a, const sweep_row *b)
{
    for (int k = 0; k < NKNOBS; k++)
        if (k != KNOB_PREFETCH && a->knob[k] != b->knob[k])
            return false;
    return true;
}

/* "p=2", or "parse 1 map_image 2" with several parallel knobs. */
static void group_label(char *buf, size_t size, const sweep_row *r)
{
    int n = 0;
    for (int k = 0; k < KNOB_PREFETCH; k++)
        n += r->knob[k] != 0;
    if (n == 1) {
        snprintf(buf, size, "p=%lld", (long long)r->knob[KNOB_IMAGE]);
        return;
    }
    size_t len = 0;
    buf[0] = 0;
    for (int k = 0; k < KNOB_PREFETCH && len < size; k++)
        if (r->knob[k]) {
            int w = snprintf(buf + len, size - len, "%s%lld", len ? "/" : "",
                             (long long)r->knob[k]);
            len += w > 0 ? (size_t)w : 0;
        }
}

/* Slot positions: groups of one parallelism, a gap between groups and a
 * wider one before the autotune bar. Returns the slot count. */
static double bar_slots(const plot_input *in, double *slot)
{
    double x = 0;
    for (int i = 0; i < in->nrows; i++) {
        const sweep_row *r = &in->rows[i];
        if (i > 0 && (is_auto(r) || !same_group(r, &in->rows[i - 1])))
            x += is_auto(r) ? 1.5 : 0.8;
        slot[i] = x;
        x += 1;
    }
    return x;
}

static void bar(FILE *out, const frame *f, const sweep_row *r, double x, double w, bool best)
{
    double y = py(f, r->images_per_s), base = py(f, 0);
    char name[160];
    if (is_auto(r))
        snprintf(name, sizeof name, "autotune");
    else
        sweep_row_name(name, sizeof name, r);
    fprintf(out, "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" fill=\"%s\"%s>"
            "<title>%s: %.0f images/s, stall %.1f%%, peak buffered %.1f MiB</title></rect>\n",
            x, y, w, base - y, is_auto(r) ? AUTOTUNE_COLOUR : depth_colour(r->knob[KNOB_PREFETCH]),
            best ? " stroke=\"#111\" stroke-width=\"1.6\"" : "", name, r->images_per_s,
            100 * r->stall_fraction, (double)r->peak_buffered / (1 << 20));
    char attrs[96];
    snprintf(attrs, sizeof attrs, "transform=\"rotate(-90 %.1f %.1f)\"", x + w / 2 + 3.5,
             y - 4);
    text(out, x + w / 2 + 3.5, y - 4, "start", 9.5, "#333", attrs, "%.0f%%",
         100 * r->stall_fraction);
}

static int best_row(const plot_input *in)
{
    int best = -1;
    for (int i = 0; i < in->nrows; i++)
        if (!is_auto(&in->rows[i]) &&
            (best < 0 || in->rows[i].images_per_s > in->rows[best].images_per_s))
            best = i;
    return best;
}

static void bars_legend(FILE *out, double x, double y)
{
    static const int depths[] = {1, 2, 4, 8};
    text(out, x, y + 10, "start", 11, "#333", "", "prefetch depth");
    x += 86;
    for (int i = 0; i < 4; i++, x += 44) {
        fprintf(out, "<rect x=\"%.1f\" y=\"%.1f\" width=\"12\" height=\"12\" fill=\"%s\"/>\n",
                x, y, depth_colours[i]);
        text(out, x + 16, y + 10, "start", 11, "#333", "", "%d", depths[i]);
    }
    fprintf(out, "<rect x=\"%.1f\" y=\"%.1f\" width=\"12\" height=\"12\" fill=\"%s\"/>\n", x + 6,
            y, AUTOTUNE_COLOUR);
    text(out, x + 22, y + 10, "start", 11, "#333", "", "autotune");
    fprintf(out, "<rect x=\"%.1f\" y=\"%.1f\" width=\"12\" height=\"12\" fill=\"none\" "
            "stroke=\"#111\" stroke-width=\"1.6\"/>\n", x + 86, y);
    text(out, x + 102, y + 10, "start", 11, "#333", "", "best static");
    fprintf(out, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"%s\" "
            "stroke-width=\"1.3\" stroke-dasharray=\"6 4\"/>\n", x + 176, y + 6, x + 196,
            y + 6, AUTOTUNE_COLOUR);
    text(out, x + 200, y + 10, "start", 11, "#333", "", "autotune level");
}

static void bars_panel(FILE *out, const plot_input *in)
{
    double slot[PLOT_MAX_ROWS], top = 0;
    double nslots = bar_slots(in, slot);
    for (int i = 0; i < in->nrows; i++)
        top = fmax(top, in->rows[i].images_per_s);
    frame f = {BARS_X0, TOP + 40, BARS_X1, BOTTOM, -0.9, nslots - 0.1, 0, 1, false, 0};
    y_range(&f, top * 1.18, 5, 0);
    text(out, BARS_X0 - 50, TOP - 10, "start", 13, "#222", "font-weight=\"bold\"",
         "images/s of each configuration, stall %% above the bar");
    y_axis(out, &f, "");
    bars_legend(out, BARS_X0 + 4, TOP + 6);
    double w = (px(&f, 1) - px(&f, 0)) * 0.86;
    int best = best_row(in);
    for (int i = 0; i < in->nrows; i++) {
        const sweep_row *r = &in->rows[i];
        bar(out, &f, r, px(&f, slot[i]) - w / 2, w, i == best);
        bool first = i == 0 || is_auto(r) || !same_group(r, &in->rows[i - 1]);
        if (!first)
            continue;
        int last = i; /* centre the group label under its bars */
        while (!is_auto(r) && last + 1 < in->nrows && !is_auto(&in->rows[last + 1]) &&
               same_group(&in->rows[last + 1], r))
            last++;
        double mid = (px(&f, slot[i]) + px(&f, slot[last])) / 2;
        char label[64];
        group_label(label, sizeof label, r);
        if (is_auto(r))
            text(out, mid, f.y1 + 17, "middle", 11.5, AUTOTUNE_COLOUR,
                 "font-weight=\"bold\"", "auto");
        else
            text(out, mid, f.y1 + 17, "middle", 11.5, "#333", "", "%s", label);
    }
    fprintf(out, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"%s\"/>\n",
            f.x0, f.y1, f.x1, f.y1, AXIS_GREY);
    text(out, (f.x0 + f.x1) / 2, f.y1 + 38, "middle", 12, "#333", "",
         "parallelism of each stage (groups) x prefetch depth (colour)");
    const sweep_row *a = &in->rows[in->nrows - 1];
    if (is_auto(a))
        hline(out, &f, a->images_per_s, AUTOTUNE_COLOUR, "");
}

/* ---- the lines ---- */

/* A polyline through (xs[i], ys[i]), broken where a value is NaN; `step`
 * draws a step function (each value holds until the next sample). */
static void line(FILE *out, const frame *f, const double *xs, const double *ys, size_t n,
                 const char *colour, double width, bool step, double dy)
{
    bool pen = false;
    fprintf(out, "<path fill=\"none\" stroke=\"%s\" stroke-width=\"%.1f\" "
            "stroke-linejoin=\"round\" d=\"", colour, width);
    for (size_t i = 0; i < n; i++) {
        if (!isfinite(ys[i]) || !isfinite(xs[i])) {
            pen = false;
            continue;
        }
        double x = px(f, xs[i]), y = py(f, fmin(fmax(ys[i], f->ylog2 ? 1e-9 : f->ymin),
                                                f->ylog2 ? pow(2, f->ymax) : f->ymax)) + dy;
        if (!pen)
            fprintf(out, "M%.1f %.1f", x, y);
        else if (step)
            fprintf(out, "H%.1fV%.1f", x, y);
        else
            fprintf(out, "L%.1f %.1f", x, y);
        pen = true;
    }
    fputs("\"/>\n", out);
}

static void vmarkers(FILE *out, const frame *f, const plot_input *in, bool labels)
{
    for (int k = 0; k < in->nchanges; k++) {
        double x = px(f, in->changes[k]);
        if (in->changes[k] <= f->xmin || in->changes[k] > f->xmax)
            continue;
        fprintf(out, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#888\" "
                "stroke-dasharray=\"2 3\"/>\n", x, f->y0, x, f->y1);
        if (labels)
            text(out, x + 3, f->y0 + 11, "start", 10, "#666", "", "step %.0f ms",
                 in->change_ms[k]);
    }
}

typedef struct columns {
    double *t, *rate, *moving, *stall, *measured, *mib;
} columns;

static void columns_free(columns *c)
{
    free(c->t);
    free(c->rate);
    free(c->moving);
    free(c->stall);
    free(c->measured);
    free(c->mib);
}

static int columns_make(const series *s, columns *c)
{
    size_t n = s->n ? s->n : 1;
    double *p[] = {NULL, NULL, NULL, NULL, NULL, NULL};
    for (int k = 0; k < 6; k++)
        if (!(p[k] = malloc(n * sizeof(double)))) {
            for (int j = 0; j < k; j++)
                free(p[j]);
            return -1;
        }
    *c = (columns){p[0], p[1], p[2], p[3], p[4], p[5]};
    double t0 = series_start(s);
    for (size_t i = 0; i < s->n; i++) {
        c->t[i] = s->t[i];
        c->rate[i] = series_sample_rate(s, i);
        c->moving[i] = s->t[i] - 1 >= t0 - 1e-9 ? series_rate(s, s->t[i] - 1, s->t[i]) : NAN;
        c->stall[i] = 100 * series_sample_stall(s, i);
        c->measured[i] = 100 * series_sample_measured_stall(s, i);
        c->mib[i] = s->buffered[i] / (1 << 20);
    }
    return 0;
}

static double column_max(const double *v, size_t n)
{
    double m = 0;
    for (size_t i = 0; i < n; i++)
        if (isfinite(v[i]))
            m = fmax(m, v[i]);
    return m;
}

static frame chart_frame(double x0, double x1, int k, double tmax)
{
    double h = (BOTTOM - TOP - 18 - (CHARTS - 1) * CHART_GAP) / CHARTS;
    double y0 = TOP + 18 + k * (h + CHART_GAP);
    return (frame){x0, y0, x1, y0 + h, 0, tmax, 0, 1, false, 0};
}

static void legend_item(FILE *out, double *x, double y, const char *colour, bool dashed,
                        const char *label)
{
    fprintf(out, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"%s\" "
            "stroke-width=\"2.2\"%s/>\n", *x, y - 4, *x + 18, y - 4, colour,
            dashed ? " stroke-dasharray=\"5 3\"" : "");
    text(out, *x + 22, y, "start", 11, "#333", "", "%s", label);
    *x += 30 + 6.3 * (double)strlen(label);
}

static void throughput_chart(FILE *out, frame f, const columns *c, const plot_input *in)
{
    size_t n = in->s->n;
    double top = fmax(column_max(c->rate, n), column_max(c->moving, n));
    if (isfinite(in->best_static))
        top = fmax(top, in->best_static);
    y_range(&f, top * 1.1, 4, 0);
    y_axis(out, &f, "throughput, images/s");
    x_axis(out, &f, false);
    vmarkers(out, &f, in, true);
    line(out, &f, c->t, c->rate, n, "#9ecae1", 1.2, false, 0);
    line(out, &f, c->t, c->moving, n, "#08519c", 2.2, false, 0);
    if (isfinite(in->best_static))
        hline(out, &f, in->best_static, "#333", "best static");
    if (isfinite(in->convergence_s)) {
        double x = px(&f, series_start(in->s) + in->convergence_s);
        fprintf(out, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"%s\" "
                "stroke-width=\"1.3\" stroke-dasharray=\"4 3\"/>\n", x, f.y0, x, f.y1,
                AUTOTUNE_COLOUR);
        text(out, x + 4, f.y1 - 6, "start", 10.5, AUTOTUNE_COLOUR, "", "converged %.1f s",
             in->convergence_s);
    }
    double lx = f.x0 + 190;
    legend_item(out, &lx, f.y0 - 7, "#9ecae1", false, "per 100 ms");
    legend_item(out, &lx, f.y0 - 7, "#08519c", false, "1-s moving");
}

/* y from 0 to at least floor_max, at most cap (0: no cap); returns the
 * frame drawn, for more lines. */
static frame simple_chart(FILE *out, frame f, const double *t, const double *v, size_t n,
                         double floor_max, double cap, const char *colour, const char *title,
                         const plot_input *in)
{
    y_range(&f, fmax(column_max(v, n) * 1.1, floor_max), 4, cap);
    y_axis(out, &f, title);
    x_axis(out, &f, false);
    vmarkers(out, &f, in, false);
    line(out, &f, t, v, n, colour, 1.8, false, 0);
    return f;
}

static void stall_chart(FILE *out, frame f, const columns *c, const plot_input *in)
{
    size_t n = in->s->n;
    f = simple_chart(out, f, c->t, c->stall, n, fmax(5, 1.1 * column_max(c->measured, n)), 100,
                     "#cb181d", "consumer stall, % of each 100 ms", in);
    fprintf(out, "<g stroke-dasharray=\"4 3\">\n");
    line(out, &f, c->t, c->measured, n, "#252525", 1.1, false, 0);
    fprintf(out, "</g>\n");
    double lx = f.x0 + 250;
    legend_item(out, &lx, f.y0 - 7, "#cb181d", false, "sl_iterator_stats");
    legend_item(out, &lx, f.y0 - 7, "#252525", true, "consumer's clock");
}

static void knob_range(const series *s, double *lo, double *hi)
{
    *lo = INFINITY;
    *hi = -INFINITY;
    for (int k = 0; k < s->nknobs; k++)
        for (size_t i = 0; i < s->n; i++)
            if (isfinite(s->knobs[k].v[i]) && s->knobs[k].v[i] > 0) {
                *lo = fmin(*lo, s->knobs[k].v[i]);
                *hi = fmax(*hi, s->knobs[k].v[i]);
            }
    if (!isfinite(*lo)) {
        *lo = 1;
        *hi = 2;
    }
}

static void knobs_chart(FILE *out, frame f, const plot_input *in)
{
    const series *s = in->s;
    double lo, hi;
    knob_range(s, &lo, &hi);
    f.ylog2 = true;
    f.ymin = floor(log2(lo)) - 0.25;
    f.ymax = fmax(ceil(log2(hi)), f.ymin + 1.25) + 0.25;
    y_axis(out, &f, "knobs (log scale)");
    x_axis(out, &f, true);
    vmarkers(out, &f, in, false);
    text(out, (f.x0 + f.x1) / 2, f.y1 + 34, "middle", 12, "#333", "", "seconds");
    double lx = f.x0, ly = f.y1 + 56;
    for (int k = 0; k < s->nknobs; k++) {
        const char *colour = knob_colours[k % 8];
        /* Knobs often sit on the same value: offset each line a little. */
        line(out, &f, s->t, s->knobs[k].v, s->n, colour, 2, true, 1.8 * (k - s->nknobs / 2.0));
        char label[128];
        snprintf(label, sizeof label, "%s%s", s->knobs[k].label,
                 s->knobs[k].autotuned ? "" : " (fixed)");
        if (lx + 30 + 6.3 * (double)strlen(label) > f.x1 + 40) {
            lx = f.x0;
            ly += 17;
        }
        legend_item(out, &lx, ly, colour, false, label);
    }
}

static void lines_panel(FILE *out, const plot_input *in, double x0, double x1)
{
    columns c;
    if (columns_make(in->s, &c) < 0)
        return;
    double tmax = fmax(series_end(in->s), in->s->n ? in->s->t[in->s->n - 1] : 0);
    tmax = tmax > 0 ? tmax : 1;
    text(out, x0 - 50, TOP - 10, "start", 13, "#222", "font-weight=\"bold\"", "%s over time",
         in->run_name);
    throughput_chart(out, chart_frame(x0, x1, 0, tmax), &c, in);
    stall_chart(out, chart_frame(x0, x1, 1, tmax), &c, in);
    simple_chart(out, chart_frame(x0, x1, 2, tmax), c.t, c.mib, in->s->n, 1, 0, "#6a51a3",
                 "buffered MiB", in);
    knobs_chart(out, chart_frame(x0, x1, 3, tmax), in);
    columns_free(&c);
}

int plot_write(const char *path, const plot_input *in)
{
    FILE *out = fopen(path, "w");
    if (!out) {
        fprintf(stderr, "sluice-bench: %s: %s\n", path, strerror(errno));
        return -1;
    }
    double x0 = in->nrows ? BARS_X1 + 110 : BARS_X0;
    double width = x0 + LINES_W + 40;
    fprintf(out, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
            "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%.0f\" height=\"%.0f\" "
            "viewBox=\"0 0 %.0f %.0f\" font-family=\"%s\">\n"
            "<rect width=\"100%%\" height=\"100%%\" fill=\"white\"/>\n",
            width, HEIGHT, width, HEIGHT, FONT);
    text(out, 24, 32, "start", 19, "#111", "font-weight=\"bold\"", "%s", in->title);
    text(out, 24, 54, "start", 12.5, "#555", "", "%s", in->subtitle);
    if (in->nrows > 0 && in->nrows <= PLOT_MAX_ROWS)
        bars_panel(out, in);
    if (in->s && in->s->n)
        lines_panel(out, in, x0, x0 + LINES_W);
    fputs("</svg>\n", out);
    if (fclose(out) != 0) {
        fprintf(stderr, "sluice-bench: %s: %s\n", path, strerror(errno));
        return -1;
    }
    return 0;
}
