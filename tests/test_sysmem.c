/* The default RAM budget's "available memory": MemAvailable, not free
 * memory, and a cgroup's limit (v1 or v2, this group's or an ancestor's)
 * where it leaves less. Read from a /proc and /sys/fs/cgroup tree made
 * here, then from the real ones. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include "runtime/runtime.h"
#include "testutil.h"

#define GIB ((int64_t)1 << 30)
#define MIB ((int64_t)1 << 20)

static char root[256], proc[300], cg[300];

static void write_at(const char *base, const char *rel, const char *text)
{
    char path[700], dir[700];
    snprintf(path, sizeof path, "%s/%s", base, rel);
    /* the parents, one by one */
    for (char *s = strchr(path + strlen(base) + 1, '/'); s; s = strchr(s + 1, '/')) {
        snprintf(dir, sizeof dir, "%.*s", (int)(s - path), path);
        mkdir(dir, 0755);
    }
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
}

static int setup(void **state)
{
    (void)state;
    tu_tmpdir(root);
    snprintf(proc, sizeof proc, "%s/proc", root);
    snprintf(cg, sizeof cg, "%s/cgroup", root);
    mkdir(proc, 0755);
    mkdir(cg, 0755);
    /* a machine whose page cache holds a dataset: little free, much
     * available */
    write_at(proc, "meminfo", "MemTotal:       25165824 kB\n"
                              "MemFree:          524288 kB\n"
                              "MemAvailable:   20971520 kB\n"
                              "Buffers:           10240 kB\n");
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    tu_rmdir(root);
    return 0;
}

static void test_mem_available_not_free(void **state)
{
    (void)state;
    /* no cgroup file: MemAvailable, 20 GiB, not MemFree's 0.5 GiB */
    assert_int_equal(sl__available_memory(proc, cg), 20 * GIB);
    write_at(proc, "self/cgroup", "0::/\n");
    assert_int_equal(sl__available_memory(proc, cg), 20 * GIB); /* root: no limit */
}

static void test_cgroup_v2(void **state)
{
    (void)state;
    write_at(proc, "self/cgroup", "0::/job/step\n");
    write_at(cg, "job/step/memory.max", "max\n");
    write_at(cg, "job/memory.max", "4294967296\n");
    write_at(cg, "job/memory.current", "3221225472\n");
    write_at(cg, "job/memory.stat", "anon 1073741824\nfile 2147483648\n"
                                    "active_file 1073741824\ninactive_file 1073741824\n");
    /* 4 GiB limit - (3 GiB used - 1 GiB reclaimable cache) = 2 GiB */
    assert_int_equal(sl__available_memory(proc, cg), 2 * GIB);
    /* a tighter limit further down wins */
    write_at(cg, "job/step/memory.max", "1610612736\n");
    write_at(cg, "job/step/memory.current", "536870912\n");
    assert_int_equal(sl__available_memory(proc, cg), GIB);
    /* used beyond its limit: nothing left */
    write_at(cg, "job/step/memory.current", "2147483648\n");
    assert_int_equal(sl__available_memory(proc, cg), 0);
}

static void test_cgroup_v1(void **state)
{
    (void)state;
    /* hybrid: a v2 line without a memory controller, and v1's memory */
    write_at(proc, "self/cgroup", "9:name=systemd:/\n5:cpu,cpuacct:/\n"
                                  "4:memory:/outer/inner\n0::/\n");
    write_at(cg, "memory/outer/inner/memory.limit_in_bytes", "9223372036854771712\n");
    write_at(cg, "memory/outer/memory.limit_in_bytes", "3221225472\n");
    write_at(cg, "memory/outer/memory.usage_in_bytes", "2147483648\n");
    write_at(cg, "memory/outer/memory.stat", "cache 1048576\ntotal_inactive_file 536870912\n");
    /* 3 GiB - (2 GiB - 0.5 GiB) */
    assert_int_equal(sl__available_memory(proc, cg), 3 * GIB / 2);
    /* a limit above MemAvailable changes nothing */
    write_at(cg, "memory/outer/memory.limit_in_bytes", "107374182400\n");
    assert_int_equal(sl__available_memory(proc, cg), 20 * GIB);
}

static void test_old_kernel_and_junk(void **state)
{
    (void)state;
    char p[400];
    snprintf(p, sizeof p, "%s/old", root);
    mkdir(p, 0755);
    write_at(p, "meminfo", "MemTotal: 1024 kB\nMemFree: 512 kB\n"); /* before 3.14 */
    assert_true(sl__available_memory(p, cg) > 0); /* sysconf's free pages */
    write_at(p, "self/cgroup", "garbage without colons\n4:memory\n");
    assert_true(sl__available_memory(p, cg) > 0);
}

/* The iterator's default budget is half of it, on this machine. */
static void test_default_budget(void **state)
{
    (void)state;
    int64_t avail = sl__available_memory("/proc", "/sys/fs/cgroup");
    assert_true(avail > 0);
    sl_dataset *ds = sl_range(0, 1, 1);
    sl_iterator *it = sl_iterator_create(ds, NULL);
    int64_t budget = sl_iterator_stat(it, SL_STAT_RAM_BUDGET);
    print_message("available %.1f MiB, default budget %.1f MiB\n", (double)avail / MIB,
                  (double)budget / MIB);
    /* memory moves between the two reads: within 10% */
    assert_true(budget > avail / 2 - avail / 20 && budget < avail / 2 + avail / 20);
    sl_iterator_free(it);
    sl_dataset_release(ds);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_mem_available_not_free),
        cmocka_unit_test(test_cgroup_v2),
        cmocka_unit_test(test_cgroup_v1),
        cmocka_unit_test(test_old_kernel_and_junk),
        cmocka_unit_test(test_default_budget),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
