/* jinja/jinja.h - what the rooms of the Jinja engine share: its types,
 * and the functions one room calls in another. Private: the rest of the
 * program sees template.h only.
 *
 * A template is lexed as jinja2's lexer does it, parsed by a
 * recursive-descent parser shaped like jinja2's into a tree of Nodes, and
 * rendered by walking that tree. Values follow Python's data model closely
 * enough that printing, comparing, indexing and calling methods give what
 * Python gives. A file per stage, from the ground up:
 *   value.c      the arena and errors, strings and UTF-8, values, == and <
 *   print.c      str(), repr() and json.dumps of a value
 *   lexer.c      text into tokens
 *   names.c      the filters, tests and methods there are
 *   parser.c     tokens into Nodes
 *   scope.c      which names start undefined; the scopes of a render
 *   operators.c  truth, iteration, arithmetic, comparison, attributes, items
 *   methods.c    str, dict, list and loop methods
 *   format.c     printf-style %
 *   filters.c    filters and tests
 *   render.c     calls, expressions and statements
 *   extras.c     what chat templates hardly use: str.format, center,
 *                wordcount, loop.cycle, {% filter %}
 * and template.c, the public functions, ties them together.
 *
 * Memory: everything a parse or a render allocates comes from one arena
 * (a list of chunks) that is freed as a whole at the end. Errors unwind
 * with longjmp to template_parse or template_render, which free that arena:
 * nothing in between holds memory of its own, so an error can never leak. */
#ifndef JINJA_H
#define JINJA_H

#include <inttypes.h>
#include <limits.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>

#include "../template.h"
#include "../unicode.h"

enum {
    CHUNK_BYTES = 64 << 10,          /* arena chunk size (bigger requests get their own) */
    MAX_ERROR_TEXT = 400,            /* bytes of an error message before "template line N: " */
    JINJA_MAX_RANGE = 100000,        /* jinja2's sandbox refuses longer range() objects */
    SCAN_BYTES_PER_ITERATION = 1024, /* see count_scan */
};

typedef struct Chunk {
    struct Chunk *next;
    size_t size, used;
    _Alignas(16) unsigned char data[];
} Chunk;

/* What the parser and the renderer share: where errors unwind to, the
 * template line being worked on (for messages) and the arena. */
typedef struct {
    jmp_buf *unwind;
    Error *e;
    int line;
    Chunk *chunks;
    size_t allocated, limit;
    size_t iterations;   /* a render's loop iterations and items filtered, printed or sorted so far */
    unsigned char *last; /* the last allocation from the current chunk (see grow_last) */
    size_t last_len;     /* its size as asked for */
} Ctx;

#define raise_error(c, ...) raise_at((c), (c)->line, __VA_ARGS__)

typedef struct {
    const char *p;
    size_t n;
} Str;

static inline Str str_c(const char *s) { return (Str){s, strlen(s)}; }
static inline bool str_eq(Str a, Str b) { return a.n == b.n && (a.n == 0 || memcmp(a.p, b.p, a.n) == 0); }
static inline bool str_is(Str a, const char *s) { return str_eq(a, str_c(s)); }

static inline bool is_continuation(unsigned char b) { return (b & 0xC0) == 0x80; }

static inline bool all_ascii(const char *s, size_t n) {
    for (size_t i = 0; i < n; i++)
        if ((unsigned char)s[i] >= 0x80) return false;
    return true;
}

typedef enum {
    V_UNDEFINED, /* Jinja's Undefined */
    V_NONE,
    V_BOOL,
    V_INT,
    V_FLOAT,
    V_STR,
    V_LIST, /* list, tuple, range or a dict view (List.type) */
    V_DICT,
    V_ITER,      /* a generator: iterates once */
    V_NAMESPACE, /* namespace(): a dict whose items are attributes */
    V_LOOP,      /* the `loop` of a for loop */
    V_MACRO,
    V_FUNC,    /* a global function: range, dict, namespace, ... */
    V_METHOD,  /* a method bound to its object, e.g. 'a b'.split */
    V_MISSING, /* internal: an argument that was not given */
} Kind;

