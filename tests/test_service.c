/* The preprocessing service end to end (src/service/): a trainer (this
 * process, sl_service) and sluice-worker processes on loopback over UCX.
 * Each case compares the stream, batch by batch (a hash of each), with
 * the same pipeline iterated in one process: with three workers over TCP
 * and over shared memory, on two epochs; a worker killed with SIGKILL at
 * a random batch; a worker stopped with SIGSTOP (found by the heartbeat);
 * workers added mid-epoch; the trainer's checkpoint resumed by a new
 * trainer with another number of workers; workers started by mpirun used
 * as a launcher. Another pipeline, another version and a wrong secret are
 * refused. Every wait is bounded: a hang fails the test. */
#include <dirent.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include "testutil.h"

sl_dataset *service_pipeline_build(void *arg);

extern char **environ;

#define SEED 77
#define WAIT_NS (30ll * 1000000000)

static sl_options *opts(int64_t epoch)
{
    sl_options *o = tu_opts(2, SEED);
    sl_options_set(o, SL_OPT_EPOCH, epoch);
    return o;
}

/* The one-process stream of an epoch. */
static uint64_t *reference(int64_t epoch, int64_t *n)
{
    sl_dataset *ds = service_pipeline_build(NULL);
    assert_non_null(ds);
    sl_options *o = opts(epoch);
    sl_iterator *it = sl_iterator_create(ds, o);
    sl_options_free(o);
    uint64_t *d = NULL;
    int64_t k = 0;
    sl_element *el;
    while (sl_next(it, &el) == 0) {
        d = realloc(d, (size_t)(k + 1) * sizeof *d);
        d[k++] = tu_digest(el);
        sl_element_release(el);
    }
    sl_iterator_free(it);
    sl_dataset_release(ds);
    *n = k;
    return d;
}

/* Counter `name` of the service node in it's statistics (JSON). */
static int64_t service_counter(sl_iterator *it, const char *name)
{
    sl_stats *st = sl_iterator_stats(it);
    assert_non_null(st);
    const char *j = sl_stats_json(st);
    const char *node = strstr(j, "\"kind\":\"service\"");
    assert_non_null(node);
    char key[64];
    snprintf(key, sizeof key, "\"%s\":", name);
    const char *at = strstr(node, key);
    assert_non_null(at);
    int64_t v = strtoll(at + strlen(key), NULL, 10);
    sl_stats_free(st);
    return v;
}

/* ---- workers ------------------------------------------------------------ */

typedef struct worker_opts {
    const char *arg, *version, *secret;
} worker_opts;

static pid_t spawn_worker(int port, const worker_opts *w)
{
    char addr[64];
    snprintf(addr, sizeof addr, "127.0.0.1:%d", port);
    const char *argv[16] = {SLUICE_WORKER_BIN, "--library", SERVICE_PIPELINE_LIB,
                            "--symbol", "service_pipeline_build", "--address", addr,
                            "--threads", "1", "--version", w && w->version ? w->version : "v1",
                            "--connect-timeout", "20000"};
    int argc = 13;
    if (w && w->arg) {
        argv[argc++] = "--arg";
        argv[argc++] = w->arg;
    }
    argv[argc] = NULL;
    fflush(NULL);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        if (w && w->secret)
            setenv("SLUICE_SERVICE_SECRET", w->secret, 1);
        alarm(120);
        execv(SLUICE_WORKER_BIN, (char *const *)argv);
        _exit(127);
    }
    return pid;
}

/* The worker's exit status (or 128 + signal), waiting up to 30 s. */
static int reap(pid_t pid)
{
    int status;
    for (int i = 0; i < 300; i++) {
        if (waitpid(pid, &status, WNOHANG) == pid)
            return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
        tu_sleep_us(100000);
    }
    kill(pid, SIGKILL);
    waitpid(pid, &status, 0);
    fail_msg("worker %d did not end", (int)pid);
    return -1;
}

/* ---- the trainer ---------------------------------------------------------- */

