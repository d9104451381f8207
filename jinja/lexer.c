/* jinja/lexer.c - template text into tokens: jinja2's lexer (its
 * regular rules written out by hand), with transformers' trim_blocks and
 * lstrip_blocks, raw blocks, comments and whitespace control. */
#include "jinja.h"

/* ======================================================================
 * The lexer: jinja2's, with transformers' trim_blocks and lstrip_blocks
 * ====================================================================== */

/* Longest first, as jinja2's operator regex tries them. */
static const struct {
    const char *text;
    OpId op;
} operators[] = {
    {"//", OP_FLOORDIV}, {"**", OP_POW},      {"==", OP_EQ},    {"!=", OP_NE},    {">=", OP_GTEQ},  {"<=", OP_LTEQ},
    {"+", OP_ADD},       {"-", OP_SUB},       {"/", OP_DIV},    {"*", OP_MUL},    {"%", OP_MOD},    {"~", OP_TILDE},
    {"[", OP_LBRACKET},  {"]", OP_RBRACKET},  {"(", OP_LPAREN}, {")", OP_RPAREN}, {"{", OP_LBRACE}, {"}", OP_RBRACE},
    {">", OP_GT},        {"<", OP_LT},        {"=", OP_ASSIGN}, {".", OP_DOT},    {":", OP_COLON},  {"|", OP_PIPE},
    {",", OP_COMMA},     {";", OP_SEMICOLON},
};

const char *op_text(OpId op) {
    for (size_t i = 0; i < sizeof operators / sizeof operators[0]; i++)
        if (operators[i].op == op) return operators[i].text;
    return "?";
}

typedef enum { TAG_VAR, TAG_BLOCK, TAG_COMMENT, TAG_RAW } TagKind;

enum { MAX_BRACKETS = 256 }; /* open brackets within one tag */

/* The line of src[pos] (positions are asked for in increasing order). */
static int line_at(Parser *p, size_t pos) {
    for (; p->line_pos < pos; p->line_pos++)
        if (p->src[p->line_pos] == '\n') p->line++;
    return p->line;
}

static Token *add_token(Parser *p, TokType type, size_t pos) {
    if (p->n_toks == p->cap_toks) {
        size_t cap = p->cap_toks ? p->cap_toks * 2 : 256;
        Token *toks = alloc_array(&p->c, cap, sizeof *toks);
        if (p->n_toks) memcpy(toks, p->toks, p->n_toks * sizeof *toks);
        p->toks = toks;
        p->cap_toks = cap;
    }
    Token *t = &p->toks[p->n_toks++];
    *t = (Token){.type = (uint8_t)type, .line = line_at(p, pos)};
    return t;
}

static noreturn void lex_error(Parser *p, size_t pos, const char *msg) { raise_at(&p->c, line_at(p, pos), "%s", msg); }

/* The white space (as Python's \s) that starts at s[i], or 0. */
static size_t space_at(const char *s, size_t n, size_t i) {
    if (i >= n) return 0;
    size_t used;
    uint32_t c = next_char(s + i, n - i, &used);
    return py_isspace(c) ? used : 0;
}

static size_t skip_space(const char *s, size_t n, size_t i) {
    size_t k;
    while ((k = space_at(s, n, i)) != 0) i += k;
    return i;
}

/* Python's str.rstrip(): the length without trailing white space. */
size_t rstrip_len(const char *s, size_t n) {
    while (n > 0) {
        size_t start = prev_char_start(s, n), used;
        if (!py_isspace(next_char(s + start, n - start, &used))) break;
        n = start;
    }
    return n;
}

/* The text before a tag, with the tag's whitespace control applied:
 * "-" strips all white space before the tag; otherwise lstrip_blocks strips
 * the spaces and tabs (any white space but \n) between the start of the
 * line and a block or comment tag, when nothing else precedes it on the
 * line. line_starting says whether the text starts a line. */
static Str strip_before_tag(Str text, char sign, bool is_var, bool line_starting) {
    if (sign == '-') {
        text.n = rstrip_len(text.p, text.n);
        return text;
    }
    if (sign == '+' || is_var) return text;
    const char *nl = NULL;
    for (size_t i = text.n; i > 0; i--)
        if (text.p[i - 1] == '\n') {
            nl = text.p + i - 1;
            break;
        }
    size_t line_start = nl ? (size_t)(nl - text.p) + 1 : 0;
    if (line_start == 0 && !line_starting) return text;
    if (line_start < text.n && skip_space(text.p, text.n, line_start) == text.n) text.n = line_start;
    return text;
}

