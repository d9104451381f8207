/* tokenizer.c - loading tokenizer.json, the BPE model and the added
 * tokens, then encoding (added tokens, the normalizer, the pre-tokenizer,
 * BPE, the post-processor) and decoding (bytes and lossy UTF-8, or the
 * decoder's steps; streaming). */
#include "tokenizer.h"

#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "decoder.h"
#include "json.h"
#include "normalizer.h"
#include "pretokenizer.h"
#include "tokenizer_cache.h"
#include "tokenizer_parts.h"
#include "unicode.h"

/* The largest vocabulary accepted: bounds what a hostile file can make us
 * allocate (Qwen2 has 151,665 tokens). */
enum { MAX_VOCAB = 1 << 22 };

/* ---- data structures ---- */

/* The ids of pieces already encoded, to skip BPE for words seen before. A
 * fixed-size table emptied whenever it fills, so memory stays bounded. */
enum {
    CACHE_SLOTS = 1 << 15,
    CACHE_MAX_ENTRIES = CACHE_SLOTS / 2,
    CACHE_MAX_PIECE = 64,                                   /* bytes: longer pieces are not cached */
    CACHE_KEY_BYTES = CACHE_MAX_ENTRIES * 16,
    CACHE_IDS = CACHE_MAX_ENTRIES * 8,
};

typedef struct {
    uint64_t hash;    /* of the piece; 0 marks a free slot */
    uint32_t key;     /* the piece is keys[key .. key + key_len) */
    uint32_t ids;     /* its tokens are ids[ids .. ids + n_ids) */
    uint16_t key_len, n_ids;
} CacheEntry;

typedef struct {
    CacheEntry *slots;  /* [CACHE_SLOTS] */
    size_t n_entries;
    char *keys;         /* [CACHE_KEY_BYTES] */
    size_t keys_used;
    int *ids;           /* [CACHE_IDS] */
    size_t ids_used;
} PieceCache;

/* BPE's working state for one piece: its tokens as a linked list over byte
 * positions (a token lives at the position of its first byte), and a heap
 * of the neighbouring pairs that have a merge rule. */
typedef struct {
    int id;             /* -1 once merged into the token on its left */
    size_t prev, next;  /* positions of the neighbours; NONE at the ends */
} Symbol;

typedef struct {
    uint32_t rank;
    int32_t merged;
    size_t left;            /* position of the left token */
    int left_id, right_id;  /* the ids of the pair when it was pushed */
} Candidate;

static const size_t NONE = SIZE_MAX;

/* Bytes of the longest piece whose BPE scratch memory is kept between calls. */
enum { BPE_SCRATCH_KEPT = 1 << 16 };

/* An added token: found in texts by its content, which may differ from the
 * bytes it decodes to (see added_token_bytes). */
typedef struct {
    const char *content;  /* [len], in the tokenizer's added_text */
    uint32_t len;
    int id;
} AddedToken;

struct Tokenizer {
    int vocab_size;             /* largest id + 1 (after tokenizer_fit: the model's vocabulary) */
    int bpe_vocab_size;         /* largest id of the BPE model's own vocabulary + 1 */
    char *bytes;                /* every token's bytes, back to back */
    uint32_t *start;            /* [vocab_size + 1]: token id is bytes[start[id] .. start[id + 1]),
                                   empty when no token has that id */
    uint16_t byte_char[256];    /* the byte-level alphabet: the character that shows each byte */
    int byte_token[256];        /* the vocabulary token of each single byte, where BPE starts
                                   (not byte_level: of each <0xNN>, for byte_fallback; -1 for none) */
    VocabSlot *vocab;           /* hash table of the vocabulary tokens by their bytes */
    size_t vocab_mask;          /* its size - 1 (a power of two) */
    Merge *merges;              /* hash table of merge rules by pair */
    size_t merge_mask;
    AddedToken *added;          /* [n_added] the added tokens, sorted by content (compare_content) */
    int n_added;
    bool *is_special;           /* [vocab_size] the added tokens marked "special" (<|im_end|>, ...) */
    char *added_text;           /* their contents, back to back */
    bool added_starts[256];     /* whether some added token begins with this byte */
    Normalizer normalizer;
    PreTokenizer pre_tokenizer;
    Decoder decoder;
    bool byte_level;            /* tokens are spelled in the byte-level alphabet, and stored as the bytes
                                   they stand for; else as spelled (UTF-8, "▁" for a space) */
    bool ignore_merges;         /* BPE: a piece that is a vocabulary token becomes that token */
    bool byte_fallback;         /* BPE: a character not in the vocabulary becomes its bytes' <0xNN> tokens */
    int unk_id;                 /* BPE: the token of a character not in the vocabulary otherwise, or -1 */
    bool fuse_unk;              /* BPE: a run of such characters makes one unk token */
    char *piece_bytes;          /* not byte_level: what each token stands for mid-text (see decoder_piece), */
    uint32_t *piece_start;      /* [vocab_size + 1], as bytes and start */
    const void *tables_map;     /* the prepared tokenizer that bytes, start, vocab, merges and the pieces
                                   are in (tokenizer_cache.h), or NULL: they are on the heap */
    size_t tables_map_size;
    TokenIds special;           /* the post-processor's ids: n_prefix to put before a text, the rest after it */
    size_t n_prefix;
    PieceCache cache;
    Symbol *symbols;            /* BPE scratch, grown as pieces need */
    size_t symbols_cap;
    Candidate *heap;
    size_t heap_n, heap_cap;
};

/* ---- hashing ---- */

/* A hash of s[0..n): a multiply-xor per 8-byte word, then one full mix. */
static uint64_t hash_bytes(const char *s, size_t n) {
    uint64_t h = n * 0x9E3779B97F4A7C15u;
    for (; n >= 8; s += 8, n -= 8) {
        uint64_t word;
        memcpy(&word, s, 8);
        h = (h ^ word) * 0xBF58476D1CE4E5B9u;
        h ^= h >> 29;
    }
    uint64_t tail = 0;
    for (size_t i = 0; i < n; i++) tail |= (uint64_t)(unsigned char)s[i] << (8 * i);
    return mix64(h ^ tail);
}

static uint64_t pair_key(int left, int right) { return (uint64_t)(uint32_t)left << 32 | (uint32_t)right; }

/* The size of a hash table for n entries: a power of two, at most 3/4 full. */
static size_t table_size(size_t n) {
    size_t size = 16;
    while (size / 4 * 3 < n) size *= 2;
    return size;
}

/* ---- tokens and their lookup ---- */

static size_t token_len(const Tokenizer *t, int id) { return t->start[id + 1] - t->start[id]; }

static bool has_token(const Tokenizer *t, int id) { return id >= 0 && id < t->vocab_size && token_len(t, id) > 0; }

/* The slot of the vocabulary token with bytes s[0..n), or of the free slot
 * where it would go. */
static size_t vocab_slot(const Tokenizer *t, const char *s, size_t n, uint64_t hash) {
    for (size_t i = hash & t->vocab_mask;; i = (i + 1) & t->vocab_mask) {
        const VocabSlot *slot = &t->vocab[i];
        if (slot->id < 0) return i;
        if (slot->tag == (uint32_t)(hash >> 32) && token_len(t, slot->id) == n &&
            memcmp(t->bytes + t->start[slot->id], s, n) == 0)
            return i;
    }
}

static int vocab_find(const Tokenizer *t, const char *s, size_t n) {
    return t->vocab[vocab_slot(t, s, n, hash_bytes(s, n))].id;
}

static const Merge *merge_find(const Tokenizer *t, int left, int right) {
    uint64_t key = pair_key(left, right);
    for (size_t i = mix64(key) & t->merge_mask;; i = (i + 1) & t->merge_mask) {
        const Merge *m = &t->merges[i];
        if (m->pair == key) return m;
        if (m->pair == EMPTY_PAIR) return NULL;
    }
}

int tokenizer_vocab_size(const Tokenizer *t) { return t->vocab_size; }

int tokenizer_fit(Tokenizer *t, int vocab, Error *e) {
    if (t->vocab_size <= vocab) return 0;
    if (t->bpe_vocab_size > vocab)
        return fail(e, "the vocabulary's token ids go up to %d, past the model's vocab_size of %d", t->bpe_vocab_size - 1,
                    vocab);
    for (size_t i = 0; i < t->special.n; i++)
        if (t->special.ids[i] >= vocab)
            return fail(e, "the post-processor's token id %d is past the model's vocab_size of %d", t->special.ids[i],
                        vocab);
    if (t->unk_id >= vocab) return fail(e, "the unk token's id %d is past the model's vocab_size of %d", t->unk_id, vocab);
    /* The added tokens past it are no longer found in texts (the order by
     * content is kept); their ids are out of every range. */
    int kept = 0;
    for (int i = 0; i < t->n_added; i++)
        if (t->added[i].id < vocab) t->added[kept++] = t->added[i];
    t->n_added = kept;
    t->vocab_size = vocab;
    return 0;
}

