/*
 * image_folder(root, extensions): torchvision's ImageFolder listing.
 *
 * Classes are the sorted names of root's subdirectories (label = index).
 * Each class is walked as sorted(os.walk(class, followlinks=True)) walks
 * it: directories in the sorted order of their paths (not depth-first:
 * "a b" sorts between "a" and "a/x"), files sorted within each directory,
 * kept when the name ends in ".<ext>" for one of the extensions, compared
 * without case. Hidden entries (a leading '.') are skipped. Entry types
 * come from getdents64, so only untyped entries and symlinks cost a stat.
 *
 * The result is read_files over the listing node, with the flags given.
 *
 * A root that is a bucket's folder (s3://bucket/train, gs://...) is listed
 * with ListObjectsV2 instead, and the keys under it ordered as the walk
 * would order the same tree: class, then folder path, then name.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>
#include "../core/log.h"
#include "../remote/remote.h"
#include "listing.h"
#include "../ops/read.h"

#define DENTS_BUF (256u << 10)
#define MAX_EXTS 32
#define EXT_MAX 32
#define NO_PARENT ((size_t)-1)

struct dirent64_raw {
    uint64_t d_ino;
    int64_t d_off;
    unsigned short d_reclen;
    unsigned char d_type;
    char d_name[];
};

/* A directory met while walking one class. */
typedef struct walk_dir {
    size_t parent;        /* the directory it was found in */
    size_t files, nfiles; /* its matching files in scan.names */
    dev_t dev;
    ino_t ino;
} walk_dir;

typedef struct scan {
    const char *root;
    const char *ext_spec;
    int rootfd;
    char exts[MAX_EXTS][EXT_MAX];
    size_t ext_len[MAX_EXTS];
    int nexts;
    char *dents;
    sl__strs classes;
    /* the class being walked */
    sl__strs dirs; /* relative to root: "cls", "cls/sub", ... */
    walk_dir *dir;
    size_t dir_cap;
    size_t cur; /* the directory being read */
    sl__strs names;
} scan;

static char lower(char c)
{
    return c >= 'A' && c <= 'Z' ? (char)(c + 32) : c;
}

static int parse_exts(scan *s)
{
    const char *p = s->ext_spec;
    while (*p) {
        p += strspn(p, ", .");
        size_t n = strcspn(p, ", ");
        if (!n)
            continue;
        if (s->nexts == MAX_EXTS || n >= EXT_MAX)
            return sl__set_error(SL_EINVAL, "image_folder: extensions \"%s\": at most %d, each "
                                 "shorter than %d characters", s->ext_spec, MAX_EXTS, EXT_MAX);
        for (size_t i = 0; i < n; i++)
            s->exts[s->nexts][i] = lower(p[i]);
        s->ext_len[s->nexts++] = n;
        p += n;
    }
    if (!s->nexts)
        return sl__set_error(SL_EINVAL, "image_folder: no extension in \"%s\"", s->ext_spec);
    return 0;
}

static bool ext_matches(const scan *s, const char *name, size_t len)
{
    for (int e = 0; e < s->nexts; e++) {
        size_t n = s->ext_len[e], i = 0;
        if (len <= n + 1 || name[len - n - 1] != '.')
            continue;
        const char *tail = name + len - n;
        while (i < n && lower(tail[i]) == s->exts[e][i])
            i++;
        if (i == n)
            return true;
    }
    return false;
}

/* Following symlinks, as os.walk(followlinks=True) does; a dangling link
 * is a file (whose read will fail, naming it). */
static bool is_dir(int dirfd, const char *name, unsigned char type)
{
    if (type != DT_LNK && type != DT_UNKNOWN)
        return type == DT_DIR;
    struct stat st;
    return fstatat(dirfd, name, &st, 0) == 0 && S_ISDIR(st.st_mode);
}

typedef int (*entry_fn)(scan *s, const char *name, size_t len, bool dir);

/* Calls fn for every visible entry of dirfd: 0, fn's (negative) error, or
 * a (positive) errno. */