static sl_dataset *trainer(int port)
{
    sl_service_spec spec;
    SL_SERVICE_SPEC_INIT(&spec);
    char addr[64];
    snprintf(addr, sizeof addr, "127.0.0.1:%d", port);
    spec.address = addr;
    spec.version = "v1";
    spec.heartbeat_ms = 100;
    spec.timeout_ms = 1000;
    spec.split_batches = 2;
    sl_dataset *ds = sl_service(service_pipeline_build(NULL), &spec);
    if (!ds)
        fail_msg("sl_service: %s", sl_last_error());
    return ds;
}

/* Hooks a test runs at batch k of the stream. */
typedef void (*at_batch_fn)(int64_t k, void *user);

/* Takes batches [from, to) of it, comparing with want; returns how many. */
static int64_t take(sl_iterator *it, const uint64_t *want, int64_t from, int64_t to,
                    at_batch_fn at, void *user)
{
    int64_t k = from;
    for (; k < to; k++) {
        if (at)
            at(k, user);
        sl_element *el;
        int rc = sl_next_timeout(it, &el, WAIT_NS);
        if (rc == SL_EOF)
            break;
        if (rc == SL_AGAIN)
            fail_msg("batch %lld: nothing in 30 s", (long long)k);
        if (rc < 0)
            fail_msg("batch %lld: %s", (long long)k, sl_iterator_errmsg(it));
        if (tu_digest(el) != want[k])
            fail_msg("batch %lld differs from the one-process stream", (long long)k);
        sl_element_release(el);
    }
    return k - from;
}

/* A whole epoch through the service, compared. */
static void epoch_through(sl_dataset *svc, int64_t epoch, at_batch_fn at, void *user)
{
    int64_t n;
    uint64_t *want = reference(epoch, &n);
    sl_options *o = opts(epoch);
    sl_iterator *it = sl_iterator_create(svc, o);
    sl_options_free(o);
    assert_non_null(it);
    assert_int_equal(take(it, want, 0, n + 1, at, user), n);
    sl_iterator_free(it);
    free(want);
}

static void setup_env(const char *tls)
{
    setenv("SLUICE_SERVICE_SECRET", "test-secret", 1);
    setenv("UCX_TLS", tls, 1);
    if (strstr(tls, "sm"))
        setenv("UCX_RNDV_SCHEME", "am", 1);
    else
        unsetenv("UCX_RNDV_SCHEME");
}

static void three_workers(const char *tls)
{
    setup_env(tls);
    sl_dataset *svc = trainer(0);
    int port = sl_service_port(svc);
    pid_t w[3];
    for (int i = 0; i < 3; i++)
        w[i] = spawn_worker(port, NULL);
    epoch_through(svc, 0, NULL, NULL);
    epoch_through(svc, 1, NULL, NULL);
    sl_dataset_release(svc); /* says goodbye: the workers end with 0 */
    for (int i = 0; i < 3; i++)
        assert_int_equal(reap(w[i]), 0);
}

static void test_tcp(void **state)
{
    (void)state;
    three_workers("tcp");
}

static void test_shared_memory(void **state)
{
    (void)state;
    three_workers("sm,tcp");
}

typedef struct sig_at {
    pid_t pid;
    int64_t at;
    int sig;
} sig_at;

static void send_sig(int64_t k, void *user)
{
    sig_at *s = user;
    if (k == s->at)
        kill(s->pid, s->sig);
}

static void test_killed(void **state)
{
    (void)state;
    setup_env("tcp");
    sl_dataset *svc = trainer(0);
    int port = sl_service_port(svc);
    pid_t w[3];
    for (int i = 0; i < 3; i++)
        w[i] = spawn_worker(port, NULL);
    srand((unsigned)time(NULL));
    sig_at s = {w[rand() % 3], 5 + rand() % 80, SIGKILL};
    print_message("killing worker %d at batch %lld\n", (int)s.pid, (long long)s.at);
    epoch_through(svc, 0, send_sig, &s);
    sl_dataset_release(svc);
    for (int i = 0; i < 3; i++)
        assert_int_equal(reap(w[i]), w[i] == s.pid ? 128 + SIGKILL : 0);
}

