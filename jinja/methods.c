/* jinja/methods.c - calling the methods of str, dict, list and loop:
 * binding arguments as Python does, and each method's work. */
/* memmem(): a linear-time substring search */
#define _GNU_SOURCE
#include "jinja.h"

/* ---- arguments of calls ---- */

/* Lays the arguments out in the order of params (a NULL-terminated list
 * of names), V_MISSING where not given, raising Python's TypeErrors. */
void bind_args(Render *r, const char *fn, const Args *a, const char *const *params, Value *out) {
    size_t n_params = 0;
    while (params[n_params]) n_params++;
    if (a->n_pos > n_params)
        raise_error(&r->c, "%s() takes at most %zu argument%s (%zu given)", fn, n_params, n_params == 1 ? "" : "s",
                    a->n_pos);
    for (size_t i = 0; i < n_params; i++) out[i] = i < a->n_pos ? a->pos[i] : v_missing();
    for (size_t k = 0; k < a->n_kw; k++) {
        Str name = r->t->names[a->kw_names[k]];
        size_t i = 0;
        while (i < n_params && !str_is(name, params[i])) i++;
        if (i == n_params)
            raise_error(&r->c, "%s() got an unexpected keyword argument '%.*s'", fn, (int)name.n, name.p);
        if (out[i].kind != V_MISSING)
            raise_error(&r->c, "%s() got multiple values for argument '%.*s'", fn, (int)name.n, name.p);
        out[i] = a->kw[k];
    }
}

/* For a built-in method that takes up to max positional arguments only:
 * Python's TypeErrors. */
static void positional_only(Render *r, const char *fn, const Args *a, size_t max) {
    if (a->n_kw) raise_error(&r->c, "%s() takes no keyword arguments", fn);
    if (a->n_pos > max)
        raise_error(&r->c, "%s expected at most %zu argument%s, got %zu", fn, max, max == 1 ? "" : "s", a->n_pos);
}

/* For a method that takes no arguments: Python's TypeError if given some. */
static void no_arguments(Render *r, Value self, const char *fn, const Args *a) {
    if (a->n_kw) raise_error(&r->c, "%s.%s() takes no keyword arguments", type_name(self), fn);
    if (a->n_pos) raise_error(&r->c, "%s.%s() takes no arguments (%zu given)", type_name(self), fn, a->n_pos);
}

/* A str argument; what names the argument in Python's TypeError ("must
 * be str, not int"), e.g. "replace() argument 1 ". */
Str arg_str(Render *r, const char *what, Value v) {
    if (!is_str(v)) raise_error(&r->c, "%smust be str, not %s", what, type_name(v));
    return v.s;
}

int64_t arg_int(Render *r, const char *fn, Value v) {
    if (!is_integer(v)) raise_error(&r->c, "%s(): '%s' object cannot be interpreted as an integer", fn, type_name(v));
    return int_of(v);
}

/* ---- str methods ---- */

void add_upper(Text *b, uint32_t c) {
    if (c == 0xDF) text_adds(b, "SS");
    else text_addchar(b, char_upper(c));
}

Value change_case(Render *r, Value v, CaseMap how) {
    Str s = v.s;
    Text b = {.c = &r->c};
    text_reserve(&b, s.n);
    bool prev_cased = false;
    for (size_t i = 0, k = 0; i < s.n; k++) {
        size_t used;
        uint32_t c = next_char(s.p + i, s.n - i, &used);
        bool upper = false;
        switch (how) {
        case CASE_UPPER:
            upper = true;
            break;
        case CASE_LOWER:
            break;
        case CASE_SWAP:
            upper = !char_is_upper(c);
            break;
        case CASE_TITLE:
            upper = !prev_cased;
            break;
        case CASE_CAPITALIZE:
            upper = k == 0;
            break;
        }
        if (how == CASE_SWAP && !char_is_upper(c) && !char_is_lower(c)) text_add(&b, s.p + i, used);
        else if (upper) add_upper(&b, c);
        else text_addchar(&b, char_lower(c));
        prev_cased = char_is_cased(c);
        i += used;
    }
    return text_value(&b);
}

static bool in_chars(uint32_t c, Str chars) {
    for (size_t i = 0; i < chars.n;) {
        size_t used;
        if (next_char(chars.p + i, chars.n - i, &used) == c) return true;
        i += used;
    }
    return false;
}

