/* util.c - error reporting, checked allocation and file reading. */
#include "util.h"

/* No JSON file run reads is anywhere near this (tokenizer.json is ~11 MB). */
#define MAX_TEXT_FILE_BYTES (1 << 30)

#include <errno.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include <time.h>

int fail(Error *e, const char *fmt, ...) {
    if (e) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(e->msg, sizeof e->msg, fmt, ap);
        va_end(ap);
    }
    return -1;
}

/* Prints "run: <prefix><message>" as exactly one line: control characters
 * in the message (a newline in a tensor name or in an argument, say) are
 * shown as '?'. */
static void vreport(const char *prefix, const char *fmt, va_list ap) {
    char msg[1024];
    vsnprintf(msg, sizeof msg, fmt, ap);
    for (char *p = msg; *p; p++)
        if ((unsigned char)*p < 0x20 || *p == 0x7F) *p = '?';
    fflush(stdout);
    fprintf(stderr, "run: %s%s\n", prefix, msg);
}

noreturn void die(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vreport("", fmt, ap);
    va_end(ap);
    exit(1);
}

noreturn void die_usage(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vreport("", fmt, ap);
    va_end(ap);
    exit(2);
}

void warn(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vreport("warning: ", fmt, ap);
    va_end(ap);
}

int mul_size(size_t a, size_t b, size_t *out) {
    if (b != 0 && a > SIZE_MAX / b) return -1;
    *out = a * b;
    return 0;
}

void *xmalloc(size_t size) {
    void *p = malloc(size ? size : 1);
    if (!p) die("out of memory (asked for %zu bytes)", size);
    return p;
}

void *xcalloc(size_t n, size_t size) {
    size_t total;
    if (mul_size(n, size, &total) != 0) die("out of memory (%zu x %zu bytes overflows)", n, size);
    void *p = calloc(total ? total : 1, 1);
    if (!p) die("out of memory (asked for %zu bytes)", total);
    return p;
}

/* Whether AddressSanitizer watches this build's heap (gcc and clang say it
 * differently). */
#if defined(__SANITIZE_ADDRESS__)
#define HEAP_WATCHED 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define HEAP_WATCHED 1
#endif
#endif
#ifndef HEAP_WATCHED
#define HEAP_WATCHED 0
#endif

enum { PAGE_BYTES = 4096 };

/* The zeroed buffers come straight from mmap: the kernel backs a page with
 * zeros when it is first touched, so scratch sized for a batch of tokens
 * costs a one-token pass only the pages it uses (a memset would touch them
 * all, and the first touch of a page is dear on some virtual machines).
 * The mapping's length is kept in the page before the buffer. Under
 * AddressSanitizer they come from the heap, where it sees any overflow. */
