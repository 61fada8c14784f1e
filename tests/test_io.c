/* The I/O engine (both backends) and read_files: contents and layout,
 * order at several depths, backend choice (option, SLUICE_IO), statistics,
 * big files, per-file errors, cancellation with reads in flight, the RAM
 * budget. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include "runtime/io.h"
#include "testutil.h"

#define NFILES 40

static char dir[256];
static char *paths[NFILES];
static size_t sizes[NFILES];
static int64_t total_size;

static unsigned char pattern(int file, size_t j)
{
    return (unsigned char)(file * 131 + j * 7 + (j >> 9));
}

static void write_file(const char *path, int file, size_t size)
{
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    unsigned char buf[4096];
    for (size_t at = 0; at < size;) {
        size_t n = size - at < sizeof buf ? size - at : sizeof buf;
        for (size_t j = 0; j < n; j++)
            buf[j] = pattern(file, at + j);
        assert_int_equal(fwrite(buf, 1, n, f), n);
        at += n;
    }
    assert_int_equal(fclose(f), 0);
}

static char *path_in(const char *name)
{
    char *p = malloc(strlen(dir) + strlen(name) + 2);
    sprintf(p, "%s/%s", dir, name);
    return p;
}

static int setup(void **state)
{
    (void)state;
    tu_tmpdir(dir);
    total_size = 0;
    for (int i = 0; i < NFILES; i++) {
        char name[32];
        snprintf(name, sizeof name, "f%02d.bin", i);
        paths[i] = path_in(name);
        /* 1 byte up to ~300 KiB, one of 8 MiB */
        sizes[i] = i == 17 ? (8u << 20) : 1 + (size_t)i * i * 197;
        write_file(paths[i], i, sizes[i]);
        total_size += (int64_t)sizes[i];
    }
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    for (int i = 0; i < NFILES; i++)
        free(paths[i]);
    tu_rmdir(dir);
    return 0;
}

static bool uring_works(void)
{
    sl__io *io;
    int rc = sl__io_open(SL_IO_URING, 4, "probe", &io);
    sl__io_close(io);
    return rc == 0;
}

static void skip_without_uring(void)
{
    if (!uring_works()) {
        print_message("io_uring cannot be set up here (%s): skipping\n", sl_last_error());
        skip();
    }
}

static sl_options *io_opts(int backend, int depth)
{
    sl_options *o = tu_opts(2, 0);
    assert_int_equal(sl_options_set(o, SL_OPT_IO_BACKEND, backend), 0);
    assert_int_equal(sl_options_set(o, SL_OPT_IO_DEPTH, depth), 0);
    return o;
}

static sl_dataset *labelled_files(int n)
{
    int64_t labels[NFILES];
    for (int i = 0; i < n; i++)
        labels[i] = 1000 + i;
    return sl_from_files((const char *const *)paths, labels, (size_t)n);
}

static void check_bytes(const sl_element *el, int file)
{
    const sl_tensor *t = sl_element_tensor(el, 0);
    assert_int_equal(sl_tensor_dtype(t), SL_UINT8);
    assert_int_equal(sl_tensor_ndim(t), 1);
    assert_int_equal(sl_tensor_shape(t)[0], (int64_t)sizes[file]);
    assert_int_equal(sl_tensor_nbytes(t), sizes[file]);
    const unsigned char *d = sl_tensor_data(t);
    for (size_t j = 0; j < sizes[file]; j++)
        if (d[j] != pattern(file, j)) {
            print_error("file %d byte %zu: %u != %u\n", file, j, d[j], pattern(file, j));
            fail();
        }
}

/* Reads all files with labels and checks every element; returns the
 * backend the iterator reported. */
