/* grammar.c - GBNF grammars compiled to byte-level rules, parsed by a
 * pushdown automaton whose states are interned and cached, and token masks
 * made by walking a trie of the vocabulary's bytes.
 *
 * gbnf.c parses the text into rules (gbnf.h); compiled here, every rule is
 * a list of alternatives, every alternative a sequence of elements ending in
 * END. An element is a set of bytes (one byte of input) or a reference to a
 * rule.
 *
 * A parse stack is a list of positions (where to go on in an alternative),
 * innermost first; stacks share their tails, each (position, rest) pair
 * stored once as a node. A state is the set of stacks alive after the bytes
 * read, each with a byte set on top (or the empty stack: the input so far is
 * complete). Reading a byte keeps the stacks whose top set holds it, steps
 * past it, and expands rule references and finished alternatives until byte
 * sets are on top again. A reference just before END does not keep a frame
 * to return to, so right recursion (every repetition) does not deepen the
 * stack; left recursion is refused when the grammar is compiled.
 *
 * The mask of a state walks the trie depth first, skipping a node's subtree
 * when the state refuses its byte. Where a node's subtree (or a run of
 * sibling subtrees) is summarized (see Summary), takes_subtree() may judge
 * all of it at once from the state's CharSteps: where every character
 * beginning with a byte leads, whole. Allowed tokens are marked in trie
 * order, where a subtree is a run of bits, and scattered to ids at the end
 * (or, when most are allowed, the refused ones cleared from all). */
#include "grammar.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gbnf.h"

/* Where a byte sequence stands in UTF-8 (strictly: no overlong forms, no
 * surrogates, nothing past U+10FFFF): at a character boundary, inside a
 * character (which continuation bytes may come next), or broken for good. */
enum {
    UTF8_BOUNDARY,
    UTF8_NEED1, UTF8_NEED2, UTF8_NEED3,    /* that many continuations, 80-BF */
    UTF8_E0, UTF8_ED, UTF8_F0, UTF8_F4,    /* after these leads the next is A0-BF, 80-9F, 90-BF, 80-8F */
    UTF8_BROKEN,
};

static int utf8_next(int role, int b) {
    static const unsigned char lo[] = {0, 0x80, 0x80, 0x80, 0xA0, 0x80, 0x90, 0x80};
    static const unsigned char hi[] = {0, 0xBF, 0xBF, 0xBF, 0xBF, 0x9F, 0xBF, 0x8F};
    static const unsigned char then[] = {0, UTF8_BOUNDARY, UTF8_NEED1, UTF8_NEED2, UTF8_NEED1, UTF8_NEED1, UTF8_NEED2, UTF8_NEED2};
    if (role == UTF8_BROKEN) return UTF8_BROKEN;
    if (role != UTF8_BOUNDARY) return b >= lo[role] && b <= hi[role] ? then[role] : UTF8_BROKEN;
    if (b < 0x80) return UTF8_BOUNDARY;
    if (b >= 0xC2 && b <= 0xDF) return UTF8_NEED1;
    if (b == 0xE0) return UTF8_E0;
    if (b == 0xED) return UTF8_ED;
    if (b >= 0xE1 && b <= 0xEF) return UTF8_NEED2;
    if (b == 0xF0) return UTF8_F0;
    if (b == 0xF4) return UTF8_F4;
    if (b >= 0xF1 && b <= 0xF3) return UTF8_NEED3;
    return UTF8_BROKEN;
}

/* Whether byte b begins a character (ASCII or a lead byte), not continues one. */
static bool starts_char(int b) { return b < 0x80 || b >= 0xC0; }

/* ---- the compiled grammar ---- */

/* A parse stack: the position to go on at, and the stack below (0: none). */
typedef struct {
    int pos;
    int parent;
    int depth;
} Node;

/* How a state reads whole characters, by their first byte (ASCII or a
 * UTF-8 lead): the bytes whose characters all lead to one state, with no
 * prefix rejected, grouped by that state; the bytes refused at once; and
 * the rest (some continuation refused, or the characters end in different
 * states, or past CHAR_GROUPS states). */
enum { CHAR_GROUPS = 8 };
typedef struct CharSteps {
    int n_groups;
    int to[CHAR_GROUPS];          /* the state of each group, most bytes first */
    ByteSet by[CHAR_GROUPS];      /* the first bytes that lead there */
    ByteSet refused, mixed;
    /* Following the first group: for `stride` characters in a row the
     * states have that same first group, and then the state is stride_to
     * (stride 0: not known yet; STRIDE_ALL: for ever) */
    int stride, stride_to;
} CharSteps;

typedef struct {
    int first, n;      /* its stacks: pool[first .. first + n), sorted node ids */
    bool complete;     /* holds the empty stack */
    int *next;         /* [n_classes] the state after a byte of each class: -2 unknown, -1 none */
    uint64_t *mask;    /* the cached token mask, or NULL */
    size_t mask_count; /* tokens it allows */
    struct CharSteps *chars;  /* how whole characters read from here, or NULL */
} State;

enum { UNKNOWN = -2, GRAMMAR_MAX_STATES = 1 << 18, GRAMMAR_MAX_NODES = 1 << 22 };
/* Bytes of cached masks kept; past it, the cache starts again. */
#define MASK_CACHE_BYTES ((size_t)96 << 20)

struct Grammar {
    Elem *elems;          /* every alternative's elements, each ended by EL_END */
    int *alt_pos;         /* the first element of each alternative */
    int *rule_alt, *rule_n_alts;  /* rule r's alternatives: alt_pos[rule_alt[r] ..][rule_n_alts[r]] */
    ByteSet *sets;
    int n_rules, root;
    unsigned char byte_class[256];  /* bytes no set tells apart share a class */
    int n_classes;
    /* per UTF-8 state inside a character (UTF8_*): the continuation bytes
     * it takes, one per class */
    unsigned char cont_reps[UTF8_BROKEN][64];
    int n_cont_reps[UTF8_BROKEN];
    /* the parse's memory: stacks and states, each interned */
    Node *nodes;
    int n_nodes, cap_nodes;
    int *node_table;       /* open addressing: node ids by (pos, parent); -1 empty */
    size_t node_table_cap;
    State *states;
    int n_states, cap_states;
    int *state_table;
    size_t state_table_cap;
    int *pool;
    size_t n_pool, cap_pool;
    /* scratch for one transition */
    int *work, *found;
    size_t n_work, cap_work, n_found, cap_found;
    int *seen;             /* [cap_nodes] the stamp of the last transition that saw a node */
    int stamp;
    uint64_t *in_order;    /* scratch for a walk of the trie: a bit per token in trie order */
    size_t chars_bytes;    /* memory of the states' CharSteps (bounded) */
    size_t walk_words;
    const GrammarVocab *mask_vocab;  /* the vocabulary the cached masks are over */
    size_t mask_bytes;
    char error[200];       /* non-empty once a bound was hit */
};

