/* jinja/scope.c - where names live. At parse time: which names start
 * undefined in each frame (jinja2's idtracking). At render time: the
 * scopes a render sets names in and looks them up through. */
#include "jinja.h"

/* ---- which names start undefined ----
 *
 * jinja2 decides at compile time where each variable lives (its
 * idtracking): every frame (the template, a loop body, a macro, ...) owns
 * the names its own statements set, and a name it sets without having read
 * it first, and that no enclosing frame owns, starts undefined when the
 * frame starts, even if a variable of that name was passed in. So
 *   {% for m in messages %}{{ n }}{% endfor %}{% set n = 5 %}
 * prints nothing for n: the loop reads the template's n before it is set.
 * Everything else scoping does follows from looking names up frame by
 * frame, innermost first; this analysis only finds those names. */

typedef enum { REF_RESOLVE, REF_ALIAS, REF_UNDEFINED, REF_PARAM } RefKind;

struct Symbols {
    const Symbols *parent;
    int *names; /* the frame's names and how each starts */
    uint8_t *kinds;
    size_t n, cap;
    int *stores; /* the names it sets */
    size_t n_stores, cap_stores;
};

static ptrdiff_t sym_find_own(const Symbols *s, int name) {
    for (size_t i = 0; i < s->n; i++)
        if (s->names[i] == name) return (ptrdiff_t)i;
    return -1;
}

static bool sym_has_ref(const Symbols *s, int name) {
    for (; s; s = s->parent)
        if (sym_find_own(s, name) >= 0) return true;
    return false;
}

static void sym_define(Parser *p, Symbols *s, int name, RefKind kind) {
    ptrdiff_t i = sym_find_own(s, name);
    if (i >= 0) {
        s->kinds[i] = (uint8_t)kind;
        return;
    }
    if (s->n == s->cap) {
        size_t cap = s->cap ? s->cap * 2 : 8;
        int *names = alloc_array(&p->c, cap, sizeof *names);
        uint8_t *kinds = alloc_array(&p->c, cap, sizeof *kinds);
        if (s->n) {
            memcpy(names, s->names, s->n * sizeof *names);
            memcpy(kinds, s->kinds, s->n * sizeof *kinds);
        }
        s->names = names;
        s->kinds = kinds;
        s->cap = cap;
    }
    s->names[s->n] = name;
    s->kinds[s->n++] = (uint8_t)kind;
}

static bool sym_stored(const Symbols *s, int name) {
    for (size_t i = 0; i < s->n_stores; i++)
        if (s->stores[i] == name) return true;
    return false;
}

static void sym_add_store(Parser *p, Symbols *s, int name) {
    if (sym_stored(s, name)) return;
    if (s->n_stores == s->cap_stores) {
        size_t cap = s->cap_stores ? s->cap_stores * 2 : 8;
        int *stores = alloc_array(&p->c, cap, sizeof *stores);
        if (s->n_stores) memcpy(stores, s->stores, s->n_stores * sizeof *stores);
        s->stores = stores;
        s->cap_stores = cap;
    }
    s->stores[s->n_stores++] = name;
}

static void sym_load(Parser *p, Symbols *s, int name) {
    if (!sym_has_ref(s, name)) sym_define(p, s, name, REF_RESOLVE);
}

static void sym_store(Parser *p, Symbols *s, int name) {
    sym_add_store(p, s, name);
    if (sym_find_own(s, name) >= 0) return;
    sym_define(p, s, name, s->parent && sym_has_ref(s->parent, name) ? REF_ALIAS : REF_UNDEFINED);
}

static void sym_param(Parser *p, Symbols *s, int name) {
    sym_add_store(p, s, name);
    sym_define(p, s, name, REF_PARAM);
}

static Symbols sym_copy(Parser *p, const Symbols *s) {
    Symbols c = *s;
    c.names = alloc_array(&p->c, s->cap ? s->cap : 1, sizeof *c.names);
    c.kinds = alloc_array(&p->c, s->cap ? s->cap : 1, sizeof *c.kinds);
    c.stores = alloc_array(&p->c, s->cap_stores ? s->cap_stores : 1, sizeof *c.stores);
    if (s->n) {
        memcpy(c.names, s->names, s->n * sizeof *c.names);
        memcpy(c.kinds, s->kinds, s->n * sizeof *c.kinds);
    }
    if (s->n_stores) memcpy(c.stores, s->stores, s->n_stores * sizeof *c.stores);
    return c;
}