typedef enum { SEQ_LIST, SEQ_TUPLE, SEQ_RANGE, SEQ_ITEMS, SEQ_KEYS, SEQ_VALUES } SeqType;

typedef struct List List;
typedef struct Dict Dict;
typedef struct Iter Iter;
typedef struct Loop Loop;
typedef struct Macro Macro;
typedef struct Method Method;
typedef struct Undef Undef;

typedef struct {
    uint8_t kind;
    bool ascii;  /* V_STR: every byte is below 0x80, so bytes are characters */
    bool markup; /* V_STR: marked safe (markupsafe's Markup) */
    union {
        bool b;
        int64_t i;
        double f;
        Str s;
        List *list;
        Dict *dict;
        Iter *iter;
        Loop *loop;
        Macro *macro;
        Method *method;
        Undef *undef;
        int func;
    };
} Value;

struct List {
    size_t len, cap;
    SeqType type;
    int64_t range[3]; /* SEQ_RANGE: start, stop, step (for printing) */
    Value *items;
};

/* A dict keeps insertion order (keys[i], vals[i]); past a few items it
 * also keeps a hash index of slot + 1 per bucket (0 = empty). */
struct Dict {
    size_t len, cap;
    Value *keys, *vals;
    uint32_t *index;
    size_t index_cap;
};

/* A generator, made by a filter such as map or select. Like jinja2's,
 * it runs when first iterated (so its errors come then, and only then),
 * and iterates once. */
struct Iter {
    List *list; /* the items, once made */
    size_t pos; /* the next item */
    const char *type_name;
    int filter;       /* the filter that makes the items (while list is NULL) */
    Value source;     /* what it filters */
    const void *args; /* its arguments (an Args) */
};

/* Why a value is undefined: Jinja builds its error messages from this. */
struct Undef {
    const char *hint; /* a message of its own, or NULL */
    Value obj;        /* the object that lacked the attribute or item (V_MISSING for a name) */
    Value name;       /* the name, attribute or item */
    bool unsafe;      /* the sandbox's SecurityError rather than an UndefinedError */
};

static inline Value v_none(void) { return (Value){.kind = V_NONE}; }
static inline Value v_bool(bool b) { return (Value){.kind = V_BOOL, .b = b}; }
static inline Value v_int(int64_t i) { return (Value){.kind = V_INT, .i = i}; }
static inline Value v_float(double f) { return (Value){.kind = V_FLOAT, .f = f}; }
static inline Value v_missing(void) { return (Value){.kind = V_MISSING}; }
static inline bool given(Value v) { return v.kind != V_MISSING; }

/* A str of bytes that stay alive for the render (they are not copied). */
static inline Value v_str(const char *p, size_t n) { return (Value){.kind = V_STR, .ascii = all_ascii(p, n), .s = {p, n}}; }
static inline Value v_cstr(const char *s) { return v_str(s, strlen(s)); }

static inline bool is_str(Value v) { return v.kind == V_STR; }
static inline bool is_number(Value v) { return v.kind == V_BOOL || v.kind == V_INT || v.kind == V_FLOAT; }
static inline bool is_integer(Value v) { return v.kind == V_BOOL || v.kind == V_INT; }
static inline int64_t int_of(Value v) { return v.kind == V_BOOL ? v.b : v.i; }
static inline double float_of(Value v) { return v.kind == V_FLOAT ? v.f : (double)int_of(v); }
static inline bool is_seq(Value v, SeqType t) { return v.kind == V_LIST && v.list->type == t; }

static inline Value v_list(List *l) { return (Value){.kind = V_LIST, .list = l}; }

static inline Value v_dict(Dict *d) { return (Value){.kind = V_DICT, .dict = d}; }

typedef struct Node Node;
typedef struct Scope Scope;
typedef struct Render Render;

/* The state of a for loop, which `loop` shows. Items are produced on
 * demand when the loop has an `if` filter, as jinja2 does: loop.last and
 * loop.length evaluate the filter ahead. */
