/* tokenizer_cache.c - writing, finding and checking prepared tokenizers. */
#include "tokenizer_cache.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "place.h"

static const char MAGIC[8] = "runtok";  /* with its NULs: 8 bytes */
static const char FILE_NAME[] = "tokenizer.run";

enum { FLAG_BYTE_LEVEL = 1, FLAG_PIECES = 2, TABLE_ALIGN = 64 };

/* Where each field of the header is. */
enum {
    H_MAGIC = 0, H_VERSION = 8, H_FLAGS = 12, H_KEY = 16, H_SIZE = 24, H_VOCAB_SIZE = 32, H_BPE_VOCAB_SIZE = 36,
    H_BYTES = 40, H_VOCAB_SLOTS = 48, H_MERGE_SLOTS = 56, H_PIECE_BYTES = 64, H_REST = 72, H_ZERO = 80
};

static uint64_t hash_u64(uint64_t h, uint64_t v) { return mix64(h ^ mix64(v)); }

int tokenizer_cache_key(const char *json_path, uint64_t *key) {
    struct stat s;
    if (stat(json_path, &s) != 0) return -1;
    uint64_t h = 0x72756e20746f6b31u;  /* "run tok1" */
    uint64_t fields[] = {TOKENIZER_CACHE_VERSION, (uint64_t)s.st_size, (uint64_t)s.st_mtim.tv_sec,
                         (uint64_t)s.st_mtim.tv_nsec, (uint64_t)s.st_ino, (uint64_t)s.st_dev};
    for (size_t i = 0; i < sizeof fields / sizeof fields[0]; i++) h = hash_u64(h, fields[i]);
    *key = h;
    return 0;
}

/* ---- the layout of the tables ---- */

/* Each table's offset and size in bytes, in file order. */
enum { T_BYTE_TOKEN, T_START, T_BYTES, T_VOCAB, T_MERGES, T_PIECE_START, T_PIECE_BYTES, T_REST, N_TABLES };

/* Lays the tables out from the header's counts: offset[i] and size[i] of
 * each, and returns the end of the last, or 0 when a count is too large to
 * lay out (no real tokenizer comes near). */
static uint64_t lay_out(uint64_t offset[N_TABLES], uint64_t size[N_TABLES], uint64_t vocab_size, uint64_t n_bytes,
                        uint64_t vocab_slots, uint64_t merge_slots, bool pieces, uint64_t n_piece_bytes, uint64_t n_rest) {
    const uint64_t limit = (uint64_t)1 << 40;
    if (vocab_size > limit || n_bytes > limit || vocab_slots > limit || merge_slots > limit || n_piece_bytes > limit ||
        n_rest > limit)
        return 0;
    size[T_BYTE_TOKEN] = 256 * sizeof(int32_t);
    size[T_START] = (vocab_size + 1) * sizeof(uint32_t);
    size[T_BYTES] = n_bytes;
    size[T_VOCAB] = vocab_slots * sizeof(VocabSlot);
    size[T_MERGES] = merge_slots * sizeof(Merge);
    size[T_PIECE_START] = pieces ? (vocab_size + 1) * sizeof(uint32_t) : 0;
    size[T_PIECE_BYTES] = pieces ? n_piece_bytes : 0;
    size[T_REST] = n_rest;
    uint64_t at = TOKENIZER_CACHE_HEADER_BYTES;
    for (int i = 0; i < N_TABLES; i++) {
        at = (at + TABLE_ALIGN - 1) / TABLE_ALIGN * TABLE_ALIGN;
        offset[i] = at;
        at += size[i];
    }
    return at;
}

/* ---- checking ---- */

static bool is_power_of_two(uint64_t n) { return n >= 16 && (n & (n - 1)) == 0; }

/* Whether start[0..n] rises from 0 to `end`. */
static bool offsets_rise(const uint32_t *start, size_t n, uint64_t end) {
    if (start[0] != 0 || start[n] != end) return false;
    for (size_t i = 0; i < n; i++)
        if (start[i + 1] < start[i]) return false;
    return true;
}

/* Every id of the vocabulary's table inside [0, n_ids) or -1, and one free slot at least. */
static bool vocab_table_sound(const VocabSlot *slots, size_t n, int n_ids) {
    size_t used = 0;
    for (size_t i = 0; i < n; i++) {
        if (slots[i].id < -1 || slots[i].id >= n_ids) return false;
        used += slots[i].id >= 0;
    }
    return used < n;
}

/* Every merged token inside [0, n_ids) in a slot in use, and one free slot at least. */
static bool merge_table_sound(const Merge *slots, size_t n, int n_ids) {
    size_t used = 0;
    for (size_t i = 0; i < n; i++) {
        if (slots[i].pair == EMPTY_PAIR) continue;
        if (slots[i].merged < 0 || slots[i].merged >= n_ids) return false;
        used++;
    }
    return used < n;
}

