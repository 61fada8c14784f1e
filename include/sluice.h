/*
 * sluice — streaming training-data pipelines in C.
 *
 * This header is the whole public contract. Every function says what it
 * does, who owns what, what it returns on error and which thread may call it.
 *
 * Two tiers. Everything before the "Experimental" section at the end is
 * the stable core: it changes only as the stability policy in README.md
 * says (while the version is 0.x, only in a new minor version), and its
 * symbols carry the version node SLUICE_<major>.<minor> of the release
 * that added them. The experimental part (statistics, report, trace, the
 * autotune log, DLPack export) needs SLUICE_EXPERIMENTAL defined and may
 * change in any release.
 *
 * Thread rules, once for all:
 *   - sl_dataset objects are immutable descriptions after construction and
 *     may be shared between threads and iterators freely. What they keep
 *     between iterators (the count of epochs handed out, a memory cache's
 *     elements) is thread-safe.
 *   - An sl_iterator is used by one thread at a time (any thread, but not two
 *     at once).
 *   - An sl_runtime is shared: any number of iterators on any threads.
 *   - sl_element objects may be retained and released from any thread; their
 *     tensor data is read-only once the element has been yielded.
 *   - sl_options objects are plain values: one thread at a time.
 *
 * Errors: functions returning int give 0 (or a count) on success and a
 * negative SL_E* code on failure. Builders returning a pointer give NULL on
 * failure and leave a message in sl_last_error() (thread-local).
 *
 * Memory: everything the library allocates goes through the hooks installed
 * with sl_set_allocator(); what the library hands out, the library frees.
 *
 * Versioned structs (sl_image_spec, sl_mixup_spec) begin with struct_size:
 * fill them with their _init function, then change fields.
 *
 * Deprecated names say so (SL_DEPRECATED: a compiler warning naming the
 * replacement) and go when the SONAME's major version moves.
 *
 * Contents
 *   Version, Errors, Memory, Logging
 *   Tensors and elements          sl_element, sl_tensor, strings
 *   Element structure             sl_structure: tuples, dicts, leaf specs
 *   Runtime                       the worker pool iterators share
 *   Options                       sl_options: threads, budgets, policies, seed
 *   Datasets                      the dataset graph; builders by family:
 *     Sources                     range, from_tensor_slices, generators...
 *     Map                         map, filter, scan, ...
 *     Combining                   zip, concatenate, sample/choose_from, ...
 *     Batching                    batch, padded_batch, unbatch, window, ...
 *     Ordering and selection      shuffle, take, skip, shard, repeat, ...
 *     Many processes              distribute over ranks
 *     Buffering                   prefetch, cache
 *   Files and folders             image folders, file lists, read_files
 *   Sharded records               list_files, interleave, TFRecord,
 *                                 tf.train.Example, WebDataset tar
 *   Images                        map_image and its spec, mixup/cutmix
 *   Iterators                     create, next, free, statistics, reduce
 *   Persistence                   save, load, snapshot; checkpoints
 *   Experimental                  statistics snapshot, report, trace,
 *                                 autotune log, DLPack (SLUICE_EXPERIMENTAL)
 */
#ifndef SLUICE_H
#define SLUICE_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(SLUICE_BUILDING) && defined(__GNUC__)
#define SL_API __attribute__((visibility("default")))
#else
#define SL_API
#endif

/* A deprecated name: a compiler warning at each use, saying what replaces
 * it. Deprecated names go when the SONAME's major version moves. */
#if defined(__GNUC__) && !defined(SLUICE_BUILDING)
#define SL_DEPRECATED(msg) __attribute__((deprecated(msg)))
#else
#define SL_DEPRECATED(msg)
#endif

/* ------------------------------------------------------------------------ */
/* Version                                                                  */

#define SL_VERSION_MAJOR 0
#define SL_VERSION_MINOR 3
#define SL_VERSION_PATCH 0
#define SL_VERSION_NUMBER \
    (SL_VERSION_MAJOR * 10000 + SL_VERSION_MINOR * 100 + SL_VERSION_PATCH)

/* The version of the library actually loaded; compare with
 * SL_VERSION_NUMBER to detect a header/library mismatch. */
SL_API unsigned sl_version_number(void);
/* "MAJOR.MINOR.PATCH"; static storage. */
SL_API const char *sl_version_string(void);
/* The optional parts this library was built with (CMake's SLUICE_WITH_*
 * options), as "name=on" or "name=off" words separated by single spaces:
 * "io_uring=on jpeg=on png=on webp=on zlib=on curl=on ffmpeg=on ucx=on" (ucx:
 * the preprocessing service's transport). A later release only
 * appends names. Built in is not the same as usable: io_uring may still be
 * refused by the kernel (reads then fall back to pread). Static storage. */
SL_API const char *sl_build_options(void);

/* ------------------------------------------------------------------------ */
/* Errors                                                                   */

/* One list, only ever appended to: codes are ABI. */
#define SL_ERRNO_MAP(X)                                                  \
    X(NOMEM, -1, "out of memory")                                        \
    X(INVAL, -2, "invalid argument")                                     \
    X(IO, -3, "input/output error")                                      \
    X(NOENT, -4, "no such file or directory")                            \
    X(CORRUPT, -5, "corrupt or unreadable data")                         \
    X(SHAPE, -6, "shape mismatch")                                       \
    X(DTYPE, -7, "dtype mismatch")                                       \
    X(CANCELED, -8, "operation canceled")                                \
    X(BUSY, -9, "resource busy")                                         \
    X(RANGE, -10, "value out of range")                                  \
    X(UNSUPPORTED, -11, "operation not supported")                       \
    X(CALLBACK, -12, "user callback failed")                             \
    X(TOO_MANY_ERRORS, -13, "element error rate exceeded")               \
    X(STATE, -14, "object in the wrong state for this call")             \
    X(INTERNAL, -15, "internal error")                                   \
    X(ACCES, -16, "permission denied")                                   \
    X(MISMATCH, -17, "saved state belongs to another pipeline")

typedef enum sl_error {
    SL_OK = 0,
#define SL__ERR_ENUM(name, code, text) SL_E##name = code,
    SL_ERRNO_MAP(SL__ERR_ENUM)
#undef SL__ERR_ENUM
} sl_error;

/* sl_next() returns this (positive) when the iterator is exhausted. */
#define SL_EOF 1
/* sl_next_timeout() returns this (positive: not an error) when no element
 * came in time; the iterator is as it was. */
#define SL_AGAIN 2

/* Short static description of a code ("out of memory"); never NULL. */
SL_API const char *sl_strerror(int code);
/* Message of the last failed builder or setup call on this thread; "" if
 * none. Valid until the next sluice call on this thread. */
SL_API const char *sl_last_error(void);
/* The code that goes with sl_last_error() (0 if none). */
SL_API int sl_last_error_code(void);
/* Clears sl_last_error() and its code on this thread. */
SL_API void sl_clear_error(void);
/* Sets this thread's last error: code (negative) and message (copied,
 * NULL: sl_strerror's). For callbacks that report through sl_last_error,
 * such as an sl_interleave_fn returning NULL. Returns code. */
SL_API int sl_set_last_error(int code, const char *msg);

/* ------------------------------------------------------------------------ */
/* Memory                                                                   */

/* Allocation hooks. alloc returns memory aligned to `align` (a power of two,
 * at most 4096) or NULL; free receives the size and alignment passed to the
 * matching alloc. Both may be called from any thread concurrently. */
typedef struct sl_allocator {
    void *(*alloc)(void *user, size_t size, size_t align);
    void (*free)(void *user, void *ptr, size_t size, size_t align);
    void *user;
} sl_allocator;

/* Installs allocation hooks. NULL restores the default: aligned_alloc and
 * free, with buffers of 8 MiB and more (batches) placed on 2 MiB boundaries
 * and offered to transparent huge pages (madvise MADV_HUGEPAGE). Only
 * allowed while the library holds no memory (call it first, or after
 * freeing everything and sl_release_memory()); otherwise SL_EBUSY. */
SL_API int sl_set_allocator(const sl_allocator *allocator);
/* Returns cached buffers to the allocator: the calling thread's, the shared
 * pools', and those of every runtime's pool workers (an idle worker hands
 * its cache over at once; the call waits at most 100 ms for workers busy
 * with a task, and those hand theirs to the shared pools when the task
 * ends). Any thread. */
SL_API void sl_release_memory(void);
/* Bytes currently obtained from the allocator (including pool caches). */
SL_API int64_t sl_memory_in_use(void);

/* ------------------------------------------------------------------------ */
/* Logging                                                                  */

typedef enum sl_log_level { SL_LOG_ERROR = 0, SL_LOG_WARN, SL_LOG_INFO, SL_LOG_DEBUG } sl_log_level;
typedef void (*sl_log_fn)(void *user, sl_log_level level, const char *msg);
/* Routes library messages (default: warnings and errors to stderr, prefixed
 * "sluice: "). NULL fn restores the default. Any thread; the callback may be
 * called from library threads. The environment variable SLUICE_LOG=debug|
 * info|warn|error|off sets the default level. */
SL_API void sl_set_log_callback(sl_log_fn fn, void *user);
SL_API void sl_set_log_level(sl_log_level level);

/* ------------------------------------------------------------------------ */
/* Tensors and elements                                                     */

typedef enum sl_dtype {
    SL_UINT8 = 0,
    SL_INT8,
    SL_UINT16,
    SL_INT16,
    SL_INT32,
    SL_INT64,
    SL_FLOAT32,
    SL_FLOAT64,
    /* Variable-length byte strings (paths, file contents). The data of a
     * string tensor holding n = product(shape) strings is n+1 uint64_t
     * offsets followed by the bytes: string i is bytes [off[i], off[i+1]).
     * off[0] is usually 0, but may be up to 7 (a view of a record, as
     * sl_parse_example makes); use sl_tensor_string() to read one. */
    SL_STRING,
    SL_DTYPE_COUNT
} sl_dtype;

#define SL_MAX_DIMS 8

typedef struct sl_tensor sl_tensor;   /* owned by its element */
typedef struct sl_element sl_element; /* reference-counted */

/* Bytes per item of a fixed-size dtype; 0 for SL_STRING or unknown. */
SL_API size_t sl_dtype_size(sl_dtype dtype);
/* "uint8", "float32", ...; static storage. */
SL_API const char *sl_dtype_name(sl_dtype dtype);

/* A new element with room for `ntensors` tensors and a reference count of 1,
 * or NULL (sl_last_error()). Tensors are added in order with the calls below;
 * an element is immutable once it has been passed to the library (whose
 * sl_parse_example may reuse the bytes of a record that only it holds). */
SL_API sl_element *sl_element_create(int ntensors);
SL_API sl_element *sl_element_retain(sl_element *el);
/* Drops one reference; frees the element and its buffers at zero. NULL ok. */
SL_API void sl_element_release(sl_element *el);

/* Appends an uninitialised tensor and returns its data pointer (64-byte
 * aligned, product(shape)*sl_dtype_size(dtype) bytes, which may be 0), or
 * NULL with SL_EINVAL/SL_ENOMEM in sl_last_error(). Not for SL_STRING. */
SL_API void *sl_element_add_tensor(sl_element *el, sl_dtype dtype, int ndim,
                                   const int64_t *shape);
/* Appends a scalar string tensor holding a copy of `len` bytes. */
SL_API int sl_element_add_string(sl_element *el, const void *bytes, size_t len);
/* Appends a string tensor of the given shape holding copies of
 * product(shape) strings, in row-major order: items[i] with lens[i] bytes
 * (lens NULL: items are NUL-terminated). 0, SL_EINVAL (a bad shape, a NULL
 * item, no tensor slot left) or SL_ENOMEM. */
SL_API int sl_element_add_strings(sl_element *el, int ndim, const int64_t *shape,
                                  const char *const *items, const size_t *lens);
/* Appends a scalar int64 / float32 tensor. */
SL_API int sl_element_add_int64(sl_element *el, int64_t v);
SL_API int sl_element_add_float32(sl_element *el, float v);
/* Appends tensor `index` of `src` without copying: the new tensor shares
 * src's buffer, which stays alive as long as either element does. */
SL_API int sl_element_add_shared(sl_element *el, const sl_element *src, int index);

SL_API int sl_element_size(const sl_element *el);
/* Tensor i of el, or NULL when out of range. Valid while el is alive. */
SL_API const sl_tensor *sl_element_tensor(const sl_element *el, int i);

SL_API sl_dtype sl_tensor_dtype(const sl_tensor *t);
SL_API int sl_tensor_ndim(const sl_tensor *t);
/* Pointer to ndim dimensions (NULL-safe for ndim 0 callers). */
SL_API const int64_t *sl_tensor_shape(const sl_tensor *t);
/* Number of items: product of the shape (1 for a scalar). */
SL_API int64_t sl_tensor_count(const sl_tensor *t);
SL_API const void *sl_tensor_data(const sl_tensor *t);
SL_API size_t sl_tensor_nbytes(const sl_tensor *t);
/* Item i of a string tensor: its bytes (not NUL-terminated) and length, or
 * NULL if t is not a string tensor or i is out of range. */
SL_API const char *sl_tensor_string(const sl_tensor *t, int64_t i, size_t *len);
/* Convenience: item 0 of an integer tensor (a label), converted to int64
 * from any integer dtype. For a float or string tensor it returns
 * INT64_MIN and sets SL_EDTYPE in sl_last_error(); for NULL or a tensor
 * with no items, INT64_MIN and SL_EINVAL. (A tensor that holds INT64_MIN
 * is told apart by sl_last_error_code() after sl_clear_error().) */
SL_API int64_t sl_tensor_int64(const sl_tensor *t);

/* ------------------------------------------------------------------------ */
/* Element structure                                                        */

/*
 * What an element's flat list of tensors stands for: a tree of tuples and
 * dicts (string keys) whose leaves are its tensors, in order, as tf.data's
 * nest sees an element: ("image": ..., "label": ...) is a dict of two
 * leaves, tensors 0 and 1. A dict's entries are sorted by key and its
 * leaves come in that order (tf.nest's rule), so the same keys make the
 * same structure whatever order they were written in. A leaf may say what
 * its tensor holds: a dtype and a shape, either of them unknown.
 *
 * Datasets carry the structure of their elements (sl_dataset_structure),
 * worked out when they are built; the elements themselves stay flat, so
 * nothing changes on the paths data takes. A structure is immutable and
 * reference counted, and may be shared between threads; every node of it
 * is a handle onto the whole (retaining a child keeps the tree).
 *
 * Text form, for sl_structure_parse and sl_structure_format:
 *   a leaf    dtype or ?, then optionally its shape: int64[] (a scalar),
 *             uint8[?,?,3] (? a dimension not known), string (rank not
 *             known), ? (nothing known)
 *   a tuple   (s, s, ...); a tuple of one is (s,) and () is empty
 *   a dict    {key: s, ...}; a key of letters, digits and _ . - is
 *             written as it is, any other in double quotes with \" and \\
 *             ("image/encoded")
 */
typedef struct sl_structure sl_structure;

/* What sl_structure_kind says a node is. */
enum {
    SL_STRUCTURE_LEAF = 0,
    SL_STRUCTURE_TUPLE,
    SL_STRUCTURE_DICT,
};

/* A new structure from its text form, or NULL with SL_EINVAL naming the
 * offset where the text goes wrong (or SL_ENOMEM). At most 65536 nodes
 * nested 64 deep. */
SL_API sl_structure *sl_structure_parse(const char *text);
SL_API sl_structure *sl_structure_retain(sl_structure *s);
/* Drops one reference (of any node's tree); NULL ok. */
SL_API void sl_structure_release(sl_structure *s);
/* The text form of s into buf (n bytes, NUL-terminated, cut short if it
 * does not fit); returns its full length as snprintf does, or SL_ENOMEM.
 * s NULL (a structure not known) writes "?". */