/* Bytes that every set holds alike fall in one class, so a state's
 * transitions are kept per class. */
static void make_byte_classes(Grammar *g, int n_sets) {
    memset(g->byte_class, 0, sizeof g->byte_class);
    g->n_classes = 1;
    int map[512];
    for (int s = 0; s < n_sets; s++) {
        for (int i = 0; i < 512; i++) map[i] = -1;
        int n = 0;
        for (int b = 0; b < 256; b++) {
            int key = g->byte_class[b] * 2 + set_has(&g->sets[s], b);
            if (map[key] < 0) map[key] = n++;
            g->byte_class[b] = (unsigned char)map[key];
        }
        g->n_classes = n;
        if (n == 256) break;
    }
    for (int role = UTF8_NEED1; role < UTF8_BROKEN; role++) {
        bool seen[256] = {false};
        g->n_cont_reps[role] = 0;
        for (int b = 0x80; b <= 0xBF; b++)
            if (utf8_next(role, b) != UTF8_BROKEN && !seen[g->byte_class[b]]) {
                seen[g->byte_class[b]] = true;
                g->cont_reps[role][g->n_cont_reps[role]++] = (unsigned char)b;
            }
    }
}

static void flatten(Grammar *g, Parser *p) {
    int n_alts = 0;
    long n_elems = 0;
    for (int r = 0; r < p->n_rules; r++) {
        n_alts += p->rules[r].n_alts;
        for (int a = 0; a < p->rules[r].n_alts; a++) n_elems += p->rules[r].alts[a].n + 1;
    }
    g->n_rules = p->n_rules;
    g->elems = xmalloc((size_t)n_elems * sizeof *g->elems);
    g->alt_pos = xmalloc(((size_t)n_alts + 1) * sizeof *g->alt_pos);
    g->rule_alt = xmalloc((size_t)p->n_rules * sizeof *g->rule_alt);
    g->rule_n_alts = xmalloc((size_t)p->n_rules * sizeof *g->rule_n_alts);
    int k = 0, pos = 0;
    for (int r = 0; r < p->n_rules; r++) {
        g->rule_alt[r] = k;
        g->rule_n_alts[r] = p->rules[r].n_alts;
        for (int a = 0; a < p->rules[r].n_alts; a++) {
            const Seq *s = &p->rules[r].alts[a];
            g->alt_pos[k++] = pos;
            if (s->n > 0) memcpy(g->elems + pos, s->items, (size_t)s->n * sizeof *s->items);
            pos += s->n;
            g->elems[pos++] = (Elem){EL_END, 0};
        }
    }
    g->sets = p->sets;
    p->sets = NULL;
    make_byte_classes(g, p->n_sets);
}

static int intern_node(Grammar *g, int pos, int parent);
static int intern_state(Grammar *g, const int *ids, size_t n);
static void expand(Grammar *g, int node);

Grammar *grammar_new(const char *text, size_t len, Error *e) {
    if (len > GRAMMAR_MAX_TEXT) {
        fail(e, "the grammar is too long (%zu bytes; at most %d)", len, GRAMMAR_MAX_TEXT);
        return NULL;
    }
    Parser p = {.text = text, .len = len, .e = e};
    int root = gbnf_parse(&p);
    if (root < 0) {
        gbnf_free(&p);
        return NULL;
    }
    Grammar *g = xcalloc(1, sizeof *g);
    g->root = root;
    flatten(g, &p);
    gbnf_free(&p);
    /* Node 0 is the empty stack. */
    g->cap_nodes = 1024;
    g->nodes = xmalloc((size_t)g->cap_nodes * sizeof *g->nodes);
    g->seen = xcalloc((size_t)g->cap_nodes, sizeof *g->seen);
    g->nodes[0] = (Node){-1, 0, 0};
    g->n_nodes = 1;
    g->node_table_cap = 2048;
    g->node_table = xmalloc(g->node_table_cap * sizeof *g->node_table);
    memset(g->node_table, -1, g->node_table_cap * sizeof *g->node_table);
    g->state_table_cap = 1024;
    g->state_table = xmalloc(g->state_table_cap * sizeof *g->state_table);
    memset(g->state_table, -1, g->state_table_cap * sizeof *g->state_table);
    /* State 0: the root's alternatives, expanded. */
    g->stamp = 1;
    g->n_found = 0;
    for (int a = 0; a < g->rule_n_alts[root]; a++) expand(g, intern_node(g, g->alt_pos[g->rule_alt[root] + a], 0));
    intern_state(g, g->found, g->n_found);
    return g;
}

void grammar_free(Grammar *g) {
    if (!g) return;
    for (int i = 0; i < g->n_states; i++) {
        free(g->states[i].next);
        free(g->states[i].mask);
        free(g->states[i].chars);
    }
    free(g->states);
    free(g->state_table);
    free(g->pool);
    free(g->nodes);
    free(g->node_table);
    free(g->seen);
    free(g->in_order);
    free(g->work);
    free(g->found);
    free(g->elems);
    free(g->alt_pos);
    free(g->rule_alt);
    free(g->rule_n_alts);
    free(g->sets);
    free(g);
}

/* ---- the parse: stacks and states ---- */

static void set_error(Grammar *g, const char *msg) {
    if (!g->error[0]) snprintf(g->error, sizeof g->error, "%s", msg);
}

const char *grammar_error(const Grammar *g) { return g->error[0] ? g->error : NULL; }

static size_t hash2(int a, int b) { return (size_t)mix64((uint64_t)(uint32_t)a << 32 | (uint32_t)b); }

