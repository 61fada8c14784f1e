/* Little-endian integers in byte buffers: the on-disk and saved-state
 * formats are little-endian whatever the host. */
#ifndef SL_CORE_LE_H
#define SL_CORE_LE_H

#include <stdint.h>
#include <string.h>

/* On a little-endian host each is one unaligned load or store (snapshots
 * write a record per element pulled); elsewhere the bytes are shuffled. */
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
#define SL__LE_HOST 1
#else
#define SL__LE_HOST 0
#endif

static inline void sl__put_le32(unsigned char *p, uint32_t v)
{
    if (SL__LE_HOST) {
        memcpy(p, &v, 4);
        return;
    }
    for (int i = 0; i < 4; i++)
        p[i] = (unsigned char)(v >> (8 * i));
}

static inline void sl__put_le64(unsigned char *p, uint64_t v)
{
    if (SL__LE_HOST) {
        memcpy(p, &v, 8);
        return;
    }
    for (int i = 0; i < 8; i++)
        p[i] = (unsigned char)(v >> (8 * i));
}

static inline uint32_t sl__get_le32(const unsigned char *p)
{
    uint32_t v = 0;
    if (SL__LE_HOST) {
        memcpy(&v, p, 4);
        return v;
    }
    for (int i = 0; i < 4; i++)
        v |= (uint32_t)p[i] << (8 * i);
    return v;
}

static inline uint64_t sl__get_le64(const unsigned char *p)
{
    uint64_t v = 0;
    if (SL__LE_HOST) {
        memcpy(&v, p, 8);
        return v;
    }
    for (int i = 0; i < 8; i++)
        v |= (uint64_t)p[i] << (8 * i);
    return v;
}

#endif