static int each_entry(scan *s, int dirfd, entry_fn fn)
{
    for (;;) {
        long n = syscall(SYS_getdents64, dirfd, s->dents, DENTS_BUF);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return n < 0 ? errno : 0;
        for (long off = 0; off < n;) {
            const struct dirent64_raw *d = (const struct dirent64_raw *)(s->dents + off);
            off += d->d_reclen;
            if (d->d_name[0] == '.')
                continue; /* ".", ".." and hidden entries */
            size_t len = strlen(d->d_name);
            int rc = fn(s, d->d_name, len, is_dir(dirfd, d->d_name, d->d_type));
            if (rc)
                return rc;
        }
    }
}

static int add_class(scan *s, const char *name, size_t len, bool dir)
{
    return dir ? sl__strs_push(&s->classes, name, len, NULL, 0) : 0;
}

static int add_dir(scan *s, size_t parent, const char *name, size_t len)
{
    size_t i = s->dirs.n;
    if (sl__array_grow((void **)&s->dir, &s->dir_cap, i + 1, sizeof *s->dir))
        return SL_ENOMEM;
    int rc = parent == NO_PARENT
                 ? sl__strs_push(&s->dirs, name, len, NULL, 0)
                 : sl__strs_push(&s->dirs, sl__strs_get(&s->dirs, parent),
                                 sl__strs_len(&s->dirs, parent), name, len);
    if (rc)
        return rc;
    s->dir[i] = (walk_dir){.parent = parent};
    return 0;
}

static int add_entry(scan *s, const char *name, size_t len, bool dir)
{
    if (dir)
        return add_dir(s, s->cur, name, len);
    return ext_matches(s, name, len) ? sl__strs_push(&s->names, name, len, NULL, 0) : 0;
}

/* A symlink back to a directory being walked would loop forever. */
static bool in_ancestors(const scan *s, size_t i)
{
    for (size_t a = s->dir[i].parent; a != NO_PARENT; a = s->dir[a].parent)
        if (s->dir[a].dev == s->dir[i].dev && s->dir[a].ino == s->dir[i].ino)
            return true;
    return false;
}

static void skip_dir(const scan *s, size_t i, int err)
{
    sl__log(SL_LOG_WARN, "image_folder: %s/%s: %s; skipped", s->root,
            sl__strs_get(&s->dirs, i), strerror(err));
}

/* Reads directory i of the class: its files into names, its
 * subdirectories onto the list. */
static int read_dir(scan *s, size_t i)
{
    s->dir[i].files = s->names.n;
    int fd = openat(s->rootfd, sl__strs_get(&s->dirs, i), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0) {
        skip_dir(s, i, errno);
        return 0;
    }
    struct stat st;
    int rc = fstat(fd, &st) < 0 ? errno : 0;
    if (rc == 0) {
        s->dir[i].dev = st.st_dev;
        s->dir[i].ino = st.st_ino;
        s->cur = i;
        if (!in_ancestors(s, i))
            rc = each_entry(s, fd, add_entry);
    }
    close(fd);
    if (rc < 0)
        return rc;
    if (rc > 0) /* like os.walk, a directory that cannot be read is left out */
        skip_dir(s, i, rc);
    s->dir[i].nfiles = s->names.n - s->dir[i].files;
    return 0;
}

