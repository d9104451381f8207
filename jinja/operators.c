/* jinja/operators.c - Python's semantics on values, as Jinja passes them
 * on: truth, str(), HTML escaping, sorting, iteration and len, arithmetic,
 * in and comparisons, a for loop's `loop`, attributes, items and slices. */
/* memmem(): a linear-time substring search */
#define _GNU_SOURCE
#include "jinja.h"

/* Scanning long text by character (to index a non-ASCII str) counts
 * towards the iteration budget, so that indexing in a loop stays bounded. */
static void count_scan(Render *r, size_t bytes) {
    r->c.iterations += bytes / SCAN_BYTES_PER_ITERATION;
    if (r->c.iterations > TEMPLATE_MAX_ITERATIONS) count_iteration(&r->c);
}

void enter_depth(Render *r) {
    if (++r->depth > TEMPLATE_MAX_DEPTH)
        raise_error(&r->c, "the template nests deeper than %d levels (recursion?)", TEMPLATE_MAX_DEPTH);
}

/* Jinja's message for using an undefined value, raised. */
noreturn void raise_undefined(Ctx *c, Value v) {
    const Undef *u = v.undef;
    if (u->hint) raise_error(c, "%s", u->hint);
    Text name = {.c = c};
    write_value(NULL, &name, u->name, true, 0);
    if (u->obj.kind == V_MISSING) raise_error(c, "%.*s is undefined", (int)name.n, name.p);
    char obj[64];
    object_type_repr(obj, sizeof obj, u->obj);
    if (u->name.kind != V_STR) raise_error(c, "%s has no element %.*s", obj, (int)name.n, name.p);
    Text quoted = {.c = c};
    repr_str(&quoted, str_c(obj));
    raise_error(c, "%.*s has no attribute %.*s", (int)quoted.n, quoted.p, (int)name.n, name.p);
}

bool truthy(Value v) {
    switch (v.kind) {
    case V_UNDEFINED:
    case V_NONE:
        return false;
    case V_BOOL:
        return v.b;
    case V_INT:
        return v.i != 0;
    case V_FLOAT:
        return v.f != 0;
    case V_STR:
        return v.s.n > 0;
    case V_LIST:
        return v.list->len > 0;
    case V_DICT:
        return v.dict->len > 0;
    default:
        return true;
    }
}

/* Python's str(v). */
Value to_str(Render *r, Value v) {
    if (v.kind == V_STR) return v;
    if (v.kind == V_UNDEFINED) return v_str("", 0);
    Text b = {.c = &r->c};
    write_value(r, &b, v, false, 0);
    return text_value(&b);
}

Value markup(Value v) {
    v.markup = true;
    return v;
}

/* markupsafe's escape(): & < > " ' as HTML entities. */
Value html_escape(Render *r, Value v) {
    if (v.kind == V_STR && v.markup) return v;
    Str s = to_str(r, v).s;
    Text b = {.c = &r->c};
    for (size_t i = 0; i < s.n; i++) {
        switch (s.p[i]) {
        case '&':
            text_adds(&b, "&amp;");
            break;
        case '<':
            text_adds(&b, "&lt;");
            break;
        case '>':
            text_adds(&b, "&gt;");
            break;
        case '"':
            text_adds(&b, "&#34;");
            break;
        case '\'':
            text_adds(&b, "&#39;");
            break;
        default:
            text_addc(&b, s.p[i]);
        }
    }
    return markup(text_value(&b));
}

/* ---- sorting (stable, as Python's sorted) ---- */

typedef struct {
    Ctx *c;
    const Value *keys;
    bool reverse;
} SortBy;

static bool sort_before(const SortBy *by, size_t a, size_t b) {
    return by->reverse ? py_order(by->c, CMP_LT, by->keys[b], by->keys[a])
                       : py_order(by->c, CMP_LT, by->keys[a], by->keys[b]);
}