static void test_stopped(void **state)
{
    (void)state;
    setup_env("tcp");
    sl_dataset *svc = trainer(0);
    int port = sl_service_port(svc);
    pid_t w[2];
    for (int i = 0; i < 2; i++)
        w[i] = spawn_worker(port, NULL);
    int64_t n;
    uint64_t *want = reference(0, &n);
    sl_options *o = opts(0);
    sl_iterator *it = sl_iterator_create(svc, o);
    sl_options_free(o);
    sig_at s = {w[0], 10, SIGSTOP};
    assert_int_equal(take(it, want, 0, n + 1, send_sig, &s), n);
    /* the stopped worker's splits were computed again, and the statistics
     * say so: splits recomputed, one worker left, the bytes received */
    assert_true(service_counter(it, "recomputed") >= 1);
    assert_int_equal(service_counter(it, "workers"), 1);
    assert_true(service_counter(it, "net_bytes") > n * 8 * 16);
    sl_iterator_free(it);
    free(want);
    sl_dataset_release(svc);
    kill(w[0], SIGKILL); /* still stopped: its link was dropped */
    assert_int_equal(reap(w[0]), 128 + SIGKILL);
    assert_int_equal(reap(w[1]), 0);
}

/* One worker and a consumer with no step of its own: the report names the
 * service and says the workers are short. */
static void test_report(void **state)
{
    (void)state;
    setup_env("tcp");
    sl_dataset *svc = trainer(0);
    pid_t w = spawn_worker(sl_service_port(svc), NULL);
    int64_t n;
    uint64_t *want = reference(1, &n);
    sl_options *o = opts(1);
    sl_iterator *it = sl_iterator_create(svc, o);
    sl_options_free(o);
    assert_int_equal(take(it, want, 0, n + 1, NULL, NULL), n);
    char rep[8192];
    assert_true(sl_iterator_report_buf(it, rep, sizeof rep) > 0);
    if (getenv("SLUICE_TEST_SHOW_REPORT"))
        fputs(rep, stderr);
    if (!strstr(rep, "bottleneck: service") || !strstr(rep, "workers are short"))
        fail_msg("the report does not name the workers:\n%s", rep);
    assert_true(service_counter(it, "remote_busy_ns") > 0);
    sl_iterator_free(it);
    free(want);
    sl_dataset_release(svc);
    assert_int_equal(reap(w), 0);
}

typedef struct adder {
    int port;
    int64_t at;
    pid_t added[2];
} adder;

static void add_workers(int64_t k, void *user)
{
    adder *a = user;
    if (k == a->at)
        for (int i = 0; i < 2; i++)
            a->added[i] = spawn_worker(a->port, NULL);
}

static void test_added(void **state)
{
    (void)state;
    setup_env("tcp");
    sl_dataset *svc = trainer(0);
    adder a = {.port = sl_service_port(svc), .at = 20};
    pid_t first = spawn_worker(a.port, NULL);
    epoch_through(svc, 0, add_workers, &a);
    sl_dataset_release(svc);
    assert_int_equal(reap(first), 0);
    for (int i = 0; i < 2; i++)
        assert_int_equal(reap(a.added[i]), 0);
}