int tokenizer_cache_check(TokenTables *t, const unsigned char *bytes, size_t size, uint64_t key, const char *label,
                          Error *e) {
    memset(t, 0, sizeof *t);
    if (size < TOKENIZER_CACHE_HEADER_BYTES || memcmp(bytes + H_MAGIC, MAGIC, sizeof MAGIC) != 0)
        return fail(e, "%s: not a prepared tokenizer of run", label);
    if (get_u32(bytes + H_VERSION) != TOKENIZER_CACHE_VERSION)
        return fail(e, "%s: made by another version of run", label), 1;
    if (get_u64(bytes + H_KEY) != key) return fail(e, "%s: tokenizer.json changed since it was made", label), 1;
    for (int i = H_ZERO; i < TOKENIZER_CACHE_HEADER_BYTES; i++)
        if (bytes[i]) return fail(e, "%s: damaged header (reserved byte %d is not 0)", label, i);
    uint32_t flags = get_u32(bytes + H_FLAGS);
    int32_t vocab_size = (int32_t)get_u32(bytes + H_VOCAB_SIZE), bpe_vocab_size = (int32_t)get_u32(bytes + H_BPE_VOCAB_SIZE);
    uint64_t n_bytes = get_u64(bytes + H_BYTES), vocab_slots = get_u64(bytes + H_VOCAB_SLOTS),
             merge_slots = get_u64(bytes + H_MERGE_SLOTS), n_piece_bytes = get_u64(bytes + H_PIECE_BYTES),
             n_rest = get_u64(bytes + H_REST);
    bool pieces = flags & FLAG_PIECES;
    if ((flags & ~(uint32_t)(FLAG_BYTE_LEVEL | FLAG_PIECES)) || vocab_size < 1 || bpe_vocab_size < 0 ||
        bpe_vocab_size > vocab_size || n_bytes > UINT32_MAX || n_piece_bytes > UINT32_MAX || (!pieces && n_piece_bytes) ||
        !is_power_of_two(vocab_slots) || !is_power_of_two(merge_slots))
        return fail(e, "%s: damaged header (impossible sizes)", label);
    uint64_t offset[N_TABLES], table_size[N_TABLES];
    uint64_t end = lay_out(offset, table_size, (uint64_t)vocab_size, n_bytes, vocab_slots, merge_slots, pieces, n_piece_bytes,
                           n_rest);
    if (end == 0 || get_u64(bytes + H_SIZE) != end || size != end)
        return fail(e, "%s: is %zu bytes, its header says %llu and its tables %llu (cut short?)", label, size,
                    (unsigned long long)get_u64(bytes + H_SIZE), (unsigned long long)end);

    /* The tables where the header puts them (aligned: the mapping starts on a page). */
    memcpy(t->byte_token, bytes + offset[T_BYTE_TOKEN], sizeof t->byte_token);
    t->vocab_size = vocab_size;
    t->bpe_vocab_size = bpe_vocab_size;
    t->byte_level = flags & FLAG_BYTE_LEVEL;
    t->start = (const uint32_t *)(bytes + offset[T_START]);
    t->bytes = (const char *)(bytes + offset[T_BYTES]);
    t->vocab = (const VocabSlot *)(bytes + offset[T_VOCAB]);
    t->vocab_slots = vocab_slots;
    t->merges = (const Merge *)(bytes + offset[T_MERGES]);
    t->merge_slots = merge_slots;
    if (pieces) {
        t->piece_start = (const uint32_t *)(bytes + offset[T_PIECE_START]);
        t->piece_bytes = (const char *)(bytes + offset[T_PIECE_BYTES]);
    }
    t->rest = (const char *)(bytes + offset[T_REST]);
    t->rest_len = n_rest;

    /* Every id and offset they hold inside what it indexes. */
    bool sound = offsets_rise(t->start, (size_t)vocab_size, n_bytes) &&
                 (!pieces || offsets_rise(t->piece_start, (size_t)vocab_size, n_piece_bytes)) &&
                 vocab_table_sound(t->vocab, vocab_slots, bpe_vocab_size) &&
                 merge_table_sound(t->merges, merge_slots, bpe_vocab_size);
    for (int b = 0; b < 256 && sound; b++) sound = t->byte_token[b] >= -1 && t->byte_token[b] < bpe_vocab_size;
    if (!sound) {
        memset(t, 0, sizeof *t);
        return fail(e, "%s: damaged tables (an offset or id out of range, or a full hash table)", label);
    }
    return 0;
}

/* ---- finding ---- */

