/* sl_distributed_context (each launcher's variables, precedence, nesting,
 * conflicts) and sl_distribute (disjoint and complete epochs, equal steps
 * with padding or dropping, one global order per epoch, files split under
 * record readers, reads pushed down, resume per rank). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "recordutil.h"
#include "testutil.h"

static const char *const all_vars[] = {
    "SLUICE_RANK", "SLUICE_WORLD_SIZE", "SLUICE_LOCAL_RANK", "SLUICE_LOCAL_WORLD_SIZE",
    "RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "GROUP_RANK",
    "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK",
    "OMPI_COMM_WORLD_LOCAL_SIZE", "PMI_RANK", "PMI_SIZE", "MPI_LOCALRANKID", "MPI_LOCALNRANKS",
    "SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID", "SLURM_NODEID", "SLURM_NTASKS_PER_NODE",
};

static int clear_env(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof all_vars / sizeof all_vars[0]; i++)
        unsetenv(all_vars[i]);
    return 0;
}

static void set(const char *k, const char *v) { assert_int_equal(setenv(k, v, 1), 0); }

static sl_dist_context ctx_ok(void)
{
    sl_dist_context c;
    int rc = sl_distributed_context(&c);
    if (rc != 0)
        print_error("%s\n", sl_last_error());
    assert_int_equal(rc, 0);
    return c;
}

static void expect_ctx(const char *src, int rank, int world, int lrank, int lworld, int node)
{
    sl_dist_context c = ctx_ok();
    assert_string_equal(c.source, src);
    assert_int_equal(c.rank, rank);
    assert_int_equal(c.world_size, world);
    assert_int_equal(c.local_rank, lrank);
    assert_int_equal(c.local_world_size, lworld);
    assert_int_equal(c.node, node);
}

static void expect_env_error(const char *a, const char *b)
{
    sl_dist_context c;
    assert_int_equal(sl_distributed_context(&c), SL_EINVAL);
    const char *msg = sl_last_error();
    if (!strstr(msg, a) || (b && !strstr(msg, b)))
        print_error("message: %s\n", msg);
    assert_non_null(strstr(msg, a));
    if (b)
        assert_non_null(strstr(msg, b));
}

static void test_env_launchers(void **state)
{
    clear_env(state);
    expect_ctx("none", 0, 1, 0, 1, 0);

    set("RANK", "5"), set("WORLD_SIZE", "8"), set("LOCAL_RANK", "1"),
        set("LOCAL_WORLD_SIZE", "4"), set("GROUP_RANK", "1");
    expect_ctx("torchrun", 5, 8, 1, 4, 1);
    clear_env(state);

    set("OMPI_COMM_WORLD_RANK", "3"), set("OMPI_COMM_WORLD_SIZE", "4"),
        set("OMPI_COMM_WORLD_LOCAL_RANK", "1"), set("OMPI_COMM_WORLD_LOCAL_SIZE", "2");
    expect_ctx("openmpi", 3, 4, 1, 2, 1); /* node: rank / local size */
    clear_env(state);

    set("PMI_RANK", "2"), set("PMI_SIZE", "3"), set("MPI_LOCALRANKID", "2"),
        set("MPI_LOCALNRANKS", "3");
    expect_ctx("pmi", 2, 3, 2, 3, 0);
    clear_env(state);

    set("SLURM_PROCID", "7"), set("SLURM_NTASKS", "8"), set("SLURM_LOCALID", "3"),
        set("SLURM_NODEID", "1"), set("SLURM_NTASKS_PER_NODE", "4(x2)");
    expect_ctx("slurm", 7, 8, 3, 4, 1);
    clear_env(state);

    /* no local variables: the global ones */
    set("PMI_RANK", "1"), set("PMI_SIZE", "2");
    expect_ctx("pmi", 1, 2, 1, 2, 0);
    clear_env(state);
}