/* Python's strip/lstrip/rstrip: white space, or the characters of chars. */
Value strip(Render *r, Value v, Value chars, bool left, bool right) {
    if (given(chars) && chars.kind != V_NONE && !is_str(chars))
        raise_error(&r->c, "%s arg must be None or str", left && right ? "strip" : left ? "lstrip" : "rstrip");
    bool space = !given(chars) || chars.kind == V_NONE;
    Str s = v.s;
    size_t a = 0, b = s.n, used;
    while (left && a < b) {
        uint32_t c = next_char(s.p + a, b - a, &used);
        if (space ? !py_isspace(c) : !in_chars(c, chars.s)) break;
        a += used;
    }
    while (right && b > a) {
        size_t start = prev_char_start(s.p + a, b - a) + a;
        uint32_t c = next_char(s.p + start, b - start, &used);
        if (space ? !py_isspace(c) : !in_chars(c, chars.s)) break;
        b = start;
    }
    if (a == 0 && b == s.n) return v;
    return (Value){.kind = V_STR, .ascii = v.ascii, .s = {s.p + a, b - a}};
}

Value substr(Value v, size_t a, size_t b) { return v_str(v.s.p + a, b - a); }

/* Python's str.split (right: rsplit) with sep None (runs of white space)
 * or a separator, at most maxsplit times (-1: no limit). */
Value split(Render *r, Value v, Value sep, int64_t maxsplit, bool right) {
    List *l = new_list(&r->c, SEQ_LIST, 0);
    Str s = v.s;
    if (maxsplit < 0) maxsplit = INT64_MAX;
    if (!given(sep) || sep.kind == V_NONE) {
        size_t used;
        if (!right) {
            size_t i = 0;
            for (;;) {
                while (i < s.n && py_isspace(next_char(s.p + i, s.n - i, &used))) i += used;
                if (i == s.n) break;
                if (maxsplit-- == 0) {
                    list_push(&r->c, l, substr(v, i, s.n));
                    break;
                }
                size_t j = i;
                while (j < s.n && !py_isspace(next_char(s.p + j, s.n - j, &used))) j += used;
                list_push(&r->c, l, substr(v, i, j));
                i = j;
            }
            return v_list(l);
        }
        size_t j = s.n;
        for (;;) {
            while (j > 0) {
                size_t start = prev_char_start(s.p, j);
                if (!py_isspace(next_char(s.p + start, j - start, &used))) break;
                j = start;
            }
            if (j == 0) break;
            if (maxsplit-- == 0) {
                list_push(&r->c, l, substr(v, 0, j));
                break;
            }
            size_t i = j;
            while (i > 0) {
                size_t start = prev_char_start(s.p, i);
                if (py_isspace(next_char(s.p + start, i - start, &used))) break;
                i = start;
            }
            list_push(&r->c, l, substr(v, i, j));
            j = i;
        }
    } else {
        if (!is_str(sep)) raise_error(&r->c, "must be str or None, not %s", type_name(sep));
        Str d = sep.s;
        if (d.n == 0) raise_error(&r->c, "empty separator");
        if (!right) {
            size_t i = 0;
            const char *hit;
            while (maxsplit-- > 0 && (hit = memmem(s.p + i, s.n - i, d.p, d.n)) != NULL) {
                list_push(&r->c, l, substr(v, i, (size_t)(hit - s.p)));
                i = (size_t)(hit - s.p) + d.n;
            }
            list_push(&r->c, l, substr(v, i, s.n));
            return v_list(l);
        }
        size_t j = s.n;
        while (maxsplit > 0 && j >= d.n) {
            size_t k = j - d.n;
            for (;; k--) {
                if (memcmp(s.p + k, d.p, d.n) == 0) break;
                if (k == 0) {
                    k = SIZE_MAX;
                    break;
                }
            }
            if (k == SIZE_MAX) break;
            list_push(&r->c, l, substr(v, k + d.n, j));
            j = k;
            maxsplit--;
        }
        list_push(&r->c, l, substr(v, 0, j));
    }
    /* rsplit found the pieces from the right */
    for (size_t i = 0; i < l->len / 2; i++) {
        Value t = l->items[i];
        l->items[i] = l->items[l->len - 1 - i];
        l->items[l->len - 1 - i] = t;
    }
    return v_list(l);
}

