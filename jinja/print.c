/* jinja/print.c - a value as text: Python's str() and repr() (floats as
 * their shortest repr), and json.dumps as transformers' tojson calls it,
 * into a Text, a string that grows in the arena. */
#include "jinja.h"

/* ======================================================================
 * Printing: Python's str() and repr(), and json.dumps
 * ====================================================================== */

void text_reserve(Text *b, size_t extra) {
    if (extra > TEMPLATE_MAX_OUTPUT - b->n)
        raise_error(b->c, "the text would be longer than %zu MiB", TEMPLATE_MAX_OUTPUT >> 20);
    if (b->n + extra <= b->cap) return;
    size_t cap = b->cap ? b->cap * 2 : 64;
    while (cap < b->n + extra) cap *= 2;
    char *p = alloc(b->c, cap);
    if (b->n) memcpy(p, b->p, b->n);
    b->p = p;
    b->cap = cap;
}

void text_add(Text *b, const char *s, size_t n) {
    if (n == 0) return;
    text_reserve(b, n);
    memcpy(b->p + b->n, s, n);
    b->n += n;
}

void text_adds(Text *b, const char *s) { text_add(b, s, strlen(s)); }
void text_addstr(Text *b, Str s) { text_add(b, s.p, s.n); }

void text_addc(Text *b, char ch) {
    text_reserve(b, 1);
    b->p[b->n++] = ch;
}

void text_addchar(Text *b, uint32_t c) {
    char tmp[4];
    text_add(b, tmp, utf8_put(c, tmp));
}

void text_addf(Text *b, const char *fmt, ...) {
    char tmp[128];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(tmp, sizeof tmp, fmt, ap);
    va_end(ap);
    text_add(b, tmp, n < 0 ? 0 : (size_t)n < sizeof tmp ? (size_t)n : sizeof tmp - 1);
}

/* An integer in decimal (printf is slow for the millions a list can hold). */
static void text_add_int(Text *b, int64_t i) {
    char digits[24];
    int n = 0;
    uint64_t u = i < 0 ? (uint64_t)0 - (uint64_t)i : (uint64_t)i;
    do {
        digits[sizeof digits - 1 - n++] = (char)('0' + u % 10);
        u /= 10;
    } while (u);
    if (i < 0) digits[sizeof digits - 1 - n++] = '-';
    text_add(b, digits + sizeof digits - n, (size_t)n);
}

/* The buffer's text as a str value (the bytes are copied, so the buffer
 * may be reused). */
Value text_value(Text *b) { return new_str(b->c, b->p, b->n); }

/* Python's repr() of a float: the shortest digits that read back as the
 * same double, written as 1e+16, 1000000000000000.0, 0.0001 or 1e-05. */
void format_float(char out[40], double f) {
    if (isnan(f)) {
        strcpy(out, "nan");
        return;
    }
    if (isinf(f)) {
        strcpy(out, f > 0 ? "inf" : "-inf");
        return;
    }
    if (f == 0) {
        strcpy(out, signbit(f) ? "-0.0" : "0.0");
        return;
    }
    /* The fewest digits that read back as f: more digits never read back
     * worse, so search for the count. */
    char sci[40];
    int lo = 1, hi = 17;
    while (lo < hi) {
        int mid = (lo + hi) / 2;
        snprintf(sci, sizeof sci, "%.*e", mid - 1, f);
        if (strtod(sci, NULL) == f) hi = mid;
        else lo = mid + 1;
    }
    snprintf(sci, sizeof sci, "%.*e", lo - 1, f);
    /* sci is [-]d[.ddd]e[+-]xx: take the digits and the exponent apart. */
    char digits[24];
    int n_digits = 0;
    const char *p = sci;
    bool negative = *p == '-';
    if (negative) p++;
    for (; *p != 'e'; p++)
        if (*p != '.') digits[n_digits++] = *p;
    while (n_digits > 1 && digits[n_digits - 1] == '0') n_digits--;
    int exponent = atoi(p + 1), point = exponent + 1; /* the value is 0.<digits> * 10^point */
    char *o = out;
    if (negative) *o++ = '-';
    if (point > 16 || point < -3) {
        *o++ = digits[0];
        if (n_digits > 1) {
            *o++ = '.';
            memcpy(o, digits + 1, (size_t)n_digits - 1);
            o += n_digits - 1;
        }
        sprintf(o, "e%c%02d", exponent < 0 ? '-' : '+', abs(exponent));
        return;
    }
    if (point <= 0) {
        *o++ = '0';
        *o++ = '.';
        for (int i = 0; i < -point; i++) *o++ = '0';
        memcpy(o, digits, (size_t)n_digits);
        o += n_digits;
    } else if (point >= n_digits) {
        memcpy(o, digits, (size_t)n_digits);
        o += n_digits;
        for (int i = n_digits; i < point; i++) *o++ = '0';
        *o++ = '.';
        *o++ = '0';
    } else {
        memcpy(o, digits, (size_t)point);
        o += point;
        *o++ = '.';
        memcpy(o, digits + point, (size_t)(n_digits - point));
        o += n_digits - point;
    }
    *o = '\0';
}