static void add_data(Parser *p, Str text, size_t pos) {
    if (text.n == 0) return;
    Token *t = add_token(p, T_DATA, pos);
    t->s = text;
}

/* Matches {%[-+]? \s* raw \s* (-%}\s* | %}) at s[i]; returns its end or 0. */
static size_t match_raw_begin(const char *s, size_t n, size_t i) {
    i += 2;
    if (i < n && (s[i] == '-' || s[i] == '+')) i++;
    i = skip_space(s, n, i);
    if (n - i < 3 || memcmp(s + i, "raw", 3) != 0) return 0;
    i = skip_space(s, n, i + 3);
    if (n - i >= 3 && memcmp(s + i, "-%}", 3) == 0) return skip_space(s, n, i + 3);
    if (n - i >= 2 && memcmp(s + i, "%}", 2) == 0) return i + 2;
    return 0;
}

/* Finds the {% endraw %} that closes a raw block, from s[i]: sets *start
 * to the tag's start, *sign to its whitespace control and returns its end
 * (0 if there is none). */
static size_t find_raw_end(const char *s, size_t n, size_t i, size_t *start, char *sign) {
    for (; i + 1 < n; i++) {
        if (s[i] != '{' || s[i + 1] != '%') continue;
        size_t k = i + 2;
        char sg = 0;
        if (k < n && (s[k] == '-' || s[k] == '+')) sg = s[k++];
        k = skip_space(s, n, k);
        if (n - k < 6 || memcmp(s + k, "endraw", 6) != 0) continue;
        k = skip_space(s, n, k + 6);
        size_t end = 0;
        if (n - k >= 3 && memcmp(s + k, "+%}", 3) == 0) end = k + 3;
        else if (n - k >= 3 && memcmp(s + k, "-%}", 3) == 0) end = skip_space(s, n, k + 3);
        else if (n - k >= 2 && memcmp(s + k, "%}", 2) == 0) end = k + 2 + (k + 2 < n && s[k + 2] == '\n');
        if (end) {
            *start = i;
            *sign = sg;
            return end;
        }
    }
    return 0;
}

/* Finds the end of a comment from s[i]: "+#}", "-#}" and white space, or
 * "#}" and one newline (trim_blocks). Returns the end, or 0. */
static size_t find_comment_end(const char *s, size_t n, size_t i) {
    for (; i + 1 < n; i++) {
        if ((s[i] == '+' || s[i] == '-') && i + 2 < n && s[i + 1] == '#' && s[i + 2] == '}')
            return s[i] == '+' ? i + 3 : skip_space(s, n, i + 3);
        if (s[i] == '#' && s[i + 1] == '}') return i + 2 + (i + 2 < n && s[i + 2] == '\n');
    }
    return 0;
}

bool is_digit(char ch) { return ch >= '0' && ch <= '9'; }

/* Digits with single underscores between them, (\d+_)*\d+, from s[i]:
 * returns the end, or i when there is no digit. */
static size_t scan_digits(const char *s, size_t n, size_t i) {
    if (i >= n || !is_digit(s[i])) return i;
    while (i < n) {
        if (is_digit(s[i])) i++;
        else if (s[i] == '_' && i + 1 < n && is_digit(s[i + 1])) i += 2;
        else break;
    }
    return i;
}

/* jinja2's float rule at s[i] (not after a '.'): returns the end or 0. */
static size_t match_float(const char *s, size_t n, size_t i) {
    if (i > 0 && s[i - 1] == '.') return 0;
    size_t j = scan_digits(s, n, i);
    if (j == i) return 0;
    size_t frac_end = 0;
    if (j < n && s[j] == '.') {
        size_t k = scan_digits(s, n, j + 1);
        if (k > j + 1) frac_end = k;
    }
    size_t e = frac_end ? frac_end : j;
    if (e < n && (s[e] == 'e' || s[e] == 'E')) {
        size_t k = e + 1;
        if (k < n && (s[k] == '+' || s[k] == '-')) k++;
        size_t m = scan_digits(s, n, k);
        if (m > k) return m;
    }
    return frac_end;
}