/* Python's line boundaries for splitlines(): the length of the one at s[i], or 0. */
static size_t line_break_at(Str s, size_t i) {
    unsigned char ch = (unsigned char)s.p[i];
    if (ch == '\r') return i + 1 < s.n && s.p[i + 1] == '\n' ? 2 : 1;
    if (ch == '\n' || ch == '\v' || ch == '\f' || (ch >= 0x1C && ch <= 0x1E)) return 1;
    if (ch >= 0x80) {
        size_t used;
        uint32_t c = next_char(s.p + i, s.n - i, &used);
        if (c == 0x85 || c == 0x2028 || c == 0x2029) return used;
    }
    return 0;
}

Value splitlines(Render *r, Value v, bool keepends) {
    List *l = new_list(&r->c, SEQ_LIST, 0);
    Str s = v.s;
    size_t start = 0;
    for (size_t i = 0; i < s.n;) {
        size_t br = line_break_at(s, i);
        if (!br) {
            i++;
            continue;
        }
        list_push(&r->c, l, substr(v, start, keepends ? i + br : i));
        i += br;
        start = i;
    }
    if (start < s.n) list_push(&r->c, l, substr(v, start, s.n));
    return v_list(l);
}

/* The character range [start, end) of a str method's optional start and
 * end arguments, as byte offsets. */
static void method_range(Render *r, Value v, Value start, Value end, size_t *a, size_t *b) {
    size_t len = length_of(r, v);
    int64_t lo = 0, hi = (int64_t)len;
    if (given(start) && start.kind != V_NONE) {
        if (!is_integer(start))
            raise_error(&r->c, "slice indices must be integers or None or have an __index__ method");
        lo = int_of(start);
        if (lo < 0) lo = lo + (int64_t)len < 0 ? 0 : lo + (int64_t)len;
    }
    if (given(end) && end.kind != V_NONE) {
        if (!is_integer(end)) raise_error(&r->c, "slice indices must be integers or None or have an __index__ method");
        hi = int_of(end);
        if (hi < 0) hi = hi + (int64_t)len < 0 ? 0 : hi + (int64_t)len;
    }
    if (lo > (int64_t)len) lo = (int64_t)len + 1; /* an empty range that finds nothing, not even "" */
    if (hi > (int64_t)len) hi = (int64_t)len;
    if (lo > (int64_t)len) {
        *a = v.s.n + 1;
        *b = v.s.n;
        return;
    }
    *a = char_offset(r, v, (size_t)lo);
    *b = hi < lo ? *a : char_offset(r, v, (size_t)hi);
}

/* str.find/rfind/index/rindex/count. */
static Value find_sub(Render *r, Value v, MethodId id, Value *arg) {
    size_t a, b;
    method_range(r, v, arg[1], arg[2], &a, &b);
    Str sub = arg_str(r, "", arg[0]);
    if (a > b) {
        if (id == M_COUNT) return v_int(0);
        if (id == M_INDEX || id == M_RINDEX) raise_error(&r->c, "substring not found");
        return v_int(-1);
    }
    Str s = {v.s.p + a, b - a};
    if (id == M_COUNT) {
        if (sub.n == 0) return v_int((int64_t)count_chars(s.p, s.n) + 1);
        int64_t count = 0;
        const char *hit;
        for (size_t i = 0; (hit = memmem(s.p + i, s.n - i, sub.p, sub.n)) != NULL; i = (size_t)(hit - s.p) + sub.n)
            count++;
        return v_int(count);
    }
    const char *hit = NULL;
    if (id == M_FIND || id == M_INDEX) hit = sub.n == 0 ? s.p : memmem(s.p, s.n, sub.p, sub.n);
    else if (sub.n <= s.n)
        for (size_t k = s.n - sub.n + 1; k-- > 0;)
            if (memcmp(s.p + k, sub.p, sub.n) == 0) {
                hit = s.p + k;
                break;
            }
    if (!hit) {
        if (id == M_INDEX || id == M_RINDEX) raise_error(&r->c, "substring not found");
        return v_int(-1);
    }
    return v_int((int64_t)count_chars(v.s.p, (size_t)(hit - v.s.p)));
}

