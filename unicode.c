/* unicode.c - character classes, lossy UTF-8 decoding and NFC (UAX #15:
 * decompose canonically, order combining marks, compose). */
#include "unicode.h"

#include <stdlib.h>
#include <string.h>

#include "util.h"

/* What the tables store per code point, and per canonical composition. */
typedef struct {
    uint8_t flags;  /* UNICODE_* bits */
    uint8_t ccc;    /* canonical combining class */
} CharRecord;

typedef struct {
    uint32_t first, second, composite;
} CompositionPair;

#include "unicode_tables.h"

/* Hangul syllables are (de)composed by arithmetic, not by table: a syllable
 * is an initial consonant L, a vowel V and an optional final consonant T. */
enum {
    HANGUL_S = 0xAC00,
    HANGUL_L = 0x1100,
    HANGUL_V = 0x1161,
    HANGUL_T = 0x11A7,  /* one before the first final: T index 0 means none */
    HANGUL_L_COUNT = 19,
    HANGUL_V_COUNT = 21,
    HANGUL_T_COUNT = 28,
    HANGUL_N_COUNT = HANGUL_V_COUNT * HANGUL_T_COUNT,
    HANGUL_S_COUNT = HANGUL_L_COUNT * HANGUL_N_COUNT,
};

static CharRecord record(uint32_t c) {
    if (c >= 0x110000) return (CharRecord){0, 0};
    size_t block = prop_stage1[c >> PROP_SHIFT];
    return prop_records[prop_stage2[block << PROP_SHIFT | (c & ((1u << PROP_SHIFT) - 1))]];
}

unsigned unicode_class(uint32_t c) { return record(c).flags; }

unsigned unicode_ccc(uint32_t c) { return record(c).ccc; }

/* ---- UTF-8 ---- */

size_t utf8_next(const char *s, size_t n, uint32_t *c, bool *truncated) {
    const unsigned char *u = (const unsigned char *)s;
    unsigned lead = u[0];
    *truncated = false;
    if (lead < 0x80) {
        *c = lead;
        return 1;
    }
    /* The length the lead byte announces, and the range its first
     * continuation byte must fall in (tighter for E0, ED, F0 and F4, which
     * rules out overlong forms, surrogates and values past U+10FFFF). */
    size_t need;
    uint32_t value;
    unsigned lo = 0x80, hi = 0xBF;
    if (lead >= 0xC2 && lead <= 0xDF) {
        need = 2, value = lead & 0x1F;
    } else if (lead >= 0xE0 && lead <= 0xEF) {
        need = 3, value = lead & 0x0F;
        if (lead == 0xE0) lo = 0xA0;
        if (lead == 0xED) hi = 0x9F;
    } else if (lead >= 0xF0 && lead <= 0xF4) {
        need = 4, value = lead & 0x07;
        if (lead == 0xF0) lo = 0x90;
        if (lead == 0xF4) hi = 0x8F;
    } else {
        *c = UTF8_INVALID;
        return 1;
    }
    for (size_t i = 1; i < need; i++) {
        if (i == n || u[i] < lo || u[i] > hi) {
            *truncated = i == n;
            *c = UTF8_INVALID;
            return i;
        }
        value = value << 6 | (u[i] & 0x3F);
        lo = 0x80, hi = 0xBF;
    }
    *c = value;
    return need;
}

size_t utf8_put(uint32_t c, char out[4]) {
    if (c < 0x80) {
        out[0] = (char)c;
        return 1;
    }
    if (c < 0x800) {
        out[0] = (char)(0xC0 | c >> 6);
        out[1] = (char)(0x80 | (c & 0x3F));
        return 2;
    }
    if (c < 0x10000) {
        out[0] = (char)(0xE0 | c >> 12);
        out[1] = (char)(0x80 | (c >> 6 & 0x3F));
        out[2] = (char)(0x80 | (c & 0x3F));
        return 3;
    }
    out[0] = (char)(0xF0 | c >> 18);
    out[1] = (char)(0x80 | (c >> 12 & 0x3F));
    out[2] = (char)(0x80 | (c >> 6 & 0x3F));
    out[3] = (char)(0x80 | (c & 0x3F));
    return 4;
}

/* Whether s[0..n) is well-formed UTF-8 (ASCII runs checked quickly). */
static bool utf8_valid(const char *s, size_t n) {
    for (size_t i = 0; i < n;) {
        if ((unsigned char)s[i] < 0x80) {
            i++;
            continue;
        }
        uint32_t c;
        bool truncated;
        size_t len = utf8_next(s + i, n - i, &c, &truncated);
        if (c == UTF8_INVALID) return false;
        i += len;
    }
    return true;
}