/* After an if: the branches' names join the frame's; a name that only
 * some branches set starts as the outer one (or from the variables) rather
 * than undefined. */
static void sym_branch_update(Parser *p, Symbols *s, Symbols *branches, int n_branches) {
    for (int b = 0; b < n_branches; b++)
        for (size_t i = 0; i < branches[b].n; i++)
            sym_define(p, s, branches[b].names[i], (RefKind)branches[b].kinds[i]);
    for (int b = 0; b < n_branches; b++)
        for (size_t i = 0; i < branches[b].n_stores; i++) {
            int name = branches[b].stores[i];
            if (sym_stored(s, name)) continue;
            int count = 0;
            for (int k = 0; k < n_branches; k++) count += sym_stored(&branches[k], name);
            sym_add_store(p, s, name);
            if (count == n_branches) continue;
            sym_define(p, s, name, s->parent && sym_has_ref(s->parent, name) ? REF_ALIAS : REF_RESOLVE);
        }
}

static void sym_expr(Parser *p, Symbols *s, const Node *n) {
    if (!n) return;
    if (n->type == N_NAME) {
        sym_load(p, s, n->name);
        return;
    }
    sym_expr(p, s, n->a);
    sym_expr(p, s, n->b);
    sym_expr(p, s, n->c);
    sym_expr(p, s, n->d);
    for (size_t i = 0; i < n->list.n; i++) sym_expr(p, s, n->list.at[i]);
    for (size_t i = 0; i < n->kw.n; i++) sym_expr(p, s, n->kw.at[i]);
}

static void sym_target(Parser *p, Symbols *s, const Node *target, bool param) {
    if (target->type == N_NSREF) sym_load(p, s, target->name);
    else if (target->type == N_NAME) {
        if (param) sym_param(p, s, target->name);
        else sym_store(p, s, target->name);
    } else
        for (size_t i = 0; i < target->list.n; i++) sym_target(p, s, target->list.at[i], param);
}

static void sym_statements(Parser *p, Symbols *s, Nodes body);

static void sym_if(Parser *p, Symbols *s, const Node *n) {
    sym_expr(p, s, n->a);
    Symbols branches[3] = {sym_copy(p, s), sym_copy(p, s), sym_copy(p, s)};
    sym_statements(p, &branches[0], n->list);
    const Node *rest = n->b;
    for (; rest && rest->type == N_IF; rest = rest->b) {
        /* each elif is an if of its own, inside the elifs' branch */
        sym_expr(p, &branches[1], rest->a);
        Symbols inner[3] = {sym_copy(p, &branches[1]), sym_copy(p, &branches[1]), sym_copy(p, &branches[1])};
        sym_statements(p, &inner[0], rest->list);
        sym_branch_update(p, &branches[1], inner, 3);
    }
    if (rest) sym_statements(p, &branches[2], rest->list);
    sym_branch_update(p, s, branches, 3);
}

/* One statement of a frame: its own names (child frames only show the
 * expressions evaluated in this one). */
static void sym_statement(Parser *p, Symbols *s, const Node *n) {
    switch (n->type) {
    case N_PRINT:
        sym_expr(p, s, n->a);
        break;
    case N_IF:
        sym_if(p, s, n);
        break;
    case N_FOR:
        sym_expr(p, s, n->b);
        break;
    case N_SET:
        sym_expr(p, s, n->b);
        sym_target(p, s, n->a, false);
        break;
    case N_SETBLOCK:
        sym_target(p, s, n->a, false);
        break;
    case N_MACRO:
        sym_store(p, s, n->name);
        break;
    case N_WITH:
        for (size_t i = 0; i < n->kw.n; i++) sym_expr(p, s, n->kw.at[i]->b);
        break;
    case N_FILTERBLOCK:
        sym_expr(p, s, n->b);
        break;
    case N_BODY:
        sym_statements(p, s, n->list);
        break;
    default:
        break;
    }
}

static void sym_statements(Parser *p, Symbols *s, Nodes body) {
    for (size_t i = 0; i < body.n; i++) sym_statement(p, s, body.at[i]);
}

/* The names of s that start undefined, as an array for the frame's node. */
static const int *undefined_names(Parser *p, const Symbols *s, size_t *n) {
    int *names = alloc_array(&p->c, s->n ? s->n : 1, sizeof *names);
    *n = 0;
    for (size_t i = 0; i < s->n; i++)
        if (s->kinds[i] == REF_UNDEFINED) names[(*n)++] = s->names[i];
    return names;
}