/* The order of the added tokens: by content, byte by byte, a content
 * before the longer ones it begins. */
static int compare_content(const char *a, size_t a_len, const char *b, size_t b_len) {
    int c = memcmp(a, b, a_len < b_len ? a_len : b_len);
    return c ? c : (a_len > b_len) - (a_len < b_len);
}

static int compare_added(const void *a, const void *b) {
    const AddedToken *x = a, *y = b;
    return compare_content(x->content, x->len, y->content, y->len);
}

/* The added token whose content is s[0..n), n > 0, or NULL. */
static const AddedToken *added_find(const Tokenizer *t, const char *s, size_t n) {
    size_t lo = 0, hi = (size_t)t->n_added;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        int c = compare_content(t->added[mid].content, t->added[mid].len, s, n);
        if (c == 0) return &t->added[mid];
        if (c < 0) lo = mid + 1;
        else hi = mid;
    }
    return NULL;
}

int tokenizer_find(const Tokenizer *t, const char *content, size_t len) {
    if (len == 0) return -1;
    const AddedToken *a = added_find(t, content, len);
    return a ? a->id : vocab_find(t, content, len);
}

const char *tokenizer_token(const Tokenizer *t, int id, size_t *len) {
    if (!has_token(t, id)) return NULL;
    if (!t->byte_level) {
        *len = t->piece_start[id + 1] - t->piece_start[id];
        return t->piece_bytes + t->piece_start[id];
    }
    *len = token_len(t, id);
    return t->bytes + t->start[id];
}

bool tokenizer_is_special(const Tokenizer *t, int id) { return t->is_special && has_token(t, id) && t->is_special[id]; }

char *tokenizer_spelling(const Tokenizer *t, int id) {
    if (!has_token(t, id)) return NULL;
    size_t len = token_len(t, id);
    const char *bytes = t->bytes + t->start[id];
    for (int i = 0; i < t->n_added; i++)
        if (t->added[i].id == id) {
            char *out = xmalloc(t->added[i].len + 1);
            memcpy(out, t->added[i].content, t->added[i].len);
            out[t->added[i].len] = '\0';
            return out;
        }
    char *out = xmalloc(2 * len + 1);  /* a byte's character takes 1 or 2 bytes */
    size_t n = 0;
    for (size_t i = 0; i < len; i++)
        if (t->byte_level) n += utf8_put(t->byte_char[(unsigned char)bytes[i]], out + n);
        else out[n++] = bytes[i];
    out[n] = '\0';
    return out;
}

/* ---- loading ---- */

/* One past the last character of the byte-level alphabet. */
enum { ALPHABET_END = 256 + 68 };

/* GPT-2's byte-level alphabet shows every byte as a printable character:
 * printable Latin-1 bytes as themselves, the 68 others (controls, space,
 * DEL, NBSP, soft hyphen) as U+0100, U+0101, ... in byte order. Fills the
 * character of each byte, and the byte of each character (-1 for none). */
