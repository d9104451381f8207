/* jinja/filters.c - jinja2's filters (with transformers' tojson) and
 * tests; the generators that map, select and reject make. */
#include "jinja.h"

/* ---- filters ---- */

/* jinja2's soft_str: Markup stays Markup, anything else becomes str. */
static Value soft_str(Render *r, Value v) { return to_str(r, v); }

/* The parts of an attribute path "a.b.0" (digits are list indices). */
static Value *attribute_parts(Render *r, Value attribute, size_t *n) {
    if (!is_str(attribute)) {
        Value *one = alloc(&r->c, sizeof *one);
        *one = attribute;
        *n = 1;
        return one;
    }
    List *l = split(r, attribute, v_str(".", 1), -1, false).list;
    for (size_t i = 0; i < l->len; i++) {
        Str part = l->items[i].s;
        bool digits = part.n > 0 && part.n < 19;
        for (size_t k = 0; k < part.n; k++) digits &= is_digit(part.p[k]);
        if (digits) l->items[i] = v_int(strtoll(part.p, NULL, 10));
    }
    *n = l->len;
    return l->items;
}

/* jinja2's make_attrgetter: item[part] for each part, with an optional
 * default for undefined results and lower-casing of str for sorting. */
static Value get_path(Render *r, Value item, const Value *parts, size_t n, Value dflt, bool lower) {
    for (size_t i = 0; i < n; i++) {
        item = get_item(r, item, parts[i]);
        if (given(dflt) && dflt.kind != V_NONE && item.kind == V_UNDEFINED) item = dflt;
    }
    if (lower && is_str(item)) item = change_case(r, item, CASE_LOWER);
    return item;
}

/* The sort keys of items: the items (or an attribute of each), lower-cased
 * unless case_sensitive. attribute may name several, "a,b". */
Value *sort_keys(Render *r, List *items, Value attribute, bool case_sensitive) {
    Value *keys = alloc_array(&r->c, items->len ? items->len : 1, sizeof *keys);
    List *attrs = NULL;
    if (is_str(attribute)) attrs = split(r, attribute, v_str(",", 1), -1, false).list;
    for (size_t i = 0; i < items->len; i++) {
        if (!given(attribute) || attribute.kind == V_NONE)
            keys[i] = get_path(r, items->items[i], NULL, 0, v_missing(), !case_sensitive);
        else if (!attrs || attrs->len == 1) {
            size_t n;
            Value *parts = attribute_parts(r, attrs ? attrs->items[0] : attribute, &n);
            keys[i] = get_path(r, items->items[i], parts, n, v_missing(), !case_sensitive);
        } else {
            List *key = new_list(&r->c, SEQ_LIST, attrs->len);
            for (size_t k = 0; k < attrs->len; k++) {
                size_t n;
                Value *parts = attribute_parts(r, attrs->items[k], &n);
                key->items[k] = get_path(r, items->items[i], parts, n, v_missing(), !case_sensitive);
            }
            keys[i] = v_list(key);
        }
    }
    return keys;
}

/* select, reject, selectattr and rejectattr. */
static List *select_items(Render *r, Value v, const Args *a, bool attr, bool keep) {
    List *out = new_list(&r->c, SEQ_LIST, 0);
    if (truthy(v)) {
        if (attr && a->n_pos == 0) raise_error(&r->c, "Missing parameter for attribute name");
        size_t n_parts = 0, off = attr ? 1 : 0;
        Value *parts = attr ? attribute_parts(r, a->pos[0], &n_parts) : NULL;
        size_t n_rest = a->n_pos > off + 1 ? a->n_pos - off - 1 : 0;
        Args test_args = {n_rest ? a->pos + off + 1 : NULL, n_rest, a->kw_names, a->kw, a->n_kw};
        int test = -1;
        Str test_name = {"", 0};
        if (a->n_pos > off) {
            Value tn = a->pos[off];
            if (!is_str(tn)) raise_error(&r->c, "a test name must be a str");
            test_name = tn.s;
            test = find_test(tn.s);
            if (test < 0) raise_error(&r->c, "No test named '%.*s'.", (int)(tn.s.n < 64 ? tn.s.n : 64), tn.s.p);
        }
        size_t n;
        Value *items = iterate(r, v, &n);
        for (size_t i = 0; i < n; i++) {
            count_iteration(&r->c);
            Value x = attr ? get_path(r, items[i], parts, n_parts, v_missing(), false) : items[i];
            bool pass = test < 0 ? truthy(x) : apply_test_id(r, test, test_name, x, &test_args);
            if (pass == keep) list_push(&r->c, out, items[i]);
        }
    }
    return out;
}