/* The node (pos, parent), made when new; -1 past the bounds. */
static int intern_node(Grammar *g, int pos, int parent) {
    size_t mask = g->node_table_cap - 1;
    for (size_t h = hash2(pos, parent) & mask;; h = (h + 1) & mask) {
        int id = g->node_table[h];
        if (id < 0) break;
        if (g->nodes[id].pos == pos && g->nodes[id].parent == parent) return id;
    }
    int depth = g->nodes[parent].depth + 1;
    if (depth > GRAMMAR_MAX_DEPTH) {
        set_error(g, "the parse nests deeper than the grammar bound allows");
        return -1;
    }
    if (g->n_nodes >= GRAMMAR_MAX_NODES) {
        set_error(g, "the parse needs more stack nodes than the grammar bound allows");
        return -1;
    }
    if (g->n_nodes == g->cap_nodes) {
        g->cap_nodes *= 2;
        g->nodes = xrealloc(g->nodes, (size_t)g->cap_nodes, sizeof *g->nodes);
        g->seen = xrealloc(g->seen, (size_t)g->cap_nodes, sizeof *g->seen);
        memset(g->seen + g->n_nodes, 0, (size_t)(g->cap_nodes - g->n_nodes) * sizeof *g->seen);
    }
    int id = g->n_nodes++;
    g->nodes[id] = (Node){pos, parent, depth};
    g->seen[id] = 0;
    /* Keep the table at most half full. */
    if ((size_t)g->n_nodes * 2 > g->node_table_cap) {
        free(g->node_table);
        g->node_table_cap *= 2;
        g->node_table = xmalloc(g->node_table_cap * sizeof *g->node_table);
        memset(g->node_table, -1, g->node_table_cap * sizeof *g->node_table);
        mask = g->node_table_cap - 1;
        for (int i = 1; i < g->n_nodes; i++) {
            size_t h = hash2(g->nodes[i].pos, g->nodes[i].parent) & mask;
            while (g->node_table[h] >= 0) h = (h + 1) & mask;
            g->node_table[h] = i;
        }
    } else {
        size_t h = hash2(pos, parent) & mask;
        while (g->node_table[h] >= 0) h = (h + 1) & mask;
        g->node_table[h] = id;
    }
    return id;
}

static void push_int(int **a, size_t *n, size_t *cap, int v) {
    if (*n == *cap) {
        *cap = *cap ? 2 * *cap : 64;
        *a = xrealloc(*a, *cap, sizeof **a);
    }
    (*a)[(*n)++] = v;
}

/* Expands the stack `node` until byte sets are on top, adding each such
 * stack (and the empty stack, when a parse is complete) to g->found once
 * per transition (g->seen[] holds the transition's stamp). */
static void expand(Grammar *g, int node) {
    g->n_work = 0;
    if (node >= 0) push_int(&g->work, &g->n_work, &g->cap_work, node);
    while (g->n_work > 0) {
        int n = g->work[--g->n_work];
        if (g->seen[n] == g->stamp) continue;
        g->seen[n] = g->stamp;
        if (n == 0) {
            push_int(&g->found, &g->n_found, &g->cap_found, 0);
            continue;
        }
        Node nd = g->nodes[n];
        const Elem *el = &g->elems[nd.pos];
        if (el->kind == EL_BYTES) {
            push_int(&g->found, &g->n_found, &g->cap_found, n);
        } else if (el->kind == EL_END) {
            push_int(&g->work, &g->n_work, &g->cap_work, nd.parent);
        } else {
            /* A reference: the frame returns to the next element, unless
             * that is the end (a tail call keeps no frame). */
            int base = el[1].kind == EL_END ? nd.parent : intern_node(g, nd.pos + 1, nd.parent);
            if (base < 0) return;
            int r = el->arg;
            for (int a = 0; a < g->rule_n_alts[r]; a++) {
                int child = intern_node(g, g->alt_pos[g->rule_alt[r] + a], base);
                if (child < 0) return;
                push_int(&g->work, &g->n_work, &g->cap_work, child);
            }
        }
    }
}

static int compare_int(const void *a, const void *b) {
    int x = *(const int *)a, y = *(const int *)b;
    return (x > y) - (x < y);
}

/* Sorts ids[0..n): by insertion when few (most states have a few stacks). */
static void sort_ints(int *ids, size_t n) {
    if (n > 32) {
        qsort(ids, n, sizeof *ids, compare_int);
        return;
    }
    for (size_t i = 1; i < n; i++) {
        int x = ids[i];
        size_t j = i;
        for (; j > 0 && ids[j - 1] > x; j--) ids[j] = ids[j - 1];
        ids[j] = x;
    }
}

static size_t hash_ids(const int *ids, size_t n) {
    uint64_t h = n;
    for (size_t i = 0; i < n; i++) h = mix64(h ^ (uint32_t)ids[i]);
    return (size_t)h;
}

/* The state of the stacks ids[0..n) (sorted here), made when new; -1 when
 * there are none, or past the bounds. */
static int intern_state(Grammar *g, const int *ids_in, size_t n) {
    if (n == 0 || g->error[0]) return -1;
    if (n > GRAMMAR_MAX_STACKS) {
        set_error(g, "the grammar is too ambiguous: too many parses alive at once");
        return -1;
    }
    int *ids = (int *)ids_in;
    sort_ints(ids, n);
    size_t mask = g->state_table_cap - 1;
    size_t h0 = hash_ids(ids, n);
    for (size_t h = h0 & mask;; h = (h + 1) & mask) {
        int id = g->state_table[h];
        if (id < 0) break;
        const State *s = &g->states[id];
        if ((size_t)s->n == n && memcmp(g->pool + s->first, ids, n * sizeof *ids) == 0) return id;
    }
    if (g->n_states >= GRAMMAR_MAX_STATES) {
        set_error(g, "the parse needs more states than the grammar bound allows");
        return -1;
    }
    if (g->n_states == g->cap_states) {
        g->cap_states = g->cap_states ? 2 * g->cap_states : 64;
        g->states = xrealloc(g->states, (size_t)g->cap_states, sizeof *g->states);
    }
    while (g->n_pool + n > g->cap_pool) {
        g->cap_pool = g->cap_pool ? 2 * g->cap_pool : 1024;
        g->pool = xrealloc(g->pool, g->cap_pool, sizeof *g->pool);
    }
    int id = g->n_states++;
    State *s = &g->states[id];
    memset(s, 0, sizeof *s);
    s->first = (int)g->n_pool;
    s->n = (int)n;
    s->complete = ids[0] == 0;
    memcpy(g->pool + g->n_pool, ids, n * sizeof *ids);
    g->n_pool += n;
    if ((size_t)g->n_states * 2 > g->state_table_cap) {
        free(g->state_table);
        g->state_table_cap *= 2;
        g->state_table = xmalloc(g->state_table_cap * sizeof *g->state_table);
        memset(g->state_table, -1, g->state_table_cap * sizeof *g->state_table);
        mask = g->state_table_cap - 1;
        for (int i = 0; i < g->n_states; i++) {
            const State *t = &g->states[i];
            size_t h = hash_ids(g->pool + t->first, (size_t)t->n) & mask;
            while (g->state_table[h] >= 0) h = (h + 1) & mask;
            g->state_table[h] = i;
        }
    } else {
        size_t h = h0 & mask;
        while (g->state_table[h] >= 0) h = (h + 1) & mask;
        g->state_table[h] = id;
    }
    return id;
}