static void analyse_children(Parser *p, const Symbols *s, Nodes body);

/* Analyses one frame: its params, its body; records the names that start
 * undefined in *locals, then does the frames inside it. */
void analyse_frame(Parser *p, const Symbols *parent, const Node *params, const Node *param_list, bool loop_frame,
                          Nodes body, const int **locals, size_t *n_locals) {
    Symbols s = {.parent = parent};
    if (params) sym_target(p, &s, params, true);
    for (size_t i = 0; param_list && i < param_list->kw.n; i++) {
        const Node *param = param_list->kw.at[i];
        if (param_list->type == N_MACRO) sym_param(p, &s, param->name);
        else sym_target(p, &s, param->a, true); /* N_WITH: its targets */
    }
    if (param_list && param_list->type == N_MACRO) {
        for (size_t i = 0; i < param_list->kw.n; i++) sym_expr(p, &s, param_list->kw.at[i]->a);
        if (param_list->op & MACRO_VARARGS) sym_param(p, &s, NAME_VARARGS);
        if (param_list->op & MACRO_KWARGS) sym_param(p, &s, NAME_KWARGS);
    }
    if (loop_frame) sym_param(p, &s, NAME_LOOP);
    sym_statements(p, &s, body);
    *locals = undefined_names(p, &s, n_locals);
    analyse_children(p, &s, body);
}

/* Finds the frames in a frame's statements (through its ifs) and analyses them. */
static void analyse_children(Parser *p, const Symbols *s, Nodes body) {
    for (size_t i = 0; i < body.n; i++) {
        Node *n = body.at[i];
        switch (n->type) {
        case N_IF:
            for (Node *branch = n; branch; branch = branch->b) analyse_children(p, s, branch->list);
            break;
        case N_BODY:
            analyse_children(p, s, n->list);
            break;
        case N_FOR:
            analyse_frame(p, s, n->a, NULL, true, n->list, &n->locals, &n->n_locals);
            if (n->d) analyse_frame(p, s, NULL, NULL, false, n->d->list, &n->d->locals, &n->d->n_locals);
            break;
        case N_MACRO:
        case N_WITH:
            analyse_frame(p, s, NULL, n, false, n->list, &n->locals, &n->n_locals);
            break;
        case N_SETBLOCK:
        case N_FILTERBLOCK:
            analyse_frame(p, s, NULL, NULL, false, n->list, &n->locals, &n->n_locals);
            break;
        default:
            break;
        }
    }
}

/* ======================================================================
 * The interpreter
 * ====================================================================== */

Scope *new_scope(Render *r, Scope *parent) {
    Scope *s = alloc(&r->c, sizeof *s);
    *s = (Scope){.parent = parent};
    return s;
}

void scope_set(Render *r, Scope *s, int name, Value v) {
    for (size_t i = 0; i < s->n; i++)
        if (s->names[i] == name) {
            s->vals[i] = v;
            return;
        }
    if (s->n == s->cap) {
        size_t cap = s->cap ? s->cap * 2 : 4;
        int *names = alloc_array(&r->c, cap, sizeof *names);
        Value *vals = alloc_array(&r->c, cap, sizeof *vals);
        if (s->n) {
            memcpy(names, s->names, s->n * sizeof *names);
            memcpy(vals, s->vals, s->n * sizeof *vals);
        }
        s->names = names;
        s->vals = vals;
        s->cap = cap;
    }
    s->names[s->n] = name;
    s->vals[s->n++] = v;
}

/* A frame's names that start undefined (see analyse_frame). */
void declare_locals(Render *r, Scope *s, const int *locals, size_t n) {
    for (size_t i = 0; i < n; i++) scope_set(r, s, locals[i], undefined_named(&r->c, r->t->names[locals[i]]));
}

Scope *new_frame(Render *r, Scope *parent, const Node *n) {
    Scope *s = new_scope(r, parent);
    declare_locals(r, s, n->locals, n->n_locals);
    return s;
}

Value lookup(Render *r, Scope *s, int name) {
    for (; s; s = s->parent)
        for (size_t i = 0; i < s->n; i++)
            if (s->names[i] == name) return s->vals[i];
    if (name >= NAME_RANGE && name <= NAME_STRFTIME_NOW) return (Value){.kind = V_FUNC, .func = name - NAME_RANGE};
    return undefined_named(&r->c, r->t->names[name]);
}