/* str.startswith/endswith with a str or a tuple of str. */
static Value starts_or_ends(Render *r, Value v, bool ends, Value *arg) {
    size_t a, b;
    method_range(r, v, arg[1], arg[2], &a, &b);
    Value want = arg[0];
    size_t n = 1;
    Value *options = &want;
    if (is_seq(want, SEQ_TUPLE)) {
        n = want.list->len;
        options = want.list->items;
    } else if (!is_str(want))
        raise_error(&r->c, "%s first arg must be str or a tuple of str, not %s", ends ? "endswith" : "startswith",
                    type_name(want));
    for (size_t i = 0; i < n; i++) {
        if (!is_str(options[i]))
            raise_error(&r->c, "tuple for %s must only contain str, not %s", ends ? "endswith" : "startswith",
                        type_name(options[i]));
        Str o = options[i].s;
        if (a > b || o.n > b - a) continue;
        if (memcmp(v.s.p + (ends ? b - o.n : a), o.p, o.n) == 0) return v_bool(true);
    }
    return v_bool(false);
}

/* str.center/ljust/rjust: pads to width characters with fill. */
Value pad(Render *r, Value v, int64_t width, Value fill, int where) {
    uint32_t f = ' ';
    if (given(fill)) {
        if (!is_str(fill) || count_chars(fill.s.p, fill.s.n) != 1)
            raise_error(&r->c, "The fill character must be exactly one character long");
        size_t used;
        f = next_char(fill.s.p, fill.s.n, &used);
    }
    size_t len = length_of(r, v);
    if (width <= (int64_t)len) return v;
    if (width > (int64_t)TEMPLATE_MAX_OUTPUT)
        raise_error(&r->c, "a string would be longer than %zu MiB", TEMPLATE_MAX_OUTPUT >> 20);
    size_t margin = (size_t)width - len, left = where < 0   ? 0
                                                : where > 0 ? margin
                                                            : margin / 2 + (margin & (size_t)width & 1);
    Text b = {.c = &r->c};
    for (size_t i = 0; i < left; i++) text_addchar(&b, f);
    text_addstr(&b, v.s);
    for (size_t i = left; i < margin; i++) text_addchar(&b, f);
    return text_value(&b);
}

/* Python's str.replace (count < 0: all). */
Value replace(Render *r, Value v, Str old, Str new, int64_t count) {
    if (count < 0) count = INT64_MAX;
    Text b = {.c = &r->c};
    Str s = v.s;
    if (old.n == 0) {
        /* "" matches before every character and at the end */
        size_t i = 0;
        while (i < s.n && count > 0) {
            text_addstr(&b, new);
            size_t used = 1;
            if (!v.ascii) next_char(s.p + i, s.n - i, &used);
            text_add(&b, s.p + i, used);
            i += used;
            count--;
        }
        if (i == s.n && count > 0) text_addstr(&b, new);
        text_add(&b, s.p + i, s.n - i);
        return text_value(&b);
    }
    size_t i = 0;
    const char *hit;
    while (count-- > 0 && (hit = memmem(s.p + i, s.n - i, old.p, old.n)) != NULL) {
        text_add(&b, s.p + i, (size_t)(hit - s.p) - i);
        text_addstr(&b, new);
        i = (size_t)(hit - s.p) + old.n;
    }
    if (i == 0) return v;
    text_add(&b, s.p + i, s.n - i);
    return text_value(&b);
}

/* The str predicates isalpha, isdigit, ...: true for a non-empty str whose
 * every character passes. */
Value str_predicate(Value v, MethodId id) {
    Str s = v.s;
    if (s.n == 0) return v_bool(false);
    bool any_cased = false, prev_cased = false, title_ok = true;
    for (size_t i = 0; i < s.n;) {
        size_t used;
        uint32_t c = next_char(s.p + i, s.n - i, &used);
        unsigned cls = unicode_class(c);
        bool ok = true;
        switch (id) {
        case M_ISALNUM:
            ok = (cls & (UNICODE_LETTER | UNICODE_NUMBER)) != 0;
            break;
        case M_ISALPHA:
            ok = (cls & UNICODE_LETTER) != 0;
            break;
        case M_ISDECIMAL:
        case M_ISDIGIT:
        case M_ISNUMERIC:
            ok = (cls & UNICODE_NUMBER) != 0;
            break;
        case M_ISSPACE:
            ok = py_isspace(c);
            break;
        case M_ISLOWER:
            ok = !char_is_upper(c);
            break;
        case M_ISUPPER:
            ok = !char_is_lower(c);
            break;
        default: /* M_ISTITLE */
            if (char_is_upper(c)) title_ok &= !prev_cased;
            else if (char_is_lower(c)) title_ok &= prev_cased;
            break;
        }
        if (!ok) return v_bool(false);
        bool cased = char_is_upper(c) || char_is_lower(c);
        any_cased |= cased;
        prev_cased = cased;
        i += used;
    }
    if (id == M_ISLOWER || id == M_ISUPPER) return v_bool(any_cased);
    if (id == M_ISTITLE) return v_bool(any_cased && title_ok);
    return v_bool(true);
}