/* The state after byte b from state s, computed. */
static int transition(Grammar *g, int s, int b) {
    g->stamp++;
    g->n_found = 0;
    const State *st = &g->states[s];
    for (int i = 0; i < st->n && !g->error[0]; i++) {
        int n = g->pool[st->first + i];
        if (n == 0) continue;
        Node nd = g->nodes[n];
        if (!set_has(&g->sets[g->elems[nd.pos].arg], b)) continue;
        /* Past the last element the alternative is done: back to the frame below. */
        int next = g->elems[nd.pos + 1].kind == EL_END ? nd.parent : intern_node(g, nd.pos + 1, nd.parent);
        if (next >= 0) expand(g, next);
        st = &g->states[s];
    }
    return intern_state(g, g->found, g->n_found);
}

/* The state after byte b, from the cache when it was seen. */
static inline int step(Grammar *g, int s, int b) {
    State *st = &g->states[s];
    if (!st->next) {
        st->next = xmalloc((size_t)g->n_classes * sizeof *st->next);
        for (int i = 0; i < g->n_classes; i++) st->next[i] = UNKNOWN;
    }
    int c = g->byte_class[b];
    int to = st->next[c];
    if (to == UNKNOWN) {
        to = transition(g, s, b);
        if (!g->error[0]) g->states[s].next[c] = to;
    }
    return to;
}

GrammarState grammar_start(Grammar *g) { return g->error[0] ? -1 : 0; }

GrammarState grammar_advance(Grammar *g, GrammarState s, const char *bytes, size_t n) {
    for (size_t i = 0; i < n && s >= 0; i++) s = step(g, s, (unsigned char)bytes[i]);
    return g->error[0] ? -1 : s;
}

bool grammar_complete(const Grammar *g, GrammarState s) { return s >= 0 && s < g->n_states && g->states[s].complete; }

bool grammar_finished(Grammar *g, GrammarState s) {
    if (!grammar_complete(g, s)) return false;
    for (int b = 0; b < 256; b++)
        if (step(g, s, b) >= 0) return false;
    return true;
}

bool grammar_matches(Grammar *g, const char *text, size_t n) { return grammar_complete(g, grammar_advance(g, grammar_start(g), text, n)); }

/* ---- the vocabulary trie and masks ---- */

/* Trie nodes in depth-first order: a node's subtree is [its index, end),
 * and the tokens of the subtree are ids[below_first[index] .. below_first[end])
 * (ids is sorted by bytes, so a subtree's tokens are a run of it). */
typedef struct {
    unsigned char byte;
    unsigned char role; /* UTF8_*: where the bytes from the root to here stand */
    uint16_t depth;     /* bytes from the root (>= 1) */
    uint16_t chars;     /* the bytes from the root that begin a character */
    int end;            /* the index after its subtree */
    int first, n;       /* the tokens whose bytes end here: ids[first .. first + n) */
    int below;          /* its Summary, for a big subtree that can be taken whole
                           (see SUMMARY_MIN_NODES); -1 for none */
    int run;            /* the Summary of the run of siblings it begins; -1 for none */
} TrieNode;

/* What the paths below a node (or a run of siblings) hold, when they are
 * well-formed UTF-8 (a last character may be cut off): then a state that
 * finishes the character in progress and reads every character beginning
 * with one of `starts` the same way, `max_chars` times over, allows every
 * token of the subtree at once (inside a JSON string, most of the
 * vocabulary). */
typedef struct {
    ByteSet starts;     /* the bytes below that begin a character */
    int lowest, highest; /* the least and greatest of them (a cheap first test) */
    int max_chars;      /* the most characters on one path below */
    int end;            /* for a run of children: the node after it */
    int role;           /* UTF8_*: where the bytes to the node (or the run's parent) stand */
} Summary;

/* Only subtrees of at least this many nodes are summarized; below a node
 * whose subtree cannot be taken whole, runs of consecutive children of at
 * most RUN_NODES nodes in all have a summary too (their first child keeps
 * it), since most children are small (a word and its few extensions). */
enum { SUMMARY_MIN_NODES = 8, RUN_NODES = 64 };

enum { TOKEN_MAX_BYTES = 4096 };

struct GrammarVocab {
    int vocab_size;
    size_t words;
    TrieNode *nodes;
    int n_nodes;
    int *ids;          /* token ids sorted by their bytes */
    uint16_t *id_chars; /* [n_ids, padded to 64] the characters begun in ids[k]'s bytes */
    int n_ids;         /* tokens in the trie */
    int *below_first;  /* [n_nodes + 1] see TrieNode */
    Summary *summaries;
    int n_summaries;
    uint64_t *all;     /* [words] the mask of every token in the trie */
    int max_depth;
    char *bytes;       /* token id's bytes: bytes[start[id] .. start[id + 1]) */
    size_t *start;
    int *end_ids;
    int n_end;
    bool *is_end;      /* [vocab_size] */
};

static const GrammarVocab *sort_vocab;  /* qsort's context */

static int compare_token_bytes(const void *a, const void *b) {
    const GrammarVocab *v = sort_vocab;
    int x = *(const int *)a, y = *(const int *)b;
    size_t nx = v->start[x + 1] - v->start[x], ny = v->start[y + 1] - v->start[y];
    int c = memcmp(v->bytes + v->start[x], v->bytes + v->start[y], nx < ny ? nx : ny);
    if (c) return c;
    if (nx != ny) return nx < ny ? -1 : 1;
    return (x > y) - (x < y);
}

