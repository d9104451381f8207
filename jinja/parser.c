/* jinja/parser.c - tokens into a tree of Nodes: jinja2's grammar by
 * recursive descent, with its messages for what does not parse, and the
 * marks for the expressions jinja2 folds when it compiles. */
#include "jinja.h"

/* ======================================================================
 * The parser: jinja2's grammar, into a tree of Nodes
 * ====================================================================== */

const char *const predefined_names[] = {"loop", "varargs",   "kwargs",          "caller",      "range",
                                               "dict", "namespace", "raise_exception", "strftime_now"};

/* The id of a name, interning it on first sight. */
int intern(Ctx *c, Template *t, Str name) {
    if (t->n_names * 2 + 2 > t->name_index_cap) {
        size_t cap = t->name_index_cap ? t->name_index_cap * 2 : 64;
        t->name_index = alloc_array(c, cap, sizeof *t->name_index);
        memset(t->name_index, 0, cap * sizeof *t->name_index);
        t->name_index_cap = cap;
        for (size_t i = 0; i < t->n_names; i++) {
            size_t b = hash_bytes(t->names[i].p, t->names[i].n) & (cap - 1);
            while (t->name_index[b]) b = (b + 1) & (cap - 1);
            t->name_index[b] = (uint32_t)(i + 1);
        }
    }
    size_t b = hash_bytes(name.p, name.n) & (t->name_index_cap - 1);
    while (t->name_index[b]) {
        size_t id = t->name_index[b] - 1;
        if (str_eq(t->names[id], name)) return (int)id;
        b = (b + 1) & (t->name_index_cap - 1);
    }
    if (t->n_names == t->cap_names) {
        size_t cap = t->cap_names ? t->cap_names * 2 : 64;
        Str *names = alloc_array(c, cap, sizeof *names);
        if (t->n_names) memcpy(names, t->names, t->n_names * sizeof *names);
        t->names = names;
        t->cap_names = cap;
    }
    t->names[t->n_names] = name;
    t->name_index[b] = (uint32_t)(t->n_names + 1);
    return (int)t->n_names++;
}

/* The id of a name if the template uses it, else -1. */
int find_name(const Template *t, Str name) {
    size_t b = hash_bytes(name.p, name.n) & (t->name_index_cap - 1);
    while (t->name_index[b]) {
        size_t id = t->name_index[b] - 1;
        if (str_eq(t->names[id], name)) return (int)id;
        b = (b + 1) & (t->name_index_cap - 1);
    }
    return -1;
}

static Node *new_node(Parser *p, NodeType type, int line) {
    Node *n = alloc(&p->c, sizeof *n);
    *n = (Node){.type = type, .line = line, .op = -1, .name = -1};
    return n;
}

/* A growing list of nodes while parsing. */
typedef struct {
    Node **at;
    size_t n, cap;
} NodeList;

static void nodes_push(Parser *p, NodeList *l, Node *n) {
    if (l->n == l->cap) {
        size_t cap = l->cap ? l->cap * 2 : 4;
        Node **at = alloc_array(&p->c, cap, sizeof *at);
        if (l->n) memcpy(at, l->at, l->n * sizeof *at);
        l->at = at;
        l->cap = cap;
    }
    l->at[l->n++] = n;
}

static Nodes nodes_done(NodeList l) { return (Nodes){l.at, l.n}; }

static Token *cur(Parser *p) { return &p->toks[p->pos]; }
static Token *peek(Parser *p) { return &p->toks[p->pos + 1 < p->n_toks ? p->pos + 1 : p->pos]; }

static Token *advance(Parser *p) {
    Token *t = cur(p);
    if (t->type != T_EOF) p->pos++;
    return t;
}

static bool is_op(const Token *t, OpId op) { return t->type == T_OP && t->op == op; }
static bool is_name(const Token *t, const char *name) { return t->type == T_NAME && str_is(t->s, name); }
static bool at_op(Parser *p, OpId op) { return is_op(cur(p), op); }
static bool at_name(Parser *p, const char *name) { return is_name(cur(p), name); }

static bool skip_op(Parser *p, OpId op) {
    if (!at_op(p, op)) return false;
    advance(p);
    return true;
}

static bool skip_name(Parser *p, const char *name) {
    if (!at_name(p, name)) return false;
    advance(p);
    return true;
}

/* How jinja2 describes a token in its messages. */
static void describe(char *out, size_t size, const Token *t) {
    static const char *const what[] = {
        [T_EOF] = "end of template",
        [T_DATA] = "template data / text",
        [T_VAR_BEGIN] = "begin of print statement",
        [T_VAR_END] = "end of print statement",
        [T_BLOCK_BEGIN] = "begin of statement block",
        [T_BLOCK_END] = "end of statement block",
        [T_STRING] = "string",
        [T_INT] = "integer",
        [T_FLOAT] = "float",
    };
    if (t->type == T_NAME) snprintf(out, size, "%.*s", (int)(t->s.n < 64 ? t->s.n : 64), t->s.p);
    else if (t->type == T_OP) snprintf(out, size, "%s", op_text((OpId)t->op));
    else snprintf(out, size, "%s", what[t->type]);
}

