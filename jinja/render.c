/* jinja/render.c - rendering: walking the tree of Nodes, evaluating
 * expressions, calling macros and global functions, running statements
 * into the output, and turning the JSON variables into values. */
#include "jinja.h"

/* ---- calls ---- */

static void run_for(Render *r, const Node *n, Scope *s, Value iterable, int depth0);

const char *macro_name(const Macro *m) { return m->node->value.s.p; }

/* Starts capturing output (macro calls, set blocks): returns where the
 * captured text starts. */
size_t capture_begin(Render *r) { return r->out.n; }

Value capture_end(Render *r, size_t start) {
    Value v = r->out.n > start ? new_str(&r->c, r->out.p + start, r->out.n - start) : v_str("", 0);
    r->out.n = start;
    return v;
}

static Value call_macro(Render *r, const Macro *m, const Args *a) {
    const Node *node = m->node;
    const char *name = macro_name(m);
    size_t n_params = node->kw.n;
    if (a->n_pos > n_params && !(node->op & MACRO_VARARGS))
        raise_error(&r->c, "macro '%s' takes not more than %zu argument(s)", name, n_params);
    Scope *s = new_frame(r, m->closure, node);
    Value *vals = alloc_array(&r->c, n_params ? n_params : 1, sizeof *vals);
    for (size_t i = 0; i < n_params; i++) vals[i] = i < a->n_pos ? a->pos[i] : v_missing();
    Dict *kwargs = new_dict(&r->c, 0);
    for (size_t k = 0; k < a->n_kw; k++) {
        size_t i = 0;
        while (i < n_params && node->kw.at[i]->name != a->kw_names[k]) i++;
        Str kn = r->t->names[a->kw_names[k]];
        if (i == n_params) {
            if (!(node->op & MACRO_KWARGS))
                raise_error(&r->c, "macro '%s' takes no keyword argument '%.*s'", name, (int)kn.n, kn.p);
            dict_set(&r->c, kwargs, v_str(kn.p, kn.n), a->kw[k]);
            continue;
        }
        if (given(vals[i]))
            raise_error(&r->c, "macro '%s' got multiple values for argument '%.*s'", name, (int)kn.n, kn.p);
        vals[i] = a->kw[k];
    }
    int line = r->c.line;
    for (size_t i = 0; i < n_params; i++) {
        const Node *param = node->kw.at[i];
        if (!given(vals[i])) {
            if (param->a) vals[i] = eval(r, param->a, s);
            else {
                Str pn = r->t->names[param->name];
                char hint[128];
                snprintf(hint, sizeof hint, "parameter '%.*s' was not provided", (int)(pn.n < 64 ? pn.n : 64), pn.p);
                vals[i] = undefined_hint(&r->c, new_str(&r->c, hint, strlen(hint)).s.p);
            }
        }
        scope_set(r, s, param->name, vals[i]);
    }
    if (node->op & MACRO_VARARGS) {
        size_t extra = a->n_pos > n_params ? a->n_pos - n_params : 0;
        List *t = new_list(&r->c, SEQ_TUPLE, extra);
        if (extra) memcpy(t->items, a->pos + n_params, extra * sizeof(Value));
        scope_set(r, s, NAME_VARARGS, v_list(t));
    }
    if (node->op & MACRO_KWARGS) scope_set(r, s, NAME_KWARGS, v_dict(kwargs));
    enter_depth(r);
    size_t start = capture_begin(r);
    exec_body(r, node->list, s);
    Value out = capture_end(r, start);
    r->depth--;
    r->c.line = line;
    return out;
}

/* The dict() and namespace() constructors: a mapping or pairs, then name=value. */
static Dict *build_dict(Render *r, const char *fn, const Args *a) {
    Dict *d = new_dict(&r->c, 0);
    if (a->n_pos > 1) raise_error(&r->c, "%s expected at most 1 argument, got %zu", fn, a->n_pos);
    if (a->n_pos == 1) {
        Value src = a->pos[0];
        if (src.kind == V_DICT || src.kind == V_NAMESPACE) {
            for (size_t i = 0; i < src.dict->len; i++) dict_set(&r->c, d, src.dict->keys[i], src.dict->vals[i]);
        } else {
            size_t n;
            Value *items = iterate(r, src, &n);
            for (size_t i = 0; i < n; i++) {
                size_t m;
                Value *pair = iterate(r, items[i], &m);
                if (m != 2)
                    raise_error(&r->c, "dictionary update sequence element #%zu has length %zu; 2 is required", i, m);
                dict_set(&r->c, d, pair[0], pair[1]);
            }
        }
    }
    for (size_t k = 0; k < a->n_kw; k++) {
        Str kn = r->t->names[a->kw_names[k]];
        dict_set(&r->c, d, v_str(kn.p, kn.n), a->kw[k]);
    }
    return d;
}