static void merge_sort(const SortBy *by, size_t *order, size_t *tmp, size_t n) {
    if (n < 2) return;
    size_t half = n / 2;
    merge_sort(by, order, tmp, half);
    merge_sort(by, order + half, tmp, n - half);
    size_t i = 0, j = half, k = 0;
    while (i < half && j < n) tmp[k++] = sort_before(by, order[j], order[i]) ? order[j++] : order[i++];
    while (i < half) tmp[k++] = order[i++];
    while (j < n) tmp[k++] = order[j++];
    memcpy(order, tmp, n * sizeof *order);
}

/* Sorts the indices order[0..n) by keys[order[i]]. */
void sort_values(Ctx *c, Value *keys, size_t *order, size_t n, bool reverse) {
    for (size_t i = 0; i < n; i++) count_iteration(c);
    SortBy by = {c, keys, reverse};
    size_t *tmp = alloc_array(c, n, sizeof *tmp);
    merge_sort(&by, order, tmp, n);
}

/* ---- iterating ---- */

/* The characters of a str, each a str. */
static List *str_chars(Render *r, Value v) {
    size_t n = v.ascii ? v.s.n : count_chars(v.s.p, v.s.n);
    List *l = new_list(&r->c, SEQ_LIST, n);
    for (size_t i = 0, k = 0; k < n; k++) {
        size_t used = 1;
        if (!v.ascii) next_char(v.s.p + i, v.s.n - i, &used);
        l->items[k] = (Value){.kind = V_STR, .ascii = used == 1, .s = {v.s.p + i, used}};
        i += used;
    }
    return l;
}

/* What `for x in v` goes through, as an array (which the caller must not
 * change): a list's items, a dict's keys, a str's characters, nothing for
 * an undefined value, what is left of a generator. */
Value *iterate(Render *r, Value v, size_t *n) {
    switch (v.kind) {
    case V_LIST:
        *n = v.list->len;
        return v.list->items;
    case V_DICT:
        *n = v.dict->len;
        return v.dict->keys;
    case V_STR: {
        List *l = str_chars(r, v);
        *n = l->len;
        return l->items;
    }
    case V_UNDEFINED:
        *n = 0;
        return NULL;
    case V_ITER: {
        List *l = generator_items(r, v.iter);
        *n = l->len - v.iter->pos;
        Value *items = *n ? l->items + v.iter->pos : NULL;
        v.iter->pos = l->len;
        return items;
    }
    default:
        raise_error(&r->c, "'%s' object is not iterable", type_name(v));
    }
}

/* A list of v's items (for filters that take any iterable). */
List *to_list(Render *r, Value v) {
    if (v.kind == V_LIST && v.list->type == SEQ_LIST) return v.list;
    size_t n;
    Value *items = iterate(r, v, &n);
    List *l = new_list(&r->c, SEQ_LIST, n);
    if (n) memcpy(l->items, items, n * sizeof *items);
    return l;
}

Value new_iter(Render *r, List *l, const char *type_name) {
    Iter *it = alloc(&r->c, sizeof *it);
    *it = (Iter){.list = l, .type_name = type_name};
    return (Value){.kind = V_ITER, .iter = it};
}

/* Python's len(v). */
size_t length_of(Render *r, Value v) {
    switch (v.kind) {
    case V_STR:
        return v.ascii ? v.s.n : count_chars(v.s.p, v.s.n);
    case V_LIST:
        return v.list->len;
    case V_DICT:
        return v.dict->len;
    case V_UNDEFINED:
        return 0;
    case V_LOOP:
        return loop_length(r, v.loop);
    default:
        raise_error(&r->c, "object of type '%s' has no len()", type_name(v));
    }
}

/* ---- arithmetic ---- */

static const char *binop_symbol(OpId op) {
    switch (op) {
    case OP_ADD:
        return "+";
    case OP_SUB:
        return "-";
    case OP_MUL:
        return "*";
    case OP_DIV:
        return "/";
    case OP_FLOORDIV:
        return "//";
    case OP_MOD:
        return "%";
    default:
        return "** or pow()";
    }
}

noreturn void raise_overflow(Render *r) {
    raise_error(&r->c, "integer overflow (integers are limited to 64 bits)");
}