Value join(Render *r, Str sep, Value iterable, bool any_type) {
    size_t n;
    if (!any_type && iterable.kind != V_STR && iterable.kind != V_LIST && iterable.kind != V_DICT &&
        iterable.kind != V_ITER && iterable.kind != V_UNDEFINED)
        raise_error(&r->c, "can only join an iterable");
    Value *items = iterate(r, iterable, &n);
    Text b = {.c = &r->c};
    for (size_t i = 0; i < n; i++) {
        if (i) text_addstr(&b, sep);
        if (!any_type && !is_str(items[i]))
            raise_error(&r->c, "sequence item %zu: expected str instance, %s found", i, type_name(items[i]));
        text_addstr(&b, to_str(r, items[i]).s);
    }
    return text_value(&b);
}

static Value str_method(Render *r, Value v, MethodId id, const Args *a) {
    static const char *const one[] = {"x", NULL};
    static const char *const two[] = {"x", "y", NULL};
    static const char *const sub_range[] = {"sub", "start", "end", NULL};
    static const char *const split_params[] = {"sep", "maxsplit", NULL};
    static const char *const keepends[] = {"keepends", NULL};
    static const char *const replace_params[] = {"old", "new", "count", NULL};
    const char *fn = methods[id].name;
    Value arg[3];
    switch (id) {
    case M_FORMAT:
        return str_format(r, v, a);
    case M_SPLIT:
    case M_RSPLIT:
        bind_args(r, fn, a, split_params, arg);
        return split(r, v, arg[0], given(arg[1]) ? arg_int(r, fn, arg[1]) : -1, id == M_RSPLIT);
    case M_SPLITLINES:
        bind_args(r, fn, a, keepends, arg);
        return splitlines(r, v, given(arg[0]) && truthy(arg[0]));
    case M_STRIP:
    case M_LSTRIP:
    case M_RSTRIP:
        positional_only(r, fn, a, 1);
        bind_args(r, fn, a, one, arg);
        return strip(r, v, arg[0], id != M_RSTRIP, id != M_LSTRIP);
    case M_STARTSWITH:
    case M_ENDSWITH:
        positional_only(r, fn, a, 3);
        bind_args(r, fn, a, sub_range, arg);
        if (!given(arg[0])) raise_error(&r->c, "%s() takes at least 1 argument (0 given)", fn);
        return starts_or_ends(r, v, id == M_ENDSWITH, arg);
    case M_FIND:
    case M_RFIND:
    case M_INDEX:
    case M_RINDEX:
    case M_COUNT:
        positional_only(r, fn, a, 3);
        bind_args(r, fn, a, sub_range, arg);
        if (!given(arg[0])) raise_error(&r->c, "%s() takes at least 1 argument (0 given)", fn);
        return find_sub(r, v, id, arg);
    case M_REPLACE:
        positional_only(r, fn, a, 3);
        bind_args(r, fn, a, replace_params, arg);
        if (!given(arg[1])) raise_error(&r->c, "replace expected at least 2 arguments, got %zu", a->n_pos);
        {
            Str old = arg_str(r, "replace() argument 1 ", arg[0]), new = arg_str(r, "replace() argument 2 ", arg[1]);
            return replace(r, v, old, new, given(arg[2]) ? arg_int(r, fn, arg[2]) : -1);
        }
    case M_JOIN:
        if (a->n_kw) raise_error(&r->c, "str.join() takes no keyword arguments");
        if (a->n_pos != 1) raise_error(&r->c, "str.join() takes exactly one argument (%zu given)", a->n_pos);
        bind_args(r, fn, a, one, arg);
        return join(r, v.s, arg[0], false);
    case M_CENTER:
    case M_LJUST:
    case M_RJUST:
        positional_only(r, fn, a, 2);
        bind_args(r, fn, a, two, arg);
        if (!given(arg[0])) raise_error(&r->c, "%s expected at least 1 argument, got 0", fn);
        return pad(r, v, arg_int(r, fn, arg[0]), arg[1], id == M_LJUST ? -1 : id == M_RJUST ? 1 : 0);
    case M_ZFILL: {
        bind_args(r, fn, a, one, arg);
        if (!given(arg[0])) raise_error(&r->c, "zfill() takes exactly one argument (0 given)");
        int64_t width = arg_int(r, fn, arg[0]);
        size_t len = length_of(r, v);
        if (width <= (int64_t)len) return v;
        Value padded = pad(r, v, width, v_str("0", 1), 1);
        if (v.s.n && (v.s.p[0] == '+' || v.s.p[0] == '-')) {
            /* the sign goes first: "-42" -> "-0042" */
            char *p = (char *)padded.s.p;
            p[(size_t)width - len] = '0';
            p[0] = v.s.p[0];
        }
        return padded;
    }
    case M_PARTITION:
    case M_RPARTITION: {
        bind_args(r, fn, a, one, arg);
        if (!given(arg[0])) raise_error(&r->c, "%s() takes exactly one argument (0 given)", fn);
        Str sep = arg_str(r, "", arg[0]);
        if (sep.n == 0) raise_error(&r->c, "empty separator");
        const char *hit = NULL;
        if (id == M_PARTITION) hit = memmem(v.s.p, v.s.n, sep.p, sep.n);
        else if (sep.n <= v.s.n)
            for (size_t k = v.s.n - sep.n + 1; k-- > 0;)
                if (memcmp(v.s.p + k, sep.p, sep.n) == 0) {
                    hit = v.s.p + k;
                    break;
                }
        List *l = new_list(&r->c, SEQ_TUPLE, 3);
        Value empty = v_str("", 0);
        if (!hit) {
            l->items[0] = id == M_PARTITION ? v : empty;
            l->items[1] = empty;
            l->items[2] = id == M_PARTITION ? empty : v;
        } else {
            size_t at = (size_t)(hit - v.s.p);
            l->items[0] = substr(v, 0, at);
            l->items[1] = arg[0];
            l->items[2] = substr(v, at + sep.n, v.s.n);
        }
        return v_list(l);
    }
    case M_REMOVEPREFIX:
    case M_REMOVESUFFIX: {
        bind_args(r, fn, a, one, arg);
        if (!given(arg[0])) raise_error(&r->c, "%s() takes exactly one argument (0 given)", fn);
        char what[40];
        snprintf(what, sizeof what, "%s() argument ", fn);
        Str x = arg_str(r, what, arg[0]);
        if (x.n > v.s.n) return v;
        if (id == M_REMOVEPREFIX && memcmp(v.s.p, x.p, x.n) == 0) return substr(v, x.n, v.s.n);
        if (id == M_REMOVESUFFIX && x.n && memcmp(v.s.p + v.s.n - x.n, x.p, x.n) == 0) return substr(v, 0, v.s.n - x.n);
        return v;
    }
    default:
        break;
    }
    no_arguments(r, v, fn, a);
    switch (id) {
    case M_UPPER:
        return change_case(r, v, CASE_UPPER);
    case M_LOWER:
    case M_CASEFOLD:
        return change_case(r, v, CASE_LOWER);
    case M_SWAPCASE:
        return change_case(r, v, CASE_SWAP);
    case M_TITLE:
        return change_case(r, v, CASE_TITLE);
    case M_CAPITALIZE:
        return change_case(r, v, CASE_CAPITALIZE);
    default:
        return str_predicate(v, id);
    }
}

