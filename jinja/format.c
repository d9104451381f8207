/* jinja/format.c - Python's printf-style `fmt % args` and str.format(),
 * with the format specs they share. */
#include "jinja.h"

/* ---- printf-style % and str.format ---- */

/* A format spec, from "%-05.2f" or from "{:<5.2f}". */
typedef struct {
    uint32_t fill;
    char align;        /* '<', '>', '^', '=' or 0 for the type's default */
    char sign;         /* '+', ' ', '-' or 0 */
    bool alt;          /* '#' */
    bool zero;         /* '0' */
    char grouping;     /* ',', '_' or 0 */
    int64_t width;     /* -1: none */
    int64_t precision; /* -1: none */
    char type;         /* the conversion, or 0 */
    bool percent;      /* the spec came from % (printf rules) */
} Spec;

static void pad_to(Text *b, const Spec *sp, char default_align, Str sign_and_prefix, Str body) {
    size_t len = count_chars(sign_and_prefix.p, sign_and_prefix.n) + count_chars(body.p, body.n);
    size_t width = sp->width > 0 ? (size_t)sp->width : 0, margin = width > len ? width - len : 0;
    if (width > TEMPLATE_MAX_OUTPUT)
        raise_error(b->c, "a string would be longer than %zu MiB", TEMPLATE_MAX_OUTPUT >> 20);
    char align = sp->align ? sp->align : default_align;
    uint32_t fill = sp->fill ? sp->fill : ' ';
    size_t left = align == '>' ? margin : align == '^' ? margin / 2 : 0;
    if (align == '=') {
        text_addstr(b, sign_and_prefix);
        for (size_t i = 0; i < margin; i++) text_addchar(b, fill);
        text_addstr(b, body);
        return;
    }
    for (size_t i = 0; i < left; i++) text_addchar(b, fill);
    text_addstr(b, sign_and_prefix);
    text_addstr(b, body);
    for (size_t i = left; i < margin; i++) text_addchar(b, fill);
}

/* Digits of an integer in a base, grouped by sep every group digits. */
static void int_digits(char *out, uint64_t u, int base, bool upper, char sep, int group) {
    char tmp[96];
    int n = 0, since = 0;
    do {
        if (sep && since == group) {
            tmp[n++] = sep;
            since = 0;
        }
        int d = (int)(u % (unsigned)base);
        tmp[n++] = (char)(d < 10 ? '0' + d : (upper ? 'A' : 'a') + d - 10);
        u /= (unsigned)base;
        since++;
    } while (u);
    for (int i = 0; i < n; i++) out[i] = tmp[n - 1 - i];
    out[n] = '\0';
}

