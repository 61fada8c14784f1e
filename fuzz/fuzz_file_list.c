/* The file_list parser: any text either builds a listing or fails with a
 * message, never crashes or leaks. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "fuzz.h"
#include "sluice.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char path[] = "/tmp/sluice-fuzz-list-XXXXXX";
    int fd = mkstemp(path);
    if (fd < 0)
        return 0;
    if (write(fd, data, size) != (ssize_t)size) {
        close(fd);
        unlink(path);
        return 0;
    }
    close(fd);
    sl_dataset *ds = sl_file_list(path, "/nonexistent-root", 0);
    if (ds)
        (void)sl_dataset_cardinality(ds);
    sl_dataset_release(ds);
    unlink(path);
    return 0;
}

void fuzz_seeds(void (*add)(const uint8_t *data, size_t size))
{
    const char *seeds[] = {
        "class000/a.jpg 0\nclass001/b c.jpg 1\n",
        "\n\n  x.jpg   7  \n/abs/path.jpg -3\n",
        "only-a-path\n",
        "a.jpg 99999999999999999999\n",
    };
    for (size_t i = 0; i < sizeof seeds / sizeof *seeds; i++)
        add((const uint8_t *)seeds[i], strlen(seeds[i]));
}
