#ifndef SL_CORE_LOG_H
#define SL_CORE_LOG_H

#include "error.h"

void sl__log(sl_log_level level, const char *fmt, ...) SL__PRINTF(2, 3);
int sl__log_enabled(sl_log_level level);
/* Whether SLUICE_LOG names `category` ("SLUICE_LOG=info,autotune"). */
int sl__log_category_enabled(const char *category);
/* Logs whatever the level setting, for messages the user asked for by
 * category or option (the autotune decision log). */
void sl__log_always(sl_log_level level, const char *fmt, ...) SL__PRINTF(2, 3);
/* Whether environment variable `name` is set to anything but "" or "0"
 * (the SLUICE_NO_AVX512 kind of switch). */
int sl__env_on(const char *name);

#endif
