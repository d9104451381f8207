/* gbnf.h - between grammar.c and gbnf.c (not part of the public surface):
 * GBNF text parsed into rules of byte sets, before grammar.c compiles them
 * into its flat tables and runs them.
 *
 * A rule is a list of alternatives, each a sequence of elements: a set of
 * bytes (one byte of input) or a reference to a rule. Literals become one
 * byte set per UTF-8 byte; a character class becomes the alternatives of its
 * UTF-8 byte sequences; groups and repetitions become rules of their own,
 * named after the user's rule with " (part)". */
#ifndef GBNF_H
#define GBNF_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "util.h"

enum { EL_BYTES, EL_REF, EL_END };

typedef struct {
    int kind;  /* EL_BYTES, EL_REF, EL_END */
    int arg;   /* EL_BYTES: the byte set; EL_REF: the rule */
} Elem;

typedef struct {
    uint64_t bits[4];  /* bit b: byte b is in the set */
} ByteSet;

static inline bool set_has(const ByteSet *s, int b) { return s->bits[b >> 6] >> (b & 63) & 1; }
static inline void set_add_range(ByteSet *s, int lo, int hi) {
    for (int b = lo; b <= hi; b++) s->bits[b >> 6] |= 1ull << (b & 63);
}

/* ---- the parsed grammar ---- */

typedef struct {
    Elem *items;
    int n, cap;
} Seq;

typedef struct {
    char *name;
    Seq *alts;
    int n_alts, cap_alts;
    bool defined;
    size_t used_at;  /* where it was first named, for "undefined rule" */
} ParseRule;

typedef struct {
    const char *text;
    size_t len, pos;
    ParseRule *rules;
    int n_rules, cap_rules;
    int *by_name;      /* open addressing: the named rules' ids by name; -1 empty */
    size_t by_name_cap;
    int n_named;
    ByteSet *sets;
    int n_sets, cap_sets;
    long n_elems;  /* elements made so far (bounded) */
    int nesting;   /* groups open */
    Error *e;
} Parser;

/* Parses p->text[0..p->len) (p zeroed but for text, len and e) and checks
 * its rules: every one defined, a rule 'root', no left recursion. Returns
 * root's rule id, or -1 with one line in p->e ("line 3, column 9: expected
 * '::='", "undefined rule 'value'", "rule 'expr' is left-recursive"). */
int gbnf_parse(Parser *p);

/* Frees what the parse made (p->sets too, unless taken: set to NULL). */
void gbnf_free(Parser *p);

#endif
