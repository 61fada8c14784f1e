/* The I/O engine's front: which backend a reading node gets. */
#include <errno.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include "../core/error.h"
#include "../core/log.h"
#include "io.h"

/* errno of a kernel that refused a ring for good (no io_uring, or a
 * sandbox forbidding it): later passes go straight to pread instead of
 * asking again. 0 while not known to be refused. */
static atomic_int uring_refused;
static atomic_bool fallback_logged, env_logged;

static bool refusal_is_final(int err)
{
    return err == ENOSYS || err == EPERM || err == EACCES || err == EOPNOTSUPP;
}

/* SLUICE_IO, consulted only when the options leave the choice to us. */
static int env_backend(void)
{
    const char *e = getenv("SLUICE_IO");
    if (!e || !*e || !strcmp(e, "auto"))
        return SL_IO_AUTO;
    if (!strcmp(e, "uring") || !strcmp(e, "io_uring"))
        return SL_IO_URING;
    if (!strcmp(e, "pread"))
        return SL_IO_PREAD;
    if (!atomic_exchange(&env_logged, true))
        sl__log(SL_LOG_WARN, "SLUICE_IO=%s is not uring, pread or auto; ignoring it", e);
    return SL_IO_AUTO;
}

static int open_pread(int depth, bool inline_reads, const char *who, sl__io **out)
{
    int rc = sl__io_pread_open(depth, inline_reads ? 0 : -1, out);
    if (rc < 0)
        sl__error_prefix(who);
    return rc;
}

int sl__io_open(int requested, int depth, const char *who, sl__io **out)
{
    *out = NULL;
    bool inline_reads = requested & SL__IO_INLINE;
    int want = requested & ~SL__IO_INLINE;
    bool by_env = false;
    if (want == SL_IO_AUTO) {
        want = env_backend();
        by_env = want != SL_IO_AUTO;
    }
    if (want == SL_IO_PREAD)
        return open_pread(depth, inline_reads, who, out);

    int err = atomic_load(&uring_refused);
    if (!err) {
        int rc = sl__io_uring_open(depth, out, &err);
        if (rc == 0)
            return 0;
        if (rc != SL_EUNSUPPORTED)
            return sl__set_error(rc, "%s: cannot set up io_uring: %s", who, sl_strerror(rc));
        if (refusal_is_final(err))
            atomic_store(&uring_refused, err);
    }
#ifdef SLUICE_NO_URING
    const char *why = "this build has none: SLUICE_WITH_IO_URING=OFF";
#else
    const char *why = strerror(err);
#endif
    if (want == SL_IO_URING)
        return sl__set_error(SL_EUNSUPPORTED, "%s: io_uring unavailable (%s)%s", who, why,
                             by_env ? ", and SLUICE_IO=uring asks for it" : "");
    if (!atomic_exchange(&fallback_logged, true))
        sl__log(SL_LOG_INFO, "io_uring unavailable (%s); reading with pread", why);
    return open_pread(depth, inline_reads, who, out);
}

int sl__io_backend(const sl__io *io)
{
    return io->backend;
}

int sl__io_prep(sl__io *io, int fd, void *buf, size_t len, uint64_t off, void *user)
{
    if (len > SL__IO_MAX_READ)
        return sl__set_error(SL_EINTERNAL, "%s: read of %zu bytes is too long", io->ops->name,
                             len);
    if (io->outstanding >= io->depth)
        return sl__set_error(SL_EBUSY, "%s: %d reads already outstanding", io->ops->name,
                             io->depth);
    int rc = io->ops->prep(io, fd, buf, len, off, user);
    if (rc == 0)
        io->outstanding++;
    return rc;
}

int sl__io_submit(sl__io *io)
{
    return io->ops->submit(io);
}

int sl__io_reap(sl__io *io, sl__io_cqe *out, int max, bool wait)
{
    /* nothing could ever wake the wait: the caller and the engine
     * disagree about what is in flight */
    if (wait && io->outstanding == 0)
        return sl__set_error(SL_EINTERNAL, "%s: waiting with no read outstanding",
                             io->ops->name);
    int n = io->ops->reap(io, out, max, wait);
    if (n > 0)
        io->outstanding -= n;
    return n;
}

void sl__io_close(sl__io *io)
{
    if (io)
        io->ops->close(io);
}
