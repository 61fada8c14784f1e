/*
 * Run under a real mpirun: every rank iterates two epochs of a distributed
 * image pipeline (folder -> shuffle(ALL) -> distribute from the launcher's
 * environment -> map_image -> batch) and sends what it saw to rank 0 over
 * MPI; rank 0 checks that each epoch is complete across the ranks, that
 * only padding repeats (fewer than world size elements), that the two
 * epochs' orders differ, and that every rank got the same number of steps.
 *
 *   mpirun -np N mpi_distribute [IMAGES]    (IMAGES default 23)
 *
 * This program links MPI; libsluice does not: it found its rank in the
 * OMPI_COMM_WORLD_* variables, and the test checks that it agrees with
 * MPI_Comm_rank.
 */
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "jpegutil.h"
#include "sluice.h"

#define EPOCHS 2
#define BATCH 4
#define MAX_IMAGES 1000

static int fail(const char *what)
{
    fprintf(stderr, "mpi_distribute: %s\n", what);
    MPI_Abort(MPI_COMM_WORLD, 1);
    return 1;
}

/* Rank 0 writes n small JPEGs into 3 class folders under a fresh dir. */
static void make_images(char *dir, size_t dsize, int n)
{
    snprintf(dir, dsize, "/tmp/sluice-mpi-XXXXXX");
    if (!mkdtemp(dir))
        fail("mkdtemp failed");
    for (int c = 0; c < 3; c++) {
        char sub[600];
        snprintf(sub, sizeof sub, "%s/c%d", dir, c);
        mkdir(sub, 0755);
    }
    for (int i = 0; i < n; i++) {
        size_t len;
        uint8_t *jpg = ju_make(40 + i % 7, 30 + i % 5, (unsigned)i + 1, NULL, &len);
        char path[700];
        snprintf(path, sizeof path, "%s/c%d/%03d.jpg", dir, i % 3, i);
        FILE *f = fopen(path, "wb");
        if (!f || fwrite(jpg, 1, len, f) != len || fclose(f) != 0)
            fail("writing an image failed");
        free(jpg);
    }
}

static void remove_images(const char *dir, int n)
{
    char path[700];
    for (int i = 0; i < n; i++) {
        snprintf(path, sizeof path, "%s/c%d/%03d.jpg", dir, i % 3, i);
        unlink(path);
    }
    for (int c = 0; c < 3; c++) {
        snprintf(path, sizeof path, "%s/c%d", dir, c);
        rmdir(path);
    }
    rmdir(dir);
}

