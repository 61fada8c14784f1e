/*
 * DLPack export: a tensor (or a strided view inside one) of an element as a
 * DLManagedTensor of DLPack's v0.x ABI, the one torch, numpy, JAX and
 * CuPy import. The managed tensor holds a reference to the element and
 * its deleter is plain C (no callback into the binding's language), so a
 * consumer may drop it on any thread, while its interpreter unwinds an
 * exception or shuts down.
 *
 * The structs below follow dlpack.h (dmlc/dlpack, v0.8), written out here
 * so that nothing more is needed to build.
 */
#include <dlfcn.h>
#include <pthread.h>
#include <stdatomic.h>
#include <string.h>
#include "alloc.h"
#include "element.h"
#include "error.h"

enum { KDL_CPU = 1 };
enum { KDL_INT = 0, KDL_UINT = 1, KDL_FLOAT = 2 };

typedef struct dl_device {
    int32_t device_type, device_id;
} dl_device;

typedef struct dl_dtype {
    uint8_t code, bits;
    uint16_t lanes;
} dl_dtype;

typedef struct dl_tensor {
    void *data;
    dl_device device;
    int32_t ndim;
    dl_dtype dtype;
    int64_t *shape;
    int64_t *strides; /* in items; NULL: compact row-major */
    uint64_t byte_offset;
} dl_tensor;

typedef struct dl_managed {
    dl_tensor dl_tensor;
    void *manager_ctx;
    void (*deleter)(struct dl_managed *self);
} dl_managed;

/* One allocation: the managed tensor, then its shape and strides. */
typedef struct export {
    dl_managed m;
    sl_element *el;
    size_t size;
    int64_t dims[]; /* shape[ndim], then strides[ndim] */
} export;

static void export_delete(dl_managed *m)
{
    export *x = m->manager_ctx;
    sl_element_release(x->el);
    sl__free(x, x->size);
}

static bool dl_type(sl_dtype t, dl_dtype *out)
{
    static const dl_dtype types[] = {
        [SL_UINT8] = {KDL_UINT, 8, 1},    [SL_INT8] = {KDL_INT, 8, 1},
        [SL_UINT16] = {KDL_UINT, 16, 1},  [SL_INT16] = {KDL_INT, 16, 1},
        [SL_INT32] = {KDL_INT, 32, 1},    [SL_INT64] = {KDL_INT, 64, 1},
        [SL_FLOAT32] = {KDL_FLOAT, 32, 1}, [SL_FLOAT64] = {KDL_FLOAT, 64, 1},
    };
    if ((unsigned)t >= sizeof types / sizeof *types)
        return false;
    *out = types[t];
    return true;
}

/* The tensor of el whose bytes hold [lo, hi), or NULL. */
static const struct sl_tensor *holder(const sl_element *el, uintptr_t lo, uintptr_t hi)
{
    for (int i = 0; i < el->n; i++) {
        uintptr_t a = (uintptr_t)el->t[i].data, b = a + el->t[i].nbytes;
        if (el->t[i].dtype != SL_STRING && lo >= a && hi <= b)
            return &el->t[i];
    }
    return NULL;
}

/* The byte range a view touches: [lo, hi), or false if computing it
 * overflows (no valid view can). A view with no items touches nothing. */
static bool view_extent(uintptr_t data, int ndim, const int64_t *shape, const int64_t *strides,
                        size_t item, uintptr_t *lo, uintptr_t *hi)
{
    int64_t first = 0, last = 0, compact = 1; /* in items */
    for (int d = ndim - 1; d >= 0; d--) {
        if (shape[d] == 0) {
            *lo = *hi = data;
            return true;
        }
        int64_t s = strides ? strides[d] : compact, span;
        if (__builtin_mul_overflow(s, shape[d] - 1, &span) ||
            (span < 0 ? __builtin_add_overflow(first, span, &first)
                      : __builtin_add_overflow(last, span, &last)) ||
            __builtin_mul_overflow(compact, shape[d], &compact))
            return false;
    }
    int64_t lo_b, hi_b;
    if (last == INT64_MAX || __builtin_mul_overflow(first, (int64_t)item, &lo_b) ||
        __builtin_mul_overflow(last + 1, (int64_t)item, &hi_b) || lo_b == INT64_MIN ||
        (lo_b < 0 && (uint64_t)-lo_b > data) || (uint64_t)hi_b > UINTPTR_MAX - data)
        return false;
    *lo = data - (uintptr_t)(lo_b < 0 ? -lo_b : 0);
    *hi = data + (uintptr_t)hi_b;
    return true;
}