static int read_all(const sl_options *o)
{
    sl_dataset *ds = sl_read_files(labelled_files(NFILES), SL_WITH_PATHS);
    assert_non_null(ds);
    assert_string_equal(sl_dataset_name(ds), "read");
    assert_int_equal(sl_dataset_cardinality(ds), NFILES);
    sl_iterator *it = sl_iterator_create(ds, o);
    if (!it)
        print_error("%s\n", sl_last_error());
    assert_non_null(it);
    sl_element *el;
    int rc, i = 0;
    while ((rc = sl_next(it, &el)) == 0) {
        assert_true(i < NFILES);
        assert_int_equal(sl_element_size(el), 3);
        check_bytes(el, i);
        size_t len;
        const char *p = sl_tensor_string(sl_element_tensor(el, 2), 0, &len);
        assert_int_equal(len, strlen(paths[i]));
        assert_memory_equal(p, paths[i], len);
        const sl_tensor *lab = sl_element_tensor(el, 1);
        assert_int_equal(sl_tensor_dtype(lab), SL_INT64);
        assert_int_equal(sl_tensor_ndim(lab), 0);
        assert_int_equal(sl_tensor_int64(lab), 1000 + i);
        sl_element_release(el);
        i++;
    }
    if (rc != SL_EOF)
        print_error("rc %d: %s\n", rc, sl_iterator_errmsg(it));
    assert_int_equal(rc, SL_EOF);
    assert_int_equal(i, NFILES);
    for (int k = 0; k < 3; k++) {
        assert_int_equal(sl_next(it, &el), SL_EOF);
        assert_null(el);
    }
    assert_int_equal(sl_iterator_stat(it, SL_STAT_BYTES_READ), total_size);
    assert_int_equal(sl_iterator_stat(it, SL_STAT_BUFFERED_BYTES), 0);
    int backend = (int)sl_iterator_stat(it, SL_STAT_IO_BACKEND);
    sl_iterator_free(it);
    sl_dataset_release(ds);
    return backend;
}

/* ---- where io_uring is refused (a container's seccomp policy) ---- */

static int fallback_logs;

static void count_fallback_log(void *user, sl_log_level level, const char *msg)
{
    (void)user;
    if (level == SL_LOG_INFO &&
        !strcmp(msg, "io_uring unavailable (Operation not permitted); reading with pread"))
        fallback_logs++;
}

static int refuse_uring(void)
{
    struct sock_filter f[] = {
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_io_uring_setup, 0, 1),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | EPERM),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
    };
    struct sock_fprog prog = {sizeof f / sizeof *f, f};
    if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0)
        return -1;
    return (int)syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0, &prog);
}

#define CHILD_CHECK(cond)                                                        \
    do {                                                                         \
        if (!(cond)) {                                                           \
            fprintf(stderr, "child: line %d: %s (%s)\n", __LINE__, #cond,        \
                    sl_last_error());                                            \
            return 1;                                                            \
        }                                                                        \
    } while (0)

static int count_elements(sl_iterator *it)
{
    sl_element *el;
    int n = 0;
    while (sl_next(it, &el) == 0) {
        sl_element_release(el);
        n++;
    }
    return n;
}

/* In a child process under the filter: AUTO falls back to pread and says
 * so once; asking for io_uring fails at iterator creation. */
static int refused_child(void)
{
    if (refuse_uring() < 0) {
        fprintf(stderr, "cannot install a seccomp filter: %s\n", strerror(errno));
        return TU_SKIP;
    }
    sl_set_log_callback(count_fallback_log, NULL);
    sl_set_log_level(SL_LOG_INFO);
    sl_dataset *ds = sl_read_files(sl_from_files((const char *const *)paths, NULL, 5), 0);
    sl_options *o = sl_options_create();
    sl_options_set(o, SL_OPT_THREADS, 1);
    for (int pass = 0; pass < 3; pass++) {
        sl_iterator *it = sl_iterator_create(ds, o);
        CHILD_CHECK(it != NULL);
        CHILD_CHECK(sl_iterator_stat(it, SL_STAT_IO_BACKEND) == SL_IO_PREAD);
        CHILD_CHECK(count_elements(it) == 5);
        sl_iterator_free(it);
    }
    CHILD_CHECK(fallback_logs == 1);
    sl_options_set(o, SL_OPT_IO_BACKEND, SL_IO_URING);
    CHILD_CHECK(sl_iterator_create(ds, o) == NULL);
    CHILD_CHECK(sl_last_error_code() == SL_EUNSUPPORTED);
    CHILD_CHECK(!strcmp(sl_last_error(), "read: io_uring unavailable (Operation not permitted)"));
    sl_options_set(o, SL_OPT_IO_BACKEND, SL_IO_AUTO);
    setenv("SLUICE_IO", "uring", 1);
    CHILD_CHECK(sl_iterator_create(ds, o) == NULL);
    CHILD_CHECK(sl_last_error_code() == SL_EUNSUPPORTED);
    CHILD_CHECK(!strcmp(sl_last_error(), "read: io_uring unavailable (Operation not permitted), "
                                         "and SLUICE_IO=uring asks for it"));
    sl_options_free(o);
    sl_dataset_release(ds);
    return 0;
}