int digit_value(char ch) {
    if (ch >= '0' && ch <= '9') return ch - '0';
    if ((ch | 32) >= 'a' && (ch | 32) <= 'f') return (ch | 32) - 'a' + 10;
    return 99;
}

/* jinja2's integer rule at s[i]: 0b.., 0o.., 0x.. (with single
 * underscores), a decimal, or zeros. Returns the end and the value. */
static size_t match_int(Parser *p, const char *s, size_t n, size_t i, int64_t *value) {
    int base = 10;
    size_t j = i, digits_from = i;
    if (s[i] == '0' && i + 1 < n && strchr("bBoOxX", s[i + 1])) {
        base = (s[i + 1] | 32) == 'b' ? 2 : (s[i + 1] | 32) == 'o' ? 8 : 16;
        size_t k = i + 2;
        while (k < n) {
            size_t d = s[k] == '_' ? k + 1 : k;
            if (d < n && digit_value(s[d]) < base) k = d + 1;
            else break;
        }
        if (k > i + 2) {
            j = k;
            digits_from = i + 2;
        } else base = 10;
    }
    if (base == 10) {
        if (s[i] >= '1' && s[i] <= '9') {
            j = i + 1;
            while (j < n) {
                size_t d = s[j] == '_' ? j + 1 : j;
                if (d < n && is_digit(s[d])) j = d + 1;
                else break;
            }
        } else if (s[i] == '0') {
            j = i + 1;
            while (j < n) {
                size_t d = s[j] == '_' ? j + 1 : j;
                if (d < n && s[d] == '0') j = d + 1;
                else break;
            }
        } else return 0;
        digits_from = i;
    }
    uint64_t v = 0;
    for (size_t k = digits_from; k < j; k++) {
        if (s[k] == '_') continue;
        int d = digit_value(s[k]);
        if (v > (UINT64_C(9223372036854775807) - (uint64_t)d) / (uint64_t)base)
            lex_error(p, i, "integer literal is larger than 64 bits");
        v = v * (uint64_t)base + (uint64_t)d;
    }
    *value = (int64_t)v;
    return j;
}

/* A name: \w characters (letters, digits, _ and non-ASCII letters and
 * numbers) not starting with a digit. Returns the end, or i. */
static size_t match_name(Parser *p, const char *s, size_t n, size_t i) {
    size_t j = i;
    bool first = true;
    while (j < n) {
        unsigned char ch = (unsigned char)s[j];
        size_t used = 1;
        if (ch < 0x80) {
            if (!(ch == '_' || is_digit((char)ch) || ((ch | 32) >= 'a' && (ch | 32) <= 'z'))) break;
        } else {
            uint32_t c = next_char(s + j, n - j, &used);
            unsigned cls = unicode_class(c);
            if (!(cls & (UNICODE_LETTER | UNICODE_NUMBER))) break;
            if (first && !(cls & UNICODE_LETTER)) lex_error(p, j, "invalid character in identifier");
        }
        first = false;
        j += used;
    }
    return j;
}

static int hex_value(const char *s, size_t n) {
    int v = 0;
    for (size_t i = 0; i < n; i++) {
        int d = digit_value(s[i]);
        if (d > 15) return -1;
        v = v * 16 + d;
    }
    return v;
}

/* Decodes a string literal's body as jinja2 does: Python's unicode-escape
 * codec over the text with non-ASCII characters written as \x, \u or \U
 * escapes (so a backslash before a non-ASCII character escapes only the
 * backslash of that escape). */