static noreturn void parse_error(Parser *p, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static noreturn void parse_error(Parser *p, const char *fmt, ...) {
    char msg[MAX_ERROR_TEXT];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    raise_at(&p->c, cur(p)->line, "%s", msg);
}

/* Fails with "expected X, got Y" unless the current token is what is
 * described (want); expected is how to name it. */
static noreturn void expected(Parser *p, const char *want) {
    char got[80];
    describe(got, sizeof got, cur(p));
    if (cur(p)->type == T_EOF) parse_error(p, "unexpected end of template, expected '%s'", want);
    parse_error(p, "expected '%s', got '%s'", want, got);
}

static Token *expect_op(Parser *p, OpId op) {
    if (!at_op(p, op)) expected(p, op_text(op));
    return advance(p);
}

static Token *expect_type(Parser *p, TokType type) {
    static const char *const what[] = {
        [T_VAR_END] = "end of print statement", [T_BLOCK_END] = "end of statement block", [T_NAME] = "name"};
    if (cur(p)->type != type) expected(p, what[type]);
    return advance(p);
}

static Token *expect_name(Parser *p, const char *name) {
    if (!at_name(p, name)) expected(p, name);
    return advance(p);
}

static void enter(Parser *p) {
    if (++p->depth > TEMPLATE_MAX_DEPTH) parse_error(p, "the template is nested too deeply");
}

/* One more level for a node that wraps the last one (a + b + c ... is as
 * deep as it is long); the caller gives the levels back when done. */
static void wrap(Parser *p, int *wraps) {
    enter(p);
    (*wraps)++;
}

static Node *parse_expression(Parser *p, bool with_condexpr);
static Node *parse_tuple(Parser *p, bool simplified, bool with_condexpr, const char *extra_end, bool explicit_parens);
static Node *parse_primary(Parser *p);
static Node *parse_postfix(Parser *p, Node *node);
static Node *parse_unary(Parser *p, bool with_filter);

static Node *parse_condexpr(Parser *p) {
    int wraps = 0;
    int line = cur(p)->line;
    size_t start = p->pos;
    Node *expr1 = parse_expression(p, false);
    bool soft = p->soft;
    /* `a if b`: a counts as inside an if too */
    if (at_name(p, "if") && p->unknown[0] && p->unknown_pos >= start) p->unknown[0] = '\0';
    while (skip_name(p, "if")) {
        wrap(p, &wraps);
        p->soft = true; /* a filter that does not exist fails only if it is run */
        Node *n = new_node(p, N_CONDEXPR, line);
        n->b = expr1;
        n->a = parse_expression(p, false);
        if (skip_name(p, "else")) n->c = parse_condexpr(p);
        expr1 = n;
        line = cur(p)->line;
    }
    p->depth -= wraps;
    p->soft = soft;
    return expr1;
}

static Node *parse_and(Parser *p);
static Node *parse_not(Parser *p);
static Node *parse_compare(Parser *p);
static Node *parse_math1(Parser *p);

static Node *parse_or(Parser *p) {
    int wraps = 0;
    int line = cur(p)->line;
    Node *left = parse_and(p);
    while (skip_name(p, "or")) {
        wrap(p, &wraps);
        Node *n = new_node(p, N_OR, line);
        n->a = left;
        n->b = parse_and(p);
        left = n;
        line = cur(p)->line;
    }
    p->depth -= wraps;
    return left;
}

static Node *parse_and(Parser *p) {
    int wraps = 0;
    int line = cur(p)->line;
    Node *left = parse_not(p);
    while (skip_name(p, "and")) {
        wrap(p, &wraps);
        Node *n = new_node(p, N_AND, line);
        n->a = left;
        n->b = parse_not(p);
        left = n;
        line = cur(p)->line;
    }
    p->depth -= wraps;
    return left;
}

static Node *parse_not(Parser *p) {
    if (at_name(p, "not")) {
        Node *n = new_node(p, N_NOT, advance(p)->line);
        enter(p);
        n->a = parse_not(p);
        p->depth--;
        return n;
    }
    return parse_compare(p);
}

static Node *parse_compare(Parser *p) {
    int line = cur(p)->line;
    Node *expr = parse_math1(p);
    NodeList ops = {0};
    for (;;) {
        Token *t = cur(p);
        int op = -1;
        if (t->type == T_OP && t->op == OP_EQ) op = CMP_EQ;
        else if (t->type == T_OP && t->op == OP_NE) op = CMP_NE;
        else if (t->type == T_OP && t->op == OP_LT) op = CMP_LT;
        else if (t->type == T_OP && t->op == OP_LTEQ) op = CMP_LE;
        else if (t->type == T_OP && t->op == OP_GT) op = CMP_GT;
        else if (t->type == T_OP && t->op == OP_GTEQ) op = CMP_GE;
        else if (is_name(t, "in")) op = CMP_IN;
        else if (is_name(t, "not") && is_name(peek(p), "in")) {
            advance(p);
            op = CMP_NOTIN;
        } else break;
        advance(p);
        Node *operand = new_node(p, N_OPERAND, t->line);
        operand->op = op;
        operand->a = parse_math1(p);
        nodes_push(p, &ops, operand);
        line = cur(p)->line;
    }
    if (ops.n == 0) return expr;
    Node *n = new_node(p, N_COMPARE, line);
    n->a = expr;
    n->list = nodes_done(ops);
    return n;
}

static Node *binop(Parser *p, int line, OpId op, Node *a, Node *b) {
    Node *n = new_node(p, N_BINOP, line);
    n->op = op;
    n->a = a;
    n->b = b;
    return n;
}

static Node *parse_concat(Parser *p);
static Node *parse_math2(Parser *p);
static Node *parse_pow(Parser *p);

static Node *parse_math1(Parser *p) {
    int wraps = 0;
    int line = cur(p)->line;
    Node *left = parse_concat(p);
    while (at_op(p, OP_ADD) || at_op(p, OP_SUB)) {
        wrap(p, &wraps);
        OpId op = (OpId)advance(p)->op;
        left = binop(p, line, op, left, parse_concat(p));
        line = cur(p)->line;
    }
    p->depth -= wraps;
    return left;
}

static Node *parse_concat(Parser *p) {
    int line = cur(p)->line;
    Node *first = parse_math2(p);
    if (!at_op(p, OP_TILDE)) return first;
    NodeList args = {0};
    nodes_push(p, &args, first);
    while (skip_op(p, OP_TILDE)) nodes_push(p, &args, parse_math2(p));
    Node *n = new_node(p, N_CONCAT, line);
    n->list = nodes_done(args);
    return n;
}

static Node *parse_math2(Parser *p) {
    int wraps = 0;
    int line = cur(p)->line;
    Node *left = parse_pow(p);
    while (at_op(p, OP_MUL) || at_op(p, OP_DIV) || at_op(p, OP_FLOORDIV) || at_op(p, OP_MOD)) {
        wrap(p, &wraps);
        OpId op = (OpId)advance(p)->op;
        left = binop(p, line, op, left, parse_pow(p));
        line = cur(p)->line;
    }
    p->depth -= wraps;
    return left;
}

static Node *parse_pow(Parser *p) {
    int wraps = 0;
    int line = cur(p)->line;
    Node *left = parse_unary(p, true);
    while (skip_op(p, OP_POW)) {
        wrap(p, &wraps);
        left = binop(p, line, OP_POW, left, parse_unary(p, true));
        line = cur(p)->line;
    }
    p->depth -= wraps;
    return left;
}

static Node *parse_filter_expr(Parser *p, Node *node);

static Node *parse_unary(Parser *p, bool with_filter) {
    enter(p);
    int line = cur(p)->line;
    Node *node;
    if (at_op(p, OP_SUB) || at_op(p, OP_ADD)) {
        node = new_node(p, at_op(p, OP_SUB) ? N_NEG : N_POS, line);
        advance(p);
        node->a = parse_unary(p, false);
    } else node = parse_primary(p);
    node = parse_postfix(p, node);
    if (with_filter) node = parse_filter_expr(p, node);
    p->depth--;
    return node;
}

static Node *parse_list(Parser *p) {
    Node *n = new_node(p, N_LIST, expect_op(p, OP_LBRACKET)->line);
    NodeList items = {0};
    while (!at_op(p, OP_RBRACKET)) {
        if (items.n) expect_op(p, OP_COMMA);
        if (at_op(p, OP_RBRACKET)) break;
        nodes_push(p, &items, parse_expression(p, true));
    }
    expect_op(p, OP_RBRACKET);
    n->list = nodes_done(items);
    return n;
}

static Node *parse_dict(Parser *p) {
    Node *n = new_node(p, N_DICT, expect_op(p, OP_LBRACE)->line);
    NodeList items = {0};
    while (!at_op(p, OP_RBRACE)) {
        if (items.n) expect_op(p, OP_COMMA);
        if (at_op(p, OP_RBRACE)) break;
        Node *key = parse_expression(p, true);
        expect_op(p, OP_COLON);
        Node *pair = new_node(p, N_PAIR, key->line);
        pair->a = key;
        pair->b = parse_expression(p, true);
        nodes_push(p, &items, pair);
    }
    expect_op(p, OP_RBRACE);
    n->list = nodes_done(items);
    return n;
}

static Node *parse_primary(Parser *p) {
    Token *t = cur(p);
    Node *n;
    if (t->type == T_NAME) {
        advance(p);
        n = new_node(p, N_CONST, t->line);
        if (str_is(t->s, "true") || str_is(t->s, "True")) n->value = v_bool(true);
        else if (str_is(t->s, "false") || str_is(t->s, "False")) n->value = v_bool(false);
        else if (str_is(t->s, "none") || str_is(t->s, "None")) n->value = v_none();
        else {
            n->type = N_NAME;
            n->name = intern(&p->c, p->t, t->s);
        }
    } else if (t->type == T_STRING) {
        /* Adjacent strings are one string, as in Python. */
        Text b = {.c = &p->c};
        while (cur(p)->type == T_STRING) text_addstr(&b, advance(p)->s);
        n = new_node(p, N_CONST, t->line);
        n->value = v_str(b.p ? b.p : "", b.n);
    } else if (t->type == T_INT || t->type == T_FLOAT) {
        advance(p);
        n = new_node(p, N_CONST, t->line);
        n->value = t->type == T_INT ? v_int(t->i) : v_float(t->f);
    } else if (is_op(t, OP_LPAREN)) {
        advance(p);
        n = parse_tuple(p, false, true, NULL, true);
        expect_op(p, OP_RPAREN);
    } else if (is_op(t, OP_LBRACKET)) {
        n = parse_list(p);
    } else if (is_op(t, OP_LBRACE)) {
        n = parse_dict(p);
    } else {
        char what[80];
        describe(what, sizeof what, t);
        parse_error(p, "unexpected '%s'", what);
    }
    return n;
}

/* A tuple (a, b), or one expression when there is no comma. extra_end
 * names a word that also ends it (the "in" of a for loop). */
static Node *parse_tuple(Parser *p, bool simplified, bool with_condexpr, const char *extra_end, bool explicit_parens) {
    int line = cur(p)->line;
    NodeList args = {0};
    bool is_tuple = false;
    for (;;) {
        if (args.n) expect_op(p, OP_COMMA);
        Token *t = cur(p);
        if (t->type == T_VAR_END || t->type == T_BLOCK_END || is_op(t, OP_RPAREN) ||
            (extra_end && is_name(t, extra_end)))
            break;
        nodes_push(p, &args, simplified ? parse_primary(p) : parse_expression(p, with_condexpr));
        if (!at_op(p, OP_COMMA)) break;
        is_tuple = true;
        line = cur(p)->line;
    }
    if (!is_tuple) {
        if (args.n) return args.at[0];
        if (!explicit_parens) {
            char what[80];
            describe(what, sizeof what, cur(p));
            parse_error(p, "expected an expression, got '%s'", what);
        }
    }
    Node *n = new_node(p, N_TUPLE, line);
    n->list = nodes_done(args);
    return n;
}

static Node *parse_expression(Parser *p, bool with_condexpr) {
    enter(p);
    Node *n = with_condexpr ? parse_condexpr(p) : parse_or(p);
    p->depth--;
    return n;
}

/* One subscript: an expression or a slice a:b:c. */
static Node *parse_subscribed(Parser *p) {
    int line = cur(p)->line;
    Node *parts[3] = {NULL, NULL, NULL};
    if (at_op(p, OP_COLON)) advance(p);
    else {
        Node *node = parse_expression(p, true);
        if (!at_op(p, OP_COLON)) return node;
        advance(p);
        parts[0] = node;
    }
    if (!at_op(p, OP_COLON) && !at_op(p, OP_RBRACKET) && !at_op(p, OP_COMMA)) parts[1] = parse_expression(p, true);
    if (skip_op(p, OP_COLON))
        if (!at_op(p, OP_RBRACKET) && !at_op(p, OP_COMMA)) parts[2] = parse_expression(p, true);
    Node *n = new_node(p, N_SLICE, line);
    n->a = parts[0];
    n->b = parts[1];
    n->c = parts[2];
    return n;
}

/* Whether jinja2 can run a filter when it compiles the template: a known
 * one that does not see the context, applied to something. */
bool is_literal_filter(const Node *n) {
    return n->a && n->op >= 0 && n->op != FI_MAP && n->op != FI_SELECT && n->op != FI_REJECT &&
           n->op != FI_SELECTATTR && n->op != FI_REJECTATTR && n->op != FI_UNSUPPORTED;
}

/* Whether an expression is made of literals only (no names, no calls,
 * no filters that see the context). */
static bool is_literal(const Node *n) {
    if (!n) return true;
    if (n->type == N_NAME || n->type == N_CALL || n->type >= N_TEXT) return false;
    if (n->type == N_FILTER && !is_literal_filter(n)) return false;
    if (n->type == N_TEST && n->op < 0) return false;
    if (!is_literal(n->a) || !is_literal(n->b) || !is_literal(n->c) || !is_literal(n->d)) return false;
    for (size_t i = 0; i < n->list.n; i++)
        if (!is_literal(n->list.at[i])) return false;
    for (size_t i = 0; i < n->kw.n; i++)
        if (!is_literal(n->kw.at[i])) return false;
    return true;
}

/* Marks the expressions jinja2 may evaluate differently when it compiles
 * the template (see eval_constant): those holding a slice with literal
 * bounds. Returns whether n is one. */
bool mark_foldable(Node *n) {
    if (!n) return false;
    bool foldable = n->type == N_GETITEM && n->b->type == N_SLICE && is_literal(n->b);
    Node *children[4] = {n->a, n->b, n->c, n->d};
    for (int i = 0; i < 4; i++) foldable |= mark_foldable(children[i]);
    for (size_t i = 0; i < n->list.n; i++) foldable |= mark_foldable(n->list.at[i]);
    for (size_t i = 0; i < n->kw.n; i++) foldable |= mark_foldable(n->kw.at[i]);
    n->constant = foldable && n->type < N_TEXT && n->type != N_SLICE && n->type != N_PAIR && n->type != N_KEYWORD &&
                  n->type != N_OPERAND;
    return foldable;
}

static Node *parse_subscript(Parser *p, Node *node) {
    Token *t = advance(p);
    if (t->type == T_OP && t->op == OP_DOT) {
        Token *attr = advance(p);
        if (attr->type == T_NAME) {
            Node *n = new_node(p, N_GETATTR, t->line);
            n->a = node;
            n->value = v_str(attr->s.p, attr->s.n);
            n->op = find_method(attr->s);
            return n;
        }
        if (attr->type != T_INT) {
            p->pos--;
            parse_error(p, "expected name or number");
        }
        Node *n = new_node(p, N_GETITEM, t->line);
        n->a = node;
        n->b = new_node(p, N_CONST, attr->line);
        n->b->value = v_int(attr->i);
        return n;
    }
    /* t is '[' */
    NodeList args = {0};
    while (!at_op(p, OP_RBRACKET)) {
        if (args.n) expect_op(p, OP_COMMA);
        nodes_push(p, &args, parse_subscribed(p));
    }
    expect_op(p, OP_RBRACKET);
    Node *n = new_node(p, N_GETITEM, t->line);
    n->a = node;
    if (args.n == 1) n->b = args.at[0];
    else {
        n->b = new_node(p, N_TUPLE, t->line);
        n->b->list = nodes_done(args);
    }
    return n;
}

/* The arguments of a call: positional, then name=value. */
static void parse_call_args(Parser *p, Node *n) {
    Token *open = expect_op(p, OP_LPAREN);
    NodeList args = {0}, kw = {0};
    bool need_comma = false;
    while (!at_op(p, OP_RPAREN)) {
        if (need_comma) {
            expect_op(p, OP_COMMA);
            if (at_op(p, OP_RPAREN)) break;
        }
        if (at_op(p, OP_MUL) || at_op(p, OP_POW)) parse_error(p, "*args and **kwargs in calls are not supported");
        if (cur(p)->type == T_NAME && is_op(peek(p), OP_ASSIGN)) {
            Token *name = advance(p);
            advance(p);
            Node *k = new_node(p, N_KEYWORD, name->line);
            k->name = intern(&p->c, p->t, name->s);
            k->a = parse_expression(p, true);
            k->line = k->a->line;
            nodes_push(p, &kw, k);
        } else {
            if (kw.n) raise_at(&p->c, open->line, "invalid syntax for function call expression");
            nodes_push(p, &args, parse_expression(p, true));
        }
        need_comma = true;
    }
    expect_op(p, OP_RPAREN);
    n->list = nodes_done(args);
    n->kw = nodes_done(kw);
}

static Node *parse_call(Parser *p, Node *callee) {
    Node *n = new_node(p, N_CALL, cur(p)->line);
    n->a = callee;
    parse_call_args(p, n);
    return n;
}

static Node *parse_postfix(Parser *p, Node *node) {
    int wraps = 0;
    for (;;) {
        if (at_op(p, OP_DOT) || at_op(p, OP_LBRACKET)) node = parse_subscript(p, node);
        else if (at_op(p, OP_LPAREN)) node = parse_call(p, node);
        else break;
        wrap(p, &wraps);
    }
    p->depth -= wraps;
    return node;
}

/* Notes a filter or test that does not exist outside an if (where it
 * fails only when run). jinja2 reports it when compiling, after parsing:
 * a syntax error further on comes first. */
static void unknown_name(Parser *p, int line, const char *what, Str name) {
    if (p->unknown[0]) return;
    snprintf(p->unknown, sizeof p->unknown, "no %s named '%.*s'", what, (int)(name.n < 64 ? name.n : 64), name.p);
    p->unknown_line = line;
    p->unknown_pos = p->pos;
}

/* A dotted filter or test name, "name" or "a.b". */
static Str parse_dotted_name(Parser *p) {
    Token *t = expect_type(p, T_NAME);
    Str name = t->s;
    if (!at_op(p, OP_DOT)) return name;
    Text b = {.c = &p->c};
    text_addstr(&b, name);
    while (skip_op(p, OP_DOT)) {
        text_addc(&b, '.');
        text_addstr(&b, expect_type(p, T_NAME)->s);
    }
    return (Str){b.p, b.n};
}

/* One or more filters |name(args) applied to node (NULL for a filter
 * block's body); start_inline: the first has no '|' before it. */
static Node *parse_filter(Parser *p, Node *node, bool start_inline) {
    int wraps = 0;
    while (at_op(p, OP_PIPE) || start_inline) {
        wrap(p, &wraps);
        if (!start_inline) advance(p);
        int line = cur(p)->line;
        Str name = parse_dotted_name(p);
        Node *n = new_node(p, N_FILTER, line);
        n->a = node;
        n->value = v_str(name.p, name.n);
        n->op = find_filter(name);
        if (n->op < 0 && !p->soft) unknown_name(p, line, "filter", name);
        if (at_op(p, OP_LPAREN)) parse_call_args(p, n);
        node = n;
        start_inline = false;
    }
    p->depth -= wraps;
    return node;
}

static Node *parse_test(Parser *p, Node *node) {
    Token *is = advance(p);
    bool negated = skip_name(p, "not");
    Str name = parse_dotted_name(p);
    Node *n = new_node(p, N_TEST, is->line);
    n->a = node;
    n->value = v_str(name.p, name.n);
    n->op = find_test(name);
    if (n->op < 0 && !p->soft) unknown_name(p, is->line, "test", name);
    Token *t = cur(p);
    if (is_op(t, OP_LPAREN)) parse_call_args(p, n);
    else if ((t->type == T_NAME || t->type == T_STRING || t->type == T_INT || t->type == T_FLOAT ||
              is_op(t, OP_LBRACKET) || is_op(t, OP_LBRACE)) &&
             !is_name(t, "else") && !is_name(t, "or") && !is_name(t, "and")) {
        /* One argument without parentheses: `x is divisibleby 3`. */
        if (is_name(t, "is")) parse_error(p, "you cannot chain multiple tests with is");
        NodeList args = {0};
        nodes_push(p, &args, parse_postfix(p, parse_primary(p)));
        n->list = nodes_done(args);
    }
    if (!negated) return n;
    Node *not = new_node(p, N_NOT, is->line);
    not ->a = n;
    return not ;
}

static Node *parse_filter_expr(Parser *p, Node *node) {
    int wraps = 0;
    for (;;) {
        if (at_op(p, OP_PIPE)) node = parse_filter(p, node, false);
        else if (at_name(p, "is")) node = parse_test(p, node);
        else if (at_op(p, OP_LPAREN)) node = parse_call(p, node);
        else break;
        wrap(p, &wraps);
    }
    p->depth -= wraps;
    return node;
}

/* ---- statements ---- */

static Nodes parse_statements(Parser *p, const char *const *end_names, bool drop_needle);

/* Checks that target can be assigned to: a name (not a constant) or a
 * tuple of such. */
static void check_target(Parser *p, Node *target) {
    if (target->type == N_TUPLE) {
        for (size_t i = 0; i < target->list.n; i++) check_target(p, target->list.at[i]);
        return;
    }
    if (target->type != N_NAME && target->type != N_NSREF) {
        static const char *const what[] = {[N_CONST] = "const", [N_GETATTR] = "getattr", [N_GETITEM] = "getitem",
                                           [N_LIST] = "list",   [N_DICT] = "dict",       [N_CALL] = "call"};
        const char *w =
            target->type < sizeof what / sizeof what[0] && what[target->type] ? what[target->type] : "expression";
        raise_at(&p->c, target->line, "can't assign to '%s'", w);
    }
}

static Node *parse_assign_target(Parser *p, bool with_tuple, bool name_only, const char *extra_end,
                                 bool with_namespace) {
    Node *target;
    if (with_namespace && is_op(peek(p), OP_DOT)) {
        Token *ns = expect_type(p, T_NAME);
        advance(p);
        Token *attr = expect_type(p, T_NAME);
        target = new_node(p, N_NSREF, ns->line);
        target->name = intern(&p->c, p->t, ns->s);
        target->value = v_str(attr->s.p, attr->s.n);
    } else if (name_only) {
        Token *t = expect_type(p, T_NAME);
        target = new_node(p, N_NAME, t->line);
        target->name = intern(&p->c, p->t, t->s);
    } else {
        target = with_tuple ? parse_tuple(p, true, true, extra_end, false) : parse_primary(p);
    }
    check_target(p, target);
    return target;
}

static bool target_has_loop(const Node *target) {
    if (target->type == N_NAME) return target->name == NAME_LOOP;
    for (size_t i = 0; i < target->list.n; i++)
        if (target->type == N_TUPLE && target_has_loop(target->list.at[i])) return true;
    return false;
}

/* Whether a statement (or one inside it) assigns to the name `loop`. */
static bool sets_loop(const Node *n) {
    if (!n) return false;
    if ((n->type == N_SET || n->type == N_SETBLOCK || n->type == N_FOR) && target_has_loop(n->a)) return true;
    for (size_t i = 0; i < n->kw.n; i++)
        if (n->type == N_WITH && target_has_loop(n->kw.at[i]->a)) return true;
    for (size_t i = 0; i < n->list.n; i++)
        if (n->list.at[i]->type >= N_TEXT && sets_loop(n->list.at[i])) return true;
    return (n->b && n->b->type >= N_TEXT && sets_loop(n->b)) || (n->d && sets_loop(n->d));
}

static Node *parse_for(Parser *p) {
    Node *n = new_node(p, N_FOR, expect_name(p, "for")->line);
    n->a = parse_assign_target(p, true, false, "in", false);
    expect_name(p, "in");
    n->b = parse_tuple(p, false, false, "recursive", false);
    bool soft = p->soft;
    p->soft = false;
    if (skip_name(p, "if")) n->c = parse_expression(p, true);
    n->op = skip_name(p, "recursive");
    static const char *const ends[] = {"endfor", "else", NULL};
    p->loops++;
    n->list = parse_statements(p, ends, false);
    p->loops--;
    if (str_is(advance(p)->s, "else")) {
        static const char *const endfor[] = {"endfor", NULL};
        int loops = p->loops;
        p->loops = 0; /* the else block is not inside the loop */
        n->d = new_node(p, N_BODY, cur(p)->line);
        n->d->list = parse_statements(p, endfor, true);
        p->loops = loops;
    }
    p->soft = soft;
    if (sets_loop(n)) raise_at(&p->c, n->line, "can't assign to the special loop variable in a for loop");
    return n;
}

static Node *parse_if(Parser *p) {
    Node *result = new_node(p, N_IF, expect_name(p, "if")->line), *node = result;
    bool soft = p->soft;
    p->soft = true;
    static const char *const ends[] = {"elif", "else", "endif", NULL};
    static const char *const endif[] = {"endif", NULL};
    for (;;) {
        node->a = parse_tuple(p, false, false, NULL, false);
        node->list = parse_statements(p, ends, false);
        Token *t = advance(p);
        if (str_is(t->s, "elif")) {
            node->b = new_node(p, N_IF, cur(p)->line);
            node = node->b;
            continue;
        }
        if (str_is(t->s, "else")) {
            node->b = new_node(p, N_BODY, cur(p)->line);
            node->b->list = parse_statements(p, endif, true);
        }
        break;
    }
    p->soft = soft;
    return result;
}

static Node *parse_set(Parser *p) {
    int line = advance(p)->line;
    Node *target = parse_assign_target(p, true, false, NULL, true);
    if (skip_op(p, OP_ASSIGN)) {
        Node *n = new_node(p, N_SET, line);
        n->a = target;
        n->b = parse_tuple(p, false, true, NULL, false);
        return n;
    }
    Node *n = new_node(p, N_SETBLOCK, line);
    n->a = target;
    n->b = parse_filter(p, NULL, false);
    static const char *const ends[] = {"endset", NULL};
    bool soft = p->soft;
    p->soft = false;
    n->list = parse_statements(p, ends, true);
    p->soft = soft;
    return n;
}

/* Whether a macro's body uses the name id (varargs, kwargs, caller). */
static bool uses_name(const Node *n, int id) {
    if (!n) return false;
    if (n->type == N_NAME && n->name == id) return true;
    if (uses_name(n->a, id) || uses_name(n->b, id) || uses_name(n->c, id) || uses_name(n->d, id)) return true;
    for (size_t i = 0; i < n->list.n; i++)
        if (uses_name(n->list.at[i], id)) return true;
    for (size_t i = 0; i < n->kw.n; i++)
        if (uses_name(n->kw.at[i], id)) return true;
    return false;
}

static Node *parse_macro(Parser *p) {
    Node *n = new_node(p, N_MACRO, advance(p)->line);
    Node *name = parse_assign_target(p, true, true, NULL, false);
    n->name = name->name;
    n->value = new_str(&p->c, p->t->names[n->name].p, p->t->names[n->name].n);
    expect_op(p, OP_LPAREN);
    NodeList params = {0};
    bool defaults = false;
    while (!at_op(p, OP_RPAREN)) {
        if (params.n) expect_op(p, OP_COMMA);
        Node *arg = parse_assign_target(p, true, true, NULL, false);
        Node *param = new_node(p, N_KEYWORD, arg->line);
        param->name = arg->name;
        if (skip_op(p, OP_ASSIGN)) {
            param->a = parse_expression(p, true);
            defaults = true;
        } else if (defaults) parse_error(p, "non-default argument follows default argument");
        nodes_push(p, &params, param);
    }
    expect_op(p, OP_RPAREN);
    n->kw = nodes_done(params);
    static const char *const ends[] = {"endmacro", NULL};
    bool soft = p->soft;
    int loops = p->loops;
    p->soft = false;
    p->loops = 0;
    n->list = parse_statements(p, ends, true);
    p->loops = loops;
    p->soft = soft;
    Node body = {.list = n->list};
    n->op = (uses_name(&body, NAME_VARARGS) ? MACRO_VARARGS : 0) | (uses_name(&body, NAME_KWARGS) ? MACRO_KWARGS : 0);
    if (uses_name(&body, NAME_CALLER)) parse_error(p, "call blocks (caller) are not supported");
    return n;
}

static Node *parse_with(Parser *p) {
    Node *n = new_node(p, N_WITH, advance(p)->line);
    NodeList sets = {0};
    while (cur(p)->type != T_BLOCK_END) {
        if (sets.n) expect_op(p, OP_COMMA);
        Node *set = new_node(p, N_SET, cur(p)->line);
        set->a = parse_assign_target(p, true, false, NULL, false);
        expect_op(p, OP_ASSIGN);
        set->b = parse_expression(p, true);
        nodes_push(p, &sets, set);
    }
    n->kw = nodes_done(sets);
    static const char *const ends[] = {"endwith", NULL};
    bool soft = p->soft;
    p->soft = false;
    n->list = parse_statements(p, ends, true);
    p->soft = soft;
    return n;
}

static Node *parse_filter_block(Parser *p) {
    Node *n = new_node(p, N_FILTERBLOCK, advance(p)->line);
    bool soft = p->soft;
    p->soft = false;
    n->b = parse_filter(p, NULL, true);
    static const char *const ends[] = {"endfilter", NULL};
    n->list = parse_statements(p, ends, true);
    p->soft = soft;
    return n;
}

static Node *parse_statement(Parser *p) {
    Token *t = cur(p);
    if (t->type != T_NAME) parse_error(p, "tag name expected");
    enter(p);
    Node *n;
    if (is_name(t, "for")) n = parse_for(p);
    else if (is_name(t, "if")) n = parse_if(p);
    else if (is_name(t, "set")) n = parse_set(p);
    else if (is_name(t, "macro")) n = parse_macro(p);
    else if (is_name(t, "with")) n = parse_with(p);
    else if (is_name(t, "filter")) n = parse_filter_block(p);
    else if (is_name(t, "print")) {
        /* {% print a, b %} prints each expression */
        n = new_node(p, N_BODY, advance(p)->line);
        NodeList items = {0};
        while (cur(p)->type != T_BLOCK_END) {
            if (items.n) expect_op(p, OP_COMMA);
            Node *print = new_node(p, N_PRINT, cur(p)->line);
            print->a = parse_expression(p, true);
            nodes_push(p, &items, print);
        }
        n->list = nodes_done(items);
    } else if (is_name(t, "break") || is_name(t, "continue")) {
        if (p->loops == 0) raise_at(&p->c, t->line, "'%.*s' outside loop", (int)t->s.n, t->s.p);
        n = new_node(p, is_name(t, "break") ? N_BREAK : N_CONTINUE, advance(p)->line);
    } else if (is_name(t, "generation")) {
        /* transformers' {% generation %} marks assistant text; it renders its
         * body (in a frame of its own, as a call block's) */
        n = new_node(p, N_WITH, advance(p)->line);
        static const char *const ends[] = {"endgeneration", NULL};
        n->list = parse_statements(p, ends, true);
    } else if (is_name(t, "call") || is_name(t, "block") || is_name(t, "extends") || is_name(t, "include") ||
               is_name(t, "import") || is_name(t, "from") || is_name(t, "autoescape") || is_name(t, "do")) {
        parse_error(p, "the '%.*s' tag is not supported in chat templates", (int)t->s.n, t->s.p);
    } else {
        parse_error(p, "unknown tag '%.*s'", (int)(t->s.n < 64 ? t->s.n : 64), t->s.p);
    }
    p->depth--;
    return n;
}

static bool is_end_name(const Token *t, const char *const *end_names) {
    if (!end_names || t->type != T_NAME) return false;
    for (const char *const *e = end_names; *e; e++)
        if (str_is(t->s, *e)) return true;
    return false;
}

/* Statements and text up to a {% tag %} named in end_names (NULL: up to
 * the end of the template), leaving that tag's name as the current token. */
Nodes subparse(Parser *p, const char *const *end_names) {
    NodeList body = {0};
    for (;;) {
        Token *t = cur(p);
        if (t->type == T_EOF) break;
        if (t->type == T_DATA) {
            Node *n = new_node(p, N_TEXT, t->line);
            n->value = v_str(t->s.p, t->s.n);
            nodes_push(p, &body, n);
            advance(p);
        } else if (t->type == T_VAR_BEGIN) {
            advance(p);
            Node *n = new_node(p, N_PRINT, cur(p)->line);
            n->a = parse_tuple(p, false, true, NULL, false);
            n->line = n->a->line;
            n->a->print_root = true;
            nodes_push(p, &body, n);
            expect_type(p, T_VAR_END);
        } else if (t->type == T_BLOCK_BEGIN) {
            advance(p);
            if (is_end_name(cur(p), end_names)) return nodes_done(body);
            nodes_push(p, &body, parse_statement(p));
            expect_type(p, T_BLOCK_END);
        } else {
            parse_error(p, "unexpected '%s'", t->type == T_VAR_END ? "}}" : "%}");
        }
    }
    return nodes_done(body);
}

/* The body of a block statement: its tag ends, then statements up to one
 * of end_names (which is consumed when drop_needle). */
static Nodes parse_statements(Parser *p, const char *const *end_names, bool drop_needle) {
    skip_op(p, OP_COLON);
    expect_type(p, T_BLOCK_END);
    Nodes body = subparse(p, end_names);
    if (cur(p)->type == T_EOF) {
        char names[160] = "";
        for (const char *const *e = end_names; *e; e++)
            snprintf(names + strlen(names), sizeof names - strlen(names), "%s'%s'", e == end_names ? "" : " or ", *e);
        parse_error(p, "unexpected end of template: looking for %s", names);
    }
    if (drop_needle) advance(p);
    return body;
}
