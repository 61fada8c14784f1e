/* What the library adds to sl_distributed_context (distenv.c). */
#ifndef SL_CORE_DISTENV_H
#define SL_CORE_DISTENV_H

#include "sluice.h"

/* Makes sl_distributed_context on this thread answer ctx (copied) rather
 * than the environment, until called with NULL: a service worker builds
 * a trainer rank's pipeline this way. */
void sl__dist_override(const sl_dist_context *ctx);

#endif