static Str decode_string(Parser *p, size_t at, const char *s, size_t n) {
    Text b = {.c = &p->c};
    text_reserve(&b, n + 1);
    for (size_t i = 0; i < n;) {
        if (s[i] != '\\') {
            text_addc(&b, s[i++]);
            continue;
        }
        /* the regex guarantees a character after every backslash */
        size_t used;
        uint32_t c = next_char(s + i + 1, n - i - 1, &used);
        i += 1 + used;
        if (c >= 0x80) {
            text_addc(&b, '\\'); /* "\é" is "\\xe9" to the codec: a backslash, then "xe9" */
            if (c <= 0xFF) text_addf(&b, "x%02x", c);
            else if (c <= 0xFFFF) text_addf(&b, "u%04x", c);
            else text_addf(&b, "U%08x", c);
            continue;
        }
        switch (c) {
        case '\n':
            break;
        case '\\':
            text_addc(&b, '\\');
            break;
        case '\'':
            text_addc(&b, '\'');
            break;
        case '"':
            text_addc(&b, '"');
            break;
        case 'a':
            text_addc(&b, '\a');
            break;
        case 'b':
            text_addc(&b, '\b');
            break;
        case 'f':
            text_addc(&b, '\f');
            break;
        case 'n':
            text_addc(&b, '\n');
            break;
        case 'r':
            text_addc(&b, '\r');
            break;
        case 't':
            text_addc(&b, '\t');
            break;
        case 'v':
            text_addc(&b, '\v');
            break;
        case 'x':
        case 'u':
        case 'U': {
            size_t want = c == 'x' ? 2 : c == 'u' ? 4 : 8;
            int v = n - i >= want ? hex_value(s + i, want) : -1;
            if (want == 8 && n - i >= 8) {
                long long big = 0;
                for (size_t k = 0; k < 8; k++) {
                    int d = digit_value(s[i + k]);
                    big = d > 15 || big < 0 ? -1 : big * 16 + d;
                }
                if (big > 0x10FFFF) lex_error(p, at, "illegal Unicode character");
                v = (int)big;
            }
            if (v < 0)
                lex_error(p, at,
                          c == 'x'   ? "truncated \\xXX escape"
                          : c == 'u' ? "truncated \\uXXXX escape"
                                     : "truncated \\UXXXXXXXX escape");
            if (v >= 0xD800 && v <= 0xDFFF) lex_error(p, at, "a string literal holds a surrogate code point");
            text_addchar(&b, (uint32_t)v);
            i += want;
            break;
        }
        case 'N':
            lex_error(p, at, "\\N{...} escapes are not supported");
        default:
            if (c >= '0' && c <= '7') {
                uint32_t v = c - '0';
                for (int k = 0; k < 2 && i < n && s[i] >= '0' && s[i] <= '7'; k++) v = v * 8 + (uint32_t)(s[i++] - '0');
                text_addchar(&b, v);
            } else {
                text_addc(&b, '\\'); /* an unknown escape stays as it is */
                text_addc(&b, (char)c);
            }
        }
    }
    return (Str){b.p, b.n};
}

/* Lexes the inside of a {{ }} or {% %} tag from s[i]; returns the
 * position after its end tag (or n when the template ends first). */