/* Adds the summary of the nodes [first, last) to v->summaries; returns its index. */
static int add_summary(GrammarVocab *v, int *cap, int first, int last, int max_chars, int role) {
    if (v->n_summaries == *cap) {
        *cap = *cap ? 2 * *cap : 1024;
        v->summaries = xrealloc(v->summaries, (size_t)*cap, sizeof *v->summaries);
    }
    Summary *sum = &v->summaries[v->n_summaries];
    memset(sum, 0, sizeof *sum);
    sum->lowest = 256;
    for (int j = first; j < last; j++) {
        int b = v->nodes[j].byte;
        if (!starts_char(b)) continue;
        set_add_range(&sum->starts, b, b);
        if (b < sum->lowest) sum->lowest = b;
        if (b > sum->highest) sum->highest = b;
    }
    sum->max_chars = max_chars;
    sum->end = last;
    sum->role = role;
    return v->n_summaries++;
}

/* Summarizes the runs of the children of a node (first: its first child,
 * end: the end of its subtree, role: the node's UTF8_*): consecutive clean
 * children of at most RUN_NODES nodes in all. chars and broken as below. */
static void summarize_runs(GrammarVocab *v, int *cap, int first, int end, int role, const int *chars, const bool *broken) {
    for (int c = first; c < end;) {
        int last = c, n_children = 0, max_chars = 0;
        while (last < end && v->nodes[last].end - c <= RUN_NODES && v->nodes[last].role != UTF8_BROKEN && !broken[last]) {
            int here = starts_char(v->nodes[last].byte) + chars[last];
            if (here > max_chars) max_chars = here;
            n_children++;
            last = v->nodes[last].end;
        }
        if (n_children >= 2) v->nodes[c].run = add_summary(v, cap, c, last, max_chars, role);
        c = last > c ? last : v->nodes[c].end;
    }
}

/* The first token of each subtree, and the summaries of the big subtrees
 * and of the runs of children that can have one. A pass from the last node
 * to the first gathers, per depth, what the children of the node about to
 * be met hold. */
static void summarize_subtrees(GrammarVocab *v, int n_ids) {
    v->below_first = xmalloc(((size_t)v->n_nodes + 1) * sizeof *v->below_first);
    int tokens = 0;
    for (int i = 0; i < v->n_nodes; i++) {
        v->below_first[i] = tokens;
        tokens += v->nodes[i].n;
    }
    v->below_first[v->n_nodes] = n_ids;
    /* chars[i], broken[i]: the most characters on a path below node i, and
     * whether some node below is broken UTF-8. */
    int *chars = xmalloc((size_t)v->n_nodes * sizeof *chars);
    bool *broken = xmalloc((size_t)v->n_nodes * sizeof *broken);
    int *acc_chars = xcalloc((size_t)v->max_depth + 2, sizeof *acc_chars);
    bool *acc_broken = xcalloc((size_t)v->max_depth + 2, sizeof *acc_broken);
    for (int i = v->n_nodes - 1; i >= 0; i--) {
        const TrieNode *t = &v->nodes[i];
        int d = t->depth;
        chars[i] = acc_chars[d + 1];
        broken[i] = acc_broken[d + 1];
        acc_chars[d + 1] = 0;
        acc_broken[d + 1] = false;
        int here = chars[i] + starts_char(t->byte);
        if (here > acc_chars[d]) acc_chars[d] = here;
        acc_broken[d] |= broken[i] || t->role == UTF8_BROKEN;
    }
    int cap = 0;
    for (int i = 0; i < v->n_nodes; i++) v->nodes[i].below = v->nodes[i].run = -1;
    summarize_runs(v, &cap, 0, v->n_nodes, UTF8_BOUNDARY, chars, broken);
    for (int i = 0; i < v->n_nodes; i++) {
        TrieNode *t = &v->nodes[i];
        if (t->role == UTF8_BROKEN) continue;
        if (t->end - i >= SUMMARY_MIN_NODES && !broken[i]) t->below = add_summary(v, &cap, i + 1, t->end, chars[i], t->role);
        summarize_runs(v, &cap, i + 1, t->end, t->role, chars, broken);
    }
    free(chars);
    free(broken);
    free(acc_chars);
    free(acc_broken);
}

GrammarVocab *grammar_vocab_new(const Tokenizer *t, int vocab_size, const int *end_ids, int n_end) {
    GrammarVocab *v = xcalloc(1, sizeof *v);
    v->vocab_size = vocab_size;
    v->words = ((size_t)vocab_size + 63) / 64;
    v->is_end = xcalloc((size_t)vocab_size, sizeof *v->is_end);
    v->end_ids = xmalloc(((size_t)n_end + 1) * sizeof *v->end_ids);
    for (int i = 0; i < n_end; i++)
        if (end_ids[i] >= 0 && end_ids[i] < vocab_size && !v->is_end[end_ids[i]]) {
            v->is_end[end_ids[i]] = true;
            v->end_ids[v->n_end++] = end_ids[i];
        }
    /* The bytes of every token the trie holds. */
    int n_tok = tokenizer_vocab_size(t) < vocab_size ? tokenizer_vocab_size(t) : vocab_size;
    v->start = xcalloc((size_t)vocab_size + 1, sizeof *v->start);
    size_t total = 0;
    for (int id = 0; id < vocab_size; id++) {
        size_t len = 0;
        const char *b = id < n_tok && !v->is_end[id] && !tokenizer_is_special(t, id) ? tokenizer_token(t, id, &len) : NULL;
        v->start[id] = total;
        if (b && len <= TOKEN_MAX_BYTES) total += len;
    }
    v->start[vocab_size] = total;
    v->bytes = xmalloc(total + 1);
    v->ids = xmalloc((size_t)vocab_size * sizeof *v->ids);
    v->id_chars = xcalloc(((size_t)vocab_size + 63) / 64 * 64, sizeof *v->id_chars);
    int n_ids = 0;
    for (int id = 0; id < vocab_size; id++) {
        size_t len = v->start[id + 1] - v->start[id];
        if (len == 0) continue;
        size_t got;
        memcpy(v->bytes + v->start[id], tokenizer_token(t, id, &got), len);
        v->ids[n_ids++] = id;
    }
    sort_vocab = v;
    qsort(v->ids, (size_t)n_ids, sizeof *v->ids, compare_token_bytes);
    sort_vocab = NULL;
    /* The trie, from the sorted tokens: each token adds the nodes past the
     * prefix it shares with the one before. open[d] is the node at depth d+1
     * on the current path. */
    size_t cap = 1024;
    v->nodes = xmalloc(cap * sizeof *v->nodes);
    int *open = xmalloc((TOKEN_MAX_BYTES + 1) * sizeof *open);
    int depth = 0;
    const char *prev = NULL;
    size_t prev_len = 0;
    for (int i = 0; i < n_ids; i++) {
        int id = v->ids[i];
        const char *b = v->bytes + v->start[id];
        size_t len = v->start[id + 1] - v->start[id];
        size_t common = 0;
        while (prev && common < len && common < prev_len && b[common] == prev[common]) common++;
        while ((size_t)depth > common) v->nodes[open[--depth]].end = v->n_nodes;
        for (size_t k = common; k < len; k++) {
            if ((size_t)v->n_nodes == cap) v->nodes = xrealloc(v->nodes, cap *= 2, sizeof *v->nodes);
            int role = utf8_next(depth > 0 ? v->nodes[open[depth - 1]].role : UTF8_BOUNDARY, (unsigned char)b[k]);
            int chars = (depth > 0 ? v->nodes[open[depth - 1]].chars : 0) + starts_char((unsigned char)b[k]);
            v->nodes[v->n_nodes] = (TrieNode){(unsigned char)b[k], (unsigned char)role, (uint16_t)(k + 1), (uint16_t)chars, 0, i, 0, -1, -1};
            open[depth++] = v->n_nodes++;
        }
        TrieNode *last = &v->nodes[open[depth - 1]];
        if (last->n == 0) last->first = i;
        v->id_chars[i] = last->chars;
        last->n++;
        if (depth > v->max_depth) v->max_depth = depth;
        prev = b;
        prev_len = len;
    }
    while (depth > 0) v->nodes[open[--depth]].end = v->n_nodes;
    free(open);
    v->n_ids = n_ids;
    summarize_subtrees(v, n_ids);
    v->all = xcalloc(v->words, sizeof *v->all);
    for (int i = 0; i < n_ids; i++) v->all[v->ids[i] >> 6] |= 1ull << (v->ids[i] & 63);
    return v;
}