/* Walks class c and appends its files to the listing. */
static int walk_class(scan *s, sl__listing_ds *l, size_t c)
{
    s->dirs.n = s->dirs.len = 0;
    s->names.n = s->names.len = 0;
    int rc = add_dir(s, NO_PARENT, sl__strs_get(&s->classes, c), sl__strs_len(&s->classes, c));
    for (size_t i = 0; rc == 0 && i < s->dirs.n; i++)
        rc = read_dir(s, i);
    size_t *dirs = rc ? NULL : sl__strs_sorted(&s->dirs, 0, s->dirs.n);
    if (!dirs)
        return SL_ENOMEM;
    for (size_t k = 0; rc == 0 && k < s->dirs.n; k++) {
        const walk_dir *d = &s->dir[dirs[k]];
        size_t *files = sl__strs_sorted(&s->names, d->files, d->nfiles);
        if (!files) {
            rc = SL_ENOMEM;
            break;
        }
        const char *dpath = sl__strs_get(&s->dirs, dirs[k]);
        size_t dlen = sl__strs_len(&s->dirs, dirs[k]);
        for (size_t f = 0; rc == 0 && f < d->nfiles; f++)
            rc = sl__listing_add(l, dpath, dlen, sl__strs_get(&s->names, files[f]),
                                 sl__strs_len(&s->names, files[f]), (int64_t)c);
        sl__sorted_free(files, d->nfiles);
    }
    sl__sorted_free(dirs, s->dirs.n);
    return rc;
}

