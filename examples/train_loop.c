/*
 * train_loop: the shape of a C training program that uses sluice.
 *
 *   1. Build the pipeline once. Datasets are immutable descriptions; they
 *      cost nothing to keep and may be shared between threads.
 *   2. Each epoch, start an iterator over it, pull batches, run a training
 *      step on each, release each batch, free the iterator. (A single
 *      iterator over sl_repeat(ds, epochs) works too; one per epoch leaves
 *      room for an evaluation pass or a checkpoint between epochs.)
 *   3. Check every error: builders return NULL (sl_last_error), sl_next
 *      returns a negative code (sl_iterator_errmsg).
 *
 * The "model" is a linear regression fitted by SGD on synthetic data, just
 * enough computation to show the loss going down as the epochs pass.
 */
#include <math.h>
#include <stdio.h>
#include <string.h>
#include "sluice.h"

#define SAMPLES 8192
#define FEATURES 16
#define BATCH 64
#define EPOCHS 5
#define LEARNING_RATE 0.005f
#define SEED 1234

/* Feature statistics for standardisation, computed once from the data and
 * read by the map callback on worker threads (read-only, so no locking). */
typedef struct feature_stats {
    float mean[FEATURES], inv_std[FEATURES];
} feature_stats;

typedef struct model {
    float w[FEATURES], b;
} model;

/* ---- data ---- */

static float lcg_uniform(uint32_t *s) /* [-1, 1) */
{
    *s = *s * 1664525u + 1013904223u;
    return (float)(*s >> 8) * (2.0f / 16777216.0f) - 1.0f;
}

/* Samples of y = w_true . x + 3 + noise, features with assorted offsets
 * and scales (so that standardising them matters). One element of two
 * tensors, x [SAMPLES, FEATURES] and y [SAMPLES]. */
static sl_element *make_data(feature_stats *st)
{
    sl_element *all = sl_element_create(2);
    int64_t xs[2] = {SAMPLES, FEATURES}, ys[1] = {SAMPLES};
    float *x = all ? sl_element_add_tensor(all, SL_FLOAT32, 2, xs) : NULL;
    float *y = x ? sl_element_add_tensor(all, SL_FLOAT32, 1, ys) : NULL;
    if (!y) {
        sl_element_release(all);
        return NULL;
    }
    uint32_t s = 7;
    double sum[FEATURES] = {0}, sq[FEATURES] = {0};
    for (int i = 0; i < SAMPLES; i++) {
        float t = 3.0f;
        for (int j = 0; j < FEATURES; j++) {
            float v = (float)(j + 1) * lcg_uniform(&s) + (float)j;
            x[i * FEATURES + j] = v;
            t += (float)((j % 3) - 1) * 0.5f * ((v - (float)j) / (float)(j + 1));
            sum[j] += v;
            sq[j] += (double)v * v;
        }
        y[i] = t + 0.01f * lcg_uniform(&s);
    }
    for (int j = 0; j < FEATURES; j++) {
        double m = sum[j] / SAMPLES, var = sq[j] / SAMPLES - m * m;
        st->mean[j] = (float)m;
        st->inv_std[j] = (float)(1.0 / sqrt(var > 1e-12 ? var : 1e-12));
    }
    return all;
}

/* ---- pipeline ---- */

/* Standardises the features. `in` is borrowed; *out is a new element. Runs
 * on worker threads, several at once. */
static int standardize(sl_map_ctx *ctx, const sl_element *in, sl_element **out, void *user)
{
    const feature_stats *st = user;
    const float *x = sl_tensor_data(sl_element_tensor(in, 0));
    int64_t shape[1] = {FEATURES};
    sl_element *el = sl_element_create(2);
    float *z = el ? sl_element_add_tensor(el, SL_FLOAT32, 1, shape) : NULL;
    if (!z || sl_element_add_shared(el, in, 1) < 0) { /* the target, uncopied */
        sl_element_release(el);
        return sl_map_ctx_error(ctx, SL_ENOMEM, "out of memory");
    }
    for (int j = 0; j < FEATURES; j++)
        z[j] = (x[j] - st->mean[j]) * st->inv_std[j];
    *out = el;
    return 0;
}

/* `st` must outlive the dataset and its iterators (map's `user` rule). */
static sl_dataset *build_pipeline(feature_stats *st)
{
    sl_element *data = make_data(st);
    if (!data)
        return NULL;
    sl_dataset *ds = sl_from_tensor_slices(data); /* takes the reference to data */
    ds = sl_shuffle(ds, SL_SHUFFLE_ALL, -1, 0);
    ds = sl_map(ds, "standardize", standardize, st, SL_AUTOTUNE, 0);
    ds = sl_batch(ds, BATCH, SL_DROP_REMAINDER);
    ds = sl_prefetch(ds, SL_AUTOTUNE);
    return ds; /* NULL if any step failed: one check covers the chain */
}