void *xcalloc_aligned(size_t n, size_t size) {
    size_t total;
    if (mul_size(n, size, &total) != 0 || total > SIZE_MAX - 2 * PAGE_BYTES)
        die("out of memory (%zu x %zu bytes overflows)", n, size);
    if (HEAP_WATCHED) {
        void *p;
        if (posix_memalign(&p, 64, total ? total : 1) != 0) die("out of memory (asked for %zu bytes)", total);
        return memset(p, 0, total);
    }
    size_t length = PAGE_BYTES + (total + PAGE_BYTES - 1) / PAGE_BYTES * PAGE_BYTES;
    unsigned char *base = mmap(NULL, length, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (base == MAP_FAILED) die("out of memory (asked for %zu bytes)", total);
    memcpy(base, &length, sizeof length);
    return base + PAGE_BYTES;
}

void xfree_aligned(void *p) {
    if (!p || HEAP_WATCHED) {
        free(p);
        return;
    }
    unsigned char *base = (unsigned char *)p - PAGE_BYTES;
    size_t length;
    memcpy(&length, base, sizeof length);
    munmap(base, length);
}

void *xrealloc(void *p, size_t n, size_t size) {
    size_t total;
    if (mul_size(n, size, &total) != 0) die("out of memory (%zu x %zu bytes overflows)", n, size);
    void *q = realloc(p, total ? total : 1);
    if (!q) die("out of memory (asked for %zu bytes)", total);
    return q;
}

void *xmalloc_huge(size_t size) {
    size_t huge = (size_t)2 << 20;
    void *p;
    if (posix_memalign(&p, huge, size ? size : 1) != 0) die("out of memory (asked for %zu bytes)", size);
#ifdef MADV_HUGEPAGE
    madvise(p, (size + huge - 1) / huge * huge, MADV_HUGEPAGE);  /* a hint: failure is harmless */
#endif
    return p;
}

char *xstrdup(const char *s) {
    size_t n = strlen(s) + 1;
    return memcpy(xmalloc(n), s, n);
}

/* Opens a regular file for reading; O_NONBLOCK, so that a FIFO given as a
 * file cannot hang the program. */
static int open_regular(const char *path, int *fd, size_t *size, Error *e) {
    *fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (*fd < 0) return fail(e, "%s: %s", path, strerror(errno));
    struct stat st;
    if (fstat(*fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        close(*fd);
        return fail(e, "%s: not a regular file", path);
    }
    *size = (size_t)st.st_size;
    return 0;
}

int map_file(const char *path, const void **data, size_t *size, Error *e) {
    int fd;
    if (open_regular(path, &fd, size, e) != 0) return -1;
    void *map = *size ? mmap(NULL, *size, PROT_READ, MAP_PRIVATE, fd, 0) : NULL;
    int err = errno;
    close(fd);
    if (map == MAP_FAILED) return fail(e, "%s: cannot map: %s", path, strerror(err));
    *data = map;
    return 0;
}

void unmap_file(const void *data, size_t size) {
    if (data) munmap((void *)data, size);
}

void release_mapped(const void *data, size_t size) {
    uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE), from = ((uintptr_t)data + page - 1) / page * page,
              to = ((uintptr_t)data + size) / page * page;
    if (to > from) madvise((void *)from, to - from, MADV_DONTNEED);  /* a hint: failure is harmless */
}

int read_file(const char *path, char **data, size_t *len, Error *e) {
    int fd;
    size_t size, n = 0;
    if (open_regular(path, &fd, &size, e) != 0) return -1;
    if (size > MAX_TEXT_FILE_BYTES) {
        close(fd);
        return fail(e, "%s: file is too large (%zu bytes)", path, size);
    }
    char *buf = xmalloc(size + 1);
    while (n < size) {
        ssize_t got = read(fd, buf + n, size - n);
        if (got < 0 && errno == EINTR) continue;
        if (got <= 0) {
            int err = got < 0 ? errno : 0;
            close(fd);
            free(buf);
            return fail(e, "%s: read error: %s", path, err ? strerror(err) : "file shrank while reading");
        }
        n += (size_t)got;
    }
    close(fd);
    buf[n] = '\0';
    *data = buf;
    *len = n;
    return 0;
}

bool ends_with(const char *s, const char *suffix) {
    size_t n = strlen(s), k = strlen(suffix);
    return n >= k && strcmp(s + n - k, suffix) == 0;
}

char *path_join(const char *dir, const char *name) {
    size_t a = strlen(dir), b = strlen(name);
    char *p = xmalloc(a + b + 2);
    memcpy(p, dir, a);
    size_t at = a;
    if (a > 0 && dir[a - 1] != '/') p[at++] = '/';
    memcpy(p + at, name, b + 1);
    return p;
}

char *model_path(const char *model, const char *name) {
    struct stat st;
    if (stat(model, &st) == 0 && S_ISDIR(st.st_mode)) return path_join(model, name);
    const char *slash = strrchr(model, '/');
    if (!slash) return xstrdup(name);
    char *dir = xmalloc((size_t)(slash - model) + 2);
    memcpy(dir, model, (size_t)(slash - model) + 1);
    dir[slash - model + 1] = '\0';
    char *p = path_join(dir, name);
    free(dir);
    return p;
}

/* The number in a one-line file such as a cgroup's memory.max, or
 * SIZE_MAX when it is absent, "max" or unreadable. */
static size_t read_limit_file(const char *path) {
    FILE *f = fopen(path, "r");
    if (!f) return SIZE_MAX;
    unsigned long long v;
    int ok = fscanf(f, "%llu", &v) == 1;
    fclose(f);
    return ok && v < SIZE_MAX ? (size_t)v : SIZE_MAX;
}

size_t memory_limit(void) {
    long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
    size_t limit = pages > 0 && page > 0 ? (size_t)pages * (size_t)page : SIZE_MAX;
    const char *cgroup_files[] = {"/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes"};
    for (size_t i = 0; i < sizeof cgroup_files / sizeof cgroup_files[0]; i++) {
        size_t v = read_limit_file(cgroup_files[i]);
        if (v < limit) limit = v;
    }
    return limit;
}

uint32_t get_u32(const unsigned char *p) {
    uint32_t v;
    memcpy(&v, p, sizeof v);
    return v;
}

uint64_t get_u64(const unsigned char *p) {
    uint64_t v;
    memcpy(&v, p, sizeof v);
    return v;
}

void put_u32(unsigned char *p, uint32_t v) { memcpy(p, &v, sizeof v); }
void put_u64(unsigned char *p, uint64_t v) { memcpy(p, &v, sizeof v); }

uint64_t mix64(uint64_t x) {
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9u;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebu;
    return x ^ (x >> 31);
}

uint64_t mix64_bytes(uint64_t h, const void *p, size_t n) {
    const unsigned char *bytes = p;
    for (size_t i = 0; i < n; i += 8) {
        uint64_t word = 0;
        memcpy(&word, bytes + i, n - i < 8 ? n - i : 8);
        h = mix64(h ^ word);
    }
    return mix64(h ^ n);
}

int hex_digit(int c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

double now_seconds(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}
