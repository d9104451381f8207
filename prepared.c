/* prepared.c - writing, finding and validating prepared-weights files. */
#include "prepared.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include "place.h"

static const char MAGIC[8] = "runprep";  /* with its NUL: 8 bytes */

/* Where each field is: in the header, and in an entry of the table. */
enum { H_MAGIC = 0, H_VERSION = 8, H_FORMAT = 12, H_KEY = 16, H_ENTRIES = 24, H_TABLE = 32, H_SIZE = 40, H_ZERO = 48 };
enum { E_NAME = 0, E_FORMAT = 128, E_ROWS = 132, E_COLS = 136, E_ZERO = 140, E_OFFSET = 144, E_BYTES = 152 };

static uint64_t align_up(uint64_t x, uint64_t to) { return (x + to - 1) / to * to; }

/* ---- the checkpoint's key ---- */

static uint64_t hash_u64(uint64_t h, uint64_t v) { return mix64(h ^ mix64(v)); }

uint64_t prepared_key(const SafeTensors *st) {
    uint64_t h = 0x72756e2070726570u;  /* "run prep" */
    for (int i = 0; i < st->n_files; i++) {
        const MappedFile *f = &st->files[i];
        struct stat s;
        if (stat(f->path, &s) == 0) {
            h = hash_u64(h, (uint64_t)s.st_size);
            h = hash_u64(h, (uint64_t)s.st_mtim.tv_sec);
            h = hash_u64(h, (uint64_t)s.st_mtim.tv_nsec);
            h = hash_u64(h, (uint64_t)s.st_ino);
        }
        /* The safetensors header: its 8-byte length, then the JSON (st_open
         * checked that both lie inside the file). */
        if (f->size >= 8) {
            uint64_t len = get_u64(f->map);
            h = mix64_bytes(h, f->map, 8 + (len < f->size - 8 ? (size_t)len : f->size - 8));
        }
    }
    return h;
}

/* ---- where the file goes ---- */

/* The weights file's name without its folder and without .safetensors or
 * .safetensors.index.json: "model" for both of a checkpoint's. */
static char *stem_of(const char *weights) {
    const char *slash = strrchr(weights, '/');
    char *stem = xstrdup(slash ? slash + 1 : weights);
    const char *suffixes[] = {".safetensors.index.json", ".safetensors"};
    for (size_t i = 0; i < sizeof suffixes / sizeof suffixes[0]; i++)
        if (ends_with(stem, suffixes[i]) && strlen(stem) > strlen(suffixes[i])) {
            stem[strlen(stem) - strlen(suffixes[i])] = '\0';
            break;
        }
    return stem;
}

/* <stem>.run-<format>: the prepared file's name in either place (place.h). */
static char *file_name(const char *weights, WeightType format) {
    char *stem = stem_of(weights);
    size_t n = strlen(stem) + 32;
    char *name = xmalloc(n);
    snprintf(name, n, "%s.run-%s", stem, weight_type_name(format));
    free(stem);
    return name;
}

/* ---- reading ---- */