static void test_env_precedence(void **state)
{
    clear_env(state);
    /* srun started one torchrun agent per host (2 tasks); torchrun's 8
     * ranks are the job: another size, so Slurm's are the outer launcher */
    set("SLURM_PROCID", "1"), set("SLURM_NTASKS", "2"), set("SLURM_NODEID", "1");
    set("RANK", "6"), set("WORLD_SIZE", "8"), set("LOCAL_RANK", "2"),
        set("LOCAL_WORLD_SIZE", "4"), set("GROUP_RANK", "1");
    expect_ctx("torchrun", 6, 8, 2, 4, 1);
    clear_env(state);

    /* mpirun inside an sbatch script: the script's SLURM_PROCID=0 of 1 */
    set("SLURM_PROCID", "0"), set("SLURM_NTASKS", "1");
    set("OMPI_COMM_WORLD_RANK", "2"), set("OMPI_COMM_WORLD_SIZE", "4");
    expect_ctx("openmpi", 2, 4, 2, 4, 0);
    /* the same job seen by two launchers that agree is fine */
    set("PMI_RANK", "2"), set("PMI_SIZE", "4");
    expect_ctx("openmpi", 2, 4, 2, 4, 0);
    /* ... and one that disagrees is an error naming both */
    set("PMI_RANK", "1");
    expect_env_error("OMPI_COMM_WORLD_RANK=2", "PMI_RANK=1");
    /* SLUICE_* override them all, conflicts included */
    set("SLUICE_RANK", "3"), set("SLUICE_WORLD_SIZE", "4");
    expect_ctx("sluice", 3, 4, 3, 4, 0);
    clear_env(state);
}

static void test_env_errors(void **state)
{
    clear_env(state);
    set("RANK", "1");
    expect_env_error("RANK", "WORLD_SIZE");
    set("WORLD_SIZE", "two");
    expect_env_error("WORLD_SIZE=\"two\"", NULL);
    set("WORLD_SIZE", "0");
    expect_env_error("WORLD_SIZE=\"0\"", NULL);
    set("WORLD_SIZE", "1");
    expect_env_error("RANK=1", "WORLD_SIZE=1");
    clear_env(state);
    set("SLUICE_WORLD_SIZE", "2");
    expect_env_error("SLUICE_WORLD_SIZE", "SLUICE_RANK");
    clear_env(state);
    set("SLURM_PROCID", "0"), set("SLURM_NTASKS", "2"), set("SLURM_LOCALID", "5"),
        set("SLURM_NTASKS_PER_NODE", "2");
    expect_env_error("SLURM_LOCALID=5", "SLURM_NTASKS_PER_NODE=2");
    clear_env(state);
    assert_int_equal(sl_distributed_context(NULL), SL_EINVAL);
}

/* ---- sl_distribute ---- */

static sl_dataset *dist(sl_dataset *in, int rank, int world, unsigned flags)
{
    sl_dist_context c = {.rank = rank, .world_size = world, .local_world_size = world};
    sl_dataset *ds = sl_distribute(in, &c, flags);
    assert_non_null(ds);
    return ds;
}

/* One epoch of every rank: counts equal, union complete, repeats only as
 * padding (at most one per rank, and only when n % world != 0). */
static void check_epoch(sl_dataset *(*make)(void *), void *arg, int64_t n, int world,
                        unsigned flags, int64_t epoch)
{
    int64_t *seen = calloc((size_t)n, sizeof *seen);
    int64_t want = (flags & SL_DISTRIBUTE_DROP) ? n / world : (n + world - 1) / world;
    int64_t total = 0, padded = 0;
    for (int r = 0; r < world; r++) {
        sl_dataset *ds = dist(make(arg), r, world, flags);
        assert_int_equal(sl_dataset_cardinality(ds), want);
        sl_options *o = tu_opts(2, 7);
        assert_int_equal(sl_options_set(o, SL_OPT_EPOCH, epoch), 0);
        sl_iterator *it = sl_iterator_create(ds, o);
        assert_non_null(it);
        sl_element *el;
        int64_t k = 0;
        int rc;
        while ((rc = sl_next(it, &el)) == 0) {
            int64_t v = sl_tensor_int64(sl_element_tensor(el, 0));
            assert_true(v >= 0 && v < n);
            seen[v]++;
            k++;
            sl_element_release(el);
        }
        if (rc != SL_EOF)
            print_error("n %lld world %d rank %d flags %u: %s\n", (long long)n, world, r, flags,
                        sl_iterator_errmsg(it));
        assert_int_equal(rc, SL_EOF);
        assert_int_equal(k, want);
        padded += sl_iterator_stat(it, SL_STAT_PADDED);
        total += k;
        sl_iterator_free(it);
        sl_options_free(o);
        sl_dataset_release(ds);
    }
    int64_t dup = 0, missing = 0;
    for (int64_t v = 0; v < n; v++) {
        missing += seen[v] == 0;
        dup += seen[v] > 1 ? seen[v] - 1 : 0;
    }
    if (flags & SL_DISTRIBUTE_DROP) {
        assert_int_equal(dup, 0);
        assert_int_equal(missing, n - total);
        assert_int_equal(padded, 0);
    } else {
        assert_int_equal(missing, 0);
        assert_int_equal(dup, total - n);
        assert_int_equal(padded, total - n);
        assert_true(total - n < world);
    }
    free(seen);
}