void grammar_vocab_free(GrammarVocab *v) {
    if (!v) return;
    free(v->nodes);
    free(v->below_first);
    free(v->summaries);
    free(v->all);
    free(v->ids);
    free(v->id_chars);
    free(v->bytes);
    free(v->start);
    free(v->end_ids);
    free(v->is_end);
    free(v);
}

size_t grammar_mask_words(const GrammarVocab *v) { return v->words; }

bool grammar_is_end_token(const GrammarVocab *v, int id) { return id >= 0 && id < v->vocab_size && v->is_end[id]; }

static void drop_masks(Grammar *g) {
    for (int i = 0; i < g->n_states; i++) {
        free(g->states[i].mask);
        g->states[i].mask = NULL;
    }
    g->mask_bytes = 0;
}

static bool set_within(const ByteSet *a, const ByteSet *b) {
    for (int i = 0; i < 4; i++)
        if (a->bits[i] & ~b->bits[i]) return false;
    return true;
}

enum { CHAR_MAX_STATES = 8 };
/* What char_target() and finish_char() find besides a state. */
enum { CHAR_REFUSED = -1, CHAR_MIXED = -3 };

/* The one state that every well-formed way to finish the character in
 * progress (UTF-8 state role) leads to from q, with no prefix rejected: q
 * itself at a boundary; CHAR_MIXED when some byte is rejected or the ways
 * end in different states (or too many states on the way). Bytes of one
 * class are read alike, so each range is tried with one byte per class. */
static int finish_char(Grammar *g, int q, int role) {
    int set[CHAR_MAX_STATES], n_set = 1;
    set[0] = q;
    while (role != UTF8_BOUNDARY) {
        int next[CHAR_MAX_STATES], n_next = 0;
        for (int r = 0; r < g->n_cont_reps[role]; r++)
            for (int i = 0; i < n_set; i++) {
                int to = step(g, set[i], g->cont_reps[role][r]);
                if (to < 0) return CHAR_MIXED;
                int j = 0;
                while (j < n_next && next[j] != to) j++;
                if (j == n_next) {
                    if (n_next == CHAR_MAX_STATES) return CHAR_MIXED;
                    next[n_next++] = to;
                }
            }
        memcpy(set, next, (size_t)n_next * sizeof *next);
        n_set = n_next;
        role = utf8_next(role, g->cont_reps[role][0]);
    }
    return n_set == 1 ? set[0] : CHAR_MIXED;
}

/* The one state that every character beginning with lead byte l leads to
 * from q, with no prefix rejected; CHAR_REFUSED when l is rejected,
 * CHAR_MIXED when a later byte is or the characters end apart. */
static int char_target(Grammar *g, int q, int l) {
    int to = step(g, q, l);
    return to < 0 ? CHAR_REFUSED : finish_char(g, to, utf8_next(UTF8_BOUNDARY, l));
}

/* CharSteps take this much memory at most per grammar; past it, walks go
 * without them (node by node). */
#define CHARS_CACHE_BYTES ((size_t)32 << 20)

static bool set_meets(const ByteSet *a, const ByteSet *b) {
    for (int i = 0; i < 4; i++)
        if (a->bits[i] & b->bits[i]) return true;
    return false;
}