/* Python's repr() of a str. */
void repr_str(Text *b, Str s) {
    bool has_single = memchr(s.p, '\'', s.n) != NULL, has_double = memchr(s.p, '"', s.n) != NULL;
    char quote = has_single && !has_double ? '"' : '\'';
    text_addc(b, quote);
    for (size_t i = 0; i < s.n;) {
        size_t used;
        uint32_t c = next_char(s.p + i, s.n - i, &used);
        if (c == (uint32_t)quote || c == '\\') {
            text_addc(b, '\\');
            text_addc(b, (char)c);
        } else if (c == '\t') text_adds(b, "\\t");
        else if (c == '\n') text_adds(b, "\\n");
        else if (c == '\r') text_adds(b, "\\r");
        else if (py_isprintable(c)) text_add(b, s.p + i, used);
        else if (c <= 0xFF) text_addf(b, "\\x%02x", c);
        else if (c <= 0xFFFF) text_addf(b, "\\u%04x", c);
        else text_addf(b, "\\U%08x", c);
        i += used;
    }
    text_addc(b, quote);
}

static void write_items(Render *r, Text *b, const List *l, int depth) {
    for (size_t i = 0; i < l->len; i++) {
        count_iteration(b->c);
        if (i) text_adds(b, ", ");
        write_value(r, b, l->items[i], true, depth);
    }
}

static void write_dict(Render *r, Text *b, const Dict *d, int depth) {
    text_addc(b, '{');
    for (size_t i = 0; i < d->len; i++) {
        count_iteration(b->c);
        if (i) text_adds(b, ", ");
        write_value(r, b, d->keys[i], true, depth);
        text_adds(b, ": ");
        write_value(r, b, d->vals[i], true, depth);
    }
    text_addc(b, '}');
}

/* Python's str(v) (repr false) or repr(v) into b. */
void write_value(Render *r, Text *b, Value v, bool repr, int depth) {
    Ctx *c = b->c;
    if (++depth > TEMPLATE_MAX_DEPTH) raise_error(c, "a value is nested too deeply to print");
    char tmp[40];
    switch (v.kind) {
    case V_UNDEFINED:
        if (repr) text_adds(b, "Undefined");
        break;
    case V_NONE:
        text_adds(b, "None");
        break;
    case V_BOOL:
        text_adds(b, v.b ? "True" : "False");
        break;
    case V_INT:
        text_add_int(b, v.i);
        break;
    case V_FLOAT:
        format_float(tmp, v.f);
        text_adds(b, tmp);
        break;
    case V_STR:
        if (!repr) text_addstr(b, v.s);
        else if (v.markup) {
            text_adds(b, "Markup(");
            repr_str(b, v.s);
            text_addc(b, ')');
        } else repr_str(b, v.s);
        break;
    case V_LIST:
        switch (v.list->type) {
        case SEQ_LIST:
            text_addc(b, '[');
            write_items(r, b, v.list, depth);
            text_addc(b, ']');
            break;
        case SEQ_TUPLE:
            text_addc(b, '(');
            write_items(r, b, v.list, depth);
            if (v.list->len == 1) text_addc(b, ',');
            text_addc(b, ')');
            break;
        case SEQ_RANGE:
            if (v.list->range[2] == 1)
                text_addf(b, "range(%" PRId64 ", %" PRId64 ")", v.list->range[0], v.list->range[1]);
            else
                text_addf(b, "range(%" PRId64 ", %" PRId64 ", %" PRId64 ")", v.list->range[0], v.list->range[1],
                         v.list->range[2]);
            break;
        default:
            text_adds(b, seq_type_names[v.list->type]);
            text_adds(b, "([");
            write_items(r, b, v.list, depth);
            text_adds(b, "])");
        }
        break;
    case V_DICT:
        write_dict(r, b, v.dict, depth);
        break;
    case V_NAMESPACE:
        text_adds(b, "<Namespace ");
        write_dict(r, b, v.dict, depth);
        text_addc(b, '>');
        break;
    case V_ITER:
        text_addf(b, "<%s object>", v.iter->type_name);
        break;
    case V_LOOP:
        text_addf(b, "<LoopContext %zu/%zu>", v.loop->index0 + 1, loop_length(r, v.loop));
        break;
    case V_MACRO:
        text_addf(b, "<Macro '%s'>", macro_name(v.macro));
        break;
    case V_FUNC: {
        static const char *const names[] = {"<class 'range'>", "<class 'dict'>", "<class 'jinja2.utils.Namespace'>",
                                            "<function raise_exception>", "<function strftime_now>"};
        text_adds(b, names[v.func]);
        break;
    }
    case V_METHOD: {
        text_addf(b, "<built-in method %s of ", method_name(v.method->id));
        char what[64];
        object_type_repr(what, sizeof what, v.method->self);
        text_addf(b, "%s>", what);
        break;
    }
    default:
        break;
    }
}

