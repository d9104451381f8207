/* tokenizer_cache.h - the prepared tokenizer: the tables tokenizer.c builds
 * from tokenizer.json's vocabulary, merges and added tokens, written to a
 * file once and mapped read-only at every later start. Parsing 7-11 MB of
 * JSON into a tree and hashing 150k tokens and merges into tables is most of
 * the time to the first token of a small model; mapping the tables is not.
 *
 * The file also holds the rest of tokenizer.json (the normalizer, the
 * pre-tokenizer, the added tokens, ...: the JSON text with the values of
 * model.vocab and model.merges cut out, a few KB), so that a start with it
 * does not read tokenizer.json at all.
 *
 * Where it goes: tokenizer.run beside tokenizer.json, or in the cache folder
 * (place.h). Its key is a hash of tokenizer.json's size, modification time
 * (to the nanosecond), inode and device, as the prepared weights' is: a file
 * changed in any of them makes it out of date, and the tokenizer then builds
 * its tables from the JSON and writes the file again. The version is raised
 * whenever a table's layout or the tokenizer's hashes change.
 *
 * The file, in host byte order (little-endian on x86-64):
 *   header, 128 bytes: magic "runtok\0\0"; u32 version
 *     (TOKENIZER_CACHE_VERSION); u32 flags (1: byte-level, 2: has pieces);
 *     u64 key; u64 file size; i32 vocab_size; i32 bpe_vocab_size; u64
 *     n_bytes; u64 vocab_slots; u64 merge_slots; u64 n_piece_bytes; then 0s.
 *   the tables, in this order, each from the next multiple of 64 bytes:
 *     byte_token [256] i32; start [vocab_size + 1] u32; bytes [n_bytes];
 *     vocab [vocab_slots] VocabSlot; merges [merge_slots] Merge; and with
 *     pieces, piece_start [vocab_size + 1] u32 and piece_bytes [n_piece_bytes];
 *     rest [n_rest], the JSON text.
 *   The file ends where the last table does.
 * It is checked like any file from outside before it is used: the header,
 * the sizes, every offset table rising and ending at its bytes' end, every
 * id inside the vocabulary and each hash table with a free slot (so that a
 * look-up ends); the rest is parsed as JSON like tokenizer.json. Whether the
 * tables say what tokenizer.json says is what the key stands for. */
#ifndef TOKENIZER_CACHE_H
#define TOKENIZER_CACHE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "util.h"

enum { TOKENIZER_CACHE_VERSION = 1, TOKENIZER_CACHE_HEADER_BYTES = 128 };

/* A slot of the vocabulary's hash table: the tag (the high bits of the
 * token's hash) and the token's id, -1 in a free slot. */
typedef struct {
    uint32_t tag;
    int32_t id;
} VocabSlot;

/* A slot of the hash table of merge rules. */
typedef struct {
    uint64_t pair;    /* left << 32 | right; EMPTY_PAIR marks a free slot */
    uint32_t rank;    /* position in the merges list: lower merges first */
    int32_t merged;
} Merge;

static const uint64_t EMPTY_PAIR = UINT64_MAX;

/* The tables, as the tokenizer reads them. */
typedef struct {
    int vocab_size;              /* largest id + 1 */
    int bpe_vocab_size;          /* largest id of the BPE model's own vocabulary + 1 */
    bool byte_level;
    int byte_token[256];         /* each byte's token where BPE starts, or -1 */
    const uint32_t *start;       /* [vocab_size + 1]: token id is bytes[start[id] .. start[id + 1]) */
    const char *bytes;           /* [start[vocab_size]] */
    const VocabSlot *vocab;      /* [vocab_slots], a power of two */
    size_t vocab_slots;
    const Merge *merges;         /* [merge_slots], a power of two */
    size_t merge_slots;
    const uint32_t *piece_start; /* not byte-level: [vocab_size + 1], else NULL */
    const char *piece_bytes;     /* [piece_start[vocab_size]] */
    const char *rest;            /* [rest_len]: tokenizer.json without its vocabulary and merges */
    size_t rest_len;
} TokenTables;

/* The key of the tokenizer.json at json_path into *key; -1 when it cannot be
 * read (stat fails). */
int tokenizer_cache_key(const char *json_path, uint64_t *key);

/* Checks a prepared tokenizer held in bytes[0..size) (label names it in
 * errors) and points t's tables into it. Returns 0 when it is usable, 1 when
 * it is well-formed but for another key or version, -1 when it is damaged. */
int tokenizer_cache_check(TokenTables *t, const unsigned char *bytes, size_t size, uint64_t key, const char *label,
                          Error *e);

/* Looks for the prepared tokenizer of the tokenizer.json at json_path with
 * key `key`, beside it and then in the cache folder, and maps the first that
 * tokenizer_cache_check accepts: returns 0 with its tables in t and the
 * mapping in *map, *map_size (undo with unmap_file); 1 when there is none or
 * each is out of date or damaged (e then says why). */
int tokenizer_cache_find(TokenTables *t, const void **map, size_t *map_size, const char *json_path, uint64_t key,
                         Error *e);

/* Writes t as the prepared tokenizer of json_path with key `key`: to a
 * temporary file renamed into place when complete. */
int tokenizer_cache_write(const char *json_path, uint64_t key, const TokenTables *t, Error *e);

#endif
