/* The service's transport (src/service/net.c) between two processes on
 * loopback, over UCX's TCP and over its shared memory, each case asserting
 * which transport carried the bytes: the handshake pairs; batches (small
 * ones sent eagerly, large ones by rendezvous) arrive byte for byte as
 * views; a wrong secret is refused; malformed frames close the link
 * naming the peer; a killed peer is seen as gone. Every wait is bounded. */
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
#include "core/element.h"
#include "core/le.h"
#include "service/auth.h"
#include "service/handshake.h"
#include "service/net.h"
#include "testutil.h"

#define WAIT_S 20

/* ---- what one side saw, under a lock ------------------------------------ */

typedef struct side {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    sl__net *net;
    sl__peer *peer;
    sl__hs hs;
    int paired; /* 1 paired, < 0 failed */
    int closed; /* on_close's code, 1 while open */
    char why[512];
    int batches;
    uint64_t digest; /* over every batch's tensors, in order */
    int byes;
} side;

static void side_init(side *s)
{
    memset(s, 0, sizeof *s);
    pthread_mutex_init(&s->mu, NULL);
    pthread_cond_init(&s->cv, NULL);
    s->closed = 1;
}

/* The running hash of a stream of batches. */
static uint64_t digest_el(uint64_t h, const sl_element *el)
{
    return h * 1000003u ^ tu_digest(el);
}

static void on_frame(void *user, sl__peer *p, const sl__wire_hdr *h, sl__buf *buf,
                     const unsigned char *payload, size_t n)
{
    side *s = user;
    sl__bytes out = {0};
    pthread_mutex_lock(&s->mu);
    if (s->paired == 0) {
        int rc = sl__hs_step(&s->hs, h, payload, n, &out);
        if (rc)
            s->paired = rc;
        if (rc == 1) /* as the service does: a paired peer may send large frames, many ahead */
            sl__peer_set_max_frame(p, 1ull << 34);
        if (rc < 0)
            snprintf(s->why, sizeof s->why, "%s", sl_last_error());
    } else if (h->type == SL__MSG_BATCH) {
        sl__msg_batch m;
        sl_element *el = NULL;
        if (sl__msg_batch_read(payload, n, &m) == 0 &&
            sl__wire_element_read(buf, payload, n, &m, &el) == 0) {
            for (int i = 0; i < sl_element_size(el); i++)
                assert_int_equal((uintptr_t)sl_tensor_data(sl_element_tensor(el, i)) % 64, 0);
            s->digest = digest_el(s->digest, el);
            s->batches++;
            sl_element_release(el);
        }
    } else if (h->type == SL__MSG_BYE) {
        s->byes++;
    }
    pthread_cond_broadcast(&s->cv);
    pthread_mutex_unlock(&s->mu);
    if (out.n)
        sl__net_send(p, &out);
    sl__bytes_free(&out);
    sl__buf_release(buf);
}

static void on_accept(void *user, sl__peer *p)
{
    side *s = user;
    pthread_mutex_lock(&s->mu);
    s->peer = p;
    s->closed = 1;
    pthread_mutex_unlock(&s->mu);
}

static void on_close(void *user, sl__peer *p, int code, const char *why)
{
    (void)p;
    side *s = user;
    pthread_mutex_lock(&s->mu);
    s->closed = code;
    snprintf(s->why, sizeof s->why, "%s", why ? why : "");
    pthread_cond_broadcast(&s->cv);
    pthread_mutex_unlock(&s->mu);
}

/* Waits until *field (an int of s) satisfies the predicate, up to WAIT_S. */
static bool wait_for(side *s, bool (*pred)(side *))
{
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_sec += WAIT_S;
    pthread_mutex_lock(&s->mu);
    int rc = 0;
    while (!pred(s) && rc == 0)
        rc = pthread_cond_timedwait(&s->cv, &s->mu, &until);
    bool ok = pred(s);
    pthread_mutex_unlock(&s->mu);
    return ok;
}

static bool is_paired(side *s)
{
    return s->paired != 0;
}
static bool is_closed(side *s)
{
    return s->closed <= 0;
}
static bool got_bye(side *s)
{
    return s->byes > 0 || s->closed <= 0;
}
static bool failed(side *s)
{
    return s->closed <= 0 || s->paired < 0;
}

static sl__net *start(side *s)
{
    sl__net_hooks hk = {.user = s, .on_frame = on_frame, .on_accept = on_accept,
                        .on_close = on_close, .tick_ms = 50};
    sl__net *n;
    int rc = sl__net_create(&hk, &n);
    if (rc)
        fail_msg("sl__net_create: %s", sl_last_error());
    s->net = n;
    return n;
}

/* ---- the worker, in a child process ------------------------------------- */

enum { SEND_BATCHES, SEND_GARBAGE, HANG };

