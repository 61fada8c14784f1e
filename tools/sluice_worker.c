/*
 * sluice-worker: a worker of the preprocessing service (sl_worker_run)
 * for a pipeline built by a C function in a shared library:
 *
 *   sluice-worker --library ./libpipeline.so [--symbol build] [--arg TEXT]
 *                 (--address HOST:PORT | --trainers H1,H2,... --port P
 *                  [--ranks-per-host N])
 *                 [--version V] [--threads N] [--name NAME]
 *                 [--connect-timeout MS]
 *
 * The function is `sl_dataset *build(void *arg)`, arg the --arg text (or
 * NULL): the trainer's pipeline, built the same way (its sl_distribute
 * reads the trainer rank the worker serves).
 *
 * --trainers: the trainers' hosts, ranks-per-host trainer ranks on each
 * (their ports P, P+1, ...: sl_service offsets its port by the local
 * rank). Worker i of the launch (its rank from the launcher's variables:
 * srun, mpirun, torchrun) serves trainer rank i mod (hosts x
 * ranks-per-host), so a Slurm heterogeneous job's CPU component or an
 * mpirun line spreads its workers over the trainers. Exit status: 0 when
 * the trainer said goodbye, 1 on an error (printed), 2 on bad arguments.
 */
#include <dlfcn.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#define SLUICE_EXPERIMENTAL
#include "sluice.h"

static int usage(const char *why)
{
    fprintf(stderr, "sluice-worker: %s\n"
            "usage: sluice-worker --library LIB.so [--symbol build] [--arg TEXT]\n"
            "       (--address HOST:PORT | --trainers H1,H2,... --port P "
            "[--ranks-per-host N])\n"
            "       [--version V] [--threads N] [--name NAME] [--connect-timeout MS]\n",
            why);
    return 2;
}

/* The address of trainer rank `t`: host t / per of the list, port + t % per. */
static int trainer_address(const char *hosts, int port, int per, char *out, size_t cap)
{
    sl_dist_context me;
    if (sl_distributed_context(&me) < 0) {
        fprintf(stderr, "sluice-worker: %s\n", sl_last_error());
        return -1;
    }
    int nhosts = 1;
    for (const char *p = hosts; *p; p++)
        nhosts += *p == ',';
    int t = me.rank % (nhosts * per);
    int h = t / per;
    const char *start = hosts;
    for (int i = 0; i < h; i++)
        start = strchr(start, ',') + 1;
    size_t len = strcspn(start, ",");
    bool v6 = memchr(start, ':', len) != NULL;
    snprintf(out, cap, "%s%.*s%s:%d", v6 ? "[" : "", (int)len, start, v6 ? "]" : "",
             port + t % per);
    fprintf(stderr, "sluice-worker: worker %d of %d serves trainer rank %d at %s\n", me.rank,
            me.world_size, t, out);
    return 0;
}

int main(int argc, char **argv)
{
    const char *lib = NULL, *symbol = "build", *arg = NULL, *trainers = NULL;
    int port = 0, per = 1;
    sl_worker_spec spec;
    SL_WORKER_SPEC_INIT(&spec);
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "-h") || !strcmp(a, "--help"))
            return usage("a worker of sluice's preprocessing service"), 0;
        if (!v)
            return usage("an option lacks its value");
        i++;
        if (!strcmp(a, "--library"))
            lib = v;
        else if (!strcmp(a, "--symbol"))
            symbol = v;
        else if (!strcmp(a, "--arg"))
            arg = v;
        else if (!strcmp(a, "--address"))
            spec.address = v;
        else if (!strcmp(a, "--trainers"))
            trainers = v;
        else if (!strcmp(a, "--port"))
            port = atoi(v);
        else if (!strcmp(a, "--ranks-per-host"))
            per = atoi(v);
        else if (!strcmp(a, "--version"))
            spec.version = v;
        else if (!strcmp(a, "--threads"))
            spec.threads = atoi(v);
        else if (!strcmp(a, "--name"))
            spec.name = v;
        else if (!strcmp(a, "--connect-timeout"))
            spec.connect_timeout_ms = atoi(v);
        else
            return usage("unknown option");
    }
    if (!lib)
        return usage("--library is required");
    char addr[512];
    if (trainers) {
        if (port <= 0 || port > 65535 || per < 1 || !*trainers)
            return usage("--trainers needs --port and a positive --ranks-per-host");
        if (trainer_address(trainers, port, per, addr, sizeof addr) < 0)
            return 1;
        spec.address = addr;
    }
    void *h = dlopen(lib, RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        fprintf(stderr, "sluice-worker: %s\n", dlerror());
        return 1;
    }
    sl_build_fn build;
    *(void **)&build = dlsym(h, symbol);
    if (!build) {
        fprintf(stderr, "sluice-worker: %s: no function %s\n", lib, symbol);
        return 1;
    }
    int rc = sl_worker_run(build, (void *)arg, &spec);
    if (rc < 0) {
        fprintf(stderr, "sluice-worker: %s\n", sl_last_error());
        return 1;
    }
    return 0;
}