SL_API int sl_structure_format(const sl_structure *s, char *buf, size_t n);
/* SL_STRUCTURE_LEAF, _TUPLE or _DICT. */
SL_API int sl_structure_kind(const sl_structure *s);
/* A tuple's or dict's children (0 for a leaf), child i (NULL when out of
 * range), a dict's key i, and a dict's child by key (NULL: no such key).
 * What they return is valid while s is. */
SL_API int sl_structure_size(const sl_structure *s);
SL_API const sl_structure *sl_structure_child(const sl_structure *s, int i);
SL_API const char *sl_structure_key(const sl_structure *s, int i);
SL_API const sl_structure *sl_structure_get(const sl_structure *s, const char *key);
/* The tensors under node s: how many, and the index of the first in the
 * element (its tree's root counts from 0), so the tensors of
 * sl_structure_get(s, "image") are sl_element_tensor(el, index ...). */
SL_API int sl_structure_leaves(const sl_structure *s);
SL_API int sl_structure_leaf_index(const sl_structure *s);
/* A leaf's dtype (an sl_dtype), rank and dimensions, -1 where not known
 * (and for a node that is not a leaf); shape is NULL for rank <= 0. */
SL_API int sl_structure_dtype(const sl_structure *s);
SL_API int sl_structure_ndim(const sl_structure *s);
SL_API const int64_t *sl_structure_shape(const sl_structure *s);

/* ------------------------------------------------------------------------ */
/* Runtime                                                                  */

typedef struct sl_runtime sl_runtime;

/* A worker pool of `threads` threads (0: one per CPU in the affinity mask).
 * Several iterators may share one runtime, and with it one CPU budget.
 * NULL on failure (sl_last_error()). */
SL_API sl_runtime *sl_runtime_create(int threads);
/* Joins the workers. Every iterator using the runtime must be freed first.
 * NULL ok. */
SL_API void sl_runtime_free(sl_runtime *rt);
SL_API int sl_runtime_threads(const sl_runtime *rt);
/* CPUs in this process's affinity mask (at least 1). */
SL_API int sl_cpu_count(void);

/* ------------------------------------------------------------------------ */
/* Options                                                                  */

typedef struct sl_options sl_options;

typedef enum sl_option {
    /* Worker threads: 0 uses the runtime (the process default runtime, or
     * the one set with sl_options_set_runtime); n > 0 gives the iterator a
     * private runtime of n threads. */
    SL_OPT_THREADS = 0,
    /* Cap in bytes on data held in the iterator's buffers; producers wait
     * rather than exceed it (each buffer may always hold one element, so the
     * pipeline cannot deadlock). 0 = half of the memory available to the
     * process when the iterator is created: MemAvailable from /proc/meminfo
     * (free memory plus the page cache it can reclaim), or less where a
     * cgroup memory limit (a container's, a batch job's) leaves less room.
     * SL_STAT_RAM_BUDGET says what it came to. */
    SL_OPT_RAM_BUDGET,
    /* One of sl_error_policy. */
    SL_OPT_ERROR_POLICY,
    /* For SL_ERRORS_SKIP_RATE: the largest tolerated fraction of failed
     * elements, in parts per million (e.g. 10000 = 1%). */
    SL_OPT_ERROR_MAX_PPM,
    /* Global seed: ops without their own seed derive one from it. */
    SL_OPT_SEED,
    /* 1 (default): parallel ops keep input order, output is reproducible.
     * 0: parallel maps emit in completion order unless asked otherwise. */
    SL_OPT_DETERMINISTIC,
    /* How many skipped-element errors are logged before going quiet. */
    SL_OPT_ERROR_LOG_LIMIT,
    /* File reads: one of sl_io_backend (default SL_IO_AUTO: io_uring where
     * it can be set up, else pread; the environment variable
     * SLUICE_IO=uring|pread overrides AUTO). */
    SL_OPT_IO_BACKEND,
    /* Reads in flight per reading node (the I/O queue depth); default 32.
     * With SL_OPT_AUTOTUNE on, this is where the controller starts (it may
     * go up to 256, or this value if larger). */
    SL_OPT_IO_DEPTH,
    /* 1 (default): a controller moves every knob left at SL_AUTOTUNE (map
     * parallelism, prefetch depth, I/O depth) from the measured consumer
     * stall; 0: those knobs keep their documented defaults. */
    SL_OPT_AUTOTUNE,
    /* Worker threads the controller may keep busy at once, summed over the
     * iterators sharing a runtime; 0 = the CPUs in the affinity mask. */
    SL_OPT_CPU_BUDGET,
    /* Consumer stall the controller tolerates, in parts per million of wall
     * time (default 20000 = 2%): over it, the bottleneck grows. A stall
     * over a quarter of it still buys prefetch depth while RAM is
     * plentiful (docs/design.md, "Autotune"). */
    SL_OPT_STALL_TARGET_PPM,
    /* Keys 12 and 13 are experimental options (SLUICE_EXPERIMENTAL below:
     * SL_OPT_TRACE_EVENTS, SL_OPT_AUTOTUNE_LOG). */
    SL_OPT_EXPERIMENTAL_12,
    SL_OPT_EXPERIMENTAL_13,
    /* The epoch the iterator runs, >= 0: with the seed it keys every random
     * choice (shuffle order, crops, flips), so the same epoch replays the
     * same output. -1 (default): the dataset's next epoch, counted per
     * dataset object: the first iterator made from it runs epoch 0, the
     * next epoch 1, and so on (any thread; the count is atomic), so a loop
     * that makes one iterator per epoch gets a new order and new crops each
     * time. Naming an epoch does not move that count; an iterator whose
     * creation fails has still taken its epoch. For resuming, and for
     * processes that must agree on the epoch. */
    SL_OPT_EPOCH,
    /* The largest record a TFRecord or tar shard may hold, bytes (default
     * 256 MiB): a length over it is a corrupt record, refused before any
     * allocation. */
    SL_OPT_MAX_RECORD_BYTES,
    /* One of sl_profile: defaults for a kind of machine. Options set
     * explicitly win over a profile's defaults. */
    SL_OPT_PROFILE,
    /* Remote reads (URLs): attempts per request before its error goes to
     * the error policy (default 8), counted since the request last
     * received a byte, so a transfer cut again and again while it
     * progresses is not given up on. */
    SL_OPT_REMOTE_MAX_ATTEMPTS,
    /* ... and the seconds a request may go without receiving a byte, retries
     * and their backoff included (default 120). */
    SL_OPT_REMOTE_RETRY_SECONDS,
    /* The local shard cache's size limit, bytes (default 0: none); the
     * folder is set with sl_options_set_remote_cache_dir. */
    SL_OPT_REMOTE_CACHE_BYTES,
    SL_OPT_COUNT
} sl_option;

typedef enum sl_profile {
    SL_PROFILE_DEFAULT = 0,
    /* A small device (one core, little memory): SL_OPT_THREADS 1,
     * SL_OPT_AUTOTUNE 0, SL_OPT_RAM_BUDGET 64 MiB, SL_OPT_IO_DEPTH 4,
     * SL_OPT_IO_BACKEND pread. With that one thread every node runs on
     * the thread that calls sl_next: no pool worker, no producer, no
     * controller, no reader or fetcher threads; prefetch passes elements
     * through, maps, map_image and interleave do their work when the
     * consumer asks for it, file reads are pread calls there. The output
     * is the default profile's, byte for byte, and saved states move
     * between the two. */
    SL_PROFILE_EDGE,
} sl_profile;

/* SL_IO_HTTP is never asked for: SL_STAT_IO_BACKEND reports it where reads
 * go to URLs (libcurl). */
typedef enum sl_io_backend { SL_IO_AUTO = 0, SL_IO_URING, SL_IO_PREAD, SL_IO_HTTP } sl_io_backend;

typedef enum sl_error_policy {
    SL_ERRORS_FAIL = 0, /* the element's error comes out of sl_next() */
    SL_ERRORS_SKIP,     /* drop the element, count it, log the first few */
    /* skip while failed <= max(1, ppm * seen / 1e6), where seen counts
     * elements that came out plus failed ones; then fail with
     * SL_ETOO_MANY_ERRORS */
    SL_ERRORS_SKIP_RATE,
} sl_error_policy;

/* Default-valued options, or NULL (sl_last_error()). Free with
 * sl_options_free (NULL ok). An iterator copies what it needs. */
SL_API sl_options *sl_options_create(void);
SL_API void sl_options_free(sl_options *opts);
/* SL_EINVAL for an unknown key or a value outside sl_option_bounds(). */
SL_API int sl_options_set(sl_options *opts, sl_option key, int64_t value);
SL_API int64_t sl_options_get(const sl_options *opts, sl_option key);
SL_API int sl_option_bounds(sl_option key, int64_t *min, int64_t *max);
/* Shares `rt` (not owned; must outlive iterators made with these options).
 * NULL returns to the default runtime. */
SL_API int sl_options_set_runtime(sl_options *opts, sl_runtime *rt);
/* The local shard cache (NULL or "": none, the default): remote objects
 * (URLs) read whole by tfrecord and tar_shards are kept in dir, written
 * under a temporary name and renamed when complete (size and ETag
 * checked), and read from there at the next pass; the processes of a host
 * may share it (an flock), and past SL_OPT_REMOTE_CACHE_BYTES the copies
 * used least recently go. The folder is made when missing. dir is copied.
 * 0, SL_EINVAL or SL_ENOMEM. */
SL_API int sl_options_set_remote_cache_dir(sl_options *opts, const char *dir);

/* ------------------------------------------------------------------------ */
/* Datasets                                                                 */

typedef struct sl_dataset sl_dataset;

/* Cardinality: a count >= 0, or one of these. */
#define SL_INFINITE (-1)
#define SL_UNKNOWN (-2)
/* Parallelism / depth chosen by the library. With SL_OPT_AUTOTUNE on (the
 * default) the controller moves it, starting small (1) and growing as the
 * consumer's stall asks, up to 4 × runtime threads for maps and 64 for
 * prefetch; with it off, the documented defaults hold: 2 × runtime threads
 * for maps, 2 for prefetch. */
#define SL_AUTOTUNE (-1)

/*
 * Builders. Each one consumes the caller's reference to its input
 * dataset(s), even on failure, and returns a new dataset with one reference,
 * or NULL. Given a NULL input they return NULL and keep the first error in
 * sl_last_error(), so a whole chain needs one check at its end.
 *
 * Flags are per op: each op's `flags` takes only the SL_* flags its
 * comment names, and flags of different ops share values (SL_DROP_REMAINDER,
 * SL_SHUFFLE_NO_RESHUFFLE and SL_WITH_PATHS are all 1u): an op refuses
 * bits it has no flag for, but another op's flag with the value of one of
 * its own is read as its own.
 */

/* Datasets are reference counted, as elements are: retain adds a
 * reference, release drops one (NULL ok) and frees the dataset with the
 * last. Iterators keep their own, so a dataset may be released while
 * iterators over it run. */
SL_API sl_dataset *sl_dataset_retain(sl_dataset *ds);
SL_API void sl_dataset_release(sl_dataset *ds);
/* Deprecated: sl_dataset_release's name before 0.3, the same function;
 * goes when the SONAME moves. */
SL_API void sl_dataset_free(sl_dataset *ds) SL_DEPRECATED("sl_dataset_free is sl_dataset_release");
/* Number of elements of one pass, SL_INFINITE or SL_UNKNOWN. */
SL_API int64_t sl_dataset_cardinality(const sl_dataset *ds);
/* The structure of ds's elements (borrowed: valid while ds is), or NULL
 * when it is not known (after a map whose function's output was not
 * declared): elements are then taken as they are, one tensor as a leaf
 * and several as a tuple. Sources and ops set it: range gives int64[],
 * image_folder (uint8[?], int64[]), batch prepends a dimension to each
 * leaf, sl_parse_example gives a dict, sl_with_structure declares one. */
SL_API const sl_structure *sl_dataset_structure(const sl_dataset *ds);
/* The same elements read as `structure` (borrowed; the dataset keeps its
 * own reference): how their tensors nest and, where the structure says,
 * what they hold. Its leaf count must be the element's size where that is
 * known (SL_ESHAPE otherwise); elements are not checked as they pass. For
 * a map whose function returns dicts or nested tuples, and for naming the
 * tensors of any dataset. */
SL_API sl_dataset *sl_with_structure(sl_dataset *in, const sl_structure *structure);
/* Declares the structure of a dataset whose structure is not known yet,
 * once it is (a generator's, learned from its first element): s is
 * borrowed. 0; also when ds has the same tree already; SL_ESHAPE when it
 * has another. Any thread; the first declaration stays. */
SL_API int sl_dataset_declare_structure(const sl_dataset *ds, const sl_structure *structure);
/* The op's name ("range", "map(decode)", ...); static or dataset-owned. */
SL_API const char *sl_dataset_name(const sl_dataset *ds);
/* 64-bit fingerprint of the pipeline up to ds (ops and their parameters). */
SL_API uint64_t sl_dataset_fingerprint(const sl_dataset *ds);

/* Sources */

/* start, start+step, ... up to (not including) stop; scalar int64 elements.
 * step != 0. */
SL_API sl_dataset *sl_range(int64_t start, int64_t stop, int64_t step);
/* Slices of the element's tensors along their first dimension (which must
 * agree): tf.data's from_tensor_slices. Consumes the reference to
 * `tensors`; slices of numeric tensors share its memory, string slices
 * are copies (each needs its own offsets). */
SL_API sl_dataset *sl_from_tensor_slices(sl_element *tensors);
/* Deprecated: the old name of sl_from_tensor_slices, which tf.data users
 * read as from_tensors (one element: sl_from_element). Same dataset, same
 * fingerprint; goes when the SONAME moves. */
SL_API sl_dataset *sl_from_tensors(sl_element *tensors)
    SL_DEPRECATED("sl_from_tensors is sl_from_tensor_slices; tf.data's from_tensors is "
                  "sl_from_element");
/* Elements (path: string) or, when labels != NULL, (path, label: int64);
 * sl_read_files reads them. Copies the arrays. */
SL_API sl_dataset *sl_from_files(const char *const *paths, const int64_t *labels,
                                 size_t count);
/* A dataset of exactly one element, el (retained): tf.data's
 * from_tensors, for interleave functions ("this path"). */
SL_API sl_dataset *sl_from_element(sl_element *el);

/* The function of sl_from_generator. With out != NULL: returns 0 with a
 * new element reference in *out (the dataset takes it), SL_EOF when the
 * pass is over, or a negative code (message with sl_set_last_error) that
 * is an element error: the error policy decides, and a skipped error is
 * followed by another call (so a function that fails for good should
 * return SL_EOF after its error). 0 without an element, or another
 * positive value, is SL_ECALLBACK whatever the policy. With out == NULL: pass `pass` has ended (its
 * node iterator is being freed, after SL_EOF or early), so the program
 * may let go of what it kept for it; the return value is ignored. `pass`
 * numbers the passes over this dataset in the order they start (each
 * iterator, each repeat), from 0. Calls never overlap, over every pass and
 * iterator of the dataset, but come from whichever thread pulls the source
 * (a prefetch's producer, or the one calling sl_next). */
typedef int (*sl_generator_fn)(void *user, int64_t pass, sl_element **out);
/* tf.data's from_generator: elements `next` makes, one call at a time.
 * Cardinality SL_UNKNOWN; no random access (shuffle with a buffer);
 * an iterator over it cannot be saved. `user` must outlive the dataset.
 * flags: 0. */
SL_API sl_dataset *sl_from_generator(sl_generator_fn next, void *user, unsigned flags);

/* A bounded queue of elements, for online training: other threads push
 * what they receive, a from_queue source pops it in order. Bounded by the
 * bytes of the elements' tensors (an element larger than the capacity
 * still enters an empty queue). Thread-safe; reference counted: each
 * dataset made from it holds a reference. */
