/*
 * How much memory this process may still use: the kernel's MemAvailable
 * (free memory plus the page cache and other memory it can reclaim; free
 * memory alone is far smaller on a machine whose cache holds the dataset),
 * and less where a cgroup (a container, a Slurm job) sets a memory limit:
 * that limit minus what the group uses, not counting its reclaimable
 * inactive file pages. Every ancestor group's limit counts too.
 *
 * cgroup v2 (one hierarchy, "0::/path" in /proc/self/cgroup): memory.max,
 * memory.current, memory.stat "inactive_file". v1 ("N:memory:/path"):
 * memory/memory.limit_in_bytes, memory.usage_in_bytes, memory.stat
 * "total_inactive_file". A v1 limit of nearly 2^63 means none.
 */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "runtime.h"

#define LINE_MAX_ 4096
#define NO_LIMIT INT64_MAX

/* The first line of `path` starting with `key` and a separator: its number
 * (with the kB unit applied when the line has it), or -1. */
static int64_t keyed_value(const char *path, const char *key)
{
    FILE *f = fopen(path, "re");
    if (!f)
        return -1;
    char line[LINE_MAX_];
    size_t klen = strlen(key);
    int64_t v = -1;
    while (fgets(line, sizeof line, f)) {
        if (strncmp(line, key, klen) != 0 || (line[klen] != ':' && line[klen] != ' '))
            continue;
        char *end;
        long long x = strtoll(line + klen + 1, &end, 10);
        if (end != line + klen + 1 && x >= 0)
            v = strstr(end, "kB") ? (int64_t)x * 1024 : (int64_t)x;
        break;
    }
    fclose(f);
    return v;
}

/* The number in a one-value file ("max": NO_LIMIT), or -1. */
static int64_t file_value(const char *path)
{
    FILE *f = fopen(path, "re");
    if (!f)
        return -1;
    char buf[64] = "";
    bool ok = fgets(buf, sizeof buf, f) != NULL;
    fclose(f);
    if (!ok)
        return -1;
    if (strncmp(buf, "max", 3) == 0)
        return NO_LIMIT;
    char *end;
    long long x = strtoll(buf, &end, 10);
    return end != buf && x >= 0 ? (int64_t)x : -1;
}

/* Headroom under one group's limit, or NO_LIMIT. */
static int64_t group_room(const char *dir, bool v2)
{
    char p[LINE_MAX_ + 64];
    snprintf(p, sizeof p, "%s/%s", dir, v2 ? "memory.max" : "memory.limit_in_bytes");
    int64_t limit = file_value(p);
    if (limit < 0 || limit >= ((int64_t)1 << 62)) /* none, or v1's "unlimited" */
        return NO_LIMIT;
    snprintf(p, sizeof p, "%s/%s", dir, v2 ? "memory.current" : "memory.usage_in_bytes");
    int64_t used = file_value(p);
    snprintf(p, sizeof p, "%s/memory.stat", dir);
    int64_t inactive = keyed_value(p, v2 ? "inactive_file" : "total_inactive_file");
    if (used < 0)
        used = 0;
    if (inactive > 0 && inactive < used)
        used -= inactive;
    return limit > used ? limit - used : 0;
}

/* The memory cgroup of this process: its directory under cgroup_mount in
 * dir, and whether it is v2. False if none. */
static bool find_group(const char *proc, const char *cgroup_mount, char *dir, size_t size,
                       bool *v2)
{
    char p[LINE_MAX_];
    snprintf(p, sizeof p, "%s/self/cgroup", proc);
    FILE *f = fopen(p, "re");
    if (!f)
        return false;
    char line[LINE_MAX_], unified[LINE_MAX_] = "";
    bool v1 = false;
    while (!v1 && fgets(line, sizeof line, f)) {
        line[strcspn(line, "\n")] = '\0';
        char *a = strchr(line, ':'), *b = a ? strchr(a + 1, ':') : NULL;
        if (!b)
            continue;
        *a = *b = '\0';
        if (!strcmp(line, "0") && a[1] == '\0') {
            snprintf(unified, sizeof unified, "%s", b + 1);
            continue;
        }
        /* a v1 hierarchy's controllers: "memory" or a list with it (no
         * strtok: iterators are made on any thread) */
        for (const char *c = a + 1; *c && !v1;) {
            size_t n = strcspn(c, ",");
            if (n == 6 && !strncmp(c, "memory", 6)) {
                snprintf(dir, size, "%s/memory%s", cgroup_mount, b + 1);
                v1 = true;
            }
            c += n + (c[n] == ',');
        }
    }
    fclose(f);
    if (v1) {
        *v2 = false;
        return true;
    }
    if (!unified[0])
        return false;
    snprintf(dir, size, "%s%s", cgroup_mount, unified);
    *v2 = true;
    return true;
}

int64_t sl__available_memory(const char *proc, const char *cgroup_mount)
{
    char p[LINE_MAX_];
    snprintf(p, sizeof p, "%s/meminfo", proc);
    int64_t avail = keyed_value(p, "MemAvailable");
    if (avail < 0) { /* kernels before 3.14 */
        long pages = sysconf(_SC_AVPHYS_PAGES), psz = sysconf(_SC_PAGESIZE);
        avail = pages > 0 && psz > 0 ? (int64_t)pages * psz : -1;
    }
    char dir[LINE_MAX_];
    bool v2;
    if (!find_group(proc, cgroup_mount, dir, sizeof dir, &v2))
        return avail;
    size_t root = strlen(cgroup_mount) + (v2 ? 0 : strlen("/memory"));
    for (;;) { /* the group, then each ancestor up to the mount */
        int64_t room = group_room(dir, v2);
        if (room != NO_LIMIT && (avail < 0 || room < avail))
            avail = room;
        char *slash = strrchr(dir, '/');
        if (!slash || (size_t)(slash - dir) < root)
            break;
        *slash = '\0';
    }
    return avail;
}