/* ---- dict, list and loop methods ---- */

Value dict_view(Render *r, Dict *d, SeqType type) {
    List *l = new_list(&r->c, type, d->len);
    for (size_t i = 0; i < d->len; i++)
        l->items[i] = type == SEQ_KEYS     ? d->keys[i]
                      : type == SEQ_VALUES ? d->vals[i]
                                           : new_tuple2(&r->c, d->keys[i], d->vals[i]);
    return v_list(l);
}

static Value copy_dict(Render *r, const Dict *d) {
    Dict *copy = new_dict(&r->c, d->len);
    for (size_t i = 0; i < d->len; i++) dict_set(&r->c, copy, d->keys[i], d->vals[i]);
    return v_dict(copy);
}

static Value other_method(Render *r, Value v, MethodId id, const Args *a) {
    static const char *const get_params[] = {"key", "default", NULL};
    static const char *const index_params[] = {"value", "start", "stop", NULL};
    static const char *const pop_params[] = {"index", NULL};
    const char *fn = methods[id].name;
    Value arg[3];
    switch (id) {
    case M_GET: {
        positional_only(r, fn, a, 2);
        bind_args(r, fn, a, get_params, arg);
        if (!given(arg[0])) raise_error(&r->c, "get expected at least 1 argument, got 0");
        Value *found = dict_get(&r->c, v.dict, arg[0]);
        return found ? *found : given(arg[1]) ? arg[1] : v_none();
    }
    case M_ITEMS:
    case M_KEYS:
    case M_VALUES:
        no_arguments(r, v, fn, a);
        return dict_view(r, v.dict, id == M_ITEMS ? SEQ_ITEMS : id == M_KEYS ? SEQ_KEYS : SEQ_VALUES);
    case M_COPY: {
        no_arguments(r, v, fn, a);
        if (v.kind == V_DICT) return copy_dict(r, v.dict);
        List *copy = new_list(&r->c, SEQ_LIST, v.list->len);
        if (v.list->len) memcpy(copy->items, v.list->items, v.list->len * sizeof(Value));
        return v_list(copy);
    }
    case M_INDEX:
    case M_COUNT: {
        if (id == M_COUNT && (a->n_kw || a->n_pos != 1))
            raise_error(&r->c, "%s.count() takes exactly one argument (%zu given)", type_name(v), a->n_pos + a->n_kw);
        positional_only(r, fn, a, 3);
        bind_args(r, fn, a, index_params, arg);
        if (!given(arg[0])) raise_error(&r->c, "%s() takes at least 1 argument (0 given)", fn);
        int64_t count = 0;
        for (size_t i = 0; i < v.list->len; i++)
            if (py_equal(&r->c, v.list->items[i], arg[0])) {
                if (id == M_INDEX) return v_int((int64_t)i);
                count++;
            }
        if (id == M_COUNT) return v_int(count);
        Text b = {.c = &r->c};
        write_value(r, &b, arg[0], true, 0);
        raise_error(&r->c, "%.*s is not in %s", (int)b.n, b.p, type_name(v));
    }
    case M_POP: {
        /* list.pop is allowed by the immutable sandbox, and changes the list */
        positional_only(r, fn, a, 1);
        bind_args(r, fn, a, pop_params, arg);
        List *l = v.list;
        if (l->len == 0) raise_error(&r->c, "pop from empty list");
        int64_t i = given(arg[0]) ? normalize_index(arg_int(r, fn, arg[0]), l->len) : (int64_t)l->len - 1;
        if (i < 0) raise_error(&r->c, "pop index out of range");
        Value item = l->items[i];
        memmove(l->items + i, l->items + i + 1, (l->len - (size_t)i - 1) * sizeof(Value));
        l->len--;
        return item;
    }
    case M_CLEAR:
        no_arguments(r, v, fn, a);
        v.list->len = 0;
        return v_none();
    case M_CYCLE:
        if (a->n_kw) raise_error(&r->c, "cycle() takes no keyword arguments");
        if (a->n_pos == 0) raise_error(&r->c, "no items for cycling given");
        return a->pos[v.loop->index0 % a->n_pos];
    case M_CHANGED: {
        if (a->n_kw) raise_error(&r->c, "changed() takes no keyword arguments");
        List *now = new_list(&r->c, SEQ_TUPLE, a->n_pos);
        if (a->n_pos) memcpy(now->items, a->pos, a->n_pos * sizeof(Value));
        Value args = v_list(now);
        if (v.loop->changed_last.kind != V_MISSING && py_equal(&r->c, v.loop->changed_last, args)) return v_bool(false);
        v.loop->changed_last = args;
        return v_bool(true);
    }
    default:
        raise_error(&r->c, "%s.%s() is not supported", type_name(v), fn);
    }
}

Value call_method(Render *r, Value self, int id, const Args *a) {
    if (methods[id].unsupported) raise_error(&r->c, "%s.%s() is not supported", type_name(self), methods[id].name);
    if (self.kind == V_STR) return str_method(r, self, (MethodId)id, a);
    return other_method(r, self, (MethodId)id, a);
}