typedef struct sl_queue sl_queue;
/* capacity_bytes > 0. NULL with the error set. */
SL_API sl_queue *sl_queue_create(int64_t capacity_bytes);
/* Appends el (the queue takes its own reference; the caller keeps its
 * one). While the queue is full it waits: timeout_ns < 0 for as long as
 * it takes, 0 not at all, > 0 up to that long. 0, SL_EBUSY (still full
 * at the timeout), SL_ESTATE (the queue is closed), SL_ENOMEM. Any
 * thread. */
SL_API int sl_queue_push(sl_queue *q, sl_element *el, int64_t timeout_ns);
/* No more pushes: readers get what is queued, then SL_EOF. Pushes waiting
 * now return SL_ESTATE. Idempotent; NULL ok. */
SL_API void sl_queue_close(sl_queue *q);
/* Elements queued now. */
SL_API int64_t sl_queue_length(sl_queue *q);
/* Drops the caller's reference (datasets keep theirs); NULL ok. */
SL_API void sl_queue_free(sl_queue *q);
/* The source popping q's elements, in push order; SL_EOF once q is closed
 * and empty. Cardinality SL_UNKNOWN; several iterators over it share the
 * stream (each element goes to one of them); cannot be saved. Freeing the
 * iterator wakes a pop that waits. */
SL_API sl_dataset *sl_from_queue(sl_queue *q);

/* tf.data's Dataset.counter: start, start + step, ... without end
 * (scalar int64, wrapping modulo 2^64). */
SL_API sl_dataset *sl_counter(int64_t start, int64_t step);
/* Flag for sl_random, sl_sample_from and sl_rejection_resample: the same draws every epoch
 * (tf.data's rerandomize_each_iteration=False); without it each epoch
 * draws anew. */
#define SL_SAME_EACH_EPOCH 2u
/* tf.data's Dataset.random: endless scalar int64 values drawn from the
 * stream of `seed` (-1: the iterator's seed), the node, the epoch (unless
 * SL_SAME_EACH_EPOCH) and the position: the same on any thread count. */
SL_API sl_dataset *sl_random(int64_t seed, unsigned flags);

/* Map */

typedef struct sl_map_ctx sl_map_ctx;
/* Maps `in` (borrowed: do not release it) to a new element stored in *out
 * (a new reference; returning sl_element_retain(in) is fine). Returns 0, or
 * a negative code after describing the failure with sl_map_ctx_error().
 * Runs on worker threads, concurrently with itself. */
typedef int (*sl_map_fn)(sl_map_ctx *ctx, const sl_element *in, sl_element **out,
                         void *user);

/* Flags for sl_map (and SL_NONDETERMINISTIC for sl_interleave): emit in
 * completion order, so one slow element does not hold back finished ones
 * (faster, not reproducible); or keep order even when the options say not
 * deterministic (SL_OPT_DETERMINISTIC 0). */
#define SL_NONDETERMINISTIC 1u
#define SL_MAP_ORDERED 2u
/* Deprecated: SL_NONDETERMINISTIC's name for sl_map before 0.3; goes when
 * the SONAME moves (a macro, so no compiler warning). */
#define SL_MAP_UNORDERED SL_NONDETERMINISTIC

/* Parallel map. `name` (copied; NULL = "map") shows in messages, statistics
 * and the fingerprint, so change the name when the function's meaning
 * changes. parallelism >= 1 or SL_AUTOTUNE. `user` must outlive the dataset
 * and all its iterators. */
SL_API sl_dataset *sl_map(sl_dataset *in, const char *name, sl_map_fn fn, void *user,
                          int parallelism, unsigned flags);

/* Per-element random stream, keyed by (seed, node, epoch, index): the same
 * for an element whatever thread runs it. */
SL_API uint64_t sl_map_ctx_random(sl_map_ctx *ctx);
/* A float uniform in [0, 1) from the same stream. */
SL_API double sl_map_ctx_uniform(sl_map_ctx *ctx);
/* The structure of the input's elements (as sl_dataset_structure of the
 * map's input; NULL when not known); valid during the call. */
SL_API const sl_structure *sl_map_ctx_structure(const sl_map_ctx *ctx);
/* Declares the structure of the map's output (its dataset's, as
 * sl_dataset_declare_structure), for a function that learns it as it
 * runs: the first call decides, later ones must name the same tree
 * (SL_ESHAPE otherwise, with the message set). */
SL_API int sl_map_ctx_set_structure(sl_map_ctx *ctx, const sl_structure *structure);
SL_API int64_t sl_map_ctx_index(const sl_map_ctx *ctx);
SL_API int64_t sl_map_ctx_epoch(const sl_map_ctx *ctx);
/* Records a message for the failing element ("<file>: <reason>"); the node
 * prefixes its own name. Returns `code` for convenience. */
SL_API int sl_map_ctx_error(sl_map_ctx *ctx, int code, const char *msg);
/* Scratch memory through the library allocator, valid until the callback
 * returns; NULL on failure. */
SL_API void *sl_map_ctx_scratch(sl_map_ctx *ctx, size_t size);

/* Filter: keeps elements for which fn returns 1, drops those for which it
 * returns 0; a negative return is an element error (see sl_map_ctx_error).
 * Runs on the thread pulling from it. */
typedef int (*sl_predicate_fn)(sl_map_ctx *ctx, const sl_element *el, void *user);
SL_API sl_dataset *sl_filter(sl_dataset *in, const char *name, sl_predicate_fn fn,
                             void *user);

/* Combining */

/* tf.data's zip: element i of the result is element i of each of the n
 * inputs (consumed, also on failure), as a tuple, or with keys (n keys,
 * copied) as a dict of them; its tensors are the inputs' tensors, shared,
 * in the structure's order (a dict's by sorted key). Ends with the
 * shortest input; cardinality the smallest known one (SL_UNKNOWN where an
 * input's is, unless one is 0). 1 <= n <= 4096; SL_EINVAL for a NULL or
 * repeated key. */
SL_API sl_dataset *sl_zip(sl_dataset *const *inputs, int n, const char *const *keys);
/* tf.data's concatenate: a's elements, then b's (both consumed). Their
 * structures must fit one dataset's (SL_ESHAPE / SL_EDTYPE when built,
 * where both are known); b is not started until a ends. Cardinality the
 * sum; random access where both have it. */
SL_API sl_dataset *sl_concatenate(sl_dataset *a, sl_dataset *b);

/* Flag for sl_choose_from and sl_sample_from: end as soon as a chosen
 * input has ended (tf.data's stop_on_empty_dataset=True); without it a
 * choice of an input that has ended is passed over, and the result ends
 * when every input has. */
#define SL_STOP_ON_EMPTY 1u
/* tf.data's choose_from_datasets: for each element c of `choice` (scalar
 * int64; consumed), the next element of inputs[c] (n of them, consumed).
 * A choice outside [0, n) is an error (SL_EINVAL); the inputs' structures
 * must fit one dataset's. 1 <= n < 4096. */
SL_API sl_dataset *sl_choose_from(sl_dataset *choice, sl_dataset *const *inputs, int n,
                                  unsigned flags);
/* tf.data's sample_from_datasets: each element from input i with
 * probability weights[i] / sum(weights) (weights NULL: equal; copied;
 * finite and >= 0, not all 0), drawn from the stream of `seed` (-1: the
 * iterator's seed), the node, the epoch and the element's position: the
 * same output on any thread count, a new draw each epoch (unless
 * SL_SAME_EACH_EPOCH). flags: SL_STOP_ON_EMPTY, SL_SAME_EACH_EPOCH. */
SL_API sl_dataset *sl_sample_from(sl_dataset *const *inputs, int n, const double *weights,
                                  int64_t seed, unsigned flags);

/* tf.data's enumerate: each element as the pair (start + its position:
 * int64, the element), its tensors shared. */
SL_API sl_dataset *sl_enumerate(sl_dataset *in, int64_t start);
/* The elements up to the first for which fn returns 0 (tf.data's
 * take_while); fn is called as sl_filter calls it. */
SL_API sl_dataset *sl_take_while(sl_dataset *in, const char *name, sl_predicate_fn fn,
                                 void *user);

/* tf.data's scan: fn(state, element) gives the next state and the
 * output, in a new reference each (*new_state may be state retained);
 * `initial_state` (retained) is the first state. Runs on the pulling
 * thread, element after element. A negative return is an element error
 * (the state stays as it was). To declare the output's structure, fn calls
 * sl_map_ctx_set_structure. A saved position resumes by replaying the
 * pass's input through fn, so fn must give the same for the same input
 * (its ctx's random stream does). */
typedef int (*sl_scan_fn)(sl_map_ctx *ctx, const sl_element *state, const sl_element *in,
                          sl_element **new_state, sl_element **out, void *user);
SL_API sl_dataset *sl_scan(sl_dataset *in, const char *name, sl_element *initial_state,
                           sl_scan_fn fn, void *user);
/* tf.data's group_by_window. key_fn puts an element's group key (any
 * int64) in *key and returns 0, or a negative code (an element error:
 * the policy decides); it is called as a filter's predicate is. A group
 * that reaches its window size, window_size (>= 1) or size_fn(key)'s (one
 * of the two; size_fn NULL), becomes a window: a dataset of its elements
 * that reduce_fn(key, window, user) consumes and turns into a dataset (a
 * new reference; NULL with the error set ends the pass), whose elements
 * come out before more input is taken. At the input's end the groups left
 * are reduced in the order of their keys. Runs on the pulling thread; the
 * functions must give the same for the same input (a saved position
 * resumes by replaying the pass's input). */
typedef int (*sl_key_fn)(sl_map_ctx *ctx, const sl_element *el, int64_t *key, void *user);
typedef sl_dataset *(*sl_window_reduce_fn)(int64_t key, sl_dataset *window, void *user);
typedef int64_t (*sl_window_size_fn)(int64_t key, void *user);
SL_API sl_dataset *sl_group_by_window(sl_dataset *in, const char *name, sl_key_fn key_fn,
                                      sl_window_reduce_fn reduce_fn, int64_t window_size,
                                      sl_window_size_fn size_fn, void *user);

/* Flags for sl_bucket_by_sequence_length (with SL_DROP_REMAINDER). */
#define SL_PAD_TO_BUCKET_BOUNDARY 2u /* pad open dimensions to the boundary less one */
#define SL_NO_PADDING 4u             /* batch, without padding */
/* tf.data's bucket_by_sequence_length: length_fn puts an element's length
 * in *length (called as key_fn is); bucket i takes lengths in
 * [boundaries[i - 1], boundaries[i]) (n rising boundaries; n + 1 buckets,
 * the last from the last boundary on) and batches batch_sizes[i] of them
 * with sl_padded_batch (ntensors, padded_shapes and padding_values as its
 * n and arrays; ntensors 0 with the arrays NULL: every dimension padded to
 * the batch's longest), or sl_batch with SL_NO_PADDING. With
 * SL_PAD_TO_BUCKET_BOUNDARY, dimensions the padded shapes leave open (or
 * the input's structure does not know) pad to boundaries[i] - 1, and an
 * element of the last bucket is an element error. group_by_window over
 * these; resumes as it does. */
typedef int (*sl_length_fn)(sl_map_ctx *ctx, const sl_element *el, int64_t *length,
                            void *user);
SL_API sl_dataset *sl_bucket_by_sequence_length(
    sl_dataset *in, const char *name, sl_length_fn length_fn, void *user,
    const int64_t *boundaries, int n, const int64_t *batch_sizes, int ntensors,
    const int64_t *padded_shapes, const sl_element *padding_values, unsigned flags);

/* tf.data's rejection_resample: the input resampled by rejection so that
 * its classes follow `target` (nclasses weights, copied; normalized).
 * class_fn puts an element's class, in [0, nclasses), in *cls (called as
 * key_fn is). `initial` is the input's class distribution, or NULL to
 * estimate it from the classes seen so far in the pass, as tf.data does.
 * An element of class k is kept with probability (target_k / initial_k) /
 * max_j (target_j / initial_j) and comes out as the pair (k: int64, the
 * element). The draws come from the stream of `seed` (-1: the iterator's
 * seed), the node, the epoch and the input position: the same on any
 * thread count, new each epoch unless SL_SAME_EACH_EPOCH (flags). One
 * pass of the input (tf.data's also mixes in a second, unfiltered pass,
 * which repeats elements). Estimating, a saved position resumes by
 * replaying the pass's input. Cardinality SL_UNKNOWN for a finite input. */
SL_API sl_dataset *sl_rejection_resample(sl_dataset *in, const char *name, sl_key_fn class_fn,
                                         void *user, const double *target, int nclasses,
                                         const double *initial, int64_t seed, unsigned flags);

/* Packs variable-length sequences into rows of `length` items, as LLM
 * trainers pack tokens (Grain's first-fit packing): beyond tf.data. Each
 * tensor of an element is a sequence along its first dimension (numbers,
 * rank >= 1, the other dimensions those of the first element). An element
 * goes whole into the first of `bins` (1 to 4096) open rows where each of
 * its sequences fits; when none has room the oldest row comes out and a
 * new one takes it. A row comes out once one of its tensors is full, the
 * open rows in order at the end. Sequences longer than `length` are cut.
 * The output is (values, segment_ids, positions), each with the input's
 * structure: values' tensors [length, ...] of the input's dtypes, zero
 * past the packed items; segment_ids' int32[length], 1 for a row's first
 * sequence, 2 for its second ..., 0 for padding; positions' int32[length],
 * each item's index in its own sequence. A shape or dtype that differs
 * from the first element's is an element error. A saved position resumes
 * by replaying the pass's input. Cardinality SL_UNKNOWN. */
SL_API sl_dataset *sl_pack(sl_dataset *in, int64_t length, int64_t bins);

/* Flag for sl_ignore_errors: log each error dropped (up to
 * SL_OPT_ERROR_LOG_LIMIT). */
#define SL_LOG_ERRORS 1u
/* tf.data's ignore_errors: the elements, with every element error below
 * this node (a corrupt file, a failing map, a bad record) dropped whatever
 * the iterator's error policy; they count in SL_STAT_ERRORS_SKIPPED.
 * Errors that are not an element's (out of memory, a shape mismatch in a
 * batch) still end the pass. Cardinality SL_UNKNOWN unless the input's is
 * infinite or 0. */
SL_API sl_dataset *sl_ignore_errors(sl_dataset *in, unsigned flags);
/* tf.data's unique: the elements less those equal (the same dtype, shape
 * and values) to an earlier one; elements of one tensor. What it has seen
 * grows with the distinct values; a saved position resumes by replaying
 * the pass's input. */
SL_API sl_dataset *sl_unique(sl_dataset *in);

/* Batching */

#define SL_DROP_REMAINDER 1u
/* Stacks `size` consecutive elements: each tensor gains a leading dimension.
 * Shapes and dtypes must agree within a batch (SL_ESHAPE / SL_EDTYPE naming
 * both otherwise); strings stack into string tensors. */
SL_API sl_dataset *sl_batch(sl_dataset *in, int64_t size, unsigned flags);
/* Splits each element along its first dimension (the inverse of batch).
 * Cardinality is known where the input's structure gives every tensor the
 * same known first dimension. */
SL_API sl_dataset *sl_unbatch(sl_dataset *in);
/* tf.data's rebatch: the rows of the input's batches in batches of `size`
 * (unbatch then batch). */
SL_API sl_dataset *sl_rebatch(sl_dataset *in, int64_t size, unsigned flags);
/* tf.data's window, each window stacked as sl_batch stacks (so its
 * elements must agree in shape): window k starts at input position
 * k * shift (shift 0: size) and takes up to `size` elements `stride`
 * apart; every window that starts before the input's end comes out, those
 * the end cuts short too unless SL_DROP_REMAINDER. tf.data gives each
 * window as a dataset; from C, sl_flat_map over this with
 * sl_from_tensor_slices of the element does the same. */