struct Loop {
    const Node *node; /* the N_FOR */
    Scope *scope;     /* the scope the loop runs in */
    Value *raw;       /* the iterable's items */
    size_t n_raw, raw_pos;
    List *items;    /* the items that passed the filter so far */
    size_t index0;  /* the current item */
    bool all_known; /* items holds every item */
    int depth0;
    Value changed_last; /* loop.changed()'s last arguments (V_MISSING at first) */
};

struct Macro {
    const Node *node; /* the N_MACRO */
    Scope *closure;   /* the scope it was defined in */
};

typedef enum {
    FUNC_RANGE,
    FUNC_DICT,
    FUNC_NAMESPACE,
    FUNC_RAISE_EXCEPTION,
    FUNC_STRFTIME_NOW,
} FuncId;

struct Method {
    Value self;
    int id; /* a MethodId */
};

typedef enum { CMP_EQ, CMP_NE, CMP_LT, CMP_LE, CMP_GT, CMP_GE, CMP_IN, CMP_NOTIN } CmpOp;

/* A growing string in the arena. */
typedef struct {
    Ctx *c;
    char *p;
    size_t n, cap;
} Text;

typedef struct {
    bool ensure_ascii, sort_keys, has_indent;
    Str indent;            /* one level of indentation */
    Str item_sep, key_sep; /* ", " and ": " (or "," and ": " with an indent) */
} JsonStyle;

typedef enum {
    T_EOF,
    T_DATA,        /* template text */
    T_VAR_BEGIN,   /* {{ */
    T_VAR_END,     /* }} */
    T_BLOCK_BEGIN, /* {% */
    T_BLOCK_END,   /* %} */
    T_NAME,
    T_STRING,
    T_INT,
    T_FLOAT,
    T_OP,
} TokType;

typedef enum {
    OP_ADD,
    OP_SUB,
    OP_DIV,
    OP_FLOORDIV,
    OP_MUL,
    OP_MOD,
    OP_POW,
    OP_TILDE,
    OP_LBRACKET,
    OP_RBRACKET,
    OP_LPAREN,
    OP_RPAREN,
    OP_LBRACE,
    OP_RBRACE,
    OP_EQ,
    OP_NE,
    OP_GT,
    OP_GTEQ,
    OP_LT,
    OP_LTEQ,
    OP_ASSIGN,
    OP_DOT,
    OP_COLON,
    OP_PIPE,
    OP_COMMA,
    OP_SEMICOLON,
} OpId;

typedef struct {
    uint8_t type; /* TokType */
    uint8_t op;   /* T_OP: OpId */
    int line;
    Str s;     /* T_DATA, T_NAME; T_STRING: the decoded text */
    int64_t i; /* T_INT */
    double f;  /* T_FLOAT */
} Token;

typedef struct Template Template;

typedef struct {
    Ctx c;
    Template *t;
    const char *src; /* the text with newlines normalized to \n */
    size_t len;
    size_t pos; /* lexer: the next byte; parser: the current token */
    int line;   /* lexer: the line of src[line_pos] */
    size_t line_pos;
    Token *toks;
    size_t n_toks, cap_toks;
    int depth;        /* nesting of expressions and blocks */
    bool soft;        /* inside an if: an unknown filter or test fails only when run */
    int loops;        /* for loops around the statement (break and continue need one) */
    char unknown[96]; /* the first unknown filter or test, reported after parsing */
    int unknown_line;
    size_t unknown_pos; /* and its token */
} Parser;

typedef enum {
    FI_ABS,
    FI_ATTR,
    FI_BATCH,
    FI_CAPITALIZE,
    FI_CENTER,
    FI_DEFAULT,
    FI_DICTSORT,
    FI_ESCAPE,
    FI_FIRST,
    FI_FLOAT,
    FI_FORMAT,
    FI_INDENT,
    FI_INT,
    FI_ITEMS,
    FI_JOIN,
    FI_LAST,
    FI_LENGTH,
    FI_LIST,
    FI_LOWER,
    FI_MAP,
    FI_MAX,
    FI_MIN,
    FI_REJECT,
    FI_REJECTATTR,
    FI_REPLACE,
    FI_REVERSE,
    FI_ROUND,
    FI_SAFE,
    FI_SELECT,
    FI_SELECTATTR,
    FI_SLICE,
    FI_SORT,
    FI_STRING,
    FI_SUM,
    FI_TITLE,
    FI_TOJSON,
    FI_TRIM,
    FI_TRUNCATE,
    FI_UNIQUE,
    FI_UPPER,
    FI_WORDCOUNT,
    FI_UNSUPPORTED, /* a jinja2 filter this interpreter does not have: an error when run */
} FilterId;

