/* Smallest program against an installed sluice: version check and a tiny
 * range -> batch pipeline. Exit 0 when everything matches. */
#include <sluice.h>
#include <stdint.h>
#include <stdio.h>

int main(void)
{
    if (sl_version_number() != SL_VERSION_NUMBER) {
        fprintf(stderr, "consumer: header %d, library %u\n", SL_VERSION_NUMBER,
                sl_version_number());
        return 1;
    }
    printf("consumer: sluice %s\n", sl_version_string());

    sl_dataset *ds = sl_range(0, 10, 1);
    ds = sl_batch(ds, 4, 0);
    if (!ds) {
        fprintf(stderr, "consumer: building the pipeline: %s\n", sl_last_error());
        return 1;
    }
    sl_iterator *it = sl_iterator_create(ds, NULL);
    if (!it) {
        fprintf(stderr, "consumer: sl_iterator_create: %s\n", sl_last_error());
        sl_dataset_release(ds);
        return 1;
    }

    int batches = 0, rc;
    int64_t items = 0, sum = 0;
    sl_element *el;
    while ((rc = sl_next(it, &el)) == 0) {
        const sl_tensor *t = sl_element_tensor(el, 0);
        if (t && sl_tensor_dtype(t) == SL_INT64) {
            const int64_t *v = sl_tensor_data(t);
            for (int64_t i = 0; i < sl_tensor_count(t); i++) {
                sum += v[i];
                items++;
            }
        }
        batches++;
        sl_element_release(el);
    }
    if (rc < 0)
        fprintf(stderr, "consumer: sl_next: %s\n", sl_iterator_errmsg(it));
    sl_iterator_free(it);
    sl_dataset_release(ds);

    if (rc != SL_EOF || batches != 3 || items != 10 || sum != 45) {
        fprintf(stderr, "consumer: got rc=%d, %d batches, %lld items, sum %lld "
                        "(want EOF, 3, 10, 45)\n",
                rc, batches, (long long)items, (long long)sum);
        return 1;
    }
    printf("consumer: ok (3 batches)\n");
    return 0;
}