static void test_uring_refused(void **state)
{
    (void)state;
#ifdef SLUICE_NO_URING
    skip(); /* a kernel's refusal is moot in a build without io_uring (test_features) */
#endif
    fflush(NULL);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0)
        _exit(refused_child());
    int status;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFEXITED(status));
    if (WEXITSTATUS(status) == TU_SKIP)
        skip();
    assert_int_equal(WEXITSTATUS(status), 0);
}

/* ---- the engine itself ---- */

static void engine_reads(int backend)
{
    sl__io *io;
    int rc = sl__io_open(backend, 8, "test", &io);
    if (rc)
        print_error("%s\n", sl_last_error());
    assert_int_equal(rc, 0);
    assert_int_equal(sl__io_backend(io), backend);
    int fd = open(paths[17], O_RDONLY);
    assert_true(fd >= 0);
    enum { PIECES = 24, PIECE = 100000 };
    unsigned char *buf = malloc((size_t)PIECES * PIECE);
    int64_t res[PIECES];
    int queued = 0, done = 0;
    /* more pieces than the depth: refill as completions come back, each
     * batch submitted at once */
    while (done < PIECES) {
        int outstanding = queued - done;
        while (queued < PIECES && outstanding < 8) {
            /* pieces in reverse file order, so completions arrive in any order */
            size_t off = (size_t)(PIECES - 1 - queued) * PIECE;
            int64_t *r = &res[PIECES - 1 - queued];
            assert_int_equal(sl__io_prep(io, fd, buf + off, PIECE, off, r), 0);
            queued++;
            outstanding++;
        }
        assert_int_equal(sl__io_submit(io), 0);
        sl__io_cqe cqe[8];
        int n = sl__io_reap(io, cqe, 8, true);
        assert_true(n >= 1 && n <= 8);
        for (int k = 0; k < n; k++)
            *(int64_t *)cqe[k].user = cqe[k].res;
        done += n;
    }
    for (int k = 0; k < PIECES; k++)
        assert_int_equal(res[k], PIECE);
    for (size_t j = 0; j < (size_t)PIECES * PIECE; j++)
        if (buf[j] != pattern(17, j))
            fail_msg("byte %zu differs", j);
    /* at the end of the file, and past it */
    int64_t tail = 0, past = 0;
    uint64_t end = sizes[17];
    assert_int_equal(sl__io_prep(io, fd, buf, PIECE, end - 10, &tail), 0);
    assert_int_equal(sl__io_prep(io, fd, buf + PIECE, PIECE, end + 10, &past), 0);
    assert_int_equal(sl__io_submit(io), 0);
    for (int got = 0; got < 2;) {
        sl__io_cqe cqe[2];
        int n = sl__io_reap(io, cqe, 2, true);
        assert_true(n >= 1);
        for (int k = 0; k < n; k++)
            *(int64_t *)cqe[k].user = cqe[k].res;
        got += n;
    }
    assert_int_equal(tail, 10);
    assert_int_equal(past, 0);
    /* a bad descriptor completes with -EBADF, it does not fail the engine */
    int64_t bad = 0;
    assert_int_equal(sl__io_prep(io, 1000000, buf, 10, 0, &bad), 0);
    sl__io_cqe one;
    assert_int_equal(sl__io_reap(io, &one, 1, true), 1);
    assert_ptr_equal(one.user, &bad);
    assert_int_equal(one.res, -EBADF);
    /* nothing outstanding: a non-waiting reap finds nothing */
    assert_int_equal(sl__io_reap(io, &one, 1, false), 0);
    sl__io_close(io);
    close(fd);
    free(buf);
}

static void test_engine_uring(void **state)
{
    (void)state;
    skip_without_uring();
    engine_reads(SL_IO_URING);
}

static void test_engine_pread(void **state)
{
    (void)state;
    engine_reads(SL_IO_PREAD);
}

/* Closing with reads queued and in flight waits for them: no write lands
 * in freed memory (ASan), nothing leaks. */