static void make_byte_level_alphabet(uint16_t byte_char[256], int16_t char_byte[ALPHABET_END]) {
    uint16_t next = 256;
    for (unsigned c = 0; c < ALPHABET_END; c++) char_byte[c] = -1;
    for (unsigned b = 0; b < 256; b++) {
        bool printable = (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE;
        byte_char[b] = printable ? (uint16_t)b : next++;
        char_byte[byte_char[b]] = (int16_t)b;
    }
}

/* The bytes a token spelled s[0..n) is stored as, written into out (room
 * for n bytes): with char_byte (a byte-level tokenizer), the bytes its
 * characters of the byte-level alphabet stand for; without, its spelling.
 * Returns the number of bytes, or -1 when a character is not in the
 * alphabet. */
static long spelling_bytes(const int16_t *char_byte, const char *s, size_t n, char *out) {
    if (!char_byte) {
        memcpy(out, s, n);
        return (long)n;
    }
    long len = 0;
    for (size_t i = 0; i < n;) {
        uint32_t c;
        unsigned char lead = (unsigned char)s[i];
        if (lead < 0x80) {
            c = lead, i++;
        } else if (lead >= 0xC2 && lead <= 0xDF && i + 1 < n && ((unsigned char)s[i + 1] & 0xC0) == 0x80) {
            c = (uint32_t)(lead & 0x1F) << 6 | ((unsigned char)s[i + 1] & 0x3F), i += 2;
        } else {
            return -1;
        }
        if (c >= ALPHABET_END || char_byte[c] < 0) return -1;
        out[len++] = (char)char_byte[c];
    }
    return len;
}

/* A boolean option of the BPE model (missing or null: false) into *out. */
static int read_flag(const JsonValue *model, const char *name, bool *out, Error *e) {
    const JsonValue *v = json_get(model, name);
    if (!json_is_null(v) && v->type != JSON_BOOL)
        return fail(e, "BPE option %s is %s, not a boolean", name, json_type_name(v->type));
    *out = !json_is_false(v);
    return 0;
}

/* The BPE model's options: the ones Hugging Face's files use, ignore_merges
 * (Llama 3), and byte_fallback, unk_token, fuse_unk (SentencePiece-style). */
static int read_model_options(Tokenizer *t, const JsonValue *model, Error *e) {
    if (!model || model->type != JSON_OBJECT) return fail(e, "no \"model\" object");
    if (!json_is_string(json_get(model, "type"), "BPE"))
        return fail(e, "model type %s is not supported (only BPE)", section_type(model));
    if (!json_is_null(json_get(model, "dropout")) || !json_is_empty_string(json_get(model, "continuing_subword_prefix")) ||
        !json_is_empty_string(json_get(model, "end_of_word_suffix")))
        return fail(e, "BPE options dropout, continuing_subword_prefix and end_of_word_suffix are not supported");
    const JsonValue *unk = json_get(model, "unk_token");
    if (!json_is_null(unk) && unk->type != JSON_STRING)
        return fail(e, "BPE option unk_token is %s, not a string", json_type_name(unk->type));
    if (read_flag(model, "ignore_merges", &t->ignore_merges, e) != 0 ||
        read_flag(model, "byte_fallback", &t->byte_fallback, e) != 0 || read_flag(model, "fuse_unk", &t->fuse_unk, e) != 0)
        return -1;
    return 0;
}

/* Reads the normalizer, pre-tokenizer and decoder, and checks that the
 * tokenizer.json describes a pipeline implemented here. Tokens are spelled
 * in the byte-level alphabet when the pre-tokenizer and the decoder are
 * ByteLevel; a file with one of them only is refused. */
static int read_pipeline(Tokenizer *t, const JsonValue *root, Error *e) {
    if (root->type != JSON_OBJECT) return fail(e, "not a JSON object");
    if (read_model_options(t, json_get(root, "model"), e) != 0) return -1;
    if (normalizer_read(&t->normalizer, json_get(root, "normalizer"), e) != 0) return -1;
    if (pretokenizer_read(&t->pre_tokenizer, json_get(root, "pre_tokenizer"), e) != 0) return -1;
    if (decoder_read(&t->decoder, json_get(root, "decoder"), e) != 0) return -1;
    t->byte_level = t->pre_tokenizer.byte_level;
    if (t->pre_tokenizer.byte_level != t->decoder.byte_level)
        return fail(e, "the pre_tokenizer is %sByteLevel but the decoder %s (not supported)",
                    t->byte_level ? "" : "not ", t->byte_level ? "is not" : "is");
    if (t->byte_level && (t->byte_fallback || !json_is_null(json_get(json_get(root, "model"), "unk_token"))))
        return fail(e, "BPE options byte_fallback and unk_token are not supported with ByteLevel");
    if (!json_is_null(json_get(root, "truncation")) || !json_is_null(json_get(root, "padding")))
        return fail(e, "truncation and padding are not supported");
    return 0;
}

/* Whether v is a token id: an integer in [0, MAX_VOCAB). */
static bool is_id(const JsonValue *v) {
    return v && v->type == JSON_NUMBER && v->number.is_integer && v->number.integer >= 0 &&
           v->number.integer < MAX_VOCAB;
}

/* Checks one entry of "added_tokens" (the i-th). */
static int check_added(const JsonValue *a, size_t i, Error *e) {
    const JsonValue *content = json_get(a, "content"), *special = json_get(a, "special");
    if (!is_id(json_get(a, "id"))) return fail(e, "added token %zu: \"id\" is not an integer in [0, %d)", i, MAX_VOCAB);
    if (!content || content->type != JSON_STRING || content->len == 0)
        return fail(e, "added token %zu: \"content\" is not a non-empty string", i);
    if (special && special->type != JSON_BOOL) return fail(e, "added token %zu: \"special\" is not a boolean", i);
    if (!json_is_false(json_get(a, "lstrip")) || !json_is_false(json_get(a, "rstrip")) || !json_is_false(json_get(a, "single_word")) ||
        !json_is_false(json_get(a, "normalized")))
        return fail(e, "added token %zu: lstrip, rstrip, single_word and normalized are not supported", i);
    return 0;
}

/* Records that token id is len bytes long; an id already taken is an error
 * (every token is at least one byte, so a length of 0 means free). */
static int claim_id(Tokenizer *t, int id, size_t len, Error *e) {
    if (t->start[id] != 0) return fail(e, "token id %d is given twice", id);
    if (len > UINT32_MAX) return fail(e, "token id %d is too long", id);
    t->start[id] = (uint32_t)len;
    return 0;
}

/* The number of characters of UTF-8 s[0..n): bytes that are not continuations. */
static size_t count_chars(const char *s, size_t n) {
    size_t count = 0;
    for (size_t i = 0; i < n; i++) count += ((unsigned char)s[i] & 0xC0) != 0x80;
    return count;
}

/* The bytes an added token decodes to, written into out (room for n bytes),
 * and their number. As Hugging Face's ByteLevel decoder does: the bytes its
 * characters stand for when all are in the byte-level alphabet (so "Ċ"
 * decodes to a newline; then *in_alphabet is set, if asked), or else its
 * content s[0..n) as it is. */
static size_t added_token_bytes(const int16_t *char_byte, const char *s, size_t n, char *out, bool *in_alphabet) {
    long len = spelling_bytes(char_byte, s, n, out);
    if (in_alphabet) *in_alphabet = len >= 0;
    if (len >= 0) return (size_t)len;
    memcpy(out, s, n);
    return n;
}

/* Checks the ids of the vocabulary and the added tokens, then lays out the
 * token table: vocab_size, and each token's place in bytes (start). An
 * added token whose id a vocabulary token has already taken is marked in
 * shared[] (it may be that same token: load_added checks). */
static int lay_out_tokens(Tokenizer *t, const JsonValue *vocab, const JsonValue *added, const int16_t *char_byte,
                          bool *shared, Error *e) {
    char buf[48];
    int64_t max_id = -1;
    for (size_t i = 0; i < vocab->len; i++) {
        const JsonMember *m = &vocab->members[i];
        if (!is_id(&m->value))
            return fail(e, "vocab token '%s': id is not an integer in [0, %d)", shown(m->key, m->key_len, buf),
                        MAX_VOCAB);
        if (m->key_len == 0) return fail(e, "vocab has an empty token");
        if (m->value.number.integer > max_id) max_id = m->value.number.integer;
    }
    if (max_id < 0 && added->len == 0) return fail(e, "the vocabulary is empty");
    t->bpe_vocab_size = (int)max_id + 1;
    for (size_t i = 0; i < added->len; i++) {
        if (check_added(&added->items[i], i, e) != 0) return -1;
        int64_t id = json_get(&added->items[i], "id")->number.integer;
        if (id > max_id) max_id = id;
    }
    t->vocab_size = (int)max_id + 1;

    /* Each token's length (a character of the byte-level alphabet is one
     * byte), then from the lengths each token's offset. */
    t->start = xcalloc((size_t)t->vocab_size + 1, sizeof *t->start);
    for (size_t i = 0; i < vocab->len; i++) {
        const JsonMember *m = &vocab->members[i];
        size_t len = char_byte ? count_chars(m->key, m->key_len) : m->key_len;
        if (claim_id(t, (int)m->value.number.integer, len, e) != 0) return -1;
    }
    char *scratch = NULL;
    int rc = 0;
    for (size_t i = 0; i < added->len && rc == 0; i++) {
        const JsonValue *a = &added->items[i], *content = json_get(a, "content");
        scratch = xrealloc(scratch, content->len, 1);
        size_t len = added_token_bytes(char_byte, content->string, content->len, scratch, NULL);
        int id = (int)json_get(a, "id")->number.integer;
        shared[i] = t->start[id] != 0;
        if (!shared[i]) rc = claim_id(t, id, len, e);
    }
    free(scratch);
    if (rc != 0) return -1;
    uint64_t total = 0;
    for (int id = 0; id <= t->vocab_size; id++) {
        uint64_t len = id < t->vocab_size ? t->start[id] : 0;
        t->start[id] = (uint32_t)total;
        total += len;
        if (total > UINT32_MAX) return fail(e, "the tokens are too long");
    }
    t->bytes = xmalloc(total + 1);
    return 0;
}

/* Decodes the vocabulary into the token table and indexes it by bytes. */
static int load_vocab(Tokenizer *t, const JsonValue *vocab, const int16_t *char_byte, Error *e) {
    char buf[48];
    /* The bytes and their hashes first, then the hash table in a loop of its
     * own (for the reason given at MERGE_BATCH). */
    uint64_t *hashes = xmalloc((vocab->len + 1) * sizeof *hashes);
    int rc = 0;
    for (size_t i = 0; i < vocab->len && rc == 0; i++) {
        const JsonMember *m = &vocab->members[i];
        int id = (int)m->value.number.integer;
        if (spelling_bytes(char_byte, m->key, m->key_len, t->bytes + t->start[id]) < 0) {
            rc = fail(e, "vocab token '%s' is not in the byte-level alphabet", shown(m->key, m->key_len, buf));
            break;
        }
        hashes[i] = hash_bytes(t->bytes + t->start[id], token_len(t, id));
    }
    t->vocab_mask = table_size(vocab->len) - 1;
    t->vocab = xmalloc((t->vocab_mask + 1) * sizeof *t->vocab);
    for (size_t i = 0; i <= t->vocab_mask; i++) t->vocab[i].id = -1;
    for (size_t i = 0; i < vocab->len && rc == 0; i++) {
        const JsonMember *m = &vocab->members[i];
        int id = (int)m->value.number.integer;
        size_t slot = vocab_slot(t, t->bytes + t->start[id], token_len(t, id), hashes[i]);
        if (t->vocab[slot].id >= 0)
            rc = fail(e, "vocab token '%s' is given twice", shown(m->key, m->key_len, buf));
        else
            t->vocab[slot] = (VocabSlot){(uint32_t)(hashes[i] >> 32), id};
    }
    free(hashes);
    /* Where BPE starts: each byte's token, which a byte-level vocabulary
     * must have; else each byte's <0xNN> token, which byte_fallback uses
     * when it is there. */
    for (unsigned b = 0; b < 256 && rc == 0; b++) {
        char name[8];
        snprintf(name, sizeof name, "<0x%02X>", b);
        t->byte_token[b] = char_byte ? vocab_find(t, (char[]){(char)b}, 1) : vocab_find(t, name, 6);
        if (char_byte && t->byte_token[b] < 0) rc = fail(e, "the vocabulary has no token for byte 0x%02X", b);
    }
    return rc;
}

/* Lists the added tokens (checked by check_added), sorted by content. */
static int index_added(Tokenizer *t, const JsonValue *added, Error *e) {
    char buf[48];
    size_t text_len = 0;
    for (size_t i = 0; i < added->len; i++) {
        text_len += json_get(&added->items[i], "content")->len;
        int64_t id = json_get(&added->items[i], "id")->number.integer;
        if (id >= t->vocab_size) return fail(e, "added token %zu: id %lld is past the vocabulary", i, (long long)id);
    }
    if (text_len > UINT32_MAX) return fail(e, "the added tokens are too long");
    t->added = xmalloc((added->len + 1) * sizeof *t->added);
    t->added_text = xmalloc(text_len + 1);

    /* Their contents back to back, then the tokens sorted: a content given
     * twice lands next to its twin. */
    size_t at = 0;
    for (size_t i = 0; i < added->len; i++) {
        const JsonValue *content = json_get(&added->items[i], "content");
        memcpy(t->added_text + at, content->string, content->len);
        t->added[i] = (AddedToken){t->added_text + at, (uint32_t)content->len,
                                   (int)json_get(&added->items[i], "id")->number.integer};
        at += content->len;
        t->added_starts[(unsigned char)content->string[0]] = true;
    }
    t->is_special = xcalloc((size_t)t->vocab_size, sizeof *t->is_special);
    for (size_t i = 0; i < added->len; i++) {
        const JsonValue *special = json_get(&added->items[i], "special");
        t->is_special[json_get(&added->items[i], "id")->number.integer] = special && special->boolean;
    }
    t->n_added = (int)added->len;
    qsort(t->added, added->len, sizeof *t->added, compare_added);
    for (size_t i = 1; i < added->len; i++)
        if (compare_added(&t->added[i - 1], &t->added[i]) == 0)
            return fail(e, "added token '%s' is given twice", shown(t->added[i].content, t->added[i].len, buf));
    return 0;
}

/* Checks the added tokens' ids and puts their bytes into the token table.
 *
 * Hugging Face's tokenizers numbers the added tokens itself, in the order
 * of the file, and only warns when tokenizer.json says otherwise: one that
 * is a vocabulary token (spelled alike) has that token's id; any other takes
 * the number of vocabulary entries, or one more than the largest added id
 * so far when that is larger. A file with other ids is refused. */
static int number_added(Tokenizer *t, const JsonValue *vocab, const JsonValue *added, const bool *shared,
                        const int16_t *char_byte, Error *e) {
    char buf[48];
    size_t text_len = 0;
    for (size_t i = 0; i < added->len; i++) text_len += json_get(&added->items[i], "content")->len;
    /* In the order of the file, each token's bytes (but for one that is a
     * vocabulary token: those are there). */
    char *bytes = xmalloc(text_len + 1);
    int64_t largest = -1;  /* the largest added id so far */
    int rc = 0;
    for (size_t i = 0; i < added->len && rc == 0; i++) {
        const JsonValue *content = json_get(&added->items[i], "content");
        int id = (int)json_get(&added->items[i], "id")->number.integer;
        bool in_alphabet;
        size_t len = added_token_bytes(char_byte, content->string, content->len, bytes, &in_alphabet);
        int in_vocab = in_alphabet ? vocab_find(t, bytes, len) : -1;
        int64_t fresh = largest >= (int64_t)vocab->len ? largest + 1 : (int64_t)vocab->len;
        int64_t hf_id = in_vocab >= 0 ? in_vocab : fresh;
        if (hf_id != id)
            rc = fail(e, "added token '%s' has id %d where Hugging Face's tokenizers gives it id %lld",
                      shown(content->string, content->len, buf), id, (long long)hf_id);
        else if (shared[i] && in_vocab < 0)
            rc = fail(e, "token id %d is given twice", id);
        else if (!shared[i])
            memcpy(t->bytes + t->start[id], bytes, len);
        if (id > largest) largest = id;
    }
    free(bytes);
    return rc;
}

/* The ids of a TemplateProcessing post-processor's "single" template, the
 * one for a text on its own: the ids of the special tokens before the text
 * ($A) make the prefix, those after it the suffix. ("pair", for two texts
 * encoded together, is not used.) */
static int read_template(Tokenizer *t, const JsonValue *template, Error *e) {
    char buf[48];
    const JsonValue *single = json_get(template, "single"), *specials = json_get(template, "special_tokens");
    if (!single || single->type != JSON_ARRAY)
        return fail(e, "post_processor TemplateProcessing has no \"single\" array");
    if (!specials || specials->type != JSON_OBJECT)
        return fail(e, "post_processor TemplateProcessing has no \"special_tokens\" object");
    size_t n_texts = 0;
    for (size_t i = 0; i < single->len; i++) {
        const JsonValue *sequence = json_get(&single->items[i], "Sequence");
        const JsonValue *name = json_get(json_get(&single->items[i], "SpecialToken"), "id");
        if (sequence) {
            if (!json_is_string(json_get(sequence, "id"), "A"))
                return fail(e, "post_processor TemplateProcessing: the single template's sequence is not $A");
            n_texts++;
            continue;
        }
        if (!name || name->type != JSON_STRING)
            return fail(e, "post_processor TemplateProcessing: item %zu of the single template is neither "
                           "a SpecialToken nor a Sequence", i);
        const JsonValue *ids = json_get(json_get(specials, name->string), "ids");
        if (!ids || ids->type != JSON_ARRAY)
            return fail(e, "post_processor TemplateProcessing: special token '%s' has no \"ids\" in \"special_tokens\"",
                        shown(name->string, name->len, buf));
        for (size_t k = 0; k < ids->len; k++) {
            const JsonValue *id = &ids->items[k];
            if (!is_id(id) || !has_token(t, (int)id->number.integer))
                return fail(e, "post_processor TemplateProcessing: special token '%s' has an id that is no token",
                            shown(name->string, name->len, buf));
            token_ids_push(&t->special, (int)id->number.integer);
            if (n_texts == 0) t->n_prefix++;
        }
    }
    if (n_texts != 1) return fail(e, "post_processor TemplateProcessing: the single template must hold $A once");
    return 0;
}

/* The post-processor: none, ByteLevel (which only moves offsets, so ids
 * stay as they are), TemplateProcessing, or a Sequence of these with at
 * most one TemplateProcessing (Llama 3: ByteLevel then TemplateProcessing). */
static int read_post_processor(Tokenizer *t, const JsonValue *post, Error *e) {
    char buf[128];
    if (json_is_null(post)) return 0;
    bool is_sequence = json_is_string(json_get(post, "type"), "Sequence");
    const JsonValue *steps = is_sequence ? json_get(post, "processors") : post;
    size_t n = is_sequence ? (steps && steps->type == JSON_ARRAY ? steps->len : 0) : 1;
    bool ok = !is_sequence || (steps && steps->type == JSON_ARRAY), template_seen = false;
    for (size_t i = 0; i < n && ok; i++) {
        const JsonValue *step = is_sequence ? &steps->items[i] : post;
        if (json_is_string(json_get(step, "type"), "ByteLevel")) continue;
        ok = json_is_string(json_get(step, "type"), "TemplateProcessing") && !template_seen;
        template_seen = true;
        if (ok && read_template(t, step, e) != 0) return -1;
    }
    if (!ok)
        return fail(e, "post_processor %s is not supported (only ByteLevel, TemplateProcessing, a Sequence of them, "
                       "or none)", is_sequence ? sequence_types(steps, buf) : section_type(post));
    return 0;
}

/* The two halves of merge rule m: "left right" strings or ["left", "right"]
 * pairs. Returns -1 when it is neither. */
static int merge_halves(const JsonValue *m, const char **left, size_t *left_len, const char **right,
                        size_t *right_len) {
    if (m->type == JSON_STRING) {
        const char *space = memchr(m->string, ' ', m->len);
        if (!space || memchr(space + 1, ' ', m->len - (size_t)(space + 1 - m->string))) return -1;
        *left = m->string, *left_len = (size_t)(space - m->string);
        *right = space + 1, *right_len = m->len - *left_len - 1;
        return 0;
    }
    if (m->type != JSON_ARRAY || m->len != 2 || m->items[0].type != JSON_STRING || m->items[1].type != JSON_STRING)
        return -1;
    *left = m->items[0].string, *left_len = m->items[0].len;
    *right = m->items[1].string, *right_len = m->items[1].len;
    return 0;
}

/* A merge rule being read: its halves decoded side by side (together they
 * spell the merged token), and the three tokens' hashes, then ids. */
typedef struct {
    size_t at, left_len, right_len;  /* the left half is text[at ..], the right one follows it */
    uint64_t hash[3];                /* of the left, right and merged tokens */
    int id[3];
    uint64_t pair_hash;              /* of the pair of ids, for the table of rules */
} MergeText;

/* Rules are read in batches, one pass over a batch per step rather than one
 * rule at a time: a look-up in the big hash tables usually misses the cache,
 * and a tight loop of independent look-ups lets the processor wait for many
 * misses at once. The look-ups PREFETCH rules ahead are also prefetched. */
enum { MERGE_BATCH = 1024, PREFETCH = 8 };

/* Reads model.merges into t's table of merge rules; a rule's rank is its
 * position in the list. */
static int load_merges(Tokenizer *t, const JsonValue *merges, const int16_t *char_byte, Error *e) {
    char buf[48], buf2[48];
    if (!merges || merges->type != JSON_ARRAY) return fail(e, "no \"model.merges\" array");
    t->merge_mask = table_size(merges->len) - 1;
    t->merges = xmalloc((t->merge_mask + 1) * sizeof *t->merges);
    for (size_t i = 0; i <= t->merge_mask; i++) t->merges[i].pair = EMPTY_PAIR;
    MergeText *batch = xmalloc(MERGE_BATCH * sizeof *batch);
    char *text = NULL;
    size_t text_cap = 0;
    int rc = 0;
    for (size_t first = 0; first < merges->len && rc == 0; first += MERGE_BATCH) {
        size_t n = merges->len - first < MERGE_BATCH ? merges->len - first : MERGE_BATCH;

        /* 1. Split and decode each rule, and hash its tokens. */
        size_t used = 0;
        for (size_t i = 0; i < n && rc == 0; i++) {
            const char *left, *right;
            size_t left_len, right_len;
            if (merge_halves(&merges->items[first + i], &left, &left_len, &right, &right_len) != 0) {
                rc = fail(e, "merge %zu is neither a \"left right\" string nor a pair of strings", first + i);
                break;
            }
            if (used + left_len + right_len > text_cap)
                text = xrealloc(text, text_cap = 2 * (used + left_len + right_len), 1);
            MergeText *m = &batch[i];
            long a = spelling_bytes(char_byte, left, left_len, text + used);
            long b = a < 0 ? -1 : spelling_bytes(char_byte, right, right_len, text + used + a);
            if (a <= 0 || b <= 0) {
                rc = fail(e, "merge %zu: '%s' is not in the vocabulary", first + i,
                          a <= 0 ? shown(left, left_len, buf) : shown(right, right_len, buf));
                break;
            }
            *m = (MergeText){.at = used, .left_len = (size_t)a, .right_len = (size_t)b};
            m->hash[0] = hash_bytes(text + used, m->left_len);
            m->hash[1] = hash_bytes(text + used + a, m->right_len);
            m->hash[2] = hash_bytes(text + used, m->left_len + m->right_len);
            used += m->left_len + m->right_len;
        }

        /* 2. Look the tokens up. */
        for (size_t i = 0; i < n && rc == 0; i++) {
            MergeText *m = &batch[i];
            for (int k = 0; k < 3 && i + PREFETCH < n; k++)
                __builtin_prefetch(&t->vocab[batch[i + PREFETCH].hash[k] & t->vocab_mask]);
            const char *s = text + m->at;
            m->id[0] = t->vocab[vocab_slot(t, s, m->left_len, m->hash[0])].id;
            m->id[1] = t->vocab[vocab_slot(t, s + m->left_len, m->right_len, m->hash[1])].id;
            m->id[2] = t->vocab[vocab_slot(t, s, m->left_len + m->right_len, m->hash[2])].id;
        }
        for (size_t i = 0; i < n && rc == 0; i++) {
            const MergeText *m = &batch[i];
            const char *left, *right;
            size_t left_len, right_len;
            if (m->id[0] >= 0 && m->id[1] >= 0 && m->id[2] >= 0) continue;
            merge_halves(&merges->items[first + i], &left, &left_len, &right, &right_len);
            if (m->id[0] < 0 || m->id[1] < 0)
                rc = fail(e, "merge %zu: '%s' is not in the vocabulary", first + i,
                          m->id[0] < 0 ? shown(left, left_len, buf) : shown(right, right_len, buf));
            else
                rc = fail(e, "merge %zu: the token it makes ('%s' + '%s') is not in the vocabulary", first + i,
                          shown(left, left_len, buf), shown(right, right_len, buf2));
        }

        /* 3. Enter the rules in the table (hashing all the pairs first, to
         * know which slots to prefetch). */
        for (size_t i = 0; i < n && rc == 0; i++) batch[i].pair_hash = mix64(pair_key(batch[i].id[0], batch[i].id[1]));
        for (size_t i = 0; i < n && rc == 0; i++) {
            const MergeText *m = &batch[i];
            if (i + PREFETCH < n) __builtin_prefetch(&t->merges[batch[i + PREFETCH].pair_hash & t->merge_mask]);
            uint64_t key = pair_key(m->id[0], m->id[1]);
            size_t slot = m->pair_hash & t->merge_mask;
            while (t->merges[slot].pair != EMPTY_PAIR && t->merges[slot].pair != key) slot = (slot + 1) & t->merge_mask;
            if (t->merges[slot].pair == key)
                rc = fail(e, "merge %zu repeats merge %u", first + i, t->merges[slot].rank);
            else
                t->merges[slot] = (Merge){key, (uint32_t)(first + i), m->id[2]};
        }
    }
    free(batch);
    free(text);
    return rc;
}

/* The BPE model's unk_token, which must be a vocabulary token. */
static int read_unk(Tokenizer *t, const JsonValue *unk, Error *e) {
    char buf[48];
    t->unk_id = -1;
    if (json_is_null(unk)) return 0;
    t->unk_id = vocab_find(t, unk->string, unk->len);
    if (t->unk_id < 0) return fail(e, "BPE unk_token '%s' is not in the vocabulary", shown(unk->string, unk->len, buf));
    return 0;
}

/* What each token stands for mid-text, for tokenizer_token (not for a
 * byte-level tokenizer, whose tokens are stored so). */
static void make_pieces(Tokenizer *t) {
    Bytes all = {0};
    t->piece_start = xmalloc(((size_t)t->vocab_size + 1) * sizeof *t->piece_start);
    for (int id = 0; id < t->vocab_size; id++) {
        t->piece_start[id] = (uint32_t)all.len;
        size_t len;
        char *piece = has_token(t, id) ? decoder_piece(&t->decoder, t->bytes + t->start[id], token_len(t, id), &len) : NULL;
        if (piece) bytes_add(&all, piece, len);
        free(piece);
    }
    t->piece_start[t->vocab_size] = (uint32_t)all.len;
    bytes_add(&all, "", 0);
    t->piece_bytes = all.text;
}

/* The vocabulary's tables from tokenizer.json: the tokens, the vocabulary
 * and the added tokens, and the merges after the post-processor (the order
 * of the checks, and so of the first error a broken file reports). */
static int build_vocab(Tokenizer *t, const JsonValue *vocab, const JsonValue *added, const int16_t *char_byte,
                       Error *e) {
    bool *shared = xcalloc(added->len + 1, sizeof *shared);
    int rc = lay_out_tokens(t, vocab, added, char_byte, shared, e);
    if (rc == 0) rc = load_vocab(t, vocab, char_byte, e);
    if (rc == 0) rc = index_added(t, added, e);
    if (rc == 0) rc = number_added(t, vocab, added, shared, char_byte, e);
    free(shared);
    return rc;
}

/* The tables as a prepared tokenizer holds them. */
static TokenTables tables_of(const Tokenizer *t) {
    TokenTables tab = {
        .vocab_size = t->vocab_size, .bpe_vocab_size = t->bpe_vocab_size, .byte_level = t->byte_level,
        .start = t->start, .bytes = t->bytes, .vocab = t->vocab, .vocab_slots = t->vocab_mask + 1,
        .merges = t->merges, .merge_slots = t->merge_mask + 1, .piece_start = t->piece_start,
        .piece_bytes = t->piece_bytes};
    memcpy(tab.byte_token, t->byte_token, sizeof tab.byte_token);
    return tab;
}

/* Takes the tables of a prepared tokenizer (a read-only mapping: nothing
 * writes to the tables once they are loaded), then lists the added tokens
 * (their bytes are in the tables). */
static int use_tables(Tokenizer *t, const TokenTables *tab, const JsonValue *added, Error *e) {
    bool sound = tab->byte_level == t->byte_level && (tab->piece_start != NULL) == !t->byte_level;
    for (int b = 0; b < 256 && sound && t->byte_level; b++) sound = tab->byte_token[b] >= 0;
    if (!sound) return fail(e, "the prepared tokenizer does not fit the pipeline");
    for (size_t i = 0; i < added->len; i++)
        if (check_added(&added->items[i], i, e) != 0) return -1;
    t->vocab_size = tab->vocab_size;
    t->bpe_vocab_size = tab->bpe_vocab_size;
    memcpy(t->byte_token, tab->byte_token, sizeof t->byte_token);
    t->start = (uint32_t *)tab->start;
    t->bytes = (char *)tab->bytes;
    t->vocab = (VocabSlot *)tab->vocab;
    t->vocab_mask = tab->vocab_slots - 1;
    t->merges = (Merge *)tab->merges;
    t->merge_mask = tab->merge_slots - 1;
    t->piece_start = (uint32_t *)tab->piece_start;
    t->piece_bytes = (char *)tab->piece_bytes;
    return index_added(t, added, e);
}

/* Reads the parsed tokenizer.json into t: its tables from `tables` when
 * given (then the JSON has no model.vocab and model.merges), else from
 * the JSON. */
static int read_tokenizer(Tokenizer *t, const JsonValue *root, const TokenTables *tables, Error *e) {
    int16_t alphabet[ALPHABET_END];
    make_byte_level_alphabet(t->byte_char, alphabet);
    const JsonValue *model = json_get(root, "model"), *vocab = json_get(model, "vocab"),
                    *added = json_get(root, "added_tokens");
    const JsonValue no_added = {.type = JSON_ARRAY};
    int rc = read_pipeline(t, root, e);
    if (rc == 0 && !tables && (!vocab || vocab->type != JSON_OBJECT)) rc = fail(e, "no \"model.vocab\" object");
    if (rc == 0 && !json_is_null(added) && added->type != JSON_ARRAY)
        rc = fail(e, "\"added_tokens\" is %s, not an array", json_type_name(added->type));
    if (json_is_null(added)) added = &no_added;
    const int16_t *char_byte = t->byte_level ? alphabet : NULL;
    if (rc == 0) rc = tables ? use_tables(t, tables, added, e) : build_vocab(t, vocab, added, char_byte, e);
    if (rc == 0) rc = read_unk(t, json_get(model, "unk_token"), e);
    if (rc == 0) rc = read_post_processor(t, json_get(root, "post_processor"), e);
    if (rc == 0 && !tables) rc = load_merges(t, json_get(model, "merges"), char_byte, e);
    normalizer_own(&t->normalizer);
    pretokenizer_own(&t->pre_tokenizer);
    decoder_own(&t->decoder);
    if (rc == 0 && !tables && !t->byte_level) make_pieces(t);
    return rc;
}

/* The members of tokenizer.json that the prepared tables stand for. */
static const char *const IN_TABLES[] = {"model.vocab", "model.merges", NULL};

/* A tokenizer from tokenizer.json's text[0..len), or with `tables` from
 * the rest of it that a prepared tokenizer holds. */
static Tokenizer *tokenizer_parse(const char *text, size_t len, const TokenTables *tables, Error *e) {
    JsonDoc doc;
    if (json_parse_except(&doc, text, len, tables ? IN_TABLES : NULL, NULL, e) != 0) return NULL;
    Tokenizer *t = xcalloc(1, sizeof *t);
    int rc = read_tokenizer(t, &doc.root, tables, e);
    json_free(&doc);
    if (rc != 0) {
        if (tables) t->start = NULL, t->bytes = NULL, t->vocab = NULL, t->merges = NULL, t->piece_start = NULL,
                    t->piece_bytes = NULL;  /* the mapping's, not to be freed */
        tokenizer_free(t);
        return NULL;
    }
    t->cache.slots = xcalloc(CACHE_SLOTS, sizeof *t->cache.slots);
    t->cache.keys = xmalloc(CACHE_KEY_BYTES);
    t->cache.ids = xmalloc(CACHE_IDS * sizeof *t->cache.ids);
    return t;
}

/* Writes t's tables as the prepared tokenizer of the tokenizer.json at path,
 * whose text[0..len) they were built from, with the rest of that text (the
 * values of model.vocab and model.merges made null). Nothing is written
 * when the file changed while it was read (its key is not `key` then). */
static void write_prepared(const Tokenizer *t, const char *path, uint64_t key, const char *text, size_t len) {
    JsonSpan spans[2];
    JsonDoc doc;
    Error unused;
    uint64_t key_now;
    if (json_parse_except(&doc, text, len, IN_TABLES, spans, &unused) != 0 || tokenizer_cache_key(path, &key_now) != 0 ||
        key_now != key)
        return;
    json_free(&doc);
    /* The text between the cut values, in the order they come. */
    int first = spans[0].start <= spans[1].start ? 0 : 1;
    const JsonSpan *cuts[2] = {&spans[first], &spans[1 - first]};
    Bytes rest = {0};
    size_t at = 0;
    for (int i = 0; i < 2; i++) {
        if (cuts[i]->end == 0) continue;  /* not there */
        bytes_add(&rest, text + at, cuts[i]->start - at);
        bytes_add(&rest, "null", 4);
        at = cuts[i]->end;
    }
    bytes_add(&rest, text + at, len - at);
    TokenTables made = tables_of(t);
    made.rest = rest.text;
    made.rest_len = rest.len;
    tokenizer_cache_write(path, key, &made, &unused);
    free(rest.text);
}

/* Loads the tokenizer.json at path; with `prepared`, from the prepared
 * tokenizer when one is up to date (tokenizer.json is then not read), else
 * from the JSON, writing the prepared tokenizer for the next start (when
 * that fails, the next start reads the JSON again: nothing else changes). */
static Tokenizer *load(const char *path, bool prepared, Error *e) {
    uint64_t key;
    prepared = prepared && tokenizer_cache_key(path, &key) == 0;
    TokenTables tables;
    const void *map;
    size_t map_size;
    Error unused;
    if (prepared && tokenizer_cache_find(&tables, &map, &map_size, path, key, &unused) == 0) {
        Tokenizer *t = tokenizer_parse(tables.rest, tables.rest_len, &tables, &unused);
        if (t) {
            t->tables_map = map;
            t->tables_map_size = map_size;
            return t;
        }
        unmap_file(map, map_size);  /* it does not fit the JSON it holds: made again */
    }
    const void *text;
    size_t len;
    if (json_map_file(path, &text, &len, e) != 0) return NULL;
    Error why;
    Tokenizer *t = tokenizer_parse(text ? text : "", len, NULL, &why);
    if (t && prepared) write_prepared(t, path, key, text ? text : "", len);
    unmap_file(text, len);
    if (!t) fail(e, "%s: %s", path, why.msg);
    return t;
}

Tokenizer *tokenizer_load(const char *path, Error *e) { return load(path, false, e); }

Tokenizer *tokenizer_load_prepared(const char *path, Error *e) { return load(path, true, e); }

void tokenizer_free(Tokenizer *t) {
    if (!t) return;
    normalizer_free(&t->normalizer);
    pretokenizer_free(&t->pre_tokenizer);
    decoder_free(&t->decoder);
    if (t->tables_map) {
        unmap_file(t->tables_map, t->tables_map_size);
    } else {
        free(t->piece_bytes);
        free(t->piece_start);
        free(t->bytes);
        free(t->start);
        free(t->vocab);
        free(t->merges);
    }
    free(t->added);
    free(t->is_special);
    free(t->added_text);
    free(t->cache.slots);
    free(t->cache.keys);
    free(t->cache.ids);
    free(t->symbols);
    free(t->heap);
    token_ids_free(&t->special);
    free(t);
}

/* ---- token id lists ---- */

void token_ids_push(TokenIds *list, int id) {
    if (list->n == list->cap) {
        list->cap = list->cap ? 2 * list->cap : 64;
        list->ids = xrealloc(list->ids, list->cap, sizeof *list->ids);
    }
    list->ids[list->n++] = id;
}

void token_ids_free(TokenIds *list) {
    free(list->ids);
    *list = (TokenIds){0};
}

/* ---- BPE ---- */

static bool candidate_before(const Candidate *a, const Candidate *b) {
    return a->rank < b->rank || (a->rank == b->rank && a->left < b->left);
}

/* Pushes the pair of tokens at positions left and right when a merge rule
 * joins them. */
static void push_candidate(Tokenizer *t, size_t left, size_t right) {
    const Merge *m = merge_find(t, t->symbols[left].id, t->symbols[right].id);
    if (!m) return;
    if (t->heap_n == t->heap_cap) {
        t->heap_cap = t->heap_cap ? 2 * t->heap_cap : 256;
        t->heap = xrealloc(t->heap, t->heap_cap, sizeof *t->heap);
    }
    Candidate c = {m->rank, m->merged, left, t->symbols[left].id, t->symbols[right].id};
    size_t i = t->heap_n++;
    while (i > 0 && candidate_before(&c, &t->heap[(i - 1) / 2])) {
        t->heap[i] = t->heap[(i - 1) / 2];
        i = (i - 1) / 2;
    }
    t->heap[i] = c;
}

static Candidate pop_candidate(Tokenizer *t) {
    Candidate top = t->heap[0], last = t->heap[--t->heap_n];
    size_t i = 0;
    for (;;) {
        size_t child = 2 * i + 1;
        if (child >= t->heap_n) break;
        if (child + 1 < t->heap_n && candidate_before(&t->heap[child + 1], &t->heap[child])) child++;
        if (!candidate_before(&t->heap[child], &last)) break;
        t->heap[i] = t->heap[child];
        i = child;
    }
    if (t->heap_n > 0) t->heap[i] = last;
    return top;
}

/* The tokens BPE starts from, into t->symbols (room for n): for a
 * byte-level tokenizer each byte's; else each character's, and for a
 * character not in the vocabulary its bytes' <0xNN> tokens (byte_fallback,
 * when all are there), or the unk token (fuse_unk: one for a run of such
 * characters), or nothing when there is no unk token. Returns how many. */
static size_t first_symbols(Tokenizer *t, const char *piece, size_t n) {
    Symbol *sym = t->symbols;
    if (t->byte_level) {
        for (size_t i = 0; i < n; i++) sym[i].id = t->byte_token[(unsigned char)piece[i]];
        return n;
    }
    size_t count = 0;
    bool unk_last = false;  /* the last token is an unk for characters not in the vocabulary */
    for (size_t i = 0, len; i < n; i += len) {
        uint32_t c;
        bool truncated;
        len = utf8_next(piece + i, n - i, &c, &truncated);
        int id = vocab_find(t, piece + i, len);
        bool bytes = id < 0 && t->byte_fallback;
        for (size_t k = 0; bytes && k < len; k++) bytes = t->byte_token[(unsigned char)piece[i + k]] >= 0;
        if (id >= 0) {
            sym[count++].id = id;
        } else if (bytes) {
            for (size_t k = 0; k < len; k++) sym[count++].id = t->byte_token[(unsigned char)piece[i + k]];
        } else if (t->unk_id >= 0 && !(t->fuse_unk && unk_last)) {
            sym[count++].id = t->unk_id;
        }
        unk_last = id < 0 && !bytes && t->unk_id >= 0;
    }
    return count;
}

/* Merges the bytes of one piece into tokens and appends their ids: while
 * some neighbouring pair has a merge rule, the pair with the lowest rank
 * (the leftmost of equals) becomes one token. A heap of candidate pairs
 * makes this O(n log n); a candidate whose tokens changed since it was
 * pushed is stale and skipped. (The ids tell: a token that merges takes a
 * longer token's id, never one it had before.) */
static void bpe(Tokenizer *t, const char *piece, size_t n, TokenIds *out) {
    if (n > t->symbols_cap) t->symbols = xrealloc(t->symbols, t->symbols_cap = n, sizeof *t->symbols);
    Symbol *sym = t->symbols;
    n = first_symbols(t, piece, n);
    if (n == 0) return;
    for (size_t i = 0; i < n; i++) sym[i].prev = i == 0 ? NONE : i - 1, sym[i].next = i + 1 == n ? NONE : i + 1;
    t->heap_n = 0;
    for (size_t i = 0; i + 1 < n; i++) push_candidate(t, i, i + 1);
    while (t->heap_n > 0) {
        Candidate c = pop_candidate(t);
        Symbol *left = &sym[c.left];
        if (left->id != c.left_id || left->next == NONE || sym[left->next].id != c.right_id) continue;
        size_t right = left->next;
        left->id = c.merged;
        left->next = sym[right].next;
        sym[right].id = -1;
        if (left->next != NONE) sym[left->next].prev = c.left;
        if (left->prev != NONE) push_candidate(t, left->prev, c.left);
        if (left->next != NONE) push_candidate(t, c.left, left->next);
    }
    for (size_t i = 0; i != NONE; i = sym[i].next) token_ids_push(out, sym[i].id);
}

/* ---- the piece cache ---- */

static const CacheEntry *cache_find(const PieceCache *c, const char *piece, size_t n, uint64_t hash) {
    for (size_t i = hash & (CACHE_SLOTS - 1);; i = (i + 1) & (CACHE_SLOTS - 1)) {
        const CacheEntry *s = &c->slots[i];
        if (s->hash == 0) return NULL;
        if (s->hash == hash && s->key_len == n && memcmp(c->keys + s->key, piece, n) == 0) return s;
    }
}

static void cache_add(PieceCache *c, const char *piece, size_t n, uint64_t hash, const int *ids, size_t n_ids) {
    if (c->n_entries == CACHE_MAX_ENTRIES || c->keys_used + n > CACHE_KEY_BYTES || c->ids_used + n_ids > CACHE_IDS) {
        memset(c->slots, 0, CACHE_SLOTS * sizeof *c->slots);
        c->n_entries = c->keys_used = c->ids_used = 0;
    }
    size_t i = hash & (CACHE_SLOTS - 1);
    while (c->slots[i].hash != 0) i = (i + 1) & (CACHE_SLOTS - 1);
    c->slots[i] = (CacheEntry){hash, (uint32_t)c->keys_used, (uint32_t)c->ids_used, (uint16_t)n, (uint16_t)n_ids};
    memcpy(c->keys + c->keys_used, piece, n);
    if (n_ids > 0) memcpy(c->ids + c->ids_used, ids, n_ids * sizeof *ids);
    c->keys_used += n;
    c->ids_used += n_ids;
    c->n_entries++;
}

/* Appends the ids of one piece: BPE's, from the cache when the piece was
 * seen before. */
static void encode_piece(Tokenizer *t, const char *piece, size_t n, TokenIds *out) {
    uint64_t hash = hash_bytes(piece, n);
    /* ignore_merges: a piece that is a vocabulary token is that one token,
     * even when no merges make it (Llama 3 has 588 such tokens). */
    if (t->ignore_merges) {
        int id = t->vocab[vocab_slot(t, piece, n, hash)].id;
        if (id >= 0) {
            token_ids_push(out, id);
            return;
        }
    }
    if (n > CACHE_MAX_PIECE) {
        bpe(t, piece, n, out);
        return;
    }
    hash |= 1;  /* never 0, the free cache slots' mark */
    const CacheEntry *hit = cache_find(&t->cache, piece, n, hash);
    if (hit) {
        for (size_t i = 0; i < hit->n_ids; i++) token_ids_push(out, t->cache.ids[hit->ids + i]);
        return;
    }
    size_t before = out->n;
    bpe(t, piece, n, out);
    cache_add(&t->cache, piece, n, hash, out->ids + before, out->n - before);
}

/* The pre-tokenizer hands each piece to BPE through a sink. */
typedef struct {
    Tokenizer *t;
    TokenIds *out;
} PieceSink;

static void encode_to_sink(void *ctx, const char *piece, size_t n) {
    PieceSink *sink = ctx;
    encode_piece(sink->t, piece, n, sink->out);
}

/* Encodes text with no added tokens in it: the normalizer, the
 * pre-tokenizer, BPE. at_start: the text begins the one given to encode. */
static void encode_text(Tokenizer *t, const char *s, size_t n, bool at_start, TokenIds *out) {
    if (n == 0) return;
    size_t len;
    char *normalized = normalizer_apply(&t->normalizer, s, n, &len);
    PieceSink sink = {t, out};
    pretokenize(&t->pre_tokenizer, normalized ? normalized : s, normalized ? len : n, at_start, encode_to_sink, &sink);
    free(normalized);
}

/* Where added token a stands among tokens whose first d bytes are alike:
 * -1 when it ends there, else its byte d. Sorted tokens rank in order. */
static int rank_at(const AddedToken *a, size_t d) { return a->len == d ? -1 : (unsigned char)a->content[d]; }

/* The first of the sorted added[lo..hi) whose rank at byte d is above limit. */
static size_t first_above(const Tokenizer *t, size_t lo, size_t hi, size_t d, int limit) {
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (rank_at(&t->added[mid], d) > limit) hi = mid;
        else lo = mid + 1;
    }
    return lo;
}