SL_API sl_dataset *sl_window(sl_dataset *in, int64_t size, int64_t shift, int64_t stride,
                             unsigned flags);
/* tf.data's padded_batch: batches of `size` elements whose tensors may
 * differ in shape (not in rank or dtype): tensor j of a batch is [rows,
 * d1, ...], each d the padded shape's (padded_shapes[j * SL_MAX_DIMS + k];
 * -1, or padded_shapes NULL: the longest of the batch), each element's
 * values at the start of its row and the rest padding_values' tensor j (a
 * scalar of the tensor's dtype; retained), or 0 / "" with padding_values
 * NULL. n is the tensors the arrays describe (0 with both NULL: pad every
 * tensor to its batch's longest). A value longer than its padded shape is
 * an error (SL_ESHAPE). Rows are kept until their batch is complete, then
 * copied once. flags: SL_DROP_REMAINDER. */
SL_API sl_dataset *sl_padded_batch(sl_dataset *in, int64_t size, int n,
                                   const int64_t *padded_shapes, const sl_element *padding_values,
                                   unsigned flags);

/* Ordering and selection */

/* Uses the whole dataset as the shuffle buffer: a fresh permutation of the
 * index each epoch, no fill-up pause. Needs a source of known size with
 * random access (range, from_tensors, from_files and take/skip/shard of
 * them); SL_EUNSUPPORTED otherwise. The permutation is computed per
 * position (a keyed Feistel network walked onto [0, n)): no table, the same
 * order for a seed on every thread count and host, and a saved position
 * resumes at once. States record the order's version; one saved under
 * another order is refused with SL_EMISMATCH. */
#define SL_SHUFFLE_ALL (-1)
/* The same order every epoch (tf.data's reshuffle_each_iteration=False);
 * random ops after the shuffle (map_image's crops and flips) still draw
 * anew each epoch. Without it each epoch (SL_OPT_EPOCH, a repeat's pass)
 * has its own order. */
#define SL_SHUFFLE_NO_RESHUFFLE 1u
/* Seed: -1 derives one from the iterator's SL_OPT_SEED. */
SL_API sl_dataset *sl_shuffle(sl_dataset *in, int64_t buffer, int64_t seed,
                              unsigned flags);
/* A whole-dataset order that keeps reads near each other, for data in
 * shards or object storage (as MosaicML Streaming's py1e and FFCV's
 * quasi-random order): the input's index in blocks of `block` consecutive
 * elements (about a shard's records), the full blocks permuted, then each
 * run of `window` consecutive permuted blocks shuffled within (a short last
 * block is shuffled on its own at the end of the pass). At any moment the
 * reads touch at most `window` blocks, and a block's elements are read
 * within one window of block * window positions. What it costs in
 * randomness: each element's position is still uniform over the pass, but
 * two elements of one block always land in the same window, at most
 * block * window positions apart (a full shuffle puts them n / 3 apart
 * on average). Needs what SL_SHUFFLE_ALL needs; seed and flags as
 * sl_shuffle's; saved positions seek. block, window >= 1. */
SL_API sl_dataset *sl_shuffle_windowed(sl_dataset *in, int64_t block, int64_t window,
                                       int64_t seed, unsigned flags);
/* count >= 0 passes (0 gives an empty dataset, as in tf.data), or -1 for
 * forever. A pass that yields nothing ends a forever-repeat (so an empty
 * input does not spin). Each pass re-creates the input with a new epoch
 * number, so shuffles below reshuffle and per-element random streams
 * differ. Over a buffer shuffle (repeat's input is sl_shuffle with a
 * buffer), the next pass fills its buffer while the current one drains
 * (tf.data's fused shuffle-and-repeat): no wait for a full buffer at
 * each pass's start, the same bytes held, passes not mixed, and the
 * same output as without the overlap. */
SL_API sl_dataset *sl_repeat(sl_dataset *in, int64_t count);
/* At most n elements; n = -1 takes all. */
SL_API sl_dataset *sl_take(sl_dataset *in, int64_t n);
/* The input unchanged, with its size per pass stated: n >= 0, or
 * SL_INFINITE (tf.data's assert_cardinality). For inputs that cannot know
 * it (shards, filter, a generator), so that what follows can use it: a
 * batch dropping its remainder (with sl_map_image) decodes no image of
 * the dropped part, shuffle's buffer fits, sl_distribute gives equal
 * steps (by splitting the elements: every rank then reads every shard).
 * A pass that ends before n elements fails with SL_ECORRUPT naming both
 * counts, and so does an (n+1)th element when something pulls it: a
 * shuffle does, but a batch that drops its remainder, take and
 * sl_distribute stop at what n promised, so elements past n are then
 * never read, not reported. An input whose size is known and differs is
 * refused here (SL_EINVAL). */
SL_API sl_dataset *sl_assert_cardinality(sl_dataset *in, int64_t n);
/* Drops the first n elements; n = -1 drops all. */
SL_API sl_dataset *sl_skip(sl_dataset *in, int64_t n);
/* Elements whose index i satisfies i % num_shards == index. */
SL_API sl_dataset *sl_shard(sl_dataset *in, int64_t num_shards, int64_t index);

/* Many processes (data-parallel training) */

/* Where this process stands in a job of several, as its launcher says. */
typedef struct sl_dist_context {
    int rank, world_size;             /* 0 <= rank < world_size */
    int local_rank, local_world_size; /* on this host */
    int node;                         /* this host's index (0 when unknown) */
    /* the launcher whose variables were used: "sluice", "torchrun",
     * "openmpi", "pmi", "slurm", or "none" (one process) */
    char source[12];
} sl_dist_context;

/* Reads the launcher's environment, in this order of precedence (the first
 * whose rank or size variable is set wins):
 *   SLUICE_RANK, SLUICE_WORLD_SIZE (overrides; SLUICE_LOCAL_RANK and
 *     SLUICE_LOCAL_WORLD_SIZE optional)
 *   torchrun: RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, GROUP_RANK
 *   Open MPI: OMPI_COMM_WORLD_RANK, _SIZE, _LOCAL_RANK, _LOCAL_SIZE
 *   MPICH, Intel MPI (PMI): PMI_RANK, PMI_SIZE, MPI_LOCALRANKID,
 *     MPI_LOCALNRANKS
 *   Slurm: SLURM_PROCID, SLURM_NTASKS, SLURM_LOCALID, SLURM_NODEID,
 *     SLURM_NTASKS_PER_NODE
 * Launchers nest (srun starting one torchrun agent per host, a batch
 * script's Slurm variables inherited by mpirun's ranks): a job of another
 * size is an outer one and is ignored. Two launchers that describe a job of
 * the same size must agree on the rank; if not, SL_EINVAL naming both
 * variables. So is a rank without a size, a value that is not a number, or
 * a rank outside [0, size). No variable: rank 0 of 1. Without local
 * variables the local fields are the global ones; without a node variable
 * node is rank / local_world_size. 0 or a negative error code. */
SL_API int sl_distributed_context(sl_dist_context *ctx);

/* Flags for sl_distribute. Equal steps: by default every rank gets
 * ceil(n / world_size) elements, the last ranks wrapping around to the
 * start of the epoch's order (as torch's DistributedSampler; the repeats
 * are counted in SL_STAT_PADDED); SL_DISTRIBUTE_DROP gives every rank
 * floor(n / world_size) (DistributedSampler(drop_last=True)). */
#define SL_DISTRIBUTE_PAD 0u
#define SL_DISTRIBUTE_DROP 1u
/* Where to split (tf.data's AutoShardPolicy); neither: AUTO. */
#define SL_DISTRIBUTE_BY_FILE 2u /* split the files under a record reader */
#define SL_DISTRIBUTE_BY_DATA 4u /* split the elements */

/* This rank's part of `in` (consumed): ctx NULL reads the environment
 * (sl_distributed_context). AUTO: when `in` is a record reader (sl_tfrecord,
 * sl_tar_shards, sl_interleave) over a list of at least world_size files,
 * possibly under nodes that read files, the files are split (FILE): a rank
 * never opens another's shards, and equal steps hold for files (shards of
 * equal record counts give equal steps); otherwise the elements are split
 * (DATA), below the nodes that read files, as sl_shard is. Each rank takes
 * positions rank, rank + world_size, ... of the same sequence, so put it
 * after shuffle(SL_SHUFFLE_ALL) or a shuffled sl_list_files with the same
 * seed on every rank: each epoch is then one global permutation split
 * between the ranks, a new one every epoch. DATA needs a known
 * cardinality for equal steps; with an unknown one it splits by position
 * and says so in a warning. world_size 1 returns `in`. */
SL_API sl_dataset *sl_distribute(sl_dataset *in, const sl_dist_context *ctx, unsigned flags);

/* Buffering */

/* Keeps up to `depth` elements ready ahead of the consumer, produced on a
 * background thread. depth >= 1 or SL_AUTOTUNE. That thread runs
 * SCHED_BATCH on Linux: woken by each take, it no longer takes the CPU of
 * the consumer that woke it (its share of the CPU is unchanged). Under
 * SL_AUTOTUNE the depth grows when the buffer runs dry and that pays
 * (docs/design.md, "Autotune"), within the RAM budget, and comes back when
 * it does not pay or stays unused. */
SL_API sl_dataset *sl_prefetch(sl_dataset *in, int64_t depth);
/* Caches the first complete pass; every later pass (a repeat's, a later
 * iterator's) is served from it, so it yields the same elements in the
 * same order every epoch: shuffle after the cache for a new order. The
 * input always runs epoch 0 for it, whichever epoch fills it (random ops
 * below a cache draw once; the seed is the filling iterator's). path
 * NULL: in memory, kept by the dataset until it is freed (as tf.data's
 * memory cache); while one iterator fills it, others pass through, and
 * each iterator counts its bytes as buffered while it uses it; a pass that
 * outgrows half the RAM budget moves to a spill file under $TMPDIR (or
 * /tmp, removed with the dataset) instead of growing. Otherwise a
 * file: written to "<path>.partial" and renamed to path when a pass
 * completes; its header holds the pipeline fingerprint and a checksum, and
 * a file that does not match is rebuilt, never served. A second concurrent
 * writer fails with SL_EBUSY. A pass cut short (take, an error) caches
 * nothing. */
SL_API sl_dataset *sl_cache(sl_dataset *in, const char *path);
/* sl_cache's path for a cache that chooses its place: sl_cache_auto(in,
 * NULL). */
#define SL_CACHE_AUTO ((const char *)-1)
/* A cache that chooses where to live. Its first complete pass is kept in
 * memory while it fits half the RAM budget (the rest moves to a spill file
 * in spill_dir, NULL: $TMPDIR or /tmp, when it grows past that), timing
 * what producing the stream costs (the input's time per byte). At the end
 * of that pass: producing cheaper than ~1 ns/byte (about what reading the
 * bytes back costs: a folder in the page cache, slices of an array) keeps
 * nothing, later passes recompute; otherwise later passes are served from
 * memory, or from the spill file if it did not fit. The spill file is
 * removed with the dataset. The choice and its figures are logged (info)
 * and in SL_STAT_CACHE_PLACEMENT / SL_STAT_CACHE_BYTES; the output is
 * the uncached pipeline's in every case. */
SL_API sl_dataset *sl_cache_auto(sl_dataset *in, const char *spill_dir);

typedef enum sl_cache_placement {
    SL_CACHE_UNDECIDED = 0, /* the first pass has not completed */
    SL_CACHE_NONE,          /* producing is cheaper than reading back */
    SL_CACHE_MEMORY,
    SL_CACHE_FILE,
} sl_cache_placement;

/* ------------------------------------------------------------------------ */
/* Files and folders                                                        */

/* Flag for the file sources and sl_read_files: also yield the path, as a
 * last tensor (a scalar string). Without it the path is not in the
 * element, but every message about the file still names it: read errors,
 * map_image's, and those of a map or filter applied to the read elements
 * (the file is the element's origin; elements a map makes have none). */
#define SL_WITH_PATHS 1u
/* Flag for sl_image_folder: list the folder again at the start of every
 * pass after the first (each epoch, each repeat), for data that arrives
 * while training runs. New files are appended after those listed before
 * (existing indices, and so a pass begun earlier, never move); a new class
 * folder takes the next label, so existing labels never change; a file
 * deleted since it was listed is skipped with a warning under any error
 * policy (counted in SL_STAT_ERRORS_SKIPPED). A rescan that fails (the
 * folder briefly missing) is logged and the pass runs on the old listing.
 * The fingerprint covers the root only. sl_distribute refuses such a
 * source (ranks rescanning at different times would split different
 * lists); a saved state resumes in a new process only if the folder
 * lists the same. */
#define SL_FOLDER_RESCAN 2u

/* torchvision ImageFolder: classes are the sorted names of root's
 * subdirectories (label = index), walked recursively like os.walk with
 * symlinks followed (a directory named x.jpg is walked, not listed); files
 * are sorted, so the order is deterministic; hidden entries are skipped.
 * `extensions`: comma-separated, matched case-insensitively (NULL:
 * "jpg,jpeg,png,webp", what map_image decodes). Scans at build time (no stat per file where the
 * directory entry has a type); NULL with SL_ENOENT if root is missing or
 * holds no matching file. Elements: (bytes: uint8 [n] file contents,
 * label: int64), as torchvision's ImageFolder and DALI's file reader
 * yield them, plus (path: string) with SL_WITH_PATHS; read through the I/O
 * engine (io_uring, or pread where io_uring is unavailable or
 * SLUICE_IO=pread). Per-file errors are element errors naming the path:
 * missing (SL_ENOENT), unreadable for lack of permission (SL_EACCES),
 * empty (SL_ECORRUPT), not a regular file, other read failures, changed
 * size (SL_EIO). flags: SL_WITH_PATHS, SL_FOLDER_RESCAN. */
SL_API sl_dataset *sl_image_folder(const char *root, const char *extensions, unsigned flags);
/* The same elements from a text file of "relative/path label" lines (the
 * format make_dataset.py writes; the label is the last field, so paths may
 * hold spaces), resolved against root (NULL: the list file's directory);
 * absolute paths are kept. A bad line gives NULL with SL_ECORRUPT
 * "file_list: <list>:<line>: ...". (DALI's readers call such a file a
 * file_list; sl_list_files, tf.data's list_files, is another thing: the
 * paths that glob patterns match.) */
SL_API sl_dataset *sl_file_list(const char *list_path, const char *root, unsigned flags);
/* Reads the file named by tensor 0 (a string) of each element, as
 * tf.data's map(tf.io.read_file) does: the output is (bytes: uint8 [n],
 * then the input's other tensors), plus the path last with SL_WITH_PATHS.
 * sl_read_files(sl_from_files(paths, labels, n), 0) gives (bytes, label).
 * Files are read ahead, io_depth at a time, and come out in input order;
 * take, skip, shard and shuffle placed after it move before it, so files
 * they drop are never opened. */
SL_API sl_dataset *sl_read_files(sl_dataset *in, unsigned flags);

/* ------------------------------------------------------------------------ */
/* Sharded records                                                          */

/* Flag for sl_list_files: a new order each epoch (tf.data's list_files
 * shuffles by default); without it, sorted. */
#define SL_LIST_SHUFFLE 1u

/* tf.data's list_files (not sl_file_list, which reads a list of images
 * and labels): the paths (scalar strings) matching any of n glob(3) patterns
 * ("/data/train-*-of-01024.tfrecord"; a pattern without wildcards names one
 * file), sorted and without duplicates, so every process lists the same
 * shards; with SL_LIST_SHUFFLE, permuted per epoch by `seed` (-1: the
 * iterator's seed) as shuffle(SL_SHUFFLE_ALL) does. Nothing is opened:
 * sl_shard right after it splits files between workers. NULL with
 * SL_ENOENT naming the pattern if one matches nothing. */