static sl_dataset *make_range(void *arg) { return sl_range(0, *(int64_t *)arg, 1); }

static sl_dataset *make_shuffled(void *arg)
{
    return sl_shuffle(sl_range(0, *(int64_t *)arg, 1), SL_SHUFFLE_ALL, 11, 0);
}

static int keep_all(sl_map_ctx *ctx, const sl_element *el, void *user)
{
    (void)ctx, (void)el, (void)user;
    return 1;
}

/* A size the input cannot know (a filter, as for shards), stated. */
static sl_dataset *make_stated(void *arg)
{
    int64_t n = *(int64_t *)arg;
    return sl_assert_cardinality(sl_filter(sl_range(0, n, 1), NULL, keep_all, NULL), n);
}

static void test_equal_steps(void **state)
{
    (void)state;
    int64_t sizes[] = {10, 12, 3, 1, 0, 101};
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++)
        for (int world = 1; world <= 4; world++) {
            check_epoch(make_range, &sizes[i], sizes[i], world, SL_DISTRIBUTE_PAD, 0);
            check_epoch(make_range, &sizes[i], sizes[i], world, SL_DISTRIBUTE_DROP, 0);
            check_epoch(make_stated, &sizes[i], sizes[i], world, SL_DISTRIBUTE_PAD, 0);
            check_epoch(make_stated, &sizes[i], sizes[i], world, SL_DISTRIBUTE_DROP, 0);
        }
    /* padding is DistributedSampler's: rank 2 of 4 over 10 gets 2, 6, 0 */
    int64_t want[] = {2, 6, 0};
    sl_dataset *ds = dist(sl_range(0, 10, 1), 2, 4, 0);
    tu_expect(ds, want, 3);
    sl_dataset_release(ds);
    int64_t want_drop[] = {2, 6};
    ds = dist(sl_range(0, 10, 1), 2, 4, SL_DISTRIBUTE_DROP);
    tu_expect(ds, want_drop, 2);
    sl_dataset_release(ds);
}

/* Every rank takes its part of one permutation per epoch, a new one each
 * epoch. */
static void test_global_order(void **state)
{
    (void)state;
    int64_t n = 103;
    for (int world = 2; world <= 4; world++)
        for (int64_t e = 0; e < 2; e++)
            check_epoch(make_shuffled, &n, n, world, 0, e);
    int64_t *a, *b;
    size_t na, nb;
    sl_options *o = tu_opts(2, 7);
    sl_dataset *ds = dist(make_shuffled(&n), 1, 3, 0);
    assert_int_equal(tu_collect(ds, o, &a, &na, NULL), SL_EOF);
    assert_int_equal(sl_options_set(o, SL_OPT_EPOCH, 1), 0);
    assert_int_equal(tu_collect(ds, o, &b, &nb, NULL), SL_EOF);
    assert_int_equal(na, nb);
    assert_true(memcmp(a, b, na * sizeof *a) != 0);
    free(a), free(b);
    sl_options_free(o);
    sl_dataset_release(ds);
    /* an infinite input cannot be split into equal steps */
    sl_dist_context c = {.rank = 0, .world_size = 2};
    assert_null(sl_distribute(sl_repeat(sl_range(0, 4, 1), -1), &c, 0));
    assert_int_equal(sl_last_error_code(), SL_EINVAL);
    c.rank = 2;
    assert_null(sl_distribute(sl_range(0, 4, 1), &c, 0));
    assert_null(sl_distribute(sl_range(0, 4, 1), NULL, 8));
}