static Value call_range(Render *r, const Args *a) {
    if (a->n_kw) raise_error(&r->c, "range() takes no keyword arguments");
    if (a->n_pos < 1 || a->n_pos > 3) raise_error(&r->c, "range expected 1 to 3 arguments, got %zu", a->n_pos);
    int64_t v[3] = {0, 0, 1};
    for (size_t i = 0; i < a->n_pos; i++) {
        if (!is_integer(a->pos[i]))
            raise_error(&r->c, "'%s' object cannot be interpreted as an integer", type_name(a->pos[i]));
        v[a->n_pos == 1 ? 1 : i] = int_of(a->pos[i]);
    }
    if (v[2] == 0) raise_error(&r->c, "range() arg 3 must not be zero");
    /* the number of items, as Python counts them */
    uint64_t n = 0;
    if (v[2] > 0 && v[1] > v[0]) n = ((uint64_t)v[1] - (uint64_t)v[0] - 1) / (uint64_t)v[2] + 1;
    if (v[2] < 0 && v[0] > v[1]) n = ((uint64_t)v[0] - (uint64_t)v[1] - 1) / (0 - (uint64_t)v[2]) + 1;
    if (n > JINJA_MAX_RANGE)
        raise_error(&r->c, "Range too big. The sandbox blocks ranges larger than MAX_RANGE (%d).", JINJA_MAX_RANGE);
    List *l = new_list(&r->c, SEQ_RANGE, (size_t)n);
    for (size_t i = 0; i < n; i++) l->items[i] = v_int(v[0] + (int64_t)i * v[2]);
    memcpy(l->range, v, sizeof v);
    return v_list(l);
}

static Value call_strftime(Render *r, const Args *a) {
    static const char *const params[] = {"format", NULL};
    Value arg[1];
    bind_args(r, "strftime_now", a, params, arg);
    if (!given(arg[0])) raise_error(&r->c, "strftime_now() missing 1 required positional argument: 'format'");
    Str f = arg_str(r, "strftime() argument 1 ", arg[0]);
    /* Python fills in %f (microseconds) itself; %z and %Z are empty for
     * the naive datetime.now(). The rest is the C library's strftime. */
    Text fmt = {.c = &r->c};
    for (size_t i = 0; i < f.n; i++) {
        if (f.p[i] == '%' && i + 1 < f.n) {
            char c = f.p[i + 1];
            if (c == 'f') text_addf(&fmt, "%06ld", r->microseconds);
            else if (c == 'z' || c == 'Z') {
            } else {
                text_addc(&fmt, '%');
                text_addc(&fmt, c);
            }
            i++;
        } else text_addc(&fmt, f.p[i]);
    }
    text_addc(&fmt, '\0');
    size_t cap = fmt.n * 16 + 256;
    char *out = alloc(&r->c, cap);
    size_t n = strftime(out, cap, fmt.p, &r->now);
    return new_str(&r->c, out, n);
}