typedef enum {
    TE_BOOLEAN,
    TE_CALLABLE,
    TE_DEFINED,
    TE_DIVISIBLEBY,
    TE_EQ,
    TE_ESCAPED,
    TE_EVEN,
    TE_FALSE,
    TE_FILTER,
    TE_FLOAT,
    TE_GE,
    TE_GT,
    TE_IN,
    TE_INTEGER,
    TE_ITERABLE,
    TE_LE,
    TE_LOWER,
    TE_LT,
    TE_MAPPING,
    TE_NE,
    TE_NONE,
    TE_NUMBER,
    TE_ODD,
    TE_SAMEAS,
    TE_SEQUENCE,
    TE_STRING,
    TE_TEST,
    TE_TRUE,
    TE_UNDEFINED,
    TE_UPPER,
} TestId;

/* The methods (and other public attributes) of str, dict, list and tuple,
 * and of jinja2's loop object. Accessing one gives a bound method; the
 * ones the immutable sandbox forbids give an undefined value that raises
 * SecurityError when called. The ones marked unsupported exist in Python
 * but fail here when called. */
typedef enum {
    M_CAPITALIZE,
    M_CASEFOLD,
    M_CENTER,
    M_COUNT,
    M_ENDSWITH,
    M_FIND,
    M_FORMAT,
    M_INDEX,
    M_ISALNUM,
    M_ISALPHA,
    M_ISDECIMAL,
    M_ISDIGIT,
    M_ISLOWER,
    M_ISNUMERIC,
    M_ISSPACE,
    M_ISTITLE,
    M_ISUPPER,
    M_JOIN,
    M_LJUST,
    M_LOWER,
    M_LSTRIP,
    M_PARTITION,
    M_REMOVEPREFIX,
    M_REMOVESUFFIX,
    M_REPLACE,
    M_RFIND,
    M_RINDEX,
    M_RJUST,
    M_RPARTITION,
    M_RSPLIT,
    M_RSTRIP,
    M_SPLIT,
    M_SPLITLINES,
    M_STARTSWITH,
    M_STRIP,
    M_SWAPCASE,
    M_TITLE,
    M_UPPER,
    M_ZFILL,
    M_ENCODE,
    M_EXPANDTABS,
    M_FORMAT_MAP,
    M_ISASCII,
    M_ISIDENTIFIER,
    M_ISPRINTABLE,
    M_MAKETRANS,
    M_TRANSLATE,
    M_GET,
    M_ITEMS,
    M_KEYS,
    M_VALUES,
    M_COPY,
    M_FROMKEYS,
    M_CLEAR,
    M_POP,
    M_POPITEM,
    M_SETDEFAULT,
    M_UPDATE,
    M_APPEND,
    M_EXTEND,
    M_INSERT,
    M_REMOVE,
    M_REVERSE,
    M_SORT,
    M_CYCLE,
    M_CHANGED,
} MethodId;

typedef struct {
    const char *name;
    unsigned on;     /* the types that have it */
    unsigned unsafe; /* the types on which the sandbox forbids it */
    bool unsupported;
} MethodInfo;

enum { ON_STR = 1, ON_DICT = 2, ON_LIST = 4, ON_TUPLE = 8, ON_LOOP = 16 };

