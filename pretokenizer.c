/* pretokenizer.c - tokenizer.json's pre-tokenizer: reading its steps, the
 * regexes it may name (by hand), and cutting a text into pieces. */
#define _GNU_SOURCE /* memmem() */
#include "pretokenizer.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "tokenizer_parts.h"
#include "unicode.h"

/* The regexes, as tokenizer.json spells them (JSON-decoded). */
static const char *const SPLIT_REGEX[] = {
    [SPLIT_QWEN2] = "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|"
                    "\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+",
    [SPLIT_LLAMA3] = "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+"
                     "[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+",
    [SPLIT_GPT2] = "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+",
};
enum { N_SPLIT_PATTERNS = sizeof SPLIT_REGEX / sizeof SPLIT_REGEX[0] };

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

size_t split_pattern_end(SplitPattern p, const char *s, size_t n, size_t i) {
    return p == SPLIT_GPT2 ? gpt2_piece_end(s, n, i) : qwen_piece_end(s, n, i, p == SPLIT_LLAMA3 ? 3 : 1);
}

/* ---- reading the steps ---- */

static const char *const BEHAVIOR_NAMES[] = {
    [SPLIT_REMOVED] = "Removed", [SPLIT_ISOLATED] = "Isolated", [SPLIT_MERGED_WITH_PREVIOUS] = "MergedWithPrevious",
    [SPLIT_MERGED_WITH_NEXT] = "MergedWithNext", [SPLIT_CONTIGUOUS] = "Contiguous"};

static int read_split(PreTokenizeStep *step, const JsonValue *v, Error *e) {
    char buf[48];
    const JsonValue *pattern = json_get(v, "pattern"), *string = json_get(pattern, "String"),
                    *regex = json_get(pattern, "Regex"), *behavior = json_get(v, "behavior"),
                    *invert = json_get(v, "invert");
    *step = (PreTokenizeStep){.kind = PRETOKENIZE_SPLIT};
    if (string && string->type == JSON_STRING && string->len > 0) {
        step->string = string->string, step->string_len = string->len;
    } else if (regex && regex->type == JSON_STRING) {
        int k = 0;
        while (k < N_SPLIT_PATTERNS && !json_is_string(regex, SPLIT_REGEX[k])) k++;
        if (k == N_SPLIT_PATTERNS)
            return fail(e, "pre_tokenizer Split regex '%s' is not supported (only the Qwen2, Llama 3 and GPT-2 ones)",
                        shown(regex->string, regex->len, buf));
        step->regex = (SplitPattern)k;
    } else {
        return fail(e, "pre_tokenizer Split has no \"pattern\" {\"String\": ...} (non-empty) or {\"Regex\": ...}");
    }
    int b = 0;
    while (b <= SPLIT_CONTIGUOUS && !json_is_string(behavior, BEHAVIOR_NAMES[b])) b++;
    if (b > SPLIT_CONTIGUOUS)
        return fail(e, "pre_tokenizer Split behavior %s is not supported (only Removed, Isolated, "
                       "MergedWithPrevious, MergedWithNext, Contiguous)",
                    behavior && behavior->type == JSON_STRING ? shown(behavior->string, behavior->len, buf) : "(none)");
    step->behavior = (SplitBehavior)b;
    if (!json_is_null(invert) && invert->type != JSON_BOOL) return fail(e, "pre_tokenizer Split: invert is not a boolean");
    step->invert = !json_is_false(invert);
    return 0;
}

static int read_metaspace(PreTokenizeStep *step, const JsonValue *v, Error *e) {
    const JsonValue *replacement = json_get(v, "replacement"), *scheme = json_get(v, "prepend_scheme"),
                    *add_prefix_space = json_get(v, "add_prefix_space"), *split = json_get(v, "split");
    if (!replacement || replacement->type != JSON_STRING || replacement->len == 0)
        return fail(e, "pre_tokenizer Metaspace has no \"replacement\" string");
    *step = (PreTokenizeStep){.kind = PRETOKENIZE_METASPACE, .replacement = replacement->string,
                              .replacement_len = replacement->len, .split = true};
    if (json_is_string(scheme, "always")) step->prepend = PREPEND_ALWAYS;
    else if (json_is_string(scheme, "first")) step->prepend = PREPEND_FIRST;
    else if (json_is_string(scheme, "never")) step->prepend = PREPEND_NEVER;
    /* Files written before prepend_scheme say add_prefix_space instead. */
    else if (json_is_null(scheme) && add_prefix_space && add_prefix_space->type == JSON_BOOL)
        step->prepend = add_prefix_space->boolean ? PREPEND_ALWAYS : PREPEND_NEVER;
    else
        return fail(e, "pre_tokenizer Metaspace: prepend_scheme is not \"always\", \"first\" or \"never\"");
    if (!json_is_null(split) && split->type != JSON_BOOL) return fail(e, "pre_tokenizer Metaspace: split is not a boolean");
    if (split && split->type == JSON_BOOL) step->split = split->boolean;
    return 0;
}

