/* What this copy of the library was built with: the optional parts CMake
 * turned on or off (SLUICE_NO_* definitions), so a binding or a user can
 * ask the library itself instead of guessing from what happens to fail. */
#include "sluice.h"

#ifdef SLUICE_NO_URING
#define SL__OPT_IO_URING "io_uring=off"
#else
#define SL__OPT_IO_URING "io_uring=on"
#endif
#ifdef SLUICE_NO_JPEG
#define SL__OPT_JPEG " jpeg=off"
#else
#define SL__OPT_JPEG " jpeg=on"
#endif
#ifdef SLUICE_NO_PNG
#define SL__OPT_PNG " png=off"
#else
#define SL__OPT_PNG " png=on"
#endif
#ifdef SLUICE_NO_WEBP
#define SL__OPT_WEBP " webp=off"
#else
#define SL__OPT_WEBP " webp=on"
#endif
#ifdef SLUICE_NO_ZLIB
#define SL__OPT_ZLIB " zlib=off"
#else
#define SL__OPT_ZLIB " zlib=on"
#endif
#ifdef SLUICE_NO_CURL
#define SL__OPT_CURL " curl=off"
#else
#define SL__OPT_CURL " curl=on"
#endif

#ifdef SLUICE_NO_FFMPEG
#define SL__OPT_FFMPEG " ffmpeg=off"
#else
#define SL__OPT_FFMPEG " ffmpeg=on"
#endif

#ifdef SLUICE_NO_UCX
#define SL__OPT_UCX " ucx=off"
#else
#define SL__OPT_UCX " ucx=on"
#endif

SL_API const char *sl_build_options(void)
{
    return SL__OPT_IO_URING SL__OPT_JPEG SL__OPT_PNG SL__OPT_WEBP SL__OPT_ZLIB SL__OPT_CURL
           SL__OPT_FFMPEG SL__OPT_UCX;
}