SL_API sl_dataset *sl_list_files(const char *const *patterns, int n, unsigned flags,
                                 int64_t seed);

/* One dataset per input element, for sl_interleave: a new reference (the
 * interleave frees it), or NULL with the reason in sl_last_error(), which
 * is an element error (the error policy decides). `el` is valid during the
 * call. Called on the interleave's thread, one call at a time. */
typedef sl_dataset *(*sl_interleave_fn)(const sl_element *el, void *user);

/* tf.data's interleave: fn(element) for cycle_length input elements at a
 * time, cycling through their datasets block_length elements each; when
 * one ends, the next input element takes its place. The output order is
 * tf.data's and does not depend on timing or threads (unless
 * SL_NONDETERMINISTIC). `parallelism` threads of the node's own pull
 * ahead from the open inputs (reads and parsing overlap; none of them is
 * a pool worker), >= 1 or SL_AUTOTUNE (the controller moves it, up to
 * cycle_length). Each input's dataset runs its own epoch, derived from the
 * pass's epoch and the input's position, so random ops inside differ per
 * input and per epoch. cycle_length >= 1, block_length >= 1. */
SL_API sl_dataset *sl_interleave(sl_dataset *in, sl_interleave_fn fn, void *user,
                                 int cycle_length, int block_length, int parallelism,
                                 unsigned flags);
/* tf.data's flat_map: the elements of fn(element) for each element in
 * turn; sl_interleave with one input open at a time. */
SL_API sl_dataset *sl_flat_map(sl_dataset *in, sl_interleave_fn fn, void *user);
typedef enum sl_compression {
    SL_COMPRESSION_NONE = 0,
    SL_COMPRESSION_ZLIB, /* TFRecordWriter's "ZLIB": a zlib stream */
    SL_COMPRESSION_GZIP, /* "GZIP" (concatenated members are read through) */
} sl_compression;

/* Flag for sl_tfrecord: do not check the data CRC (the length's is
 * always checked: a bad length cannot be skipped). */
#define SL_TFRECORD_NO_DATA_CRC 2u

/* TFRecord files, as tf.data.TFRecordDataset reads them: for each path in
 * `paths` (scalar strings: sl_list_files, sl_from_files), its records in
 * order, each (record: scalar string), plus (path) with SL_WITH_PATHS. The
 * framing (u64 length, masked CRC-32C of the length, data, masked CRC-32C
 * of the data) is checked as read; compression one of sl_compression,
 * inflated as it streams. Files are read in large sequential chunks
 * through the I/O engine, reads ahead in flight; never a whole file in
 * memory. Errors name the file and the byte offset (in the uncompressed
 * stream when compressed): a bad data CRC or a record over
 * SL_OPT_MAX_RECORD_BYTES is an element error (the policy may skip the
 * record); a bad length CRC, a truncated record or a broken compressed
 * stream lose the rest of that file (under a skip policy counted as one
 * error, and the next file is read). A file read as uncompressed whose
 * first bytes are gzip's or zlib's fails at byte 0 with a message that
 * names the compression to read it with. */
SL_API sl_dataset *sl_tfrecord(sl_dataset *paths, int compression, unsigned flags);
/* sl_interleave_fn for TFRecord files: user points to an int, an
 * sl_compression (NULL: none). */
SL_API sl_dataset *sl_tfrecord_fn(const sl_element *path, void *user);
/* TFRecord shards with random access: element i is the i-th record of the
 * shards taken in order, (record: scalar string), plus (path) with
 * SL_WITH_PATHS, as sl_tfrecord gives them; known cardinality, so
 * shuffle(SL_SHUFFLE_ALL) permutes every record of every shard with no
 * buffer and a saved position seeks. Each shard's index is read now:
 * index_paths[k] (DALI's tfrecord2idx files: one "offset size" line per
 * record, size counting the framing), or with index_paths NULL (or its
 * entry NULL) "<shard>.idx" when it is no older than the shard and ends
 * where the shard does, else one pass over the shard's record headers
 * builds it and writes it there (kept in memory where that fails).
 * Uncompressed shards only. A record is one read; its length and CRCs
 * are checked as sl_tfrecord checks them (flags: SL_WITH_PATHS,
 * SL_TFRECORD_NO_DATA_CRC), and a bad one is an element error naming the
 * shard, the byte offset and the record. Records are read through the
 * read node (io_depth in flight; a URL shard by one ranged GET each). NULL
 * with SL_EIO (a shard that cannot be read), SL_ENOENT (a named index that
 * does not exist) or SL_ECORRUPT (an index that does not fit its shard,
 * naming the line; a shard whose headers do not parse, naming the
 * offset). */
SL_API sl_dataset *sl_tfrecord_indexed(const char *const *paths, int n,
                                       const char *const *index_paths, unsigned flags);

/* WebDataset tar shards with random access: the samples of sl_tar_shards
 * (keys, types and flags as there: SL_WITH_PATHS adds the sample's key),
 * each fetched by one read of its members, so shuffle(ALL) and distribute
 * take any sample without reading the ones before it. A shard's index
 * (one "offset size" line per sample, its headers to its last member's
 * padding) is "<shard>.idx" when no older than the shard, else built in
 * one pass over its headers and written there (kept in memory where that
 * fails; for a URL, "<url>.idx" when it exists, else the shard streamed
 * once and the index kept under $SLUICE_INDEX_CACHE, default
 * ~/.cache/sluice/indexes, with the object's size and validator, checked
 * by a one-byte GET next time). Uncompressed shards only. A sample that does not parse, lacks a
 * key or disagrees with its index is an element error naming the shard
 * and the byte offset. */
SL_API sl_dataset *sl_tar_indexed(const char *const *paths, int n, const char *const *keys,
                                  const sl_dtype *types, int nkeys, unsigned flags);

/* Token files with random access, memory-mapped (pages are read on first
 * touch; a corpus larger than memory costs no heap): sources of sequences
 * for sl_pack, sl_window, sl_padded_batch. Element i is a 1-D tensor of
 * tokens in the file's own dtype. Both check every count, size and offset
 * against the files' lengths when made (NULL with SL_ECORRUPT naming the
 * file and what does not fit), so no read leaves the mapping.
 *
 * Megatron-LM's indexed dataset (megatron.core.datasets.indexed_dataset):
 * PREFIX.idx ("MMIDIDX" header, version 1, dtype code, sequence and
 * document counts, sizes, pointers, document indices) and PREFIX.bin.
 * Element i is sequence i, or with SL_TOKENS_DOCUMENTS document i (its
 * sequences, contiguous in the .bin, as one tensor). */
#define SL_TOKENS_DOCUMENTS 1u
SL_API sl_dataset *sl_megatron(const char *prefix, unsigned flags);
/* A NumPy .npy file (versions 1-3; little-endian u1, i1, u2, i2, i4, i8,
 * f4, f8): a 2-D array's rows (seq_len 0, or the row length), or a 1-D
 * array cut into elements of seq_len tokens (the last may be shorter).
 * flags: 0. */
SL_API sl_dataset *sl_npy(const char *path, int64_t seq_len, unsigned flags);

/* A tf.train.Example feature to parse (tf.io.FixedLenFeature /
 * VarLenFeature). */
typedef enum sl_feature_type {
    SL_FEATURE_BYTES = 0, /* bytes_list: SL_STRING */
    SL_FEATURE_INT64,     /* int64_list: SL_INT64 */
    SL_FEATURE_FLOAT,     /* float_list: SL_FLOAT32 */
} sl_feature_type;

typedef struct sl_feature {
    const char *key;      /* "image/encoded" */
    sl_feature_type type;
    /* FixedLenFeature: ndim >= 0 and shape (ndim 0: a scalar; the value
     * count must be the shape's product). VarLenFeature: ndim -1, every
     * value as a 1-D tensor (tf gives a SparseTensor; this is its values). */
    int ndim;
    int64_t shape[SL_MAX_DIMS];
    /* For a fixed feature absent from an Example: has_default 1 fills the
     * shape with this value (bytes: default_bytes, default_len bytes);
     * otherwise absence is an element error. Absent varlen: 0 values. */
    int has_default;
    int64_t default_int64;
    float default_float;
    const void *default_bytes;
    size_t default_len;
} sl_feature;

/* tf.io.parse_single_example on tensor 0 of each element (a serialized
 * tf.train.Example: scalar string or uint8 [n]): one tensor per feature,
 * in the order of their keys (bytewise; the order tf.data's dict of them
 * flattens to, and the structure is that dict in place of tensor 0), then
 * the input's other tensors. Before 0.3 they came in the order given. The wire format is
 * read with bounds checks (no protobuf library): a malformed varint, a
 * truncated field or a field of the wrong wire type is an element error
 * naming the record's file, with the byte offset in the record; so are a
 * feature of another type than asked and a fixed feature with the wrong
 * number of values. features (and their strings) are copied; 1 <= n <=
 * 1024. A bytes feature of one value of 4 KiB or more, at least half the
 * record, may stay in the record instead of being copied: when nothing
 * else holds the record or its memory (a reader's record; not a cached
 * one, nor a row of a shared tensor) and the value's own framing (its key
 * and lengths) has room. Its tensor is then a view that keeps the whole
 * record alive; the framing just before the value is overwritten with the
 * string's offsets, so off[0] is 0-7 and sl_tensor_nbytes counts up to 7
 * bytes more than the string and its offsets. */
SL_API sl_dataset *sl_parse_example(sl_dataset *in, const sl_feature *features, int n,
                                    unsigned flags);
/* The same on `parallelism` records at a time (>= 1 or SL_AUTOTUNE), as a
 * parallel map does (sl_map with no flags: the same output whatever the
 * parallelism, in input order unless SL_OPT_DETERMINISTIC is 0);
 * sl_parse_example is this with 1. tf.data's spelling is
 * map(parse_single_example, num_parallel_calls=...). */
SL_API sl_dataset *sl_parse_example_parallel(sl_dataset *in, const sl_feature *features, int n,
                                             unsigned flags, int parallelism);

/* WebDataset tar shards: for each path in `paths`, its members grouped
 * into samples by key (the member's path up to the first '.' of its base
 * name: "n01/x.jpg", "n01/x.cls", "n01/x.json" are one sample "n01/x",
 * extensions "jpg", "cls", "json"); each sample yields the values of
 * `keys` in that order (a key may list alternatives, "jpg;jpeg;png"), as
 * types[i]: SL_UINT8 (bytes, uint8 [n]), SL_STRING (scalar string) or
 * SL_INT64 (the text as a decimal integer, as webdataset decodes "cls");
 * types NULL: all SL_UINT8. Plus (key: string) with SL_WITH_PATHS. POSIX
 * ustar, GNU (long names) and pax (path, size) members; other member kinds
 * are skipped; a gzip-compressed shard (.tar.gz, found by its magic bytes)
 * is inflated as it streams. Read like sl_tfrecord. Errors name the shard
 * and the byte offset: a sample missing a key or with an unparsable
 * integer is an element error; a header with a bad checksum or a member
 * running past the end loses the rest of that shard. 1 <= nkeys <= 64. */
SL_API sl_dataset *sl_tar_shards(sl_dataset *paths, const char *const *keys,
                                 const sl_dtype *types, int nkeys, unsigned flags);

/* CRC-32C (Castagnoli) of data[0..n), continuing from crc (0 to start): the
 * checksum TFRecord framing uses, with AVX-512 carry-less multiplies or
 * SSE4.2 where the CPU has them. Any thread. A
 * record's stored CRCs are masked: ((c >> 15) | (c << 17)) + 0xa282ead8. */
SL_API uint32_t sl_crc32c(uint32_t crc, const void *data, size_t n);

/* ------------------------------------------------------------------------ */
/* Images: decode, crop, resize, augment, mix                               */

/* sl_map_image decodes JPEG (libjpeg-turbo), PNG (libspng) and WebP
 * (libwebp), whichever the build has, by the bytes' signature, and crops,
 * resizes, flips, augments and normalises in the same pass, straight into
 * the batch when a batch follows. Its spec and sl_mixup_spec are versioned
 * by struct_size (see sl_image_spec). */

typedef enum sl_crop_policy {
    /* torchvision RandomResizedCrop: area fraction in [scale_min, scale_max],
     * log-uniform aspect in [ratio_min, ratio_max], 10 attempts, then the
     * centre fallback; resized to the output size. */
    SL_CROP_RANDOM_RESIZED = 0,
    /* Resize(shorter side -> resize_shorter) + CenterCrop(output size). */
    SL_CROP_CENTER,
    /* The whole image resized to the output size (aspect not kept). */
    SL_CROP_RESIZE,
} sl_crop_policy;

typedef enum sl_layout { SL_LAYOUT_HWC = 0, SL_LAYOUT_CHW } sl_layout;

/* Configuration of sl_map_image, versioned by struct_size: the size of the
 * struct the caller was compiled with. Fill it with SL_IMAGE_SPEC_INIT (or
 * sl_image_spec_init with your sizeof), then change fields. Fields are only
 * ever appended, and each one after allow_warnings means "off" at 0 (init
 * still fills the augmentations' parameters with torchvision's defaults,
 * used once a feature is turned on), so a library reads a smaller struct
 * from an older program (down to the fields through allow_warnings) with
 * the rest off, and a larger one from a newer program if what it does not
 * know is all zero (up to 4 KiB: a larger struct_size is taken for an
 * uninitialised spec). */