/* ByteLevel: with its regex (the default), a Split by GPT-2's regex. */
static int read_byte_level(PreTokenizer *p, const JsonValue *v, Error *e) {
    p->byte_level = true;
    if (!json_is_false(json_get(v, "add_prefix_space")))
        return fail(e, "pre_tokenizer ByteLevel with add_prefix_space is not supported");
    const JsonValue *use_regex = json_get(v, "use_regex");
    if (use_regex && use_regex->type == JSON_BOOL && !use_regex->boolean) return 0;
    p->steps = xrealloc(p->steps, p->n + 1, sizeof *p->steps);
    p->steps[p->n++] = (PreTokenizeStep){.kind = PRETOKENIZE_SPLIT, .regex = SPLIT_GPT2, .behavior = SPLIT_ISOLATED};
    return 0;
}

/* Appends the steps of section v (a Sequence's, flattened). */
static int add_steps(PreTokenizer *p, const JsonValue *v, Error *e) {
    char buf[128];
    const JsonValue *type = json_get(v, "type");
    if (json_is_string(type, "Sequence")) {
        const JsonValue *steps = json_get(v, "pretokenizers");
        if (!steps || steps->type != JSON_ARRAY) return fail(e, "pre_tokenizer Sequence has no \"pretokenizers\" array");
        for (size_t i = 0; i < steps->len; i++)
            if (add_steps(p, &steps->items[i], e) != 0) return -1;
        return 0;
    }
    if (json_is_string(type, "ByteLevel")) return read_byte_level(p, v, e);
    bool split = json_is_string(type, "Split");
    if (!split && !json_is_string(type, "Metaspace"))
        return fail(e, "pre_tokenizer %s is not supported (only Split, Metaspace, ByteLevel and a Sequence of them)",
                    json_is_string(type, "Sequence") ? sequence_types(json_get(v, "pretokenizers"), buf) : section_type(v));
    p->steps = xrealloc(p->steps, p->n + 1, sizeof *p->steps);
    if ((split ? read_split : read_metaspace)(&p->steps[p->n], v, e) != 0) return -1;
    p->n++;
    return 0;
}

int pretokenizer_read(PreTokenizer *p, const JsonValue *section, Error *e) {
    *p = (PreTokenizer){0};
    return json_is_null(section) ? 0 : add_steps(p, section, e);
}

void pretokenizer_own(PreTokenizer *p) {
    size_t total = 0;
    for (size_t i = 0; i < p->n; i++) total += p->steps[i].string_len + p->steps[i].replacement_len;
    char *at = p->strings = xmalloc(total + 1);
    for (size_t i = 0; i < p->n; i++) {
        PreTokenizeStep *step = &p->steps[i];
        if (step->string) memcpy(at, step->string, step->string_len), step->string = at, at += step->string_len;
        if (step->replacement)
            memcpy(at, step->replacement, step->replacement_len), step->replacement = at, at += step->replacement_len;
    }
}

void pretokenizer_free(PreTokenizer *p) {
    free(p->steps);
    free(p->strings);
    *p = (PreTokenizer){0};
}

/* ---- cutting ---- */

/* A cut in progress: steps from `step` on are still to run on each piece. */
typedef struct {
    const PreTokenizer *p;
    PieceFn *emit;
    void *ctx;
} Cut;

static void run_steps(const Cut *c, size_t step, const char *s, size_t n, bool at_start);

/* Joins a Split's stretches (matches and the text between them) into
 * pieces as its behavior says, handing each on to the next step. A piece
 * is held until it is known whether the next stretch joins it. */