/* The longest added token at s[i], or NULL. The tokens that begin with
 * s[i..i+d) make a range of the sorted list, narrowed one byte at a time;
 * a token that is exactly s[i..i+d+1) comes first in its range. */
static const AddedToken *added_at(const Tokenizer *t, const char *s, size_t n, size_t i) {
    if (!t->added_starts[(unsigned char)s[i]]) return NULL;
    const AddedToken *longest = NULL;
    size_t lo = 0, hi = (size_t)t->n_added;
    for (size_t d = 0; i + d < n && lo < hi; d++) {
        int c = (unsigned char)s[i + d];
        lo = first_above(t, lo, hi, d, c - 1);
        hi = first_above(t, lo, hi, d, c);
        if (lo < hi && t->added[lo].len == d + 1) longest = &t->added[lo];
    }
    return longest;
}

size_t tokenizer_encode(Tokenizer *t, const char *text, size_t len, EncodeMode mode, TokenIds *out) {
    if (mode & ENCODE_ADD_SPECIAL)
        for (size_t i = 0; i < t->n_prefix; i++) token_ids_push(out, t->special.ids[i]);
    char *valid;
    size_t valid_len;
    size_t n_replaced = utf8_lossy(text, len, &valid, &valid_len);
    if (valid) text = valid, len = valid_len;
    size_t done = 0, i = 0;  /* text[0..done) is encoded; an added token is looked for at i */
    while ((mode & ENCODE_ADDED_TOKENS) && i < len) {
        const AddedToken *a = added_at(t, text, len, i);
        if (!a) {
            i++;
            continue;
        }
        encode_text(t, text + done, i - done, done == 0, out);
        token_ids_push(out, a->id);
        i = done = i + a->len;
    }
    encode_text(t, text + done, len - done, done == 0, out);
    free(valid);
    if (mode & ENCODE_ADD_SPECIAL)
        for (size_t i = t->n_prefix; i < t->special.n; i++) token_ids_push(out, t->special.ids[i]);
    /* Let go of the scratch memory a very long piece needed. */
    if (t->symbols_cap > BPE_SCRATCH_KEPT) {
        free(t->symbols);
        free(t->heap);
        t->symbols = NULL, t->heap = NULL;
        t->symbols_cap = t->heap_cap = 0;
    }
    return n_replaced;
}

