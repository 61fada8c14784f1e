/*
 * What the record readers (tfrecord.c, tar.c) share: a dataset of paths
 * walked one file at a time, each read as a stream (runtime/stream.h), the
 * current path kept as the origin of every element (messages name the
 * shard), the file-level error rules, and positions for saved states.
 */
#ifndef SL_SOURCES_SHARDS_H
#define SL_SOURCES_SHARDS_H

#include "../graph/node.h"
#include "../runtime/stream.h"

typedef struct sl__shards {
    sl__iter *in;     /* the paths */
    int compression;     /* sl_compression or SL__STREAM_DETECT */
    sl_element *path;    /* the current file's path element, NULL between files */
    sl__stream *s;
    int64_t file;        /* files started so far */
    int64_t max_record;  /* SL_OPT_MAX_RECORD_BYTES */
    bool done;           /* the paths ended */
    int64_t counted;     /* file bytes already added to the statistics */
    /* positions: the paths' record from before the current file was
     * pulled; restoring, the offset to resume the first file at */
    sl__bytes before;
    sl__snapper snap;
    int64_t resume_off;
} sl__shards;

/* Makes the paths' iterator and reads what a saved state says (fields:
 * files started, offset in the current file or -1 between files). */
int sl__shards_init(sl__iter *it, sl__shards *sh, int compression, int64_t epoch);
void sl__shards_fini(sl__shards *sh);
/* The current file's stream, opening the next file when there is none:
 * 0 with sh->s set, SL_EOF after the last file, or an error that has been
 * through the policy (a file that cannot be opened is one element error). */
int sl__shards_stream(sl__iter *it, sl__shards *sh);
/* Closes the current file (its end, or an error that loses its rest). */
void sl__shards_end_file(sl__iter *it, sl__shards *sh);
/* A file-level failure (message set, naming the file and offset): the
 * rest of the file is lost; under a skip policy it counts as one error and
 * 0 is returned (go on with the next file), else the code. */
int sl__shards_lose_file(sl__iter *it, sl__shards *sh, int code);
/* The record (fields then the paths' record): offset is where the next
 * element of the current file starts (or -1 between files). */
int sl__shards_save(sl__iter *it, sl__shards *sh, sl__bytes *w, int64_t offset);
/* Reading opts for a file. */
void sl__shards_stream_opts(const sl__iter *it, const sl__shards *sh, sl__stream_opts *o);

#endif
