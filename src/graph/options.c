/* Iterator options (sl_options): a table of defaults and bounds, and the
 * typed setters over it. */
#include "node.h"

struct sl_options {
    int64_t v[SL_OPT_COUNT];
    uint64_t set; /* bit k: key k set explicitly (a profile's default yields) */
    sl_runtime *rt;
    char *cache_dir;
    const sl_dataset *split_node;
    int64_t split_first, split_end;
};

static const struct {
    int64_t def, min, max;
} option_spec[SL_OPT_COUNT] = {
    [SL_OPT_THREADS] = {0, 0, 1024},
    [SL_OPT_RAM_BUDGET] = {0, 0, INT64_MAX},
    [SL_OPT_ERROR_POLICY] = {SL_ERRORS_FAIL, SL_ERRORS_FAIL, SL_ERRORS_SKIP_RATE},
    [SL_OPT_ERROR_MAX_PPM] = {10000, 0, 1000000},
    [SL_OPT_SEED] = {0, INT64_MIN, INT64_MAX},
    [SL_OPT_DETERMINISTIC] = {1, 0, 1},
    [SL_OPT_ERROR_LOG_LIMIT] = {5, 0, INT64_MAX},
    [SL_OPT_IO_BACKEND] = {SL_IO_AUTO, SL_IO_AUTO, SL_IO_PREAD},
    [SL_OPT_IO_DEPTH] = {32, 1, 4096},
    [SL_OPT_AUTOTUNE] = {1, 0, 1},
    [SL_OPT_CPU_BUDGET] = {0, 0, 4096},
    [SL_OPT_STALL_TARGET_PPM] = {20000, 0, 1000000},
    [SL_OPT_TRACE_EVENTS] = {0, 0, 1 << 26},
    [SL_OPT_AUTOTUNE_LOG] = {0, 0, 1},
    [SL_OPT_EPOCH] = {-1, -1, INT64_MAX},
    [SL_OPT_MAX_RECORD_BYTES] = {256 << 20, 1, (int64_t)1 << 40},
    [SL_OPT_PROFILE] = {SL_PROFILE_DEFAULT, SL_PROFILE_DEFAULT, SL_PROFILE_EDGE},
    [SL_OPT_REMOTE_MAX_ATTEMPTS] = {8, 1, 1000},
    [SL_OPT_REMOTE_RETRY_SECONDS] = {120, 1, 86400},
    [SL_OPT_REMOTE_CACHE_BYTES] = {0, 0, INT64_MAX},
};

SL_API sl_options *sl_options_create(void)
{
    sl_options *o = sl__calloc(1, sizeof *o);
    if (!o)
        return NULL;
    for (int i = 0; i < SL_OPT_COUNT; i++)
        o->v[i] = option_spec[i].def;
    return o;
}

SL_API void sl_options_free(sl_options *o)
{
    if (o)
        sl__strfree(o->cache_dir);
    sl__free(o, sizeof *o);
}

SL_API int sl_option_bounds(sl_option key, int64_t *min, int64_t *max)
{
    if ((unsigned)key >= SL_OPT_COUNT)
        return sl__set_error(SL_EINVAL, "unknown option %d", (int)key);
    if (min)
        *min = option_spec[key].min;
    if (max)
        *max = option_spec[key].max;
    return 0;
}

SL_API int sl_options_set(sl_options *o, sl_option key, int64_t value)
{
    if (!o || (unsigned)key >= SL_OPT_COUNT)
        return sl__set_error(SL_EINVAL, "sl_options_set: unknown option %d", (int)key);
    if (value < option_spec[key].min || value > option_spec[key].max)
        return sl__set_error(SL_EINVAL, "sl_options_set: option %d: %lld is outside [%lld, %lld]",
                             (int)key, (long long)value, (long long)option_spec[key].min,
                             (long long)option_spec[key].max);
    o->v[key] = value;
    o->set |= (uint64_t)1 << key;
    return 0;
}

/* What a profile changes: the key's value unless it was set explicitly. */
static const struct {
    sl_option key;
    int64_t value;
} edge_defaults[] = {
    {SL_OPT_THREADS, 1},
    {SL_OPT_AUTOTUNE, 0},
    {SL_OPT_RAM_BUDGET, 64 << 20},
    {SL_OPT_IO_DEPTH, 4},
    {SL_OPT_IO_BACKEND, SL_IO_PREAD},
};

int64_t sl__options_get(const sl_options *o, sl_option key)
{
    int64_t v = sl_options_get(o, key);
    if (o && (o->set >> key & 1))
        return v;
    if (sl_options_get(o, SL_OPT_PROFILE) == SL_PROFILE_EDGE)
        for (size_t i = 0; i < sizeof edge_defaults / sizeof edge_defaults[0]; i++)
            if (edge_defaults[i].key == key)
                return edge_defaults[i].value;
    return v;
}

SL_API int64_t sl_options_get(const sl_options *o, sl_option key)
{
    if ((unsigned)key >= SL_OPT_COUNT)
        return 0;
    return o ? o->v[key] : option_spec[key].def;
}

SL_API int sl_options_set_runtime(sl_options *o, sl_runtime *rt)
{
    if (!o)
        return sl__set_error(SL_EINVAL, "sl_options_set_runtime: NULL options");
    o->rt = rt;
    return 0;
}

SL_API int sl_options_set_remote_cache_dir(sl_options *o, const char *dir)
{
    if (!o)
        return sl__set_error(SL_EINVAL, "sl_options_set_remote_cache_dir: NULL options");
    char *d = dir && *dir ? sl__strdup(dir) : NULL;
    if (dir && *dir && !d)
        return SL_ENOMEM;
    sl__strfree(o->cache_dir);
    o->cache_dir = d;
    return 0;
}

const char *sl__options_cache_dir(const sl_options *o)
{
    return o ? o->cache_dir : NULL;
}

sl_runtime *sl__options_runtime(const sl_options *o)
{
    return o ? o->rt : NULL;
}

void sl__options_set_split(sl_options *opts, const sl_dataset *node, int64_t first, int64_t end)
{
    opts->split_node = node;
    opts->split_first = first;
    opts->split_end = end;
}

void sl__options_get_split(const sl_options *opts, const sl_dataset **node, int64_t *first,
                           int64_t *end)
{
    *node = opts ? opts->split_node : NULL;
    *first = opts ? opts->split_first : 0;
    *end = opts ? opts->split_end : 0;
}