/* State q's CharSteps, made when new; NULL past the memory bound. */
static CharSteps *char_steps(Grammar *g, int q) {
    if (g->states[q].chars) return g->states[q].chars;
    if (g->chars_bytes + sizeof(CharSteps) > CHARS_CACHE_BYTES) return NULL;
    int to[256];
    int by_class[256][3];  /* char_target per byte class and UTF-8 length - 2 */
    for (int c = 0; c < g->n_classes; c++) by_class[c][0] = by_class[c][1] = by_class[c][2] = UNKNOWN;
    for (int b = 0; b < 256; b++) {
        int len = b < 0x80 ? 1 : b < 0xC2 || b > 0xF4 ? 0 : b < 0xE0 ? 2 : b < 0xF0 ? 3 : 4;
        /* E0, ED, F0 and F4 take narrower continuations than their class mates may. */
        bool special = b == 0xE0 || b == 0xED || b == 0xF0 || b == 0xF4;
        int *memo = len >= 2 && !special ? &by_class[g->byte_class[b]][len - 2] : NULL;
        if (len == 0) to[b] = CHAR_MIXED;
        else if (len == 1) to[b] = step(g, q, b);
        else if (memo && *memo != UNKNOWN) to[b] = *memo;
        else {
            to[b] = char_target(g, q, b);
            if (memo) *memo = to[b];
        }
    }
    if (g->error[0]) return NULL;
    /* Group the bytes by their state; the biggest groups are kept. */
    int state[256], count[256], n = 0;
    ByteSet by[256];
    CharSteps *cs = xcalloc(1, sizeof *cs);
    for (int b = 0; b < 256; b++) {
        if (to[b] < 0) {
            set_add_range(to[b] == CHAR_REFUSED ? &cs->refused : &cs->mixed, b, b);
            continue;
        }
        int k = 0;
        while (k < n && state[k] != to[b]) k++;
        if (k == n) state[n] = to[b], count[n] = 0, memset(&by[n], 0, sizeof by[n]), n++;
        count[k]++;
        set_add_range(&by[k], b, b);
    }
    for (int k = 0; k < n; k++) {
        int best = k;
        for (int j = k + 1; j < n; j++)
            if (count[j] > count[best]) best = j;
        if (cs->n_groups < CHAR_GROUPS) {
            cs->to[cs->n_groups] = state[best];
            cs->by[cs->n_groups++] = by[best];
        } else
            for (int w = 0; w < 4; w++) cs->mixed.bits[w] |= by[best].bits[w];
        state[best] = state[k], count[best] = count[k], by[best] = by[k];
    }
    g->states[q].chars = cs;
    g->chars_bytes += sizeof *cs;
    return cs;
}

enum { TAKE_MAX_STATES = 16, STRIDE_MAX = 64, STRIDE_ALL = 1 << 30 };

static bool set_equal(const ByteSet *a, const ByteSet *b) { return memcmp(a, b, sizeof *a) == 0; }

/* Fills in cs->stride and stride_to for state q (cs: its CharSteps, with a
 * group): along the first groups, as far as they hold the same bytes (a
 * count such as maxLength, one state per character read). */
static void find_stride(Grammar *g, int q, CharSteps *cs) {
    int y = cs->to[0], n = 1;
    if (y == q) n = STRIDE_ALL;
    while (n < STRIDE_MAX) {
        const CharSteps *cy = char_steps(g, y);
        if (!cy || cy->n_groups == 0 || !set_equal(&cy->by[0], &cs->by[0])) break;
        if (cy->to[0] == y) {
            n = STRIDE_ALL;
            break;
        }
        y = cy->to[0];
        n++;
    }
    cs->stride = n;
    cs->stride_to = y;
}

/* How much of a summarized subtree state q (the state at its node, or at
 * the parent of a run) allows at once: -1 when it cannot tell; else k, the
 * tokens whose bytes below are at most k characters (k >= max_chars: all of
 * them). Inside a character, every way to finish it must lead to one state
 * first. Then every path below reads at most max_chars characters, each
 * begun by a byte of starts: level by level, the states they can lead to are
 * followed (none may refuse one), up to max_chars levels, or until a level
 * brings no state not seen (then no deeper one can either), or until a level
 * is one state that refuses every character at its first byte (then the
 * tokens with more characters are refused, the others allowed). */
static int takes_subtree(Grammar *g, const Summary *sum, int q) {
    if (sum->role != UTF8_BOUNDARY && (q = finish_char(g, q, sum->role)) < 0) return -1;
    if (sum->max_chars == 0) return 0;  /* nothing below but the character's end */
    if (step(g, q, sum->lowest) < 0 || step(g, q, sum->highest) < 0) return -1;
    int level[TAKE_MAX_STATES], n_level = 1, seen[TAKE_MAX_STATES], n_seen = 1;
    level[0] = seen[0] = q;
    for (int k = 0; k < sum->max_chars; k++) {
        if (n_level == 1) {
            /* One state whose first group takes every character: jump along its stride. */
            CharSteps *cs = char_steps(g, level[0]);
            if (!cs) return -1;
            if (cs->n_groups > 0 && set_within(&sum->starts, &cs->by[0])) {
                if (!cs->stride) find_stride(g, level[0], cs);
                if (cs->stride >= sum->max_chars - k) return sum->max_chars;
                k += cs->stride - 1;
                level[0] = cs->stride_to;
                continue;
            }
        }
        int next[TAKE_MAX_STATES], n_next = 0;
        for (int i = 0; i < n_level; i++) {
            const CharSteps *cs = char_steps(g, level[i]);
            if (!cs) return -1;
            if (n_level == 1 && set_within(&sum->starts, &cs->refused)) return k;
            if (set_meets(&sum->starts, &cs->refused) || set_meets(&sum->starts, &cs->mixed)) return -1;
            for (int j = 0; j < cs->n_groups; j++) {
                if (!set_meets(&sum->starts, &cs->by[j])) continue;
                int m = 0;
                while (m < n_next && next[m] != cs->to[j]) m++;
                if (m < n_next) continue;
                if (n_next == TAKE_MAX_STATES) return -1;
                next[n_next++] = cs->to[j];
            }
        }
        /* The new states: none means every deeper level is among those seen. */
        int n_new = 0;
        for (int j = 0; j < n_next; j++) {
            int m = 0;
            while (m < n_seen && seen[m] != next[j]) m++;
            if (m < n_seen) continue;
            if (n_seen == TAKE_MAX_STATES) return -1;
            seen[n_seen++] = next[j];
            n_new++;
        }
        if (n_new == 0) return sum->max_chars;
        memcpy(level, next, (size_t)n_next * sizeof *next);
        n_level = n_next;
    }
    return sum->max_chars;
}

/* The tokens a walk allows, by their place in trie order (bit k: token
 * ids[k]), how many, and the words touched (kept zero between walks). */
typedef struct {
    uint64_t *bits;
    size_t ones;
    int lo, hi;  /* words [lo, hi) may be non-zero */
} Marks;

static inline void touch(Marks *m, int lo_bit, int hi_bit) {
    if (lo_bit >> 6 < m->lo) m->lo = lo_bit >> 6;
    if ((hi_bit + 63) >> 6 > m->hi) m->hi = (hi_bit + 63) >> 6;
}