static int open_root(scan *s)
{
    s->rootfd = open(s->root, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (s->rootfd >= 0)
        return 0;
    int e = errno;
    return sl__set_error(sl__errno_code(e), "image_folder: %s: %s",
                         s->root, strerror(e));
}

/* Sorted class names of root. */
static int find_classes(scan *s)
{
    int rc = each_entry(s, s->rootfd, add_class);
    if (rc < 0)
        return rc;
    if (rc > 0)
        return sl__set_error(SL_EIO, "image_folder: %s: %s", s->root, strerror(rc));
    if (!s->classes.n)
        return sl__set_error(SL_ENOENT, "image_folder: %s: no class folders (subdirectories)",
                             s->root);
    size_t *order = sl__strs_sorted(&s->classes, 0, s->classes.n);
    if (!order)
        return SL_ENOMEM;
    sl__strs sorted = {0};
    for (size_t i = 0; rc == 0 && i < s->classes.n; i++)
        rc = sl__strs_push(&sorted, sl__strs_get(&s->classes, order[i]),
                           sl__strs_len(&s->classes, order[i]), NULL, 0);
    sl__sorted_free(order, s->classes.n);
    sl__strs_free(&s->classes);
    s->classes = sorted;
    return rc;
}

/* A remote key (relative to the root) split as the walk sees it. */
typedef struct key_parts {
    const char *p;
    size_t cls, dir, len; /* lengths: class name, folder path, whole */
} key_parts;

static int cmp_bytes(const char *a, size_t na, const char *b, size_t nb)
{
    int c = memcmp(a, b, na < nb ? na : nb);
    return c ? c : (na > nb) - (na < nb);
}

static int key_cmp(const void *x, const void *y)
{
    const key_parts *a = x, *b = y;
    int c = cmp_bytes(a->p, a->cls, b->p, b->cls);
    if (!c)
        c = cmp_bytes(a->p, a->dir, b->p, b->dir);
    return c ? c : cmp_bytes(a->p + a->dir + 1, a->len - a->dir - 1, b->p + b->dir + 1,
                             b->len - b->dir - 1);
}

/* Whether a key (relative to the root) is a file the walk keeps: inside a
 * class folder, no hidden part, a matching extension. */
static bool key_kept(const scan *s, const char *k, size_t n, key_parts *kp)
{
    const char *slash = memchr(k, '/', n), *last = k;
    if (!slash)
        return false; /* directly under the root: not in a class */
    for (const char *p = k; p < k + n; p++)
        if ((p == k || p[-1] == '/') && *p == '.')
            return false;
    for (const char *p = k; p < k + n; p++)
        if (*p == '/')
            last = p;
    if (last == k + n - 1)
        return false; /* a "folder" marker object */
    *kp = (key_parts){k, (size_t)(slash - k), (size_t)(last - k), n};
    return ext_matches(s, last + 1, n - (size_t)(last - k) - 1);
}

static int push_key(void *user, const char *url, size_t n)
{
    return sl__strs_push(user, url, n, NULL, 0) < 0 ? SL_ENOMEM : 0;
}

static int scan_remote(scan *s, sl__listing_ds *l)
{
    int rc = parse_exts(s);
    sl__strs keys = {0};
    if (rc == 0)
        rc = sl__remote_list(s->root, push_key, &keys);
    if (rc < 0) {
        sl__strs_free(&keys);
        sl__error_prefix("image_folder");
        return rc;
    }
    size_t skip = strlen(s->root) + (s->root[strlen(s->root) - 1] != '/');
    key_parts *kp = keys.n ? sl__alloc(keys.n * sizeof *kp) : NULL;
    size_t n = 0;
    for (size_t i = 0; kp && i < keys.n; i++) {
        const char *k = sl__strs_get(&keys, i);
        size_t len = sl__strs_len(&keys, i);
        if (len > skip && key_kept(s, k + skip, len - skip, &kp[n]))
            n++;
    }
    if (keys.n && !kp)
        rc = SL_ENOMEM;
    if (rc == 0 && n)
        qsort(kp, n, sizeof *kp, key_cmp);
    for (size_t i = 0; rc == 0 && i < n; i++) {
        bool new_class = i == 0 || cmp_bytes(kp[i].p, kp[i].cls, kp[i - 1].p, kp[i - 1].cls);
        if (new_class)
            rc = sl__strs_push(&s->classes, kp[i].p, kp[i].cls, NULL, 0);
        if (rc == 0)
            rc = sl__listing_add(l, kp[i].p, kp[i].len, NULL, 0, (int64_t)s->classes.n - 1);
    }
    if (kp)
        sl__free(kp, keys.n * sizeof *kp);
    sl__strs_free(&keys);
    if (rc == SL_ENOMEM)
        return sl__set_error(SL_ENOMEM, "image_folder: %s: out of memory", s->root);
    if (rc == 0 && !n)
        return sl__set_error(SL_ENOENT, "image_folder: %s: no objects with extensions \"%s\" in "
                             "class folders", s->root, s->ext_spec);
    return rc;
}

static int scan_all(scan *s, sl__listing_ds *l)
{
    if (sl__is_url(s->root))
        return scan_remote(s, l);
    int rc = parse_exts(s);
    if (rc == 0)
        rc = open_root(s);
    if (rc == 0) {
        s->dents = sl__alloc(DENTS_BUF);
        rc = s->dents ? find_classes(s) : SL_ENOMEM;
    }
    size_t empty = 0, first_empty = 0;
    for (size_t c = 0; rc == 0 && c < s->classes.n; c++) {
        size_t before = sl__listing_count(l);
        rc = walk_class(s, l, c);
        if (sl__listing_count(l) == before && !empty++)
            first_empty = c;
    }
    if (rc == SL_ENOMEM)
        return sl__set_error(SL_ENOMEM, "image_folder: %s: out of memory", s->root);
    if (rc < 0)
        return rc;
    if (!sl__listing_count(l))
        return sl__set_error(SL_ENOENT, "image_folder: %s: no files with extensions \"%s\" in %zu "
                             "class folders", s->root, s->ext_spec, s->classes.n);
    if (empty)
        sl__log(SL_LOG_WARN, "image_folder: %s: %zu of %zu class folders have no files (the "
                "first is \"%s\")", s->root, empty, s->classes.n,
                sl__strs_get(&s->classes, first_empty));
    return 0;
}

/* A folder that rescans: what a rescan needs to list it again and keep
 * its labels. */
typedef struct folder_ds {
    sl__listing_ds l;
    char *exts;
    size_t exts_len;
    sl__strs classes; /* by label: new classes are appended */
} folder_ds;

static void scan_free(scan *s)
{
    if (s->rootfd >= 0)
        close(s->rootfd);
    sl__free(s->dents, DENTS_BUF);
    sl__strs_free(&s->classes);
    sl__strs_free(&s->dirs);
    sl__strs_free(&s->names);
    sl__free(s->dir, s->dir_cap * sizeof *s->dir);
}

/* The folder's label for a class name, a new one after the others when
 * the class is new: >= 0, or SL_ENOMEM. */
static int64_t label_of(folder_ds *f, const char *name, size_t len)
{
    for (size_t c = 0; c < f->classes.n; c++)
        if (sl__strs_len(&f->classes, c) == len && !memcmp(sl__strs_get(&f->classes, c), name, len))
            return (int64_t)c;
    if (sl__strs_push(&f->classes, name, len, NULL, 0))
        return SL_ENOMEM;
    sl__log(SL_LOG_INFO, "image_folder: %s: new class \"%.*s\" is label %zu", f->l.root,
            (int)len, name, f->classes.n - 1);
    return (int64_t)f->classes.n - 1;
}

static int relist(sl__listing_ds *l, sl__listing_ds *fresh)
{
    folder_ds *f = (folder_ds *)l;
    scan s = {.root = l->root, .ext_spec = f->exts, .rootfd = -1};
    int rc = scan_all(&s, fresh);
    int64_t *map = rc ? NULL : sl__alloc(s.classes.n * sizeof *map);
    if (!rc && !map)
        rc = SL_ENOMEM;
    for (size_t c = 0; rc == 0 && c < s.classes.n; c++) {
        map[c] = label_of(f, sl__strs_get(&s.classes, c), sl__strs_len(&s.classes, c));
        rc = map[c] < 0 ? (int)map[c] : 0;
    }
    for (size_t i = 0; rc == 0 && i < fresh->paths.n; i++)
        fresh->labels[i] = map[fresh->labels[i]];
    if (map)
        sl__free(map, s.classes.n * sizeof *map);
    scan_free(&s);
    return rc;
}

static void folder_destroy(sl_dataset *ds)
{
    folder_ds *f = (folder_ds *)ds;
    if (f->exts)
        sl__free(f->exts, f->exts_len + 1);
    sl__strs_free(&f->classes);
    sl__listing_destroy(ds);
}

static const sl__sync_def image_folder_def =
    SL__LISTING_DEF("image_folder", sl__listing_destroy, NULL);
static const sl__sync_def rescan_folder_def =
    SL__LISTING_DEF("image_folder", folder_destroy, sl__listing_refresh);

SL_API sl_dataset *sl_image_folder(const char *root, const char *extensions, unsigned flags)
{
    if (!root || !*root) {
        sl__set_error(SL_EINVAL, "image_folder: no root directory");
        return NULL;
    }
    if (flags & ~(SL_WITH_PATHS | SL_FOLDER_RESCAN)) {
        sl__set_error(SL_EINVAL, "image_folder: unknown flags 0x%x", flags);
        return NULL;
    }
    bool rescan = flags & SL_FOLDER_RESCAN;
    flags &= ~SL_FOLDER_RESCAN;
    sl__listing_ds *l = rescan ? sl__listing_new(&rescan_folder_def.node, sizeof(folder_ds), root)
                               : sl__listing_new(&image_folder_def.node, sizeof *l, root);
    if (!l)
        return NULL;
    const char *exts = extensions ? extensions : "jpg,jpeg,png,webp";
    scan s = {.root = l->root, .ext_spec = exts, .rootfd = -1};
    int rc = scan_all(&s, l);
    if (rc == 0 && rescan) {
        /* keep what a rescan needs: the extensions, the classes by label */
        folder_ds *f = (folder_ds *)l;
        f->exts_len = strlen(exts);
        f->exts = sl__alloc(f->exts_len + 1);
        if (f->exts)
            memcpy(f->exts, exts, f->exts_len + 1);
        f->classes = s.classes;
        memset(&s.classes, 0, sizeof s.classes);
        rc = f->exts ? sl__listing_rescan_init(l, relist) : SL_ENOMEM;
        if (rc == SL_ENOMEM)
            sl__set_error(rc, "image_folder: %s: out of memory", l->root);
    }
    scan_free(&s);
    if (rc < 0) {
        sl_dataset_release(&l->base);
        return NULL;
    }
    /* a file deleted since it was listed is skipped, under any policy */
    return sl_read_files(&l->base, flags | (rescan ? SL__READ_GONE_OK : 0));
}
