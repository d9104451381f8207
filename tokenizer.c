/* tokenizer.c - loading tokenizer.json, then encoding (added tokens, NFC,
 * the pre-tokenizer regex, BPE, the post-processor) and decoding (bytes,
 * lossy UTF-8, streaming). */
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

#include "json.h"
#include "unicode.h"

/* The largest vocabulary accepted: bounds what a hostile file can make us
 * allocate (Qwen2 has 151,665 tokens). */
enum { MAX_VOCAB = 1 << 22 };

/* The pre-tokenizer regexes, as tokenizer.json spells them (JSON-decoded):
 * the patterns implemented, by hand, in tokenizer_piece_end(). */
static const char *const SPLIT_REGEX[] = {
    [SPLIT_QWEN2] = "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|"
                    "\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+",
    [SPLIT_LLAMA3] = "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+"
                     "[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+",
    [SPLIT_GPT2] = "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+",
};
enum { N_SPLIT_PATTERNS = sizeof SPLIT_REGEX / sizeof SPLIT_REGEX[0] };

/* ---- data structures ---- */

/* One merge rule: tokens left and right next to each other become merged. */
typedef struct {
    uint64_t pair;    /* left << 32 | right; EMPTY_PAIR marks a free slot */
    uint32_t rank;    /* position in the merges list: lower merges first */
    int32_t merged;
} Merge;

static const uint64_t EMPTY_PAIR = UINT64_MAX;

/* A slot of the vocabulary's hash table. The tag (bits of the token's hash)
 * rules out most other tokens without reading their bytes. */
typedef struct {
    uint32_t tag;
    int32_t id;       /* -1 marks a free slot */
} VocabSlot;

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
    int vocab_size;             /* largest id + 1 */
    char *bytes;                /* every token's bytes, back to back */
    uint32_t *start;            /* [vocab_size + 1]: token id is bytes[start[id] .. start[id + 1]),
                                   empty when no token has that id */
    uint16_t byte_char[256];    /* the byte-level alphabet: the character that shows each byte */
    int byte_token[256];        /* the vocabulary token of each single byte, where BPE starts */
    VocabSlot *vocab;           /* hash table of the vocabulary tokens by their bytes */
    size_t vocab_mask;          /* its size - 1 (a power of two) */
    Merge *merges;              /* hash table of merge rules by pair */
    size_t merge_mask;
    AddedToken *added;          /* [n_added] the added tokens, sorted by content (compare_content) */
    int n_added;
    char *added_text;           /* their contents, back to back */
    bool added_starts[256];     /* whether some added token begins with this byte */
    SplitPattern pattern;       /* the pre-tokenizer's regex */
    bool nfc;                   /* whether the normalizer is NFC (else there is none) */
    bool ignore_merges;         /* BPE: a piece that is a vocabulary token becomes that token */
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
    *len = token_len(t, id);
    return t->bytes + t->start[id];
}

