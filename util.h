/* util.h - the small things every module needs: one way to report errors,
 * checked allocation and whole-file reading. */
#ifndef UTIL_H
#define UTIL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdnoreturn.h>

/* Library code never prints or exits: it fills an Error with one line of text
 * and returns -1, and the caller decides what to do with it. */
typedef struct {
    char msg[512];
} Error;

/* Formats the message into e (when e is not NULL) and returns -1, so that a
 * failing function can end with `return fail(e, "...", ...);`. */
int fail(Error *e, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* The command line's way out: prints "run: <message>" on stderr, as one
 * line, and exits with status 1 (a runtime error) or 2 (a usage error). */
noreturn void die(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
noreturn void die_usage(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* Prints "run: warning: <message>" on stderr and carries on. */
void warn(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* malloc/calloc/realloc that die with a clear message instead of returning
 * NULL; the n * size products are checked for overflow. */
void *xmalloc(size_t size);
void *xcalloc(size_t n, size_t size);
void *xrealloc(void *p, size_t n, size_t size);
char *xstrdup(const char *s);

/* xcalloc aligned to 64 bytes, a cache line, so that vector loads from the
 * start of each row never straddle two lines; its pages are only backed
 * when first touched. Freed with xfree_aligned (not free). */
void *xcalloc_aligned(size_t n, size_t size);
void xfree_aligned(void *p);

/* xmalloc for big buffers of weights: aligned to 2 MiB and backed by huge
 * pages where the system allows, so that streaming through them misses the
 * TLB less. Freed with free(). */
void *xmalloc_huge(size_t size);

/* a * b into *out, returning 0, or -1 when the product overflows size_t. */
int mul_size(size_t a, size_t b, size_t *out);

/* Maps a whole regular file read-only: *data is NULL for an empty file.
 * Undo with unmap_file. */
int map_file(const char *path, const void **data, size_t *size, Error *e);
void unmap_file(const void *data, size_t size);

/* Gives back the pages wholly inside [data, data + size) of a mapped file,
 * once read and copied: memory use stays one copy of the weights. The
 * mapping stays valid (the pages are read again if touched). */
void release_mapped(const void *data, size_t size);

/* Reads a whole regular file (at most 1 GiB) into a fresh NUL-terminated buffer. */
int read_file(const char *path, char **data, size_t *len, Error *e);

/* Whether string s ends with suffix. */
bool ends_with(const char *s, const char *suffix);

/* Joins a folder and a file name with '/' into a fresh string. */
char *path_join(const char *dir, const char *name);

/* The path of a checkpoint's file `name` (e.g. "config.json"): MODEL is a
 * checkpoint folder, or a file in it such as model.safetensors. */
char *model_path(const char *model, const char *name);

/* Bytes of memory this process may use: the machine's physical memory, or
 * less when a cgroup (a container) sets a limit. */
size_t memory_limit(void);

/* splitmix64's output function (Steele, Lea and Flood, 2014): scrambles
 * the bits of x so that nearby inputs give unrelated outputs. The random
 * numbers of the sampler and of the test checkpoints, and the tokenizer's
 * hashes, are made with it. */
uint64_t mix64(uint64_t x);

/* Mixes the n bytes at p into the hash h, 8 at a time with mix64, then
 * their number: for keys and names of files, not for speed. */
uint64_t mix64_bytes(uint64_t h, const void *p, size_t n);

/* The fields of the prepared files (prepared.c, tokenizer_cache.c): an
 * integer in this machine's byte order at any byte offset. */
uint32_t get_u32(const unsigned char *p);
uint64_t get_u64(const unsigned char *p);
void put_u32(unsigned char *p, uint32_t v);
void put_u64(unsigned char *p, uint64_t v);

/* Seconds on a monotonic clock, for timing. */
double now_seconds(void);

/* The value of hexadecimal digit c (0-9, a-f, A-F), or -1. */
int hex_digit(int c);

#endif