const int *tokenizer_special_prefix(const Tokenizer *t, size_t *n) {
    *n = t->n_prefix;
    return t->special.ids;
}

const int *tokenizer_special_suffix(const Tokenizer *t, size_t *n) {
    *n = t->special.n - t->n_prefix;
    return t->special.ids ? t->special.ids + t->n_prefix : NULL;
}

const PreTokenizer *tokenizer_pre_tokenizer(const Tokenizer *t) { return &t->pre_tokenizer; }

/* ---- decoding ---- */

void decode_stream_init(DecodeStream *d, const Tokenizer *t) { *d = (DecodeStream){.tokenizer = t}; }

void decode_stream_free(DecodeStream *d) {
    free(d->out);
    free(d->prefix);
    token_ids_free(&d->window);
    *d = (DecodeStream){0};
}

/* Feeds one byte: a character is given out once complete, U+FFFD once the
 * pending bytes cannot be completed (then the byte starts afresh). */
static void stream_byte(DecodeStream *d, char byte, size_t *len) {
    d->pending[d->n_pending++] = byte;
    uint32_t c;
    bool truncated;
    size_t used = utf8_next(d->pending, d->n_pending, &c, &truncated);
    if (c != UTF8_INVALID) {
        memcpy(d->out + *len, d->pending, used);
        *len += used;
        d->n_pending = 0;
    } else if (!truncated) {
        *len += utf8_put(UNICODE_REPLACEMENT, d->out + *len);
        size_t rest = d->n_pending - used;  /* 0, or 1: the byte just fed */
        d->n_pending = 0;
        if (rest) stream_byte(d, byte, len);
    }
}

