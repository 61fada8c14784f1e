/*
 * The I/O engine: asynchronous file reads for the nodes that read files.
 *
 * One engine serves one reading node for one pass, and only that node's
 * producer thread calls it (after sl__io_open, which may run on another
 * thread). Reads are prepared, then submitted as a batch, and complete in
 * any order; the caller matches completions to requests by the user
 * pointer and keeps at most `depth` reads outstanding (prepared, in flight,
 * or completed but not reaped).
 *
 * Backends: io_uring (liburing), or a few threads of the engine's own doing
 * pread where io_uring cannot be set up (old kernels, seccomp in
 * containers). Either way the caller's thread never blocks on one read.
 */
#ifndef SL_RUNTIME_IO_H
#define SL_RUNTIME_IO_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct sl__io sl__io;

/* One finished read. */
typedef struct sl__io_cqe {
    void *user;
    int64_t res; /* bytes read (0 at end of file), or -errno */
    int code;        /* remote reads: 0, or the failure's SL_E* code ... */
    const char *msg; /* ... and its message (valid until the next reap) */
} sl__io_cqe;

/* Opens an engine with room for `depth` outstanding reads. `requested` is a
 * sl_io_backend: AUTO honours SLUICE_IO=uring|pread, else tries io_uring
 * and falls back to pread (logged once per process). Asking for io_uring,
 * by option or environment, where it is unavailable fails with
 * SL_EUNSUPPORTED and the reason. Returns 0 or a code with the message set
 * (prefixed by `who`). */
int sl__io_open(int requested, int depth, const char *who, sl__io **out);
/* Or'ed into `requested`: a pread engine does its reads in sl__io_submit
 * on the caller's thread, with no threads of its own (the edge profile). */
#define SL__IO_INLINE 0x100
/* SL_IO_URING or SL_IO_PREAD. */
int sl__io_backend(const sl__io *io);
/* Queues a read of len bytes (at most SL__IO_MAX_READ) at off into buf;
 * nothing starts before sl__io_submit. 0, or SL_EBUSY when `depth` reads
 * are already outstanding. The front (io.c) counts what is outstanding,
 * the same way for every backend. */
int sl__io_prep(sl__io *io, int fd, void *buf, size_t len, uint64_t off, void *user);
/* Starts every queued read with one system call (io_uring) or one wake-up
 * (pread). 0 or a code with the message set. */
int sl__io_submit(sl__io *io);
/* Stores up to max finished reads in out and returns their number; with
 * wait, blocks until there is at least one. Waiting with no read
 * outstanding is the caller's error: SL_EINTERNAL, at once, whatever the
 * backend. Negative code on an engine failure. */
int sl__io_reap(sl__io *io, sl__io_cqe *out, int max, bool wait);
/* Waits for reads in flight (their buffers are written until they end),
 * drops queued ones, and frees the engine. NULL ok. */
void sl__io_close(sl__io *io);

/* Longest single read request; bigger files are read in pieces. */
#define SL__IO_MAX_READ ((size_t)1 << 30)

/* ---- backends (io_uring.c, io_pread.c) ---- */

/* The backend's half: prep is called only below `depth` outstanding, reap
 * with wait only with some outstanding; the front counts both. */
typedef struct sl__io_ops {
    const char *name; /* for messages */
    int (*prep)(sl__io *io, int fd, void *buf, size_t len, uint64_t off, void *user);
    int (*submit)(sl__io *io);
    int (*reap)(sl__io *io, sl__io_cqe *out, int max, bool wait);
    void (*close)(sl__io *io);
} sl__io_ops;

struct sl__io {
    const sl__io_ops *ops;
    int backend;
    int depth;
    int outstanding; /* prepared and not yet reaped (io.c keeps it) */
};

/* 0; SL_EUNSUPPORTED with the kernel's errno in *sys_err when it refuses
 * a ring; or SL_ENOMEM. No message is set: the caller words it. */
int sl__io_uring_open(int depth, sl__io **out, int *sys_err);
/* 0 or a code with the message set. */
/* threads: 0 for reads done inline by submit, < 0 for the default. */
int sl__io_pread_open(int depth, int threads, sl__io **out);

/* ---- remote objects (io_http.c): libcurl's multi interface ----
 *
 * The `fd` of sl__io_prep is an object added with sl__http_add. A read
 * completes with every byte asked for, or fewer where the object ends
 * (0 past its end), or with `code` set when a fault outlived the retries
 * or cannot be retried (code SL_EACCES: 401/403, SL_ENOENT: 404, SL_EIO:
 * the rest, an object that changed between two reads included). */

typedef struct sl__http_opts {
    int max_attempts;       /* per request, counted since its last progress */
    double max_seconds;     /* per request without progress, retries included */
    double timeout_seconds; /* to connect; a transfer stalled this long is cut */
} sl__http_opts;

#define SL__HTTP_UNKNOWN UINT64_MAX

int sl__http_open(int depth, const sl__http_opts *o, sl__io **out);
/* The object url names (its credentials resolved now): a handle >= 0, or
 * a negative code with the message set. */
int sl__http_add(sl__io *io, const char *url);
/* Its size, once a response has told it (SL__HTTP_UNKNOWN before). */
uint64_t sl__http_size(const sl__io *io, int obj);
/* The validator its responses carried: ETag, else Last-Modified ("" for
 * none). */
const char *sl__http_validator(const sl__io *io, int obj);
/* Its URL as messages show it: no credentials, no query. */
const char *sl__http_shown(const sl__io *io, int obj);
/* Forgets obj (no read of it may be in flight); its handle is reused.
 * NULL io ok. */
void sl__http_drop(sl__io *io, int obj);
/* Waits up to ms for a transfer to make progress (for callers that
 * poll two engines). */
void sl__http_poll(sl__io *io, int ms);

#endif