typedef struct sl_image_spec {
    size_t struct_size;
    int crop;           /* sl_crop_policy */
    int height, width;  /* output size */
    int resize_shorter; /* SL_CROP_CENTER: shorter side before the crop */
    float scale_min, scale_max; /* SL_CROP_RANDOM_RESIZED: area fraction */
    float ratio_min, ratio_max; /* SL_CROP_RANDOM_RESIZED: aspect w/h */
    float flip_prob;    /* horizontal flip probability */
    int layout;         /* sl_layout */
    int dtype;          /* SL_UINT8, or SL_FLOAT32: (v / 255 - mean) / std
                         * (SL_DECODE_RAW: SL_UINT8 or SL_UINT16) */
    float mean[3], std[3];
    int64_t max_pixels; /* larger declared images are element errors */
    int allow_warnings; /* 0: libjpeg warnings (corrupt data it can
                         * recover from) and a missing end-of-image
                         * marker (a file cut short) are element errors,
                         * the same whatever the crop; 1: such files
                         * decode, missing rows grey (PIL's
                         * LOAD_TRUNCATED_IMAGES) */
    int fast_upsample;  /* experimental. 1: subsampled chroma is
                         * replicated, not interpolated, in libjpeg's merged
                         * upsample and colour pass (TurboJPEG's
                         * FASTUPSAMPLE, tf's fancy_upscaling=False):
                         * faster decodes (bench/README.md has figures),
                         * pixels differ slightly from PIL/torchvision's.
                         * 0 (default): see exact_pixels */
    int exact_pixels;   /* 0 (default): YCbCr files are read as raw
                         * planes and each plane is resampled from its own
                         * resolution, so chroma upsampling and the resize
                         * are one filter, with one YCbCr->RGB conversion
                         * per output pixel: faster (bench/README.md,
                         * "YCbCr planes"); mean absolute error against a
                         * float reference under 1 level. 1: libjpeg's
                         * fancy upsampling and colour conversion of the
                         * whole window first, then the resize: the pixels
                         * of PIL/torchvision's decode, resized. Gray, CMYK
                         * and RGB-coded files always take that path */
    int image_index;    /* the input tensor that holds the encoded image
                         * (0, the default): the image takes its place in
                         * the output, the other tensors keep theirs. With
                         * a structured input, the leaf index of its key:
                         * sl_structure_leaf_index(sl_structure_get(
                         * sl_dataset_structure(in), "image")) */
    int reserved[5];
    /* ---- Augmentations (0.3). Each is off at its zero (what an older
     * program's smaller struct reads as) and draws from the element's
     * stream only when on, so a seed gives the same images on any thread
     * count and new ones each epoch. They run in this order, after the
     * crop and flip: rotate/affine, auto_augment, colour jitter,
     * grayscale, blur, solarize, then (on the output, after normalising)
     * erasing. Parameters mean what torchvision's do, within these
     * bounds (SL_EINVAL past them): probabilities in [0, 1]; factor ranges
     * 0 <= lo <= hi <= 100; hue within [-0.5, 0.5]; blur kernel odd, 1 to
     * 255, sigma > 0; shear within 89 degrees; translate in [0, 1];
     * affine scale 0 < lo <= hi; rand_augment_num_ops 0 to 16 and
     * rand_augment_magnitude below num_magnitude_bins (1 to 1000). */
    int auto_augment;           /* sl_auto_augment (0: none) */
    int rand_augment_num_ops;   /* RandAugment: ops per image (init: 2) */
    int rand_augment_magnitude; /* RandAugment: magnitude bin (init: 9) */
    int num_magnitude_bins;     /* RandAugment, TrivialAugmentWide (init: 31) */
    float color_jitter_prob;    /* ColorJitter's chance (RandomApply); 0 off */
    float brightness[2], contrast[2], saturation[2]; /* factor ranges, each
                                 * drawn uniformly; [0, 0] leaves it out */
    float hue[2];               /* in [-0.5, 0.5] (a fraction of a turn);
                                 * [0, 0] leaves it out. Applied in random
                                 * order as ColorJitter, folded into one
                                 * transform of Y and a rotation and scale
                                 * of (Cb, Cr): contrast blends with the
                                 * image's mean gray, hue turns the chroma
                                 * plane (not HSV's hexagon; README, "Image
                                 * augmentations", says how far apart) */
    float grayscale_prob;       /* RandomGrayscale: gray (BT.601 luma) in all 3 */
    float blur_prob;            /* GaussianBlur's chance; 0 off */
    int blur_kernel;            /* odd kernel size (init: 23) */
    float blur_sigma[2];        /* sigma drawn uniformly (init: 0.1, 2.0) */
    float solarize_prob;        /* RandomSolarize; 0 off */
    float solarize_threshold;   /* values >= it are inverted (init: 128) */
    float rotate[2];            /* degrees, counter-clockwise as
                                 * RandomRotation; [0, 0] off */
    float translate[2];         /* RandomAffine: max shift, fractions of
                                 * width and height; 0 off */
    float affine_scale[2];      /* RandomAffine: scale range; [0, 0] off */
    float shear[4];             /* RandomAffine: x range, y range (degrees) */
    int interpolation;          /* geometric augmentations (affine and
                                 * auto_augment's): sl_interpolation */
    float erasing_prob;         /* RandomErasing on the output; 0 off */
    float erasing_scale[2];     /* area fraction (init: 0.02, 0.33) */
    float erasing_ratio[2];     /* aspect (init: 0.3, 3.3) */
    float erasing_value[3];     /* per channel, in the output's units */
    int erasing_random;         /* 1: random values instead (float32:
                                 * N(0, 1); uint8: uniform bytes) */
    /* ---- Decoding (0.3), off at zero as above. */
    int decode;         /* sl_image_decode */
    int channels;       /* SL_DECODE_RAW: output channels, 1 to 4 */
    int blend_alpha;    /* SL_DECODE_RGB, a file with alpha (PNG, WebP):
                         * 0 drops it, as PIL's convert("RGB"); 1
                         * composites the image over background */
    int background[3];  /* blend_alpha's colour, 0 to 255 each */
    int with_mask;      /* sl_map_image, 1: tensor mask_index is a second
                         * encoded image of the same scene (a segmentation
                         * mask, a depth map) cropped and flipped with the
                         * image: the image's window (scaled where the
                         * mask's size differs) and flip, decoded as
                         * SL_DECODE_RAW into the output's height, width and
                         * layout; it replaces that tensor. Draws nothing */
    int mask_index;     /* its tensor (a structured input: its leaf index) */
    int mask_channels;  /* 1 to 4 */
    int mask_dtype;     /* SL_UINT8 or SL_UINT16 */
} sl_image_spec;

/* sl_image_spec.decode. SL_DECODE_RGB: every file becomes 8-bit RGB (gray
 * replicated, palette looked up, alpha dropped or blended, 16-bit samples
 * to their high byte), resampled with the antialiased filter and then
 * augmented and normalised. SL_DECODE_RAW, for label maps and depth: the
 * file's own samples, with no colour conversion and no interpolation. A
 * PNG gives its channels (gray 1, gray+alpha 2, RGB 3, RGBA 4, palette 1:
 * the indices, not the colours) at its bit depth (16-bit as uint16; gray
 * of 1, 2 or 4 bits scaled to 8 as libpng and tf scale it); a JPEG gray 1
 * or RGB 3; a WebP RGB 3 or RGBA 4. Resampling is nearest-neighbour (the
 * source pixel under each output pixel's centre, as PIL's NEAREST), so
 * every output value is one of the file's. The output has `channels`: a
 * file with fewer gets its gray replicated and an opaque alpha (the
 * largest value) added, a palette with 3 or 4 wanted is looked up, an
 * alpha the output has no room for is dropped; a colour file into 1 or 2
 * channels is an element error (SL_EUNSUPPORTED), as is a 16-bit file
 * into uint8 (SL_ERANGE). dtype SL_UINT8 or SL_UINT16; the crop policies
 * and flip apply, augmentations and normalisation do not. */
typedef enum sl_image_decode { SL_DECODE_RGB = 0, SL_DECODE_RAW } sl_image_decode;

/* sl_image_spec.auto_augment: torchvision's policies, with its op lists
 * and magnitude tables (Identity, ShearX/Y, TranslateX/Y, Rotate,
 * Brightness, Color, Contrast, Sharpness, Posterize, Solarize,
 * AutoContrast, Equalize; AutoAugment's ImageNet policy adds Invert). */
typedef enum sl_auto_augment {
    SL_AUTO_AUGMENT_NONE = 0,
    SL_TRIVIAL_AUGMENT_WIDE, /* one op, magnitude bin drawn too */
    SL_RAND_AUGMENT,         /* rand_augment_num_ops ops at one magnitude */
    SL_AUTO_AUGMENT_IMAGENET /* one of 25 learned sub-policies */
} sl_auto_augment;

/* Resampling of the geometric augmentations: torchvision's default,
 * nearest, or bilinear (its reference recipes pass bilinear). */
typedef enum sl_interpolation { SL_INTERP_NEAREST = 0, SL_INTERP_BILINEAR } sl_interpolation;

/* Defaults for a crop policy and a square output of `size`: train
 * (random-resized, scale 0.08-1, ratio 3/4-4/3, flip 0.5), centre
 * (resize_shorter = size * 256 / 224, no flip) or resize; HWC uint8;
 * ImageNet mean/std; max_pixels 100 M. Writes struct_size bytes: the
 * fields this library knows that fit, zeros past them. SL_EINVAL for a
 * bad policy or size, or a struct_size smaller than the first layout. */
SL_API int sl_image_spec_init(sl_image_spec *spec, size_t struct_size, int crop, int size);
/* The init for the struct this header describes. */
#define SL_IMAGE_SPEC_INIT(spec, crop, size) \
    sl_image_spec_init((spec), sizeof *(spec), (crop), (size))

/* Decodes and transforms images: tensor spec.image_index (0) of each input
 * element is an encoded JPEG, PNG or WebP (uint8 [n], e.g. from
 * sl_image_folder; the format from the bytes' signature); the output
 * element is the input's with that tensor replaced by the image, uint8 or
 * float32 [H, W, 3] (HWC) or [3, H, W] (CHW) (SL_DECODE_RAW: uint8 or
 * uint16 with `channels`), and the structure the same with the image's
 * leaf. Decodes only what the output needs (JPEG: DCT-domain scaling and
 * region-of-interest crop; WebP: cropping and scaling; PNG: no rows below
 * the window). Random choices come from
 * the per-element stream, so a seed gives the same crops on any thread
 * count. Grayscale and CMYK become RGB. Followed by sl_batch, decoding
 * writes straight into the batch tensor. parallelism as for sl_map. The
 * spec is copied. The tensor may also hold pixels already decoded: uint8
 * [H, W, C], C 1 (gray), 2 (gray + alpha), 3 (RGB) or 4 (RGBA), e.g. a
 * numpy array or a cache of an earlier map_image's output; they are
 * cropped, resized, augmented and normalised as a lossless PNG of the
 * same pixels would be, to the same values. */
SL_API sl_dataset *sl_map_image(sl_dataset *in, const sl_image_spec *spec, int parallelism);
/* Several views of each image (self-supervised multi-crop: DINO's 2 x 224
 * + 6 x 96): specs[0 .. nviews) (nviews 1 to 64, an array of the
 * caller's sl_image_spec, all the same struct_size and image_index) each
 * with its own crop, size, layout, dtype and augmentations. The file is
 * decoded once, over the union of the views' windows at the DCT scale the
 * most demanding view allows, and each view resampled from that (YCbCr
 * planes or RGB, as the first view's exact_pixels and fast_upsample
 * choose). The image's tensor becomes nviews tensors, in order
 * (structure: a tuple of them in the image's place); the other tensors
 * keep theirs. Draws per view in turn from the
 * element's stream. A batch after it stacks each view (no fused node).
 * Otherwise as sl_map_image. */
SL_API sl_dataset *sl_map_image_views(sl_dataset *in, const sl_image_spec *specs, int nviews,
                                      int parallelism);

/* ------------------------------------------------------------------------ */
/* Video: clips decoded through FFmpeg                                      */

/* sl_map_video reads clips of T frames from video files with FFmpeg's
 * libavformat and libavcodec (a build with SLUICE_WITH_FFMPEG; without it
 * every element is an SL_EUNSUPPORTED error naming the option). Its spec
 * is versioned by struct_size under sl_image_spec's rule; the frames'
 * crop, size, flip, augmentations, layout, dtype and normalisation are an
 * sl_image_spec's. */

/* sl_video_spec.clip_sampler: where a clip starts in a video of duration
 * L, for a clip of duration D = frames x the frame step (num_clips n):
 * RANDOM, each clip uniformly in [0, max(L - D, 0)] (PyTorchVideo's
 * RandomClipSampler; drawn per element, new each epoch); UNIFORM, clip i
 * at i (L - D) / (n - 1) (ConstantClipsPerVideoSampler; one clip: 0);
 * CENTER, clip i at (i + 1) (L - D) / (n + 1) (one clip: the middle). */
typedef enum sl_clip_sampler {
    SL_CLIP_RANDOM = 0,
    SL_CLIP_UNIFORM,
    SL_CLIP_CENTER,
} sl_clip_sampler;

typedef struct sl_video_spec {
    size_t struct_size;
    int frames;          /* T, frames per clip (init: 8) */
    int stride;          /* frames of the stream's own rate between a clip's
                          * frames (init: 1) when fps is 0 */
    double fps;          /* else a clip's frames are 1 / fps s apart */
    int clip_sampler;    /* sl_clip_sampler (init: RANDOM) */
    int num_clips;       /* clips per video (init: 1); > 1 adds a leading
                          * dimension */
    int video_index;     /* the input tensor holding the video (init: 0) */
    int input;           /* sl_video_input (init: AUTO) */
    int short_clips;     /* sl_short_clip (init: PAD) */
    int with_timestamps; /* 1: a float64 tensor [T] ([num_clips, T]) of
                          * each frame's time in s follows the clip */
    int max_frames;      /* the most frames num_clips x frames may ask for
                          * (init: 1024; more: SL_EINVAL when the op is
                          * built); frames decoded per video are bounded by
                          * the stream, never by this */
    int reserved[6];
} sl_video_spec;

/* sl_video_spec.input. AUTO: uint8 [n] is the file's bytes, a string
 * scalar its path or URL (read through sluice's I/O engines by ranges: a
 * clip from S3 costs the Range requests of the parts it reads); BYTES: a
 * string scalar holds the bytes too. */
typedef enum sl_video_input { SL_VIDEO_AUTO = 0, SL_VIDEO_BYTES } sl_video_input;

/* sl_video_spec.short_clips: a clip longer than the video (or reaching
 * past its end). PAD: the frames past the last are the last frame
 * repeated (PyTorchVideo's way); ERROR: an element error (SL_ERANGE)
 * under the error policy. */
typedef enum sl_short_clip { SL_SHORT_CLIP_PAD = 0, SL_SHORT_CLIP_ERROR } sl_short_clip;

/* Defaults as listed above. SL_EINVAL for a struct_size smaller than the
 * first layout. */
SL_API int sl_video_spec_init(sl_video_spec *spec, size_t struct_size);
#define SL_VIDEO_SPEC_INIT(spec) sl_video_spec_init((spec), sizeof *(spec))

/* Decodes clips: tensor video->video_index of each input element is a
 * video (see sl_video_input); it becomes the clip, uint8 or float32
 * [T, H, W, 3] (HWC) or [T, 3, H, W] (CHW), [num_clips, T, ...] with
 * several clips, followed by the timestamps when asked; the other
 * tensors keep their places. The frame at time t is the one whose
 * presentation time is at or before t with the next one after it, time
 * counted from the stream's first frame, so a variable-frame-rate file
 * gives the frames shown at those times. Only what the clips need is
 * decoded: a seek to the keyframe before each clip (or run of clips
 * close together), frames decoded forward from it, those no later frame
 * references skipped where a later frame is known to replace them, and
 * one decode of frames that clips share. Each frame is resampled from its
 * YCbCr planes and converted with the stream's matrix (BT.601, BT.709 or
 * BT.2020) and range (limited or full); the crop, flip and augmentation
 * draws of image (an sl_image_spec: crop policy, size, layout, dtype,
 * normalisation, augmentations; max_pixels bounds the frame size;
 * allow_warnings 1 conceals corrupt frames as FFmpeg does, 0 makes them
 * element errors) are made once per clip, so its frames move together.
 * image.decode SL_DECODE_RAW with channels 1 gives the frames' luma
 * plane, unconverted, nearest-sampled. Random draws (clip starts, then
 * each clip's crop and augmentations) come from the element's stream:
 * the same clips for a seed on any thread count. Each video is decoded on
 * one worker (libavcodec's own threads off); parallelism as for sl_map.
 * A read of a path or URL blocks its worker: the node counts that time
 * as read_wait_ns (and the bytes as bytes_read), not as work.
 *
 * Only the formats (MP4/MOV, Matroska/WebM, AVI, MPEG-TS, FLV, IVF, Ogg)
 * and codecs (H.264, HEVC, MPEG-4, MPEG-1/2, VP8, VP9, AV1, Theora,
 * MJPEG) sluice means to read are opened, and no demuxer may open another
 * file or URL (playlists, concat lists): element errors, as are no video
 * stream, no frame, a truncated or corrupt stream, frames over
 * image.max_pixels, naming the file and the time. The specs are copied. */
SL_API sl_dataset *sl_map_video(sl_dataset *in, const sl_video_spec *video,
                                const sl_image_spec *image, int parallelism);

/* ------------------------------------------------------------------------ */
/* Audio: clips decoded through FFmpeg, waveforms or log-mel features       */

/* Configuration of sl_map_audio, versioned by struct_size under
 * sl_image_spec's rule. The mel fields mean what torchaudio's
 * MelSpectrogram arguments do (HTK mel scale, no filter norm, a periodic
 * Hann window, centred frames with reflect padding). */