/* The decoder's steps on the spellings of ids[0..n) (an id with no token
 * is skipped). */
static char *decode_steps(const Tokenizer *t, const int *ids, size_t n, size_t *len) {
    const char **tokens = xmalloc((n + 1) * sizeof *tokens);
    size_t *lens = xmalloc((n + 1) * sizeof *lens), count = 0;
    for (size_t i = 0; i < n; i++)
        if (has_token(t, ids[i])) {
            tokens[count] = t->bytes + t->start[ids[i]];
            lens[count++] = token_len(t, ids[i]);
        }
    char *text = decoder_run(&t->decoder, tokens, lens, count, len);
    free(tokens);
    free(lens);
    return text;
}

/* Streaming with the decoder's steps, which may look at more than one token
 * (a run of <0xNN> tokens, the text's first space): the window holds the
 * ids of the text given out last (n_context of them, whose text is the
 * prefix) and those since. Each new id decodes the window again; what lies
 * beyond the prefix is given out unless it ends in U+FFFD (a character
 * whose bytes are still to come), and those ids become the context. A
 * window that waits for more than MAX_HELD ids gives out what it has. When
 * the window's text no longer starts with the prefix (a run of byte tokens
 * that was valid UTF-8 is not once more bytes join it), the context is
 * dropped: the text given out then differs from tokenizer_decode's, which
 * has U+FFFD for each byte of such a run. */