/* Python's divmod for floats: floor division and modulo, with its signs. */
static void float_divmod(double x, double y, double *div, double *mod) {
    double m = fmod(x, y), d = (x - m) / y;
    if (m != 0) {
        if ((y < 0) != (m < 0)) {
            m += y;
            d -= 1.0;
        }
    } else m = copysign(0.0, y);
    if (d != 0) {
        double fd = floor(d);
        if (d - fd > 0.5) fd += 1.0;
        d = fd;
    } else d = copysign(0.0, x / y);
    *div = d;
    *mod = m;
}

static Value repeat_seq(Render *r, Value seq, int64_t times) {
    if (times < 0) times = 0;
    if (seq.kind == V_STR) {
        if (times && seq.s.n > TEMPLATE_MAX_OUTPUT / (uint64_t)times)
            raise_error(&r->c, "a string would be longer than %zu MiB", TEMPLATE_MAX_OUTPUT >> 20);
        Text b = {.c = &r->c};
        for (int64_t i = 0; i < times; i++) text_addstr(&b, seq.s);
        return text_value(&b);
    }
    size_t n = seq.list->len;
    if (times && n > TEMPLATE_MAX_OUTPUT / (uint64_t)times) raise_error(&r->c, "a list would be too long");
    List *l = new_list(&r->c, seq.list->type == SEQ_TUPLE ? SEQ_TUPLE : SEQ_LIST, n * (size_t)times);
    for (int64_t i = 0; i < times; i++)
        if (n) memcpy(l->items + (size_t)i * n, seq.list->items, n * sizeof(Value));
    return v_list(l);
}

static Value arith_int(Render *r, OpId op, int64_t x, int64_t y) {
    int64_t z;
    switch (op) {
    case OP_ADD:
        if (__builtin_add_overflow(x, y, &z)) raise_overflow(r);
        return v_int(z);
    case OP_SUB:
        if (__builtin_sub_overflow(x, y, &z)) raise_overflow(r);
        return v_int(z);
    case OP_MUL:
        if (__builtin_mul_overflow(x, y, &z)) raise_overflow(r);
        return v_int(z);
    case OP_DIV:
        if (y == 0) raise_error(&r->c, "division by zero");
        return v_float((double)x / (double)y);
    case OP_FLOORDIV:
    case OP_MOD: {
        if (y == 0) raise_error(&r->c, op == OP_MOD ? "integer modulo by zero" : "integer division or modulo by zero");
        if (x == INT64_MIN && y == -1) {
            if (op == OP_MOD) return v_int(0);
            raise_overflow(r);
        }
        int64_t q = x / y, m = x % y;
        if (m != 0 && ((m < 0) != (y < 0))) {
            q--;
            m += y;
        }
        return v_int(op == OP_MOD ? m : q);
    }
    default: /* OP_POW */
        if (y < 0) {
            if (x == 0) raise_error(&r->c, "0.0 cannot be raised to a negative power");
            return v_float(pow((double)x, (double)y));
        }
        z = 1;
        while (y > 0) {
            if ((y & 1) && __builtin_mul_overflow(z, x, &z)) raise_overflow(r);
            y >>= 1;
            if (y > 0 && __builtin_mul_overflow(x, x, &x)) raise_overflow(r);
        }
        return v_int(z);
    }
}

static Value arith_float(Render *r, OpId op, double x, double y) {
    double d, m;
    switch (op) {
    case OP_ADD:
        return v_float(x + y);
    case OP_SUB:
        return v_float(x - y);
    case OP_MUL:
        return v_float(x * y);
    case OP_DIV:
        if (y == 0) raise_error(&r->c, "float division by zero");
        return v_float(x / y);
    case OP_FLOORDIV:
    case OP_MOD:
        if (y == 0) raise_error(&r->c, op == OP_MOD ? "float modulo" : "float floor division by zero");
        float_divmod(x, y, &d, &m);
        return v_float(op == OP_MOD ? m : d);
    default:
        if (x == 0 && y < 0) raise_error(&r->c, "0.0 cannot be raised to a negative power");
        if (x < 0 && y != floor(y)) raise_error(&r->c, "complex numbers are not supported");
        d = pow(x, y);
        if (isinf(d) && isfinite(x) && isfinite(y)) raise_error(&r->c, "(34, 'Numerical result out of range')");
        return v_float(d);
    }
}

