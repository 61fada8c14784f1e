/* Which decoder a file goes to (image.h, sl__image_format): its first
 * bytes, never its name; a folder may mix formats. */
#include <string.h>
#include "image.h"

int sl__image_format(const uint8_t *d, size_t n)
{
    static const uint8_t png[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'};
    if (n >= 3 && d[0] == 0xff && d[1] == 0xd8 && d[2] == 0xff)
        return SL__FMT_JPEG;
    if (n >= 8 && !memcmp(d, png, 8))
        return SL__FMT_PNG;
    if (n >= 12 && !memcmp(d, "RIFF", 4) && !memcmp(d + 8, "WEBP", 4))
        return SL__FMT_WEBP;
    return SL__FMT_OTHER;
}

const char *sl__image_missing(int fmt)
{
    switch (fmt) {
#ifdef SLUICE_NO_JPEG
    case SL__FMT_JPEG:
        return "a JPEG, and this build has no JPEG decoder (SLUICE_WITH_JPEG=OFF)";
    case SL__FMT_OTHER:
        return "not a PNG or WebP file, and this build has no JPEG decoder to try "
               "(SLUICE_WITH_JPEG=OFF)";
#endif
#ifdef SLUICE_NO_PNG
    case SL__FMT_PNG:
        return "a PNG, and this build has no PNG decoder (SLUICE_WITH_PNG=OFF)";
#endif
#ifdef SLUICE_NO_WEBP
    case SL__FMT_WEBP:
        return "a WebP, and this build has no WebP decoder (SLUICE_WITH_WEBP=OFF)";
#endif
    default:
        return NULL;
    }
}