size_t utf8_lossy(const char *s, size_t n, char **out, size_t *out_len) {
    *out = NULL;
    *out_len = 0;
    if (utf8_valid(s, n)) return 0;
    /* Each ill-formed byte becomes at most the 3 bytes of U+FFFD. */
    char *dst = xmalloc(3 * n + 1);
    size_t len = 0, replaced = 0;
    for (size_t i = 0; i < n;) {
        uint32_t c;
        bool truncated;
        size_t used = utf8_next(s + i, n - i, &c, &truncated);
        if (c == UTF8_INVALID) {
            len += utf8_put(UNICODE_REPLACEMENT, dst + len);
            replaced++;
        } else {
            memcpy(dst + len, s + i, used);
            len += used;
        }
        i += used;
    }
    dst[len] = '\0';
    *out = dst;
    *out_len = len;
    return replaced;
}

/* ---- NFC ---- */

bool nfc_quick_check(const char *s, size_t n) {
    unsigned last_ccc = 0;
    for (size_t i = 0; i < n;) {
        if ((unsigned char)s[i] < 0x80) {  /* ASCII is NFC, with class 0 */
            last_ccc = 0;
            i++;
            continue;
        }
        uint32_t c;
        bool truncated;
        i += utf8_next(s + i, n - i, &c, &truncated);
        CharRecord r = record(c);
        if ((r.flags & UNICODE_NFC_UNSURE) || (r.ccc != 0 && last_ccc > r.ccc)) return false;
        last_ccc = r.ccc;
    }
    return true;
}

/* A growable array of code points. */
typedef struct {
    uint32_t *c;
    size_t n, cap;
} CodePoints;

static void push(CodePoints *cps, uint32_t c) {
    if (cps->n == cps->cap) {
        cps->cap = cps->cap ? 2 * cps->cap : 64;
        cps->c = xrealloc(cps->c, cps->cap, sizeof *cps->c);
    }
    cps->c[cps->n++] = c;
}

/* Appends the full canonical decomposition of c. */
static void decompose(CodePoints *out, uint32_t c) {
    uint32_t s = c - HANGUL_S;
    if (c >= HANGUL_S && s < HANGUL_S_COUNT) {
        push(out, HANGUL_L + s / HANGUL_N_COUNT);
        push(out, HANGUL_V + s % HANGUL_N_COUNT / HANGUL_T_COUNT);
        if (s % HANGUL_T_COUNT != 0) push(out, HANGUL_T + s % HANGUL_T_COUNT);
        return;
    }
    size_t block = decomp_stage1[c >> DECOMP_SHIFT];
    unsigned k = decomp_stage2[block << DECOMP_SHIFT | (c & ((1u << DECOMP_SHIFT) - 1))];
    if (k == 0) {
        push(out, c);
        return;
    }
    for (unsigned i = decomp_start[k - 1]; i < decomp_start[k]; i++) push(out, decomp_chars[i]);
}

static int compare_u64(const void *a, const void *b) {
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return (x > y) - (x < y);
}

/* Puts each run of combining marks (class != 0) in order of class, keeping
 * marks of equal class in their order: a stable sort, done as a sort on
 * (class, position, code point) packed in 64 bits so that a long hostile run
 * costs O(k log k). */
static void canonical_order(CodePoints *cps) {
    uint64_t *keys = NULL;
    size_t cap = 0;
    for (size_t i = 0; i < cps->n;) {
        size_t end = i;
        while (end < cps->n && unicode_ccc(cps->c[end]) != 0) end++;
        if (end - i >= 2) {
            if (end - i > cap) keys = xrealloc(keys, cap = end - i, sizeof *keys);
            for (size_t k = i; k < end; k++)
                keys[k - i] = (uint64_t)unicode_ccc(cps->c[k]) << 53 | (uint64_t)(k - i) << 21 | cps->c[k];
            qsort(keys, end - i, sizeof *keys, compare_u64);
            for (size_t k = i; k < end; k++) cps->c[k] = (uint32_t)(keys[k - i] & 0x1FFFFF);
        }
        i = end > i ? end : i + 1;
    }
    free(keys);
}