enum { MAX_HELD = 16 };

static const char *give_out(DecodeStream *d, bool all, size_t *len) {
    size_t n;
    char *text = decode_steps(d->tokenizer, d->window.ids, d->window.n, &n);
    if (n < d->prefix_len || (d->prefix_len > 0 && memcmp(text, d->prefix, d->prefix_len) != 0)) {
        memmove(d->window.ids, d->window.ids + d->n_context, (d->window.n - d->n_context) * sizeof *d->window.ids);
        d->window.n -= d->n_context;
        d->n_context = d->prefix_len = 0;
        free(text);
        text = decode_steps(d->tokenizer, d->window.ids, d->window.n, &n);
    }
    bool incomplete = n >= 3 && memcmp(text + n - 3, "\xEF\xBF\xBD", 3) == 0;
    *len = 0;
    if (n > d->prefix_len && (all || !incomplete || d->window.n - d->n_context > MAX_HELD)) {
        *len = n - d->prefix_len;
        if (*len + 1 > d->out_cap) d->out = xrealloc(d->out, d->out_cap = *len + 1, 1);
        memcpy(d->out, text + d->prefix_len, *len);
        /* The ids just given out become the context. */
        size_t fresh = d->window.n - d->n_context;
        memmove(d->window.ids, d->window.ids + d->n_context, fresh * sizeof *d->window.ids);
        d->window.n = d->n_context = fresh;
        free(text);
        free(d->prefix);
        d->prefix = decode_steps(d->tokenizer, d->window.ids, d->window.n, &d->prefix_len);
        text = NULL;
    }
    free(text);
    if (d->out_cap == 0) d->out = xrealloc(d->out, d->out_cap = 1, 1);
    return d->out;
}