/* ---- files ---- */

static char dir[256];

static void write_shards(int files, int per_file)
{
    tu_tmpdir(dir);
    for (int f = 0; f < files; f++) {
        ru_buf b = {0};
        for (int i = 0; i < per_file; i++) {
            char rec[32];
            int len = snprintf(rec, sizeof rec, "%d", f * per_file + i);
            ru_record(&b, rec, (size_t)len);
        }
        char path[400];
        snprintf(path, sizeof path, "%s/part-%02d.tfrecord", dir, f);
        ru_write(path, b.p, b.n);
        free(b.p);
    }
}

static sl_dataset *records(unsigned list_flags)
{
    char pat[400];
    snprintf(pat, sizeof pat, "%s/*.tfrecord", dir);
    const char *pats[] = {pat};
    return sl_tfrecord(sl_list_files(pats, 1, list_flags, 3), 0, SL_WITH_PATHS);
}

/* Records of one rank: which files they came from (bit mask), how many. */
static int64_t rank_records(sl_dataset *ds, unsigned *files_seen, int64_t *values, int max)
{
    sl_iterator *it = sl_iterator_create(ds, NULL);
    assert_non_null(it);
    sl_element *el;
    int64_t k = 0;
    *files_seen = 0;
    while (sl_next(it, &el) == 0) {
        size_t len;
        const char *rec = sl_tensor_string(sl_element_tensor(el, 0), 0, &len);
        const char *path = sl_tensor_string(sl_element_tensor(el, 1), 0, &len);
        const char *part = strstr(path, "part-");
        assert_non_null(part);
        *files_seen |= 1u << atoi(part + 5);
        if (k < max)
            values[k] = atoll(rec);
        k++;
        sl_element_release(el);
    }
    sl_iterator_free(it);
    sl_dataset_release(ds);
    return k;
}

static void test_split_by_file(void **state)
{
    (void)state;
    write_shards(5, 4); /* 20 records */
    for (int world = 2; world <= 4; world++) {
        unsigned all = 0;
        int64_t total = 0;
        for (int r = 0; r < world; r++) {
            int64_t v[32];
            unsigned seen;
            int64_t k = rank_records(dist(records(0), r, world, 0), &seen, v, 32);
            /* a rank reads its own files only: ceil(5 / world) of them */
            assert_int_equal(__builtin_popcount(seen), (5 + world - 1) / world);
            assert_int_equal(k, 4 * ((5 + world - 1) / world));
            all |= seen;
            total += k;
        }
        assert_int_equal(all, 0x1f);
        assert_true(total >= 20);
    }
    /* over interleave too, and with a shuffled list each epoch's split is
     * a new one */
    unsigned seen0, seen1;
    int64_t v[32];
    rank_records(dist(records(SL_LIST_SHUFFLE), 0, 2, 0), &seen0, v, 32);
    assert_int_equal(__builtin_popcount(seen0), 3);
    char pat[400];
    snprintf(pat, sizeof pat, "%s/*.tfrecord", dir);
    const char *pats[] = {pat};
    int comp = 0;
    sl_dataset *il = sl_interleave(sl_list_files(pats, 1, 0, -1), sl_tfrecord_fn, &comp, 2, 1,
                                   1, 0);
    sl_dist_context c = {.rank = 1, .world_size = 2};
    sl_dataset *d = sl_distribute(il, &c, SL_DISTRIBUTE_BY_FILE);
    assert_non_null(d);
    assert_int_equal(tu_count(d, NULL), 12); /* files 1, 3 and (padding) 0 */
    sl_dataset_release(d);
    /* fewer files than ranks: records split by position (AUTO), or an
     * error when BY_FILE was asked */
    int64_t k = rank_records(dist(records(0), 5, 6, 0), &seen1, v, 32);
    assert_true(k == 3 || k == 4);
    for (int64_t i = 0; i < k && i < 32; i++)
        assert_int_equal(v[i] % 6, 5);
    c = (sl_dist_context){.rank = 0, .world_size = 6};
    assert_null(sl_distribute(records(0), &c, SL_DISTRIBUTE_BY_FILE));
    assert_non_null(strstr(sl_last_error(), "fewer"));
    tu_rmdir(dir);
}

