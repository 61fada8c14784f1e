/* The file-reading node, for the sources built on it. */
#ifndef SL_OPS_READ_FILES_H
#define SL_OPS_READ_FILES_H

#include <stdbool.h>
#include "sluice.h"

/* sl_read_files, except that with path_last the path (tensor 0 of the
 * input) moves to the end: (bytes, label, path) from (path, label), the
 * layout of sl_image_folder and sl_file_list. Consumes in. */
sl_dataset *sl__read_files(sl_dataset *in, bool path_last);

#endif