static void close_busy(int backend)
{
    sl__io *io;
    assert_int_equal(sl__io_open(backend, 64, "test", &io), 0);
    int fd = open(paths[17], O_RDONLY);
    unsigned char *buf = malloc((size_t)64 * 65536);
    for (int k = 0; k < 48; k++)
        assert_int_equal(
            sl__io_prep(io, fd, buf + (size_t)k * 65536, 65536, (uint64_t)k * 65536, NULL), 0);
    assert_int_equal(sl__io_submit(io), 0);
    for (int k = 48; k < 64; k++) /* queued, never submitted */
        assert_int_equal(sl__io_prep(io, fd, buf + (size_t)k * 65536, 65536, 0, NULL), 0);
    assert_int_equal(sl__io_prep(io, fd, buf, 1, 0, NULL), SL_EBUSY);
    sl__io_close(io);
    free(buf);
    close(fd);
}

static void test_engine_close_busy(void **state)
{
    (void)state;
    close_busy(SL_IO_PREAD);
    if (uring_works())
        close_busy(SL_IO_URING);
}

/* ---- read_files ---- */

static void test_read_pread(void **state)
{
    (void)state;
    sl_options *o = io_opts(SL_IO_PREAD, 32);
    assert_int_equal(read_all(o), SL_IO_PREAD);
    sl_options_free(o);
}

static void test_read_uring(void **state)
{
    (void)state;
    skip_without_uring();
    sl_options *o = io_opts(SL_IO_URING, 32);
    assert_int_equal(read_all(o), SL_IO_URING);
    sl_options_free(o);
}

static void test_depths(void **state)
{
    (void)state;
    int depths[] = {1, 2, 64};
    for (int b = SL_IO_URING; b <= SL_IO_PREAD; b++) {
        if (b == SL_IO_URING && !uring_works())
            continue;
        for (size_t d = 0; d < sizeof depths / sizeof *depths; d++) {
            sl_options *o = io_opts(b, depths[d]);
            assert_int_equal(read_all(o), b);
            sl_options_free(o);
        }
    }
}

static void test_env_override(void **state)
{
    (void)state;
    sl_options *o = io_opts(SL_IO_AUTO, 8);
    int auto_backend = read_all(o);
    assert_true(auto_backend == SL_IO_URING || auto_backend == SL_IO_PREAD);
    if (uring_works())
        assert_int_equal(auto_backend, SL_IO_URING);
    assert_int_equal(setenv("SLUICE_IO", "pread", 1), 0);
    assert_int_equal(read_all(o), SL_IO_PREAD);
    /* an explicit option wins over the environment */
    if (uring_works()) {
        sl_options *u = io_opts(SL_IO_URING, 8);
        assert_int_equal(read_all(u), SL_IO_URING);
        sl_options_free(u);
    }
    /* an unknown value is ignored (with a warning) */
    assert_int_equal(setenv("SLUICE_IO", "carrier-pigeon", 1), 0);
    assert_int_equal(read_all(o), auto_backend);
    assert_int_equal(unsetenv("SLUICE_IO"), 0);
    sl_options_free(o);
}

static void test_no_backend_before_reading(void **state)
{
    (void)state;
    sl_dataset *ds = sl_range(0, 3, 1);
    sl_iterator *it = sl_iterator_create(ds, NULL);
    assert_non_null(it);
    assert_int_equal(sl_iterator_stat(it, SL_STAT_IO_BACKEND), SL_IO_AUTO);
    assert_int_equal(sl_iterator_stat(it, SL_STAT_BYTES_READ), 0);
    sl_iterator_free(it);
    sl_dataset_release(ds);
}

static void test_repeat_and_unlabelled(void **state)
{
    (void)state;
    sl_dataset *files = sl_from_files((const char *const *)paths, NULL, 5);
    sl_dataset *ds = sl_repeat(sl_read_files(files, 0), 3);
    sl_options *o = io_opts(SL_IO_AUTO, 4);
    sl_iterator *it = sl_iterator_create(ds, o);
    assert_non_null(it);
    sl_element *el;
    int n = 0;
    while (sl_next(it, &el) == 0) {
        assert_int_equal(sl_element_size(el), 1); /* the path is not kept */
        check_bytes(el, n % 5);
        sl_element_release(el);
        n++;
    }
    assert_int_equal(n, 15);
    int64_t five = 0;
    for (int i = 0; i < 5; i++)
        five += (int64_t)sizes[i];
    assert_int_equal(sl_iterator_stat(it, SL_STAT_BYTES_READ), 3 * five);
    sl_iterator_free(it);
    sl_options_free(o);
    sl_dataset_release(ds);
}