static List *map_items(Render *r, Value v, const Args *a) {
    List *out = new_list(&r->c, SEQ_LIST, 0);
    if (!truthy(v)) return out;
    Value attribute = v_missing(), dflt = v_missing();
    bool by_attribute = false;
    if (a->n_pos == 0) {
        for (size_t k = 0; k < a->n_kw; k++) {
            Str name = r->t->names[a->kw_names[k]];
            if (str_is(name, "attribute")) {
                attribute = a->kw[k];
                by_attribute = true;
            } else if (str_is(name, "default")) dflt = a->kw[k];
            else raise_error(&r->c, "Unexpected keyword argument '%.*s'", (int)name.n, name.p);
        }
        if (!by_attribute && a->n_kw) raise_error(&r->c, "map requires a filter argument");
    }
    if (!by_attribute && a->n_pos == 0) raise_error(&r->c, "map requires a filter argument");
    size_t n_parts = 0;
    Value *parts = by_attribute ? attribute_parts(r, attribute, &n_parts) : NULL;
    int filter = -1;
    Str filter_name = {"", 0};
    if (!by_attribute) {
        if (!is_str(a->pos[0])) raise_error(&r->c, "a filter name must be a str");
        filter_name = a->pos[0].s;
        filter = find_filter(filter_name);
        if (filter < 0)
            raise_error(&r->c, "No filter named '%.*s'.", (int)(filter_name.n < 64 ? filter_name.n : 64),
                        filter_name.p);
    }
    Args rest = {a->n_pos > 1 ? a->pos + 1 : NULL, a->n_pos ? a->n_pos - 1 : 0, a->kw_names, a->kw, a->n_kw};
    size_t n;
    Value *items = iterate(r, v, &n);
    for (size_t i = 0; i < n; i++) {
        count_iteration(&r->c);
        list_push(&r->c, out,
                  by_attribute ? get_path(r, items[i], parts, n_parts, dflt, false)
                               : apply_filter_id(r, filter, filter_name, items[i], &rest));
    }
    return out;
}

/* Python's float(x) for the float filter: false when it cannot. */
static bool parse_float_text(Str s, double *out) {
    char tmp[128];
    size_t a = 0, b = s.n, used, n = 0;
    while (a < b && py_isspace(next_char(s.p + a, b - a, &used))) a += used;
    b = a + rstrip_len(s.p + a, b - a);
    if (b - a == 0 || b - a >= sizeof tmp) return false;
    for (size_t i = a; i < b; i++) {
        char ch = s.p[i];
        if (ch == '_') {
            if (i == a || i + 1 == b || !is_digit(s.p[i - 1]) || !is_digit(s.p[i + 1])) return false;
            continue;
        }
        if (!(is_digit(ch) || strchr("+-.eEinfatyINFATY", ch))) return false;
        tmp[n++] = ch;
    }
    tmp[n] = '\0';
    const char *t = tmp + (tmp[0] == '+' || tmp[0] == '-');
    if (strcasecmp(t, "inf") == 0 || strcasecmp(t, "infinity") == 0 || strcasecmp(t, "nan") == 0) {
        *out = strtod(tmp, NULL);
        return true;
    }
    for (const char *p = t; *p; p++)
        if (!(is_digit(*p) || *p == '.' || *p == 'e' || *p == 'E' || *p == '+' || *p == '-')) return false;
    if (!is_digit(t[0]) && !(t[0] == '.' && is_digit(t[1]))) return false;
    char *end;
    *out = strtod(tmp, &end);
    return *end == '\0';
}

/* Python's int(text, base): false when it cannot. */
static bool parse_int_text(Str s, int64_t base, int64_t *out) {
    size_t a = 0, b = s.n, used;
    while (a < b && py_isspace(next_char(s.p + a, b - a, &used))) a += used;
    b = a + rstrip_len(s.p + a, b - a);
    bool negative = false;
    if (a < b && (s.p[a] == '+' || s.p[a] == '-')) negative = s.p[a++] == '-';
    if (b - a >= 2 && s.p[a] == '0' && strchr("xXoObB", s.p[a + 1])) {
        int prefix = (s.p[a + 1] | 32) == 'x' ? 16 : (s.p[a + 1] | 32) == 'o' ? 8 : 2;
        if (base == 0 || base == prefix) {
            base = prefix;
            a += 2;
            if (a < b && s.p[a] == '_') a++;
        }
    }
    if (base == 0) base = 10;
    if (base < 2 || base > 36 || a >= b) return false;
    uint64_t v = 0;
    for (size_t i = a; i < b; i++) {
        if (s.p[i] == '_' && i > a && i + 1 < b && s.p[i + 1] != '_') continue;
        int d = digit_value(s.p[i]);
        if ((s.p[i] | 32) >= 'g' && (s.p[i] | 32) <= 'z') d = (s.p[i] | 32) - 'a' + 10;
        if (d >= base) return false;
        if (v > (UINT64_C(9223372036854775807) - (uint64_t)d) / (uint64_t)base) return false;
        v = v * (uint64_t)base + (uint64_t)d;
    }
    *out = negative ? -(int64_t)v : (int64_t)v;
    return true;
}

static Value int_filter(Render *r, Value v, Value dflt, Value base) {
    Value fallback = given(dflt) ? dflt : v_int(0);
    int64_t b = given(base) ? arg_int(r, "int", base) : 10, i;
    if (v.kind == V_UNDEFINED) raise_undefined(&r->c, v);
    if (is_str(v)) {
        if (parse_int_text(v.s, b, &i)) return v_int(i);
        double f;
        if (!parse_float_text(v.s, &f) || isnan(f)) return fallback;
        v = v_float(f);
    }
    if (is_integer(v)) return v_int(int_of(v));
    if (v.kind == V_FLOAT) {
        if (isnan(v.f)) return fallback;
        if (isinf(v.f)) raise_error(&r->c, "cannot convert float infinity to integer");
        if (fabs(v.f) >= 9.2e18) raise_overflow(r);
        return v_int((int64_t)v.f);
    }
    return fallback;
}