typedef struct {
    const Cut *cut;
    size_t next_step;
    const char *s;
    bool at_start;
    SplitBehavior behavior;
    bool held, previous_match;  /* a piece s[start..end) is held; whether the last stretch was a match */
    size_t start, end;
} Joiner;

static void hand_on(Joiner *j) {
    if (j->held) run_steps(j->cut, j->next_step, j->s + j->start, j->end - j->start, j->at_start && j->start == 0);
    j->held = false;
}

static void hold(Joiner *j, size_t start, size_t end) {
    hand_on(j);
    j->held = true, j->start = start, j->end = end;
}

/* The next stretch s[start..end), a match of the pattern or not. */
static void join(Joiner *j, size_t start, size_t end, bool match) {
    switch (j->behavior) {
    case SPLIT_REMOVED:
        if (!match) hold(j, start, end);
        break;
    case SPLIT_ISOLATED:
        hold(j, start, end);
        break;
    case SPLIT_MERGED_WITH_PREVIOUS:  /* a match ends the piece before it */
        if (match && !j->previous_match && j->held) j->end = end;
        else hold(j, start, end);
        break;
    case SPLIT_MERGED_WITH_NEXT:  /* a match starts the piece after it, unless a match follows */
        if (j->held && j->previous_match && !match) j->end = end;
        else hold(j, start, end);
        break;
    case SPLIT_CONTIGUOUS:  /* runs of matches, and of the rest, each make one piece */
        if (j->held && match == j->previous_match) j->end = end;
        else hold(j, start, end);
        break;
    }
    j->previous_match = match;
}

/* Cuts s[0..n) as Split step `how` says and hands the pieces on to step
 * next_step: the stretches are the matches of its string or regex and the
 * text between them (the roles swapped with invert). */
static void split_by(const Cut *c, const PreTokenizeStep *how, size_t next_step, const char *s, size_t n,
                     bool at_start) {
    Joiner j = {.cut = c, .next_step = next_step, .s = s, .at_start = at_start, .behavior = how->behavior};
    for (size_t i = 0; i < n;) {
        size_t end;
        bool match = true;
        if (!how->string) {
            end = split_pattern_end(how->regex, s, n, i);
        } else {
            const char *hit = memmem(s + i, n - i, how->string, how->string_len);
            if (hit == s + i) end = i + how->string_len;
            else end = hit ? (size_t)(hit - s) : n, match = false;  /* the text before the next match */
        }
        join(&j, i, end, match != how->invert);
        i = end;
    }
    hand_on(&j);
}

/* A Metaspace step: spaces become the replacement, which may be put first;
 * with split, a piece starts at each replacement. */
static void run_metaspace(const Cut *c, size_t step, const char *s, size_t n, bool at_start) {
    const PreTokenizeStep *st = &c->p->steps[step];
    Bytes text = {0};
    bool starts = n >= st->replacement_len && memcmp(s, st->replacement, st->replacement_len) == 0;
    if (!starts && s[0] != ' ' && (st->prepend == PREPEND_ALWAYS || (st->prepend == PREPEND_FIRST && at_start)))
        bytes_add(&text, st->replacement, st->replacement_len);
    for (size_t i = 0, done = 0; i <= n; i++)
        if (i == n || s[i] == ' ') {
            bytes_add(&text, s + done, i - done);
            if (i < n) bytes_add(&text, st->replacement, st->replacement_len);
            done = i + 1;
        }
    PreTokenizeStep by_replacement = {.kind = PRETOKENIZE_SPLIT, .string = st->replacement,
                                      .string_len = st->replacement_len, .behavior = SPLIT_MERGED_WITH_NEXT};
    if (st->split) split_by(c, &by_replacement, step + 1, text.text, text.len, at_start);
    else run_steps(c, step + 1, text.text, text.len, at_start);
    bytes_free(&text);
}

static void run_steps(const Cut *c, size_t step, const char *s, size_t n, bool at_start) {
    if (n == 0) return;
    if (step == c->p->n) c->emit(c->ctx, s, n);
    else if (c->p->steps[step].kind == PRETOKENIZE_METASPACE) run_metaspace(c, step, s, n, at_start);
    else split_by(c, &c->p->steps[step], step + 1, s, n, at_start);
}

void pretokenize(const PreTokenizer *p, const char *s, size_t n, bool at_start, PieceFn *emit, void *ctx) {
    Cut c = {p, emit, ctx};
    run_steps(&c, 0, s, n, at_start);
}