/* Maps the file at path and checks it; 1 also when there is none. */
static int open_cache(TokenTables *t, const void **map, size_t *map_size, const char *path, uint64_t key, Error *e) {
    if (access(path, F_OK) != 0) return fail(e, "%s: not made yet", path), 1;
    const void *data;
    size_t size;
    if (map_file(path, &data, &size, e) != 0) return -1;
    int rc = tokenizer_cache_check(t, data ? data : "", size, key, path, e);
    if (rc != 0) {
        unmap_file(data, size);
        return rc;
    }
    *map = data;
    *map_size = size;
    return 0;
}

int tokenizer_cache_find(TokenTables *t, const void **map, size_t *map_size, const char *json_path, uint64_t key,
                         Error *e) {
    char *places[] = {place_beside(json_path, FILE_NAME), place_cached(json_path, FILE_NAME)};
    int rc = 1;
    for (size_t i = 0; i < 2 && rc != 0; i++) {
        Error why;
        if (places[i] && open_cache(t, map, map_size, places[i], key, &why) == 0) rc = 0;
        else if (places[i] && i == 0) *e = why;
    }
    free(places[0]);
    free(places[1]);
    return rc;
}

/* ---- writing ---- */

/* Writes n bytes at the file's current end, padded with zeros to `at`. */
static int write_table(FILE *f, uint64_t *written, uint64_t at, const void *data, uint64_t n) {
    static const char zeros[TABLE_ALIGN];
    while (*written < at) {
        uint64_t pad = at - *written < TABLE_ALIGN ? at - *written : TABLE_ALIGN;
        if (fwrite(zeros, 1, pad, f) != pad) return -1;
        *written += pad;
    }
    if (n && fwrite(data, 1, n, f) != n) return -1;
    *written += n;
    return 0;
}

int tokenizer_cache_write(const char *json_path, uint64_t key, const TokenTables *t, Error *e) {
    char *path = place_to_write(json_path, FILE_NAME);
    if (!path) return fail(e, "no writable place for the prepared tokenizer of %s", json_path);
    bool pieces = t->piece_start != NULL;
    uint64_t n_bytes = t->start[t->vocab_size], n_piece_bytes = pieces ? t->piece_start[t->vocab_size] : 0;
    uint64_t offset[N_TABLES], size[N_TABLES];
    uint64_t end = lay_out(offset, size, (uint64_t)t->vocab_size, n_bytes, t->vocab_slots, t->merge_slots, pieces, n_piece_bytes,
                           t->rest_len);
    unsigned char header[TOKENIZER_CACHE_HEADER_BYTES] = {0};
    memcpy(header + H_MAGIC, MAGIC, sizeof MAGIC);
    put_u32(header + H_VERSION, TOKENIZER_CACHE_VERSION);
    put_u32(header + H_FLAGS, (t->byte_level ? FLAG_BYTE_LEVEL : 0) | (pieces ? FLAG_PIECES : 0));
    put_u64(header + H_KEY, key);
    put_u64(header + H_SIZE, end);
    put_u32(header + H_VOCAB_SIZE, (uint32_t)t->vocab_size);
    put_u32(header + H_BPE_VOCAB_SIZE, (uint32_t)t->bpe_vocab_size);
    put_u64(header + H_BYTES, n_bytes);
    put_u64(header + H_VOCAB_SLOTS, t->vocab_slots);
    put_u64(header + H_MERGE_SLOTS, t->merge_slots);
    put_u64(header + H_PIECE_BYTES, n_piece_bytes);
    put_u64(header + H_REST, t->rest_len);
    int32_t byte_token[256];
    for (int b = 0; b < 256; b++) byte_token[b] = t->byte_token[b];
    const void *data[N_TABLES] = {byte_token, t->start, t->bytes, t->vocab, t->merges, t->piece_start, t->piece_bytes,
                                  t->rest};

    /* A temporary file renamed into place when complete and on disk: a
     * reader never sees half of one. */
    size_t n = strlen(path) + 32;
    char *temp = xmalloc(n);
    snprintf(temp, n, "%s.tmp-%ld", path, (long)getpid());
    FILE *f = end ? fopen(temp, "wb") : NULL;
    uint64_t written = 0;
    bool ok = f && write_table(f, &written, 0, header, sizeof header) == 0;
    for (int i = 0; i < N_TABLES && ok; i++) ok = write_table(f, &written, offset[i], data[i], size[i]) == 0;
    ok = ok && fflush(f) == 0 && fsync(fileno(f)) == 0;
    if (f && fclose(f) != 0) ok = false;
    ok = ok && rename(temp, path) == 0;
    int rc = ok ? 0 : fail(e, "%s: %s", f ? temp : path, end ? strerror(errno) : "tables too large");
    if (!ok && f) unlink(temp);
    free(temp);
    free(path);
    return rc;
}