/* take/skip/shard move below the read node: dropped files are not read. */
static void test_selection_reads_less(void **state)
{
    (void)state;
    sl_dataset *ds =
        sl_shard(sl_skip(sl_take(sl_read_files(labelled_files(NFILES), 0), 30), 3), 4, 1);
    assert_non_null(ds);
    assert_string_equal(sl_dataset_name(ds), "read");
    assert_int_equal(sl_dataset_cardinality(ds), 7); /* positions 3..29, every 4th from 1 */
    sl_iterator *it = sl_iterator_create(ds, NULL);
    sl_element *el;
    int64_t expect = 0;
    int n = 0;
    while (sl_next(it, &el) == 0) {
        int file = 3 + 1 + 4 * n;
        assert_int_equal(sl_element_size(el), 2);
        assert_int_equal(sl_tensor_int64(sl_element_tensor(el, 1)), 1000 + file);
        check_bytes(el, file);
        expect += (int64_t)sizes[file];
        sl_element_release(el);
        n++;
    }
    assert_int_equal(n, 7);
    assert_int_equal(sl_iterator_stat(it, SL_STAT_BYTES_READ), expect);
    sl_iterator_free(it);
    sl_dataset_release(ds);
}

/* ---- errors ---- */

typedef struct err_case {
    const char *path;
    int code;
    const char *reason;
} err_case;

static void expect_fail(sl_dataset *ds, int good_first, const err_case *c)
{
    sl_options *o = io_opts(SL_IO_AUTO, 8);
    sl_iterator *it = sl_iterator_create(ds, o);
    assert_non_null(it);
    sl_element *el;
    for (int i = 0; i < good_first; i++) {
        assert_int_equal(sl_next(it, &el), 0);
        check_bytes(el, i);
        sl_element_release(el);
    }
    int rc = sl_next(it, &el);
    assert_null(el);
    char expect[1024];
    snprintf(expect, sizeof expect, "read: %s: %s", c->path, c->reason);
    if (rc != c->code || strcmp(sl_iterator_errmsg(it), expect))
        print_error("got %d \"%s\", expected %d \"%s\"\n", rc, sl_iterator_errmsg(it), c->code,
                    expect);
    assert_int_equal(rc, c->code);
    assert_string_equal(sl_iterator_errmsg(it), expect);
    sl_iterator_free(it);
    sl_options_free(o);
}

static void test_file_errors(void **state)
{
    (void)state;
    char *missing = path_in("missing.bin"), *empty = path_in("empty.bin");
    char *sub = path_in("sub.bin");
    write_file(empty, 0, 0);
    assert_int_equal(mkdir(sub, 0755), 0);
    const char *cpu = "/sys/devices/system/cpu/online"; /* says 4096 bytes, has fewer */
    struct stat st;
    bool have_sys = stat(cpu, &st) == 0 && st.st_size == 4096;
    char reason[128];
    const err_case cases[] = {
        {missing, SL_ENOENT, "No such file or directory"},
        {empty, SL_ECORRUPT, "empty file"},
        {sub, SL_EIO, "is a directory"},
        {"/dev/null", SL_EIO, "not a regular file"},
        {cpu, SL_EIO, reason},
    };
    int ncases = have_sys ? 5 : 4;
    if (have_sys) {
        FILE *f = fopen(cpu, "r");
        char text[4096];
        size_t got = fread(text, 1, sizeof text, f);
        fclose(f);
        snprintf(reason, sizeof reason,
                 "file changed size while reading (expected 4096 bytes, got %zu)", got);
    } else {
        print_message("%s is missing: not checking short reads\n", cpu);
    }
    for (int b = SL_IO_URING; b <= SL_IO_PREAD; b++) {
        if (b == SL_IO_URING && !uring_works())
            continue;
        for (int k = 0; k < ncases; k++) {
            /* 3 good files, the bad one, 2 good ones */
            const char *list[6] = {paths[0], paths[1], paths[2], cases[k].path, paths[3], paths[4]};
            sl_dataset *ds = sl_read_files(sl_from_files(list, NULL, 6), 0);
            assert_int_equal(setenv("SLUICE_IO", b == SL_IO_URING ? "uring" : "pread", 1), 0);
            expect_fail(ds, 3, &cases[k]);
            /* under SKIP the others all come, in order */
            sl_options *o = io_opts(SL_IO_AUTO, 8);
            assert_int_equal(sl_options_set(o, SL_OPT_ERROR_POLICY, SL_ERRORS_SKIP), 0);
            assert_int_equal(sl_options_set(o, SL_OPT_ERROR_LOG_LIMIT, 0), 0);
            sl_iterator *it = sl_iterator_create(ds, o);
            assert_int_equal(sl_iterator_stat(it, SL_STAT_IO_BACKEND), b);
            sl_element *el;
            const int order[5] = {0, 1, 2, 3, 4};
            for (int i = 0; i < 5; i++) {
                assert_int_equal(sl_next(it, &el), 0);
                check_bytes(el, order[i]);
                sl_element_release(el);
            }
            assert_int_equal(sl_next(it, &el), SL_EOF);
            assert_int_equal(sl_iterator_stat(it, SL_STAT_ERRORS_SKIPPED), 1);
            sl_iterator_free(it);
            sl_options_free(o);
            sl_dataset_release(ds);
        }
    }
    assert_int_equal(unsetenv("SLUICE_IO"), 0);
    free(missing);
    free(empty);
    free(sub);
}