static void format_number(Render *r, Text *b, Value v, const Spec *sp) {
    char type = sp->type;
    bool integer_type = type == 'd' || type == 'i' || type == 'u' || type == 'b' || type == 'o' || type == 'x' ||
                        type == 'X' || type == 'n' || type == 'c' || (type == 0 && is_integer(v));
    char prefix[8] = "", body[400];
    bool negative;
    if (integer_type) {
        if (v.kind == V_FLOAT) {
            if (!sp->percent || !(type == 'd' || type == 'i' || type == 'u'))
                raise_error(&r->c,
                            sp->percent ? "%%%c format: an integer is required, not float"
                                        : "Unknown format code '%c' for object of type 'float'",
                            type);
            if (!isfinite(v.f))
                raise_error(&r->c, "cannot convert float %s to integer", isnan(v.f) ? "NaN" : "infinity");
            if (fabs(v.f) >= 9.2e18) raise_overflow(r);
            v = v_int((int64_t)v.f);
        }
        int64_t i = int_of(v);
        if (type == 'c') {
            if (i < 0 || i > 0x10FFFF) raise_error(&r->c, "%%c arg not in range(0x110000)");
            char tmp[4];
            Spec s = *sp;
            s.precision = -1;
            pad_to(b, &s, '<', (Str){"", 0}, (Str){tmp, utf8_put((uint32_t)i, tmp)});
            return;
        }
        negative = i < 0;
        uint64_t u = negative ? (uint64_t)0 - (uint64_t)i : (uint64_t)i;
        int base = type == 'b' ? 2 : type == 'o' ? 8 : (type == 'x' || type == 'X') ? 16 : 10;
        int_digits(body, u, base, type == 'X', sp->grouping, base == 10 ? 3 : 4);
        if (sp->percent && sp->precision > (int64_t)strlen(body) && sp->precision < 300) {
            size_t n = strlen(body), add = (size_t)sp->precision - n;
            memmove(body + add, body, n + 1);
            memset(body, '0', add);
        }
        if (sp->alt && base != 10) snprintf(prefix, sizeof prefix, "0%c", type == 'b' ? 'b' : type == 'o' ? 'o' : type);
    } else {
        double f = float_of(v);
        negative = signbit(f) && !isnan(f);
        double a = fabs(f);
        int precision = sp->precision < 0 ? 6 : sp->precision > 300 ? 300 : (int)sp->precision;
        char t = type == '%' ? 'f' : type;
        if (type == '%') a *= 100;
        if (type == 0 && sp->precision < 0) format_float(body, a);
        else {
            char fmt[8] = "%";
            size_t k = 1;
            if (sp->alt) fmt[k++] = '#';
            fmt[k++] = '.';
            fmt[k++] = '*';
            fmt[k++] = t == 0 ? 'g' : t;
            fmt[k] = '\0';
            snprintf(body, sizeof body, fmt, precision, a);
        }
        if (type == '%') strcat(body, "%");
    }
    char sign[2] = {0, 0};
    if (negative) sign[0] = '-';
    else if (sp->sign == '+' || sp->sign == ' ') sign[0] = sp->sign;
    char lead[12];
    snprintf(lead, sizeof lead, "%s%s", sign, prefix);
    Spec s = *sp;
    if (sp->zero && !sp->align) {
        s.fill = '0';
        s.align = '=';
    }
    pad_to(b, &s, '>', str_c(lead), str_c(body));
}

/* Formats one value by a spec into b. */
static void format_one(Render *r, Text *b, Value v, const Spec *sp) {
    char type = sp->type;
    if (type == 'r' || type == 'a' || type == 's' || (type == 0 && !is_number(v)) ||
        (!sp->percent && v.kind == V_STR)) {
        if (!sp->percent && type != 0 && type != 's')
            raise_error(&r->c, "Unknown format code '%c' for object of type '%s'", type, type_name(v));
        if (!sp->percent && !is_str(v) && !is_number(v) && (sp->width >= 0 || sp->precision >= 0 || sp->align || type))
            raise_error(&r->c, "unsupported format string passed to %s.__format__", type_name(v));
        Text text = {.c = &r->c};
        write_value(r, &text, v, type == 'r' || type == 'a', 0);
        Str body = {text.p ? text.p : "", text.n};
        if (sp->precision >= 0 && (size_t)sp->precision < body.n)
            body.n = char_offset(r, (Value){.kind = V_STR, .ascii = all_ascii(body.p, body.n), .s = body},
                                 (size_t)sp->precision);
        pad_to(b, sp, '<', (Str){"", 0}, body);
        return;
    }
    if (v.kind == V_STR && type == 'c' && sp->percent) {
        if (count_chars(v.s.p, v.s.n) != 1) raise_error(&r->c, "%%c requires int or char");
        pad_to(b, sp, '<', (Str){"", 0}, v.s);
        return;
    }
    if (!is_number(v)) {
        if (sp->percent) raise_error(&r->c, "%%%c format: a real number is required, not %s", type, type_name(v));
        raise_error(&r->c, "Unknown format code '%c' for object of type '%s'", type, type_name(v));
    }
    if (strchr("dibouxXncDeEfFgG%", type) == NULL && type != 0)
        raise_error(&r->c, "unsupported format character '%c'", type);
    format_number(r, b, v, sp);
}