static Value float_filter(Render *r, Value v, Value dflt) {
    Value fallback = given(dflt) ? dflt : v_float(0.0);
    double f;
    if (v.kind == V_UNDEFINED) raise_undefined(&r->c, v);
    if (is_number(v)) return v_float(float_of(v));
    if (is_str(v) && parse_float_text(v.s, &f)) return v_float(f);
    return fallback;
}

/* Python's round(x, n), half to even on the exact binary value. */
static Value round_filter(Render *r, Value v, Value precision, Value method) {
    int64_t digits = given(precision) ? arg_int(r, "round", precision) : 0;
    Str how = given(method) && is_str(method) ? method.s : str_c("common");
    if (!str_is(how, "common") && !str_is(how, "ceil") && !str_is(how, "floor"))
        raise_error(&r->c, "method must be common, ceil or floor");
    if (!is_number(v)) raise_error(&r->c, "type %s doesn't define __round__ method", type_name(v));
    if (str_is(how, "common")) {
        if (is_integer(v)) {
            if (digits >= 0) return v_int(int_of(v));
            int64_t p = 1;
            for (int64_t k = 0; k < -digits && p < INT64_MAX / 10; k++) p *= 10;
            int64_t x = int_of(v), q = x / p, m = x % p;
            if (m < 0) {
                m += p;
                q--;
            }
            if (2 * m > p || (2 * m == p && (q & 1))) q++;
            return v_int(q * p);
        }
        if (!isfinite(v.f)) return v;
        if (digits > 300) return v;
        if (digits >= 0) {
            char tmp[400];
            snprintf(tmp, sizeof tmp, "%.*f", (int)digits, v.f);
            return v_float(strtod(tmp, NULL));
        }
        double p = pow(10.0, (double)-digits);
        return v_float(nearbyint(v.f / p) * p);
    }
    /* math.ceil/floor(value * 10**precision) / 10**precision */
    double scale = pow(10.0, (double)digits);
    double x = float_of(v) * scale;
    x = str_is(how, "ceil") ? ceil(x) : floor(x);
    return v_float(x / scale);
}

/* jinja2's title filter: upper-cases the first letter of every word
 * (words start after runs of - and white space and ({[<). */
static Value title_filter(Render *r, Value v) {
    Str s = v.s;
    Text b = {.c = &r->c};
    bool start = true;
    for (size_t i = 0; i < s.n;) {
        size_t used;
        uint32_t c = next_char(s.p + i, s.n - i, &used);
        bool sep = c == '-' || c == '(' || c == '{' || c == '[' || c == '<' || py_isspace(c);
        if (sep) text_add(&b, s.p + i, used);
        else if (start) add_upper(&b, c);
        else text_addchar(&b, char_lower(c));
        start = sep;
        i += used;
    }
    return text_value(&b);
}

static Value indent_filter(Render *r, Value v, Value width, Value first, Value blank) {
    Str ind = {"    ", 4};
    if (given(width)) {
        if (is_str(width)) ind = width.s;
        else {
            int64_t w = arg_int(r, "indent", width);
            Text sp = {.c = &r->c};
            for (int64_t k = 0; k < w && k < (int64_t)TEMPLATE_MAX_OUTPUT; k++) text_addc(&sp, ' ');
            ind = (Str){sp.p ? sp.p : "", sp.n};
        }
    }
    /* the text gets a newline first, as jinja2 does, then splitlines() */
    Text text = {.c = &r->c};
    text_addstr(&text, v.s);
    text_addc(&text, '\n');
    List *lines = splitlines(r, text_value(&text), false).list;
    Text b = {.c = &r->c};
    if (given(first) && truthy(first)) text_addstr(&b, ind);
    for (size_t i = 0; i < lines->len; i++) {
        Str line = lines->items[i].s;
        if (i > 0) {
            text_addc(&b, '\n');
            if (line.n || (given(blank) && truthy(blank))) text_addstr(&b, ind);
        }
        text_addstr(&b, line);
    }
    return text_value(&b);
}

static Value truncate_filter(Render *r, Value v, Value length, Value killwords, Value end, Value leeway) {
    int64_t len = given(length) ? arg_int(r, "truncate", length) : 255;
    Str e = given(end) ? arg_str(r, "truncate() end ", end) : str_c("...");
    int64_t lee = given(leeway) && leeway.kind != V_NONE ? arg_int(r, "truncate", leeway) : 5;
    int64_t end_len = (int64_t)count_chars(e.p, e.n);
    if (len < end_len) raise_error(&r->c, "expected length >= %" PRId64 ", got %" PRId64, end_len, len);
    if (lee < 0) raise_error(&r->c, "expected leeway >= 0, got %" PRId64, lee);
    int64_t n = (int64_t)length_of(r, v);
    if (n <= len + lee) return v;
    Value head = substr(v, 0, char_offset(r, v, (size_t)(len - end_len)));
    Text b = {.c = &r->c};
    if (given(killwords) && truthy(killwords)) text_addstr(&b, head.s);
    else {
        const char *space = NULL;
        for (size_t k = head.s.n; k-- > 0;)
            if (head.s.p[k] == ' ') {
                space = head.s.p + k;
                break;
            }
        text_add(&b, head.s.p, space ? (size_t)(space - head.s.p) : head.s.n);
    }
    text_addstr(&b, e);
    return text_value(&b);
}