Value call_value(Render *r, Value callee, const Args *a) {
    switch (callee.kind) {
    case V_MACRO:
        return call_macro(r, callee.macro, a);
    case V_METHOD:
        return call_method(r, callee.method->self, callee.method->id, a);
    case V_UNDEFINED:
        raise_undefined(&r->c, callee);
    case V_FUNC:
        switch ((FuncId)callee.func) {
        case FUNC_RANGE:
            return call_range(r, a);
        case FUNC_DICT:
            return v_dict(build_dict(r, "dict", a));
        case FUNC_NAMESPACE:
            return (Value){.kind = V_NAMESPACE, .dict = build_dict(r, "namespace", a)};
        case FUNC_RAISE_EXCEPTION: {
            static const char *const params[] = {"message", NULL};
            Value arg[1];
            bind_args(r, "raise_exception", a, params, arg);
            if (!given(arg[0]))
                raise_error(&r->c, "raise_exception() missing 1 required positional argument: 'message'");
            Str msg = to_str(r, arg[0]).s;
            raise_error(&r->c, "%.*s", (int)(msg.n < MAX_ERROR_TEXT ? msg.n : MAX_ERROR_TEXT), msg.p);
        }
        case FUNC_STRFTIME_NOW:
            return call_strftime(r, a);
        }
        break;
    case V_LOOP: {
        Loop *l = callee.loop;
        if (!l->node->op) raise_error(&r->c, "The loop must have the 'recursive' marker to be called recursively.");
        if (a->n_pos != 1 || a->n_kw) raise_error(&r->c, "loop() takes exactly one argument");
        enter_depth(r);
        int line = r->c.line;
        size_t start = capture_begin(r);
        run_for(r, l->node, l->scope, a->pos[0], l->depth0 + 1);
        Value out = capture_end(r, start);
        r->c.line = line;
        r->depth--;
        return out;
    }
    default:
        break;
    }
    raise_error(&r->c, "'%s' object is not callable", type_name(callee));
}

/* ---- expressions ---- */

/* Evaluates a node's arguments (list and kw). */
static void eval_args(Render *r, const Node *n, Scope *s, Args *a) {
    a->n_pos = n->list.n;
    a->n_kw = n->kw.n;
    a->pos = a->n_pos ? alloc_array(&r->c, a->n_pos, sizeof(Value)) : NULL;
    a->kw = a->n_kw ? alloc_array(&r->c, a->n_kw, sizeof(Value)) : NULL;
    int *names = a->n_kw ? alloc_array(&r->c, a->n_kw, sizeof(int)) : NULL;
    for (size_t i = 0; i < a->n_pos; i++) a->pos[i] = eval(r, n->list.at[i], s);
    for (size_t k = 0; k < a->n_kw; k++) {
        names[k] = n->kw.at[k]->name;
        a->kw[k] = eval(r, n->kw.at[k]->a, s);
    }
    a->kw_names = names;
}

static Value eval_list(Render *r, const Node *n, Scope *s, SeqType type) {
    List *l = new_list(&r->c, type, n->list.n);
    for (size_t i = 0; i < n->list.n; i++) l->items[i] = eval(r, n->list.at[i], s);
    return v_list(l);
}