/* Python's a op b for + - * / // % ** (after Jinja's Undefined checks). */
Value arith(Render *r, OpId op, Value a, Value b) {
    if (op == OP_MOD && is_str(a)) return format_percent(r, a, b);
    if (a.kind == V_UNDEFINED) raise_undefined(&r->c, a);
    if (b.kind == V_UNDEFINED) raise_undefined(&r->c, b);
    if (is_number(a) && is_number(b)) {
        if (is_integer(a) && is_integer(b)) return arith_int(r, op, int_of(a), int_of(b));
        return arith_float(r, op, float_of(a), float_of(b));
    }
    if (op == OP_ADD) {
        if (is_str(a) && is_str(b)) {
            /* Markup + str escapes the str (and str + Markup likewise). */
            if (a.markup != b.markup) {
                if (a.markup) b = html_escape(r, b);
                else a = html_escape(r, a);
            }
            /* a + b + c ...: each sum is the last allocation, so the next
             * one can extend it rather than copy it again */
            if (!a.markup && a.s.n + b.s.n <= TEMPLATE_MAX_OUTPUT &&
                grow_last(&r->c, a.s.p, a.s.n + 1, a.s.n + b.s.n + 1)) {
                char *p = (char *)a.s.p;
                memcpy(p + a.s.n, b.s.p, b.s.n);
                p[a.s.n + b.s.n] = '\0';
                return (Value){.kind = V_STR, .ascii = a.ascii && b.ascii, .s = {p, a.s.n + b.s.n}};
            }
            Text buf = {.c = &r->c};
            text_reserve(&buf, a.s.n + b.s.n);
            text_addstr(&buf, a.s);
            text_addstr(&buf, b.s);
            Value v = text_value(&buf);
            v.markup = a.markup;
            return v;
        }
        if (a.kind == V_LIST && b.kind == V_LIST && a.list->type == b.list->type &&
            (a.list->type == SEQ_LIST || a.list->type == SEQ_TUPLE)) {
            List *l = new_list(&r->c, a.list->type, a.list->len + b.list->len);
            if (a.list->len) memcpy(l->items, a.list->items, a.list->len * sizeof(Value));
            if (b.list->len) memcpy(l->items + a.list->len, b.list->items, b.list->len * sizeof(Value));
            return v_list(l);
        }
        if (is_str(a) || is_seq(a, SEQ_LIST) || is_seq(a, SEQ_TUPLE))
            raise_error(&r->c, "can only concatenate %s (not \"%s\") to %s", type_name(a), type_name(b), type_name(a));
    }
    if (op == OP_MUL) {
        bool a_seq = is_str(a) || is_seq(a, SEQ_LIST) || is_seq(a, SEQ_TUPLE);
        bool b_seq = is_str(b) || is_seq(b, SEQ_LIST) || is_seq(b, SEQ_TUPLE);
        if (a_seq && is_integer(b)) return repeat_seq(r, a, int_of(b));
        if (b_seq && is_integer(a)) return repeat_seq(r, b, int_of(a));
        if (a_seq) raise_error(&r->c, "can't multiply sequence by non-int of type '%s'", type_name(b));
        if (b_seq) raise_error(&r->c, "can't multiply sequence by non-int of type '%s'", type_name(a));
    }
    raise_error(&r->c, "unsupported operand type(s) for %s: '%s' and '%s'", binop_symbol(op), type_name(a),
                type_name(b));
}

Value negate(Render *r, Value v, bool minus) {
    if (v.kind == V_UNDEFINED) raise_undefined(&r->c, v);
    if (is_integer(v)) {
        if (!minus) return v_int(int_of(v));
        if (int_of(v) == INT64_MIN) raise_overflow(r);
        return v_int(-int_of(v));
    }
    if (v.kind == V_FLOAT) return v_float(minus ? -v.f : v.f);
    raise_error(&r->c, "bad operand type for unary %c: '%s'", minus ? '-' : '+', type_name(v));
}