static Value tojson_filter(Render *r, Value v, const Args *a) {
    static const char *const params[] = {"ensure_ascii", "indent", "separators", "sort_keys", NULL};
    Value arg[4];
    bind_args(r, "tojson", a, params, arg);
    JsonStyle st = {.ensure_ascii = given(arg[0]) && truthy(arg[0]), .sort_keys = given(arg[3]) && truthy(arg[3])};
    Value indent = arg[1];
    if (given(indent) && indent.kind != V_NONE) {
        st.has_indent = true;
        if (is_str(indent)) st.indent = indent.s;
        else {
            int64_t n = arg_int(r, "tojson", indent);
            Text sp = {.c = &r->c};
            for (int64_t k = 0; k < n && k < 1000; k++) text_addc(&sp, ' ');
            st.indent = (Str){sp.p ? sp.p : "", sp.n};
        }
    }
    st.item_sep = st.has_indent ? str_c(",") : str_c(", ");
    st.key_sep = str_c(": ");
    Value sep = arg[2];
    if (given(sep) && sep.kind != V_NONE) {
        if (sep.kind != V_LIST || sep.list->len != 2 || !is_str(sep.list->items[0]) || !is_str(sep.list->items[1]))
            raise_error(&r->c, "separators must be a pair of str");
        st.item_sep = sep.list->items[0].s;
        st.key_sep = sep.list->items[1].s;
    }
    Text b = {.c = &r->c};
    json_dump(&r->c, &b, v, &st, 0);
    return text_value(&b);
}

/* Python's sum(items, start) with +. */
static Value sum_filter(Render *r, Value v, Value attribute, Value start) {
    Value total = given(start) ? start : v_int(0);
    if (is_str(total)) raise_error(&r->c, "sum() can't sum strings [use ''.join(seq) instead]");
    size_t n, n_parts = 0;
    Value *items = iterate(r, v, &n);
    Value *parts = given(attribute) && attribute.kind != V_NONE ? attribute_parts(r, attribute, &n_parts) : NULL;
    for (size_t i = 0; i < n; i++) {
        count_iteration(&r->c);
        total = arith(r, OP_ADD, total, parts ? get_path(r, items[i], parts, n_parts, v_missing(), false) : items[i]);
    }
    return total;
}

static Value min_max(Render *r, Value v, Value case_sensitive, Value attribute, bool max) {
    List *items = to_list(r, v);
    if (items->len == 0) return undefined_hint(&r->c, "No aggregated item, sequence was empty.");
    Value *keys = sort_keys(r, items, attribute, given(case_sensitive) && truthy(case_sensitive));
    size_t best = 0;
    for (size_t i = 1; i < items->len; i++)
        if (py_order(&r->c, max ? CMP_GT : CMP_LT, keys[i], keys[best])) best = i;
    return items->items[best];
}

static List *unique_filter(Render *r, Value v, Value case_sensitive, Value attribute) {
    List *items = to_list(r, v), *out = new_list(&r->c, SEQ_LIST, 0);
    Value *keys = sort_keys(r, items, attribute, given(case_sensitive) && truthy(case_sensitive));
    Dict *seen = new_dict(&r->c, 0);
    for (size_t i = 0; i < items->len; i++) {
        count_iteration(&r->c);
        if (dict_get(&r->c, seen, keys[i])) continue;
        dict_set(&r->c, seen, keys[i], v_none());
        list_push(&r->c, out, items->items[i]);
    }
    return out;
}

static List *batch_or_slice(Render *r, Value v, Value count, Value fill, bool slice) {
    int64_t k = arg_int(r, slice ? "slice" : "batch", count);
    bool filling = given(fill) && fill.kind != V_NONE;
    List *items = to_list(r, v), *out = new_list(&r->c, SEQ_LIST, 0);
    if (!slice) {
        if (k <= 0) raise_error(&r->c, "batch size must be positive");
        for (size_t i = 0; i < items->len; i += (size_t)k) {
            size_t n = items->len - i < (size_t)k ? items->len - i : (size_t)k;
            List *part = new_list(&r->c, SEQ_LIST, filling ? (size_t)k : n);
            memcpy(part->items, items->items + i, n * sizeof(Value));
            for (size_t j = n; j < part->len; j++) part->items[j] = fill;
            list_push(&r->c, out, v_list(part));
        }
        return out;
    }
    if (k <= 0) raise_error(&r->c, k == 0 ? "integer division or modulo by zero" : "slice count must be positive");
    if (k > (int64_t)TEMPLATE_MAX_ITERATIONS) raise_error(&r->c, "too many slices");
    size_t per = items->len / (size_t)k, extra = items->len % (size_t)k, offset = 0;
    for (size_t s = 0; s < (size_t)k; s++) {
        count_iteration(&r->c);
        size_t start = offset + s * per;
        if (s < extra) offset++;
        size_t end = offset + (s + 1) * per, n = end - start;
        List *part = new_list(&r->c, SEQ_LIST, n + (filling && s >= extra));
        if (n) memcpy(part->items, items->items + start, n * sizeof(Value));
        if (filling && s >= extra) part->items[n] = fill;
        list_push(&r->c, out, v_list(part));
    }
    return out;
}