typedef enum {
    /* expressions */
    N_CONST,
    N_NAME,
    N_GETATTR,
    N_GETITEM,
    N_SLICE,
    N_CALL,
    N_FILTER,
    N_TEST,
    N_NOT,
    N_NEG,
    N_POS,
    N_AND,
    N_OR,
    N_BINOP,
    N_COMPARE,
    N_OPERAND,
    N_CONCAT,
    N_CONDEXPR,
    N_LIST,
    N_TUPLE,
    N_DICT,
    N_PAIR,
    N_KEYWORD,
    N_NSREF,
    /* statements */
    N_TEXT,
    N_PRINT,
    N_IF,
    N_FOR,
    N_SET,
    N_SETBLOCK,
    N_MACRO,
    N_BREAK,
    N_CONTINUE,
    N_WITH,
    N_FILTERBLOCK,
    N_BODY,
} NodeType;

typedef struct {
    Node **at;
    size_t n;
} Nodes;

/* One node of the tree. Which fields a type uses:
 *   N_CONST value | N_NAME name | N_GETATTR a.value (op: MethodId or -1)
 *   N_GETITEM a[b] | N_SLICE a:b:c (any NULL) | N_CALL a(list, kw)
 *   N_FILTER a|value(list, kw), a NULL in a filter block (op: FilterId or -1)
 *   N_TEST a is value(list, kw) (op: TestId or -1) | N_NOT, N_NEG, N_POS a
 *   N_AND, N_OR, N_BINOP a op b | N_COMPARE a then N_OPERAND (op: CmpOp, a)
 *   N_CONCAT list | N_CONDEXPR b if a else c | N_LIST, N_TUPLE list
 *   N_DICT list of N_PAIR a: b | N_KEYWORD name=a | N_NSREF name.value
 *   N_TEXT value | N_PRINT a | N_IF a, body list, else b (N_IF or N_BODY)
 *   N_FOR target a in b if c, body list, else d (op: recursive)
 *   N_SET a = b | N_SETBLOCK a, filter b, body list
 *   N_MACRO name(kw: N_KEYWORD with default a or NULL), body list
 *   N_WITH kw: N_SET nodes, body list | N_FILTERBLOCK filter b, body list
 *   N_BODY list */
struct Node {
    NodeType type;
    int line;
    int op;
    int name;
    Value value;
    Node *a, *b, *c, *d;
    Nodes list;
    Nodes kw;
    /* The body of N_FOR, N_MACRO, N_WITH, N_SETBLOCK and N_FILTERBLOCK, and
     * a for loop's else (d), run in a frame of their own: these are the names
     * it sets that start undefined (see analyse_frame). */
    const int *locals;
    size_t n_locals;
    /* An expression jinja2 may evaluate when it compiles the template
     * (see eval_constant). print_root: the whole of a {{ }}. */
    bool constant, print_root;
};

/* Names every template knows, interned first so their ids are fixed. */
enum {
    NAME_LOOP,
    NAME_VARARGS,
    NAME_KWARGS,
    NAME_CALLER,
    NAME_RANGE,
    NAME_DICT,
    NAME_NAMESPACE,
    NAME_RAISE_EXCEPTION,
    NAME_STRFTIME_NOW, /* in FuncId order */
    N_PREDEFINED_NAMES
};

struct Template {
    Chunk *chunks; /* every node and string */
    Nodes body;
    const int *locals; /* the names the template's top level sets that start undefined */
    size_t n_locals;
    Str *names; /* interned names, by id */
    size_t n_names, cap_names;
    uint32_t *name_index; /* hash index: id + 1 per bucket */
    size_t name_index_cap;
};

enum { MACRO_VARARGS = 1, MACRO_KWARGS = 2 };

/* Variables: a scope per template, loop iteration, macro call and
 * with/set/filter block, each looking names up in its parent next. */
struct Scope {
    Scope *parent;
    size_t n, cap;
    int *names;
    Value *vals;
};

struct Render {
    Ctx c;
    const Template *t;
    Text out;      /* the rendered text; captures (macros, set blocks) use its tail */
    int depth;     /* nesting of macro calls, blocks and expressions */
    struct tm now; /* for strftime_now */
    long microseconds;
    bool folding; /* evaluating a constant expression (eval_constant) */
};

typedef enum { FLOW_NORMAL, FLOW_BREAK, FLOW_CONTINUE } Flow;