static dl_managed *make_export(sl_element *el, void *data, int ndim, const int64_t *shape,
                               const int64_t *strides, dl_dtype type)
{
    size_t size = sizeof(export) + 2 * (size_t)ndim * sizeof(int64_t);
    export *x = sl__alloc(size);
    if (!x) {
        sl__set_error(SL_ENOMEM, "DLPack export: out of memory");
        return NULL;
    }
    memset(x, 0, sizeof *x);
    x->size = size;
    x->el = sl_element_retain(el);
    int64_t *sh = x->dims, *st = x->dims + ndim;
    if (ndim)
        memcpy(sh, shape, (size_t)ndim * sizeof *sh);
    if (strides && ndim)
        memcpy(st, strides, (size_t)ndim * sizeof *st);
    dl_tensor *t = &x->m.dl_tensor;
    t->data = data;
    t->device = (dl_device){KDL_CPU, 0};
    t->ndim = ndim;
    t->dtype = type;
    t->shape = sh;
    t->strides = strides ? st : NULL;
    x->m.manager_ctx = x;
    x->m.deleter = export_delete;
    return &x->m;
}

SL_API void *sl_element_dlpack(sl_element *el, int index)
{
    const sl_tensor *t = sl_element_tensor(el, index);
    dl_dtype type;
    if (!t || !dl_type(t->dtype, &type)) {
        sl__set_error(SL_EINVAL, "sl_element_dlpack: tensor %d %s", index,
                      t ? "is a string tensor, which DLPack cannot describe" : "does not exist");
        return NULL;
    }
    return make_export(el, t->data, t->ndim, t->shape, NULL, type);
}

SL_API void *sl_element_dlpack_view(sl_element *el, const void *data, int ndim,
                                    const int64_t *shape, const int64_t *strides, sl_dtype dtype)
{
    dl_dtype type;
    if (!el || ndim < 0 || ndim > SL_MAX_DIMS || (ndim && !shape) || !dl_type(dtype, &type)) {
        sl__set_error(SL_EINVAL, "sl_element_dlpack_view: bad arguments");
        return NULL;
    }
    for (int d = 0; d < ndim; d++)
        if (shape[d] < 0) {
            sl__set_error(SL_EINVAL, "sl_element_dlpack_view: negative dimension");
            return NULL;
        }
    uintptr_t lo, hi;
    if (!view_extent((uintptr_t)data, ndim, shape, strides, sl_dtype_size(dtype), &lo, &hi) ||
        (hi > lo && !holder(el, lo, hi))) { /* no items: nothing to check */
        sl__set_error(SL_EINVAL, "sl_element_dlpack_view: the view reaches outside the "
                      "element's tensors");
        return NULL;
    }
    return make_export(el, (void *)data, ndim, shape, strides, type);
}

/* ---- for bindings that hand exports over in a PyCapsule ---- */

typedef int (*capsule_is_valid_fn)(void *capsule, const char *name);
typedef void *(*capsule_get_pointer_fn)(void *capsule, const char *name);

static _Atomic(capsule_is_valid_fn) capsule_is_valid;
static _Atomic(capsule_get_pointer_fn) capsule_get_pointer;
static pthread_once_t capsule_once = PTHREAD_ONCE_INIT;

/* The interpreter that loaded us exports its C API to the process, unless
 * the binding has said where it is. */
static void capsule_resolve(void)
{
    if (!atomic_load(&capsule_is_valid))
        atomic_store(&capsule_is_valid,
                     (capsule_is_valid_fn)dlsym(RTLD_DEFAULT, "PyCapsule_IsValid"));
    if (!atomic_load(&capsule_get_pointer))
        atomic_store(&capsule_get_pointer,
                     (capsule_get_pointer_fn)dlsym(RTLD_DEFAULT, "PyCapsule_GetPointer"));
}

SL_API void sl_dlpack_capsule_api(void *is_valid, void *get_pointer)
{
    atomic_store(&capsule_is_valid, (capsule_is_valid_fn)is_valid);
    atomic_store(&capsule_get_pointer, (capsule_get_pointer_fn)get_pointer);
}

SL_API void sl_dlpack_capsule_destructor(void *capsule)
{
    pthread_once(&capsule_once, capsule_resolve);
    capsule_is_valid_fn is_valid = atomic_load(&capsule_is_valid);
    capsule_get_pointer_fn get_pointer = atomic_load(&capsule_get_pointer);
    if (!capsule || !is_valid || !get_pointer)
        return;
    /* a consumer renames the capsule "used_dltensor" and owns the tensor */
    if (!is_valid(capsule, "dltensor"))
        return;
    dl_managed *m = get_pointer(capsule, "dltensor");
    if (m && m->deleter)
        m->deleter(m);
}