/* A generator filter (map, select, items, ...) waiting to run. */
static Value lazy_generator(Render *r, int filter, Value v, const Args *a) {
    Iter *it = alloc(&r->c, sizeof *it);
    Args *args = alloc(&r->c, sizeof *args); /* a is the caller's: keep a copy (its arrays are in the arena) */
    *args = *a;
    *it = (Iter){.type_name = "generator", .filter = filter, .source = v, .args = args};
    return (Value){.kind = V_ITER, .iter = it};
}

/* Runs a generator filter, the first time its items are asked for. */
List *generator_items(Render *r, Iter *it) {
    if (it->list) return it->list;
    static const char *const none[] = {NULL};
    static const char *const p_minmax[] = {"case_sensitive", "attribute", NULL};
    static const char *const p_batch[] = {"linecount", "fill_with", NULL};
    static const char *const p_slice[] = {"slices", "fill_with", NULL};
    const Args *a = it->args;
    Value v = it->source, arg[2];
    List *l;
    switch (it->filter) {
    case FI_BATCH:
        bind_args(r, "batch", a, p_batch, arg);
        l = batch_or_slice(r, v, arg[0], arg[1], false);
        break;
    case FI_SLICE:
        bind_args(r, "slice", a, p_slice, arg);
        l = batch_or_slice(r, v, arg[0], arg[1], true);
        break;
    case FI_ITEMS:
        bind_args(r, "items", a, none, arg);
        if (v.kind == V_UNDEFINED) l = new_list(&r->c, SEQ_LIST, 0);
        else if (v.kind != V_DICT) raise_error(&r->c, "Can only get item pairs from a mapping.");
        else {
            l = dict_view(r, v.dict, SEQ_ITEMS).list;
            l->type = SEQ_LIST;
        }
        break;
    case FI_MAP:
        l = map_items(r, v, a);
        break;
    case FI_REJECT:
    case FI_REJECTATTR:
    case FI_SELECT:
    case FI_SELECTATTR:
        l = select_items(r, v, a, it->filter == FI_REJECTATTR || it->filter == FI_SELECTATTR,
                         it->filter == FI_SELECT || it->filter == FI_SELECTATTR);
        break;
    default: /* FI_UNIQUE */
        bind_args(r, "unique", a, p_minmax, arg);
        l = unique_filter(r, v, arg[0], arg[1]);
    }
    it->list = l;
    return l;
}