/* Python's `item in container`. */
bool contains(Render *r, Value container, Value item) {
    switch (container.kind) {
    case V_STR:
        if (!is_str(item)) raise_error(&r->c, "'in <string>' requires string as left operand, not %s", type_name(item));
        return item.s.n == 0 || memmem(container.s.p, container.s.n, item.s.p, item.s.n) != NULL;
    case V_LIST:
        for (size_t i = 0; i < container.list->len; i++)
            if (py_equal(&r->c, container.list->items[i], item)) return true;
        return false;
    case V_DICT:
        return dict_get(&r->c, container.dict, item) != NULL;
    case V_UNDEFINED:
        return false;
    case V_ITER: {
        Iter *it = container.iter;
        List *l = generator_items(r, it);
        while (it->pos < l->len)
            if (py_equal(&r->c, l->items[it->pos++], item)) return true;
        return false;
    }
    default:
        raise_error(&r->c, "argument of type '%s' is not iterable", type_name(container));
    }
}

bool compare(Render *r, CmpOp op, Value a, Value b) {
    switch (op) {
    case CMP_EQ:
        return py_equal(&r->c, a, b);
    case CMP_NE:
        return !py_equal(&r->c, a, b);
    case CMP_IN:
        return contains(r, b, a);
    case CMP_NOTIN:
        return !contains(r, b, a);
    default:
        return py_order(&r->c, op, a, b);
    }
}

/* ---- for loops' state ---- */

/* Makes the loop's items hold at least want items (or all there are),
 * running the loop's `if` filter ahead as far as needed. */
void loop_fill(Render *r, Loop *l, size_t want) {
    const Node *filter = l->node->c;
    while (!l->all_known && l->items->len < want) {
        if (l->raw_pos == l->n_raw) {
            l->all_known = true;
            break;
        }
        Value item = l->raw[l->raw_pos++];
        count_iteration(&r->c);
        if (filter) {
            Scope *test = new_scope(r, l->scope);
            assign(r, l->node->a, item, test);
            if (!truthy(eval(r, filter, test))) continue;
        }
        list_push(&r->c, l->items, item);
    }
}

size_t loop_length(Render *r, Loop *l) {
    loop_fill(r, l, SIZE_MAX);
    return l->items->len;
}

/* loop.index and the other attributes of jinja2's LoopContext. */
bool loop_attribute(Render *r, Loop *l, Str name, Value *out) {
    size_t i = l->index0;
    if (str_is(name, "index")) *out = v_int((int64_t)i + 1);
    else if (str_is(name, "index0")) *out = v_int((int64_t)i);
    else if (str_is(name, "first")) *out = v_bool(i == 0);
    else if (str_is(name, "last")) {
        loop_fill(r, l, i + 2);
        *out = v_bool(i + 1 >= l->items->len);
    } else if (str_is(name, "length")) *out = v_int((int64_t)loop_length(r, l));
    else if (str_is(name, "revindex")) *out = v_int((int64_t)(loop_length(r, l) - i));
    else if (str_is(name, "revindex0")) *out = v_int((int64_t)(loop_length(r, l) - i) - 1);
    else if (str_is(name, "previtem"))
        *out = i > 0 ? l->items->items[i - 1] : undefined_hint(&r->c, "there is no previous item");
    else if (str_is(name, "nextitem")) {
        loop_fill(r, l, i + 2);
        *out = i + 1 < l->items->len ? l->items->items[i + 1] : undefined_hint(&r->c, "there is no next item");
    } else if (str_is(name, "depth")) *out = v_int(l->depth0 + 1);
    else if (str_is(name, "depth0")) *out = v_int(l->depth0);
    else return false;
    return true;
}

/* ---- attributes and items ---- */

static Value bound_method(Render *r, Value self, int id) {
    Method *m = alloc(&r->c, sizeof *m);
    *m = (Method){.self = self, .id = id};
    return (Value){.kind = V_METHOD, .method = m};
}