typedef struct sl_audio_spec {
    size_t struct_size;
    int sample_rate;    /* output rate, Hz (init: 16000), resampled by
                         * libswresample */
    int channels;       /* output channels (init: 1): the file's mixed to
                         * them by libswresample's matrix */
    double seconds;     /* clip length (init: 1.0); 0: the whole file, a
                         * waveform of its own length */
    int clip_sampler;   /* SL_CLIP_RANDOM (init), SL_CLIP_CENTER or
                         * SL_CLIP_UNIFORM (the start); a file shorter than
                         * the clip is padded with zeros after its end */
    int audio_index;    /* the input tensor holding the file (init: 0) */
    int input;          /* sl_video_input (init: AUTO) */
    int n_mels;         /* 0 (init): the waveform, float32 [channels,
                         * samples]; > 0: mel features, float32
                         * [channels, n_mels, frames] */
    int n_fft;          /* init: 400 */
    int win_length;     /* 0: n_fft */
    int hop_length;     /* 0: win_length / 2 */
    float f_min;        /* Hz (init: 0) */
    float f_max;        /* Hz; 0: sample_rate / 2 */
    float power;        /* of the magnitude: 2 (init) power, 1 amplitude */
    int log_mel;        /* 1 (init): 10 log10(max(mel, 1e-10)), torchaudio's
                         * AmplitudeToDB("power") without top_db; 0 the
                         * mel values */
    int reserved[8];
} sl_audio_spec;

/* Defaults as listed above. SL_EINVAL for a struct_size smaller than the
 * first layout. */
SL_API int sl_audio_spec_init(sl_audio_spec *spec, size_t struct_size);
#define SL_AUDIO_SPEC_INIT(spec) sl_audio_spec_init((spec), sizeof *(spec))

/* Decodes audio: tensor spec->audio_index of each element (a file's bytes,
 * its path or URL, as sl_map_video reads them: an audio file, or a video's
 * audio track) becomes a clip of `seconds` at sample_rate with `channels`
 * (its start drawn from the element's stream: new each epoch, the same for
 * a seed on any thread count), as float32 samples (full scale 1, not
 * clipped: a float file or a downmix may pass it) [channels,
 * round(seconds x sample_rate)], or with n_mels its mel features. Only
 * the part of the file the clip needs is read and decoded (a seek before
 * it). Formats and codecs: WAV (PCM), FLAC, MP3, AAC, Vorbis, Opus, in
 * their containers or a video's. Element errors as sl_map_video's. The
 * spec is copied; a bad field fails here (NULL, SL_EINVAL, the message
 * naming it), as does parallelism outside 1..4096 and not SL_AUTOTUNE. */
SL_API sl_dataset *sl_map_audio(sl_dataset *in, const sl_audio_spec *spec, int parallelism);

/* Batch mixing: timm's Mixup with CutMix (mode "batch"). Make the spec
 * with sl_mixup_spec_init (which sets every default below), then change
 * fields. Versioned by struct_size under sl_image_spec's rule: fields only
 * appended; a newer program's larger struct is read if what this library
 * does not know is zero (SL_EUNSUPPORTED if not); at most 4 KiB. */
typedef struct sl_mixup_spec {
    size_t struct_size;     /* sizeof(sl_mixup_spec), set by init */
    int64_t num_classes;    /* >= 1: the soft targets' width */
    double mixup_alpha;     /* 0.2: lam ~ Beta(alpha, alpha) for MixUp; 0 off */
    double cutmix_alpha;    /* 1.0: the same for CutMix; 0 off */
    double prob;            /* 1.0: chance that a batch is mixed at all */
    double switch_prob;     /* 0.5: chance of CutMix when both are on */
    double label_smoothing; /* 0.0: spread over all classes first */
    int image_index;        /* 0: the images, uint8 or float32 [B, ...3 dims] */
    int label_index;        /* 1: the labels, int64 [B] in [0, num_classes) */
    int layout;             /* SL_LAYOUT_HWC (default) or _CHW: where H, W are */
    int64_t seed;           /* -1: the iterator's seed */
    unsigned flags;         /* SL_SAME_EACH_EPOCH */
} sl_mixup_spec;

/* Defaults for num_classes into spec (struct_size = your sizeof). 0, or
 * SL_EINVAL for a NULL spec or a struct_size this library cannot fill. */
SL_API int sl_mixup_spec_init(sl_mixup_spec *spec, size_t struct_size, int64_t num_classes);
/* Mixes each batch of `in` (consumed) with itself reversed, as timm's
 * Mixup does: with probability prob, image i and image B-1-i become
 * x*lam + x_rev*(1-lam) (MixUp) or x with a box of x_rev pasted in
 * (CutMix: a box of sqrt(1-lam) of each side, centred uniformly, clipped;
 * lam then 1 - its area fraction). The labels become float32 [B,
 * num_classes] soft targets, lam * smooth(y) + (1-lam) * smooth(y_rev),
 * smooth giving label_smoothing / num_classes to each class and the rest
 * to the true one (also for a batch not mixed). Draws come from the stream
 * of (seed, node, epoch, batch position): the same on any thread count,
 * new each epoch unless SL_SAME_EACH_EPOCH. The images are mixed in their
 * own buffer when nothing else refers to it, else in a copy. A batch that
 * does not fit the spec (rank, dtype, a label out of range) is an element
 * error. The spec is copied. Runs on the pulling thread. */
SL_API sl_dataset *sl_mixup_cutmix(sl_dataset *in, const sl_mixup_spec *spec);

/* ------------------------------------------------------------------------ */
/* Iterators                                                                */

typedef struct sl_iterator sl_iterator;

/* Starts a pass over ds (retained; the caller keeps its reference). opts may
 * be NULL (defaults). The pass runs the epoch SL_OPT_EPOCH names, or else
 * the dataset's next one (0 for its first iterator, then 1, 2, ...), so
 * that one iterator per epoch gives a new shuffle and new crops each epoch
 * and the same (seed, epoch) replays byte for byte. Any thread, also
 * concurrently on the same dataset. NULL on failure (sl_last_error()). */
SL_API sl_iterator *sl_iterator_create(sl_dataset *ds, const sl_options *opts);
/* Next element: returns 0 and a new reference in *out (release it when
 * done), SL_EOF at the end, or a negative code (details in
 * sl_iterator_errmsg()). After an error the iterator keeps returning it. */
SL_API int sl_next(sl_iterator *it, sl_element **out);
/* sl_next that waits at most timeout_ns (>= 0) for the pipeline: SL_AGAIN
 * when nothing came by then, and the next call goes on where this one
 * stopped (work in progress, a batch half filled, a shuffle buffer being
 * filled, all stay). The time is a bound on waiting for other threads,
 * not on work this thread does itself (a synchronous map's callback, the
 * edge profile's producers and their waits, reads a reader without a
 * buffer above it waits for): a call returns after the step it is in. A timeout too large
 * for the clock waits as sl_next does. Until the element waited for comes,
 * sl_iterator_save refuses (SL_ESTATE). For a caller that has to look at
 * something else while it waits (a language binding checking for signals
 * between calls) without a thread of its own. Otherwise as sl_next. */
SL_API int sl_next_timeout(sl_iterator *it, sl_element **out, int64_t timeout_ns);
/* Detail of the last error: "map(decode): /data/a.jpg: ..."; "" if none.
 * Valid until the next call on the iterator. */
SL_API const char *sl_iterator_errmsg(const sl_iterator *it);
/* Cancels in-flight work, joins it and frees everything. Elements already
 * handed out stay valid. Returns promptly; NULL ok. */
SL_API void sl_iterator_free(sl_iterator *it);

typedef enum sl_stat {
    SL_STAT_ELEMENTS = 0,     /* elements returned by sl_next */
    SL_STAT_ERRORS_SKIPPED,   /* element errors dropped by the error policy */
    SL_STAT_BUFFERED_BYTES,   /* bytes held in buffers now */
    SL_STAT_PEAK_BUFFERED_BYTES,
    SL_STAT_RAM_BUDGET,       /* the budget in force, bytes */
    SL_STAT_IO_BACKEND,       /* sl_io_backend in use by reads (AUTO: none yet) */
    SL_STAT_BYTES_READ,       /* file bytes read */
    SL_STAT_EPOCH,            /* the epoch the iterator runs (SL_OPT_EPOCH) */
    SL_STAT_PADDED,           /* elements sl_distribute repeated for equal steps */
    SL_STAT_CACHE_PLACEMENT,  /* sl_cache_placement of an automatic cache it uses */
    SL_STAT_CACHE_BYTES,      /* ... and the bytes it keeps there */
    SL_STAT_COUNT
} sl_stat;
/* One counter of the iterator; -1 for an unknown key. Any thread. */
SL_API int64_t sl_iterator_stat(const sl_iterator *it, sl_stat key);

/* Reductions: a whole pass over ds (an iterator with opts, which may be
 * NULL) folded on the calling thread. */
/* tf.data's reduce: state = fn(state, element) for every element, from
 * `initial` (borrowed); fn puts the next state, a new reference, in *out
 * (it may be state retained) and returns 0, or a negative code that ends
 * the reduction. 0 with the final state in *out (initial retained for an
 * empty dataset), or the pass's or fn's error, with the message set. */
typedef int (*sl_reduce_fn)(const sl_element *state, const sl_element *el, sl_element **out,
                            void *user);
SL_API int sl_reduce(sl_dataset *ds, const sl_options *opts, sl_element *initial,
                     sl_reduce_fn fn, void *user, sl_element **out);
/* tf.data's get_single_element: the one element of ds in *out; SL_EINVAL
 * ("empty" or "more than one element") otherwise, or the pass's error. */
SL_API int sl_get_single_element(sl_dataset *ds, const sl_options *opts,
                                 sl_element **out);

/* ------------------------------------------------------------------------ */
/* Persistence: saved datasets, snapshots, checkpoints                      */

/* tf.data's save, load and snapshot. A saved dataset is a
 * directory of sluice's own format: shard files of CRC-checked chunks
 * (optionally zlib- or gzip-compressed) and a manifest written last that
 * holds the element structure, the counts and the pipeline's fingerprint
 * (src/store/saved_file.h documents every byte). A directory whose manifest
 * is missing (a save that did not finish) is never read. */

/* Runs one pass of ds (an iterator with opts, which may be NULL; ds is
 * borrowed) and writes it to the directory `path`, which must not exist,
 * be empty, or hold a saved dataset (it is then replaced, and stays the
 * old one until the new one is complete). compression: an sl_compression.
 * shard_fn puts an element's shard, in [0, 1e8), in *key (at most 4096
 * distinct; called on this thread, in order, as key_fn is); NULL spreads
 * the elements over as many shards as writer threads (up to 8, one per
 * core). Shards are encoded, compressed and written by those threads in
 * parallel while the pass runs. Whatever the shards, sl_load gives the
 * elements back in the pass's order. 0, or the pass's, shard_fn's or a
 * write's error with the message set; nothing is left at path then.
 * SL_EUNSUPPORTED for compression in a build without zlib. Any thread. */
SL_API int sl_save(sl_dataset *ds, const char *path, const sl_options *opts, int compression,
                   sl_key_fn shard_fn, void *user);
/* The dataset that sl_save wrote at path: its elements in saved order,
 * with the saved structure and an exact cardinality (both known at once:
 * the manifest is read here). NULL with SL_ENOENT when there is no
 * finished save at path, SL_ECORRUPT naming the file for a damaged
 * manifest, SL_EUNSUPPORTED for a newer format. A damaged chunk of a
 * shard file is an element error naming the file and its offset (the
 * error policy decides; skipping drops that chunk's elements). Saves and
 * restores its position (per shard) like any op. Random access (shuffle
 * SL_SHUFFLE_ALL, distribute resumed on another world size): the first
 * element taken by position indexes the save in one pass over its shards
 * (every chunk's checksum checked, 12 bytes of memory per element, kept
 * with the dataset); then an element is one read, or for a compressed
 * save the inflation of its chunk (the last 4 chunks are kept). A record
 * changed since is an element error naming the file. */
SL_API sl_dataset *sl_load(const char *path);
/* tf.data's snapshot: the first complete pass of `in` (consumed) is
 * written, while it is served, under the directory `path` in a
 * subdirectory named by in's fingerprint, in sl_save's format; every
 * later pass (a repeat's, a later iterator's, another process's) reads it
 * back instead of running `in`, so random ops below it draw once, as
 * under a cache; `in` runs epoch 0. A changed pipeline writes a snapshot
 * of its own. The write goes to "<fingerprint>.partial" under a lock and
 * is renamed when the pass completes: a partial snapshot is never read, a
 * pass cut short (take, an error) removes it, a second writer at the same
 * time passes its input through unwritten, and a failed write (disk full)
 * is logged and the pass goes on unwritten. The writing pass encodes and
 * compresses on writer threads of its own (one per core, up to 8; not
 * pool workers), stopped and joined when the pass ends or its iterator
 * is freed. compression: an sl_compression (SL_EUNSUPPORTED without
 * zlib). A position saved while
 * writing resumes passing through, unwritten. */
SL_API sl_dataset *sl_snapshot(sl_dataset *in, const char *path, int compression);

/* Checkpoints: a position saved in a few hundred bytes, restored in any
 * process with the same pipeline, continuing byte for byte.
 *
 * sl_iterator_save writes the position between two sl_next calls (on the
 * thread that calls sl_next): exactly the elements sl_next has returned
 * count as consumed, never what prefetch, map or reads computed ahead.
 * Returns the state's size; the state is written into buf only when it
 * fits in cap (call with cap 0 to ask the size). Negative on failure:
 * SL_ESTATE after the iterator failed, or after sl_next_timeout returned
 * SL_AGAIN and before the element it waits for came (the pipeline holds
 * parts of it), SL_EUNSUPPORTED for a pipeline with no exact position (an
 * unordered map). A state is versioned and
 * checksummed; it holds the pipeline's fingerprint (as sl_cache's files
 * do), the seed, the epoch, and per node its counters (cursors, RNG
 * positions, what repeat/take/skip have passed, the error policy's counts).
 *
 * sl_iterator_restore makes an iterator that resumes there: in the same
 * epoch with the same seed (options that name another seed or epoch are
 * refused), its counters (elements, errors skipped) going on from the saved
 * ones, and later iterators of ds going on from the next epoch. Sources
 * seek to their position, maps restart at the next element, so nothing
 * already returned is read or decoded again; two ops rebuild instead: a
 * buffered shuffle replays its input from the start of the pass (the
 * elements it had taken, none returned; put it before costly maps), and a
 * cache that cannot serve the position (a memory cache in a new process, a
 * cache file gone) refills from its input. NULL on failure, with
 * SL_EMISMATCH (another pipeline, seed or epoch), SL_ECORRUPT (a truncated
 * or damaged state) or SL_EUNSUPPORTED (a newer format) in sl_last_error(),
 * the message saying which. */
SL_API int64_t sl_iterator_save(sl_iterator *it, void *buf, size_t cap);
SL_API sl_iterator *sl_iterator_restore(sl_dataset *ds, const void *state, size_t len,
                                        const sl_options *opts);
/* Resumes a pass saved on another number of ranks: states[0..n) are every
 * old rank's state from one checkpoint (any order), and ds is this rank's
 * pipeline, built with its own sl_distribute context (any world size, this
 * rank among it). From their records the old ranks' positions are merged
 * into what the epoch has left (a prefix of the order, and the few
 * positions faster ranks took beyond it), and the new ranks split that, so
 * across the change every element of the epoch is consumed exactly once
 * (an element the error policy skipped counts as consumed; the padding
 * for equal steps wraps within what is left and counts in
 * SL_STAT_PADDED). The order must be computed per position below
 * distribute: shuffle(SL_SHUFFLE_ALL), sl_shuffle_windowed, or an indexed
 * source (range, from_tensor_slices, the file lists, tfrecord_indexed,
 * megatron, npy); the nodes above distribute start afresh, so the batch
 * size may change. A state saved after such a resume holds the merged
 * base too, so checkpoints may be resumed on yet another world size, and
 * sl_iterator_restore still resumes it on the same one. A pipeline may hold
 * several distribute nodes (a mixture of sources, each distributed on its
 * own): each is merged, and the mixture above them, starting afresh, may
 * be given new weights without any source's elements repeated or lost.
 * Over such an input distribute always counts positions of the order, so
 * an element the error policy skips below it is a consumed position too.
 * NULL with SL_EMISMATCH (another pipeline, seed, epoch or order, ranks
 * missing or repeated, states from different resumes, a mixture that had
 * dropped an ended input), SL_EUNSUPPORTED (no position-giving input below
 * distribute, ranks more than 4,096 elements apart, a distribute that
 * splits whole files, states saved by an older sluice, or a checkpoint in
 * a later pass of a repeat above distribute: put repeat below it) or
 * SL_EINVAL (n > 1 and no distribute node over a dataset of known size);
 * n = 1 without a distribute node is sl_iterator_restore. */
