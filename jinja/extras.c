/* jinja/extras.c - the parts of Jinja that chat templates hardly use,
 * kept exact but apart from the rest: str.format(), the center and
 * wordcount filters, loop.cycle() and the {% filter %} block. */
#include "jinja.h"

/* ---- str.format ---- */

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


/* ---- filters ---- */

/* s|center(width=80): s centred in width characters. */
Value center_filter(Render *r, const char *fn, Value s, const Args *a) {
    static const char *const p_center[] = {"width", NULL};
    Value arg[1];
    bind_args(r, fn, a, p_center, arg);
    return pad(r, s, given(arg[0]) ? arg_int(r, fn, arg[0]) : 80, v_missing(), 0);
}

/* s|wordcount: the runs of letters, digits and _ in s. */
Value wordcount(Str s) {
    int64_t words = 0;
    bool in_word = false;
    for (size_t i = 0; i < s.n;) {
        size_t used;
        uint32_t c = next_char(s.p + i, s.n - i, &used);
        bool w = c == '_' || (unicode_class(c) & (UNICODE_LETTER | UNICODE_NUMBER));
        words += w && !in_word;
        in_word = w;
        i += used;
    }
    return v_int(words);
}

/* ---- loop.cycle ---- */

/* loop.cycle(a, b, ...): the argument of the loop's index, round and round. */
Value loop_cycle(Render *r, const Loop *l, const Args *a) {
    if (a->n_kw) raise_error(&r->c, "cycle() takes no keyword arguments");
    if (a->n_pos == 0) raise_error(&r->c, "no items for cycling given");
    return a->pos[l->index0 % a->n_pos];
}

/* ---- the {% filter %} block ---- */

/* {% filter f(args) | g %}body{% endfilter %}: the body's output through the filters. */
Flow exec_filter_block(Render *r, const Node *n, Scope *s) {
    Value v;
    Flow f = exec_filtered_body(r, n, s, &v);
    if (f == FLOW_NORMAL) output(r, to_str(r, v).s);
    return f;
}