static size_t lex_tag(Parser *p, size_t i, TagKind kind, bool *line_starting) {
    const char *s = p->src;
    size_t n = p->len;
    char brackets[MAX_BRACKETS];
    int depth = 0;
    while (i < n) {
        /* The end tag, unless a bracket is open. */
        if (depth == 0) {
            size_t end = 0;
            if (kind == TAG_BLOCK) {
                if (n - i >= 3 && memcmp(s + i, "+%}", 3) == 0) end = i + 3;
                else if (n - i >= 3 && memcmp(s + i, "-%}", 3) == 0) end = skip_space(s, n, i + 3);
                else if (n - i >= 2 && memcmp(s + i, "%}", 2) == 0) end = i + 2 + (i + 2 < n && s[i + 2] == '\n');
            } else {
                if (n - i >= 3 && memcmp(s + i, "-}}", 3) == 0) end = skip_space(s, n, i + 3);
                else if (n - i >= 2 && memcmp(s + i, "}}", 2) == 0) end = i + 2;
            }
            if (end) {
                add_token(p, kind == TAG_BLOCK ? T_BLOCK_END : T_VAR_END, i);
                *line_starting = s[end - 1] == '\n';
                return end;
            }
        }
        size_t k = space_at(s, n, i);
        if (k) {
            i = skip_space(s, n, i);
            continue;
        }
        size_t end = match_float(s, n, i);
        if (end) {
            char tmp[64];
            size_t m = 0;
            for (size_t j = i; j < end && m < sizeof tmp - 1; j++)
                if (s[j] != '_') tmp[m++] = s[j];
            tmp[m] = '\0';
            Token *t = add_token(p, T_FLOAT, i);
            t->f = strtod(tmp, NULL);
            i = end;
            continue;
        }
        if (is_digit(s[i])) {
            int64_t v;
            end = match_int(p, s, n, i, &v);
            Token *t = add_token(p, T_INT, i);
            t->i = v;
            i = end;
            continue;
        }
        end = match_name(p, s, n, i);
        if (end > i) {
            Token *t = add_token(p, T_NAME, i);
            t->s = (Str){s + i, end - i};
            i = end;
            continue;
        }
        if (s[i] == '\'' || s[i] == '"') {
            size_t j = i + 1;
            while (j < n && s[j] != s[i]) j += s[j] == '\\' && j + 1 < n ? 2 : 1;
            if (j < n) {
                Token *t = add_token(p, T_STRING, i);
                t->s = decode_string(p, i, s + i + 1, j - i - 1);
                i = j + 1;
                continue;
            }
        }
        size_t o = 0;
        while (o < sizeof operators / sizeof operators[0] &&
               strncmp(s + i, operators[o].text, strlen(operators[o].text)) != 0)
            o++;
        if (o == sizeof operators / sizeof operators[0]) {
            char msg[64];
            if (s[i] >= 0x20 && s[i] < 0x7F) snprintf(msg, sizeof msg, "unexpected character '%c'", s[i]);
            else snprintf(msg, sizeof msg, "unexpected character (byte 0x%02x)", (unsigned char)s[i]);
            lex_error(p, i, msg);
        }
        OpId op = operators[o].op;
        if (op == OP_LBRACE || op == OP_LPAREN || op == OP_LBRACKET) {
            if (depth == MAX_BRACKETS) lex_error(p, i, "brackets are nested too deeply");
            brackets[depth++] = op == OP_LBRACE ? '}' : op == OP_LPAREN ? ')' : ']';
        } else if (op == OP_RBRACE || op == OP_RPAREN || op == OP_RBRACKET) {
            char msg[64];
            if (depth == 0) {
                snprintf(msg, sizeof msg, "unexpected '%c'", s[i]);
                lex_error(p, i, msg);
            }
            if (brackets[depth - 1] != s[i]) {
                snprintf(msg, sizeof msg, "unexpected '%c', expected '%c'", s[i], brackets[depth - 1]);
                lex_error(p, i, msg);
            }
            depth--;
        }
        Token *t = add_token(p, T_OP, i);
        t->op = (uint8_t)op;
        i += strlen(operators[o].text);
    }
    return n;
}

/* Turns the whole template into tokens. */
void lex(Parser *p) {
    const char *s = p->src;
    size_t n = p->len, pos = 0;
    bool line_starting = true; /* whether the last thing matched ended a line */
    while (pos < n) {
        /* The next {{, {% or {#. */
        size_t q = pos;
        while (q + 1 < n && !(s[q] == '{' && (s[q + 1] == '{' || s[q + 1] == '%' || s[q + 1] == '#'))) q++;
        if (q + 1 >= n) {
            add_data(p, (Str){s + pos, n - pos}, pos);
            break;
        }
        char sign = q + 2 < n && (s[q + 2] == '-' || s[q + 2] == '+') ? s[q + 2] : 0;
        TagKind kind = s[q + 1] == '{' ? TAG_VAR : s[q + 1] == '#' ? TAG_COMMENT : TAG_BLOCK;
        size_t tag_end = q + 2 + (sign != 0);
        if (kind == TAG_BLOCK) {
            size_t raw_end = match_raw_begin(s, n, q);
            if (raw_end) {
                kind = TAG_RAW;
                tag_end = raw_end;
            }
        }
        add_data(p, strip_before_tag((Str){s + pos, q - pos}, sign, kind == TAG_VAR, line_starting), pos);
        line_starting = s[tag_end - 1] == '\n';
        pos = tag_end;
        if (kind == TAG_COMMENT) {
            size_t end = find_comment_end(s, n, pos);
            if (!end) lex_error(p, pos, "missing end of comment tag");
            line_starting = s[end - 1] == '\n';
            pos = end;
        } else if (kind == TAG_RAW) {
            size_t start;
            char end_sign;
            size_t end = find_raw_end(s, n, pos, &start, &end_sign);
            if (!end) lex_error(p, pos, "missing end of raw directive");
            add_data(p, strip_before_tag((Str){s + pos, start - pos}, end_sign, false, line_starting), pos);
            line_starting = s[end - 1] == '\n';
            pos = end;
        } else {
            add_token(p, kind == TAG_VAR ? T_VAR_BEGIN : T_BLOCK_BEGIN, q);
            pos = lex_tag(p, pos, kind, &line_starting);
        }
    }
    add_token(p, T_EOF, n);
}