static Value eval_inner(Render *r, const Node *n, Scope *s) {
    Args a;
    switch (n->type) {
    case N_CONST:
        return n->value;
    case N_NAME:
        if (r->folding) raise_error(&r->c, "not a constant");
        return lookup(r, s, n->name);
    case N_GETATTR:
        return get_attr(r, eval(r, n->a, s), n->value.s, n->op);
    case N_GETITEM: {
        Value obj = eval(r, n->a, s);
        const Node *k = n->b;
        if (k->type == N_SLICE) {
            Value parts[3];
            const Node *ends[3] = {k->a, k->b, k->c};
            for (int i = 0; i < 3; i++) parts[i] = ends[i] ? eval(r, ends[i], s) : v_missing();
            return get_slice(r, obj, parts[0], parts[1], parts[2], r->folding);
        }
        return get_item(r, obj, eval(r, k, s));
    }
    case N_CALL: {
        if (r->folding) raise_error(&r->c, "not a constant");
        const Node *callee = n->a;
        if (callee->type == N_GETATTR) {
            /* obj.method(...) without making a bound method */
            Value obj = eval(r, callee->a, s), out;
            if (obj.kind != V_DICT && obj.kind != V_NAMESPACE && obj.kind != V_UNDEFINED && obj.kind != V_LOOP &&
                callee->op >= 0 && (methods[callee->op].on & method_owner(obj)) &&
                !(methods[callee->op].unsafe & method_owner(obj))) {
                eval_args(r, n, s, &a);
                return call_method(r, obj, callee->op, &a);
            }
            Value f = get_attr(r, obj, callee->value.s, callee->op);
            eval_args(r, n, s, &a);
            (void)out;
            return call_value(r, f, &a);
        }
        Value f = eval(r, callee, s);
        eval_args(r, n, s, &a);
        return call_value(r, f, &a);
    }
    case N_FILTER: {
        if (r->folding && !is_literal_filter(n)) raise_error(&r->c, "not a constant");
        Value v = eval(r, n->a, s);
        eval_args(r, n, s, &a);
        return apply_filter_id(r, n->op, n->value.s, v, &a);
    }
    case N_TEST: {
        Value v = eval(r, n->a, s);
        eval_args(r, n, s, &a);
        return v_bool(apply_test_id(r, n->op, n->value.s, v, &a));
    }
    case N_NOT:
        return v_bool(!truthy(eval(r, n->a, s)));
    case N_NEG:
    case N_POS:
        return negate(r, eval(r, n->a, s), n->type == N_NEG);
    case N_AND: {
        Value left = eval(r, n->a, s);
        return truthy(left) ? eval(r, n->b, s) : left;
    }
    case N_OR: {
        Value left = eval(r, n->a, s);
        return truthy(left) ? left : eval(r, n->b, s);
    }
    case N_BINOP: {
        Value left = eval(r, n->a, s);
        return arith(r, (OpId)n->op, left, eval(r, n->b, s));
    }
    case N_COMPARE: {
        Value left = eval(r, n->a, s);
        for (size_t i = 0; i < n->list.n; i++) {
            const Node *operand = n->list.at[i];
            Value right = eval(r, operand->a, s);
            if (!compare(r, (CmpOp)operand->op, left, right)) return v_bool(false);
            left = right;
        }
        return v_bool(true);
    }
    case N_CONCAT: {
        Text b = {.c = &r->c};
        for (size_t i = 0; i < n->list.n; i++) text_addstr(&b, to_str(r, eval(r, n->list.at[i], s)).s);
        return text_value(&b);
    }
    case N_CONDEXPR:
        if (truthy(eval(r, n->a, s))) return eval(r, n->b, s);
        if (n->c) return eval(r, n->c, s);
        char hint[128];
        snprintf(hint, sizeof hint,
                 "the inline if-expression on line %d evaluated to false and no else section was defined.", n->line);
        return undefined_hint(&r->c, new_str(&r->c, hint, strlen(hint)).s.p);
    case N_LIST:
        return eval_list(r, n, s, SEQ_LIST);
    case N_TUPLE:
        return eval_list(r, n, s, SEQ_TUPLE);
    case N_DICT: {
        Dict *d = new_dict(&r->c, n->list.n);
        for (size_t i = 0; i < n->list.n; i++) {
            Value key = eval(r, n->list.at[i]->a, s);
            dict_set(&r->c, d, key, eval(r, n->list.at[i]->b, s));
        }
        return v_dict(d);
    }
    default:
        raise_error(&r->c, "cannot evaluate this expression");
    }
}

/* Whether jinja2 can keep a value as a constant of the compiled template. */
static bool representable(Value v) {
    switch (v.kind) {
    case V_NONE:
    case V_BOOL:
    case V_INT:
    case V_FLOAT:
    case V_STR:
        return true;
    case V_LIST:
        if (v.list->type > SEQ_RANGE) return false;
        for (size_t i = 0; i < v.list->len; i++)
            if (!representable(v.list->items[i])) return false;
        return true;
    case V_DICT:
        for (size_t i = 0; i < v.dict->len; i++)
            if (!representable(v.dict->keys[i]) || !representable(v.dict->vals[i])) return false;
        return true;
    default:
        return false;
    }
}

/* jinja2 evaluates every expression it can when it compiles a template:
 * as far as the evaluation gets without a variable, a call or a filter
 * that needs the context (so `'a' or x` and `1 if c else x` can be
 * constant). If that works and gives a constant (or anything, for a whole
 * {{ }}), the value is kept; otherwise the expression runs as any other.
 * The two differ only where a slice fails: evaluated early it is looked up
 * as an item, undefined rather than an error. So this is done for the
 * expressions that hold a slice (mark_foldable). */