int prepared_check(PreparedFile *f, const unsigned char *bytes, size_t size, const char *label, uint64_t key,
                   WeightType format, Error *e) {
    memset(f, 0, sizeof *f);
    if (size < PREPARED_HEADER_BYTES || memcmp(bytes + H_MAGIC, MAGIC, sizeof MAGIC) != 0)
        return fail(e, "%s: not a prepared-weights file of run", label);
    if (get_u32(bytes + H_VERSION) != PREPARED_VERSION)
        return fail(e, "%s: made by another version of run (layout %u, this one reads %d)", label,
                    get_u32(bytes + H_VERSION), PREPARED_VERSION), 1;
    if (get_u32(bytes + H_FORMAT) != (uint32_t)format)
        return fail(e, "%s: holds another format than %s", label, weight_type_name(format)), 1;
    if (get_u64(bytes + H_KEY) != key) return fail(e, "%s: the checkpoint changed since it was made", label), 1;
    uint64_t n = get_u64(bytes + H_ENTRIES), table = get_u64(bytes + H_TABLE), file_size = get_u64(bytes + H_SIZE);
    for (int i = H_ZERO; i < PREPARED_HEADER_BYTES; i++)
        if (bytes[i]) return fail(e, "%s: damaged header (reserved byte %d is not 0)", label, i);
    if (file_size != size)
        return fail(e, "%s: is %zu bytes, its header says %llu (cut short?)", label, size, (unsigned long long)file_size);
    if (table < PREPARED_HEADER_BYTES || table > size || table % 8 != 0 || n > (size - table) / PREPARED_ENTRY_BYTES ||
        table + n * PREPARED_ENTRY_BYTES != size)
        return fail(e, "%s: damaged header (a table of %llu entries at %llu does not end the file)", label,
                    (unsigned long long)n, (unsigned long long)table);
    f->map = bytes;
    f->size = size;
    f->n_entries = n;
    f->table = bytes + table;
    f->data_end = PREPARED_HEADER_BYTES;
    f->path = xstrdup(label);
    return 0;
}

/* Maps the file at path and checks it; 1 also when there is no such file. */
static int open_prepared(PreparedFile *f, const char *path, uint64_t key, WeightType format, Error *e) {
    memset(f, 0, sizeof *f);
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) return errno == ENOENT ? (fail(e, "%s: not made yet", path), 1) : fail(e, "%s: %s", path, strerror(errno));
    struct stat s;
    if (fstat(fd, &s) != 0 || !S_ISREG(s.st_mode)) {
        close(fd);
        return fail(e, "%s: not a regular file", path);
    }
    size_t size = (size_t)s.st_size;
    void *map = size ? mmap(NULL, size, PROT_READ, MAP_SHARED, fd, 0) : MAP_FAILED;
    int err = errno;
    close(fd);
    if (size == 0) return fail(e, "%s: empty", path);
    if (map == MAP_FAILED) return fail(e, "%s: cannot map: %s", path, strerror(err));
    /* The header and the table are read now, without the read-around of
     * the weights beside them (info reads no weight). */
    madvise(map, size, MADV_RANDOM);
    int rc = prepared_check(f, map, size, path, key, format, e);
    madvise(map, size, MADV_NORMAL);
    /* Weights read from disk come in 2 MB pages where the kernel can: every
     * token reads them all, and 4 KB pages cost a decode about a tenth of
     * its speed in missed translations (a hint: failure is harmless). */
#ifdef MADV_HUGEPAGE
    madvise(map, size, MADV_HUGEPAGE);
#endif
    if (rc != 0) {
        munmap(map, size);
        memset(f, 0, sizeof *f);
        return rc;
    }
    f->mapped = true;
    return 0;
}

int prepared_find(PreparedFile *f, const char *weights, uint64_t key, WeightType format, Error *e) {
    char *name = file_name(weights, format);
    char *places[] = {place_beside(weights, name), place_cached(weights, name)};
    free(name);
    int rc = 1;
    Error why;
    for (size_t i = 0; i < 2 && rc != 0; i++) {
        if (!places[i]) continue;
        int r = open_prepared(f, places[i], key, format, &why);
        /* The first damaged one is reported; one out of date is only made again. */
        if (r < 0 && rc == 1) *e = why;
        else if (r > 0 && rc == 1 && i == 0) *e = why;
        rc = r == 0 ? 0 : r < 0 || rc < 0 ? -1 : 1;
    }
    free(places[0]);
    free(places[1]);
    return rc;
}