static sl_element *make_batch(int k, size_t big)
{
    sl_element *el = sl__element_new(3, 0);
    int64_t shape[4] = {4, (int64_t)(big / 4 / 3 + 1 + k), 1, 3};
    size_t nb = (size_t)(shape[0] * shape[1] * shape[2] * shape[3]);
    struct sl_tensor *t = sl__element_push(el, SL_UINT8, 4, shape, nb);
    for (size_t i = 0; i < nb; i++)
        ((unsigned char *)t->data)[i] = (unsigned char)(i * 31 + (size_t)k);
    int64_t ls[1] = {4};
    t = sl__element_push(el, SL_INT64, 1, ls, 32);
    for (int i = 0; i < 4; i++)
        ((int64_t *)t->data)[i] = k * 10 + i;
    t = sl__element_push(el, SL_STRING, 1, ls, 5 * 8 + 4);
    uint64_t off[5] = {0, 1, 2, 3, 4};
    memcpy(t->data, off, sizeof off);
    memcpy((char *)t->data + 40, "wxyz", 4);
    return el;
}

static uint64_t expected_digest(int n)
{
    uint64_t h = 0;
    for (int k = 0; k < n; k++) {
        sl_element *el = make_batch(k, k % 3 == 2 ? (4u << 20) : 1000);
        h = digest_el(h, el);
        sl_element_release(el);
    }
    return h;
}

static void sent(void *arg, int status)
{
    (void)arg;
    if (status)
        fprintf(stderr, "worker: a send failed: %d\n", status);
}

static int worker_main(int port, int mode, int nbatches)
{
    side w;
    side_init(&w);
    uint8_t key[32];
    if (sl__service_key(key))
        return 2;
    sl__hs_init(&w.hs, SL__ROLE_WORKER, key, "test-worker", 77, "v1");
    w.hs.threads = 2;
    sl__net *n = start(&w);
    if (sl__net_connect(n, "127.0.0.1", port, &w.peer)) {
        fprintf(stderr, "worker: %s\n", sl_last_error());
        return 3;
    }
    sl__bytes out = {0};
    if (mode == SEND_GARBAGE) {
        /* a HELLO whose payload CRC is wrong */
        sl__msg_hello h = {.role = SL__ROLE_WORKER, .name = "w"};
        sl__msg_hello_write(&out, &h);
        out.p[SL__WIRE_HDR + 6] ^= 0x40;
        sl__net_send(w.peer, &out);
        sl__bytes_free(&out);
        wait_for(&w, is_closed);
        sl__net_free(n);
        return 0;
    }
    sl__hs_begin(&w.hs, &out);
    sl__net_send(w.peer, &out);
    sl__bytes_free(&out);
    if (!wait_for(&w, is_paired) || w.paired != 1) {
        sl__net_free(n); /* no hook runs after this: w.why is settled */
        fprintf(stderr, "worker: not paired: %s\n", w.why);
        return 4;
    }
    if (mode == HANG) {
        pause(); /* the parent kills it */
        return 0;
    }
    for (int k = 0; k < nbatches; k++) {
        sl_element *el = make_batch(k, k % 3 == 2 ? (4u << 20) : 1000);
        sl__net_send_batch(w.peer, 1, k, el, sent, NULL);
        sl_element_release(el);
    }
    sl__msg_empty_write(&out, SL__MSG_BYE);
    sl__net_send(w.peer, &out);
    sl__bytes_free(&out);
    /* the trainer closes once it has everything */
    wait_for(&w, is_closed);
    sl__net_free(n);
    return 0;
}

/* ---- the trainer, in this process --------------------------------------- */

typedef struct run {
    side t;
    pid_t child;
    int port;
} run;

/* Starts the trainer's side listening, then the worker process. */
static void begin(run *r, const char *tls, const char *worker_secret, int mode, int nbatches)
{
    setenv("UCX_TLS", getenv("SLUICE_TEST_TLS") ? getenv("SLUICE_TEST_TLS") : tls, 1);
    setenv("SLUICE_SERVICE_SECRET", "right", 1);
    side_init(&r->t);
    uint8_t key[32];
    assert_int_equal(sl__service_key(key), 0);
    sl__hs_init(&r->t.hs, SL__ROLE_TRAINER, key, "test-trainer", 77, "v1");
    r->t.hs.worker_id = 1;
    r->t.hs.heartbeat_ms = 100;
    sl__net *n = start(&r->t);
    assert_int_equal(sl__net_listen(n, "127.0.0.1", 0, &r->port), 0);
    assert_true(r->port > 0);
    fflush(NULL);
    r->child = fork();
    assert_true(r->child >= 0);
    if (r->child == 0) {
        /* a fresh process (UCX's state does not survive a fork) */
        setenv("SLUICE_SERVICE_SECRET", worker_secret, 1);
        char a[3][16];
        snprintf(a[0], sizeof a[0], "%d", r->port);
        snprintf(a[1], sizeof a[1], "%d", mode);
        snprintf(a[2], sizeof a[2], "%d", nbatches);
        execl("/proc/self/exe", "test_service_net", "worker", a[0], a[1], a[2], (char *)NULL);
        _exit(127);
    }
}