/* Reads move below the split: a rank reads only its own files' bytes. */
static void test_reads_pushed_down(void **state)
{
    (void)state;
    tu_tmpdir(dir);
    const char *paths[8];
    char store[8][400];
    for (int i = 0; i < 8; i++) {
        snprintf(store[i], sizeof store[i], "%s/f%d", dir, i);
        char body[1000];
        memset(body, 'a' + i, sizeof body);
        ru_write(store[i], body, (size_t)(100 * (i + 1)));
        paths[i] = store[i];
    }
    for (int r = 0; r < 3; r++) {
        sl_dataset *ds = dist(sl_read_files(sl_from_files(paths, NULL, 8), 0), r, 3, 0);
        sl_iterator *it = sl_iterator_create(ds, NULL);
        sl_element *el;
        int64_t bytes = 0;
        while (sl_next(it, &el) == 0) {
            bytes += (int64_t)sl_tensor_nbytes(sl_element_tensor(el, 0));
            sl_element_release(el);
        }
        /* rank 0: files 0, 3, 6; rank 1: 1, 4, 7; rank 2: 2, 5 and 0 */
        int64_t want[3] = {100 * (1 + 4 + 7), 100 * (2 + 5 + 8), 100 * (3 + 6 + 1)};
        assert_int_equal(sl_iterator_stat(it, SL_STAT_BYTES_READ), want[r]);
        assert_int_equal(sl_iterator_stat(it, SL_STAT_PADDED), r == 2);
        sl_iterator_free(it);
        sl_dataset_release(ds);
    }
    tu_rmdir(dir);
}

/* Each rank's state restores its own position, padding included; another
 * world size is refused. */
static void test_resume(void **state)
{
    (void)state;
    int64_t n = 10;
    for (int stop = 0; stop <= 3; stop++) {
        sl_dataset *ds = dist(make_shuffled(&n), 3, 4, 0); /* 3 elements, the last padded */
        sl_options *o = tu_opts(2, 7);
        int64_t *full;
        size_t nf;
        assert_int_equal(tu_collect(ds, o, &full, &nf, NULL), SL_EOF);
        assert_int_equal(nf, 3);
        sl_iterator *it = sl_iterator_create(ds, o);
        sl_element *el;
        for (int i = 0; i < stop; i++) {
            assert_int_equal(sl_next(it, &el), 0);
            sl_element_release(el);
        }
        unsigned char buf[4096];
        int64_t len = sl_iterator_save(it, buf, sizeof buf);
        assert_true(len > 0);
        sl_iterator_free(it);
        it = sl_iterator_restore(ds, buf, (size_t)len, o);
        assert_non_null(it);
        for (int i = stop; i < 3; i++) {
            assert_int_equal(sl_next(it, &el), 0);
            assert_int_equal(sl_tensor_int64(sl_element_tensor(el, 0)), full[i]);
            sl_element_release(el);
        }
        assert_int_equal(sl_next(it, &el), SL_EOF);
        sl_iterator_free(it);
        sl_dataset *other = dist(make_shuffled(&n), 3, 5, 0);
        assert_null(sl_iterator_restore(other, buf, (size_t)len, o));
        assert_int_equal(sl_last_error_code(), SL_EMISMATCH);
        sl_dataset_release(other);
        free(full);
        sl_options_free(o);
        sl_dataset_release(ds);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup(test_env_launchers, clear_env),
        cmocka_unit_test_setup(test_env_precedence, clear_env),
        cmocka_unit_test_setup(test_env_errors, clear_env),
        cmocka_unit_test(test_equal_steps),
        cmocka_unit_test(test_global_order),
        cmocka_unit_test(test_split_by_file),
        cmocka_unit_test(test_reads_pushed_down),
        cmocka_unit_test(test_resume),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