/* The code and message for a file this process may not read: 0 when they
 * are SL_EACCES "read: <path>: Permission denied". */
static int unreadable_verdict(const char *path)
{
    const char *list[1] = {path};
    sl_dataset *ds = sl_read_files(sl_from_files(list, NULL, 1), 0);
    /* its own workers: a forked child has none of the parent's threads */
    sl_options *o = sl_options_create();
    sl_options_set(o, SL_OPT_THREADS, 1);
    sl_iterator *it = sl_iterator_create(ds, o);
    sl_options_free(o);
    sl_element *el = NULL;
    int rc = it ? sl_next(it, &el) : SL_EINVAL;
    char expect[1024];
    snprintf(expect, sizeof expect, "read: %s: Permission denied", path);
    int bad = rc != SL_EACCES || strcmp(sl_iterator_errmsg(it), expect) != 0;
    if (bad)
        fprintf(stderr, "got %d \"%s\", expected %d \"%s\"\n", rc, sl_iterator_errmsg(it),
                SL_EACCES, expect);
    sl_element_release(el);
    sl_iterator_free(it);
    sl_dataset_release(ds);
    return bad;
}

/* Root reads mode-000 files: the check then runs in a child that gives up
 * root for "nobody". */
static void test_unreadable(void **state)
{
    (void)state;
    char *p = path_in("secret.bin");
    write_file(p, 0, 100);
    assert_int_equal(chmod(p, 0), 0);
    int fd = open(p, O_RDONLY);
    if (fd < 0) {
        assert_int_equal(unreadable_verdict(p), 0);
        free(p);
        return;
    }
    close(fd);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        if (setgid(65534) != 0 || setuid(65534) != 0)
            _exit(TU_SKIP);
        _exit(unreadable_verdict(p));
    }
    int status;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    free(p);
    assert_true(WIFEXITED(status));
    if (WEXITSTATUS(status) == TU_SKIP) {
        print_message("root, and cannot become nobody: not checking unreadable files\n");
        skip();
    }
    assert_int_equal(WEXITSTATUS(status), 0);
}

static int fail_at_five(sl_map_ctx *ctx, const sl_element *in, sl_element **out, void *user)
{
    (void)user;
    if (sl_map_ctx_index(ctx) == 5)
        return sl_map_ctx_error(ctx, SL_ECALLBACK, "five");
    *out = sl_element_retain((sl_element *)in);
    return 0;
}

/* An error from below comes out after the files before it, unchanged. */
static void test_input_error_in_order(void **state)
{
    (void)state;
    sl_dataset *ds =
        sl_read_files(sl_map(labelled_files(NFILES), "five", fail_at_five, NULL, 2, 0), 0);
    sl_options *o = io_opts(SL_IO_AUTO, 16);
    sl_iterator *it = sl_iterator_create(ds, o);
    sl_element *el;
    for (int i = 0; i < 5; i++) {
        assert_int_equal(sl_next(it, &el), 0);
        check_bytes(el, i);
        sl_element_release(el);
    }
    assert_int_equal(sl_next(it, &el), SL_ECALLBACK);
    assert_string_equal(sl_iterator_errmsg(it), "map(five): five");
    sl_iterator_free(it);
    sl_options_free(o);
    sl_dataset_release(ds);
}