static int finish(run *r)
{
    sl__net_free(r->t.net);
    sl__hs_clear(&r->t.hs);
    int status = 0;
    for (int i = 0; i < WAIT_S * 10; i++) {
        if (waitpid(r->child, &status, WNOHANG) == r->child)
            return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
        usleep(100000);
    }
    kill(r->child, SIGKILL);
    waitpid(r->child, &status, 0);
    fail_msg("the worker process did not end");
    return -1;
}

static void stream(const char *tls, const char *want_a, const char *want_b)
{
    run r;
    begin(&r, tls, "right", SEND_BATCHES, 9);
    assert_true(wait_for(&r.t, is_paired));
    assert_int_equal(r.t.paired, 1);
    assert_true(wait_for(&r.t, got_bye));
    assert_int_equal(r.t.closed, 1);
    assert_int_equal(r.t.batches, 9);
    assert_true(r.t.digest == expected_digest(9));
    /* the transport of every lane that carried messages; under the tcp
     * case, rendezvous too */
    char am[128], rma[128];
    assert_int_equal(sl__peer_transports(r.t.peer, am, rma, sizeof am), 0);
    if (strcmp(am, want_a) && !(want_b && !strcmp(am, want_b)))
        fail_msg("UCX_TLS=%s: messages went over \"%s\", expected %s%s%s", tls, am, want_a,
                 want_b ? " or " : "", want_b ? want_b : "");
    if (!strcmp(want_a, "tcp") && strcmp(rma, "tcp"))
        fail_msg("UCX_TLS=tcp but rendezvous lanes \"%s\"", rma);
    const char *tr = am;
    uint64_t sent_b, recv_b;
    sl__net_bytes(r.t.net, &sent_b, &recv_b);
    assert_true(recv_b > 3 * (4u << 20));
    print_message("UCX_TLS=%s: lanes \"%s\", %llu bytes received\n", tls, tr,
                  (unsigned long long)recv_b);
    sl__net_close(r.t.peer, 0, NULL);
    assert_int_equal(finish(&r), 0);
}

static void test_tcp(void **state)
{
    (void)state;
    stream("tcp", "tcp", NULL);
}

static void test_shared_memory(void **state)
{
    (void)state;
    /* tcp only sets the connection up; large batches go by rendezvous
     * over the message lanes (UCX_RNDV_SCHEME=am), since tcp would
     * otherwise serve reads where the kernel's cross-memory attach is not
     * offered */
    setenv("UCX_RNDV_SCHEME", "am", 1);
    stream("sm,tcp", "posix", "sysv");
    unsetenv("UCX_RNDV_SCHEME");
}

static void test_wrong_secret(void **state)
{
    (void)state;
    run r;
    begin(&r, "tcp", "wrong", SEND_BATCHES, 1);
    /* the worker checks the trainer's proof first, answers ERROR and
     * leaves; the trainer never pairs */
    assert_true(wait_for(&r.t, failed));
    if (r.t.paired > 0)
        fail_msg("paired with a worker holding another secret");
    assert_int_equal(r.t.batches, 0);
    assert_int_equal(finish(&r), 4);
}

static void test_garbage(void **state)
{
    (void)state;
    run r;
    begin(&r, "tcp", "right", SEND_GARBAGE, 0);
    assert_true(wait_for(&r.t, is_closed));
    assert_int_equal(r.t.closed, SL_ECORRUPT);
    assert_non_null(strstr(r.t.why, "127.0.0.1:"));
    assert_non_null(strstr(r.t.why, "CRC"));
    assert_int_equal(r.t.paired, 0);
    assert_int_equal(finish(&r), 0);
}

static void test_killed(void **state)
{
    (void)state;
    run r;
    begin(&r, "tcp", "right", HANG, 0);
    assert_true(wait_for(&r.t, is_paired));
    assert_int_equal(r.t.paired, 1);
    kill(r.child, SIGKILL);
    assert_true(wait_for(&r.t, is_closed));
    assert_int_equal(r.t.closed, SL_EIO);
    assert_non_null(strstr(r.t.why, "connection lost"));
    assert_int_equal(finish(&r), 128 + SIGKILL);
}

int main(int argc, char **argv)
{
    if (argc == 5 && !strcmp(argv[1], "worker")) {
        alarm(WAIT_S * 2);
        return worker_main(atoi(argv[2]), atoi(argv[3]), atoi(argv[4]));
    }
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_tcp),          cmocka_unit_test(test_shared_memory),
        cmocka_unit_test(test_wrong_secret), cmocka_unit_test(test_garbage),
        cmocka_unit_test(test_killed),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