/* The ON_* bit of a value's type, for the methods table. */
unsigned method_owner(Value v) {
    if (v.kind == V_STR) return ON_STR;
    if (v.kind == V_DICT) return ON_DICT;
    if (v.kind == V_LOOP) return ON_LOOP;
    if (v.kind == V_LIST) return v.list->type == SEQ_LIST ? ON_LIST : v.list->type == SEQ_TUPLE ? ON_TUPLE : 0;
    return 0;
}

/* obj's Python attribute `name` (a method), if it has one. */
bool python_attribute(Render *r, Value obj, int method, Value *out) {
    unsigned owner = method_owner(obj);
    if (method < 0 || !(methods[method].on & owner)) return false;
    if (methods[method].unsafe & owner) {
        /* The immutable sandbox's answer: undefined, SecurityError when used. */
        char hint[128];
        snprintf(hint, sizeof hint, "access to attribute '%s' of '%s' object is unsafe.", methods[method].name,
                 type_name(obj));
        Value u = undefined_member(&r->c, obj, v_cstr(methods[method].name));
        u.undef->hint = new_str(&r->c, hint, strlen(hint)).s.p;
        u.undef->unsafe = true;
        *out = u;
        return true;
    }
    *out = bound_method(r, obj, method);
    return true;
}

/* obj.name as the sandbox does it: the Python attribute first, then
 * obj['name'], else undefined. method is name's MethodId or -1. */
Value get_attr(Render *r, Value obj, Str name, int method) {
    Value out;
    switch (obj.kind) {
    case V_UNDEFINED:
        raise_undefined(&r->c, obj);
    case V_DICT: {
        if (python_attribute(r, obj, method, &out)) return out;
        Value *v = dict_get_str(&r->c, obj.dict, name);
        if (v) return *v;
        break;
    }
    case V_NAMESPACE: {
        Value *v = dict_get_str(&r->c, obj.dict, name);
        if (v) return *v;
        break;
    }
    case V_LOOP:
        if (loop_attribute(r, obj.loop, name, &out)) return out;
        if (python_attribute(r, obj, method, &out)) return out;
        break;
    default:
        if (python_attribute(r, obj, method, &out)) return out;
    }
    return undefined_member(&r->c, obj, v_str(name.p, name.n));
}

/* The byte offset of character index i (0 <= i <= length) of s. */
size_t char_offset(Render *r, Value s, size_t i) {
    if (s.ascii) return i;
    size_t at = 0;
    for (size_t k = 0; k < i && at < s.s.n; k++) {
        at++;
        while (at < s.s.n && is_continuation((unsigned char)s.s.p[at])) at++;
    }
    count_scan(r, at);
    return at;
}

/* Python's index normalization for s[i]: -1 when out of range. */
int64_t normalize_index(int64_t i, size_t len) {
    if (i < 0) i += (int64_t)len;
    return i < 0 || i >= (int64_t)len ? -1 : i;
}

/* obj[key] as the sandbox does it: the item first, then (for a str key)
 * the Python attribute, else undefined. */
Value get_item(Render *r, Value obj, Value key) {
    switch (obj.kind) {
    case V_UNDEFINED:
        raise_undefined(&r->c, obj);
    case V_STR:
        if (is_integer(key)) {
            size_t len = length_of(r, obj);
            int64_t i = normalize_index(int_of(key), len);
            if (i >= 0) {
                size_t at = char_offset(r, obj, (size_t)i), used = 1;
                if (!obj.ascii) next_char(obj.s.p + at, obj.s.n - at, &used);
                return (Value){.kind = V_STR, .ascii = used == 1, .s = {obj.s.p + at, used}};
            }
        }
        break;
    case V_LIST:
        if (is_integer(key) && obj.list->type <= SEQ_RANGE) {
            int64_t i = normalize_index(int_of(key), obj.list->len);
            if (i >= 0) return obj.list->items[i];
        }
        break;
    case V_DICT:
        if (key.kind != V_LIST && key.kind != V_DICT) {
            Value *v = dict_get(&r->c, obj.dict, key);
            if (v) return *v;
        }
        break;
    default:
        break;
    }
    if (key.kind == V_STR) return get_attr(r, obj, key.s, find_method(key.s));
    return undefined_member(&r->c, obj, key);
}