char *tokenizer_spelling(const Tokenizer *t, int id) {
    size_t len;
    const char *bytes = tokenizer_token(t, id, &len);
    if (!bytes) return NULL;
    for (int i = 0; i < t->n_added; i++)
        if (t->added[i].id == id) {
            char *out = xmalloc(t->added[i].len + 1);
            memcpy(out, t->added[i].content, t->added[i].len);
            out[t->added[i].len] = '\0';
            return out;
        }
    char *out = xmalloc(2 * len + 1);  /* a byte's character takes 1 or 2 bytes */
    size_t n = 0;
    for (size_t i = 0; i < len; i++) n += utf8_put(t->byte_char[(unsigned char)bytes[i]], out + n);
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

/* Decodes a string of the byte-level alphabet s[0..n) into out (room for n
 * bytes); returns the number of bytes, or -1 when a character is not in the
 * alphabet. */
static long byte_level_decode(const int16_t *char_byte, const char *s, size_t n, char *out) {
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

/* Up to 40 bytes of s, with control characters as '?', for error messages. */
static const char *shown(const char *s, size_t n, char out[48]) {
    size_t cut = n <= 40 ? n : 40;
    while (cut < n && cut > 0 && ((unsigned char)s[cut] & 0xC0) == 0x80) cut--;
    for (size_t i = 0; i < cut; i++) out[i] = (unsigned char)s[i] < 0x20 || s[i] == 0x7F ? '?' : s[i];
    strcpy(out + cut, cut < n ? "..." : "");
    return out;
}

static bool is_string(const JsonValue *v, const char *s) {
    return v && v->type == JSON_STRING && v->len == strlen(s) && memcmp(v->string, s, v->len) == 0;
}

static bool is_null(const JsonValue *v) { return !v || v->type == JSON_NULL; }

static bool is_false(const JsonValue *v) { return is_null(v) || (v->type == JSON_BOOL && !v->boolean); }

static bool is_empty_string(const JsonValue *v) { return is_null(v) || is_string(v, ""); }

/* The "type" of a pipeline section, for messages: "BPE", "NFKC", ... */
static const char *type_of(const JsonValue *section) {
    const JsonValue *type = json_get(section, "type");
    return !section ? "(missing)" : type && type->type == JSON_STRING ? type->string : "(no type)";
}

/* The types of a Sequence's steps, for messages: "Sequence[Split, Digits]". */
static const char *sequence_types(const JsonValue *steps, char out[128]) {
    size_t n = (size_t)snprintf(out, 128, "Sequence[");
    for (size_t i = 0; steps && steps->type == JSON_ARRAY && i < steps->len && n < 128; i++)
        n += (size_t)snprintf(out + n, 128 - n, "%s%s", i ? ", " : "", type_of(&steps->items[i]));
    if (n < 128) snprintf(out + n, 128 - n, "]");
    return out;
}

/* The BPE model's options: the ones Hugging Face's files use, and
 * ignore_merges (Llama 3). */
static int read_model_options(Tokenizer *t, const JsonValue *model, Error *e) {
    if (!model || model->type != JSON_OBJECT) return fail(e, "no \"model\" object");
    if (!is_string(json_get(model, "type"), "BPE"))
        return fail(e, "model type %s is not supported (only BPE)", type_of(model));
    if (!is_null(json_get(model, "dropout")) || !is_false(json_get(model, "byte_fallback")) ||
        !is_empty_string(json_get(model, "continuing_subword_prefix")) ||
        !is_empty_string(json_get(model, "end_of_word_suffix")))
        return fail(e, "BPE options (dropout, byte_fallback, subword prefix or suffix) are not supported");
    const JsonValue *ignore_merges = json_get(model, "ignore_merges");
    if (!is_null(ignore_merges) && ignore_merges->type != JSON_BOOL)
        return fail(e, "BPE option ignore_merges is %s, not a boolean", json_type_name(ignore_merges->type));
    t->ignore_merges = !is_false(ignore_merges);
    return 0;
}

/* The pre-tokenizer: a Split by one of the regexes implemented, then the
 * byte-level mapping (Qwen2, Llama 3), or ByteLevel alone, which splits by
 * GPT-2's regex. ByteLevel's use_regex is true when missing, as in Hugging
 * Face's files; after a Split it would split the pieces again. */
static int read_pre_tokenizer(Tokenizer *t, const JsonValue *pre, Error *e) {
    char buf[128];
    if (is_string(json_get(pre, "type"), "ByteLevel")) {
        if (!is_false(json_get(pre, "add_prefix_space")))
            return fail(e, "pre_tokenizer ByteLevel with add_prefix_space is not supported");
        const JsonValue *use_regex = json_get(pre, "use_regex");
        if (use_regex && use_regex->type == JSON_BOOL && !use_regex->boolean)
            return fail(e, "pre_tokenizer ByteLevel without its regex (use_regex false) is not supported");
        t->pattern = SPLIT_GPT2;
        return 0;
    }
    const JsonValue *steps = json_get(pre, "pretokenizers");
    bool split_then_bytes = is_string(json_get(pre, "type"), "Sequence") && steps && steps->type == JSON_ARRAY &&
                            steps->len == 2 && is_string(json_get(&steps->items[0], "type"), "Split") &&
                            is_string(json_get(&steps->items[1], "type"), "ByteLevel");
    if (!split_then_bytes)
        return fail(e, "pre_tokenizer %s is not supported (only Sequence[Split, ByteLevel] or ByteLevel)",
                    is_string(json_get(pre, "type"), "Sequence") ? sequence_types(steps, buf) : type_of(pre));
    const JsonValue *split = &steps->items[0], *byte_level = &steps->items[1];
    const JsonValue *regex = json_get(json_get(split, "pattern"), "Regex");
    if (!regex || regex->type != JSON_STRING)
        return fail(e, "pre_tokenizer Split has no \"pattern\" regex (a string pattern is not supported)");
    int pattern = 0;
    while (pattern < N_SPLIT_PATTERNS && !is_string(regex, SPLIT_REGEX[pattern])) pattern++;
    if (pattern == N_SPLIT_PATTERNS)
        return fail(e, "pre_tokenizer Split regex '%s' is not supported (only the Qwen2, Llama 3 and GPT-2 ones)",
                    shown(regex->string, regex->len, buf));
    t->pattern = (SplitPattern)pattern;
    if (!is_string(json_get(split, "behavior"), "Isolated") || !is_false(json_get(split, "invert")))
        return fail(e, "pre_tokenizer Split options are not supported (need Isolated, not inverted)");
    const JsonValue *use_regex = json_get(byte_level, "use_regex");
    if (!is_false(json_get(byte_level, "add_prefix_space")) || !use_regex || !is_false(use_regex))
        return fail(e, "pre_tokenizer ByteLevel options are not supported after a Split "
                       "(need add_prefix_space and use_regex false)");
    return 0;
}

/* Checks that tokenizer.json describes a pipeline implemented here, and
 * notes its choices in t (all but the post-processor, which names tokens). */
static int read_pipeline(Tokenizer *t, const JsonValue *root, Error *e) {
    if (root->type != JSON_OBJECT) return fail(e, "not a JSON object");
    if (read_model_options(t, json_get(root, "model"), e) != 0) return -1;

    const JsonValue *normalizer = json_get(root, "normalizer");
    if (!is_null(normalizer) && !is_string(json_get(normalizer, "type"), "NFC"))
        return fail(e, "normalizer %s is not supported (only NFC or none)", type_of(normalizer));
    t->nfc = !is_null(normalizer);
    if (read_pre_tokenizer(t, json_get(root, "pre_tokenizer"), e) != 0) return -1;

    const JsonValue *decoder = json_get(root, "decoder");
    if (!is_string(json_get(decoder, "type"), "ByteLevel"))
        return fail(e, "decoder %s is not supported (only ByteLevel)", type_of(decoder));
    if (!is_null(json_get(root, "truncation")) || !is_null(json_get(root, "padding")))
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
    if (!is_false(json_get(a, "lstrip")) || !is_false(json_get(a, "rstrip")) || !is_false(json_get(a, "single_word")) ||
        !is_false(json_get(a, "normalized")))
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
    long len = byte_level_decode(char_byte, s, n, out);
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
    for (size_t i = 0; i < added->len; i++) {
        if (check_added(&added->items[i], i, e) != 0) return -1;
        int64_t id = json_get(&added->items[i], "id")->number.integer;
        if (id > max_id) max_id = id;
    }
    if (max_id < 0) return fail(e, "the vocabulary is empty");
    t->vocab_size = (int)max_id + 1;

    /* Each token's length (a character of the byte-level alphabet is one
     * byte), then from the lengths each token's offset. */
    t->start = xcalloc((size_t)t->vocab_size + 1, sizeof *t->start);
    for (size_t i = 0; i < vocab->len; i++) {
        const JsonMember *m = &vocab->members[i];
        if (claim_id(t, (int)m->value.number.integer, count_chars(m->key, m->key_len), e) != 0) return -1;
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
        if (byte_level_decode(char_byte, m->key, m->key_len, t->bytes + t->start[id]) < 0) {
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
    for (unsigned b = 0; b < 256 && rc == 0; b++) {
        char byte = (char)b;
        t->byte_token[b] = vocab_find(t, &byte, 1);
        if (t->byte_token[b] < 0) rc = fail(e, "the vocabulary has no token for byte 0x%02X", b);
    }
    return rc;
}

/* Lists the added tokens, sorted by content, and puts them into the token
 * table.
 *
 * Hugging Face's tokenizers numbers the added tokens itself, in the order
 * of the file, and only warns when tokenizer.json says otherwise: one that
 * is a vocabulary token (spelled alike) has that token's id; any other takes
 * the number of vocabulary entries, or one more than the largest added id
 * so far when that is larger. A file with other ids is refused. */
static int load_added(Tokenizer *t, const JsonValue *vocab, const JsonValue *added, const bool *shared,
                      const int16_t *char_byte, Error *e) {
    char buf[48];
    size_t text_len = 0;
    for (size_t i = 0; i < added->len; i++) text_len += json_get(&added->items[i], "content")->len;
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
    t->n_added = (int)added->len;
    qsort(t->added, added->len, sizeof *t->added, compare_added);
    for (size_t i = 1; i < added->len; i++)
        if (compare_added(&t->added[i - 1], &t->added[i]) == 0)
            return fail(e, "added token '%s' is given twice", shown(t->added[i].content, t->added[i].len, buf));

    /* Hugging Face's numbering, in the order of the file, and each token's
     * bytes (but for one that is a vocabulary token: those are there). */
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
            if (!is_string(json_get(sequence, "id"), "A"))
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
    if (is_null(post)) return 0;
    bool is_sequence = is_string(json_get(post, "type"), "Sequence");
    const JsonValue *steps = is_sequence ? json_get(post, "processors") : post;
    size_t n = is_sequence ? (steps && steps->type == JSON_ARRAY ? steps->len : 0) : 1;
    bool ok = !is_sequence || (steps && steps->type == JSON_ARRAY), template_seen = false;
    for (size_t i = 0; i < n && ok; i++) {
        const JsonValue *step = is_sequence ? &steps->items[i] : post;
        if (is_string(json_get(step, "type"), "ByteLevel")) continue;
        ok = is_string(json_get(step, "type"), "TemplateProcessing") && !template_seen;
        template_seen = true;
        if (ok && read_template(t, step, e) != 0) return -1;
    }
    if (!ok)
        return fail(e, "post_processor %s is not supported (only ByteLevel, TemplateProcessing, a Sequence of them, "
                       "or none)", is_sequence ? sequence_types(steps, buf) : type_of(post));
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
            long a = byte_level_decode(char_byte, left, left_len, text + used);
            long b = a < 0 ? -1 : byte_level_decode(char_byte, right, right_len, text + used + a);
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

Tokenizer *tokenizer_load(const char *path, Error *e) {
    JsonDoc doc;
    if (json_parse_file(&doc, path, e) != 0) return NULL;
    Tokenizer *t = xcalloc(1, sizeof *t);
    int16_t char_byte[ALPHABET_END];
    make_byte_level_alphabet(t->byte_char, char_byte);
    const JsonValue *model = json_get(&doc.root, "model"), *vocab = json_get(model, "vocab"),
                    *added = json_get(&doc.root, "added_tokens");
    const JsonValue no_added = {.type = JSON_ARRAY};
    Error why;
    int rc = read_pipeline(t, &doc.root, &why);
    if (rc == 0 && (!vocab || vocab->type != JSON_OBJECT)) rc = fail(&why, "no \"model.vocab\" object");
    if (rc == 0 && !is_null(added) && added->type != JSON_ARRAY)
        rc = fail(&why, "\"added_tokens\" is %s, not an array", json_type_name(added->type));
    if (is_null(added)) added = &no_added;
    bool *shared = xcalloc(added->len + 1, sizeof *shared);
    if (rc == 0) rc = lay_out_tokens(t, vocab, added, char_byte, shared, &why);
    if (rc == 0) rc = load_vocab(t, vocab, char_byte, &why);
    if (rc == 0) rc = load_added(t, vocab, added, shared, char_byte, &why);
    free(shared);
    if (rc == 0) rc = read_post_processor(t, json_get(&doc.root, "post_processor"), &why);
    if (rc == 0) rc = load_merges(t, json_get(model, "merges"), char_byte, &why);
    json_free(&doc);
    if (rc != 0) {
        fail(e, "%s: %s", path, why.msg);
        tokenizer_free(t);
        return NULL;
    }
    t->cache.slots = xcalloc(CACHE_SLOTS, sizeof *t->cache.slots);
    t->cache.keys = xmalloc(CACHE_KEY_BYTES);
    t->cache.ids = xmalloc(CACHE_IDS * sizeof *t->cache.ids);
    return t;
}

void tokenizer_free(Tokenizer *t) {
    if (!t) return;
    free(t->bytes);
    free(t->start);
    free(t->vocab);
    free(t->merges);
    free(t->added);
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

/* Merges the bytes of one piece into tokens and appends their ids: while
 * some neighbouring pair has a merge rule, the pair with the lowest rank
 * (the leftmost of equals) becomes one token. A heap of candidate pairs
 * makes this O(n log n); a candidate whose tokens changed since it was
 * pushed is stale and skipped. (The ids tell: a token that merges takes a
 * longer token's id, never one it had before.) */
static void bpe(Tokenizer *t, const char *piece, size_t n, TokenIds *out) {
    if (n > t->symbols_cap) t->symbols = xrealloc(t->symbols, t->symbols_cap = n, sizeof *t->symbols);
    Symbol *sym = t->symbols;
    for (size_t i = 0; i < n; i++)
        sym[i] = (Symbol){t->byte_token[(unsigned char)piece[i]], i == 0 ? NONE : i - 1, i + 1 == n ? NONE : i + 1};
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
    memcpy(c->ids + c->ids_used, ids, n_ids * sizeof *ids);
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

/* ---- the pre-tokenizer regexes, by hand ----
 *
 * Qwen2 and Llama 3:
 *   (?i:'s|'t|'re|'ve|'m|'ll|'d)     1. a contraction, in any case
 *   |[^\r\n\p{L}\p{N}]?\p{L}+        2. letters, after at most one other character
 *   |\p{N}       Llama 3: \p{N}{1,3} 3. a number character (Llama 3: up to three)
 *   | ?[^\s\p{L}\p{N}]+[\r\n]*       4. punctuation, after at most one space
 *   |\s*[\r\n]+                      5. white space up to its last newline
 *   |\s+(?!\S)                       6. white space but the last one before text
 *   |\s+                             7. white space
 * GPT-2 (ByteLevel's own regex):
 *   's|'t|'re|'ve|'m|'ll|'d          1. a contraction, in lower case
 *   | ?\p{L}+                        2. letters, after at most one space
 *   | ?\p{N}+                        3. numbers, after at most one space
 *   | ?[^\s\p{L}\p{N}]+              4. punctuation, after at most one space
 *   |\s+(?!\S)|\s+                   5, 6. white space, as 6 and 7 above
 *
 * As in Oniguruma, the first alternative that matches at a position wins,
 * even when a later one would match more. Every character matches some
 * alternative, so the pieces cover the whole text. \s is Unicode's
 * White_Space (U+0085 is, U+200B and U+FEFF are not), and " " is U+0020. */

/* The regex's class of the character at s[i] (a UNICODE_LETTER, _NUMBER or
 * _SPACE bit; none for punctuation and everything else), with its length. */
static unsigned class_at(const char *s, size_t n, size_t i, size_t *len) {
    uint32_t c = (unsigned char)s[i];
    bool truncated;
    if (c < 0x80) {
        *len = 1;
        return unicode_ascii_class((unsigned char)c);
    }
    *len = utf8_next(s + i, n - i, &c, &truncated);
    return unicode_class(c) & (UNICODE_LETTER | UNICODE_NUMBER | UNICODE_SPACE);
}

/* The end of the run of characters of class cls that starts at s[i], and
 * holds at most max of them. */
static size_t run_end(const char *s, size_t n, size_t i, unsigned cls, size_t max) {
    size_t len;
    for (size_t count = 0; count < max && i < n && class_at(s, n, i, &len) == cls; count++) i += len;
    return i;
}

static bool is_newline(char c) { return c == '\r' || c == '\n'; }

static char ascii_lower(char c) { return c >= 'A' && c <= 'Z' ? (char)(c - 'A' + 'a') : c; }

/* The length of the contraction ('s, 't, 're, 've, 'm, 'll or 'd) at
 * s[0] == '\'', or 0. With any_case, as (?i:...) matches: in upper or lower
 * case, and U+017F LONG S for the s (case folding makes it an s). */
static size_t contraction_len(const char *s, size_t n, bool any_case) {
    char a = n > 1 ? s[1] : 0, b = n > 2 ? s[2] : 0;
    if (any_case && a == '\xC5' && b == '\xBF') return 3;
    if (any_case) a = ascii_lower(a), b = ascii_lower(b);
    if (a == 's' || a == 't' || a == 'm' || a == 'd') return 2;
    if ((a == 'r' && b == 'e') || (a == 'v' && b == 'e') || (a == 'l' && b == 'l')) return 3;
    return 0;
}

/* The white space alternatives at s[i], white space: the run of it up to
 * its last newline (only with newlines: Qwen2's 5), or else the run but its
 * last character when text follows (6), or the whole run (6 at the end of
 * the text, or 7). */
static size_t space_end(const char *s, size_t n, size_t i, bool newlines) {
    size_t end = i, last = i, after_newline = 0, len;
    while (end < n && class_at(s, n, end, &len) == UNICODE_SPACE) {
        if (is_newline(s[end])) after_newline = end + 1;
        last = end;
        end += len;
    }
    if (newlines && after_newline) return after_newline;
    return end == n || last == i ? end : last;
}

/* Qwen2's regex, and Llama 3's with max_digits 3. */
static size_t qwen_piece_end(const char *s, size_t n, size_t i, size_t max_digits) {
    size_t len, next_len;
    unsigned cls = class_at(s, n, i, &len);
    if (s[i] == '\'') {  /* 1 */
        size_t m = contraction_len(s + i, n - i, true);
        if (m) return i + m;
    }
    /* 2: the letters start at j, after s[i] if it may lead them */
    size_t j = (cls & (UNICODE_LETTER | UNICODE_NUMBER)) || is_newline(s[i]) ? i : i + len;
    if (j < n && class_at(s, n, j, &next_len) == UNICODE_LETTER) return run_end(s, n, j, UNICODE_LETTER, SIZE_MAX);
    if (cls == UNICODE_NUMBER) return run_end(s, n, i, UNICODE_NUMBER, max_digits);  /* 3 */
    /* 4: the punctuation starts at j, after s[i] if it is a space */
    j = s[i] == ' ' ? i + 1 : i;
    if (j < n && class_at(s, n, j, &next_len) == 0) {
        j = run_end(s, n, j, 0, SIZE_MAX);
        while (j < n && is_newline(s[j])) j++;
        return j;
    }
    return space_end(s, n, i, true);  /* 5, 6, 7 */
}

/* GPT-2's regex. */
static size_t gpt2_piece_end(const char *s, size_t n, size_t i) {
    size_t len;
    if (s[i] == '\'') {  /* 1 */
        size_t m = contraction_len(s + i, n - i, false);
        if (m) return i + m;
    }
    /* 2, 3, 4: a run of one class, after s[i] if it is a space */
    size_t j = s[i] == ' ' && i + 1 < n ? i + 1 : i;
    unsigned cls = class_at(s, n, j, &len);
    if (cls != UNICODE_SPACE) return run_end(s, n, j, cls, SIZE_MAX);
    return space_end(s, n, i, false);  /* 5, 6 */
}

size_t tokenizer_piece_end(SplitPattern p, const char *s, size_t n, size_t i) {
    return p == SPLIT_GPT2 ? gpt2_piece_end(s, n, i) : qwen_piece_end(s, n, i, p == SPLIT_LLAMA3 ? 3 : 1);
}

/* Encodes text with no added tokens in it: the normalizer, the
 * pre-tokenizer, BPE. */
static void encode_text(Tokenizer *t, const char *s, size_t n, TokenIds *out) {
    char *normalized = NULL;
    if (t->nfc && !nfc_quick_check(s, n)) s = normalized = nfc_normalize(s, n, &n);
    for (size_t i = 0; i < n;) {
        size_t end = tokenizer_piece_end(t->pattern, s, n, i);
        encode_piece(t, s + i, end - i, out);
        i = end;
    }
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
        encode_text(t, text + done, i - done, out);
        token_ids_push(out, a->id);
        i = done = i + a->len;
    }
    encode_text(t, text + done, len - done, out);
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

SplitPattern tokenizer_split_pattern(const Tokenizer *t) { return t->pattern; }

/* ---- decoding ---- */

void decode_stream_init(DecodeStream *d, const Tokenizer *t) { *d = (DecodeStream){.tokenizer = t}; }

void decode_stream_free(DecodeStream *d) {
    free(d->out);
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

const char *decode_stream_push(DecodeStream *d, int id, size_t *len) {
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
    if (d->out_cap < 4) d->out = xrealloc(d->out, d->out_cap = 4, 1);
    *len = d->n_pending ? utf8_put(UNICODE_REPLACEMENT, d->out) : 0;
    d->n_pending = 0;
    return d->out;
}

char *tokenizer_decode(const Tokenizer *t, const int *ids, size_t n, size_t *len) {
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