/* ---- json.dumps, as transformers' tojson filter calls it ---- */

static void json_str(Text *b, Str s, bool ensure_ascii) {
    text_addc(b, '"');
    size_t start = 0;
    for (size_t i = 0; i < s.n;) {
        unsigned char ch = (unsigned char)s.p[i];
        if (ch >= 0x20 && ch != '"' && ch != '\\' && (ch < 0x80 || !ensure_ascii)) {
            i++;
            continue;
        }
        text_add(b, s.p + start, i - start);
        size_t used = 1;
        if (ch == '"') text_adds(b, "\\\"");
        else if (ch == '\\') text_adds(b, "\\\\");
        else if (ch == '\n') text_adds(b, "\\n");
        else if (ch == '\r') text_adds(b, "\\r");
        else if (ch == '\t') text_adds(b, "\\t");
        else if (ch == '\b') text_adds(b, "\\b");
        else if (ch == '\f') text_adds(b, "\\f");
        else if (ch < 0x20) text_addf(b, "\\u%04x", ch);
        else {
            uint32_t c = next_char(s.p + i, s.n - i, &used);
            if (c >= 0x10000)
                text_addf(b, "\\u%04x\\u%04x", 0xD800 + ((c - 0x10000) >> 10), 0xDC00 + ((c - 0x10000) & 0x3FF));
            else text_addf(b, "\\u%04x", c);
        }
        i += used;
        start = i;
    }
    text_add(b, s.p + start, s.n - start);
    text_addc(b, '"');
}

static void json_newline(Text *b, const JsonStyle *st, int level) {
    text_addc(b, '\n');
    for (int i = 0; i < level; i++) text_addstr(b, st->indent);
}

static void json_float(Text *b, double f) {
    char tmp[40];
    if (isnan(f)) text_adds(b, "NaN");
    else if (isinf(f)) text_adds(b, f > 0 ? "Infinity" : "-Infinity");
    else {
        format_float(tmp, f);
        text_adds(b, tmp);
    }
}

void json_dump(Ctx *c, Text *b, Value v, const JsonStyle *st, int level) {
    if (level > TEMPLATE_MAX_DEPTH) raise_error(c, "a value is nested too deeply for tojson");
    switch (v.kind) {
    case V_NONE:
        text_adds(b, "null");
        return;
    case V_BOOL:
        text_adds(b, v.b ? "true" : "false");
        return;
    case V_INT:
        text_add_int(b, v.i);
        return;
    case V_FLOAT:
        json_float(b, v.f);
        return;
    case V_STR:
        json_str(b, v.s, st->ensure_ascii);
        return;
    case V_LIST:
        if (v.list->type != SEQ_LIST && v.list->type != SEQ_TUPLE) break;
        if (v.list->len == 0) {
            text_adds(b, "[]");
            return;
        }
        text_addc(b, '[');
        for (size_t i = 0; i < v.list->len; i++) {
            count_iteration(c);
            if (i) text_addstr(b, st->item_sep);
            if (st->has_indent) json_newline(b, st, level + 1);
            json_dump(c, b, v.list->items[i], st, level + 1);
        }
        if (st->has_indent) json_newline(b, st, level);
        text_addc(b, ']');
        return;
    case V_DICT: {
        const Dict *d = v.dict;
        if (d->len == 0) {
            text_adds(b, "{}");
            return;
        }
        size_t *order = alloc_array(c, d->len, sizeof *order);
        for (size_t i = 0; i < d->len; i++) order[i] = i;
        if (st->sort_keys) sort_values(c, d->keys, order, d->len, false);
        text_addc(b, '{');
        for (size_t k = 0; k < d->len; k++) {
            count_iteration(c);
            Value key = d->keys[order[k]];
            if (k) text_addstr(b, st->item_sep);
            if (st->has_indent) json_newline(b, st, level + 1);
            if (key.kind == V_STR) json_str(b, key.s, st->ensure_ascii);
            else if (key.kind == V_FLOAT) {
                text_addc(b, '"');
                json_float(b, key.f);
                text_addc(b, '"');
            } else if (key.kind == V_INT) text_addf(b, "\"%" PRId64 "\"", key.i);
            else if (key.kind == V_BOOL) text_adds(b, key.b ? "\"true\"" : "\"false\"");
            else if (key.kind == V_NONE) text_adds(b, "\"null\"");
            else raise_error(c, "keys must be str, int, float, bool or None, not %s", type_name(key));
            text_addstr(b, st->key_sep);
            json_dump(c, b, d->vals[order[k]], st, level + 1);
        }
        if (st->has_indent) json_newline(b, st, level);
        text_addc(b, '}');
        return;
    }
    default:
        break;
    }
    raise_error(c, "Object of type %s is not JSON serializable", type_name(v));
}
