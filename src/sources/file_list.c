/*
 * file_list(list_path, root): the listing of a text file of
 * "relative/path label" lines. The label is the last whitespace-separated
 * field, so paths may contain spaces; blank lines are ignored. Paths are
 * relative to root (default: the list file's directory) unless absolute.
 *
 * The result is read_files over the listing node, with the flags given.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "listing.h"

#define LABEL_MAX 32

static bool space(char c)
{
    return c == ' ' || c == '\t' || c == '\r' || c == '\v' || c == '\f';
}

/* The whole file, NUL-terminated, in *buf (sl__free(*buf, *len + 1)). */
static int slurp(const char *path, char **buf, size_t *len)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    struct stat st;
    if (fd < 0 || fstat(fd, &st) < 0) {
        int e = errno;
        if (fd >= 0)
            close(fd);
        return sl__set_error(sl__errno_code(e),
                             "file_list: %s: %s", path, strerror(e));
    }
    if (!S_ISREG(st.st_mode)) {
        close(fd);
        return sl__set_error(SL_EIO, "file_list: %s: not a regular file", path);
    }
    size_t n = (size_t)st.st_size, got = 0;
    char *b = sl__alloc(n + 1);
    while (b && got < n) {
        ssize_t r = read(fd, b + got, n - got);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            break;
        got += (size_t)r;
    }
    int e = errno;
    close(fd);
    if (!b)
        return SL_ENOMEM;
    if (got < n) {
        sl__free(b, n + 1);
        return sl__set_error(SL_EIO, "file_list: %s: %s", path,
                             got ? strerror(e) : "file changed size while reading");
    }
    b[n] = '\0';
    *buf = b;
    *len = n;
    return 0;
}

static int bad_line(const char *list, size_t lineno, const char *what, const char *s, size_t n)
{
    return sl__set_error(SL_ECORRUPT, "file_list: %s:%zu: %s \"%.*s\"", list, lineno, what,
                         (int)(n > 80 ? 80 : n), s);
}

/* One line, without its '\n': appends its entry, if it has one. */
static int parse_line(sl__listing_ds *l, const char *list, size_t lineno, const char *s, size_t n)
{
    while (n && space(s[n - 1]))
        n--;
    while (n && space(*s))
        s++, n--;
    if (!n)
        return 0;
    if (memchr(s, '\0', n))
        return bad_line(list, lineno, "NUL byte in", s, strlen(s));
    size_t lab = n;
    while (lab && !space(s[lab - 1]))
        lab--;
    size_t plen = lab;
    while (plen && space(s[plen - 1]))
        plen--;
    if (!plen)
        return bad_line(list, lineno, "expected \"<path> <label>\", got", s, n);
    char num[LABEL_MAX];
    size_t nlen = n - lab;
    if (nlen >= LABEL_MAX)
        return bad_line(list, lineno, "bad label in", s, n);
    memcpy(num, s + lab, nlen);
    num[nlen] = '\0';
    char *end;
    errno = 0;
    long long v = strtoll(num, &end, 10);
    if (errno || *end)
        return bad_line(list, lineno, "bad label in", s, n);
    if (sl__listing_add(l, s, plen, NULL, 0, v))
        return sl__set_error(SL_ENOMEM, "file_list: %s: out of memory", list);
    return 0;
}

static int parse(sl__listing_ds *l, const char *list, const char *text, size_t len)
{
    size_t lineno = 0;
    for (size_t at = 0; at < len;) {
        const char *nl = memchr(text + at, '\n', len - at);
        size_t end = nl ? (size_t)(nl - text) : len;
        int rc = parse_line(l, list, ++lineno, text + at, end - at);
        if (rc)
            return rc;
        at = end + 1;
    }
    if (!sl__listing_count(l))
        return sl__set_error(SL_ENOENT, "file_list: %s: no entries", list);
    return 0;
}

/* The list's directory: "." for a bare name, "/" for a file in /. */
static char *list_dir(const char *list)
{
    const char *slash = strrchr(list, '/');
    size_t n = !slash ? 0 : slash == list ? 1 : (size_t)(slash - list);
    char *d = sl__alloc(n ? n + 1 : 2);
    if (!d)
        return NULL;
    memcpy(d, n ? list : ".", n ? n : 1);
    d[n ? n : 1] = '\0';
    return d;
}

static const sl__sync_def file_list_def = SL__LISTING_DEF("file_list", sl__listing_destroy, NULL);

SL_API sl_dataset *sl_file_list(const char *list_path, const char *root, unsigned flags)
{
    if (!list_path || !*list_path) {
        sl__set_error(SL_EINVAL, "file_list: no list file");
        return NULL;
    }
    char *dir = root ? NULL : list_dir(list_path);
    if (!root && !dir)
        return NULL;
    sl__listing_ds *l = sl__listing_new(&file_list_def.node, sizeof *l, root ? root : dir);
    sl__strfree(dir);
    if (!l)
        return NULL;
    char *text = NULL;
    size_t len = 0;
    int rc = slurp(list_path, &text, &len);
    if (rc == 0) {
        rc = parse(l, list_path, text, len);
        sl__free(text, len + 1);
    }
    if (rc < 0) {
        sl_dataset_release(&l->base);
        return NULL;
    }
    return sl_read_files(&l->base, flags);
}
