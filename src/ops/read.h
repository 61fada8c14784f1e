/* Internal flags of sl_read_files, for the sources that build it. */
#ifndef SL_OPS_READ_H
#define SL_OPS_READ_H

/* A missing file (SL_ENOENT) is skipped with a warning whatever the error
 * policy: a rescanning folder's files may go between the scan and the
 * read. */
#define SL__READ_GONE_OK (1u << 31)

#endif
