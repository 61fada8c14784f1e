/* What a map or filter callback sees (sl_map_ctx): the element's index and
 * epoch, its own random stream, scratch memory and the error hook. */
#include "node.h"

typedef struct sl__scratch {
    struct sl__scratch *next;
    size_t size;
    _Alignas(64) unsigned char data[];
} sl__scratch;

void sl__map_ctx_begin(sl_map_ctx *ctx, const sl_dataset *ds, uint64_t seed, uint64_t key,
                       int64_t epoch, int64_t index)
{
    ctx->rng = sl__rng_make(seed, key, epoch, index);
    ctx->index = index;
    ctx->epoch = epoch;
    ctx->ds = ds;
    ctx->input = NULL;
    ctx->scratch = NULL;
}

void sl__map_ctx_end(sl_map_ctx *ctx)
{
    while (ctx->scratch) {
        sl__scratch *s = ctx->scratch;
        ctx->scratch = s->next;
        sl__free_aligned(s, sizeof *s + s->size, 64);
    }
}

SL_API uint64_t sl_map_ctx_random(sl_map_ctx *ctx)
{
    return sl__rng_next(&ctx->rng);
}

SL_API double sl_map_ctx_uniform(sl_map_ctx *ctx)
{
    return sl__rng_uniform(&ctx->rng);
}

SL_API int64_t sl_map_ctx_index(const sl_map_ctx *ctx)
{
    return ctx->index;
}

SL_API int64_t sl_map_ctx_epoch(const sl_map_ctx *ctx)
{
    return ctx->epoch;
}

SL_API int sl_map_ctx_error(sl_map_ctx *ctx, int code, const char *msg)
{
    (void)ctx;
    if (code >= 0)
        code = SL_ECALLBACK;
    return sl__set_error_str(code, msg);
}

SL_API void *sl_map_ctx_scratch(sl_map_ctx *ctx, size_t size)
{
    sl__scratch *s = sl__alloc_aligned(sizeof *s + size, 64);
    if (!s)
        return NULL;
    s->size = size;
    s->next = ctx->scratch;
    ctx->scratch = s;
    return s->data;
}

SL_API const sl_structure *sl_map_ctx_structure(const sl_map_ctx *ctx)
{
    if (ctx->input)
        return sl_dataset_structure(ctx->input);
    return ctx->ds && ctx->ds->ninputs ? sl_dataset_structure(ctx->ds->inputs[0]) : NULL;
}

SL_API int sl_map_ctx_set_structure(sl_map_ctx *ctx, const sl_structure *structure)
{
    if (!ctx->ds || !structure)
        return sl__set_error(SL_EINVAL, "sl_map_ctx_set_structure: no map or no structure");
    return sl__dataset_publish_structure(ctx->ds, structure);
}

int sl__predicate_call(const sl__iter *it, sl_predicate_fn fn, void *user, uint64_t seed,
                       int64_t index, const sl_element *el)
{
    sl_map_ctx ctx;
    sl__map_ctx_begin(&ctx, it->ds, seed, it->key, it->epoch, index);
    sl_clear_error(); /* so a callback that fails silently leaves no stale text */
    int r = fn(&ctx, el, user);
    sl__map_ctx_end(&ctx);
    if (r >= 0)
        return r > 0;
    if (!sl__error_msg()[0])
        sl__set_error(r, "predicate failed: %s", sl_strerror(r));
    sl__element_error_prefix(el);
    sl__error_prefix(sl_dataset_name(it->ds));
    return r;
}
