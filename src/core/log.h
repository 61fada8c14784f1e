#ifndef SL_CORE_LOG_H
#define SL_CORE_LOG_H

#include "error.h"

void sl__log(sl_log_level level, const char *fmt, ...) SL__PRINTF(2, 3);
int sl__log_enabled(sl_log_level level);

#endif
