/* Error reporting inside the library: codes are public (sluice.h); the
 * detailed message lives in a thread-local buffer that sl_last_error() reads
 * and that async nodes copy when an error crosses threads. */
#ifndef SL_CORE_ERROR_H
#define SL_CORE_ERROR_H

#include "sluice.h"

#define SL__ERRMSG_MAX 1024

#if defined(__GNUC__)
#define SL__PRINTF(a, b) __attribute__((format(printf, a, b)))
#else
#define SL__PRINTF(a, b)
#endif

/* Sets this thread's message (printf-style) and returns code. */
int sl__set_error(int code, const char *fmt, ...) SL__PRINTF(2, 3);
/* Sets the message from a plain string; returns code. */
int sl__set_error_str(int code, const char *msg);
/* Prepends "prefix: " to this thread's message. */
void sl__error_prefix(const char *prefix);
/* This thread's message buffer (never NULL). */
const char *sl__error_msg(void);
/* The code for an errno from opening or reading a file: SL_ENOENT,
 * SL_EACCES, SL_ENOMEM or SL_EIO. */
int sl__errno_code(int e);
/* True for codes that an error policy may skip (element errors). */
int sl__error_skippable(int code);

/* Inside the library, sl_next_timeout's SL_AGAIN: negative, so that the
 * nodes between a waiting node and the iterator pass it up as they pass
 * an input's error, and never kept as one (graph/async.h). Never
 * returned to a caller. */
#define SL__AGAIN (-1000)

#endif
