/* The JSON writer the bench's files share: strings and numbers. */
#include <math.h>
#include <stdio.h>
#include "sluice_bench.h"

void json_string(FILE *f, const char *s)
{
    fputc('"', f);
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\')
            fprintf(f, "\\%c", c);
        else if (c < 0x20)
            fprintf(f, "\\u%04x", c);
        else
            fputc(c, f);
    }
    fputc('"', f);
}

/* JSON has no NaN or infinity. */
void json_number(FILE *f, double v)
{
    if (isfinite(v))
        fprintf(f, "%.3f", v);
    else
        fputs("null", f);
}