/* The primary composite of a + b, or 0 when there is none. */
static uint32_t compose_pair(uint32_t a, uint32_t b) {
    uint32_t l = a - HANGUL_L, v = b - HANGUL_V, s = a - HANGUL_S, t = b - HANGUL_T;
    if (a >= HANGUL_L && l < HANGUL_L_COUNT && b >= HANGUL_V && v < HANGUL_V_COUNT)
        return HANGUL_S + (l * HANGUL_V_COUNT + v) * HANGUL_T_COUNT;
    if (a >= HANGUL_S && s < HANGUL_S_COUNT && s % HANGUL_T_COUNT == 0 && b > HANGUL_T && t < HANGUL_T_COUNT)
        return a + t;
    size_t lo = 0, hi = sizeof compositions / sizeof compositions[0];
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        const CompositionPair *p = &compositions[mid];
        if (p->first == a && p->second == b) return p->composite;
        if (p->first < a || (p->first == a && p->second < b)) lo = mid + 1;
        else hi = mid;
    }
    return 0;
}

/* Composes in place: each character joins the last starter when nothing
 * between them blocks it (a starter, or a mark of the same or higher class)
 * and the pair has a primary composite. */
static void compose(CodePoints *cps) {
    size_t out = 0, starter = 0;
    bool have_starter = false;
    unsigned last_ccc = 0;  /* class of the last character kept */
    for (size_t i = 0; i < cps->n; i++) {
        uint32_t c = cps->c[i];
        unsigned ccc = unicode_ccc(c);
        bool adjacent = have_starter && starter == out - 1;
        bool blocked = !have_starter || (!adjacent && (last_ccc == 0 || last_ccc >= ccc));
        uint32_t composite = blocked ? 0 : compose_pair(cps->c[starter], c);
        if (composite) {
            cps->c[starter] = composite;
            continue;
        }
        if (ccc == 0) starter = out, have_starter = true;
        last_ccc = ccc;
        cps->c[out++] = c;
    }
    cps->n = out;
}

/* A growable string. */
typedef struct {
    char *s;
    size_t n, cap;
} Text;

static void append(Text *t, const char *s, size_t n) {
    if (t->cap - t->n < n + 4) {
        t->cap = 2 * (t->n + n + 4);
        t->s = xrealloc(t->s, t->cap, 1);
    }
    memcpy(t->s + t->n, s, n);
    t->n += n;
}

/* The character at s[i] and its length (U+FFFD should s not be valid UTF-8
 * after all). */
static uint32_t char_at(const char *s, size_t n, size_t i, size_t *len) {
    uint32_t c;
    bool truncated;
    *len = utf8_next(s + i, n - i, &c, &truncated);
    return c == UTF8_INVALID ? UNICODE_REPLACEMENT : c;
}

/* Whether c is a starter that NFC keeps and that nothing before it combines
 * with (NFC_Quick_Check Yes): text splits there into parts that normalize
 * on their own. */
static bool is_boundary(uint32_t c) {
    CharRecord r = record(c);
    return r.ccc == 0 && !(r.flags & UNICODE_NFC_UNSURE);
}

/* Appends the NFC of s[0..n) to out, using cps as scratch. */
static void normalize_span(const char *s, size_t n, CodePoints *cps, Text *out) {
    cps->n = 0;
    for (size_t i = 0, len; i < n; i += len) decompose(cps, char_at(s, n, i, &len));
    canonical_order(cps);
    compose(cps);
    for (size_t i = 0; i < cps->n; i++) {
        char utf8[4];
        append(out, utf8, utf8_put(cps->c[i], utf8));
    }
}

char *nfc_normalize(const char *s, size_t n, size_t *out_len) {
    /* Only around the characters the quick check is unsure of can NFC change
     * the text: each span from the boundary before one to the boundary after
     * it goes through the full algorithm, and the rest is copied. */
    Text out = {0};
    CodePoints cps = {0};
    size_t copied = 0, boundary = 0;  /* s[0..copied) is done; the last boundary seen */
    unsigned last_ccc = 0;
    for (size_t i = 0, len; i < n;) {
        uint32_t c = char_at(s, n, i, &len);
        CharRecord r = record(c);
        if (!(r.flags & UNICODE_NFC_UNSURE) && (r.ccc == 0 || last_ccc <= r.ccc)) {
            if (r.ccc == 0) boundary = i;
            last_ccc = r.ccc;
            i += len;
            continue;
        }
        size_t end = i + len;
        while (end < n && !is_boundary(char_at(s, n, end, &len))) end += len;
        append(&out, s + copied, boundary - copied);
        normalize_span(s + boundary, end - boundary, &cps, &out);
        copied = boundary = i = end;
        last_ccc = 0;
    }
    append(&out, s + copied, n - copied);
    out.s[out.n] = '\0';
    free(cps.c);
    *out_len = out.n;
    return out.s;
}
