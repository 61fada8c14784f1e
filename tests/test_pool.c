/* The buffer pool: blocks of the slab sizes (4-256 KiB, carved from 4 MiB
 * slabs) never overlap, whichever thread takes or frees them; a slab goes
 * back to the allocator once all its blocks have, so memory returns to
 * where it started; a user's allocator still sees every block. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include "core/alloc.h"
#include "testutil.h"

#if defined(__SANITIZE_ADDRESS__)
#define SLABS 0
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define SLABS 0
#endif
#endif
#ifndef SLABS
#define SLABS 1
#endif

#define PER_THREAD 300
#define THREADS 3

static const size_t sizes[] = {5000, 30000, 4096 - 64, 100000, 256 * 1024 - 64, 600, 700000};
#define NSIZES (sizeof sizes / sizeof *sizes)

typedef struct job {
    int id;
    sl__buf *b[PER_THREAD];
    size_t n[PER_THREAD];
} job;

static unsigned char pattern(int id, int i)
{
    return (unsigned char)(id * 61 + i * 7 + 1);
}

static void fill(job *j, int i)
{
    j->n[i] = sizes[(size_t)(i + j->id) % NSIZES];
    j->b[i] = sl__buf_get(j->n[i]);
    assert_non_null(j->b[i]);
    assert_true(j->b[i]->cap >= j->n[i]);
    assert_int_equal((uintptr_t)j->b[i]->data % SL__ALIGN, 0);
    memset(j->b[i]->data, pattern(j->id, i), j->n[i]);
}

static void check(const job *j, int i)
{
    const unsigned char *p = j->b[i]->data, want = pattern(j->id, i);
    /* every byte equal to the first, and the first the pattern (memcmp:
     * quick under the sanitizers too) */
    if (p[0] != want || memcmp(p, p + 1, j->n[i] - 1) != 0)
        fail_msg("thread %d block %d (%zu bytes) was written over", j->id, i, j->n[i]);
}

/* Takes blocks, frees every third, takes those again, checks all. */
static void *worker(void *arg)
{
    job *j = arg;
    for (int i = 0; i < PER_THREAD; i++)
        fill(j, i);
    for (int i = 0; i < PER_THREAD; i += 3)
        sl__buf_release(j->b[i]);
    for (int i = 0; i < PER_THREAD; i += 3)
        fill(j, i);
    for (int i = 0; i < PER_THREAD; i++)
        check(j, i);
    return NULL;
}

static void test_blocks_disjoint_and_returned(void **state)
{
    (void)state;
    sl_release_memory();
    int64_t base = sl_memory_in_use();
    static job jobs[THREADS];
    pthread_t t[THREADS];
    for (int r = 0; r < 2; r++) {
        for (int k = 0; k < THREADS; k++) {
            jobs[k].id = k + THREADS * r;
            assert_int_equal(pthread_create(&t[k], NULL, worker, &jobs[k]), 0);
        }
        for (int k = 0; k < THREADS; k++)
            assert_int_equal(pthread_join(t[k], NULL), 0);
        /* every thread's blocks intact after all the others ran */
        for (int k = 0; k < THREADS; k++)
            for (int i = 0; i < PER_THREAD; i++)
                check(&jobs[k], i);
        /* freed here, in another order, by a thread that took none */
        for (int i = PER_THREAD - 1; i >= 0; i--)
            for (int k = 0; k < THREADS; k++)
                sl__buf_release(jobs[k].b[i]);
    }
    assert_true(sl_memory_in_use() > base); /* pooled */
    sl_release_memory();
    assert_int_equal(sl_memory_in_use(), base);

    /* one block held keeps what it came from (its slab: 4 MiB, but under
     * ASan, which has no slabs, just itself); freed, all goes */
    sl__buf *held = sl__buf_get(30000);
    assert_non_null(held);
    sl_release_memory();
    assert_true(sl_memory_in_use() >= base + (SLABS ? (4 << 20) : 30000));
    sl__buf_release(held);
    sl_release_memory();
    assert_int_equal(sl_memory_in_use(), base);
}

/* Blocks kept while the rest is released (a cache or shuffle buffer
 * holding records across sl_release_memory): what is freed around them
 * is reused, not lost with the slabs they pin. */
static void test_release_with_blocks_held(void **state)
{
    (void)state;
    enum { ROUNDS = 6, PER = 1000, KEEP_EVERY = 20, SIZE = 30000 };
    static sl__buf *kept[ROUNDS * PER / KEEP_EVERY];
    int nkept = 0;
    sl_release_memory();
    int64_t base = sl_memory_in_use(), first = 0;
    for (int r = 0; r < ROUNDS; r++) {
        static sl__buf *b[PER];
        for (int i = 0; i < PER; i++) {
            assert_non_null(b[i] = sl__buf_get(SIZE));
            memset(b[i]->data, r, SIZE);
        }
        for (int i = 0; i < PER; i++) {
            if (i % KEEP_EVERY == 0)
                kept[nkept++] = b[i];
            else
                sl__buf_release(b[i]);
        }
        sl_release_memory();
        if (r == 0)
            first = sl_memory_in_use();
    }
    /* later rounds add their kept blocks and a slab or two, not a round's
     * worth of slabs each (32 MiB: the bug) */
    int64_t grown = sl_memory_in_use() - first;
    int64_t allowed = (int64_t)(ROUNDS - 1) * (PER / KEEP_EVERY) * 32768 + ((int64_t)8 << 20);
    if (grown > allowed)
        fail_msg("held %d blocks, memory grew %lld bytes after the first round (at most %lld)",
                 nkept, (long long)grown, (long long)allowed);
    for (int i = 0; i < nkept; i++)
        sl__buf_release(kept[i]);
    sl_release_memory();
    assert_int_equal(sl_memory_in_use(), base);
}

static int64_t hook_calls;

static void *count_alloc(void *user, size_t size, size_t align)
{
    (void)user;
    hook_calls++;
    size_t rounded = (size + align - 1) & ~(align - 1);
    return aligned_alloc(align, rounded ? rounded : align);
}

static void count_free(void *user, void *p, size_t size, size_t align)
{
    (void)user, (void)size, (void)align;
    free(p);
}

/* A user's allocator is asked for each block, not for slabs. */
static void test_user_allocator_sees_blocks(void **state)
{
    (void)state;
    sl_allocator a = {count_alloc, count_free, NULL};
    assert_int_equal(sl_set_allocator(&a), 0);
    sl__buf *b[40];
    hook_calls = 0;
    for (int i = 0; i < 40; i++)
        assert_non_null(b[i] = sl__buf_get(30000));
    assert_int_equal(hook_calls, 40);
    for (int i = 0; i < 40; i++)
        sl__buf_release(b[i]);
    assert_int_equal(sl_set_allocator(NULL), 0);
    assert_int_equal(sl_memory_in_use(), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_blocks_disjoint_and_returned),
        cmocka_unit_test(test_release_with_blocks_held),
        cmocka_unit_test(test_user_allocator_sees_blocks),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