static void test_not_a_path(void **state)
{
    (void)state;
    sl_dataset *ds = sl_read_files(sl_range(0, 3, 1), 0);
    sl_iterator *it = sl_iterator_create(ds, NULL);
    sl_element *el;
    assert_int_equal(sl_next(it, &el), SL_EDTYPE);
    assert_string_equal(sl_iterator_errmsg(it),
                        "read: tensor 0 must be a string (a path), not int64");
    sl_iterator_free(it);
    sl_dataset_release(ds);
    assert_null(sl_read_files(NULL, 0));
}

/* ---- cancellation and memory ---- */

static int count_fds(void)
{
    DIR *d = opendir("/proc/self/fd");
    int n = 0;
    while (d && readdir(d))
        n++;
    if (d)
        closedir(d);
    return n;
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

static void test_cancel_in_flight(void **state)
{
    (void)state;
    int fds = count_fds();
    for (int b = SL_IO_URING; b <= SL_IO_PREAD; b++) {
        if (b == SL_IO_URING && !uring_works())
            continue;
        for (int round = 0; round < 5; round++) {
            sl_dataset *ds = sl_read_files(sl_repeat(labelled_files(NFILES), 20), 0);
            sl_options *o = io_opts(b, 64);
            sl_iterator *it = sl_iterator_create(ds, o);
            sl_element *el;
            for (int i = 0; i < 3; i++) {
                assert_int_equal(sl_next(it, &el), 0);
                sl_element_release(el);
            }
            double t0 = now_s();
            sl_iterator_free(it);
            assert_true(now_s() - t0 < 2.0);
            sl_options_free(o);
            sl_dataset_release(ds);
        }
    }
    assert_int_equal(count_fds(), fds);
}

/* Each buffer may exceed the budget by one element at most. */
static void test_ram_budget(void **state)
{
    (void)state;
    const int64_t budget = 600000; /* a few of the bigger files */
    sl_dataset *ds = sl_read_files(sl_take(labelled_files(NFILES), 17), 0); /* not the 8 MiB one */
    sl_options *o = io_opts(SL_IO_AUTO, 64);
    assert_int_equal(sl_options_set(o, SL_OPT_RAM_BUDGET, budget), 0);
    sl_iterator *it = sl_iterator_create(ds, o);
    sl_element *el;
    int n = 0;
    size_t biggest = 0;
    while (sl_next(it, &el) == 0) {
        check_bytes(el, n);
        if (sizes[n] > biggest)
            biggest = sizes[n];
        sl_element_release(el);
        struct timespec ts = {0, 2000000};
        nanosleep(&ts, NULL); /* a slow consumer: the reader runs ahead */
        n++;
    }
    assert_int_equal(n, 17);
    int64_t peak = sl_iterator_stat(it, SL_STAT_PEAK_BUFFERED_BYTES);
    /* elements also hold their path (<= 300 bytes) and label */
    if (peak > budget + (int64_t)biggest + 512)
        print_error("peak %lld over budget %lld + %zu\n", (long long)peak, (long long)budget,
                    biggest);
    assert_true(peak <= budget + (int64_t)biggest + 512);
    assert_true(peak > 0);
    sl_iterator_free(it);
    sl_options_free(o);
    sl_dataset_release(ds);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        /* first: they fork, which must happen before the library starts
         * threads that outlive a test (the default runtime's): TSan refuses
         * threads in a child forked from a multi-threaded process */
        cmocka_unit_test(test_uring_refused),
        cmocka_unit_test(test_unreadable),
        cmocka_unit_test(test_engine_uring),
        cmocka_unit_test(test_engine_pread),
        cmocka_unit_test(test_engine_close_busy),
        cmocka_unit_test(test_read_pread),
        cmocka_unit_test(test_read_uring),
        cmocka_unit_test(test_depths),
        cmocka_unit_test(test_env_override),
        cmocka_unit_test(test_no_backend_before_reading),
        cmocka_unit_test(test_repeat_and_unlabelled),
        cmocka_unit_test(test_selection_reads_less),
        cmocka_unit_test(test_file_errors),
        cmocka_unit_test(test_input_error_in_order),
        cmocka_unit_test(test_not_a_path),
        cmocka_unit_test(test_cancel_in_flight),
        cmocka_unit_test(test_ram_budget),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