static Value eval_constant(Render *r, const Node *n, Scope *s) {
    jmp_buf trap, *outer = r->c.unwind;
    int depth = r->depth, line = r->c.line;
    r->c.unwind = &trap;
    r->folding = true;
    if (setjmp(trap) == 0) {
        Value v = eval_inner(r, n, s);
        r->c.unwind = outer;
        r->folding = false;
        if (n->print_root || representable(v)) return v;
    }
    r->c.unwind = outer;
    r->folding = false;
    r->depth = depth;
    r->c.line = line;
    return eval_inner(r, n, s);
}

Value eval(Render *r, const Node *n, Scope *s) {
    enter_depth(r);
    Value v = n->constant && !r->folding ? eval_constant(r, n, s) : eval_inner(r, n, s);
    r->depth--;
    return v;
}

/* ---- statements ---- */

/* Binds target (a name, or a tuple of targets to unpack into) to v. */
void assign(Render *r, const Node *target, Value v, Scope *s) {
    if (target->type == N_NAME) {
        scope_set(r, s, target->name, v);
        return;
    }
    size_t n, want = target->list.n;
    if (v.kind != V_STR && v.kind != V_LIST && v.kind != V_DICT && v.kind != V_ITER && v.kind != V_UNDEFINED)
        raise_error(&r->c, "cannot unpack non-iterable %s object", type_name(v));
    Value *items = iterate(r, v, &n);
    if (n < want) raise_error(&r->c, "not enough values to unpack (expected %zu, got %zu)", want, n);
    if (n > want) raise_error(&r->c, "too many values to unpack (expected %zu)", want);
    for (size_t i = 0; i < want; i++) assign(r, target->list.at[i], items[i], s);
}

void output(Render *r, Str s) {
    if (s.n > TEMPLATE_MAX_OUTPUT - r->out.n)
        raise_error(&r->c, "the output would be longer than %zu MiB", TEMPLATE_MAX_OUTPUT >> 20);
    text_addstr(&r->out, s);
}

/* Applies a filter chain whose innermost filter has no operand to v. */
/* f's filters, innermost first, applied to v. */
static Value apply_filter_chain(Render *r, const Node *f, Value v, Scope *s) {
    if (!f) return v;
    Value inner = apply_filter_chain(r, f->a, v, s);
    Args a;
    eval_args(r, f, s, &a);
    return apply_filter_id(r, f->op, f->value.s, inner, &a);
}

Flow exec_filtered_body(Render *r, const Node *n, Scope *s, Value *out) {
    size_t start = capture_begin(r);
    enter_depth(r);
    Flow f = exec_body(r, n->list, new_frame(r, s, n));
    r->depth--;
    if (f != FLOW_NORMAL) {
        r->out.n = start;
        return f;
    }
    r->c.line = n->line;
    *out = apply_filter_chain(r, n->b, capture_end(r, start), s);
    return FLOW_NORMAL;
}

/* {% set %}'s target: a name (assign) or a namespace's attribute. */
static void set_target(Render *r, const Node *target, Value v, Scope *s) {
    if (target->type != N_NSREF) {
        assign(r, target, v, s);
        return;
    }
    Value ns = lookup(r, s, target->name);
    if (ns.kind != V_NAMESPACE) raise_error(&r->c, "cannot assign attribute on non-namespace object");
    dict_set(&r->c, ns.dict, target->value, v);
}

static void run_for(Render *r, const Node *n, Scope *s, Value iterable, int depth0) {
    size_t n_raw;
    Value *raw = iterate(r, iterable, &n_raw);
    Loop *l = alloc(&r->c, sizeof *l);
    *l = (Loop){.node = n, .scope = s, .raw = raw, .n_raw = n_raw, .depth0 = depth0, .changed_last = v_missing()};
    if (n->c) l->items = new_list(&r->c, SEQ_LIST, 0);
    else {
        /* no filter: the items are the iterable's, all known */
        l->items = alloc(&r->c, sizeof *l->items);
        *l->items = (List){.len = n_raw, .cap = n_raw, .type = SEQ_LIST, .items = raw};
        l->raw_pos = n_raw;
        l->all_known = true;
    }
    Value loop = {.kind = V_LOOP, .loop = l};
    Scope *body = new_scope(r, s);
    bool completed = false; /* an iteration ran its body to the end */
    for (size_t i = 0;; i++) {
        r->c.line = n->line;
        loop_fill(r, l, i + 1);
        if (i >= l->items->len) break;
        if (!n->c) count_iteration(&r->c);
        l->index0 = i;
        body->n = 0; /* each iteration starts with the loop's variables only */
        declare_locals(r, body, n->locals, n->n_locals);
        assign(r, n->a, l->items->items[i], body);
        scope_set(r, body, NAME_LOOP, loop);
        Flow f = exec_body(r, n->list, body);
        if (f == FLOW_BREAK) break;
        completed |= f == FLOW_NORMAL;
    }
    /* jinja2 runs the else block unless an iteration got to the end of the
     * body: after no items, and also when each ended with break or continue */
    if (!completed && n->d) exec_body(r, n->d->list, new_frame(r, s, n->d));
}

