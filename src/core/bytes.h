/* A growable byte string: saved states, records, snapshots, scratch. */
#ifndef SL_CORE_BYTES_H
#define SL_CORE_BYTES_H

#include <stddef.h>

/* Reused, never shrinks. Zeroed is empty. */
typedef struct sl__bytes {
    unsigned char *p;
    size_t n, cap;
} sl__bytes;

/* 0, or SL_ENOMEM with the message set. */
int sl__bytes_reserve(sl__bytes *b, size_t extra);
int sl__bytes_append(sl__bytes *b, const void *p, size_t n);
/* Makes b a copy of p[0..n). */
int sl__bytes_assign(sl__bytes *b, const void *p, size_t n);
void sl__bytes_free(sl__bytes *b);
static inline void sl__bytes_swap(sl__bytes *a, sl__bytes *b)
{
    sl__bytes t = *a;
    *a = *b;
    *b = t;
}

#endif