SL_API sl_iterator *sl_iterator_restore_ranks(sl_dataset *ds, const void *const *states,
                                              const size_t *lens, int n,
                                              const sl_options *opts);

/* ======================================================================== */
/* Experimental: still moving. Define SLUICE_EXPERIMENTAL before including  */
/* this header to use them. They may change or go in any release, 0.x or   */
/* later; their symbols carry the version node SLUICE_EXPERIMENTAL_<x.y>    */
/* of the release that last changed them, so a program built against them  */
/* fails to load, rather than misbehaves, when they change.                */

#if defined(SLUICE_EXPERIMENTAL) || defined(SLUICE_BUILDING)

/* Options */

/* Events kept for sl_iterator_trace (a ring of this many); 0 = off. */
#define SL_OPT_TRACE_EVENTS SL_OPT_EXPERIMENTAL_12
/* 1: log every knob change with its reason, and a growth the RAM budget
 * held back, once (as SLUICE_LOG=autotune). */
#define SL_OPT_AUTOTUNE_LOG SL_OPT_EXPERIMENTAL_13

/* Statistics, report, trace */

typedef struct sl_stats sl_stats; /* a snapshot; free with sl_stats_free */

typedef enum sl_node_stat {
    SL_NODE_ELEMENTS = 0,  /* elements the node produced (a fused map_image
                            * + batch counts images), over all passes */
    SL_NODE_BUSY,          /* work time / (wall time × units), 0..1. A map:
                            * callback time summed over workers, units =
                            * its parallelism capped by the runtime's
                            * threads (1.0: every worker it can use busy
                            * all along). A file reader: read time summed
                            * over reads, units = its io_depth. Others: 0 */
    SL_NODE_INPUT_WAIT,    /* fraction of wall time its producer waited on input */
    SL_NODE_OCCUPANCY,     /* mean elements in its output buffer, sampled at takes */
    SL_NODE_EMPTY,         /* fraction of takes that found the buffer empty */
    SL_NODE_CAPACITY,      /* its output buffer's current capacity (elements) */
    SL_NODE_BYTES_HELD,    /* bytes in its buffer now */
    SL_NODE_STAT_COUNT
} sl_node_stat;

typedef enum sl_global_stat {
    SL_GLOBAL_WALL_SECONDS = 0, /* since the iterator was created, until
                                 * sl_next first returned SL_EOF or an error
                                 * (the fractions are over this time) */
    SL_GLOBAL_STALL_FRACTION,   /* time inside sl_next / wall time */
    SL_GLOBAL_STEP_SECONDS,     /* mean consumer time between sl_next calls */
    SL_GLOBAL_CPU_BUDGET,       /* worker threads the controller may keep busy */
    SL_GLOBAL_IO_IN_FLIGHT,     /* reads in flight now */
    SL_GLOBAL_IO_BYTES_PER_S,   /* file bytes read per wall second */
    SL_GLOBAL_KNOB_CHANGES,     /* autotune decisions so far */
    SL_GLOBAL_STAT_COUNT
} sl_global_stat;

/* A consistent-enough snapshot of the iterator's counters (each counter is
 * read atomically; the set is not one instant). What sl_iterator_stat
 * reads (elements, buffered and peak bytes, budgets, errors skipped, the
 * I/O backend) is read that way only; the JSON holds it too. Any thread.
 * NULL on allocation failure. */
SL_API sl_stats *sl_iterator_stats(const sl_iterator *it);
SL_API void sl_stats_free(sl_stats *s);
/* Nodes in pipeline order, the source first, the node sl_next reads last. */
SL_API int sl_stats_nodes(const sl_stats *s);
/* "map(decode)", "prefetch"...; owned by the snapshot; NULL for an unknown
 * node. */
SL_API const char *sl_stats_node_name(const sl_stats *s, int node);
/* NaN for an unknown node or key. */
SL_API double sl_stats_node(const sl_stats *s, int node, sl_node_stat key);
SL_API double sl_stats_global(const sl_stats *s, sl_global_stat key);
/* The node's knobs ("parallelism", "depth", "io_depth"): count, name,
 * current value, and whether the controller moves it (1) or it is fixed.
 * For an unknown node or knob: 0 knobs, name NULL, value and autotuned -1. */
SL_API int sl_stats_knobs(const sl_stats *s, int node);
SL_API const char *sl_stats_knob_name(const sl_stats *s, int node, int knob);
SL_API int64_t sl_stats_knob_value(const sl_stats *s, int node, int knob);
SL_API int sl_stats_knob_autotuned(const sl_stats *s, int node, int knob);
/* The whole snapshot as one JSON object (the global figures, then "nodes":
 * an array in pipeline order, each with its counters and "knobs"); owned by
 * the snapshot. NULL on allocation failure. */
SL_API const char *sl_stats_json(sl_stats *s);

/* A readable table of the nodes that names the bottleneck and why, e.g.
 * "map(image): 2/2 workers busy 97%, output buffer empty in 41% of takes ->
 * CPU-bound; more cores would help", or, when the consumer waits less than
 * SL_OPT_STALL_TARGET_PPM, that the consumer itself sets the pace. Figures
 * are over SL_GLOBAL_WALL_SECONDS. Any thread. Returns 0 or a negative code
 * (SL_EIO when writing fails). */
SL_API int sl_iterator_report(const sl_iterator *it, FILE *out);
/* The same text into buf (NUL-terminated, truncated to size); returns the
 * length the full text needs, like snprintf, or a negative code. */
SL_API int sl_iterator_report_buf(const sl_iterator *it, char *buf, size_t size);
/* Writes the events recorded so far (SL_OPT_TRACE_EVENTS) as Chrome
 * trace-event JSON that Perfetto and chrome://tracing open: a track per node
 * with its work spans, the consumer's stalls, and counter tracks for every
 * knob, the stall fraction and buffered bytes. The ring keeps the latest
 * SL_OPT_TRACE_EVENTS events. Node processes: one per node with spans
 * ("map(decode)"), a track per thread that worked for it; process "sluice"
 * holds the consumer's "stall" spans (waits over 20 us) and the counters,
 * sampled each controller tick (or every 100 ms of sl_next calls without
 * the controller) and once more when the trace is written. Any thread, while
 * the pipeline runs. SL_ESTATE if tracing is off, SL_EIO if the file cannot
 * be written. */
SL_API int sl_iterator_trace(const sl_iterator *it, const char *path);

/* DLPack */

/* DLPack export, for handing tensors to torch (at::fromDLPack,
 * torch.from_dlpack), numpy, JAX and others without a copy. Returns a
 * DLManagedTensor* of DLPack's v0.x ABI (void * here, so this header needs
 * no dlpack.h), or NULL with SL_EINVAL (a string tensor, a bad index) or
 * SL_ENOMEM in sl_last_error(). It holds a reference to el: the consumer
 * calls its deleter once when done, which releases the reference and frees
 * the managed tensor. The deleter is plain C and may run on any thread at
 * any time, also while a Python interpreter unwinds an exception or shuts
 * down. Treat the data as read-only (DLPack v0.x cannot say so). */
SL_API void *sl_element_dlpack(sl_element *el, int index);
/* The same for a view inside one of el's tensors: `data`, ndim dims of
 * `shape`, `strides` in items (NULL: compact row-major; negative strides
 * allowed), items of `dtype`. SL_EINVAL if any item the view reaches lies
 * outside the bytes of one numeric tensor of el. */
SL_API void *sl_element_dlpack_view(sl_element *el, const void *data, int ndim,
                                    const int64_t *shape, const int64_t *strides,
                                    sl_dtype dtype);
/* A PyCapsule destructor (PyCapsule_Destructor) for capsules named
 * "dltensor" that hold one of the pointers above: if no consumer took the
 * tensor (a consumer renames the capsule "used_dltensor"), calls its
 * deleter. Written in C for bindings such as ctypes, whose own callbacks
 * must not run while the interpreter has an exception pending. Looks up
 * PyCapsule_IsValid/PyCapsule_GetPointer in the process (libsluice does not
 * link libpython); does nothing outside a Python process. Called by Python
 * with the GIL held. */
SL_API void sl_dlpack_capsule_destructor(void *capsule);
/* For an interpreter whose symbols the process does not export (libpython
 * loaded RTLD_LOCAL by an embedding program): the binding passes the
 * addresses of PyCapsule_IsValid and PyCapsule_GetPointer, which the
 * destructor then uses. Call once, before capsules are made. */
SL_API void sl_dlpack_capsule_api(void *is_valid, void *get_pointer);

/* Preprocessing service: the pipeline runs on other processes (workers,
 * on this host or others, launched by Slurm, mpirun or Kubernetes) and
 * finished batches come to the trainer over UCX (SLUICE_WITH_UCX; shared
 * memory on one host, TCP, RDMA). The trainer and every worker build the
 * same dataset from the same code; the trainer wraps it in sl_service and
 * iterates that; each worker runs sl_worker_run (or the sluice-worker
 * program, or python3 -m sluice.worker) with a function that builds it.
 *
 * Guarantees: the trainer receives exactly the batches, in the order and
 * with the bytes, that iterating the dataset itself gives, whatever the
 * number of workers, their speed, and their failures. Each worker
 * computes splits (a few consecutive batches of one epoch) that the
 * trainer hands out; a split is a pure function of (seed, epoch, the
 * batches' positions), so any worker can redo it. A worker whose
 * connection drops, or that answers no heartbeat for timeout_ms (a
 * stopped process keeps its sockets), has its unfinished splits
 * recomputed by others, no more than those; batches received twice are
 * dropped. With SL_SERVICE_AT_MOST_ONCE (tf.data's), a dead worker's
 * missing batches are skipped instead, never waited for. Workers may join
 * at any time and leave; the trainer's checkpoint (sl_iterator_save) holds
 * its position only, so it resumes with any number of workers.
 *
 * What a worker can run: the dataset must end in batch (then only
 * prefetch), and between batch and the order's source hold only 1:1
 * ops (map, map_image, map_video, map_audio, the reading and decoding
 * nodes); the source of positions is distribute over shuffle(ALL) or an
 * indexed source, such a shuffle, or an indexed source. A buffered
 * shuffle, filter, scan, unique, cache or interleave there is refused by
 * sl_service, naming it. Workers run the fail error policy: an element
 * error fails the trainer's pass, naming the worker and the file.
 *
 * Security: both sides prove a shared secret, SLUICE_SERVICE_SECRET (or
 * the file SLUICE_SERVICE_SECRET_FILE names), by HMAC-SHA256 over fresh
 * nonces, before anything else; a peer that does not is refused and
 * logged, and the secret is in no message. Batches are not encrypted: run
 * the service on a network you trust. */

/* sl_service_spec.flags: never wait for a dead worker's batches (skipped,
 * counted in the statistics) */
#define SL_SERVICE_AT_MOST_ONCE 1u

typedef struct sl_service_spec {
    size_t struct_size;   /* sizeof(sl_service_spec), set by the init */
    /* "host:port" to listen on ("0.0.0.0:7780", "[::]:7780"); port 0:
     * any (sl_service_port says which). NULL: $SLUICE_SERVICE_ADDRESS, else
     * "0.0.0.0:7780". The port is offset by the local rank
     * (sl_distributed_context) when not 0, so ranks on one host differ. */
    const char *address;
    /* The user's name for the pipeline's code ("v3", a git hash): a
     * worker must give the same (a fingerprint cannot see inside
     * callbacks). NULL: "". */
    const char *version;
    int64_t split_batches;  /* batches per split; 0: 2 */
    /* bytes of batches the trainer holds or has asked for beyond the one
     * being consumed (at least one split); 0: 256 MiB */
    int64_t max_bytes;
    int heartbeat_ms;       /* 0: 500 */
    int timeout_ms;         /* a worker silent this long is dropped; 0: 5000 */
    unsigned flags;         /* SL_SERVICE_* */
} sl_service_spec;

/* Defaults into spec (struct_size bytes: the fields this library knows
 * that fit, zeros past them). 0 or SL_EINVAL. */
SL_API int sl_service_spec_init(sl_service_spec *spec, size_t struct_size);
#define SL_SERVICE_SPEC_INIT(spec) sl_service_spec_init((spec), sizeof *(spec))

/* The batches of ds (consumed), computed by workers: same cardinality,
 * structure and elements, epoch by epoch (each iterator is a pass, as
 * for ds). Listens at once, so workers may connect before the first
 * pass; stops listening, and tells connected workers to leave, when the
 * dataset is freed. Only one pass at a time: a new iterator's pass
 * replaces an older one's. The worker's pipeline is ds as built for this
 * rank (sl_distributed_context; the worker is told it). NULL with
 * SL_EUNSUPPORTED (ds cannot run on workers, naming the op; a build
 * without UCX or libcrypto), SL_EACCES (no secret), SL_EIO (cannot
 * listen) or SL_EINVAL. */
SL_API sl_dataset *sl_service(sl_dataset *ds, const sl_service_spec *spec);
/* The port an sl_service dataset listens on, or a negative code for
 * another dataset. Any thread. (sl_service copies spec and its strings;
 * like every builder it may run on any thread.) */
SL_API int sl_service_port(const sl_dataset *service);

/* Builds the worker's dataset: the same pipeline as the trainer's, with
 * sl_distribute(ds, NULL, ...) reading the trainer rank's context. user
 * as given to sl_worker_run. Returns a new reference (the worker releases
 * it), or NULL with sl_last_error set. Called during pairing on the
 * transport's thread, not the caller's. */
typedef sl_dataset *(*sl_build_fn)(void *user);

typedef struct sl_worker_spec {
    size_t struct_size;     /* sizeof(sl_worker_spec), set by the init */
    /* the trainer's "host:port"; NULL: $SLUICE_SERVICE_ADDRESS */
    const char *address;
    const char *version;    /* as the trainer's sl_service_spec.version */
    int threads;            /* the split iterators' threads; 0: default */
    /* keep trying to reach the trainer this long (it may start later);
     * 0: 60000 */
    int connect_timeout_ms;
    const char *name;       /* in the trainer's logs; NULL: host:pid */
} sl_worker_spec;

SL_API int sl_worker_spec_init(sl_worker_spec *spec, size_t struct_size);
#define SL_WORKER_SPEC_INIT(spec) sl_worker_spec_init((spec), sizeof *(spec))

/* Serves one trainer: connects, pairs (the secret, then the pipeline:
 * build(user) for the trainer's rank, its fingerprint and version must be
 * the trainer's), then computes the splits it is given until the trainer
 * says goodbye (0) or the connection is lost (SL_EIO). Blocks; call it
 * from a thread of its own if the process does more. SL_EACCES (a secret
 * refused), SL_EMISMATCH (another pipeline or version, naming both),
 * SL_EUNSUPPORTED (no UCX, or a pipeline a worker cannot run), or
 * build's error. spec's strings are read until it returns. */
SL_API int sl_worker_run(sl_build_fn build, void *user, const sl_worker_spec *spec);

#endif /* SLUICE_EXPERIMENTAL */

#ifdef __cplusplus
}
#endif
#endif /* SLUICE_H */