static Flow exec(Render *r, const Node *n, Scope *s) {
    r->c.line = n->line;
    switch (n->type) {
    case N_TEXT:
        output(r, n->value.s);
        break;
    case N_PRINT: {
        Value v = eval(r, n->a, s);
        if (v.kind == V_STR) output(r, v.s);
        else if (v.kind != V_UNDEFINED) write_value(r, &r->out, v, false, 0);
        break;
    }
    case N_IF:
        for (const Node *branch = n; branch;) {
            if (branch->type == N_BODY) return exec_body(r, branch->list, s);
            r->c.line = branch->line;
            if (truthy(eval(r, branch->a, s))) return exec_body(r, branch->list, s);
            branch = branch->b;
        }
        break;
    case N_FOR:
        run_for(r, n, s, eval(r, n->b, s), 0);
        break;
    case N_SET:
        set_target(r, n->a, eval(r, n->b, s), s);
        break;
    case N_SETBLOCK: {
        Value v;
        Flow f = exec_filtered_body(r, n, s, &v);
        if (f != FLOW_NORMAL) return f;  /* break or continue left the loop: nothing is set */
        set_target(r, n->a, v, s);
        break;
    }
    case N_MACRO: {
        Macro *m = alloc(&r->c, sizeof *m);
        *m = (Macro){.node = n, .closure = s};
        scope_set(r, s, n->name, (Value){.kind = V_MACRO, .macro = m});
        break;
    }
    case N_BREAK:
        return FLOW_BREAK;
    case N_CONTINUE:
        return FLOW_CONTINUE;
    case N_WITH: {
        Scope *inner = new_frame(r, s, n);
        for (size_t i = 0; i < n->kw.n; i++) assign(r, n->kw.at[i]->a, eval(r, n->kw.at[i]->b, s), inner);
        return exec_body(r, n->list, inner);
    }
    case N_FILTERBLOCK:
        return exec_filter_block(r, n, s);
    case N_BODY:
        return exec_body(r, n->list, s);
    default:
        raise_error(&r->c, "cannot run this statement");
    }
    return FLOW_NORMAL;
}

Flow exec_body(Render *r, Nodes body, Scope *s) {
    enter_depth(r);
    for (size_t i = 0; i < body.n; i++) {
        Flow f = exec(r, body.at[i], s);
        if (f != FLOW_NORMAL) {
            r->depth--;
            return f;
        }
    }
    r->depth--;
    return FLOW_NORMAL;
}

/* ---- values from JSON ---- */

/* A JSON value as the Python object json.loads gives (a repeated key
 * keeps its first place and its last value, as in a Python dict). */
Value from_json(Render *r, const JsonValue *j) {
    switch (j->type) {
    case JSON_NULL:
        return v_none();
    case JSON_BOOL:
        return v_bool(j->boolean);
    case JSON_NUMBER:
        return j->number.is_integer ? v_int(j->number.integer) : v_float(j->number.value);
    case JSON_STRING:
        return v_str(j->string, j->len);
    case JSON_ARRAY: {
        List *l = new_list(&r->c, SEQ_LIST, j->len);
        for (size_t i = 0; i < j->len; i++) l->items[i] = from_json(r, &j->items[i]);
        return v_list(l);
    }
    case JSON_OBJECT: {
        Dict *d = new_dict(&r->c, j->len);
        for (size_t i = 0; i < j->len; i++)
            dict_set(&r->c, d, v_str(j->members[i].key, j->members[i].key_len), from_json(r, &j->members[i].value));
        return v_dict(d);
    }
    }
    return v_none();
}
