/*
 * sl_distributed_context: this process's rank, read from its launcher's
 * environment. No MPI or torch library: every launcher exports the same
 * facts as variables, so reading them works under any of them.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "distenv.h"
#include "error.h"

/* One launcher's variable names; NULL where it has none. */
typedef struct launcher {
    const char *name;
    const char *rank, *size, *local_rank, *local_size, *node;
} launcher;

/* In order of precedence: the innermost launcher first (torchrun's agents
 * run under srun, mpirun's ranks inherit a batch script's Slurm variables). */
static const launcher launchers[] = {
    {"sluice", "SLUICE_RANK", "SLUICE_WORLD_SIZE", "SLUICE_LOCAL_RANK",
     "SLUICE_LOCAL_WORLD_SIZE", NULL},
    {"torchrun", "RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "GROUP_RANK"},
    {"openmpi", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK",
     "OMPI_COMM_WORLD_LOCAL_SIZE", NULL},
    {"pmi", "PMI_RANK", "PMI_SIZE", "MPI_LOCALRANKID", "MPI_LOCALNRANKS", NULL},
    {"slurm", "SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID", "SLURM_NTASKS_PER_NODE",
     "SLURM_NODEID"},
};
enum { NLAUNCHERS = sizeof launchers / sizeof launchers[0] };

/* Variable `var` as an int >= lo into *out: 1 read, 0 unset, or an error.
 * Slurm writes per-node counts as "4(x2)" or "4,2": the leading number is
 * this host's when all hosts are alike, which is all the local size needs. */
static int read_int(const char *var, int lo, bool leading, int *out)
{
    const char *v = var ? getenv(var) : NULL;
    if (!v || !*v)
        return 0;
    errno = 0;
    char *end;
    long n = strtol(v, &end, 10);
    bool trailing_ok = leading && (*end == '(' || *end == ',');
    if (end == v || (*end && !trailing_ok) || errno || n < lo || n > 1 << 24)
        return sl__set_error(SL_EINVAL, "%s=\"%s\" is not a number >= %d", var, v, lo);
    *out = (int)n;
    return 1;
}

typedef struct reading {
    bool present;
    int rank, size, local_rank, local_size, node;
    bool has_local_rank, has_local_size, has_node;
} reading;

static int read_launcher(const launcher *l, reading *r)
{
    memset(r, 0, sizeof *r);
    int hr = read_int(l->rank, 0, false, &r->rank);
    int hs = hr < 0 ? hr : read_int(l->size, 1, false, &r->size);
    if (hr < 0 || hs < 0)
        return hr < 0 ? hr : hs;
    if (!hr && !hs)
        return 0;
    if (!hr || !hs)
        return sl__set_error(SL_EINVAL, "%s is set but %s is not (%s)", hr ? l->rank : l->size,
                             hr ? l->size : l->rank, l->name);
    if (r->rank >= r->size)
        return sl__set_error(SL_EINVAL, "%s=%d is not below %s=%d", l->rank, r->rank, l->size,
                             r->size);
    int rc;
    if ((rc = read_int(l->local_rank, 0, false, &r->local_rank)) < 0)
        return rc;
    r->has_local_rank = rc;
    if ((rc = read_int(l->local_size, 1, true, &r->local_size)) < 0)
        return rc;
    r->has_local_size = rc;
    if ((rc = read_int(l->node, 0, false, &r->node)) < 0)
        return rc;
    r->has_node = rc;
    if (r->has_local_rank && r->has_local_size && r->local_rank >= r->local_size)
        return sl__set_error(SL_EINVAL, "%s=%d is not below %s=%d", l->local_rank,
                             r->local_rank, l->local_size, r->local_size);
    r->present = true;
    return 0;
}

/* A service worker building a trainer rank's pipeline: that rank, not
 * the worker's own launcher's (service/worker.c, on the building thread). */
static _Thread_local bool overridden;
static _Thread_local sl_dist_context override;

void sl__dist_override(const sl_dist_context *ctx)
{
    overridden = ctx != NULL;
    if (ctx)
        override = *ctx;
}

SL_API int sl_distributed_context(sl_dist_context *ctx)
{
    if (!ctx)
        return sl__set_error(SL_EINVAL, "distributed_context: NULL context");
    if (overridden) {
        *ctx = override;
        return 0;
    }
    reading got[NLAUNCHERS];
    int chosen = -1;
    for (int i = 0; i < NLAUNCHERS; i++) {
        int rc = read_launcher(&launchers[i], &got[i]);
        if (rc < 0)
            return rc;
        if (got[i].present && chosen < 0)
            chosen = i;
    }
    memset(ctx, 0, sizeof *ctx);
    if (chosen < 0) {
        ctx->world_size = ctx->local_world_size = 1;
        snprintf(ctx->source, sizeof ctx->source, "none");
        return 0;
    }
    const reading *r = &got[chosen];
    const launcher *l = &launchers[chosen];
    /* the override is the user's word; among launchers, one job of the same
     * size seen by two of them must have one rank */
    for (int i = chosen + 1; i < NLAUNCHERS && chosen > 0; i++)
        if (got[i].present && got[i].size == r->size && got[i].rank != r->rank)
            return sl__set_error(SL_EINVAL,
                                 "the launchers disagree: %s=%d but %s=%d (both in a job of %d); "
                                 "set SLUICE_RANK and SLUICE_WORLD_SIZE to say which is right",
                                 l->rank, r->rank, launchers[i].rank, got[i].rank, r->size);
    ctx->rank = r->rank;
    ctx->world_size = r->size;
    ctx->local_world_size = r->has_local_size ? r->local_size : r->size;
    ctx->local_rank = r->has_local_rank ? r->local_rank
                                        : r->has_local_size ? r->rank % r->local_size : r->rank;
    ctx->node = r->has_node ? r->node : r->rank / ctx->local_world_size;
    snprintf(ctx->source, sizeof ctx->source, "%s", l->name);
    return 0;
}