int prepared_matrix(PreparedFile *f, const char *name, WeightType type, int rows, int cols, Matrix *out, Error *e) {
    if (f->next >= f->n_entries) return fail(e, "%s: has no matrix for '%s'", f->path, name);
    const unsigned char *entry = f->table + f->next * PREPARED_ENTRY_BYTES;
    const char *stored = (const char *)entry + E_NAME;
    if (strnlen(stored, PREPARED_NAME_BYTES) == PREPARED_NAME_BYTES || strcmp(stored, name) != 0)
        return fail(e, "%s: entry %llu is not '%s'", f->path, (unsigned long long)f->next, name);
    Matrix want = {.type = type, .rows = rows, .cols = cols, .layout = LAYOUT_GROUPED};
    uint64_t offset = get_u64(entry + E_OFFSET), bytes = get_u64(entry + E_BYTES), table = (uint64_t)(f->table - f->map);
    if (get_u32(entry + E_FORMAT) != (uint32_t)type || (int32_t)get_u32(entry + E_ROWS) != rows ||
        (int32_t)get_u32(entry + E_COLS) != cols || get_u32(entry + E_ZERO) != 0)
        return fail(e, "%s: '%s' is not a %s matrix of [%d, %d]", f->path, name, weight_type_name(type), rows, cols);
    if (bytes != matrix_bytes(&want))
        return fail(e, "%s: '%s' has %llu bytes, its shape needs %zu", f->path, name, (unsigned long long)bytes, matrix_bytes(&want));
    if (offset % PREPARED_ALIGN != 0 || offset < f->data_end || offset > table || bytes > table - offset)
        return fail(e, "%s: '%s' lies at %llu, outside [%llu, %llu] or unaligned", f->path, name, (unsigned long long)offset,
                    (unsigned long long)f->data_end, (unsigned long long)table);
    *out = matrix_view(type, rows, cols, f->map + offset);
    f->data_end = offset + bytes;
    f->next++;
    return 0;
}

int prepared_check_end(const PreparedFile *f, Error *e) {
    if (f->next != f->n_entries)
        return fail(e, "%s: holds %llu matrices, the checkpoint %llu", f->path, (unsigned long long)f->n_entries,
                    (unsigned long long)f->next);
    return 0;
}

void prepared_warm(const PreparedFile *f) {
    if (!f->mapped) return;
    volatile unsigned char sink = 0;
    for (size_t i = 0; i < f->size; i += 4096) sink ^= f->map[i];
    (void)sink;
}

void prepared_map_pages(const PreparedFile *f, int part, int n_parts) {
#ifdef MADV_POPULATE_READ
    size_t unit = (size_t)2 << 20, units = (f->size + unit - 1) / unit;
    size_t from = units * (size_t)part / (size_t)n_parts * unit, to = units * (size_t)(part + 1) / (size_t)n_parts * unit;
    if (to > f->size) to = f->size;
    if (f->mapped && to > from) madvise((void *)(f->map + from), to - from, MADV_POPULATE_READ);  /* a hint: failure is harmless */
#else
    (void)f, (void)part, (void)n_parts;
#endif
}

void prepared_close(PreparedFile *f) {
    if (f->mapped) munmap((void *)f->map, f->size);
    free(f->path);
    memset(f, 0, sizeof *f);
}

/* ---- writing ---- */

static int write_at(int fd, const void *data, size_t n, uint64_t offset) {
    const char *p = data;
    while (n > 0) {
        ssize_t put = pwrite(fd, p, n, (off_t)offset);
        if (put < 0 && errno == EINTR) continue;
        if (put <= 0) return -1;
        p += put;
        n -= (size_t)put;
        offset += (uint64_t)put;
    }
    return 0;
}