static const char *steps_stream_push(DecodeStream *d, int id, size_t *len) {
    token_ids_push(&d->window, id);
    return give_out(d, false, len);
}

static const char *steps_stream_flush(DecodeStream *d, size_t *len) {
    give_out(d, true, len);
    d->window.n = d->n_context = d->prefix_len = 0;
    free(d->prefix);
    d->prefix = NULL;
    return d->out;
}

const char *decode_stream_push(DecodeStream *d, int id, size_t *len) {
    if (!d->tokenizer->byte_level) return steps_stream_push(d, id, len);
    size_t n;
    const char *bytes = tokenizer_token(d->tokenizer, id, &n);
    if (!bytes) n = 0;
    /* Each byte gives out at most 3 (U+FFFD) + 3 (a U+FFFD for the pending). */
    if (6 * n + 4 > d->out_cap) d->out = xrealloc(d->out, d->out_cap = 6 * n + 4, 1);
    *len = 0;
    for (size_t i = 0; i < n; i++) stream_byte(d, bytes[i], len);
    return d->out;
}

const char *decode_stream_flush(DecodeStream *d, size_t *len) {
    if (!d->tokenizer->byte_level) return steps_stream_flush(d, len);
    if (d->out_cap < 4) d->out = xrealloc(d->out, d->out_cap = 4, 1);
    *len = d->n_pending ? utf8_put(UNICODE_REPLACEMENT, d->out) : 0;
    d->n_pending = 0;
    return d->out;
}

char *tokenizer_decode(const Tokenizer *t, const int *ids, size_t n, size_t *len) {
    if (!t->byte_level) return decode_steps(t, ids, n, len);
    DecodeStream d;
    decode_stream_init(&d, t);
    size_t cap = 64, used = 0, piece_len;
    char *buf = xmalloc(cap);
    for (size_t i = 0; i <= n; i++) {
        const char *piece = i < n ? decode_stream_push(&d, ids[i], &piece_len) : decode_stream_flush(&d, &piece_len);
        if (used + piece_len + 1 > cap) buf = xrealloc(buf, cap = 2 * (used + piece_len + 1), 1);
        memcpy(buf + used, piece, piece_len);
        used += piece_len;
    }
    buf[used] = '\0';
    decode_stream_free(&d);
    *len = used;
    return buf;
}