Value apply_filter_id(Render *r, int id, Str name, Value v, const Args *a) {
    static const char *const none[] = {NULL};
    static const char *const p_default[] = {"default_value", "boolean", NULL};
    static const char *const p_join[] = {"d", "attribute", NULL};
    static const char *const p_replace[] = {"old", "new", "count", NULL};
    static const char *const p_trim[] = {"chars", NULL};
    static const char *const p_int[] = {"default", "base", NULL};
    static const char *const p_float[] = {"default", NULL};
    static const char *const p_round[] = {"precision", "method", NULL};
    static const char *const p_sort[] = {"reverse", "case_sensitive", "attribute", NULL};
    static const char *const p_dictsort[] = {"case_sensitive", "by", "reverse", NULL};
    static const char *const p_minmax[] = {"case_sensitive", "attribute", NULL};
    static const char *const p_center[] = {"width", NULL};
    static const char *const p_indent[] = {"width", "first", "blank", NULL};
    static const char *const p_truncate[] = {"length", "killwords", "end", "leeway", NULL};
    static const char *const p_sum[] = {"attribute", "start", NULL};
    static const char *const p_attr[] = {"name", NULL};
    Value arg[4];
    if (id < 0) raise_error(&r->c, "No filter named '%.*s' found.", (int)(name.n < 64 ? name.n : 64), name.p);
    const char *fn = filter_name((FilterId)id);
    switch (id) {
    case FI_ABS:
        bind_args(r, fn, a, none, arg);
        if (v.kind == V_FLOAT) return v_float(fabs(v.f));
        if (is_integer(v)) return negate(r, v, int_of(v) < 0);
        raise_error(&r->c, "bad operand type for abs(): '%s'", type_name(v));
    case FI_ATTR: {
        bind_args(r, fn, a, p_attr, arg);
        Str attr = arg_str(r, "attribute name ", arg[0]);
        Value out;
        if (v.kind == V_NAMESPACE) {
            Value *found = dict_get_str(&r->c, v.dict, attr);
            if (found) return *found;
        } else if (v.kind == V_LOOP && loop_attribute(r, v.loop, attr, &out)) return out;
        else if (python_attribute(r, v, find_method(attr), &out)) return out;
        if (v.kind == V_UNDEFINED) raise_undefined(&r->c, v);
        return undefined_member(&r->c, v, arg[0]);
    }
    case FI_BATCH:
    case FI_SLICE:
    case FI_ITEMS:
    case FI_MAP:
    case FI_REJECT:
    case FI_REJECTATTR:
    case FI_SELECT:
    case FI_SELECTATTR:
    case FI_UNIQUE:
        return lazy_generator(r, id, v, a);
    case FI_CAPITALIZE:
        bind_args(r, fn, a, none, arg);
        return change_case(r, soft_str(r, v), CASE_CAPITALIZE);
    case FI_CENTER:
        bind_args(r, fn, a, p_center, arg);
        return pad(r, soft_str(r, v), given(arg[0]) ? arg_int(r, fn, arg[0]) : 80, v_missing(), 0);
    case FI_DEFAULT:
        bind_args(r, fn, a, p_default, arg);
        if (v.kind == V_UNDEFINED || (given(arg[1]) && truthy(arg[1]) && !truthy(v)))
            return given(arg[0]) ? arg[0] : v_str("", 0);
        return v;
    case FI_DICTSORT: {
        bind_args(r, fn, a, p_dictsort, arg);
        if (v.kind != V_DICT) {
            if (v.kind == V_UNDEFINED) raise_undefined(&r->c, v);
            raise_error(&r->c, "'%s' object has no attribute 'items'", type_name(v));
        }
        Str by = !given(arg[1]) ? str_c("key") : is_str(arg[1]) ? arg[1].s : str_c("");
        if (!str_is(by, "key") && !str_is(by, "value"))
            raise_error(&r->c, "You can only sort by either \"key\" or \"value\"");
        List *pairs = dict_view(r, v.dict, SEQ_ITEMS).list;
        pairs->type = SEQ_LIST;
        List *keys = new_list(&r->c, SEQ_LIST, pairs->len);
        for (size_t i = 0; i < pairs->len; i++) keys->items[i] = pairs->items[i].list->items[str_is(by, "value")];
        Value *k = sort_keys(r, keys, v_missing(), given(arg[0]) && truthy(arg[0]));
        size_t *order = alloc_array(&r->c, pairs->len ? pairs->len : 1, sizeof *order);
        for (size_t i = 0; i < pairs->len; i++) order[i] = i;
        sort_values(&r->c, k, order, pairs->len, given(arg[2]) && truthy(arg[2]));
        List *out = new_list(&r->c, SEQ_LIST, pairs->len);
        for (size_t i = 0; i < pairs->len; i++) out->items[i] = pairs->items[order[i]];
        return v_list(out);
    }
    case FI_ESCAPE:
        bind_args(r, fn, a, none, arg);
        return html_escape(r, v);
    case FI_FIRST: {
        bind_args(r, fn, a, none, arg);
        if (v.kind == V_ITER) {
            List *l = generator_items(r, v.iter);
            if (v.iter->pos < l->len) return l->items[v.iter->pos++];
        } else {
            size_t n;
            Value *items = iterate(r, v, &n);
            if (n) return items[0];
        }
        return undefined_hint(&r->c, "No first item, sequence was empty.");
    }
    case FI_LAST: {
        bind_args(r, fn, a, none, arg);
        if (v.kind == V_ITER) raise_error(&r->c, "'%s' object is not reversible", v.iter->type_name);
        if (v.kind != V_LIST && v.kind != V_DICT && v.kind != V_STR && v.kind != V_UNDEFINED)
            raise_error(&r->c, "'%s' object is not reversible", type_name(v));
        size_t n;
        Value *items = iterate(r, v, &n);
        if (n) return items[n - 1];
        return undefined_hint(&r->c, "No last item, sequence was empty.");
    }
    case FI_FLOAT:
        bind_args(r, fn, a, p_float, arg);
        return float_filter(r, v, arg[0]);
    case FI_FORMAT: {
        if (a->n_pos && a->n_kw) raise_error(&r->c, "can't handle positional and keyword arguments at the same time");
        Value values;
        if (a->n_kw) {
            Dict *d = new_dict(&r->c, a->n_kw);
            for (size_t k = 0; k < a->n_kw; k++) {
                Str kn = r->t->names[a->kw_names[k]];
                dict_set(&r->c, d, v_str(kn.p, kn.n), a->kw[k]);
            }
            values = v_dict(d);
        } else {
            List *t = new_list(&r->c, SEQ_TUPLE, a->n_pos);
            if (a->n_pos) memcpy(t->items, a->pos, a->n_pos * sizeof(Value));
            values = v_list(t);
        }
        return format_percent(r, soft_str(r, v), values);
    }
    case FI_INDENT:
        bind_args(r, fn, a, p_indent, arg);
        /* jinja2 adds "\n" to the value itself, then splits its lines */
        if (v.kind == V_UNDEFINED) raise_undefined(&r->c, v);
        if (is_seq(v, SEQ_TUPLE)) raise_error(&r->c, "can only concatenate tuple (not \"str\") to tuple");
        if (is_seq(v, SEQ_LIST)) raise_error(&r->c, "'list' object has no attribute 'splitlines'");
        if (!is_str(v)) raise_error(&r->c, "unsupported operand type(s) for +=: '%s' and 'str'", type_name(v));
        return indent_filter(r, v, arg[0], arg[1], arg[2]);
    case FI_INT:
        bind_args(r, fn, a, p_int, arg);
        return int_filter(r, v, arg[0], arg[1]);
    case FI_JOIN: {
        bind_args(r, fn, a, p_join, arg);
        Str sep = given(arg[0]) ? to_str(r, arg[0]).s : (Str){"", 0};
        if (given(arg[1]) && arg[1].kind != V_NONE) {
            size_t n, n_parts;
            Value *items = iterate(r, v, &n), *parts = attribute_parts(r, arg[1], &n_parts);
            List *picked = new_list(&r->c, SEQ_LIST, n);
            for (size_t i = 0; i < n; i++) picked->items[i] = get_path(r, items[i], parts, n_parts, v_missing(), false);
            v = v_list(picked);
        }
        return join(r, sep, v, true);
    }
    case FI_LENGTH:
        bind_args(r, fn, a, none, arg);
        return v_int((int64_t)length_of(r, v));
    case FI_LIST:
        bind_args(r, fn, a, none, arg);
        if (v.kind == V_LIST) {
            List *l = new_list(&r->c, SEQ_LIST, v.list->len);
            if (v.list->len) memcpy(l->items, v.list->items, v.list->len * sizeof(Value));
            return v_list(l);
        }
        return v_list(to_list(r, v));
    case FI_LOWER:
    case FI_UPPER:
        bind_args(r, fn, a, none, arg);
        return change_case(r, soft_str(r, v), id == FI_UPPER ? CASE_UPPER : CASE_LOWER);
    case FI_MAX:
    case FI_MIN:
        bind_args(r, fn, a, p_minmax, arg);
        return min_max(r, v, arg[0], arg[1], id == FI_MAX);
    case FI_REPLACE:
        bind_args(r, fn, a, p_replace, arg);
        if (!given(arg[1])) raise_error(&r->c, "replace() missing required arguments");
        return replace(r, soft_str(r, v), to_str(r, arg[0]).s, to_str(r, arg[1]).s,
                       given(arg[2]) && arg[2].kind != V_NONE ? arg_int(r, fn, arg[2]) : -1);
    case FI_REVERSE: {
        bind_args(r, fn, a, none, arg);
        if (is_str(v)) {
            Value one = v_int(-1);
            return get_slice(r, v, v_missing(), v_missing(), one, false);
        }
        /* reversed(): an undefined value has a length (0) and items, so it reverses too */
        bool reversible = v.kind == V_LIST || v.kind == V_DICT || v.kind == V_UNDEFINED;
        if (!reversible && v.kind != V_ITER) raise_error(&r->c, "argument must be iterable");
        List *items = to_list(r, v), *out = new_list(&r->c, SEQ_LIST, items->len);
        for (size_t i = 0; i < items->len; i++) out->items[i] = items->items[items->len - 1 - i];
        if (!reversible) return v_list(out);
        return new_iter(r, out,
                        v.kind == V_DICT                               ? "dict_reversekeyiterator"
                        : v.kind == V_LIST && v.list->type == SEQ_LIST ? "list_reverseiterator"
                                                                       : "reversed");
    }
    case FI_ROUND:
        bind_args(r, fn, a, p_round, arg);
        return round_filter(r, v, arg[0], arg[1]);
    case FI_SAFE:
        bind_args(r, fn, a, none, arg);
        return markup(to_str(r, v));
    case FI_SORT: {
        bind_args(r, fn, a, p_sort, arg);
        List *items = to_list(r, v);
        Value *keys = sort_keys(r, items, arg[2], given(arg[1]) && truthy(arg[1]));
        size_t *order = alloc_array(&r->c, items->len ? items->len : 1, sizeof *order);
        for (size_t i = 0; i < items->len; i++) order[i] = i;
        sort_values(&r->c, keys, order, items->len, given(arg[0]) && truthy(arg[0]));
        List *out = new_list(&r->c, SEQ_LIST, items->len);
        for (size_t i = 0; i < items->len; i++) out->items[i] = items->items[order[i]];
        return v_list(out);
    }
    case FI_STRING:
        bind_args(r, fn, a, none, arg);
        return soft_str(r, v);
    case FI_SUM:
        bind_args(r, fn, a, p_sum, arg);
        return sum_filter(r, v, arg[0], arg[1]);
    case FI_TITLE:
        bind_args(r, fn, a, none, arg);
        return title_filter(r, soft_str(r, v));
    case FI_TOJSON:
        return tojson_filter(r, v, a);
    case FI_TRIM:
        bind_args(r, fn, a, p_trim, arg);
        return strip(r, soft_str(r, v), arg[0], true, true);
    case FI_TRUNCATE:
        bind_args(r, fn, a, p_truncate, arg);
        if (!is_str(v)) {
            /* jinja2 truncates the value itself: what is short enough comes back as it is */
            size_t n = length_of(r, v);
            int64_t max = (given(arg[0]) ? arg_int(r, fn, arg[0]) : 255) +
                          (given(arg[3]) && arg[3].kind != V_NONE ? arg_int(r, fn, arg[3]) : 5);
            if ((int64_t)n <= max) return v;
            raise_error(&r->c, "truncate needs a str, not %s", type_name(v));
        }
        return truncate_filter(r, soft_str(r, v), arg[0], arg[1], arg[2], arg[3]);
    case FI_WORDCOUNT: {
        bind_args(r, fn, a, none, arg);
        Str s = soft_str(r, v).s;
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
    default: /* FI_UNSUPPORTED */
        raise_error(&r->c, "the filter '%.*s' is not supported", (int)name.n, name.p);
    }
}

/* ---- tests ---- */

bool apply_test_id(Render *r, int id, Str name, Value v, const Args *a) {
    static const char *const one[] = {"other", NULL};
    Value arg[1];
    if (id < 0) raise_error(&r->c, "No test named '%.*s' found.", (int)(name.n < 64 ? name.n : 64), name.p);
    switch (id) {
    case TE_DIVISIBLEBY:
    case TE_EQ:
    case TE_NE:
    case TE_LT:
    case TE_LE:
    case TE_GT:
    case TE_GE:
    case TE_IN:
    case TE_SAMEAS:
        bind_args(r, "test", a, one, arg);
        if (!given(arg[0])) raise_error(&r->c, "the test '%.*s' needs an argument", (int)name.n, name.p);
        break;
    default:
        if (a->n_pos || a->n_kw)
            raise_error(&r->c, "test_%.*s() takes 1 positional argument but %zu were given", (int)name.n, name.p,
                        a->n_pos + a->n_kw + 1);
        arg[0] = v_missing();
    }
    Value x = arg[0];
    switch (id) {
    case TE_BOOLEAN:
        return v.kind == V_BOOL;
    case TE_CALLABLE:
        return v.kind == V_MACRO || v.kind == V_FUNC || v.kind == V_METHOD || v.kind == V_LOOP || v.kind == V_UNDEFINED;
    case TE_DEFINED:
        return v.kind != V_UNDEFINED;
    case TE_UNDEFINED:
        return v.kind == V_UNDEFINED;
    case TE_DIVISIBLEBY:
        return py_equal(&r->c, arith(r, OP_MOD, v, x), v_int(0));
    case TE_EQ:
        return compare(r, CMP_EQ, v, x);
    case TE_NE:
        return compare(r, CMP_NE, v, x);
    case TE_LT:
        return compare(r, CMP_LT, v, x);
    case TE_LE:
        return compare(r, CMP_LE, v, x);
    case TE_GT:
        return compare(r, CMP_GT, v, x);
    case TE_GE:
        return compare(r, CMP_GE, v, x);
    case TE_IN:
        return contains(r, x, v);
    case TE_ESCAPED:
        return v.kind == V_STR && v.markup;
    case TE_EVEN:
    case TE_ODD:
        return py_equal(&r->c, arith(r, OP_MOD, v, v_int(2)), v_int(id == TE_ODD));
    case TE_FALSE:
        return v.kind == V_BOOL && !v.b;
    case TE_TRUE:
        return v.kind == V_BOOL && v.b;
    case TE_FILTER:
        return is_str(v) && find_filter(v.s) >= 0;
    case TE_TEST:
        return is_str(v) && find_test(v.s) >= 0;
    case TE_FLOAT:
        return v.kind == V_FLOAT;
    case TE_INTEGER:
        return v.kind == V_INT;
    case TE_ITERABLE:
        return v.kind == V_STR || v.kind == V_LIST || v.kind == V_DICT || v.kind == V_ITER || v.kind == V_UNDEFINED ||
               v.kind == V_LOOP;
    case TE_LOWER:
    case TE_UPPER: {
        Value s = to_str(r, v);
        return str_predicate(s, id == TE_LOWER ? M_ISLOWER : M_ISUPPER).b;
    }
    case TE_MAPPING:
        return v.kind == V_DICT;
    case TE_NONE:
        return v.kind == V_NONE;
    case TE_NUMBER:
        return is_number(v);
    case TE_SAMEAS:
        if (v.kind != x.kind) return false;
        if (v.kind == V_NONE || v.kind == V_UNDEFINED) return v.kind == V_NONE;
        if (v.kind == V_BOOL) return v.b == x.b;
        if (v.kind == V_INT) return v.i == x.i && v.i >= -5 && v.i <= 256; /* CPython's cached small ints */
        if (v.kind == V_STR) return str_eq(v.s, x.s);                      /* equal constants are one object */
        if (v.kind == V_FLOAT) return false;
        return v.list == x.list;
    case TE_SEQUENCE:
        return v.kind == V_STR || v.kind == V_DICT || v.kind == V_UNDEFINED ||
               (v.kind == V_LIST && v.list->type <= SEQ_RANGE);
    case TE_STRING:
        return v.kind == V_STR;
    default:
        raise_error(&r->c, "No test named '%.*s' found.", (int)(name.n < 64 ? name.n : 64), name.p);
    }
}