int prepared_create(PreparedWriter *w, const char *weights, uint64_t key, WeightType format, size_t bytes, Error *e) {
    memset(w, 0, sizeof *w);
    w->fd = -1;
    char *name = file_name(weights, format);
    w->path = place_to_write(weights, name);
    free(name);
    if (!w->path) {
        char *cache = place_cache_folder();
        fail(e, "neither the checkpoint's folder nor %s is writable", cache ? cache : "a cache folder ($HOME is not set)");
        free(cache);
        return -1;
    }
    char *dir = place_folder_of(w->path);
    struct statvfs fs;
    bool room = statvfs(dir, &fs) != 0 || (double)fs.f_bavail * fs.f_frsize > (double)bytes + 64e6;
    if (!room)
        fail(e, "%s: %.1f GB free, the prepared weights take %.1f GB", dir, (double)fs.f_bavail * fs.f_frsize / 1e9,
             (double)bytes / 1e9);
    free(dir);
    if (!room) {
        free(w->path);
        return -1;
    }
    size_t n = strlen(w->path) + 32;
    w->temp = xmalloc(n);
    snprintf(w->temp, n, "%s.tmp-%ld", w->path, (long)getpid());
    w->fd = open(w->temp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (w->fd < 0) {
        fail(e, "%s: %s", w->temp, strerror(errno));
        free(w->temp);
        free(w->path);
        return -1;
    }
    w->key = key;
    w->format = format;
    w->offset = PREPARED_HEADER_BYTES;
    return 0;
}

int prepared_add(PreparedWriter *w, const char *name, const Matrix *m, Error *e) {
    if (strlen(name) >= PREPARED_NAME_BYTES) return fail(e, "%s: tensor name '%.60s...' too long for a prepared file", w->temp, name);
    uint64_t offset = align_up(w->offset, PREPARED_ALIGN), bytes = matrix_bytes(m);
    if (write_at(w->fd, m->data, bytes, offset) != 0) return fail(e, "%s: write failed: %s", w->temp, strerror(errno));
    if (w->n_entries == w->capacity) {
        w->capacity = w->capacity ? 2 * w->capacity : 256;
        w->table = xrealloc(w->table, w->capacity, PREPARED_ENTRY_BYTES);
    }
    unsigned char *entry = w->table + w->n_entries++ * PREPARED_ENTRY_BYTES;
    memset(entry, 0, PREPARED_ENTRY_BYTES);
    memcpy(entry + E_NAME, name, strlen(name));
    put_u32(entry + E_FORMAT, (uint32_t)m->type);
    put_u32(entry + E_ROWS, (uint32_t)m->rows);
    put_u32(entry + E_COLS, (uint32_t)m->cols);
    put_u64(entry + E_OFFSET, offset);
    put_u64(entry + E_BYTES, bytes);
    w->offset = offset + bytes;
    return 0;
}

static void free_writer(PreparedWriter *w) {
    if (w->fd >= 0) close(w->fd);
    free(w->path);
    free(w->temp);
    free(w->table);
    memset(w, 0, sizeof *w);
    w->fd = -1;
}

void prepared_abandon(PreparedWriter *w) {
    if (w->temp) unlink(w->temp);
    free_writer(w);
}

int prepared_commit(PreparedWriter *w, Error *e) {
    uint64_t table = align_up(w->offset, 64), size = table + (uint64_t)w->n_entries * PREPARED_ENTRY_BYTES;
    unsigned char header[PREPARED_HEADER_BYTES] = {0};
    memcpy(header + H_MAGIC, MAGIC, sizeof MAGIC);
    put_u32(header + H_VERSION, PREPARED_VERSION);
    put_u32(header + H_FORMAT, (uint32_t)w->format);
    put_u64(header + H_KEY, w->key);
    put_u64(header + H_ENTRIES, w->n_entries);
    put_u64(header + H_TABLE, table);
    put_u64(header + H_SIZE, size);
    /* The whole file on disk before its name: a crash leaves the old file
     * or the new one, never a part. */
    int rc = write_at(w->fd, w->table, w->n_entries * PREPARED_ENTRY_BYTES, table) != 0 ||
             write_at(w->fd, header, sizeof header, 0) != 0 || ftruncate(w->fd, (off_t)size) != 0 || fsync(w->fd) != 0 ||
             rename(w->temp, w->path) != 0 ? fail(e, "%s: %s", w->temp, strerror(errno)) : 0;
    if (rc != 0) unlink(w->temp);
    /* The page cache holds the file as it was written, in small pages; let
     * it go, so that the first mapping reads it back in huge pages (see
     * open_prepared) and decoding walks fewer page tables. */
    else posix_fadvise(w->fd, 0, 0, POSIX_FADV_DONTNEED);  /* a hint: failure is harmless */
    free_writer(w);
    return rc;
}
