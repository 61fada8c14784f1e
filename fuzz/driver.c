/* Runs a fuzz target without libFuzzer: every seed, then deterministic
 * mutations of them (bit flips, byte changes, truncation, duplication of a
 * span), so the suite exercises each parser on bad input every run.
 * Usage: fuzz_X [iterations] (default 2000), or fuzz_X --write-seeds DIR
 * to write the seeds as a starting corpus for the libFuzzer binary. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "fuzz.h"
#include "sluice.h"

typedef struct seed {
    uint8_t *p;
    size_t n;
} seed;

static seed seeds[64];
static int nseeds;

static void add(const uint8_t *data, size_t size)
{
    if (nseeds == 64)
        return;
    seeds[nseeds].p = malloc(size ? size : 1);
    memcpy(seeds[nseeds].p, data, size);
    seeds[nseeds++].n = size;
}

static uint64_t rnd(uint64_t *s)
{
    *s += 0x9e3779b97f4a7c15ull;
    uint64_t z = *s;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* One mutated copy of s in buf (capacity 2 * s->n + 16); returns its size. */
static size_t mutate(const seed *s, uint8_t *buf, uint64_t *r)
{
    size_t n = s->n;
    memcpy(buf, s->p, n);
    int edits = 1 + (int)(rnd(r) % 4);
    for (int e = 0; e < edits && n; e++) {
        /* half the edits land past the first third, where entropy-coded
         * data and later records live, not only in headers */
        size_t at = e % 2 ? n / 3 + rnd(r) % (n - n / 3) : rnd(r) % n;
        switch (rnd(r) % 5) {
        case 0: buf[at] ^= (uint8_t)(1u << (rnd(r) % 8)); break;
        case 1: buf[at] = (uint8_t)rnd(r); break;
        case 2: n = at; break; /* truncate */
        case 3: { /* duplicate a span after itself */
            size_t len = 1 + rnd(r) % 16;
            if (at + len > n)
                len = n - at;
            if (n + len <= 2 * s->n + 16) {
                memmove(buf + at + len, buf + at, n - at);
                n += len;
            }
            break;
        }
        default: buf[at] = (uint8_t)(rnd(r) % 2 ? 0xff : 0x00); break;
        }
    }
    return n;
}

/* The seeds as files seed-0, seed-1, ... in dir: a corpus for libFuzzer. */
static int write_seeds(const char *dir)
{
    for (int i = 0; i < nseeds; i++) {
        char path[4096];
        snprintf(path, sizeof path, "%s/seed-%d", dir, i);
        FILE *f = fopen(path, "wb");
        if (!f || fwrite(seeds[i].p, 1, seeds[i].n, f) != seeds[i].n || fclose(f) != 0) {
            perror(path);
            return 1;
        }
    }
    printf("%d seeds written to %s\n", nseeds, dir);
    return 0;
}

int main(int argc, char **argv)
{
    fuzz_seeds(add);
    if (argc > 2 && !strcmp(argv[1], "--write-seeds"))
        return write_seeds(argv[2]);
    long iters = argc > 1 ? atol(argv[1]) : 2000;
    for (int i = 0; i < nseeds; i++)
        LLVMFuzzerTestOneInput(seeds[i].p, seeds[i].n);
    uint64_t r = 12345;
    size_t cap = 0;
    for (int i = 0; i < nseeds; i++)
        if (2 * seeds[i].n + 16 > cap)
            cap = 2 * seeds[i].n + 16;
    uint8_t *buf = malloc(cap);
    for (long k = 0; k < iters && nseeds; k++) {
        const seed *s = &seeds[rnd(&r) % (uint64_t)nseeds];
        LLVMFuzzerTestOneInput(buf, mutate(s, buf, &r));
    }
    free(buf);
    for (int i = 0; i < nseeds; i++)
        free(seeds[i].p);
    sl_release_memory();
    printf("%ld mutated inputs over %d seeds: no crash\n", iters, nseeds);
    return 0;
}