/* Marks the tokens [lo, hi). */
static inline void mark_range(Marks *m, int lo, int hi) {
    if (lo >= hi) return;
    touch(m, lo, hi);
    if (hi - lo == 1) {
        m->bits[lo >> 6] |= 1ull << (lo & 63);
        m->ones++;
        return;
    }
    m->ones += (size_t)(hi - lo);
    while (lo < hi && (lo & 63)) m->bits[lo >> 6] |= 1ull << (lo & 63), lo++;
    while (lo + 64 <= hi) m->bits[lo >> 6] = ~0ull, lo += 64;
    while (lo < hi) m->bits[lo >> 6] |= 1ull << (lo & 63), lo++;
}

/* Marks the tokens k of [lo, hi) with chars[k] <= limit (chars is padded
 * to whole words): 64 comparisons at a time, packed 8 bytes to 8 bits. */
static void mark_up_to(Marks *m, const uint16_t *chars, int lo, int hi, int limit) {
    if (lo >= hi) return;
    touch(m, lo, hi);
    for (int w = lo >> 6; w << 6 < hi; w++) {
        unsigned char in[64];
        for (int j = 0; j < 64; j++) in[j] = chars[(w << 6) + j] <= limit;
        uint64_t bits = 0;
        for (int j = 0; j < 8; j++) {
            uint64_t x;
            memcpy(&x, in + 8 * j, 8);
            bits |= (x * 0x0102040810204080ull) >> 56 << (8 * j);
        }
        if (w == lo >> 6) bits &= ~0ull << (lo & 63);
        if ((w + 1) << 6 > hi) bits &= ~0ull >> (64 - (hi & 63));
        m->bits[w] |= bits;
        m->ones += (size_t)__builtin_popcountll(bits);
    }
}

/* Writes the mask from the marks (the allowed tokens set one by one, or,
 * when they are most, all tokens with the refused ones cleared) and clears
 * the marks. Returns how many are allowed. */
static size_t scatter_marks(const GrammarVocab *v, Marks *m, uint64_t *mask) {
    bool most = m->ones * 2 > (size_t)v->n_ids;
    int lo = m->lo, hi = m->hi;
    if (most) {
        memcpy(mask, v->all, v->words * sizeof *mask);
        lo = 0, hi = (v->n_ids + 63) / 64;
    }
    for (int w = lo; w < hi; w++) {
        uint64_t x = most ? ~m->bits[w] : m->bits[w];
        if (most && w == hi - 1 && v->n_ids % 64) x &= (1ull << (v->n_ids % 64)) - 1;
        for (; x; x &= x - 1) {
            int id = v->ids[w * 64 + __builtin_ctzll(x)];
            if (most) mask[id >> 6] &= ~(1ull << (id & 63));
            else mask[id >> 6] |= 1ull << (id & 63);
        }
    }
    if (m->hi > m->lo) memset(m->bits + m->lo, 0, (size_t)(m->hi - m->lo) * sizeof *m->bits);
    return m->ones;
}

/* Walks the trie from state s, marking allowed tokens in trie order: a node
 * whose byte no parse takes is skipped with its whole subtree, and a
 * summarized subtree that takes_subtree() allows is taken whole. */
static size_t walk_trie(Grammar *g, const GrammarVocab *v, int s, uint64_t *mask) {
    size_t words = ((size_t)v->n_ids + 63) / 64;
    if (g->walk_words < words) {
        free(g->in_order);
        g->in_order = xcalloc(words, sizeof *g->in_order);
        g->walk_words = words;
    }
    Marks m = {g->in_order, 0, (int)words, 0};
    int stack[TOKEN_MAX_BYTES + 1];
    stack[0] = s;
    for (int i = 0; i < v->n_nodes;) {
        const TrieNode *t = &v->nodes[i];
        if (t->run >= 0) {
            /* A run of siblings, from the state at their parent. */
            const Summary *run = &v->summaries[t->run];
            int k = takes_subtree(g, run, stack[t->depth - 1]);
            if (k >= 0) {
                if (k >= run->max_chars) mark_range(&m, v->below_first[i], v->below_first[run->end]);
                else mark_up_to(&m, v->id_chars, v->below_first[i], v->below_first[run->end], t->chars - starts_char(t->byte) + k);
                i = run->end;
                continue;
            }
        }
        int to = step(g, stack[t->depth - 1], t->byte);
        if (to < 0) {
            i = t->end;
            continue;
        }
        int k = t->below >= 0 ? takes_subtree(g, &v->summaries[t->below], to) : -1;
        if (k >= 0) {
            /* All of the subtree, or the tokens with at most k characters below the node. */
            if (k >= v->summaries[t->below].max_chars) mark_range(&m, v->below_first[i], v->below_first[t->end]);
            else mark_up_to(&m, v->id_chars, v->below_first[i], v->below_first[t->end], t->chars + k);
            i = t->end;
            continue;
        }
        stack[t->depth] = to;
        mark_range(&m, t->first, t->first + t->n);
        i++;
    }
    return scatter_marks(v, &m, mask);
}

size_t grammar_fill_mask(Grammar *g, const GrammarVocab *v, GrammarState s, uint64_t *mask) {
    size_t bytes = v->words * sizeof *mask;
    memset(mask, 0, bytes);
    if (s < 0 || s >= g->n_states || g->error[0]) return 0;
    if (g->mask_vocab != v) {
        drop_masks(g);
        g->mask_vocab = v;
    }
    if (g->states[s].mask) {
        memcpy(mask, g->states[s].mask, bytes);
        return g->states[s].mask_count;
    }
    size_t count = walk_trie(g, v, s, mask);
    if (g->error[0]) {
        memset(mask, 0, bytes);
        return 0;
    }
    if (g->states[s].complete)
        for (int i = 0; i < v->n_end; i++) {
            mask[v->end_ids[i] >> 6] |= 1ull << (v->end_ids[i] & 63);
            count++;
        }
    if (g->mask_bytes + bytes > MASK_CACHE_BYTES) drop_masks(g);
    g->states[s].mask = xmalloc(bytes);
    memcpy(g->states[s].mask, mask, bytes);
    g->states[s].mask_count = count;
    g->mask_bytes += bytes;
    return count;
}

GrammarState grammar_accept_token(Grammar *g, const GrammarVocab *v, GrammarState s, int id) {
    if (s < 0 || id < 0 || id >= v->vocab_size) return -1;
    if (v->is_end[id]) return grammar_complete(g, s) ? s : -1;
    size_t len = v->start[id + 1] - v->start[id];
    if (len == 0) return -1;
    return grammar_advance(g, s, v->bytes + v->start[id], len);
}