/* Python's fmt % args. */
Value format_percent(Render *r, Value fmt, Value args) {
    Str f = fmt.s;
    Value *items = &args;
    size_t n_items = 1, next = 0;
    /* Python takes any object with items but a tuple or str as a mapping
     * (then unused arguments are no error) */
    bool is_mapping = args.kind == V_DICT || args.kind == V_UNDEFINED ||
                      (args.kind == V_LIST && args.list->type != SEQ_TUPLE && args.list->type <= SEQ_RANGE);
    if (is_seq(args, SEQ_TUPLE)) {
        items = args.list->items;
        n_items = args.list->len;
    }
    Text b = {.c = &r->c};
    for (size_t i = 0; i < f.n;) {
        if (f.p[i] != '%') {
            const char *pct = memchr(f.p + i, '%', f.n - i);
            size_t end = pct ? (size_t)(pct - f.p) : f.n;
            text_add(&b, f.p + i, end - i);
            i = end;
            continue;
        }
        i++;
        Spec sp = {.width = -1, .precision = -1, .percent = true};
        Value arg;
        bool have_arg = false;
        if (i < f.n && f.p[i] == '(') {
            if (!is_mapping) raise_error(&r->c, "format requires a mapping");
            if (args.kind == V_UNDEFINED) raise_undefined(&r->c, args);
            if (args.kind != V_DICT)
                raise_error(&r->c, "%s indices must be integers or slices, not str", type_name(args));
            size_t depth = 1, k = ++i;
            while (k < f.n && depth) {
                if (f.p[k] == '(') depth++;
                else if (f.p[k] == ')') depth--;
                k++;
            }
            if (depth) raise_error(&r->c, "incomplete format key");
            Value key = new_str(&r->c, f.p + i, k - 1 - i);
            Value *found = dict_get(&r->c, args.dict, key);
            if (!found) {
                Text kb = {.c = &r->c};
                repr_str(&kb, key.s);
                raise_error(&r->c, "%.*s", (int)kb.n, kb.p);
            }
            arg = *found;
            have_arg = true;
            i = k;
        }
        for (; i < f.n && strchr("-+ #0", f.p[i]); i++) {
            if (f.p[i] == '-') sp.align = '<';
            else if (f.p[i] == '0') sp.zero = true;
            else if (f.p[i] == '#') sp.alt = true;
            else if (sp.sign != '+') sp.sign = f.p[i];
        }
        for (int part = 0; part < 2; part++) {
            if (part == 1) {
                if (i >= f.n || f.p[i] != '.') break;
                i++;
                sp.precision = 0;
            }
            int64_t *dst = part ? &sp.precision : &sp.width;
            if (i < f.n && f.p[i] == '*') {
                if (next >= n_items) raise_error(&r->c, "not enough arguments for format string");
                *dst = arg_int(r, "*", items[next++]);
                i++;
                if (part == 0 && *dst < 0) {
                    sp.align = '<';
                    *dst = -*dst;
                }
            } else
                while (i < f.n && is_digit(f.p[i])) {
                    if (*dst < 0) *dst = 0;
                    if (*dst > 100000000) raise_error(&r->c, "width too big");
                    *dst = *dst * 10 + (f.p[i++] - '0');
                }
        }
        while (i < f.n && strchr("hlL", f.p[i])) i++;
        if (i >= f.n) raise_error(&r->c, "incomplete format");
        char conv = f.p[i++];
        if (conv == '%') {
            text_addc(&b, '%');
            continue;
        }
        if (sp.align == '<') sp.zero = false;
        sp.type = conv;
        if (!strchr("sradiuoxXeEfFgGc", conv)) {
            if ((unsigned char)conv >= 0x20 && (unsigned char)conv < 0x7F)
                raise_error(&r->c, "unsupported format character '%c' (0x%x) at index %zu", conv, conv, i - 1);
            raise_error(&r->c, "unsupported format character at index %zu", i - 1);
        }
        if (!have_arg) {
            if (next >= n_items) raise_error(&r->c, "not enough arguments for format string");
            arg = items[next++];
        }
        if (arg.kind == V_UNDEFINED && conv != 's' && conv != 'r' && conv != 'a') raise_undefined(&r->c, arg);
        format_one(r, &b, arg, &sp);
    }
    if (next < n_items && !is_mapping) raise_error(&r->c, "not all arguments converted during string formatting");
    return text_value(&b);
}

