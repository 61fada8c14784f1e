/* Path handling of the file sources: image_folder's walk (nested and odd
 * names, extensions, symlink loops), file_list's joining of root and
 * relative or absolute paths, and read_files' checks of the paths it is
 * given (empty, NUL bytes, too long, missing, directories). Any input is
 * read or refused with a message, never a crash, a hang or a leak.
 *
 * Input: byte 0 picks the mode (bits 0-1; 3 is 2) and flags, the rest is
 * lines. Mode 0: each
 * line is a file to create under a private root (a line "@name" makes a
 * symlink to the root instead, a loop for the walk), then image_folder
 * lists and reads the tree. Mode 1: the lines are a file list of that
 * tree. Mode 2: the lines, under the root but otherwise as they are (NULs
 * included), are paths for read_files. Created names stay inside the
 * root: no "..", no leading "/". Bit 2 of byte 0: SL_WITH_PATHS; bit 3:
 * the first line as the extensions (mode 0), a root with trailing slashes
 * (mode 1). */
#define _GNU_SOURCE
#include <ftw.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "fuzz.h"
#include "sluice.h"

#define MAX_LINES 24
#define NAME_MAX_ 200

static char root[64];

static int rm_one(const char *p, const struct stat *st, int type, struct FTW *f)
{
    (void)st, (void)type, (void)f;
    remove(p);
    return 0;
}

static void clear_root(void)
{
    nftw(root, rm_one, 16, FTW_DEPTH | FTW_PHYS);
}

/* The line as a relative name inside the root: NULs and ".." dropped,
 * leading slashes trimmed. Empty if nothing is left. */
static void clean(const char *line, size_t n, char *out)
{
    size_t o = 0;
    for (size_t i = 0; i < n && o < NAME_MAX_; i++) {
        if (line[i] == '\0')
            continue;
        if (line[i] == '.' && i + 1 < n && line[i + 1] == '.') {
            i++;
            continue;
        }
        if (line[i] == '/' && (o == 0 || out[o - 1] == '/'))
            continue;
        out[o++] = line[i];
    }
    out[o] = '\0';
}

/* Creates root/name with its parent folders; a trailing '/' makes a folder. */
static void create(const char *name, int i)
{
    char p[sizeof root + NAME_MAX_ + 8];
    snprintf(p, sizeof p, "%s/%s", root, name);
    for (char *s = strchr(p + strlen(root) + 1, '/'); s; s = strchr(s + 1, '/')) {
        *s = '\0';
        mkdir(p, 0755);
        *s = '/';
    }
    if (p[strlen(p) - 1] == '/')
        return;
    FILE *f = fopen(p, "wb");
    if (f) {
        fprintf(f, "%*d", 1 + i % 7, i); /* some files, some sizes; never empty */
        fclose(f);
    }
}

typedef struct lines {
    const char *s[MAX_LINES];
    size_t n[MAX_LINES];
    int count;
} lines;

static void split(const uint8_t *data, size_t size, lines *l)
{
    l->count = 0;
    size_t at = 0;
    while (at < size && l->count < MAX_LINES) {
        const uint8_t *nl = memchr(data + at, '\n', size - at);
        size_t end = nl ? (size_t)(nl - data) : size;
        l->s[l->count] = (const char *)data + at;
        l->n[l->count++] = end - at;
        at = end + 1;
    }
}

static void drain(sl_dataset *ds)
{
    sl_options *o = sl_options_create();
    sl_options_set(o, SL_OPT_THREADS, 1);
    sl_options_set(o, SL_OPT_ERROR_POLICY, SL_ERRORS_SKIP);
    sl_options_set(o, SL_OPT_ERROR_LOG_LIMIT, 0);
    sl_iterator *it = ds ? sl_iterator_create(ds, o) : NULL;
    sl_element *el;
    while (it && sl_next(it, &el) == 0)
        sl_element_release(el);
    sl_iterator_free(it);
    sl_options_free(o);
    sl_dataset_release(ds);
}