static void test_resumed(void **state)
{
    (void)state;
    setup_env("tcp");
    int64_t n;
    uint64_t *want = reference(2, &n);
    /* a trainer with one worker takes 37 batches and checkpoints */
    sl_dataset *svc = trainer(0);
    pid_t w1 = spawn_worker(sl_service_port(svc), NULL);
    sl_options *o = opts(2);
    sl_iterator *it = sl_iterator_create(svc, o);
    assert_int_equal(take(it, want, 0, 37, NULL, NULL), 37);
    unsigned char st[4096];
    int64_t len = sl_iterator_save(it, st, sizeof st);
    if (len < 0)
        fail_msg("save: %s", sl_last_error());
    sl_iterator_free(it);
    sl_dataset_release(svc); /* the trainer is gone */
    assert_int_equal(reap(w1), 0);
    /* a new trainer resumes it with three workers */
    svc = trainer(0);
    pid_t w[3];
    for (int i = 0; i < 3; i++)
        w[i] = spawn_worker(sl_service_port(svc), NULL);
    it = sl_iterator_restore(svc, st, (size_t)len, o);
    if (!it)
        fail_msg("restore: %s", sl_last_error());
    assert_int_equal(take(it, want, 37, n + 1, NULL, NULL), n - 37);
    sl_iterator_free(it);
    sl_options_free(o);
    sl_dataset_release(svc);
    for (int i = 0; i < 3; i++)
        assert_int_equal(reap(w[i]), 0);
    free(want);
}

static void test_refused(void **state)
{
    (void)state;
    setup_env("tcp");
    sl_dataset *svc = trainer(0);
    int port = sl_service_port(svc);
    worker_opts other = {.arg = "other"}, v2 = {.version = "v2"}, wrong = {.secret = "guess"};
    /* each is refused and ends with status 1; the trainer goes on */
    assert_int_equal(reap(spawn_worker(port, &other)), 1);
    assert_int_equal(reap(spawn_worker(port, &v2)), 1);
    assert_int_equal(reap(spawn_worker(port, &wrong)), 1);
    pid_t good = spawn_worker(port, NULL);
    epoch_through(svc, 0, NULL, NULL);
    sl_dataset_release(svc);
    assert_int_equal(reap(good), 0);
}

/* A child of parent named comm, or -1. */
static pid_t child_named(pid_t parent, const char *comm)
{
    DIR *d = opendir("/proc");
    pid_t found = -1;
    struct dirent *e;
    while (d && found < 0 && (e = readdir(d))) {
        char path[300], buf[512];
        snprintf(path, sizeof path, "/proc/%s/stat", e->d_name);
        FILE *f = fopen(path, "r");
        if (!f)
            continue;
        size_t n = fread(buf, 1, sizeof buf - 1, f);
        fclose(f);
        buf[n] = 0;
        /* pid (comm) state ppid ... */
        char *open = strchr(buf, '('), *close = strrchr(buf, ')');
        if (!open || !close)
            continue;
        int ppid = 0;
        char st;
        if (sscanf(close + 1, " %c %d", &st, &ppid) == 2 && ppid == parent &&
            (size_t)(close - open - 1) == strlen(comm) && !strncmp(open + 1, comm, strlen(comm)))
            found = (pid_t)atoi(e->d_name);
    }
    if (d)
        closedir(d);
    return found;
}

typedef struct mpi_kill {
    pid_t mpirun;
    int64_t at;
    pid_t killed;
} mpi_kill;

static void kill_one(int64_t k, void *user)
{
    mpi_kill *m = user;
    if (k == m->at && (m->killed = child_named(m->mpirun, "sluice-worker")) > 0)
        kill(m->killed, SIGKILL);
}

/* Three workers started by mpirun as a launcher (no MPI in them), with
 * --enable-recovery so that one killed does not end the others: each
 * finds the trainer from --trainers and --port. */
