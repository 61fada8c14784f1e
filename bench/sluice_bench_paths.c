/* The list of paths the run and the shards collect (to evict, to size). */
#include <stdlib.h>
#include <string.h>
#include "sluice_bench.h"

void path_list_free(path_list *pl)
{
    for (size_t i = 0; i < pl->n; i++)
        free(pl->paths[i]);
    free(pl->paths);
}

int path_list_add(path_list *pl, const char *s, size_t len)
{
    if (pl->n == pl->cap) {
        size_t cap = pl->cap ? 2 * pl->cap : 1024;
        char **p = realloc(pl->paths, cap * sizeof *p);
        if (!p)
            return -1;
        pl->paths = p;
        pl->cap = cap;
    }
    char *copy = strndup(s, len);
    if (!copy)
        return -1;
    pl->paths[pl->n++] = copy;
    return 0;
}