/* ---- training ---- */

/* One SGD step of mean squared error over the batch; returns the loss. A
 * real program would copy x and y to the device and call the model here. */
static float train_step(model *m, const float *x, const float *y, int64_t n)
{
    float gw[FEATURES] = {0}, gb = 0, loss = 0;
    for (int64_t i = 0; i < n; i++) {
        const float *xi = x + i * FEATURES;
        float err = m->b - y[i];
        for (int j = 0; j < FEATURES; j++)
            err += m->w[j] * xi[j];
        loss += err * err;
        gb += err;
        for (int j = 0; j < FEATURES; j++)
            gw[j] += err * xi[j];
    }
    for (int j = 0; j < FEATURES; j++)
        m->w[j] -= LEARNING_RATE * 2 * gw[j] / (float)n;
    m->b -= LEARNING_RATE * 2 * gb / (float)n;
    return loss / (float)n;
}

/* Checks what the pipeline promised, so a change to it fails loudly here
 * instead of feeding the model garbage. */
static int check_batch(const sl_element *batch)
{
    const sl_tensor *x = sl_element_tensor(batch, 0), *y = sl_element_tensor(batch, 1);
    if (!x || !y || sl_tensor_dtype(x) != SL_FLOAT32 || sl_tensor_dtype(y) != SL_FLOAT32 ||
        sl_tensor_ndim(x) != 2 || sl_tensor_shape(x)[1] != FEATURES ||
        sl_tensor_count(y) != sl_tensor_shape(x)[0]) {
        fprintf(stderr, "train_loop: unexpected batch layout\n");
        return -1;
    }
    return 0;
}

/* One pass over the data: the number of training steps taken, with their
 * mean loss in *loss, or -1 after reporting the error. */
static int64_t run_epoch(model *m, sl_dataset *ds, sl_options *opts, int epoch, double *loss)
{
    /* A new iterator starts at epoch 0 of every op, so without a new seed
     * each epoch would see the same shuffle order. */
    sl_options_set(opts, SL_OPT_SEED, SEED + epoch);
    sl_iterator *it = sl_iterator_create(ds, opts);
    if (!it) {
        fprintf(stderr, "train_loop: cannot start epoch %d: %s\n", epoch, sl_last_error());
        return -1;
    }
    int64_t steps = 0;
    double sum = 0;
    sl_element *batch;
    int rc;
    while ((rc = sl_next(it, &batch)) == 0) {
        if (check_batch(batch) < 0) {
            sl_element_release(batch);
            break; /* rc is 0: stopping early on our own */
        }
        const sl_tensor *x = sl_element_tensor(batch, 0), *y = sl_element_tensor(batch, 1);
        sum += train_step(m, sl_tensor_data(x), sl_tensor_data(y), sl_tensor_count(y));
        steps++;
        /* The batch's memory goes back to the pipeline's pools. Keep the
         * element (not a pointer into it) if the data must live longer. */
        sl_element_release(batch);
    }
    if (rc < 0) /* SL_EOF (positive) is the normal end */
        fprintf(stderr, "train_loop: epoch %d: %s\n", epoch, sl_iterator_errmsg(it));
    /* Frees the iterator's buffers; had we stopped early, it would also
     * cancel and join the work still in flight. */
    sl_iterator_free(it);
    if (rc != SL_EOF)
        return -1;
    *loss = steps ? sum / (double)steps : 0;
    return steps;
}

int main(void)
{
    /* One worker pool for all epochs, rather than a private one started and
     * joined by each iterator. 0: one thread per CPU. */
    sl_runtime *rt = sl_runtime_create(0);
    sl_options *opts = sl_options_create();
    if (!rt || !opts || sl_options_set_runtime(opts, rt) < 0) {
        fprintf(stderr, "train_loop: setup: %s\n", sl_last_error());
        sl_options_free(opts);
        sl_runtime_free(rt);
        return 1;
    }
    static feature_stats stats; /* outlives the dataset */
    sl_dataset *ds = build_pipeline(&stats);
    if (!ds) {
        fprintf(stderr, "train_loop: cannot build the pipeline: %s\n", sl_last_error());
        sl_options_free(opts);
        sl_runtime_free(rt);
        return 1;
    }

    model m = {{0}, 0};
    int status = 0;
    for (int epoch = 0; epoch < EPOCHS; epoch++) {
        double loss;
        int64_t steps = run_epoch(&m, ds, opts, epoch, &loss);
        if (steps < 0) {
            status = 1;
            break;
        }
        printf("epoch %d: %lld steps of %d samples, mean loss %.6f\n", epoch,
               (long long)steps, BATCH, loss);
    }

    /* Teardown order: iterators (already freed), then datasets and options
     * in any order, then the runtime the iterators ran on. */
    sl_dataset_release(ds);
    sl_options_free(opts);
    sl_runtime_free(rt);
    return status;
}