/* Parses a str.format spec "[[fill]align][sign][#][0][width][,][.prec][type]". */
static void parse_format_spec(Render *r, Str s, Spec *sp) {
    *sp = (Spec){.width = -1, .precision = -1};
    size_t i = 0, used = 0;
    if (s.n) {
        uint32_t c = next_char(s.p, s.n, &used);
        if (used < s.n && strchr("<>=^", s.p[used])) {
            sp->fill = c;
            sp->align = s.p[used];
            i = used + 1;
        } else if (strchr("<>=^", s.p[0])) {
            sp->align = s.p[0];
            i = 1;
        }
    }
    if (i < s.n && strchr("+- ", s.p[i])) sp->sign = s.p[i++];
    if (i < s.n && s.p[i] == '#') {
        sp->alt = true;
        i++;
    }
    if (i < s.n && s.p[i] == '0') {
        sp->zero = true;
        i++;
    }
    while (i < s.n && is_digit(s.p[i])) {
        if (sp->width < 0) sp->width = 0;
        if (sp->width > 100000000) raise_error(&r->c, "Too many decimal digits in format string");
        sp->width = sp->width * 10 + (s.p[i++] - '0');
    }
    if (i < s.n && (s.p[i] == ',' || s.p[i] == '_')) sp->grouping = s.p[i++];
    if (i < s.n && s.p[i] == '.') {
        i++;
        sp->precision = 0;
        if (i >= s.n || !is_digit(s.p[i])) raise_error(&r->c, "Format specifier missing precision");
        while (i < s.n && is_digit(s.p[i])) {
            if (sp->precision > 100000000) raise_error(&r->c, "Too many decimal digits in format string");
            sp->precision = sp->precision * 10 + (s.p[i++] - '0');
        }
    }
    if (i < s.n) sp->type = s.p[i++];
    if (i < s.n) raise_error(&r->c, "Invalid format specifier");
}

/* The value a str.format field names: "0", "name", "0.attr", "name[key]". */
static Value format_field(Render *r, Str name, const Args *a, size_t *auto_index, int *numbering) {
    size_t i = 0;
    while (i < name.n && name.p[i] != '.' && name.p[i] != '[') i++;
    Str first = {name.p, i};
    Value v;
    bool numeric = first.n > 0;
    for (size_t k = 0; k < first.n; k++) numeric &= is_digit(first.p[k]);
    if (first.n == 0 || numeric) {
        size_t index;
        if (first.n == 0) {
            if (*numbering == 2)
                raise_error(&r->c, "cannot switch from manual field specification to automatic field numbering");
            *numbering = 1;
            index = (*auto_index)++;
        } else {
            if (*numbering == 1)
                raise_error(&r->c, "cannot switch from automatic field numbering to manual field specification");
            *numbering = 2;
            index = 0;
            for (size_t k = 0; k < first.n && index < 1000000; k++) index = index * 10 + (size_t)(first.p[k] - '0');
        }
        if (index >= a->n_pos)
            raise_error(&r->c, "Replacement index %zu out of range for positional args tuple", index);
        v = a->pos[index];
    } else {
        size_t k = 0;
        while (k < a->n_kw && !str_eq(r->t->names[a->kw_names[k]], first)) k++;
        if (k == a->n_kw) raise_error(&r->c, "'%.*s'", (int)(first.n < 64 ? first.n : 64), first.p);
        v = a->kw[k];
    }
    while (i < name.n) {
        if (name.p[i] == '.') {
            size_t j = ++i;
            while (j < name.n && name.p[j] != '.' && name.p[j] != '[') j++;
            Str attr = {name.p + i, j - i};
            v = get_attr(r, v, attr, find_method(attr));
            i = j;
        } else {
            size_t j = ++i;
            while (j < name.n && name.p[j] != ']') j++;
            if (j == name.n) raise_error(&r->c, "Missing ']' in format string");
            Str key = {name.p + i, j - i};
            bool digits = key.n > 0;
            for (size_t k = 0; k < key.n; k++) digits &= is_digit(key.p[k]);
            Value kv = v_str(key.p, key.n);
            if (digits) kv = v_int(strtoll(key.p, NULL, 10));
            v = get_item(r, v, kv);
            i = j + 1;
        }
    }
    return v;
}