/* Python's slice arithmetic: the start, step and count of s[start:stop:step]. */
static bool slice_indices(Render *r, Value start, Value stop, Value step, size_t len, int64_t *first, int64_t *by,
                          size_t *count, int64_t *last) {
    int64_t st = 1;
    if (step.kind != V_NONE && step.kind != V_MISSING) {
        if (!is_integer(step)) return false;
        st = int_of(step);
        if (st == 0) raise_error(&r->c, "slice step cannot be zero");
        if (st < -INT64_MAX) st = -INT64_MAX;
    }
    int64_t n = (int64_t)len, lo, hi;
    Value ends[2] = {start, stop};
    int64_t idx[2];
    for (int k = 0; k < 2; k++) {
        Value e = ends[k];
        if (e.kind == V_NONE || e.kind == V_MISSING) {
            idx[k] = st > 0 ? (k == 0 ? 0 : n) : (k == 0 ? n - 1 : -1);
            continue;
        }
        if (!is_integer(e)) return false;
        int64_t i = int_of(e);
        if (i < 0) {
            i = i < -n ? (st < 0 ? -1 : 0) : i + n;
        } else if (i >= n) i = st < 0 ? n - 1 : n;
        idx[k] = i;
    }
    lo = idx[0];
    hi = idx[1];
    int64_t c = 0;
    if (st > 0 && hi > lo) c = (hi - lo - 1) / st + 1;
    if (st < 0 && lo > hi) c = (lo - hi - 1) / (-st) + 1;
    *first = lo;
    *by = st;
    *count = (size_t)c;
    *last = hi;
    return true;
}

/* obj[start:stop:step]. jinja2 compiles slices to Python's own
 * subscript, so unlike items a failed slice raises. */
Value get_slice(Render *r, Value obj, Value start, Value stop, Value step, bool constant) {
    if (obj.kind == V_UNDEFINED) raise_undefined(&r->c, obj);
    int64_t first, by, last;
    size_t count;
    if (obj.kind == V_STR) {
        size_t len = length_of(r, obj);
        if (!slice_indices(r, start, stop, step, len, &first, &by, &count, &last)) goto bad_index;
        if (by == 1) {
            size_t a = char_offset(r, obj, (size_t)first), b = char_offset(r, obj, (size_t)first + count);
            return new_str(&r->c, obj.s.p + a, b - a);
        }
        List *chars = str_chars(r, obj);
        Text b = {.c = &r->c};
        for (size_t k = 0; k < count; k++) text_addstr(&b, chars->items[first + (int64_t)k * by].s);
        return text_value(&b);
    }
    if (obj.kind == V_LIST && obj.list->type <= SEQ_RANGE) {
        if (!slice_indices(r, start, stop, step, obj.list->len, &first, &by, &count, &last)) goto bad_index;
        List *l = new_list(&r->c, obj.list->type, count);
        for (size_t k = 0; k < count; k++) l->items[k] = obj.list->items[first + (int64_t)k * by];
        if (l->type == SEQ_RANGE) {
            /* a range's slice is a range: range(a, b, s)[i:j:k] is range(a + i*s, a + j*s, s*k) */
            int64_t a = obj.list->range[0], s = obj.list->range[2];
            l->range[0] = a + first * s;
            l->range[1] = a + last * s;
            l->range[2] = s * by;
        }
        return v_list(l);
    }
    if (constant) goto undefined;
    if (obj.kind == V_DICT) raise_error(&r->c, "unhashable type: 'slice'");
    raise_error(&r->c, "'%s' object is not subscriptable", type_name(obj));
bad_index:
    if (constant) goto undefined;
    raise_error(&r->c, "slice indices must be integers or None or have an __index__ method");
undefined:;
    List *parts = new_list(&r->c, SEQ_TUPLE, 3);
    Value ends[3] = {start, stop, step};
    for (int i = 0; i < 3; i++) parts->items[i] = given(ends[i]) ? ends[i] : v_none();
    return undefined_member(&r->c, obj, v_list(parts));
}