static void test_mpirun(void **state)
{
    (void)state;
    if (access(MPIRUN, X_OK) != 0)
        skip();
    setup_env("tcp");
    /* a fixed port: the launcher's command line names it */
    int port = 0;
    sl_dataset *svc = NULL;
    for (int tries = 0; !svc && tries < 20; tries++) {
        port = 20000 + (int)(getpid() * 7 + tries * 131) % 20000;
        sl_service_spec spec;
        SL_SERVICE_SPEC_INIT(&spec);
        char addr[64];
        snprintf(addr, sizeof addr, "127.0.0.1:%d", port);
        spec.address = addr;
        spec.version = "v1";
        spec.heartbeat_ms = 100;
        spec.timeout_ms = 1000;
        svc = sl_service(service_pipeline_build(NULL), &spec);
    }
    assert_non_null(svc);
    char ps[16];
    snprintf(ps, sizeof ps, "%d", port);
    const char *argv[] = {MPIRUN, "--allow-run-as-root", "--oversubscribe", "--enable-recovery",
                          "-np", "3", "-x", "SLUICE_SERVICE_SECRET", "-x", "UCX_TLS",
                          SLUICE_WORKER_BIN, "--library", SERVICE_PIPELINE_LIB,
                          "--symbol", "service_pipeline_build", "--trainers", "127.0.0.1",
                          "--port", ps, "--threads", "1", "--version", "v1", NULL};
    pid_t pid;
    assert_int_equal(posix_spawn(&pid, MPIRUN, NULL, NULL, (char *const *)argv, environ), 0);
    mpi_kill m = {.mpirun = pid, .at = 30};
    epoch_through(svc, 0, kill_one, &m);
    assert_true(m.killed > 0);
    sl_dataset_release(svc);
    /* the others end when the trainer says goodbye; mpirun reports the
     * killed one in its status */
    int rc = reap(pid);
    print_message("mpirun ended with %d after worker %d was killed\n", rc, (int)m.killed);
}

/* At most once: a killed worker's missing batches are skipped, never
 * waited for; what comes is the one-process stream with gaps. And a
 * checkpoint taken after the last batch resumes at the end. */
static void test_at_most_once(void **state)
{
    (void)state;
    setup_env("tcp");
    sl_service_spec spec;
    SL_SERVICE_SPEC_INIT(&spec);
    spec.address = "127.0.0.1:0";
    spec.version = "v1";
    spec.heartbeat_ms = 100;
    spec.timeout_ms = 1000;
    spec.split_batches = 1;
    spec.flags = SL_SERVICE_AT_MOST_ONCE;
    sl_dataset *svc = sl_service(service_pipeline_build(NULL), &spec);
    assert_non_null(svc);
    pid_t w[2] = {spawn_worker(sl_service_port(svc), NULL), spawn_worker(sl_service_port(svc), NULL)};
    int64_t n;
    uint64_t *want = reference(0, &n);
    sl_options *o = opts(0);
    sl_iterator *it = sl_iterator_create(svc, o);
    int64_t k = 0, got = 0;
    sl_element *el;
    int rc;
    while ((rc = sl_next_timeout(it, &el, WAIT_NS)) == 0) {
        if (got == 10)
            kill(w[0], SIGKILL);
        uint64_t dg = tu_digest(el);
        while (k < n && want[k] != dg)
            k++; /* a skipped batch */
        if (k == n)
            fail_msg("batch %lld is not in the one-process stream in order", (long long)got);
        k++;
        got++;
        sl_element_release(el);
    }
    assert_int_equal(rc, SL_EOF);
    assert_true(got <= n && got > 10);
    /* a checkpoint at the end of the pass resumes there */
    unsigned char st[4096];
    int64_t len = sl_iterator_save(it, st, sizeof st);
    assert_true(len > 0);
    sl_iterator_free(it);
    it = sl_iterator_restore(svc, st, (size_t)len, o);
    assert_non_null(it);
    assert_int_equal(sl_next_timeout(it, &el, WAIT_NS), SL_EOF);
    sl_iterator_free(it);
    sl_options_free(o);
    free(want);
    sl_dataset_release(svc);
    assert_int_equal(reap(w[0]), 128 + SIGKILL);
    assert_int_equal(reap(w[1]), 0);
}

int main(void)
{
    signal(SIGPIPE, SIG_IGN);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_tcp),     cmocka_unit_test(test_shared_memory),
        cmocka_unit_test(test_killed),  cmocka_unit_test(test_stopped),
        cmocka_unit_test(test_added),   cmocka_unit_test(test_resumed),
        cmocka_unit_test(test_refused), cmocka_unit_test(test_mpirun),
        cmocka_unit_test(test_report),  cmocka_unit_test(test_at_most_once),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
