/*
 * c_pipeline: the image pipeline of sluice-bench, from C, writing every
 * batch's bytes to a file so that the Python tests can check that the same
 * pipeline and seed give byte-identical batches through the binding.
 *
 *   c_pipeline DIR PRESET SIZE BATCH SEED THREADS EPOCHS OUT
 *
 * image_folder(DIR) | shuffle(ALL, SEED) (train) | repeat(EPOCHS) (if > 1)
 * | map_image(PRESET, SIZE) | batch(BATCH, drop remainder for train)
 * | prefetch(AUTOTUNE), options THREADS and SEED. OUT receives, per batch,
 * the image tensor's bytes then the label tensor's. Exit status 0, or 1
 * with the error on stderr.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "sluice.h"

static sl_dataset *pipeline(const char *dir, int train, int crop, int size, int64_t batch,
                            int64_t seed, int64_t epochs)
{
    sl_image_spec spec;
    if (SL_IMAGE_SPEC_INIT(&spec, crop, size) < 0)
        return NULL;
    sl_dataset *ds = sl_image_folder(dir, NULL, 0);
    if (train)
        ds = sl_shuffle(ds, SL_SHUFFLE_ALL, seed, 0);
    if (epochs != 1)
        ds = sl_repeat(ds, epochs);
    ds = sl_map_image(ds, &spec, SL_AUTOTUNE);
    ds = sl_batch(ds, batch, train ? SL_DROP_REMAINDER : 0);
    return sl_prefetch(ds, SL_AUTOTUNE);
}

static int write_tensor(FILE *f, const sl_element *el, int i)
{
    const sl_tensor *t = sl_element_tensor(el, i);
    size_t n = t ? sl_tensor_nbytes(t) : 0;
    return t && fwrite(sl_tensor_data(t), 1, n, f) == n ? 0 : -1;
}

static int drain(sl_iterator *it, FILE *f)
{
    sl_element *el;
    int rc;
    while ((rc = sl_next(it, &el)) == 0) {
        int bad = write_tensor(f, el, 0) < 0 || write_tensor(f, el, 1) < 0;
        sl_element_release(el);
        if (bad) {
            fprintf(stderr, "c_pipeline: write failed\n");
            return -1;
        }
    }
    if (rc < 0)
        fprintf(stderr, "c_pipeline: %s\n", sl_iterator_errmsg(it));
    return rc < 0 ? -1 : 0;
}

int main(int argc, char **argv)
{
    if (argc != 9) {
        fprintf(stderr, "usage: c_pipeline DIR PRESET SIZE BATCH SEED THREADS EPOCHS OUT\n");
        return 2;
    }
    const char *preset = argv[2];
    int train = !strcmp(preset, "train");
    int crop = train ? SL_CROP_RANDOM_RESIZED
             : !strcmp(preset, "eval") ? SL_CROP_CENTER : SL_CROP_RESIZE;
    int64_t seed = atoll(argv[5]);
    sl_dataset *ds = pipeline(argv[1], train, crop, atoi(argv[3]), atoll(argv[4]), seed,
                              atoll(argv[7]));
    sl_options *opts = sl_options_create();
    if (!ds || !opts || sl_options_set(opts, SL_OPT_THREADS, atoll(argv[6])) < 0 ||
        sl_options_set(opts, SL_OPT_SEED, seed) < 0) {
        fprintf(stderr, "c_pipeline: %s\n", sl_last_error());
        sl_options_free(opts);
        sl_dataset_release(ds);
        return 1;
    }
    sl_iterator *it = sl_iterator_create(ds, opts);
    FILE *f = it ? fopen(argv[8], "wb") : NULL;
    int rc = -1;
    if (!it)
        fprintf(stderr, "c_pipeline: %s\n", sl_last_error());
    else if (!f)
        perror(argv[8]);
    else
        rc = drain(it, f);
    if (f && fclose(f) != 0)
        rc = -1;
    sl_iterator_free(it);
    sl_options_free(opts);
    sl_dataset_release(ds);
    return rc < 0 ? 1 : 0;
}