static void make_tree(const lines *l)
{
    mkdir(root, 0755);
    for (int i = 0; i < l->count; i++) {
        char name[NAME_MAX_ + 1];
        bool link = l->n[i] && l->s[i][0] == '@';
        clean(l->s[i] + link, l->n[i] - link, name);
        if (!name[0])
            continue;
        if (link) {
            char p[sizeof root + NAME_MAX_ + 8];
            snprintf(p, sizeof p, "%s/%s", root, name);
            create(name, i);
            remove(p);
            if (symlink(root, p) != 0)
                continue;
        } else {
            create(name, i);
        }
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (!root[0]) {
        snprintf(root, sizeof root, "/tmp/sluice-fuzz-paths-%d", (int)getpid());
        sl_set_log_level(SL_LOG_ERROR);
    }
    if (size < 1)
        return 0;
    unsigned mode = data[0] & 3, flags = (data[0] >> 2) & SL_WITH_PATHS;
    if (mode == 3)
        mode = 2;
    lines l;
    split(data + 1, size - 1, &l);
    clear_root();
    if (mode == 0) {
        make_tree(&l);
        /* the extensions: "jpg,jpeg", or the first line's text */
        char ext[64] = "";
        if (data[0] & 8 && l.count)
            snprintf(ext, sizeof ext, "%.*s", (int)(l.n[0] < 63 ? l.n[0] : 63), l.s[0]);
        drain(sl_image_folder(root, data[0] & 8 ? ext : NULL, flags));
    } else if (mode == 1) {
        make_tree(&l);
        char list[sizeof root + 16];
        snprintf(list, sizeof list, "%s.list", root);
        FILE *f = fopen(list, "wb");
        if (!f)
            return 0;
        for (int i = 0; i < l.count; i++) {
            /* absolute paths stay under the root */
            if (l.n[i] && l.s[i][0] == '/')
                fputs(root, f);
            fwrite(l.s[i], 1, l.n[i], f);
            fprintf(f, " %d\n", i);
        }
        fclose(f);
        char r[sizeof root + 4];
        snprintf(r, sizeof r, "%s%s", root, data[0] & 8 ? "///" : "");
        drain(sl_file_list(list, r, flags));
        unlink(list);
    } else {
        /* as given, NULs and all (a string tensor has lengths), but under
         * the root */
        char *paths[MAX_LINES];
        size_t lens[MAX_LINES];
        for (int i = 0; i < l.count; i++) {
            paths[i] = malloc(sizeof root + l.n[i] + 2);
            int k = snprintf(paths[i], sizeof root + 1, "%s/", root);
            memcpy(paths[i] + k, l.s[i], l.n[i]);
            lens[i] = (size_t)k + l.n[i];
        }
        sl_element *el = sl_element_create(1);
        int64_t n = l.count;
        if (el && sl_element_add_strings(el, 1, &n, (const char *const *)paths, lens) == 0)
            drain(sl_read_files(sl_from_tensor_slices(el), flags));
        else
            sl_element_release(el);
        for (int i = 0; i < l.count; i++)
            free(paths[i]);
    }
    clear_root();
    return 0;
}

#define SEED(text) {text, sizeof text - 1}

void fuzz_seeds(void (*add)(const uint8_t *data, size_t size))
{
    static const struct {
        const char *s;
        size_t n;
    } seeds[] = {
        SEED("\x00" "cat/a.jpg\ncat/b.JPEG\ndog/sub/c.jpg\ndog/.hidden.jpg\ndog/x.png\n"),
        SEED("\x00" "a/x.jpg/inner.jpg\nb/y.jpg\n@b/loop\n"),
        SEED("\x08" "jpg, .txt ,,\nc/one.txt\nc/two.jpg\n"),
        SEED("\x01" "cat/a.jpg\n/cat/b.jpg\ndog/with space.jpg\nmissing.jpg\ncat\n"),
        SEED("\x09" "x/y.jpg\n\n\ntrailing/slash/\n"),
        SEED("\x02" "a.jpg\n\nb\x00z.jpg\n../escape\nvery/deep/path/not/there.jpg\n"),
        SEED("\x06" "cat/a.jpg\ncat\n"),
        /* found by libFuzzer: the walk's folder arena grew while a parent's
         * path was being copied (a use after free) */
        SEED("\x00" "a/x.jpg/inner.jt/a.jppg\nb/y.jp\xff\xff\xff\xff\xff\xff\xff\xff\xff"
             "\xff\xff\xffg\n@b/loop\n"),
    };
    for (size_t i = 0; i < sizeof seeds / sizeof *seeds; i++)
        add((const uint8_t *)seeds[i].s, seeds[i].n);
}