typedef struct {
    Value *pos;
    size_t n_pos;
    const int *kw_names; /* interned names */
    Value *kw;
    size_t n_kw;
} Args;

typedef enum { CASE_UPPER, CASE_LOWER, CASE_SWAP, CASE_TITLE, CASE_CAPITALIZE } CaseMap;


/* ---- value.c ---- */
noreturn void raise_at(Ctx *c, int line, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
void arena_free(Chunk *k);
void *alloc(Ctx *c, size_t size);
bool grow_last(Ctx *c, const void *p, size_t len, size_t new_len);
void count_iteration(Ctx *c);
void *alloc_array(Ctx *c, size_t n, size_t size);
uint32_t next_char(const char *s, size_t n, size_t *used);
size_t prev_char_start(const char *s, size_t n);
size_t count_chars(const char *s, size_t n);
bool py_isspace(uint32_t c);
bool py_isprintable(uint32_t c);
uint32_t char_upper(uint32_t c);
uint32_t char_lower(uint32_t c);
bool char_is_cased(uint32_t c);
bool char_is_upper(uint32_t c);
bool char_is_lower(uint32_t c);
Value new_str(Ctx *c, const char *p, size_t n);
List *new_list(Ctx *c, SeqType type, size_t len);
Value new_tuple2(Ctx *c, Value a, Value b);
void list_push(Ctx *c, List *l, Value v);
Value undefined_named(Ctx *c, Str name);
Value undefined_hint(Ctx *c, const char *hint);
Value undefined_member(Ctx *c, Value obj, Value name);
Dict *new_dict(Ctx *c, size_t cap);
uint64_t hash_bytes(const char *p, size_t n);
Value *dict_get(Ctx *c, const Dict *d, Value key);
Value *dict_get_str(Ctx *c, const Dict *d, Str key);
void dict_set(Ctx *c, Dict *d, Value key, Value val);
bool py_equal(Ctx *c, Value a, Value b);
bool py_order(Ctx *c, CmpOp op, Value a, Value b);
extern const char *const seq_type_names[];
const char *type_name(Value v);
void object_type_repr(char *out, size_t size, Value v);

/* ---- print.c ---- */
void text_reserve(Text *b, size_t extra);
void text_add(Text *b, const char *s, size_t n);
void text_adds(Text *b, const char *s);
void text_addstr(Text *b, Str s);
void text_addc(Text *b, char ch);
void text_addchar(Text *b, uint32_t c);
void text_addf(Text *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
Value text_value(Text *b);
void format_float(char out[40], double f);
void repr_str(Text *b, Str s);
void write_value(Render *r, Text *b, Value v, bool repr, int depth);
void json_dump(Ctx *c, Text *b, Value v, const JsonStyle *st, int level);

/* ---- lexer.c ---- */
const char *op_text(OpId op);
size_t rstrip_len(const char *s, size_t n);
bool is_digit(char ch);
int digit_value(char ch);
void lex(Parser *p);

/* ---- names.c ---- */
int find_filter(Str name);
const char *filter_name(FilterId id);
int find_test(Str name);
extern const MethodInfo methods[];
int find_method(Str name);
const char *method_name(int id);

/* ---- parser.c ---- */
extern const char *const predefined_names[];
int intern(Ctx *c, Template *t, Str name);
int find_name(const Template *t, Str name);
bool is_literal_filter(const Node *n);
bool mark_foldable(Node *n);
Nodes subparse(Parser *p, const char *const *end_names);

/* ---- scope.c ---- */
typedef struct Symbols Symbols; /* the names one frame owns */
void analyse_frame(Parser *p, const Symbols *parent, const Node *params, const Node *param_list, bool loop_frame,
                          Nodes body, const int **locals, size_t *n_locals);
Scope *new_scope(Render *r, Scope *parent);
void scope_set(Render *r, Scope *s, int name, Value v);
void declare_locals(Render *r, Scope *s, const int *locals, size_t n);
Scope *new_frame(Render *r, Scope *parent, const Node *n);
Value lookup(Render *r, Scope *s, int name);

/* ---- operators.c ---- */
void enter_depth(Render *r);
noreturn void raise_undefined(Ctx *c, Value u);
bool truthy(Value v);
Value to_str(Render *r, Value v);
Value markup(Value v);
Value html_escape(Render *r, Value v);
void sort_values(Ctx *c, Value *keys, size_t *order, size_t n, bool reverse);
Value *iterate(Render *r, Value v, size_t *n);
List *to_list(Render *r, Value v);
Value new_iter(Render *r, List *l, const char *type_name);
size_t length_of(Render *r, Value v);
noreturn void raise_overflow(Render *r);
Value arith(Render *r, OpId op, Value a, Value b);
Value negate(Render *r, Value v, bool minus);
bool contains(Render *r, Value container, Value item);
bool compare(Render *r, CmpOp op, Value a, Value b);
void loop_fill(Render *r, Loop *l, size_t want);
size_t loop_length(Render *r, Loop *l);
bool loop_attribute(Render *r, Loop *l, Str name, Value *out);
unsigned method_owner(Value v);
bool python_attribute(Render *r, Value obj, int method, Value *out);
Value get_attr(Render *r, Value obj, Str name, int method);
size_t char_offset(Render *r, Value s, size_t i);
int64_t normalize_index(int64_t i, size_t len);
Value get_item(Render *r, Value obj, Value key);
Value get_slice(Render *r, Value obj, Value start, Value stop, Value step, bool constant);

/* ---- methods.c ---- */
void bind_args(Render *r, const char *fn, const Args *a, const char *const *params, Value *out);
Str arg_str(Render *r, const char *what, Value v);
int64_t arg_int(Render *r, const char *fn, Value v);
void add_upper(Text *b, uint32_t c);
Value change_case(Render *r, Value v, CaseMap how);
Value strip(Render *r, Value v, Value chars, bool left, bool right);
Value substr(Value v, size_t a, size_t b);
Value split(Render *r, Value v, Value sep, int64_t maxsplit, bool right);
Value splitlines(Render *r, Value v, bool keepends);
Value pad(Render *r, Value v, int64_t width, Value fill, int where);
Value replace(Render *r, Value v, Str old, Str new, int64_t count);
Value str_predicate(Value v, MethodId id);
Value join(Render *r, Str sep, Value iterable, bool any_type);
Value dict_view(Render *r, Dict *d, SeqType type);
Value call_method(Render *r, Value self, int id, const Args *a);

/* ---- format.c ---- */
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
void format_one(Render *r, Text *b, Value v, const Spec *sp);
Value format_percent(Render *r, Value fmt, Value args);

/* ---- filters.c ---- */
Value *sort_keys(Render *r, List *items, Value attribute, bool case_sensitive);
List *generator_items(Render *r, Iter *it);
Value apply_filter_id(Render *r, int id, Str name, Value v, const Args *a);
bool apply_test_id(Render *r, int id, Str name, Value v, const Args *a);

/* ---- render.c ---- */
size_t capture_begin(Render *r);
Value capture_end(Render *r, size_t start);
void output(Render *r, Str s);
/* Runs the block n's body (n->list) into a capture and passes the text
 * through its filters (n->b) into *out; when break or continue left the
 * body, returns that flow with nothing captured. */
Flow exec_filtered_body(Render *r, const Node *n, Scope *s, Value *out);
const char *macro_name(const Macro *m);
Value call_value(Render *r, Value callee, const Args *a);
Value eval(Render *r, const Node *n, Scope *s);
void assign(Render *r, const Node *target, Value v, Scope *s);
Flow exec_body(Render *r, Nodes body, Scope *s);
Value from_json(Render *r, const JsonValue *j);

/* ---- extras.c ---- */
Value str_format(Render *r, Value fmt, const Args *a);
Value center_filter(Render *r, const char *fn, Value s, const Args *a);
Value wordcount(Str s);
Value loop_cycle(Render *r, const Loop *l, const Args *a);
Flow exec_filter_block(Render *r, const Node *n, Scope *s);

#endif