/* Python's str.format, through the sandbox's attribute rules. */
Value str_format(Render *r, Value fmt, const Args *a) {
    Str f = fmt.s;
    Text b = {.c = &r->c};
    size_t auto_index = 0;
    int numbering = 0;
    for (size_t i = 0; i < f.n;) {
        char ch = f.p[i];
        if (ch == '}') {
            if (i + 1 < f.n && f.p[i + 1] == '}') {
                text_addc(&b, '}');
                i += 2;
                continue;
            }
            raise_error(&r->c, "Single '}' encountered in format string");
        }
        if (ch != '{') {
            text_addc(&b, ch);
            i++;
            continue;
        }
        if (i + 1 < f.n && f.p[i + 1] == '{') {
            text_addc(&b, '{');
            i += 2;
            continue;
        }
        /* a replacement field: {name!conv:spec}, the spec may hold {fields} */
        size_t j = i + 1;
        int depth = 1;
        while (j < f.n && depth) {
            if (f.p[j] == '{') depth++;
            else if (f.p[j] == '}') depth--;
            if (depth) j++;
        }
        if (j >= f.n)
            raise_error(&r->c, depth ? "expected '}' before end of string" : "Single '{' encountered in format string");
        Str field = {f.p + i + 1, j - i - 1};
        size_t k = 0;
        while (k < field.n && field.p[k] != '!' && field.p[k] != ':') k++;
        Str name = {field.p, k};
        char conv = 0;
        if (k < field.n && field.p[k] == '!') {
            if (k + 1 >= field.n) raise_error(&r->c, "end of string while looking for conversion specifier");
            conv = field.p[k + 1];
            if (conv != 'r' && conv != 's' && conv != 'a') raise_error(&r->c, "Unknown conversion specifier %c", conv);
            k += 2;
            if (k < field.n && field.p[k] != ':') raise_error(&r->c, "expected ':' after conversion specifier");
        }
        Str spec_text = {"", 0};
        if (k < field.n && field.p[k] == ':') spec_text = (Str){field.p + k + 1, field.n - k - 1};
        Value v = format_field(r, name, a, &auto_index, &numbering);
        if (memchr(spec_text.p, '{', spec_text.n)) {
            Value inner = str_format(r, v_str(spec_text.p, spec_text.n), a);
            spec_text = inner.s;
        }
        if (conv == 'r' || conv == 'a') {
            Text rb = {.c = &r->c};
            write_value(r, &rb, v, true, 0);
            v = text_value(&rb);
        } else if (conv == 's') v = to_str(r, v);
        Spec sp;
        parse_format_spec(r, spec_text, &sp);
        if (v.kind == V_UNDEFINED && (sp.type || sp.width >= 0)) raise_undefined(&r->c, v);
        if (spec_text.n == 0) text_addstr(&b, to_str(r, v).s);
        else format_one(r, &b, v, &sp);
        i = j + 1;
    }
    return text_value(&b);
}