/* The index of an image (its file name's number) from the path tensor. */
static int image_index(const sl_tensor *paths, int64_t i)
{
    size_t len;
    const char *p = sl_tensor_string(paths, i, &len);
    return atoi(p + len - 7); /* ".../c1/007.jpg" */
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rank, world;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &world);
    int n = argc > 1 ? atoi(argv[1]) : 23;
    if (n < 1 || n > MAX_IMAGES)
        return fail("IMAGES must be in [1, 1000]");

    sl_dist_context ctx;
    if (sl_distributed_context(&ctx) != 0)
        return fail(sl_last_error());
    if (ctx.rank != rank || ctx.world_size != world || strcmp(ctx.source, "openmpi") != 0) {
        fprintf(stderr, "rank %d of %d: sluice read rank %d of %d from %s\n", rank, world,
                ctx.rank, ctx.world_size, ctx.source);
        return fail("the environment disagrees with MPI");
    }

    char dir[512] = {0};
    if (rank == 0)
        make_images(dir, sizeof dir, n);
    MPI_Bcast(dir, sizeof dir, MPI_CHAR, 0, MPI_COMM_WORLD);

    sl_dataset *ds = sl_image_folder(dir, NULL, SL_WITH_PATHS);
    ds = sl_shuffle(ds, SL_SHUFFLE_ALL, 1234, 0);
    ds = sl_distribute(ds, NULL, SL_DISTRIBUTE_PAD);
    sl_image_spec spec;
    SL_IMAGE_SPEC_INIT(&spec, SL_CROP_RESIZE, 16);
    ds = sl_batch(sl_map_image(ds, &spec, SL_AUTOTUNE), BATCH, 0);
    if (!ds)
        return fail(sl_last_error());
    int64_t steps_promised = sl_dataset_cardinality(ds);

    /* per epoch: the image indices this rank saw, in order, and its steps */
    int seen[EPOCHS][MAX_IMAGES], count[EPOCHS], steps[EPOCHS];
    for (int e = 0; e < EPOCHS; e++) {
        sl_options *o = sl_options_create();
        sl_options_set(o, SL_OPT_THREADS, 2);
        sl_iterator *it = sl_iterator_create(ds, o);
        if (!it)
            return fail(sl_last_error());
        sl_element *el;
        int rc;
        count[e] = steps[e] = 0;
        while ((rc = sl_next(it, &el)) == 0) {
            const sl_tensor *paths = sl_element_tensor(el, 2);
            for (int64_t i = 0; i < sl_tensor_count(paths); i++)
                seen[e][count[e]++] = image_index(paths, i);
            steps[e]++;
            sl_element_release(el);
        }
        if (rc != SL_EOF)
            return fail(sl_iterator_errmsg(it));
        sl_iterator_free(it);
        sl_options_free(o);
    }
    sl_dataset_release(ds);

    /* to rank 0: counts, steps, then the indices of every epoch */
    int mine[2 * EPOCHS + 1] = {(int)steps_promised};
    for (int e = 0; e < EPOCHS; e++)
        mine[1 + 2 * e] = count[e], mine[2 + 2 * e] = steps[e];
    int *all = rank == 0 ? malloc(sizeof mine * (size_t)world) : NULL;
    MPI_Gather(mine, 2 * EPOCHS + 1, MPI_INT, all, 2 * EPOCHS + 1, MPI_INT, 0, MPI_COMM_WORLD);
    int per_rank = (n + world - 1) / world;
    int *idx = rank == 0 ? malloc(sizeof(int) * (size_t)world * EPOCHS * per_rank) : NULL;
    int flat[EPOCHS * MAX_IMAGES];
    for (int e = 0; e < EPOCHS; e++)
        for (int i = 0; i < per_rank; i++)
            flat[e * per_rank + i] = i < count[e] ? seen[e][i] : -1;
    MPI_Gather(flat, EPOCHS * per_rank, MPI_INT, idx, EPOCHS * per_rank, MPI_INT, 0,
               MPI_COMM_WORLD);

    int bad = 0;
    if (rank == 0) {
        int orders_differ = 0;
        for (int e = 0; e < EPOCHS; e++) {
            int hits[MAX_IMAGES] = {0}, total = 0;
            for (int r = 0; r < world; r++) {
                const int *m = all + r * (2 * EPOCHS + 1);
                if (m[1 + 2 * e] != per_rank || m[2 + 2 * e] != all[2 + 2 * e] ||
                    m[2 + 2 * e] != m[0]) {
                    fprintf(stderr, "epoch %d rank %d: %d images in %d steps (promised %d); "
                            "rank 0: %d steps\n", e, r, m[1 + 2 * e], m[2 + 2 * e], m[0],
                            all[2 + 2 * e]);
                    bad = 1;
                }
                for (int i = 0; i < per_rank; i++) {
                    int v = idx[(r * EPOCHS + e) * per_rank + i];
                    if (v < 0 || v >= n) {
                        bad = 1;
                        continue;
                    }
                    hits[v]++;
                    total++;
                    if (e == 1 && v != idx[(r * EPOCHS + 0) * per_rank + i])
                        orders_differ = 1;
                }
            }
            int missing = 0, repeats = 0;
            for (int v = 0; v < n; v++) {
                missing += hits[v] == 0;
                repeats += hits[v] > 1 ? hits[v] - 1 : 0;
            }
            if (missing || repeats != total - n || repeats >= world) {
                fprintf(stderr, "epoch %d: %d images missing, %d repeated (world %d)\n", e,
                        missing, repeats, world);
                bad = 1;
            }
        }
        if (world > 1 && !orders_differ) {
            fprintf(stderr, "the two epochs had the same order\n");
            bad = 1;
        }
        printf("mpi_distribute: world %d, %d images: %d per rank, %d steps each, epochs "
               "complete%s: %s\n", world, n, per_rank, all[2], orders_differ ? ", orders differ"
                                                                               : "",
               bad ? "FAILED" : "ok");
        remove_images(dir, n);
        free(all);
        free(idx);
    }
    MPI_Bcast(&bad, 1, MPI_INT, 0, MPI_COMM_WORLD);
    MPI_Finalize();
    return bad;
}
